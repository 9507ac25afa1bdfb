#!/bin/sh
# admit.sh measures TokenBucket.TryAcquire against its floor, a clock read
# plus one compare-and-swap (BenchmarkAdmit/clock-cas), in paired rounds:
# each round is one process running clock-cas, then the TokenBucket's admit
# and refuse, so that the load of the moment weighs on all three alike; it
# prints the median ratios over the rounds. With BEFORE set
# to another build's test binary (go test -c), every round runs that binary
# too, first: a before/after comparison in one run. RAW names a file for
# every round's benchmark lines.
#
#   ./admit.sh                                   # 10 rounds
#   ROUNDS=20 BEFORE=/tmp/old.test ./admit.sh    # before/after
set -eu
cd "$(dirname "$0")"
ROUNDS=${ROUNDS:-10}
BEFORE=${BEFORE:-}
AFTER=$(mktemp -d)/after.test
go test -c -o "$AFTER" .
echo "# $(date -u '+%F %H:%M') UTC; $(uname -sr) $(uname -m); $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(getconf _NPROCESSORS_ONLN) CPUs; $(go version | cut -d' ' -f3); load average $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	i=$((i + 1))
	for bin in $BEFORE "$AFTER"; do
		name=after
		[ "$bin" = "$AFTER" ] || name=before
		"$bin" -test.run '^$' -test.bench 'Benchmark(Admit|Reject)$/^(clock-cas|rategate-tokenbucket)$' \
			-test.benchtime 0.5s -test.benchmem | grep '^Benchmark' | sed "s|^|$name $i |"
	done
done | tee "${RAW:-/dev/null}" | awk '
	{ ns = $5; key = $1 " " $2 }
	$3 ~ /^BenchmarkAdmit\/clock-cas/ { cas[key] = ns }
	$3 ~ /^BenchmarkAdmit\/rategate-tokenbucket/ { adm[key] = ns }
	$3 ~ /^BenchmarkReject\/rategate-tokenbucket/ { rej[key] = ns }
	END { for (k in cas) { split(k, f, " "); printf "%s admit %.4f\n%s refuse %.4f\n", f[1], adm[k] / cas[k], f[1], rej[k] / cas[k] } }
' | sort -k1,2 -k3n | awk '
	{ key = $1 " " $2; v[key, ++n[key]] = $3 }
	END { for (k in n) { m = n[k]; med = (m % 2) ? v[k, (m + 1) / 2] : (v[k, m / 2] + v[k, m / 2 + 1]) / 2
		printf "# %s/clock-cas: median %.2f (%.2f-%.2f) over %d rounds\n", k, med, v[k, 1], v[k, m], m } }
' | sort
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$(dirname "$AFTER")"
