package otellimit_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/rategate/rategate/otellimit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newMetrics returns Metrics on a meter provider read by hand.
func newMetrics(t *testing.T, o otellimit.Options) (*otellimit.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	m, err := otellimit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, r
}

// collected is one collection: every data point of every instrument,
// rendered as text by instrument name.
type collected map[string][]string

func collect(t *testing.T, r *sdkmetric.ManualReader) collected {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	c := collected{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != otellimit.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, otellimit.ScopeName)
		}
		for _, m := range sm.Metrics {
			name := strings.TrimPrefix(m.Name, "rategate.rate_limiting.")
			c[name] = append(c[name], render(t, m)...)
			slices.Sort(c[name])
		}
	}
	return c
}

// render writes each data point of m as "attr=value,... value", a
// histogram's value as "n=<count> sum=<sum> [le<bound>:<count> ...]" with
// its non-empty buckets (the last one "inf").
func render(t *testing.T, m metricdata.Metrics) []string {
	var out []string
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			out = append(out, fmt.Sprintf("%s %d", attrs(p.Attributes), p.Value))
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			out = append(out, fmt.Sprintf("%s %d", attrs(p.Attributes), p.Value))
		}
	case metricdata.Gauge[float64]:
		for _, p := range d.DataPoints {
			out = append(out, fmt.Sprintf("%s %g", attrs(p.Attributes), p.Value))
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			s := fmt.Sprintf("%s n=%d sum=%.6g", attrs(p.Attributes), p.Count, p.Sum)
			for i, n := range p.BucketCounts {
				switch {
				case n == 0:
				case i < len(p.Bounds):
					s += fmt.Sprintf(" le%g:%d", p.Bounds[i], n)
				default:
					s += fmt.Sprintf(" inf:%d", n)
				}
			}
			out = append(out, s)
		}
	default:
		t.Fatalf("%s: unexpected data %T", m.Name, m.Data)
	}
	return out
}

// attrs renders a set as "name=value,..." with the rategate.rate_limiting.
// prefix left out.
func attrs(s attribute.Set) string {
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, strings.TrimPrefix(string(kv.Key), "rategate.rate_limiting.")+"="+kv.Value.String())
	}
	return strings.Join(parts, ",")
}

// want compares one instrument's data points with the expected ones, in any
// order.
func (c collected) want(t *testing.T, name string, points ...string) {
	t.Helper()
	slices.Sort(points)
	if !slices.Equal(c[name], points) {
		t.Errorf("%s:\n got  %q\n want %q", name, c[name], points)
	}
}
