# SPDX-License-Identifier: Apache-2.0
"""Directory volumes (StorageClass parameter volumeKind: directory): a directory of the pool's
own filesystem bounded by a project quota. Pools on real filesystems made on loop devices under
the test's temp dir: ext4 and xfs without project quotas are refused clearly, with the
filesystem named and how to mount it; the parameter's rules (block volumes, mkfs options, bad
values) are refused before anything is made. Needs root."""

import errno
import functools
import hashlib
import json
import os
import socket
import stat
import subprocess

import grpc

from harness import VOLPLUGCTL, Skip, is_root, local_id, run

MiB = 1 << 20

FS_CAP = {"mount": {"fs_type": "ext4"}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}
BLOCK_CAP = {"block": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}
DIRECTORY = {"volumeKind": "directory"}


def root_test(fn):
    @functools.wraps(fn)
    def wrapper(ctx):
        if not is_root():
            raise Skip("needs root (loop devices, mkfs, mount)")
        return fn(ctx)

    return wrapper


def fs_pool(ctx, fstype, mkfs_args=(), options=None, size=512 * MiB):
    """A filesystem of fstype on a loop device over an image in the test's temp dir, mounted
    there with options; the pool is a directory of it. Unmounted and detached after the test.
    Returns (the pool's path, the mount point, the loop device)."""
    img = os.path.join(ctx.tmp, fstype + ".img")
    mnt = os.path.join(ctx.tmp, fstype + "-mnt")
    with open(img, "wb") as f:
        f.truncate(size)
    mkfs = ["mkfs.xfs", "-q", "-f"] if fstype == "xfs" else ["mkfs.ext4", "-q", "-F"]
    subprocess.run(mkfs + list(mkfs_args) + [img], check=True, capture_output=True)
    dev = subprocess.run(["losetup", "--find", "--show", img], check=True,
                         capture_output=True, text=True).stdout.strip()
    ctx.cleanups.append(lambda: subprocess.run(["losetup", "-d", dev], capture_output=True))
    os.mkdir(mnt)
    cmd = ["mount", "-t", fstype] + (["-o", options] if options else []) + [dev, mnt]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        return None, mnt, dev
    # runs before the losetup -d above: cleanups run in order, so insert it first
    ctx.cleanups.insert(0, lambda: subprocess.run(["umount", mnt], capture_output=True))
    return os.path.join(mnt, "pool"), mnt, dev


def create(d, name, params, cap=FS_CAP, size=64 * MiB):
    return d.call("CreateVolume", name=name, capacity_range={"required_bytes": size},
                  volume_capabilities=[cap], parameters=params)


def pool_check(pool):
    p = subprocess.run([VOLPLUGCTL, "pool", "check", pool], capture_output=True, text=True)
    assert p.returncode == 0, (p.returncode, p.stdout, p.stderr)
    return p.stdout.strip().splitlines()[-1]


def assert_refused_without_quotas(ctx, fstype):
    pool, mnt, dev = fs_pool(ctx, fstype)
    assert pool, "mounting %s failed" % fstype
    d = ctx.daemon(pool=pool)
    e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateVolume", name="dv",
                       capacity_range={"required_bytes": 64 * MiB},
                       volume_capabilities=[FS_CAP], parameters=DIRECTORY)
    msg = e.details()
    # names the parameter, the pool's filesystem as an operator finds it, and what to do
    for want in ("parameters: volumeKind: directory", "pool %s" % pool,
                 "%s on %s, mounted at %s" % (fstype, dev, mnt), "no project quotas",
                 "-o prjquota", "-O project,quota"):
        assert want in msg, "message %r lacks %r" % (msg, want)
    # nothing was made: no volume, no staging leftover, nothing reserved
    assert list(d.call("ListVolumes").entries) == []
    assert os.listdir(os.path.join(pool, "volumes")) == []
    assert os.listdir(os.path.join(pool, "tmp")) == []
    d.stop()
    assert pool_check(pool) == "0 volumes, 0 snapshots, 0 Flexvolume records, 0 problems"


