#!/usr/bin/env bash
# The snapshot store (src/store) against `aws s3 cp` of the same volume to the same S3 peer in
# the same run: a full upload, a second snapshot after 1% of the volume's blocks changed, and
# a restore on another "node" (another directory, nothing shared with the first but the store).
#
# The volume: a sparse SIZE file (4G) holding DATA (2G) of data, in a pool that is xfs with
# reflinks (over a loop device, as the pool keeps a volume's snapshots beside it): an ext4
# filesystem made on it through a loop device (as volplugd formats: lazy inode tables and
# journal), filled half with copies of files from /usr (compressible: binaries, libraries,
# text) and half with files of /dev/urandom (incompressible), COMPRESSIBLE (50) percent the
# first. Then reflinks of it (the second snapshots) with CHANGE (1) percent of the volume's
# 4 KiB blocks rewritten with random bytes, at random places among the allocated blocks: one-
# block runs ("random 4K blocks": a database's pages, the worst case for chunks) and RUN (256:
# 1 MiB) block runs ("1 MiB runs": files rewritten). Two of each: one goes up found by
# hashing every chunk, the other ("FIEMAP", other blocks and bytes) with the first snapshot
# as its base, its changed chunks found by the extents it no longer shares with the first.
# The files are read from the page cache by both sides.
#
# Each round, on each peer, in alternating order:
#   ours   for each chunk size in CHUNKS (4M 1M): an empty store; the full upload
#          (store_upload of the volume, PARALLEL threads), then the second snapshots (by
#          hashing, then by FIEMAP: the store holds the first's chunks), then a restore of the
#          first into another directory (store_restore; fsync'ed)
#   aws    an empty store; `aws s3 cp` of the volume file (all SIZE of it, holes as zeros),
#          `aws s3 cp` of a dense file of just its allocated bytes, and both down again into
#          another directory (then `sync FILE`, as ours fsyncs)
# Every step is a process of its own under /usr/bin/time: wall, user+sys CPU, peak RSS. The
# table shows medians of ROUNDS (3), bytes sent (ours: the compressed chunks it put; aws: the
# object), CPU seconds per GiB of the volume's data, peak RSS, and the CPU seconds the peer
# spent on the step (its processes' utime + stime). Restores are checked against the volume
# (cmp) in the first round. ZSTD sets the store's zstd level (0: its default). A step that
# runs past STEP_TIMEOUT (600 s) is stopped and shown as such (aws's ranged GETs of a 4 GiB
# object from moto, which reads the whole object for each).
#
# Peers (PEERS, "s3sim moto"): tests/s3sim/s3sim.py (in memory, one Python process; its
# speed bounds both sides alike) and moto's S3 (MOTO_PATH, /opt/moto; skipped with the reason
# when absent). Both check SigV4 signatures; our client and aws sign the payload's SHA-256.
#
# Needs root, losetup, mkfs.ext4, mkfs.xfs, python3, /usr/bin/aws, /usr/bin/time, a build (BUILD=build).
set -Eeu -o pipefail
trap 'echo "bench/store.sh: line $LINENO failed: $BASH_COMMAND" >&2' ERR
ROUNDS=${ROUNDS:-3}
SIZE=${SIZE:-4G}
DATA=${DATA:-2G}
COMPRESSIBLE=${COMPRESSIBLE:-50}
CHANGE=${CHANGE:-1}
RUN=${RUN:-256}
CHUNKS=${CHUNKS:-4M 1M}
PARALLEL=${PARALLEL:-4}
ZSTD=${ZSTD:-0}
STEP_TIMEOUT=${STEP_TIMEOUT:-600}
PEERS=${PEERS:-s3sim moto}
BUILD=${BUILD:-build}
AWS=${AWS:-/usr/bin/aws}
SRC=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$BUILD/bench/store-bench

[ "$(id -u)" = 0 ] || { echo "bench/store.sh: needs root" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "bench/store.sh: build first ($BENCH)" >&2; exit 2; }
for tool in losetup mkfs.ext4 mkfs.xfs python3 "$AWS" /usr/bin/time cmp; do
	command -v "$tool" >/dev/null || { echo "bench/store.sh: needs $tool" >&2; exit 2; }
done

