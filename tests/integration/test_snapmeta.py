# SPDX-License-Identifier: Apache-2.0
"""Changed-block tracking: the SnapshotMetadata service (GetMetadataAllocated, GetMetadataDelta)
over the pool's snapshots, on a real block volume (a loop device over the pool's file) written
through its published device. The ranges are checked against the bytes of the two snapshots'
data files: every block they leave out is equal in both, every block that changed is in them,
and (the pool's answer is exact at 4 KiB) no equal block is. On a reflinking pool (XFS) the
shared extents are skipped unread; on ext4 every byte either holds is compared. Paging
(max_results, starting_offset), the client's deadline and cancel mid-stream, the errors, and
volplugctl snapshot diff / allocated. Needs root."""

import os
import random
import re
import signal
import subprocess
import time

import grpc

from harness import Skip, _SERVICES, is_root, local_id, run, wait_for

MiB = 1 << 20
BLOCK = 4096
BLOCK_CAP = {"block": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}


def root_only():
    if not is_root():
        raise Skip("needs root (loop devices, mkfs, mount)")


def xfs_pool(ctx):
    """A pool on its own XFS (reflink=1): snapshots share their volume's extents."""
    img = os.path.join(ctx.tmp, "xfs.img")
    with open(img, "wb") as f:
        f.truncate(1 << 30)
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", img], check=True)
    dev = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True,
                         text=True).stdout.strip()
    mnt = os.path.join(ctx.tmp, "xfs")
    os.mkdir(mnt)
    ctx.cleanups.append(lambda: subprocess.run(["umount", mnt], capture_output=True))
    ctx.cleanups.append(lambda: subprocess.run(["losetup", "-d", dev], capture_output=True))
    subprocess.run(["mount", dev, mnt], check=True)
    return os.path.join(mnt, "pool")


class BlockVol:
    """A raw block volume staged and published on the node: written through its device."""

    def __init__(self, ctx, d, name, size):
        self.d = d
        r = d.call("CreateVolume", name=name, capacity_range={"required_bytes": size},
                   volume_capabilities=[BLOCK_CAP])
        self.id = r.volume.volume_id
        self.size = r.volume.capacity_bytes
        self.context = dict(r.volume.volume_context)
        pub = d.call("ControllerPublishVolume", volume_id=self.id, node_id="node-1",
                     volume_capability=BLOCK_CAP)
        self.publish_context = dict(pub.publish_context)
        self.staging = os.path.join(ctx.tmp, "plugins", name)
        self.target = os.path.join(ctx.tmp, "pods", name)
        os.makedirs(self.staging)
        os.makedirs(os.path.dirname(self.target), exist_ok=True)
        common = dict(volume_id=self.id, volume_capability=BLOCK_CAP,
                      publish_context=self.publish_context, volume_context=self.context)
        d.call("NodeStageVolume", staging_target_path=self.staging, **common)
        d.call("NodePublishVolume", staging_target_path=self.staging, target_path=self.target,
               **common)
        self.fd = os.open(self.target, os.O_RDWR)

    def write(self, block, data):
        assert os.pwrite(self.fd, data, block * BLOCK) == len(data)

    def sync(self):
        os.fsync(self.fd)

    def close(self):
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.d.call("NodeUnpublishVolume", volume_id=self.id, target_path=self.target)
        self.d.call("NodeUnstageVolume", volume_id=self.id, staging_target_path=self.staging)
        self.d.call("ControllerUnpublishVolume", volume_id=self.id, node_id="node-1")


def snapshot(d, name, volume_id):
    s = d.call("CreateSnapshot", name=name, source_volume_id=volume_id).snapshot
    return s.snapshot_id


def snap_data(d, snapshot_id):
    return os.path.join(d.pool, "snapshots", local_id(snapshot_id), "data")


def stream_call(d, method, timeout=60, **fields):
    """The call's iterator of replies (a server-streaming call)."""
    path, req_cls, rep_cls = _SERVICES[method]
    from google.protobuf import json_format
    request = json_format.ParseDict(fields, req_cls())
    stub = d._channel().unary_stream(path, request_serializer=req_cls.SerializeToString,
                                     response_deserializer=rep_cls.FromString)
    return stub(request, timeout=timeout)


