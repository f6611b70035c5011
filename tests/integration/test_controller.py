# SPDX-License-Identifier: Apache-2.0
"""The Controller service on the pool (issue 3): volume life cycle, idempotency, ALREADY_EXISTS,
ABORTED, timeouts, pagination, kill -9 recovery with `pool check`, publish and device names,
snapshots and group snapshots, expand/modify coalescing, volume condition. Each test checks what
a user sees: the gRPC code and the message naming the field or object, the files in the pool, and
what `volplugctl pool check` prints."""

import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import threading
import time

import grpc

from harness import VOLPLUGCTL, Skip, in_background, is_root, local_id, run, to_dict, wait_for

import csi_pb2  # noqa: E402  (found through the path harness sets)
from google.protobuf import json_format  # noqa: E402

MIB = 1 << 20
GIB = 1 << 30
SNW = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {}}
BLOCK = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "block": {}}
MNRO = {"access_mode": {"mode": "MULTI_NODE_READER_ONLY"}, "block": {}}
OK = grpc.StatusCode.OK
INVALID = grpc.StatusCode.INVALID_ARGUMENT
NOT_FOUND = grpc.StatusCode.NOT_FOUND
EXISTS = grpc.StatusCode.ALREADY_EXISTS
ABORTED = grpc.StatusCode.ABORTED
PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
EXHAUSTED = grpc.StatusCode.RESOURCE_EXHAUSTED
OUT_OF_RANGE = grpc.StatusCode.OUT_OF_RANGE


# Helpers


def create_req(name, size=None, cap=SNW, **extra):
    req = {"name": name, "volume_capabilities": [cap]}
    if size is not None:
        req["capacity_range"] = {"required_bytes": size}
    req.update(extra)
    return req


def create(d, name, size=None, cap=SNW, **extra):
    return d.call("CreateVolume", create_req(name, size, cap, **extra)).volume


def attempt(d, method, request=None, timeout=30, **fields):
    """Calls and returns (code, reply or message) instead of raising."""
    try:
        return OK, d.call(method, request, timeout=timeout, **fields)
    except grpc.RpcError as e:
        return e.code(), e.details()


def listdir(pool, sub):
    try:
        return sorted(os.listdir(os.path.join(pool, sub)))
    except FileNotFoundError:
        return []


def on_disk(pool, sub, node="node-1"):
    """The objects in a pool's volumes/, snapshots/ or groups/, by the IDs the driver gives
    them: the directory's name (the local ID), '.', and the pool's node."""
    return ["%s.%s" % (name, node) for name in listdir(pool, sub)]


def data_path(pool, volume_id, kind="volumes"):
    return os.path.join(pool, kind, local_id(volume_id), "data")


def meta(pool, volume_id, kind="volumes"):
    with open(os.path.join(pool, kind, local_id(volume_id), "meta.json")) as f:
        return json.load(f)


def pool_check(pool):
    """Runs `volplugctl pool check`: (exit status, output)."""
    p = subprocess.run([VOLPLUGCTL, "pool", "check", pool], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def assert_pool_clean(pool, volumes=None):
    rc, out = pool_check(pool)
    last = out.strip().splitlines()[-1]
    assert rc == 0 and last.endswith(" 0 problems"), (rc, out)
    if volumes is not None:
        assert last.startswith("%d volumes, " % volumes), out
    assert listdir(pool, "tmp") == [], listdir(pool, "tmp")


def write_at(path, offset, data):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_all(path):
    with open(path, "rb") as f:
        return f.read()


def capacity(d, **req):
    c = d.call("GetCapacity", req or None)
    return c.available_capacity, c.maximum_volume_size.value, c.minimum_volume_size.value


def list_all(d, method, page, key, **req):
    """Walks a List* call page by page; returns the IDs in order and the page sizes."""
    ids, sizes, token = [], [], ""
    for _ in range(100):
        r = d.call(method, dict(req, max_entries=page, starting_token=token))
        sizes.append(len(r.entries))
        ids += [key(e) for e in r.entries]
        token = r.next_token
        if not token:
            return ids, sizes
    raise AssertionError("pagination does not end")


def vol_key(e):
    return e.volume.volume_id


def snap_key(e):
    return e.snapshot.snapshot_id


# Volume life cycle and arguments


def test_create_delete_lifecycle(ctx):
    d = ctx.daemon()
    v = create(d, "pvc-life")
    assert v.volume_id.startswith("vol-") and v.volume_id.endswith(".node-1"), v.volume_id
    assert len(local_id(v.volume_id)) == 20, "vol- and 16 hex, then the node: %s" % v.volume_id
    assert v.capacity_bytes == GIB, "default size is 1 GiB"
    assert to_dict(v)["accessible_topology"] == [{"segments": {"topology.volplug.io/node": "node-1",
                                                               "topology.volplug.io/zone": "local"}}]
    assert on_disk(d.pool, "volumes") == [v.volume_id]
    assert sorted(os.listdir(os.path.join(d.pool, "volumes", local_id(v.volume_id)))) == ["data", "meta.json"]
    st = os.stat(data_path(d.pool, v.volume_id))
    assert st.st_size == GIB and st.st_blocks * 512 < MIB, "a sparse file of the volume's size"
    m = meta(d.pool, v.volume_id)
    assert (m["name"], m["size"], m["access_mode"]) == ("pvc-life", GIB, "SINGLE_NODE_WRITER"), m
    assert m["params"]["type"] == "gp3", "gp3 is the default type: %s" % m
    assert "created volume %s (pvc-life" % v.volume_id in d.logs()
    assert [e.volume.volume_id for e in d.call("ListVolumes").entries] == [v.volume_id]
    assert d.call("ControllerGetVolume", volume_id=v.volume_id).volume.volume_id == v.volume_id
    assert_pool_clean(d.pool, volumes=1)

    d.call("DeleteVolume", volume_id=v.volume_id)
    assert on_disk(d.pool, "volumes") == [] and listdir(d.pool, "tmp") == []
    d.call("DeleteVolume", volume_id=v.volume_id)  # gone already: success
    d.expect_error(NOT_FOUND, "ControllerGetVolume", volume_id=v.volume_id, match=v.volume_id)
    d.expect_error(INVALID, "DeleteVolume", volume_id="", match="volume_id")
    assert_pool_clean(d.pool, volumes=0)


def test_create_is_idempotent_other_arguments_already_exist(ctx):
    d = ctx.daemon()
    # 10 GiB: gp3 allows up to 5000 IOPS, so 4000 and 5000 are two different volumes.
    req = create_req("pvc-idem", 10 * GIB, parameters={"type": "gp3", "iops": "4000"})
    first = d.call("CreateVolume", req)
    again = d.call("CreateVolume", req)
    assert to_dict(first) == to_dict(again), (first, again)
    # Keys are case-insensitive: the same parameters spelled otherwise are the same volume.
    same = d.call("CreateVolume",
                  create_req("pvc-idem", 10 * GIB, parameters={"Type": "gp3", "IOPS": "4000"}))
    assert to_dict(same) == to_dict(first)

    src = create(d, "pvc-src", 32 * MIB)
    for what, other in (
        ("capacity", create_req("pvc-idem", 12 * GIB, parameters={"type": "gp3", "iops": "4000"})),
        ("parameters", create_req("pvc-idem", 10 * GIB, parameters={"type": "gp3", "iops": "5000"})),
        ("source", create_req("pvc-idem", 10 * GIB, parameters={"type": "gp3", "iops": "4000"},
                              volume_content_source={"volume": {"volume_id": src.volume_id}})),
    ):
        e = d.expect_error(EXISTS, "CreateVolume", other, match="'pvc-idem'")
        assert {"capacity": "capacity_range", "parameters": "parameters",
                "source": "volume_content_source"}[what] in e.details(), (what, e.details())
    assert on_disk(d.pool, "volumes") == sorted([first.volume.volume_id, src.volume_id])
    assert meta(d.pool, first.volume.volume_id)["params"]["iops"] == "4000"
    assert_pool_clean(d.pool, volumes=2)


def test_bad_names_ids_and_parameters(ctx):
    d = ctx.daemon()
    for name in ("/", "a/b", "x" * 129, "a\x01b", "tab\there", "..", "."):
        d.expect_error(INVALID, "CreateVolume", create_req(name), match="name:")
    assert "129 bytes" in d.expect_error(INVALID, "CreateVolume", create_req("y" * 129)).details()
    d.expect_error(INVALID, "CreateVolume", create_req(""), match="name: missing")
    d.expect_error(INVALID, "CreateVolume", {"name": "pvc-nocap"}, match="volume_capabilities")
    for key in ("bogusKey", "IOPSPerVolume"):
        e = d.expect_error(INVALID, "CreateVolume", create_req("pvc-p", parameters={key: "1"}),
                           match="'%s'" % key)
        assert e.details().startswith("parameters:"), e.details()
    d.expect_error(INVALID, "CreateVolume", create_req("pvc-p", parameters={"type": "fast"}), match="type")
    d.expect_error(INVALID, "CreateVolume", create_req("pvc-p", parameters={"iops": "lots"}), match="iops")
    d.expect_error(INVALID, "CreateVolume", create_req("pvc-p", parameters={"encrypted": "true"}),
                   match="encrypted: pool volumes are not encrypted")
    d.expect_error(INVALID, "CreateVolume",
                   create_req("pvc-p", cap={"access_mode": {"mode": "SINGLE_NODE_WRITER"},
                                            "mount": {"fs_type": "ntfs"}}),
                   match="fs_type")
    # Nothing was made, not even in tmp/.
    assert on_disk(d.pool, "volumes") == [] and listdir(d.pool, "tmp") == []

    # A name of 128 bytes is fine; IDs that could escape the pool never reach a path.
    assert create(d, "z" * 128).volume_id.startswith("vol-")
    outside = os.path.join(d.dir, "outside")
    os.makedirs(os.path.join(outside, "x"))
    for bad in ("../outside/x", "vol-../../x", "/etc", "vol-0123456789abcdeF"):
        d.expect_error(NOT_FOUND, "ControllerGetVolume", volume_id=bad)
        d.call("DeleteVolume", volume_id=bad)
        d.expect_error(NOT_FOUND, "ControllerPublishVolume", volume_id=bad, node_id="node-1",
                       volume_capability=SNW)
    # A NUL would cut the id short: refused on the wire, naming the field.
    for method, extra in (("ControllerGetVolume", {}), ("DeleteVolume", {}),
                          ("ControllerPublishVolume", {"node_id": "node-1",
                                                       "volume_capability": SNW})):
        d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, method, volume_id="vol-\x00", **extra,
                       match="volume_id: a NUL byte")
    assert os.path.isdir(os.path.join(outside, "x"))
    assert_pool_clean(d.pool, volumes=1)


def raw_error(d, method, message, replace):
    """Calls method with message's wire bytes, each (placeholder, bytes) of replace swapped in
    (what protobuf will not put in a string: bytes that are not UTF-8); (code, details)."""
    data = message.SerializeToString()
    for old, new in replace:
        assert len(old) == len(new) and old in data, (old, new)
        data = data.replace(old, new)
    service = "Node" if method.startswith("Node") else "Controller"
    try:
        d.call_raw("/csi.v1.%s/%s" % (service, method), data)
    except grpc.RpcError as e:
        return e.code(), e.details()
    return OK, ""


