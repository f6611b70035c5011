# SPDX-License-Identifier: Apache-2.0
"""volplugctl bench --sequence against a real volplugd: every timed step shows up as a row
with the right number of calls, failures count as errors (exit 1), bad parameters are refused
before the run (exit 2), and whatever a run made is gone afterwards: no volume, no snapshot, no
mount, no loop device, no directory."""

import os
import subprocess

from harness import Skip, is_root, local_id, run

MiB = 1 << 20


def need_root():
    if not is_root():
        raise Skip("needs root (loop devices, mkfs, mounts)")


def rows(out):
    """The table volplugctl bench prints: {(step, clients): (calls, errors)}."""
    lines = out.splitlines()
    assert lines and lines[0].split()[:3] == ["target", "step", "clients"], out
    table = {}
    for line in lines[1:]:
        f = line.split()
        table[(f[1], int(f[2]))] = (int(f[3]), int(f[4]))
    return table


def pool_entries(d, kind):
    return sorted(os.listdir(os.path.join(d.pool, kind)))


def mounts_below(path):
    with open("/proc/self/mountinfo") as f:
        return [l.split()[4] for l in f if l.split()[4].startswith(path + "/")]


def loops_on(path):
    out = subprocess.run(["losetup", "-n", "-O", "BACK-FILE", "-l"], capture_output=True,
                         text=True, check=True).stdout
    return [l for l in out.split() if l.startswith(path + "/")]


def test_create_delete_then_populate(ctx):
    d = ctx.daemon()
    p = d.ctl("bench", "--sequence", "create-delete", "--clients", "1,4", "--count", "20",
              "--warmup", "2", "--param", "size=64Mi")
    t = rows(p.stdout)
    for clients in (1, 4):
        assert t[("CreateVolume", clients)] == (20, 0), p.stdout
        assert t[("DeleteVolume", clients)] == (20, 0), p.stdout
    assert pool_entries(d, "volumes") == [], pool_entries(d, "volumes")
    assert pool_entries(d, "tmp") == []

    p = d.ctl("bench", "--sequence", "populate", "--clients", "4", "--count", "30", "--warmup",
              "0", "--param", "size=64Mi")
    assert rows(p.stdout) == {("CreateVolume", 4): (30, 0)}, p.stdout
    vols = d.call("ListVolumes").entries
    assert len(vols) == 30 and all(v.volume.capacity_bytes == 64 * MiB for v in vols), vols
    assert len(pool_entries(d, "volumes")) == 30


def test_failed_calls_are_errors(ctx):
    d = ctx.daemon()
    # Every CreateVolume is refused (INVALID_ARGUMENT): counted, reported, nothing made.
    p = d.ctl("bench", "--sequence", "create-delete", "--count", "5", "--warmup", "0",
              "--param", "type=no-such-type", check=False)
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    t = rows(p.stdout)
    assert t[("CreateVolume", 1)] == (0, 5) and t[("DeleteVolume", 1)] == (0, 5), p.stdout
    assert "first error: CreateVolume: INVALID_ARGUMENT: parameters:" in p.stderr, p.stderr
    assert pool_entries(d, "volumes") == []


def test_bad_parameters_exit_2(ctx):
    d = ctx.daemon()
    for args, msg in [
        (["--sequence", "no-such"], "--sequence 'no-such': unknown sequence"),
        (["--sequence", "snapshot"], "--param source=VOLUME_ID"),
        (["--sequence", "stage-publish"], "--param dir=DIR"),
        (["--sequence", "stage-publish", "--param", "dir=/tmp", "--param", "fstype=vfat"],
         "--param fstype=vfat: want ext4 or xfs"),
        (["--sequence", "create-delete", "--param", "size=lots"], "--param size=lots"),
        (["--sequence", "create-delete", "--param", "access=tape"], "--param access=tape"),
        (["--sequence", "publish", "--param", "dir=/tmp", "--param", "volumes=0"],
         "--param volumes=0: want 1..256"),
    ]:
        p = d.ctl("bench", *args, check=False)
        assert p.returncode == 2 and msg in p.stderr, (args, p.returncode, p.stderr)
        assert p.stdout == "", p.stdout
    assert pool_entries(d, "volumes") == []


