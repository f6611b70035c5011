# SPDX-License-Identifier: Apache-2.0
"""The Node service on real loop devices, mkfs and mounts: stage, publish, unpublish, unstage,
expansion, stats, idempotency, crashes mid-call, and volume ownership (volume_mount_group).
Every test checks what a user would see: the gRPC code and message, the bytes on disk, the
mounts in /proc/self/mountinfo and the loop devices in sysfs. Needs root."""

import errno
import functools
import glob
import hashlib
import mmap
import os
import re
import shutil
import stat
import subprocess
import time

import grpc

from harness import Skip, in_background, is_root, local_id, process, processes, run, to_dict, wait_for

MiB = 1 << 20
XFS_MIN = 300 * MiB  # mkfs.xfs refuses smaller data sections

# Options that make ControllerExpandVolume answer at once instead of after the 2 s window.
FAST = ["--modify-coalesce-window", "10ms"]


def mount_cap(fs="ext4", flags=(), group=None, mode="SINGLE_NODE_WRITER"):
    m = {"fs_type": fs, "mount_flags": list(flags)}
    if group is not None:
        m["volume_mount_group"] = group
    return {"mount": m, "access_mode": {"mode": mode}}


def block_cap():
    return {"block": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}


# --- what the machine shows -------------------------------------------------------------------


def mounts_under(prefix):
    """Mounts in /proc/self/mountinfo whose mount point is prefix or below it: dicts with
    target, root, vfs (per-mount options), fstype, source, sb (superblock options)."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields = left.split(" ")
            target = fields[4].replace("\\040", " ")
            fstype, source, sb = right.split(" ", 2)
            if target == prefix or target.startswith(prefix.rstrip("/") + "/"):
                found.append({"target": target, "root": fields[3], "vfs": fields[5].split(","),
                              "fstype": fstype, "source": source, "sb": sb.split(",")})
    return found


def mount_at(path):
    ms = [m for m in mounts_under(path) if m["target"] == path]
    return ms[-1] if ms else None


def loops_under(prefix):
    """{"/dev/loopN": backing file} for bound loop devices whose backing file is below prefix
    (deleted backing files included: they are leaks too), read from sysfs."""
    found = {}
    for bf in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(bf) as f:
                backing = f.read().strip()
        except OSError:
            continue  # detached while we looked
        if backing.endswith(" (deleted)"):
            backing = backing[: -len(" (deleted)")]
        if backing.startswith(prefix.rstrip("/") + "/"):
            found["/dev/" + bf.split("/")[3]] = backing
    return found


def losetup_for(path):
    """What `losetup -j FILE` shows: the devices bound to that file."""
    p = subprocess.run(["losetup", "-j", path], capture_output=True, text=True, check=True)
    return [line.split(":")[0] for line in p.stdout.splitlines() if line.strip()]


def force_cleanup(prefix):
    """Last resort after a test: unmounts everything below prefix and detaches loop devices
    backed by files below it. Returns what it had to clean (empty when the test did it)."""
    leaked = []
    for _ in range(5):
        ms = mounts_under(prefix)
        if not ms:
            break
        for m in sorted(ms, key=lambda m: -len(m["target"])):
            leaked.append("mount " + m["target"])
            subprocess.run(["umount", m["target"]], capture_output=True)
    for m in mounts_under(prefix):
        subprocess.run(["umount", "-l", m["target"]], capture_output=True)
    for dev, backing in loops_under(prefix).items():
        leaked.append("loop %s (%s)" % (dev, backing))
        subprocess.run(["losetup", "-d", dev], capture_output=True)
    return leaked


def node_test(fn):
    """Root only; whatever the test leaves mounted or attached below its temp dir fails it
    (after being cleaned up, so one failure does not leak into the next test)."""

    @functools.wraps(fn)
    def wrapper(ctx):
        if not is_root():
            raise Skip("needs root (loop devices, mkfs, mount)")
        try:
            note = fn(ctx)
        except BaseException:
            force_cleanup(ctx.tmp)
            raise
        leaked = force_cleanup(ctx.tmp)
        assert not leaked, "the test left behind: %s" % leaked
        for d in ctx.daemons:
            d.stop()
        shutil.rmtree(ctx.tmp, ignore_errors=True)
        return note

    return wrapper


def write_random(path, size=MiB):
    data = os.urandom(size)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return hashlib.sha256(data).hexdigest()


def sha_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def fs_bytes(path):
    s = os.statvfs(path)
    return s.f_blocks * s.f_frsize


def tool(*argv):
    p = subprocess.run(list(argv), capture_output=True, text=True)
    assert p.returncode == 0, "%s: %s" % (" ".join(argv), p.stderr)
    return p.stdout


def loop_attr(dev, attr):
    """A loop device's attribute in sysfs: "loop/dio", "queue/logical_block_size"."""
    with open("/sys/block/%s/%s" % (os.path.basename(dev), attr)) as f:
        return f.read().strip()


def allocated(path):
    """The bytes a file really holds on disk."""
    return os.stat(path).st_blocks * 512


def cached(path):
    """The bytes of a file in the page cache, as fincore(1) counts them."""
    return int(tool("fincore", "--bytes", "--noheadings", "--output", "RES", path).strip() or 0)


def block_size_for(pool):
    """The logical block size volplug gives a new loop device over a file of the pool: its
    filesystem's block size, at most 4096."""
    return min(os.statvfs(pool).f_bsize, 4096)


def write_direct(path, size):
    """Writes size bytes of random data to a new file with O_DIRECT and fsync: 0, or the errno
    the writer got."""
    buf = mmap.mmap(-1, MiB)
    buf.write(os.urandom(MiB))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    try:
        for off in range(0, size, MiB):
            os.pwrite(fd, buf, off)
        os.fsync(fd)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def pool_space(d):
    """What volplugctl pool check says the pool's volumes are provisioned and really hold."""
    report = d.ctl_json("pool", "check", d.pool)
    return report["provisioned_bytes"], report["allocated_bytes"]


def condition(d, vid, path):
    stats = to_dict(d.call("NodeGetVolumeStats", volume_id=vid, volume_path=path))
    return stats["volume_condition"]


# --- one volume through the CSI calls ------------------------------------------------------------


class Vol:
    """A pool volume and the node-side paths a kubelet would use for it."""

    def __init__(self, ctx, d, name, size=64 * MiB, cap=None, params=None,
                 controller_publish=True, source=None):
        self.d = d
        self.cap = cap or mount_cap()
        reply = d.call("CreateVolume", name=name, capacity_range={"required_bytes": size},
                       volume_capabilities=[self.cap], parameters=params or {},
                       volume_content_source=source)
        self.id = reply.volume.volume_id
        self.size = reply.volume.capacity_bytes
        self.context = dict(reply.volume.volume_context)
        self.publish_context = {}
        if controller_publish:
            pub = d.call("ControllerPublishVolume", volume_id=self.id, node_id="node-1",
                         volume_capability=self.cap)
            self.publish_context = dict(pub.publish_context)
        self.staging = os.path.join(ctx.tmp, "plugins", name, "globalmount")
        self.targets = []
        os.makedirs(os.path.dirname(self.staging), exist_ok=True)
        self.pods = os.path.join(ctx.tmp, "pods")
        os.makedirs(self.pods, exist_ok=True)

    @property
    def data(self):
        return os.path.join(self.d.pool, "volumes", local_id(self.id), "data")

    def target(self, pod="pod1"):
        return os.path.join(self.pods, pod + "-" + self.id)

    def stage(self, cap=None, path=None, context=None):
        return self.d.call("NodeStageVolume", volume_id=self.id,
                           staging_target_path=path or self.staging,
                           volume_capability=cap or self.cap,
                           publish_context=self.publish_context,
                           volume_context=self.context if context is None else context)

    def publish(self, target=None, cap=None, readonly=False, context=None):
        target = target or self.target()
        if target not in self.targets:
            self.targets.append(target)
        self.d.call("NodePublishVolume", volume_id=self.id, staging_target_path=self.staging,
                    target_path=target, volume_capability=cap or self.cap, readonly=readonly,
                    publish_context=self.publish_context,
                    volume_context=self.context if context is None else context)
        return target

    def unpublish(self, target=None):
        self.d.call("NodeUnpublishVolume", volume_id=self.id, target_path=target or self.target())

    def unstage(self):
        self.d.call("NodeUnstageVolume", volume_id=self.id, staging_target_path=self.staging)

    def teardown(self):
        """What the kubelet does when the pods go: every target, then the staging path."""
        for t in self.targets:
            self.unpublish(t)
        self.unstage()

    def device(self):
        devs = [dev for dev, backing in loops_under(self.d.pool).items() if backing == self.data]
        assert len(devs) == 1, "want one loop device on %s, have %s" % (self.data, devs)
        return devs[0]

    def expand(self, size):
        reply = self.d.call("ControllerExpandVolume", volume_id=self.id,
                            capacity_range={"required_bytes": size}, volume_capability=self.cap)
        assert reply.capacity_bytes == size, reply
        self.size = size
        return reply


