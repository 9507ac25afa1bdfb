// Package progress reports how a transfer is going: a Monitor counts the
// bytes delivered (one atomic addition per piece, no clock read) and, when
// asked, reports bytes so far, the current and average rate, and, for a
// known total, the percentage done and the time left: enough for a progress
// line. A pipe.Reader or pipe.Writer counts into one through
// pipe.WithCounter; anything else calls Add.
package progress

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rategate/rategate/pipe"
)

// monitorWindow is the span over which Progress measures the current rate.
const monitorWindow = time.Second

// Monitor counts the bytes a transfer has delivered and reports its
// progress: bytes so far, the current and average rate, and, for a known
// total, the time left. Give it to a pipe.Reader or pipe.Writer with
// pipe.WithCounter, or count with Add. Add is one atomic addition (no clock
// read), so a Monitor costs the stream nearly nothing; the clock is read by
// Progress. A Monitor is safe for concurrent use, and one Monitor may count
// several streams.
type Monitor struct {
	bytes atomic.Int64
	total int64
	start time.Time

	mu      sync.Mutex
	samples [16]sample // taken by Progress, oldest first
	n       int
}

type sample struct {
	at    time.Duration // since start
	bytes int64
}

// NewMonitor returns a Monitor whose clock starts now. total is the size of
// the transfer if known (it makes Progress report a percentage and an ETA);
// zero or negative means unknown.
func NewMonitor(total int64) *Monitor {
	m := &Monitor{total: max(total, 0), start: time.Now()}
	m.samples[0] = sample{}
	m.n = 1
	return m
}

// Add counts n more bytes.
func (m *Monitor) Add(n int64) { m.bytes.Add(n) }

// Bytes returns the bytes counted so far.
func (m *Monitor) Bytes() int64 { return m.bytes.Load() }

// Snapshot is a Monitor's progress at one instant.
type Snapshot struct {
	Bytes   int64         // delivered so far
	Total   int64         // the transfer's size; 0 if unknown
	Elapsed time.Duration // since NewMonitor
	// Rate is the current rate in bytes per second: over about the last
	// second, as seen by successive Progress calls (over the time since
	// the previous call when calls are further apart).
	Rate float64
	// Average is Bytes / Elapsed, in bytes per second.
	Average float64
	// ETA is the time left at the current rate. It is 0 when the total is
	// reached, and -1 when it cannot be estimated: the total is unknown or
	// nothing moves.
	ETA time.Duration
}

// Done reports whether a known total has been reached.
func (p Snapshot) Done() bool { return p.Total > 0 && p.Bytes >= p.Total }

// Percent returns Bytes as a percentage of Total, or -1 if Total is unknown.
func (p Snapshot) Percent() float64 {
	if p.Total <= 0 {
		return -1
	}
	return 100 * float64(p.Bytes) / float64(p.Total)
}

// String formats p as a progress line:
// "1.5 MiB / 4.0 MiB (37%), 512.0 KiB/s (avg 498.2 KiB/s), ETA 5s".
func (p Snapshot) String() string {
	var b strings.Builder
	b.WriteString(pipe.FormatBytes(p.Bytes))
	if p.Total > 0 {
		fmt.Fprintf(&b, " / %s (%.0f%%)", pipe.FormatBytes(p.Total), p.Percent())
	}
	fmt.Fprintf(&b, ", %s/s (avg %s/s)", pipe.FormatBytes(int64(p.Rate)), pipe.FormatBytes(int64(p.Average)))
	switch {
	case p.Done():
		fmt.Fprintf(&b, ", done in %v", p.Elapsed.Round(time.Millisecond))
	case p.ETA >= 10*time.Second:
		fmt.Fprintf(&b, ", ETA %v", p.ETA.Round(time.Second))
	case p.ETA >= 0:
		fmt.Fprintf(&b, ", ETA %v", p.ETA.Round(100*time.Millisecond))
	case p.Total > 0:
		b.WriteString(", ETA unknown")
	}
	return b.String()
}

// Progress returns the transfer's progress now. It also records a sample
// from which later calls measure the current rate, so calling it regularly
// (for a progress line, a few times a second) keeps Rate current.
func (m *Monitor) Progress() Snapshot {
	now := time.Since(m.start)
	bytes := m.bytes.Load()
	m.mu.Lock()
	// The rate's base: the newest sample at least a window old, else the
	// oldest one. Older samples are no longer needed.
	base := 0
	for i := 1; i < m.n && m.samples[i].at <= now-monitorWindow; i++ {
		base = i
	}
	copy(m.samples[:], m.samples[base:m.n])
	m.n -= base
	b := m.samples[0]
	// Record now, no closer than an eighth of a window to the last sample.
	if last := m.samples[m.n-1]; now-last.at >= monitorWindow/8 {
		if m.n == len(m.samples) {
			copy(m.samples[:], m.samples[1:])
			m.n--
		}
		m.samples[m.n] = sample{at: now, bytes: bytes}
		m.n++
	}
	m.mu.Unlock()

	p := Snapshot{Bytes: bytes, Total: m.total, Elapsed: now, ETA: -1}
	if now > 0 {
		p.Average = float64(bytes) / now.Seconds()
	}
	if dt := now - b.at; dt > 0 {
		p.Rate = float64(bytes-b.bytes) / dt.Seconds()
	}
	switch {
	case p.Done():
		p.ETA = 0
	case p.Total > 0 && p.Rate > 0:
		p.ETA = time.Duration(float64(p.Total-p.Bytes) / p.Rate * float64(time.Second))
	}
	return p
}
