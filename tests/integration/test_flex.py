# SPDX-License-Identifier: Apache-2.0
"""Flexvolume drivers served through CSI by a running volplugd: drivers installed, upgraded,
broken and removed while it runs and while their volumes are mounted; the admin service's
ListFlexDrivers; the attachable (loop) and non-attachable (tmpfs) example drivers through
ControllerPublish, NodeStage and NodePublish and back; Kubernetes' "Not supported" fallbacks;
deadlines, garbage answers and secrets kept out of the log. Checks what a user sees: gRPC codes
and messages, /proc/self/mountinfo, loop devices in sysfs, files on the volumes. Needs root."""

import base64
import glob
import json
import os
import shutil
import stat
import subprocess
import time

import grpc

from harness import (SOURCE_ROOT, VOLPLUGCTL, Skip, in_background, is_root, process, processes, run,
                     to_dict, wait_for)

EXAMPLES = os.path.join(SOURCE_ROOT, "examples", "flexvolume")
TEST_DRIVERS = os.path.join(SOURCE_ROOT, "tests", "flex-drivers")
TMPFS = "volplug.example/tmpfs"
LOOP = "volplug.example/loop"


def need_root():
    if not is_root():
        raise Skip("needs root (mounts, loop devices)")
    for tool in ("jq", "losetup", "mountpoint"):
        if not shutil.which(tool):
            raise Skip("needs %s (the example drivers use it)" % tool)


def cap(mode="SINGLE_NODE_WRITER", fs="", group=None):
    m = {"fs_type": fs}
    if group is not None:
        m["volume_mount_group"] = group
    return {"mount": m, "access_mode": {"mode": mode}}


# --- the machine ------------------------------------------------------------------------------


def mount_at(path):
    """The topmost mount at path in /proc/self/mountinfo: {fstype, source, vfs} or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            fields = left.split(" ")
            fstype, source = right.split(" ")[:2]
            if fields[4] == path:
                found = {"fstype": fstype, "source": source, "vfs": fields[5].split(",")}
    return found


def loops_under(prefix):
    """{"/dev/loopN": backing file} for loop devices backed by files below prefix (sysfs)."""
    found = {}
    for bf in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            with open(bf) as f:
                backing = f.read().strip().removesuffix(" (deleted)")
        except OSError:
            continue
        if backing.startswith(prefix.rstrip("/") + "/"):
            found["/dev/" + bf.split("/")[3]] = backing
    return found


def cleanup_machine(tmp):
    """Undoes whatever a failed test left: mounts below tmp, then loop devices of its files."""
    for _ in range(20):
        with open("/proc/self/mountinfo") as f:
            targets = [line.split(" ")[4] for line in f]
        mine = [t for t in targets if t.startswith(tmp + "/")]
        if not mine:
            break
        subprocess.run(["umount", "-l", mine[-1]], capture_output=True)
    for dev in loops_under(tmp):
        subprocess.run(["losetup", "-d", dev], capture_output=True)


# --- drivers ----------------------------------------------------------------------------------


def install(plugin_dir, name, src=None, text=None):
    """Installs a driver the way the design asks: never half a driver in sight. A new driver
    folder is built under a dot-name and renamed into place; an upgrade writes the executable
    to a dot-name in its folder and renames it over the old one."""
    vendor, _, exe = name.partition("/")
    folder = os.path.join(plugin_dir, "%s~%s" % (vendor, exe))
    fresh = not os.path.isdir(folder)
    build = os.path.join(plugin_dir, ".new-%s~%s" % (vendor, exe)) if fresh else folder
    os.makedirs(build, exist_ok=True)
    tmp = os.path.join(build, "." + exe + ".tmp")
    if src:
        shutil.copyfile(src, tmp)
    else:
        with open(tmp, "w") as f:
            f.write(text)
    os.chmod(tmp, 0o755)
    os.rename(tmp, os.path.join(build, exe))
    if fresh:
        os.rename(build, folder)
    return folder


def wrapper(script_body):
    """A driver made of a shell snippet (tests only)."""
    return "#!/bin/sh\n" + script_body


def drivers(d):
    return {x.name: x for x in d.call("ListFlexDrivers").drivers}


def wait_driver(d, name, state="loaded", attach=None, timeout=10):
    """Waits until ListFlexDrivers shows name in state (None: absent), with capability attach
    when given. Returns the entry."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = drivers(d)
        x = last.get(name)
        if state is None and x is None:
            return None
        if x is not None and x.state == state and (attach is None or x.capabilities["attach"] == attach):
            return x
        time.sleep(0.05)
    raise AssertionError("driver %s never reached %s (attach=%s): %s" % (name, state, attach, last))


def flex_daemon(ctx, *extra, mode="all", env=None, name="d"):
    plugin_dir = os.path.join(ctx.tmp, "plugins")
    d = ctx.daemon(mode=mode, args=["--flexvolume-dir", plugin_dir] + list(extra), env=env, name=name)
    d.plugin_dir = plugin_dir
    os.makedirs(os.path.join(ctx.tmp, "pods"), exist_ok=True)  # where the CO puts targets
    return d


def publish_ephemeral(d, name, target, driver, extra=None, secrets=None, capability=None, **kw):
    ctx = {"flexvolume.driver": driver, "csi.storage.k8s.io/ephemeral": "true",
           "csi.storage.k8s.io/pod.name": "web-0", "csi.storage.k8s.io/pod.namespace": "shop",
           "csi.storage.k8s.io/pod.uid": "uid-1234", "csi.storage.k8s.io/serviceAccount.name": "sa-web"}
    ctx.update(extra or {})
    os.makedirs(os.path.dirname(target), exist_ok=True)  # the CO makes the parent
    return d.call("NodePublishVolume", volume_id=name, target_path=target,
                  volume_capability=capability or cap(), volume_context=ctx, secrets=secrets or {}, **kw)


def recording(tmp, name, target_driver):
    """A driver that writes its argv (one per line) to a file, then runs target_driver."""
    log = os.path.join(tmp, name + ".args")
    return log, wrapper('printf "%%s\\n" "$@" >>"%s"\nexec "%s" "$@"\n' % (log, target_driver))


def read_calls(log):
    """The recorded arguments, one a line."""
    with open(log) as f:
        return f.read()


# --- tests ------------------------------------------------------------------------------------


