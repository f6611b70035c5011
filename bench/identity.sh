#!/usr/bin/env bash
# Idle RSS and calls/s of the cheap RPCs (GetPluginInfo, and whatever RPCS lists) over the
# socket with 1 and 16 clients, each client over a connection of its own (as separate sidecars
# are). Set HOSTPATHPLUGIN=/path/to/hostpathplugin to measure the reference driver in the same
# run: rounds alternate which driver goes first, and the table shows medians. Environment:
# ROUNDS (5), COUNT (20000 calls per row), RPCS (GetPluginInfo; e.g. "GetPluginInfo
# NodeGetCapabilities ControllerGetCapabilities"). Set BASELINE=/path/to/volplugd to measure
# another build of volplugd (the one before a change) in the same run, as "baseline".
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
COUNT=${COUNT:-20000}
ROUNDS=${ROUNDS:-5}
RPCS=${RPCS:-GetPluginInfo}

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
		for rpc in $RPCS; do
			"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/${socks[$t]}.sock" bench \
				--rpc "$rpc" --connections --clients 1,16 --count "$COUNT" |
				awk -v t="$t" -v rpc="$rpc" 'NR > 1 {print t, rpc "-c" $3, $6}' \
					>>"$BENCH_TMP/results"
			echo "  round $r, $t, $rpc: $(awk -v t="$t" -v k="$rpc-c" '$1 == t && index($2, k) == 1 {v[substr($2, length(k) + 1)] = $3} END {print "1 client", v[1], "calls/s, 16 clients", v[16]}' "$BENCH_TMP/results")" >&2
		done
	done
done

median() { sort -g | awk '{v[NR] = $1} END {printf "%.10g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
med() { awk -v t="$1" -v k="$2" '$1 == t && $2 == k {print $3}' "$BENCH_TMP/results" | median; }

echo
printf '| %-50s |' "median of $ROUNDS"
for t in "${targets[@]}"; do printf ' %10s |' "$t"; done
[ -n "$HOSTPATHPLUGIN" ] && printf ' %16s |' "volplugd/hostpath"
echo
printf '|%s|' "$(printf -- '-%.0s' $(seq 52))"
for _ in "${targets[@]}"; do printf -- '------------|'; done
[ -n "$HOSTPATHPLUGIN" ] && printf -- '------------------|'
echo
row() {
	local label=$1 key=$2
	printf '| %-50s |' "$label"
	for t in "${targets[@]}"; do printf ' %10s |' "$(med "$t" "$key")"; done
	[ -n "$HOSTPATHPLUGIN" ] &&
		awk -v a="$(med volplugd "$key")" -v b="$(med hostpath "$key")" \
			'BEGIN {printf " %15.2fx |", (b > 0) ? a / b : 0}'
	echo
}
for rpc in $RPCS; do
	row "$rpc calls/s, 1 client" "$rpc-c1"
	row "$rpc calls/s, 16 clients" "$rpc-c16"
done
row "idle RSS (KiB)" idle-rss
