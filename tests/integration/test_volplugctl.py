# SPDX-License-Identifier: Apache-2.0
"""volplugctl as a user runs it: the volume, snapshot, group and node subcommands against a real
volplugd (a whole lifecycle with real loop devices and mounts), their errors (gRPC code and
message, exit 1) and bad usage (exit 2, before any call); and `flex install/remove/call/test/list`
with the example drivers in examples/flexvolume and the broken ones in tests/flex-drivers."""

import datetime
import glob
import json
import re
import os
import shutil
import stat
import subprocess
import time

import yaml

from harness import SOURCE_ROOT, VOLPLUGCTL, Skip, is_root, local_id, run

MiB = 1 << 20
# pool check's line about space, before the counts.
SPACE_LINE = r"\d+ MiB provisioned, \d+ MiB allocated; the pool's filesystem: \d+ MiB free of \d+ MiB"
EXAMPLES = os.path.join(SOURCE_ROOT, "examples", "flexvolume")
BROKEN = os.path.join(SOURCE_ROOT, "tests", "flex-drivers")
# Makes ControllerExpandVolume answer at once instead of after the 2 s coalescing window.
FAST = ["--modify-coalesce-window", "10ms"]


def ctl(*args, check=None, timeout=60, tmpdir=None, cwd=None, env=None):
    """volplugctl without a daemon. check: the exit status wanted (None: any)."""
    env = dict(os.environ, **(env or {}))
    if tmpdir:
        env["TMPDIR"] = tmpdir
    p = subprocess.run([os.path.abspath(VOLPLUGCTL)] + list(args), capture_output=True, text=True,
                       timeout=timeout, env=env, cwd=cwd)
    if check is not None:
        assert p.returncode == check, "volplugctl %s: exit %d, want %d\nstdout: %s\nstderr: %s" % (
            " ".join(args), p.returncode, check, p.stdout, p.stderr)
    return p


def mount_at(path):
    """The topmost mount at path in /proc/self/mountinfo: (fstype, vfs options), or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields = left.split(" ")
            if fields[4] == path:
                found = (right.split(" ")[0], fields[5].split(","))
    return found


def need_root():
    if not is_root():
        raise Skip("needs root (loop devices, mkfs, mounts)")


def broken(ctx, name):
    """A copy of a test driver in the test's temp dir: some write files next to themselves."""
    d = os.path.join(ctx.tmp, "drivers")
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, name)
    if not os.path.exists(path):
        shutil.copy2(os.path.join(BROKEN, name), path)
    return path


def one_error_line(p, *wanted):
    lines = p.stderr.splitlines()
    assert lines and lines[0].startswith("volplugctl: "), p.stderr
    for w in wanted:
        assert w in lines[0], "stderr %r lacks %r" % (p.stderr, w)


# --- CSI subcommands -----------------------------------------------------------------------------


def test_volume_lifecycle_through_the_cli(ctx):
    need_root()
    d = ctx.daemon(args=FAST)
    stage = os.path.join(ctx.tmp, "stage")
    target = os.path.join(ctx.tmp, "target")

    vol = d.ctl_json("volume", "create", "data", "--size", "64Mi", "--fs", "ext4",
                     "--param", "type=gp3", "--zone", "local")["volume"]
    vid = vol["volume_id"]
    assert vol["capacity_bytes"] == 64 * MiB, vol
    assert vol["volume_context"]["csi.storage.k8s.io/fstype"] == "ext4", vol
    # Retried with the same arguments: the same volume.
    again = d.ctl_json("volume", "create", "data", "--size", "64Mi", "--fs", "ext4",
                       "--param", "type=gp3", "--zone", "local")["volume"]
    assert again["volume_id"] == vid, (vol, again)
    assert d.ctl_json("volume", "get", vid)["volume"]["volume_id"] == vid

    out = d.ctl("volume", "publish", vid, "node-1", "--fs", "ext4").stdout
    assert "publish_context:" in out and "devicePath: /dev/" in out, out
    out = d.ctl("node", "stage", vid, stage, "--fs", "ext4", "--flag", "noatime").stdout
    assert out == "volume %s staged at %s\n" % (vid, stage), out
    fstype, vfs = mount_at(stage)
    assert fstype == "ext4" and "noatime" in vfs, (fstype, vfs)

    out = d.ctl("node", "publish", vid, target, "--staging", stage, "--fs", "ext4").stdout
    assert out == "volume %s published at %s\n" % (vid, target), out
    assert mount_at(target)[0] == "ext4", mount_at(target)
    with open(os.path.join(target, "hello"), "w") as f:
        f.write("through the target")
    with open(os.path.join(stage, "hello")) as f:
        assert f.read() == "through the target"

    stats = d.ctl_json("node", "stats", vid, target)
    units = {u["unit"]: u for u in stats["usage"]}
    assert 0 < units["BYTES"]["total"] <= 64 * MiB and units["BYTES"]["used"] > 0, stats
    assert units["INODES"]["used"] > 0, stats
    assert "abnormal" not in stats.get("volume_condition", {}), stats

    grown = d.ctl_json("volume", "expand", vid, "128Mi")
    assert grown["capacity_bytes"] == 128 * MiB and grown["node_expansion_required"], grown
    entries = d.ctl_json("volume", "list", "--all")["entries"]
    mine = [e for e in entries if e["volume"]["volume_id"] == vid]
    assert mine and mine[0]["status"]["published_node_ids"] == ["node-1"], entries

    out = d.ctl("node", "unpublish", vid, target).stdout
    assert out == "volume %s unpublished from %s\n" % (vid, target), out
    assert mount_at(target) is None
    out = d.ctl("node", "unstage", vid, stage).stdout
    assert out == "volume %s unstaged from %s\n" % (vid, stage), out
    assert mount_at(stage) is None
    assert d.ctl("volume", "unpublish", vid, "node-1").stdout == "volume %s unpublished\n" % vid
    assert d.ctl("volume", "delete", vid).stdout == "volume %s deleted\n" % vid
    p = d.ctl("volume", "get", vid, check=False)
    assert p.returncode == 1, p
    one_error_line(p, "ControllerGetVolume: NOT_FOUND:", vid)
    assert p.stdout == "", p.stdout


