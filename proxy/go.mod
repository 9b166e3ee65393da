module braid/proxy

go 1.26
