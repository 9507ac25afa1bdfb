package adaptive

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

var (
	update = flag.Bool("update", false, "write the tables to -out")
	out    = flag.String("out", filepath.Join("..", "results", "adaptive.md"), "where -update writes the tables")
)

// runAll runs every entry through run, each in its own bubble.
func runAll(t *testing.T, entries []Entry, run func(Contender, []Stage) Run) []Run {
	runs := make([]Run, len(entries))
	for i, e := range entries {
		synctest.Test(t, func(*testing.T) { runs[i] = run(e.New(), Stages) })
	}
	return runs
}

// TestCompare runs both scenarios with every contender, prints the
// tables, and checks that rategate does at least as well as each peer.
func TestCompare(t *testing.T) {
	if raceDetector {
		t.Skip("its numbers are the same under the race detector, which makes it ten times slower; bench/plots runs its scenarios under it")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Adaptive limiters side by side\n\n`cd bench && go test ./adaptive/ -run TestCompare -update`, %s, %s %s/%s. ", time.Now().UTC().Format("2006-01-02"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	b.WriteString("The runs are on testing/synctest's virtual clock: the numbers do not depend on the machine or its load, and come out the same every time, except failsafe-go's AdaptiveThrottler's, which draws at random (its row moves a little between runs). ")
	b.WriteString("Peers: failsafe-go v0.9.8 (AdaptiveLimiter, limits 1 to 1000 from 20, otherwise its defaults; AdaptiveThrottler, its defaults), go-concurrency-limits v0.8.0 (AIMD from 10, backing off by 0.9, and Gradient2 with its defaults but limits 1 to 1000, each in its DefaultLimiter with 1 s sampling windows of at least 100 calls). rategate: adaptive.RateLimiter with Floor 1/s, Initial 10/s, Ceiling 1000/s, Burst 2 (calls arrive on a 2.5 ms grid: with Burst 1 a grant due between two arrivals would wait for the next); adaptive.ConcurrencyLimiter with Initial 10, Ceiling 1000. Ideal: a TokenBucket (Burst 1) or a Concurrency set to the capacity at each step.\n\n")
	rateTable(t, &b)
	concurrencyTable(t, &b)
	phaseTable(t, &b)
	latencyTable(t, &b)
	fmt.Print(b.String())
	if *update {
		if err := os.WriteFile(*out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// rateRow is a rate run's measures: over each stage's last 15 s, and over
// the whole run; how long until the rate let through was under the
// capacity after the step down, and at 90% of it after the step up.
type rateRow struct {
	stages   []RateStats
	whole    RateStats
	down, up time.Duration
}

func measureRate(r Run) rateRow {
	var row rateRow
	var begin time.Duration
	st := r.Stages
	for _, s := range st {
		row.stages = append(row.stages, r.RateOver(begin+5*time.Second, begin+s.Length, s.Capacity))
		begin += s.Length
	}
	row.whole = r.RateOver(0, begin, 1)
	sent := r.SentRate(500 * time.Millisecond)
	row.down = FirstSample(sent, st[0].Length, func(v float64) bool { return v <= float64(st[1].Capacity) })
	row.up = FirstSample(sent, st[0].Length+st[1].Length, func(v float64) bool { return v >= 0.9*float64(st[2].Capacity) })
	return row
}

// net is the calls that succeeded less those throttled, per second, as a
// share of the capacity: each throttled call is a round trip wasted and
// load on the other side.
func (s RateStats) net() float64 { return s.Share * (1 - 2*s.Throttled) / (1 - s.Throttled) }

func rateTable(t *testing.T, b *strings.Builder) {
	entries := RateEntries()
	runs := runAll(t, entries, RunRate)
	fmt.Fprintf(b, "## Rate: capacity %s, 429 above it, %v per call, %d calls/s offered\n\n", stagesString("/s"), Latency, Arrivals)
	b.WriteString("Over each stage's last 15 s: the calls that succeeded per second, as a share of the capacity, and the share of the calls sent that were throttled. Then the whole run's throttled share; net, the successes less the throttled calls over the three stages' last 15 s, as a share of the capacity (each throttled call is a round trip wasted and load on the service); and how long the rate let through (calls sent over the last 500 ms) took to fall under the capacity after the step down, and to reach 90% of it after the step up.\n\n")
	b.WriteString("| contender |")
	for _, s := range Stages {
		fmt.Fprintf(b, " %d/s: share | throttled |", s.Capacity)
	}
	b.WriteString(" whole run throttled | net | step down | step up |\n| --- |")
	b.WriteString(strings.Repeat(" ---: | ---: |", len(Stages)))
	b.WriteString(" ---: | ---: | ---: | ---: |\n")
	rows := make([]rateRow, len(runs))
	for i, r := range runs {
		rows[i] = measureRate(r)
		fmt.Fprintf(b, "| %s |", entries[i].Name)
		for _, s := range rows[i].stages {
			fmt.Fprintf(b, " %.1f%% | %.2f%% |", 100*s.Share, 100*s.Throttled)
		}
		fmt.Fprintf(b, " %.2f%% | %.0f%% | %s | %s |\n", 100*rows[i].whole.Throttled, 100*pooledNet(rows[i].stages), dur(rows[i].down), dur(rows[i].up))
	}
	b.WriteString("\n")
	// rategate (entry 1) against each peer, stage by stage: fewer calls
	// throttled, and more successes once the throttled calls are counted
	// against them (a peer that sends every call gets every call the
	// capacity allows through, and many more refused).
	me := rows[1]
	for i, e := range entries {
		if !e.Peer {
			continue
		}
		for k := range Stages {
			m, p := me.stages[k], rows[i].stages[k]
			if m.Throttled > p.Throttled || m.net() < p.net() {
				t.Errorf("rate, stage %d: rategate %.1f%% of capacity with %.2f%% throttled (net %.1f%%); %s %.1f%% with %.2f%% (net %.1f%%)",
					k, 100*m.Share, 100*m.Throttled, 100*m.net(), e.Name, 100*p.Share, 100*p.Throttled, 100*p.net())
			}
		}
	}
}

func concurrencyTable(t *testing.T, b *strings.Builder) {
	entries := ConcurrencyEntries()
	runs := runAll(t, entries, RunConcurrency)
	fmt.Fprintf(b, "## Concurrency: %s workers, %v ±10%% a call, calls queue past them; offered 1.5 times what they serve\n\n", stagesString(""), ServiceTime)
	fmt.Fprintf(b, "Over each stage's last 15 s, then over the three together: goodput, the calls completed within %v (twice the unloaded latency) per second, as a share of what the workers serve; the share of completed calls slower than that; the 99th percentile latency; and the calls in flight on average, as a share of the workers.\n\n", 2*ServiceTime)
	b.WriteString("| contender |")
	for _, s := range Stages {
		fmt.Fprintf(b, " %d: goodput | slow | p99 | in flight |", s.Capacity)
	}
	b.WriteString(" all: goodput | slow |\n| --- |")
	b.WriteString(strings.Repeat(" ---: | ---: | ---: | ---: |", len(Stages)))
	b.WriteString(" ---: | ---: |\n")
	rows := make([][]ConcurrencyStats, len(runs))
	for i, r := range runs {
		fmt.Fprintf(b, "| %s |", entries[i].Name)
		inFlight := r.InFlight()
		var begin time.Duration
		for _, s := range Stages {
			st := r.ConcurrencyOver(begin+5*time.Second, begin+s.Length, s.Capacity)
			rows[i] = append(rows[i], st)
			fmt.Fprintf(b, " %.1f%% | %.2f%% | %v | %.0f%% |", 100*st.Goodput, 100*st.Slow, st.P99.Round(time.Millisecond), 100*mean(inFlight, begin+5*time.Second, begin+s.Length)/float64(s.Capacity))
			begin += s.Length
		}
		all := pooled(r)
		fmt.Fprintf(b, " %.1f%% | %.2f%% |\n", 100*all.Goodput, 100*all.Slow)
	}
	b.WriteString("\n")
	// rategate (entry 1) against each peer, over the three stages' last
	// 15 s together: as much goodput, no more slow calls.
	me := pooled(runs[1])
	for i, e := range entries {
		if !e.Peer {
			continue
		}
		if p := pooled(runs[i]); me.Goodput < p.Goodput || me.Slow > p.Slow {
			t.Errorf("concurrency: rategate goodput %.1f%% with %.2f%% slow; %s %.1f%% with %.2f%%",
				100*me.Goodput, 100*me.Slow, e.Name, 100*p.Goodput, 100*p.Slow)
		}
	}
}

// mean returns the mean of a Sample series over [from, to).
func mean(series []float64, from, to time.Duration) float64 {
	var sum float64
	n := 0
	for i, v := range series {
		if at := sampleOffset + time.Duration(i)*Sample; at >= from && at < to {
			sum += v
			n++
		}
	}
	return sum / float64(max(n, 1))
}

func stagesString(unit string) string {
	var parts []string
	for _, s := range Stages {
		parts = append(parts, fmt.Sprintf("%d%s", s.Capacity, unit))
	}
	return strings.Join(parts, " → ") + fmt.Sprintf(", %v each", Stages[0].Length)
}

func dur(d time.Duration) string {
	if d < 0 {
		return "never"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// pooledNet is net over the stages' windows together, weighted by capacity.
func pooledNet(stages []RateStats) float64 {
	var got, capSum float64
	for k, s := range stages {
		got += s.net() * float64(Stages[k].Capacity)
		capSum += float64(Stages[k].Capacity)
	}
	return got / capSum
}

// pooled measures a concurrency run over the last 15 s of every stage
// together: goodput against what the workers serve over those spans.
func pooled(r Run) ConcurrencyStats {
	var good, all, served float64
	var begin time.Duration
	for _, s := range r.Stages {
		st := r.ConcurrencyOver(begin+5*time.Second, begin+s.Length, s.Capacity)
		n := float64(countIn(r, begin+5*time.Second, begin+s.Length))
		all += n
		good += n * (1 - st.Slow)
		served += float64(s.Capacity) / ServiceTime.Seconds() * (s.Length - 5*time.Second).Seconds()
		begin += s.Length
	}
	return ConcurrencyStats{Goodput: good / served, Slow: 1 - good/max(all, 1)}
}

func countIn(r Run, from, to time.Duration) int {
	n := 0
	for _, c := range r.Calls {
		if c.At >= from && c.At < to {
			n++
		}
	}
	return n
}

// phaseTable runs rategate's rate limiter with the 40/s stage cut short or
// drawn out, 17 s to 23 s, so that the step up finds the limiter at
// different points of its cycle of probes.
func phaseTable(t *testing.T, b *strings.Builder) {
	b.WriteString("## rategate's rate limiter: the step up at different points of its probe cycle\n\n")
	b.WriteString("The rate scenario with the 40/s stage lasting 17 s to 23 s. Step up: how long after it the rate let through reached 90% of 200/s; then the 40/s and the 200/s stages' last 15 s (the 40/s stage's last 12 s when it lasts 17 s).\n\n")
	b.WriteString("| 40/s stage | step up | 40/s: share | throttled | 200/s: share | throttled |\n| ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var ups []time.Duration
	for l := 17 * time.Second; l <= 23*time.Second; l += 500 * time.Millisecond {
		st := []Stage{Stages[0], {Stages[1].Capacity, l}, Stages[2]}
		var r Run
		synctest.Test(t, func(*testing.T) { r = RunRate(rategateRate(), st) })
		row := measureRate(r)
		ups = append(ups, row.up)
		fmt.Fprintf(b, "| %v | %s | %.1f%% | %.2f%% | %.1f%% | %.2f%% |\n", l, dur(row.up), 100*row.stages[1].Share, 100*row.stages[1].Throttled, 100*row.stages[2].Share, 100*row.stages[2].Throttled)
	}
	slices.Sort(ups)
	fmt.Fprintf(b, "\nStep up found in %s to %s (median %s).\n", dur(ups[0]), dur(ups[len(ups)-1]), dur(ups[len(ups)/2]))
}

// latencyTable runs the rate scenario with calls that take longer, so that
// more calls are on their way when the first throttle of a probe comes
// back.
func latencyTable(t *testing.T, b *strings.Builder) {
	latencies := []time.Duration{Latency, 100100 * time.Microsecond, 250100 * time.Microsecond, 500100 * time.Microsecond}
	b.WriteString("\n## The rate scenario with calls that take longer\n\n")
	b.WriteString("The rate scenario with each call taking 20.1 ms to 500.1 ms: the whole run's throttled share, then net, as in the first table.\n\n| contender |")
	for _, l := range latencies {
		fmt.Fprintf(b, " %v: throttled | net |", l)
	}
	b.WriteString("\n| --- |" + strings.Repeat(" ---: | ---: |", len(latencies)) + "\n")
	entries := RateEntries()
	for _, e := range entries {
		fmt.Fprintf(b, "| %s |", e.Name)
		for _, l := range latencies {
			var r Run
			synctest.Test(t, func(*testing.T) { r = RunRateLatency(e.New(), Stages, l) })
			row := measureRate(r)
			fmt.Fprintf(b, " %.2f%% | %.0f%% |", 100*row.whole.Throttled, 100*pooledNet(row.stages))
		}
		b.WriteString("\n")
	}
}
