package redislimit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/internal/redistest"
	"github.com/rategate/rategate/limiter"
)

// timeoutSlack is how late past Options.Timeout a decision may return: the
// issue's bound, T + 50ms.
const timeoutSlack = 50 * time.Millisecond

// failureMode is one way Redis fails to answer. setup returns the address
// the clients of the mode's cases use and, if not nil, what to do once
// those clients exist and before their decisions (occupy their pools, stall
// or kill the server); it may register cleanups.
type failureMode struct {
	name string
	pool int // the clients' PoolSize (0: go-redis's default)
	// dial, if not zero, is the clients' DialTimeout, with one dial attempt
	// (go-redis dials in a goroutine of its own that outlives the call and
	// the client; the test waits for it to end).
	dial  time.Duration
	setup func(t *testing.T) (addr string, provoke func(t *testing.T, cs []redis.UniversalClient))
}

// TestTimeoutBound: with Options.Timeout T (100ms, and DefaultTimeout when
// zero), a decision returns within T + 50ms in every failure mode, with a
// client that honours context deadlines and with a default one, and under
// FailClosed it is refused with an error wrapping ErrUnavailable and the
// cause. Each mode's cases run at once, against one address.
//
// On this shared machine a timer can fire, or its goroutine run, tens of
// milliseconds late now and then; so a mode whose decisions were late is
// tried again, up to 3 times, and fails when every attempt had a late one.
// A decision that is not bounded (the bug was 1.7 s for every one) is late
// in every attempt.
func TestTimeoutBound(t *testing.T) {
	modes := []failureMode{
		{name: "refused", setup: func(t *testing.T) (string, func(*testing.T, []redis.UniversalClient)) {
			addr, err := redistest.Refused()
			if err != nil {
				t.Fatal(err)
			}
			return addr, nil
		}},
		{name: "unreachable", dial: time.Second, setup: func(t *testing.T) (string, func(*testing.T, []redis.UniversalClient)) {
			u, err := redistest.NewUnreachable()
			if err != nil {
				t.Skip(err)
			}
			t.Cleanup(u.Close)
			return u.Addr, nil
		}},
		{name: "pool-exhausted", pool: 1, setup: func(t *testing.T) (string, func(*testing.T, []redis.UniversalClient)) {
			return server.Addr, occupyPools
		}},
		{name: "client-pause", setup: func(t *testing.T) (string, func(*testing.T, []redis.UniversalClient)) {
			s := ownServer(t, true)
			return s.Addr, func(t *testing.T, _ []redis.UniversalClient) {
				if err := s.Pause(2 * time.Second); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{name: "killed-mid-call", setup: func(t *testing.T) (string, func(*testing.T, []redis.UniversalClient)) {
			s := ownServer(t, true)
			return s.Addr, func(t *testing.T, _ []redis.UniversalClient) {
				// Every call is sent to a stalled server, which dies while
				// the calls wait for their answers.
				if err := s.Pause(2 * time.Second); err != nil {
					t.Fatal(err)
				}
				time.AfterFunc(30*time.Millisecond, s.Kill)
			}
		}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			for attempt := 1; ; attempt++ {
				late := timeoutCases(t, m)
				if len(late) == 0 {
					return
				}
				if attempt == 3 {
					t.Errorf("late in each of %d attempts; the last: %s", attempt, strings.Join(late, "; "))
					return
				}
				t.Logf("attempt %d: %s; again", attempt, strings.Join(late, "; "))
			}
		})
	}
}

// timeoutCase is one limiter of a failure mode: its Timeout and whether its
// client honours context deadlines.
type timeoutCase struct {
	timeout  time.Duration
	client   string // "ctx": ContextTimeoutEnabled; "default": a default *redis.Client; "ring": a default *redis.Ring of one shard
	took     time.Duration
	err      error
	grantErr bool // granted, or refused without ErrUnavailable
}

func (c timeoutCase) bound() time.Duration {
	if c.timeout == 0 {
		return DefaultTimeout
	}
	return c.timeout
}

// timeoutCases runs the cases of mode m once, reporting a decision that was
// not refused with ErrUnavailable and its cause, and returns the decisions
// that took longer than their bound.
func timeoutCases(t *testing.T, m failureMode) (late []string) {
	addr, provoke := m.setup(t)
	var cases []*timeoutCase
	var clients []redis.UniversalClient
	var lims []*TokenBucket
	for _, timeout := range []time.Duration{100 * time.Millisecond, 0} {
		for _, kind := range []string{"ctx", "default", "ring"} {
			c := timeoutClient(kind, addr, m)
			t.Cleanup(func() { c.Close(); waitDialsEnd(t) })
			tb, err := NewTokenBucket(Options{Client: c, Key: uniqueKey(t), Timeout: timeout},
				limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 10})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { tb.Close() })
			cases = append(cases, &timeoutCase{timeout: timeout, client: kind})
			clients = append(clients, c)
			lims = append(lims, tb)
		}
	}
	if provoke != nil {
		provoke(t, clients)
	}
	var wg sync.WaitGroup
	for i, c := range cases {
		wg.Go(func() {
			start := time.Now()
			l := lims[i].TryAcquire(1)
			c.took = time.Since(start)
			c.err = l.Err()
			c.grantErr = l.Granted() || !errors.Is(l.Err(), ErrUnavailable)
		})
	}
	wg.Wait()
	for _, c := range cases {
		t.Logf("Timeout %v, %s client: %v, %v", c.timeout, c.client, c.took.Round(time.Millisecond), c.err)
		if c.took > c.bound()+timeoutSlack {
			late = append(late, fmt.Sprintf("Timeout %v, %s client: the decision took %v, over %v + %v",
				c.timeout, c.client, c.took, c.bound(), timeoutSlack))
		}
		if c.grantErr {
			t.Errorf("Timeout %v, %s client: FailClosed answered %v, want an error wrapping ErrUnavailable",
				c.timeout, c.client, c.err)
			continue
		}
		checkCause(t, m.name, c.err)
	}
	return late
}

