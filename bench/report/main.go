// Command report turns `benchstat -format csv` output of this module's
// benchmarks into markdown: one table per benchmark group with the median
// ns/op and allocs/op at each GOMAXPROCS, then the ratios rategate/peer.
//
//	benchstat -format csv results/bench.txt | go run ./report
package main

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

// key is one benchmark row: group ("Admit"), implementation ("xrate") and
// GOMAXPROCS (from the -N suffix; 1 when absent).
type key struct {
	group, impl string
	procs       int
}

type table struct {
	values map[key]map[string]float64 // unit -> median
	groups []string
	impls  map[string][]string
	procs  []int
}

func parse(r io.Reader) (*table, error) {
	t := &table{values: map[key]map[string]float64{}, impls: map[string][]string{}}
	sc := bufio.NewScanner(r)
	unit := ""
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, ",") && !strings.Contains(line, "/") {
			continue // goos:, goarch:, blank lines, geomean
		}
		rec, err := csv.NewReader(strings.NewReader(line)).Read()
		if err != nil || len(rec) < 2 {
			continue
		}
		if rec[0] == "" {
			if len(rec) >= 3 && rec[2] == "CI" {
				unit = rec[1]
			}
			continue
		}
		name := rec[0]
		v, err := strconv.ParseFloat(rec[1], 64)
		if err != nil || unit == "" {
			continue
		}
		procs := 1
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if p, err := strconv.Atoi(name[i+1:]); err == nil {
				procs, name = p, name[:i]
			}
		}
		group, impl, ok := strings.Cut(name, "/")
		if !ok {
			continue
		}
		k := key{group, impl, procs}
		if t.values[k] == nil {
			t.values[k] = map[string]float64{}
		}
		t.values[k][unit] = v
		if !slices.Contains(t.groups, group) {
			t.groups = append(t.groups, group)
		}
		if !slices.Contains(t.impls[group], impl) {
			t.impls[group] = append(t.impls[group], impl)
		}
		if !slices.Contains(t.procs, procs) {
			t.procs = append(t.procs, procs)
		}
	}
	slices.Sort(t.procs)
	return t, sc.Err()
}

func (t *table) get(group, impl string, procs int, unit string) float64 {
	if m := t.values[key{group, impl, procs}]; m != nil {
		if v, ok := m[unit]; ok {
			return v
		}
	}
	return math.NaN()
}

func ns(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.1f", v*1e9)
}