def test_drivers_appear_and_tmpfs_volume_mounts(ctx):
    need_root()
    d = flex_daemon(ctx)
    try:
        assert os.path.isdir(d.plugin_dir), "volplugd creates a missing plugin dir"
        assert drivers(d) == {}, "no drivers yet"
        log, text = recording(ctx.tmp, "tmpfs", os.path.join(EXAMPLES, "tmpfs"))
        install(d.plugin_dir, TMPFS, text=text)
        install(d.plugin_dir, LOOP, src=os.path.join(EXAMPLES, "loop"))
        t = wait_driver(d, TMPFS)
        lo = wait_driver(d, LOOP)
        assert t.path == os.path.join(d.plugin_dir, "volplug.example~tmpfs", "tmpfs"), t
        assert dict(t.capabilities) == {"attach": False, "selinuxRelabel": True, "supportsMetrics": False,
                                        "fsGroup": True, "requiresFSResize": True}, t
        assert lo.capabilities["attach"] is True, lo
        assert abs(t.loaded_at_unix - time.time()) < 30 and t.last_error == "", t
        assert "Flexvolume driver volplug.example/tmpfs loaded" in d.logs()

        target = os.path.join(ctx.tmp, "pods", "uid-1234", "vol")
        os.makedirs(os.path.dirname(target))
        publish_ephemeral(d, "csi-eph-1", target, TMPFS, {"size": "16m"},
                          secrets={"token": "tok-SECRET-1"})
        m = mount_at(target)
        assert m and m["fstype"] == "tmpfs" and m["source"] == "volplug-flex-tmpfs", m
        with open(os.path.join(target, "f"), "w") as f:
            f.write("x")
        args = read_calls(log)
        opts = json.loads([a for a in args.splitlines() if a.startswith("{")][-1])
        assert opts["kubernetes.io/pod.name"] == "web-0" and opts["kubernetes.io/pod.namespace"] == "shop", opts
        assert opts["kubernetes.io/pod.uid"] == "uid-1234", opts
        assert opts["kubernetes.io/serviceAccount.name"] == "sa-web", opts
        assert opts["kubernetes.io/pvOrVolumeName"] == "csi-eph-1" and opts["kubernetes.io/readwrite"] == "rw", opts
        assert opts["size"] == "16m" and not any(k.startswith(("csi.storage", "flexvolume.")) for k in opts), opts
        assert opts["kubernetes.io/secret/token"] == base64.b64encode(b"tok-SECRET-1").decode(), opts
        assert "tok-SECRET-1" not in d.logs() and opts["kubernetes.io/secret/token"] not in d.logs()

        # Retried publish: mounted once, answered at once.
        publish_ephemeral(d, "csi-eph-1", target, TMPFS, {"size": "16m"})
        assert read_calls(log).splitlines().count("mount") == 1, read_calls(log)

        stats = to_dict(d.call("NodeGetVolumeStats", volume_id="csi-eph-1", volume_path=target))
        assert stats["usage"][0]["total"] == str(16 << 20), stats  # the tmpfs size= option
        assert not stats["volume_condition"].get("abnormal"), stats

        d.call("NodeUnpublishVolume", volume_id="csi-eph-1", target_path=target)
        assert mount_at(target) is None and not os.path.exists(target)
        assert "unmount\n" + target in read_calls(log)
        d.call("NodeUnpublishVolume", volume_id="csi-eph-1", target_path=target)  # nothing to do
    finally:
        cleanup_machine(ctx.tmp)


def loop_context(ctx, driver=LOOP, **extra):
    c = {"flexvolume.driver": driver, "dir": os.path.join(ctx.tmp, "images"), "size": "64M"}
    c.update(extra)
    return c


class AttachedVolume:
    """One volume of an attachable driver taken through the whole CSI flow."""

    def __init__(self, ctx, d, vid, context, fs="ext4"):
        self.d, self.id, self.context, self.fs = d, vid, context, fs
        self.tmp = ctx.tmp
        self.staging = os.path.join(ctx.tmp, "staging", vid)
        os.makedirs(self.staging)
        self.device = None

    def target(self, n):
        return os.path.join(self.tmp, "pods", self.id, str(n))

    def publish_controller(self):
        r = self.d.call("ControllerPublishVolume", volume_id=self.id, node_id="node-1",
                        volume_capability=cap(fs=self.fs), volume_context=self.context)
        self.device = r.publish_context.get("devicePath")
        return r

    def stage(self):
        ctx = {"devicePath": self.device} if self.device else {}
        self.d.call("NodeStageVolume", volume_id=self.id, staging_target_path=self.staging,
                    volume_capability=cap(fs=self.fs), volume_context=self.context, publish_context=ctx)

    def publish(self, n, readonly=False):
        t = self.target(n)
        os.makedirs(os.path.dirname(t), exist_ok=True)
        self.d.call("NodePublishVolume", volume_id=self.id, staging_target_path=self.staging,
                    target_path=t, volume_capability=cap(fs=self.fs), volume_context=self.context,
                    readonly=readonly)
        return t

    def unpublish(self, n):
        self.d.call("NodeUnpublishVolume", volume_id=self.id, target_path=self.target(n))

    def unstage(self):
        self.d.call("NodeUnstageVolume", volume_id=self.id, staging_target_path=self.staging)

    def unpublish_controller(self):
        self.d.call("ControllerUnpublishVolume", volume_id=self.id, node_id="node-1")


def test_loop_driver_attach_stage_publish_and_back(ctx):
    need_root()
    d = flex_daemon(ctx)
    try:
        install(d.plugin_dir, LOOP, src=os.path.join(EXAMPLES, "loop"))
        wait_driver(d, LOOP)
        v = AttachedVolume(ctx, d, "pv-loop-1", loop_context(ctx))
        v.publish_controller()
        assert v.device and v.device.startswith("/dev/loop"), v.device
        image = os.path.join(ctx.tmp, "images", "pv-loop-1.img")
        assert loops_under(ctx.tmp) == {v.device: image}, loops_under(ctx.tmp)
        first = v.device
        v.publish_controller()  # a retry: isattached says yes, same device
        assert v.device == first and len(loops_under(ctx.tmp)) == 1

        v.stage()
        m = mount_at(v.staging)
        assert m and m["fstype"] == "ext4" and m["source"] == v.device, m
        v.stage()  # mounted once only
        t1 = v.publish(1)
        m = mount_at(t1)
        assert m and m["fstype"] == "ext4", m  # the loop driver's mount is Not supported: a bind
        # status counts the Flexvolume backend's stage and publish, not the pool's alone
        s = d.ctl_json("status")
        flex = [b for b in s["backends"] if b["name"] == "flex"]
        assert flex and flex[0]["staged"] == 1 and flex[0]["published"] == 1, s["backends"]
        assert s["staged"] == 1 and s["published"] == 1, s
        assert "on this node: 1 volumes staged, 1 publish targets" in d.ctl("status").stdout
        with open(os.path.join(t1, "data"), "w") as f:
            f.write("survives")
        v.unpublish(1)
        assert mount_at(t1) is None and not os.path.exists(t1)

        # A restart in the middle: what is left to undo comes from the records and the mounts.
        t2 = v.publish(2)
        d.kill9()
        d.start()
        wait_driver(d, LOOP)
        with open(os.path.join(t2, "data")) as f:
            assert f.read() == "survives", "data written survives republish"
        v.publish(2)  # retried after the restart: already mounted
        v.unpublish(2)
        v.unpublish(2)
        assert mount_at(t2) is None and not os.path.exists(t2)
        v.unstage()
        assert mount_at(v.staging) is None and not os.path.exists(v.staging)
        v.unstage()
        v.unpublish_controller()
        assert loops_under(ctx.tmp) == {}, "detach released the loop device"
        v.unpublish_controller()
        d.call("ControllerUnpublishVolume", volume_id="pv-never-published", node_id="node-1")
    finally:
        cleanup_machine(ctx.tmp)


