#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Snapshots in the object store (issue 24, docs/snapshots.md): the VolumeSnapshotClass
parameter location: store, driven over CSI against tests/s3sim (always: signatures checked,
faults on demand) and moto's S3 (when present, else skipped saying why). What a user sees: the
snapshot answered at once with ready_to_use false, then true; its ID naming no node; every node
listing it; the gRPC code and the message naming the store and the object for a wrong key or a
missing bucket; an upload that survives 503 SlowDown, 500, dropped connections and a kill -9 of
volplugd; the bytes a restore of the manifest gives equal to the volume's; the collection that
removes only chunks no manifest names, with two nodes uploading and deleting at once."""

import hashlib
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
import urllib.request

import grpc

from harness import SOURCE_ROOT, VOLPLUGCTL, Skip, in_background, local_id, run, wait_for
from test_snapmeta import xfs_pool

MIB = 1 << 20
CHUNK = 4 * MIB
BUCKET = "volplug-snaps"
KEY, SECRET = "AKIDVOLPLUGTEST", "volplug-test-secret"
SNW = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {"fs_type": "ext4"}}
STORE = {"location": "store"}
S3SIM = os.path.join(SOURCE_ROOT, "tests", "s3sim", "s3sim.py")
MOTO_PEER = os.path.join(SOURCE_ROOT, "tests", "s3sim", "moto-peer.py")


class SimPeer:
    """tests/s3sim: signatures checked with KEY/SECRET, faults, objects read and aged."""
    faults_ok = True

    def __init__(self, ctx):
        self.proc = subprocess.Popen([sys.executable, S3SIM], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        ctx.cleanups.append(self.stop)
        self.url = "http://127.0.0.1:%d" % int(self.proc.stdout.readline().split()[1])
        self.key, self.secret = KEY, SECRET
        self.control("reset", {"buckets": [BUCKET], "keys": {KEY: SECRET}})

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)

    def control(self, what, body=None):
        req = urllib.request.Request(self.url + "/_s3sim/" + what,
                                     data=json.dumps(body or {}).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    def keys(self, prefix):
        objs = json.loads(self.control("stats"))["objects"]
        start = BUCKET + "/" + prefix
        return {k[len(BUCKET) + 1:] for k in objs if k.startswith(start)}

    def get(self, key):
        return self.control("get", {"bucket": BUCKET, "key": key})

    def requests(self):
        return json.loads(self.control("stats"))["requests"]

    def faults(self, *faults):
        self.control("faults", list(faults))

    def age(self, regex, seconds=7200):
        self.control("age", {"key": regex, "seconds": seconds})


class MotoPeer:
    """moto's S3 (tests/s3sim/moto-peer.py), read with botocore."""
    faults_ok = False

    def __init__(self, ctx):
        self.proc = subprocess.Popen([sys.executable, MOTO_PEER], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        ctx.cleanups.append(self.stop)
        line = self.proc.stdout.readline().split()
        if not line or line[0] == "SKIP":
            raise Skip(" ".join(line[1:]) or "moto-peer.py said nothing")
        self.url = "http://127.0.0.1:%s" % line[1]
        self.key, self.secret = line[3], line[5]
        import botocore.config
        import botocore.session
        self.s3 = botocore.session.get_session().create_client(
            "s3", region_name="us-east-1", endpoint_url=self.url, aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            config=botocore.config.Config(s3={"addressing_style": "path"}))

    def stop(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=20)

    def keys(self, prefix):
        pages = self.s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        return {o["Key"] for p in pages for o in p.get("Contents", [])}

    def get(self, key):
        return self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()


def store_daemon(ctx, peer, name="d", node_id="node-1", prefix="c1", extra=(), key=None,
                 bucket=BUCKET, gc="0", start=True, pool=None, env=None):
    args = ["--store-endpoint", peer.url, "--store-bucket", bucket, "--store-prefix", prefix,
            "--store-path-style", "--store-region", "us-east-1", "--store-gc-interval", gc]
    env = {"AWS_ACCESS_KEY_ID": peer.key, "AWS_SECRET_ACCESS_KEY": key or peer.secret,
           "AWS_SESSION_TOKEN": None, "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_WEB_IDENTITY_TOKEN_FILE": None, "AWS_PROFILE": None, **(env or {})}
    return ctx.daemon(args=args + list(extra), env=env, name=name, node_id=node_id, start=start,
                      pool=pool)


def volume(d, name, size=16 * MIB, ranges=((0, MIB), (9 * MIB, MIB))):
    """A volume whose data file holds random bytes at ranges (the rest holes)."""
    v = d.call("CreateVolume", name=name, volume_capabilities=[SNW],
               capacity_range={"required_bytes": size}).volume
    path = os.path.join(d.pool, "volumes", local_id(v.volume_id), "data")
    with open(path, "r+b") as f:
        for off, n in ranges:
            f.seek(off)
            f.write(random.randbytes(n))
    return v.volume_id, path


def snap(d, name, vol, timeout=30, **extra):
    return d.call("CreateSnapshot", name=name, source_volume_id=vol,
                  parameters=extra.pop("parameters", STORE), timeout=timeout, **extra).snapshot


def until_ready(d, name, vol, timeout=60, **extra):
    """Calls CreateSnapshot as csi-snapshotter does until the snapshot is ready."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s = snap(d, name, vol, **extra)
        if s.ready_to_use:
            return s
        time.sleep(0.1)
    raise AssertionError("snapshot %s not ready within %ss" % (name, timeout))


def restore_check(peer, prefix, snapshot_id, path, expected=None):
    """Restores the manifest's chunks (every one checked against its hash) and compares the
    bytes with the volume's data file (or expected). Returns the manifest."""
    m = json.loads(peer.get("%s/snapshots/%s.json" % (prefix, snapshot_id.split(":", 1)[1])))
    image = bytearray(m["volume_size"])
    for c in m["chunks"]:
        z = peer.get("%s/chunks/%s/%s" % (prefix, c["hash"][:2], c["hash"]))
        data = subprocess.run(["zstd", "-d", "-c"], input=z, capture_output=True,
                              check=True).stdout
        assert hashlib.sha256(data).hexdigest() == c["hash"], c
        image[c["offset"]:c["offset"] + len(data)] = data
    if expected is None:
        with open(path, "rb") as f:
            expected = f.read()
    assert expected == bytes(image), "restored bytes differ from the volume's"
    return m


def peers(ctx):
    yield SimPeer(ctx)
    try:
        yield MotoPeer(ctx)
    except Skip as e:
        print("# moto: skipped: %s" % e)


def check_ready_later(ctx, peer, tag):
    d = store_daemon(ctx, peer, name="d-" + tag)
    vol, path = volume(d, "pvc-" + tag)
    s = snap(d, "snap-" + tag, vol)
    assert s.snapshot_id.startswith("store:") and "node-1" not in s.snapshot_id, s
    assert not s.ready_to_use and s.source_volume_id == vol and s.size_bytes == 16 * MIB, s
    ready = until_ready(d, "snap-" + tag, vol)
    assert ready.snapshot_id == s.snapshot_id and ready.size_bytes == 16 * MIB, ready
    again = snap(d, "snap-" + tag, vol)  # idempotent once ready: the same snapshot
    assert again.snapshot_id == s.snapshot_id and again.ready_to_use, again
    wait_for(lambda: not os.listdir(os.path.join(d.pool, "snapshots")), 10, "copy dropped")
    m = restore_check(peer, "c1", s.snapshot_id, path)
    assert len(m["chunks"]) == 2 and m["parameters"]["sourceVolumeId"] == vol, m
    return len(m["chunks"])


def test_create_ready_later(ctx):
    """ready_to_use false at once, then true; the same answer again; the copy dropped; the
    manifest's chunks restore the volume's bytes: against s3sim, and moto when present."""
    done = [type(p).__name__ + "=%d chunks" % check_ready_later(ctx, p, str(i))
            for i, p in enumerate(peers(ctx))]
    return ", ".join(done)


def test_list_from_other_node(ctx):
    """A second volplugd with another pool on the same store lists and finds the snapshot
    (size and source from the manifest) beside its own local ones."""
    peer = SimPeer(ctx)
    d1 = store_daemon(ctx, peer, name="n1", node_id="node-1")
    d2 = store_daemon(ctx, peer, name="n2", node_id="node-2")
    vol, _ = volume(d1, "pvc-a")
    s = until_ready(d1, "snap-a", vol)
    vol2, _ = volume(d2, "pvc-b")
    local = snap(d2, "snap-local", vol2, parameters={})
    listed = {e.snapshot.snapshot_id: e.snapshot for e in d2.call("ListSnapshots").entries}
    assert set(listed) == {s.snapshot_id, local.snapshot_id}, listed
    got = listed[s.snapshot_id]
    assert got.ready_to_use and got.size_bytes == 16 * MIB and got.source_volume_id == vol, got
    one = d2.call("ListSnapshots", snapshot_id=s.snapshot_id).entries
    assert [e.snapshot.snapshot_id for e in one] == [s.snapshot_id], one
    by_vol = d2.call("ListSnapshots", source_volume_id=vol).entries
    assert [e.snapshot.snapshot_id for e in by_vol] == [s.snapshot_id], by_vol


def test_delete(ctx):
    """DeleteSnapshot removes the manifest (idempotent); deleting one that is uploading stops
    the upload, drops its copy, and no manifest comes later."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, _ = volume(d, "pvc-a")
    s = until_ready(d, "snap-a", vol)
    d.call("DeleteSnapshot", snapshot_id=s.snapshot_id)
    d.call("DeleteSnapshot", snapshot_id=s.snapshot_id)
    assert not peer.keys("c1/snapshots/"), peer.keys("c1/snapshots/")
    assert not d.call("ListSnapshots").entries
    peer.faults({"method": "PUT", "key": "chunks/", "delay": 1.0})
    slow = snap(d, "snap-b", vol)
    wait_for(lambda: peer.keys("c1/intents/"), 10, "the upload's intent")
    d.call("DeleteSnapshot", snapshot_id=slow.snapshot_id)
    assert not os.listdir(os.path.join(d.pool, "snapshots"))
    time.sleep(2)
    assert not peer.keys("c1/snapshots/") and not peer.keys("c1/intents/"), peer.keys("c1/")
    assert not d.call("ListSnapshots").entries


def test_refusals(ctx):
    """A wrong key: PERMISSION_DENIED naming the object; a missing bucket: FAILED_PRECONDITION
    naming it; a partial secret: INVALID_ARGUMENT naming the key, never its value; no store:
    FAILED_PRECONDITION saying which flag; a bad location: INVALID_ARGUMENT naming it."""
    peer = SimPeer(ctx)
    bad = store_daemon(ctx, peer, name="bad-key", key="wrong-secret")
    vol, _ = volume(bad, "pvc-a")
    bad.expect_error(grpc.StatusCode.PERMISSION_DENIED, "CreateSnapshot", name="s1",
                     source_volume_id=vol, parameters=STORE,
                     match="s3://%s/c1/snapshots/snap-" % BUCKET)
    good = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
    s = until_ready(bad, "s1", vol, secrets=good)  # the class's secret wins over the chain
    assert s.snapshot_id.startswith("store:")
    e = bad.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateSnapshot", name="s2",
                         source_volume_id=vol, parameters=STORE,
                         secrets={"AWS_ACCESS_KEY_ID": "AKIDPARTIAL"},
                         match="AWS_SECRET_ACCESS_KEY")
    assert "AKIDPARTIAL" not in e.details()
    nob = store_daemon(ctx, peer, name="no-bucket", bucket="no-such-bucket")
    vol2, _ = volume(nob, "pvc-b")
    nob.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateSnapshot", name="s3",
                     source_volume_id=vol2, parameters=STORE, match="no-such-bucket")
    plain = ctx.daemon(name="no-store")
    vol3, _ = volume(plain, "pvc-c")
    plain.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateSnapshot", name="s4",
                       source_volume_id=vol3, parameters=STORE, match="--store-bucket")
    plain.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateSnapshot", name="s5",
                       source_volume_id=vol3, parameters={"location": "tape"},
                       match="location")
    assert not os.listdir(os.path.join(plain.pool, "snapshots"))


def test_faults_retried(ctx):
    """503 SlowDown, 500 and connections dropped mid-reply on the chunks, the intent and the
    manifest: the upload retries and the snapshot becomes ready, its bytes whole."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, path = volume(d, "pvc-a", 32 * MIB, [(i * 4 * MIB, MIB) for i in range(8)])
    peer.faults({"method": "PUT", "key": "chunks/", "status": 503, "code": "SlowDown",
                 "times": 4},
                {"method": "PUT", "key": "chunks/", "status": 500, "times": 3},
                {"method": "PUT", "key": "chunks/", "drop": True, "times": 3},
                {"method": "HEAD", "key": "chunks/", "status": 503, "code": "SlowDown",
                 "times": 3},
                {"method": "PUT", "key": "intents/", "status": 503, "code": "SlowDown",
                 "times": 2},
                {"method": "PUT", "key": "snapshots/", "drop": True, "times": 2})
    s = snap(d, "snap-a", vol)
    until_ready(d, "snap-a", vol, timeout=90)
    m = restore_check(peer, "c1", s.snapshot_id, path)
    return "%d chunks, %s" % (len(m["chunks"]), peer.requests())


def test_kill9_resume(ctx):
    """kill -9 of volplugd while it uploads, then a restart: the upload resumes from the copy
    left in the pool (the chunks up already are not sent again) and completes, its bytes
    equal to the volume's."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, path = volume(d, "pvc-a", 64 * MIB, [(i * 4 * MIB, 2 * MIB) for i in range(16)])
    peer.faults({"method": "PUT", "key": "chunks/", "delay": 0.4})
    s = snap(d, "snap-a", vol)
    wait_for(lambda: len(peer.keys("c1/chunks/")) >= 4, 30, "four chunks up")
    d.kill9()
    before = len(peer.keys("c1/chunks/"))
    assert before < 16 and not peer.keys("c1/snapshots/"), before
    peer.control("clear")
    puts = peer.requests().get("PUT", 0)
    d.start()
    until_ready(d, "snap-a", vol, timeout=60)
    restore_check(peer, "c1", s.snapshot_id, path)
    sent_after = peer.requests()["PUT"] - puts
    assert "resuming its upload" in d.logs()
    # the rest of the chunks, the intent (and its renewals) and the manifest
    assert sent_after <= 16 - before + 4, (before, sent_after)
    return "%d chunks up before the kill, %d PUTs after the restart" % (before, sent_after)


def test_gc(ctx):
    """After a delete, a collection removes the chunks no manifest names (once older than the
    grace) and never one of a live manifest, whose bytes still restore."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer, gc="1s")
    vol, path = volume(d, "pvc-a")
    a = until_ready(d, "snap-a", vol)
    a_chunks = {k for k in peer.keys("c1/chunks/")}
    with open(path, "r+b") as f:
        f.seek(0)
        f.write(random.randbytes(MIB))  # the first chunk changes, the second stays
    b = until_ready(d, "snap-b", vol)
    b_m = json.loads(peer.get("c1/snapshots/%s.json" % b.snapshot_id.split(":")[1]))
    b_keys = {"c1/chunks/%s/%s" % (c["hash"][:2], c["hash"]) for c in b_m["chunks"]}
    only_a = a_chunks - b_keys
    assert len(only_a) == 1, (a_chunks, b_keys)
    d.call("DeleteSnapshot", snapshot_id=a.snapshot_id)
    peer.age("chunks/")
    wait_for(lambda: not (peer.keys("c1/chunks/") & only_a), 20, "the collection")
    assert b_keys <= peer.keys("c1/chunks/")
    restore_check(peer, "c1", b.snapshot_id, path)
    # the chunk goes before the collection's line is logged
    wait_for(lambda: "collected 1 chunks" in d.logs(), 10, "the collection's log line")


def test_two_nodes_with_gc(ctx):
    """Two nodes snapshot and delete at once while both collect every second (chunks aged past
    the grace all along): every manifest left names only chunks that are there, and restores
    its volume's bytes."""
    peer = SimPeer(ctx)
    nodes = [store_daemon(ctx, peer, name="n%d" % i, node_id="node-%d" % i, gc="1s")
             for i in (1, 2)]
    vols = [volume(d, "pvc-%d" % i, ranges=[(0, 2 * MIB), (8 * MIB, MIB)])
            for i, d in enumerate(nodes)]
    stop = threading.Event()
    ager = threading.Thread(target=lambda: [peer.age("chunks/", 7200) or time.sleep(0.2)
                                            for _ in iter(stop.is_set, True)])
    ager.start()
    kept = []

    def churn(i):
        d, (vol, path) = nodes[i], vols[i]
        for k in range(4):
            with open(path, "r+b") as f:
                f.seek(0)
                f.write(random.randbytes(MIB))  # a chunk of its own for each snapshot
                f.seek(0)
                expected = f.read()
            s = until_ready(d, "s-%d-%d" % (i, k), vol, timeout=60)
            if k % 2 == 0:
                d.call("DeleteSnapshot", snapshot_id=s.snapshot_id)
            else:
                kept.append((s.snapshot_id, path, expected))
    try:
        threads = [in_background(churn, i) for i in (0, 1)]
        for t, result in threads:
            t.join(180)
            assert "error" not in result, result
    finally:
        stop.set()
        ager.join()
    time.sleep(3)  # a few more collections
    names = peer.keys("c1/snapshots/")
    assert len(names) == len(kept) == 4, names
    for sid, path, expected in kept:
        restore_check(peer, "c1", sid, path, expected)
    live = set()
    for sid, _, _ in kept:
        m = json.loads(peer.get("c1/snapshots/%s.json" % sid.split(":")[1]))
        live |= {"c1/chunks/%s/%s" % (c["hash"][:2], c["hash"]) for c in m["chunks"]}
    assert peer.keys("c1/chunks/") == live, "the deleted snapshots' own chunks stay"
    logs = nodes[0].logs() + nodes[1].logs()
    return "collections: %d done, %d put off" % (logs.count("collected "),
                                                  logs.count("collection put off"))


def scrape(d):
    """{(name, ((label, value), ...)): value} of the daemon's /metrics."""
    m = wait_for(lambda: re.search(r"metrics on http://(\S+)/metrics", d.logs()), 10,
                 "metrics address")
    time.sleep(1.1)  # past the collected gauges' second of reuse
    with urllib.request.urlopen("http://%s/metrics" % m.group(1), timeout=10) as r:
        text = r.read().decode()
    samples = {}
    for line in text.splitlines():
        g = re.match(r'^([a-z_]+)(?:\{(.*)\})? (\S+)$', line)
        if g:
            labels = tuple(sorted(re.findall(r'([a-z_]+)="([^"]*)"', g.group(2) or "")))
            samples[(g.group(1), labels)] = float(g.group(3))
    return samples


def test_metrics_and_status(ctx):
    """/metrics counts the store's uploads, chunks and bytes, names the store, and keeps the
    last upload error with its errno; volplugctl status shows the store, its uploads and bytes
    sent, and that error's message."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer, extra=("--metrics-address", "127.0.0.1:0"))
    vol, _ = volume(d, "pvc-m")
    until_ready(d, "snap-m", vol)
    m = scrape(d)
    info = [k for k in m if k[0] == "volplug_store_info"]
    assert info == [("volplug_store_info", (("bucket", BUCKET), ("endpoint", peer.url),
                                            ("prefix", "c1")))], info
    assert m[("volplug_store_uploads_total", (("result", "done"),))] == 1, m
    assert m[("volplug_store_uploads_total", (("result", "failed"),))] == 0, m
    assert m[("volplug_store_uploads_in_progress", ())] == 0, m
    assert m[("volplug_store_upload_chunks_total", (("outcome", "sent"),))] == 2, m
    assert m[("volplug_store_read_bytes_total", ())] == 2 * CHUNK, m
    sent = m[("volplug_store_sent_bytes_total", ())]
    assert 2 * MIB < sent < 2 * CHUNK, sent  # random MiBs in two chunks, compressed
    out = d.ctl("status").stdout
    line = "snapshot store s3://%s/c1 at %s: 0 uploads in progress, %.1f MiB sent " \
        "(1 uploads done, 0 failed)" % (BUCKET, peer.url, sent / MIB)
    assert line in out, out

    peer.faults({"method": "PUT", "key": "chunks/", "status": 403, "code": "AccessDenied"})
    vol2, _ = volume(d, "pvc-m2")
    snap(d, "snap-m2", vol2)
    wait_for(lambda: "upload failed" in d.logs(), 20, "the upload's failure")
    m = scrape(d)
    assert m[("volplug_store_uploads_total", (("result", "failed"),))] == 1, m
    errs = [k for k in m if k[0] == "volplug_store_last_error_timestamp_seconds"]
    assert errs == [("volplug_store_last_error_timestamp_seconds",
                     (("error", "EPERM"), ("kind", "upload")))], errs
    assert abs(m[errs[0]] - time.time()) < 60, m[errs[0]]
    out = d.ctl("status").stdout
    assert "(1 uploads done, 1 failed)" in out, out
    err = re.search(r"^  last error \S+  upload: (.*)$", out, re.M)
    assert err and "snap-" in err.group(1) and "AccessDenied" in err.group(1) and \
        "c1/chunks/" in err.group(1), out
    st = d.ctl_json("status")["store"]
    assert st["bucket"] == BUCKET and st["prefix"] == "c1" and st["uploads_failed"] == 1, st
    plain = ctx.daemon(name="no-store")
    assert "snapshot store" not in plain.ctl("status").stdout
    return "%d bytes sent for 2 chunks; %s" % (sent, err.group(1)[:60])


def test_location_differs(ctx):
    """A CreateSnapshot whose name is a snapshot's of the other location is ALREADY_EXISTS
    naming it and saying the location differs, whichever way round, while the upload runs and
    once it is done; nothing is made."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, _ = volume(d, "pvc-l")
    local = snap(d, "snap-local", vol, parameters={})
    e = d.expect_error(grpc.StatusCode.ALREADY_EXISTS, "CreateSnapshot", name="snap-local",
                       source_volume_id=vol, parameters=STORE, match=local.snapshot_id)
    assert "location: local" in e.details() and "location differs" in e.details(), e.details()
    assert not peer.keys("c1/"), peer.keys("c1/")
    peer.faults({"method": "PUT", "key": "chunks/", "delay": 1.0})
    s = snap(d, "snap-store", vol)
    e = d.expect_error(grpc.StatusCode.ALREADY_EXISTS, "CreateSnapshot", name="snap-store",
                       source_volume_id=vol, parameters={"location": "local"},
                       match=s.snapshot_id)
    assert "location: store" in e.details() and "uploading" in e.details(), e.details()
    peer.faults()
    until_ready(d, "snap-store", vol)
    e = d.expect_error(grpc.StatusCode.ALREADY_EXISTS, "CreateSnapshot", name="snap-store",
                       source_volume_id=vol, parameters={}, match=s.snapshot_id)
    assert "location: store" in e.details() and "location differs" in e.details(), e.details()
    assert os.listdir(os.path.join(d.pool, "snapshots")) == [local.snapshot_id.split(".")[0]]
    listed = sorted(x.snapshot.snapshot_id for x in d.call("ListSnapshots").entries)
    assert listed == sorted([local.snapshot_id, s.snapshot_id]), listed
    return e.details()


def test_list_store_unreachable(ctx):
    """ListSnapshots without a filter, the store out of reach: UNAVAILABLE naming the store and
    its error, never a list of the local snapshots alone (paging needs the whole list); by a
    local snapshot's ID it still answers; by a store snapshot's ID, UNAVAILABLE too."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, _ = volume(d, "pvc-u")
    local = snap(d, "snap-local", vol, parameters={})
    s = until_ready(d, "snap-store", vol)
    peer.stop()
    start = time.monotonic()
    e = d.expect_error(grpc.StatusCode.UNAVAILABLE, "ListSnapshots", timeout=10,
                       match="the snapshot store s3://%s/c1 at %s" % (BUCKET, peer.url))
    took = time.monotonic() - start
    assert "incomplete" in e.details() and "connect" in e.details(), e.details()
    d.expect_error(grpc.StatusCode.UNAVAILABLE, "ListSnapshots", timeout=10,
                   source_volume_id=vol, match="s3://%s/c1" % BUCKET)
    d.expect_error(grpc.StatusCode.UNAVAILABLE, "ListSnapshots", timeout=10,
                   snapshot_id=s.snapshot_id, match="s3://%s/c1" % BUCKET)
    one = d.call("ListSnapshots", snapshot_id=local.snapshot_id, timeout=10).entries
    assert [x.snapshot.snapshot_id for x in one] == [local.snapshot_id], one
    return "%.1f s: %s" % (took, e.details()[:150])


def kept(pool, snapshot_id):
    """The kept copy's record of a store snapshot in the pool, or None."""
    try:
        with open(os.path.join(pool, "snapshots", snapshot_id.split(":", 1)[1],
                               "meta.json")) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def test_incremental_base(ctx):
    """On a pool that reflinks, the copy of a volume's last uploaded store snapshot stays as
    the base of its next upload: the second snapshot after 1 MiB of 64 rewritten reads only
    that chunk (the rest unchanged since the base, by their shared extents), both restore to
    their bytes, the first one's copy goes when the second is up, a kill -9 and restart does
    not upload the kept one again and leaves pool check clean, and deleting the snapshot or
    the volume drops its copy."""
    peer = SimPeer(ctx)
    pool = xfs_pool(ctx)
    d = store_daemon(ctx, peer, pool=pool, extra=["--store-chunk-size", "1M",
                                                  "--metrics-address", "127.0.0.1:0"])
    vol, path = volume(d, "pvc-a", 64 * MIB, [(0, 64 * MIB)])
    with open(path, "rb") as f:
        first = f.read()
    s1 = until_ready(d, "snap-1", vol)
    m1 = restore_check(peer, "c1", s1.snapshot_id, path)
    assert m1["chunk_size"] == MIB and len(m1["chunks"]) == 64, m1["chunk_size"]
    assert (kept(pool, s1.snapshot_id) or {}).get("params", {}).get("storeBase") == \
        "uploaded", kept(pool, s1.snapshot_id)
    with open(path, "r+b") as f:
        f.seek(10 * MIB)
        f.write(random.randbytes(MIB))
    read0 = scrape(d).get(("volplug_store_read_bytes_total", ()), 0)
    chunks0 = len(peer.keys("c1/chunks/"))
    start = time.monotonic()
    s2 = until_ready(d, "snap-2", vol)
    took = time.monotonic() - start
    read = scrape(d)[("volplug_store_read_bytes_total", ())] - read0
    line = re.findall(r"snapshot %s: in s3://\S+: .* (\d+) unchanged since (\S+);" %
                      re.escape(s2.snapshot_id), d.logs())
    assert line == [("63", s1.snapshot_id.split(":", 1)[1])], line
    assert read == MIB, read
    assert len(peer.keys("c1/chunks/")) == chunks0 + 1
    restore_check(peer, "c1", s1.snapshot_id, path, expected=first)
    restore_check(peer, "c1", s2.snapshot_id, path)
    assert kept(pool, s1.snapshot_id) is None, "the first snapshot's copy stayed"
    assert kept(pool, s2.snapshot_id) is not None, "the second snapshot's copy is gone"
    # A restart does not take the kept copy for an upload left unfinished.
    d.kill9()
    puts = peer.requests().get("PUT", 0)
    d.start()
    time.sleep(2)
    assert "resuming its upload" not in d.logs(), d.logs()[-2000:]
    assert peer.requests().get("PUT", 0) == puts, "a kept copy was uploaded again"
    assert until_ready(d, "snap-2", vol).ready_to_use
    check = subprocess.run([VOLPLUGCTL, "pool", "check", pool], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    # Deleting the snapshot drops its kept copy; so does deleting the volume.
    d.call("DeleteSnapshot", snapshot_id=s2.snapshot_id)
    assert kept(pool, s2.snapshot_id) is None, "the deleted snapshot's copy stayed"
    s3 = until_ready(d, "snap-3", vol)
    assert kept(pool, s3.snapshot_id) is not None
    d.call("DeleteVolume", volume_id=vol)
    assert kept(pool, s3.snapshot_id) is None, "the deleted volume's kept copy stayed"
    return "second upload: %d bytes read, 63 of 64 chunks unchanged, %.2f s" % (read, took)



def test_no_base_without_reflinks(ctx):
    """On a pool whose filesystem does not reflink (the copy a sparse copy sharing nothing) the
    copy goes once its manifest is there, as before: keeping it would cost the volume's whole
    data for nothing."""
    fs = subprocess.run(["stat", "-f", "-c", "%T", ctx.tmp], capture_output=True,
                        text=True).stdout.strip()
    if fs not in ("ext2/ext3", "ext4", "tmpfs"):
        raise Skip("the test directory's filesystem (%s) may reflink" % fs)
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, path = volume(d, "pvc-a")
    s = until_ready(d, "snap-1", vol)
    restore_check(peer, "c1", s.snapshot_id, path)
    assert kept(d.pool, s.snapshot_id) is None, "a sparse copy was kept"
    assert "by sparse copy" in d.logs(), "the copy was not a sparse copy"
    return fs


def test_chunk_size_option(ctx):
    """--store-chunk-size takes a power of two from 64K to 64M; anything else stops volplugd
    at once, naming the option and the value."""
    volplugd = os.environ.get("VOLPLUGD", "build/src/cmd/volplugd")
    for value, why in (("3M", "invalid"), ("32K", "out of range"), ("128M", "out of range")):
        p = subprocess.run([volplugd, "--store-chunk-size", value], capture_output=True,
                           text=True, timeout=10)
        assert p.returncode == 2 and "--store-chunk-size '%s'" % value in p.stderr and \
            why in p.stderr, (value, p.returncode, p.stderr)

if __name__ == "__main__":
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (the pool's reflinked copies)")
        raise SystemExit(0)
    run([test_create_ready_later, test_list_from_other_node, test_delete, test_refusals,
         test_faults_retried, test_kill9_resume, test_gc, test_two_nodes_with_gc,
         test_metrics_and_status, test_location_differs, test_list_store_unreachable,
         test_incremental_base, test_no_base_without_reflinks, test_chunk_size_option])
