package progress

import (
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// TestMonitorProgress feeds a Monitor 1 KiB every 100 ms for 2 s, then
// 2 KiB every 100 ms, calling Progress every 250 ms, and checks the rates
// and the ETA at exact instants.
func TestMonitorProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const total = 60 * KiB
		m := NewMonitor(total)
		var p Snapshot
		start := time.Now()
		per := int64(KiB)
		for {
			time.Sleep(50 * time.Millisecond)
			now := time.Since(start)
			if now%(100*time.Millisecond) == 0 {
				m.Add(per)
			}
			if now%(250*time.Millisecond) == 0 {
				p = m.Progress()
			}
			if now == 2*time.Second {
				checkProgress(t, p, 20*KiB, 10*KiB, 10*KiB, 4*time.Second)
				per = 2 * KiB
			}
			if now == 3*time.Second {
				// The last second ran at 20 KiB/s: 40 KiB, 20 KiB left.
				checkProgress(t, p, 40*KiB, 20*KiB, 40.0*KiB/3, time.Second)
				break
			}
		}
		if s := p.String(); !strings.Contains(s, "40.0 KiB / 60.0 KiB (67%)") || !strings.Contains(s, "20.0 KiB/s") || !strings.Contains(s, "ETA 1s") {
			t.Errorf("String() = %q", s)
		}
		m.Add(20 * KiB)
		if p := m.Progress(); !p.Done() || p.ETA != 0 || p.Percent() != 100 {
			t.Errorf("at the total: %+v", p)
		}
	})
}

func checkProgress(t *testing.T, p Snapshot, bytes int64, rate, avg float64, eta time.Duration) {
	t.Helper()
	if p.Bytes != bytes || math.Abs(p.Rate-rate) > 1e-6 || math.Abs(p.Average-avg) > 1e-6 || p.ETA != eta {
		t.Errorf("Progress = %+v; want Bytes %d, Rate %v, Average %v, ETA %v", p, bytes, rate, avg, eta)
	}
}

func TestMonitorUnknownTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := NewMonitor(0)
		time.Sleep(time.Second)
		m.Add(512)
		p := m.Progress()
		if p.ETA != -1 || p.Percent() != -1 || p.Done() || p.Rate != 512 {
			t.Errorf("Progress = %+v", p)
		}
		if s := p.String(); s != "512 B, 512 B/s (avg 512 B/s)" {
			t.Errorf("String() = %q", s)
		}
	})
}
