module github.com/rategate/rategate/cmd/rategate

go 1.25.0

require (
	github.com/rategate/rategate v0.0.0
	github.com/rategate/rategate/redislimit v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	go.uber.org/goleak v1.3.0
	golang.org/x/term v0.44.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
)

replace (
	github.com/rategate/rategate => ../../
	github.com/rategate/rategate/internal/redistest => ../../internal/redistest
	github.com/rategate/rategate/redislimit => ../../redislimit
)