T=$(mktemp -d /tmp/volplug-store.XXXXXX)
PEER_FD=
LOOP=
POOL_LOOP=
cleanup() {
	set +e
	trap - ERR
	[ -n "$PEER_FD" ] && exec {PEER_FD}>&-
	wait
	mountpoint -q "$T/mnt" && umount "$T/mnt"
	[ -n "$LOOP" ] && losetup -d "$LOOP"
	mountpoint -q "$T/pool" && umount "$T/pool"
	[ -n "$POOL_LOOP" ] && losetup -d "$POOL_LOOP"
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

bytes() { numfmt --from=iec "$1"; }
size_b=$(bytes "$SIZE")
data_b=$(bytes "$DATA")
comp_b=$((data_b * COMPRESSIBLE / 100))

# ---- the pool: xfs with reflinks, as snapshots beside a volume are taken ----
truncate -s 32G "$T/pool.img"
POOL_LOOP=$(losetup --find --show "$T/pool.img")
mkfs.xfs -q -m reflink=1 "$POOL_LOOP"
mkdir "$T/pool"
mount "$POOL_LOOP" "$T/pool"
P=$T/pool

# ---- the volume ----
echo "making the volume: $SIZE sparse, $DATA of data ($COMPRESSIBLE% copies of /usr, the rest /dev/urandom)" >&2
truncate -s "$SIZE" "$P/vol.img"
LOOP=$(losetup --find --show "$P/vol.img")
mkfs.ext4 -q -E lazy_itable_init=1,lazy_journal_init=1 "$LOOP"
mkdir "$T/mnt"
mount "$LOOP" "$T/mnt"
# Whole files from /usr, in find's order, copied again and again until comp_b bytes.
find /usr/lib /usr/share /usr/bin -xdev -type f -size -64M -printf '%s %p\n' >"$T/usr.all" 2>/dev/null || true
awk -v cap="$comp_b" '{n += $1; sub(/^[0-9]+ /, ""); print} n >= cap {exit}' "$T/usr.all" >"$T/usr.list"
copied=0
i=0
while [ "$copied" -lt "$comp_b" ]; do
	mkdir "$T/mnt/usr.$i"
	tar -C / --verbatim-files-from -T "$T/usr.list" -cf - 2>/dev/null | tar -C "$T/mnt/usr.$i" -xf -
	copied=$(du -sb "$T/mnt" | awk '{print $1}')
	i=$((i + 1))
done
mkdir "$T/mnt/random"
left=$((data_b - comp_b))
i=0
while [ "$left" -gt 0 ]; do
	n=$((left < 64 << 20 ? left : 64 << 20))
	head -c "$n" /dev/urandom >"$T/mnt/random/$i"
	left=$((left - n))
	i=$((i + 1))
done
umount "$T/mnt"
losetup -d "$LOOP"
LOOP=
alloc_b=$(($(stat -c %b "$P/vol.img") * 512))
# The other files: the changed copies, and a dense one of just the allocated bytes.
# Reflinks of the volume, as the pool's snapshots are: the changed copies share every block
# they did not rewrite with it. The -f ones (other blocks, other bytes: none of their chunks
# is in the store before) go up with the first snapshot as their base (changed ranges by
# FIEMAP), the others by hashing every chunk.
for kind in random runs random-f runs-f; do
	cp --reflink=always "$P/vol.img" "$P/vol-$kind.img"
done
"$BENCH" scribble "$P/vol-random.img" "$CHANGE" 1 1 >/dev/null
"$BENCH" scribble "$P/vol-runs.img" "$CHANGE" "$RUN" 2 >/dev/null
"$BENCH" scribble "$P/vol-random-f.img" "$CHANGE" 1 3 >/dev/null
"$BENCH" scribble "$P/vol-runs-f.img" "$CHANGE" "$RUN" 4 >/dev/null
python3 - "$P/vol.img" "$P/data.img" <<'EOF'
import os, sys
src, dst = os.open(sys.argv[1], os.O_RDONLY), os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT, 0o600)
off, end = 0, os.fstat(src).st_size
while off < end:
    try:
        d = os.lseek(src, off, os.SEEK_DATA)
    except OSError:
        break
    h = os.lseek(src, d, os.SEEK_HOLE)
    while d < h:
        os.write(dst, os.pread(src, min(8 << 20, h - d), d))
        d += min(8 << 20, h - d)
    off = h
EOF
dense_b=$(stat -c %s "$P/data.img")
echo "volume: $(numfmt --to=iec "$size_b") file, $(numfmt --to=iec "$alloc_b") allocated (ext4 + $(numfmt --to=iec "$data_b") of files)" >&2
"$BENCH" cost --chunk-size 4M --zstd-level "${ZSTD/#0/1}" "$P/vol.img" >"$T/cost"
cat "$T/cost" >&2

