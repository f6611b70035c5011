#!/usr/bin/env bash
# Where a commit's time goes: fio in a loop volume against a directory of the pool's own
# filesystem, and the journal commits and cache flushes each fdatasync costs on each layer.
#
# The pool is an ext4 filesystem made on a loop device over a file under /tmp (POOL=loop, the
# default: its journal is visible in /proc/fs/jbd2, so its commits can be counted, and the
# disk under /tmp is what the numbers measure) or a directory given as POOL (the machine's own
# filesystem: only throughput, unless /proc/fs/jbd2 lists its device). The volume is a file in
# the pool behind a loop device as volplugd attaches it (direct I/O, the pool filesystem's
# 4096-byte logical blocks), formatted as volplugd formats it (mkfs.ext4 -E
# lazy_itable_init=1,lazy_journal_init=1) and mounted with default options (MNT to change).
#
# The directory volume (volumeKind: directory, docs/pool.md) is a directory of the pool's
# filesystem bind-mounted nodev,nosuid elsewhere, as NodeStageVolume binds it, with a project
# quota of VOLSIZE where the pool's filesystem enforces project quotas (xfs -o prjquota, ext4
# -O project,quota -o prjquota; POOL=loop: DIRFS=xfs makes the pool xfs with prjquota); the
# header says whether it had one. DIRVOL=0 leaves it out.
#
# The fast-commit volume (FASTCOMMIT=1, the default; the ext4FastCommit parameter,
# docs/pool.md) is a second loop volume formatted with mkfs.ext4 -O fast_commit: an fsync that
# ext4 can describe in a fast commit writes that one record instead of a jbd2 commit. Left out,
# with a line saying why, where mkfs.ext4 or the kernel (before Linux 5.10) has no fast commits.
#
# Jobs: 4k random overwrite + fdatasync each on a file laid out first (a database's pages);
# 4k appends + fdatasync each to a fresh file (a log); 1 MiB sequential direct write of SIZE
# + fsync; 4k direct random write at queue depth 16. Rounds alternate raw and volume; the
# table shows medians and the ratio. Then, for COUNT fdatasyncs of each of the first two, the
# journal commits (jbd2 transactions) and flushes (the block devices' flush counters) per
# fdatasync, on the pool and in the volume: these do not depend on a noisy neighbour.
#
# Needs root, fio, losetup, mkfs.ext4. Environment: ROUNDS (5), RUNTIME (5 s per timed job),
# SIZE (1G), COUNT (2000), POOL (loop), VOLSIZE (8G), MNT (defaults), DIRVOL (1), DIRFS (ext4),
# FASTCOMMIT (1), JOBS (overwrite append seq qd16: which of the timed jobs run). On a kernel without project
# quotas, tests/vm/run.sh runs it in a VM (docs/bench.md).
set -Eeu -o pipefail
trap 'echo "bench/commit.sh: line $LINENO failed: $BASH_COMMAND" >&2' ERR
ROUNDS=${ROUNDS:-5}
RUNTIME=${RUNTIME:-5}
SIZE=${SIZE:-1G}
COUNT=${COUNT:-2000}
POOL=${POOL:-loop}
VOLSIZE=${VOLSIZE:-8G}
MNT=${MNT:-defaults}
DIRVOL=${DIRVOL:-1}
DIRFS=${DIRFS:-ext4}
FASTCOMMIT=${FASTCOMMIT:-1}
JOBS=${JOBS:-overwrite append seq qd16}

[ "$(id -u)" = 0 ] || { echo "bench/commit.sh: needs root" >&2; exit 2; }
for tool in fio losetup mkfs.ext4 findmnt; do
	command -v "$tool" >/dev/null || { echo "bench/commit.sh: needs $tool" >&2; exit 2; }
done