def test_block_volume_through_the_cli(ctx):
    need_root()
    d = ctx.daemon()
    target = os.path.join(ctx.tmp, "dev")
    vid = d.ctl_json("volume", "create", "raw", "--size", "16Mi", "--block")["volume"]["volume_id"]
    d.ctl("volume", "publish", vid, "node-1", "--block")
    staging = os.path.join(ctx.tmp, "staging")
    d.ctl("node", "stage", vid, staging, "--block")
    d.ctl("node", "publish", vid, target, "--staging", staging, "--block")
    assert stat.S_ISBLK(os.stat(target).st_mode), os.stat(target)
    with open(target, "rb") as f:
        assert f.seek(0, os.SEEK_END) == 16 * MiB
    d.ctl("node", "unpublish", vid, target)
    d.ctl("node", "unstage", vid, staging)
    d.ctl("volume", "unpublish", vid, "node-1")
    d.ctl("volume", "delete", vid)


def test_snapshots_and_groups_through_the_cli(ctx):
    d = ctx.daemon()
    vid = d.ctl_json("volume", "create", "src", "--size", "8Mi")["volume"]["volume_id"]
    snap = d.ctl_json("snapshot", "create", "s1", vid)["snapshot"]
    sid = snap["snapshot_id"]
    assert snap["source_volume_id"] == vid and snap["ready_to_use"], snap
    listed = d.ctl_json("snapshot", "list", "--volume", vid)["entries"]
    assert [e["snapshot"]["snapshot_id"] for e in listed] == [sid], listed
    by_id = d.ctl_json("snapshot", "list", "--id", sid, "--all")["entries"]
    assert [e["snapshot"]["snapshot_id"] for e in by_id] == [sid], by_id

    clone = d.ctl_json("volume", "create", "restored", "--size", "8Mi", "--from-snapshot", sid)
    assert clone["volume"]["content_source"] == {"snapshot": {"snapshot_id": sid}}, clone
    copy = d.ctl_json("volume", "create", "copy", "--size", "8Mi", "--from-volume", vid)
    assert copy["volume"]["content_source"] == {"volume": {"volume_id": vid}}, copy

    group = d.ctl_json("group", "create", "g1", vid, copy["volume"]["volume_id"])["group_snapshot"]
    gid = group["group_snapshot_id"]
    members = sorted(s["source_volume_id"] for s in group["snapshots"])
    assert members == sorted([vid, copy["volume"]["volume_id"]]), group
    assert d.ctl_json("group", "get", gid)["group_snapshot"]["group_snapshot_id"] == gid
    caps = d.ctl_json("group", "capabilities")["capabilities"]
    assert {"rpc": {"type": "CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT"}} in caps, caps
    assert d.ctl("group", "delete", gid).stdout == "group snapshot %s deleted\n" % gid
    p = d.ctl("group", "get", gid, check=False)
    assert p.returncode == 1, p
    one_error_line(p, "GetVolumeGroupSnapshot: NOT_FOUND:")

    assert d.ctl("snapshot", "delete", sid).stdout == "snapshot %s deleted\n" % sid
    assert d.ctl_json("snapshot", "list", "--id", sid).get("entries", []) == []


def test_create_says_what_it_made(ctx):
    """The size made when it is not the size asked (the driver's default, or rounded up), and
    the parameters the volume was made with, in the create reply and in `volume get`."""
    d = ctx.daemon()
    p = d.ctl("volume", "create", "small", "--size", "1000")
    assert yaml.safe_load(p.stdout)["volume"]["capacity_bytes"] == MiB, p.stdout
    assert p.stderr == "volplugctl: volume small: 1048576 bytes (1 MiB), the driver's size " \
        "for the 1000 bytes asked\n", p.stderr
    p = d.ctl("volume", "create", "default")
    assert yaml.safe_load(p.stdout)["volume"]["capacity_bytes"] == 1 << 30, p.stdout
    assert p.stderr == "volplugctl: volume default: 1073741824 bytes (1 GiB), the driver's " \
        "default size (no --size)\n", p.stderr

    p = d.ctl("volume", "create", "fast", "--size", "10G", "--param", "type=gp3", "--param",
              "iops=4000")
    assert p.stderr == "", "the size asked: no note"
    made = yaml.safe_load(p.stdout)["volume"]
    want = {"type": "gp3", "iops": "4000", "throughput": "125"}
    assert made["volume_context"] == want, made
    got = yaml.safe_load(d.ctl("volume", "get", made["volume_id"]).stdout)["volume"]
    assert got["volume_context"] == want, got
    # EBS's rule: 1 GiB of gp3 has at most 3000 IOPS; the reply shows what was chosen.
    capped = d.ctl_json("volume", "create", "capped", "--size", "1G", "--param", "iops=4000")
    assert capped["volume"]["volume_context"]["iops"] == "3000", capped
    return "sizes and parameters shown"


