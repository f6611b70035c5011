#!/usr/bin/env bash
# The fsGroup walk (volplugctl ownership apply) against the usual manual fix, coreutils
# `chown -R :GID` + `chmod -R g+rwX`, on a tmpfs and on an ext4 loop volume. For each tree size
# it prints one row: first run (everything to change), second run (already right),
# OnRootMismatch, and the coreutils pair; time (median of RUNS runs) and syscalls per entry.
# Syscalls are counted with perf (tracepoint raw_syscalls:sys_enter) when it works, else
# strace -c (strace before 6.5 does not count fchmodat2, so the first run's count is then too
# low). volplug times are the walk as the library measures it (what NodePublish pays); the
# volplugctl process adds its start-up (grpc_init), shown in the OnRootMismatch column. Caches
# are warm for every run.
#
# Needs root. Usage: bench/ownership.sh [FILES...]   (default: 100000 1000000)
# Environment: VOLPLUGCTL (default ./build/src/cmd/volplugctl), FILESYSTEMS (default
# "tmpfs ext4"), GID (default 4321), COUNT=0 to skip the syscall counts,
# BENCH_DIR (where the ext4 image goes, default /var/tmp), PER_DIR (files per directory,
# default 20; 10000 gives wide directories), RUNS (timed runs of each, default 3).
set -euo pipefail

VOLPLUGCTL=${VOLPLUGCTL:-./build/src/cmd/volplugctl}
FILESYSTEMS=${FILESYSTEMS:-tmpfs ext4}
GID=${GID:-4321}
COUNT=${COUNT:-1}
PER_DIR=${PER_DIR:-20}
RUNS=${RUNS:-3}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(100000 1000000)

[ "$(id -u)" = 0 ] || { echo "bench/ownership.sh: needs root" >&2; exit 2; }
[ -x "$VOLPLUGCTL" ] || { echo "bench/ownership.sh: no $VOLPLUGCTL (build first, or set VOLPLUGCTL)" >&2; exit 2; }
for tool in python3 mkfs.ext4 losetup chown chmod chgrp; do
	command -v "$tool" >/dev/null || { echo "bench/ownership.sh: needs $tool" >&2; exit 2; }
done
COUNTER=
if [ "$COUNT" = 1 ]; then
	if perf stat -e raw_syscalls:sys_enter -x, -o /dev/null true 2>/dev/null; then
		COUNTER=perf
	elif command -v strace >/dev/null; then
		COUNTER=strace
		echo "bench/ownership.sh: no perf tracepoints, counting with strace" >&2
	else
		echo "bench/ownership.sh: neither perf nor strace, syscall counts skipped" >&2
		COUNT=0
	fi
fi

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/volplug-ownership.XXXXXX")
MOUNTS=()
LOOPS=()
cleanup() {
	local m l
	for m in "${MOUNTS[@]}"; do umount -l "$m" 2>/dev/null || true; done
	for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# make_tree DIR FILES: FILES regular files (1% of them symlinks instead) spread over
# FILES/PER_DIR directories, breadth-first with fan-out 6: depths 1 to 6 mixed. Prints the
# number of entries, the root included.
make_tree() {
	python3 - "$1" "$2" "$PER_DIR" <<'EOF'
import os, sys
root, files, per_dir = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
os.mkdir(root, 0o755)
dirs, queue = [root], [root]
want = max(1, files // per_dir)
while len(dirs) < want:
    parent = queue.pop(0)
    for i in range(6):
        if len(dirs) >= want:
            break
        d = os.path.join(parent, "d%d" % i)
        os.mkdir(d, 0o755)
        dirs.append(d)
        queue.append(d)
for i in range(files):
    d = dirs[i % len(dirs)]
    if i % 100 == 99:
        os.symlink("f%d" % (i - len(dirs)), os.path.join(d, "l%d" % i))
    else:
        os.close(os.open(os.path.join(d, "f%d" % i), os.O_CREAT | os.O_WRONLY, 0o644))
print(len(dirs) + files)
EOF
}

# Back to "nothing done": group 0 everywhere, no group bits, no setgid.
reset_tree() {
	chgrp -hR 0 "$1"
	chmod -R g-rwxs "$1"
	sync
}

now_ns() { date +%s%N; }

# timed CMD...: runs it, output to $WORK/out; sets ELAPSED (seconds, 3 decimals)
timed() {
	local t0 t1
	t0=$(now_ns)
	"$@" >"$WORK/out" 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }
	t1=$(now_ns)
	ELAPSED=$(awk -v d=$((t1 - t0)) 'BEGIN { printf "%.3f", d / 1e9 }')
}

# syscalls CMD...: total syscalls made by CMD (and its children)
syscalls() {
	if [ "$COUNTER" = perf ]; then
		perf stat -e raw_syscalls:sys_enter -x, -o "$WORK/count" -- "$@" >/dev/null 2>&1 || true
		awk -F, '/raw_syscalls:sys_enter/ { print $1 }' "$WORK/count"
	else
		strace -f -c -o "$WORK/count" "$@" >/dev/null 2>&1 || true
		awk '$NF == "total" { print $4 }' "$WORK/count"
	fi
}

median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
per_entry() { awk -v c="$1" -v n="$2" 'BEGIN { printf "%.2f", c / n }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx", (b > 0 ? a / b : 0) }'; }
field() { awk -F': ' -v k="$1" '$1 == k { print $2 }' "$WORK/out"; }
lib_elapsed() { field elapsed | awk '{ printf "%.3f", $1 }'; }

mount_fs() { # FS FILES: mounts a fresh filesystem, sets MNT
	MNT=$(mktemp -d "$WORK/mnt.XXXXXX")
	case "$1" in
	tmpfs)
		mount -t tmpfs -o size=8G,nr_inodes=0,mode=0755 tmpfs "$MNT"
		;;
	ext4)
		truncate -s 16G "$WORK/ext4.img"
		mkfs.ext4 -q -F -N $(($2 * 12 / 10 + 10000)) "$WORK/ext4.img"
		LOOP=$(losetup --find --show "$WORK/ext4.img")
		LOOPS+=("$LOOP")
		# noinit_itable: no background inode-table zeroing during the runs
		mount -o noinit_itable "$LOOP" "$MNT"
		;;
	*)
		echo "bench/ownership.sh: unknown filesystem $1" >&2
		exit 2
		;;
	esac
	MOUNTS+=("$MNT")
}

