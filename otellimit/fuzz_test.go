package otellimit_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

// FuzzNew: New refuses exactly a negative MaxKeyValues, with an
// *limiter.OptionError naming it, on an SDK or a no-op meter provider.
// Metrics it returns on the SDK provider record the first MaxKeyValues
// (DefaultMaxKeyValues for 0) distinct key values of a policy under their
// own key attribute and the rest as OtherKey; Close succeeds.
func FuzzNew(f *testing.F) {
	f.Add(0, uint8(3), false)
	f.Add(1, uint8(3), false)
	f.Add(2, uint8(2), false)
	f.Add(5, uint8(11), false)
	f.Add(otellimit.DefaultMaxKeyValues, uint8(0), false)
	f.Add(math.MaxInt, uint8(11), false)
	f.Add(3, uint8(4), true)
	f.Add(-1, uint8(1), false)
	f.Add(-1, uint8(1), true)
	f.Add(math.MinInt, uint8(0), false)
	f.Fuzz(func(t *testing.T, maxKeys int, keys uint8, useNoop bool) {
		o := otellimit.Options{MaxKeyValues: maxKeys}
		r := sdkmetric.NewManualReader()
		o.MeterProvider = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
		if useNoop {
			o.MeterProvider = noop.NewMeterProvider()
		}
		what := fmt.Sprintf("New(MaxKeyValues %d, no-op provider %v)", maxKeys, useNoop)
		m, err := otellimit.New(o)
		if err != nil {
			var oe *limiter.OptionError
			switch {
			case m != nil:
				t.Fatalf("%s: Metrics and the error %v", what, err)
			case !errors.As(err, &oe) || oe.Field != "MaxKeyValues" || !strings.Contains(err.Error(), "MaxKeyValues"):
				t.Fatalf("%s: %v, want an *limiter.OptionError naming MaxKeyValues", what, err)
			case maxKeys >= 0:
				t.Fatalf("%s: valid options refused: %v", what, err)
			}
			return
		}
		if m == nil || maxKeys < 0 {
			t.Fatalf("%s: accepted (Metrics %p)", what, m)
		}
		defer func() {
			if err := m.Close(); err != nil {
				t.Fatalf("%s: Close: %v", what, err)
			}
		}()
		set := must(limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 1}))
		k := otellimit.WrapKeyed(m, set, "fuzz", func(key string) string { return key })
		defer k.Close()
		n := int(keys%12) + 1
		for i := range n {
			if l := k.TryAcquire(fmt.Sprint("k", i), 1); !l.Granted() {
				t.Fatalf("%s: fresh key k%d refused: %v", what, i, l.Err())
			}
		}
		if useNoop {
			return
		}
		limit := maxKeys
		if limit == 0 {
			limit = otellimit.DefaultMaxKeyValues
		}
		own, other, granted := 0, 0, 0
		for _, p := range collect(t, r)["requests"] {
			var key string
			var count int
			if _, err := fmt.Sscanf(strings.Replace(p, ",", " ", 1), "key=%s policy=fuzz,result=granted %d", &key, &count); err != nil {
				t.Fatalf("%s: requests point %q", what, p)
			}
			granted += count
			if key == otellimit.OtherKey {
				other++
			} else {
				own++
			}
		}
		if own != min(n, limit) || (other == 1) != (n > limit) || other > 1 || granted != n {
			t.Fatalf("%s: %d keys granted once each; recorded %d grants, under %d key values of their own and %d points of %s: %q",
				what, n, granted, own, other, otellimit.OtherKey, collect(t, r)["requests"])
		}
	})
}