def test_upgrade_between_attachable_and_not_while_mounted(ctx):
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/flip"
    try:
        install(d.plugin_dir, name, src=os.path.join(EXAMPLES, "tmpfs"))
        wait_driver(d, name, attach=False)
        ta = os.path.join(ctx.tmp, "pods", "a")
        publish_ephemeral(d, "vol-a", ta, name)
        with open(os.path.join(ta, "f"), "w") as f:
            f.write("a")

        # tmpfs -> loop: attachable now. The tmpfs mount stays; new volumes get attached.
        install(d.plugin_dir, name, src=os.path.join(EXAMPLES, "loop"))
        wait_driver(d, name, attach=True)
        assert mount_at(ta)["fstype"] == "tmpfs"
        with open(os.path.join(ta, "f")) as f:
            assert f.read() == "a"
        b = AttachedVolume(ctx, d, "vol-b", loop_context(ctx, driver=name))
        b.publish_controller()
        assert b.device and b.device.startswith("/dev/loop"), "the new version attaches"
        b.stage()
        tb = b.publish(1)
        assert mount_at(tb)["fstype"] == "ext4"

        # loop -> tmpfs: not attachable again. The loop volume stays usable.
        install(d.plugin_dir, name, src=os.path.join(EXAMPLES, "tmpfs"))
        wait_driver(d, name, attach=False)
        with open(os.path.join(tb, "g"), "w") as f:
            f.write("b")
        c = AttachedVolume(ctx, d, "vol-c", {"flexvolume.driver": name})
        r = c.publish_controller()
        assert dict(r.publish_context) == {}, "a non-attachable driver attaches nothing"
        c.stage()
        assert mount_at(c.staging) is None, "nothing is staged for a non-attachable driver"
        tc = c.publish(1)
        assert mount_at(tc)["fstype"] == "tmpfs"

        # Everything comes apart with the current version, by the records.
        d.call("NodeUnpublishVolume", volume_id="vol-a", target_path=ta)
        b.unpublish(1)
        c.unpublish(1)
        b.unstage()  # tmpfs answers unmountdevice "Not supported": unmount and remove the dir
        c.unstage()
        for p in (ta, tb, tc, b.staging):
            assert mount_at(p) is None and not os.path.exists(p), p
        b.unpublish_controller()  # detach: "Not supported" -> success, like Kubernetes
        c.unpublish_controller()
    finally:
        cleanup_machine(ctx.tmp)
        # The loop driver never got its detach: drop the state it keeps outside our tmp.
        if os.path.exists("/run/volplug/flex-loop/vol-b"):
            os.unlink("/run/volplug/flex-loop/vol-b")


def test_broken_and_removed_drivers(ctx):
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/fragile"
    try:
        install(d.plugin_dir, name, src=os.path.join(EXAMPLES, "tmpfs"))
        wait_driver(d, name)
        t1 = os.path.join(ctx.tmp, "pods", "1")
        publish_ephemeral(d, "v1", t1, name)

        install(d.plugin_dir, name, src=os.path.join(TEST_DRIVERS, "initfail"))
        x = wait_driver(d, name, state="failed")
        assert "kernel module initfail-fs is not loaded" in x.last_error, x
        assert "not usable" in d.logs() and "initfail-fs" in d.logs()
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume",
                           volume_id="v2", target_path=os.path.join(ctx.tmp, "pods", "2"),
                           volume_capability=cap(), volume_context={"flexvolume.driver": name})
        assert name in e.details() and "initfail-fs" in e.details(), e.details()
        assert mount_at(t1)["fstype"] == "tmpfs", "the mounted volume keeps working"
        e = d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodeUnpublishVolume",
                           volume_id="v1", target_path=t1)
        assert name in e.details(), "unmount needs the driver: the error names it"

        install(d.plugin_dir, name, src=os.path.join(EXAMPLES, "tmpfs"))  # fixed
        wait_driver(d, name)
        d.call("NodeUnpublishVolume", volume_id="v1", target_path=t1)
        assert mount_at(t1) is None

        folder = os.path.join(d.plugin_dir, "volplug.test~fragile")
        os.rename(folder, os.path.join(ctx.tmp, "moved-away"))
        wait_driver(d, name, state=None)
        assert "Flexvolume driver %s removed" % name in d.logs()
        e = d.expect_error(grpc.StatusCode.NOT_FOUND, "NodePublishVolume", volume_id="v3",
                           target_path=os.path.join(ctx.tmp, "pods", "3"), volume_capability=cap(),
                           volume_context={"flexvolume.driver": name})
        assert name in e.details(), e.details()
        d.expect_error(grpc.StatusCode.NOT_FOUND, "NodePublishVolume", volume_id="v4",
                       target_path=os.path.join(ctx.tmp, "pods", "4"), volume_capability=cap(),
                       volume_context={"flexvolume.driver": "nobody/nothing"},
                       match='no Flexvolume driver "nobody/nothing" is installed')
        d.expect_error(grpc.StatusCode.INVALID_ARGUMENT, "NodePublishVolume", volume_id="v5",
                       target_path=os.path.join(ctx.tmp, "pods", "5"), volume_capability=cap(),
                       volume_context={"flexvolume.driver": "bad name"}, match="flexvolume.driver")
        for n in "2345":
            assert not os.path.exists(os.path.join(ctx.tmp, "pods", n)), "a refused publish leaves nothing"
    finally:
        cleanup_machine(ctx.tmp)


def test_hanging_driver_meets_its_deadline(ctx):
    need_root()
    d = flex_daemon(ctx, "--flexvolume-timeout", "mount=2s")
    name = "volplug.test/hang"
    hang = os.path.join(TEST_DRIVERS, "hang")
    install(d.plugin_dir, name, text=wrapper(
        'case "$1" in init) echo \'{"status":"Success","capabilities":{"attach":false}}\' ;;\n'
        '*) exec "%s" "$@" ;; esac\n' % hang))
    wait_driver(d, name)
    target = os.path.join(ctx.tmp, "pods", "h")
    start = time.monotonic()
    e = d.expect_error(grpc.StatusCode.DEADLINE_EXCEEDED, "NodePublishVolume", volume_id="vh",
                       target_path=target, volume_capability=cap(),
                       volume_context={"flexvolume.driver": name})
    took = time.monotonic() - start
    assert 1.9 < took < 6, "the 2 s mount deadline held (%.1f s)" % took
    assert name in e.details() and "mount" in e.details() and "deadline" in e.details(), e.details()
    assert "started mount" in e.details(), "an excerpt of what it printed: %s" % e.details()
    assert not os.path.exists(target)
    assert d.call("Probe").ready.value, "the daemon stays responsive"