T=$(mktemp -d /tmp/volplug-commit.XXXXXX)
LOOPS=()
cleanup() {
	set +e
	trap - ERR
	# The volumes first (the file and the directory are in the pool), then the pool.
	mountpoint -q "$T/vol" && umount "$T/vol"
	mountpoint -q "$T/fcvol" && umount "$T/fcvol"
	mountpoint -q "$T/dirvol" && umount "$T/dirvol"
	for ((i = ${#LOOPS[@]} - 1; i >= 0; i--)); do
		losetup -d "${LOOPS[i]}"
		[ "$i" = 1 ] && [ "$POOL" = loop ] && mountpoint -q "$T/pool" && umount "$T/pool"
	done
	mountpoint -q "$T/pool" && umount "$T/pool"
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A loop device over a file as volplugd attaches it: direct I/O, or buffered where the file's
# filesystem refuses it (tmpfs before Linux 6.6: a pool under a VM's /tmp).
attach() {
	losetup --find --show --direct-io=on --sector-size 4096 "$1" 2>/dev/null ||
		losetup --find --show --sector-size 4096 "$1"
}
# "direct I/O" or "buffered": how the loop device passes its I/O to its file.
dio() {
	[ "$(cat "/sys/block/$(basename "$1")/loop/dio" 2>/dev/null)" = 1 ] && echo "direct I/O" ||
		echo buffered
}
# Journal commits of the filesystem on a block device: jbd2's transaction count of ext4's
# journal, or xfs's log writes (each a commit of its in-core log to the disk: the "log" line of
# /sys/fs/xfs/DEV/stats/stats); "" when neither is visible.
commits() {
	local f x
	f=/proc/fs/jbd2/$(basename "$1")-8/info
	x=/sys/fs/xfs/$(basename "$(readlink -f "$1")")/stats/stats
	if [ -r "$f" ]; then
		awk 'NR == 1 {print $1}' "$f"
	elif [ -r "$x" ]; then
		awk '$1 == "log" {print $2}' "$x"
	else
		echo ""
	fi
}
# Flush requests the block device completed (Documentation/block/stat.rst, field 16).
flushes() { awk '{print $16}' "/sys/block/$(basename "$(readlink -f "$1")")/stat"; }

if [ "$POOL" = loop ]; then
	truncate -s 32G "$T/pool.img"
	pooldev=$(attach "$T/pool.img")
	LOOPS+=("$pooldev")
	mkdir "$T/pool"
	if [ "$DIRFS" = xfs ]; then
		mkfs.xfs -q -f "$pooldev"
		# without project quotas in the kernel: the pool all the same, the header says so
		mount -o prjquota "$pooldev" "$T/pool" 2>/dev/null || mount "$pooldev" "$T/pool"
	else
		mkfs.ext4 -q -E lazy_itable_init=0,lazy_journal_init=0 "$pooldev"
		mount "$pooldev" "$T/pool"
	fi
	pool=$T/pool
	pooldesc="$DIRFS on a loop device ($(dio "$pooldev")) over a file in $(findmnt -n -o SOURCE,FSTYPE -T /tmp | tr -s ' ' ' ')"
else
	pool=$(mktemp -d "$POOL/volplug-commit.XXXXXX")
	trap 'cleanup; rm -rf "$pool"' EXIT
	pooldev=$(findmnt -n -o SOURCE -T "$pool")
	pooldesc="$(findmnt -n -o SOURCE,FSTYPE -T "$pool" | tr -s ' ' ' ')"
fi

# KiB project 4242 uses on the pool's filesystem, its hard limit; fails when it has no quota.
project_used() {
	xfs_quota -x -c "report -p -n -N -b" "$pool" 2>/dev/null |
		awk '$1 == "#4242" {print $2, $4; found = 1} END {exit !found}'
}

# loop_volume NAME MOUNTPOINT [MKFS OPTIONS...]: a sparse file of the pool behind a loop device,
# formatted as volplugd formats it (plus the options) and mounted; the device in $LOOP_DEV.
loop_volume() {
	truncate -s "$VOLSIZE" "$pool/$1.img"
	LOOP_DEV=$(attach "$pool/$1.img")
	LOOPS+=("$LOOP_DEV")
	mkdir "$2"
	mkfs.ext4 -q "${@:3}" -E lazy_itable_init=1,lazy_journal_init=1 "$LOOP_DEV" &&
		mount -o "$MNT" "$LOOP_DEV" "$2"
}
mkdir "$pool/raw"
loop_volume volume "$T/vol"
voldev=$LOOP_DEV
targets=(raw volume)
fcdev=
fcdesc=
if [ "$FASTCOMMIT" = 1 ]; then
	if loop_volume fcvolume "$T/fcvol" -O fast_commit 2>/dev/null &&
		[ -r "/proc/fs/ext4/$(basename "$LOOP_DEV")/fc_info" ]; then
		fcdev=$LOOP_DEV
		targets+=(fcvolume)
		fcdesc="; fcvolume: the same with -O fast_commit"
	else
		fcdesc="; no fast-commit volume: mkfs.ext4 or the kernel has no fast commits"
	fi
fi
dirdesc=
if [ "$DIRVOL" = 1 ]; then
	mkdir "$pool/dirvol" "$T/dirvol"
	# A project quota where the filesystem enforces them (as volplugd sets it: the project ID
	# with inheritance on the directory, a hard limit of bytes).
	quota="no project quota: $(findmnt -n -o FSTYPE,OPTIONS -T "$pool" | tr -s ' ' ' ') enforces none"
	# (xfs_quota's "quota" prints nothing for a project that uses nothing yet: "report" does)
	if chattr +P -p 4242 "$pool/dirvol" 2>/dev/null &&
		xfs_quota -x -c "limit -p bhard=$VOLSIZE 4242" "$pool" 2>/dev/null &&
		project_used >/dev/null; then
		quota="project quota of $VOLSIZE"
	fi
	mount --bind -o nodev,nosuid "$pool/dirvol" "$T/dirvol"
	targets+=(dirvol)
	dirdesc="; directory volume: a directory of the pool bind-mounted nodev,nosuid ($quota)"
fi
dir_of() {
	case $1 in
	raw) echo "$pool/raw" ;;
	dirvol) echo "$T/dirvol" ;;
	fcvolume) echo "$T/fcvol" ;;
	*) echo "$T/vol" ;;
	esac
}

