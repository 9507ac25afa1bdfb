package otellimit_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/otellimit"
)

// tier maps a client key to its plan: the bounded key mapper of the tests.
func tier(key string) string {
	plan, _, _ := strings.Cut(key, "-")
	return plan
}

// TestKeyedAggregated checks that a keyed set's keys are counted under the
// policy alone, with its Stats observed, and that For and Quota pass
// through.
func TestKeyedAggregated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m, r := newMetrics(t, otellimit.Options{})
		set := must(limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Second), Burst: 1}))
		k := otellimit.WrapKeyed(m, set, "per-ip", nil)
		defer k.Close()
		for _, ip := range []string{"192.0.2.1", "192.0.2.2", "192.0.2.1", "192.0.2.3"} {
			k.TryAcquire(ip, 1)
		}
		if q := k.Quota("192.0.2.1"); q.Limit != 1 || q.Remaining != 0 {
			t.Errorf("Quota passed through: %+v", q)
		}
		// A key's limiter from For is counted under the policy too; its
		// Acquire waits the second the key's bucket takes to refill.
		if _, err := k.For("192.0.2.1").Acquire(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		c := collect(t, r)
		c.want(t, "requests", "policy=per-ip,result=granted 4", "policy=per-ip,result=limited 1")
		c.want(t, "request.time_in_queue", "policy=per-ip,result=granted n=1 sum=1 le1:1")
		c.want(t, "queued_requests", "policy=per-ip 0")
		c.want(t, "queued_permits", "policy=per-ip 0")
	})
}

// TestKeyMapper checks the key attribute of a bounded mapper, and that
// values beyond MaxKeyValues are recorded as OtherKey.
func TestKeyMapper(t *testing.T) {
	m, r := newMetrics(t, otellimit.Options{MaxKeyValues: 2})
	set := must(limiter.NewKeyed(limiter.KeyedOptions[string]{New: func(string) (limiter.Limiter, error) {
		return limiter.NewConcurrency(limiter.ConcurrencyOptions{Limit: 1})
	}}))
	k := otellimit.WrapKeyed(m, set, "tenants", tier)
	defer k.Close()
	held := []limiter.Lease{
		k.TryAcquire("gold-acme", 1),
		k.TryAcquire("free-bob", 1),
		k.TryAcquire("trial-eve", 1), // a third plan: over MaxKeyValues
		k.TryAcquire("trial-joe", 1),
	}
	k.TryAcquire("gold-acme", 1) // refused: acme holds its one permit
	c := collect(t, r)
	c.want(t, "requests",
		"key=gold,policy=tenants,result=granted 1",
		"key=gold,policy=tenants,result=limited 1",
		"key=free,policy=tenants,result=granted 1",
		"key=_OTHER,policy=tenants,result=granted 2",
	)
	c.want(t, "active_request_leases",
		"key=gold,policy=tenants 1",
		"key=free,policy=tenants 1",
		"key=_OTHER,policy=tenants 2",
	)
	// The set's state is observed under the policy alone.
	c.want(t, "queued_requests", "policy=tenants 0")
	for _, l := range held {
		l.Release()
	}
	if got := set.Stats().Available; got != 4 {
		t.Errorf("%d permits available after the releases, want 4", got)
	}
	c = collect(t, r)
	c.want(t, "active_request_leases",
		"key=gold,policy=tenants 0",
		"key=free,policy=tenants 0",
		"key=_OTHER,policy=tenants 0",
	)
}

// TestWrapPerKey checks a per-key function's limiters: counted together,
// nil kept nil.
func TestWrapPerKey(t *testing.T) {
	m, r := newMetrics(t, otellimit.Options{})
	set := must(limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(1, time.Hour), Burst: 2}))
	defer set.Close()
	perKey := m.WrapPerKey(func(host string) limiter.Limiter {
		if host == "unlimited.example" {
			return nil
		}
		return set.For(host)
	}, "hosts", nil)
	if perKey("unlimited.example") != nil {
		t.Fatal("a nil limiter for a key did not stay nil")
	}
	for _, h := range []string{"a.example", "a.example", "a.example", "b.example"} {
		perKey(h).TryAcquire(1)
	}
	c := collect(t, r)
	c.want(t, "requests", "policy=hosts,result=granted 3", "policy=hosts,result=limited 1")
	c.want(t, "queued_requests")
}