def as_json_types(v):
    """A loaded YAML value as -o json has it: times (datetime) as {seconds, nanos}."""
    if isinstance(v, dict):
        return {k: as_json_types(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_json_types(x) for x in v]
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        whole = int(v.timestamp())
        out = {"seconds": whole}
        if v.microsecond:
            out["nanos"] = v.microsecond * 1000
        return out
    return v


def test_human_output_is_yaml(ctx):
    """Human output is YAML that loads to what -o json says, times as RFC 3339."""
    d = ctx.daemon()
    vid = d.ctl_json("volume", "create", "y", "--size", "8Mi", "--param", "iops=3000")["volume"][
        "volume_id"]
    sid = d.ctl_json("snapshot", "create", "ys", vid)["snapshot"]["snapshot_id"]
    commands = [("info",), ("capabilities",), ("node", "info"), ("volume", "list"),
                ("volume", "get", vid), ("snapshot", "list", "--id", sid),
                ("controller", "capabilities"), ("group", "capabilities")]
    for args in commands:
        text = d.ctl(*args).stdout
        loaded = yaml.safe_load(text)
        assert as_json_types(loaded) == d.ctl_json(*args), (args, text)
    snap = d.ctl("snapshot", "list", "--id", sid).stdout
    when = [line for line in snap.splitlines() if "creation_time" in line]
    assert len(when) == 1 and re.fullmatch(r" +creation_time: \d{4}-\d\d-\d\dT\d\d:\d\d:"
                                           r"\d\d(\.\d+)?Z", when[0]), snap
    assert "seconds" not in snap and "[0]" not in snap, snap
    return "%d commands" % len(commands)


def test_list_pages_and_all(ctx):
    d = ctx.daemon()
    ids = sorted(d.ctl_json("volume", "create", "v%d" % i, "--size", "1Mi")["volume"]["volume_id"]
                 for i in range(5))
    page = d.ctl_json("volume", "list", "--max", "2")
    assert len(page["entries"]) == 2 and page["next_token"], page
    rest = d.ctl_json("volume", "list", "--max", "2", "--token", page["next_token"])
    assert len(rest["entries"]) == 2, rest
    everything = d.ctl_json("volume", "list", "--max", "2", "--all")
    got = sorted(e["volume"]["volume_id"] for e in everything["entries"])
    assert got == ids, (got, ids)
    assert "next_token" not in everything, everything
    text = d.ctl("volume", "list", "--all", "--max", "3").stdout
    assert all(("volume_id: " + i) in text for i in ids), text


def test_capacity_and_capabilities(ctx):
    d = ctx.daemon()
    cap = d.ctl_json("capacity", "--zone", "local")
    assert cap["available_capacity"] > 0 and cap["minimum_volume_size"]["value"] > 0, cap
    elsewhere = d.ctl_json("capacity", "--zone", "nowhere")
    assert elsewhere.get("available_capacity", 0) == 0, elsewhere
    ctrl = [c["rpc"]["type"] for c in d.ctl_json("controller", "capabilities")["capabilities"]]
    assert {"CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES_PUBLISHED_NODES",
            "MODIFY_VOLUME"} <= set(ctrl), ctrl
    info = d.ctl_json("node", "info")
    assert info["node_id"] == "node-1", info
    assert info["accessible_topology"]["segments"] == {"topology.volplug.io/node": "node-1",
                                                       "topology.volplug.io/zone": "local"}, info
    node = [c["rpc"]["type"] for c in d.ctl_json("node", "capabilities")["capabilities"]]
    assert "STAGE_UNSTAGE_VOLUME" in node and "GET_VOLUME_STATS" in node, node


def test_errors_show_code_and_message(ctx):
    d = ctx.daemon()
    vid = d.ctl_json("volume", "create", "busy", "--size", "4Mi")["volume"]["volume_id"]
    d.ctl("volume", "publish", vid, "node-1")
    cases = [
        (("volume", "delete", vid), "DeleteVolume: FAILED_PRECONDITION:", "unpublish it first"),
        (("volume", "get", "vol-0123456789abcdef"), "ControllerGetVolume: NOT_FOUND:",
         "vol-0123456789abcdef"),
        (("volume", "create", "bad/name"), "CreateVolume: INVALID_ARGUMENT:", "name:"),
        (("volume", "create", "busy", "--size", "8Mi"), "CreateVolume: ALREADY_EXISTS:", ""),
        (("volume", "modify", vid, "color=blue"), "ControllerModifyVolume: INVALID_ARGUMENT:",
         "'color'"),
        (("volume", "expand", "vol-0123456789abcdef", "1Gi"), "ControllerExpandVolume: NOT_FOUND:",
         "vol-0123456789abcdef"),
        (("snapshot", "create", "s", "vol-0123456789abcdef"), "CreateSnapshot: NOT_FOUND:", ""),
    ]
    for args, code, message in cases:
        p = d.ctl(*args, check=False)
        assert p.returncode == 1, (args, p.returncode, p.stderr)
        one_error_line(p, code, message)
    # Not confirmed is a failure for the user too, with the driver's reason.
    p = d.ctl("volume", "validate", vid, "--fs", "btrfs", check=False)
    assert p.returncode == 1 and "not confirmed" in p.stderr, p
    assert "btrfs" in p.stderr, p.stderr
    assert d.ctl("volume", "validate", vid, "--fs", "ext4").returncode == 0
    d.stop()
    p = d.ctl("volume", "list", check=False)
    assert p.returncode == 1, p
    one_error_line(p, "ListVolumes: UNAVAILABLE")


def test_bad_usage_exits_2_before_any_call(ctx):
    # No daemon: a usage error must be found before connecting (else it would be exit 1).
    nowhere = "unix://" + os.path.join(ctx.tmp, "nothing.sock")
    cases = [
        (("volume",), "volume: missing subcommand"),
        (("volume", "frobnicate"), "unknown subcommand 'frobnicate'"),
        (("volume", "create"), "missing arguments: want NAME"),
        (("volume", "create", "a", "b"), "unexpected argument 'b'"),
        (("volume", "create", "a", "--fs", "ext4", "--block"), "--fs and --block exclude"),
        (("volume", "create", "a", "--size", "ten"), "--size 'ten'"),
        (("volume", "create", "a", "--mode", "EVERYONE"), "want one of SINGLE_NODE_WRITER"),
        (("volume", "create", "a", "--param", "novalue"), "--param 'novalue': want KEY=VALUE"),
        (("volume", "create", "a", "--from-snapshot", "s", "--from-volume", "v"), "exclude"),
        (("volume", "delete", "v", "--fs", "ext4"), "--fs is not an option of this command"),
        (("volume", "modify", "v", "iops"), "'iops': want KEY=VALUE"),
        (("volume", "expand", "v", "big"), "size 'big'"),
        (("volume", "list", "--max", "-1"), "--max '-1'"),
        (("volume", "create", "a", "--bogus"), "unknown option '--bogus'"),
        (("volume", "create", "a", "--size"), "--size needs a value"),
        (("volume", "create", "a", "--size", "0"),
         "--size '0': want at least 1 byte (without --size the driver picks its default size)"),
        (("volume", "create", "a", "--size", "1e3"),
         "--size '1e3': want bytes or a size such as 10G or 512Mi"),
        (("node", "publish", "v", "/x"), "node publish: missing --staging PATH"),
        (("node", "stage", "v", "/x", "--block", "--flag", "ro"), "need a mount volume"),
        (("node", "publish", "v", "/x", "--group", "staff"), "--group 'staff'"),
        (("node", "expand", "v", "/x", "1Q"), "size '1Q'"),
        (("snapshot", "create", "s"), "missing arguments: want NAME VOLUME_ID"),
        (("group", "create", "g"), "missing arguments"),
        (("capacity", "extra"), "unexpected argument 'extra'"),
        (("controller",), "missing subcommand"),
        (("flex",), ""),
        (("flex", "frob"), "unknown command"),
        (("flex", "install", "x"), "want SRC and --name N"),
        (("flex", "call", "a/b", "levitate"), "unknown command 'levitate'"),
        (("flex", "call", "a/b", "mount", "/x"), "mount takes 2 argument(s): DIR JSON"),
        (("flex", "call", "a/b", "mount", "/x", "[1]"), "want a JSON object of strings"),
        (("flex", "call", "a/b", "mount", "/x", '{"n": 1}'), '"n" is not a string'),
        (("flex", "test", "a/b", "--timeout", "soon"), "--timeout 'soon'"),
        (("flex", "test", "a/b", "--vendor", "v"), "--vendor is not an option"),
        (("flex", "test", "bad name"), "bad name"),
    ]
    for args, message in cases:
        p = ctl("--endpoint", nowhere, *args)
        assert p.returncode == 2, (args, p.returncode, p.stdout, p.stderr)
        if message:
            one_error_line(p, message)
        assert p.stdout == "", (args, p.stdout)
    # Help is not an error.
    for args in (("volume", "--help"), ("node", "--help"), ("flex", "--help"),
                 ("volume", "create", "--help")):
        p = ctl(*args, check=0)
        assert "volplugctl" in p.stdout and p.stderr == "", (args, p)
    assert "volume create NAME [--size SIZE]" in ctl("volume", "--help").stdout
    assert "node publish ID TARGET_PATH --staging PATH [--fs FSTYPE]" in \
        ctl("node", "--help").stdout, "--staging is required, the usage says so"
    top = ctl("--help", check=0).stdout
    for word in ("volume", "snapshot", "group", "node", "capacity", "controller", "flex"):
        assert "\n  " + word + " " in top, (word, top)


# --- flex ----------------------------------------------------------------------------------------


def install(plugins, src, vendor, name):
    p = ctl("flex", "install", src, "--vendor", vendor, "--name", name, "--dir", plugins, check=0)
    path = os.path.join(plugins, "%s~%s" % (vendor, name), name)
    assert p.stdout == "installed %s\n" % path, p.stdout
    return path


def test_flex_install_and_remove(ctx):
    plugins = os.path.join(ctx.tmp, "plugins")  # made by install
    tmpfs = os.path.join(EXAMPLES, "tmpfs")
    path = install(plugins, tmpfs, "volplug.example", "tmpfs")
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o755, oct(st.st_mode)
    with open(path, "rb") as a, open(tmpfs, "rb") as b:
        assert a.read() == b.read()
    # An upgrade replaces the file whole, and no dot-file is left behind.
    install(plugins, os.path.join(EXAMPLES, "loop"), "volplug.example", "tmpfs")
    with open(path, "rb") as a, open(os.path.join(EXAMPLES, "loop"), "rb") as b:
        assert a.read() == b.read()
    assert os.listdir(os.path.dirname(path)) == ["tmpfs"], os.listdir(os.path.dirname(path))
    # Without a vendor the folder is the name.
    p = ctl("flex", "install", tmpfs, "--name", "plain", "--dir", plugins, check=0)
    assert os.access(os.path.join(plugins, "plain", "plain"), os.X_OK), p

    p = ctl("flex", "remove", "--vendor", "volplug.example", "--name", "tmpfs", "--dir", plugins,
            check=0)
    assert p.stdout == "removed %s\n" % os.path.join(plugins, "volplug.example~tmpfs"), p.stdout
    assert sorted(os.listdir(plugins)) == ["plain"], os.listdir(plugins)
    p = ctl("flex", "remove", "--vendor", "volplug.example", "--name", "tmpfs", "--dir", plugins,
            check=1)
    one_error_line(p, "flex remove:")
    p = ctl("flex", "install", os.path.join(ctx.tmp, "missing"), "--name", "x", "--dir", plugins,
            check=1)
    one_error_line(p, "flex install:", "missing")
    p = ctl("flex", "install", tmpfs, "--vendor", "Bad Vendor", "--name", "x", "--dir", plugins,
            check=2)
    one_error_line(p, "flex install:", "Bad Vendor")


def test_flex_call(ctx):
    plugins = os.path.join(ctx.tmp, "plugins")
    install(plugins, os.path.join(EXAMPLES, "tmpfs"), "volplug.example", "tmpfs")
    p = ctl("flex", "call", "volplug.example/tmpfs", "init", "--dir", plugins, check=0)
    assert '  {"status": "Success", "capabilities": {"attach": false}}\n' in p.stdout, p.stdout
    assert "reply:\n  status: Success\n" in p.stdout and "attach: false" in p.stdout, p.stdout
    assert "ended: exit status 0" in p.stdout, p.stdout

    # The argv is exactly Kubernetes': the options JSON with its three keys, sorted, user's last
    # word wins; the record driver writes what it got.
    rec_dir = os.path.join(plugins, "test~record")
    install(plugins, os.path.join(BROKEN, "record"), "test", "record")
    ctl("flex", "call", "test/record", "mount", "/pods/x", '{"size": "8m", "kubernetes.io/readwrite": "ro"}',
        "--dir", plugins, check=0)
    with open(os.path.join(rec_dir, ".argv"), "rb") as f:
        argv = f.read().split(b"\0")[:-1]
    assert argv[1:] == [b"mount", b"/pods/x",
                        b'{"kubernetes.io/fsType":"","kubernetes.io/pvOrVolumeName":"",'
                        b'"kubernetes.io/readwrite":"ro","size":"8m"}'], argv
    ctl("flex", "call", "test/record", "expandfs", "{}", "/dev/loop9", "/m", "2G", "1Gi",
        "--dir", plugins, check=0)
    with open(os.path.join(rec_dir, ".argv"), "rb") as f:
        argv = f.read().split(b"\0")[1:-1]
    assert argv[2:] == [b"/dev/loop9", b"/m", b"2147483648", b"1073741824"], argv

    # A wrongly typed key: exit 1, the raw output shown, the key named.
    with open(os.path.join(rec_dir, ".stdout"), "w") as f:
        f.write('{"status": "Success", "attached": "yes"}\n')
    p = ctl("flex", "call", "test/record", "isattached", "{}", "node-1", "--dir", plugins, check=1)
    assert '{"status": "Success", "attached": "yes"}' in p.stdout, p.stdout
    one_error_line(p, 'driver "test/record" isattached', '"attached" is a string, not a bool')

    # A driver path works too; garbage is shown raw and named as such.
    p = ctl("flex", "call", broken(ctx, "garbage"), "init", check=1)
    assert "this is not JSON" in p.stdout, p.stdout
    one_error_line(p, "the answer is not a JSON object")
    p = ctl("flex", "call", broken(ctx, "badexit"), "init", check=1)
    one_error_line(p, 'answered "Success" but ended with exit status 3')
    start = time.monotonic()
    p = ctl("-o", "json", "flex", "call", broken(ctx, "hang"), "init", "--timeout", "1s",
            check=1)
    assert time.monotonic() - start < 15, "the deadline was not kept"
    out = json.loads(p.stdout)
    assert out["timed_out"] and not out["ok"] and out["reply"] is None, out
    assert out["stdout"] == "started init\n", out
    one_error_line(p, "no answer within the deadline")
    p = ctl("flex", "call", "volplug.example/none", "init", "--dir", plugins, check=1)
    one_error_line(p, 'driver "volplug.example/none"')

    if not is_root():
        return
    target = os.path.join(ctx.tmp, "pod", "vol")
    out = json.loads(ctl("-o", "json", "flex", "call", "volplug.example/tmpfs", "mount", target,
                         '{"size": "8m"}', "--dir", plugins, check=0).stdout)
    assert out["ok"] and out["reply"] == {"status": "Success"} and out["exit_code"] == 0, out
    fstype, _ = mount_at(target)
    assert fstype == "tmpfs", mount_at(target)
    ctl("flex", "call", "volplug.example/tmpfs", "unmount", target, "--dir", plugins, check=0)
    assert mount_at(target) is None


def flex_test(*args, check=None, tmpdir=None):
    p = ctl("flex", "test", *args, check=check, timeout=120, tmpdir=tmpdir)
    summary = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    return p, summary


def test_flex_test_passes_the_examples(ctx):
    need_root()
    plugins = os.path.join(ctx.tmp, "plugins")
    install(plugins, os.path.join(EXAMPLES, "tmpfs"), "volplug.example", "tmpfs")
    install(plugins, os.path.join(EXAMPLES, "loop"), "volplug.example", "loop")
    p, summary = flex_test("volplug.example/tmpfs", "--dir", plugins, check=0)
    assert summary.endswith(" checks, 0 violations, 0 warnings") and "VIOLATION" not in p.stdout, \
        p.stdout
    for step in ("init", "mount", "unmount"):
        assert any(l.startswith(step + " ") and " ok" in l for l in p.stdout.splitlines()), p.stdout
    assert "attach" not in [l.split()[0] for l in p.stdout.splitlines()], p.stdout

    images = os.path.join(ctx.tmp, "images")
    work = os.path.join(ctx.tmp, "work")
    os.mkdir(work)
    opts = json.dumps({"dir": images, "size": "64M"})
    p, summary = flex_test("volplug.example/loop", "--dir", plugins, "--options", opts, check=0,
                           tmpdir=work)
    assert summary.endswith(" checks, 0 violations, 0 warnings") and "VIOLATION" not in p.stdout, \
        p.stdout
    steps = [l.split()[0] for l in p.stdout.splitlines()[:-1] if not l.startswith(" ")]
    assert steps == ["init", "getvolumename", "attach", "isattached", "waitforattach",
                     "mountdevice", "mount", "expandvolume", "expandfs", "unmount",
                     "unmountdevice", "detach", "isattached"], steps
    assert "ok: device /dev/loop" in p.stdout, p.stdout
    # Nothing left behind: no mount in the temp dirs, no loop device on the image.
    with open("/proc/self/mountinfo") as f:
        assert work not in f.read()
    assert os.listdir(work) == [], os.listdir(work)
    imgs = glob.glob(os.path.join(images, "*.img"))
    assert len(imgs) == 1, imgs
    held = subprocess.run(["losetup", "-j", imgs[0]], capture_output=True, text=True).stdout
    assert held == "", held
    os.unlink(imgs[0])

    out = json.loads(ctl("-o", "json", "flex", "test", "volplug.example/tmpfs", "--dir", plugins,
                         check=0).stdout)
    assert out["violations"] == 0 and out["checks"] > 10, out
    assert [s["step"] for s in out["steps"]][0] == "init" and all(s["ok"] for s in out["steps"]), out


def test_flex_test_reports_violations(ctx):
    # Garbage, a non-zero exit with Success and a hang: each reported, exit 1.
    p, summary = flex_test(broken(ctx, "garbage"), check=1)
    assert "init                   VIOLATION: the output is not a JSON object" in p.stdout, p.stdout
    assert summary.endswith(" 1 violations, 0 warnings"), summary
    start = time.monotonic()
    p, summary = flex_test(broken(ctx, "hang"), "--timeout", "1s", check=1)
    assert time.monotonic() - start < 15, "the deadline was not kept"
    assert "VIOLATION: no answer within the deadline" in p.stdout, p.stdout
    assert summary == "1 checks, 1 violations, 0 warnings", summary
    p, summary = flex_test(broken(ctx, "initfail"), check=1)
    assert "VIOLATION: answered Failure (exit status 1): kernel module initfail-fs is not loaded" \
        in p.stdout, p.stdout
    p, summary = flex_test(broken(ctx, "badexit"), check=1)
    assert 'init                   VIOLATION: answered "Success" but ended with exit status 3' \
        in p.stdout, p.stdout
    assert "the driver would not be loaded: stopped" in p.stdout, "Kubernetes fails its init"

    # Wrongly typed capabilities stop the test at init (Kubernetes would not load it).
    rec = os.path.dirname(broken(ctx, "record"))
    with open(os.path.join(rec, ".stdout"), "w") as f:
        f.write('{"status": "Success", "capabilities": {"attach": "no"}}\n')
    p, summary = flex_test(os.path.join(rec, "record"), check=1)
    assert 'VIOLATION: capability "attach" is a string, not a bool' in p.stdout, p.stdout
    with open(os.path.join(rec, ".stdout"), "w") as f:
        f.write('{"status": "Splendid"}\n')
    p, summary = flex_test(os.path.join(rec, "record"), check=1)
    assert 'VIOLATION: unknown status "Splendid"' in p.stdout, p.stdout

    if not is_root():
        return
    # "Success" to everything, nothing else: attachable by default, so no device, no attached
    # bool, and mounts that never happen. Kubernetes accepts all of it: warnings, exit 0.
    os.unlink(os.path.join(rec, ".stdout"))
    out = json.loads(ctl("-o", "json", "flex", "test", os.path.join(rec, "record"),
                         check=0).stdout)
    found = {s["step"]: s["warnings"] for s in out["steps"]}
    assert found["attach"] == ['no "device" in a Success answer: Kubernetes passes an empty '
                               'device to waitforattach'], found
    assert found["isattached"] == ['"attached" is false (absent) right after a successful attach: '
                                   'Kubernetes would take the volume as detached and attach it '
                                   'again'], found
    assert found["waitforattach"] == ['no "device" in a Success answer: Kubernetes passes an '
                                      'empty device to mountdevice'], found
    assert found["mountdevice"][0].startswith("mountdevice answered Success but nothing is mounted"), found
    assert found["mount"][0].startswith("mount answered Success but nothing is mounted"), found
    assert found["isattached (detached)"] == [], found
    assert out["violations"] == 0 and out["warnings"] == sum(len(w) for w in found.values()) == 5, out
    p, summary = flex_test(os.path.join(rec, "record"), check=0)
    assert "mount                  WARNING: mount answered Success but nothing is mounted" in p.stdout, p.stdout
    assert summary.endswith(" checks, 0 violations, 5 warnings"), summary

    # Not supported on mount from a driver that is not attachable: it cannot work at all.
    p, summary = flex_test(broken(ctx, "notsupported"), check=1)
    assert "mount                  VIOLATION: mount answered Not supported" in p.stdout, p.stdout
    assert summary.endswith(" 1 violations, 0 warnings"), summary

    # An unmount that answers Success but leaves the mount: caught, and cleaned up after.
    sticky = os.path.join(ctx.tmp, "sticky")
    with open(sticky, "w") as f:
        f.write("#!/bin/sh\n"
                "case \"$1\" in\n"
                "init) echo '{\"status\":\"Success\",\"capabilities\":{\"attach\":false}}' ;;\n"
                "mount) mkdir -p \"$2\" && mount -t tmpfs sticky \"$2\" && "
                "echo '{\"status\":\"Success\"}' ;;\n"
                "unmount) echo '{\"status\":\"Success\"}' ;;\n"
                "*) echo '{\"status\":\"Not supported\"}' ;;\n"
                "esac\n")
    os.chmod(sticky, 0o755)
    work = os.path.join(ctx.tmp, "work")
    os.mkdir(work)
    p, summary = flex_test(sticky, check=1, tmpdir=work)
    assert "unmount                VIOLATION: unmount answered Success but" in p.stdout, p.stdout
    assert "is still mounted" in p.stdout and "cleanup" in p.stdout, p.stdout
    assert summary.endswith(" 1 violations, 0 warnings"), summary
    with open("/proc/self/mountinfo") as f:
        assert work not in f.read()
    assert os.listdir(work) == [], os.listdir(work)


def test_flex_tools_as_the_readme_shows_them(ctx):
    """The README's commands typed in a directory of one's own (a relative --dir); the mount
    directories made first, as the kubelet makes them; the driver's environment, volplugctl's
    own unless --env says otherwise."""
    need_root()
    work = os.path.join(ctx.tmp, "readme")
    os.mkdir(work)
    with open(os.path.join(SOURCE_ROOT, "README.md")) as f:
        readme = f.read()
    install_line = re.search(r"^\$ctl (flex install examples/flexvolume/tmpfs .*)$", readme, re.M)
    test_line = re.search(r"^\$ctl (flex test \S+ --dir \./flexvolume)", readme, re.M)
    assert install_line and test_line, "README.md no longer shows flex install and flex test"
    args = install_line.group(1).split()
    args[2] = os.path.join(EXAMPLES, "tmpfs")
    ctl(*args, check=0, cwd=work)
    driver = test_line.group(1).split()[2]
    p = ctl(*test_line.group(1).split(), check=0, cwd=work, timeout=120)
    assert p.stdout.splitlines()[-1].endswith(" checks, 0 violations, 0 warnings"), p.stdout
    p = ctl("flex", "call", driver, "init", "--dir", "./flexvolume", check=0, cwd=work)
    assert p.stdout.startswith("command: %s/flexvolume/%s/tmpfs init\n" % (
        work, driver.replace("/", "~"))), p.stdout

    # A driver that mounts where it is told, the directory being the kubelet's business.
    bare = os.path.join(ctx.tmp, "bare")
    with open(bare, "w") as f:
        f.write("#!/bin/sh\n"
                "case \"$1\" in\n"
                "init) echo '{\"status\":\"Success\",\"capabilities\":{\"attach\":false}}' ;;\n"
                "mount) mount -t tmpfs bare \"$2\" && echo '{\"status\":\"Success\"}' ;;\n"
                "unmount) umount \"$2\" && echo '{\"status\":\"Success\"}' ;;\n"
                "*) echo '{\"status\":\"Not supported\"}' ;;\n"
                "esac\n")
    os.chmod(bare, 0o755)
    p, summary = flex_test(bare, check=0)
    assert summary.endswith(" 0 violations, 0 warnings"), p.stdout
    target = os.path.join(ctx.tmp, "pod", "volumes", "v")
    ctl("flex", "call", bare, "mount", target, "{}", check=0)
    assert mount_at(target)[0] == "tmpfs", mount_at(target)
    assert stat.S_IMODE(os.stat(os.path.dirname(target)).st_mode) == 0o750
    ctl("flex", "call", bare, "unmount", target, check=0)

    env = {"ENVCONF_LOG": os.path.join(ctx.tmp, "envconf.log")}
    envconf = broken(ctx, "envconf")
    out = json.loads(ctl("-o", "json", "flex", "call", envconf, "unmountdevice", "/m", check=1,
                         env=env).stdout)
    assert out["reply"]["status"] == "Not supported", out
    for flag in ("clean", "HOME,PATH"):
        out = json.loads(ctl("-o", "json", "flex", "call", envconf, "unmountdevice", "/m",
                             "--env", flag, check=1, env=env).stdout)
        assert out["reply"]["message"] == "ENVCONF_LOG is not set: nowhere to log", out
    out = json.loads(ctl("-o", "json", "flex", "call", envconf, "unmountdevice", "/m",
                         "--env", "ENVCONF_LOG", check=1, env=env).stdout)
    assert out["reply"]["status"] == "Not supported", out
    p = ctl("flex", "call", envconf, "init", "--env", "a b", check=2)
    assert "--env 'a b': want inherit, clean or a comma-separated list" in p.stderr, p.stderr


def test_flex_list(ctx):
    plugins = os.path.join(ctx.tmp, "plugins")
    install(plugins, os.path.join(EXAMPLES, "tmpfs"), "volplug.example", "tmpfs")
    install(plugins, broken(ctx, "initfail"), "test", "initfail")
    d = ctx.daemon(args=["--flexvolume-dir", plugins])
    p = d.ctl("flex", "list", check=False)
    if p.returncode == 1 and "UNIMPLEMENTED" in p.stderr:
        raise Skip("volplugd does not serve volplug.admin.v1.Admin/ListFlexDrivers yet")
    deadline = time.monotonic() + 10
    while True:
        drivers = {x["name"]: x for x in d.ctl_json("flex", "list").get("drivers", [])}
        if len(drivers) == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert set(drivers) == {"volplug.example/tmpfs", "test/initfail"}, drivers
    tmpfs, bad = drivers["volplug.example/tmpfs"], drivers["test/initfail"]
    assert tmpfs["state"] == "loaded" and not tmpfs["capabilities"].get("attach"), tmpfs
    assert bad["state"] == "failed", bad
    assert "kernel module initfail-fs is not loaded" in bad["last_error"], bad

    lines = d.ctl("flex", "list").stdout.splitlines()
    assert lines[0].split() == ["NAME", "STATE", "CAPABILITIES", "LAST", "ERROR"], lines
    row = [l for l in lines if l.startswith("test/initfail ")]
    assert row and " failed " in row[0] and "kernel module initfail-fs is not loaded" in row[0], lines
    row = [l for l in lines if l.startswith("volplug.example/tmpfs ")]
    assert row and " loaded " in row[0] and row[0].rstrip().endswith(" -"), lines


# --- pool check -------------------------------------------------------------------------------


BLOCK = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "block": {}}
TEMP = ".meta.json.tmp-0123456789abcdef"  # what an interrupted write of an earlier version left


