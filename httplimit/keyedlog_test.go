package httplimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/httplimit"
	"github.com/rategate/rategate/limiter"
)

func newLog(t *testing.T, o httplimit.KeyedLogOptions) *httplimit.KeyedLog {
	t.Helper()
	l, err := httplimit.NewKeyedLog(o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// A KeyedLog decides as a limiter.SlidingLog per key does: the same grants,
// the same refusals and retry times, the same Quota, over a random schedule
// of requests of random sizes on a few keys in virtual time.
func TestKeyedLogDecidesAsSlidingLog(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			limit, window := 1+rng.IntN(6), time.Duration(1+rng.IntN(1000))*time.Millisecond
			kl := newLog(t, httplimit.KeyedLogOptions{Limit: limit, Window: window})
			refs := map[string]*limiter.SlidingLog{}
			for step := range 2000 {
				key := fmt.Sprint(rng.IntN(4))
				ref := refs[key]
				if ref == nil {
					var err error
					if ref, err = limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: limit, Window: window}); err != nil {
						t.Fatal(err)
					}
					refs[key] = ref
				}
				n := rng.IntN(limit + 2)
				got, want := kl.TryAcquire(key, n), ref.TryAcquire(n)
				if got.Granted() != want.Granted() || got.RetryAfter() != want.RetryAfter() || !errors.Is(got.Err(), errorOf(want)) {
					t.Fatalf("seed %d step %d key %s n %d: got granted %v retry %v err %v; want %v %v %v", seed, step, key, n, got.Granted(), got.RetryAfter(), got.Err(), want.Granted(), want.RetryAfter(), want.Err())
				}
				if q, wq := kl.Quota(key), ref.Quota(); q != wq {
					t.Fatalf("seed %d step %d: Quota %+v, want %+v", seed, step, q, wq)
				}
				time.Sleep(time.Duration(rng.IntN(int(window/2))) + 1)
			}
		})
	}
}

func errorOf(l limiter.Lease) error {
	if l.Granted() {
		return nil
	}
	return l.Err()
}

// Acquire waits for room in the key's log, fails at once when the
// context's deadline is too soon, and Foresee tells the wait.
func TestKeyedLogAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kl := newLog(t, httplimit.KeyedLogOptions{Limit: 2, Window: time.Second})
		kl.TryAcquire("a", 2)
		if d, ok := kl.Foresee("a", 1); !ok || d != time.Second {
			t.Errorf("Foresee = %v %v, want 1s", d, ok)
		}
		start := time.Now()
		if l, err := kl.Acquire(context.Background(), "a", 1); err != nil || !l.Granted() || time.Since(start) != time.Second {
			t.Errorf("Acquire: %v after %v, want a grant after 1s", err, time.Since(start))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		start = time.Now()
		if _, err := kl.Acquire(ctx, "a", 2); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 0 {
			t.Errorf("Acquire past the deadline: %v after %v, want DeadlineExceeded at once", err, time.Since(start))
		}
		if _, err := kl.Acquire(context.Background(), "a", 3); !errors.Is(err, limiter.ErrExceedsLimit) {
			t.Errorf("Acquire(3) of a limit of 2: %v", err)
		}
		for field, o := range map[string]httplimit.KeyedLogOptions{"Limit": {Window: time.Second}, "Window": {Limit: 1}, "MaxKeys": {Limit: 1, Window: time.Second, MaxKeys: -1}} {
			var oe *limiter.OptionError
			if _, err := httplimit.NewKeyedLog(o); !errors.As(err, &oe) || oe.Field != field {
				t.Errorf("%+v: %v, want an OptionError for %s", o, err, field)
			}
		}
	})
}

// heapAlloc returns the live heap after a collection.
func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// v6 returns the key of the i-th of many distinct IPv6 /64s.
func v6(i int) string {
	return fmt.Sprintf("2001:db8:%x:%x::/64", i>>16, i&0xffff)
}

// A key whose one grant is still in its window costs at most 64 bytes:
// measured by the heap's growth over 200,000 keys.
func TestKeyedLogBytesPerKey(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("200,000 keys, a heap measure")
	}
	const keys = 200_000
	kl := newLog(t, httplimit.KeyedLogOptions{Limit: 100, Window: time.Hour})
	before := heapAlloc()
	for i := range keys {
		if !kl.TryAcquire(v6(i), 1).Granted() {
			t.Fatal("refused")
		}
	}
	after := heapAlloc()
	per := float64(after-before) / keys
	t.Logf("%.1f bytes per key over %d keys (%d held)", per, keys, kl.Len())
	if per > 64 {
		t.Errorf("%.1f bytes per key, want at most 64", per)
	}
	runtime.KeepAlive(kl)
}

