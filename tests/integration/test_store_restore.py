# SPDX-License-Identifier: Apache-2.0
"""Restore anywhere (issue 24, point 3): CreateVolume from a snapshot in the object store, on
the node that took it and on any other, against tests/s3sim (always) and moto's S3 (when it is
installed). Each test checks what a user sees: the reply, the gRPC code and the message naming
the chunk, the volume's bytes (sha256 of the data files or of the loop devices) and holes
(st_blocks), the pool on disk (volumes/, tmp/, `volplugctl pool check`) and ListVolumes."""

import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request

from harness import VOLPLUGCTL, Skip, local_id, run, wait_for, in_background

import grpc  # noqa: E402

import csi_pb2  # noqa: F401,E402  (found through the path harness sets)

from test_node import Vol, fs_bytes, mount_cap, node_test, safely

MIB = 1 << 20
SOURCE = os.environ.get("VOLPLUG_SOURCE_ROOT", ".")
KEY, SECRET = "AKIDRESTORE", "restore-secret"
BUCKET, PREFIX = "snaps", "cluster-1"
NODES = ["node-1", "node-2", "node-3"]
SNW = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {"fs_type": "ext4"}}
BLOCK = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "block": {}}


class S3:
    """An S3 peer: tests/s3sim (faults on demand) or moto's (moto-peer.py)."""

    def __init__(self, ctx, moto=False):
        script = "moto-peer.py" if moto else "s3sim.py"
        env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
        self.proc = subprocess.Popen([sys.executable, os.path.join(SOURCE, "tests/s3sim", script)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        ctx.cleanups.append(self.stop)
        line = self.proc.stdout.readline().split()
        if not line or line[0] == "SKIP":
            raise Skip(" ".join(line[1:]) or "%s did not start" % script)
        self.port = int(line[1])
        self.url = "http://127.0.0.1:%d" % self.port
        self.moto = moto
        if moto:
            self.key, self.secret, self.bucket = line[3], line[5], "volplug-snaps"
        else:
            self.key, self.secret, self.bucket = KEY, SECRET, BUCKET
            self.control("reset", {"buckets": [BUCKET], "keys": {KEY: SECRET}})

    def control(self, what, body=None):
        req = urllib.request.Request(self.url + "/_s3sim/" + what, method="GET" if body is None else "POST",
                                     data=None if body is None else json.dumps(body).encode())
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(req, timeout=10) as r:
            text = r.read()
        return json.loads(text) if text else None

    def stats(self):
        return self.control("stats")

    def chunks(self):
        return sorted(k for k in self.stats()["objects"] if "/chunks/" in k)

    def chunk_gets(self):
        return self.stats()["kinds"].get("GET chunks", 0)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)

    def args(self):
        return ["--store-endpoint", self.url, "--store-bucket", self.bucket, "--store-prefix", PREFIX,
                "--store-region", "us-east-1", "--store-path-style"]

    def env(self):
        return {"AWS_ACCESS_KEY_ID": self.key, "AWS_SECRET_ACCESS_KEY": self.secret,
                "AWS_REGION": "us-east-1"}


def node(ctx, s3, node_id, args=(), pool=None):
    return ctx.daemon(node_id=node_id, name=node_id, pool=pool,
                      args=["--distributed"] + s3.args() + list(args), env=s3.env())


def data_of(d, volume_id):
    return os.path.join(d.pool, "volumes", local_id(volume_id), "data")


def sha_file(path, length=None):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        left = length if length is not None else 1 << 62
        while left > 0:
            b = f.read(min(MIB, left))
            if not b:
                break
            h.update(b)
            left -= len(b)
    return h.hexdigest()


def write_at(path, offsets, size=MIB):
    """Random bytes at each offset of a file (the rest stays holes)."""
    with open(path, "r+b") as f:
        for off in offsets:
            f.seek(off)
            f.write(os.urandom(size))
        f.flush()
        os.fsync(f.fileno())


def store_snapshot(d, volume_id, name, timeout=60):
    """A snapshot of a volume in the store (VolumeSnapshotClass location: store), once it is
    ready (its manifest up). Returns its ID."""
    req = dict(name=name, source_volume_id=volume_id, parameters={"location": "store"})
    snap = d.call("CreateSnapshot", req).snapshot
    assert snap.snapshot_id.startswith("store:"), snap
    wait_for(lambda: d.call("CreateSnapshot", req).snapshot.ready_to_use, timeout=timeout,
             what="snapshot %s in the store" % snap.snapshot_id)
    return snap.snapshot_id


def create(d, name, size, snapshot, cap=None, timeout=60, params=None):
    return d.call("CreateVolume", name=name, capacity_range={"required_bytes": size},
                  volume_capabilities=[cap or BLOCK], parameters=params or {},
                  volume_content_source={"snapshot": {"snapshot_id": snapshot}},
                  timeout=timeout).volume


def nothing_left(d, before=None):
    """No volume, no staging directory, the pool check clean, ListVolumes as before."""
    assert os.listdir(os.path.join(d.pool, "volumes")) == (before or []), os.listdir(os.path.join(d.pool, "volumes"))
    assert os.listdir(os.path.join(d.pool, "tmp")) == [], os.listdir(os.path.join(d.pool, "tmp"))
    listed = [e.volume.volume_id for e in d.call("ListVolumes").entries]
    assert len(listed) == len(before or []), listed
    check = subprocess.run([VOLPLUGCTL, "pool", "check", d.pool], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr


def source_volume(ctx, s3, d, name="src", size=64 * MIB, offsets=(0, 20 * MIB, 41 * MIB), cap=None,
                  params=None):
    v = d.call("CreateVolume", name=name, capacity_range={"required_bytes": size},
               volume_capabilities=[cap or BLOCK], parameters=params or {}).volume
    write_at(data_of(d, v.volume_id), offsets)
    return v


def restore_here_and_elsewhere(ctx, moto):
    s3 = S3(ctx, moto)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    src = source_volume(ctx, s3, d1)
    snap = store_snapshot(d1, src.volume_id, "s1")
    want = sha_file(data_of(d1, src.volume_id))
    here = create(d1, "here", 64 * MIB, snap)
    there = create(d2, "there", 80 * MIB, snap)  # larger: the file grows, the rest zeros
    assert here.volume_id.endswith(".node-1") and there.volume_id.endswith(".node-2"), (here, there)
    assert there.capacity_bytes == 80 * MIB, there
    assert there.content_source.snapshot.snapshot_id == snap, there
    assert dict(there.accessible_topology[0].segments)["topology.volplug.io/node"] == "node-2", there
    assert sha_file(data_of(d1, here.volume_id)) == want
    assert sha_file(data_of(d2, there.volume_id), 64 * MIB) == want
    assert os.path.getsize(data_of(d2, there.volume_id)) == 80 * MIB
    with open(data_of(d2, there.volume_id), "rb") as f:
        f.seek(64 * MIB)
        assert f.read() == bytes(16 * MIB)
    # Holes stay holes: 3 MiB written, 3 MiB (and some metadata blocks) allocated.
    for path in (data_of(d1, here.volume_id), data_of(d2, there.volume_id)):
        assert os.stat(path).st_blocks * 512 <= 3 * MIB + 64 * 1024, (path, os.stat(path).st_blocks)
    # The same call again answers the same volume; a local snapshot of node-1 stays node-1's.
    assert create(d2, "there", 80 * MIB, snap).volume_id == there.volume_id
    local = d1.call("CreateSnapshot", name="local", source_volume_id=src.volume_id).snapshot
    e = d2.expect_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "CreateVolume", name="l", capacity_range={"required_bytes": 64 * MIB},
                        volume_capabilities=[BLOCK], volume_content_source={"snapshot": {"snapshot_id": local.snapshot_id}})
    assert "node-1" in e.details() and "node-2" in e.details(), e.details()
    return "moto" if moto else "s3sim: %d chunks" % len(s3.chunks())


def test_restore_on_this_node_and_another(ctx):
    """A store snapshot restores on the node that took it and on another, bytes equal (sha256),
    holes kept (st_blocks), a larger volume grown with zeros, topology the restoring node's."""
    return restore_here_and_elsewhere(ctx, False)


def test_restore_with_motos_s3(ctx):
    """The same against moto's S3, signatures checked (skipped, saying why, without moto)."""
    return restore_here_and_elsewhere(ctx, True)


@node_test
def test_three_nodes(ctx):
    """A volume written on node-1 (its loop device, mkfs.ext4, files), snapshotted to the
    store, restored on node-2 and node-3: the three devices' bytes equal (the restored ones
    before their first mount, which writes the superblock), then staged there: the files
    there, the filesystem grown to the larger volume on node-3."""
    s3 = S3(ctx)
    ds = [node(ctx, s3, n) for n in NODES]
    src = Vol(ctx, ds[0], "data", 64 * MIB, cap=mount_cap("ext4"), controller_publish=False)
    src.stage()
    files = {}
    for i in range(5):
        body = os.urandom(1 << 18)
        with open(os.path.join(src.staging, "f%d" % i), "wb") as f:
            f.write(body)
        files["f%d" % i] = hashlib.sha256(body).hexdigest()
    src.unstage()
    snap = store_snapshot(ds[0], src.id, "three")
    shas = [sha_file(src.data)]
    vols = []
    try:
        for d, size in zip(ds[1:], (64 * MIB, 96 * MIB)):
            v = Vol(ctx, d, "copy", size, cap=mount_cap("ext4"), controller_publish=False,
                    source={"snapshot": {"snapshot_id": snap}})
            vols.append(v)
            shas.append(sha_file(v.data, 64 * MIB))
            v.stage()
            assert fs_bytes(v.staging) > (80 * MIB if size > 64 * MIB else 50 * MIB), fs_bytes(v.staging)
            for name, want in files.items():
                with open(os.path.join(v.staging, name), "rb") as f:
                    assert hashlib.sha256(f.read()).hexdigest() == want, (d.node_id, name)
            v.unstage()
    finally:
        safely(*[v.unstage for v in vols])
    assert len(set(shas)) == 1, shas
    return "3 devices of 64 MiB equal"


def damaged(ctx, how):
    s3 = S3(ctx)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    src = source_volume(ctx, s3, d1)
    snap = store_snapshot(d1, src.volume_id, "dmg")
    key = s3.chunks()[1].split("/", 1)[1]  # stats name objects bucket/key
    chunk = key.rsplit("/", 1)[1]
    if how == "damaged":
        s3.control("put", {"bucket": BUCKET, "key": key, "body_hex": os.urandom(64).hex()})
    else:
        s3.control("faults", [{"method": "GET", "key": chunk, "status": 404, "code": "NoSuchKey"}])
    provisioned = d2.ctl_json("pool", "check", d2.pool)["provisioned_bytes"]
    e = d2.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateVolume", name="r", capacity_range={"required_bytes": 64 * MIB},
                        volume_capabilities=[BLOCK], volume_content_source={"snapshot": {"snapshot_id": snap}})
    assert e.details().startswith("volume_content_source: snapshot %s: chunk %s (offset " % (snap, chunk)), e.details()
    assert how in e.details(), e.details()
    nothing_left(d2)
    assert d2.ctl_json("pool", "check", d2.pool)["provisioned_bytes"] == provisioned
    return e.details()[:120]