def stream(d, method, timeout=60, **fields):
    """Every reply of a streaming call, as a list."""
    return list(stream_call(d, method, timeout=timeout, **fields))


def expect_stream_error(d, code, method, match, **fields):
    try:
        replies = stream(d, method, **fields)
    except grpc.RpcError as e:
        assert e.code() == code, (e.code(), e.details())
        assert match in e.details(), (match, e.details())
        return e.details()
    raise AssertionError("%s succeeded with %d replies, wanted %s" % (method, len(replies), code))


def ranges_of(replies, capacity):
    """The (offset, length) tuples of a stream, checked for what every reply must say."""
    out = []
    for r in replies:
        assert r.block_metadata_type == 2, "VARIABLE_LENGTH in every reply: %s" % r
        assert r.volume_capacity_bytes == capacity, (r.volume_capacity_bytes, capacity)
        out += [(m.byte_offset, m.size_bytes) for m in r.block_metadata]
    last = 0
    for off, size in out:
        assert size > 0 and off >= last and off + size <= capacity, ("order", out)
        last = off + size
    return out


def blocks_in(ranges):
    covered = set()
    for off, size in ranges:
        covered.update(range(off // BLOCK, (off + size + BLOCK - 1) // BLOCK))
    return covered


def check_against_bytes(base_path, target_path, ranges, capacity):
    """Every block the ranges leave out is equal in both files; every block that differs is in
    them. Returns (blocks that differ, equal blocks reported)."""
    covered = blocks_in(ranges)
    differ = set()
    with open(base_path, "rb") as a, open(target_path, "rb") as b:
        for blk in range(capacity // BLOCK):
            x, y = a.read(BLOCK), b.read(BLOCK)
            x += b"\0" * (BLOCK - len(x))
            if x != y:
                differ.add(blk)
    missed = differ - covered
    assert not missed, "changed blocks left out of the ranges: %s" % sorted(missed)[:10]
    return differ, covered - differ


def check_allocated(path, ranges, capacity):
    """Every block of the file that is not all zeros is in the ranges."""
    covered = blocks_in(ranges)
    zero = bytes(BLOCK)
    nonzero = set()
    with open(path, "rb") as f:
        for blk in range(capacity // BLOCK):
            if f.read(BLOCK) != zero:
                nonzero.add(blk)
    missed = nonzero - covered
    assert not missed, "written blocks left out of the allocated ranges: %s" % sorted(missed)[:10]
    return nonzero


def delta_log(d):
    """The daemon's last delta line: (bytes compared, shared skipped)."""
    found = re.findall(r"delta of snapshot .*?; (\d+) bytes compared, (\d+) shared", d.logs())
    assert found, "no delta logged"
    return int(found[-1][0]), int(found[-1][1])


def write_and_snapshot_twice(ctx, d, size=64 * MiB):
    """Known blocks, a snapshot, some rewritten (new bytes, the same bytes, zeros, new blocks
    in holes), a second snapshot. Returns (volume, base, target, blocks that changed)."""
    rng = random.Random(24)
    v = BlockVol(ctx, d, "cbt", size)
    try:
        nblocks = v.size // BLOCK
        written = rng.sample(range(nblocks), 400)
        contents = {}
        for blk in written:
            contents[blk] = rng.randbytes(BLOCK)
            v.write(blk, contents[blk])
        run_start = nblocks // 2
        for i in range(256):  # a 1 MiB run
            contents[run_start + i] = rng.randbytes(BLOCK)
            v.write(run_start + i, contents[run_start + i])
        v.sync()
        base = snapshot(d, "cbt-1", v.id)

        pool = sorted(contents)
        rng.shuffle(pool)
        rewritten, same, zeroed = pool[:40], pool[40:50], pool[50:55]
        holes = [b for b in rng.sample(range(nblocks), 200) if b not in contents][:20]
        for blk in rewritten + holes:
            v.write(blk, rng.randbytes(BLOCK))
        for blk in same:
            v.write(blk, contents[blk])  # new extents, the same bytes: not a change
        for blk in zeroed:
            v.write(blk, bytes(BLOCK))
        v.sync()
        target = snapshot(d, "cbt-2", v.id)
    except BaseException:
        v.close()
        raise
    return v, base, target, set(rewritten + holes + zeroed)


def delta_on(ctx, d, reflink):
    v, base, target, changed = write_and_snapshot_twice(ctx, d)
    try:
        start = time.monotonic()
        replies = stream(d, "GetMetadataDelta", base_snapshot_id=base, target_snapshot_id=target)
        took = time.monotonic() - start
        ranges = ranges_of(replies, v.size)
        differ, extra = check_against_bytes(snap_data(d, base), snap_data(d, target), ranges,
                                            v.size)
        assert differ == changed, "the bytes differ where the test wrote: %s" % (
            sorted(differ ^ changed)[:10])
        assert not extra, "equal blocks reported (the pool is exact at 4 KiB): %s" % sorted(extra)
        compared, shared = delta_log(d)
        if reflink:
            assert "by reflink" in d.logs(), "snapshots on XFS are reflinks"
            assert shared > 0, "the shared extents were skipped unread"
            assert compared <= 2 * MiB, "only the extents not shared were read: %d" % compared
        else:
            assert shared == 0, "a copy shares nothing"
            assert compared >= 2 * MiB, "every byte either holds was compared: %d" % compared

        alloc = ranges_of(stream(d, "GetMetadataAllocated", snapshot_id=base), v.size)
        nonzero = check_allocated(snap_data(d, base), alloc, v.size)
        return "%d ranges, %d blocks changed, %d compared bytes, %d shared; %.0f ms; " \
               "allocated %d ranges over %d non-zero blocks" % (
                   len(ranges), len(differ), compared, shared, took * 1000, len(alloc),
                   len(nonzero))
    finally:
        v.close()


def test_delta_on_a_reflinking_pool(ctx):
    root_only()
    d = ctx.daemon(pool=xfs_pool(ctx))
    return delta_on(ctx, d, reflink=True)


def test_delta_on_a_copying_pool(ctx):
    root_only()
    d = ctx.daemon()  # the test's temporary directory: ext4 here, no reflink
    if "by reflink" in d.logs():
        raise Skip("the temporary directory's filesystem reflinks")
    return delta_on(ctx, d, reflink=False)


def test_paging_resume_and_volplugctl(ctx):
    root_only()
    d = ctx.daemon()
    v, base, target, changed = write_and_snapshot_twice(ctx, d)
    v.close()
    full = ranges_of(stream(d, "GetMetadataDelta", base_snapshot_id=base,
                            target_snapshot_id=target), v.size)
    assert len(full) > 10, full

    # max_results: no reply holds more; together they are the same ranges.
    replies = stream(d, "GetMetadataDelta", base_snapshot_id=base, target_snapshot_id=target,
                     max_results=3)
    assert all(len(r.block_metadata) <= 3 for r in replies), [len(r.block_metadata) for r in replies]
    assert ranges_of(replies, v.size) == full
    assert len(replies) == (len(full) + 2) // 3, len(replies)

    # An interrupted stream resumed from the end of the last range received.
    it = stream_call(d, "GetMetadataDelta", base_snapshot_id=base, target_snapshot_id=target,
                     max_results=2)
    first = [next(it), next(it)]
    it.cancel()
    got = ranges_of(first, v.size)
    resume = got[-1][0] + got[-1][1]
    rest = ranges_of(stream(d, "GetMetadataDelta", base_snapshot_id=base,
                            target_snapshot_id=target, starting_offset=resume), v.size)
    assert got + rest == full, "resumed: the same ranges"

    # A starting offset inside a range: that range from there on, nothing ending before it.
    off, size = full[5]
    mid = off + size // 2 if size > 1 else off
    part = ranges_of(stream(d, "GetMetadataDelta", base_snapshot_id=base,
                            target_snapshot_id=target, starting_offset=mid), v.size)
    assert part[0] == (mid, off + size - mid) and part[1:] == full[6:], (part[:2], full[5:7])
    assert mid < part[0][0] + part[0][1]
    # At the capacity: nothing left, and the capacity still said.
    end = stream(d, "GetMetadataDelta", base_snapshot_id=base, target_snapshot_id=target,
                 starting_offset=v.size)
    assert ranges_of(end, v.size) == [] and len(end) == 1

    # volplugctl prints the same ranges, one "OFFSET LENGTH" a line.
    out = d.ctl("snapshot", "diff", base, target)
    lines = [tuple(int(x) for x in line.split()) for line in out.stdout.splitlines()]
    assert lines == full, (lines[:3], full[:3])
    assert "%d ranges" % len(full) in out.stderr, out.stderr
    out = d.ctl("snapshot", "allocated", target, "--max", "1")
    alloc = [tuple(int(x) for x in line.split()) for line in out.stdout.splitlines()]
    assert alloc == ranges_of(stream(d, "GetMetadataAllocated", snapshot_id=target), v.size)
    out = d.ctl("snapshot", "diff", base, "snap-0000000000000000.node-1", check=False)
    assert out.returncode == 1 and "NOT_FOUND" in out.stderr and \
        "snap-0000000000000000.node-1" in out.stderr, out.stderr
    return "%d ranges; %d replies of 3" % (len(full), len(replies))


def test_errors_name_the_field(ctx):
    d = ctx.daemon()
    ids = []
    for name in ("a", "b"):
        vid = d.call("CreateVolume", name=name, capacity_range={"required_bytes": 8 * MiB},
                     volume_capabilities=[BLOCK_CAP]).volume.volume_id
        ids.append((vid, snapshot(d, "snap-" + name, vid)))
    (va, sa), (vb, sb) = ids
    IA, NF, OOR = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                   grpc.StatusCode.OUT_OF_RANGE)
    expect_stream_error(d, IA, "GetMetadataAllocated", "snapshot_id: missing")
    expect_stream_error(d, IA, "GetMetadataDelta", "base_snapshot_id: missing",
                        target_snapshot_id=sa)
    expect_stream_error(d, IA, "GetMetadataDelta", "target_snapshot_id: missing",
                        base_snapshot_id=sa)
    gone = "snap-0123456789abcdef.node-1"
    expect_stream_error(d, NF, "GetMetadataAllocated", gone, snapshot_id=gone)
    msg = expect_stream_error(d, NF, "GetMetadataDelta", "base_snapshot_id",
                              base_snapshot_id=gone, target_snapshot_id=sa)
    assert gone in msg, msg
    msg = expect_stream_error(d, NF, "GetMetadataDelta", "target_snapshot_id",
                              base_snapshot_id=sa, target_snapshot_id=gone)
    assert gone in msg, msg
    msg = expect_stream_error(d, IA, "GetMetadataDelta", "two snapshots of one volume",
                              base_snapshot_id=sa, target_snapshot_id=sb)
    assert va in msg and vb in msg, msg
    expect_stream_error(d, OOR, "GetMetadataAllocated", "starting_offset",
                        snapshot_id=sa, starting_offset=8 * MiB + 1)
    expect_stream_error(d, OOR, "GetMetadataDelta", "starting_offset", base_snapshot_id=sa,
                        target_snapshot_id=sa, starting_offset=-1)
    expect_stream_error(d, IA, "GetMetadataAllocated", "max_results",
                        snapshot_id=sa, max_results=-5)
    # A snapshot compared with itself: nothing changed.
    assert ranges_of(stream(d, "GetMetadataDelta", base_snapshot_id=sa, target_snapshot_id=sa),
                     8 * MiB) == []

    caps = d.call("GetPluginCapabilities").capabilities
    assert any(c.service.type == 4 for c in caps), "SNAPSHOT_METADATA_SERVICE advertised"
    node = ctx.daemon(mode="node", name="node")
    caps = node.call("GetPluginCapabilities").capabilities
    assert not any(c.service.type == 4 for c in caps), "not by a node-only daemon"
    try:
        stream(node, "GetMetadataAllocated", snapshot_id=sa)
        raise AssertionError("a node-only daemon served GetMetadataAllocated")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e


def many_ranges(ctx, d, n=40):
    """A volume (written in its data file: no device needed) with n separate data ranges."""
    vid = d.call("CreateVolume", name="many", capacity_range={"required_bytes": 64 * MiB},
                 volume_capabilities=[BLOCK_CAP]).volume.volume_id
    path = os.path.join(d.pool, "volumes", local_id(vid), "data")
    fd = os.open(path, os.O_RDWR)
    try:
        for i in range(n):
            os.pwrite(fd, b"\x5a" * BLOCK, i * MiB)
        os.fsync(fd)
    finally:
        os.close(fd)
    return snapshot(d, "many-1", vid)


def test_deadline_and_cancel_mid_stream(ctx):
    d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "rpc-send:GetMetadataAllocated=sleep(100ms)"})
    snap = many_ranges(ctx, d)

    # The deadline passes after some replies: the client sees DEADLINE_EXCEEDED, the daemon
    # stops at once instead of walking on for a client that is gone.
    got = 0
    start = time.monotonic()
    try:
        for _ in stream_call(d, "GetMetadataAllocated", timeout=1.0, snapshot_id=snap,
                             max_results=1):
            got += 1
        raise AssertionError("the stream outlived its deadline")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.DEADLINE_EXCEEDED, e
    assert 3 <= got < 40, got
    said = wait_for(lambda: re.search(r"stopped after (\d+) messages: the client's deadline "
                                      r"passed", d.logs()), timeout=5, what="the stop logged")
    assert int(said.group(1)) < 40
    assert time.monotonic() - start < 3, "stopped near the deadline"

    # The client cancels after three replies.
    it = stream_call(d, "GetMetadataAllocated", snapshot_id=snap, max_results=1)
    for _ in range(3):
        next(it)
    it.cancel()
    said = wait_for(lambda: re.search(r"stopped after (\d+) messages: the client cancelled",
                                      d.logs()), timeout=5, what="the cancel logged")
    assert int(said.group(1)) < 10, said.group(0)

    # The daemon serves on: the whole stream, 40 ranges.
    full = ranges_of(stream(d, "GetMetadataAllocated", snapshot_id=snap), 64 * MiB)
    assert len(full) == 40, full
    return "%d replies before the deadline; the stop logged: %s" % (got, said.group(0))


def test_sigterm_mid_stream(ctx):
    """SIGTERM while two streams run: the short one ends within the shutdown grace and the
    client has every range; the long one is cancelled after the grace, its handler stops at
    its next message, and the daemon exits 0 once that handler has returned."""
    d = ctx.daemon(args=["--shutdown-grace", "1s"],
                   env={"VOLPLUG_FAILPOINTS": "rpc-send:GetMetadataAllocated=sleep(200ms)"})
    snap = many_ranges(ctx, d)
    long = stream_call(d, "GetMetadataAllocated", snapshot_id=snap, max_results=1)
    got = [next(long) for _ in range(3)]
    short = stream_call(d, "GetMetadataAllocated", snapshot_id=snap, max_results=20)
    short_replies = [next(short)]  # its second message waits 200 ms in the daemon
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    short_replies += list(short)
    assert len(ranges_of(short_replies, 64 * MiB)) == 40, short_replies
    try:
        for r in long:
            got.append(r)
        raise AssertionError("the long stream outlived the shutdown grace: %d replies" % len(got))
    except grpc.RpcError as e:
        assert e.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE), e
    assert 3 <= len(got) < 40, len(got)
    rc = d.proc.wait(20)
    took = time.monotonic() - t0
    logs = d.logs()
    assert rc == 0, (rc, logs[-1500:])
    # The long stream's handler returned before the daemon stopped, not killed with it.
    assert re.search(r"stopped after \d+ messages: the client cancelled", logs), logs[-1500:]
    assert "after the shutdown grace period: cancelling" in logs, logs[-1500:]
    assert logs.rstrip().splitlines()[-1].split()[2] == "stopped", logs[-500:]
    assert took < 5, took
    assert not os.path.exists(d.socket), "socket file removed on shutdown"
    return "long stream cancelled after %d replies; stopped in %.1f s" % (len(got), took)


if __name__ == "__main__":
    run([test_delta_on_a_reflinking_pool, test_delta_on_a_copying_pool,
         test_paging_resume_and_volplugctl, test_errors_name_the_field,
         test_deadline_and_cancel_mid_stream, test_sigterm_mid_stream])
