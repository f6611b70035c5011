#!/usr/bin/env bash
# Controller: CreateVolume+DeleteVolume throughput and latency with 10, 1,000 and 10,000
# volumes already in the pool, at 1 and 16 clients; then CreateSnapshot of a 1 GiB volume with
# 100 MiB written, on a reflink pool (XFS, reflink=1) and on a sparse-copy pool (ext4).
# Set HOSTPATHPLUGIN=/path/to/hostpathplugin to run the same load against the reference driver
# in the same run (its pool is filled to the same counts).
#
# Needs root (loop filesystems for the snapshot part). Environment: BUILD (default build),
# POOLS (default "10 1000 10000"), CLIENTS (default 1,16), DURATION per row (default 5s),
# ROUNDS per row (default 3, the median is shown), POPULATE_TIMEOUT per fill (default 600s),
# SNAPSHOTS per pool (default 5).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
POOLS=${POOLS:-10 1000 10000}
CLIENTS=${CLIENTS:-1,16}
DURATION=${DURATION:-5s}
ROUNDS=${ROUNDS:-3}
POPULATE_TIMEOUT=${POPULATE_TIMEOUT:-600s}
SNAPSHOTS=${SNAPSHOTS:-5}

[ "$(id -u)" = 0 ] || { echo "bench/controller.sh: needs root" >&2; exit 2; }
for tool in mkfs.xfs mkfs.ext4 losetup findmnt timeout dd; do
	command -v "$tool" >/dev/null || { echo "bench/controller.sh: needs $tool" >&2; exit 2; }
done


ctl() { "$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/$1.sock" "${@:2}"; }

# fill NAME COUNT: brings the pool to COUNT volumes of $VOLUME_SIZE through CreateVolume, 16
# clients.
# shellcheck disable=SC2034 # read and written through ${!var} in fill
FILLED_volplug=0 FILLED_hostpath=0
fill() {
	local name=$1 want=$2 var="FILLED_$1"
	local have=${!var}
	if [ "$want" -gt "$have" ]; then
		timeout "$POPULATE_TIMEOUT" "$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/$name.sock" \
			bench --sequence populate --param "size=$VOLUME_SIZE" --clients 16 \
			--count $((want - have)) --warmup 0 \
			--label "$name" >"$BENCH_TMP/fill.out" || true
		awk 'NR == 2 {printf "  filled %s: %s volumes in %.1f s\n", $1, $4, $4 / ($6 ? $6 : 1)}' \
			"$BENCH_TMP/fill.out" >&2
	fi
	if [ "$name" = volplug ]; then
		have=$(find "$BENCH_TMP/volplug-pool/volumes" -mindepth 1 -maxdepth 1 | wc -l)
	else
		have=$(find "$BENCH_TMP/hostpath-state" -mindepth 1 -maxdepth 1 -type d | wc -l)
	fi
	printf -v "$var" %s "$have"
	[ "$have" = "$want" ] || echo "bench/controller.sh: $name pool has $have volumes, not $want" >&2
}

# A pool provisions no more than its disk has free, so the volumes are small: 10,000 of 1 MiB.
# A sparse create costs the same at any size (an ftruncate).
VOLUME_SIZE=${VOLUME_SIZE:-1Mi}
vp=$(start_volplugd volplug)
BENCH_PIDS+=("$vp")
hp=
if [ -n "$HOSTPATHPLUGIN" ]; then
	hp=$(start_hostpath hostpath)
	BENCH_PIDS+=("$hp")
fi

# The disk is shared with whatever else the machine does, and fsync latency follows it: each
# row is measured ROUNDS times, the drivers taking turns, and the round with the median
# CreateVolume throughput is shown.
echo "CreateVolume + DeleteVolume ($VOLUME_SIZE, SINGLE_NODE_WRITER mount), $DURATION per row, median of"
echo "$ROUNDS rounds; target = driver/volumes already in the pool"
for n in $POOLS; do
	for d in volplug ${hp:+hostpath}; do fill "$d" "$n"; done
	for r in $(seq "$ROUNDS"); do
		for d in volplug ${hp:+hostpath}; do
			label=volplugd/$n pid=$vp
			[ "$d" = volplug ] || label=hostpath/$n pid=$hp
			ctl "$d" bench --sequence create-delete --param "size=$VOLUME_SIZE" --clients "$CLIENTS" \
				--duration "$DURATION" --warmup 20 --pid "$pid" --label "$label" \
				>"$BENCH_TMP/row.out" ||
				echo "bench/controller.sh: $label: calls failed (errors column)" >&2
			head -1 "$BENCH_TMP/row.out" >"$BENCH_TMP/header"
			tail -n +2 "$BENCH_TMP/row.out" | sed "s/^/$r /" >>"$BENCH_TMP/rounds"
		done
	done
