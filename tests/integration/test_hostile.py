# SPDX-License-Identifier: Apache-2.0
"""Hostile requests against every Node and Controller RPC: ids and paths made to lead the driver
onto things it does not own. volplugd runs in a private mount namespace, chrooted into a
directory of the test (the jail), so a bug can never unmount or delete anything of the machine:
"/" is the jail's root, /etc/passwd the jail's own, /proc a bind of the real one inside the
namespace only. Each row asserts the gRPC code, that the message names the field at fault, and
that the jail's mount table (/proc/PID/mountinfo) and its files are unchanged. Two races swap a
symlink into the target path while NodePublishVolume and NodeUnpublishVolume run. One TAP line
per row. Needs root."""

import ctypes
import hashlib
import os
import shutil
import stat
import subprocess
import sys
import threading
import traceback

import grpc

from harness import VOLPLUGD, Ctx, Daemon, is_root

MiB = 1 << 20
C = grpc.StatusCode
OK = None  # the row expects success
RACE_ROUNDS = int(os.environ.get("VOLPLUG_HOSTILE_RACE_ROUNDS", "200"))
UNKNOWN = "vol-00000000000000ff"


def mount_cap(fs="ext4", flags=(), group=None):
    m = {"fs_type": fs, "mount_flags": list(flags)}
    if group is not None:
        m["volume_mount_group"] = group
    return {"mount": m, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}


BLOCK = {"block": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}


class Jail(Daemon):
    """volplugd in its own mount namespace, chrooted into ROOT; paths in requests are the
    jail's, host(path) is where the test sees them."""

    def __init__(self, tmp):
        super().__init__(tmp, name="jail")
        self.root = os.path.join(self.dir, "root")
        self.socket = self.host("/run/csi.sock")
        for d in ("usr", "dev", "proc", "sys", "run", "pool", "flex", "etc", "tmp", "foreign",
                  "kubelet/plugins", "kubelet/pods"):
            os.makedirs(self.host("/" + d))
        for name in ("bin", "sbin", "lib", "lib64"):
            if os.path.islink("/" + name):
                os.symlink(os.readlink("/" + name), self.host("/" + name))
        with open(self.host("/etc/passwd"), "w") as f:
            f.write("root:x:0:0:root:/root:/bin/sh\n")
        with open(self.host("/etc/group"), "w") as f:
            f.write("root:x:0:\n")
        shutil.copy(VOLPLUGD, self.host("/volplugd"))

    def host(self, path):
        return self.root + path

    def command(self):
        """volplugd's command line inside the jail."""
        return ("/volplugd all --endpoint unix:///run/csi.sock --pool /pool --node-id node-1 "
                "--driver-name test.volplug.io --flexvolume-dir /flex "
                "--max-volumes-per-node 16 -v 4")

    def argv(self):
        script = "set -e; mount --make-rprivate /; "
        for d in ("usr", "dev", "sys", "proc"):
            script += "mount --rbind /%s %s/%s; " % (d, self.root, d)
        script += "exec chroot %s %s" % (self.root, self.command())
        return ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script]

    def inside(self, command):
        """Runs a shell command in the jail's mount namespace (host paths)."""
        subprocess.run(["nsenter", "-t", str(self.proc.pid), "-m", "/bin/sh", "-c", command],
                       check=True, capture_output=True)

    def mounts(self):
        """The namespace's mount table: (mount ID, mount point, source, fstype) per mount."""
        out = set()
        with open("/proc/%d/mountinfo" % self.proc.pid) as f:
            for line in f:
                left, right = line.split(" - ", 1)
                fields = left.split()
                out.add((fields[0], fields[4], right.split()[1], right.split()[0]))
        return out

    def seen(self, path):
        """path as the daemon sees it (through its root, its mounts included)."""
        return "/proc/%d/root%s" % (self.proc.pid, path)

    def files(self):
        """What is in the jail's etc, kubelet and foreign trees, mounts included."""
        out = {}
        for top in ("/etc", "/kubelet", "/foreign"):
            base = self.seen(top)
            if not os.path.isdir(base):
                continue
            for d, dirs, names in os.walk(base):
                for n in dirs + names:
                    p = os.path.join(d, n)
                    st = os.lstat(p)
                    digest = ""
                    if stat.S_ISREG(st.st_mode) and st.st_size < MiB:
                        with open(p, "rb") as f:
                            digest = hashlib.sha256(f.read()).hexdigest()
                    out[p[len(base):] + "@" + top] = (st.st_mode, st.st_ino, st.st_size, digest)
        return out


