#!/usr/bin/env bash
# Idle RSS and GetPluginInfo latency over the socket, 10,000 calls with 1 and 16 clients.
# Set HOSTPATHPLUGIN=/path/to/hostpathplugin to measure the reference driver in the same run.
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
COUNT=${COUNT:-10000}

pid=$(start_volplugd volplug)
sleep 1
echo "volplugd idle RSS: $(rss_kib "$pid") KiB"
if [ -n "$HOSTPATHPLUGIN" ]; then
	hp=$(start_hostpath hostpath)
	sleep 1
	echo "hostpathplugin idle RSS: $(rss_kib "$hp") KiB"
fi
echo
"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/volplug.sock" bench --rpc GetPluginInfo \
	--clients 1,16 --count "$COUNT" --pid "$pid" --label volplugd
if [ -n "$HOSTPATHPLUGIN" ]; then
	"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/hostpath.sock" bench --rpc GetPluginInfo \
		--clients 1,16 --count "$COUNT" --pid "$hp" --label hostpath | tail -n +2
fi
