//go:build linux

package precise

import (
	"context"
	"testing"
	"time"
)

// The alarm's reading goroutine ends once no wait is pending, also when the
// last one was cancelled long before its instant.
func TestAlarmGoroutineEnds(t *testing.T) {
	pt := Timer{Spin: 2 * time.Hour} // the whole hour-long wait is its end
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(10*time.Millisecond, cancel)
	if r := pt.Until(ctx, nil, time.Now().Add(time.Hour), 0); r != Done {
		t.Fatalf("%v, want Done", r)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		alarm.mu.Lock()
		running, pending := alarm.running, len(alarm.due)
		alarm.mu.Unlock()
		if !running && pending == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarm still running with %d pending waits", pending)
		}
		time.Sleep(time.Millisecond)
	}
}