def test_damaged_chunk_leaves_nothing(ctx):
    """A chunk whose bytes do not match its hash: FAILED_PRECONDITION naming it and its offset,
    no volume, no staging left, the space given back, ListVolumes empty, pool check clean."""
    return damaged(ctx, "damaged")


def test_missing_chunk_leaves_nothing(ctx):
    """A chunk the store lacks: the same."""
    return damaged(ctx, "missing")


def test_slow_store_deadline_then_aborted_then_volume(ctx):
    """A store slower than the call's deadline: DEADLINE_EXCEEDED, the restore goes on, a retry
    meanwhile is ABORTED naming the restore (a DeleteVolume of its ID too), the retry after it
    is the volume, bytes equal."""
    s3 = S3(ctx)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    src = source_volume(ctx, s3, d1)
    snap = store_snapshot(d1, src.volume_id, "slow")
    # The first chunk comes at once, the others late: the ABORTED message shows the progress.
    s3.control("faults", [{"method": "GET", "key": "chunks/", "times": 1},
                          {"method": "GET", "key": "chunks/", "delay": 2.0}])
    req = dict(name="slow", capacity_range={"required_bytes": 64 * MIB}, volume_capabilities=[BLOCK],
               volume_content_source={"snapshot": {"snapshot_id": snap}})
    try:
        d2.call("CreateVolume", req, timeout=0.5)
        raise AssertionError("want DEADLINE_EXCEEDED")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    e = d2.expect_error(grpc.StatusCode.ABORTED, "CreateVolume", req)
    assert "being restored from snapshot " + snap in e.details(), e.details()
    assert "1 of 3 chunks, 4.0 of 12.0 MiB" in e.details(), e.details()
    # Its volume is not there yet, but DeleteVolume does not say it is gone (it would be back).
    vid = e.details().split()[1]
    assert vid.endswith(".node-2"), e.details()
    d2.expect_error(grpc.StatusCode.ABORTED, "DeleteVolume", volume_id=vid, match="being restored")
    v = wait_for(lambda: ok_or_none(d2, req), timeout=30, what="the restore")
    assert v.volume_id == vid, v
    assert sha_file(data_of(d2, v.volume_id)) == sha_file(data_of(d1, src.volume_id))
    return "ABORTED: " + e.details()[:80]


