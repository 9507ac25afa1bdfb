package pipe

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
)

// TestOtherLimiters shapes a Reader with each kind of limiter and checks
// the bytes arrive in order, within the limiter's bound, at its pace.
func TestOtherLimiters(t *testing.T) {
	const size = 64 * KiB
	type tc struct {
		name  string
		make  func() (limiter.Limiter, error)
		check func(ds []delivery) error
		took  time.Duration
	}
	cases := []tc{
		{"SlidingLog", func() (limiter.Limiter, error) {
			return limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: 8 * KiB, Window: time.Second})
		}, func(ds []delivery) error { return checkWindow(ds, 8*KiB, time.Second) }, 7 * time.Second},
		{"LeakyBucket", func() (limiter.Limiter, error) {
			return limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(16*KiB, time.Second)})
		}, func(ds []delivery) error {
			for i := 1; i < len(ds); i++ {
				if gap := ds[i].at - ds[i-1].at; gap < time.Duration(ds[i-1].n)*time.Second/(16*KiB) {
					return errorf("%d bytes at %v, then more %v later: faster than 16 KiB/s", ds[i-1].n, ds[i-1].at, gap)
				}
			}
			return nil
			// Pieces of 1638 bytes (100 ms at the pace): the 41st starts
			// after 40 of them, each spaced by its time rounded up to the
			// nanosecond (a pacer spaces each grant from the last).
		}, 40 * ((1638*time.Second + 16*KiB - 1) / (16 * KiB))},
		{"KeyedTokenBucket.For", func() (limiter.Limiter, error) {
			k, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(16*KiB, time.Second), Burst: 4 * KiB})
			if err != nil {
				return nil, err
			}
			return k.For("tenant"), nil
		}, func(ds []delivery) error { return checkBucketBound(ds, limiter.Per(16*KiB, time.Second), 4*KiB) }, 3750 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim, err := c.make()
				if err != nil {
					t.Fatal(err)
				}
				r := NewReader(&source{size: size}, lim)
				rec := &recorder{start: time.Now()}
				buf := make([]byte, 32*KiB)
				for {
					n, err := r.Read(buf)
					rec.check(buf[:n])
					if err != nil {
						break
					}
				}
				if rec.bad != nil || rec.off != size {
					t.Fatalf("%d bytes (%v), want %d in order", rec.off, rec.bad, size)
				}
				if err := c.check(rec.ds); err != nil {
					t.Fatal(err)
				}
				if d := rec.ds[len(rec.ds)-1].at; d != c.took {
					t.Errorf("the last byte came at %v, want %v", d, c.took)
				}
			})
		})
	}
}

// checkWindow checks at most limit bytes in any window of length w.
func checkWindow(ds []delivery, limit int64, w time.Duration) error {
	var sum int64
	i := 0
	for j, d := range ds {
		sum += d.n
		for ds[i].at <= d.at-w {
			sum -= ds[i].n
			i++
		}
		if sum > limit {
			return errorf("%d bytes in the window of %v ending at %v (deliveries %d to %d), more than %d", sum, w, d.at, i, j, limit)
		}
	}
	return nil
}
