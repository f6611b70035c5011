#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The second store snapshot of a volume through volplugd, with and without a base: an XFS pool
(reflink=1) on a loop device, a SIZE_MIB volume of random bytes, a first snapshot, 1% of it
rewritten in 1 MiB runs, then the second snapshot timed from CreateSnapshot to ready_to_use:
once with the first one's kept copy as its base, once with that copy removed beforehand (every
chunk read and hashed, as before bases). Needs root; run from the build directory's
environment as the integration tests (VOLPLUGD, VOLPLUGCTL, VOLPLUG_PROTO_PY,
VOLPLUG_SOURCE_ROOT). Knobs: SIZE_MIB (1024), CHUNK (1M), COLD (1: before each timed snapshot
the pool's image file leaves the page cache, so its reads go to the disk)."""

import os
import random
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
from harness import Ctx  # noqa: E402
import test_store_snapshot as t  # noqa: E402

MIB = 1 << 20


def image(ctx, size):
    img = os.path.join(ctx.tmp, "xfs.img")
    with open(img, "wb") as f:
        f.truncate(size)
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", img], check=True)
    dev = subprocess.run(["losetup", "-f", "--show", img], check=True, capture_output=True,
                         text=True).stdout.strip()
    ctx.dev = dev
    mnt = os.path.join(ctx.tmp, "xfs")
    os.mkdir(mnt)
    ctx.cleanups.append(lambda: subprocess.run(["umount", mnt], capture_output=True))
    ctx.cleanups.append(lambda: subprocess.run(["losetup", "-d", dev], capture_output=True))
    subprocess.run(["mount", dev, mnt], check=True)
    return os.path.join(mnt, "pool")


def uncache(ctx):
    """The pool's filesystem synced and its image's pages dropped (this file's only)."""
    subprocess.run(["sync", "-f", os.path.join(ctx.tmp, "xfs")], check=True)
    subprocess.run(["blockdev", "--flushbufs", ctx.dev], check=True)
    fd = os.open(os.path.join(ctx.tmp, "xfs.img"), os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def rewrite(path, size):
    """1% of the volume, in 1 MiB runs at random MiB offsets."""
    with open(path, "r+b") as f:
        for off in random.sample(range(size // MIB), max(1, size // MIB // 100)):
            f.seek(off * MIB)
            f.write(random.randbytes(MIB))
        os.fsync(f.fileno())


def main():
    size = int(os.environ.get("SIZE_MIB", "1024")) * MIB
    chunk = os.environ.get("CHUNK", "1M")
    cold = os.environ.get("COLD", "0") == "1"
    ctx = Ctx()
    try:
        peer = t.SimPeer(ctx)
        pool = image(ctx, 3 * size + (512 << 20))
        d = t.store_daemon(ctx, peer, pool=pool, extra=["--store-chunk-size", chunk])
        vol, path = t.volume(d, "pvc-bench", size, [(i, min(64 * MIB, size - i))
                                                     for i in range(0, size, 64 * MIB)])
        start = time.monotonic()
        s = t.until_ready(d, "snap-0", vol, timeout=1800)
        print("first snapshot (%d MiB, chunks %s): %.2f s" % (size // MIB, chunk,
                                                              time.monotonic() - start))
        for i, base in ((1, True), (2, False)):
            rewrite(path, size)
            if not base:
                shutil.rmtree(os.path.join(pool, "snapshots", s.snapshot_id.split(":", 1)[1]))
            if cold:
                uncache(ctx)
            start = time.monotonic()
            s = t.until_ready(d, "snap-%d" % i, vol, timeout=1800)
            took = time.monotonic() - start
            line = re.findall(r"snapshot %s: in s3://\S+: (.*)" % re.escape(s.snapshot_id),
                              d.logs())
            print("second snapshot %s base%s: %.2f s: %s" % ("with a" if base else "without",
                                                             " (cold)" if cold else "",
                                                             took, line[-1].split(" (")[0]
                                                             if line else "?"))
            print("   %s" % (line[-1] if line else ""))
    finally:
        ctx.cleanup()


if __name__ == "__main__":
    main()
