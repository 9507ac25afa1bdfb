package limiter

import (
	"testing"
	"testing/synctest"
	"time"
)

func TestQuota(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 5})
		tb.TryAcquire(3)
		want := Quota{Limit: 5, Window: 500 * time.Millisecond, Remaining: 2, Reset: 300 * time.Millisecond}
		if q := tb.Quota(); q != want {
			t.Errorf("token bucket: %+v, want %+v", q, want)
		}
		fw, _ := NewFixedWindow(FixedWindowOptions{Limit: 4, Window: time.Second})
		time.Sleep(250 * time.Millisecond)
		fw.TryAcquire(1)
		want = Quota{Limit: 4, Window: time.Second, Remaining: 3, Reset: 750 * time.Millisecond}
		if q := fw.Quota(); q != want {
			t.Errorf("fixed window: %+v, want %+v", q, want)
		}
		log, _ := NewSlidingLog(SlidingLogOptions{Limit: 2, Window: time.Second})
		log.TryAcquire(1)
		time.Sleep(100 * time.Millisecond)
		log.TryAcquire(1)
		want = Quota{Limit: 2, Window: time.Second, Remaining: 0, Reset: time.Second}
		if q := log.Quota(); q != want {
			t.Errorf("sliding log: %+v, want %+v", q, want)
		}
		conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 3})
		l := conc.TryAcquire(2)
		if q, want := conc.Quota(), (Quota{Limit: 3, Remaining: 1}); q != want {
			t.Errorf("concurrency: %+v, want %+v", q, want)
		}
		// A chain reports its tightest member; a keyed key its own limiter.
		if q, _ := QuotaOf(Chain(tb, conc)); q.Remaining != 1 || q.Limit != 3 {
			t.Errorf("chain: %+v, want the concurrency member's", q)
		}
		l.Release()
		k, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Second), Burst: 2})
		k.TryAcquire("a", 2)
		want = Quota{Limit: 2, Window: 2 * time.Second, Remaining: 0, Reset: 2 * time.Second}
		if q, _ := QuotaOf(k.For("a")); q != want {
			t.Errorf("keyed bucket: %+v, want %+v", q, want)
		}
		if q, _ := QuotaOf(k.For("b")); q.Remaining != 2 || q.Reset != 0 {
			t.Errorf("a new key: %+v, want a full bucket", q)
		}
		if _, ok := QuotaOf(slowRefuser{}); ok {
			t.Error("QuotaOf of a limiter without Quota reported one")
		}
	})
}

func TestForesee(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pacer, _ := NewLeakyBucket(LeakyBucketOptions{Rate: Per(10, time.Second)})
		if d, ok := pacer.Foresee(1); !ok || d != 0 {
			t.Fatalf("a new pacer foresees %v %v, want 0", d, ok)
		}
		pacer.TryAcquire(1)
		for range 2 { // two waiters: at 100 and 200 ms
			go pacer.Acquire(t.Context(), 1)
		}
		synctest.Wait()
		if d, ok := pacer.Foresee(1); !ok || d != 300*time.Millisecond {
			t.Fatalf("behind two waiters: %v %v, want 300ms", d, ok)
		}
		tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 2})
		tb.TryAcquire(2)
		go tb.Acquire(t.Context(), 2) // served at 200 ms
		synctest.Wait()
		if d, ok := tb.Foresee(1); !ok || d != 300*time.Millisecond {
			t.Fatalf("bucket behind a waiter of 2: %v %v, want 300ms", d, ok)
		}
		if _, ok := tb.Foresee(3); ok {
			t.Fatal("foresaw a request above Burst")
		}
		pacer.Close()
		tb.Close()
	})
}

// A Chain lists each member's Quota in member order, keyed members as
// their key's limiter's, and the zero Quota for a member that reports none.
func TestChainAppendQuotas(t *testing.T) {
	tb, _ := NewTokenBucket(TokenBucketOptions{Rate: Per(10, time.Second), Burst: 10})
	kb, _ := NewKeyedTokenBucket[string](TokenBucketOptions{Rate: Per(1, time.Second), Burst: 5})
	conc, _ := NewConcurrency(ConcurrencyOptions{Limit: 3})
	c := Chain(tb, kb.For("a"), noQuota{conc}, conc)
	if !c.TryAcquire(1).Granted() { // conc twice: it holds 2
		t.Fatal("chain refused")
	}
	got := c.(QuotaAppender).AppendQuotas([]Quota{{Limit: 99}})
	want := []Quota{
		{Limit: 99},
		{Limit: 10, Window: time.Second, Remaining: 9},
		{Limit: 5, Window: 5 * time.Second, Remaining: 4},
		{},
		{Limit: 3, Remaining: 1},
	}
	if len(got) != len(want) {
		t.Fatalf("AppendQuotas = %+v, want %+v", got, want)
	}
	for i := range want {
		got[i].Reset = 0 // the buckets' resets depend on the clock
		if got[i] != want[i] {
			t.Errorf("quota %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// noQuota hides a limiter's Quota.
type noQuota struct{ Limiter }
