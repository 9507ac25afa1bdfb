package limiter_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// A token bucket counts its lock-free grants in its state word and moves
// them to its counter under the lock every 255 grants. Stats.Granted must
// equal the leases granted at every step, across many of those moves.
func TestGrantedCountSequential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, err := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2000})
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(1); i <= 2000; i++ {
			if !tb.TryAcquire(1).Granted() {
				t.Fatalf("grant %d refused", i)
			}
			if got := tb.Stats().Granted; got != i {
				t.Fatalf("after %d grants Stats.Granted = %d", i, got)
			}
		}
		if tb.TryAcquire(1).Granted() {
			t.Fatal("granted beyond the burst")
		}
		if st := tb.Stats(); st.Granted != 2000 || st.Rejected != 1 || st.Available != 0 {
			t.Fatalf("Stats = %+v", st)
		}
	})
}

// Goroutines taking from one bucket through TryAcquire, Acquire and a Chain,
// while another switches its burst between one that leaves room in the word
// for the count and one that does not: no grant is lost or counted twice, and
// the bound (burst plus refill) holds.
func TestGrantedCountConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const small, huge = 1000, 1 << 30 // at 1e9 ns a permit, huge leaves no room in the word
		tb, err := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: small})
		if err != nil {
			t.Fatal(err)
		}
		other, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1 << 20})
		chain := Chain(tb, other)
		var granted atomic.Int64
		var wg sync.WaitGroup
		for g := range 6 {
			wg.Go(func() {
				for i := range 3000 {
					var l Lease
					switch (g + i) % 3 {
					case 0:
						l = tb.TryAcquire(1)
					case 1:
						l = chain.TryAcquire(1)
					default:
						l, _ = tb.Acquire(t.Context(), 0)
					}
					if l.Granted() {
						granted.Add(1)
					}
				}
			})
		}
		wg.Go(func() {
			for i := range 50 {
				burst := small
				if i%2 == 1 {
					burst = huge
				}
				if err := tb.SetBurst(burst); err != nil {
					t.Error(err)
					return
				}
				if st := tb.Stats(); st.Granted > granted.Load()+6 {
					t.Errorf("Stats.Granted %d ahead of the grants seen, %d", st.Granted, granted.Load())
				}
			}
		})
		wg.Wait()
		if st := tb.Stats(); st.Granted != granted.Load() {
			t.Fatalf("Stats.Granted = %d, leases granted %d", st.Granted, granted.Load())
		}
	})
}

// The count moves with the state through SetRate, which rebuilds the word in
// new units.
func TestGrantedCountAcrossSetRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(1, time.Second), Burst: 1000})
		var want int64
		for round := range 8 {
			for range 100 + round*37 {
				if tb.TryAcquire(1).Granted() {
					want++
				}
			}
			if err := tb.SetRate(Per(int(round)+2, 3*time.Second)); err != nil {
				t.Fatal(err)
			}
			if got := tb.Stats().Granted; got != want {
				t.Fatalf("round %d: Stats.Granted = %d, want %d", round, got, want)
			}
			time.Sleep(time.Second)
		}
	})
}
