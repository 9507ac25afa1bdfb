// Command pacing measures how evenly and how fast blocking limiters pace one
// goroutine on the real clock: for each contender and each rate it calls
// Acquire (or Wait, or Take) in a loop with burst 1 for -dur, records when
// every call started and returned, and prints a markdown table.
//
//	go run ./pacing                 # 100, 1k, 10k per second, 1 s, 3 runs
//	go run ./pacing -rates 1000 -runs 1 -v
//
// For every grant i the harness knows only an interval [start_i, ret_i] that
// contains the instant the limiter granted it. The columns are:
//
//   - achieved: grants returned within the first -dur, over rate·dur.
//   - max/10ms, max/100ms: the most grants whose whole intervals fit in one
//     closed window of that length (grants i..j with ret_j - start_i ≤ w),
//     against the bound 1 + ⌊rate·w⌋ of a burst-1 bucket (and of a pacer).
//     Counting whole intervals makes a count above the bound a proven
//     violation, never an artifact of a goroutine preempted after its grant.
//   - over bound: whether any window of ANY length provably held more than
//     1 + ⌊rate·t⌋ grants (checked in O(n) over all pairs i < j).
//   - gap lateness p50/p99/p99.9: ret_i - (ret_{i-1} + 1/rate). Positive:
//     the grant came later than one interval after the previous one;
//     negative: sooner (a bucket catching up after a late grant, or the
//     caller descheduled between a grant and reading the clock).
//   - early gaps: the share of consecutive returns less than 1/rate apart.
//     A limiter whose grant instant is earlier than the moment it releases
//     the caller (x/time/rate's reservations) shows these on every late timer.
//   - CPU s/s: the process's CPU time (user + system, from getrusage) per
//     second of pacing; 1.00 is one core busy the whole time.
//
// With -runs > 1 the table shows the median achieved ratio and lateness
// over the runs and the worst window counts; "over bound" is yes if any run
// exceeded.
package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rategate/rategate/limiter"
	"go.uber.org/ratelimit"
	"golang.org/x/time/rate"
)

type contender struct {
	name string
	// make returns the blocking call that takes one permit at r per second.
	make func(r int) (acquire func() error, err error)
}

const spin = 2 * time.Millisecond

var contenders = []contender{
	{"rategate LeakyBucket (default)", func(r int) (func() error, error) {
		l, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(r, time.Second)})
		return rategateAcquire(l), err
	}},
	{"rategate TokenBucket b=1 (default)", func(r int) (func() error, error) {
		l, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(r, time.Second), Burst: 1})
		return rategateAcquire(l), err
	}},
	{"rategate KeyedTokenBucket b=1, one key", func(r int) (func() error, error) {
		k, err := limiter.NewKeyedTokenBucket[string](limiter.TokenBucketOptions{Rate: limiter.Per(r, time.Second), Burst: 1})
		return rategateAcquire(k.For("host")), err
	}},
	{"rategate Chain(LeakyBucket, TokenBucket)", func(r int) (func() error, error) {
		p, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(r, time.Second)})
		if err != nil {
			return nil, err
		}
		tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(1<<30, time.Second), Burst: 1 << 20})
		return rategateAcquire(limiter.Chain(p, tb)), err
	}},
	{"rategate LeakyBucket Spin 2ms", func(r int) (func() error, error) {
		l, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(r, time.Second), Queue: limiter.QueueOptions{Spin: spin}})
		return rategateAcquire(l), err
	}},
	{"x/time/rate Wait b=1", func(r int) (func() error, error) {
		l := rate.NewLimiter(rate.Limit(r), 1)
		ctx := context.Background()
		return func() error { return l.Wait(ctx) }, nil
	}},
	{"uber ratelimit Take WithoutSlack", func(r int) (func() error, error) {
		l := ratelimit.New(r, ratelimit.WithoutSlack)
		return func() error { l.Take(); return nil }, nil
	}},
	// What Go timers alone give a pacer, which books each grant when its
	// waiter's timer fires: the option for programs that would rather save
	// the CPU of the precise end.
	{"rategate LeakyBucket PlainTimers", func(r int) (func() error, error) {
		l, err := limiter.NewLeakyBucket(limiter.LeakyBucketOptions{Rate: limiter.Per(r, time.Second), Queue: limiter.QueueOptions{PlainTimers: true}})
		return rategateAcquire(l), err
	}},
	// Not a limiter: the machine's ceiling. It polls the clock with
	// runtime.Gosched between polls, as rategate's precise wait does, and grants
	// one interval after the previous grant (no catching up, as a pacer).
	{"reference: bare spin loop", func(r int) (func() error, error) {
		interval := time.Second / time.Duration(r)
		origin := time.Now()
		next := time.Duration(0)
		return func() error {
			for {
				now := time.Since(origin)
				if now >= next {
					next = now + interval
					return nil
				}
				runtime.Gosched()
			}
		}, nil
	}},
}

