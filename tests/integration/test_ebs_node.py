# SPDX-License-Identifier: Apache-2.0
"""The EBS backend's node service (volplugd node --backend ebs) on real devices: loop devices
stand in for attached EBS volumes, presented under their NVMe by-id names
(nvme-Amazon_Elastic_Block_Store_vol...) in a device directory of the test (--device-dir), or
named by a devicePath in the publish context as a Xen instance's xvd device is. ec2sim stands
in for the instance metadata service. Every test checks what a user would see: the gRPC code
and message, the bytes on disk, the mounts, the devices and the records in the state
directory. Needs root."""

import functools
import json
import os
import shutil
import stat
import subprocess
import threading
import time

import grpc

from harness import VOLPLUGD, Skip, is_root, run, to_dict
from test_node import (MiB, block_cap, force_cleanup, fs_bytes, mount_at, mount_cap,
                       mounts_under, sha_of, tool, write_random)

C = grpc.StatusCode
BY_ID_PREFIX = "nvme-Amazon_Elastic_Block_Store_"
NITRO, XEN = "i-0a000000000000001", "i-0b000000000000003"
VOL_A, VOL_B, VOL_C = "vol-0a1b2c3d4e5f60001", "vol-0a1b2c3d4e5f60002", "vol-0a1b2c3d4e5f60003"
# Flags of a node without a metadata service.
NO_IMDS = {"AWS_EC2_METADATA_DISABLED": "true"}
IDENTITY = ["--zone", "eu-west-1b", "--instance-type", "c5d.large"]
INSTANCE = "i-0fedcba9876543210"


class Disks:
    """Loop devices standing in for the EBS volumes EC2 attached to this instance: a sparse
    file each, attached, and named as udev names an EBS NVMe device in a by-id directory."""

    def __init__(self, ctx):
        self.files = os.path.join(ctx.tmp, "ebs-disks")
        self.by_id = os.path.join(ctx.tmp, "by-id")
        self.state = os.path.join(ctx.tmp, "state")
        os.makedirs(self.files)
        os.makedirs(self.by_id)
        self.devices = {}

    def attach(self, vid, size=64 * MiB, link=True):
        path = os.path.join(self.files, vid)
        with open(path, "wb") as f:
            f.truncate(size)
        dev = tool("losetup", "-f", "--show", path).strip()
        self.devices[vid] = dev
        if link:
            self.link(vid)
        return dev

    def link(self, vid):
        os.symlink(self.devices[vid], self.link_path(vid))

    def link_path(self, vid):
        return os.path.join(self.by_id, BY_ID_PREFIX + vid.replace("-", ""))

    def grow(self, vid, size):
        """EC2 grew the volume, and the kernel sees its new size."""
        with open(os.path.join(self.files, vid), "r+b") as f:
            f.truncate(size)
        tool("losetup", "-c", self.devices[vid])

    def attached(self, vid):
        return subprocess.run(["losetup", self.devices[vid]], capture_output=True).returncode == 0

    def record(self, vid):
        """The node's use record of the volume, or None."""
        try:
            with open(os.path.join(self.state, "ebs", "volumes", vid + ".json")) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def state_files(self):
        return sorted(os.listdir(os.path.join(self.state, "ebs", "volumes")))


def ebs_test(fn):
    """Root only. Whatever the test leaves mounted below its temp dir fails it; the disks it
    attached are detached after it (the node never detaches them: EC2 does)."""

    @functools.wraps(fn)
    def wrapper(ctx):
        if not is_root():
            raise Skip("needs root (loop devices, mkfs, mount)")
        try:
            note = fn(ctx)
        except BaseException:
            force_cleanup(ctx.tmp)
            raise
        left = [m["target"] for m in mounts_under(ctx.tmp)]
        force_cleanup(ctx.tmp)
        assert not left, "the test left mounted: %s" % left
        return note

    return wrapper


