# SPDX-License-Identifier: Apache-2.0
"""Every node its own pool (issue 12): a simulated cluster of three volplugd, three node IDs and
three pools on one machine, driven the way Kubernetes' distributed provisioning drives them. A
client stands in for the scheduler and csi-provisioner --node-deployment: it reads every node's
NodeGetInfo topology and its GetCapacity for that segment and the StorageClass, picks a node for
each claim (with and without a preferred topology), and asks that node's driver with the node's
segment as requisite and preferred (--strict-topology); RESOURCE_EXHAUSTED sends the claim to
the next node, as csi-provisioner's rescheduling does. Each test checks what a user would see:
where volumes land (the replies and the pools on disk), the capacity each node reports, the gRPC
code and the message of every refusal, and that a refused request made nothing."""

import os
import subprocess
import threading

import grpc

from harness import VOLPLUGCTL, local_id as local, run, to_dict, wait_for

import csi_pb2  # noqa: E402  (found through the path harness sets)

from test_node import XFS_MIN, Vol, fs_bytes, mount_at, mount_cap, node_test, safely, sha_of, write_random

MIB = 1 << 20
SNW = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {"fs_type": "ext4"}}
NOT_FOUND = grpc.StatusCode.NOT_FOUND
INVALID = grpc.StatusCode.INVALID_ARGUMENT
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
NODE_KEY = "topology.volplug.io/node"
ZONE_KEY = "topology.volplug.io/zone"
REGION_KEY = "topology.kubernetes.io/region"
# The StorageClass the claims use: its parameters go to GetCapacity and CreateVolume alike.
CLASS = {"type": "gp3", "csi.storage.k8s.io/fstype": "ext4"}
# Three nodes of two zones, 96 MiB each.
NODES = [("node-1", "zone-a"), ("node-2", "zone-a"), ("node-3", "zone-b")]
CAPACITY = 96 * MIB


def listdir(pool, sub):
    try:
        return sorted(os.listdir(os.path.join(pool, sub)))
    except FileNotFoundError:
        return []


def start_cluster(ctx, capacity=CAPACITY, extra=()):
    """The DaemonSet: one volplugd per node, each with its own pool, serving controller and node
    on one socket as the multi-node layout runs it."""
    return [ctx.daemon(node_id=node, name=node,
                       args=["--distributed", "--zone", zone, "--pool-capacity", str(capacity),
                             "--topology-label", REGION_KEY + "=r1"] + list(extra))
            for node, zone in NODES]


class Provisioner:
    """What the scheduler and csi-provisioner --node-deployment --strict-topology
    --enable-capacity do, over the CSI sockets: the capacity of every node's segment for the
    class (CSIStorageCapacity), a node picked among those whose maximum volume size fits (the
    most capacity first, the scheduler's spread), CreateVolume on that node's own driver with its
    segment as requisite and preferred, and on RESOURCE_EXHAUSTED the next node."""

    def __init__(self, daemons):
        self.daemons = daemons
        self.segments = {}
        for d in daemons:
            info = d.call("NodeGetInfo")
            self.segments[info.node_id] = dict(info.accessible_topology.segments)
        self.by_node = {d.node_id: d for d in daemons}
        self.rescheduled = 0

    def capacity(self, node):
        c = self.by_node[node].call("GetCapacity", accessible_topology={"segments": self.segments[node]},
                                   parameters=CLASS, volume_capabilities=[SNW])
        return c.available_capacity, c.maximum_volume_size.value

    def capacities(self):
        return {n: self.capacity(n) for n in self.segments}

    def candidates(self, size, preferred=None):
        """Nodes whose segment has room for size, matching preferred (a partial segment such as
        a zone) when given: most available first."""
        caps = self.capacities()
        fits = [n for n, (avail, largest) in caps.items() if largest >= size]
        if preferred:
            fits = [n for n in fits
                    if all(self.segments[n].get(k) == v for k, v in preferred.items())]
        return sorted(fits, key=lambda n: (-caps[n][0], n))

    def create_on(self, node, name, size):
        seg = {"segments": self.segments[node]}
        return self.by_node[node].call("CreateVolume", name=name, capacity_range={"required_bytes": size},
                                       volume_capabilities=[SNW], parameters=CLASS,
                                       accessibility_requirements={"requisite": [seg],
                                                                   "preferred": [seg]}).volume

    def provision(self, name, size, preferred=None, order=None):
        """Places one claim: (node, volume)."""
        for node in order or self.candidates(size, preferred):
            try:
                return node, self.create_on(node, name, size)
            except grpc.RpcError as e:
                if e.code() != EXHAUSTED:
                    raise
                self.rescheduled += 1  # csi-provisioner gives the claim back to the scheduler
        raise AssertionError("no node could serve %s (%d bytes)" % (name, size))