def create_msg(name, **params):
    req = csi_pb2.CreateVolumeRequest(name=name)
    req.volume_capabilities.add().CopyFrom(json_format.ParseDict(SNW, csi_pb2.VolumeCapability()))
    for k, v in params.items():
        req.parameters[k] = v
    return req


def test_strings_not_utf8_and_oversized_maps(ctx):
    """Strings that are not UTF-8 and maps of 100,000 entries are refused before anything is
    made, naming the field (and the limit); nothing is left in the pool."""
    d = ctx.daemon()
    rows = []
    for label, method, msg, replace, want in (
            ("a volume name", "CreateVolume", create_msg("pvc-@"), [(b"pvc-@", b"pvc-\xff")],
             "name: not valid UTF-8"),
            ("an overlong '/' in a name", "CreateVolume", create_msg("pvc-@@"),
             [(b"pvc-@@", b"pvc-\xc0\xaf")], "name: not valid UTF-8"),
            ("a parameter value", "CreateVolume",
             create_msg("pvc-p", tagSpecification_1="team=@@"), [(b"team=@@", b"team=\xed\xa0")],
             "parameters[tagSpecification_1]: not valid UTF-8"),
            ("a snapshot name", "CreateSnapshot",
             csi_pb2.CreateSnapshotRequest(name="snap-@", source_volume_id="vol-x"),
             [(b"snap-@", b"snap-\xff")], "name: not valid UTF-8"),
            ("a volume_context key", "NodeStageVolume",
             csi_pb2.NodeStageVolumeRequest(volume_id="vol-x", staging_target_path="/s",
                                            volume_context={"k@": "v"}),
             [(b"k@", b"k\xff")], "volume_context: key #1 is not valid UTF-8")):
        for attempt_no in (1, 2):  # the retry gets the same answer, nothing half-made
            code, details = raw_error(d, method, msg, replace)
            assert (code, details) == (INVALID, want), "%s: %s %s" % (label, code, details)
        rows.append(label)

    many = create_msg("pvc-many")
    for i in range(100000):
        many.parameters["tagSpecification_%d" % (i + 1)] = "k%d=v" % i
    d.expect_error(INVALID, "CreateVolume", many, match="parameters: at most 512 entries, got 100000")
    stage = csi_pb2.NodeStageVolumeRequest(volume_id="vol-x", staging_target_path="/s")
    stage.volume_capability.CopyFrom(json_format.ParseDict(SNW, csi_pb2.VolumeCapability()))
    for i in range(100000):
        stage.volume_context["key%d" % i] = "value%d" % i
    d.expect_error(INVALID, "NodeStageVolume", stage,
                   match="volume_context: at most 512 entries, got 100000")
    # Past gRPC's 4 MiB a request is refused before it is decoded.
    for i in range(100000, 200000):
        many.parameters["tagSpecification_%d" % (i + 1)] = "k%d=v" % i
    assert many.ByteSize() > 4 << 20
    d.expect_error(EXHAUSTED, "CreateVolume", many)
    assert len(d.call("ListVolumes").entries) == 0
    assert on_disk(d.pool, "volumes") == []
    assert_pool_clean(d.pool, volumes=0)
    return "%d fields refused; 100,000 parameters and volume_context entries refused" % len(rows)


def test_capacity_range(ctx):
    d = ctx.daemon()
    assert create(d, "pvc-1000b", 1000).capacity_bytes == MIB, "rounded up to a MiB"
    assert create(d, "pvc-10m1", 10 * MIB + 1).capacity_bytes == 11 * MIB
    assert create(d, "pvc-default").capacity_bytes == GIB
    v = create(d, "pvc-limit", capacity_range={"limit_bytes": 100 * MIB + 5})
    assert v.capacity_bytes == 100 * MIB, "the default clipped to the limit, in whole MiB"
    v = create(d, "pvc-range", capacity_range={"required_bytes": 3 * MIB, "limit_bytes": 5 * MIB})
    assert v.capacity_bytes == 3 * MIB
    assert os.stat(data_path(d.pool, v.volume_id)).st_size == 3 * MIB
    e = d.expect_error(OUT_OF_RANGE, "CreateVolume",
                       create_req("pvc-bad", capacity_range={"required_bytes": 5 * MIB, "limit_bytes": MIB}),
                       match="capacity_range")
    assert "limit_bytes" in e.details(), e.details()
    d.expect_error(OUT_OF_RANGE, "CreateVolume",
                   create_req("pvc-bad", capacity_range={"required_bytes": 1000, "limit_bytes": 2000}),
                   match="capacity_range")
    d.expect_error(INVALID, "CreateVolume", create_req("pvc-bad", capacity_range={"required_bytes": -1}),
                   match="capacity_range")
    assert "pvc-bad" not in json.dumps([meta(d.pool, i)["name"] for i in on_disk(d.pool, "volumes")])
    assert_pool_clean(d.pool, volumes=5)


def test_topology(ctx):
    d = ctx.daemon(args=["--zone", "zone-a"])
    here = {"segments": {"topology.volplug.io/zone": "zone-a"}}
    there = {"segments": {"topology.volplug.io/zone": "zone-b"}}
    node = {"segments": {"topology.volplug.io/node": "node-1", "topology.volplug.io/zone": "zone-a"}}
    e = d.expect_error(EXHAUSTED, "CreateVolume",
                       create_req("pvc-there", accessibility_requirements={"requisite": [there],
                                                                           "preferred": [there]}),
                       match="accessibility_requirements")
    assert "zone-a" in e.details(), e.details()
    assert on_disk(d.pool, "volumes") == []
    v = create(d, "pvc-both", accessibility_requirements={"requisite": [there, here], "preferred": [there]})
    assert to_dict(v)["accessible_topology"] == [node], "exactly where it is: this node"
    k8s = {"segments": {"topology.kubernetes.io/zone": "zone-a"}}
    assert create(d, "pvc-k8s", accessibility_requirements={"requisite": [k8s]}).volume_id
    assert capacity(d, accessible_topology=there)[0] == 0, "no capacity in a zone not served"
    assert capacity(d, accessible_topology=here)[0] > 0


def test_pool_capacity(ctx):
    d = ctx.daemon(args=["--pool-capacity", "3G"])
    assert capacity(d) == (3 * GIB, 3 * GIB, MIB)
    a = create(d, "pvc-a", 2 * GIB)
    assert capacity(d) == (GIB, GIB, MIB)
    e = d.expect_error(EXHAUSTED, "CreateVolume", create_req("pvc-b", 2 * GIB), match="capacity_range")
    assert "do not fit" in e.details(), e.details()
    assert on_disk(d.pool, "volumes") == [a.volume_id] and listdir(d.pool, "tmp") == []
    e = d.expect_error(EXHAUSTED, "CreateSnapshot", name="snap-a", source_volume_id=a.volume_id)
    assert e.details() == ("snapshot 'snap-a' of volume %s failed: 2147483648 bytes do not fit "
                           "in the pool of node node-1 (1073741824 bytes left): 2147483648 of "
                           "3221225472 bytes are provisioned (capacity 3221225472 x "
                           "overprovision ratio 1)" % a.volume_id), e.details()
    assert capacity(d) == (GIB, GIB, MIB), "a failed create reserves nothing"

    # The numbers come from the pool itself: a restarted daemon sees the same.
    d.stop()
    d = ctx.daemon(args=["--pool-capacity", "3G"], pool=d.pool, name="again")
    assert capacity(d) == (GIB, GIB, MIB)
    d.call("DeleteVolume", volume_id=a.volume_id)
    assert capacity(d)[0] == 3 * GIB
    assert create(d, "pvc-b", 2 * GIB).capacity_bytes == 2 * GIB

    # Thin provisioning, asked for: 2.5 x 3 GiB may be provisioned on the same pool.
    d.stop()
    d = ctx.daemon(args=["--pool-capacity", "3G", "--overprovision-ratio", "2.5"], pool=d.pool,
                   name="thin")
    assert capacity(d) == (7 * GIB + GIB // 2 - 2 * GIB, 7 * GIB + GIB // 2 - 2 * GIB, MIB)
    assert create(d, "pvc-c", 5 * GIB).capacity_bytes == 5 * GIB
    e = d.expect_error(EXHAUSTED, "CreateVolume", create_req("pvc-d", GIB), match="capacity_range")
    assert e.details() == ("capacity_range: 1073741824 bytes do not fit in the pool of node "
                           "node-1 (536870912 bytes left): 7516192768 of 8053063680 bytes are "
                           "provisioned (capacity 3221225472 x overprovision ratio 2.5)"), e.details()


# Concurrency, ABORTED and timeouts


def test_64_concurrent_creates_of_one_name(ctx):
    d = ctx.daemon(args=["--workers", "16"])
    other = ctx.daemon(mode="controller", pool=d.pool, args=["--workers", "16"], name="other")

    def storm(name, daemons):
        with concurrent.futures.ThreadPoolExecutor(max_workers=64) as ex:
            futures = [ex.submit(attempt, daemons[i % len(daemons)], "CreateVolume",
                                 create_req(name, 8 * MIB)) for i in range(64)]
            results = [f.result(timeout=60) for f in futures]
        ok = [to_dict(r) for code, r in results if code == OK]
        others = [(code, r) for code, r in results if code != OK]
        assert ok, others
        assert all(r == ok[0] for r in ok), "every success returns the same volume"
        assert all(code == ABORTED and "in progress" in msg for code, msg in others), others
        return ok[0]["volume"]["volume_id"], len(ok)

    one, n_ok = storm("pvc-storm", [d])
    assert on_disk(d.pool, "volumes") == [one], on_disk(d.pool, "volumes")
    # The same from two processes on one pool: their in-flight tables are separate, the
    # pool's no-replace rename decides.
    two, n_ok2 = storm("pvc-storm-2", [d, other])
    assert on_disk(d.pool, "volumes") == sorted([one, two]), on_disk(d.pool, "volumes")
    assert d.logs().count("created volume %s" % one) == 1
    assert (d.logs() + other.logs()).count("created volume %s" % two) == 1
    assert_pool_clean(d.pool, volumes=2)


def test_second_call_in_flight_is_aborted_at_once(ctx):
    d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "pool-create-before-commit=sleep(2s);"
                                              "pool-snapshot-before-commit=sleep(2s)"})
    start = time.monotonic()
    t, first = in_background(d.call, "CreateVolume", create_req("pvc-slow", 8 * MIB))
    wait_for(lambda: listdir(d.pool, "tmp"), what="the first create to stage its volume")
    t0 = time.monotonic()
    e = d.expect_error(ABORTED, "CreateVolume", create_req("pvc-slow", 8 * MIB), match="'pvc-slow'")
    took = time.monotonic() - t0
    assert took < 0.5, "ABORTED at once, not after the first call (%.3fs)" % took
    assert "in progress" in e.details(), e.details()
    t.join(10)
    assert "value" in first, first
    assert time.monotonic() - start >= 2.0
    vid = first["value"].volume.volume_id
    assert on_disk(d.pool, "volumes") == [vid]
    assert d.call("CreateVolume", create_req("pvc-slow", 8 * MIB)).volume.volume_id == vid

    # The same for a snapshot name.
    t, first = in_background(d.call, "CreateSnapshot", name="snap-slow", source_volume_id=vid)
    wait_for(lambda: listdir(d.pool, "tmp"), what="the first snapshot to stage")
    t0 = time.monotonic()
    d.expect_error(ABORTED, "CreateSnapshot", name="snap-slow", source_volume_id=vid, match="'snap-slow'")
    assert time.monotonic() - t0 < 0.5
    t.join(10)
    assert "value" in first, first
    assert on_disk(d.pool, "snapshots") == [first["value"].snapshot.snapshot_id]
    assert_pool_clean(d.pool, volumes=1)


