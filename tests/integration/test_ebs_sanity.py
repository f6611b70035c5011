# SPDX-License-Identifier: Apache-2.0
"""csi-sanity (kubernetes-csi/csi-test, the community's conformance suite, written by others)
against volplugd all --backend ebs on ec2sim: the Controller specs, and as root the
whole suite with mount and with block volumes, on an instance whose attached volumes the
simulator presents here as loop devices under their NVMe by-id names. The Controller specs
run against moto as well (an EC2 emulator written by others, with signatures checked),
which refuses nothing for the controller: no second volume for a ClientToken, no attachment
limit, no VolumeInUse. Both run with the attach-limit spec on. Each run must fail no spec, and
leave no volume, snapshot or attachment in EC2 and no loop device here. Skipped, saying why,
where csi-sanity is not found ($CSI_SANITY, else csi-sanity on PATH) or moto is not installed.

$EBS_SANITY_SIM adds ec2sim flags, e.g. EBS_SANITY_SIM="--state-delay 0.3
--consistency-window 1 --throttle-rate 0.05 --error-rate 0.02" for a slower, less reliable
EC2 (the runs then take minutes)."""

import os
import re
import shlex
import shutil
import subprocess

from ebs_clouds import ZONE_A, MotoCloud, SimCloud, ebs_daemon
from harness import Skip, is_root, run
from test_node import force_cleanup, loops_under

INSTANCE = "i-0a000000000000001"
OTHER = "i-0a000000000000002"  # an instance that is not the node: publish to an unknown node


def sanity_binary():
    path = os.environ.get("CSI_SANITY") or shutil.which("csi-sanity")
    if not path:
        raise Skip("csi-sanity (kubernetes-csi/csi-test v5.x) not found: put it on PATH or "
                   "set CSI_SANITY")
    return path


def sanity(ctx, access, focus=None, moto=False):
    """One csi-sanity run; returns its counts {"Passed", "Failed", "Pending", "Skipped"}."""
    binary = sanity_binary()
    devices = os.path.join(ctx.tmp, "devices")
    if moto:
        cloud = MotoCloud(ctx)
        node = cloud.instances["a1"]
    else:
        cloud = SimCloud(ctx, ["--zones", ZONE_A, "--instance", INSTANCE + ":m5.large:" + ZONE_A,
                               "--instance", OTHER + ":m5.large:" + ZONE_A]
                         + (["--devices-instance", INSTANCE, "--devices-dir", devices]
                            if is_root() else [])
                         + shlex.split(os.environ.get("EBS_SANITY_SIM", "")))
        node = INSTANCE
    d = ebs_daemon(ctx, cloud, mode="all", args=[
        "--node-id", node, "--zone", ZONE_A, "--instance-type", "m5.large",
        "--state-dir", os.path.join(ctx.tmp, "state"),
        "--device-dir", os.path.join(devices, "by-id"), "--device-wait", "10s"])
    mutable = os.path.join(ctx.tmp, "mutable.yaml")
    with open(mutable, "w") as f:
        f.write('throughput: "200"\n')
    argv = [binary, "--csi.endpoint", d.socket,
            "--csi.stagingdir", os.path.join(ctx.tmp, "stage"),
            "--csi.mountdir", os.path.join(ctx.tmp, "mnt"),
            "--csi.testvolumeaccesstype", access, "--csi.testvolumesize", str(1 << 30),
            "--csi.testvolumeexpandsize", str(2 << 30),
            "--csi.testvolumemutableparameters", mutable, "--ginkgo.no-color"]
    argv += ["--ginkgo.focus", focus] if focus else []
    argv += ["--csi.testnodevolumeattachlimit"]
    log = os.path.join(ctx.tmp, "sanity.log")
    try:
        with open(log, "wb") as out:
            rc = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=500).returncode
        with open(log, errors="replace") as f:
            text = f.read()
        counts = {k: int(n) for n, k in
                  re.findall(r"(\d+) (Passed|Failed|Pending|Skipped)", text)}
        failed = sorted({f.strip() for f in re.findall(r"^\s*\[FAIL\].*$", text, re.M)})
        left = {"volumes": [v["id"] for v in cloud.live_volumes()],
                "snapshots": [s["id"] for s in cloud.snapshots()],
                "attachments": cloud.attachments()}
        assert rc == 0 and counts.get("Failed") == 0 and counts.get("Passed"), \
            "csi-sanity exited %d, %s, left in EC2 %s:\n%s\n%s" % (
                rc, counts, {k: len(v) for k, v in left.items()}, "\n".join(failed[:20]),
                text[-3000:])
        assert left == {"volumes": [], "snapshots": [], "attachments": []}, \
            "left in EC2: %s" % left
        d.stop()
        if moto:
            cloud.stop()
        else:
            cloud.sim.stop()
        assert loops_under(ctx.tmp) == {}, "loop devices left: %s" % loops_under(ctx.tmp)
        return counts
    finally:
        force_cleanup(ctx.tmp)


def note(counts):
    return "%d passed, %d failed, %d pending, %d skipped" % tuple(
        counts.get(k, 0) for k in ("Passed", "Failed", "Pending", "Skipped"))


def test_sanity_controller(ctx):
    return note(sanity(ctx, "mount", focus="Controller"))


def test_sanity_controller_moto(ctx):
    return note(sanity(ctx, "mount", focus="Controller", moto=True))


def full(access):
    def test(ctx):
        if not is_root():
            raise Skip("needs root (the simulator's devices are loop devices; mkfs, mount)")
        counts = sanity(ctx, access)
        assert counts.get("Skipped") == 0, "skipped specs: %s" % counts
        return note(counts)
    test.__name__ = "test_sanity_full_" + access
    return test


TESTS = [test_sanity_controller, test_sanity_controller_moto, full("mount"), full("block")]

if __name__ == "__main__":
    run(TESTS)
