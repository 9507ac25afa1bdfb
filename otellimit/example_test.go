package otellimit_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

// printRequests prints the data points of rategate.rate_limiting.requests,
// sorted.
func printRequests(reader sdkmetric.Reader) {
	var lines []string
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		log.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "rategate.rate_limiting.requests" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				policy, _ := p.Attributes.Value(otellimit.AttrPolicy)
				result, _ := p.Attributes.Value(otellimit.AttrResult)
				lines = append(lines, fmt.Sprintf("%s %s: %d", policy.AsString(), result.AsString(), p.Value))
			}
		}
	}
	slices.Sort(lines)
	fmt.Println(strings.Join(lines, "\n"))
}

// Wrap any limiter under a policy name; its decisions are counted.
func ExampleMetrics_Wrap() {
	reader := sdkmetric.NewManualReader()
	m, err := otellimit.New(otellimit.Options{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		log.Fatal(err)
	}
	bucket, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 3})
	if err != nil {
		log.Fatal(err)
	}
	lim := m.Wrap(bucket, "api")
	defer lim.Close()
	for range 5 {
		lim.TryAcquire(1)
	}
	printRequests(reader)
	// Output:
	// api granted: 3
	// api limited: 2
}

// Instrument an HTTP middleware: every decision is counted under the
// middleware's policy.
func ExampleMetrics_Middleware() {
	reader := sdkmetric.NewManualReader()
	m, err := otellimit.New(otellimit.Options{
		MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
	})
	if err != nil {
		log.Fatal(err)
	}
	perClient, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Minute), Burst: 2})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httplimit.New(m.Middleware(httplimit.Options{Keyed: perClient, Policy: "per-client"}, nil))
	if err != nil {
		log.Fatal(err)
	}
	h := mw.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range 3 {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	printRequests(reader)
	// Output:
	// per-client granted: 2
	// per-client limited: 1
}