def test_client_deadline_then_retry_finds_the_volume(ctx):
    d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "pool-create-before-commit=sleep(2s)"})
    req = create_req("pvc-deadline", 16 * MIB)
    start = time.monotonic()
    try:
        d.call("CreateVolume", req, timeout=0.5)
        raise AssertionError("a 2 s create answered within 0.5 s")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    assert time.monotonic() - start < 1.5
    # The server goes on: a retry meanwhile is ABORTED, one after it finished succeeds.
    code, msg = attempt(d, "CreateVolume", req)
    assert code == ABORTED and "pvc-deadline" in msg, (code, msg)
    codes = []
    while True:
        code, reply = attempt(d, "CreateVolume", req)
        codes.append(code)
        if code == OK:
            break
        assert code == ABORTED and time.monotonic() - start < 10, (code, reply)
        time.sleep(0.1)
    assert time.monotonic() - start >= 2.0, "the retry returned the work the first call finished"
    assert reply.volume.capacity_bytes == 16 * MIB
    assert on_disk(d.pool, "volumes") == [reply.volume.volume_id]
    assert d.logs().count("created volume %s" % reply.volume.volume_id) == 1
    assert_pool_clean(d.pool, volumes=1)


# Pagination


def test_list_volumes_pagination(ctx):
    d = ctx.daemon()
    ids = sorted(create(d, "pvc-page-%d" % i, MIB).volume_id for i in range(8))
    got, sizes = list_all(d, "ListVolumes", 3, vol_key)
    assert got == ids and sizes == [3, 3, 2], (got, sizes)
    assert [vol_key(e) for e in d.call("ListVolumes", max_entries=0).entries] == ids, "0: all"

    # A volume deleted between pages (the next page's first one) breaks nothing.
    page = d.call("ListVolumes", max_entries=3)
    assert [vol_key(e) for e in page.entries] == ids[:3]
    d.call("DeleteVolume", volume_id=page.next_token)
    d.call("DeleteVolume", volume_id=ids[0])
    rest = []
    token = page.next_token
    while token:
        page = d.call("ListVolumes", max_entries=3, starting_token=token)
        rest += [vol_key(e) for e in page.entries]
        token = page.next_token
    assert rest == ids[4:], (rest, ids)

    d.expect_error(ABORTED, "ListVolumes", starting_token="garbage", match="starting_token")
    d.expect_error(ABORTED, "ListVolumes", starting_token="snap-0000000000000000", match="starting_token")
    d.expect_error(INVALID, "ListVolumes", max_entries=-1, match="max_entries")

    # Published nodes are shown.
    d.call("ControllerPublishVolume", volume_id=ids[5], node_id="node-1", volume_capability=SNW)
    status = {vol_key(e): list(e.status.published_node_ids) for e in d.call("ListVolumes").entries}
    assert status[ids[5]] == ["node-1"] and status[ids[6]] == [], status


# kill -9 in the middle of an operation


def crash_then_recover(ctx, env, crash, leftover):
    """Starts volplugd with a crash failpoint, runs crash(d) (which must kill it), checks that
    `pool check` sees the leftover in tmp/, restarts on the same pool and checks it is clean."""
    d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": env})
    crash(d)
    assert d.proc.wait(10) == -9, "killed by its failpoint"
    rc, out = pool_check(d.pool)
    assert rc == 1 and "tmp/%s" % leftover in out and "interrupted operation" in out, out
    assert "1 problems" in out, out
    again = ctx.daemon(pool=d.pool, name="restarted")
    assert_pool_clean(d.pool)
    return d, again


def expect_crash(d, method, **fields):
    try:
        d.call(method, timeout=10, **fields)
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, e
        return
    raise AssertionError("%s survived its crash failpoint" % method)


def test_kill9_during_create(ctx):
    d, again = crash_then_recover(
        ctx, "pool-create-before-commit=crash",
        lambda d: expect_crash(d, "CreateVolume", **create_req("pvc-crash", 32 * MIB)), "new-vol-")
    assert on_disk(d.pool, "volumes") == [], "a half-made volume is never visible"
    assert list(again.call("ListVolumes").entries) == []
    v = create(again, "pvc-crash", 32 * MIB)
    assert on_disk(d.pool, "volumes") == [v.volume_id]
    assert_pool_clean(d.pool, volumes=1)


def test_kill9_during_snapshot(ctx):
    holder = {}

    def crash(d):
        v = create(d, "pvc-snapsrc", 16 * MIB)
        write_at(data_path(d.pool, v.volume_id), 4096, b"keep me")
        holder["vid"] = v.volume_id
        expect_crash(d, "CreateSnapshot", name="snap-crash", source_volume_id=v.volume_id)

    d, again = crash_then_recover(ctx, "pool-snapshot-before-commit=crash", crash, "new-snap-")
    vid = holder["vid"]
    assert on_disk(d.pool, "snapshots") == []
    assert list(again.call("ListSnapshots").entries) == []
    s = again.call("CreateSnapshot", name="snap-crash", source_volume_id=vid).snapshot
    assert s.ready_to_use and on_disk(d.pool, "snapshots") == [s.snapshot_id]
    assert read_all(data_path(d.pool, s.snapshot_id, "snapshots"))[4096:4103] == b"keep me"
    assert_pool_clean(d.pool, volumes=1)


def test_kill9_during_delete(ctx):
    holder = {}

    def crash(d):
        holder["vid"] = create(d, "pvc-del", 16 * MIB).volume_id
        expect_crash(d, "DeleteVolume", volume_id=holder["vid"])

    d, again = crash_then_recover(ctx, "pool-delete-after-rename=crash", crash, "del-vol-")
    assert on_disk(d.pool, "volumes") == [], "a half-removed volume is gone"
    again.expect_error(NOT_FOUND, "ControllerGetVolume", volume_id=holder["vid"])
    again.call("DeleteVolume", volume_id=holder["vid"])
    assert create(again, "pvc-del", 16 * MIB).volume_id == holder["vid"], "the name is free again"
    assert_pool_clean(d.pool, volumes=1)


# Every point of a create and a delete around its fsyncs (docs/pool.md, What each fsync is
# for): killed there, the restarted pool holds the whole volume or nothing, and the CO's retry
# finishes the call.
CREATE_SYNC_POINTS = ["pool-create-before-commit", "pool-commit-after-sync",
                      "pool-commit-after-rename", "pool-dir-sync", "pool-commit-after-dir-sync"]
DELETE_SYNC_POINTS = ["pool-delete-after-check", "pool-dir-sync", "pool-delete-after-rename"]


def assert_whole_or_absent(d, vid, size):
    """The volume vid is absent, or there whole: its record, a data file of its size, healthy."""
    if on_disk(d.pool, "volumes") == []:
        d.expect_error(NOT_FOUND, "ControllerGetVolume", volume_id=vid)
        return False
    assert on_disk(d.pool, "volumes") == [vid]
    assert meta(d.pool, vid)["size"] == size
    assert os.stat(data_path(d.pool, vid)).st_size == size
    got = d.call("ControllerGetVolume", volume_id=vid)
    assert not got.status.volume_condition.abnormal, got.status.volume_condition.message
    return True


def test_kill9_at_each_sync_point(ctx):
    size = 8 * MIB
    for i, point in enumerate(CREATE_SYNC_POINTS):
        name = "pvc-sync-%d" % i
        d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": point + "=crash"}, name="create-%d" % i)
        expect_crash(d, "CreateVolume", **create_req(name, size))
        assert d.proc.wait(10) == -9, point
        again = ctx.daemon(pool=d.pool, name="create-%d-again" % i)
        assert_pool_clean(d.pool)
        vid = (on_disk(d.pool, "volumes") or [None])[0]
        if vid:
            assert assert_whole_or_absent(again, vid, size), point
        retried = create(again, name, size).volume_id
        assert vid in (None, retried), (point, vid, retried)
        assert assert_whole_or_absent(again, retried, size), point
        again.call("DeleteVolume", volume_id=retried)
        assert_pool_clean(d.pool, volumes=0)
        again.stop()
    for i, point in enumerate(DELETE_SYNC_POINTS):
        first = ctx.daemon(name="delete-%d-first" % i)
        vid = create(first, "pvc-del-sync-%d" % i, size).volume_id
        first.stop()
        d = ctx.daemon(pool=first.pool, env={"VOLPLUG_FAILPOINTS": point + "=crash"},
                       name="delete-%d" % i)
        expect_crash(d, "DeleteVolume", volume_id=vid)
        assert d.proc.wait(10) == -9, point
        again = ctx.daemon(pool=d.pool, name="delete-%d-again" % i)
        assert_pool_clean(d.pool)
        assert_whole_or_absent(again, vid, size)
        again.call("DeleteVolume", volume_id=vid)
        assert on_disk(d.pool, "volumes") == [], point
        assert_pool_clean(d.pool, volumes=0)
        again.stop()


def test_blank_volume_a_crash_left_unsynced_is_made_again(ctx):
    """A create syncs no blank data file (its size is in meta.json): what a power cut can then
    leave, a data file missing or short, is made again at the next start, for a volume never
    used on a node; a volume that was is only reported."""
    d = ctx.daemon()
    lost, short, used = (create(d, "pvc-unsynced-%s" % x, 16 * MIB).volume_id
                         for x in ("lost", "short", "used"))
    d.stop()
    os.unlink(data_path(d.pool, lost))
    os.truncate(data_path(d.pool, short), 0)
    os.unlink(data_path(d.pool, used))
    with open(os.path.join(d.pool, "volumes", local_id(used), "node.json"), "w") as f:
        f.write("{}")
    again = ctx.daemon(pool=d.pool, name="restarted")
    for vid in (lost, short):
        assert os.stat(data_path(d.pool, vid)).st_size == 16 * MIB, vid
        got = again.call("ControllerGetVolume", volume_id=vid)
        assert not got.status.volume_condition.abnormal, got.status.volume_condition.message
    assert not os.path.exists(data_path(d.pool, used)), "a used volume's data is not invented"
    got = again.call("ControllerGetVolume", volume_id=used)
    assert "data file of volume %s is missing" % used in got.status.volume_condition.message
    rc, out = pool_check(d.pool)
    assert rc == 1 and "volumes/%s: data file missing" % local_id(used) in out, out
    assert local_id(lost) not in out and local_id(short) not in out, out