@root_test
def test_ext4_without_project_quotas_is_refused(ctx):
    assert_refused_without_quotas(ctx, "ext4")


@root_test
def test_xfs_without_project_quotas_is_refused(ctx):
    assert_refused_without_quotas(ctx, "xfs")


@root_test
def test_parameter_rules(ctx):
    d = ctx.daemon()
    # a block volume is a device: never a directory
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="blk",
                   capacity_range={"required_bytes": 64 * MiB},
                   volume_capabilities=[BLOCK_CAP], parameters=DIRECTORY,
                   match="volumeKind: directory is for filesystem volumes")
    # no mkfs for a directory: its options are refused, naming them
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="opts",
                   capacity_range={"required_bytes": 64 * MiB}, volume_capabilities=[FS_CAP],
                   parameters={"volumeKind": "directory", "blockSize": "4096"},
                   match="blockSize: not accepted for a directory volume")
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="bad",
                   capacity_range={"required_bytes": 64 * MiB}, volume_capabilities=[FS_CAP],
                   parameters={"volumeKind": "tree"},
                   match="volumeKind: wanted file or directory, got 'tree'")
    assert list(d.call("ListVolumes").entries) == []
    # file is the default, said out loud: a volume on a loop device as before, and recorded as
    # it was asked for (no volumeKind in its context: nothing changes for the node)
    v = create(d, "file", {"volumeKind": "file"}).volume
    assert "volumeKind" not in v.volume_context, dict(v.volume_context)
    data = os.path.join(d.pool, "volumes", v.volume_id.split(".")[0], "data")
    assert os.path.isfile(data) and os.path.getsize(data) == 64 * MiB
    # the same name with the same parameters spelled differently is the same volume
    assert create(d, "file", {}).volume.volume_id == v.volume_id
    d.call("DeleteVolume", volume_id=v.volume_id)


