#!/usr/bin/env bash
# What metrics cost CSI: CreateVolume p50 of one volplugd serving --metrics-address, in rounds
# without a scraper and with one fetching /metrics 10 times a second, the two taking turns so
# that the machine's drift hits both alike. Prints each round, the median p50 of each, and their
# ratio (goal: within 5%). The pool holds POPULATION volumes first, so that the pool gauges'
# collector has something to count; the rounds create and delete. As root the pool is on a
# tmpfs, so that fsync noise does not drown the difference; otherwise it is under /tmp. The
# pool provisions no more than its filesystem has free, so the tmpfs is sized for every volume
# (its size is a limit, not memory taken: the volumes are sparse files nobody writes).
#
# Environment: BUILD (default build), ROUNDS per mode (default 5), DURATION of a round
# (default 5s), RATE scrapes a second (default 10), POPULATION (default 1000).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
RATE=${RATE:-10}
POPULATION=${POPULATION:-1000}

mkdir -p "$BENCH_TMP/m-pool"
if [ "$(id -u)" = 0 ]; then
	mount -t tmpfs -o size=$((POPULATION + 256))m tmpfs "$BENCH_TMP/m-pool"
fi
pid=$(start_volplugd m --flexvolume-dir "" --metrics-address 127.0.0.1:0)
for _ in $(seq 100); do
	addr=$(sed -n 's|.*metrics on http://\([^ ]*\)/metrics.*|\1|p' "$BENCH_TMP/m.log")
	[ -n "$addr" ] && break
	sleep 0.05
done
[ -n "$addr" ] || { echo "bench/metrics.sh: no metrics address in the log" >&2; cat "$BENCH_TMP/m.log" >&2; exit 1; }

# A scraper as Prometheus is one: a kept-alive connection, a GET every 1/RATE s; on SIGTERM
# it prints how many scrapes it made, how long they took, and how many failed.
cat >"$BENCH_TMP/scraper.py" <<'EOF'
import http.client, signal, sys, time
host, rate = sys.argv[1], float(sys.argv[2])
n, failed, busy, start, stop = 0, 0, 0.0, time.monotonic(), []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
conn = http.client.HTTPConnection(host, timeout=10)
while not stop:
    t = time.monotonic()
    try:
        conn.request("GET", "/metrics")
        body = conn.getresponse().read()
        if b"volplug_pool_volumes" not in body:
            raise ValueError("no pool gauges in the scrape")
    except Exception as e:
        failed += 1
        print("scrape %d: %r" % (n, e), file=sys.stderr)
        conn.close()
    n += 1
    busy += time.monotonic() - t
    time.sleep(max(0, start + n / rate - time.monotonic()))
elapsed = time.monotonic() - start
print("%d scrapes in %.1f s (%.1f/s), %.2f ms each, %d failed" %
      (n, elapsed, n / elapsed, 1000 * busy / n, failed))
EOF
scraper() { exec python3 "$BENCH_TMP/scraper.py" "$addr" "$RATE"; }

ctl() { "$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/m.sock" "$@"; }

# round MODE: CreateVolume + DeleteVolume for DURATION; prints CreateVolume's p50 in us.
round() {
	ctl bench --sequence create-delete --param size=1M --duration "$DURATION" --warmup 20 \
		--pid "$pid" --label "$1" >"$BENCH_TMP/round.out" ||
		{ echo "bench/metrics.sh: round $1: calls failed" >&2; cat "$BENCH_TMP/round.out" >&2; }
	awk '$2 == "CreateVolume" {print $7}' "$BENCH_TMP/round.out"
}

median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

ctl bench --sequence populate --param size=1M --count "$POPULATION" --clients 4 --warmup 0 \
	>/dev/null
echo "CreateVolume p50 (us) of CreateVolume+DeleteVolume for $DURATION a round, one client, with"
echo "$POPULATION volumes in the pool; scraper: GET /metrics ${RATE}/s"
printf "%-6s %12s %12s\n" round without with
: >"$BENCH_TMP/without"
: >"$BENCH_TMP/with"
for r in $(seq "$ROUNDS"); do
	a=$(round without)
	scraper >"$BENCH_TMP/scraper.out" &
	sp=$!
	sleep 0.5 # the scraper at its pace before the round starts
	b=$(round with)
	kill -TERM "$sp"
	wait "$sp"
	echo "$a" >>"$BENCH_TMP/without"
	echo "$b" >>"$BENCH_TMP/with"
	printf "%-6s %12s %12s   scraper: %s\n" "$r" "$a" "$b" "$(cat "$BENCH_TMP/scraper.out")"
done
ma=$(median <"$BENCH_TMP/without")
mb=$(median <"$BENCH_TMP/with")
printf "%-6s %12s %12s\n" median "$ma" "$mb"
awk -v a="$ma" -v b="$mb" 'BEGIN {printf "ratio with/without: %.3f (goal: at most 1.05)\n", b / a}'
echo "volumes in the pool at the end: $(find "$BENCH_TMP/m-pool/volumes" -mindepth 1 -maxdepth 1 | wc -l)"
