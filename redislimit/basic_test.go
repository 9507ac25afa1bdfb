package redislimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rategate/rategate/limiter"
)

func TestTokenBucketBasic(t *testing.T) {
	tb, err := NewTokenBucket(Options{Client: newClient(t), Key: uniqueKey(t)},
		limiter.TokenBucketOptions{Rate: limiter.Per(10, time.Second), Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	for i := range 3 {
		if l := tb.TryAcquire(1); !l.Granted() {
			t.Fatalf("grant %d of a full bucket of 3: refused: %v", i, l.Err())
		}
	}
	l := tb.TryAcquire(1)
	if l.Granted() || !errors.Is(l.Err(), limiter.ErrLimited) {
		t.Fatalf("4th grant of 3: %v %v", l.Granted(), l.Err())
	}
	if ra := l.RetryAfter(); ra <= 0 || ra > 100*time.Millisecond {
		t.Fatalf("RetryAfter = %v, want (0, 100ms]", ra)
	}
	q := tb.Quota()
	if q.Limit != 3 || q.Remaining != 0 || q.Window != 300*time.Millisecond {
		t.Fatalf("Quota = %+v", q)
	}
	start := time.Now()
	if _, err := tb.Acquire(context.Background(), 1); err != nil {
		t.Fatal(err)
	}
	t.Logf("Acquire waited %v", time.Since(start))
}