def test_what_a_crashed_daemon_left_is_killed_at_restart(ctx):
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/lingering"
    helper = os.path.join(ctx.tmp, "helper.pid")
    install(d.plugin_dir, name, text=wrapper(
        'case "$1" in init) echo \'{"status":"Success","capabilities":{"attach":false}}\' ;;\n'
        '*) sleep 600 & echo $! >"%s"; exec sleep 601 ;; esac\n' % helper))
    wait_driver(d, name)
    t, result = in_background(publish_ephemeral, d, "vl", os.path.join(ctx.tmp, "pods", "l"), name)
    driver = wait_for(lambda: processes(ppid=d.proc.pid), what="the driver's mount")[0]
    left = int(wait_for(lambda: os.path.exists(helper) and open(helper).read().strip(),
                        what="the driver to start its helper"))
    d.proc.kill()
    assert d.proc.wait(10) == -9, d.proc.returncode
    t.join(10)
    assert result["error"].code() == grpc.StatusCode.UNAVAILABLE, result
    wait_for(lambda: process(driver["pid"]) is None, timeout=1,
             what="the driver (pid %d) to die with volplugd" % driver["pid"])
    assert process(left)["args"] == ["sleep", "600"], "its helper lives on: %s" % process(left)

    again = ctx.daemon(args=["--flexvolume-dir", d.plugin_dir], pool=d.pool, name="again")
    assert process(left) is None, "the new volplugd killed the helper before serving"
    warnings = [line for line in again.logs().splitlines()
                if "left running by a volplugd that died" in line]
    assert len(warnings) == 1 and "warning" in warnings[0], warnings
    assert "killed sleep 600 (1 process in process group %d)" % driver["pid"] in warnings[0], \
        warnings[0]
    assert again.call("Probe").ready.value


def test_garbage_answers_give_an_excerpt(ctx):
    need_root()
    d = flex_daemon(ctx)
    garbage = os.path.join(TEST_DRIVERS, "garbage")
    install(d.plugin_dir, "volplug.test/garbage", src=garbage)
    x = wait_driver(d, "volplug.test/garbage", state="failed")
    assert "not a JSON object" in x.last_error and "this is not JSON" in x.last_error, x
    name = "volplug.test/garbagemount"
    install(d.plugin_dir, name, text=wrapper(
        'case "$1" in init) echo \'{"status":"Success","capabilities":{"attach":false}}\' ;;\n'
        '*) exec "%s" "$@" ;; esac\n' % garbage))
    wait_driver(d, name)
    e = d.expect_error(grpc.StatusCode.INTERNAL, "NodePublishVolume", volume_id="vg",
                       target_path=os.path.join(ctx.tmp, "pods", "g"), volume_capability=cap(),
                       volume_context={"flexvolume.driver": name})
    msg = e.details()
    assert name in msg and "mount" in msg and "exit status 0" in msg, msg
    assert "this is not JSON" in msg, "an excerpt of the output: %s" % msg
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume", volume_id="vg2",
                   target_path=os.path.join(ctx.tmp, "pods", "g2"), volume_capability=cap(),
                   volume_context={"flexvolume.driver": "volplug.test/garbage"},
                   match="this is not JSON")


def test_secrets_never_reach_the_log(ctx):
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/echo"
    install(d.plugin_dir, name, text=wrapper(
        'case "$1" in init) echo \'{"status":"Success","capabilities":{"attach":false}}\' ;;\n'
        '*) exec "%s" "$@" ;; esac\n' % os.path.join(TEST_DRIVERS, "echoargs")))
    wait_driver(d, name)
    secret = "pa55-VERY-secret-77"
    encoded = base64.b64encode(secret.encode()).decode()
    try:
        publish_ephemeral(d, "vs", os.path.join(ctx.tmp, "pods", "s"), name,
                          secrets={"password": secret})
        raise AssertionError("echoargs fails every command")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.INTERNAL, e
        msg = e.details()
        assert name in msg and "mount failed (exit status 1)" in msg, msg
        assert "web-0" in msg, "the driver's own message, with the pod info it got: %s" % msg
        assert secret not in msg and encoded not in msg, msg
    logs = d.logs()
    assert "web-0" in logs, "the failure is logged"
    assert secret not in logs and encoded not in logs, "a secret reached the log"


def test_secrets_in_any_form_never_reach_the_log(ctx):
    """A driver printing a secret back raw, as a JSON string (its quotes and backslashes
    escaped), in hex and in base64: every form is cut out of the gRPC error and the log; and a
    secret cut in two by the 64 KiB capture limit is never half-shown."""
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/leaky"
    install(d.plugin_dir, name, src=os.path.join(TEST_DRIVERS, "leaky"))
    wait_driver(d, name)
    secret = 'pa"ss\\w0rd<&>'
    forms = [secret, json.dumps(secret)[1:-1], secret.encode().hex(),
             base64.b64encode(secret.encode()).decode()]
    e = d.expect_error(grpc.StatusCode.INTERNAL, "NodePublishVolume", volume_id="vl",
                       target_path=os.path.join(ctx.tmp, "pods", "l"), volume_capability=cap(),
                       volume_context={"flexvolume.driver": name}, secrets={"password": secret})
    msg = e.details()
    for label in ("raw", "json", "hex", "b64"):
        assert label + " " in msg, "each line is shown: %s" % msg
    assert msg.count("(redacted)") == 4, "each form, cut out: %s" % msg
    for f in forms:
        assert f not in msg and f not in d.logs(), (f, msg)

    for cut in (1, 6, len(secret) - 1):
        e = d.expect_error(grpc.StatusCode.INTERNAL, "NodePublishVolume", volume_id="vl",
                           target_path=os.path.join(ctx.tmp, "pods", "l"), volume_capability=cap(),
                           volume_context={"flexvolume.driver": name, "filler": str(65536 - cut)},
                           secrets={"password": secret})
        msg = e.details()
        assert "xxx(redacted)\"" in msg, "the head of the secret where the capture ended: %s" % msg
        assert secret[:cut] not in msg.split("xxx")[-1], msg
    assert secret[:6] not in d.logs()