export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_DEFAULT_REGION=us-east-1 AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export HOME=$T
unset http_proxy HTTP_PROXY https_proxy HTTPS_PROXY all_proxy ALL_PROXY
BUCKET=volplug-snaps

# ---- peers ----
# start_PEER: sets ENDPOINT and the credentials; store_empty_PEER: forgets every object.
start_s3sim() {
	mkfifo "$T/peer.in"
	python3 "$SRC/tests/s3sim/s3sim.py" <"$T/peer.in" >"$T/peer.out" &
	PEER_PID=$!
	exec {PEER_FD}>"$T/peer.in"
	for _ in $(seq 100); do grep -q PORT "$T/peer.out" && break; sleep 0.1; done
	ENDPOINT=http://127.0.0.1:$(awk '/^PORT/ {print $2}' "$T/peer.out")
	AWS_ACCESS_KEY_ID=AKIDVOLPLUGBENCH
	AWS_SECRET_ACCESS_KEY=bench-secret
	PEER_DESC="s3sim (tests/s3sim/s3sim.py: one Python process, objects in memory, SigV4 checked)"
}
store_empty_s3sim() {
	curl -sf -X POST --data "{\"buckets\": [\"$BUCKET\"], \"keys\": {\"$AWS_ACCESS_KEY_ID\": \"$AWS_SECRET_ACCESS_KEY\"}}" \
		"$ENDPOINT/_s3sim/reset" >/dev/null
}
start_moto() {
	mkfifo "$T/peer.in"
	python3 "$SRC/tests/s3sim/moto-peer.py" <"$T/peer.in" >"$T/peer.out" &
	PEER_PID=$!
	exec {PEER_FD}>"$T/peer.in"
	for _ in $(seq 600); do grep -q -e PORT -e SKIP "$T/peer.out" && break; sleep 0.1; done
	if ! grep -q PORT "$T/peer.out"; then
		PEER_DESC="moto: $(cat "$T/peer.out")"
		return 1
	fi
	read -r _ port _ AWS_ACCESS_KEY_ID _ AWS_SECRET_ACCESS_KEY <"$T/peer.out"
	ENDPOINT=http://127.0.0.1:$port
	PEER_DESC="moto $(cd "${MOTO_PATH:-/opt/moto}" && git describe --tags 2>/dev/null || echo 5.1) S3 server (Python, werkzeug, SigV4 checked)"
}
store_empty_moto() { "$AWS" --endpoint-url "$ENDPOINT" s3 rm --quiet --recursive "s3://$BUCKET/" >/dev/null; }
stop_peer() {
	exec {PEER_FD}>&-
	PEER_FD=
	wait
	rm -f "$T/peer.in" "$T/peer.out"
}

# timed NAME CMD...: runs CMD under /usr/bin/time; appends "PEER ROUND NAME wall cpu rss_kib"
# and CMD's key=value output to $T/results.
# The peer's CPU seconds so far: its process and their children (moto's server).
peer_cpu() {
	local p pids=$PEER_PID
	for p in $(cat /proc/"$PEER_PID"/task/*/children 2>/dev/null || true); do
		pids="$pids $p $(cat /proc/"$p"/task/*/children 2>/dev/null || true)"
	done
	for p in $pids; do cat "/proc/$p/stat" 2>/dev/null; done |
		awk -v hz="$(getconf CLK_TCK)" '{sub(/^.*\) /, ""); t += $12 + $13} END {printf "%.2f\n", t / hz}'
}
timed() {
	local name=$1 c0 c1
	shift
	c0=$(peer_cpu)
	local rc=0
	/usr/bin/time -f '%e %U %S %M' -o "$T/time" timeout "$STEP_TIMEOUT" "$@" >"$T/out" || rc=$?
	c1=$(peer_cpu)
	STEP_OK=1
	if [ "$rc" = 124 ]; then
		echo "  $peer round $round $name: over STEP_TIMEOUT ($STEP_TIMEOUT s), left out" >&2
		STEP_OK=0
		return 0
	fi
	[ "$rc" = 0 ] || { echo "bench/store.sh: $name failed" >&2; exit 1; }
	read -r wall user sys rss <"$T/time"
	echo "$peer $round $name $wall $(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}') $rss peer_cpu=$(awk -v a="$c0" -v b="$c1" 'BEGIN {print b - a}') $(tr '\n' ' ' <"$T/out")" >>"$T/results"
	printf '  %s round %s %-22s %6.2f s  cpu %6.2f s  peer cpu %6.2f s  rss %5d MiB  %s\n' "$peer" "$round" "$name" \
		"$wall" "$(awk -v u="$user" -v s="$sys" 'BEGIN {print u + s}')" "$(awk -v a="$c0" -v b="$c1" 'BEGIN {print b - a}')" $((rss / 1024)) \
		"$(grep -o 'bytes_sent=[0-9]*' "$T/out" || true)" >&2
}

