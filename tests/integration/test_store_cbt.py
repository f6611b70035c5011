#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Changed-block tracking of snapshots in the object store (issue 24 point 5, docs/snapshots.md
"Changed-block tracking"): GetMetadataAllocated and GetMetadataDelta for store: IDs answered
from the manifests in tests/s3sim, no chunk read. The ranges are checked against the bytes:
both manifests are restored by the test's own reader (every chunk checked against its hash)
and compared with the volume's bytes captured at each snapshot; every 4 KiB block the ranges
leave out is equal in both, and (exact at the chunk size) only chunks that differ are in them.
A local snapshot against a store snapshot of the same volume (the local file's chunks hashed),
snapshots of two volumes, an unknown one, the request's secrets, volplugctl snapshot diff.
Needs root (the pool's reflinked copies)."""

import os
import random
import time

import grpc

from harness import local_id, run, wait_for
from test_snapmeta import expect_stream_error, ranges_of, stream
from test_store_snapshot import (BUCKET, KEY, SECRET, SimPeer, restore_check, snap,
                                 store_daemon, until_ready)

MIB = 1 << 20
CHUNK = 4 * MIB
BLOCK = 4096
SIZE = 64 * MIB
IA, NF, PD = (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
              grpc.StatusCode.PERMISSION_DENIED)


def new_volume(d, name, size=SIZE):
    v = d.call("CreateVolume", name=name, capacity_range={"required_bytes": size},
               volume_capabilities=[{"block": {},
                                     "access_mode": {"mode": "SINGLE_NODE_WRITER"}}]).volume
    return v.volume_id, os.path.join(d.pool, "volumes", local_id(v.volume_id), "data")


def write(path, offset, data):
    fd = os.open(path, os.O_RDWR)
    try:
        assert os.pwrite(fd, data, offset) == len(data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_all(path, size=SIZE):
    with open(path, "rb") as f:
        data = f.read(size)
    return data + bytes(size - len(data))


def check_against_bytes(base, target, ranges):
    """Every 4 KiB block the ranges leave out is equal in both images. Returns the chunks
    that differ (by index) and the chunks the ranges cover."""
    covered = set()
    for off, n in ranges:
        covered.update(range(off // BLOCK, (off + n + BLOCK - 1) // BLOCK))
    differ = {b for b in range(len(target) // BLOCK)
              if base[b * BLOCK:(b + 1) * BLOCK] != target[b * BLOCK:(b + 1) * BLOCK]}
    missed = differ - covered
    assert not missed, "changed blocks left out of the ranges: %s" % sorted(missed)[:10]
    return ({b * BLOCK // CHUNK for b in differ},
            {b * BLOCK // CHUNK for b in covered})


def chunk_ranges(chunks):
    """The ranges of a set of chunk indices, adjacent ones joined."""
    out = []
    for c in sorted(chunks):
        if out and out[-1][0] + out[-1][1] == c * CHUNK:
            out[-1] = (out[-1][0], out[-1][1] + CHUNK)
        else:
            out.append((c * CHUNK, CHUNK))
    return out


def delta(d, base, target, **extra):
    return ranges_of(stream(d, "GetMetadataDelta", base_snapshot_id=base,
                            target_snapshot_id=target, **extra), SIZE)


def two_store_snapshots(ctx, d, peer, rng):
    """A volume written, store-snapshotted, some chunks rewritten (new bytes, the same bytes,
    zeros, data in a hole), store-snapshotted again; both uploads done and their copies
    dropped. Returns (volume, path, s1, s2, bytes at s1, bytes at s2, chunks changed)."""
    vol, path = new_volume(d, "cbt")
    first = {0: rng.randbytes(MIB), 8 * MIB: rng.randbytes(4 * MIB),
             12 * MIB: rng.randbytes(8 * MIB), 30 * MIB: rng.randbytes(512 * 1024),
             60 * MIB: rng.randbytes(BLOCK)}
    for off, data in first.items():
        write(path, off, data)
    at1 = read_all(path)
    s1 = until_ready(d, "cbt-1", vol).snapshot_id
    write(path, 9 * MIB + 5 * BLOCK, rng.randbytes(BLOCK))  # chunk 2: new bytes
    write(path, 0, first[0])  # chunk 0: new extents, the same bytes: no change
    write(path, 30 * MIB, bytes(512 * 1024))  # chunk 7: all zeros now
    write(path, 40 * MIB + 3 * BLOCK, rng.randbytes(3 * BLOCK))  # chunk 10: was a hole
    write(path, 16 * MIB + 7, bytes([at1[16 * MIB + 7] ^ 0xff]))  # chunk 4: one byte
    at2 = read_all(path)
    s2 = until_ready(d, "cbt-2", vol).snapshot_id
    wait_for(lambda: not os.listdir(os.path.join(d.pool, "snapshots")), 10,
             "the copies dropped once uploaded")
    # The test's own reader: both manifests restore the bytes captured at each snapshot.
    restore_check(peer, "c1", s1, None, expected=at1)
    restore_check(peer, "c1", s2, None, expected=at2)
    return vol, path, s1, s2, at1, at2, {2, 4, 7, 10}


def test_delta_of_two_store_snapshots(ctx):
    """Two store snapshots of one volume: the chunks that differ, from the manifests alone
    (two GETs, no chunk read); every range left out equal in both restored images; paging;
    volplugctl snapshot diff prints the same ranges; allocated is the chunk list."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, path, s1, s2, at1, at2, changed = two_store_snapshots(ctx, d, peer, random.Random(5))

    before = peer.requests()
    start = time.monotonic()
    ranges = delta(d, s1, s2)
    took = time.monotonic() - start
    after = peer.requests()
    made = {m: after[m] - before.get(m, 0) for m in after if after[m] != before.get(m, 0)}
    requests = sum(made.values())
    differ, covered = check_against_bytes(at1, at2, ranges)
    assert differ == changed, "the test changed chunks %s, bytes differ in %s" % (
        sorted(changed), sorted(differ))
    assert covered == changed, "exact at the chunk size: %s" % sorted(covered)
    assert ranges == chunk_ranges(changed), ranges
    assert made == {"GET": 2}, "two manifests read, nothing else: %s" % made
    assert "by the store's manifests" in d.logs()
    # The other way round: the same chunks. A snapshot with itself: nothing.
    assert delta(d, s2, s1) == ranges
    assert delta(d, s2, s2) == []
    # Paging and resuming from inside a range.
    replies = stream(d, "GetMetadataDelta", base_snapshot_id=s1, target_snapshot_id=s2,
                     max_results=1)
    assert len(replies) == len(ranges) and ranges_of(replies, SIZE) == ranges
    mid = ranges[1][0] + BLOCK
    assert delta(d, s1, s2, starting_offset=mid) == [(mid, ranges[1][1] - BLOCK)] + ranges[2:]

    # volplugctl prints the same ranges.
    out = d.ctl("snapshot", "diff", s1, s2)
    lines = [tuple(int(x) for x in line.split()) for line in out.stdout.splitlines()]
    assert lines == ranges, (lines, ranges)
    assert "%d ranges" % len(ranges) in out.stderr, out.stderr

    # Allocated: the manifest's chunks, joined; every non-zero block in them.
    alloc = ranges_of(stream(d, "GetMetadataAllocated", snapshot_id=s2), SIZE)
    nonzero = {b // (CHUNK // BLOCK) for b in range(SIZE // BLOCK)
               if any(at2[b * BLOCK:(b + 1) * BLOCK])}
    assert alloc == chunk_ranges(nonzero), (alloc, sorted(nonzero))
    out = d.ctl("snapshot", "allocated", s1)
    assert len(out.stdout.splitlines()) == len(chunk_ranges({0, 2, 3, 4, 7, 15})), out.stdout
    return "%d ranges (%d chunks) in %.0f ms, %d requests to the store" % (
        len(ranges), len(changed), took * 1000, requests)


def test_local_against_store(ctx):
    """A local snapshot and a store snapshot of one volume: the local file's chunks hashed
    against the manifest, both ways round; checked against the local data file's bytes. A
    store snapshot still uploading answers from its copy."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vol, path, s1, s2, at1, at2, _ = two_store_snapshots(ctx, d, peer, random.Random(6))
    same = snap(d, "local-0", vol, parameters={}).snapshot_id
    assert delta(d, s2, same) == [] and delta(d, same, s2) == []
    write(path, 50 * MIB + BLOCK, random.Random(7).randbytes(2 * BLOCK))  # chunk 12
    back = 9 * MIB + 5 * BLOCK
    write(path, back, at1[back:back + BLOCK])  # chunk 2: back to its bytes at s1
    local = snap(d, "local-1", vol, parameters={}).snapshot_id
    local_bytes = read_all(os.path.join(d.pool, "snapshots", local_id(local), "data"))
    for base, base_bytes in ((s1, at1), (s2, at2)):
        ranges = delta(d, base, local)
        differ, covered = check_against_bytes(base_bytes, local_bytes, ranges)
        assert covered == differ, (base, sorted(covered), sorted(differ))
        back = delta(d, local, base)
        assert back == ranges, (back, ranges)
    assert delta(d, s2, local) == chunk_ranges({2, 12}), delta(d, s2, local)
    assert delta(d, s1, local) == chunk_ranges({4, 7, 10, 12}), delta(d, s1, local)
    alloc = ranges_of(stream(d, "GetMetadataAllocated", snapshot_id=local), SIZE)
    assert alloc, "a local snapshot's allocated ranges, beside store ones"
    # A store snapshot still uploading: answered from its copy in the pool, the same bytes as
    # the local snapshot.
    peer.faults({"method": "PUT", "key": "chunks/", "delay": 1.0})
    uploading = snap(d, "cbt-3", vol)
    assert not uploading.ready_to_use, uploading
    assert delta(d, s2, uploading.snapshot_id) == delta(d, s2, local)
    assert delta(d, local, uploading.snapshot_id) == []
    return "local vs store: %d and %d ranges" % (len(delta(d, s1, local)),
                                                 len(delta(d, s2, local)))


def test_errors_and_secrets(ctx):
    """Store snapshots of two volumes: INVALID_ARGUMENT naming both; an unknown store ID:
    NOT_FOUND naming the field and the ID; a daemon whose own key is wrong answers with the
    request's secrets, PERMISSION_DENIED without them."""
    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer, key="wrong-secret")
    good = {"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET}
    ids = []
    for name in ("a", "b"):
        vol, path = new_volume(d, name, 8 * MIB)
        write(path, 0, os.urandom(MIB))
        ids.append((vol, until_ready(d, "snap-" + name, vol, secrets=good).snapshot_id))
    (va, sa), (vb, sb) = ids
    wait_for(lambda: not os.listdir(os.path.join(d.pool, "snapshots")), 10, "copies dropped")
    msg = expect_stream_error(d, PD, "GetMetadataAllocated", "s3://%s/c1/snapshots/" % BUCKET,
                              snapshot_id=sa)
    assert sa.split(":", 1)[1] in msg, msg
    alloc = ranges_of(stream(d, "GetMetadataAllocated", snapshot_id=sa, secrets=good), 8 * MIB)
    assert alloc == [(0, CHUNK)], alloc
    msg = expect_stream_error(d, IA, "GetMetadataDelta", "two snapshots of one volume",
                              base_snapshot_id=sa, target_snapshot_id=sb, secrets=good)
    assert va in msg and vb in msg and sa in msg and sb in msg, msg
    gone = "store:snap-0123456789abcdef"
    msg = expect_stream_error(d, NF, "GetMetadataDelta", "target_snapshot_id",
                              base_snapshot_id=sa, target_snapshot_id=gone, secrets=good)
    assert gone in msg, msg
    msg = expect_stream_error(d, NF, "GetMetadataAllocated", "snapshot_id", snapshot_id=gone,
                              secrets=good)
    assert gone in msg, msg
    out = d.ctl("snapshot", "diff", sa, sa, "--secret", "AWS_ACCESS_KEY_ID=" + KEY,
                "--secret", "AWS_SECRET_ACCESS_KEY=" + SECRET)
    assert out.stdout == "" and "0 ranges" in out.stderr, (out.stdout, out.stderr)
    return "refused: two volumes, unknown, no secret"


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (the pool's reflinked copies)")
        raise SystemExit(0)
    run([test_delta_of_two_store_snapshots, test_local_against_store, test_errors_and_secrets])