// timeoutClient returns a client of addr of the given kind, with the
// mode's pool size and dial options.
func timeoutClient(kind, addr string, m failureMode) redis.UniversalClient {
	o := &redis.Options{Addr: addr, ContextTimeoutEnabled: kind == "ctx", PoolSize: m.pool}
	if m.dial > 0 {
		o.DialTimeout, o.DialerRetries = m.dial, 1
	}
	if kind != "ring" {
		return redis.NewClient(o)
	}
	return redis.NewRing(&redis.RingOptions{
		Addrs:    map[string]string{"only": addr},
		PoolSize: m.pool, DialTimeout: o.DialTimeout, DialerRetries: o.DialerRetries,
		HeartbeatFrequency: time.Hour, // the shard stays up: the decisions meet the failure
	})
}

// checkCause checks that err wraps a cause beside ErrUnavailable: what
// go-redis reported, or errTimeout when it was still waiting or retrying
// at the timeout (go-redis then reports the context's end, not the error
// it retried after).
func checkCause(t *testing.T, mode string, err error) {
	t.Helper()
	u, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Errorf("%s: %T %v wraps no cause", mode, err, err)
		return
	}
	var cause error
	for _, e := range u.Unwrap() {
		if e != ErrUnavailable {
			cause = e
		}
	}
	if cause == nil {
		t.Errorf("%s: %v wraps no cause beside ErrUnavailable", mode, err)
	}
	var op *net.OpError
	if mode == "refused" && !errors.As(err, &op) && !errors.Is(err, errTimeout) {
		t.Errorf("refused: %v wraps neither the connection's *net.OpError nor errTimeout", err)
	}
}

// occupyPools takes each client's only connection with a BLPOP that blocks
// for a second, so that a decision waits for a pooled connection.
func occupyPools(t *testing.T, cs []redis.UniversalClient) {
	key := uniqueKey(t)
	var done sync.WaitGroup
	for _, c := range cs {
		done.Go(func() { c.BLPop(context.Background(), time.Second, key) })
	}
	t.Cleanup(done.Wait) // before the clients close
	// Until the BLPOPs are in the server, a decision could take a
	// connection first.
	deadline := time.Now().Add(2 * time.Second)
	for {
		v, err := server.Do("CLIENT", "LIST")
		if s, _ := v.(string); err == nil && strings.Count(s, "cmd=blpop") >= len(cs) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the BLPOPs did not start: %v %v", v, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitDialsEnd waits until no dial of go-redis's is left running: a pool
// dials in a goroutine of its own, which goes on after the call that
// started it has returned and its client is closed, until its DialTimeout
// and retries are spent.
func waitDialsEnd(t testing.TB) {
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if !bytes.Contains(buf[:n], []byte("(*ConnPool).dialConn")) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("go-redis still dials 10 s after the test")
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
