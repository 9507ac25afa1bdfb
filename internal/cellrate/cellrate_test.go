package cellrate

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDecideBucket checks Decide against a token bucket counted in permits:
// a bucket of burst b refilled one permit every d units grants a request of
// k permits when it holds k (one for k == 0), and says when it will.
func TestDecideBucket(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		d, b := r.Int64N(50)+1, r.Int64N(8)+1
		tol := b * d
		tat, nows, k := r.Int64N(400)-100, r.Int64N(300), r.Int64N(b+2)
		// The bucket at nows: full, less the debt tat-nows rounded up.
		debt := max(tat-nows, 0)
		tokens := (tol - debt) / d
		want := max(k, 1) <= tokens
		next, early := Decide(tat, nows, k, d, tol)
		if (early <= 0) != want {
			t.Fatalf("Decide(%d, %d, %d, %d, %d) early %d; the bucket holds %d", tat, nows, k, d, tol, early, tokens)
		}
		switch {
		case !want || k == 0:
			if next != tat {
				t.Fatalf("a refusal or a zero-permit request moved the state: %d -> %d", tat, next)
			}
		case next != max(tat, nows)+k*d:
			t.Fatalf("a grant of %d moved the state from %d to %d at %d", k, tat, next, nows)
		}
		if !want && max(k, 1) <= b {
			// early units later, and not one before, the request fits.
			if _, e := Decide(tat, nows+early, k, d, tol); e > 0 {
				t.Fatalf("still refused %d units later", early)
			}
			if _, e := Decide(tat, nows+early-1, k, d, tol); e <= 0 {
				t.Fatalf("granted before the %d units said", early)
			}
		}
	}
}

// TestLock: while a word is Locked, no compare-and-swap of a value read
// before lands, and Fresh never gives back the value a stalled one expects.
func TestLock(t *testing.T) {
	var w atomic.Int64
	w.Store(7)
	stale := w.Load()
	if old := Lock(&w); old != 7 || w.Load() != Locked {
		t.Fatalf("Lock returned %d and left %d", old, w.Load())
	}
	if w.CompareAndSwap(stale, stale+1) {
		t.Fatal("a compare-and-swap landed on a locked word")
	}
	for _, tat := range []int64{-3, -1, 0, 1, 7} {
		if f := Fresh(tat); f == tat || (tat <= 0) != (f <= 0) || f < tat && tat > 0 {
			t.Errorf("Fresh(%d) = %d: not another value on the safe side", tat, f)
		}
	}
	w.Store(Fresh(stale))
	if w.CompareAndSwap(stale, stale+1) {
		t.Fatal("a stalled compare-and-swap landed on the fresh state")
	}
	// Lock waits for nobody: under contention it takes the word from
	// goroutines that swap it.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if v := w.Load(); v != Locked {
					w.CompareAndSwap(v, v+1)
				}
			}
		})
	}
	for range 1000 {
		if Lock(&w) == Locked {
			t.Error("Lock returned Locked")
		}
		w.Store(1)
	}
	close(stop)
	wg.Wait()
}
