#!/bin/sh
# run.sh reproduces every number in README.md: the benchmarks (6 runs at
# GOMAXPROCS 1 and 2, summarized by benchstat as medians), the ratios
# rategate/peer, the keyed limiter's memory, the pipe's real-clock
# throughput, the adaptive limiters against their peers (on virtual time)
# and the cost of their reports, rategate pipe against pv -L, and the
# pacing harness. It prints
# markdown and keeps the raw files in $OUT (default: results/). About 50
# minutes on 2 cores, the pv comparison (needs pv) included.
#
#   ./run.sh                 # everything
#   BENCH=Reject ./run.sh    # only benchmarks matching Reject (and pacing)
#   PACING=0 ./run.sh        # no pacing harness
#   CYCLES=1 ./run.sh        # also CPU cycles per op of the serial cases under
#                            # perf stat (insensitive to other processes' load)
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-results}
BENCH=${BENCH:-.}
COUNT=${COUNT:-6}
PACING=${PACING:-1}
CYCLES=${CYCLES:-0}
mkdir -p "$OUT"

if ! command -v benchstat >/dev/null 2>&1; then
	go install golang.org/x/perf/cmd/benchstat@latest
	PATH="$(go env GOPATH)/bin:$PATH"
fi

echo "## Machine"
echo
echo '```'
uname -srm
grep -m1 'model name' /proc/cpuinfo 2>/dev/null || true
echo "CPUs: $(getconf _NPROCESSORS_ONLN)  clocksource: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null || echo unknown)"
go version
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)"
echo '```'
echo

go test -run '^$' -bench "$BENCH" -benchmem -cpu 1,2 -count "$COUNT" . >"$OUT/bench.txt"
benchstat "$OUT/bench.txt" >"$OUT/benchstat.txt"
benchstat -format csv "$OUT/bench.txt" 2>/dev/null | go run ./report >"$OUT/report.md"

echo "## Benchmarks (benchstat medians of $COUNT runs; load average after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown))"
echo
cat "$OUT/report.md"
echo "benchstat's own summary, with confidence intervals, is in $OUT/benchstat.txt."
echo

if [ "$CYCLES" != 0 ] && command -v perf >/dev/null 2>&1; then
	# Wall-clock ns/op counts the time other processes hold the CPU; cycles
	# spent in this process's user mode, and its CPU time (task-clock, which
	# includes the binary's start, under 0.1 ns/op here), do not.
	# 20,000,000 calls each, one P.
	go test -c -o "$OUT/bench.test" .
	echo "## CPU cycles per call (perf stat, user mode, GOMAXPROCS=1, 2e7 calls)"
	echo
	{
		echo "| benchmark | cycles/op | instructions/op | CPU ns/op |"
		echo "| --- | ---: | ---: | ---: |"
		for b in Admit/clock-since Admit/rategate-tokenbucket Admit/xrate Admit/xrate-inf Admit/uber \
			Admit/rategate-leakybucket Admit/rategate-concurrency Admit/semaphore \
			Reject/rategate-tokenbucket Reject/xrate Reject/rategate-leakybucket Reject/rategate-concurrency Reject/semaphore; do
			perf stat -x, -e cycles:u,instructions:u,task-clock "$OUT/bench.test" -test.run '^$' \
				-test.bench "^Benchmark${b%%/*}\$/^${b#*/}\$" -test.benchtime 20000000x -test.cpu 1 2>&1 >/dev/null |
				awk -F, -v b="$b" '$3 ~ /^cycles/ {c = $1} $3 ~ /^instructions/ {i = $1} $3 ~ /^task-clock/ {t = $1}
					END {printf "| %s | %.1f | %.1f | %.1f |\n", b, c / 2e7, i / 2e7, t * 1e6 / 2e7}'
		done
	} | tee "$OUT/cycles.md"
	rm -f "$OUT/bench.test"
	echo
fi

echo "## Keyed limiter memory (1,000,000 keys)"
echo
{
	echo "Measured $(date -u '+%F %H:%M') UTC; $(uname -srm); $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2 | xargs), $(getconf _NPROCESSORS_ONLN) CPUs; $(go version | cut -d' ' -f3); load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
	echo
	go test -count=1 -run '^TestKeyedMemory$' -keyedmem . | grep '^|'
} | tee "$OUT/keyedmem.md"
echo

echo "## Pipe throughput on the real clock (% of the limit, 3 s per row)"
echo
{
	echo "Measured $(date -u '+%F %H:%M') UTC; $(uname -srm); $(getconf _NPROCESSORS_ONLN) CPUs; $(go version | cut -d' ' -f3); load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
	echo
	go test -count=1 -run '^TestPipeRealClock$' -v -pipe.realclock . | sed -n 's/^ *pipe_test.go:[0-9]*: //p' | grep '^|'
} | tee "$OUT/pipe-realclock.md"
echo

echo "## Adaptive limiters and their peers (virtual time; see $OUT/adaptive.md)"
echo
go test -count=1 -run '^TestCompare$' ./adaptive -args -update -out "$PWD/$OUT/adaptive.md" >/dev/null
grep '^|' "$OUT/adaptive.md" | head -8
echo
go test -run '^$' -bench Report -benchmem -count "$COUNT" ./adaptive >"$OUT/adaptive-report.txt"
benchstat "$OUT/adaptive-report.txt" | tee "$OUT/adaptive-report-benchstat.txt"
echo "## rategate pipe against pv -L"
echo
if command -v pv >/dev/null 2>&1; then
	go run ./cli | tee "$OUT/cli-pv.md"
else
	echo "pv is not installed: skipped (apt-get install pv)"
fi
echo

if [ "$PACING" != 0 ]; then
	echo "## Pacing"
	echo
	{
		echo "Measured $(date -u '+%F %H:%M') UTC; $(uname -srm); $(go version | cut -d' ' -f3)."
		echo
		go run ./pacing
	} | tee "$OUT/pacing.md"
fi
