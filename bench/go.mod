module github.com/rategate/rategate/bench

go 1.26.0

require (
	github.com/alitto/pond/v2 v2.7.1
	github.com/didip/tollbooth/v7 v7.0.2
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/go-chi/httprate v0.16.1
	github.com/go-redis/redis_rate/v10 v10.0.1
	github.com/grpc-ecosystem/go-grpc-middleware/v2 v2.3.4
	github.com/juju/ratelimit v1.0.2
	github.com/platinummonkey/go-concurrency-limits v0.8.0
	github.com/rategate/rategate v0.0.0
	github.com/rategate/rategate/grpclimit v0.0.0-00010101000000-000000000000
	github.com/rategate/rategate/internal/redistest v0.0.0-00010101000000-000000000000
	github.com/rategate/rategate/otellimit v0.0.0-00010101000000-000000000000
	github.com/rategate/rategate/redislimit v0.0.0-00010101000000-000000000000
	github.com/redis/go-redis/v9 v9.22.0
	github.com/sourcegraph/conc v0.3.0
	go.opentelemetry.io/otel v1.47.0
	go.opentelemetry.io/otel/metric v1.47.0
	go.opentelemetry.io/otel/sdk/metric v1.47.0
	go.uber.org/ratelimit v0.3.1
	golang.org/x/sync v0.23.0
	golang.org/x/time v0.14.0
	google.golang.org/grpc v1.85.0
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/benbjohnson/clock v1.3.0 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/logr v1.4.4 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/go-pkgz/expirable-cache/v3 v3.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	go.uber.org/multierr v1.9.0 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/text v0.42.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20261110000943-09e21b237f2c // indirect
)

replace github.com/rategate/rategate => ../

replace github.com/rategate/rategate/grpclimit => ../grpclimit

replace github.com/rategate/rategate/redislimit => ../redislimit

replace github.com/rategate/rategate/internal/redistest => ../internal/redistest

replace github.com/rategate/rategate/otellimit => ../otellimit
