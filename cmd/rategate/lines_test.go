package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

func numberedLines(from, to int) []byte {
	var b strings.Builder
	for i := from; i < to; i++ {
		fmt.Fprintf(&b, "line %d %s\n", i, strings.Repeat("x", i%50))
	}
	return []byte(b.String())
}

// TestLinesBound feeds rategate lines faster than its rate for 3 s, stops
// for 1.2 s, then writes many lines at once, and checks on the real clock,
// for each -window: every line arrives whole and in order; no window of a
// second holds more than N lines; with smooth, no shorter window t holds
// more than BURST + N·t (BURST by default a tenth of N: 4); and the first 3 s carry at
// least 98% of the rate.
func TestLinesBound(t *testing.T) {
	t.Parallel()
	const rate = 40 // lines per second
	first, second := numberedLines(0, rate*32/10), numberedLines(rate*32/10, rate*44/10)
	for _, window := range []string{"smooth", "strict"} {
		t.Run(window, func(t *testing.T) {
			t.Parallel()
			realClock(t, slack, func(c *clock) {
				p := start(t, true, "lines", "-rate", fmt.Sprintf("%d/s", rate), "-window", window)
				fed := p.feed([]feedPart{{0, first}, {1200 * time.Millisecond, second}})
				if code := p.wait(t); code != 0 {
					t.Fatalf("exit status %d, stderr:\n%s", code, p.stderr.String())
				}
				if err := <-fed; err != nil {
					t.Fatal(err)
				}
				if want := string(first) + string(second); string(p.out) != want {
					t.Fatalf("the lines that arrived differ from those written:\n%s", p.out)
				}
				as := p.stamps
				windows := []time.Duration{time.Second}
				if window == "smooth" {
					windows = append(windows, 250*time.Millisecond)
				}
				for _, w := range windows {
					bound := min(rate, rate/10+int(math.Ceil(rate*w.Seconds())))
					got := maxInWindow(as, w-slack)
					t.Logf("most in a window of %v-%v: %d lines (bound %d)", w, slack, got, bound)
					if got > bound {
						c.errorf("%d lines in a window of %v-%v, over the bound of %d", got, w, slack, bound)
					}
				}
				t0 := as[0].at
				got := countIn(as, t0, t0+3*time.Second-slack)
				t.Logf("first 3 s: %d lines, %.1f%% of the rate", got, float64(got)*100/(3*rate))
				if got*100 < 3*rate*98 {
					c.errorf("%d lines in the first 3 s, under 98%% of the rate", got)
				}
			})
		})
	}
}

// TestLinesWhole: lines longer than any buffer, a last line without a
// newline and empty lines pass unchanged.
func TestLinesWhole(t *testing.T) {
	t.Parallel()
	in := "short\n\n" + strings.Repeat("long", 100<<10) + "\n\nno newline at the end"
	r := runBin(t, in, "lines", "-rate", "1000/s", "-burst", "10")
	if r.code != 0 || r.stdout != in {
		t.Fatalf("exit status %d, %d bytes out of %d in, stderr %q", r.code, len(r.stdout), len(in), r.stderr)
	}
}

func TestLinesBadInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"lines"}, "-rate is required"},
		{[]string{"lines", "-rate", "5"}, "-rate 5"},
		{[]string{"lines", "-rate", "0/s"}, "-rate 0/s"},
		{[]string{"lines", "-rate", "5/s", "-window", "loose"}, "want smooth or strict"},
		{[]string{"lines", "-rate", "5/s", "-window", "strict", "-burst", "3"}, "-burst is for -window smooth"},
		{[]string{"lines", "-rate", "5/s", "-burst", "-1"}, "-burst -1"},
		{[]string{"lines", "-rate", "5/s", "file"}, "stdin only"},
	} {
		r := runBin(t, "stdin\n", c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || r.stdout != "" {
			t.Errorf("rategate %q: exit status %d, stdout %q, stderr %q; want 2, nothing, and %q",
				c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
}