def assert_detached(v):
    """No loop device backs the volume's data file, as sysfs and losetup both show."""
    assert not [b for b in loops_under(v.d.pool).values() if b == v.data], loops_under(v.d.pool)
    assert losetup_for(v.data) == [], losetup_for(v.data)


def safely(*steps):
    """Runs teardown steps, all of them, raising the first error at the end."""
    first = None
    for step in steps:
        try:
            step()
        except Exception as e:  # noqa: BLE001 - keep tearing down
            first = first or e
    if first:
        raise first


# --- tests --------------------------------------------------------------------------------------


def lifecycle(ctx, d, fs, size):
    v = Vol(ctx, d, "life-" + fs, size, mount_cap(fs))
    try:
        v.stage()
        dev = v.device()
        m = mount_at(v.staging)
        assert m and m["fstype"] == fs and m["source"] == dev, (m, dev)
        target = v.publish()
        m = mount_at(target)
        assert m and m["fstype"] == fs and m["source"] == dev and "rw" in m["vfs"], m
        digest = write_random(os.path.join(target, "payload"))
        os.makedirs(os.path.join(target, "dir"))

        v.unpublish()
        assert not os.path.exists(target), "target path removed"
        assert mount_at(target) is None
        v.unstage()
        assert mount_at(v.staging) is None
        assert_detached(v)

        v.stage()
        target = v.publish(v.target("pod2"))
        assert sha_of(os.path.join(target, "payload")) == digest, "same bytes after restage"
        assert os.path.isdir(os.path.join(target, "dir"))
        assert "made %s" % fs in d.logs() and d.logs().count("made %s" % fs) == 1, \
            "formatted exactly once"
    finally:
        safely(v.teardown)
    assert_detached(v)
    assert mounts_under(v.pods) == [] and mounts_under(v.staging) == []


@node_test
def test_lifecycle_ext4(ctx):
    lifecycle(ctx, ctx.daemon(), "ext4", 64 * MiB)


@node_test
def test_lifecycle_xfs(ctx):
    lifecycle(ctx, ctx.daemon(), "xfs", XFS_MIN)


@node_test
def test_mkfs_options_from_storage_class(ctx):
    d = ctx.daemon()
    v = Vol(ctx, d, "opts", 64 * MiB, mount_cap("ext4"),
            params={"blockSize": "1024", "inodeSize": "256", "bytesPerInode": "8192"})
    assert v.context.get("blockSize") == "1024" and v.context.get("inodeSize") == "256", v.context
    try:
        v.stage()
        sb = tool("dumpe2fs", "-h", v.device())
        assert re.search(r"^Block size:\s+1024$", sb, re.M), sb
        assert re.search(r"^Inode size:\s+256$", sb, re.M), sb
        # 1 KiB blocks need a device whose blocks are no larger: it has them, and direct I/O.
        assert loop_attr(v.device(), "queue/logical_block_size") == "1024"
        assert loop_attr(v.device(), "loop/dio") == "1"
        inodes = int(re.search(r"^Inode count:\s+(\d+)$", sb, re.M).group(1))
        assert abs(inodes - v.size // 8192) <= v.size // 8192 // 10, (inodes, v.size)
    finally:
        safely(v.teardown)

    # A StorageClass option that does not fit the fstype never reaches mkfs.
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="bad",
                   capacity_range={"required_bytes": XFS_MIN},
                   volume_capabilities=[mount_cap("xfs")], parameters={"bytesPerInode": "8192"},
                   match="bytesPerInode")


def fs_features(dev):
    """The words of dumpe2fs -h's "Filesystem features:" line."""
    sb = tool("dumpe2fs", "-h", dev)
    m = re.search(r"^Filesystem features:\s+(.*)$", sb, re.M)
    assert m, sb
    return m.group(1).split()


@node_test
def test_ext4_fast_commit_from_storage_class(ctx):
    d = ctx.daemon()
    fast = Vol(ctx, d, "fast", 64 * MiB, mount_cap("ext4"),
               params={"csi.storage.k8s.io/fstype": "ext4", "ext4FastCommit": "true"})
    assert fast.context.get("ext4FastCommit") == "true", fast.context
    plain = Vol(ctx, d, "plain", 64 * MiB, mount_cap("ext4"),
                params={"csi.storage.k8s.io/fstype": "ext4"})
    assert "ext4FastCommit" not in plain.context, plain.context
    try:
        fast.stage()
        plain.stage()
        features = fs_features(fast.device())
        assert "fast_commit" in features and "has_journal" in features, features
        assert "fast_commit" not in fs_features(plain.device()), fs_features(plain.device())
        # The kernel mounted it read-write and takes an append + fdatasync.
        assert "rw" in mount_at(fast.staging)["vfs"], mount_at(fast.staging)
        target = fast.publish()
        path = os.path.join(target, "log")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            for _ in range(16):
                os.write(fd, b"x" * 4096)
                os.fdatasync(fd)
        finally:
            os.close(fd)
        assert os.path.getsize(path) == 16 * 4096
        # The kernel's own count: the fdatasyncs were fast commits, not full jbd2 commits.
        with open("/proc/fs/ext4/%s/fc_info" % os.path.basename(fast.device())) as f:
            fc_info = f.read()
        commits = int(re.search(r"^(\d+) commits$", fc_info, re.M).group(1))
        assert commits > 0, fc_info
    finally:
        safely(fast.teardown, plain.teardown)
    tool("e2fsck", "-fn", fast.data)

    # Only ext4 has fast commits: with xfs it never reaches mkfs.
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="fast-xfs",
                   capacity_range={"required_bytes": XFS_MIN},
                   volume_capabilities=[mount_cap("xfs")],
                   parameters={"csi.storage.k8s.io/fstype": "xfs", "ext4FastCommit": "true"},
                   match="ext4FastCommit: not accepted with fstype xfs")
    return "%d fast commits for 16 appends" % commits


@node_test
def test_existing_filesystem_is_never_reformatted(ctx):
    d = ctx.daemon()
    v = Vol(ctx, d, "keep", XFS_MIN, mount_cap("ext4"))
    try:
        v.stage()
        digest = write_random(os.path.join(v.staging, "precious"))
        v.unstage()
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodeStageVolume",
                           volume_id=v.id, staging_target_path=v.staging,
                           volume_capability=mount_cap("xfs"), volume_context={})
        assert "ext4" in e.details() and "xfs" in e.details() and v.id in e.details(), e.details()
        assert mount_at(v.staging) is None, "nothing mounted after the refusal"
        assert_detached(v)  # a failed stage does not leave its loop device behind
        assert d.logs().count("made ext4") == 1 and "made xfs" not in d.logs()
        v.stage()
        assert mount_at(v.staging)["fstype"] == "ext4"
        assert sha_of(os.path.join(v.staging, "precious")) == digest
    finally:
        safely(v.teardown)


@node_test
def test_mount_flags_and_read_only_publish(ctx):
    d = ctx.daemon()
    cap = mount_cap("ext4", flags=["noatime"])
    v = Vol(ctx, d, "flags", 64 * MiB, cap)
    try:
        v.stage()
        assert "noatime" in mount_at(v.staging)["vfs"], mount_at(v.staging)
        rw = v.publish()
        assert "noatime" in mount_at(rw)["vfs"] and "rw" in mount_at(rw)["vfs"], mount_at(rw)
        with open(os.path.join(rw, "hello"), "w") as f:
            f.write("hello")
        ro = v.publish(v.target("reader"), readonly=True)
        m = mount_at(ro)
        assert "ro" in m["vfs"] and "noatime" in m["vfs"], m
        assert open(os.path.join(ro, "hello")).read() == "hello"
        try:
            open(os.path.join(ro, "nope"), "w").close()
            raise AssertionError("a file was created through a read-only publish")
        except OSError as e:
            assert e.errno == errno.EROFS, e
        assert "rw" in mount_at(rw)["vfs"], "the writable target stays writable"
        d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodePublishVolume", volume_id=v.id,
                       staging_target_path=v.staging, target_path=v.target("bad"),
                       volume_capability=mount_cap("ext4", flags=["noatime,nodev"]),
                       match="mount_flags[0]")
        assert not os.path.exists(v.target("bad"))
    finally:
        safely(v.teardown)