def test_snapshot_sequence(ctx):
    d = ctx.daemon()
    vol = d.call("CreateVolume", {
        "name": "source", "capacity_range": {"required_bytes": 16 * MiB},
        "volume_capabilities": [{"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "mount": {}}],
    }).volume.volume_id
    with open(os.path.join(d.pool, "volumes", local_id(vol), "data"), "r+b") as f:
        f.seek(4 * MiB)
        f.write(b"x" * MiB)
    p = d.ctl("bench", "--sequence", "snapshot", "--param", "source=" + vol, "--count", "4",
              "--warmup", "1")
    t = rows(p.stdout)
    assert t[("CreateSnapshot", 1)] == (4, 0) and t[("DeleteSnapshot", 1)] == (4, 0), p.stdout
    assert pool_entries(d, "snapshots") == []
    assert "of volume %s by " % vol in d.logs()


def test_stage_publish_sequence(ctx):
    need_root()
    d = ctx.daemon()
    mnt = os.path.join(ctx.tmp, "mnt")
    os.mkdir(mnt)
    steps = ["CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume",
             "NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume",
             "DeleteVolume"]
    for fstype in ("ext4", "xfs"):
        p = d.ctl("bench", "--sequence", "stage-publish", "--param", "dir=" + mnt, "--param",
                  "fstype=" + fstype, "--param", "size=320Mi", "--count", "2", "--warmup", "0")
        t = rows(p.stdout)
        assert [s for (s, _) in t] == steps, p.stdout
        assert all(v == (2, 0) for v in t.values()), p.stdout
        assert "made %s on /dev/loop" % fstype in d.logs()
    p = d.ctl("bench", "--sequence", "stage-publish", "--param", "dir=" + mnt, "--param",
              "access=block", "--param", "size=16Mi", "--count", "2", "--warmup", "0")
    assert all(v == (2, 0) for v in rows(p.stdout).values()), p.stdout
    assert os.listdir(mnt) == [] and mounts_below(ctx.tmp) == [] and loops_on(ctx.tmp) == []
    assert pool_entries(d, "volumes") == []


def test_publish_sequence(ctx):
    need_root()
    d = ctx.daemon()
    mnt = os.path.join(ctx.tmp, "mnt")
    os.mkdir(mnt)
    p = d.ctl("bench", "--sequence", "publish", "--param", "dir=" + mnt, "--param", "volumes=2",
              "--param", "size=64Mi", "--clients", "1,2", "--count", "10", "--warmup", "1")
    t = rows(p.stdout)
    for clients in (1, 2):
        assert t[("NodePublishVolume", clients)] == (10, 0), p.stdout
        assert t[("NodeUnpublishVolume", clients)] == (10, 0), p.stdout
    assert os.listdir(mnt) == [] and mounts_below(ctx.tmp) == [] and loops_on(ctx.tmp) == []
    assert pool_entries(d, "volumes") == []


def test_publish_setup_failure_undoes_itself(ctx):
    need_root()
    # The second volume cannot be attached: prepare fails, and the first one is taken down.
    d = ctx.daemon(args=["--max-volumes-per-node", "1"])
    mnt = os.path.join(ctx.tmp, "mnt")
    os.mkdir(mnt)
    p = d.ctl("bench", "--sequence", "publish", "--param", "dir=" + mnt, "--param", "volumes=2",
              "--param", "size=64Mi", "--count", "4", check=False)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "ControllerPublishVolume: RESOURCE_EXHAUSTED" in p.stderr, p.stderr
    assert "setting up volume 2 of 2" in p.stderr, p.stderr
    assert os.listdir(mnt) == [] and mounts_below(ctx.tmp) == [] and loops_on(ctx.tmp) == []
    assert pool_entries(d, "volumes") == []


if __name__ == "__main__":
    run([test_create_delete_then_populate, test_failed_calls_are_errors,
         test_bad_parameters_exit_2, test_snapshot_sequence, test_stage_publish_sequence,
         test_publish_sequence, test_publish_setup_failure_undoes_itself])
