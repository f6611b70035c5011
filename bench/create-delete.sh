#!/usr/bin/env bash
# CreateVolume+DeleteVolume pairs/s at 1 and 16 clients, in one run: this build's volplugd,
# another volplugd binary (BEFORE, optional: the one to compare with) and csi-driver-host-path
# (HOSTPATHPLUGIN, optional), in rounds taking turns, the median round shown. POOL_FS says where
# the pools and hostpath's state live: "root" (a directory of /tmp's filesystem, default),
# "ext4" or "xfs" (a fresh loop filesystem, with its journal), "tmpfs" (no disk: what is left
# without the flushes). FSYNCS=1 first counts, with strace, the fsync calls per pair of each
# volplugd binary (and on ext4 the journal commits). Beside the rates, the CPU time each
# server spent per pair (user + system, from /proc/PID/stat over the round): what a pair costs
# whatever the neighbours' load, which moves the rates. docs/bench.md, Controller.
#
# Needs root for the loop filesystems and tmpfs. Environment: BUILD (default build), BEFORE,
# HOSTPATHPLUGIN, POOL_FS, ROUNDS (5), DURATION per round (4s, in seconds), FSYNCS (0; counted
# over 200 pairs at 1 client, 400 at 16), FLOOR (0). FLOOR=1 adds to the rounds the disk's floor
# under a pair (bench/pair-floor.c, no gRPC, no checks): floor-pool, the syscalls of the pool's
# durable create and delete; floor-log, the same files unsynced plus one fdatasync'ed record
# of a preallocated log a call; floor-nosync, the files alone. Their CPU is their own process's.
# And floor-rpc: this build's volplugd answering Probe (a call through a handler thread whose
# work is a few stat calls), two calls counted as a pair: what the gRPC round trips cost alone.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
BEFORE=${BEFORE:-}
POOL_FS=${POOL_FS:-root}
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-4s}
FSYNCS=${FSYNCS:-0}
FLOOR=${FLOOR:-0}
PAIR_FLOOR=${PAIR_FLOOR:-$BUILD/bench/pair-floor}

WHERE=$BENCH_TMP/fs
mkdir -p "$WHERE"
case $POOL_FS in
root) ;;
tmpfs) mount -t tmpfs -o size=4G tmpfs "$WHERE" ;;
ext4 | xfs)
	truncate -s 4G "$BENCH_TMP/fs.img"
	if [ "$POOL_FS" = xfs ]; then mkfs.xfs -q "$BENCH_TMP/fs.img"; else mkfs.ext4 -q -F "$BENCH_TMP/fs.img"; fi
	mount -o loop "$BENCH_TMP/fs.img" "$WHERE"
	;;
*) echo "bench/create-delete.sh: POOL_FS: root, ext4, xfs or tmpfs" >&2; exit 2 ;;
esac

# start NAME BINARY [WRAPPER...]: a volplugd with its pool in $WHERE; prints its pid.
start() {
	local name=$1 bin=$2
	shift 2
	mkdir -p "$WHERE/$name-pool"
	"$@" "$bin" all --endpoint "unix://$BENCH_TMP/$name.sock" --pool "$WHERE/$name-pool" \
		--node-id bench-node --flexvolume-dir "$BENCH_TMP/$name-flexvolume" \
		>"$BENCH_TMP/$name.log" 2>&1 &
	echo $! >>"$BENCH_TMP/pids"
	wait_socket "$BENCH_TMP/$name.sock" || { cat "$BENCH_TMP/$name.log" >&2; exit 1; }
	echo $!
}

pair() { # pair NAME CLIENTS ARGS...: one bench row of create-delete
	"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/$1.sock" bench --sequence create-delete \
		--param size=1Mi --clients "$2" --label "$1" "${@:3}"
}

drivers=(now)
[ -z "$BEFORE" ] || drivers=(before now)
[ -z "$HOSTPATHPLUGIN" ] || drivers+=(hostpath)
[ "$FLOOR" != 1 ] || drivers+=(floor-pool floor-log floor-nosync floor-rpc)
binary() { if [ "$1" = before ]; then echo "$BEFORE"; else echo "$VOLPLUGD"; fi; }