def test_not_supported_fallbacks(ctx):
    need_root()
    d = flex_daemon(ctx)
    try:
        # Non-attachable, every command "Not supported": publish binds the staging path.
        ns = "volplug.test/ns"
        folder = install(d.plugin_dir, ns, src=os.path.join(TEST_DRIVERS, "notsupported"))
        wait_driver(d, ns)
        v = AttachedVolume(ctx, d, "vn", {"flexvolume.driver": ns})
        v.stage()
        with open(os.path.join(v.staging, "marker"), "w") as f:
            f.write("bound")
        t1 = v.publish(1)
        t2 = v.publish(2)
        assert mount_at(t1) and mount_at(t2)
        with open(os.path.join(t2, "marker")) as f:
            assert f.read() == "bound", "mount Not supported: the device mount path is bound"
        v.unpublish(1)
        v.unpublish(2)
        assert mount_at(t1) is None and not os.path.exists(t1), "unmount Not supported: unmounted, dir removed"
        with open(os.path.join(folder, ".calls")) as f:
            calls = f.read().split()
        assert calls.count("mount") == 1 and calls.count("unmount") == 1, \
            "Not supported is remembered per loaded driver: %s" % calls
        e = d.expect_error(grpc.StatusCode.UNIMPLEMENTED, "NodePublishVolume", volume_id="vn2",
                           target_path=os.path.join(ctx.tmp, "pods", "eph"), volume_capability=cap(),
                           volume_context={"flexvolume.driver": ns})
        assert "Not supported" in e.details() and ns in e.details(), e.details()

        # Attachable, mountdevice/unmountdevice "Not supported": format when blank, then mount.
        nsdev = "volplug.test/nsdev"
        install(d.plugin_dir, nsdev, text=wrapper(
            'case "$1" in mountdevice|unmountdevice) echo \'{"status":"Not supported"}\' ;;\n'
            '*) exec "%s" "$@" ;; esac\n' % os.path.join(EXAMPLES, "loop")))
        wait_driver(d, nsdev)
        w = AttachedVolume(ctx, d, "vd", loop_context(ctx, driver=nsdev), fs="ext4")
        w.publish_controller()
        blank = subprocess.run(["blkid", "-p", w.device], capture_output=True, text=True).stdout
        assert "TYPE" not in blank, "a new image is blank"
        w.stage()
        m = mount_at(w.staging)
        assert m and m["fstype"] == "ext4" and m["source"] == w.device, m
        with open(os.path.join(w.staging, "kept"), "w") as f:
            f.write("1")
        w.unstage()
        assert mount_at(w.staging) is None and not os.path.exists(w.staging)
        os.makedirs(w.staging)
        w.stage()  # formatted already: mounted as is, never reformatted
        assert os.path.exists(os.path.join(w.staging, "kept"))
        w.unstage()
        w.unpublish_controller()
        assert loops_under(ctx.tmp) == {}
    finally:
        cleanup_machine(ctx.tmp)


def test_fs_group_and_read_only(ctx):
    need_root()
    d = flex_daemon(ctx)
    try:
        log, text = recording(ctx.tmp, "tmpfs", os.path.join(EXAMPLES, "tmpfs"))
        install(d.plugin_dir, TMPFS, text=text)
        wait_driver(d, TMPFS)
        t = os.path.join(ctx.tmp, "pods", "rw")
        publish_ephemeral(d, "vg1", t, TMPFS, capability=cap(group="4242"))
        opts = json.loads([a for a in read_calls(log).splitlines() if a.startswith("{")][-1])
        assert opts["kubernetes.io/mounterArgs.FsGroup"] == "4242", opts
        st = os.stat(t)
        assert st.st_gid == 4242 and st.st_mode & stat.S_ISGID, "the ownership module ran"
        ro = os.path.join(ctx.tmp, "pods", "ro")
        publish_ephemeral(d, "vg2", ro, TMPFS, capability=cap(group="4242"), readonly=True)
        opts = json.loads([a for a in read_calls(log).splitlines() if a.startswith("{")][-1])
        assert opts["kubernetes.io/mounterArgs.FsGroup"] == "4242" and opts["kubernetes.io/readwrite"] == "ro", opts
        assert mount_at(ro) and "ro" in mount_at(ro)["vfs"]
        assert os.stat(ro).st_gid != 4242, "read-only Flexvolume mounts are never chowned"
        d.call("NodeUnpublishVolume", volume_id="vg1", target_path=t)
        d.call("NodeUnpublishVolume", volume_id="vg2", target_path=ro)
    finally:
        cleanup_machine(ctx.tmp)


def test_expansion_calls(ctx):
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/record"
    folder = install(d.plugin_dir, name, src=os.path.join(TEST_DRIVERS, "record"))
    wait_driver(d, name)

    def last_argv():
        with open(os.path.join(folder, ".argv"), "rb") as f:
            return f.read().decode().split("\0")[1:-1]

    v = AttachedVolume(ctx, d, "vx", {"flexvolume.driver": name, "opt": "1"})
    v.publish_controller()
    assert last_argv()[0] == "attach" and last_argv()[2] == "node-1", last_argv()
    v.stage()
    r = d.call("ControllerExpandVolume", volume_id="vx", capacity_range={"required_bytes": 2 << 30})
    assert r.capacity_bytes == 2 << 30 and r.node_expansion_required, r
    a = last_argv()
    assert a[0] == "expandvolume" and json.loads(a[1])["opt"] == "1", a
    assert a[3:] == [str(2 << 30), "0"], a
    r = d.call("NodeExpandVolume", volume_id="vx", volume_path=v.staging, staging_target_path=v.staging,
               capacity_range={"required_bytes": 2 << 30})
    assert r.capacity_bytes == 2 << 30, r
    a = last_argv()
    assert a[0] == "expandfs" and a[3] == v.staging and a[4:] == [str(2 << 30), "0"], a
    r = d.call("ControllerExpandVolume", volume_id="vx", capacity_range={"required_bytes": 3 << 30})
    assert last_argv()[3:] == [str(3 << 30), str(2 << 30)], "the old size is remembered"
    with open(os.path.join(folder, ".stdout"), "w") as f:
        f.write('{"status":"Failure","message":"pool is full"}')
    d.expect_error(grpc.StatusCode.INTERNAL, "ControllerExpandVolume", volume_id="vx",
                   capacity_range={"required_bytes": 4 << 30}, match="pool is full")
    os.unlink(os.path.join(folder, ".stdout"))
    v.unstage()
    assert last_argv()[0] != "unmountdevice", "nothing was mounted at the staging path"
    v.unpublish_controller()
    assert last_argv() == ["detach", "vx", "node-1"], last_argv()


# --- the kubelet's behaviour, point by point (drivers written as real ones are) -----------------


def read_call_log(path):
    """The calls a driver appended to path, one argument a line, each ended by "--": a list of
    argument lists (an empty argument is an empty string)."""
    calls, cur = [], []
    with open(path) as f:
        for line in f.read().split("\n")[:-1]:
            if line == "--":
                calls.append(cur)
                cur = []
            else:
                cur.append(line)
    return calls


def calls_of(log, command):
    return [c for c in read_call_log(log) if c and c[0] == command]


def json_files(top):
    return sorted(os.path.relpath(os.path.join(dp, f), top)
                  for dp, _, fs in os.walk(top) for f in fs if f.endswith(".json"))


def pool_check(d):
    p = subprocess.run([VOLPLUGCTL, "pool", "check", d.pool], capture_output=True, text=True)
    return p.returncode, p.stdout


