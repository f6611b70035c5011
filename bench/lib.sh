# Shared by the bench scripts: find the binaries, start and stop daemons, read RSS.
# shellcheck shell=bash
BUILD=${BUILD:-build}
VOLPLUGD=${VOLPLUGD:-$BUILD/src/cmd/volplugd}
VOLPLUGCTL=${VOLPLUGCTL:-$BUILD/src/cmd/volplugctl}
# A reference driver to compare with (csi-driver-host-path's hostpathplugin), if given.
HOSTPATHPLUGIN=${HOSTPATHPLUGIN:-}

[ -x "$VOLPLUGD" ] && [ -x "$VOLPLUGCTL" ] || { echo "build first (make build)" >&2; exit 2; }
BENCH_TMP=$(mktemp -d /tmp/volplug-bench.XXXXXX)
BENCH_PIDS=()
stop_pid() {
	kill "$1" 2>/dev/null || return 0
	for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
	kill -9 "$1" 2>/dev/null || true
}

# Daemons first (they hold the pools), then every mount and loop device under BENCH_TMP.
bench_cleanup() {
	set +e # something already gone must not stop the clean-up, nor be reported
	trap - ERR
	# start_* run inside $(...): their pids come back through a file, not the array.
	[ -f "$BENCH_TMP/pids" ] && mapfile -t -O "${#BENCH_PIDS[@]}" BENCH_PIDS <"$BENCH_TMP/pids"
	for p in "${BENCH_PIDS[@]}"; do stop_pid "$p"; done
	findmnt -rn -o TARGET | grep "^$BENCH_TMP/" | sort -r | while read -r m; do
		umount "$m" 2>/dev/null || umount -l "$m"
	done
	losetup -n -O NAME,BACK-FILE -l | awk -v d="$BENCH_TMP/" 'index($2, d) == 1 {print $1}' |
		while read -r l; do losetup -d "$l"; done
	rm -rf "$BENCH_TMP"
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

wait_socket() { for _ in $(seq 200); do [ -S "$1" ] && return 0; sleep 0.05; done; return 1; }

# start_volplugd NAME [flags...]: prints the pid; socket at $BENCH_TMP/NAME.sock
start_volplugd() {
	local name=$1; shift
	mkdir -p "$BENCH_TMP/$name-pool"
	"$VOLPLUGD" all --endpoint "unix://$BENCH_TMP/$name.sock" --pool "$BENCH_TMP/$name-pool" \
		--node-id bench-node -v 1 --flexvolume-dir "$BENCH_TMP/$name-flexvolume" "$@" \
		>"$BENCH_TMP/$name.log" 2>&1 &
	BENCH_PIDS+=($!)
	echo $! >>"$BENCH_TMP/pids"
	wait_socket "$BENCH_TMP/$name.sock" || { cat "$BENCH_TMP/$name.log" >&2; exit 1; }
	echo $!
}

# start_hostpath NAME: the reference driver with attach and modify enabled
start_hostpath() {
	local name=$1
	mkdir -p "$BENCH_TMP/$name-state"
	"$HOSTPATHPLUGIN" --endpoint "unix://$BENCH_TMP/$name.sock" --nodeid bench-node \
		--drivername hostpath.csi.k8s.io --statedir "$BENCH_TMP/$name-state" --enable-attach \
		--enable-controller-modify-volume --accepted-mutable-parameter-names=iops \
		>"$BENCH_TMP/$name.log" 2>&1 &
	BENCH_PIDS+=($!)
	echo $! >>"$BENCH_TMP/pids"
	wait_socket "$BENCH_TMP/$name.sock" || { cat "$BENCH_TMP/$name.log" >&2; exit 1; }
	echo $!
}

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