class Rows:
    """TAP lines, one per row."""

    def __init__(self):
        self.n = 0
        self.failed = 0
        self.lines = []

    def report(self, description, error=None):
        self.n += 1
        if error is None:
            print("ok %d - %s" % (self.n, description), flush=True)
        else:
            self.failed += 1
            print("not ok %d - %s" % (self.n, description), flush=True)
            for line in error.splitlines():
                print("#   " + line, flush=True)


def short(value, limit=60):
    value = repr(value)
    return value if len(value) <= limit else value[:limit] + "...(%d bytes)" % len(value)


def check_row(jail, method, request, want, names):
    """Calls, then asserts the code, the message and that nothing changed. Returns a short
    description of what was answered."""
    mounts, files = jail.mounts(), jail.files()
    try:
        jail.call(method, request)
        got, details = OK, ""
    except grpc.RpcError as e:
        got, details = e.code(), e.details() or ""
    assert got == want, "want %s, got %s: %s" % (want, got, details)
    if want is not OK:
        assert names in details, "the message %r does not name %r" % (details, names)
        assert len(details) < 2048, "a message of %d bytes" % len(details)
    assert jail.mounts() == mounts, "the mount table changed: +%s -%s" % (
        jail.mounts() - mounts, mounts - jail.mounts())
    changed = {k for k in set(files) | set(jail.files())
               if files.get(k) != jail.files().get(k)}
    assert not changed, "files changed: %s" % sorted(changed)[:5]
    return "%s%s" % (got.name if got else "OK", ": " + short(details, 90) if details else "")


# --- the jail's fixtures -------------------------------------------------------------------


def make_volume(jail, name, cap):
    v = jail.call("CreateVolume", name=name, capacity_range={"required_bytes": 32 * MiB},
                  volume_capabilities=[cap]).volume
    jail.call("ControllerPublishVolume", volume_id=v.volume_id, node_id="node-1",
              volume_capability=cap)
    return v.volume_id


def set_up_foreign(jail):
    """Foreign things to aim at: a tmpfs, symlinks to it, a directory with a file."""
    os.makedirs(jail.host("/foreign/tmpfs"))
    jail.inside("mount -t tmpfs -o size=1m foreign %s && echo precious > %s/data"
                % (jail.host("/foreign/tmpfs"), jail.host("/foreign/tmpfs")))
    os.symlink("/foreign/tmpfs", jail.host("/kubelet/link"))
    os.symlink("/foreign", jail.host("/kubelet/linkdir"))
    os.makedirs(jail.host("/kubelet/full"))
    with open(jail.host("/kubelet/full/keep"), "w") as f:
        f.write("mine\n")
    for name in "abcd":
        os.makedirs(jail.host("/kubelet/plugins/" + name))


def set_up(jail):
    """Volumes in every state, and foreign things to aim at."""
    set_up_foreign(jail)
    vols = {}
    for name, cap in (("a", mount_cap()), ("b", mount_cap()), ("c", BLOCK), ("d", mount_cap())):
        vols[name] = make_volume(jail, name, cap)
    return stage_volumes(jail, vols)


