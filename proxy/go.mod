module braid/proxy

go 1.26.0

require (
	github.com/cloudflare/circl v1.6.5
	github.com/flynn/noise v1.1.0
	golang.org/x/sys v0.49.0
)

require golang.org/x/crypto v0.58.0 // indirect