def ok_or_none(d, req):
    try:
        return d.call("CreateVolume", req).volume
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.ABORTED, e
        time.sleep(0.2)
        return None


def test_kill9_mid_restore_leaves_nothing(ctx):
    """volplugd killed mid-restore: after the restart nothing of the volume is visible (no
    volume, tmp/ empty, pool check clean, ListVolumes empty), and the retry restores it."""
    s3 = S3(ctx)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    src = source_volume(ctx, s3, d1)
    snap = store_snapshot(d1, src.volume_id, "kill")
    s3.control("faults", [{"method": "GET", "key": "chunks/", "delay": 2.0}])
    req = dict(name="k", capacity_range={"required_bytes": 64 * MIB}, volume_capabilities=[BLOCK],
               volume_content_source={"snapshot": {"snapshot_id": snap}})
    t, _ = in_background(d2.call, "CreateVolume", req, timeout=60)
    wait_for(lambda: os.listdir(os.path.join(d2.pool, "tmp")), timeout=10, what="the restore's staging")
    time.sleep(0.3)
    d2.kill9()
    t.join()
    s3.control("clear")
    d2.start()
    nothing_left(d2)
    v = d2.call("CreateVolume", req).volume
    assert sha_file(data_of(d2, v.volume_id)) == sha_file(data_of(d1, src.volume_id))
    return "restored after the restart"