def run_tool(*argv):
    return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout.strip()


def loop_backing(dev):
    """The loop device's backing file as sysfs shows it, or None when it is detached."""
    try:
        with open("/sys/block/%s/loop/backing_file" % os.path.basename(dev)) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def bound_here(ctx, dev):
    """Whether dev is bound to a file of the test. Once detached, its number may go to another
    test running beside this one at once: bound, but not here."""
    backing = loop_backing(dev)
    return bool(backing) and backing.startswith(ctx.tmp + "/")


def detach_later(ctx, dev):
    """Detaches dev after the test, if it is still bound to a file of the test."""
    def detach():
        if bound_here(ctx, dev):
            subprocess.run(["losetup", "-d", dev], capture_output=True)
    ctx.cleanups.append(detach)


def stray_loop(ctx, pool, mounted):
    """A loop device over a file of the pool that no record uses; mkfs'ed and mounted if asked."""
    img = os.path.join(pool, "stray.img")
    with open(img, "wb") as f:
        f.truncate(16 * MiB)
    dev = run_tool("losetup", "-f", "--show", img)
    detach_later(ctx, dev)
    if mounted:
        mnt = os.path.join(ctx.tmp, "mnt")
        os.makedirs(mnt, exist_ok=True)
        run_tool("mkfs.ext4", "-q", dev)
        run_tool("mount", dev, mnt)
        ctx.cleanups.insert(0, lambda: subprocess.run(["umount", mnt], capture_output=True))
        return dev, mnt
    return dev, None