def test_drivers_get_volplugds_environment(ctx):
    """The kubelet runs drivers with its own environment; so does volplugd, unless
    --flexvolume-env narrows it to a clean one or a list of names."""
    need_root()
    log = os.path.join(ctx.tmp, "envconf.log")
    env = {"ENVCONF_LOG": log, "https_proxy": "http://proxy.test:3128"}
    name = "volplug.test/envconf"
    target = os.path.join(ctx.tmp, "pods", "env", "vol")
    try:
        for flag, proxy in ((None, "http://proxy.test:3128"), ("ENVCONF_LOG", "")):
            d = flex_daemon(ctx, *(["--flexvolume-env", flag] if flag else []), env=env,
                            name="env")
            install(d.plugin_dir, name, src=os.path.join(TEST_DRIVERS, "envconf"))
            wait_driver(d, name)
            publish_ephemeral(d, "ve", target, name)
            assert mount_at(target)["source"] == "envconf", mount_at(target)
            d.call("NodeUnpublishVolume", volume_id="ve", target_path=target)
            with open(log) as f:
                lines = f.read().splitlines()
            assert lines[-2:] == ["mount proxy=" + proxy, "unmount proxy=" + proxy], (flag, lines)
            d.stop()
        d = flex_daemon(ctx, "--flexvolume-env", "clean", env=env, name="clean")
        wait_driver(d, name)
        e = d.expect_error(grpc.StatusCode.INTERNAL, "NodePublishVolume", volume_id="ve",
                           target_path=target, volume_capability=cap(),
                           volume_context={"flexvolume.driver": name,
                                           "csi.storage.k8s.io/ephemeral": "true"})
        assert "ENVCONF_LOG is not set" in e.details(), e.details()
    finally:
        cleanup_machine(ctx.tmp)


def test_node_expand_without_expandfs_asks_the_device(ctx):
    """Without expandfs the kubelet asks the device for its filesystem (blkid): a "device"
    that holds none (a tmpfs mounted under a device name) is nothing to grow, and succeeds; an
    ext4 on a grown loop device is grown."""
    need_root()
    d = flex_daemon(ctx)
    ram = "volplug.test/ramdisk"
    try:
        install(d.plugin_dir, ram, src=os.path.join(TEST_DRIVERS, "ramdisk"))
        install(d.plugin_dir, LOOP, src=os.path.join(EXAMPLES, "loop"))
        wait_driver(d, ram)
        wait_driver(d, LOOP)
        v = AttachedVolume(ctx, d, "pv-ram", {"flexvolume.driver": ram})
        v.publish_controller()
        assert v.device == "ramdisk-pv-ram", v.device
        v.stage()
        assert mount_at(v.staging)["fstype"] == "tmpfs", mount_at(v.staging)
        t = v.publish(1)
        r = d.call("NodeExpandVolume", volume_id=v.id, volume_path=t, staging_target_path=v.staging,
                   capacity_range={"required_bytes": 1 << 30})
        assert r.capacity_bytes == 1 << 30, r
        v.unpublish(1)
        v.unstage()
        v.unpublish_controller()

        # xfs: it grows online without CAP_SYS_RESOURCE, which ext4 needs and sandboxes lack.
        w = AttachedVolume(ctx, d, "pv-grow", loop_context(ctx, size="320M"), fs="xfs")
        w.publish_controller()
        w.stage()
        t = w.publish(1)
        before = os.statvfs(t)
        image = os.path.join(ctx.tmp, "images", "pv-grow.img")
        os.truncate(image, 520 << 20)
        subprocess.run(["losetup", "-c", w.device], check=True)
        d.call("NodeExpandVolume", volume_id=w.id, volume_path=t, staging_target_path=w.staging,
               capacity_range={"required_bytes": 520 << 20})
        after = os.statvfs(t)
        grown = (after.f_blocks - before.f_blocks) * after.f_frsize
        assert 190 << 20 <= grown <= 200 << 20, (before, after)
        w.unpublish(1)
        w.unstage()
        w.unpublish_controller()
    finally:
        cleanup_machine(ctx.tmp)


def test_expand_arguments_reach_a_dollar_star_driver_in_place(ctx):
    """expandvolume <json> <device mount path> <new> <old>: never an empty argument (a driver
    dispatching with $* would see the others shift), the kubelet's device mount path, the old
    size as the last expansion left it (0 before the first: CSI gives none), kept across a
    detach; expandfs gets the pod's volume path and the node's old size."""
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/dollarstar"
    folder = install(d.plugin_dir, name, src=os.path.join(TEST_DRIVERS, "dollarstar"))
    log = os.path.join(folder, ".calls")
    wait_driver(d, name)
    dmp = "/var/lib/kubelet/plugins/kubernetes.io/flexvolume/volplug.test/dollarstar/mounts/pv-star"
    try:
        v = AttachedVolume(ctx, d, "pv-star", {"flexvolume.driver": name})
        v.publish_controller()

        def expand(size):
            return d.call("ControllerExpandVolume", volume_id=v.id,
                          capacity_range={"required_bytes": size})

        expand(2 << 30)
        assert calls_of(log, "expandvolume")[-1][2:] == [dmp, str(2 << 30), "0"], read_call_log(log)
        v.stage()
        t = v.publish(1)
        expand(3 << 30)
        assert calls_of(log, "expandvolume")[-1][2:] == [dmp, str(3 << 30), str(2 << 30)]
        d.call("NodeExpandVolume", volume_id=v.id, volume_path=t, staging_target_path=v.staging,
               capacity_range={"required_bytes": 3 << 30})
        assert calls_of(log, "expandfs")[-1][2:] == ["/dev/null", t, str(3 << 30), str(2 << 30)], \
            read_call_log(log)
        v.unpublish(1)
        v.unstage()
        v.unpublish_controller()
        v.publish_controller()
        expand(4 << 30)
        assert calls_of(log, "expandvolume")[-1][2:] == [dmp, str(4 << 30), str(3 << 30)], \
            "the old size outlives a detach"
        assert all(a != "" for c in read_call_log(log) for a in c), read_call_log(log)
        v.unpublish_controller()
        d.call("DeleteVolume", volume_id=v.id)
        assert json_files(os.path.join(d.pool, "flex")) == [], "DeleteVolume took the size record"
    finally:
        cleanup_machine(ctx.tmp)


def test_volume_name_as_the_kubelet_gives_it(ctx):
    """pvOrVolumeName and detach's <volumeName>: flexvolume.volumeName, else the PV name in the
    context, else an ephemeral volume's name in the kubelet's target path, else the volume id.
    The loop driver names its image after it and finds it again at detach."""
    need_root()
    d = flex_daemon(ctx)
    try:
        log, text = recording(ctx.tmp, "loop", os.path.join(EXAMPLES, "loop"))
        install(d.plugin_dir, LOOP, text=text)
        wait_driver(d, LOOP)
        v = AttachedVolume(ctx, d, "csi-4f2a", loop_context(ctx, **{"csi.storage.k8s.io/pv/name": "pv-data"}))
        v.publish_controller()
        assert os.path.exists(os.path.join(ctx.tmp, "images", "pv-data.img")), os.listdir(
            os.path.join(ctx.tmp, "images"))
        v.unpublish_controller()
        assert "detach\npv-data\nnode-1\n" in read_calls(log), read_calls(log)
        assert loops_under(ctx.tmp) == {}, "detach found the volume by its name"

        w = AttachedVolume(ctx, d, "csi-77b0", loop_context(
            ctx, **{"csi.storage.k8s.io/pv/name": "pv-data", "flexvolume.volumeName": "chosen"}))
        w.publish_controller()
        w.unpublish_controller()
        assert "detach\nchosen\nnode-1\n" in read_calls(log), "flexvolume.volumeName wins"

        tlog, ttext = recording(ctx.tmp, "tmpfs", os.path.join(EXAMPLES, "tmpfs"))
        install(d.plugin_dir, TMPFS, text=ttext)
        wait_driver(d, TMPFS)
        target = os.path.join(ctx.tmp, "pods", "uid-9", "volumes", "kubernetes.io~csi", "scratch", "mount")
        publish_ephemeral(d, "csi-eph-9", target, TMPFS)
        opts = json.loads([a for a in read_calls(tlog).splitlines() if a.startswith("{")][-1])
        assert opts["kubernetes.io/pvOrVolumeName"] == "scratch", opts
        d.call("NodeUnpublishVolume", volume_id="csi-eph-9", target_path=target)
    finally:
        cleanup_machine(ctx.tmp)


