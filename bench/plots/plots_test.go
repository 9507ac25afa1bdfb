package plots

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/rategate/rategate/limiter"
	"github.com/rategate/rategate/pipe"
)

var update = flag.Bool("update", false, "rewrite the pictures in docs/ instead of comparing them with a new run")

// TestPictures runs each picture's scenario on synctest's virtual clock,
// checks the bounds in its data, and compares the SVG with the one committed
// under docs/: a change that moves a grant or a byte fails here until the
// pictures are regenerated with -update. (A synctest bubble ends only when
// every goroutine it started has ended, so nothing leaks.)
func TestPictures(t *testing.T) {
	for _, pic := range []struct {
		file string
		run  func(t *testing.T) Figure
	}{
		{"limiters.svg", limitersFigure},
		{"pipe.svg", pipeFigure},
		{"adaptive.svg", adaptiveFigure},
	} {
		t.Run(pic.file, func(t *testing.T) {
			var fig Figure
			synctest.Test(t, func(t *testing.T) { fig = pic.run(t) })
			got := fig.SVG()
			path := filepath.Join("..", "..", "docs", pic.file)
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			// Also write it aside, so that a failure can be looked at.
			fresh := filepath.Join(t.TempDir(), pic.file)
			if err := os.WriteFile(fresh, got, 0o644); err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v: generate it with `cd bench && go test ./plots/ -update`", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("docs/%s differs from a new run: regenerate it with `cd bench && go test ./plots/ -update`, look at it, and commit it", pic.file)
			}
		})
	}
}

// The bursty demand of the limiters picture: 25 requests at 0 s, 15 at 3 s,
// then one every 50 ms (20 a second, twice the limit) from 5 s to 7 s.
func demand() []time.Duration {
	var at []time.Duration
	for range 25 {
		at = append(at, 0)
	}
	for range 15 {
		at = append(at, 3*time.Second)
	}
	for t := 5 * time.Second; t < 7*time.Second; t += 50 * time.Millisecond {
		at = append(at, t)
	}
	return at
}