def stage_volumes(jail, vols):
    """a and b staged, c staged raw, d not; a published, c published raw."""
    for name in ("a", "b"):
        jail.call("NodeStageVolume", volume_id=vols[name], volume_capability=mount_cap(),
                  staging_target_path="/kubelet/plugins/%s/globalmount" % name)
    jail.call("NodeStageVolume", volume_id=vols["c"], volume_capability=BLOCK,
              staging_target_path="/kubelet/plugins/c/globalmount")
    os.makedirs(jail.host("/kubelet/plugins/c/globalmount"), exist_ok=True)
    jail.call("NodePublishVolume", volume_id=vols["a"], volume_capability=mount_cap(),
              staging_target_path="/kubelet/plugins/a/globalmount",
              target_path="/kubelet/pods/a-mount")
    jail.call("NodePublishVolume", volume_id=vols["c"], volume_capability=BLOCK,
              staging_target_path="/kubelet/plugins/c/globalmount",
              target_path="/kubelet/pods/c-dev")
    return vols


# Paths aimed at what the driver does not own: (label, path, code for a place to stage/publish
# at or to undo). volume_path takes NOT_FOUND for all of them: nothing there is the volume.
HOSTILE_PATHS = [
    ("the root", "/", C.INVALID_ARGUMENT),
    ("relative", "kubelet/pods/x", C.INVALID_ARGUMENT),
    ("dot-dot", "/kubelet/pods/../plugins/a/globalmount", C.INVALID_ARGUMENT),
    ("a NUL", "/kubelet/pods/x\x00/../../../etc", C.INVALID_ARGUMENT),
    ("a symlink", "/kubelet/link", C.INVALID_ARGUMENT),
    ("through a symlink", "/kubelet/linkdir/tmpfs", C.INVALID_ARGUMENT),
    ("a 300-byte name", "/kubelet/" + "n" * 300, C.INVALID_ARGUMENT),
    ("10 KB", "/kubelet/" + "p/" * 5000 + "x", C.INVALID_ARGUMENT),
    ("a foreign tmpfs", "/foreign/tmpfs", C.FAILED_PRECONDITION),
    ("/etc/passwd", "/etc/passwd", C.FAILED_PRECONDITION),
    ("a non-empty dir", "/kubelet/full", C.FAILED_PRECONDITION),
    ("/etc", "/etc", C.FAILED_PRECONDITION),
    ("/proc", "/proc", C.FAILED_PRECONDITION),
    ("another volume's staging", "/kubelet/plugins/a/globalmount", C.FAILED_PRECONDITION),
    ("another volume's target", "/kubelet/pods/a-mount", C.FAILED_PRECONDITION),
    ("another volume's device", "/kubelet/pods/c-dev", C.FAILED_PRECONDITION),
]