// codeWriter is a ResponseWriter that keeps only its header map and
// status.
type codeWriter struct {
	h    http.Header
	code int
}

func (w *codeWriter) Header() http.Header         { return w.h }
func (w *codeWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *codeWriter) WriteHeader(code int)        { w.code = code }

// A flood of a million distinct IPv6 /64s through the middleware keeps the
// keys held under the cap, and the heap's growth under MaxKeys × 64 bytes,
// 40,000 clients whose requests have left the window held before it.
func TestKeyedLogFlood(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million requests, a heap measure")
	}
	const maxKeys = 100_000
	synctest.Test(t, func(t *testing.T) {
		kl := newLog(t, httplimit.KeyedLogOptions{Limit: 1, Window: time.Minute, MaxKeys: maxKeys})
		m, err := httplimit.New(httplimit.Options{Keyed: kl, NoHeaders: true})
		if err != nil {
			t.Fatal(err)
		}
		h := m.Wrap(ok)
		w := &codeWriter{h: http.Header{}}
		r, _ := http.NewRequest("GET", "/", nil)
		send := func(addr string) int {
			clear(w.h)
			w.code = 200
			r.RemoteAddr = addr
			h.ServeHTTP(w, r)
			return w.code
		}
		addr := func(i int) string { return fmt.Sprintf("[2001:db8:%x:%x::1]:443", i>>16, i&0xffff) }
		for i := range 40_000 {
			send(addr(1<<24 + i))
		}
		time.Sleep(time.Minute)
		before := heapAlloc()
		for i := range 1_000_000 {
			if code := send(addr(i)); code != 200 {
				t.Fatalf("flood request %d: %d", i, code)
			}
		}
		after := heapAlloc()
		t.Logf("heap %d → %d bytes after the flood; %d keys held", before, after, kl.Len())
		if after > before+maxKeys*64 || kl.Len() > maxKeys {
			t.Errorf("heap grew by %d bytes, %d keys held; want at most %d bytes and %d keys", after-before, kl.Len(), maxKeys*64, maxKeys)
		}
		// The flood's last clients are held, and refused.
		if code := send(addr(999_999)); code != http.StatusTooManyRequests {
			t.Errorf("the flood's last client again: %d, want 429", code)
		}
		runtime.KeepAlive(kl)
	})
}

// Emptied logs go first when the cap is reached: with 40,000 emptied and
// 6,400 live keys held under a cap of 64,000, adding 40,000 keys keeps
// every live one.
func TestKeyedLogEvictsEmptiedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		kl := newLog(t, httplimit.KeyedLogOptions{Limit: 1, Window: time.Minute, MaxKeys: 64_000})
		for i := range 40_000 {
			kl.TryAcquire(v6(1<<20+i), 1)
		}
		time.Sleep(time.Minute)
		for i := range 6_400 {
			kl.TryAcquire(v6(2<<20+i), 1)
		}
		for i := range 40_000 {
			kl.TryAcquire(v6(i), 1)
		}
		lost := 0
		for i := range 6_400 {
			if kl.TryAcquire(v6(2<<20+i), 1).Granted() {
				lost++
			}
		}
		if lost != 0 || kl.Len() > 64_000 {
			t.Errorf("%d of 6,400 live keys evicted, %d held; want none and at most 64,000", lost, kl.Len())
		}
		// Prune drops what has emptied, and gives the memory back.
		time.Sleep(time.Minute)
		if n := kl.Prune(); n != 46_400 || kl.Len() != 0 {
			t.Errorf("Prune dropped %d, %d left; want 46,400 and 0", n, kl.Len())
		}
	})
}

// LimitByIP under a flood of a million distinct IPv6 /64s, with the
// default cap: the heap grows by less than DefaultMaxKeys × 64 bytes.
func TestLimitByIPFlood(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("a million requests, a heap measure")
	}
	h := httplimit.LimitByIP(10, time.Minute)(ok)
	w := &codeWriter{h: http.Header{}}
	r, _ := http.NewRequest("GET", "/", nil)
	before := heapAlloc()
	for i := range 1_000_000 {
		clear(w.h)
		w.code = 200
		r.RemoteAddr = fmt.Sprintf("[2001:db8:%x:%x::1]:443", i>>16, i&0xffff)
		h.ServeHTTP(w, r)
		if w.code != 200 {
			t.Fatalf("request %d: %d", i, w.code)
		}
	}
	grew := heapAlloc() - before
	t.Logf("heap grew by %d bytes for a million clients (%.1f per client)", grew, float64(grew)/1e6)
	if grew > httplimit.DefaultMaxKeys*64 {
		t.Errorf("heap grew by %d bytes, want at most %d", grew, httplimit.DefaultMaxKeys*64)
	}
	runtime.KeepAlive(h)
}
