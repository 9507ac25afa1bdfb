package limiter

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// untakeSubject is one limiter of a policy with untake, as a Chain sees it.
type untakeSubject struct {
	lim interface {
		Limiter
		Stats() Stats
		Quota() Quota
	}
	b   *base
	pol interface{ untake(now int64, n int) }
}

// untakeCases builds, for each policy with untake, a limiter of limit 5
// whose permits come back with time (windows) or by release (concurrency).
var untakeCases = []struct {
	name string
	make func(t *testing.T) untakeSubject
}{
	{"FixedWindow", func(t *testing.T) untakeSubject {
		l, err := NewFixedWindow(FixedWindowOptions{Limit: 5, Window: time.Second})
		must(t, err)
		return untakeSubject{l, &l.base, &l.p}
	}},
	{"SlidingWindow", func(t *testing.T) untakeSubject {
		l, err := NewSlidingWindow(SlidingWindowOptions{Limit: 5, Window: time.Second, Segments: 4})
		must(t, err)
		return untakeSubject{l, &l.base, &l.p}
	}},
	{"SlidingLog", func(t *testing.T) untakeSubject {
		l, err := NewSlidingLog(SlidingLogOptions{Limit: 5, Window: time.Second})
		must(t, err)
		return untakeSubject{l, &l.base, &l.p}
	}},
	{"Concurrency", func(t *testing.T) untakeSubject {
		l, err := NewConcurrency(ConcurrencyOptions{Limit: 5})
		must(t, err)
		return untakeSubject{l, &l.base, &l.p}
	}},
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// take+untake under one hold of the lock leaves the limiter exactly as it
// was: the same Stats and Quota, and the same decisions from then on, as a
// twin limiter given the same history without them. The history ends with
// a grant gap before the take: at the same instant (gap 0) the sliding log
// merges the take into an entry it must not drop; later, into a new entry
// that it must drop.
func TestUntakeRestores(t *testing.T) {
	for _, c := range untakeCases {
		for _, n := range []int{0, 1, 2} {
			for _, gap := range []time.Duration{0, 50 * time.Millisecond} {
				t.Run(fmt.Sprintf("%s/n=%d/gap=%v", c.name, n, gap), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { testUntake(t, c.make, n, gap) })
				})
			}
		}
	}
}

func testUntake(t *testing.T, mk func(*testing.T) untakeSubject, n int, gap time.Duration) {
	a, b := mk(t), mk(t)
	for _, d := range []time.Duration{0, 300 * time.Millisecond, 400 * time.Millisecond} {
		time.Sleep(d)
		a.lim.TryAcquire(1)
		b.lim.TryAcquire(1)
	}
	time.Sleep(gap)

	b.b.mu.Lock()
	now := b.b.now()
	ok, _ := b.b.pol.take(now, n)
	if !ok {
		b.b.mu.Unlock()
		t.Fatalf("take(%d) refused with 2 of 5 permits free", n)
	}
	if n > 0 && b.b.pol.available(now) != 2-int64(n) {
		b.b.mu.Unlock()
		t.Fatalf("take(%d) took nothing", n)
	}
	b.pol.untake(now, n)
	b.b.mu.Unlock()

	same := func(step string) {
		t.Helper()
		if sa, sb := a.lim.Stats(), b.lim.Stats(); sa != sb {
			t.Fatalf("%s: Stats %+v after take+untake, want %+v", step, sb, sa)
		}
		if qa, qb := a.lim.Quota(), b.lim.Quota(); qa != qb {
			t.Fatalf("%s: Quota %+v after take+untake, want %+v", step, qb, qa)
		}
	}
	same("at once")
	for i, k := range []int{3, 1, 2, 5, 1, 4, 2, 5} {
		la, lb := a.lim.TryAcquire(k), b.lim.TryAcquire(k)
		if la.Granted() != lb.Granted() || la.RetryAfter() != lb.RetryAfter() {
			t.Fatalf("step %d: TryAcquire(%d) = %v retry %v after take+untake, want %v retry %v",
				i, k, lb.Granted(), lb.RetryAfter(), la.Granted(), la.RetryAfter())
		}
		same(fmt.Sprintf("step %d", i))
		if i%3 == 2 {
			la.Release()
			lb.Release()
		}
		time.Sleep(150 * time.Millisecond)
	}
}
