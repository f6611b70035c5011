#!/usr/bin/env bash
# Data path: fio inside a volplug volume against the raw disk under it, in one run.
#
# Targets, each a fresh directory per round on the same filesystem as the pool:
#   raw      a directory of the pool's filesystem itself
#   volplug  a pool volume (ext4 by default) staged by volplugd: its loop device as volplugd
#            makes it (direct I/O, the pool filesystem's block size)
#   buffered the same kind of loop device made by hand without direct I/O and with 512-byte
#            blocks: what volplugd made before (BUFFERED=0 leaves it out)
#   hostpath csi-driver-host-path's block volume (its own loop device) with the same filesystem,
#            when HOSTPATHPLUGIN names the plugin's binary
# Jobs (fio): 4k random overwrites + fdatasync each (commits/s, on a file laid out first, as a
# database log is); 1 MiB sequential direct write of SIZE + fsync into a fresh file (MiB/s,
# timed from start to the end of the fsync); 1 MiB sequential direct read of it (MiB/s); 4k
# direct random writes at queue depth 16 (IOPS). Around the direct jobs the host's page cache
# (Cached in /proc/meminfo) and, after the last, its dirty data (Dirty) are read: direct I/O
# in a volume should move neither.
#
# Rounds rotate the order of the targets, so that a noisy neighbour hurts each in turn; the
# table shows medians and each target's ratio to raw.
#
# Then the trim table: the same churn (files written, fsync'ed, deleted) in a volume mounted
# with online `discard` and in one without it, the space the data file holds after it, and how
# long one FITRIM (what volplugd's trimmer does every --trim-interval) takes and gives back.
#
# Needs root, fio (scripts/install-deps installs it), mkfs.ext4/mkfs.xfs, losetup. Environment:
# BUILD, ROUNDS (3), SIZE (2G), RUNTIME (10 s per timed job), FS (ext4), BUFFERED (1), TRIM (1),
# HOSTPATHPLUGIN.
set -Eeu -o pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
# A step that fails stops the run: say which.
trap 'echo "bench/data-path.sh: line $LINENO failed: $BASH_COMMAND" >&2' ERR
ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-2G}
RUNTIME=${RUNTIME:-10}
FS=${FS:-ext4}
BUFFERED=${BUFFERED:-1}
TRIM=${TRIM:-1}
VOLSIZE=8G

[ "$(id -u)" = 0 ] || { echo "bench/data-path.sh: needs root" >&2; exit 2; }
for tool in fio losetup findmnt "mkfs.$FS" fstrim; do
	command -v "$tool" >/dev/null ||
		{ echo "bench/data-path.sh: needs $tool (scripts/install-deps)" >&2; exit 2; }
done

vp=$(start_volplugd volplug --trim-interval 0)
BENCH_PIDS+=("$vp")
hp=
if [ -n "$HOSTPATHPLUGIN" ]; then
	hp=$(start_hostpath hostpath)
	BENCH_PIDS+=("$hp")
fi
ctl() { "$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/$1.sock" "${@:2}"; }
size_bytes=$(numfmt --from=iec "$SIZE")

# ---- targets: up NAME ROUND prints a fresh directory, down NAME ROUND undoes it ----

mkfs_quiet() { if [ "$FS" = xfs ]; then mkfs.xfs -q -f "$1"; else "mkfs.$FS" -q -F "$1"; fi; }

# A CSI volume of driver $1 staged at $2; its ID goes to $BENCH_TMP/$1.id.
csi_up() {
	local drv=$1 dir=$2 name=$3 id
	shift 3
	id=$(ctl "$drv" -o json volume create "$name" --size "$VOLSIZE" --fs "$FS" "$@" |
		sed -n 's/.*"volume_id": *"\([^"]*\)".*/\1/p')
	[ -n "$id" ] || { echo "bench/data-path.sh: $drv: CreateVolume failed" >&2; exit 1; }
	echo "$id" >"$BENCH_TMP/$drv.id"
	mkdir -p "$dir"
	ctl "$drv" node stage "$id" "$dir" --fs "$FS" "$@" >/dev/null
}