def test_getvolumename_goes_first_as_with_the_kubelet(ctx):
    """The kubelet calls getvolumename before attach (and a failure stops it): a driver that
    checks its options there, and registers the volume for attach, works; a bad volume is
    refused with the driver's message before attach runs."""
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/namedvol"
    folder = install(d.plugin_dir, name, src=os.path.join(TEST_DRIVERS, "namedvol"))
    wait_driver(d, name)
    try:
        bad = AttachedVolume(ctx, d, "pv-nopool", {"flexvolume.driver": name})
        d.expect_error(grpc.StatusCode.INTERNAL, "ControllerPublishVolume", volume_id=bad.id,
                       node_id="node-1", volume_capability=cap(), volume_context=bad.context,
                       match="getvolumename: no pool in the options")
        assert not os.path.exists(os.path.join(folder, ".names"))
        v = AttachedVolume(ctx, d, "pv-named", {"flexvolume.driver": name, "pool": "fast"})
        v.publish_controller()
        with open(os.path.join(folder, ".names")) as f:
            assert "fast-pv-named" in f.read().split()
        v.stage()
        v.unstage()
        v.unpublish_controller()
        assert json_files(os.path.join(d.pool, "flex")) == []
    finally:
        cleanup_machine(ctx.tmp)


def test_waitforattach_device_as_the_kubelet_passes_it(ctx):
    """waitforattach gets the device attach named, "" when none; mountdevice gets the device
    waitforattach named, "" when it named none (volplug no longer puts attach's back)."""
    need_root()
    d = flex_daemon(ctx)
    name = "volplug.test/nodevice"
    folder = install(d.plugin_dir, name, src=os.path.join(TEST_DRIVERS, "nodevice"))
    log = os.path.join(folder, ".calls")
    wait_driver(d, name)
    try:
        for vid, device in (("pv-dev", "/dev/zero"), ("pv-nodev", "")):
            ctx_ = {"flexvolume.driver": name}
            if device:
                ctx_["device"] = device
            v = AttachedVolume(ctx, d, vid, ctx_)
            v.publish_controller()
            assert (v.device or "") == device, v.device
            v.stage()
            w = calls_of(log, "waitforattach")[-1]
            m = calls_of(log, "mountdevice")[-1]
            assert w[1] == device and json.loads(w[2])["kubernetes.io/pvOrVolumeName"] == vid, w
            assert m[1:3] == [v.staging, ""], m
            assert mount_at(v.staging)["source"] == "nodevice"
            v.unstage()
            v.unpublish_controller()
    finally:
        cleanup_machine(ctx.tmp)


def test_a_full_lifecycle_leaves_no_record(ctx):
    """Records go with the last detach, unpublish and unstage: after attachable, non-attachable
    and ephemeral volumes came and went, none is left and pool check finds nothing; one left by
    a daemon killed before its unpublish finished is reported."""
    need_root()
    d = flex_daemon(ctx)
    try:
        install(d.plugin_dir, LOOP, src=os.path.join(EXAMPLES, "loop"))
        install(d.plugin_dir, TMPFS, src=os.path.join(EXAMPLES, "tmpfs"))
        wait_driver(d, LOOP)
        wait_driver(d, TMPFS)
        for v in (AttachedVolume(ctx, d, "pv-a", loop_context(ctx)),
                  AttachedVolume(ctx, d, "pv-b", {"flexvolume.driver": TMPFS})):
            v.publish_controller()
            v.stage()
            v.publish(1)
            v.publish(2)
            assert json_files(os.path.join(d.pool, "flex")), "recorded while in use"
            v.unpublish(1)
            v.unpublish(2)
            v.unstage()
            v.unpublish_controller()
        t = os.path.join(ctx.tmp, "pods", "eph")
        publish_ephemeral(d, "csi-eph", t, TMPFS)
        d.call("NodeUnpublishVolume", volume_id="csi-eph", target_path=t)
        assert json_files(os.path.join(d.pool, "flex")) == [], json_files(os.path.join(d.pool, "flex"))
        rc, out = pool_check(d)
        assert rc == 0 and out.startswith("0 MiB provisioned, 0 MiB allocated; ") and \
            out.endswith("\n0 volumes, 0 snapshots, 0 Flexvolume records, 0 problems\n"), out

        # Published, then the daemon dies and the mount goes without it (a reboot, the kubelet
        # cleaning up): the record is left, and pool check says so.
        publish_ephemeral(d, "csi-orphan", t, TMPFS)
        d.kill9()
        subprocess.run(["umount", t], check=True)
        os.rmdir(t)
        rc, out = pool_check(d)
        assert rc == 1 and "volume csi-orphan: %s is gone: left behind" % t in out, out
        assert out.endswith("0 volumes, 0 snapshots, 1 Flexvolume records, 1 problems\n"), out
    finally:
        cleanup_machine(ctx.tmp)


def test_flexvolume_off_and_unusable_dir(ctx):
    d = ctx.daemon(args=["--flexvolume-dir", ""], name="off")
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "ListFlexDrivers", match="off")
    d.expect_error(grpc.StatusCode.FAILED_PRECONDITION, "NodePublishVolume", volume_id="v",
                   target_path=os.path.join(ctx.tmp, "t"), volume_capability=cap(),
                   volume_context={"flexvolume.driver": TMPFS}, match=TMPFS)
    assert d.call("GetPluginInfo").name
    d.stop()
    bad = ctx.daemon(args=["--flexvolume-dir", "/proc/volplug-no-such-dir"], name="bad")
    assert "cannot watch it" in bad.logs(), bad.logs()
    assert bad.call("GetPluginInfo").name, "the daemon serves without Flexvolume"


def mkfs_child(d, fstype):
    """The pid of the mkfs.<fstype> volplugd runs now, or None (its children only: fast)."""
    for children in glob.glob("/proc/%d/task/*/children" % d.proc.pid):
        try:
            with open(children) as f:
                pids = [int(p) for p in f.read().split()]
        except OSError:
            continue
        for pid in pids:
            p = process(pid)
            if p and p["args"] and os.path.basename(p["args"][0]) == "mkfs." + fstype:
                return pid
    return None