@node_test
def test_raw_block_volume(ctx):
    d = ctx.daemon(args=FAST)
    v = Vol(ctx, d, "raw", 16 * MiB, block_cap())
    try:
        v.stage()
        dev = v.device()
        assert mount_at(v.staging) is None, "a block volume is not mounted at staging"
        target = v.publish()
        st = os.stat(target)
        assert stat.S_ISBLK(st.st_mode) and st.st_rdev == os.stat(dev).st_rdev, (target, dev)
        assert mount_at(target) is not None, "the device node is bind-mounted on the target"
        v.publish()  # again: same answer, nothing stacked
        assert len([m for m in mounts_under(target) if m["target"] == target]) == 1

        data = os.urandom(64 * 1024)
        fd = os.open(target, os.O_RDWR)
        try:
            os.pwrite(fd, data, 5 * MiB)
            os.fsync(fd)
            assert os.lseek(fd, 0, os.SEEK_END) == v.size
        finally:
            os.close(fd)
        with open(v.data, "rb") as f:
            f.seek(5 * MiB)
            assert f.read(len(data)) == data, "the bytes reached the pool's data file"

        stats = to_dict(d.call("NodeGetVolumeStats", volume_id=v.id, volume_path=target))
        assert stats["usage"] == [{"unit": "BYTES", "total": str(v.size)}], stats
        assert stats["volume_condition"].get("abnormal", False) is False, stats

        # Block expansion: the loop device follows the grown file.
        assert v.expand(24 * MiB).node_expansion_required, "the loop device must be refreshed"
        reply = d.call("NodeExpandVolume", volume_id=v.id, volume_path=target,
                       capacity_range={"required_bytes": 24 * MiB}, volume_capability=v.cap)
        assert reply.capacity_bytes == 24 * MiB, reply
        fd = os.open(target, os.O_RDONLY)
        try:
            assert os.lseek(fd, 0, os.SEEK_END) == 24 * MiB
        finally:
            os.close(fd)

        v.unpublish()
        assert not os.path.lexists(target), "unpublish removes the file"
        v.unstage()
        assert_detached(v)
        v.stage()
        target = v.publish(v.target("again"))
        with open(target, "rb") as f:
            f.seek(5 * MiB)
            assert f.read(len(data)) == data, "same bytes after restage"
    finally:
        safely(v.teardown)
    assert_detached(v)


@node_test
def test_access_modes_on_the_pools_node(ctx):
    """SINGLE_NODE_SINGLE_WRITER: one workload, so one target path (FAILED_PRECONDITION for a
    second, nothing mounted there); SINGLE_NODE_MULTI_WRITER and MULTI_NODE_MULTI_WRITER:
    several targets on the pool's one node."""
    d = ctx.daemon(args=FAST)
    one = Vol(ctx, d, "rwop", 16 * MiB, mount_cap(mode="SINGLE_NODE_SINGLE_WRITER"))
    many = None
    try:
        one.stage()
        first = one.publish()
        one.publish()  # the same target again: fine
        second = one.target("pod2")
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume",
                           volume_id=one.id, staging_target_path=one.staging,
                           target_path=second, volume_capability=one.cap,
                           volume_context=one.context)
        assert "is published at '%s' and its access mode SINGLE_NODE_SINGLE_WRITER allows one " \
            "target path" % first in e.details(), e.details()
        assert mount_at(second) is None and not os.path.lexists(second), "nothing made there"
        many = Vol(ctx, d, "rwx", 16 * MiB, mount_cap(mode="MULTI_NODE_MULTI_WRITER"))
        many.stage()
        t1, t2 = many.publish(), many.publish(many.target("pod2"))
        assert mount_at(t1) is not None and mount_at(t2) is not None
    finally:
        safely(one.teardown, *([many.teardown] if many else []))
    assert_detached(one)
    if many:
        assert_detached(many)


@node_test
def test_idempotency_and_conflicts(ctx):
    d = ctx.daemon()
    a = Vol(ctx, d, "a", 32 * MiB)
    b = Vol(ctx, d, "b", 32 * MiB)
    try:
        a.stage()
        a.stage()  # same volume, same path: OK, nothing stacked
        assert len([m for m in mounts_under(a.staging) if m["target"] == a.staging]) == 1
        t = a.publish()
        a.publish()
        assert len([m for m in mounts_under(t) if m["target"] == t]) == 1

        # Another volume's mount is in the way: left alone, and the reply says what is there.
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodeStageVolume",
                           volume_id=b.id, staging_target_path=a.staging,
                           volume_capability=b.cap, volume_context=b.context,
                           match="staging_target_path")
        assert a.staging in e.details(), e.details()
        assert mount_at(a.staging)["source"] == a.device(), "a's mount untouched"
        assert_detached(b)

        # Not staged at all, or the target holds another volume.
        d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume", volume_id=b.id,
                       staging_target_path=b.staging, target_path=b.target(),
                       volume_capability=b.cap, match="not staged")
        assert not os.path.exists(b.target())
        b.stage()
        d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume",
                       volume_id=b.id, staging_target_path=b.staging, target_path=t,
                       volume_capability=b.cap, match="target_path")
        d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume", volume_id=b.id,
                       staging_target_path=a.staging, target_path=b.target(),
                       volume_capability=b.cap, match="not staged")
        b.unstage()

        # Nothing to do is success.
        b.unstage()
        b.unpublish()
        d.call("NodeUnpublishVolume", volume_id=b.id, target_path=os.path.join(ctx.tmp, "never"))
        d.call("NodeUnstageVolume", volume_id="vol-0000000000000000",
               staging_target_path=os.path.join(ctx.tmp, "never"))

        unknown = {"volume_id": "vol-0000000000000000", "staging_target_path": b.staging,
                   "volume_capability": b.cap}
        d.expect_error(grpc.StatusCode.NOT_FOUND, "NodeStageVolume", unknown,
                       match="vol-0000000000000000 not found")
        d.expect_error(grpc.StatusCode.NOT_FOUND, "NodePublishVolume",
                       dict(unknown, target_path=b.target()),
                       match="vol-0000000000000000 not found")
        assert not os.path.exists(b.target()) and mount_at(b.staging) is None
    finally:
        safely(a.teardown, b.teardown)


@node_test
def test_bad_paths_are_refused(ctx):
    d = ctx.daemon()
    v = Vol(ctx, d, "paths", 32 * MiB)
    elsewhere = os.path.join(ctx.tmp, "elsewhere")
    os.makedirs(elsewhere)
    os.symlink(elsewhere, os.path.join(ctx.tmp, "link"))
    bad = [
        ("relative/stage", "not an absolute path"),
        (os.path.join(ctx.tmp, "plugins", "..", "stage"), "not a clean absolute path"),
        (os.path.join(ctx.tmp, "link", "stage"), "goes through a symlink"),
        (os.path.join(ctx.tmp, "link"), "symlink"),
    ]
    try:
        for path, why in bad:
            e = d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodeStageVolume", volume_id=v.id,
                               staging_target_path=path, volume_capability=v.cap,
                               match="staging_target_path")
            assert why in e.details(), (path, e.details())
            e = d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodeUnstageVolume",
                               volume_id=v.id, staging_target_path=path,
                               match="staging_target_path")
            assert why in e.details(), (path, e.details())
        assert_detached(v)  # refused before anything was attached
        v.stage()
        for path, why in bad:
            e = d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodePublishVolume",
                               volume_id=v.id, staging_target_path=v.staging, target_path=path,
                               volume_capability=v.cap, match="target_path")
            assert why in e.details(), (path, e.details())
            e = d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodeUnpublishVolume",
                               volume_id=v.id, target_path=path, match="target_path")
            assert why in e.details(), (path, e.details())
        assert os.listdir(elsewhere) == [] and mounts_under(elsewhere) == []
        assert os.path.islink(os.path.join(ctx.tmp, "link")), "the symlink was not removed"
        d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodeStageVolume", volume_id="",
                       staging_target_path=v.staging, volume_capability=v.cap, match="volume_id")
    finally:
        safely(v.teardown)


@node_test
def test_expand_xfs_online(ctx):
    d = ctx.daemon(args=FAST)
    v = Vol(ctx, d, "grow-xfs", XFS_MIN, mount_cap("xfs"))
    try:
        v.stage()
        target = v.publish()
        digest = write_random(os.path.join(target, "before"))
        before = fs_bytes(target)
        assert before <= XFS_MIN, before
        new = XFS_MIN + 200 * MiB
        assert v.expand(new).node_expansion_required
        reply = d.call("NodeExpandVolume", volume_id=v.id, volume_path=target,
                       staging_target_path=v.staging, capacity_range={"required_bytes": new},
                       volume_capability=v.cap)
        assert reply.capacity_bytes == new, reply
        after = fs_bytes(target)
        assert before + 190 * MiB <= after <= new, (before, after, new)
        stats = to_dict(d.call("NodeGetVolumeStats", volume_id=v.id, volume_path=target))
        assert int(stats["usage"][0]["total"]) == after, (stats, after)
        assert sha_of(os.path.join(target, "before")) == digest
        write_random(os.path.join(target, "after"), 8 * MiB)
        # Asking again is cheap and changes nothing.
        d.call("NodeExpandVolume", volume_id=v.id, volume_path=target,
               capacity_range={"required_bytes": new}, volume_capability=v.cap)
        assert fs_bytes(target) == after
        d.expect_error(grpc.StatusCode.NOT_FOUND, "NodeExpandVolume", volume_id=v.id,
                       volume_path=os.path.join(ctx.tmp, "nowhere"), volume_capability=v.cap)
    finally:
        safely(v.teardown)