def path_rows(v):
    """(description, method, request, code, field) for every Node RPC and hostile path."""
    rows = []
    b_stage = "/kubelet/plugins/b/globalmount"
    for label, path, code in HOSTILE_PATHS:
        # Stage a fresh volume there; unstage a staged one and an unknown one from there.
        rows.append(("NodeStageVolume staging=%s" % label, "NodeStageVolume",
                     {"volume_id": v["d"], "staging_target_path": path,
                      "volume_capability": mount_cap()}, code, "staging_target_path"))
        # b is staged elsewhere and nothing of it is at the path: OK as the CSI spec asks,
        # the thing there untouched (check_row asserts the mount table and the files). An
        # unknown volume has no device to prove that by: whatever is there is refused.
        for who, vid in (("staged b", v["b"]), ("unknown", UNKNOWN)):
            want = OK if who == "staged b" and code == C.FAILED_PRECONDITION else code
            rows.append(("NodeUnstageVolume (%s) staging=%s" % (who, label), "NodeUnstageVolume",
                         {"volume_id": vid, "staging_target_path": path}, want,
                         "staging_target_path"))
        # Publish a staged volume onto it, or from it as if it were the staging path.
        rows.append(("NodePublishVolume target=%s" % label, "NodePublishVolume",
                     {"volume_id": v["b"], "staging_target_path": b_stage, "target_path": path,
                      "volume_capability": mount_cap()}, code, "target_path"))
        rows.append(("NodePublishVolume block target=%s" % label, "NodePublishVolume",
                     {"volume_id": v["c"], "staging_target_path": "/kubelet/plugins/c/globalmount",
                      "target_path": path, "volume_capability": BLOCK},
                     code if code != C.FAILED_PRECONDITION or "c-dev" not in path else OK,
                     "target_path"))
        rows.append(("NodePublishVolume staging=%s" % label, "NodePublishVolume",
                     {"volume_id": v["b"], "staging_target_path": path,
                      "target_path": "/kubelet/pods/b-never", "volume_capability": mount_cap()},
                     code, "staging_target_path"))
        for who, vid in (("staged b", v["b"]), ("unknown", UNKNOWN)):
            rows.append(("NodeUnpublishVolume (%s) target=%s" % (who, label),
                         "NodeUnpublishVolume", {"volume_id": vid, "target_path": path}, code,
                         "target_path"))
        # A path that cannot hold the volume means it is not found there (the conformance
        # suite asks NOT_FOUND for a relative one); a NUL is refused on the wire.
        absent = C.INVALID_ARGUMENT if "\x00" in path else C.NOT_FOUND
        rows.append(("NodeExpandVolume volume_path=%s" % label, "NodeExpandVolume",
                     {"volume_id": v["b"], "volume_path": path}, absent, "volume_path"))
        rows.append(("NodeGetVolumeStats volume_path=%s" % label, "NodeGetVolumeStats",
                     {"volume_id": v["b"], "volume_path": path}, absent, "volume_path"))
    return rows


HOSTILE_IDS = [
    ("an id with /", "vol-../../etc"),
    ("an id of ..", ".."),
    ("a NUL id", "vol-0123456789abcdef\x00/../x"),
    ("a 10 KB id", "vol-" + "a" * 10240),
]


def id_rows(v):
    rows = []
    staged_a = "/kubelet/plugins/a/globalmount"
    for label, vid in HOSTILE_IDS:
        nul = "\x00" in vid
        notfound = (C.INVALID_ARGUMENT, "a NUL byte") if nul else (C.NOT_FOUND, "volume_id")
        undo = (C.INVALID_ARGUMENT, "a NUL byte") if nul else (C.FAILED_PRECONDITION,
                                                                "staging_target_path")
        rows += [
            ("NodeStageVolume %s" % label, "NodeStageVolume",
             {"volume_id": vid, "staging_target_path": "/kubelet/plugins/x",
              "volume_capability": mount_cap()}) + notfound,
            ("NodeUnstageVolume %s at a's staging" % label, "NodeUnstageVolume",
             {"volume_id": vid, "staging_target_path": staged_a}) + undo,
            ("NodePublishVolume %s" % label, "NodePublishVolume",
             {"volume_id": vid, "staging_target_path": staged_a, "target_path": "/kubelet/pods/x",
              "volume_capability": mount_cap()}) + notfound,
            ("NodeUnpublishVolume %s at a's target" % label, "NodeUnpublishVolume",
             {"volume_id": vid, "target_path": "/kubelet/pods/a-mount"}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (C.FAILED_PRECONDITION, "target_path")),
            ("NodeExpandVolume %s" % label, "NodeExpandVolume",
             {"volume_id": vid, "volume_path": "/kubelet/pods/a-mount"}) + notfound,
            ("NodeGetVolumeStats %s" % label, "NodeGetVolumeStats",
             {"volume_id": vid, "volume_path": "/kubelet/pods/a-mount"}) + notfound,
            ("DeleteVolume %s" % label, "DeleteVolume", {"volume_id": vid}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (OK, "")),
            ("ControllerPublishVolume %s" % label, "ControllerPublishVolume",
             {"volume_id": vid, "node_id": "node-1", "volume_capability": mount_cap()}) + notfound,
            ("ControllerUnpublishVolume %s" % label, "ControllerUnpublishVolume",
             {"volume_id": vid, "node_id": "node-1"}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (OK, "")),
            ("ValidateVolumeCapabilities %s" % label, "ValidateVolumeCapabilities",
             {"volume_id": vid, "volume_capabilities": [mount_cap()]}) + notfound,
            ("ControllerGetVolume %s" % label, "ControllerGetVolume", {"volume_id": vid}) + notfound,
            ("ControllerExpandVolume %s" % label, "ControllerExpandVolume",
             {"volume_id": vid, "capacity_range": {"required_bytes": 64 * MiB}}) + notfound,
            ("ControllerModifyVolume %s" % label, "ControllerModifyVolume",
             {"volume_id": vid, "mutable_parameters": {"iops": "4000"}}) + notfound,
            ("CreateSnapshot of %s" % label, "CreateSnapshot",
             {"name": "snap-hostile", "source_volume_id": vid}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (C.NOT_FOUND, "source_volume_id")),
            ("DeleteSnapshot %s" % label, "DeleteSnapshot", {"snapshot_id": vid}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (OK, "")),
            ("CreateVolume named %s" % label, "CreateVolume",
             {"name": vid, "volume_capabilities": [mount_cap()]}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (C.INVALID_ARGUMENT, "name")),
            ("ListVolumes from %s" % label, "ListVolumes", {"starting_token": vid}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (C.ABORTED, "starting_token")),
            ("ControllerPublishVolume to node %s" % label, "ControllerPublishVolume",
             {"volume_id": v["d"], "node_id": vid, "volume_capability": mount_cap()}) +
            ((C.INVALID_ARGUMENT, "a NUL byte") if nul else (C.NOT_FOUND, "node")),
        ]
    return rows


