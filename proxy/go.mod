module braid/proxy

go 1.26.0

require (
	filippo.io/edwards25519 v1.2.0
	github.com/cloudflare/circl v1.6.5
	github.com/flynn/noise v1.1.0
	github.com/prometheus/client_golang v1.25.0
	gitlab.com/yawning/edwards25519-extra v0.0.0-20231005122941-2149dcafc266
	golang.org/x/sys v0.49.0
)

require (
	github.com/munnerz/goautoneg v0.0.0-20191010083416-a7dc8b61c822 // indirect
	github.com/prometheus/client_model v0.6.3 // indirect
	github.com/prometheus/common v0.72.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