@node_test
def test_ext4_grown_while_unstaged_grows_at_stage(ctx):
    d = ctx.daemon(args=FAST)
    v = Vol(ctx, d, "grow-ext4", 64 * MiB, mount_cap("ext4"))
    try:
        v.stage()
        target = v.publish()
        digest = write_random(os.path.join(target, "before"))
        before = fs_bytes(target)
        v.teardown()
        v.targets = []
        v.expand(128 * MiB)
        v.stage()
        target = v.publish()
        after = fs_bytes(target)
        assert after >= before + 50 * MiB, (before, after)
        assert sha_of(os.path.join(target, "before")) == digest
        sb = tool("dumpe2fs", "-h", v.device())
        blocks = int(re.search(r"^Block count:\s+(\d+)$", sb, re.M).group(1))
        bsize = int(re.search(r"^Block size:\s+(\d+)$", sb, re.M).group(1))
        assert blocks * bsize == 128 * MiB, (blocks, bsize)
        # Staged again, its device is given the blocks the filesystem was made with.
        assert loop_attr(v.device(), "queue/logical_block_size") == str(bsize)
        assert loop_attr(v.device(), "loop/dio") == "1"
    finally:
        safely(v.teardown)


@node_test
def test_volume_stats_and_condition(ctx):
    d = ctx.daemon()
    v = Vol(ctx, d, "stats", 64 * MiB)
    try:
        v.stage()
        target = v.publish()
        write_random(os.path.join(target, "f"), 4 * MiB)
        stats = to_dict(d.call("NodeGetVolumeStats", volume_id=v.id, volume_path=target))
        usage = {u["unit"]: {k: int(x) for k, x in u.items() if k != "unit"}
                 for u in stats["usage"]}
        s = os.statvfs(target)
        assert usage["BYTES"]["total"] == s.f_blocks * s.f_frsize, (usage, s)
        assert usage["BYTES"]["available"] == s.f_bavail * s.f_frsize, (usage, s)
        assert usage["BYTES"]["used"] >= 4 * MiB, usage
        assert usage["INODES"]["total"] == s.f_files and usage["INODES"]["used"] >= 12, usage
        assert stats["volume_condition"].get("abnormal", False) is False, stats

        # The staging path reports the same filesystem.
        st = to_dict(d.call("NodeGetVolumeStats", volume_id=v.id, volume_path=v.staging))
        assert st["usage"][0]["total"] == stats["usage"][0]["total"], st

        tool("umount", target)  # somebody unmounted it behind our back
        stats = to_dict(d.call("NodeGetVolumeStats", volume_id=v.id, volume_path=target))
        cond = stats["volume_condition"]
        assert cond.get("abnormal") is True and "not mounted" in cond["message"], stats
        assert "usage" not in stats, stats

        d.expect_error(grpc.StatusCode.NOT_FOUND, "NodeGetVolumeStats", volume_id=v.id,
                       volume_path=os.path.join(ctx.tmp, "nowhere"))
        d.expect_error(grpc.StatusCode.NOT_FOUND, "NodeGetVolumeStats",
                       volume_id="vol-0000000000000000", volume_path=v.staging)
    finally:
        safely(v.teardown)


@node_test
def test_loop_devices_pass_direct_io(ctx):
    d = ctx.daemon()
    want = block_size_for(d.pool)
    ext4 = Vol(ctx, d, "dio-ext4", 256 * MiB, mount_cap("ext4"))
    xfs = Vol(ctx, d, "dio-xfs", XFS_MIN, mount_cap("xfs"))
    raw = Vol(ctx, d, "dio-raw", 16 * MiB, block_cap())
    try:
        for v in (ext4, xfs, raw):
            v.stage()
        # Filesystems get the blocks of the pool's filesystem; raw block volumes keep 512.
        for v, size in ((ext4, want), (xfs, want), (raw, 512)):
            assert loop_attr(v.device(), "loop/dio") == "1", v.id
            assert loop_attr(v.device(), "queue/logical_block_size") == str(size), v.id
        sb = tool("dumpe2fs", "-h", ext4.device())
        assert int(re.search(r"^Block size:\s+(\d+)$", sb, re.M).group(1)) == max(want, 1024)
        info = tool("xfs_info", xfs.staging)
        assert re.search(r"sectsz=%d\b" % want, info), info

        # Bytes moved with direct I/O inside the volume do not pass the host's page cache:
        # the data file holds them, its cached pages do not grow.
        for v in (ext4, xfs):
            target = v.publish()
            before = cached(v.data)
            assert write_direct(os.path.join(target, "direct"), 64 * MiB) == 0
            assert allocated(v.data) >= 64 * MiB, allocated(v.data)
            grown = cached(v.data) - before
            assert grown < 64 * MiB // 20, "the data file's cache grew by %d bytes" % grown
            cond = condition(d, v.id, target)
            assert cond == {"message": "volume is mounted and writable"}, cond
    finally:
        safely(ext4.teardown, xfs.teardown, raw.teardown)


@node_test
def test_volumes_staged_before_direct_io_keep_working(ctx):
    d = ctx.daemon()
    v = Vol(ctx, d, "old-xfs", XFS_MIN, mount_cap("xfs"))
    mnt = os.path.join(ctx.tmp, "by-hand")
    os.makedirs(mnt)
    dev = None
    try:
        # What an earlier volplug left: the data file formatted on a buffered loop device of
        # 512-byte blocks, and still attached that way.
        dev = tool("losetup", "--find", "--show", "--direct-io=off", v.data).strip()
        tool("mkfs.xfs", "-q", dev)
        tool("mount", dev, mnt)
        digest = write_random(os.path.join(mnt, "old"))
        tool("umount", mnt)

        v.stage()
        assert v.device() == dev and loop_attr(dev, "loop/dio") == "0", "taken as it is"
        target = v.publish()
        assert sha_of(os.path.join(target, "old")) == digest
        cond = condition(d, v.id, target)
        assert cond.get("abnormal", False) is False, cond
        assert cond["message"].startswith("volume is mounted and writable; its loop device %s "
                                          "works without direct I/O" % dev), cond
        v.teardown()
        assert_detached(v)
        dev = None

        # The next stage asks for direct I/O, with the 512-byte sectors its xfs was made with.
        v.targets = []
        v.stage()
        dev2 = v.device()
        assert loop_attr(dev2, "loop/dio") == "1"
        assert loop_attr(dev2, "queue/logical_block_size") == "512"
        target = v.publish()
        assert sha_of(os.path.join(target, "old")) == digest
        assert condition(d, v.id, target) == {"message": "volume is mounted and writable"}
    finally:
        safely(v.teardown, *([lambda: tool("losetup", "-d", dev)] if dev else []))


@node_test
def test_deleted_files_give_their_space_back(ctx):
    d = ctx.daemon(args=["--trim-interval", "1s"])
    made = []

    def assert_pool_space():
        """pool check says every volume's size and what their data files hold (read again
        when the trimmer changed them meanwhile)."""
        for _ in range(3):
            want = sum(v.size for v in made), sum(allocated(v.data) for v in made)
            got = pool_space(d)
            if want == (sum(v.size for v in made), sum(allocated(v.data) for v in made)):
                break
        assert got == want, (got, want)

    for fs, size in (("ext4", 256 * MiB), ("xfs", XFS_MIN)):
        v = Vol(ctx, d, "trim-" + fs, size, mount_cap(fs))
        made.append(v)
        try:
            v.stage()
            target = v.publish()
            before = allocated(v.data)
            assert write_direct(os.path.join(target, "big"), 64 * MiB) == 0
            full = allocated(v.data)
            assert full >= before + 60 * MiB, (before, full)
            assert_pool_space()
            os.remove(os.path.join(target, "big"))
            os.sync()  # the deletion committed; the trimmer does the rest within its period
            t0 = time.monotonic()
            wait_for(lambda: allocated(v.data) <= full - 60 * MiB, timeout=10,
                     what="the data file of %s volume to shrink (%d bytes)" % (fs, allocated(v.data)))
            took = time.monotonic() - t0
            assert took < 5, "space back after %.1f s" % took
            assert_pool_space()
        finally:
            safely(v.teardown)