func num(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// pairs are the ratios worth reading: each rategate implementation against
// the peer that does the same job, by sec/op unless unit says otherwise. An
// empty group matches every group.
var pairs = []struct{ group, rg, peer, unit string }{
	{"", "rategate-tokenbucket", "xrate", ""},
	{"", "rategate-tokenbucket", "xrate-inf", ""},
	{"", "rategate-tokenbucket", "uber", ""},
	{"", "rategate-tokenbucket", "clock-since", ""},
	{"", "rategate-leakybucket", "uber", ""},
	{"", "rategate-leakybucket", "xrate", ""},
	{"", "rategate-concurrency", "semaphore", ""},
	{"", "rategate-fixedwindow", "xrate", ""},
	{"", "rategate-slidingwindow", "xrate", ""},
	{"", "rategate-slidinglog", "xrate", ""},
	{"", "rategate-keyed-1M", "map-lookup-1M", ""},
	{"", "rategate-keyed-1M", "map-mutex-clock-1M", ""},
	{"ChanPair", "chan-unlimited", "gochan", ""},
	{"ChanPair", "chan-unlimited", "xrate-wait-gochan", ""},
	{"ChanPair", "chan-tokenbucket", "xrate-wait-gochan-huge", ""},
	{"ChanFlow", "chan-concurrency-bounded", "gochan", ""},
	{"PipeUnlimited", "rategate", "plain", ""},
	{"PipeRate", "rategate", "juju", ""},
	{"Pool", "rategate", "errgroup", "sec/task"},
	{"Pool", "rategate", "conc", "sec/task"},
	{"Pool", "rategate", "pond", "sec/task"},
	{"Pool", "rategate-queue", "pond", "sec/task"},
}

// split parts an implementation's name from its setting: in
// "impl=rategate/workers=2" or "burst=32KiB/juju" the implementation is
// "rategate" or "juju", and the setting "workers=2" or "burst=32KiB".
func split(impl string) (name, setting string) {
	segs := strings.Split(impl, "/")
	at := len(segs) - 1
	for i, s := range segs {
		if v, ok := strings.CutPrefix(s, "impl="); ok {
			segs[i], at = v, i
			break
		}
	}
	name = segs[at]
	return name, strings.Join(slices.Delete(segs, at, at+1), "/")
}

// extraUnits are the units of group other than time, bytes and allocations
// (a benchmark's own metrics, such as %limit), in order of appearance.
func (t *table) extraUnits(group string) []string {
	var us []string
	for _, impl := range t.impls[group] {
		for _, p := range t.procs {
			for u := range t.values[key{group, impl, p}] {
				if u != "sec/op" && u != "B/op" && u != "allocs/op" && !slices.Contains(us, u) {
					us = append(us, u)
				}
			}
		}
	}
	slices.Sort(us)
	return us
}

func main() {
	t, err := parse(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
	if len(t.groups) == 0 {
		fmt.Fprintln(os.Stderr, "report: no benchmarks in input (want benchstat -format csv)")
		os.Exit(1)
	}
	for _, g := range t.groups {
		fmt.Printf("#### %s\n\n", g)
		fmt.Print("| implementation |")
		for _, p := range t.procs {
			fmt.Printf(" ns/op (GOMAXPROCS=%d) |", p)
		}
		extra := t.extraUnits(g)
		for _, u := range extra {
			for _, p := range t.procs {
				fmt.Printf(" %s (GOMAXPROCS=%d) |", strings.Replace(u, "sec/", "ns/", 1), p)
			}
		}
		fmt.Print(" B/op | allocs/op |\n| --- |")
		for range t.procs {
			fmt.Print(" ---: |")
		}
		for range len(extra) * len(t.procs) {
			fmt.Print(" ---: |")
		}
		fmt.Println(" ---: | ---: |")
		for _, impl := range t.impls[g] {
			fmt.Printf("| %s |", impl)
			for _, p := range t.procs {
				fmt.Printf(" %s |", ns(t.get(g, impl, p, "sec/op")))
			}
			for _, u := range extra {
				for _, p := range t.procs {
					if strings.HasPrefix(u, "sec/") {
						fmt.Printf(" %s |", ns(t.get(g, impl, p, u)))
					} else {
						fmt.Printf(" %s |", short(t.get(g, impl, p, u)))
					}
				}
			}
			// Allocations do not depend on GOMAXPROCS here; show the worst.
			b, a := math.NaN(), math.NaN()
			for _, p := range t.procs {
				b = nanMax(b, t.get(g, impl, p, "B/op"))
				a = nanMax(a, t.get(g, impl, p, "allocs/op"))
			}
			fmt.Printf(" %s | %s |\n", num(b), num(a))
		}
		fmt.Println()
		var rows []string
		for _, pr := range pairs {
			if pr.group != "" && pr.group != g {
				continue
			}
			for _, impl := range t.impls[g] {
				name, setting := split(impl)
				if name != pr.rg {
					continue
				}
				peer := pr.peer
				if setting != "" {
					peer = join(g, pr.peer, setting, t.impls[g])
				}
				if !slices.Contains(t.impls[g], peer) {
					continue
				}
				unit := cmp.Or(pr.unit, "sec/op")
				label := pr.rg + " / " + pr.peer
				if unit != "sec/op" {
					label += " (" + strings.Replace(unit, "sec/", "ns/", 1) + ")"
				}
				if setting != "" {
					label = setting + ": " + label
				}
				row := fmt.Sprintf("| %s |", label)
				for _, p := range t.procs {
					a, b := t.get(g, impl, p, unit), t.get(g, peer, p, unit)
					row += fmt.Sprintf(" %.2f |", a/b)
				}
				rows = append(rows, row)
			}
		}
		if len(rows) > 0 {
			fmt.Print("| ratio (lower is better for rategate) |")
			for _, p := range t.procs {
				fmt.Printf(" GOMAXPROCS=%d |", p)
			}
			fmt.Print("\n| --- |")
			for range t.procs {
				fmt.Print(" ---: |")
			}
			fmt.Println()
			for _, r := range rows {
				fmt.Println(r)
			}
			fmt.Println()
		}
	}
}

// join finds the implementation of group named name with the given setting.
func join(group, name, setting string, impls []string) string {
	for _, impl := range impls {
		if n, s := split(impl); n == name && s == setting {
			return impl
		}
	}
	return ""
}

// short formats a benchmark's own metric with three significant digits.
func short(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	return strconv.FormatFloat(v, 'g', 3, 64)
}

func nanMax(a, b float64) float64 {
	if math.IsNaN(a) {
		return b
	}
	if math.IsNaN(b) {
		return a
	}
	return max(a, b)
}
