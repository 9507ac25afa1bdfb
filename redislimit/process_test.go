package redislimit

import (
	"cmp"
	"flag"
	"math/big"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rategate/rategate/internal/redistest"
)

// long runs the cross-process tests for longer: go test -redislimit.long.
var long = flag.Bool("redislimit.long", false, "run the cross-process and fault tests 5 times longer")

// runFor is d, or 5·d with -redislimit.long.
func runFor(d time.Duration) time.Duration {
	if *long {
		return 5 * d
	}
	return d
}

// The bound checks read grant logs stamped with Redis's clock (µs) by the
// script that decided each grant, so they are exact: no tolerance.

// checkSliding fails t if some window [a, a+w) holds more than limit permits.
func checkSliding(t *testing.T, g []event, w time.Duration, limit int) {
	t.Helper()
	g = byRedisTime(g)
	wu := int64(w / time.Microsecond)
	sum, j := 0, 0
	for i := range g {
		sum += g[i].n
		for g[i].at-g[j].at >= wu {
			sum -= g[j].n
			j++
		}
		if sum > limit {
			t.Fatalf("%d permits in the window [%d, %d] µs, over the limit %d", sum, g[j].at, g[j].at+wu, limit)
		}
	}
}

// checkFixed fails t if an aligned window holds more than limit permits.
func checkFixed(t *testing.T, g []event, w time.Duration, limit int) {
	t.Helper()
	wu := int64(w / time.Microsecond)
	counts := map[int64]int{}
	for _, e := range g {
		counts[e.at/wu] += e.n
		if counts[e.at/wu] > limit {
			t.Fatalf("%d permits in the window starting at %d µs, over the limit %d", counts[e.at/wu], e.at/wu*wu, limit)
		}
	}
}

// byRedisTime returns the grants of g in Redis-time order: callers record
// them in the order their replies arrived, which concurrent callers (and
// coalesced script calls) can interleave.
func byRedisTime(g []event) []event {
	g = slices.Clone(g)
	slices.SortStableFunc(g, func(a, b event) int { return cmp.Compare(a.at, b.at) })
	return g
}

// checkBucket fails t if some interval [a, b] holds more than
// burst + rate·(b-a) permits, rate being events per period: with S the
// permits granted from the i-th grant to the j-th, it checks
// S·period ≤ burst·period + events·(t_j - t_i) for every i ≤ j in one pass,
// in exact (big) integers.
func checkBucket(t *testing.T, g []event, events int64, period time.Duration, burst int64) {
	t.Helper()
	g = byRedisTime(g)
	p := big.NewInt(int64(period / time.Microsecond))
	ev := big.NewInt(events)
	// For each j: max over i ≤ j of (events·t_i - S_{i-1}·period) is kept in best.
	var best *big.Int
	s := big.NewInt(0) // S_{j}, permits up to and including j
	for j, e := range g {
		cand := new(big.Int).Sub(new(big.Int).Mul(ev, big.NewInt(e.at)), new(big.Int).Mul(s, p))
		if best == nil || cand.Cmp(best) > 0 {
			best = cand
		}
		s.Add(s, big.NewInt(int64(e.n)))
		// S_j·p - events·t_j + best ≤ burst·p ?
		lhs := new(big.Int).Sub(new(big.Int).Mul(s, p), new(big.Int).Mul(ev, big.NewInt(e.at)))
		lhs.Add(lhs, best)
		if lhs.Cmp(new(big.Int).Mul(big.NewInt(burst), p)) > 0 {
			t.Fatalf("grant %d at %d µs: over burst + rate·t for some interval ending there", j, e.at)
		}
	}
}

// slidingShare returns the permits granted in the first k whole windows
// [t0, t0+k·W) of the log (t0 its first grant, k as many as the log spans)
// over the most a strict log grants there, k·limit. The last, partial window
// is left out: the run's end cuts it short.
func slidingShare(g []event, w time.Duration, limit int) float64 {
	if len(g) == 0 {
		return 0
	}
	wu := int64(w / time.Microsecond)
	k := (g[len(g)-1].at - g[0].at) / wu
	if k == 0 {
		return 0
	}
	total := 0
	for _, e := range g {
		if e.at < g[0].at+k*wu {
			total += e.n
		}
	}
	return float64(total) / float64(int64(limit)*k)
}

func TestProcessesSlidingLog(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	saturation(t, func(attempt int) float64 {
		cfg := childConfig{Addrs: []string{server.Addr}, Key: uniqueKey(t) + strconv.Itoa(attempt), Alg: "sl", Limit: 30, Window: 100 * time.Millisecond, Dur: runFor(time.Second), G: 4}
		evs := runChildren(t, 3, cfg, "grants")
		g := grantsOf(evs)
		checkSliding(t, g, cfg.Window, cfg.Limit)
		reportErrors(t, evs)
		share := slidingShare(g, cfg.Window, cfg.Limit)
		t.Logf("%d grants by 3 processes; %.1f%% of the most the log allows", len(g), 100*share)
		return share
	})
}

func TestProcessesFixedWindow(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	saturation(t, func(attempt int) float64 {
		cfg := childConfig{Addrs: []string{server.Addr}, Key: uniqueKey(t) + strconv.Itoa(attempt), Alg: "fw", Limit: 25, Window: 100 * time.Millisecond, Dur: runFor(time.Second), G: 4}
		evs := runChildren(t, 3, cfg, "grants")
		g := grantsOf(evs)
		checkFixed(t, g, cfg.Window, cfg.Limit)
		reportErrors(t, evs)
		// Every full window between the first and the last is saturated.
		wu := int64(cfg.Window / time.Microsecond)
		first, last := g[0].at/wu, g[len(g)-1].at/wu
		counts := map[int64]int{}
		for _, e := range g {
			counts[e.at/wu] += e.n
		}
		total := 0
		for k := first + 1; k < last; k++ {
			total += counts[k]
		}
		share := float64(total) / float64(int64(cfg.Limit)*(last-first-1))
		t.Logf("%d grants; full windows got %.1f%% of the limit", len(g), 100*share)
		return share
	})
}

