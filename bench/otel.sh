#!/bin/sh
# otel.sh measures what otellimit adds to a decision: the CPU time per call
# (perf stat task-clock, which other processes' load does not inflate as it
# does wall time) of each BenchmarkOtel case, uninstrumented and wrapped, in
# ROUNDS paired rounds of N calls at GOMAXPROCS=1 (the shared- cases: 2
# goroutines on one limiter at GOMAXPROCS=2, CPU time of both over the calls
# of both), then the medians and the added time per call. Raw rows in
# $OUT/otel-cpu.txt.
#
#   ./otel.sh                 # 7 rounds of 10^7 calls: about 4 minutes
#   ROUNDS=3 N=2000000 ./otel.sh
set -eu
cd "$(dirname "$0")"
OUT=${OUT:-results}
N=${N:-10000000}
ROUNDS=${ROUNDS:-7}
mkdir -p "$OUT"
command -v perf >/dev/null 2>&1 || { echo "otel.sh: needs perf (linux-perf)" >&2; exit 1; }
go test -c -o "$OUT/otel.test" .
trap 'rm -f "$OUT/otel.test"' EXIT
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" >"$OUT/otel-cpu.txt"
for r in $(seq 1 "$ROUNDS"); do
	for b in tokenbucket tokenbucket-otellimit tokenbucket-synccounter reject reject-otellimit \
		acquire acquire-otellimit concurrency concurrency-otellimit shared-tokenbucket shared-tokenbucket-otellimit; do
		cpu=1
		case $b in shared-*) cpu=2 ;; esac
		perf stat -x, -e task-clock "$OUT/otel.test" -test.run '^$' -test.bench "^BenchmarkOtel\$/^$b\$" \
			-test.benchtime "${N}x" -test.cpu $cpu 2>&1 >/dev/null |
			awk -F, -v b="$b" -v r="$r" -v n="$N" '$3 ~ /^task-clock/ {printf "round %d %s %.1f\n", r, b, $1 * 1e6 / n}'
	done
done >>"$OUT/otel-cpu.txt"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/otel-cpu.txt"

# Medians per case, and of the per-round differences wrapped - plain.
awk '$1 == "round" { v[$3, $2] = $4; cases[$3] = 1; if ($2 > rounds) rounds = $2 }
function median(a, n,   i, j, t) {
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t }
	return n % 2 ? a[(n+1)/2] : (a[n/2] + a[n/2+1]) / 2
}
END {
	print "| case | plain CPU ns/call | instrumented | added (median of paired rounds) |"
	print "| --- | ---: | ---: | ---: |"
	split("tokenbucket:tokenbucket-otellimit tokenbucket:tokenbucket-synccounter reject:reject-otellimit acquire:acquire-otellimit concurrency:concurrency-otellimit shared-tokenbucket:shared-tokenbucket-otellimit", pairs, " ")
	for (p = 1; p in pairs; p++) {
		split(pairs[p], ab, ":")
		for (r = 1; r <= rounds; r++) { x[r] = v[ab[1], r]; y[r] = v[ab[2], r]; d[r] = y[r] - x[r] }
		printf "| %s | %.1f | %.1f | %+.1f |\n", ab[2], median(x, rounds), median(y, rounds), median(d, rounds)
	}
}' "$OUT/otel-cpu.txt"