def test_create_makes_two_fsyncs_and_delete_one(ctx):
    """Counted with strace on a pool of ext4, XFS or btrfs (docs/pool.md, What each fsync is
    for): a blank create fsyncs meta.json and volumes/, a delete volumes/."""
    if not shutil.which("strace"):
        raise Skip("no strace")
    fstype = subprocess.run(["findmnt", "-n", "-o", "FSTYPE", "--target", ctx.tmp],
                            capture_output=True, text=True).stdout.strip()
    if fstype not in ("ext4", "xfs", "btrfs"):
        raise Skip("the pool's filesystem is %s, not ext4, XFS or btrfs" % fstype)
    d = ctx.daemon(start=False)
    trace = os.path.join(d.dir, "strace")
    argv = d.argv
    d.argv = lambda: ["strace", "-f", "-qq", "-o", trace,
                      "-e", "trace=fsync,fdatasync,syncfs,sync_file_range"] + argv()
    d.start()

    def count():
        with open(trace) as f:
            return sum(1 for line in f if " = " in line)

    n = 10
    start = count()
    ids = [create(d, "pvc-fsyncs-%d" % i, MIB).volume_id for i in range(n)]
    created = count()
    for vid in ids:
        d.call("DeleteVolume", volume_id=vid)
    deleted = count()
    for child in open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split():
        os.kill(int(child), signal.SIGTERM)
    d.proc.wait(30)
    assert created - start == 2 * n, "fsyncs of %d creates: %d" % (n, created - start)
    assert deleted - created == n, "fsyncs of %d deletes: %d" % (n, deleted - created)
    return "%d creates: %d fsyncs, %d deletes: %d" % (n, created - start, n, deleted - created)


# Publish


def publish(d, vid, node="node-1", cap=SNW, readonly=False):
    return dict(d.call("ControllerPublishVolume", volume_id=vid, node_id=node, volume_capability=cap,
                       readonly=readonly).publish_context)


def test_publish_device_names_and_idempotency(ctx):
    d = ctx.daemon()
    a, b, c = (create(d, "pvc-pub-%s" % x, MIB).volume_id for x in "abc")
    first = publish(d, a)
    assert first == {"devicePath": "/dev/xvdba"}, first
    assert publish(d, a) == first, "re-publish: same context"
    assert publish(d, b) == {"devicePath": "/dev/xvdbb"}
    e = d.expect_error(EXISTS, "ControllerPublishVolume", volume_id=a, node_id="node-1",
                       volume_capability=SNW, readonly=True, match=a)
    assert "readonly" in e.details(), e.details()
    assert meta(d.pool, a)["attachments"] == [{"node": "node-1", "device": "/dev/xvdba", "readonly": False}]
    d.expect_error(NOT_FOUND, "ControllerPublishVolume", volume_id=a, node_id="node-9",
                   volume_capability=SNW, match="node-9")
    d.expect_error(NOT_FOUND, "ControllerPublishVolume", volume_id="vol-0000000000000000",
                   node_id="node-1", volume_capability=SNW, match="vol-0000000000000000")
    d.expect_error(INVALID, "ControllerPublishVolume", volume_id=a, node_id="", volume_capability=SNW,
                   match="node_id")
    d.expect_error(INVALID, "ControllerPublishVolume", volume_id=a, node_id="node-1",
                   match="volume_capability")

    e = d.expect_error(PRECONDITION, "DeleteVolume", volume_id=b, match=b)
    assert "node-1" in e.details(), e.details()
    assert b in on_disk(d.pool, "volumes")

    for _ in range(2):  # unpublish is idempotent
        d.call("ControllerUnpublishVolume", volume_id=a, node_id="node-1")
    d.call("ControllerUnpublishVolume", volume_id="vol-0000000000000000", node_id="node-1")
    assert meta(d.pool, a)["attachments"] == []
    assert publish(d, c) == {"devicePath": "/dev/xvdba"}, "a freed name is used again, first first"
    d.call("ControllerUnpublishVolume", volume_id=b, node_id="node-1")
    d.call("DeleteVolume", volume_id=b)
    assert b not in on_disk(d.pool, "volumes")


def test_publish_only_to_the_volumes_node(ctx):
    """A pool serves one node: a process of another node refuses to open it, and a volume is
    published to its own node only (its data is there), whatever its access mode."""
    d = ctx.daemon()
    other = ctx.daemon(mode="node", pool=d.pool, node_id="node-2", name="node2", start=False)
    try:
        other.start()
        raise AssertionError("a node-2 process opened node-1's pool")
    except AssertionError as e:
        assert "volplugd exited with 2" in str(e), e
    assert "pool %s serves node node-1" % d.pool in other.logs(), other.logs()
    single = create(d, "pvc-single", MIB, cap=BLOCK).volume_id
    e = d.expect_error(NOT_FOUND, "ControllerPublishVolume", volume_id=single, node_id="node-2",
                       volume_capability=BLOCK, match="node_id")
    assert "%s is on node node-1 and cannot be published to node node-2" % single in e.details()
    assert meta(d.pool, single)["attachments"] == [], "nothing recorded"
    publish(d, single, "node-1", BLOCK)
    assert [x["node"] for x in meta(d.pool, single)["attachments"]] == ["node-1"]

    shared = create(d, "pvc-shared", MIB, cap=MNRO).volume_id
    publish(d, shared, "node-1", MNRO, readonly=True)
    publish(d, shared, "node-1", MNRO, readonly=True)
    d.expect_error(NOT_FOUND, "ControllerPublishVolume", volume_id=shared, node_id="node-2",
                   volume_capability=MNRO, readonly=True, match="node-2")
    status = d.call("ControllerGetVolume", volume_id=shared).status
    assert list(status.published_node_ids) == ["node-1"], status
    # Unpublish without a node detaches it everywhere.
    d.call("ControllerUnpublishVolume", volume_id=shared)
    assert meta(d.pool, shared)["attachments"] == []


def test_attach_limit(ctx):
    d = ctx.daemon(args=["--max-volumes-per-node", "2"])
    assert d.call("NodeGetInfo").max_volumes_per_node == 2
    vols = [create(d, "pvc-lim-%d" % i, MIB).volume_id for i in range(3)]
    publish(d, vols[0])
    publish(d, vols[1])
    e = d.expect_error(EXHAUSTED, "ControllerPublishVolume", volume_id=vols[2], node_id="node-1",
                       volume_capability=SNW, match="node-1")
    assert "limit" in e.details() and "2" in e.details(), e.details()
    assert meta(d.pool, vols[2])["attachments"] == []
    assert publish(d, vols[0]) == {"devicePath": "/dev/xvdba"}, "re-publish at the limit is fine"
    d.call("ControllerUnpublishVolume", volume_id=vols[0], node_id="node-1")
    assert publish(d, vols[2]) == {"devicePath": "/dev/xvdba"}


def test_device_names_survive_a_restart(ctx):
    d = ctx.daemon()
    a, b = (create(d, "pvc-dev-%s" % x, MIB).volume_id for x in "ab")
    assert publish(d, a) == {"devicePath": "/dev/xvdba"}
    d.kill9()
    d = ctx.daemon(pool=d.pool, name="restarted")
    assert publish(d, b) == {"devicePath": "/dev/xvdbb"}, "the name a holds is not handed out again"
    assert publish(d, a) == {"devicePath": "/dev/xvdba"}
    status = {vol_key(e): list(e.status.published_node_ids) for e in d.call("ListVolumes").entries}
    assert status == {a: ["node-1"], b: ["node-1"]}, status


# Several processes on one pool: what they must agree on is decided from the pool


def test_two_processes_delete_never_races_publish(ctx):
    """Rounds of DeleteVolume through A against ControllerPublishVolume of the same volume
    through B, started together, while two threads run other volumes' life cycles through
    both. One wins; never both (a published volume is never deleted). A sleeps 5 ms between
    its "is it published?" check and the removal, to widen the window a publish would need."""
    a = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "pool-delete-after-check=sleep(5ms)"})
    b = ctx.daemon(mode="controller", pool=a.pool, name="b")
    stop = threading.Event()
    load = {"cycles": 0, "errors": []}

    def background(t):
        """Other volumes' whole life cycles through both processes, meanwhile."""
        i = 0
        while not stop.is_set():
            x, y = (a, b) if i % 2 else (b, a)
            try:
                vid = create(x, "pvc-load-%d-%d" % (t, i), MIB).volume_id
                publish(y, vid)
                x.call("ControllerUnpublishVolume", volume_id=vid, node_id="node-1")
                y.call("DeleteVolume", volume_id=vid)
                load["cycles"] += 1
            except grpc.RpcError as e:
                load["errors"].append((e.code(), e.details()))
            i += 1

    loaders = [threading.Thread(target=background, args=(t,)) for t in range(2)]
    for t in loaders:
        t.start()
    try:
        rounds, deleted, published, both = race_rounds(a, b, 40)
    finally:
        stop.set()
        for t in loaders:
            t.join(30)
    assert load["errors"] == [] and load["cycles"] > 0, load
    assert both == 0, "%d of %d rounds: the delete and the publish both succeeded" % (both, rounds)
    assert deleted > 0, "the delete never won: the race was not run"
    assert on_disk(a.pool, "volumes") == []
    assert json.load(open(os.path.join(a.pool, "nodes", "node-1.devices")))["devices"] == {}
    assert_pool_clean(a.pool, volumes=0)
    return "%d rounds: %d deleted first, %d published first, %d both; %d other life cycles" % (
        rounds, deleted, published, both, load["cycles"])


def race_rounds(a, b, rounds):
    """DeleteVolume through a against ControllerPublishVolume through b, each round a new
    volume; returns (rounds, delete won, publish won, both succeeded)."""
    deleted = published = both = 0
    for i in range(rounds):
        vid = create(a, "pvc-race-%d" % i, MIB).volume_id
        (cd, rd), (cp, rp) = concurrently(
            (a, "DeleteVolume", {"volume_id": vid}),
            (b, "ControllerPublishVolume", {"volume_id": vid, "node_id": "node-1",
                                            "volume_capability": SNW}))
        if cd == OK and cp == OK:
            both += 1
        elif cd == OK:
            assert cp == NOT_FOUND and vid in rp, (cp, rp)
            assert vid not in on_disk(a.pool, "volumes")
            deleted += 1
        else:
            assert cd == PRECONDITION and "published to node node-1" in rd, (cd, rd)
            assert cp == OK and meta(a.pool, vid)["attachments"][0]["node"] == "node-1", (cp, rp)
            published += 1
            b.call("ControllerUnpublishVolume", volume_id=vid, node_id="node-1")
            a.call("DeleteVolume", volume_id=vid)
    return rounds, deleted, published, both