ours() {
	local c
	for c in $CHUNKS; do
		"store_empty_$peer"
		local o=(--endpoint "$ENDPOINT" --bucket "$BUCKET" --chunk-size "$c" --parallel "$PARALLEL" --zstd-level "$ZSTD")
		timed "full-$c" "$BENCH" upload "${o[@]}" snap-1 "$P/vol.img"
		timed "random-$c" "$BENCH" upload "${o[@]}" snap-random "$P/vol-random.img"
		timed "runs-$c" "$BENCH" upload "${o[@]}" snap-runs "$P/vol-runs.img"
		timed "random-f-$c" "$BENCH" upload "${o[@]}" --base "snap-1:$P/vol.img" snap-random-f "$P/vol-random-f.img"
		timed "runs-f-$c" "$BENCH" upload "${o[@]}" --base "snap-1:$P/vol.img" snap-runs-f "$P/vol-runs-f.img"
		rm -rf "$P/node2"
		mkdir "$P/node2"
		timed "restore-$c" "$BENCH" restore "${o[@]}" snap-1 "$P/node2" vol.img
		if [ "$round" = 1 ] && [ "$STEP_OK" = 1 ]; then
			cmp "$P/vol.img" "$P/node2/vol.img" || { echo "restore ($c) differs" >&2; exit 1; }
			echo "  restore ($c chunks) checked: the same bytes, $(numfmt --to=iec $(($(stat -c %b "$P/node2/vol.img") * 512))) allocated" >&2
		fi
		rm -rf "$P/node2"
	done
}
aws_side() {
	"store_empty_$peer"
	local a=("$AWS" --endpoint-url "$ENDPOINT" s3 cp --quiet --only-show-errors)
	timed aws-full "${a[@]}" "$P/vol.img" "s3://$BUCKET/vol.img"
	local full_up=$STEP_OK
	timed aws-data "${a[@]}" "$P/data.img" "s3://$BUCKET/data.img"
	local data_up=$STEP_OK
	rm -rf "$P/node2"
	mkdir "$P/node2"
	[ "$full_up" = 1 ] && timed aws-full-down sh -c '"$@" && sync "$0"' "$P/node2/vol.img" "${a[@]}" "s3://$BUCKET/vol.img" "$P/node2/vol.img"
	rm -f "$P/node2/vol.img"
	STEP_OK=0
	[ "$data_up" = 1 ] && timed aws-data-down sh -c '"$@" && sync "$0"' "$P/node2/data.img" "${a[@]}" "s3://$BUCKET/data.img" "$P/node2/data.img"
	if [ "$round" = 1 ] && [ "$STEP_OK" = 1 ]; then
		cmp "$P/data.img" "$P/node2/data.img" || { echo "aws's copy differs" >&2; exit 1; }
	fi
	rm -rf "$P/node2"
}

: >"$T/results"
DESCS=()
RAN=()
for peer in $PEERS; do
	if ! "start_$peer"; then
		echo "skipping $PEER_DESC" >&2
		DESCS+=("$PEER_DESC (skipped)")
		stop_peer
		continue
	fi
	DESCS+=("$PEER_DESC")
	RAN+=("$peer")
	echo "$peer at $ENDPOINT" >&2
	for round in $(seq "$ROUNDS"); do
		if [ $((round % 2)) = 1 ]; then ours; aws_side; else aws_side; ours; fi
	done
	"store_empty_$peer"
	stop_peer
done

