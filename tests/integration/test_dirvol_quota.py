# SPDX-License-Identifier: Apache-2.0
"""Directory volumes where the pool's filesystem enforces project quotas: xfs mounted with
-o prjquota and ext4 made with -O project,quota, each on a loop device in the test's temp dir.
A volume's size is its project's limit (writes beyond it fail with EDQUOT), its stats come
from the quota, expansion raises the limit, snapshots, restores and clones copy the tree, a
delete clears the limit, a create killed mid-way leaves a clean pool.

Kernels without project quotas (CONFIG_XFS_QUOTA, CONFIG_QFMT_V2) cannot run these: the script
then runs itself in a VM on Debian's own kernel (tests/vm/run.sh, this machine's root shared
read-only), and skips when there is no VM to run (no /dev/kvm, qemu or linux-image-amd64).
Needs root."""

import errno
import json
import os
import re
import subprocess
import sys

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import SOURCE_ROOT, is_root, local_id, run  # noqa: E402
from test_dirvol import (DIRECTORY, FS_CAP, MiB, create, fs_pool, mounts_under,  # noqa: E402
                         pool_check, tree_of)
from test_metrics import ADDR, scrape  # noqa: E402


def in_vm():
    """Reruns this script in the VM unless it runs there (or VOLPLUG_DIRVOL_QUOTA_HERE is
    set: this kernel has project quotas). Never returns on the host."""
    if os.environ.get("VOLPLUG_IN_VM") or os.environ.get("VOLPLUG_DIRVOL_QUOTA_HERE"):
        return
    if not is_root():
        print("1..0 # SKIP needs root (loop devices, mkfs, mount)")
        sys.exit(0)
    env = ["%s=%s" % (k, v) for k, v in os.environ.items()
           if k.startswith("VOLPLUG") or k == "PYTHONDONTWRITEBYTECODE"]
    p = subprocess.run([os.path.join(SOURCE_ROOT, "tests", "vm", "run.sh")] + env +
                       [sys.executable, os.path.abspath(__file__)], stderr=subprocess.PIPE,
                       text=True)
    if p.returncode == 77:
        print("1..0 # SKIP no VM to run Debian's kernel with project quotas: %s"
              % p.stderr.strip().replace("\n", " "))
        sys.exit(0)
    sys.stderr.write(p.stderr)
    sys.exit(p.returncode)


POOLS = {
    "xfs": ((), "prjquota"),
    "ext4": (("-O", "project,quota"), "prjquota"),
}


def quota_pool(ctx, fstype):
    mkfs_args, options = POOLS[fstype]
    pool, mnt, dev = fs_pool(ctx, fstype, mkfs_args, options)
    assert pool, "mounting %s with -o %s failed" % (fstype, options)
    os.chmod(ctx.tmp, 0o755)
    return pool, mnt