func rategateAcquire(l limiter.Limiter) func() error {
	ctx := context.Background()
	return func() error {
		_, err := l.Acquire(ctx, 1)
		return err
	}
}

type result struct {
	achieved          float64 // grants in dur / (rate·dur)
	max10, max100     int     // most grants provably inside a 10 ms / 100 ms window
	over              bool    // some window of some length provably exceeded 1 + rate·t
	worstExcess       int64   // the largest excess, in grants
	p50, p99, p999    float64 // gap lateness, µs
	early             float64 // fraction of gaps shorter than 1/rate
	grants            int
	bound10, bound100 int
	cpu               float64 // CPU seconds per second of pacing
}

// run paces one goroutine at r per second for dur and measures it.
func run(acquire func() error, r int, dur time.Duration) (result, error) {
	capacity := int(float64(r)*dur.Seconds()*1.2) + 16
	starts := make([]int64, 0, capacity)
	rets := make([]int64, 0, capacity)
	runtime.GC()
	cpu0 := cpuTime()
	origin := time.Now()
	for {
		s := time.Since(origin)
		if err := acquire(); err != nil {
			return result{}, err
		}
		e := time.Since(origin)
		if e >= dur || len(rets) == cap(rets) {
			break
		}
		starts = append(starts, int64(s))
		rets = append(rets, int64(e))
	}
	wall := time.Since(origin)
	res := analyze(starts, rets, r, dur)
	res.cpu = (cpuTime() - cpu0).Seconds() / wall.Seconds()
	return res, nil
}

func analyze(starts, rets []int64, r int, dur time.Duration) result {
	const sec = int64(time.Second)
	rate := int64(r)
	n := len(rets)
	res := result{grants: n, achieved: float64(n) / (float64(r) * dur.Seconds())}
	window := func(w int64) (most, bound int) {
		// Grants i..j fit in a closed window of length w when ret_j - start_i <= w.
		i := 0
		for j := range n {
			for i <= j && rets[j]-starts[i] > w {
				i++
			}
			if j >= i {
				most = max(most, j-i+1)
			}
		}
		return most, 1 + int(rate*w/sec)
	}
	res.max10, res.bound10 = window(int64(10 * time.Millisecond))
	res.max100, res.bound100 = window(int64(100 * time.Millisecond))

	// Grants i..j (j-i+1 of them) lie in a window no longer than
	// ret_j - start_i; the bound allows 1 + ⌊rate·t/1s⌋. A violation is
	// j - i > rate·(ret_j - start_i)/1s, i.e. j·1s - rate·ret_j > i·1s - rate·start_i.
	minA := int64(math.MaxInt64)
	for j := range n {
		if j > 0 {
			a := int64(j-1)*sec - rate*starts[j-1]
			minA = min(minA, a)
			b := int64(j)*sec - rate*rets[j]
			if b > minA {
				res.over = true
				res.worstExcess = max(res.worstExcess, (b-minA+sec-1)/sec)
			}
		}
	}

	interval := float64(sec) / float64(r)
	gaps := make([]float64, 0, n)
	for i := 1; i < n; i++ {
		gaps = append(gaps, (float64(rets[i]-rets[i-1])-interval)/1e3)
	}
	early := 0
	for _, g := range gaps {
		if g < 0 {
			early++
		}
	}
	if len(gaps) > 0 {
		res.early = float64(early) / float64(len(gaps))
	}
	slices.Sort(gaps)
	res.p50, res.p99, res.p999 = quantile(gaps, 0.5), quantile(gaps, 0.99), quantile(gaps, 0.999)
	return res
}

