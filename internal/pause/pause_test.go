package pause

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		if err := For(t.Context(), time.Second); err != nil || time.Since(start) != time.Second {
			t.Errorf("For(1s) = %v after %v, want nil after 1s", err, time.Since(start))
		}
	})
}

func TestForCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		start := time.Now()
		if err := For(ctx, time.Hour); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 300*time.Millisecond {
			t.Errorf("For(1h) with a 300ms deadline = %v after %v, want DeadlineExceeded after 300ms", err, time.Since(start))
		}
	})
}
