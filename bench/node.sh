#!/usr/bin/env bash
# Node: a volume's whole life on one node (stage-publish sequence: NodeStageVolume includes the
# loop device and mkfs.ext4 or mkfs.xfs of a fresh 1 GiB volume), then NodePublishVolume +
# NodeUnpublishVolume p50/p99 on volumes staged once (publish sequence), 1 and 16 clients.
# Set HOSTPATHPLUGIN=/path/to/hostpathplugin to run the same requests against the reference
# driver in the same run (its NodeStage only records the path; its NodePublish of a mount
# volume bind-mounts the volume's directory).
#
# Needs root (loop devices, mkfs, mounts). Environment: BUILD (default build), STAGES
# lifecycles per filesystem (default 20), CLIENTS for the publish loop (default 1,16),
# DURATION per publish row (default 5s).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
STAGES=${STAGES:-20}
CLIENTS=${CLIENTS:-1,16}
DURATION=${DURATION:-5s}

[ "$(id -u)" = 0 ] || { echo "bench/node.sh: needs root" >&2; exit 2; }
for tool in mkfs.xfs mkfs.ext4 losetup findmnt; do
	command -v "$tool" >/dev/null || { echo "bench/node.sh: needs $tool" >&2; exit 2; }
done


vp=$(start_volplugd volplug --max-volumes-per-node 64)
BENCH_PIDS+=("$vp")
hp=
if [ -n "$HOSTPATHPLUGIN" ]; then
	hp=$(start_hostpath hostpath)
	BENCH_PIDS+=("$hp")
fi
mkdir -p "$BENCH_TMP/mnt-volplug" "$BENCH_TMP/mnt-hostpath"

# bench NAME LABEL ARGS...: one bench run; rows go to the screen and to $BENCH_TMP/rows.
header=1
bench() {
	local name=$1 label=$2
	shift 2
	"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/$name.sock" bench --label "$label" \
		--param "dir=$BENCH_TMP/mnt-$name" "$@" >"$BENCH_TMP/row.out" ||
		echo "bench/node.sh: $label: calls failed (errors column)" >&2
	if [ $header = 1 ]; then head -1 "$BENCH_TMP/row.out"; header=0; fi
	tail -n +2 "$BENCH_TMP/row.out" | tee -a "$BENCH_TMP/rows"
}

echo "Life cycle of a fresh 1 GiB volume (SINGLE_NODE_WRITER mount), $STAGES per row, 1 client"
for fs in ext4 xfs; do
	bench volplug "volplugd/$fs" --sequence stage-publish --param "fstype=$fs" \
		--clients 1 --count "$STAGES" --warmup 1 --pid "$vp"
done
[ -z "$hp" ] || bench hostpath hostpath --sequence stage-publish --param fstype=ext4 \
	--clients 1 --count "$STAGES" --warmup 1 --pid "$hp"

echo
echo "NodePublishVolume + NodeUnpublishVolume on 16 volumes staged once (ext4), $DURATION per row"
header=1
bench volplug volplugd/pub --sequence publish --param fstype=ext4 --param volumes=16 \
	--clients "$CLIENTS" --duration "$DURATION" --warmup 20 --pid "$vp"
[ -z "$hp" ] || bench hostpath hostpath/pub --sequence publish --param fstype=ext4 \
	--param volumes=16 --clients "$CLIENTS" --duration "$DURATION" --warmup 20 --pid "$hp"

if [ -n "$hp" ]; then
	echo
	p50() { awk -v l="$1" -v s="$2" -v c="$3" '$1 == l && $2 == s && $3 == c {print $7}' "$BENCH_TMP/rows"; }
	for c in ${CLIENTS//,/ }; do
		for step in NodePublishVolume NodeUnpublishVolume; do
			awk -v s="$step" -v c="$c" -v v="$(p50 volplugd/pub "$step" "$c")" \
				-v h="$(p50 hostpath/pub "$step" "$c")" 'BEGIN {
				printf "%s p50, %s client(s): volplugd %s us, hostpath %s us: %.1fx faster (target >= 2x)\n",
					s, c, v, h, (v > 0 ? h / v : 0) }'
		done
	done
fi