def ebs_daemon(ctx, disks, sim=None, args=(), env=None, node_id=INSTANCE, start=True,
               name="ebs"):
    """volplugd node --backend ebs: its identity from the simulator's metadata service, or
    from flags (node_id and IDENTITY) where there is none."""
    e = {"AWS_EC2_METADATA_SERVICE_ENDPOINT": sim.imds} if sim else dict(NO_IMDS)
    e.update(env or {})
    identity = [] if sim else IDENTITY
    return ctx.daemon("node", name=name, node_id=None if sim else node_id, env=e, start=start,
                      args=["--backend", "ebs", "--state-dir", disks.state, "--device-dir",
                            disks.by_id, "--device-wait", "2s"] + identity + list(args))


class Vol:
    """An attached EBS volume and the node-side paths a kubelet would use for it."""

    def __init__(self, ctx, d, vid, cap=None, publish_context=None):
        self.d, self.id = d, vid
        self.cap = cap or mount_cap()
        self.publish_context = publish_context or {"devicePath": "/dev/xvdba"}
        self.staging = os.path.join(ctx.tmp, "plugins", vid, "globalmount")
        os.makedirs(os.path.dirname(self.staging), exist_ok=True)
        self.pods = os.path.join(ctx.tmp, "pods")
        os.makedirs(self.pods, exist_ok=True)

    def target(self, pod="pod1"):
        return os.path.join(self.pods, pod + "-" + self.id)

    def stage(self, path=None, cap=None, publish_context=None):
        return self.d.call("NodeStageVolume", volume_id=self.id,
                           staging_target_path=path or self.staging,
                           volume_capability=cap or self.cap,
                           publish_context=publish_context or self.publish_context)

    def unstage(self, path=None):
        return self.d.call("NodeUnstageVolume", volume_id=self.id,
                           staging_target_path=path or self.staging)

    def publish(self, target=None, readonly=False):
        return self.d.call("NodePublishVolume", volume_id=self.id,
                           staging_target_path=self.staging, target_path=target or self.target(),
                           volume_capability=self.cap, readonly=readonly,
                           publish_context=self.publish_context)

    def unpublish(self, target=None):
        return self.d.call("NodeUnpublishVolume", volume_id=self.id,
                           target_path=target or self.target())

    def stats(self, path=None):
        return self.d.call("NodeGetVolumeStats", volume_id=self.id,
                           volume_path=path or self.target())

    def expand(self, path=None, required=0):
        return self.d.call("NodeExpandVolume", volume_id=self.id,
                           volume_path=path or self.target(),
                           capacity_range={"required_bytes": required})


def node_info(d):
    return to_dict(d.call("NodeGetInfo"))


# --- NodeGetInfo ------------------------------------------------------------------------------


def attach_until_full(sim, instance, zone):
    """How many data volumes EC2 (the simulator) attaches to instance before
    AttachmentLimitExceeded: the number NodeGetInfo must report."""
    from test_ec2sim import client  # botocore's own EC2 client

    ec2 = client(sim)
    names = ["/dev/xvd%s%s" % (a, b) for a in "bcdefg" for b in "abcdefghijklmnopqrstuvwxyz"]
    for n, device in enumerate(names):
        vid = ec2.create_volume(AvailabilityZone=zone, Size=1)["VolumeId"]
        try:
            ec2.attach_volume(VolumeId=vid, InstanceId=instance, Device=device)
        except Exception as e:
            assert "AttachmentLimitExceeded" in str(e), e
            return n
    raise AssertionError("no attachment limit after %d volumes" % len(names))


def imds_paths(sim):
    return set(sim.stats()["imds"])


@ebs_test
def test_node_info_from_instance_metadata(ctx):
    sim = ctx.ec2sim()
    disks = Disks(ctx)
    rows = []
    for instance, zone, enis, hypervisor in ((NITRO, "us-east-1a", 1, "m5.large"),
                                             (NITRO, "us-east-1a", 3, "m5.large, 3 ENIs"),
                                             (XEN, "us-east-1b", 1, "t2.medium")):
        sim.reset(imds_instance=instance, enis=enis)
        d = ebs_daemon(ctx, disks, sim, name="imds")
        info = node_info(d)
        assert info["node_id"] == instance, info
        assert info["accessible_topology"]["segments"] == {
            "topology.ebs.csi.aws.com/zone": zone, "topology.kubernetes.io/zone": zone}, info
        # What NodeGetInfo says the node takes is what EC2 attaches besides the root volume.
        accepted = attach_until_full(sim, instance, zone)
        assert int(info["max_volumes_per_node"]) == accepted, (info, accepted)
        rows.append("%s: %d" % (hypervisor, accepted))
        d.stop()
    asked = imds_paths(sim)
    assert not [p for p in asked if "iam" in p], "the node asked for credentials: %s" % asked
    assert "/latest/meta-data/instance-id" in asked, asked
    return "max_volumes_per_node = what EC2 attaches (%s)" % ", ".join(rows)


