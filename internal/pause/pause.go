package pause

import (
	"context"
	"time"
)

// For waits for d, or until ctx ends, whichever comes first. It returns
// nil when d has passed, and ctx.Err() when ctx ended first.
func For(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