@node_test
def test_pool_refusing_direct_io_works_buffered(ctx):
    ramfs = os.path.join(ctx.tmp, "ramfs")
    os.makedirs(ramfs)
    tool("mount", "-t", "ramfs", "ramfs", ramfs)
    d = None
    try:
        d = ctx.daemon(pool=os.path.join(ramfs, "pool"), args=["--pool-capacity", "1G"])
        warned = [line for line in d.logs().splitlines() if "refuses direct I/O" in line]
        assert len(warned) == 1 and " warning " in warned[0], d.logs()
        v = Vol(ctx, d, "buffered", 64 * MiB)
        try:
            v.stage()
            assert loop_attr(v.device(), "loop/dio") == "0", "the kernel's fallback"
            target = v.publish()
            digest = write_random(os.path.join(target, "f"))
            assert sha_of(os.path.join(target, "f")) == digest
            cond = condition(d, v.id, target)
            assert cond.get("abnormal", False) is False and "without direct I/O" in cond["message"], cond
        finally:
            safely(v.teardown)
    finally:
        safely(*([d.stop] if d else []), lambda: tool("umount", ramfs))


@node_test
def test_pool_on_tmpfs_says_what_its_devices_got(ctx):
    """tmpfs takes direct I/O since Linux 6.6 and refused it before: whichever the kernel does,
    the warning at start and the volume's condition say what sysfs says the device got."""
    tmpfs = os.path.join(ctx.tmp, "tmpfs")
    os.makedirs(tmpfs)
    tool("mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", tmpfs)
    d = None
    try:
        d = ctx.daemon(pool=os.path.join(tmpfs, "pool"))
        v = Vol(ctx, d, "on-tmpfs", 64 * MiB)
        try:
            v.stage()
            direct = loop_attr(v.device(), "loop/dio") == "1"
            warned = [line for line in d.logs().splitlines() if "refuses direct I/O" in line]
            assert len(warned) == (0 if direct else 1), (direct, d.logs())
            target = v.publish()
            digest = write_random(os.path.join(target, "f"))
            assert sha_of(os.path.join(target, "f")) == digest
            cond = condition(d, v.id, target)
            assert cond.get("abnormal", False) is False, cond
            assert ("without direct I/O" in cond["message"]) == (not direct), (direct, cond)
        finally:
            safely(v.teardown)
        return "direct I/O on tmpfs: %s" % ("yes" if direct else "no, buffered")
    finally:
        safely(*([d.stop] if d else []), lambda: tool("umount", tmpfs))


@node_test
def test_full_pool_under_a_thin_volume(ctx):
    """A pool provisioned beyond its filesystem (--overprovision-ratio), filled for real by a
    volume's writes: the writer gets an error, never silently lost data, and the pool says why
    in the volumes' conditions, CreateVolume and GetCapacity until space comes back."""
    image = os.path.join(ctx.tmp, "poolfs.img")
    mnt = os.path.join(ctx.tmp, "poolfs")
    os.makedirs(mnt)
    with open(image, "wb") as f:
        f.truncate(192 * MiB)
    tool("mkfs.ext4", "-q", "-m", "0", image)
    tool("mount", "-o", "loop", image, mnt)
    d = None
    try:
        d = ctx.daemon(pool=os.path.join(mnt, "pool"),
                       args=["--overprovision-ratio", "4", "--trim-interval", "1s"] + FAST)
        v = Vol(ctx, d, "thin", 256 * MiB)  # larger than the pool's whole filesystem
        other = d.call("CreateVolume", name="bystander", capacity_range={"required_bytes": 8 * MiB},
                       volume_capabilities=[mount_cap()]).volume.volume_id
        try:
            v.stage()
            target = v.publish()
            err = write_direct(os.path.join(target, "fill"), 224 * MiB)
            assert err in (errno.ENOSPC, errno.EIO), "the writer is told: %s" % errno.errorcode.get(err, err)

            cond = condition(d, v.id, target)
            assert cond.get("abnormal") is True, cond
            assert cond["message"].startswith("the pool's filesystem is full: "), cond
            assert "writes to its volumes that need new space fail" in cond["message"], cond
            for vid in (v.id, other):
                got = to_dict(d.call("ControllerGetVolume", volume_id=vid))["status"]
                c = got["volume_condition"]
                assert c.get("abnormal") is True and "the pool's filesystem is full" in c["message"], got
            listed = to_dict(d.call("ListVolumes"))["entries"]
            assert sorted(e["volume"]["volume_id"] for e in listed) == sorted([v.id, other]), listed
            for e in listed:
                c = e["status"]["volume_condition"]
                assert c.get("abnormal") is True and "the pool's filesystem is full" in c["message"], e
            d.expect_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "CreateVolume", name="more",
                           capacity_range={"required_bytes": 8 * MiB},
                           volume_capabilities=[mount_cap()],
                           match="capacity_range: the pool's filesystem is full: ")
            d.expect_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "CreateSnapshot", name="snap",
                           source_volume_id=other,
                           match="snapshot 'snap' of volume %s failed: the pool's filesystem "
                                 "is full: " % other)
            d.expect_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "ControllerExpandVolume",
                           volume_id=other, capacity_range={"required_bytes": 16 * MiB},
                           match="volume %s: growing it to 16777216 bytes: the pool's "
                                 "filesystem is full: " % other)
            assert d.call("GetCapacity").available_capacity == 0
        finally:
            safely(v.teardown)
        # Space comes back when a volume goes: the pool serves again.
        d.call("ControllerUnpublishVolume", volume_id=v.id, node_id="node-1")
        d.call("DeleteVolume", volume_id=v.id)
        got = to_dict(d.call("ControllerGetVolume", volume_id=other))["status"]["volume_condition"]
        assert got == {"message": "volume is healthy"}, got
        assert d.call("GetCapacity").available_capacity > 256 * MiB
        d.call("CreateVolume", name="more", capacity_range={"required_bytes": 8 * MiB},
               volume_capabilities=[mount_cap()])
    finally:
        safely(*([d.stop] if d else []), lambda: tool("umount", mnt))


@node_test
def test_node_info_and_capabilities(ctx):
    d = ctx.daemon(args=["--max-volumes-per-node", "7", "--zone", "zone-b"])
    info = to_dict(d.call("NodeGetInfo"))
    node = {"segments": {"topology.volplug.io/node": "node-1", "topology.volplug.io/zone": "zone-b"}}
    assert info == {"node_id": "node-1", "max_volumes_per_node": "7",
                    "accessible_topology": node}, info
    caps = to_dict(d.call("NodeGetCapabilities"))["capabilities"]
    types = [c["rpc"]["type"] for c in caps]
    assert sorted(types) == sorted(["STAGE_UNSTAGE_VOLUME", "EXPAND_VOLUME", "GET_VOLUME_STATS",
                                    "VOLUME_CONDITION", "SINGLE_NODE_MULTI_WRITER",
                                    "VOLUME_MOUNT_GROUP"]), types
    assert len(types) == 6, types


def crash_call(d, fn):
    """Runs fn, which must die with the daemon on a crash failpoint."""
    try:
        fn()
        raise AssertionError("the call succeeded; the failpoint did not fire")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNAVAILABLE, (e.code(), e.details())
    assert d.proc.wait(10) == -9, d.proc.returncode


@node_test
def test_kill9_mid_stage_and_mid_publish(ctx):
    def daemon(n, failpoint=None):
        env = {"VOLPLUG_FAILPOINTS": failpoint + "=crash"} if failpoint else {}
        return ctx.daemon(env=env, pool=pool, name="d%d" % n)

    first = ctx.daemon(name="d0")
    pool = first.pool
    v = Vol(ctx, first, "crashy", 64 * MiB)
    first.stop()
    try:
        d = v.d = daemon(1, "node-stage-after-attach")
        crash_call(d, v.stage)
        dev = v.device()
        assert mount_at(v.staging) is None

        # The kubelet may clean up an uncertain stage instead of retrying it.
        d = v.d = daemon(2, "node-stage-after-mkfs")
        v.unstage()
        assert_detached(v)
        crash_call(d, v.stage)
        dev = v.device()
        assert tool("blkid", "-o", "value", "-s", "TYPE", dev).strip() == "ext4"
        assert mount_at(v.staging) is None

        # Killed after mkfs, before its mark said done: the retry makes the filesystem again
        # (nothing was ever mounted on it), and says so.
        d = v.d = daemon(3, "node-publish-after-mount")
        v.stage()
        assert "an interrupted mkfs left" in d.logs() and "made ext4" in d.logs(), d.logs()
        assert mount_at(v.staging)["source"] == dev
        crash_call(d, v.publish)
        assert mount_at(v.target())["source"] == dev

        d = v.d = daemon(4)
        target = v.publish()
        assert len([m for m in mounts_under(target) if m["target"] == target]) == 1
        digest = write_random(os.path.join(target, "survivor"))
        v.teardown()
        assert_detached(v)
        assert loops_under(pool) == {} and mounts_under(ctx.tmp) == [], (loops_under(pool),
                                                                        mounts_under(ctx.tmp))
        v.targets = []
        v.stage()
        assert "made ext4" not in d.logs(), "a filesystem marked done is never made again"
        assert sha_of(os.path.join(v.publish(), "survivor")) == digest
    finally:
        safely(v.teardown)
    assert loops_under(pool) == {} and mounts_under(ctx.tmp) == []