# Unstaging is ABORTED while the device is in use. On a shared machine that happens when some
# process made a private mount namespace (unshare -m) while the volume was mounted: its copy
# of the mount keeps the filesystem, and so the device, until that process ends. Tried again
# for a minute, as the kubelet would, naming such a process once.
csi_down() {
	local drv=$1 dir=$2 id devno holders
	id=$(cat "$BENCH_TMP/$drv.id")
	devno=$(findmnt -n -o MAJ:MIN "$dir" | tr -d " " || true)
	for try in $(seq 60); do
		ctl "$drv" node unstage "$id" "$dir" >/dev/null 2>&1 && break
		[ "$try" = 60 ] && { ctl "$drv" node unstage "$id" "$dir"; exit 1; }
		if [ "$try" = 1 ] && [ -n "$devno" ]; then
			holders=$({ grep -l " $devno " /proc/[0-9]*/mountinfo 2>/dev/null || :; } |
				cut -d/ -f3 | while read -r p; do
					echo "$p ($(cat "/proc/$p/comm" 2>/dev/null || :))"
				done | paste -sd, -)
			echo "  $id: device busy, waiting${holders:+; its mount lives on in the namespace of $holders}" >&2
		fi
		sleep 1
	done
	ctl "$drv" volume delete "$id" >/dev/null
}

# hostpath's block volume (its own loop device, published as a device node), our filesystem on
# it, mounted by hand.
hostpath_up() {
	local dir=$1 name=$2 id dev="$BENCH_TMP/hp-dev"
	id=$(ctl hostpath -o json volume create "$name" --size "$VOLSIZE" --block |
		sed -n 's/.*"volume_id": *"\([^"]*\)".*/\1/p')
	echo "$id" >"$BENCH_TMP/hostpath.id"
	mkdir -p "$BENCH_TMP/hp-stage"
	# Attached first, as a CO does for a driver that attaches (lib.sh: --enable-attach).
	ctl hostpath volume publish "$id" bench-node --block >/dev/null
	ctl hostpath node stage "$id" "$BENCH_TMP/hp-stage" --block >/dev/null
	ctl hostpath node publish "$id" "$dev" --block --staging "$BENCH_TMP/hp-stage" >/dev/null
	[ -b "$dev" ] || { echo "bench/data-path.sh: hostpath published no device" >&2; exit 1; }
	mkfs_quiet "$dev"
	mkdir -p "$dir"
	mount "$dev" "$dir"
}

hostpath_down() {
	local id
	id=$(cat "$BENCH_TMP/hostpath.id")
	umount "$1"
	ctl hostpath node unpublish "$id" "$BENCH_TMP/hp-dev" >/dev/null
	ctl hostpath node unstage "$id" "$BENCH_TMP/hp-stage" >/dev/null
	ctl hostpath volume unpublish "$id" bench-node >/dev/null
	ctl hostpath volume delete "$id" >/dev/null
}

up() {
	local dir="$BENCH_TMP/mnt-$1-$2"
	case $1 in
	raw) mkdir -p "$dir" ;;
	volplug) csi_up volplug "$dir" "bench-$2" ;;
	buffered)
		truncate -s "$VOLSIZE" "$BENCH_TMP/buffered-$2.img"
		local dev
		dev=$(losetup --find --show --direct-io=off --sector-size 512 "$BENCH_TMP/buffered-$2.img")
		mkfs_quiet "$dev"
		mkdir -p "$dir"
		mount "$dev" "$dir"
		;;
	hostpath) hostpath_up "$dir" "bench-$2" ;;
	esac
	echo "$dir"
}

down() {
	local dir="$BENCH_TMP/mnt-$1-$2" dev
	case $1 in
	raw) rm -rf "$dir" ;;
	volplug) csi_down volplug "$dir" ;;
	buffered)
		dev=$(findmnt -n -o SOURCE "$dir")
		umount "$dir"
		losetup -d "$dev"
		rm -f "$BENCH_TMP/buffered-$2.img"
		;;
	hostpath) hostpath_down "$dir" ;;
	esac
}

# ---- jobs: each prints one number; page cache and dirty data go to $BENCH_TMP/mem ----

meminfo() { awk -v k="$1:" '$1 == k {printf "%.0f\n", $2 * 1024}' /proc/meminfo; }
now() { date +%s.%N; }
# fio, terse: field 7 read KiB/s, 8 read IOPS, 48 write KiB/s, 49 write IOPS.
fio_field() {
	local f=$1
	shift
	fio --output-format=terse --terse-version=3 "$@" | awk -F';' -v f="$f" '{print $f}'
}