def expect(d, code, method, match=(), **req):
    e = d.expect_error(code, method, req)
    for m in match:
        assert m in e.details(), "%s: %r lacks %r" % (method, e.details(), m)
    return e.details()


def table(p, before, made):
    """The capacity and topology table the run prints (one row per node)."""
    after = p.capacities()
    rows = ["node    segment                                        before  made    after   volumes",
            "------  ---------------------------------------------  ------  ------  ------  -------"]
    for n in sorted(p.segments):
        seg = ",".join("%s=%s" % (k.split("/")[-1], v) for k, v in sorted(p.segments[n].items()))
        rows.append("%-6s  %-45s  %3d MiB %3d MiB %3d MiB %7d" % (
            n, seg, before[n][0] // MIB, made[n][1] // MIB, after[n][0] // MIB, made[n][0]))
    return rows, after


def test_volumes_land_on_the_chosen_node(ctx):
    """24 claims of 4-12 MiB, a third preferring zone-b, placed by capacity: every volume is
    made on the node picked for it and nowhere else, its accessible_topology is that node's
    segment exactly, its ID carries the node, and each node's capacity drops by what was made
    there."""
    daemons = start_cluster(ctx)
    p = Provisioner(daemons)
    for d, (node, zone) in zip(daemons, NODES):
        assert p.segments[node] == {NODE_KEY: node, ZONE_KEY: zone, REGION_KEY: "r1"}, p.segments
    before = p.capacities()
    assert all(c == (CAPACITY, CAPACITY) for c in before.values()), before
    made = {n: [0, 0] for n in p.segments}
    placed = {}
    for i in range(24):
        size = (4 + (i % 5) * 2) * MIB
        preferred = {ZONE_KEY: "zone-b"} if i % 3 == 0 else None
        node, v = p.provision("pvc-%02d" % i, size, preferred)
        if preferred:
            assert node == "node-3", "zone-b is node-3's: %s" % node
        assert v.volume_id.endswith("." + node), v.volume_id
        assert to_dict(v)["accessible_topology"] == [{"segments": p.segments[node]}], v
        made[node][0] += 1
        made[node][1] += v.capacity_bytes
        placed[v.volume_id] = node
    for d in daemons:
        mine = sorted(local(v) for v, n in placed.items() if n == d.node_id)
        assert listdir(d.pool, "volumes") == mine, (d.node_id, listdir(d.pool, "volumes"), mine)
        listed = sorted(e.volume.volume_id for e in d.call("ListVolumes").entries)
        assert listed == sorted(v for v, n in placed.items() if n == d.node_id), listed
    rows, after = table(p, before, made)
    for n in p.segments:
        assert after[n][0] == before[n][0] - made[n][1], (n, before[n], made[n], after[n])
    assert min(m[0] for m in made.values()) >= 4, "spread over the three nodes: %s" % made
    for line in rows:
        print("# " + line)
    return "24 claims: %s" % ", ".join("%s %d" % (n, made[n][0]) for n in sorted(made))


def test_a_full_node_refuses_and_the_next_serves(ctx):
    """A claim sent to a node without room for it: RESOURCE_EXHAUSTED naming the field, the
    node and what is left, nothing made there; the next node serves it. A class whose type
    allows no volume this small shows no room at all (maximum_volume_size 0)."""
    daemons = start_cluster(ctx)
    p = Provisioner(daemons)
    n1 = p.by_node["node-1"]
    p.create_on("node-1", "filler", 90 * MIB)
    assert p.capacity("node-1") == (6 * MIB, 6 * MIB)
    msg = expect(n1, EXHAUSTED, "CreateVolume", match=("capacity_range", "node-1", "6291456 bytes left"),
                 name="big", capacity_range={"required_bytes": 32 * MIB}, volume_capabilities=[SNW],
                 parameters=CLASS,
                 accessibility_requirements={"requisite": [{"segments": p.segments["node-1"]}]})
    assert listdir(n1.pool, "volumes") == [local(n1.call("ListVolumes").entries[0].volume.volume_id)]
    assert listdir(n1.pool, "tmp") == []
    assert p.capacity("node-1") == (6 * MIB, 6 * MIB), "the refusal reserved nothing"
    # The scheduler had stale numbers and chose node-1; the claim goes on to the next.
    node, v = p.provision("big", 32 * MIB, order=["node-1", "node-2", "node-3"])
    assert node == "node-2" and p.rescheduled == 1 and v.volume_id.endswith(".node-2"), (node, v)
    assert "node-1" not in p.candidates(32 * MIB), "with fresh numbers node-1 is no candidate"
    c = n1.call("GetCapacity", accessible_topology={"segments": p.segments["node-1"]},
                parameters={"type": "st1"})
    # st1 counts whole GiB, at least 125: anything above 124 GiB.
    assert c.maximum_volume_size.value == 0 and c.minimum_volume_size.value == (124 << 30) + MIB, c
    return "node-1 full (%s)" % msg


def test_topology_less_requests_get_the_local_node(ctx):
    """No accessibility_requirements: the volume is made on the node whose driver was asked,
    and says so."""
    daemons = start_cluster(ctx)
    p = Provisioner(daemons)
    for d in daemons:
        v = d.call("CreateVolume", name="plain", volume_capabilities=[SNW],
                   capacity_range={"required_bytes": 8 * MIB}).volume
        assert v.volume_id.endswith("." + d.node_id), v.volume_id
        assert to_dict(v)["accessible_topology"] == [{"segments": p.segments[d.node_id]}]
        assert listdir(d.pool, "volumes") == [local(v.volume_id)]


def test_wrong_node_rpcs_answer_not_found(ctx):
    """node-1's volume and snapshot named to node-2, which has a volume and a snapshot of the
    same names (so the same local IDs): every controller and node call answers NOT_FOUND naming
    both nodes, and node-2's own objects are untouched."""
    daemons = start_cluster(ctx)
    n1, n2 = daemons[0], daemons[1]
    v1 = n1.call("CreateVolume", name="same", volume_capabilities=[SNW],
                 capacity_range={"required_bytes": 8 * MIB}).volume.volume_id
    v2 = n2.call("CreateVolume", name="same", volume_capabilities=[SNW],
                 capacity_range={"required_bytes": 8 * MIB}).volume.volume_id
    s1 = n1.call("CreateSnapshot", name="snap", source_volume_id=v1).snapshot.snapshot_id
    s2 = n2.call("CreateSnapshot", name="snap", source_volume_id=v2).snapshot.snapshot_id
    assert local(v1) == local(v2) and v1 != v2 and local(s1) == local(s2), (v1, v2, s1, s2)
    names = ("is on node node-1", "not on this node (node-2)")
    target = os.path.join(ctx.tmp, "target")
    staging = os.path.join(ctx.tmp, "staging")
    calls = [
        ("ControllerGetVolume", {"volume_id": v1}),
        ("DeleteVolume", {"volume_id": v1}),
        ("ValidateVolumeCapabilities", {"volume_id": v1, "volume_capabilities": [SNW]}),
        ("ControllerPublishVolume", {"volume_id": v1, "node_id": "node-2", "volume_capability": SNW}),
        ("CreateSnapshot", {"name": "snap-of-1", "source_volume_id": v1}),
        ("DeleteSnapshot", {"snapshot_id": s1}),
        ("NodeStageVolume", {"volume_id": v1, "staging_target_path": staging, "volume_capability": SNW}),
        ("NodePublishVolume", {"volume_id": v1, "staging_target_path": staging, "target_path": target,
                               "volume_capability": SNW}),
        ("NodeUnpublishVolume", {"volume_id": v1, "target_path": target}),
        ("NodeUnstageVolume", {"volume_id": v1, "staging_target_path": staging}),
        ("NodeExpandVolume", {"volume_id": v1, "volume_path": target,
                              "capacity_range": {"required_bytes": 16 * MIB}}),
        ("NodeGetVolumeStats", {"volume_id": v1, "volume_path": target}),
    ]
    for method, req in calls:
        expect(n2, NOT_FOUND, method, match=names, **req)
    assert len(n2.call("ListSnapshots", snapshot_id=s1).entries) == 0, "not listed on node-2"
    assert len(n2.call("ListSnapshots", source_volume_id=v1).entries) == 0
    assert [e.volume.volume_id for e in n2.call("ListVolumes").entries] == [v2], "node-2's own"
    assert n2.call("ControllerGetVolume", volume_id=v2).volume.capacity_bytes == 8 * MIB
    assert listdir(n2.pool, "snapshots") == [local(s2)] and not os.path.exists(staging)
    assert n1.call("ControllerGetVolume", volume_id=v1).volume.volume_id == v1, "node-1's intact"
    return "%d calls" % len(calls)


def test_bad_input_names_the_field_and_the_node(ctx):
    """An unknown topology key, another node's segment, a size over the node's free space, a
    snapshot of another node as the source: the right code, a message naming the field and the
    node, and nothing made anywhere."""
    daemons = start_cluster(ctx)
    p = Provisioner(daemons)
    n1, n2 = daemons[0], daemons[1]
    v2 = n2.call("CreateVolume", name="src", volume_capabilities=[SNW],
                 capacity_range={"required_bytes": 8 * MIB}).volume.volume_id
    s2 = n2.call("CreateSnapshot", name="src-snap", source_volume_id=v2).snapshot.snapshot_id

    def req(name, **extra):
        return dict({"name": name, "volume_capabilities": [SNW], "parameters": CLASS,
                     "capacity_range": {"required_bytes": 8 * MIB}}, **extra)

    def on(segment):
        return {"requisite": [{"segments": segment}], "preferred": [{"segments": segment}]}

    cases = [
        (INVALID, req("bad-key", accessibility_requirements=on({"example.com/rack": "r9"})),
         ("accessibility_requirements.", "example.com/rack", "node node-1")),
        (EXHAUSTED, req("bad-node", accessibility_requirements=on(p.segments["node-2"])),
         ("accessibility_requirements.requisite[0]", "topology.volplug.io/node=node-2",
          "node node-1")),
        (EXHAUSTED, req("bad-zone", accessibility_requirements=on({ZONE_KEY: "zone-b"})),
         ("accessibility_requirements.requisite[0]", "zone-b", "node node-1")),
        (EXHAUSTED, req("too-big", capacity_range={"required_bytes": 200 * MIB}),
         ("capacity_range", "node-1")),
        (EXHAUSTED, req("bad-restore", volume_content_source={"snapshot": {"snapshot_id": s2}}),
         ("volume_content_source.snapshot.snapshot_id", "node-2", "node-1")),
        (EXHAUSTED, req("bad-clone", volume_content_source={"volume": {"volume_id": v2}}),
         ("volume_content_source.volume.volume_id", "node-2", "node-1")),
    ]
    lines = []
    for code, r, match in cases:
        lines.append(expect(n1, code, "CreateVolume", match=match, **r))
    expect(n1, NOT_FOUND, "CreateSnapshot", match=("source_volume_id", "node-2", "node-1"),
           name="snap-x", source_volume_id=v2)
    expect(n1, INVALID, "GetCapacity", match=("parameters",), parameters={"type": "gp9"})
    assert p.capacity("node-1") == (CAPACITY, CAPACITY), "nothing reserved on node-1"
    for d in daemons:
        want = [local(v2)] if d is n2 else []
        assert listdir(d.pool, "volumes") == want and listdir(d.pool, "tmp") == [], d.node_id
    for line in lines:
        print("# " + line)


def test_kill9_of_one_node_loses_nothing_of_the_others(ctx):
    """Creates on all three nodes, node-2 killed with SIGKILL in the middle of them: node-1's
    and node-3's volumes are all there, whole, and go on being made; node-2 restarted has every
    volume it had answered for, and each pool checks clean."""
    daemons = start_cluster(ctx)
    n1, n2, n3 = daemons
    made = {d.node_id: [] for d in daemons}
    for i in range(6):
        for d in daemons:
            made[d.node_id].append(d.call("CreateVolume", name="before-%d" % i, volume_capabilities=[SNW],
                                          capacity_range={"required_bytes": 4 * MIB}).volume.volume_id)
    stop = threading.Event()
    answered = []

    def hammer():
        for i in range(1000):
            if stop.is_set():
                return
            try:
                answered.append(n2.call("CreateVolume", name="during-%d" % i, volume_capabilities=[SNW],
                                        capacity_range={"required_bytes": MIB}).volume.volume_id)
            except grpc.RpcError:
                return

    t = threading.Thread(target=hammer)
    t.start()
    wait_for(lambda: len(answered) >= 5, what="node-2 to answer 5 creates")
    n2.kill9()
    stop.set()
    t.join(10)
    for d in (n1, n3):
        for i in range(3):
            made[d.node_id].append(d.call("CreateVolume", name="after-%d" % i, volume_capabilities=[SNW],
                                          capacity_range={"required_bytes": 4 * MIB}).volume.volume_id)
        listed = sorted(e.volume.volume_id for e in d.call("ListVolumes").entries)
        assert listed == sorted(made[d.node_id]), (d.node_id, listed)
        for v in made[d.node_id]:
            assert os.path.getsize(os.path.join(d.pool, "volumes", local(v), "data")) == 4 * MIB
    again = ctx.daemon(node_id="node-2", name="node-2-again", pool=n2.pool,
                       args=["--distributed", "--zone", "zone-a", "--pool-capacity", str(CAPACITY)])
    listed = {e.volume.volume_id for e in again.call("ListVolumes").entries}
    assert set(made["node-2"]) | set(answered) <= listed, "node-2 kept every volume it answered for"
    for d in (n1, again, n3):
        check = subprocess.run([VOLPLUGCTL, "pool", "check", d.pool], capture_output=True, text=True)
        assert check.returncode == 0 and check.stdout.strip().endswith(" 0 problems"), check
    return "node-2 killed after %d creates; node-1 and node-3 kept %d and %d volumes" % (
        len(answered), len(made["node-1"]), len(made["node-3"]))


@node_test
def test_each_node_serves_its_volumes_and_grows_them(ctx):
    """The node side of the layout: each node stages and publishes its own volume (no
    ControllerPublishVolume: attachRequired is false), data written on node-1 survives a kill
    -9 of node-2, and with no controller expansion to route, NodeExpandVolume grows the volume
    in its node's pool, filesystem and all, taking the bytes from that node's capacity."""
    daemons = start_cluster(ctx, capacity=1024 * MIB)
    caps = {c.rpc.type for c in daemons[0].call("ControllerGetCapabilities").capabilities}
    names = {csi_cap(c) for c in caps}
    assert not names & {"PUBLISH_UNPUBLISH_VOLUME", "EXPAND_VOLUME", "MODIFY_VOLUME"}, names
    assert {"CREATE_DELETE_VOLUME", "GET_CAPACITY", "CREATE_DELETE_SNAPSHOT"} <= names, names
    vols = [Vol(ctx, d, "data-" + d.node_id, XFS_MIN, mount_cap("xfs"), controller_publish=False)
            for d in daemons]
    digests = {}
    try:
        for v in vols:
            v.stage()
            digests[v.id] = write_random(os.path.join(v.publish(), "precious"))
        daemons[1].kill9()
        v = vols[0]
        assert sha_of(os.path.join(v.target(), "precious")) == digests[v.id]
        before = fs_bytes(v.target())
        new = XFS_MIN + 200 * MIB
        r = v.d.call("NodeExpandVolume", volume_id=v.id, volume_path=v.target(),
                     staging_target_path=v.staging, capacity_range={"required_bytes": new},
                     volume_capability=v.cap)
        assert r.capacity_bytes == new, r
        assert fs_bytes(v.target()) >= before + 190 * MIB, "the filesystem grew"
        assert v.d.call("ControllerGetVolume", volume_id=v.id).volume.capacity_bytes == new
        c = v.d.call("GetCapacity").available_capacity
        assert c == 1024 * MIB - new, "node-1's capacity less the grown volume: %d" % c
        e = v.d.expect_error(EXHAUSTED, "NodeExpandVolume", volume_id=v.id, volume_path=v.target(),
                             capacity_range={"required_bytes": 2048 * MIB})
        assert v.id in e.details() and "do not fit" in e.details(), e.details()
        assert mount_at(v.staging) is not None
        daemons[1] = vols[1].d = ctx.daemon(node_id="node-2", name="node-2-again", pool=daemons[1].pool,
                                           args=["--distributed", "--zone", "zone-a",
                                                 "--pool-capacity", str(1024 * MIB)])
        assert sha_of(os.path.join(vols[1].target(), "precious")) == digests[vols[1].id]
    finally:
        safely(*[v.teardown for v in vols])


def csi_cap(t):
    return csi_pb2.ControllerServiceCapability.RPC.Type.Name(t)


if __name__ == "__main__":
    run([test_volumes_land_on_the_chosen_node, test_a_full_node_refuses_and_the_next_serves,
         test_topology_less_requests_get_the_local_node, test_wrong_node_rpcs_answer_not_found,
         test_bad_input_names_the_field_and_the_node, test_kill9_of_one_node_loses_nothing_of_the_others,
         test_each_node_serves_its_volumes_and_grows_them])
