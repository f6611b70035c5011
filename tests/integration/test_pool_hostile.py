# SPDX-License-Identifier: Apache-2.0
"""The pool's own names made to lead volplugd out of the pool (issue 21). The pool's directories
are data on a disk that others can write: each row replaces one name of the pool by a symlink to
a canary outside it (an image a filesystem could be made on, a file, a directory: what would
work if it were followed), then makes the calls that use that name. volplugd runs in the jail of
test_hostile.py (a private mount namespace, chrooted). Each row asserts every call's gRPC code,
that the message names the volume and the object, that the canaries are untouched (content,
inode, size), that no loop device is bound to them and that the jail's mount table did not
change; deleting the volume then removes the symlink itself. A last row restarts volplugd with
a symlink as its registry of running programs (run/children) and strays in tmp/. One TAP line
per row. Needs root."""

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import time
import traceback

import grpc

from harness import Ctx, is_root, local_id
from test_hostile import Jail, Rows, mount_cap

MiB = 1 << 20
C = grpc.StatusCode
OK = None
PRE = C.FAILED_PRECONDITION


def set_up_canaries(jail):
    os.makedirs(jail.host("/foreign/canary.d"))
    with open(jail.host("/foreign/canary.img"), "wb") as f:
        f.write(b"precious\n")
        f.truncate(32 * MiB)
    with open(jail.host("/foreign/canary.txt"), "w") as f:
        f.write("precious\n")
    for name, text in (("keep", "mine\n"), ("4242.1f", "named like a record\n"),
                       ("meta.json", "{}\n")):
        with open(jail.host("/foreign/canary.d/" + name), "w") as f:
            f.write(text)


def canary_state(jail):
    """Everything below /foreign as the daemon sees it: type, inode, size, first MiB's hash."""
    out = {}
    base = jail.host("/foreign")
    for d, dirs, names in os.walk(base):
        for n in dirs + names:
            p = os.path.join(d, n)
            st = os.lstat(p)
            digest = ""
            if stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    digest = hashlib.sha256(f.read(MiB)).hexdigest()
            out[p[len(base):]] = (stat.S_IFMT(st.st_mode), st.st_ino, st.st_size, digest)
    return out


def foreign_loops(jail):
    """Loop devices bound to anything outside the pool, in the jail."""
    out = []
    prefix = jail.host("/foreign")
    for bf in os.listdir("/sys/block"):
        try:
            with open("/sys/block/%s/loop/backing_file" % bf) as f:
                if f.read().startswith(prefix):
                    out.append("/dev/" + bf)
        except OSError:
            pass
    return out


def pool_path(jail, rel):
    return jail.host("/pool/" + rel)


def replace(jail, rel, target):
    """Moves the pool's name rel away (when there) and puts a symlink to target in its place."""
    p = pool_path(jail, rel)
    if os.path.lexists(p):
        os.rename(p, p + ".moved")
        # The moved original must not stay in the pool's way: it goes outside, untouched.
        os.rename(p + ".moved", jail.host("/foreign-moved-%d" % time.monotonic_ns()))
    os.symlink(target, p)


def damage(jail, rel):
    with open(pool_path(jail, rel), "w") as f:
        f.write("{ not json")


def call(jail, method, request):
    try:
        return OK, "", jail.call(method, request)
    except grpc.RpcError as e:
        return e.code(), e.details() or "", None


def step(jail, method, request, want, names, note):
    """One call: its code, its message naming each of names, nothing changed outside."""
    before = (canary_state(jail), jail.mounts())
    got, details, reply = call(jail, method, request)
    assert got == want, "%s: want %s, got %s: %s" % (method, want, got, details)
    for name in names if want is not OK else ():
        assert name in details, "%s: the message %r does not name %r" % (method, details, name)
    after = (canary_state(jail), jail.mounts())
    assert after[0] == before[0], "%s: the canaries changed: %s" % (method, sorted(
        k for k in set(before[0]) | set(after[0]) if before[0].get(k) != after[0].get(k)))
    assert after[1] == before[1], "%s: the mount table changed: +%s" % (
        method, after[1] - before[1])
    assert not foreign_loops(jail), "%s: a loop device over a canary: %s" % (
        method, foreign_loops(jail))
    note.append("%s %s" % (method, got.name if got else "OK"))
    return reply