def test_capacity_and_filesystem_refused_before_any_chunk(ctx):
    """A volume the pool has no room for: RESOURCE_EXHAUSTED before any chunk is fetched; a
    smaller size than the snapshot's: OUT_OF_RANGE; another filesystem or mkfs option than the
    snapshot's volume had: INVALID_ARGUMENT naming fs_type or the parameter; an unknown store
    snapshot: NOT_FOUND. Nothing made."""
    s3 = S3(ctx)
    d1 = node(ctx, s3, "node-1")
    d2 = node(ctx, s3, "node-2", args=["--pool-capacity", str(48 * MIB)])
    src = source_volume(ctx, s3, d1, size=40 * MIB, offsets=(0, 30 * MIB), cap=SNW,
                        params={"blockSize": "1024"})
    snap = store_snapshot(d1, src.volume_id, "cap")
    gets = s3.chunk_gets()
    src_req = {"snapshot": {"snapshot_id": snap}}
    e = d2.expect_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "CreateVolume", name="big", capacity_range={"required_bytes": 64 * MIB},
                        volume_capabilities=[BLOCK], volume_content_source=src_req)
    assert "node-2" in e.details(), e.details()
    e2 = d2.expect_error(grpc.StatusCode.OUT_OF_RANGE, "CreateVolume", name="small", capacity_range={"required_bytes": 32 * MIB},
                         volume_capabilities=[BLOCK], volume_content_source=src_req)
    e3 = d2.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="xfs", capacity_range={"required_bytes": 40 * MIB},
                         volume_capabilities=[mount_cap("xfs")], volume_content_source=src_req)
    assert "fs_type xfs" in e3.details() and "ext4" in e3.details(), e3.details()
    e4 = d2.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="bs", capacity_range={"required_bytes": 40 * MIB},
                         volume_capabilities=[SNW], parameters={"blockSize": "4096"}, volume_content_source=src_req)
    assert "blockSize is 4096" in e4.details() and "blockSize=1024" in e4.details(), e4.details()
    d2.expect_error(grpc.StatusCode.NOT_FOUND, "CreateVolume", name="none", capacity_range={"required_bytes": 40 * MIB},
                    volume_capabilities=[BLOCK], volume_content_source={"snapshot": {"snapshot_id": "store:snap-nothing"}})
    # Manifests read, no chunk fetched.
    assert s3.chunk_gets() == gets, s3.stats()
    nothing_left(d2)
    return "; ".join(x.details()[:60] for x in (e, e2))