@ebs_test
def test_node_info_from_flags(ctx):
    disks = Disks(ctx)
    d = ebs_daemon(ctx, disks)
    info = node_info(d)
    assert info["node_id"] == INSTANCE, info
    assert info["accessible_topology"]["segments"]["topology.kubernetes.io/zone"] == "eu-west-1b"
    # c5d.large: 28 Nitro slots - 1 ENI - 1 NVMe instance store - the root volume.
    assert int(info["max_volumes_per_node"]) == 25, info
    d.stop()
    d = ebs_daemon(ctx, disks, args=["--max-volumes-per-node", "7"])
    assert int(node_info(d)["max_volumes_per_node"]) == 7, "the flag overrides the table"
    d.stop()

    # The flags win over the metadata service; it fills in what they leave out.
    sim = ctx.ec2sim()
    d = ebs_daemon(ctx, disks, sim, args=["--node-id", "node-7"])
    info = node_info(d)
    assert info["node_id"] == "node-7" and int(info["max_volumes_per_node"]) == 26, info
    d.stop()

    # Neither: volplugd refuses to start and says what to give.
    for env, args, want in (
            (NO_IMDS, ["--zone", "z1"], "no instance metadata service: give --node-id, --zone "
                                        "and --instance-type"),
            ({"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:1"}, [],
             "the instance metadata service at http://127.0.0.1:1 did not say instance-id")):
        p = subprocess.run([VOLPLUGD, "node", "--backend", "ebs",
                            "--endpoint", "unix://%s/x.sock" % ctx.tmp, "--state-dir",
                            disks.state] + args, env=dict(os.environ, **env),
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 2 and want in p.stderr, (p.returncode, p.stderr)
    return "25 for c5d.large from flags, 7 from --max-volumes-per-node"


# --- the node service on EBS devices -------------------------------------------------------------


ROOT_VOL = "vol-0123456789abcdef0"
MACS = "/latest/meta-data/network/interfaces/macs/"


def limit_becomes(d, want, what, within=12.0):
    """Asks NodeGetInfo until it says want (the node counts again every few seconds); returns
    how long that took."""
    start = time.monotonic()
    while True:
        got = int(node_info(d)["max_volumes_per_node"])
        if got == want:
            return time.monotonic() - start
        assert time.monotonic() - start < within, \
            "%s: max_volumes_per_node stays %d, want %d" % (what, got, want)
        time.sleep(0.25)


@ebs_test
def test_node_info_counts_again(ctx):
    """The kubelet asks NodeGetInfo again (CSIDriver nodeAllocatableUpdatePeriodSeconds): the
    answer follows the ENIs and the EBS volumes that are not volplug's as they come and go,
    without a restart; volplug's own attached volumes never count against it."""
    sim = ctx.ec2sim()
    sim.reset(imds_instance=NITRO, enis=1)
    disks = Disks(ctx)
    # The root volume, as udev names it on a Nitro instance (the node only reads names here).
    os.symlink("/dev/null", disks.link_path(ROOT_VOL))
    d = ebs_daemon(ctx, disks, sim)
    assert int(node_info(d)["max_volumes_per_node"]) == 26, "m5.large: 28 - 1 ENI - root"

    rows = []
    sim.config(enis=3)  # two network interfaces attached to the running instance
    rows.append("2 ENIs attached: 24 after %.1f s" % limit_becomes(d, 24, "2 more ENIs"))
    foreign = "vol-0a1b2c3d4e5f60009"
    os.symlink("/dev/null", disks.link_path(foreign))  # attached by someone else
    rows.append("a foreign volume: 23 after %.1f s" % limit_becomes(d, 23, "a foreign volume"))

    # volplug's own volume, attached and staged, takes none of the count.
    disks.attach(VOL_A)
    v = Vol(ctx, d, VOL_A)
    v.stage()
    time.sleep(6)
    assert int(node_info(d)["max_volumes_per_node"]) == 23, "volplug's volume was counted"

    # A burst of NodeGetInfo makes at most one round of metadata calls.
    before = imds_paths_count(sim, MACS)
    for _ in range(50):
        node_info(d)
    asked = imds_paths_count(sim, MACS) - before
    assert asked <= 1, "50 NodeGetInfo asked for the ENIs %d times" % asked

    os.unlink(disks.link_path(foreign))
    sim.config(enis=1)
    rows.append("both gone: 26 after %.1f s" % limit_becomes(d, 26, "the ENIs and volume gone"))
    # A mapping the instance was started with counts too (IMDS lists launch-time volumes).
    sim.config(imds_ebs_mappings=2)
    limit_becomes(d, 24, "2 volumes mapped at launch")
    v.unstage()
    return "; ".join(rows)


def imds_paths_count(sim, path):
    return sim.stats()["imds"].get(path, 0)


def can_grow_ext4_online():
    """Whether this process may grow a mounted ext4 (CAP_SYS_RESOURCE, bit 24)."""
    with open("/proc/self/status") as f:
        caps = [line.split()[1] for line in f if line.startswith("CapEff:")][0]
    return bool(int(caps, 16) & (1 << 24))


def lifecycle(ctx, fs, size):
    disks = Disks(ctx)
    dev = disks.attach(VOL_A, size)
    d = ebs_daemon(ctx, disks)
    v = Vol(ctx, d, VOL_A, cap=mount_cap(fs))
    v.stage()
    m = mount_at(v.staging)
    assert m and m["source"] == dev and m["fstype"] == fs, m
    rec = disks.record(VOL_A)
    assert rec["staging"]["path"] == v.staging and rec["staging"]["device"] == dev, rec
    assert rec["node"] == INSTANCE, rec
    v.publish()
    digest = write_random(os.path.join(v.target(), "data"))
    s = to_dict(v.stats())
    assert s["usage"][0]["total"] == str(fs_bytes(v.target())), s
    assert s["volume_condition"] == {"message": "volume is mounted and writable"}, s

    # EC2 grew the volume: the filesystem follows, online at NodeExpandVolume where the
    # filesystem grows mounted (xfs; ext4 online needs CAP_SYS_RESOURCE), else at the next
    # stage.
    before = fs_bytes(v.target())
    disks.grow(VOL_A, 2 * size)
    if fs == "ext4" and not can_grow_ext4_online():
        v.unpublish()
        v.unstage()
        v.stage()
        v.publish()
    reply = to_dict(v.expand(required=2 * size))
    assert int(reply["capacity_bytes"]) == 2 * size, reply
    assert fs_bytes(v.target()) > before + size // 2, (before, fs_bytes(v.target()))
    d.expect_error(C.OUT_OF_RANGE, "NodeExpandVolume", volume_id=VOL_A,
                   volume_path=v.target(), capacity_range={"required_bytes": 3 * size},
                   match="capacity_range.required_bytes")

    v.unpublish()
    v.unstage()
    assert mounts_under(ctx.tmp) == [], mounts_under(ctx.tmp)
    assert disks.attached(VOL_A), "the node detached the device: EC2 does that"
    assert disks.state_files() == [], "records left: %s" % disks.state_files()
    assert not os.path.exists(v.staging) or os.listdir(v.staging) == []

    # Staged again elsewhere: the filesystem and its data are kept, never reformatted.
    again = os.path.join(ctx.tmp, "plugins", "again")
    os.makedirs(again)
    v.stage(path=again)
    assert sha_of(os.path.join(again, "data")) == digest
    v.unstage(path=again)
    return "%s: staged, published, grown to %d MiB, unstaged, staged again with its data" % (
        fs, 2 * size // MiB)


@ebs_test
def test_lifecycle_ext4(ctx):
    return lifecycle(ctx, "ext4", 64 * MiB)


@ebs_test
def test_lifecycle_xfs(ctx):
    return lifecycle(ctx, "xfs", 320 * MiB)


@ebs_test
def test_raw_block(ctx):
    disks = Disks(ctx)
    dev = disks.attach(VOL_A)
    d = ebs_daemon(ctx, disks)
    v = Vol(ctx, d, VOL_A, cap=block_cap())
    v.stage()
    v.publish()
    st = os.stat(v.target())
    assert stat.S_ISBLK(st.st_mode) and st.st_rdev == os.stat(dev).st_rdev, st
    s = to_dict(v.stats())
    assert s["usage"] == [{"total": str(64 * MiB), "unit": "BYTES"}], s
    # A filesystem stage of a volume staged raw is refused.
    d.expect_error(C.ALREADY_EXISTS, "NodeStageVolume", volume_id=VOL_A,
                   staging_target_path=os.path.join(ctx.tmp, "fs-stage"),
                   volume_capability=mount_cap(), publish_context=v.publish_context,
                   match="raw block")
    d.expect_error(C.FAILED_PRECONDITION, "NodeUnstageVolume", volume_id=VOL_A,
                   staging_target_path=v.staging, match="still published")
    v.unpublish()
    assert not os.path.exists(v.target()), "the block target made by volplug stays"
    v.unstage()
    assert disks.attached(VOL_A) and disks.state_files() == []


@ebs_test
def test_device_named_at_attach(ctx):
    """A Xen instance's volume has no serial: the devicePath the controller named at attach is
    its device, recorded at stage for the calls that have no publish context."""
    disks = Disks(ctx)
    dev = disks.attach(VOL_B, link=False)
    d = ebs_daemon(ctx, disks)
    v = Vol(ctx, d, VOL_B, publish_context={"devicePath": dev})
    v.stage()
    assert mount_at(v.staging)["source"] == dev
    assert disks.record(VOL_B)["staging"]["device"] == dev
    v.publish()
    s = to_dict(v.stats())
    assert not s["volume_condition"].get("abnormal"), s
    v.unpublish()
    v.unstage()
    assert mounts_under(ctx.tmp) == [] and disks.state_files() == []

    # A devicePath that is no volume's device is not used, whatever it names.
    for path, why in (("/dev/null", "/dev/null is not a block device"),
                      ("/etc/passwd", "'/etc/passwd' (named at attach) is not a device path"),
                      ("/dev/../etc/passwd", "is not a device path under /dev")):
        start = time.monotonic()
        e = d.expect_error(C.NOT_FOUND, "NodeStageVolume", volume_id=VOL_C,
                           staging_target_path=v.staging, volume_capability=mount_cap(),
                           publish_context={"devicePath": path}, match=why)
        assert "volume vol-0a1b2c3d4e5f60003 is not attached to this node" in e.details()
        assert time.monotonic() - start >= 1.9, "it waited --device-wait for the device"
    assert mounts_under(ctx.tmp) == [] and disks.state_files() == []


@ebs_test
def test_device_appears_while_the_stage_waits(ctx):
    disks = Disks(ctx)
    disks.attach(VOL_A, link=False)
    d = ebs_daemon(ctx, disks)
    v = Vol(ctx, d, VOL_A)
    timer = threading.Timer(0.5, disks.link, (VOL_A,))  # udev makes the link late
    start = time.monotonic()
    timer.start()
    v.stage()
    waited = time.monotonic() - start
    timer.join()
    assert waited >= 0.5 and mount_at(v.staging), waited
    v.unstage()
    return "staged after %.2f s" % waited


@ebs_test
def test_unknown_volumes(ctx):
    disks = Disks(ctx)
    d = ebs_daemon(ctx, disks)
    v = Vol(ctx, d, VOL_C)
    e = d.expect_error(C.NOT_FOUND, "NodeStageVolume", volume_id=VOL_C,
                       staging_target_path=v.staging, volume_capability=mount_cap(),
                       publish_context={"devicePath": "/dev/xvdzz"},
                       match="volume vol-0a1b2c3d4e5f60003 is not attached to this node")
    assert BY_ID_PREFIX + "vol0a1b2c3d4e5f60003" in e.details(), e.details()
    for bad in ("vol-123", "vol-0A1B2C3D4E5F60003", "snap-0a1b2c3d4e5f60003"):
        d.expect_error(C.NOT_FOUND, "NodeStageVolume", volume_id=bad,
                       staging_target_path=v.staging, volume_capability=mount_cap(),
                       match="volume_id: '%s' is not an EBS volume ID" % bad)
    d.expect_error(C.NOT_FOUND, "NodeGetVolumeStats", volume_id=VOL_C, volume_path=v.staging,
                   match="volume_id: volume %s is not attached to this node" % VOL_C)
    d.expect_error(C.FAILED_PRECONDITION, "NodePublishVolume", volume_id=VOL_C,
                   staging_target_path=v.staging, target_path=v.target(),
                   volume_capability=mount_cap(), match="is not staged on this node")
    for method, field in (("NodeUnpublishVolume", "target_path"),
                          ("NodeUnstageVolume", "staging_target_path")):
        d.call(method, volume_id=VOL_C, **{field: v.target()})  # nothing there: done
    assert mounts_under(ctx.tmp) == [] and disks.state_files() == []


@ebs_test
def test_records_of_an_earlier_boot_are_void(ctx):
    disks = Disks(ctx)
    disks.attach(VOL_A)
    d = ebs_daemon(ctx, disks)
    v = Vol(ctx, d, VOL_A)
    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    volumes = os.path.join(disks.state, "ebs", "volumes")
    claim = {"format": 1, "node": INSTANCE, "targets": [],
             "staging": {"path": "/elsewhere", "created": False, "dev": 0, "ino": 0,
                         "block": True, "fstype": ""}}
    with open(os.path.join(volumes, VOL_A + ".json"), "w") as f:
        json.dump(dict(claim, boot_id=boot), f)
    d.expect_error(C.ALREADY_EXISTS, "NodeStageVolume", volume_id=VOL_A,
                   staging_target_path=v.staging, volume_capability=mount_cap(),
                   match="volume %s is staged for raw block access at '/elsewhere'" % VOL_A)
    with open(os.path.join(volumes, VOL_A + ".json"), "w") as f:
        json.dump(dict(claim, boot_id="00000000-0000-0000-0000-000000000000"), f)
    v.stage()
    assert disks.record(VOL_A)["boot_id"] == boot
    v.unstage()
    assert disks.state_files() == []


def fifo_opened(path):
    """Whether a process holds the FIFO open for reading (it read a credential)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:
        return False
    os.close(fd)
    return True


@ebs_test
def test_node_never_reads_credentials(ctx):
    """The credential chain's first configured source is a shared credentials file that is
    broken: a FIFO (whoever opens it to read hangs there, and the test sees the reader) with
    no such profile. The node serves every Node RPC all the same, opens no credential, asks the
    metadata service for none and calls neither EC2 nor STS."""
    sim = ctx.ec2sim()
    disks = Disks(ctx)
    disks.attach(VOL_A)
    fifo = os.path.join(ctx.tmp, "credentials")
    os.mkfifo(fifo)
    broken = {k: None for k in os.environ if k.startswith("AWS_")}  # nothing before the file
    broken.update({"AWS_SHARED_CREDENTIALS_FILE": fifo, "AWS_PROFILE": "nobody",
                   "AWS_REGION": "us-east-1"})
    d = ebs_daemon(ctx, disks, sim, env=broken)
    v = Vol(ctx, d, VOL_A)
    calls = ["NodeGetInfo", "NodeGetCapabilities"]
    assert node_info(d)["node_id"] == NITRO
    d.call("NodeGetCapabilities")
    v.stage()
    v.publish()
    v.stats()
    v.expand()
    v.unpublish()
    v.unstage()
    calls += ["NodeStageVolume", "NodePublishVolume", "NodeGetVolumeStats", "NodeExpandVolume",
              "NodeUnpublishVolume", "NodeUnstageVolume"]
    d.call("Probe")
    assert not fifo_opened(fifo), "volplugd opened the credentials file"
    asked = imds_paths(sim)
    assert not [p for p in asked if "iam" in p], "asked for instance credentials: %s" % asked
    assert sim.stats()["total"] == 0, "EC2 or STS was called: %s" % sim.stats()["calls"]
    return "%d Node RPCs served, no credential read, no EC2 call" % len(calls)


@ebs_test
def test_state_dir_cleanup_takes_only_its_own(ctx):
    """At start the node removes from STATE/ebs/tmp/ only what a crash of its own record writes
    left (".<volume id>.json.tmp-<16 hex>", a regular file nobody holds); anything else there is
    left as it is, a FIFO under its name included (never opened to block the start). A symlink
    in place of STATE/ebs or of its folders is refused, naming it, and never followed."""
    disks = Disks(ctx)
    tmp = os.path.join(disks.state, "ebs", "tmp")
    os.makedirs(tmp)
    os.makedirs(os.path.join(disks.state, "ebs", "volumes"))
    hexes = "0123456789abcdef"
    stale = "." + VOL_A + ".json.tmp-" + hexes
    kept = ["notes.txt", ".notes.tmp-" + hexes, ".vol-123.json.tmp-" + hexes,
            ".nothing.json.tmp-" + hexes]
    for name in [stale] + kept:
        with open(os.path.join(tmp, name), "w") as f:
            f.write("x")
    fifo = "." + VOL_B + ".json.tmp-" + hexes
    os.mkfifo(os.path.join(tmp, fifo))
    outside = os.path.join(ctx.tmp, "outside")
    with open(outside, "w") as f:
        f.write("not the node's")
    link = "." + VOL_C + ".json.tmp-" + hexes
    os.symlink(outside, os.path.join(tmp, link))
    d = ebs_daemon(ctx, disks, start=False)
    d.start(wait=False)
    d.wait_ready(timeout=5)
    assert sorted(os.listdir(tmp)) == sorted(kept + [fifo, link]), os.listdir(tmp)
    assert os.path.exists(outside), "a symlink is never followed"
    d.stop()

    # STATE/ebs, then STATE/ebs/tmp, a symlink to a folder elsewhere: refused, naming it.
    elsewhere = os.path.join(ctx.tmp, "elsewhere")
    os.makedirs(os.path.join(elsewhere, "tmp"))
    os.makedirs(os.path.join(elsewhere, "volumes"))
    planted = os.path.join(elsewhere, "tmp", stale)
    with open(planted, "w") as f:
        f.write("x")
    top = os.path.join(disks.state, "ebs")
    os.rename(top, top + ".old")
    os.symlink(elsewhere, top)
    refused = []
    for victim in (top, os.path.join(top + ".old", "tmp")):
        if victim != top:
            os.unlink(top)
            os.rename(top + ".old", top)
            victim = os.path.join(top, "tmp")
            shutil.rmtree(victim)
            os.symlink(os.path.join(elsewhere, "tmp"), victim)
        d = ebs_daemon(ctx, disks, start=False)
        d.start(wait=False)
        assert d.proc.wait(10) != 0, "volplugd started over a symlinked state directory"
        assert "%s is a symlink, never followed" % victim in d.logs(), d.logs()
        refused.append(victim)
    assert os.path.exists(planted), "nothing is removed through a symlink"
    return "%d left alone, 1 removed, %d symlinks refused" % (len(kept) + 2, len(refused))


if __name__ == "__main__":
    run([test_node_info_from_instance_metadata, test_node_info_from_flags,
         test_node_info_counts_again, test_lifecycle_ext4,
         test_lifecycle_xfs, test_raw_block, test_device_named_at_attach,
         test_device_appears_while_the_stage_waits, test_unknown_volumes,
         test_records_of_an_earlier_boot_are_void, test_node_never_reads_credentials,
         test_state_dir_cleanup_takes_only_its_own])