def volume_condition(jail, vid):
    reply = jail.call("ControllerGetVolume", volume_id=vid)
    listed = [e for e in jail.call("ListVolumes").entries if e.volume.volume_id == vid]
    assert listed, "ListVolumes does not show %s" % vid
    return reply.status.volume_condition, listed[0].status.volume_condition


# Rows: (label, the pool's name to replace (volume's local ID as {v}, the snapshot's as {s}),
# what takes its place, the object the messages name, whether the volume counts as damaged).
ROWS = [
    ("data -> an image outside", "volumes/{v}/data", "/foreign/canary.img",
     "volumes/{v}/data is a symbolic link", True),
    ("the volume's directory -> a directory outside", "volumes/{v}", "/foreign/canary.d",
     "volumes/{v} is a symbolic link", True),
    ("meta.json -> a file outside", "volumes/{v}/meta.json", "/foreign/canary.txt",
     "volumes/{v}/meta.json is a symbolic link", True),
    ("meta.json damaged", "volumes/{v}/meta.json", None,
     "volumes/{v}/meta.json is damaged", True),
    ("node.lock -> a file outside", "volumes/{v}/node.lock", "/foreign/canary.txt",
     "volumes/{v}/node.lock is a symbolic link", True),
    ("node.json -> a file outside", "volumes/{v}/node.json", "/foreign/canary.txt",
     "volumes/{v}/node.json is a symbolic link", True),
    ("nodes/node-1.lock -> a file outside", "nodes/node-1.lock", "/foreign/canary.txt",
     "nodes/node-1.lock", False),
    ("nodes/node-1.devices -> a file outside", "nodes/node-1.devices", "/foreign/canary.txt",
     None, False),
    ("a snapshot's data -> an image outside", "snapshots/{s}/data", "/foreign/canary.img",
     "snapshots/{s}/data", False),
]


def run_row(jail, i, row):
    label, rel, target, names_object, damaged = row
    note = []
    cap = mount_cap()
    vid = jail.call("CreateVolume", name="row-%d" % i,
                    capacity_range={"required_bytes": 32 * MiB},
                    volume_capabilities=[cap]).volume.volume_id
    pctx = dict(jail.call("ControllerPublishVolume", volume_id=vid, node_id="node-1",
                          volume_capability=cap).publish_context)
    sid = None
    if "{s}" in rel:
        sid = jail.call("CreateSnapshot", name="row-%d-snap" % i,
                        source_volume_id=vid).snapshot.snapshot_id
    local = local_id(vid)
    rel = rel.format(v=local, s=local_id(sid) if sid else "")
    obj = names_object.format(v=local, s=local_id(sid) if sid else "") if names_object else None
    os.makedirs(jail.host("/kubelet/plugins/r%d" % i), exist_ok=True)
    if target is None:
        damage(jail, rel)
    else:
        replace(jail, rel, target)
    stage = {"volume_id": vid, "staging_target_path": "/kubelet/plugins/r%d/globalmount" % i,
             "volume_capability": cap, "publish_context": pctx}
    names = [vid, obj] if obj else [vid]

    if damaged:
        cond, listed = volume_condition(jail, vid)
        assert cond.abnormal and obj in cond.message, "ControllerGetVolume: %s" % cond
        assert listed.abnormal and obj in listed.message, "ListVolumes: %s" % listed
        note.append("listed abnormal")
        step(jail, "NodeStageVolume", stage, PRE, names, note)
        step(jail, "ControllerPublishVolume",
             {"volume_id": vid, "node_id": "node-1", "volume_capability": cap}, PRE, names, note)
        step(jail, "ControllerExpandVolume",
             {"volume_id": vid, "capacity_range": {"required_bytes": 64 * MiB}}, PRE, names,
             note)
        step(jail, "CreateSnapshot", {"name": "row-%d-s" % i, "source_volume_id": vid}, PRE,
             names, note)
        step(jail, "CreateVolume",
             {"name": "row-%d-clone" % i, "volume_capabilities": [cap],
              "volume_content_source": {"volume": {"volume_id": vid}}}, PRE, names, note)
    elif rel.startswith("nodes/"):
        # The node's lock or index: the message names the node's file, not a volume.
        try:
            step(jail, "ControllerUnpublishVolume", {"volume_id": vid, "node_id": "node-1"}, OK,
                 [], note)
            step(jail, "ControllerPublishVolume",
                 {"volume_id": vid, "node_id": "node-1", "volume_capability": cap},
                 PRE if obj else OK, ["node-1", obj], note)
            if not obj:
                assert not os.path.islink(pool_path(jail, rel)), "%s is still a symlink" % rel
                note.append("replaced, not written through")
        finally:
            if os.path.islink(pool_path(jail, rel)):  # for the rows after this one
                os.unlink(pool_path(jail, rel))
    else:  # a snapshot's data
        step(jail, "CreateVolume",
             {"name": "row-%d-restore" % i, "volume_capabilities": [cap],
              "volume_content_source": {"snapshot": {"snapshot_id": sid}}}, PRE,
             [sid, obj], note)
        step(jail, "DeleteSnapshot", {"snapshot_id": sid}, OK, [], note)
        assert not os.path.lexists(pool_path(jail, rel)), "%s is still there" % rel

    # A record that is sound keeps its attachments: unpublished first, as the CO does.
    unpublish = PRE if damaged and "data" not in rel and "node." not in rel else OK
    step(jail, "ControllerUnpublishVolume", {"volume_id": vid, "node_id": "node-1"}, unpublish,
         names, note)
    step(jail, "DeleteVolume", {"volume_id": vid}, OK, [], note)
    assert not os.path.lexists(pool_path(jail, "volumes/" + local)), "the volume is still there"
    note.append("gone")
    return "%s: %s" % (label, ", ".join(note))