def test_two_processes_share_the_capacity(ctx):
    """16 creates of 10 MiB at once, through two processes with --pool-capacity 100M each:
    exactly 10 fit, in total. Deletes and expands through one are seen by the other."""
    args = ["--pool-capacity", "100M", "--workers", "8", "--modify-coalesce-window", "10ms"]
    a = ctx.daemon(args=args)
    b = ctx.daemon(mode="controller", pool=a.pool, name="b", args=args)
    results = concurrently(*[((a, b)[i % 2], "CreateVolume", create_req("pvc-cap-%d" % i, 10 * MIB))
                             for i in range(16)])
    made = [r.volume for code, r in results if code == OK]
    refused = [(code, r) for code, r in results if code != OK]
    total = sum(v.capacity_bytes for v in made)
    assert total <= 100 * MIB, "%d MiB created with 100 MiB of capacity" % (total // MIB)
    assert len(made) == 10, (len(made), refused)
    assert all(code == EXHAUSTED and "do not fit" in msg for code, msg in refused), refused
    held = sum(os.stat(data_path(a.pool, v)).st_size for v in on_disk(a.pool, "volumes"))
    assert held == total
    assert capacity(a)[0] == 0 and capacity(b)[0] == 0, (capacity(a), capacity(b))

    a.call("DeleteVolume", volume_id=made[0].volume_id)
    assert capacity(b)[0] == 10 * MIB, "B counts A's delete"
    r = b.call("ControllerExpandVolume", volume_id=made[1].volume_id,
               capacity_range={"required_bytes": 20 * MIB})
    assert r.capacity_bytes == 20 * MIB
    assert capacity(a)[0] == 0, "A counts B's expand"
    a.expect_error(EXHAUSTED, "ControllerExpandVolume", volume_id=made[2].volume_id,
                   capacity_range={"required_bytes": 20 * MIB}, match=made[2].volume_id)
    a.expect_error(EXHAUSTED, "CreateVolume", create_req("pvc-cap-late", MIB), match="do not fit")
    assert_pool_clean(a.pool, volumes=9)
    return "16 creates of 10 MiB, 100 MiB capacity: %d made (%d MiB), %d refused" % (
        len(made), total // MIB, len(refused))


def test_two_processes_share_device_names_and_the_limit(ctx):
    a = ctx.daemon(args=["--max-volumes-per-node", "2"])
    b = ctx.daemon(mode="controller", pool=a.pool, name="b")
    v = [create(a, "pvc-names-%d" % i, MIB).volume_id for i in range(4)]
    assert publish(a, v[0]) == {"devicePath": "/dev/xvdba"}
    assert publish(b, v[1]) == {"devicePath": "/dev/xvdbb"}, "B sees the name A handed out"
    for d in (a, b):
        e = d.expect_error(EXHAUSTED, "ControllerPublishVolume", volume_id=v[2], node_id="node-1",
                           volume_capability=SNW, match="node-1")
        assert "limit" in e.details(), e.details()
    b.call("ControllerUnpublishVolume", volume_id=v[0], node_id="node-1")
    assert publish(a, v[2]) == {"devicePath": "/dev/xvdba"}, "A sees B's unpublish: under the limit"
    index = json.load(open(os.path.join(a.pool, "nodes", "node-1.devices")))
    assert index["devices"] == {"/dev/xvdba": local_id(v[2]), "/dev/xvdbb": local_id(v[1])}, index

    # Publishes racing through both processes get different names.
    a.call("ControllerUnpublishVolume", volume_id=v[1])
    a.call("ControllerUnpublishVolume", volume_id=v[2])
    results = concurrently(*[(d, "ControllerPublishVolume", {"volume_id": vid, "node_id": "node-1",
                                                             "volume_capability": SNW})
                             for d, vid in ((a, v[0]), (b, v[3]))])
    names = sorted(r.publish_context["devicePath"] for code, r in results if code == OK)
    assert names == ["/dev/xvdba", "/dev/xvdbb"], results


def test_kill9_during_expand_at_the_meta_rename(ctx):
    d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "atomic-rename:meta.json=crash"},
                   args=["--modify-coalesce-window", "10ms"])
    vid = create(d, "pvc-grow-crash", 16 * MIB).volume_id
    expect_crash(d, "ControllerExpandVolume", volume_id=vid,
                 capacity_range={"required_bytes": 32 * MIB})
    assert d.proc.wait(10) == -9, "killed by its failpoint"
    assert sorted(os.listdir(os.path.join(d.pool, "volumes", local_id(vid)))) == ["data", "meta.json"], \
        "no temporary left beside meta.json"
    tmp = listdir(d.pool, "tmp")
    assert len(tmp) == 1 and tmp[0].startswith(".meta.json.tmp-"), tmp
    rc, out = pool_check(d.pool)
    assert rc == 1 and "tmp/%s: left by an interrupted operation" % tmp[0] in out, out
    assert "volumes/%s: data file is %d bytes, metadata says %d" % (local_id(vid), 32 * MIB, 16 * MIB) in out

    again = ctx.daemon(pool=d.pool, name="restarted", args=["--modify-coalesce-window", "10ms"])
    assert_pool_clean(d.pool, volumes=1)
    assert meta(d.pool, vid)["size"] == 32 * MIB, "the size the expand made is recorded"
    warned = [l for l in again.logs().splitlines() if "warning" in l and d.pool in l]
    assert any("tmp/%s" % tmp[0] in l and "removed" in l for l in warned), warned
    assert any(local_id(vid) in l and "recorded %d bytes" % (32 * MIB) in l for l in warned), warned
    r = again.call("ControllerExpandVolume", volume_id=vid, capacity_range={"required_bytes": 32 * MIB})
    assert r.capacity_bytes == 32 * MIB, "the retry finds the expand done"


def damage(pool, vid, text=b"{ not json"):
    with open(os.path.join(pool, "volumes", local_id(vid), "meta.json"), "wb") as f:
        f.write(text)


def test_damaged_volume_is_listed_counted_and_deletable(ctx):
    d = ctx.daemon(args=["--pool-capacity", "1G"])
    good = create(d, "pvc-good", 8 * MIB).volume_id
    bad = create(d, "pvc-bad", 16 * MIB).volume_id
    publish(d, bad)
    damage(d.pool, bad)
    for _ in range(3):
        entries = {vol_key(e): e for e in d.call("ListVolumes").entries}
        assert sorted(entries) == sorted([good, bad]), "a damaged volume is still listed"
    cond = entries[bad].status.volume_condition
    assert cond.abnormal and "damaged" in cond.message and "meta.json" in cond.message, cond
    assert entries[bad].volume.capacity_bytes == 16 * MIB
    assert list(entries[bad].status.published_node_ids) == ["node-1"], "as node-1's index says"
    assert not entries[good].status.volume_condition.abnormal
    got = d.call("ControllerGetVolume", volume_id=bad)
    assert got.status.volume_condition.abnormal and bad in got.status.volume_condition.message
    assert capacity(d)[0] == GIB - 24 * MIB, "its bytes still count"
    warned = [l for l in d.logs().splitlines() if "volume %s is damaged" % bad in l]
    assert len(warned) == 1 and "warning" in warned[0], warned

    d.call("DeleteVolume", volume_id=bad)
    assert on_disk(d.pool, "volumes") == [good] and listdir(d.pool, "tmp") == []
    assert publish(d, good) == {"devicePath": "/dev/xvdba"}, "the name it held is free again"
    assert capacity(d)[0] == GIB - 8 * MIB
    assert "deleted volume %s, whose metadata was damaged" % bad in d.logs()
    assert [vol_key(e) for e in d.call("ListVolumes").entries] == [good]

    # Found at start: warned then, and not again when listed.
    other = create(d, "pvc-bad-2", MIB).volume_id
    damage(d.pool, other, b"")
    d.stop()
    d = ctx.daemon(pool=d.pool, name="restarted", args=["--pool-capacity", "1G"])
    d.call("ListVolumes")
    d.call("ControllerGetVolume", volume_id=other)
    warned = [l for l in d.logs().splitlines() if "volume %s is damaged" % other in l]
    assert len(warned) == 1 and "warning" in warned[0], warned
    assert capacity(d)[0] == GIB - 9 * MIB