func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func main() {
	ratesFlag := flag.String("rates", "100,1000,10000", "comma-separated target rates, per second")
	dur := flag.Duration("dur", time.Second, "how long each run paces")
	runs := flag.Int("runs", 3, "runs per contender and rate; the table shows medians and worst cases")
	only := flag.String("only", "", "run only contenders whose name contains this")
	verbose := flag.Bool("v", false, "print every run to stderr")
	flag.Parse()

	var rates []int
	for f := range strings.SplitSeq(*ratesFlag, ",") {
		r, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || r <= 0 {
			fmt.Fprintf(os.Stderr, "pacing: bad rate %q\n", f)
			os.Exit(2)
		}
		rates = append(rates, r)
	}

	fmt.Printf("Pacing one goroutine, burst 1, %v per run, median of %d runs (GOMAXPROCS=%d, %d CPUs, load average at start: %s).\n\n",
		*dur, *runs, runtime.GOMAXPROCS(0), runtime.NumCPU(), loadavg())
	fmt.Println("| limiter | target/s | achieved | max in 10 ms (bound) | max in 100 ms (bound) | over bound | gap lateness p50 | p99 | p99.9 | early gaps | CPU s/s |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | :---: | ---: | ---: | ---: | ---: | ---: |")
	failed := false
	for _, r := range rates {
		for _, c := range contenders {
			if *only != "" && !strings.Contains(c.name, *only) {
				continue
			}
			var ach, p50, p99, p999, early, cpu []float64
			var worst result
			ok := true
			for k := 0; k < *runs; k++ {
				acquire, err := c.make(r)
				if err != nil {
					fmt.Fprintf(os.Stderr, "pacing: %s at %d/s: %v\n", c.name, r, err)
					ok, failed = false, true
					break
				}
				res, err := run(acquire, r, *dur)
				if err != nil {
					fmt.Fprintf(os.Stderr, "pacing: %s at %d/s: %v\n", c.name, r, err)
					ok, failed = false, true
					break
				}
				if *verbose {
					fmt.Fprintf(os.Stderr, "%s %d/s run %d: %+v\n", c.name, r, k, res)
				}
				ach = append(ach, res.achieved)
				p50 = append(p50, res.p50)
				p99 = append(p99, res.p99)
				p999 = append(p999, res.p999)
				early = append(early, res.early)
				cpu = append(cpu, res.cpu)
				worst.max10 = max(worst.max10, res.max10)
				worst.max100 = max(worst.max100, res.max100)
				worst.bound10, worst.bound100 = res.bound10, res.bound100
				worst.over = worst.over || res.over
				worst.worstExcess = max(worst.worstExcess, res.worstExcess)
			}
			if !ok {
				continue
			}
			over := "no"
			if worst.over {
				over = fmt.Sprintf("**YES** (+%d)", worst.worstExcess)
			}
			fmt.Printf("| %s | %d | %.1f%% | %d (%d) | %d (%d) | %s | %s | %s | %s | %.1f%% | %.2f |\n",
				c.name, r, 100*median(ach), worst.max10, worst.bound10, worst.max100, worst.bound100, over,
				us(median(p50)), us(median(p99)), us(median(p999)), 100*median(early), median(cpu))
		}
	}
	fmt.Printf("\nLoad average at end: %s.\n", loadavg())
	if failed {
		os.Exit(1)
	}
}

// loadavg returns the 1, 5 and 15 minute load averages, where Linux says.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func us(v float64) string {
	if math.Abs(v) >= 1000 {
		return fmt.Sprintf("%.2f ms", v/1000)
	}
	return fmt.Sprintf("%.1f µs", v)
}
