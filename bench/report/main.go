// Command report turns `benchstat -format csv` output of this module's
// benchmarks into markdown: one table per benchmark group with the median
// ns/op and allocs/op at each GOMAXPROCS, then the ratios rategate/peer.
//
//	benchstat -format csv results/bench.txt | go run ./report
package main

import (
	"bufio"
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

// pairs are the ratios worth reading: each rategate limiter against the
// peer that does the same job.
var pairs = []struct{ rg, peer string }{
	{"rategate-tokenbucket", "xrate"},
	{"rategate-tokenbucket", "xrate-inf"},
	{"rategate-tokenbucket", "uber"},
	{"rategate-tokenbucket", "clock-since"},
	{"rategate-leakybucket", "uber"},
	{"rategate-leakybucket", "xrate"},
	{"rategate-concurrency", "semaphore"},
	{"rategate-fixedwindow", "xrate"},
	{"rategate-slidingwindow", "xrate"},
	{"rategate-slidinglog", "xrate"},
	{"rategate-keyed-1M", "map-lookup-1M"},
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
		fmt.Print(" B/op | allocs/op |\n| --- |")
		for range t.procs {
			fmt.Print(" ---: |")
		}
		fmt.Println(" ---: | ---: |")
		for _, impl := range t.impls[g] {
			fmt.Printf("| %s |", impl)
			for _, p := range t.procs {
				fmt.Printf(" %s |", ns(t.get(g, impl, p, "sec/op")))
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
			if !slices.Contains(t.impls[g], pr.rg) || !slices.Contains(t.impls[g], pr.peer) {
				continue
			}
			row := fmt.Sprintf("| %s / %s |", pr.rg, pr.peer)
			for _, p := range t.procs {
				a, b := t.get(g, pr.rg, p, "sec/op"), t.get(g, pr.peer, p, "sec/op")
				row += fmt.Sprintf(" %.2f |", a/b)
			}
			rows = append(rows, row)
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

func nanMax(a, b float64) float64 {
	if math.IsNaN(a) {
		return b
	}
	if math.IsNaN(b) {
		return a
	}
	return max(a, b)
}