def option_rows(v):
    """Options meant to turn a mount into something else, or to reach a shell."""
    d = v["d"]
    stage = "/kubelet/plugins/d/globalmount"
    rows = []
    for fs in ("ext4 -o /etc", "../../bin/sh", "ext4,bind", "$(reboot)"):
        rows.append(("NodeStageVolume fs_type=%s" % short(fs), "NodeStageVolume",
                     {"volume_id": d, "staging_target_path": stage, "volume_capability": mount_cap(fs)},
                     C.INVALID_ARGUMENT, "fs_type"))
    for flags in (["bind"], ["rw,bind"], ["remount"], ["move"], ["rshared"], ["nosuid\n"], [""],
                  ["loop=/dev/loop0"], ["noatime", "bogus=1"]):
        i = len(flags) - 1
        rows.append(("NodeStageVolume mount_flags=%s" % short(flags), "NodeStageVolume",
                     {"volume_id": d, "staging_target_path": stage,
                      "volume_capability": mount_cap(flags=flags)},
                     C.INVALID_ARGUMENT, "mount_flags[%d]" % i))
        rows.append(("NodePublishVolume mount_flags=%s" % short(flags), "NodePublishVolume",
                     {"volume_id": v["b"], "staging_target_path": "/kubelet/plugins/b/globalmount",
                      "target_path": "/kubelet/pods/b-flags", "volume_capability": mount_cap(flags=flags)},
                     C.INVALID_ARGUMENT, "mount_flags[%d]" % i))
    rows.append(("NodePublishVolume volume_mount_group='0; rm -rf /'", "NodePublishVolume",
                 {"volume_id": v["b"], "staging_target_path": "/kubelet/plugins/b/globalmount",
                  "target_path": "/kubelet/pods/b-group",
                  "volume_capability": mount_cap(group="0; rm -rf /")},
                 C.INVALID_ARGUMENT, "volume_mount_group"))
    rows.append(("CreateVolume fstype parameter 'ext4;reboot'", "CreateVolume",
                 {"name": "hostile-params", "volume_capabilities": [mount_cap()],
                  "parameters": {"csi.storage.k8s.io/fstype": "ext4;reboot"}},
                 C.INVALID_ARGUMENT, "fstype"))
    return rows


