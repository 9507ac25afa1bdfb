package waitq

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errFull = errors.New("full")

// pool is a test owner: a count of free permits that a release refills.
type pool struct {
	mu   sync.Mutex
	q    Queue
	free int64
	log  []int64 // the n of each grant, in order
}

func newPool(free int64, opts Options) *pool {
	p := &pool{free: free}
	opts.Full = errFull
	p.q.Init(&p.mu, opts)
	return p
}

func (p *pool) take(n int64) (bool, time.Duration) {
	if n > p.free {
		return false, -1
	}
	p.free -= n
	p.log = append(p.log, n)
	return true, 0
}

func (p *pool) serve(t time.Time) {
	p.q.Serve(t, func(w *Waiter) (bool, time.Duration) { return p.take(w.N()) })
}

// acquire is an owner's Acquire: Take, then Wait.
func (p *pool) acquire(ctx context.Context, n int64) error {
	p.mu.Lock()
	w, granted, _, err := p.q.Take(ctx, time.Now(), n, p.take)
	p.mu.Unlock()
	if granted || err != nil {
		return err
	}
	return p.q.Wait(ctx, w, p.serve)
}

func (p *pool) release(n int64) {
	p.mu.Lock()
	p.free += n
	p.serve(time.Now())
	p.mu.Unlock()
}

// start runs acquire(n) in a goroutine, in order: each one queued before
// the next starts.
func (p *pool) start(ctx context.Context, n int64, errs chan<- error) {
	go func() { errs <- p.acquire(ctx, n) }()
	synctest.Wait()
}

func TestOrder(t *testing.T) {
	for _, newest := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			p := newPool(0, Options{NewestFirst: newest})
			errs := make(chan error, 3)
			for n := int64(1); n <= 3; n++ {
				p.start(t.Context(), n, errs)
			}
			if p.q.Len() != 3 || p.q.Queued() != 6 || p.q.Idle() || !p.q.Waiting() {
				t.Fatalf("Len %d Queued %d Idle %v Waiting %v", p.q.Len(), p.q.Queued(), p.q.Idle(), p.q.Waiting())
			}
			p.release(6)
			for range 3 {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			want := []int64{1, 2, 3}
			if newest {
				want = []int64{3, 2, 1}
			}
			if !slices.Equal(p.log, want) || !p.q.Idle() {
				t.Fatalf("NewestFirst %v: served %v, want %v; idle %v", newest, p.log, want, p.q.Idle())
			}
		})
	}
}

// A large head is not passed by small waiters behind it, and one release
// serves every waiter it makes room for, in order.
func TestHeadOfLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(1, Options{})
		errs := make(chan error, 3)
		p.start(t.Context(), 3, errs)
		p.start(t.Context(), 1, errs)
		if p.q.Len() != 2 || p.free != 1 {
			t.Fatalf("a small waiter passed the head: Len %d, free %d", p.q.Len(), p.free)
		}
		p.release(3)
		<-errs
		<-errs
		if !slices.Equal(p.log, []int64{3, 1}) {
			t.Fatalf("served %v, want [3 1]", p.log)
		}
	})
}

func TestCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(0, Options{Limit: 3})
		errs := make(chan error, 4)
		p.start(t.Context(), 2, errs)
		if err := p.acquire(t.Context(), 2); !errors.Is(err, errFull) {
			t.Fatalf("oldest first over the cap: %v, want full", err)
		}
		if err := p.acquire(t.Context(), 4); !errors.Is(err, errFull) {
			t.Fatalf("more than the cap: %v, want full", err)
		}
		p.start(t.Context(), 0, errs) // a zero-permit waiter costs one
		if err := p.acquire(t.Context(), 0); !errors.Is(err, errFull) {
			t.Fatalf("zero-permit waiter over the cap: %v", err)
		}
		p.release(2)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
	})
}

// Newest first makes room by failing the oldest waiters.
func TestPushOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(0, Options{Limit: 3, NewestFirst: true})
		old := make(chan error, 1)
		p.start(t.Context(), 2, old)
		mid := make(chan error, 1)
		p.start(t.Context(), 1, mid)
		last := make(chan error, 1)
		p.start(t.Context(), 2, last)
		if err := <-old; !errors.Is(err, errFull) {
			t.Fatalf("oldest: %v, want pushed out", err)
		}
		if p.q.Len() != 2 || p.q.Queued() != 3 {
			t.Fatalf("Len %d Queued %d after the push-out", p.q.Len(), p.q.Queued())
		}
		p.release(3)
		if err := <-last; err != nil {
			t.Fatal(err)
		}
		if err := <-mid; err != nil {
			t.Fatal(err)
		}
	})
}