def test_retry_answers_without_store(ctx):
    """A volume restored earlier is answered by the same CreateVolume while the store is down
    (idempotency from the pool alone); a new one from that snapshot fails, nothing made."""
    s3 = S3(ctx)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    src = source_volume(ctx, s3, d1)
    snap = store_snapshot(d1, src.volume_id, "down")
    req = dict(name="r", capacity_range={"required_bytes": 64 * MIB}, volume_capabilities=[BLOCK],
               volume_content_source={"snapshot": {"snapshot_id": snap}})
    v = d2.call("CreateVolume", req).volume
    s3.stop()
    t0 = time.monotonic()
    again = d2.call("CreateVolume", req, timeout=20).volume
    took = time.monotonic() - t0
    assert again.volume_id == v.volume_id and again.content_source.snapshot.snapshot_id == snap, again
    assert took < 2, took  # from the pool: no retries against the store
    # Another source for that name is still refused, without the store.
    other = dict(req, volume_content_source={"snapshot": {"snapshot_id": "store:snap-0000000000000000"}})
    e = d2.expect_error(grpc.StatusCode.ALREADY_EXISTS, "CreateVolume", other, timeout=20)
    assert "volume_content_source" in e.details(), e.details()
    before = os.listdir(os.path.join(d2.pool, "volumes"))
    try:
        d2.call("CreateVolume", dict(req, name="new"), timeout=5)
        raise AssertionError("want an error without the store")
    except grpc.RpcError as e:
        assert e.code() != grpc.StatusCode.OK, e
    assert os.listdir(os.path.join(d2.pool, "volumes")) == before
    return "answered in %.2f s with the store down" % took


def test_failure_after_the_call_ended_is_told_once(ctx):
    """A restore that fails after its call's deadline: the next CreateVolume answers its error
    (FAILED_PRECONDITION naming the chunk) without fetching a chunk, once; the one after starts
    again (and restores, the store repaired)."""
    s3 = S3(ctx)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    src = source_volume(ctx, s3, d1)
    snap = store_snapshot(d1, src.volume_id, "late")
    chunk = s3.chunks()[1].rsplit("/", 1)[1]
    s3.control("faults", [{"method": "GET", "key": chunk, "delay": 1.0, "status": 404, "code": "NoSuchKey"}])
    req = dict(name="late", capacity_range={"required_bytes": 64 * MIB}, volume_capabilities=[BLOCK],
               volume_content_source={"snapshot": {"snapshot_id": snap}})
    d2.expect_error(grpc.StatusCode.DEADLINE_EXCEEDED, "CreateVolume", req, timeout=0.3)
    wait_for(lambda: "is missing from" in d2.logs(), timeout=10, what="the restore's failure")
    gets = s3.chunk_gets()
    e = d2.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateVolume", req)
    assert e.details().startswith("volume_content_source: snapshot %s: chunk %s (offset " % (snap, chunk)), e.details()
    assert "after its call had ended" in e.details(), e.details()
    assert s3.chunk_gets() == gets, (gets, s3.chunk_gets())
    nothing_left(d2)
    s3.control("clear")
    v = d2.call("CreateVolume", req).volume
    assert s3.chunk_gets() > gets
    assert sha_file(data_of(d2, v.volume_id)) == sha_file(data_of(d1, src.volume_id))
    return e.details()[-90:]