func TestProcessesTokenBucket(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	saturation(t, func(attempt int) float64 {
		cfg := childConfig{Addrs: []string{server.Addr}, Key: uniqueKey(t) + strconv.Itoa(attempt), Alg: "tb", Limit: 10, Rate: 300, Window: time.Second, Dur: runFor(time.Second), G: 4}
		evs := runChildren(t, 3, cfg, "grants")
		g := grantsOf(evs)
		checkBucket(t, g, int64(cfg.Rate), cfg.Window, int64(cfg.Limit))
		reportErrors(t, evs)
		span := float64(g[len(g)-1].at-g[0].at) / 1e6
		share := float64(len(g)) / (float64(cfg.Limit) + float64(cfg.Rate)*span)
		t.Logf("%d grants in %.3fs; %.1f%% of burst + rate·t", len(g), span, 100*share)
		return share
	})
}

// saturation runs one saturating run up to three times, until it reaches
// at least 95% of the limit: every run's bound is checked exactly (run
// fails t on any violation), but its throughput is measured on the real
// clock of a shared machine, where a load spike can starve the processes;
// a run under 95% is logged and repeated, three under 95% fail t.
func saturation(t *testing.T, run func(attempt int) float64) {
	t.Helper()
	for attempt := range 3 {
		share := run(attempt)
		if share >= 0.95 {
			return
		}
		t.Logf("attempt %d: saturating demand got %.1f%% of the limit; want at least 95%%", attempt, 100*share)
	}
	t.Fatal("saturating demand stayed under 95% of the limit in 3 runs")
}

// checkHeld fails t if at some instant the leases held (granted and not
// yet released in Redis) hold more than limit permits.
func checkHeld(t *testing.T, evs []event, limit int) {
	t.Helper()
	held := 0
	// At one instant, releases come before grants: Redis decided them in
	// some order, and a grant at the instant of a release may have used it.
	for i := 0; i < len(evs); {
		j := i
		for j < len(evs) && evs[j].at == evs[i].at {
			j++
		}
		for _, e := range evs[i:j] {
			if e.kind == "r" {
				held -= e.n
			}
		}
		for _, e := range evs[i:j] {
			if e.kind == "g" {
				held += e.n
			}
		}
		if held > limit {
			t.Fatalf("%d permits held at %d µs, over the limit %d", held, evs[i].at, limit)
		}
		i = j
	}
}

func TestProcessesConcurrency(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	cfg := childConfig{Addrs: []string{server.Addr}, Key: uniqueKey(t), Alg: "cc", Limit: 5, Dur: runFor(time.Second), G: 4, Hold: 5 * time.Millisecond, LeaseTTL: 2 * time.Second}
	evs := runChildren(t, 3, cfg, "grants")
	checkHeld(t, evs, cfg.Limit)
	g := grantsOf(evs)
	t.Logf("%d leases of 5ms by 12 goroutines in 3 processes sharing 5 permits", len(g))
	if len(g) < 200 {
		t.Fatalf("only %d leases granted", len(g))
	}
	reportErrors(t, evs)
}

func reportErrors(t *testing.T, evs []event) {
	t.Helper()
	for _, e := range evs {
		if e.kind == "e" {
			t.Errorf("a child saw %d errors: %s", e.n, e.text)
		}
	}
}

func TestProcessesCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if redistest.ServerPath() == "" {
		t.Skip("needs redis-server and redis-cli")
	}
	if _, err := exec.LookPath("redis-cli"); err != nil {
		t.Skip("needs redis-cli")
	}
	c := sharedCluster(t)
	key := uniqueKey(t)
	t.Run("sl", func(t *testing.T) {
		saturation(t, func(attempt int) float64 {
			cfg := childConfig{Addrs: c.Addrs, Cluster: true, Key: key + "-sl" + strconv.Itoa(attempt), Alg: "sl", Limit: 20, Window: 100 * time.Millisecond, Dur: runFor(time.Second), G: 4}
			evs := runChildren(t, 3, cfg, "grants")
			g := grantsOf(evs)
			checkSliding(t, g, cfg.Window, cfg.Limit)
			reportErrors(t, evs)
			share := slidingShare(g, cfg.Window, cfg.Limit)
			t.Logf("a strict log on a 3-master cluster: %d grants, %.1f%% of the limit", len(g), 100*share)
			return share
		})
	})
	t.Run("tb", func(t *testing.T) {
		// Many keys, so that the limits spread over the three masters.
		for i := range 3 {
			cfg := childConfig{Addrs: c.Addrs, Cluster: true, Key: key + "-tb" + strconv.Itoa(i), Alg: "tb", Limit: 20, Rate: 200, Window: time.Second, Dur: runFor(500 * time.Millisecond), G: 2}
			evs := runChildren(t, 3, cfg, "grants")
			g := grantsOf(evs)
			checkBucket(t, g, int64(cfg.Rate), cfg.Window, int64(cfg.Limit))
			reportErrors(t, evs)
			t.Logf("a bucket on a 3-master cluster: %d grants", len(g))
		}
	})
}