def restart_row(jail):
    """A symlink as run/children, strays in tmp/: the restarted volplugd refuses the first
    loudly, removes from tmp/ only what the pool makes, and never follows a symlink."""
    jail.stop()
    shutil.rmtree(pool_path(jail, "run/children"))
    os.symlink("/foreign/canary.d", pool_path(jail, "run/children"))
    with open(pool_path(jail, "tmp/precious"), "w") as f:
        f.write("not the pool's\n")
    os.symlink("/foreign/canary.d", pool_path(jail, "tmp/new-vol-00000000000000aa.1.0"))
    before = canary_state(jail)
    jail.start()
    jail.call("ListVolumes")  # it serves
    logs = jail.logs()
    assert "run/children" in logs and "a symbolic link" in logs and "refusing" in logs, \
        "no clear error about run/children in the log"
    assert canary_state(jail) == before, "the canaries changed: %s -> %s" % (
        sorted(before), sorted(canary_state(jail)))
    assert os.path.exists(pool_path(jail, "tmp/precious")), "tmp/precious was removed"
    assert not os.path.lexists(pool_path(jail, "tmp/new-vol-00000000000000aa.1.0")), \
        "the staging symlink in tmp/ was not removed"
    return "restart: run/children refused, named in the log; tmp/ strays left, canaries intact"


def main():
    if not is_root():
        print("1..0 # SKIP needs root (mount namespaces, loop devices)")
        return 0
    ctx = Ctx()
    jail = Jail(ctx.tmp)
    ctx.daemons.append(jail)
    rows = Rows()
    print("1..%d" % (len(ROWS) + 1), flush=True)
    try:
        set_up_canaries(jail)
        jail.start()
        for i, row in enumerate(ROWS):
            try:
                rows.report(run_row(jail, i, row))
            except Exception:
                rows.report(row[0], traceback.format_exc())
        try:
            rows.report(restart_row(jail))
        except Exception:
            rows.report("restart with run/children a symlink", traceback.format_exc())
    finally:
        if rows.failed:
            for line in jail.logs().splitlines()[-30:]:
                print("#   " + line)
        ctx.cleanup()
        for dev in foreign_loops(jail):
            subprocess.run(["losetup", "-d", dev], capture_output=True)
    return 1 if rows.failed else 0


if __name__ == "__main__":
    sys.exit(main())
