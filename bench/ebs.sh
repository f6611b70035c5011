#!/usr/bin/env bash
# EBS controller: VOLUMES CreateVolume + ControllerPublishVolume (create-publish sequence) with
# CLIENTS clients against ec2sim, whose state changes take DELAY seconds (creating -> available,
# attaching -> attached): the total time, the EC2 calls per volume (the simulator counts them)
# and each step's latency over the simulated delay. Then the simulator's state is checked:
# every volume made once, attached once, no device name given twice on an instance.
# Goal: <= 3 EC2 calls per created volume on average, <= 100 ms p50 over the simulated delay.
#
# Environment: BUILD (default build), VOLUMES (100), CLIENTS (16), DELAY (1.5), NODES (8
# m5.large instances the volumes are published to, round robin by client), PYTHON (Debian's
# python3, with python3-botocore: /usr/bin/python3), VERBOSITY (volplugd's -v, 1; above 1 its
# log goes to stderr after the run; from 4 on it shows each poll of the waiter).
set -eu
cd "$(dirname "$0")/.."
. bench/lib.sh
VOLUMES=${VOLUMES:-100}
CLIENTS=${CLIENTS:-16}
DELAY=${DELAY:-1.5}
NODES=${NODES:-8}
PYTHON=${PYTHON:-/usr/bin/python3}
VERBOSITY=${VERBOSITY:-1}

nodes=""
sim_args=(--zones us-east-1a --state-delay "$DELAY")
for i in $(seq "$NODES"); do
	id=$(printf 'i-0c%015x' "$i")
	nodes="$nodes${nodes:+,}$id"
	sim_args+=(--instance "$id:m5.large:us-east-1a")
done
"$PYTHON" tests/ec2sim/ec2sim.py --port 0 --port-file "$BENCH_TMP/sim.json" "${sim_args[@]}" \
	>"$BENCH_TMP/sim.log" 2>&1 &
BENCH_PIDS+=($!)
for _ in $(seq 200); do [ -f "$BENCH_TMP/sim.json" ] && break; sleep 0.05; done
ec2=$("$PYTHON" -c "import json, sys; print(json.load(open(sys.argv[1]))['ec2'])" "$BENCH_TMP/sim.json")

env AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=AKIAEC2SIMULATOR0001 \
	AWS_SECRET_ACCESS_KEY=ec2sim/secret/key/for/tests/only/00000000 \
	AWS_EC2_METADATA_DISABLED=true AWS_SHARED_CREDENTIALS_FILE=/nonexistent \
	"$VOLPLUGD" controller --backend ebs --ec2-endpoint "$ec2" \
	--endpoint "unix://$BENCH_TMP/ebs.sock" --driver-name ebs.bench -v "$VERBOSITY" \
	>"$BENCH_TMP/ebs.log" 2>&1 &
vp=$!
BENCH_PIDS+=("$vp")
wait_socket "$BENCH_TMP/ebs.sock" || { cat "$BENCH_TMP/ebs.log" >&2; exit 1; }

start=$(date +%s.%N)
"$VOLPLUGCTL" --endpoint "unix://$BENCH_TMP/ebs.sock" bench --sequence create-publish \
	--clients "$CLIENTS" --count "$VOLUMES" --warmup 0 --param nodes="$nodes" \
	--param size=1Gi --pid "$vp" --label ebs/ec2sim >"$BENCH_TMP/rows"
end=$(date +%s.%N)
curl -s "$ec2/_sim/stats" >"$BENCH_TMP/stats.json"
curl -s "$ec2/_sim/state" >"$BENCH_TMP/state.json"
[ "$VERBOSITY" -gt 1 ] && cat "$BENCH_TMP/ebs.log" >&2

echo "$VOLUMES CreateVolume + ControllerPublishVolume, $CLIENTS clients, ec2sim state changes of" \
	"${DELAY} s, $NODES instances"
cat "$BENCH_TMP/rows"
echo
"$PYTHON" - "$BENCH_TMP" "$VOLUMES" "$DELAY" "$start" "$end" "$CLIENTS" <<'EOF'
import json, sys
tmp, volumes, delay, start, end, clients = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), \
    float(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
stats = json.load(open(tmp + "/stats.json"))
state = json.load(open(tmp + "/state.json"))
rows = {}
for line in open(tmp + "/rows").read().splitlines()[1:]:
    f = line.split()
    rows[f[1]] = {"calls": int(f[3]), "errors": int(f[4]), "p50": float(f[6]) / 1e6,
                  "p99": float(f[8]) / 1e6}
calls = stats["calls"]
total = sum(calls.values())
made = [v for v in state["volumes"] if not v["root"]]
attached = [(v["volumeId"], a["instanceId"], a["device"]) for v in made for a in v["attachmentSet"]]
devices = [(i, d) for _, i, d in attached]
checks = {
    "volumes made once": len(made) == volumes,
    "each attached once": len(attached) == volumes and len({a[0] for a in attached}) == volumes,
    "no device name twice on an instance": len(set(devices)) == len(devices),
    "no call failed": all(r["errors"] == 0 for r in rows.values()),
}
print("| volumes | clients | delay | total | EC2 calls/volume | CreateVolume p50 / p99 over delay "
      "| ControllerPublishVolume p50 / p99 over delay | goal met |")
print("|---|---|---|---|---|---|---|---|")
c, p = rows["CreateVolume"], rows["ControllerPublishVolume"]
per_volume = total / volumes
goal = per_volume <= 3 and c["p50"] - delay <= 0.1 and p["p50"] - delay <= 0.1
print("| %d | %s | %.1f s | %.1f s | %.2f | %.0f / %.0f ms | %.0f / %.0f ms | %s |" % (
    volumes, clients, delay, end - start, per_volume,
    (c["p50"] - delay) * 1000, (c["p99"] - delay) * 1000, (p["p50"] - delay) * 1000,
    (p["p99"] - delay) * 1000, "yes" if goal else "no"))
print()
print("EC2 calls by action: " + ", ".join("%s %d (%.2f/volume)" % (a, n, n / volumes)
                                          for a, n in sorted(calls.items(), key=lambda x: -x[1])))
for what, ok in checks.items():
    print("%s: %s" % (what, "yes" if ok else "NO"))
sys.exit(0 if all(checks.values()) else 1)
EOF