fio_iops() { fio --output-format=terse --terse-version=3 "$@" | awk -F';' '{print $49}'; }
job_overwrite() {
	fio_iops --name=ow --directory="$1" --filename=ow --rw=randwrite --bs=4k --size=64M \
		--overwrite=1 --fdatasync=1 --ioengine=sync --runtime="$RUNTIME" --time_based
}
job_append() {
	rm -f "$1/log"
	fio_iops --name=log --directory="$1" --filename=log --rw=write --bs=4k --size=4G \
		--fallocate=none --fdatasync=1 --ioengine=sync --runtime="$RUNTIME" --time_based
}
job_seq() {
	local t0 t1 b
	b=$(numfmt --from=iec "$SIZE")
	rm -f "$1/seq"
	t0=$(date +%s.%N)
	fio --name=seq --directory="$1" --filename=seq --rw=write --bs=1M --size="$SIZE" \
		--direct=1 --ioengine=libaio --iodepth=4 --fallocate=none --end_fsync=1 >/dev/null
	t1=$(date +%s.%N)
	rm -f "$1/seq"
	awk -v b="$b" -v a="$t0" -v z="$t1" 'BEGIN {printf "%.0f\n", b / 1048576 / (z - a)}'
}
job_qd16() {
	fio_iops --name=qd16 --directory="$1" --filename=qd16 --rw=randwrite --bs=4k --size=1G \
		--direct=1 --ioengine=libaio --iodepth=16 --fallocate=none --runtime="$RUNTIME" \
		--time_based
}