def staged_then_deleted(ctx, d, staging):
    """A volume staged on the node (a loop device over its data file), then deleted without
    being unstaged: the device stays, over a deleted file that no record uses. DeleteVolume
    refuses that today; earlier versions did it (renamed the volume's directory into tmp/ and
    removed it), and so does this, by hand."""
    vid = d.call("CreateVolume", {"name": "pvc-orphaned", "volume_capabilities": [BLOCK],
                                  "capacity_range": {"required_bytes": 8 * MiB}}).volume.volume_id
    os.makedirs(staging, exist_ok=True)
    d.call("NodeStageVolume", volume_id=vid, staging_target_path=staging, volume_capability=BLOCK)
    dev = run_tool("losetup", "-j", os.path.join(d.pool, "volumes", local_id(vid), "data")).split(":")[0]
    detach_later(ctx, dev)
    p = ctl("--endpoint", "unix://" + d.socket, "volume", "delete", vid, check=1)
    assert "FAILED_PRECONDITION" in p.stderr and "unstage it first" in p.stderr, p.stderr
    trash = os.path.join(d.pool, "tmp", "del-%s.0000beef" % local_id(vid))
    os.rename(os.path.join(d.pool, "volumes", local_id(vid)), trash)
    shutil.rmtree(trash)
    assert loop_backing(dev).endswith("/data (deleted)"), loop_backing(dev)
    return vid, dev