def test_damaged_volume_with_a_loop_device_is_not_deleted(ctx):
    if not is_root():
        raise Skip("needs root (a loop device)")
    d = ctx.daemon()
    vid = create(d, "pvc-bad-staged", 8 * MIB, cap=BLOCK).volume_id
    staging = os.path.join(ctx.tmp, "staging")
    os.mkdir(staging)
    d.call("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=BLOCK)
    try:
        out = subprocess.run(["losetup", "-j", data_path(d.pool, vid)], capture_output=True,
                             text=True, check=True).stdout
        dev = out.split(":")[0]
        assert dev.startswith("/dev/loop"), out
        damage(d.pool, vid)
        e = d.expect_error(PRECONDITION, "DeleteVolume", volume_id=vid, match=dev)
        assert vid in e.details() and "unstage" in e.details(), e.details()
        assert vid in on_disk(d.pool, "volumes")
    finally:
        d.call("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    d.call("DeleteVolume", volume_id=vid)
    assert on_disk(d.pool, "volumes") == []
    assert_pool_clean(d.pool, volumes=0)


def losetup(*args):
    return subprocess.run(["losetup"] + list(args), capture_output=True, text=True,
                          check=True).stdout.strip()


def test_loop_device_made_by_hand_keeps_the_volume(ctx):
    """A loop device bound to a volume's data file by anyone (losetup here, not volplugd) is the
    kernel's word that it is in use: DeleteVolume is FAILED_PRECONDITION naming the device,
    whether the device shows all of the file or a sector of it. One bound with no capacity (an
    offset at the file's end) exposes no byte of it and does not keep it."""
    if not is_root():
        raise Skip("needs root (a loop device)")
    d = ctx.daemon()
    vid = create(d, "pvc-by-hand", 4 * MIB).volume_id
    data = data_path(d.pool, vid)
    for how in ([], ["--offset", str(4 * MIB - 512)]):
        dev = losetup("--find", "--show", *how, data)
        try:
            want = ("volume %s is staged on this machine (loop device %s is attached over its "
                    "data file): unstage it on its node first" % (vid, dev))
            e = d.expect_error(PRECONDITION, "DeleteVolume", volume_id=vid)
            assert e.details() == want, (how, e.details())
            assert os.path.getsize(data) == 4 * MIB
        finally:
            losetup("-d", dev)
    dev = losetup("--find", "--show", "--offset", str(4 * MIB), data)
    try:
        d.call("DeleteVolume", volume_id=vid)
        assert on_disk(d.pool, "volumes") == []
    finally:
        losetup("-d", dev)
    assert_pool_clean(d.pool, volumes=0)


def traced_deletes(ctx, name, n, syscalls):
    """Makes n volumes on a daemon run under strace (the syscalls named) and deletes them:
    the trace lines of the deletes alone, and the daemon."""
    d = ctx.daemon(start=False)
    trace = os.path.join(d.dir, "strace")
    argv = d.argv
    d.argv = lambda: ["strace", "-f", "-qq", "-o", trace, "-e", "trace=" + syscalls] + argv()
    d.start()
    ids = [create(d, "pvc-%s-%d" % (name, i), MIB).volume_id for i in range(n)]
    with open(trace) as f:
        start = len(f.readlines())
    for vid in ids:
        d.call("DeleteVolume", volume_id=vid)
    with open(trace) as f:
        lines = f.readlines()[start:]
    for child in open("/proc/%d/task/%d/children" % (d.proc.pid, d.proc.pid)).read().split():
        os.kill(int(child), signal.SIGTERM)
    d.proc.wait(30)
    return lines, d


def test_delete_reads_only_bound_loop_devices(ctx):
    """DeleteVolume asks the kernel which loop devices have a capacity (/proc/partitions), not
    every loop device in turn: counted with strace, it opens the sysfs files of none that is
    unbound, however many there are."""
    if not is_root() or not shutil.which("strace"):
        raise Skip("needs root and strace")
    spare = losetup("--find")  # makes a free loop device when there is none
    unbound = [n for n in os.listdir("/sys/block")
               if n.startswith("loop") and not os.path.exists("/sys/block/%s/loop" % n)]
    if not unbound:
        raise Skip("no unbound loop device (%s was taken meanwhile)" % spare)
    lines, _ = traced_deletes(ctx, "scan", 4, "open,openat,openat2")
    opened = [line for line in lines if '"/sys/block/' in line]
    mine = [line for line in opened if any('/sys/block/%s/' % n in line for n in unbound)]
    assert mine == [], "%d opens of unbound loop devices, the first: %s" % (len(mine), mine[0])
    return "%d unbound loop devices; 4 deletes opened %d sysfs files" % (len(unbound), len(opened))


def test_delete_opens_no_whole_reserve_nor_absent_records(ctx):
    """After a delete the pool's reserve is checked with one stat, not opened, when it is whole
    (nearly always); the Flexvolume records, which a daemon that never served a Flexvolume
    does not have, are looked for once a delete, not three times. Counted with strace."""
    if not is_root() or not shutil.which("strace"):
        raise Skip("needs root and strace")
    lines, d = traced_deletes(ctx, "reserve", 4, "open,openat,openat2,newfstatat,faccessat2")
    reserve = os.path.join(d.pool, "reserve")
    assert os.path.getsize(reserve) > 0, "the reserve is whole"
    opens = [line for line in lines if line.split()[1].startswith("open")]
    assert not [line for line in opens if '"reserve"' in line or reserve in line], opens
    flex = [line for line in lines if '/flex"' in line]
    assert len(flex) <= 4, "%d looks for the Flexvolume records in 4 deletes: %s" % (len(flex), flex)
    return "4 deletes: %d opens, %d looks for the Flexvolume records" % (len(opens), len(flex))


def test_delete_reads_a_volume_directory_once(ctx):
    """The look that checks a volume's directory can all be removed, before the rename, notes
    the files it holds; after the rename they are unlinked by name, not read again (two
    getdents64 a delete: the check's, till the end of the directory). Counted with strace."""
    if not is_root() or not shutil.which("strace"):
        raise Skip("needs root and strace")
    lines, d = traced_deletes(ctx, "once", 4, "getdents64,unlinkat")
    reads = [line for line in lines if line.split()[1].startswith("getdents64")]
    unlinks = [line for line in lines if line.split()[1].startswith("unlinkat")]
    assert len(reads) <= 8, "%d directory reads in 4 deletes" % len(reads)
    assert on_disk(d.pool, "volumes") == [] and listdir(d.pool, "tmp") == []
    return "4 deletes: %d directory reads, %d unlinks" % (len(reads), len(unlinks))


# Snapshots


PATTERN = [(0, b"first block"), (MIB + 7, b"\x00\xffmiddle\xff\x00"),
           (15 * MIB + 4090, b"across a block end")]


def from_snapshot(snapshot_id):
    return {"snapshot": {"snapshot_id": snapshot_id}}


def test_snapshot_restore_and_clone(ctx):
    d = ctx.daemon()
    v = create(d, "pvc-data", 16 * MIB).volume_id
    vpath = data_path(d.pool, v)
    for off, data in PATTERN:
        write_at(vpath, off, data)
    original = read_all(vpath)
    s = d.call("CreateSnapshot", name="snap-data", source_volume_id=v).snapshot
    assert s.ready_to_use and s.size_bytes == 16 * MIB and s.source_volume_id == v, s
    assert s.snapshot_id.startswith("snap-") and on_disk(d.pool, "snapshots") == [s.snapshot_id]
    assert read_all(data_path(d.pool, s.snapshot_id, "snapshots")) == original
    assert "created snapshot %s" % s.snapshot_id in d.logs()
    assert "by reflink" in d.logs() or "by sparse copy" in d.logs(), "the log says how it copied"

    write_at(vpath, 0, b"changed after")  # the snapshot is a copy, not a view
    current = read_all(vpath)

    r = create(d, "pvc-restored", 16 * MIB, volume_content_source=from_snapshot(s.snapshot_id))
    assert to_dict(r)["content_source"] == {"snapshot": {"snapshot_id": s.snapshot_id}}
    assert read_all(data_path(d.pool, r.volume_id)) == original
    assert os.stat(data_path(d.pool, r.volume_id)).st_blocks * 512 <= MIB, "holes stay holes"

    big = create(d, "pvc-restored-big", 24 * MIB, volume_content_source=from_snapshot(s.snapshot_id))
    bigdata = read_all(data_path(d.pool, big.volume_id))
    assert len(bigdata) == 24 * MIB and bigdata[:16 * MIB] == original
    assert bigdata[16 * MIB:].count(0) == 8 * MIB
    # Without a capacity_range: the default size (the snapshot is smaller).
    default = create(d, "pvc-restored-def", volume_content_source=from_snapshot(s.snapshot_id))
    assert default.capacity_bytes == GIB
    d.expect_error(OUT_OF_RANGE, "CreateVolume",
                   create_req("pvc-small", capacity_range={"required_bytes": MIB, "limit_bytes": 8 * MIB},
                              volume_content_source=from_snapshot(s.snapshot_id)),
                   match=s.snapshot_id)
    d.expect_error(NOT_FOUND, "CreateVolume",
                   create_req("pvc-nosnap", volume_content_source=from_snapshot("snap-0000000000000000")),
                   match="snap-0000000000000000")

    c = create(d, "pvc-clone", 16 * MIB, volume_content_source={"volume": {"volume_id": v}})
    assert to_dict(c)["content_source"] == {"volume": {"volume_id": v}}
    assert read_all(data_path(d.pool, c.volume_id)) == current
    assert "from volume %s by" % v in d.logs()
    d.expect_error(NOT_FOUND, "CreateVolume",
                   create_req("pvc-noclone",
                              volume_content_source={"volume": {"volume_id": "vol-0000000000000000"}}),
                   match="vol-0000000000000000")

    # A snapshot outlives its volume and still restores.
    d.call("DeleteVolume", volume_id=v)
    late = create(d, "pvc-late", 16 * MIB, volume_content_source=from_snapshot(s.snapshot_id))
    assert read_all(data_path(d.pool, late.volume_id)) == original
    assert_pool_clean(d.pool, volumes=5)


def test_snapshot_names_and_listing(ctx):
    d = ctx.daemon()
    v1, v2 = (create(d, "pvc-s%d" % i, 4 * MIB).volume_id for i in (1, 2))
    s = d.call("CreateSnapshot", name="snap-one", source_volume_id=v1)
    assert to_dict(d.call("CreateSnapshot", name="snap-one", source_volume_id=v1)) == to_dict(s)
    e = d.expect_error(EXISTS, "CreateSnapshot", name="snap-one", source_volume_id=v2, match="'snap-one'")
    assert v1 in e.details(), e.details()
    d.expect_error(INVALID, "CreateSnapshot", name="a/b", source_volume_id=v1, match="name")
    d.expect_error(INVALID, "CreateSnapshot", name="snap-x", source_volume_id="", match="source_volume_id")
    d.expect_error(NOT_FOUND, "CreateSnapshot", name="snap-x", source_volume_id="vol-0000000000000000",
                   match="vol-0000000000000000")
    d.expect_error(INVALID, "CreateSnapshot", name="snap-x", source_volume_id=v1, parameters={"iops": "1"},
                   match="'iops'")
    assert on_disk(d.pool, "snapshots") == [s.snapshot.snapshot_id]

    def snap(name, vid):
        return d.call("CreateSnapshot", name=name, source_volume_id=vid).snapshot.snapshot_id

    of_v1 = {s.snapshot.snapshot_id} | {snap("snap-v1-%d" % i, v1) for i in range(2)}
    of_v2 = {snap("snap-v2-%d" % i, v2) for i in range(3)}
    every = sorted(of_v1 | of_v2)
    got, sizes = list_all(d, "ListSnapshots", 2, snap_key)
    assert got == every and sizes == [2, 2, 2], (got, sizes)
    got, _ = list_all(d, "ListSnapshots", 2, snap_key, source_volume_id=v1)
    assert got == sorted(of_v1), got
    got, _ = list_all(d, "ListSnapshots", 0, snap_key, source_volume_id=v2)
    assert got == sorted(of_v2), got
    one = d.call("ListSnapshots", snapshot_id=every[3]).entries
    assert [snap_key(e) for e in one] == [every[3]]
    assert list(d.call("ListSnapshots", snapshot_id="snap-0000000000000000").entries) == []
    assert list(d.call("ListSnapshots", snapshot_id=every[3],
                       source_volume_id="vol-0000000000000000").entries) == []
    d.expect_error(ABORTED, "ListSnapshots", starting_token="nope", match="starting_token")
    d.expect_error(INVALID, "ListSnapshots", max_entries=-2, match="max_entries")

    d.call("DeleteSnapshot", snapshot_id=every[0])
    d.call("DeleteSnapshot", snapshot_id=every[0])  # gone already: success
    assert every[0] not in on_disk(d.pool, "snapshots")
    assert list_all(d, "ListSnapshots", 4, snap_key)[0] == every[1:]
    assert_pool_clean(d.pool, volumes=2)


def test_group_snapshots(ctx):
    d = ctx.daemon()
    caps = d.call("GroupControllerGetCapabilities").capabilities
    assert [c.rpc.type for c in caps] == [1], "CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT"
    v1, v2 = (create(d, "pvc-g%d" % i, 4 * MIB).volume_id for i in (1, 2))
    write_at(data_path(d.pool, v1), 100, b"one")
    write_at(data_path(d.pool, v2), 200, b"two")
    g = d.call("CreateVolumeGroupSnapshot", name="group-a", source_volume_ids=[v1, v2]).group_snapshot
    assert g.group_snapshot_id.startswith("group-") and g.ready_to_use
    members = {s.source_volume_id: s.snapshot_id for s in g.snapshots}
    assert sorted(members) == sorted([v1, v2]), g
    assert all(s.group_snapshot_id == g.group_snapshot_id for s in g.snapshots)
    assert read_all(data_path(d.pool, members[v1], "snapshots"))[100:103] == b"one"
    assert read_all(data_path(d.pool, members[v2], "snapshots"))[200:203] == b"two"
    assert on_disk(d.pool, "groups") == [g.group_snapshot_id]
    assert sorted(on_disk(d.pool, "snapshots")) == sorted(members.values())

    again = d.call("CreateVolumeGroupSnapshot", name="group-a", source_volume_ids=[v1, v2]).group_snapshot
    assert again.group_snapshot_id == g.group_snapshot_id
    assert sorted(s.snapshot_id for s in again.snapshots) == sorted(members.values())
    d.expect_error(EXISTS, "CreateVolumeGroupSnapshot", name="group-a", source_volume_ids=[v1],
                   match="'group-a'")
    d.expect_error(NOT_FOUND, "CreateVolumeGroupSnapshot", name="group-b",
                   source_volume_ids=["vol-0000000000000000"], match="vol-0000000000000000")
    d.expect_error(INVALID, "CreateVolumeGroupSnapshot", name="group-c", source_volume_ids=[v1],
                   parameters={"location": "store"},
                   match="location: store: the pool takes a group snapshot beside its volumes")
    assert on_disk(d.pool, "groups") == [g.group_snapshot_id]
    got = d.call("GetVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id).group_snapshot
    assert sorted(s.snapshot_id for s in got.snapshots) == sorted(members.values())
    listed = {e.snapshot.snapshot_id: e.snapshot.group_snapshot_id for e in d.call("ListSnapshots").entries}
    assert listed == {sid: g.group_snapshot_id for sid in members.values()}, listed

    e = d.expect_error(PRECONDITION, "DeleteSnapshot", snapshot_id=members[v1], match=members[v1])
    assert g.group_snapshot_id in e.details(), e.details()
    assert members[v1] in on_disk(d.pool, "snapshots")
    d.expect_error(INVALID, "DeleteVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id,
                   snapshot_ids=[members[v1]], match="snapshot_ids")

    d.call("DeleteVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id,
           snapshot_ids=list(members.values()))
    assert on_disk(d.pool, "groups") == [] and on_disk(d.pool, "snapshots") == []
    d.expect_error(NOT_FOUND, "GetVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id,
                   match=g.group_snapshot_id)
    d.call("DeleteVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id)
    assert_pool_clean(d.pool, volumes=2)


# Expand and modify


def concurrently(*calls):
    """Starts every (method, request) at once on its own thread; returns their results."""
    barrier = threading.Barrier(len(calls))
    results = [None] * len(calls)

    def one(i, d, method, req):
        barrier.wait()
        results[i] = attempt(d, method, req)

    threads = [threading.Thread(target=one, args=(i,) + c) for i, c in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return results


def test_expand_and_modify_are_coalesced(ctx):
    d = ctx.daemon(args=["--modify-coalesce-window", "1s"])
    v = create(d, "pvc-grow", 10 * GIB).volume_id  # 10 GiB: gp3 takes up to 5000 IOPS
    assert meta(d.pool, v)["params"] == {"type": "gp3", "iops": "3000", "throughput": "125"}
    start = time.monotonic()
    (ce, expand), (cm, modify) = concurrently(
        (d, "ControllerExpandVolume", {"volume_id": v, "capacity_range": {"required_bytes": 12 * GIB}}),
        (d, "ControllerModifyVolume", {"volume_id": v,
                                       "mutable_parameters": {"iops": "4000", "throughput": "250"}}))
    assert (ce, cm) == (OK, OK), (expand, modify)
    assert time.monotonic() - start >= 0.9, "the window was waited out"
    assert expand.capacity_bytes == 12 * GIB and expand.node_expansion_required, expand
    applied = [l for l in d.logs().splitlines() if "applied" in l and v in l]
    assert len(applied) == 1 and "applied 2 merged request(s)" in applied[0], applied
    m = meta(d.pool, v)
    assert m["size"] == 12 * GIB and m["params"] == {"type": "gp3", "iops": "4000", "throughput": "250"}, m
    assert os.stat(data_path(d.pool, v)).st_size == 12 * GIB
    assert d.call("ControllerGetVolume", volume_id=v).volume.capacity_bytes == 12 * GIB

    # Alone, a type change; type gp2 takes no iops or throughput.
    d.call("ControllerModifyVolume", volume_id=v, mutable_parameters={"type": "gp2"})
    assert meta(d.pool, v)["params"] == {"type": "gp2"}, meta(d.pool, v)
    d.call("ControllerModifyVolume", volume_id=v,
           mutable_parameters={"type": "gp3", "tagSpecification_1": "team=db"})
    assert meta(d.pool, v)["params"]["type"] == "gp3" and "team=db" in meta(d.pool, v)["params"].values()
    # Raw block too needs the node: its loop device keeps the old size until NodeExpandVolume.
    b = create(d, "pvc-block", GIB, cap=BLOCK).volume_id
    r = d.call("ControllerExpandVolume", volume_id=b, capacity_range={"required_bytes": GIB + MIB},
               volume_capability=BLOCK)
    assert r.capacity_bytes == GIB + MIB and r.node_expansion_required, r
    # An expand that grows nothing is fine and changes nothing.
    r = d.call("ControllerExpandVolume", volume_id=b, capacity_range={"required_bytes": GIB})
    assert r.capacity_bytes == GIB + MIB and os.stat(data_path(d.pool, b)).st_size == GIB + MIB
    assert_pool_clean(d.pool, volumes=2)


def test_conflicting_changes_fail_alone(ctx):
    d = ctx.daemon(args=["--modify-coalesce-window", "1s", "--pool-capacity", "40G"])
    v = create(d, "pvc-conflict", 10 * GIB).volume_id
    results = concurrently(
        (d, "ControllerExpandVolume", {"volume_id": v, "capacity_range": {"required_bytes": 11 * GIB}}),
        (d, "ControllerExpandVolume", {"volume_id": v, "capacity_range": {"required_bytes": 12 * GIB}}))
    codes = sorted(c.value[0] for c, _ in results)
    assert codes == [0, 10], results  # OK and ABORTED: the loser's request is fine, retry it
    winner = [r for c, r in results if c == OK][0]
    loser = [r for c, r in results if c != OK][0]
    assert "conflicts" in loser and "capacity_range" in loser, loser
    assert meta(d.pool, v)["size"] == winner.capacity_bytes
    assert os.stat(data_path(d.pool, v)).st_size == winner.capacity_bytes

    results = concurrently(
        (d, "ControllerModifyVolume", {"volume_id": v, "mutable_parameters": {"iops": "4000"}}),
        (d, "ControllerModifyVolume", {"volume_id": v, "mutable_parameters": {"iops": "5000"}}))
    assert sorted(c.value[0] for c, _ in results) == [0, 10], results
    loser = [r for c, r in results if c != OK][0]
    assert "iops" in loser and "conflicts" in loser, loser

    # Never a reply beyond limit_bytes: a volume larger than the limit is out of range.
    size = meta(d.pool, v)["size"]
    d.expect_error(grpc.StatusCode.OUT_OF_RANGE, "ControllerExpandVolume", volume_id=v,
                   capacity_range={"required_bytes": GIB, "limit_bytes": size - MIB},
                   match="capacity_range.limit_bytes")
    assert meta(d.pool, v)["size"] == size

    for key in ("blockSize", "csi.storage.k8s.io/fstype", "iopsPerGB"):
        d.expect_error(INVALID, "ControllerModifyVolume", volume_id=v, mutable_parameters={key: "4096"},
                       match="'%s'" % key)
    d.expect_error(INVALID, "ControllerModifyVolume", volume_id=v, mutable_parameters={"iops": "99999999"},
                   match="iops")
    d.expect_error(NOT_FOUND, "ControllerModifyVolume", volume_id="vol-0000000000000000",
                   mutable_parameters={"iops": "4000"}, match="vol-0000000000000000")
    d.expect_error(NOT_FOUND, "ControllerExpandVolume", volume_id="vol-0000000000000000",
                   capacity_range={"required_bytes": GIB}, match="vol-0000000000000000")
    d.expect_error(EXHAUSTED, "ControllerExpandVolume", volume_id=v,
                   capacity_range={"required_bytes": 50 * GIB}, match=v)
    assert meta(d.pool, v)["size"] == winner.capacity_bytes


# Validate, GetVolume, capabilities


def test_validate_get_volume_and_capabilities(ctx):
    d = ctx.daemon()
    v = create(d, "pvc-cond", 8 * MIB).volume_id
    r = d.call("ValidateVolumeCapabilities", volume_id=v, volume_capabilities=[SNW, BLOCK],
               volume_context={"k": "v"})
    assert to_dict(r)["confirmed"] == {"volume_capabilities": [SNW, BLOCK], "volume_context": {"k": "v"}}, r
    bad = d.call("ValidateVolumeCapabilities", volume_id=v, volume_capabilities=[
        {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {"fs_type": "ntfs"}}])
    assert not r.message and not bad.HasField("confirmed") and "fs_type" in bad.message, bad
    d.expect_error(NOT_FOUND, "ValidateVolumeCapabilities", volume_id="vol-0000000000000000",
                   volume_capabilities=[SNW], match="vol-0000000000000000")
    d.expect_error(INVALID, "ValidateVolumeCapabilities", volume_id=v, match="volume_capabilities")

    status = d.call("ControllerGetVolume", volume_id=v).status
    assert not status.volume_condition.abnormal, status
    os.truncate(data_path(d.pool, v), 4096)
    cond = d.call("ControllerGetVolume", volume_id=v).status.volume_condition
    assert cond.abnormal and "4096 bytes" in cond.message and v in cond.message, cond
    listed = d.call("ListVolumes").entries[0].status.volume_condition
    assert listed.abnormal, listed
    rc, out = pool_check(d.pool)
    assert rc == 1 and "volumes/%s: data file is 4096 bytes" % local_id(v) in out, out
    os.unlink(data_path(d.pool, v))
    cond = d.call("ControllerGetVolume", volume_id=v).status.volume_condition
    assert cond.abnormal and "missing" in cond.message, cond

    caps = {c.rpc.type for c in d.call("ControllerGetCapabilities").capabilities}
    rpc = csi_pb2.ControllerServiceCapability.RPC
    want = {rpc.CREATE_DELETE_VOLUME, rpc.PUBLISH_UNPUBLISH_VOLUME, rpc.LIST_VOLUMES, rpc.GET_CAPACITY,
            rpc.CREATE_DELETE_SNAPSHOT, rpc.LIST_SNAPSHOTS, rpc.CLONE_VOLUME, rpc.PUBLISH_READONLY,
            rpc.EXPAND_VOLUME, rpc.LIST_VOLUMES_PUBLISHED_NODES, rpc.VOLUME_CONDITION, rpc.GET_VOLUME,
            rpc.SINGLE_NODE_MULTI_WRITER, rpc.MODIFY_VOLUME}
    assert caps == want, caps ^ want


def chattr(flag, path):
    """chattr +i / -i: False when this filesystem (or this user) cannot."""
    return subprocess.run(["chattr", flag, path], capture_output=True).returncode == 0


def test_delete_that_cannot_finish_says_so(ctx):
    """A directory in place of a volume's data or meta.json is the pool's leftover: the volume
    is deleted and nothing stays in tmp/ (a symlink in it is removed, never followed). An
    immutable data or meta.json cannot be removed: DeleteVolume is FAILED_PRECONDITION naming
    the file and what to do, and the volume stays whole; once mutable, it deletes. The log
    says only what happened; pool check finds nothing left."""
    if not is_root():
        raise Skip("needs root (chattr)")
    d = ctx.daemon()
    outside = os.path.join(ctx.tmp, "precious")
    with open(outside, "w") as f:
        f.write("not the pool's\n")
    vols = {how: create(d, "pvc-" + how, MIB).volume_id
            for how in ("data-dir", "meta-dir", "data-immutable", "meta-immutable")}
    vdir = {how: os.path.join(d.pool, "volumes", local_id(v)) for how, v in vols.items()}
    for name in ("data", "meta.json"):
        path = os.path.join(vdir[name.split(".")[0] + "-dir"], name)
        os.unlink(path)
        os.makedirs(os.path.join(path, "sub"))
        with open(os.path.join(path, "sub", "file"), "w") as f:
            f.write("x")
        os.symlink(outside, os.path.join(path, "link"))
    if not chattr("+i", os.path.join(vdir["data-immutable"], "data")):
        raise Skip("chattr +i does not work on %s" % ctx.tmp)
    ctx.cleanups.append(lambda: [chattr("-i", os.path.join(vdir[h], n)) for h, n in
                                 (("data-immutable", "data"), ("meta-immutable", "meta.json"))])
    assert chattr("+i", os.path.join(vdir["meta-immutable"], "meta.json"))

    for how in ("data-dir", "meta-dir"):
        d.call("DeleteVolume", volume_id=vols[how])
        assert not os.path.exists(vdir[how]), how
    assert listdir(d.pool, "tmp") == [], "nothing left behind"
    with open(outside) as f:
        assert f.read() == "not the pool's\n", "the symlink was not followed"
    for how, name in (("data-immutable", "data"), ("meta-immutable", "meta.json")):
        e = d.expect_error(PRECONDITION, "DeleteVolume", volume_id=vols[how])
        want = ("volume %s cannot be deleted (nothing was removed): pool %s: volumes/%s/%s is "
                "immutable (chattr +i): make it mutable (chattr -i) or move it out of the pool, "
                "then delete it again" % (vols[how], d.pool, local_id(vols[how]), name))
        assert e.details() == want, (e.details(), want)
        assert sorted(os.listdir(vdir[how])) == ["data", "meta.json", "node.lock"], how
    assert sorted(vol_key(e) for e in d.call("ListVolumes").entries) == sorted(
        [vols["data-immutable"], vols["meta-immutable"]]), "both still there, listed"
    assert listdir(d.pool, "tmp") == [], "a refused delete leaves nothing in tmp/"
    logs = d.logs()
    for how in ("data-immutable", "meta-immutable"):
        assert "deleted volume %s" % vols[how] not in logs, logs
    for how in ("data-dir", "meta-dir"):
        assert "deleted volume %s" % vols[how] in logs, logs
    assert "warning" not in logs, logs

    assert chattr("-i", os.path.join(vdir["data-immutable"], "data"))
    assert chattr("-i", os.path.join(vdir["meta-immutable"], "meta.json"))
    for how in ("data-immutable", "meta-immutable"):
        d.call("DeleteVolume", volume_id=vols[how])
    assert_pool_clean(d.pool, volumes=0)


def test_leftovers_that_cannot_be_removed_are_counted_honestly(ctx):
    """What an interrupted delete left in tmp/: a directory in place of its data file is
    removed by the next start, an immutable file is not, and every report says so: pool check
    promises removal only of what can be removed, the start warns naming the file and what to
    do, pool check --repair counts it a problem and not repaired; once mutable it goes."""
    if not is_root():
        raise Skip("needs root (chattr)")
    d = ctx.daemon()
    d.stop()
    tmp = os.path.join(d.pool, "tmp")
    removable = os.path.join(tmp, "del-vol-00000000000000aa.0000beef")
    stuck = os.path.join(tmp, "del-vol-00000000000000bb.0000cafe")
    os.makedirs(os.path.join(removable, "data", "lost+found"))
    with open(os.path.join(removable, "meta.json"), "w") as f:
        f.write("{}")
    os.makedirs(stuck)
    for name in ("data", "meta.json"):
        with open(os.path.join(stuck, name), "w") as f:
            f.write("x")
    if not chattr("+i", os.path.join(stuck, "data")):
        raise Skip("chattr +i does not work on %s" % ctx.tmp)
    ctx.cleanups.append(lambda: chattr("-i", os.path.join(stuck, "data")))
    why = ("tmp/%s/data is immutable (chattr +i): make it mutable (chattr -i) or move it out "
           "of the pool" % os.path.basename(stuck))

    rc, out = pool_check(d.pool)
    lines = out.strip().splitlines()
    assert rc == 1 and lines[-1].endswith(", 2 problems"), out
    assert "tmp/%s: left by an interrupted operation (removed when volplugd next opens the pool)" % (
        os.path.basename(removable)) in lines, out
    assert "tmp/%s: left by an interrupted operation, and it cannot be removed: %s, then repair" % (
        os.path.basename(stuck), why) in lines, out

    d.start()
    assert sorted(os.listdir(tmp)) == [os.path.basename(stuck)], "the directory went, not the immutable"
    warned = [l for l in d.logs().splitlines() if "warning" in l and "tmp/del-" in l]
    assert len(warned) == 2, warned
    assert any(os.path.basename(removable) in l and ": removed" in l for l in warned), warned
    assert any(why in l for l in warned), warned
    p = d.ctl("pool", "check", "--repair", d.pool, check=False)
    last = p.stdout.strip().splitlines()[-1]
    assert p.returncode == 1 and last.endswith(", 1 problems, 0 repaired"), p.stdout
    assert why in p.stdout, p.stdout

    assert chattr("-i", os.path.join(stuck, "data"))
    p = d.ctl("pool", "check", "--repair", d.pool, check=False)
    assert p.returncode == 0 and p.stdout.strip().splitlines()[-1].endswith(
        ", 1 problems, 1 repaired"), p.stdout
    assert_pool_clean(d.pool, volumes=0)


def test_delete_that_stops_half_way_says_what_is_left(ctx):
    """A file made immutable after the delete checked the volume (between the check and the
    removal): the volume is gone and DeleteVolume answers OK, and the log warns naming what
    stays in tmp/ and what to do, rather than "deleted" alone; pool check counts it until a
    repair can remove it."""
    if not is_root():
        raise Skip("needs root (chattr)")
    d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "pool-delete-after-check=sleep(1s)"})
    vid = create(d, "pvc-half", MIB).volume_id
    data = data_path(d.pool, vid)
    t, result = in_background(d.call, "DeleteVolume", volume_id=vid)
    time.sleep(0.3)  # checked: now waiting at the failpoint
    if not chattr("+i", data):
        t.join()
        raise Skip("chattr +i does not work on %s" % ctx.tmp)
    t.join()
    assert "error" not in result, result["error"]
    left = listdir(d.pool, "tmp")
    assert len(left) == 1 and left[0].startswith("del-" + local_id(vid)), left
    ctx.cleanups.append(lambda: chattr("-i", os.path.join(d.pool, "tmp", left[0], "data")))
    why = ("tmp/%s/data is immutable (chattr +i): make it mutable (chattr -i) or move it out of "
           "the pool" % left[0])
    warned = [l for l in d.logs().splitlines() if "warning" in l and vid in l]
    assert len(warned) == 1 and ("volume %s: its files could not all be removed and stay in pool "
                                 "%s: %s, then run volplugctl pool check --repair %s" % (
                                     vid, d.pool, why, d.pool)) in warned[0], warned
    d.expect_error(NOT_FOUND, "ControllerGetVolume", volume_id=vid)
    rc, out = pool_check(d.pool)
    assert rc == 1 and why in out and out.strip().endswith(", 1 problems"), out
    assert chattr("-i", os.path.join(d.pool, "tmp", left[0], "data"))
    p = d.ctl("pool", "check", "--repair", d.pool, check=False)
    assert p.returncode == 0 and p.stdout.strip().endswith(", 1 problems, 1 repaired"), p.stdout
    assert_pool_clean(d.pool, volumes=0)


def test_a_lost_pool_is_not_made_again_quietly(ctx):
    """The first start makes the pool and records it beside it; a start that finds the
    directory absent or empty where the record says a pool was refuses, saying so, and changes
    nothing; --pool-init makes a new, empty pool there. A directory that holds files but no
    pool is not made one by --pool-init."""
    d = ctx.daemon()
    vid = create(d, "pvc-lost", MIB).volume_id
    d.stop()
    record = os.path.join(os.path.dirname(d.pool), "." + os.path.basename(d.pool) + ".volplug")
    assert os.path.isfile(record), os.listdir(os.path.dirname(d.pool))
    subprocess.run(["rm", "-rf", d.pool], check=True)
    for state in ("absent", "empty"):
        if state == "empty":
            os.mkdir(d.pool)
        d.start(wait=False)
        assert d.proc.wait(10) == 2, state
        want = ("volplugd: --pool %s: the pool is gone: the directory is absent or holds no pool, "
                "but %s says volplugd made a pool there. Its volumes are lost, or the filesystem "
                "holding them is not mounted: mount it back; to start over with a new, empty pool "
                "there, start volplugd with --pool-init" % (d.pool, record))
        assert want in d.logs(), d.logs()
        assert (os.listdir(d.pool) == []) if state == "empty" else not os.path.exists(d.pool)
    with open(os.path.join(d.pool, "notes.txt"), "w") as f:
        f.write("someone's\n")
    d.args += ["--pool-init"]
    d.start(wait=False)
    assert d.proc.wait(10) == 2
    assert ("--pool %s --pool-init: it holds files but no pool: a new pool is made in an absent "
            "or empty directory only" % d.pool) in d.logs(), d.logs()
    assert os.listdir(d.pool) == ["notes.txt"], "nothing made beside the files"
    os.unlink(os.path.join(d.pool, "notes.txt"))
    d.start()
    assert list(d.call("ListVolumes").entries) == []
    d.expect_error(NOT_FOUND, "ControllerGetVolume", volume_id=vid)
    d.stop()
    d.args.remove("--pool-init")
    d.start()  # a pool again: opened as any
    assert create(d, "pvc-lost", MIB).volume_id == vid, "the name made again, in the new pool"


if __name__ == "__main__":
    run([test_create_delete_lifecycle, test_create_is_idempotent_other_arguments_already_exist,
         test_bad_names_ids_and_parameters, test_strings_not_utf8_and_oversized_maps,
         test_capacity_range, test_topology, test_pool_capacity,
         test_64_concurrent_creates_of_one_name, test_second_call_in_flight_is_aborted_at_once,
         test_client_deadline_then_retry_finds_the_volume, test_list_volumes_pagination,
         test_kill9_during_create, test_kill9_during_snapshot, test_kill9_during_delete,
         test_kill9_at_each_sync_point, test_blank_volume_a_crash_left_unsynced_is_made_again,
         test_create_makes_two_fsyncs_and_delete_one,
         test_publish_device_names_and_idempotency, test_publish_only_to_the_volumes_node,
         test_attach_limit, test_device_names_survive_a_restart, test_snapshot_restore_and_clone,
         test_snapshot_names_and_listing, test_group_snapshots, test_expand_and_modify_are_coalesced,
         test_conflicting_changes_fail_alone, test_validate_get_volume_and_capabilities,
         test_two_processes_delete_never_races_publish, test_two_processes_share_the_capacity,
         test_two_processes_share_device_names_and_the_limit,
         test_kill9_during_expand_at_the_meta_rename,
         test_damaged_volume_is_listed_counted_and_deletable,
         test_damaged_volume_with_a_loop_device_is_not_deleted,
         test_loop_device_made_by_hand_keeps_the_volume, test_delete_reads_only_bound_loop_devices,
         test_delete_opens_no_whole_reserve_nor_absent_records,
         test_delete_reads_a_volume_directory_once,
         test_delete_that_cannot_finish_says_so,
         test_leftovers_that_cannot_be_removed_are_counted_honestly,
         test_delete_that_stops_half_way_says_what_is_left,
         test_a_lost_pool_is_not_made_again_quietly])
