package otelredislimit_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
	"github.com/rategate/rategate/otellimit/otelredislimit"
	"github.com/rategate/rategate/redislimit"
)

// decisions returns the redis.decisions counts and redis.duration sample
// counts by answer.
func decisions(t *testing.T, r *sdkmetric.ManualReader) (counts, samples map[string]int64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts, samples = map[string]int64{}, map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				if m.Name != "rategate.rate_limiting.redis.decisions" {
					continue
				}
				for _, p := range d.DataPoints {
					a, _ := p.Attributes.Value(otellimit.AttrRedisAnswer)
					counts[a.AsString()] = p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					a, _ := p.Attributes.Value(otellimit.AttrRedisAnswer)
					samples[a.AsString()] = int64(p.Count)
				}
			}
		}
	}
	return counts, samples
}

// TestOnDecision counts the decisions of real redislimit limiters while a
// real redis-server answers, and after it is killed, for each error policy.
func TestOnDecision(t *testing.T) {
	srv, err := redistest.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := srv.Client()
	defer client.Close()

	reader := sdkmetric.NewManualReader()
	m, err := otellimit.New(otellimit.Options{MeterProvider: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fallback, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 5})
	if err != nil {
		t.Fatal(err)
	}
	rec := m.Redis("shared")
	opts := limiter.TokenBucketOptions{Rate: limiter.Per(100, time.Second), Burst: 100}
	var lims []*redislimit.TokenBucket
	for i, o := range []redislimit.Options{
		{Key: "closed", OnError: redislimit.FailClosed},
		{Key: "open", OnError: redislimit.FailOpen},
		{Key: "fallback", OnError: redislimit.UseFallback, Fallback: fallback},
	} {
		o.Client, o.Timeout, o.OnDecision = client, 200*time.Millisecond, otelredislimit.OnDecision(rec)
		l, err := redislimit.NewTokenBucket(o, opts)
		if err != nil {
			t.Fatalf("limiter %d: %v", i, err)
		}
		defer l.Close()
		lims = append(lims, l)
	}
	for _, l := range lims {
		for range 2 {
			if !l.TryAcquire(1).Granted() {
				t.Fatal("refused while Redis answers")
			}
		}
	}
	srv.Kill()
	for _, l := range lims {
		l.TryAcquire(1)
	}
	counts, samples := decisions(t, reader)
	want := map[string]int64{"redis": 6, "fail_closed": 1, "fail_open": 1, "fallback": 1}
	for a, n := range want {
		if counts[a] != n || samples[a] != n {
			t.Errorf("%s: %d decisions, %d durations, want %d", a, counts[a], samples[a], n)
		}
	}
	if len(counts) != len(want) {
		t.Errorf("answers %v, want %v", counts, want)
	}
}