def test_pool_check_reports_and_repairs_strays(ctx):
    need_root()
    d = ctx.daemon()
    pool = d.pool
    vid, deleted_dev = staged_then_deleted(ctx, d, os.path.join(ctx.tmp, "staging"))
    mounted_dev, mnt = stray_loop(ctx, pool, mounted=True)
    keep = d.call("CreateVolume", {"name": "pvc-keep", "volume_capabilities": [BLOCK]}).volume.volume_id
    temp = os.path.join(pool, "volumes", local_id(keep), TEMP)
    open(temp, "w").close()

    # Without --repair: reported, nothing changed.
    out = ctl("pool", "check", pool, check=1).stdout.splitlines()
    assert out[-1] == "1 volumes, 0 snapshots, 0 Flexvolume records, 3 problems", out
    deleted_line = [l for l in out if l.startswith(deleted_dev + ": ")]
    assert len(deleted_line) == 1 and "tmp/del-%s." % local_id(vid) in deleted_line[0], out
    assert deleted_line[0].endswith("/data (deleted), which no record uses"), out
    assert "%s: mounted at %s, over stray.img, which no record of the pool uses (not unmounted)" % (
        mounted_dev, mnt) in out, out
    assert "volumes/%s/%s: a temporary file left by an interrupted write" % (local_id(keep), TEMP) in out, out
    assert loop_backing(deleted_dev) and os.path.exists(temp)

    # --repair, while the daemon serves the pool: the mount is only reported.
    report = json.loads(ctl("-o", "json", "pool", "check", "--repair", pool, check=1).stdout)
    problems = {p["object"]: p for p in report["problems"]}
    assert report["repaired"] == 2 and len(problems) == 3, report
    assert problems[deleted_dev]["repaired"] == "detached", report
    assert problems["volumes/%s/%s" % (local_id(keep), TEMP)]["repaired"] == "removed", report
    assert "repaired" not in problems[mounted_dev] and mnt in problems[mounted_dev]["problem"], report
    assert not bound_here(ctx, deleted_dev) and not os.path.exists(temp)
    assert mount_at(mnt) is not None and loop_backing(mounted_dev), "never unmounted"

    run_tool("umount", mnt)
    out = ctl("pool", "check", "--repair", pool, check=0).stdout.splitlines()
    assert out[0] == "%s: attached over stray.img, which no record uses: detached" % mounted_dev, out
    assert re.fullmatch(SPACE_LINE, out[1]) and out[1].startswith("1024 MiB provisioned, 0 MiB allocated"), out
    assert out[2:] == ["1 volumes, 0 snapshots, 0 Flexvolume records, 1 problems, 1 repaired"], out
    assert not bound_here(ctx, mounted_dev)
    out = ctl("pool", "check", pool, check=0).stdout.splitlines()
    assert len(out) == 2 and re.fullmatch(SPACE_LINE, out[0]), out
    assert out[1] == "1 volumes, 0 snapshots, 0 Flexvolume records, 0 problems", out
    d.call("ListVolumes")  # the daemon served on throughout