# --- races ---------------------------------------------------------------------------------

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
RENAME_EXCHANGE = 2


def exchange(a, b):
    return libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), RENAME_EXCHANGE)


class Swapper:
    """Swaps a directory and a symlink to the foreign tmpfs under one name, as fast as it can."""

    def __init__(self, jail, name):
        self.path = jail.host("/kubelet/pods/" + name)
        self.other = self.path + ".other"
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run)
        self.swaps = 0

    def run(self):
        while not self.stop_flag.is_set():
            if exchange(self.path, self.other) == 0:
                self.swaps += 1

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop_flag.set()
        self.thread.join()


def foreign_mounts(jail):
    """The mounts at the foreign tmpfs (mountinfo shows them relative to the jail's root)."""
    return sorted(m for m in jail.mounts() if m[1] == "/foreign/tmpfs")


def foreign_intact(jail, before):
    assert len(before) == 1, "the foreign tmpfs is not mounted: %s" % before
    tmpfs = foreign_mounts(jail)
    assert tmpfs == before, "the foreign tmpfs mounts changed: %s" % tmpfs
    with open(jail.seen("/foreign/tmpfs/data")) as f:
        assert f.read() == "precious\n", "the foreign data changed"
    assert os.listdir(jail.seen("/foreign/tmpfs")) == ["data"], "something appeared in it"


def volume_mounts(jail, vid):
    """Mount points of the volume's filesystem (its staging mount excluded), as the jail sees
    them."""
    dev = os.stat(jail.seen("/kubelet/plugins/b/globalmount")).st_dev
    major, minor = os.major(dev), os.minor(dev)
    out = []
    with open("/proc/%d/mountinfo" % jail.proc.pid) as f:
        for line in f:
            fields = line.split()
            if fields[2] == "%d:%d" % (major, minor) and not fields[4].endswith("b/globalmount"):
                out.append(fields[4])
    return out


def prepare_race(jail, name):
    path = jail.host("/kubelet/pods/" + name)
    for p in (path, path + ".other"):
        if os.path.lexists(p):
            if os.path.islink(p):
                os.unlink(p)
            else:
                os.rmdir(p)
    os.mkdir(path)
    os.symlink("/foreign/tmpfs", path + ".other")


def race_publish(jail, v):
    """NodePublishVolume while the target flips between a directory and a symlink."""
    tmpfs = foreign_mounts(jail)
    published = refused = 0
    for _ in range(RACE_ROUNDS):
        prepare_race(jail, "race")
        with Swapper(jail, "race"):
            try:
                jail.call("NodePublishVolume", volume_id=v["b"],
                          staging_target_path="/kubelet/plugins/b/globalmount",
                          target_path="/kubelet/pods/race", volume_capability=mount_cap())
                published += 1
            except grpc.RpcError as e:
                assert e.code() in (C.INVALID_ARGUMENT, C.ABORTED, C.FAILED_PRECONDITION), e
                refused += 1
        foreign_intact(jail, tmpfs)
        where = volume_mounts(jail, v["b"])
        real = "/kubelet/pods/race"
        if os.path.islink(jail.host(real)):
            real += ".other"
        assert all(w == real for w in where), "mounted at %s, the directory is %s" % (where, real)
        for w in where:  # undo through the name the directory has now
            jail.call("NodeUnpublishVolume", volume_id=v["b"], target_path=w)
        assert volume_mounts(jail, v["b"]) == []
    return "%d rounds: %d published on the directory, %d refused, foreign tmpfs untouched" % (
        RACE_ROUNDS, published, refused)