done
# Per target and client count, the round whose CreateVolume calls/s is the median.
awk 'NR == FNR {
	if ($3 == "CreateVolume") { k = $2 SUBSEP $4; n[k]++; rate[k, n[k]] = $7; round[k, n[k]] = $1 }
	next
}
FNR == 1 {
	for (k in n) {
		for (i = 1; i <= n[k]; i++) for (j = i + 1; j <= n[k]; j++)
			if (rate[k, j] < rate[k, i]) {
				x = rate[k, i]; rate[k, i] = rate[k, j]; rate[k, j] = x
				x = round[k, i]; round[k, i] = round[k, j]; round[k, j] = x
			}
		pick[k] = round[k, int((n[k] + 1) / 2)]
	}
}
$1 == pick[$2, $4] {
	split($2, t, "/")
	key = sprintf("%09d %d %06d %d", t[2], t[1] != "volplugd", $4, $3 != "CreateVolume")
	sub(/^[0-9]+ /, "")
	print key "\t" $0
}' "$BENCH_TMP/rounds" "$BENCH_TMP/rounds" | sort | cut -f2- >"$BENCH_TMP/rows"
cat "$BENCH_TMP/header" "$BENCH_TMP/rows"
rate() { awk -v l="$1" -v c="$2" '$1 == l && $2 == "CreateVolume" && $3 == c {print $6}' "$BENCH_TMP/rows"; }
if [ -n "$hp" ] && grep -q "^hostpath/1000 " "$BENCH_TMP/rows"; then
	echo
	for c in ${CLIENTS//,/ }; do
		awk -v c="$c" -v v="$(rate volplugd/1000 "$c")" -v h="$(rate hostpath/1000 "$c")" 'BEGIN {
			printf "create+delete throughput at 1,000 volumes, %s client(s): volplugd %s/s, hostpath %s/s: %.1fx (target >= 3x)\n", c, v, h, (h > 0 ? v / h : 0) }'
	done
fi
stop_pid "$vp"
[ -z "$hp" ] || stop_pid "$hp"

# Snapshots: one pool on an XFS loop filesystem with reflink, one on ext4 (sparse copy).
echo
echo "CreateSnapshot of a 1 GiB volume with 100 MiB written (100 x 1 MiB, 10 MiB apart), page cache warm"
header=1
for fs in xfs ext4; do
	name=snap-$fs
	truncate -s 8G "$BENCH_TMP/$fs.img"
	if [ "$fs" = xfs ]; then
		mkfs.xfs -q -m reflink=1 "$BENCH_TMP/$fs.img"
	else
		mkfs.ext4 -q -F "$BENCH_TMP/$fs.img"
	fi
	mkdir -p "$BENCH_TMP/$name-pool"
	mount -o loop "$BENCH_TMP/$fs.img" "$BENCH_TMP/$name-pool"
	pid=$(start_volplugd "$name")
	BENCH_PIDS+=("$pid")
	id=$(ctl "$name" -o json call CreateVolume '{"name": "snapshot-source",
		"capacity_range": {"required_bytes": 1073741824},
		"volume_capabilities": [{"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {}}]}' |
		sed -n 's/.*"volume_id": "\(vol-[^"]*\)".*/\1/p')
	data=$BENCH_TMP/$name-pool/volumes/${id%%.*}/data # the ID up to its node: the directory
	for i in $(seq 0 99); do
		dd if=/dev/urandom of="$data" bs=1M count=1 seek=$((i * 10)) conv=notrunc status=none
	done
	sync -f "$data"
	ctl "$name" bench --sequence snapshot --param "source=$id" --clients 1 --count "$SNAPSHOTS" \
		--warmup 0 --label "$fs/$(du -m "$data" | cut -f1)MiB" >"$BENCH_TMP/row.out" ||
		echo "bench/controller.sh: $fs: calls failed (errors column)" >&2
	if [ $header = 1 ]; then head -1 "$BENCH_TMP/row.out"; header=0; fi
	tail -n +2 "$BENCH_TMP/row.out"
	grep -E "created snapshot .* by (reflink|sparse copy)" "$BENCH_TMP/$name.log" | tail -1 |
		sed 's/^/    volplugd: /'
	stop_pid "$pid"
	umount "$BENCH_TMP/$name-pool"
done