# ---- the table ----
median() { sort -g | awk '{v[NR] = $1} END {if (NR == 0) {print 0; exit} printf "%.10g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# med PEER NAME FIELD: FIELD is 4 (wall), 5 (cpu), 6 (rss KiB) or a key of the output
med() {
	awk -v p="$1" -v n="$2" -v f="$3" '$1 == p && $3 == n {
		if (f ~ /^[0-9]+$/) print $f
		else for (i = 7; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) print kv[2] } }' \
		"$T/results" | median
}
gib=$(awk -v b="$alloc_b" 'BEGIN {print b / 1073741824}')
echo
echo "Volume: a $(numfmt --to=iec "$size_b") sparse file, ext4 with $(numfmt --to=iec "$data_b") of files ($COMPRESSIBLE% copies of /usr, the rest random), $(numfmt --to=iec "$alloc_b") allocated;"
echo "second snapshots: $CHANGE% of the volume's 4 KiB blocks rewritten, random single blocks or $((RUN * 4)) KiB runs."
echo "Store: $PARALLEL threads, zstd level $([ "$ZSTD" = 0 ] && echo "1 (the default)" || echo "$ZSTD"), payload SHA-256 signed; aws: $("$AWS" --version 2>&1 | cut -d' ' -f1), its defaults (8 MiB parts, 10 at once)."
echo "Medians of $ROUNDS rounds, ours and aws alternating. CPU and RSS per GiB: of the $(numfmt --to=iec "$alloc_b") of data."
for i in "${!DESCS[@]}"; do echo "Peer: ${DESCS[i]}"; done
echo
printf '| %-6s | %-44s | %8s | %10s | %7s | %9s | %9s | %10s |\n' peer step "wall s" "MiB moved" "% vol" "CPU s/GiB" "RSS MiB" "peer CPU s"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' -------- "$(printf -- '-%.0s' $(seq 46))" ---------- ------------ --------- ----------- ----------- ------------
row() { # peer label name sent_bytes
	local wall cpu rss pc
	if ! awk -v p="$1" -v n="$3" '$1 == p && $3 == n {f = 1} END {exit !f}' "$T/results"; then
		printf '| %-6s | %-44s | %8s | %10s | %7s | %9s | %9s | %10s |\n' "$1" "$2" "over $STEP_TIMEOUT" - - - - -
		return
	fi
	wall=$(med "$1" "$3" 4)
	cpu=$(med "$1" "$3" 5)
	rss=$(med "$1" "$3" 6)
	pc=$(med "$1" "$3" peer_cpu)
	awk -v p="$1" -v l="$2" -v w="$wall" -v s="$4" -v v="$size_b" -v c="$cpu" -v g="$gib" -v r="$rss" -v pc="$pc" \
		'BEGIN {printf "| %-6s | %-44s | %8.2f | %10.1f | %6.2f%% | %9.2f | %9.0f | %10.2f |\n", p, l, w, s / 1048576, 100 * s / v, c / g, r / 1024, pc}'
}
for peer in "${RAN[@]}"; do
	for c in $CHUNKS; do
		row "$peer" "ours full upload, $c chunks" "full-$c" "$(med "$peer" "full-$c" bytes_sent)"
		row "$peer" "ours 2nd snapshot, random 4K blocks, $c" "random-$c" "$(med "$peer" "random-$c" bytes_sent)"
		row "$peer" "ours 2nd snapshot, $((RUN * 4))K runs, $c" "runs-$c" "$(med "$peer" "runs-$c" bytes_sent)"
		row "$peer" "ours 2nd, random 4K blocks, $c, FIEMAP" "random-f-$c" "$(med "$peer" "random-f-$c" bytes_sent)"
		row "$peer" "ours 2nd, $((RUN * 4))K runs, $c, FIEMAP" "runs-f-$c" "$(med "$peer" "runs-f-$c" bytes_sent)"
		row "$peer" "ours restore, $c chunks" "restore-$c" "$(med "$peer" "restore-$c" bytes_received)"
	done
	row "$peer" "aws s3 cp up, the $(numfmt --to=iec "$size_b") file" aws-full "$size_b"
	row "$peer" "aws s3 cp up, its $(numfmt --to=iec "$dense_b") of data" aws-data "$dense_b"
	row "$peer" "aws s3 cp down, the $(numfmt --to=iec "$size_b") file" aws-full-down "$size_b"
	row "$peer" "aws s3 cp down, its $(numfmt --to=iec "$dense_b") of data" aws-data-down "$dense_b"
done
echo
echo "One thread, no HTTP, CPU seconds per GiB of the volume's data (4 MiB chunks, page cache):"
tr ' ' '\n' <"$T/cost" | awk -F= '/_s_gib|ratio/ {printf "  %s %s\n", $1, $2}'