def test_daemon_repairs_strays_at_start(ctx):
    need_root()
    d = ctx.daemon()
    vid, deleted_dev = staged_then_deleted(ctx, d, os.path.join(ctx.tmp, "staging"))
    d.stop()
    stray_dev, _ = stray_loop(ctx, d.pool, mounted=False)
    open(os.path.join(d.pool, "nodes", ".node-1.json.tmp-00000000000000ff"), "w").close()

    d = ctx.daemon(pool=d.pool, name="restarted")
    warned = [l for l in d.logs().splitlines() if " warning " in l and "pool %s: " % d.pool in l]
    assert len(warned) == 3, warned
    assert any(deleted_dev in l and "tmp/del-%s." % local_id(vid) in l and ": detached (" in l
               for l in warned), warned
    assert any(stray_dev in l and "stray.img" in l and ": detached (" in l for l in warned)
    assert any("nodes/.node-1.json.tmp-00000000000000ff" in l and ": removed (" in l
               for l in warned), warned
    assert not bound_here(ctx, deleted_dev) and not bound_here(ctx, stray_dev)
    out = ctl("pool", "check", d.pool, check=0).stdout.splitlines()
    assert out[-1] == "0 volumes, 0 snapshots, 0 Flexvolume records, 0 problems", out


def test_pool_check_usage(ctx):
    not_a_pool = os.path.join(ctx.tmp, "empty")
    os.mkdir(not_a_pool)
    p = ctl("pool", "check", "--repair", not_a_pool, check=1)
    one_error_line(p, "pool %s: cannot open it" % not_a_pool)
    assert os.listdir(not_a_pool) == [], "--repair lays out no pool where there was none"
    for args in (["pool", "check", "--repair"], ["pool", "check", "--fix", not_a_pool],
                 ["pool", "check"]):
        one_error_line(ctl(*args, check=2), "usage: volplugctl pool check [--repair] POOL_DIR")


if __name__ == "__main__":
    run([test_volume_lifecycle_through_the_cli, test_block_volume_through_the_cli,
         test_snapshots_and_groups_through_the_cli, test_create_says_what_it_made,
         test_human_output_is_yaml, test_list_pages_and_all,
         test_capacity_and_capabilities, test_errors_show_code_and_message,
         test_bad_usage_exits_2_before_any_call, test_flex_install_and_remove, test_flex_call,
         test_flex_test_passes_the_examples, test_flex_test_reports_violations,
         test_flex_tools_as_the_readme_shows_them, test_flex_list,
         test_pool_check_reports_and_repairs_strays, test_daemon_repairs_strays_at_start,
         test_pool_check_usage])