umount_fs() { # FS
	umount "$MNT"
	if [ "$1" = ext4 ]; then
		losetup -d "$LOOP"
		rm -f "$WORK/ext4.img"
	fi
}

printf '%-6s %9s | %-16s | %-16s | %-24s | %-16s | %-16s | %9s | %9s %9s\n' \
	fs entries "first s  sys/ent" "second s sys/ent" "OnRootMismatch lib/wall" \
	"chown -R s  sys/e" "chmod -R s  sys/e" "coreutils" "first vs" "second"
printf '%-6s %9s | %-16s | %-16s | %-24s | %-16s | %-16s | %9s | %9s %9s\n' \
	"" "" "" "" "us / ms / syscalls" "" "" "total s" "coreutils" "speedup"

for fs in $FILESYSTEMS; do
	for n in "${SIZES[@]}"; do
		mount_fs "$fs" "$n"
		TREE=$MNT/tree
		APPLY=("$VOLPLUGCTL" ownership apply "$TREE" --gid "$GID")
		ORM=("${APPLY[@]}" --policy OnRootMismatch)
		CHOWN=(chown -R ":$GID" "$TREE")
		CHMOD=(chmod -R g+rwX "$TREE")
		entries=$(make_tree "$TREE" "$n")
		reset_tree "$TREE"

		"$VOLPLUGCTL" --version >/dev/null # load the binary before timing it
		firsts=() seconds=()
		for ((run = 1; run <= RUNS; run++)); do
			[ "$run" = 1 ] || reset_tree "$TREE"
			timed "${APPLY[@]}"
			firsts+=("$(lib_elapsed)")
			[ "$(field entries)" = "$entries" ] || echo "warning: walked $(field entries) of $entries entries" >&2
			[ "$(field changed)" = "$entries" ] || echo "warning: first run changed $(field changed) of $entries" >&2
			if [ "$run" = 1 ]; then
				left=$(find "$TREE" \( ! -group "$GID" -o \( ! -type l ! -perm -g=rw \) \) | wc -l)
				[ "$left" = 0 ] || echo "warning: $left entries not right after the first run" >&2
			fi
			timed "${APPLY[@]}"
			seconds+=("$(lib_elapsed)")
			[ "$(field changed)" = 0 ] || echo "warning: second run changed $(field changed)" >&2
		done
		first=$(median "${firsts[@]}")
		second=$(median "${seconds[@]}")
		timed "${ORM[@]}"
		orm_wall=$(awk -v s="$ELAPSED" 'BEGIN { printf "%.1f", s * 1000 }')
		orm_lib=$(field elapsed | awk '{ printf "%.0f", $1 * 1e6 }')
		[ "$(field skipped)" = yes ] || echo "warning: OnRootMismatch did not skip" >&2

		first_sc=- second_sc=- orm_sc=- chown_sc=- chmod_sc=-
		if [ "$COUNT" = 1 ]; then
			reset_tree "$TREE"
			first_sc=$(per_entry "$(syscalls "${APPLY[@]}")" "$entries")
			second_sc=$(per_entry "$(syscalls "${APPLY[@]}")" "$entries")
			orm_sc=$(syscalls "${ORM[@]}")
		fi

		chowns=() chmods=()
		for ((run = 1; run <= RUNS; run++)); do
			reset_tree "$TREE"
			timed "${CHOWN[@]}"
			chowns+=("$ELAPSED")
			timed "${CHMOD[@]}"
			chmods+=("$ELAPSED")
		done
		chown_t=$(median "${chowns[@]}")
		chmod_t=$(median "${chmods[@]}")
		if [ "$COUNT" = 1 ]; then
			reset_tree "$TREE"
			chown_sc=$(per_entry "$(syscalls "${CHOWN[@]}")" "$entries")
			chmod_sc=$(per_entry "$(syscalls "${CHMOD[@]}")" "$entries")
		fi
		core=$(awk -v a="$chown_t" -v b="$chmod_t" 'BEGIN { printf "%.3f", a + b }')

		printf '%-6s %9s | %8s %7s | %8s %7s | %7s / %6s / %6s | %8s %7s | %8s %7s | %9s | %9s %9s\n' \
			"$fs" "$entries" "$first" "$first_sc" "$second" "$second_sc" \
			"$orm_lib" "$orm_wall" "$orm_sc" "$chown_t" "$chown_sc" "$chmod_t" "$chmod_sc" \
			"$core" "$(ratio "$core" "$first")" "$(ratio "$first" "$second")"
		umount_fs "$fs"
	done
done
echo "(times: medians of $RUNS runs; first vs coreutils: coreutils time / first-run time;"
echo " second speedup: first / second;"
echo " OnRootMismatch: time inside the library / whole volplugctl process / its syscalls;"
echo " syscalls counted with ${COUNTER:-nothing})"