echo "pool: $pooldesc; volume: ext4 ($MNT) on a loop device ($(dio "$voldev"), 4096-byte blocks) over a sparse $VOLSIZE file$fcdesc$dirdesc"
echo "$ROUNDS rounds, ${targets[*]} in turn (each round starts one later), RUNTIME=${RUNTIME}s, SIZE=$SIZE"
read -r -a jobs <<<"$JOBS"
for r in $(seq "$ROUNDS"); do
	n=${#targets[@]}
	order=()
	for ((i = 0; i < n; i++)); do order+=("${targets[(i + r - 1) % n]}"); done
	for t in "${order[@]}"; do
		line=
		for j in "${jobs[@]}"; do
			v=$("job_$j" "$(dir_of "$t")")
			echo "$t $j $v" >>"$T/results"
			line+=" $j $v"
		done
		echo "  round $r, $t:$line" >&2
	done
done

if [ "$DIRVOL" = 1 ] && [ "${quota#project}" != "$quota" ]; then
	read -r used limit <<<"$(project_used)"
	echo "the directory volume's project quota counts $used KiB (hard limit $limit KiB)"
fi

median() { sort -g | awk '{v[NR] = $1} END {printf "%.10g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
med() { awk -v t="$1" -v j="$2" '$1 == t && $2 == j {print $3}' "$T/results" | median; }
echo
# The table: raw, then each other target with its ratio to raw.
head="| $(printf '%-52s' "job (median of $ROUNDS)") | $(printf '%9s' raw) |"
rule="|$(printf -- '-%.0s' $(seq 54))|-----------|"
for t in "${targets[@]:1}"; do
	head+=" $(printf '%10s' "$t") |   ratio |"
	rule+="------------|---------|"
done
echo "$head"
echo "$rule"
row() {
	local raw line t v
	raw=$(med raw "$2")
	line="| $(printf '%-52s' "$1") | $(printf '%9s' "$raw") |"
	for t in "${targets[@]:1}"; do
		v=$(med "$t" "$2")
		line+=$(awk -v a="$raw" -v b="$v" 'BEGIN {printf " %10s | %6.2fx |", b, (a > 0) ? b / a : 0}')
	done
	echo "$line"
}
for j in "${jobs[@]}"; do
	case $j in
	overwrite) row "4k overwrite + fdatasync (commits/s)" overwrite ;;
	append) row "4k append to new blocks + fdatasync (commits/s)" append ;;
	seq) row "1 MiB sequential direct write $SIZE + fsync (MiB/s)" seq ;;
	qd16) row "4k direct random write qd16 (IOPS)" qd16 ;;
	esac
done

# ---- per fdatasync: journal commits and flushes on each layer ----

# The loop device of a volume target; "" for the others.
dev_of() {
	case $1 in
	volume) echo "$voldev" ;;
	fcvolume) echo "$fcdev" ;;
	esac
}
# Fast commits of the ext4 filesystem on a block device ("" without fast commits).
fast_commits() {
	awk '$2 == "commits" {print $1; exit}' "/proc/fs/ext4/$(basename "$1")/fc_info" 2>/dev/null
}

# count TARGET JOB: COUNT fdatasyncs; prints pool commits, pool flushes, volume commits,
# volume fast commits, volume flushes per fdatasync ("-" where not visible).
count() {
	local d dev pc0 pf0 vc0 vf0 vfc0
	d=$(dir_of "$1")
	rm -f "$d/c"
	if [ "$2" = overwrite ]; then
		fio --name=lay --directory="$d" --filename=c --rw=write --bs=1M --size=64M >/dev/null
		sync -f "$d"
	fi
	dev=$(dev_of "$1")
	pc0=$(commits "$pooldev") pf0=$(flushes "$pooldev")
	[ -z "$dev" ] || { vc0=$(commits "$dev") vf0=$(flushes "$dev") vfc0=$(fast_commits "$dev"); }
	if [ "$2" = overwrite ]; then
		fio --name=c --directory="$d" --filename=c --rw=randwrite --bs=4k --size=64M \
			--fdatasync=1 --ioengine=sync --number_ios="$COUNT" >/dev/null
	else
		fio --name=c --directory="$d" --filename=c --rw=write --bs=4k \
			--size=$((COUNT * 4))k --fallocate=none --fdatasync=1 --ioengine=sync >/dev/null
	fi
	per() { [ -n "$1" ] && awk -v a="$1" -v b="$2" -v n="$COUNT" 'BEGIN {printf "%.2f", (b - a) / n}' || echo -; }
	echo "$(per "$pc0" "$(commits "$pooldev")") $(per "$pf0" "$(flushes "$pooldev")")" \
		"$([ -n "$dev" ] && echo "$(per "$vc0" "$(commits "$dev")") $(per "$vfc0" "$(fast_commits "$dev")") $(per "$vf0" "$(flushes "$dev")")" || echo "- - -")"
	rm -f "$d/c"
}
echo
echo "Per fdatasync, over $COUNT of them:"
printf '| %-40s | %12s | %12s | %14s | %12s | %14s |\n' job "pool commits" "pool flushes" "volume commits" "fast commits" "volume flushes"
printf '|%s|%s|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' $(seq 42))" -------------- -------------- ---------------- -------------- ----------------
for j in overwrite append; do
	for t in "${targets[@]}"; do
		read -r a b c f d <<<"$(count "$t" "$j")"
		printf '| %-40s | %12s | %12s | %14s | %12s | %14s |\n' "$j, $t" "$a" "$b" "$c" "$f" "$d"
	done
done