job_commits() {
	fio_field 49 --name=commits --directory="$1" --rw=randwrite --bs=4k --size=256M \
		--overwrite=1 --fdatasync=1 --ioengine=psync --runtime="$RUNTIME" --time_based
}

# Sequential direct write into a fresh file, timed up to the end of its fsync.
job_seqwrite() {
	local c0 t0 t1
	c0=$(meminfo Cached)
	t0=$(now)
	fio --name=seq --directory="$1" --filename=seq --rw=write --bs=1M --size="$SIZE" \
		--direct=1 --ioengine=libaio --iodepth=4 --fallocate=none --end_fsync=1 >/dev/null
	t1=$(now)
	echo "seqwrite-cache $(($(meminfo Cached) - c0))" >>"$BENCH_TMP/mem.$2"
	awk -v b="$size_bytes" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.0f\n", b / 1048576 / (z - a)}'
}

job_seqread() {
	local c0 bw
	c0=$(meminfo Cached)
	bw=$(fio_field 7 --name=seq --directory="$1" --filename=seq --rw=read --bs=1M \
		--size="$SIZE" --direct=1 --ioengine=libaio --iodepth=4)
	echo "seqread-cache $(($(meminfo Cached) - c0))" >>"$BENCH_TMP/mem.$2"
	echo $((bw / 1024))
}

job_qd16() {
	local d0 iops
	d0=$(meminfo Dirty)
	iops=$(fio_field 49 --name=qd16 --directory="$1" --rw=randwrite --bs=4k --size=1G \
		--direct=1 --ioengine=libaio --iodepth=16 --fallocate=none --runtime="$RUNTIME" \
		--time_based)
	echo "qd16-dirty $(($(meminfo Dirty) - d0)) $((iops * 4096 * RUNTIME))" >>"$BENCH_TMP/mem.$2"
	echo "$iops"
}

targets=(raw volplug)
[ "$BUFFERED" = 1 ] && targets+=(buffered)
[ -n "$hp" ] && targets+=(hostpath)
jobs=(seqwrite seqread commits qd16)

