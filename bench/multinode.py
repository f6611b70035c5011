#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Distributed provisioning: N claims placed across 3 simulated nodes (3 volplugd, 3 node IDs,
3 pools of CAPACITY/3 on this machine, --distributed) by CLIENTS concurrent clients, against
one single-node pool of the same total size, in the same run. Each client does what the
scheduler and csi-provisioner --node-deployment do for a claim: it picks the node whose
published capacity (CSIStorageCapacity, refreshed from every node's GetCapacity by a poller
every POLL seconds, less what it has itself placed since) has the most room, and calls
CreateVolume on that node's driver with the node's segment as requisite and preferred; a
RESOURCE_EXHAUSTED sends the claim to the next node (counted as a reschedule). The single
pool gets the same claims with its one segment. Prints one row per layout: the time, the
creates per second, latency percentiles of the CreateVolume calls, and the spread over the
nodes (volumes and MiB left on each).

Environment: BUILD (default build), CLAIMS (300), CLIENTS (16), SIZE_MIB per volume (16),
CAPACITY_MIB in all (6144), POLL seconds (0.1). Needs no root: the volumes are never staged."""

import os
import sys
import tempfile
import threading
import time

BUILD = os.environ.get("BUILD", "build")
os.environ.setdefault("VOLPLUGD", os.path.join(BUILD, "src/cmd/volplugd"))
os.environ.setdefault("VOLPLUGCTL", os.path.join(BUILD, "src/cmd/volplugctl"))
os.environ.setdefault("VOLPLUG_PROTO_PY", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))

import grpc  # noqa: E402

from harness import Ctx  # noqa: E402

CLAIMS = int(os.environ.get("CLAIMS", 300))
CLIENTS = int(os.environ.get("CLIENTS", 16))
MIB = 1 << 20
SIZE = int(os.environ.get("SIZE_MIB", 16)) * MIB
CAPACITY = int(os.environ.get("CAPACITY_MIB", 6144)) * MIB
POLL = float(os.environ.get("POLL", 0.1))
CAP = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {"fs_type": "ext4"}}
CLASS = {"type": "gp3"}


class Cluster:
    """The nodes, their segments and the capacity the scheduler sees."""

    def __init__(self, daemons):
        self.daemons = {d.node_id: d for d in daemons}
        self.segments = {n: dict(d.call("NodeGetInfo").accessible_topology.segments)
                         for n, d in self.daemons.items()}
        self.lock = threading.Lock()
        self.published = {}  # node -> available, as last polled
        self.placed = {n: 0 for n in self.daemons}  # bytes placed since the last poll
        self.stop = threading.Event()
        self.poll()

    def poll(self):
        fresh = {n: d.call("GetCapacity", accessible_topology={"segments": self.segments[n]},
                           parameters=CLASS).available_capacity
                 for n, d in self.daemons.items()}
        with self.lock:
            self.published = fresh
            self.placed = {n: 0 for n in self.daemons}

    def poller(self):
        while not self.stop.wait(POLL):
            self.poll()

    def order(self):
        """Nodes by the room the scheduler believes they have, most first; the claim is
        counted on the first."""
        with self.lock:
            room = {n: self.published[n] - self.placed[n] for n in self.daemons}
            nodes = sorted(self.daemons, key=lambda n: (-room[n], n))
            self.placed[nodes[0]] += SIZE
        return nodes


def provision(cluster, names, latencies, where, rescheduled):
    for name in names:
        for node in cluster.order():
            seg = {"segments": cluster.segments[node]}
            start = time.monotonic()
            try:
                v = cluster.daemons[node].call(
                    "CreateVolume", name=name, capacity_range={"required_bytes": SIZE},
                    volume_capabilities=[CAP], parameters=CLASS,
                    accessibility_requirements={"requisite": [seg], "preferred": [seg]}).volume
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
                    raise
                rescheduled.append(name)
                continue
            finally:
                latencies.append(time.monotonic() - start)
            assert v.volume_id.endswith("." + node), v.volume_id
            where.append(node)
            break
        else:
            raise AssertionError("no node had room for " + name)


def run(label, daemons):
    cluster = Cluster(daemons)
    poller = threading.Thread(target=cluster.poller)
    poller.start()
    latencies, where, rescheduled = [], [], []
    names = ["pvc-%04d" % i for i in range(CLAIMS)]
    threads = [threading.Thread(target=provision,
                                args=(cluster, names[i::CLIENTS], latencies, where, rescheduled))
               for i in range(CLIENTS)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    cluster.stop.set()
    poller.join()
    cluster.poll()
    assert len(where) == CLAIMS, (len(where), CLAIMS)
    latencies.sort()

    def pct(p):
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] * 1000

    spread = ", ".join("%s %d (%d MiB left)" % (n, where.count(n), cluster.published[n] // MIB)
                       for n in sorted(cluster.daemons))
    print("| %s | %d | %d | %.2f | %.0f | %.1f | %.1f | %s | %d |" % (
        label, CLAIMS, CLIENTS, elapsed, CLAIMS / elapsed, pct(0.5), pct(0.99), spread,
        len(rescheduled)), flush=True)


def main():
    ctx = Ctx()
    try:
        nodes = [ctx.daemon(node_id="node-%d" % i, name="node-%d" % i, start=False,
                            args=["--distributed", "--zone", "z", "-v", "1",
                                  "--pool-capacity", str(CAPACITY // 3)])
                 for i in (1, 2, 3)]
        single = ctx.daemon(node_id="node-0", name="single", start=False,
                            args=["--distributed", "-v", "1", "--pool-capacity", str(CAPACITY)])
        for d in nodes + [single]:
            d.start()  # "-v 1" after the harness's "-v 4": info level, as deployed
        print("%d claims of %d MiB, %d clients, StorageClass %s; capacity %d MiB in all" % (
            CLAIMS, SIZE // MIB, CLIENTS, CLASS, CAPACITY // MIB))
        print()
        print("| layout | claims | clients | time (s) | creates/s | p50 (ms) | p99 (ms) | "
              "per node: volumes (left) | rescheduled |")
        print("|---|---|---|---|---|---|---|---|---|")
        run("3 nodes, %d MiB each" % (CAPACITY // 3 // MIB), nodes)
        run("1 node, %d MiB" % (CAPACITY // MIB), [single])
    finally:
        ctx.cleanup()


if __name__ == "__main__":
    main()
