#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Changed-block tracking: GetMetadataDelta between two snapshots of a SIZE_GIB volume full of
data, CHANGED_PCT of its 4 KiB blocks rewritten (scattered) between them, on a pool that
reflinks (XFS on a loop device over a file under /tmp: the shared extents are skipped unread)
and on one that copies (ext4, the directory under /tmp: every byte compared). Rounds alternate
the two pools; a cold round first drops the two snapshots' pages (POSIX_FADV_DONTNEED on their
files only), a warm one reads them from the page cache. Prints per pool and kind the median
wall time of the call over the socket, the bytes the daemon read (its log), the ranges and
bytes reported, and volplugd's peak resident set during the call (VmHWM, reset before it
through /proc/PID/clear_refs) against its resident set before.

Environment: BUILD (build), SIZE_GIB (4), CHANGED_PCT (1), ROUNDS (3). Needs root (the XFS
loop device)."""

import os
import random
import re
import statistics
import subprocess
import sys
import time

BUILD = os.environ.get("BUILD", "build")
os.environ.setdefault("VOLPLUGD", os.path.join(BUILD, "src/cmd/volplugd"))
os.environ.setdefault("VOLPLUGCTL", os.path.join(BUILD, "src/cmd/volplugctl"))
os.environ.setdefault("VOLPLUG_PROTO_PY", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))

from harness import Ctx, _SERVICES, local_id  # noqa: E402

MIB = 1 << 20
BLOCK = 4096
SIZE = int(os.environ.get("SIZE_GIB", 4)) << 30
CHANGED_PCT = float(os.environ.get("CHANGED_PCT", 1))
ROUNDS = int(os.environ.get("ROUNDS", 3))
CAP = {"block": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}


def status_kib(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def drop_pages(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def xfs_dir(ctx):
    img = os.path.join(ctx.tmp, "xfs.img")
    with open(img, "wb") as f:
        f.truncate(SIZE * 3)
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", img], check=True)
    dev = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True,
                         text=True).stdout.strip()
    mnt = os.path.join(ctx.tmp, "xfs")
    os.mkdir(mnt)
    ctx.cleanups.append(lambda: subprocess.run(["umount", mnt]))
    ctx.cleanups.append(lambda: subprocess.run(["losetup", "-d", dev]))
    subprocess.run(["mount", dev, mnt], check=True)
    return os.path.join(mnt, "pool")


def prepare(ctx, name, pool):
    d = ctx.daemon(pool=pool, name=name)
    vid = d.call("CreateVolume", name="cbt", capacity_range={"required_bytes": SIZE},
                 volume_capabilities=[CAP]).volume.volume_id
    path = os.path.join(d.pool, "volumes", local_id(vid), "data")
    rng = random.Random(1)
    chunk = bytearray(rng.randbytes(MIB))
    fd = os.open(path, os.O_RDWR)
    try:
        for off in range(0, SIZE, MIB):  # every block distinct: its offset stamped in
            for b in range(0, MIB, BLOCK):
                chunk[b:b + 8] = (off + b).to_bytes(8, "little")
            os.pwrite(fd, chunk, off)
        os.fsync(fd)
        base = d.call("CreateSnapshot", name="base", source_volume_id=vid).snapshot.snapshot_id
        blocks = rng.sample(range(SIZE // BLOCK), int(SIZE // BLOCK * CHANGED_PCT / 100))
        for blk in blocks:
            os.pwrite(fd, rng.randbytes(BLOCK), blk * BLOCK)
        os.fsync(fd)
        target = d.call("CreateSnapshot", name="target",
                        source_volume_id=vid).snapshot.snapshot_id
    finally:
        os.close(fd)
    files = [os.path.join(d.pool, "snapshots", local_id(s), "data") for s in (base, target)]
    return {"d": d, "base": base, "target": target, "files": files, "changed": len(blocks),
            "rows": {"cold": [], "warm": []}}


def delta_once(p, cold):
    d = p["d"]
    if cold:
        for f in p["files"]:
            drop_pages(f)
    pid = d.proc.pid
    rss_before = status_kib(pid, "VmRSS")
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")  # resets VmHWM to the resident set now
    path, req_cls, rep_cls = _SERVICES["GetMetadataDelta"]
    stub = d._channel().unary_stream(path, request_serializer=req_cls.SerializeToString,
                                     response_deserializer=rep_cls.FromString)
    start = time.monotonic()
    ranges = nbytes = msgs = 0
    for r in stub(req_cls(base_snapshot_id=p["base"], target_snapshot_id=p["target"]),
                  timeout=600):
        msgs += 1
        ranges += len(r.block_metadata)
        nbytes += sum(m.size_bytes for m in r.block_metadata)
    wall = time.monotonic() - start
    peak = status_kib(pid, "VmHWM")
    line = re.findall(r"delta of snapshot .*?; (\d+) bytes compared, (\d+) shared", d.logs())[-1]
    return {"wall": wall, "rss": rss_before, "peak": peak, "ranges": ranges, "bytes": nbytes,
            "msgs": msgs, "read": int(line[0]), "shared": int(line[1])}


def main():
    if os.geteuid() != 0:
        print("bench/cbt.py: needs root (an XFS loop device)")
        return 77
    ctx = Ctx()
    try:
        pools = {"reflink (XFS, FIEMAP)": prepare(ctx, "xfs", xfs_dir(ctx)),
                 "copy (ext4, compare)": prepare(ctx, "ext4", None)}
        for r in range(ROUNDS):
            for kind in ("cold", "warm"):
                for p in pools.values():
                    p["rows"][kind].append(delta_once(p, kind == "cold"))
        print("%d GiB volume full of data, %d blocks of 4 KiB rewritten (%.1f%%), %d rounds "
              "(medians)" % (SIZE >> 30, next(iter(pools.values()))["changed"], CHANGED_PCT,
                             ROUNDS))
        print("| pool | cache | GetMetadataDelta | read from each snapshot | skipped as shared "
              "| ranges | bytes reported | messages | volplugd RSS before -> peak |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, p in pools.items():
            for kind in ("cold", "warm"):
                rows = p["rows"][kind]
                med = lambda k: statistics.median(x[k] for x in rows)  # noqa: E731
                print("| %s | %s | %.2f s | %.1f MiB | %.1f MiB | %d | %.1f MiB | %d | "
                      "%.1f -> %.1f MiB |" % (
                          name, kind, med("wall"), med("read") / MIB, med("shared") / MIB,
                          med("ranges"), med("bytes") / MIB, med("msgs"), med("rss") / 1024,
                          med("peak") / 1024))
    finally:
        ctx.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