if [ "$FSYNCS" = 1 ]; then
	command -v strace >/dev/null || { echo "bench/create-delete.sh: FSYNCS=1 needs strace" >&2; exit 2; }
	dev=$(findmnt -n -o SOURCE --target "$WHERE" | sed 's|^/dev/||')
	echo "fsync calls (and journal commits) per create+delete pair, counted with strace -f"
	for d in "${drivers[@]}"; do
		[ "$d" != hostpath ] && [ "${d#floor-}" = "$d" ] || continue
		for c in 1:200 16:400; do
			set -- "${c%:*}" "${c#*:}"
			out=$BENCH_TMP/strace-$d-$1
			pid=$(start "count-$d-$1" "$(binary "$d")" strace -f -qq -o "$out" \
				-e trace=fsync,fdatasync,syncfs,sync_file_range)
			sleep 0.5
			n0=$(grep -c ' = ' "$out" || true)
			j0=$(awk 'NR == 1 {print $1}' "/proc/fs/jbd2/$dev-8/info" 2>/dev/null || echo 0)
			pair "count-$d-$1" "$1" --count "$2" --warmup 0 >/dev/null
			n1=$(grep -c ' = ' "$out" || true)
			j1=$(awk 'NR == 1 {print $1}' "/proc/fs/jbd2/$dev-8/info" 2>/dev/null || echo 0)
			awk -v d="$d" -v c="$1" -v p="$2" -v n=$((n1 - n0)) -v j=$((j1 - j0)) 'BEGIN {
				printf "  %-8s %2d client(s), %d pairs: %.2f fsyncs a pair", d, c, p, n / p
				if (j) printf ", %.2f journal commits", j / p
				print "" }'
			pkill -P "$pid" 2>/dev/null || true
			stop_pid "$pid"
		done
	done
fi

declare -A server_pid
for d in "${drivers[@]}"; do
	if [ "$d" = floor-rpc ]; then
		server_pid[$d]=${server_pid[now]}
	elif [ "${d#floor-}" != "$d" ]; then
		mkdir -p "$WHERE/$d"
	elif [ "$d" = hostpath ]; then
		mkdir -p "$WHERE/hostpath-state"
		"$HOSTPATHPLUGIN" --endpoint "unix://$BENCH_TMP/hostpath.sock" --nodeid bench-node \
			--drivername hostpath.csi.k8s.io --statedir "$WHERE/hostpath-state" \
			>"$BENCH_TMP/hostpath.log" 2>&1 &
		server_pid[$d]=$!
		echo $! >>"$BENCH_TMP/pids"
		wait_socket "$BENCH_TMP/hostpath.sock" || { cat "$BENCH_TMP/hostpath.log" >&2; exit 1; }
	else
		server_pid[$d]=$(start "$d" "$(binary "$d")")
	fi
done
# CPU ticks (user + system) a process has used.
cpu_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
for r in $(seq "$ROUNDS"); do
	for c in 1 16; do
		for d in "${drivers[@]}"; do
			if [ "$d" = floor-rpc ]; then
				t0=$(cpu_ticks "${server_pid[$d]}")
				"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/now.sock" bench --rpc Probe \
					--clients "$c" --duration "$DURATION" --warmup 20 >"$BENCH_TMP/row"
				t1=$(cpu_ticks "${server_pid[$d]}")
				awk -v r="$r" -v t=$((t1 - t0)) -v hz="$hz" 'NR > 1 && $2 == "Probe" {
					print r, "floor-rpc", $3, $6 / 2, t * 1e6 / hz / ($4 + 20) * 2 }' \
					"$BENCH_TMP/row" >>"$BENCH_TMP/rounds"
				continue
			elif [ "${d#floor-}" != "$d" ]; then
				"$PAIR_FLOOR" "$WHERE/$d" "${d#floor-}" "$c" "${DURATION%s}" |
					awk -v r="$r" -v d="$d" '{print r, d, $2, $4, $5}' >>"$BENCH_TMP/rounds"
				continue
			fi
			t0=$(cpu_ticks "${server_pid[$d]}")
			pair "$d" "$c" --duration "$DURATION" --warmup 20 >"$BENCH_TMP/row"
			t1=$(cpu_ticks "${server_pid[$d]}")
			# the CPU of the 20 untimed pairs too
			awk -v r="$r" -v t=$((t1 - t0)) -v hz="$hz" 'NR > 1 && $2 == "CreateVolume" {
				print r, $1, $3, $6, t * 1e6 / hz / ($4 + 20) }' \
				"$BENCH_TMP/row" >>"$BENCH_TMP/rounds"
		done
	done
done
# summary FIELD: per client count and driver, the median of that field over the rounds.
summary() {
	local c d line
	for c in 1 16; do
		line="  $c client(s):"
		for d in "${drivers[@]}"; do
			line+=$(awk -v d="$d" -v c="$c" -v f="$1" '$2 == d && $3 == c {print $f}' \
				"$BENCH_TMP/rounds" | sort -n | awk -v d="$d" '{a[NR] = $1} END {
					printf " %s %d (%d-%d)", d, a[int((NR + 1) / 2)], a[1], a[NR] }')
		done
		echo "$line"
	done
}
echo "create+delete pairs/s on $POOL_FS, $ROUNDS rounds of $DURATION: median (slowest-fastest)"
summary 4
echo "server CPU per pair (us, user + system): median (least-most)"
summary 5
