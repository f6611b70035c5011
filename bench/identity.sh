#!/usr/bin/env bash
# Idle RSS and GetPluginInfo calls/s over the socket with 1 and 16 clients, each client over a
# connection of its own (as separate sidecars are). Set HOSTPATHPLUGIN=/path/to/hostpathplugin
# to measure the reference driver in the same run: rounds alternate which driver goes first,
# and the table shows medians. Set BASELINE=/path/to/volplugd to measure another build of
# volplugd (the one before a change) in the same run, as "baseline". Environment: ROUNDS (5),
# COUNT (20000 calls per row).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
COUNT=${COUNT:-20000}
ROUNDS=${ROUNDS:-5}

vp=$(start_volplugd volplug)
targets=(volplugd)
declare -A pids=([volplugd]=$vp) socks=([volplugd]=volplug)
if [ -n "${BASELINE:-}" ]; then
	bp=$(VOLPLUGD=$BASELINE start_volplugd baseline)
	targets+=(baseline)
	pids[baseline]=$bp
	socks[baseline]=baseline
fi
if [ -n "$HOSTPATHPLUGIN" ]; then
	hp=$(start_hostpath hostpath)
	targets+=(hostpath)
	pids[hostpath]=$hp
	socks[hostpath]=hostpath
fi
sleep 1
for t in "${targets[@]}"; do echo "$t idle-rss $(rss_kib "${pids[$t]}")" >>"$BENCH_TMP/results"; done

for r in $(seq "$ROUNDS"); do
	n=${#targets[@]}
	for i in $(seq 0 $((n - 1))); do
		t=${targets[$(((i + r) % n))]}
		"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/${socks[$t]}.sock" bench \
			--rpc GetPluginInfo --connections --clients 1,16 --count "$COUNT" |
			awk -v t="$t" 'NR > 1 {print t, "c" $3, $6}' >>"$BENCH_TMP/results"
		echo "  round $r, $t: $(awk -v t="$t" '$1 == t && $2 ~ /^c/ {v[$2] = $3} END {print "1 client", v["c1"], "calls/s, 16 clients", v["c16"]}' "$BENCH_TMP/results")" >&2
	done
done

median() { sort -g | awk '{v[NR] = $1} END {printf "%.10g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
med() { awk -v t="$1" -v k="$2" '$1 == t && $2 == k {print $3}' "$BENCH_TMP/results" | median; }

echo
printf '| %-44s |' "GetPluginInfo, median of $ROUNDS"
for t in "${targets[@]}"; do printf ' %10s |' "$t"; done
[ -n "$HOSTPATHPLUGIN" ] && printf ' %16s |' "volplugd/hostpath"
echo
printf '|%s|' "$(printf -- '-%.0s' $(seq 46))"
for _ in "${targets[@]}"; do printf -- '------------|'; done
[ -n "$HOSTPATHPLUGIN" ] && printf -- '------------------|'
echo
row() {
	local label=$1 key=$2
	printf '| %-44s |' "$label"
	for t in "${targets[@]}"; do printf ' %10s |' "$(med "$t" "$key")"; done
	[ -n "$HOSTPATHPLUGIN" ] &&
		awk -v a="$(med volplugd "$key")" -v b="$(med hostpath "$key")" \
			'BEGIN {printf " %15.2fx |", (b > 0) ? a / b : 0}'
	echo
}
row "calls/s, 1 client" c1
row "calls/s, 16 clients (a connection each)" c16
row "idle RSS (KiB)" idle-rss