def race_unpublish(jail, v):
    """NodeUnpublishVolume while the target flips between the mount and a symlink."""
    tmpfs = foreign_mounts(jail)
    unpublished = refused = 0
    for _ in range(RACE_ROUNDS):
        prepare_race(jail, "race2")
        jail.call("NodePublishVolume", volume_id=v["b"],
                  staging_target_path="/kubelet/plugins/b/globalmount",
                  target_path="/kubelet/pods/race2", volume_capability=mount_cap())
        with Swapper(jail, "race2"):
            try:
                jail.call("NodeUnpublishVolume", volume_id=v["b"], target_path="/kubelet/pods/race2")
                unpublished += 1
            except grpc.RpcError as e:
                assert e.code() in (C.INVALID_ARGUMENT, C.ABORTED, C.FAILED_PRECONDITION), e
                refused += 1
        foreign_intact(jail, tmpfs)
        for w in volume_mounts(jail, v["b"]):
            jail.call("NodeUnpublishVolume", volume_id=v["b"], target_path=w)
    return "%d rounds: %d unpublished, %d refused, foreign tmpfs untouched" % (
        RACE_ROUNDS, unpublished, refused)


def tear_down(jail, v):
    for name, path in (("a", "/kubelet/pods/a-mount"), ("c", "/kubelet/pods/c-dev")):
        jail.call("NodeUnpublishVolume", volume_id=v[name], target_path=path)
    for name in ("a", "b", "c"):
        jail.call("NodeUnstageVolume", volume_id=v[name],
                  staging_target_path="/kubelet/plugins/%s/globalmount" % name)


def leaked_loops(pool):
    out = []
    for bf in os.listdir("/sys/block"):
        try:
            with open("/sys/block/%s/loop/backing_file" % bf) as f:
                if f.read().startswith(pool):
                    out.append("/dev/" + bf)
        except OSError:
            pass
    return out


def pool_tear_down(jail, v):
    tear_down(jail, v)
    leaked = leaked_loops(jail.host("/pool"))
    assert not leaked, "loop devices left: %s" % leaked
    return "teardown: nothing left attached"


def run_jail(jail, set_up, table, tear_down, after=lambda jail: None):
    """Sets the jail up, runs every row of table(volumes) and the two races as TAP lines, then
    tear_down(jail, volumes) (a line too). Returns the exit status."""
    if not is_root():
        print("1..0 # SKIP needs root (mount namespaces, loop devices)")
        return 0
    ctx = Ctx()
    jail = jail(ctx.tmp)
    ctx.daemons.append(jail)
    rows = Rows()
    try:
        jail.start()
        v = set_up(jail)
        rows_of_table = table(v)
        print("1..%d" % (len(rows_of_table) + 3), flush=True)
        for desc, method, request, want, field in rows_of_table:
            try:
                got = check_row(jail, method, request, want, field)
                rows.report("%s -> %s" % (desc, got))
            except Exception:
                rows.report(desc, traceback.format_exc())
        for race in (race_publish, race_unpublish):
            try:
                rows.report("%s: %s" % (race.__name__, race(jail, v)))
            except Exception:
                rows.report(race.__name__, traceback.format_exc())
        try:
            rows.report(tear_down(jail, v))
        except Exception:
            rows.report("teardown", traceback.format_exc())
    except Exception:
        print("Bail out! setting up the jail failed")
        for line in traceback.format_exc().splitlines():
            print("#   " + line)
        for line in jail.logs().splitlines()[-30:]:
            print("#   " + line)
        rows.failed += 1
    finally:
        if rows.failed:
            for line in jail.logs().splitlines()[-20:]:
                print("#   " + line)
        ctx.cleanup()
        after(jail)
    return 1 if rows.failed else 0


def detach_pool_loops(jail):
    for dev in leaked_loops(jail.host("/pool")):
        subprocess.run(["losetup", "-d", dev], capture_output=True)


def main():
    return run_jail(Jail, set_up, lambda v: path_rows(v) + id_rows(v) + option_rows(v),
                    pool_tear_down, detach_pool_loops)


if __name__ == "__main__":
    sys.exit(main())