def mounts_under(prefix):
    """Mounts at or below prefix: dicts with target, root, vfs (per-mount options), fstype."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields = left.split(" ")
            if fields[4] == prefix or fields[4].startswith(prefix.rstrip("/") + "/"):
                found.append({"target": fields[4], "root": fields[3],
                              "vfs": fields[5].split(","), "fstype": right.split(" ")[0]})
    return found


def make_directory_volume(d, name, size=64 * MiB):
    """A directory volume as CreateVolume leaves it where the pool's filesystem has project
    quotas (its record with kind and project, its tree/ beside its data file, which holds no
    bytes), made from a volume of this pool: this machine's kernel may have no project quotas,
    and everything after the create does not need them."""
    v = create(d, name, {}, size=size).volume
    vdir = os.path.join(d.pool, "volumes", local_id(v.volume_id))
    with open(os.path.join(vdir, "meta.json")) as f:
        meta = json.load(f)
    meta.update(kind="directory", project=16777300)
    meta["params"]["volumeKind"] = "directory"
    meta["context"]["volumeKind"] = "directory"
    with open(os.path.join(vdir, "meta.json"), "w") as f:
        json.dump(meta, f)
    os.truncate(os.path.join(vdir, "data"), 0)
    os.truncate(os.path.join(vdir, "data"), size)
    os.mkdir(os.path.join(vdir, "tree"), 0o755)
    return v.volume_id, dict(meta["context"]), os.path.join(vdir, "tree")


def node_call(d, method, **fields):
    return d.call(method, volume_capability=FS_CAP, **fields)


@root_test
def test_directory_volume_on_the_node(ctx):
    """Stage binds the volume's directory (no loop device, no mkfs) nodev,nosuid; publish binds
    that, read-only too; stats, the refusals while it is in use, and unstage and delete leave
    nothing behind."""
    os.chmod(ctx.tmp, 0o755)
    d = ctx.daemon()
    vid, context, tree = make_directory_volume(d, "dv")
    staging = os.path.join(ctx.tmp, "staging")
    target, ro = os.path.join(ctx.tmp, "pod1"), os.path.join(ctx.tmp, "pod2")
    os.mkdir(staging)
    try:
        node_call(d, "NodeStageVolume", volume_id=vid, staging_target_path=staging,
                  volume_context=context)
        [m] = mounts_under(staging)
        assert m["root"].endswith("/volumes/%s/tree" % local_id(vid)), m
        assert "nodev" in m["vfs"] and "nosuid" in m["vfs"] and "rw" in m["vfs"], m
        loops = subprocess.run(["losetup", "-j", os.path.join(os.path.dirname(tree), "data")],
                               capture_output=True, text=True).stdout
        assert loops == "", "no loop device: %r" % loops
        # idempotent
        node_call(d, "NodeStageVolume", volume_id=vid, staging_target_path=staging,
                  volume_context=context)
        assert len(mounts_under(staging)) == 1
        d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodeStageVolume", volume_id=vid,
                       staging_target_path=os.path.join(ctx.tmp, "blk"),
                       volume_capability=BLOCK_CAP, volume_context=context,
                       match="is a directory volume: it is staged as a filesystem only")

        node_call(d, "NodePublishVolume", volume_id=vid, staging_target_path=staging,
                  target_path=target, volume_context=context)
        [m] = mounts_under(target)
        assert m["root"].endswith("/tree") and "nodev" in m["vfs"] and "rw" in m["vfs"], m
        with open(os.path.join(target, "f"), "wb") as f:
            f.write(b"x" * 100000)
        assert os.path.getsize(os.path.join(tree, "f")) == 100000, "the bytes are in tree/"
        node_call(d, "NodePublishVolume", volume_id=vid, staging_target_path=staging,
                  target_path=ro, volume_context=context, readonly=True)
        [m] = mounts_under(ro)
        assert "ro" in m["vfs"], m
        try:
            open(os.path.join(ro, "g"), "w")
            raise AssertionError("a read-only publish took a write")
        except OSError as e:
            assert e.errno == errno.EROFS, e

        stats = d.call("NodeGetVolumeStats", volume_id=vid, volume_path=target)
        byt = [u for u in stats.usage if u.unit == 1][0]  # BYTES
        assert byt.total > 0 and byt.used > 0, stats
        assert not stats.volume_condition.abnormal, stats

        # grown: the data file (the ledger's count) first, then the project's limit, which
        # this pool's filesystem does not enforce: said so, and nothing is recorded
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "ControllerExpandVolume",
                           volume_id=vid, capacity_range={"required_bytes": 128 * MiB},
                           match="enforces no project quotas now")
        assert "project quota (16777300)" in e.details(), e.details()
        assert d.call("ControllerGetVolume", volume_id=vid).volume.capacity_bytes == 64 * MiB
        # in use: never deleted, the message says where
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "DeleteVolume", volume_id=vid,
                           match="unstage it first")
        assert staging in e.details() and "directory is mounted at" in e.details(), e.details()

        for t in (target, ro):
            d.call("NodeUnpublishVolume", volume_id=vid, target_path=t)
            assert mounts_under(t) == [] and not os.path.exists(t)
        d.call("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
        assert mounts_under(staging) == []
        assert os.path.getsize(os.path.join(tree, "f")) == 100000, "unstage keeps the data"
        assert pool_check(d.pool).endswith(" 0 problems")
        d.call("DeleteVolume", volume_id=vid)
        assert not os.path.exists(os.path.dirname(tree))
        assert list(d.call("ListVolumes").entries) == []
    finally:
        for p in (target, ro, staging):
            while mounts_under(p):
                subprocess.run(["umount", p], capture_output=True)


@root_test
def test_hostile_tree_is_never_followed(ctx):
    """Symlinks planted in the volume's directory, pointing out of it, are never followed: not
    by the ownership walk of a publish with fsGroup, not by the delete; a tree/ that is itself
    a symlink makes the volume damaged, and its delete removes the link, not its target."""
    os.chmod(ctx.tmp, 0o755)
    d = ctx.daemon()
    outside = os.path.join(ctx.tmp, "outside")
    os.makedirs(os.path.join(outside, "deep"))
    with open(os.path.join(outside, "deep", "secret"), "w") as f:
        f.write("keep")
    before = {p: os.stat(p) for p in (outside, os.path.join(outside, "deep"),
                                      os.path.join(outside, "deep", "secret"))}
    vid, context, tree = make_directory_volume(d, "hostile")
    os.symlink(outside, os.path.join(tree, "escape"))
    os.makedirs(os.path.join(tree, "a", "b"))
    os.symlink(os.path.join(outside, "deep", "secret"), os.path.join(tree, "a", "b", "link"))
    staging, target = os.path.join(ctx.tmp, "staging"), os.path.join(ctx.tmp, "pod")
    os.mkdir(staging)
    cap = {"mount": {"fs_type": "ext4", "volume_mount_group": "4242"},
           "access_mode": {"mode": "SINGLE_NODE_WRITER"}}
    try:
        d.call("NodeStageVolume", volume_id=vid, staging_target_path=staging,
               volume_capability=cap, volume_context=context)
        d.call("NodePublishVolume", volume_id=vid, staging_target_path=staging,
               target_path=target, volume_capability=cap, volume_context=context)
        assert os.stat(os.path.join(tree, "a")).st_gid == 4242, "the walk ran"
        for p, st in before.items():  # neither chown'ed nor chmod'ed through the links
            now = os.stat(p)
            assert (now.st_gid, now.st_mode) == (st.st_gid, st.st_mode), p
        d.call("NodeUnpublishVolume", volume_id=vid, target_path=target)
        d.call("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    finally:
        for p in (target, staging):
            while mounts_under(p):
                subprocess.run(["umount", p], capture_output=True)
    d.call("DeleteVolume", volume_id=vid)
    assert not os.path.exists(os.path.dirname(tree))
    with open(os.path.join(outside, "deep", "secret")) as f:
        assert f.read() == "keep", "the delete never followed a symlink"

    # tree/ itself a symlink to outside: damaged, never bound; deleted as a link
    vid, context, tree = make_directory_volume(d, "swapped")
    os.rmdir(tree)
    os.symlink(outside, tree)
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodeStageVolume", volume_id=vid,
                   staging_target_path=staging, volume_capability=FS_CAP,
                   volume_context=context,
                   match="tree is a symbolic link, not a directory of the pool")
    assert mounts_under(staging) == []
    d.call("DeleteVolume", volume_id=vid)
    with open(os.path.join(outside, "deep", "secret")) as f:
        assert f.read() == "keep"
    assert os.path.isdir(os.path.join(outside, "deep"))


@root_test
def test_tree_planted_in_a_loop_volume(ctx):
    """A tree/ that someone put in a loop volume's directory makes nothing of it a directory
    volume: a symlink there damages the volume (as a symlinked data file does), yet a volume
    staged before still unstages, its loop device detached, and its delete removes the link,
    not what it points to."""
    d = ctx.daemon()
    outside = os.path.join(ctx.tmp, "outside")
    os.mkdir(outside)
    v = create(d, "loop", {}).volume
    vdir = os.path.join(d.pool, "volumes", local_id(v.volume_id))
    staging = os.path.join(ctx.tmp, "staging")
    os.mkdir(staging)
    try:
        d.call("NodeStageVolume", volume_id=v.volume_id, staging_target_path=staging,
               volume_capability=FS_CAP, volume_context=dict(v.volume_context))
        [m] = mounts_under(staging)
        assert m["fstype"] == "ext4" and m["root"] == "/", m
        os.symlink(outside, os.path.join(vdir, "tree"))
        d.call("NodeUnstageVolume", volume_id=v.volume_id, staging_target_path=staging)
        assert mounts_under(staging) == []
        loops = subprocess.run(["losetup", "-j", os.path.join(vdir, "data")],
                               capture_output=True, text=True).stdout
        assert loops == "", "detached: %r" % loops
    finally:
        while mounts_under(staging):
            subprocess.run(["umount", staging], capture_output=True)
        out = subprocess.run(["losetup", "-j", os.path.join(vdir, "data")],
                             capture_output=True, text=True).stdout
        for line in out.splitlines():  # a failed unstage leaves its loop device: never leak it
            subprocess.run(["losetup", "-d", line.split(":")[0]], capture_output=True)
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodeStageVolume",
                   volume_id=v.volume_id, staging_target_path=staging,
                   volume_capability=FS_CAP, volume_context=dict(v.volume_context),
                   match="tree is a symbolic link, not a directory of the pool")
    d.call("DeleteVolume", volume_id=v.volume_id)
    assert not os.path.exists(vdir) and os.path.isdir(outside)


def tree_of(top):
    """Every entry below top, never following a symlink: {relative path: (kind, owner, mode,
    content)} with the content's SHA-256, a symlink's target."""
    found = {}
    for dirpath, dirs, files in os.walk(top):
        for name in dirs + files:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            if stat.S_ISLNK(st.st_mode):
                what = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    what = ("file", hashlib.sha256(f.read()).hexdigest())
            else:
                what = (stat.S_IFMT(st.st_mode), None)
            found[rel] = what + ((st.st_uid, st.st_gid), stat.S_IMODE(st.st_mode))
    return found


@root_test
def test_snapshot_of_a_directory_volume(ctx):
    """A snapshot copies the volume's tree (reflinks where the filesystem has them): files with
    their bytes, owners and modes, symlinks as symlinks (never followed), FIFOs made anew,
    sockets left out; a device file refuses the snapshot. A volume of the other kind is never
    made from it; deleting it removes its copy, not what a link in it points to."""
    d = ctx.daemon()
    outside = os.path.join(ctx.tmp, "outside")
    os.mkdir(outside)
    with open(os.path.join(outside, "keep"), "w") as f:
        f.write("keep")
    vid, context, tree = make_directory_volume(d, "snapme")
    os.makedirs(os.path.join(tree, "db", "wal"))
    with open(os.path.join(tree, "db", "pages"), "wb") as f:
        f.write(os.urandom(300000))
    with open(os.path.join(tree, "db", "wal", "0001"), "wb") as f:
        f.write(os.urandom(5000))
    os.chown(os.path.join(tree, "db", "pages"), 1234, 5678)
    os.chmod(os.path.join(tree, "db", "pages"), 0o640)
    os.symlink(outside, os.path.join(tree, "escape"))
    os.symlink("db/pages", os.path.join(tree, "relative"))
    os.mkfifo(os.path.join(tree, "db", "fifo"), 0o600)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.path.join(tree, "db", "sock"))
    sock.close()
    before = tree_of(tree)
    want = dict(before)
    del want["db/sock"]

    snap = d.call("CreateSnapshot", name="s1", source_volume_id=vid).snapshot
    assert snap.ready_to_use and snap.size_bytes == 64 * MiB, snap
    copy = os.path.join(d.pool, "snapshots", local_id(snap.snapshot_id), "tree")
    got = tree_of(copy)
    assert got == want, "\n%s\n%s" % (sorted(got.items()), sorted(want.items()))
    assert sorted(os.listdir(outside)) == ["keep"], "nothing followed the links"
    assert pool_check(d.pool).endswith(" 0 problems")

    # a volume of the other kind is never made from it; a directory volume needs quotas here
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="r1",
                   capacity_range={"required_bytes": 64 * MiB}, volume_capabilities=[FS_CAP],
                   volume_content_source={"snapshot": {"snapshot_id": snap.snapshot_id}},
                   match="is of a directory volume, and a volume of volumeKind file")
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="r2",
                   capacity_range={"required_bytes": 64 * MiB}, volume_capabilities=[FS_CAP],
                   volume_content_source={"volume": {"volume_id": vid}},
                   match="is of a directory volume, and a volume of volumeKind file")
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateVolume", name="r3",
                   capacity_range={"required_bytes": 64 * MiB}, volume_capabilities=[FS_CAP],
                   parameters=DIRECTORY,
                   volume_content_source={"snapshot": {"snapshot_id": snap.snapshot_id}},
                   match="enforces no project quotas")

    # a device file: refused, nothing left
    os.mknod(os.path.join(tree, "null"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateSnapshot", name="s2",
                   source_volume_id=vid, match="holds a device file, which is never copied")
    assert sorted(os.listdir(os.path.join(d.pool, "snapshots"))) == [local_id(snap.snapshot_id)]
    assert os.listdir(os.path.join(d.pool, "tmp")) == []

    d.call("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    assert not os.path.exists(os.path.dirname(copy))
    with open(os.path.join(outside, "keep")) as f:
        assert f.read() == "keep"
    os.unlink(os.path.join(tree, "null"))
    assert tree_of(tree) == before, "the source is as it was"


@root_test
def test_store_snapshot_is_refused(ctx):
    """The store holds the images of file volumes: a snapshot of a directory volume with
    location: store is INVALID_ARGUMENT naming the volume, and nothing is made or sent (before,
    its empty data file went up and the snapshot restored as an empty volume); a store snapshot
    restores as a file volume only."""
    from test_store_snapshot import SimPeer, store_daemon

    peer = SimPeer(ctx)
    d = store_daemon(ctx, peer)
    vid, _, tree = make_directory_volume(d, "dv")
    with open(os.path.join(tree, "file"), "wb") as f:
        f.write(os.urandom(4096))
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateSnapshot", name="s1",
                   source_volume_id=vid, parameters={"location": "store"},
                   match="volume %s is a directory volume, whose snapshots are local only" % vid)
    assert os.listdir(os.path.join(d.pool, "snapshots")) == []
    assert os.listdir(os.path.join(d.pool, "tmp")) == []
    assert peer.keys("c1/") == set(), peer.keys("c1/")

    # and a store snapshot (of a file volume) never restores as a directory volume
    from test_store_snapshot import until_ready, volume

    fvol, _ = volume(d, "fv")
    s = until_ready(d, "s2", fvol, parameters={"location": "store"})
    d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "CreateVolume", name="r1",
                   capacity_range={"required_bytes": 64 * MiB}, volume_capabilities=[FS_CAP],
                   parameters=DIRECTORY,
                   volume_content_source={"snapshot": {"snapshot_id": s.snapshot_id}},
                   match="snapshot %s in the store holds the image of a file volume"
                   % s.snapshot_id)
    assert pool_check(d.pool).endswith(" 0 problems")


@root_test
def test_leftover_of_a_killed_create(ctx):
    """What a create killed after making the volume's tree/ leaves in tmp/ (a staging directory
    with the data file, tree/ with files and a symlink out of it, no meta.json) is removed at
    the next start, without following the symlink; pool check then finds nothing wrong."""
    d = ctx.daemon()
    d.stop()
    outside = os.path.join(ctx.tmp, "outside")
    os.mkdir(outside)
    with open(os.path.join(outside, "keep"), "w") as f:
        f.write("keep")
    staging = os.path.join(d.pool, "tmp", "new-vol-0123456789abcdef.0badcafe.67108864")
    os.makedirs(os.path.join(staging, "tree", "a", "b"))
    open(os.path.join(staging, "data"), "w").close()
    with open(os.path.join(staging, "tree", "a", "b", "f"), "w") as f:
        f.write("half made")
    os.symlink(outside, os.path.join(staging, "tree", "escape"))
    os.symlink(os.path.join(outside, "keep"), os.path.join(staging, "tree", "a", "link"))
    d.start()
    assert os.listdir(os.path.join(d.pool, "tmp")) == [], os.listdir(os.path.join(d.pool, "tmp"))
    with open(os.path.join(outside, "keep")) as f:
        assert f.read() == "keep"
    assert list(d.call("ListVolumes").entries) == []
    d.stop()
    assert pool_check(d.pool) == "0 volumes, 0 snapshots, 0 Flexvolume records, 0 problems"


if __name__ == "__main__":
    run([
        test_ext4_without_project_quotas_is_refused,
        test_xfs_without_project_quotas_is_refused,
        test_parameter_rules,
        test_directory_volume_on_the_node,
        test_hostile_tree_is_never_followed,
        test_tree_planted_in_a_loop_volume,
        test_snapshot_of_a_directory_volume,
        test_leftover_of_a_killed_create,
        test_store_snapshot_is_refused,
    ])
