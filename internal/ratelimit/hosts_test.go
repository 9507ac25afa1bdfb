package ratelimit

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// One request to key, answered with r.
func request(t *testing.T, hs *Hosts, key string, r Response) {
	t.Helper()
	h := hs.Pin(key)
	tk, err := hs.Wait(t.Context(), h, true, Forever)
	if err != nil {
		t.Fatal(err)
	}
	hs.Done(h, tk, r)
}

// Hosts keeps at most MaxHosts hosts: beyond that the least recently used
// one with no request under way is forgotten, never one that has.
func TestHostsEvictLeastRecentlyUsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := NewHosts(Config{MaxHosts: 3, Learn: true})
		busy := hs.Pin("busy") // a request under way, the least recently used
		throttled := Response{Answered: true, Throttled: true}
		for _, k := range []string{"a", "b"} {
			request(t, hs, k, throttled)
		}
		request(t, hs, "a", Response{Answered: true}) // a is used again: b is the least recently used idle host
		request(t, hs, "c", Response{Answered: true})
		if _, ok := hs.Info("b"); ok || hs.Len() != 3 {
			t.Errorf("after c: b kept %v, %d hosts; want b forgotten, 3", ok, hs.Len())
		}
		if in, ok := hs.Info("a"); !ok || in.Learned.IsZero() {
			t.Errorf("a: %+v %v, want kept with its learned rate", in, ok)
		}
		for i := range 10 {
			request(t, hs, fmt.Sprint("new", i), Response{Answered: true})
		}
		if _, ok := hs.Info("busy"); !ok || hs.Len() != 3 {
			t.Errorf("busy kept %v, %d hosts; want kept (pinned), 3 in all", ok, hs.Len())
		}
		hs.Unpin(busy)
		request(t, hs, "last", Response{Answered: true})
		if _, ok := hs.Info("busy"); ok {
			t.Error("busy kept once idle and least recently used")
		}
	})
}

// A host that pushes back without stating limits gets a learned rate,
// starting from what it took over the last second; one that states its
// limits never does, and stating them drops a rate learned before.
func TestHostsLearn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := NewHosts(Config{Learn: true})
		for range 75 { // 50/s for 1.5 s
			request(t, hs, "h", Response{Answered: true})
			time.Sleep(20 * time.Millisecond)
		}
		request(t, hs, "h", Response{Answered: true, Throttled: true})
		in, _ := hs.Info("h")
		if got := float64(in.Learned.Events()) / in.Learned.Period().Seconds(); got < 40 || got > 50 {
			t.Errorf("learned %v, want the 50/s the host took over the last second, or a little less", in.Learned)
		}
		h := hs.Pin("h")
		if hs.Learned(h) == nil {
			t.Error("no learned limiter")
		}
		hs.Unpin(h)
		stated := Fields{RateLimit: []string{`"default";r=5;t=1`}}
		request(t, hs, "h", Response{Answered: true, Throttled: true, Limits: Read(&stated, time.Now())})
		if in, _ := hs.Info("h"); !in.Stated || !in.Learned.IsZero() {
			t.Errorf("after a statement: %+v, want stated, nothing learned", in)
		}
		off := NewHosts(Config{})
		request(t, off, "h", Response{Answered: true, Throttled: true})
		if in, _ := off.Info("h"); !in.Learned.IsZero() {
			t.Errorf("Learn off: %+v", in)
		}
	})
}

// A wait longer than the limit, or past the deadline, fails at once with
// a *WaitError.
func TestHostsWaitError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hs := NewHosts(Config{MaxWait: time.Minute})
		request(t, hs, "h", Response{Answered: true, Refused: true, RetryAfter: time.Hour})
		h := hs.Pin("h")
		defer hs.Unpin(h)
		_, err := hs.Wait(t.Context(), h, false, 30*time.Second)
		if we, ok := err.(*WaitError); !ok || we.Wait != time.Minute || we.Deadline {
			t.Errorf("%v, want a wait of MaxWait, over the limit", err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err = hs.Wait(ctx, h, false, Forever)
		if we, ok := err.(*WaitError); !ok || !we.Deadline {
			t.Errorf("%v, want past the deadline", err)
		}
	})
}

// What a host costs in memory: its state, and its learned rate.
func TestHostBytes(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's shadow memory")
	}
	const n = 10_000
	for _, learn := range []bool{false, true} {
		hs := NewHosts(Config{MaxHosts: n, Learn: learn})
		stated := Fields{RateLimit: []string{`"default";r=5;t=1`}, Policy: []string{`"default";q=10;w=1`}}
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			r := Response{Answered: true, Throttled: true}
			if !learn {
				r.Limits = Read(&stated, time.Now())
			}
			request(t, hs, fmt.Sprintf("host-%05d.example:443", i), r)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := float64(after.HeapAlloc-before.HeapAlloc) / n
		t.Logf("learn %v: %.0f bytes per host", learn, per)
		if hs.Len() != n {
			t.Fatal(hs.Len())
		}
		runtime.KeepAlive(hs)
	}
}