def test_sigterm_cancels_restores(ctx):
    """SIGTERM while restores run (and one waits for a slot): they are cancelled and waited
    for, volplugd exits 0 within seconds, and the next start is clean; the retry restores."""
    s3 = S3(ctx)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    # 8 chunks, 4 at once, 1.5 s each: a restore takes 3 s.
    src = source_volume(ctx, s3, d1, size=32 * MIB, offsets=range(0, 32 * MIB, 4 * MIB))
    snap = store_snapshot(d1, src.volume_id, "term")
    s3.control("faults", [{"method": "GET", "key": "chunks/", "delay": 1.5}])
    reqs = [dict(name="t%d" % i, capacity_range={"required_bytes": 32 * MIB}, volume_capabilities=[BLOCK],
                 volume_content_source={"snapshot": {"snapshot_id": snap}}) for i in range(5)]
    for req in reqs:
        d2.expect_error(grpc.StatusCode.DEADLINE_EXCEEDED, "CreateVolume", req, timeout=0.2)
    t0 = time.monotonic()
    rc = d2.stop()
    took = time.monotonic() - t0
    assert rc == 0, (rc, d2.logs()[-2000:])
    assert took < 10, took
    assert "cancelling 5 restore(s)" in d2.logs(), d2.logs()[-2000:]
    assert d2.logs().count("was cancelled (stopping)") == 5, d2.logs()[-2000:]
    assert "restores interrupted" not in d2.logs()
    s3.control("clear")
    d2.start()
    nothing_left(d2)
    v = d2.call("CreateVolume", reqs[0]).volume
    assert sha_file(data_of(d2, v.volume_id)) == sha_file(data_of(d1, src.volume_id))
    return "stopped in %.1f s" % took


def test_four_restores_at_once_the_fifth_queued(ctx):
    """Five restores at once: four run, the fifth waits for a slot and its ABORTED message says
    it is queued; then all five are restored, bytes equal."""
    s3 = S3(ctx)
    d1, d2 = node(ctx, s3, "node-1"), node(ctx, s3, "node-2")
    src = source_volume(ctx, s3, d1, size=16 * MIB, offsets=(0, 5 * MIB, 10 * MIB))
    snap = store_snapshot(d1, src.volume_id, "five")
    s3.control("faults", [{"method": "GET", "key": "chunks/", "delay": 3.0}])
    reqs = [dict(name="f%d" % i, capacity_range={"required_bytes": 16 * MIB}, volume_capabilities=[BLOCK],
                 volume_content_source={"snapshot": {"snapshot_id": snap}}) for i in range(5)]
    for req in reqs:
        d2.expect_error(grpc.StatusCode.DEADLINE_EXCEEDED,
                        "CreateVolume", req, timeout=0.2)
    msgs = [d2.expect_error(grpc.StatusCode.ABORTED, "CreateVolume", req).details() for req in reqs]
    running = [m for m in msgs if "of 3 chunks" in m]
    queued = [m for m in msgs if "queued: 4 restores run at once, 0 other(s) queued before it" in m]
    assert len(running) == 4 and len(queued) == 1, msgs
    assert queued[0] == msgs[4], msgs
    s3.control("clear")
    want = sha_file(data_of(d1, src.volume_id))
    for req in reqs:
        v = wait_for(lambda: ok_or_none(d2, req), timeout=30, what="restore " + req["name"])
        assert sha_file(data_of(d2, v.volume_id)) == want
    return queued[0][:150]


if __name__ == "__main__":
    run([
        test_restore_on_this_node_and_another,
        test_restore_with_motos_s3,
        test_three_nodes,
        test_damaged_chunk_leaves_nothing,
        test_missing_chunk_leaves_nothing,
        test_slow_store_deadline_then_aborted_then_volume,
        test_kill9_mid_restore_leaves_nothing,
        test_capacity_and_filesystem_refused_before_any_chunk,
        test_retry_answers_without_store,
        test_failure_after_the_call_ended_is_told_once,
        test_sigterm_cancels_restores,
        test_four_restores_at_once_the_fifth_queued,
    ])