// A cancelled waiter leaves and consumes nothing; the one behind it heads
// the queue and is served by the next release.
func TestCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(0, Options{})
		ctx, cancel := context.WithCancel(t.Context())
		head := make(chan error, 1)
		p.start(ctx, 1, head)
		next := make(chan error, 1)
		p.start(t.Context(), 1, next)
		cancel()
		if err := <-head; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled head: %v", err)
		}
		if p.q.Head() == nil || p.q.Len() != 1 {
			t.Fatal("the next waiter does not head the queue")
		}
		p.release(1)
		if err := <-next; err != nil || !slices.Equal(p.log, []int64{1}) {
			t.Fatalf("next: %v, served %v", err, p.log)
		}
	})
}

func TestClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(0, Options{})
		errs := make(chan error, 2)
		p.start(t.Context(), 1, errs)
		p.start(t.Context(), 1, errs)
		closed := errors.New("closed")
		p.mu.Lock()
		p.q.Close(closed)
		p.q.Close(errors.New("again")) // a second Close changes nothing
		p.mu.Unlock()
		for range 2 {
			if err := <-errs; err != closed {
				t.Fatalf("waiter after Close: %v", err)
			}
		}
		if err := p.acquire(t.Context(), 0); err != closed || p.q.Idle() || p.q.Waiting() {
			t.Fatalf("after Close: %v, Idle %v, Waiting %v", err, p.q.Idle(), p.q.Waiting())
		}
	})
}

// The head waits for the instant take reports, and is served there; a head
// whose instant comes after its deadline fails when that is known, with
// the wait it knew of.
func TestTimedHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var q Queue
		q.Init(&mu, Options{})
		ready := time.Now().Add(time.Second) // grants come from then on
		take := func(int64) (bool, time.Duration) {
			if d := time.Until(ready); d > 0 {
				return false, d
			}
			return true, 0
		}
		serve := func(t time.Time) {
			q.Serve(t, func(w *Waiter) (bool, time.Duration) { return take(w.N()) })
		}
		start := time.Now()
		mu.Lock()
		w, _, _, _ := q.Take(t.Context(), start, 1, take)
		if !q.WakeAt().Equal(ready) {
			t.Errorf("WakeAt %v, want %v", q.WakeAt(), ready)
		}
		mu.Unlock()
		if err := q.Wait(t.Context(), w, serve); err != nil || time.Since(start) != time.Second {
			t.Fatalf("head: %v after %v, want granted at 1s", err, time.Since(start))
		}

		ready = time.Now().Add(time.Second)
		mu.Lock()
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
		defer cancel()
		if _, _, retry, err := q.Take(ctx, time.Now(), 1, take); !errors.Is(err, context.DeadlineExceeded) || retry != time.Second {
			t.Fatalf("past its deadline: %v, retry %v", err, retry)
		}
		mu.Unlock()
	})
}

// Serve fails a head that learns, once it heads the queue, that its wait
// outlasts its deadline, and serves the next.
func TestServeDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(0, Options{})
		errs := make(chan error, 1)
		p.start(t.Context(), 1, errs)
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var w *Waiter
		p.mu.Lock()
		w, _, _, _ = p.q.Take(ctx, time.Now(), 1, p.take)
		p.mu.Unlock()
		got := make(chan error, 1)
		go func() { got <- p.q.Wait(ctx, w, p.serve) }()
		synctest.Wait()
		p.mu.Lock()
		p.q.Serve(time.Now(), func(x *Waiter) (bool, time.Duration) {
			if x != w {
				return true, 0 // the first waiter is granted; w waits 2s
			}
			return false, 2 * time.Second
		})
		p.mu.Unlock()
		if err := <-got; !errors.Is(err, context.DeadlineExceeded) || w.RetryAfter() != 2*time.Second {
			t.Fatalf("%v, retry %v; want DeadlineExceeded at once with retry 2s", err, w.RetryAfter())
		}
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	})
}

// A turn: Wait with no serve returns when w heads the queue, still queued;
// Leave hands the head to the next.
func TestTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var q Queue
		q.Init(&mu, Options{})
		mu.Lock()
		a, _, _, _ := q.Take(t.Context(), time.Now(), 1, nil)
		b, _, _, _ := q.Take(t.Context(), time.Now(), 1, nil)
		mu.Unlock()
		if err := q.Wait(t.Context(), a, nil); err != nil {
			t.Fatal(err)
		}
		turn := make(chan error, 1)
		go func() { turn <- q.Wait(t.Context(), b, nil) }()
		synctest.Wait()
		select {
		case <-turn:
			t.Fatal("the second waiter's turn came before the first left")
		default:
		}
		mu.Lock()
		q.Leave(a)
		mu.Unlock()
		if err := <-turn; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		q.Leave(b)
		mu.Unlock()
		if !q.Idle() {
			t.Fatal("not idle after both left")
		}
	})
}
