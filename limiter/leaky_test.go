package limiter_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	. "github.com/rategate/rategate/limiter"
)

// A pacer grants any request up to its maximum once its slot has come, so
// Stats().Available says that maximum then, and 0 until the slot comes.
func TestLeakyBucketAvailable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lb, err := NewLeakyBucket(LeakyBucketOptions{Rate: Per(10, time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		avail := lb.Stats().Available
		if avail < 1000 {
			t.Fatalf("a new pacer reports %d available, yet grants TryAcquire(1000)", avail)
		}
		if l := lb.TryAcquire(int(avail) + 1); !errors.Is(l.Err(), ErrExceedsLimit) {
			t.Fatalf("TryAcquire(Available+1) = %v, want ErrExceedsLimit: Available is the most it grants", l.Err())
		}
		if !lb.TryAcquire(1000).Granted() {
			t.Fatal("TryAcquire(1000) on a new pacer refused")
		}
		if st := lb.Stats(); st.Available != 0 {
			t.Fatalf("Available = %d before the next slot, want 0", st.Available)
		}
		time.Sleep(100*time.Second - time.Nanosecond)
		if st := lb.Stats(); st.Available != 0 || lb.TryAcquire(1).Granted() {
			t.Fatalf("Available = %d 1 ns before the next slot, want 0 and a refusal", st.Available)
		}
		time.Sleep(time.Nanosecond)
		if st := lb.Stats(); st.Available != avail {
			t.Fatalf("Available = %d when the slot has come, want %d", st.Available, avail)
		}
		if !lb.TryAcquire(int(avail)).Granted() {
			t.Fatal("TryAcquire(Available) refused when the slot has come")
		}
	})
}