echo "fio in a $FS volume vs the raw disk: $ROUNDS rounds, targets rotating; SIZE=$SIZE, RUNTIME=${RUNTIME}s"
for r in $(seq "$ROUNDS"); do
	n=${#targets[@]}
	for i in $(seq 0 $((n - 1))); do
		t=${targets[$(((i + r) % n))]}
		dir=$(up "$t" "$r")
		: >"$BENCH_TMP/mem.$t"
		line=
		for j in "${jobs[@]}"; do
			v=$("job_$j" "$dir" "$t")
			echo "$t $j $v" >>"$BENCH_TMP/results"
			line+=" $j $v"
		done
		# Page cache and dirty data: their growth, and its share of the bytes the job moved.
		awk -v t="$t" -v s="$size_bytes" '{print t, $1, $2; print t, $1 "-pct", 100 * $2 / ($3 ? $3 : s)}' \
			"$BENCH_TMP/mem.$t" >>"$BENCH_TMP/results"
		down "$t" "$r"
		echo "  round $r, $t:$line" >&2
	done
done

# ---- the table ----

median() { sort -g | awk '{v[NR] = $1} END {printf "%.10g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
med() { awk -v t="$1" -v j="$2" '$1 == t && $2 == j {print $3}' "$BENCH_TMP/results" | median; }

echo
printf '| %-58s |' "job (median of $ROUNDS)"
for t in "${targets[@]}"; do
	printf ' %10s |' "$t"
	[ "$t" = raw ] || printf ' %12s |' "$t/raw"
done
echo
printf '|%s|' "$(printf -- '-%.0s' $(seq 60))"
for t in "${targets[@]}"; do
	printf -- '------------|'
	[ "$t" = raw ] || printf -- '--------------|'
done
echo
row() {
	local label=$1 job=$2 raw
	raw=$(med raw "$job")
	printf '| %-58s |' "$label"
	for t in "${targets[@]}"; do
		v=$(med "$t" "$job")
		printf ' %10s |' "$v"
		[ "$t" = raw ] || awk -v v="$v" -v r="$raw" 'BEGIN {printf " %11.2fx |", (r > 0) ? v / r : 0}'
	done
	echo
}
# Page cache and dirty data: MiB, and the share of the bytes the job moved.
mem_row() {
	local label=$1 key=$2
	printf '| %-58s |' "$label"
	for t in "${targets[@]}"; do
		awk -v v="$(med "$t" "$key")" 'BEGIN {printf " %6.0f MiB |", v / 1048576}'
		[ "$t" = raw ] || printf ' %11.1f%% |' "$(med "$t" "$key-pct")"
	done
	echo
}
row "4k random overwrite + fdatasync each (commits/s)" commits
row "1 MiB sequential direct write $SIZE + fsync, fresh (MiB/s)" seqwrite
row "1 MiB sequential direct read $SIZE (MiB/s)" seqread
row "4k direct random write qd16 (IOPS)" qd16
mem_row "page cache grown by the $SIZE direct write (% of it)" seqwrite-cache
mem_row "page cache grown by the $SIZE direct read (% of it)" seqread-cache
mem_row "dirty data left after the qd16 run (% of what it wrote)" qd16-dirty

[ "$TRIM" = 1 ] || exit 0

# ---- trim: online discard vs one FITRIM after the fact ----

# churn DIR: 8 passes of 32 files of 4 MiB written, each fsync'ed, then deleted.
churn() {
	local t0
	t0=$(now)
	for _ in $(seq 8); do
		fio --name=churn --directory="$1" --rw=write --bs=1M --filesize=4M --nrfiles=32 \
			--fsync_on_close=1 --fallocate=none --unlink=1 >/dev/null
	done
	sync -f "$1"
	awk -v a="$t0" -v z="$(now)" 'BEGIN {printf "%.2f\n", z - a}'
}

data_of() { echo "$BENCH_TMP/volplug-pool/volumes/$(cat "$BENCH_TMP/volplug.id")/data"; }
allocated_mib() { echo $(($(stat -c %b "$1") * 512 / 1048576)); }

echo
echo "Trim: 8 x (32 files of 4 MiB written + fsync, then deleted) in a fresh volume, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
	for mode in discard fstrim; do
		dir="$BENCH_TMP/mnt-trim-$mode-$r"
		if [ $mode = discard ]; then
			csi_up volplug "$dir" "trim-$mode-$r" --flag discard
		else
			csi_up volplug "$dir" "trim-$mode-$r"
		fi
		data=$(data_of)
		base=$(allocated_mib "$data")
		# A file that stays, so the volume is not empty: 256 MiB.
		fio --name=keep --directory="$dir" --rw=write --bs=1M --size=256M --direct=1 >/dev/null
		took=$(churn "$dir")
		sleep 1 # what online discard does after the commit, counted for both
		left=$(($(allocated_mib "$data") - base - 256))
		t0=$(now)
		fstrim "$dir"
		trim_s=$(awk -v a="$t0" -v z="$(now)" 'BEGIN {printf "%.3f\n", z - a}')
		after=$(($(allocated_mib "$data") - base - 256))
		printf '%s churn %s\n%s left %s\n%s fitrim %s\n%s after %s\n' "$mode" "$took" \
			"$mode" "$left" "$mode" "$trim_s" "$mode" "$after" >>"$BENCH_TMP/trim"
		csi_down volplug "$dir"
	done
done
tmed() { awk -v m="$1" -v k="$2" '$1 == m && $2 == k {print $3}' "$BENCH_TMP/trim" | median; }
trow() { printf '| %-58s | %14s | %14s |\n' "$@"; }
trow "median of $ROUNDS" "mount discard" "FITRIM later"
printf '|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 60))" "----------------" "----------------"
trow "churn time (s)" "$(tmed discard churn)" "$(tmed fstrim churn)"
trow "data file beyond the file kept, 1 s after the churn (MiB)" \
	"$(tmed discard left)" "$(tmed fstrim left)"
trow "one FITRIM then (s)" "$(tmed discard fitrim)" "$(tmed fstrim fitrim)"
trow "data file beyond the file kept, after it (MiB)" "$(tmed discard after)" \
	"$(tmed fstrim after)"