@node_test
def test_kill9_during_mkfs_leaves_no_mkfs(ctx):
    # 1 KiB blocks on 1 TiB: mkfs.ext4 takes seconds, a window that is easy to catch. A pool
    # promises no more than its disk has free, so the data file is made that large by hand
    # (sparse: the disk does not notice); the loop device takes the file's size.
    d = ctx.daemon(name="d0")
    v = Vol(ctx, d, "huge", 64 * MiB, params={"blockSize": "1024"})
    os.truncate(v.data, 1 << 40)
    try:
        t, stage = in_background(v.stage)
        mkfs = wait_for(lambda: [p for p in processes(ppid=d.proc.pid)
                                 if os.path.basename(p["args"][0]) == "mkfs.ext4"],
                        what="volplugd to run mkfs.ext4")[0]
        d.proc.kill()
        assert d.proc.wait(10) == -9, d.proc.returncode
        t.join(10)
        assert stage["error"].code() == grpc.StatusCode.UNAVAILABLE, stage
        wait_for(lambda: process(mkfs["pid"]) is None, timeout=1,
                 what="mkfs.ext4 (pid %d) to die with volplugd" % mkfs["pid"])
        dev = v.device()
        assert not [p for p in processes() if dev in p["args"]], "nothing holds %s" % dev

        d = v.d = ctx.daemon(name="d1", pool=d.pool)
        v.stage()
        m = mount_at(v.staging)
        assert m and m["source"] == dev and m["fstype"] == "ext4", m
        assert "made ext4" in d.logs(), "the volume was formatted by the retry"
        children = os.path.join(d.pool, "run", "children")
        assert len(os.listdir(children)) == 1, "the dead daemon's records are gone: %s" % \
            os.listdir(children)
        assert "left running by a volplugd that died" not in d.logs(), \
            "nothing was left for the new daemon to kill"
    finally:
        safely(v.teardown)


def mkfs_children(d, fstype):
    """The mkfs.<fstype> volplugd runs now: [pid] or []. Reads only the daemon's children
    (fast: a mkfs may run for less than 100 ms)."""
    for children in glob.glob("/proc/%d/task/*/children" % d.proc.pid):
        try:
            with open(children) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            continue
        for pid in pids:
            p = process(pid)
            if p and p["args"] and os.path.basename(p["args"][0]) == "mkfs." + fstype:
                return [pid]
    return []


