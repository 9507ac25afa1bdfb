package otellimit_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
	"github.com/rategate/rategate/redislimit"
)

// storeDown is an error of a store of one's own that says it could not decide.
type storeDown struct{}

func (storeDown) Error() string     { return "store down" }
func (storeDown) Unavailable() bool { return true }

func TestResultOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want otellimit.Result
	}{
		{nil, otellimit.Granted},
		{limiter.ErrLimited, otellimit.Limited},
		{fmt.Errorf("wrapped: %w", limiter.ErrQueueFull), otellimit.QueueFull},
		{limiter.ErrExceedsLimit, otellimit.ExceedsLimit},
		{limiter.ErrClosed, otellimit.Closed},
		{redislimit.ErrClosed, otellimit.Closed},
		{context.Canceled, otellimit.Canceled},
		{context.DeadlineExceeded, otellimit.DeadlineExceeded},
		{limiter.ErrInvalidCount, otellimit.Error},
		{errors.New("something else"), otellimit.Error},
		// redislimit's error wrapping the cause: Unavailable, not the
		// cause's DeadlineExceeded.
		{fmt.Errorf("%w: %w", redislimit.ErrUnavailable, context.DeadlineExceeded), otellimit.Unavailable},
		{errors.Join(errors.New("x"), redislimit.ErrUnavailable), otellimit.Unavailable},
		{fmt.Errorf("acquire: %w", storeDown{}), otellimit.Unavailable},
	} {
		if got := otellimit.ResultOf(tc.err); got != tc.want {
			t.Errorf("ResultOf(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// TestRedisUnavailable checks that a real redislimit limiter that cannot
// reach Redis, failing closed, is counted as unavailable: ResultOf
// recognises redislimit.ErrUnavailable without importing redislimit.
func TestRedisUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: every dial is refused
	client := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	rl := must(redislimit.NewTokenBucket(redislimit.Options{Client: client, Key: "otellimit-test", Timeout: time.Second},
		limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 10}))
	defer rl.Close()

	m, r := newMetrics(t, otellimit.Options{})
	w := m.Wrap(rl, "shared")
	l := w.TryAcquire(1)
	if !errors.Is(l.Err(), redislimit.ErrUnavailable) {
		t.Fatalf("TryAcquire with Redis down: %v", l.Err())
	}
	_, err = w.Acquire(context.Background(), 1)
	if !errors.Is(err, redislimit.ErrUnavailable) {
		t.Fatalf("Acquire with Redis down: %v", err)
	}
	c := collect(t, r)
	c.want(t, "requests", "policy=shared,result=unavailable 2")
}

// TestClassify checks that Options.Classify is asked first.
func TestClassify(t *testing.T) {
	errBusy := errors.New("busy")
	m, r := newMetrics(t, otellimit.Options{Classify: func(err error) (otellimit.Result, bool) {
		if errors.Is(err, errBusy) {
			return otellimit.Unavailable, true
		}
		return 0, false
	}})
	w := m.Wrap(refusing{errBusy}, "custom")
	w.TryAcquire(1)
	m.Wrap(refusing{limiter.ErrQueueFull}, "custom").TryAcquire(1) // the default decides
	c := collect(t, r)
	c.want(t, "requests", "policy=custom,result=unavailable 1", "policy=custom,result=queue_full 1")
}

// refusing is a limiter of another package that refuses with its error.
type refusing struct{ err error }

func (f refusing) TryAcquire(int) limiter.Lease { return limiter.Denied(f.err, 0) }
func (f refusing) Acquire(context.Context, int) (limiter.Lease, error) {
	return limiter.Denied(f.err, 0), f.err
}

func TestRedisRecord(t *testing.T) {
	m, r := newMetrics(t, otellimit.Options{})
	rec := m.Redis("shared")
	rec.Record(otellimit.AnsweredByRedis, 2*time.Millisecond)
	rec.Record(otellimit.AnsweredByRedis, 4*time.Millisecond)
	rec.Record(otellimit.AnsweredFallback, 600*time.Millisecond)
	rec.Record(otellimit.RedisAnswer(9), time.Second) // ignored
	c := collect(t, r)
	c.want(t, "redis.decisions",
		"policy=shared,redis.answer=redis 2",
		"policy=shared,redis.answer=fallback 1",
	)
	c.want(t, "redis.duration",
		"policy=shared,redis.answer=redis n=2 sum=0.006 le0.005:2",
		"policy=shared,redis.answer=fallback n=1 sum=0.6 le0.75:1",
	)
	if got := otellimit.RedisAnswer(9).String(); got != "RedisAnswer(9)" {
		t.Errorf("String of an unknown answer: %q", got)
	}
}