def project_report(mnt):
    """{project ID: (KiB used, KiB hard limit)} from xfs_quota (xfs and ext4 alike), but for
    project 0 (what belongs to none: the pool's own files)."""
    # -f: ext4 too (a "foreign" filesystem to xfs_quota)
    out = subprocess.run(["xfs_quota", "-f", "-x", "-c", "report -p -n -N -b", mnt],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        m = re.match(r"#(\d+)\s+(\d+)\s+(\d+)\s+(\d+)", line)
        if m and int(m.group(1)):
            found[int(m.group(1))] = (int(m.group(2)), int(m.group(4)))
    return found


def project_of(pool, vid):
    with open(os.path.join(pool, "volumes", local_id(vid), "meta.json")) as f:
        return json.load(f)["project"]


FILL = """
import os, sys
done, err = 0, 0
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
block = b"q" * (1 << 20)
while done < (1 << 30):
    try:
        done += os.write(fd, block)
        os.fsync(fd)
    except OSError as e:
        err = e.errno
        break
print(done, err)
"""


def fill(path):
    """Writes 1 MiB blocks (fsync'ed) to a new file at path until the quota says no, as a
    pod does: without CAP_SYS_RESOURCE, which lets a process pass the hard limits of ext4's
    quotas (xfs holds it to them too). Returns (bytes written, the errno that stopped it)."""
    p = subprocess.run(["setpriv", "--inh-caps", "-sys_resource", "--bounding-set",
                        "-sys_resource", sys.executable, "-c", FILL, path],
                       capture_output=True, text=True, check=True)
    done, err = p.stdout.split()
    return int(done), int(err) or None


def stage_publish(ctx, d, vid, context, name):
    staging = os.path.join(ctx.tmp, name + "-staging")
    target = os.path.join(ctx.tmp, name + "-pod")
    os.mkdir(staging)
    d.call("NodeStageVolume", volume_id=vid, staging_target_path=staging,
           volume_capability=FS_CAP, volume_context=context)
    d.call("NodePublishVolume", volume_id=vid, staging_target_path=staging, target_path=target,
           volume_capability=FS_CAP, volume_context=context)

    def undo():
        for p in (target, staging):
            while mounts_under(p):
                subprocess.run(["umount", p], capture_output=True)
    ctx.cleanups.insert(0, undo)
    return staging, target


def unpublish_unstage(d, vid, staging, target):
    d.call("NodeUnpublishVolume", volume_id=vid, target_path=target)
    d.call("NodeUnstageVolume", volume_id=vid, staging_target_path=staging)
    assert mounts_under(target) == [] and mounts_under(staging) == []


def bytes_stats(d, vid, target):
    stats = d.call("NodeGetVolumeStats", volume_id=vid, volume_path=target)
    return [u for u in stats.usage if u.unit == 1][0]  # BYTES


QUOTA_SERIES = ("volplug_volume_quota_used_bytes", "volplug_volume_quota_limit_bytes",
                "volplug_volume_quota_used_inodes")


def quota_series(d):
    """{volume_id: {series: value}} of the quota series, after their second of reuse."""
    found = {}
    for (name, labels), v in scrape(d, fresh=True).items():
        if name.startswith("volplug_volume_quota_"):
            found.setdefault(dict(labels)["volume_id"], {})[name] = v
    return found


def check_figures(d, vid, other, target, size):
    """A directory volume's quota series (and the unstaged one's: every directory volume of the
    pool has them) rise by at least what was written, fsync'ed, and the files made; status
    lists them. Returns the figures after."""
    before = quota_series(d)
    assert set(before) == {vid, other}, before
    for v in (vid, other):
        assert set(before[v]) == set(QUOTA_SERIES), before[v]  # no inode limit is set
        assert before[v]["volplug_volume_quota_limit_bytes"] == size, before[v]
    # the tree/ itself is charged to its project
    assert before[vid]["volplug_volume_quota_used_inodes"] >= 1, before
    os.mkdir(os.path.join(target, "sub"))
    with open(os.path.join(target, "sub", "eight"), "wb") as f:
        f.write(b"w" * (8 * MiB))
        f.flush()
        os.fsync(f.fileno())
    open(os.path.join(target, "empty"), "w").close()
    after = quota_series(d)
    b, a = before[vid], after[vid]
    used = a["volplug_volume_quota_used_bytes"] - b["volplug_volume_quota_used_bytes"]
    assert 8 * MiB <= used <= 12 * MiB, (b, a)
    assert a["volplug_volume_quota_used_inodes"] - b["volplug_volume_quota_used_inodes"] == 3, \
        (b, a)
    assert after[other] == before[other], (before[other], after[other])
    st = d.ctl_json("status")
    dv = {v["volume_id"]: v for v in st["directory_volumes"]}
    assert set(dv) == {vid, other}, st["directory_volumes"]
    assert dv[vid]["limit_bytes"] == size and dv[vid]["used_bytes"] >= 8 * MiB, dv[vid]
    assert dv[vid]["used_inodes"] >= 3 and "limit_inodes" not in dv[vid], dv[vid]
    assert all(v["volume_id"] != vid for v in st.get("staged_volumes", [])), st
    text = d.ctl("status").stdout
    assert "directory volumes (project quota; the kernel counts no I/O per directory):" in text, \
        text
    line = [ln for ln in text.splitlines() if ln.startswith("  " + vid + "  ")]
    assert len(line) == 1 and re.search(r"  used \d+\.\d MiB of 32\.0 MiB \(\d+%\), \d+ inodes$",
                                         line[0]), text
    return a


def quota_lifecycle(ctx, fstype):
    pool, mnt = quota_pool(ctx, fstype)
    d = ctx.daemon(pool=pool, args=ADDR)
    size = 32 * MiB
    v = create(d, "dv", DIRECTORY, size=size).volume
    other = create(d, "dv2", DIRECTORY, size=size).volume
    vid, context = v.volume_id, dict(v.volume_context)
    assert context.get("volumeKind") == "directory", context
    tree = os.path.join(pool, "volumes", local_id(vid), "tree")
    assert os.path.isdir(tree)
    proj, proj2 = project_of(pool, vid), project_of(pool, other.volume_id)
    assert proj != proj2 and proj >= 1 << 24, (proj, proj2)
    report = project_report(mnt)
    assert report[proj][1] == size // 1024 and report[proj2][1] == size // 1024, report
    # no loop device anywhere for it
    assert subprocess.run(["losetup", "-j", os.path.join(os.path.dirname(tree), "data")],
                          capture_output=True, text=True).stdout == ""

    staging, target = stage_publish(ctx, d, vid, context, "a")
    [m] = mounts_under(target)
    assert m["root"].endswith("/tree") and m["fstype"] == fstype, m
    figures = check_figures(d, vid, other.volume_id, target, size)
    # the 8 MiB stay (a file deleted may be uncharged later: xfs frees inodes in the background)
    written, err = fill(os.path.join(target, "big"))
    assert err in (errno.EDQUOT, errno.ENOSPC), (written, err)
    assert size - 8 * MiB - 4 * MiB <= written <= size - 8 * MiB, written
    st = bytes_stats(d, vid, target)
    assert st.total == size, st
    assert st.used >= written and st.available <= 1 * MiB, st
    assert report_used(mnt, proj) >= written // 1024
    assert quota_series(d)[vid]["volplug_volume_quota_used_bytes"] >= written

    # grown: the limit rises, and more can be written
    grown = 64 * MiB
    r = d.call("ControllerExpandVolume", volume_id=vid, capacity_range={"required_bytes": grown})
    assert r.capacity_bytes == grown and not r.node_expansion_required, r
    assert project_report(mnt)[proj][1] == grown // 1024
    d.call("NodeExpandVolume", volume_id=vid, volume_path=target,
           capacity_range={"required_bytes": grown})
    more, err = fill(os.path.join(target, "more"))
    assert err in (errno.EDQUOT, errno.ENOSPC), (more, err)
    assert grown - size - 4 * MiB <= more <= grown - written, (written, more)
    assert bytes_stats(d, vid, target).total == grown
    assert d.call("ControllerGetVolume", volume_id=vid).volume.capacity_bytes == grown
    # the other volume's limit is its own
    assert project_report(mnt)[proj2][1] == size // 1024

    unpublish_unstage(d, vid, staging, target)
    assert pool_check(pool).endswith(" 0 problems")
    for v_id, p in ((vid, proj), (other.volume_id, proj2)):
        d.call("DeleteVolume", volume_id=v_id)
        assert not os.path.exists(os.path.join(pool, "volumes", local_id(v_id)))
        used, limit = project_report(mnt).get(p, (0, 0))
        assert (used, limit) == (0, 0), (p, used, limit)
    assert quota_series(d) == {}, "a deleted volume's series are gone"
    d.stop()
    assert pool_check(pool) == "0 volumes, 0 snapshots, 0 Flexvolume records, 0 problems"
    return "project %d, %d MiB then %d MiB written; 8 MiB and 3 inodes: %d bytes, %d inodes" % (
        proj, written // MiB, more // MiB, figures["volplug_volume_quota_used_bytes"],
        figures["volplug_volume_quota_used_inodes"])


def report_used(mnt, proj):
    return project_report(mnt)[proj][0]


def test_xfs_quota_lifecycle(ctx):
    return quota_lifecycle(ctx, "xfs")


def test_ext4_quota_lifecycle(ctx):
    return quota_lifecycle(ctx, "ext4")


def snapshot_restore_clone(ctx, fstype):
    pool, mnt = quota_pool(ctx, fstype)
    d = ctx.daemon(pool=pool)
    outside = os.path.join(ctx.tmp, "outside")
    os.mkdir(outside)
    with open(os.path.join(outside, "keep"), "w") as f:
        f.write("keep")
    v = create(d, "src", DIRECTORY, size=32 * MiB).volume
    tree = os.path.join(pool, "volumes", local_id(v.volume_id), "tree")
    os.makedirs(os.path.join(tree, "db", "wal"))
    with open(os.path.join(tree, "db", "pages"), "wb") as f:
        f.write(os.urandom(3 * MiB))
    with open(os.path.join(tree, "db", "wal", "0001"), "wb") as f:
        f.write(os.urandom(5000))
    os.chown(os.path.join(tree, "db", "pages"), 1234, 5678)
    os.chmod(os.path.join(tree, "db", "pages"), 0o640)
    os.symlink(outside, os.path.join(tree, "escape"))
    os.symlink("db/pages", os.path.join(tree, "relative"))
    want = tree_of(tree)

    snap = d.call("CreateSnapshot", name="s1", source_volume_id=v.volume_id).snapshot
    assert snap.ready_to_use, snap
    restored = d.call("CreateVolume", name="restored",
                      capacity_range={"required_bytes": 32 * MiB},
                      volume_capabilities=[FS_CAP], parameters=DIRECTORY,
                      volume_content_source={"snapshot": {"snapshot_id": snap.snapshot_id}}
                      ).volume
    clone = d.call("CreateVolume", name="clone", capacity_range={"required_bytes": 48 * MiB},
                   volume_capabilities=[FS_CAP], parameters=DIRECTORY,
                   volume_content_source={"volume": {"volume_id": v.volume_id}}).volume
    projects = set()
    for got in (restored, clone):
        gtree = os.path.join(pool, "volumes", local_id(got.volume_id), "tree")
        have = tree_of(gtree)
        assert have == want, "\n%s\n%s" % (sorted(have.items()), sorted(want.items()))
        projects.add(project_of(pool, got.volume_id))
    projects.add(project_of(pool, v.volume_id))
    assert len(projects) == 3, projects
    report = project_report(mnt)
    for got, size in ((restored, 32 * MiB), (clone, 48 * MiB)):
        p = project_of(pool, got.volume_id)
        used, limit = report[p]
        assert limit == size // 1024, (p, report[p])
        # the copy is counted against its own project (a reflink still charges the quota)
        assert used >= 3 * 1024, (p, report[p])
    assert sorted(os.listdir(outside)) == ["keep"], "nothing followed the links"
    # the clone's limit holds its copy and no more than its size
    c_vid = clone.volume_id
    staging, target = stage_publish(ctx, d, c_vid, dict(clone.volume_context), "c")
    written, err = fill(os.path.join(target, "big"))
    assert err in (errno.EDQUOT, errno.ENOSPC), (written, err)
    assert 48 * MiB - 3 * MiB - 4 * MiB <= written <= 48 * MiB - 3 * MiB, written
    unpublish_unstage(d, c_vid, staging, target)
    assert pool_check(pool).endswith(" 0 problems")
    for got in (restored, clone, v):
        p = project_of(pool, got.volume_id)
        d.call("DeleteVolume", volume_id=got.volume_id)
        assert project_report(mnt).get(p, (0, 0)) == (0, 0), (p, project_report(mnt).get(p))
    d.call("DeleteSnapshot", snapshot_id=snap.snapshot_id)
    with open(os.path.join(outside, "keep")) as f:
        assert f.read() == "keep"
    d.stop()
    assert pool_check(pool) == "0 volumes, 0 snapshots, 0 Flexvolume records, 0 problems"


def test_xfs_snapshot_restore_clone(ctx):
    snapshot_restore_clone(ctx, "xfs")


def test_ext4_snapshot_restore_clone(ctx):
    snapshot_restore_clone(ctx, "ext4")


def test_killed_create(ctx):
    """volplugd killed at the failpoint pool-create-directory: the next start leaves a clean
    pool, no limit set on any project, and the same create then succeeds."""
    pool, mnt = quota_pool(ctx, "xfs")
    before = project_report(mnt)
    d = ctx.daemon(pool=pool, env={"VOLPLUG_FAILPOINTS": "pool-create-directory=crash"})
    try:
        create(d, "dv", DIRECTORY)
        raise AssertionError("the failpoint did not kill volplugd")
    except grpc.RpcError:
        pass
    assert d.proc.wait(10) == -9, "killed by its failpoint"
    d.env.pop("VOLPLUG_FAILPOINTS")
    d.start()
    assert os.listdir(os.path.join(pool, "tmp")) == []
    assert list(d.call("ListVolumes").entries) == []
    assert project_report(mnt) == before, (before, project_report(mnt))
    v = create(d, "dv", DIRECTORY).volume
    d.call("DeleteVolume", volume_id=v.volume_id)
    d.stop()
    assert pool_check(pool) == "0 volumes, 0 snapshots, 0 Flexvolume records, 0 problems"


def test_without_quota_refused(ctx):
    """The same kernel with the quota mount option left out: refused, naming the fix."""
    pool, mnt, dev = fs_pool(ctx, "xfs")
    assert pool
    d = ctx.daemon(pool=pool)
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "CreateVolume", name="dv",
                   capacity_range={"required_bytes": 32 * MiB}, volume_capabilities=[FS_CAP],
                   parameters=DIRECTORY, match="-o prjquota")


if __name__ == "__main__":
    in_vm()
    run([
        test_xfs_quota_lifecycle,
        test_ext4_quota_lifecycle,
        test_xfs_snapshot_restore_clone,
        test_ext4_snapshot_restore_clone,
        test_killed_create,
        test_without_quota_refused,
    ])