// grants makes each request of the demand at its instant (from now) in its
// own goroutine, waits for all of them to be granted by acquire, and
// returns the instants of the grants.
func grants(t *testing.T, arrivals []time.Duration, acquire func(context.Context) error) []time.Duration {
	start := time.Now()
	var (
		mu  sync.Mutex
		out []time.Duration
		wg  sync.WaitGroup
	)
	for _, a := range arrivals {
		wg.Go(func() {
			time.Sleep(a)
			if err := acquire(t.Context()); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			out = append(out, time.Since(start))
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(out)
	return out
}

// inWindow returns, as a step line from 0 to end, how many of the instants
// ts lie in the last window (t-w, t] at every t, and the most at any t up to
// end.
func inWindow(ts []time.Duration, w, end time.Duration) ([]Point, int) {
	type event struct {
		at    time.Duration
		delta int
	}
	var evs []event
	for _, t := range ts {
		evs = append(evs, event{t, +1}, event{t + w, -1})
	}
	slices.SortFunc(evs, func(a, b event) int { return int(a.at - b.at) })
	pts := []Point{{0, 0}}
	n, most := 0, 0
	for i := 0; i < len(evs) && evs[i].at <= end; {
		at := evs[i].at
		pts = append(pts, Point{at.Seconds(), float64(n)})
		for ; i < len(evs) && evs[i].at == at; i++ {
			n += evs[i].delta
		}
		most = max(most, n)
		pts = append(pts, Point{at.Seconds(), float64(n)})
	}
	return append(pts, Point{end.Seconds(), float64(n)}), most
}

func seconds(ds []time.Duration) []float64 {
	s := make([]float64, len(ds))
	for i, d := range ds {
		s[i] = d.Seconds()
	}
	return s
}

const (
	gray = "#9a9a9a"
	red  = "#d62728"
)

// limitersFigure: the same bursty demand through a sliding log, a token
// bucket and golang.org/x/time/rate, each allowing 10 a second; every
// request waits for its grant.
func limitersFigure(t *testing.T) Figure {
	const (
		limit  = 10
		window = time.Second
		end    = 10 * time.Second
	)
	wants := demand()
	demandLine, _ := inWindow(wants, window, end)

	sl, err := limiter.NewSlidingLog(limiter.SlidingLogOptions{Limit: limit, Window: window})
	if err != nil {
		t.Fatal(err)
	}
	defer sl.Close()
	tb, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(limit, window), Burst: limit})
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	xr := rate.NewLimiter(rate.Limit(limit), limit)

	runs := []struct {
		title string
		color string
		get   func(context.Context) error
		bound int // drawn
		most  int // the most grants in a window (t-1s, t]
		label string
	}{
		{"limiter.NewSlidingLog: Limit 10, Window 1 s", "#1f77b4",
			func(ctx context.Context) error { _, err := sl.Acquire(ctx, 1); return err },
			limit, limit, "bound: 10 in any 1 s"},
		// A bucket's bound is Burst + Rate·t over a closed interval of
		// length t; a half-open window of 1 s holds one grant fewer.
		{"limiter.NewTokenBucket: Rate 10/s, Burst 10", "#2ca02c",
			func(ctx context.Context) error { _, err := tb.Acquire(ctx, 1); return err },
			2 * limit, 2*limit - 1, "bound: Burst + Rate·1 s = 20"},
		{"golang.org/x/time/rate: NewLimiter(10, 10), Wait", "#ff7f0e",
			xr.Wait, 2 * limit, 2*limit - 1, "bound: burst + r·1 s = 20"},
	}
	fig := Figure{
		Title:  "Grants in the last second: 25 requests at 0 s, 15 at 3 s, 20 a second from 5 to 7 s",
		XLabel: "time (s)",
		XMax:   end.Seconds(),
		XStep:  1,
	}
	for _, r := range runs {
		gs := grants(t, wants, r.get)
		if len(gs) != len(wants) {
			t.Fatalf("%s: %d grants for %d requests", r.title, len(gs), len(wants))
		}
		if last := gs[len(gs)-1]; last > end-window {
			t.Errorf("%s: the last grant at %v: the picture ends too soon", r.title, last)
		}
		line, most := inWindow(gs, window, end)
		if most != r.most {
			t.Errorf("%s: at most %d grants in a 1 s window, want %d", r.title, most, r.most)
		}
		fig.Panels = append(fig.Panels, Panel{
			Title:  r.title,
			YLabel: "in the last second",
			YMax:   30,
			YStep:  5,
			Lines: []Line{
				{Label: "grants", Color: r.color, Width: 2, Points: line, Ticks: seconds(gs)},
				{Label: "requests", Color: gray, Points: demandLine},
				{Label: r.label, Color: red, Dashed: true, Points: []Point{{0, float64(r.bound)}, {end.Seconds(), float64(r.bound)}}},
			},
		})
	}
	return fig
}

// zeros is an endless reader of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// pipeFigure: a pipe.Reader drained as fast as it allows: 1 MiB/s with a
// 64 KiB burst, 2 MiB/s from 3 s (SetRate), and a reader that stops from 5
// to 6 s.
func pipeFigure(t *testing.T) Figure {
	const (
		mib          = 1 << 20
		burst        = 64 << 10
		end          = 8 * time.Second
		faster       = 3 * time.Second
		stop, resume = 5 * time.Second, 6 * time.Second
		avg          = 250 * time.Millisecond
	)
	lim, err := limiter.NewTokenBucket(limiter.TokenBucketOptions{Rate: limiter.Per(mib, time.Second), Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	defer lim.Close()
	r := pipe.NewReader(zeros{}, lim)
	buf := make([]byte, 32<<10)

	type read struct {
		at    time.Duration
		total int64 // bytes read by then
	}
	var reads []read
	var total int64
	start := time.Now()
	for now := time.Duration(0); now < end; now = time.Since(start) {
		if now >= faster && lim.Rate() != limiter.Per(2*mib, time.Second) {
			if err := lim.SetRate(limiter.Per(2*mib, time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if now >= stop && now < resume {
			time.Sleep(resume - now)
		}
		n, err := r.Read(buf)
		if err != nil {
			t.Fatal(err)
		}
		total += int64(n)
		reads = append(reads, read{time.Since(start), total})
	}

	// The bound from 0: Burst + the rate integrated over [0, t].
	allowed := func(at time.Duration) float64 {
		b := float64(burst) + float64(min(at, faster))/float64(time.Second)*mib
		if at > faster {
			b += float64(at-faster) / float64(time.Second) * 2 * mib
		}
		return b
	}
	bytesLine := []Point{{0, 0}}
	prev := int64(0)
	for _, rd := range reads {
		if float64(rd.total) > allowed(rd.at) {
			t.Errorf("at %v: %d bytes read, over the bound %.0f", rd.at, rd.total, allowed(rd.at))
		}
		bytesLine = append(bytesLine, Point{rd.at.Seconds(), float64(prev) / mib}, Point{rd.at.Seconds(), float64(rd.total) / mib})
		prev = rd.total
	}
	boundLine := []Point{{0, burst / float64(mib)}, {faster.Seconds(), allowed(faster) / mib}, {end.Seconds(), allowed(end) / mib}}

	// The rate over the last 250 ms, every 10 ms.
	readBy := func(at time.Duration) int64 { // bytes read at or before at
		i, _ := slices.BinarySearchFunc(reads, at, func(r read, at time.Duration) int {
			if r.at <= at {
				return -1
			}
			return 1
		})
		if i == 0 {
			return 0
		}
		return reads[i-1].total
	}
	var rateLine []Point
	for at := avg; at <= end; at += 10 * time.Millisecond {
		mibps := float64(readBy(at)-readBy(at-avg)) / avg.Seconds() / mib
		rateLine = append(rateLine, Point{at.Seconds(), mibps})
		// Where the reader keeps up and no burst is in the window, the
		// rate is the limit's.
		want := 1.0
		if at > faster {
			want = 2
		}
		steady := at >= time.Second && at <= faster || at >= faster+avg && at <= stop || at >= resume+time.Second
		if steady && (mibps < 0.99*want || mibps > 1.01*want) {
			t.Errorf("at %v: %.3f MiB/s over the last %v, want %.0f", at, mibps, avg, want)
		}
	}
	limitLine := []Point{{0, 1}, {faster.Seconds(), 1}, {faster.Seconds(), 2}, {end.Seconds(), 2}}

	return Figure{
		Title:  "pipe.Reader at 1 MiB/s, then 2 MiB/s from 3 s; the reader pauses from 5 to 6 s",
		XLabel: "time (s)",
		XMax:   end.Seconds(),
		XStep:  1,
		Panels: []Panel{
			{
				Title:  fmt.Sprintf("Bytes read, against the most a token bucket allows (burst %d KiB)", burst>>10),
				YLabel: "MiB",
				YMax:   14,
				YStep:  2,
				Lines: []Line{
					{Label: "bytes read", Color: "#1f77b4", Width: 2, Points: bytesLine},
					{Label: "Burst + Rate·t", Color: red, Dashed: true, Points: boundLine},
				},
			},
			{
				Title:  "Rate, averaged over the last 250 ms",
				YLabel: "MiB/s",
				YMax:   3,
				YStep:  0.5,
				Lines: []Line{
					{Label: "measured", Color: "#1f77b4", Width: 2, Points: rateLine},
					{Label: "the limit (TokenBucket.SetRate at 3 s)", Color: red, Dashed: true, Points: limitLine},
				},
			},
		},
	}
}