def test_fallback_mkfs_killed_never_wedges(ctx):
    """volplugd SIGKILLed while the mountdevice fallback's mkfs.xfs runs, at points spread over
    it: mkfs.xfs may leave a superblock blkid knows that the kernel refuses ("Structure needs
    cleaning"). The retried NodeStageVolume makes such a filesystem again (the staged record
    holds the mark of the mkfs) and mounts a whole xfs every time; one finished is kept."""
    need_root()
    points = 16
    d = flex_daemon(ctx, name="d0")
    pool, plugin_dir = d.pool, d.plugin_dir
    nsdev = "volplug.test/nsdev"
    install(plugin_dir, nsdev, text=wrapper(
        'case "$1" in mountdevice|unmountdevice) echo \'{"status":"Not supported"}\' ;;\n'
        '*) exec "%s" "$@" ;; esac\n' % os.path.join(EXAMPLES, "loop")))
    wait_driver(d, nsdev)

    def restart(i):
        n = ctx.daemon(args=["--flexvolume-dir", plugin_dir], pool=pool, name="d%d" % i)
        n.plugin_dir = plugin_dir
        wait_driver(n, nsdev)
        return n

    def volume(vid):
        v = AttachedVolume(ctx, d, vid, loop_context(ctx, driver=nsdev, size="16G"), fs="xfs")
        v.publish_controller()
        return v

    def wait_mkfs(stage_thread):
        """The mkfs.xfs volplugd runs for the stage in stage_thread, or None when that stage
        ended first (a mkfs of a few milliseconds can run between two looks)."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            pid = mkfs_child(d, "xfs")
            if pid:
                return pid
            if not stage_thread.is_alive():
                return None
        raise AssertionError("volplugd never ran mkfs.xfs")

    failures, half_made, made_again = [], 0, 0
    try:
        # How long mkfs.xfs runs here: the kill points spread over that and a little past it.
        v = volume("timing")
        t, res = in_background(v.stage)
        start = time.monotonic()
        pid = wait_mkfs(t)
        if pid is not None:
            start = time.monotonic()
            wait_for(lambda: process(pid) is None, timeout=60, what="mkfs to end")
        duration = time.monotonic() - start
        t.join(60)
        assert "value" in res, res
        v.unstage()
        v.unpublish_controller()
        for i in range(points):
            v = volume("kill-%d" % i)
            t, res = in_background(v.stage)
            wait_mkfs(t)  # None: the kill falls after mkfs, a point as good
            time.sleep(duration * 1.2 * i / points)
            d.proc.kill()
            assert d.proc.wait(10) == -9, d.proc.returncode
            t.join(30)
            left = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", v.device],
                                  capture_output=True, text=True).stdout.strip()
            d = v.d = restart(i + 1)
            try:
                v.stage()
            except grpc.RpcError as e:
                failures.append("kill %d (blkid: %r): %s: %s" % (i, left, e.code().name,
                                                                 e.details()))
                continue
            half_made += left == "xfs"
            made_again += "an interrupted mkfs left" in d.logs()
            m = mount_at(v.staging)
            assert m and m["fstype"] == "xfs" and m["source"] == v.device, m
            with open(os.path.join(v.staging, "kept"), "w") as f:
                f.write(str(i))
            v.unstage()
            os.makedirs(v.staging)
            v.stage()  # finished: mounted as it is, never made again
            with open(os.path.join(v.staging, "kept")) as f:
                assert f.read() == str(i), "a finished filesystem is never reformatted"
            v.unstage()
            v.unpublish_controller()
        assert not failures, "%d of %d retried stages failed:\n%s" % (
            len(failures), points, "\n".join(failures))
        return "%d kill points over %.0f ms of mkfs.xfs: %d left an xfs signature, %d made " \
            "again" % (points, duration * 1000, half_made, made_again)
    finally:
        cleanup_machine(ctx.tmp)


def test_fallback_half_made_xfs_is_made_again(ctx):
    """volplugd killed right after the mountdevice fallback's mkfs.xfs, before its mark says
    done, and the superblock left as a killed mkfs.xfs leaves it (still flagged "in progress":
    blkid knows it, the kernel refuses it): the next NodeStageVolume makes it again and mounts
    it; the filesystem then finished is kept."""
    need_root()
    d = flex_daemon(ctx, name="d0", env={"VOLPLUG_FAILPOINTS": "node-stage-after-mkfs=crash"})
    nsdev = "volplug.test/nsdev"
    install(d.plugin_dir, nsdev, text=wrapper(
        'case "$1" in mountdevice|unmountdevice) echo \'{"status":"Not supported"}\' ;;\n'
        '*) exec "%s" "$@" ;; esac\n' % os.path.join(EXAMPLES, "loop")))
    wait_driver(d, nsdev)
    try:
        v = AttachedVolume(ctx, d, "half", loop_context(ctx, driver=nsdev, size="1G"), fs="xfs")
        v.publish_controller()
        try:
            v.stage()
        except grpc.RpcError:
            pass
        assert d.proc.wait(10) == -9, "killed by its failpoint after mkfs"
        subprocess.run(["xfs_db", "-x", "-c", "sb 0", "-c", "write -d inprogress 1", v.device],
                       capture_output=True, check=True)
        p = subprocess.run(["blkid", "-p", "-o", "value", "-s", "TYPE", v.device],
                           capture_output=True, text=True)
        assert p.stdout.strip() == "xfs", p.stdout
        v.d = d = ctx.daemon(args=["--flexvolume-dir", d.plugin_dir], pool=d.pool, name="d1")
        wait_driver(d, nsdev)
        v.stage()
        assert "an interrupted mkfs left" in d.logs(), d.logs()
        m = mount_at(v.staging)
        assert m and m["fstype"] == "xfs" and m["source"] == v.device, m
        with open(os.path.join(v.staging, "kept"), "w") as f:
            f.write("1")
        v.unstage()
        os.makedirs(v.staging)
        v.stage()
        assert os.path.exists(os.path.join(v.staging, "kept")), "finished: never made again"
        v.unstage()
        v.unpublish_controller()
        assert loops_under(ctx.tmp) == {}
    finally:
        cleanup_machine(ctx.tmp)


if __name__ == "__main__":
    run([test_drivers_appear_and_tmpfs_volume_mounts, test_loop_driver_attach_stage_publish_and_back,
         test_upgrade_between_attachable_and_not_while_mounted, test_broken_and_removed_drivers,
         test_hanging_driver_meets_its_deadline, test_what_a_crashed_daemon_left_is_killed_at_restart,
         test_garbage_answers_give_an_excerpt,
         test_secrets_never_reach_the_log, test_secrets_in_any_form_never_reach_the_log,
         test_not_supported_fallbacks, test_fs_group_and_read_only,
         test_expansion_calls, test_drivers_get_volplugds_environment,
         test_node_expand_without_expandfs_asks_the_device,
         test_expand_arguments_reach_a_dollar_star_driver_in_place,
         test_volume_name_as_the_kubelet_gives_it, test_getvolumename_goes_first_as_with_the_kubelet,
         test_waitforattach_device_as_the_kubelet_passes_it, test_a_full_lifecycle_leaves_no_record,
         test_flexvolume_off_and_unusable_dir, test_fallback_mkfs_killed_never_wedges,
         test_fallback_half_made_xfs_is_made_again])