def wait_for_mkfs(d, fstype, stage_thread, timeout=30):
    """The pid of the mkfs.<fstype> volplugd runs for the stage in stage_thread, or None when
    that stage ended first (a mkfs of a few milliseconds can run between two looks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = mkfs_children(d, fstype)
        if found:
            return found[0]
        if not stage_thread.is_alive():
            return None
    raise AssertionError("timed out waiting for volplugd to run mkfs." + fstype)


def kill_during_mkfs(ctx, fstype, size, points, params=None):
    """Kills volplugd (SIGKILL; its mkfs dies with it) at `points` moments spread over a real
    mkfs of fstype, restarts it on the same pool and retries NodeStageVolume, which must mount a
    whole filesystem every time. Returns (kill points, how many left a signature blkid sees,
    how many of those the retry made again, how many retries failed)."""
    # Sparse volumes large enough for mkfs to run a while: thin, whatever the disk has free.
    args = ["--overprovision-ratio", "100"]
    d = ctx.daemon(name="d0", args=args)
    pool = d.pool
    cap = mount_cap(fstype)
    # How long mkfs runs here: the kill points spread over that (and a little past it).
    v = Vol(ctx, d, "timing", size, cap=cap, params=params, controller_publish=False)
    t, stage = in_background(v.stage)
    start = time.monotonic()
    mkfs = wait_for_mkfs(d, fstype, t)
    if mkfs is not None:
        start = time.monotonic()
        wait_for(lambda: process(mkfs) is None, timeout=60, what="mkfs to end")
    duration = time.monotonic() - start
    t.join(60)
    assert "value" in stage, stage
    v.unstage()
    d.call("DeleteVolume", volume_id=v.id)

    half_made = made_again = failed = 0
    failures = []
    for i in range(points):
        delay = duration * 1.2 * i / points
        v = Vol(ctx, d, "kill-%d" % i, size, cap=cap, params=params, controller_publish=False)
        t, stage = in_background(v.stage)
        wait_for_mkfs(d, fstype, t)  # None: the kill falls after mkfs, a point as good
        time.sleep(delay)
        d.proc.kill()
        assert d.proc.wait(10) == -9, d.proc.returncode
        t.join(30)
        wait_for(lambda: not [p for p in processes() if v.device() in p["args"]], timeout=5,
                 what="nothing to hold the device")
        dev = v.device()
        left = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", dev],
                              capture_output=True, text=True).stdout.strip()
        d = v.d = ctx.daemon(name="d%d" % (i + 1), pool=pool, args=args)
        try:
            v.stage()
        except grpc.RpcError as e:
            failed += 1
            failures.append("kill %d (%.0f ms, blkid: %r): %s: %s" % (
                i, delay * 1000, left, e.code().name, e.details()))
            subprocess.run(["losetup", "-d", dev], capture_output=True)
            d.call("DeleteVolume", volume_id=v.id)
            continue
        half_made += left == fstype
        made_again += "an interrupted mkfs left" in d.logs()
        m = mount_at(v.staging)
        assert m and m["source"] == dev and m["fstype"] == fstype, m
        with open(os.path.join(v.staging, "written"), "w") as f:
            f.write("after kill %d\n" % i)
        v.unstage()
        assert_detached(v)
        # The filesystem is whole: its own checker finds nothing, and it keeps what was written.
        check = (["xfs_repair", "-n", "-f", v.data] if fstype == "xfs"
                 else ["e2fsck", "-f", "-n", v.data])
        p = subprocess.run(check, capture_output=True, text=True)
        assert p.returncode == 0, "kill %d: %s: %s" % (i, " ".join(check), p.stdout + p.stderr)
        v.stage()
        with open(os.path.join(v.staging, "written")) as f:
            assert f.read() == "after kill %d\n" % i
        v.unstage()
        d.call("DeleteVolume", volume_id=v.id)
    assert not failures, "%d of %d retries failed:\n%s" % (failed, points, "\n".join(failures))
    return "%d kill points over %.0f ms of mkfs.%s: %d left a %s signature, %d made again" % (
        points, duration * 1000, fstype, half_made, fstype, made_again)


@node_test
def test_kill9_during_mkfs_xfs_never_wedges(ctx):
    return kill_during_mkfs(ctx, "xfs", 2 << 30, 16)


@node_test
def test_kill9_during_mkfs_ext4_never_wedges(ctx):
    # 1 KiB blocks: more for mkfs.ext4 to write, a longer window.
    return kill_during_mkfs(ctx, "ext4", 16 << 30, 16, params={"blockSize": "1024"})


@node_test
def test_raw_stage_takes_the_mark_of_a_half_made_filesystem(ctx):
    """A volume whose mkfs was killed, then staged for raw block access, is the user's: a later
    filesystem stage never makes it again."""
    first = ctx.daemon(name="d0")
    pool = first.pool
    v = Vol(ctx, first, "raw-after-crash", 64 * MiB)
    first.stop()
    try:
        d = v.d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "node-stage-after-mkfs=crash"}, pool=pool,
                             name="d1")
        crash_call(d, v.stage)
        dev = v.device()
        d = v.d = ctx.daemon(pool=pool, name="d2")
        v.unstage()
        assert_detached(v)
        raw = block_cap()
        v.stage(cap=raw)
        target = v.publish(cap=raw)
        data = os.urandom(4096)
        fd = os.open(target, os.O_RDWR)
        try:
            os.pwrite(fd, data, v.size - 4096)
            os.fsync(fd)
        finally:
            os.close(fd)
        v.unpublish(target)
        v.targets = []
        v.unstage()
        assert_detached(v)
        v.stage()
        dev = v.device()
        assert "an interrupted mkfs left" not in d.logs() and "made ext4" not in d.logs(), \
            "what the user had raw is never formatted"
        with open(v.data, "rb") as f:
            f.seek(v.size - 4096)
            assert f.read() == data, "the user's bytes are where they were written"
        assert mount_at(v.staging)["source"] == dev
    finally:
        safely(v.teardown)


@node_test
def test_unstage_where_not_staged_is_ok(ctx):
    """NodeUnstageVolume at a path where nothing of the volume is staged answers OK (CSI: the
    call is idempotent) and changes nothing: not the staging elsewhere, not its device, not
    what is at the path."""
    d = ctx.daemon()
    v = Vol(ctx, d, "fs", 32 * MiB)
    raw = Vol(ctx, d, "raw", 16 * MiB, block_cap())
    tmpfs = os.path.join(ctx.tmp, "foreign")
    empty = os.path.join(ctx.tmp, "plugins", "empty")
    os.makedirs(tmpfs)
    os.makedirs(empty)
    tool("mount", "-t", "tmpfs", "-o", "size=1m", "foreign", tmpfs)
    with open(os.path.join(tmpfs, "data"), "w") as f:
        f.write("precious\n")
    elsewhere = [os.path.join(ctx.tmp, "plugins", "never-made"), empty, tmpfs, v.staging]
    answers = []
    try:
        v.stage()
        target = v.publish()
        dev = v.device()
        raw.stage()
        raw_dev = raw.device()
        for vol, paths in ((v, elsewhere[:3]), (raw, elsewhere)):
            for path in paths:
                try:
                    vol.d.call("NodeUnstageVolume", volume_id=vol.id, staging_target_path=path)
                    answers.append("OK")
                except grpc.RpcError as e:
                    answers.append("%s at %s: %s" % (e.code().name, path, e.details()))
        assert answers == ["OK"] * len(answers), answers
        assert not os.path.exists(elsewhere[0]) and os.listdir(empty) == []
        assert mount_at(tmpfs)["fstype"] == "tmpfs"
        with open(os.path.join(tmpfs, "data")) as f:
            assert f.read() == "precious\n"
        assert mount_at(v.staging)["source"] == dev and mount_at(target)["source"] == dev
        assert raw.device() == raw_dev, "the raw volume's loop device stays attached"
        raw_target = raw.publish()
        assert stat.S_ISBLK(os.stat(raw_target).st_mode)
        # Its own staging path still unstages it.
        v.teardown()
        raw.teardown()
        assert_detached(v)
        assert_detached(raw)
    finally:
        safely(v.teardown, raw.teardown, lambda: tool("umount", tmpfs))
    return "%d unstages elsewhere: all OK" % len(answers)


def entries(root):
    """(relative path, lstat) for every entry below root, root included."""
    out = [(".", os.lstat(root))]
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(top, name)
            out.append((os.path.relpath(p, root), os.lstat(p)))
    return out


def as_user(uid, gid, script):
    return subprocess.run(["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups",
                           "sh", "-c", script], capture_output=True, text=True)


def group_lines(d, vid):
    return [line for line in d.logs().splitlines() if "volume %s: group" % vid in line]


@node_test
def test_volume_mount_group(ctx):
    os.chmod(ctx.tmp, 0o755)  # let the pod's user reach the target path
    d = ctx.daemon()
    v = Vol(ctx, d, "owned", 64 * MiB, mount_cap("ext4", group="4242"),
            params={"fsGroupChangePolicy": "OnRootMismatch"})
    assert v.context.get("fsGroupChangePolicy") == "OnRootMismatch", v.context
    os.chmod(os.path.join(ctx.tmp, "plugins"), 0o755)
    try:
        v.stage()
        # Files made by root, as an image or an earlier pod would leave them.
        os.makedirs(os.path.join(v.staging, "data", "deep"))
        with open(os.path.join(v.staging, "data", "deep", "f"), "w") as f:
            f.write("root's")
        os.chmod(os.path.join(v.staging, "data", "deep", "f"), 0o604)
        os.symlink("/etc/passwd", os.path.join(v.staging, "data", "link"))
        passwd = os.stat("/etc/passwd")

        target = v.publish()
        for rel, st in entries(target):
            if rel == "lost+found":
                continue
            assert st.st_gid == 4242 and st.st_uid == 0, (rel, st)
            if stat.S_ISLNK(st.st_mode):
                continue
            assert st.st_mode & 0o060 == 0o060, (rel, oct(st.st_mode))
            assert st.st_mode & 0o004, "bits are only added: %s %o" % (rel, st.st_mode)
            if stat.S_ISDIR(st.st_mode):
                assert st.st_mode & (stat.S_ISGID | 0o010) == stat.S_ISGID | 0o010, \
                    (rel, oct(st.st_mode))
        modes = {rel: stat.S_IMODE(st.st_mode) for rel, st in entries(target)}
        assert modes["data"] == 0o2775 and modes["data/deep/f"] == 0o664, modes
        assert os.stat("/etc/passwd").st_gid == passwd.st_gid, "a link's target is never changed"
        first = group_lines(d, v.id)
        assert len(first) == 1 and "(OnRootMismatch)" in first[0], first
        assert not re.search(r" 0 changed", first[0]), first[0]

        deep = os.path.join(target, "data", "deep")
        p = as_user(4243, 4242, "echo from-the-pod > %s/new && echo more >> %s/f" % (deep, deep))
        assert p.returncode == 0, p.stderr
        st = os.stat(os.path.join(target, "data", "deep", "new"))
        assert st.st_uid == 4243 and st.st_gid == 4242, st
        assert open(os.path.join(target, "data", "deep", "f")).read() == "root's" + "more\n"
        p = as_user(4243, 4343, "touch %s/data/outsider" % target)
        assert p.returncode != 0, "a user outside the group cannot write"

        # The root is right now: OnRootMismatch walks nothing, not even a new root-group file.
        v.unpublish()
        late = os.path.join(v.staging, "data", "late")
        with open(late, "w") as f:
            f.write("x")
        os.chown(late, 0, 0)  # not the setgid directory's group it inherited
        os.chmod(late, 0o600)
        target = v.publish()
        lines = group_lines(d, v.id)
        assert len(lines) == 2, lines
        assert re.search(r"\(OnRootMismatch\): \d+ entries, 0 changed", lines[1]), lines
        st = os.stat(os.path.join(target, "data", "late"))
        assert st.st_gid == 0 and stat.S_IMODE(st.st_mode) == 0o600, st

        # Always walks everything.
        v.unpublish()
        target = v.publish(context=dict(v.context, fsGroupChangePolicy="Always"))
        lines = group_lines(d, v.id)
        assert len(lines) == 3 and "(Always)" in lines[2], lines
        changed = int(re.search(r"(\d+) changed", lines[2]).group(1))
        assert changed >= 1, lines[2]
        st = os.stat(os.path.join(target, "data", "late"))
        assert st.st_gid == 4242 and stat.S_IMODE(st.st_mode) == 0o660, st
        d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodePublishVolume", volume_id=v.id,
                       staging_target_path=v.staging, target_path=v.target("bad"),
                       volume_capability=mount_cap("ext4", group="staff"),
                       match="volume_mount_group")
        assert not os.path.exists(v.target("bad")), "a refused publish mounts nothing"
    finally:
        safely(v.teardown)


# --- DeleteVolume and the node service, in two processes on one pool ---------------------------


def node_and_controller(ctx, controller_env=None):
    """A node process and a controller process of node-a on one pool, as a node plugin and the
    controller plugin of one machine are."""
    a = ctx.daemon(mode="node", name="a", node_id="node-a")
    b = ctx.daemon(mode="controller", pool=a.pool, name="b", env=controller_env, node_id="node-a")
    return a, b


@node_test
def test_delete_refused_while_staged(ctx):
    """A volume staged on this machine, never ControllerPublished: DeleteVolume is
    FAILED_PRECONDITION naming the node and the staging path, and takes nothing away; after
    NodeUnstageVolume it deletes, and no loop device is left."""
    a, b = node_and_controller(ctx)
    v = Vol(ctx, b, "staged-del", 64 * MiB, controller_publish=False)
    v.d = a
    try:
        v.stage()
        dev = v.device()
        digest = write_random(os.path.join(v.staging, "precious"))
        e = b.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "DeleteVolume", volume_id=v.id)
        want = "volume %s is staged on node node-a at %s: unstage it first" % (v.id, v.staging)
        assert want in e.details(), e.details()
        assert dev in e.details(), e.details()
        assert local_id(v.id) in os.listdir(os.path.join(a.pool, "volumes")), "the volume is still there"
        assert mount_at(v.staging)["source"] == dev, "still staged, on the same device"
        assert sha_of(os.path.join(v.staging, "precious")) == digest, "its data intact"
    finally:
        safely(v.teardown)
    assert_detached(v)
    b.call("DeleteVolume", volume_id=v.id)
    assert local_id(v.id) not in os.listdir(os.path.join(a.pool, "volumes"))
    assert loops_under(a.pool) == {}, "no loop device left: %s" % loops_under(a.pool)


@node_test
def test_two_processes_stage_never_races_delete(ctx):
    """Rounds of NodeStageVolume through the node process against DeleteVolume of the same
    volume through the controller process, started together. One wins; never both (a staged
    volume is never deleted, and a deleted one never staged). The delete sleeps 5 ms between
    its "is it in use?" check and the removal, to widen the window a stage would need; odd
    rounds stage a filesystem (mkfs and mount), even ones a raw block volume (only a loop
    device)."""
    a, b = node_and_controller(ctx, {"VOLPLUG_FAILPOINTS": "pool-delete-after-check=sleep(5ms)"})
    rounds, deleted, staged, both = 16, 0, 0, 0
    for i in range(rounds):
        cap = mount_cap() if i % 2 else block_cap()
        v = Vol(ctx, b, "race-%d" % i, 16 * MiB, cap=cap, controller_publish=False)
        v.d = a
        t_stage, stage = in_background(v.stage)
        t_delete, delete = in_background(b.call, "DeleteVolume", volume_id=v.id)
        t_stage.join(60)
        t_delete.join(60)
        if "error" not in stage and "error" not in delete:
            both += 1  # staged a volume that is gone: what is left is cleaned after the test
            continue
        if "error" not in delete:
            e = stage["error"]
            assert e.code() == grpc.StatusCode.NOT_FOUND and v.id in e.details(), \
                (e.code(), e.details())
            assert mount_at(v.staging) is None and loops_under(a.pool) == {}, \
                (mount_at(v.staging), loops_under(a.pool))
            deleted += 1
            continue
        e = delete["error"]
        assert "error" not in stage, (stage, e.details())
        assert e.code() == grpc.StatusCode.FAILED_PRECONDITION, (e.code(), e.details())
        assert "staged on node node-a at %s" % v.staging in e.details(), e.details()
        assert v.device() and local_id(v.id) in os.listdir(os.path.join(a.pool, "volumes"))
        staged += 1
        v.unstage()
        assert_detached(v)
        b.call("DeleteVolume", volume_id=v.id)
    assert both == 0, "%d of %d rounds: the stage and the delete both succeeded" % (both, rounds)
    assert deleted + staged == rounds
    assert os.listdir(os.path.join(a.pool, "volumes")) == []
    assert loops_under(a.pool) == {}, loops_under(a.pool)
    return "%d rounds: %d deleted first, %d staged first, %d both" % (rounds, deleted, staged,
                                                                       both)



@node_test
def test_staged_elsewhere_and_xfs_clone_beside_its_source(ctx):
    d = ctx.daemon()
    v = Vol(ctx, d, "src", XFS_MIN, cap=mount_cap("xfs"))
    clone = None
    try:
        v.stage()
        # Staged already: the reply says where, and runs no filesystem check on a mounted one.
        other = os.path.join(ctx.tmp, "plugins", "src", "second")
        os.makedirs(other)
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodeStageVolume",
                           volume_id=v.id, staging_target_path=other, volume_capability=v.cap,
                           volume_context=v.context, match="already")
        assert v.staging in e.details() and "check" not in e.details(), e.details()
        assert mount_at(other) is None and os.listdir(other) == []

        # A clone of a mounted xfs carries its UUID: it still mounts beside its source.
        target = v.publish()
        with open(os.path.join(target, "hello"), "w") as f:
            f.write("from the source\n")
        os.sync()
        snap = d.call("CreateSnapshot", name="snap-src", source_volume_id=v.id).snapshot
        clone = Vol(ctx, d, "clone", XFS_MIN, cap=mount_cap("xfs"),
                    source={"snapshot": {"snapshot_id": snap.snapshot_id}})
        clone.stage()
        copy = clone.publish()
        with open(os.path.join(copy, "hello")) as f:
            assert f.read() == "from the source\n"
        assert mount_at(v.staging) is not None, "the source stays mounted"
    finally:
        safely(*([clone.teardown] if clone else []), v.teardown)


@node_test
def test_pool_deleted_under_the_daemon(ctx):
    """The pool's directory removed while a volume is staged and published: Probe is not ready,
    GetCapacity has nothing, CreateVolume, DeleteVolume, ListVolumes and ControllerGetVolume say
    the pool is gone (not a field nobody sent, nor an empty list), NodeUnpublish
    and NodeUnstage still unmount and detach what is provably the volume's (its loop device's
    backing file was its data file in this pool), and a restart refuses the path until
    --pool-init."""
    d = ctx.daemon()
    v = Vol(ctx, d, "lost", 64 * MiB)
    v.stage()
    target = v.publish()
    dev = v.device()
    shutil.rmtree(d.pool)
    gone = "pool %s is not usable: it is gone" % d.pool
    assert d.call("Probe").ready.value is False
    assert d.call("GetCapacity").available_capacity == 0, "nothing can be made in it"
    for method, req in (("CreateVolume", {"name": "another", "volume_capabilities": [v.cap]}),
                        ("DeleteVolume", {"volume_id": v.id}), ("ListVolumes", {}),
                        ("ControllerGetVolume", {"volume_id": v.id})):
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, method, req)
        assert e.details().startswith(gone), (method, e.details())
        assert "volume_content_source" not in e.details(), e.details()
    v.unpublish()
    # Its record of having made the target is gone with the pool: the empty directory stays.
    assert mount_at(target) is None and os.listdir(target) == []
    assert mount_at(v.staging)["source"] == dev, "the staging mount stays until unstaged"
    v.unstage()
    assert mount_at(v.staging) is None and os.path.isdir(v.staging)
    assert loops_under(ctx.tmp) == {}, loops_under(ctx.tmp)
    v.unpublish()  # idempotent: nothing of it is left
    v.unstage()
    d.stop()
    d.start(wait=False)
    assert d.proc.wait(10) == 2
    assert "--pool %s: the pool is gone" % d.pool in d.logs(), d.logs()
    d.args += ["--pool-init"]
    d.start()
    assert d.call("Probe").ready.value is True


@node_test
def test_unstage_with_a_symlinked_node_lock_says_damaged(ctx):
    """The volume's node.lock replaced by a symlink while it is staged: NodeUnstageVolume (and
    NodeStageVolume) answer FAILED_PRECONDITION naming the volume, the file and the damage,
    follow nothing and change nothing; once the file is its own again, the unstage works."""
    d = ctx.daemon()
    v = Vol(ctx, d, "lock-swapped")
    try:
        v.stage()
        lock = os.path.join(os.path.dirname(v.data), "node.lock")
        canary = os.path.join(ctx.tmp, "canary")
        with open(canary, "w") as f:
            f.write("precious\n")
        os.unlink(lock)
        os.symlink(canary, lock)
        said = None
        for method, req in (("NodeUnstageVolume", {"staging_target_path": v.staging}),
                            ("NodeStageVolume", {"staging_target_path": v.staging,
                                                 "volume_capability": mount_cap()})):
            e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, method, volume_id=v.id,
                               **req)
            msg = e.details()
            said = said or msg
            assert "is damaged" in msg and "volumes/%s/node.lock" % local_id(v.id) in msg \
                and "is a symbolic link" in msg and "Too many levels" not in msg, msg
        assert mount_at(v.staging)["source"] == v.device(), "nothing was unmounted"
        with open(canary) as f:
            assert f.read() == "precious\n", "the symlink was never followed"
        assert os.path.islink(lock), "left as it is"
        os.unlink(lock)
        v.unstage()
        assert mount_at(v.staging) is None
        return said
    finally:
        safely(v.teardown)


if __name__ == "__main__":
    run([test_lifecycle_ext4, test_lifecycle_xfs, test_mkfs_options_from_storage_class,
         test_ext4_fast_commit_from_storage_class,
         test_existing_filesystem_is_never_reformatted, test_mount_flags_and_read_only_publish,
         test_raw_block_volume, test_access_modes_on_the_pools_node,
         test_idempotency_and_conflicts, test_bad_paths_are_refused,
         test_staged_elsewhere_and_xfs_clone_beside_its_source,
         test_expand_xfs_online, test_ext4_grown_while_unstaged_grows_at_stage,
         test_volume_stats_and_condition, test_loop_devices_pass_direct_io,
         test_volumes_staged_before_direct_io_keep_working,
         test_deleted_files_give_their_space_back, test_pool_refusing_direct_io_works_buffered,
         test_pool_on_tmpfs_says_what_its_devices_got,
         test_full_pool_under_a_thin_volume,
         test_node_info_and_capabilities,
         test_kill9_mid_stage_and_mid_publish, test_kill9_during_mkfs_leaves_no_mkfs,
         test_kill9_during_mkfs_xfs_never_wedges, test_kill9_during_mkfs_ext4_never_wedges,
         test_raw_stage_takes_the_mark_of_a_half_made_filesystem,
         test_unstage_where_not_staged_is_ok,
         test_volume_mount_group, test_delete_refused_while_staged,
         test_two_processes_stage_never_races_delete, test_pool_deleted_under_the_daemon,
         test_unstage_with_a_symlinked_node_lock_says_damaged])
