# SPDX-License-Identifier: Apache-2.0
"""What an operator sees of a running volplugd: /metrics after a scripted lifecycle (every
counter moved by exactly what was done), /healthz, the endpoint under 1,000 concurrent scrapes
and garbage HTTP while CSI calls go on, the log (-v levels, JSON, secrets never in it, a lasting
problem logged once), volplugctl status, and docs/metrics.md naming every series."""

import json
import mmap
import os
import re
import resource
import selectors
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import grpc

from harness import SOURCE_ROOT, VOLPLUGCTL, VOLPLUGD, Skip, is_root, run, wait_for

MiB = 1 << 20
ADDR = ["--metrics-address", "127.0.0.1:0"]
EXAMPLES = os.path.join(SOURCE_ROOT, "examples", "flexvolume")
TEST_DRIVERS = os.path.join(SOURCE_ROOT, "tests", "flex-drivers")
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def address(d):
    """Where the daemon serves /metrics, from its log."""
    m = wait_for(lambda: re.search(r"metrics on http://(\S+)/metrics", d.logs()), what="metrics address")
    return m.group(1)


def get(d, path, timeout=10):
    """(status, body) of GET path."""
    try:
        with urllib.request.urlopen("http://%s%s" % (address(d), path), timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def parse(text):
    """{(name, ((label, value), ...)): value} for every sample; checks the text's shape."""
    samples, typed = {}, set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            typed.add(line.split()[2])
            continue
        if line.startswith("#"):
            assert line.startswith("# HELP "), line
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        labels = tuple(sorted(LABEL.findall(m.group(2) or "")))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples, typed


def scrape(d, fresh=False):
    """The samples; fresh: after the collected gauges' second of reuse (metrics.h) is over."""
    if fresh:
        time.sleep(1.1)
    status, body = get(d, "/metrics")
    assert status == 200, (status, body)
    return parse(body)[0]


def value(samples, name, **labels):
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def calls(samples, method, code="OK"):
    return value(samples, "volplug_csi_operation_duration_seconds_count", method=method, code=code)


def secrets(method):
    return {"password": "SECRET-%s-do-not-log" % method, "token": "tok-%s-hidden" % method}


def mount_cap(group=None):
    m = {"fs_type": "ext4"}
    if group is not None:
        m["volume_mount_group"] = group
    return {"mount": m, "access_mode": {"mode": "SINGLE_NODE_WRITER"}}


def concurrently(*fns):
    """Runs the functions at once; returns what each returned or the gRPC code it failed with."""
    barrier, out = threading.Barrier(len(fns)), [None] * len(fns)

    def one(i, fn):
        barrier.wait()
        try:
            out[i] = fn()
        except grpc.RpcError as e:
            out[i] = e.code()

    threads = [threading.Thread(target=one, args=(i, fn)) for i, fn in enumerate(fns)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


def umount_below(tmp):
    for _ in range(5):
        with open("/proc/self/mountinfo") as f:
            mine = [line.split()[4] for line in f if line.split()[4].startswith(tmp + "/")]
        for target in sorted(mine, key=len, reverse=True):
            os.system("umount -l '%s' 2>/dev/null" % target)
        if not mine:
            return


def test_lifecycle_moves_counters_exactly(ctx):
    """Every CSI call of a volume's life once (secrets in each that takes them), a call that
    fails, an in-flight conflict, a coalesced expand+modify and a conflicting expand: the
    counters move by exactly that; the gauges follow the volume; no secret reaches the log."""
    if not is_root():
        raise Skip("needs root (loop devices, mkfs, mount)")
    # A capacity below the filesystem's free bytes: the pool's limit is the smaller of the two,
    # and what mkfs and other tests write moves the free bytes.
    d = ctx.daemon(args=ADDR + ["-v", "5", "--modify-coalesce-window", "500ms", "--pool-capacity", "1G"],
                   env={"VOLPLUG_FAILPOINTS": "node-stage-after-attach=sleep(700ms)"})
    before = scrape(d)
    stage, target = os.path.join(ctx.tmp, "stage"), os.path.join(ctx.tmp, "pod", "vol")
    os.makedirs(stage)
    os.makedirs(os.path.dirname(target))
    try:
        v = d.call("CreateVolume", name="pvc-metrics", capacity_range={"required_bytes": 64 * MiB},
                   volume_capabilities=[mount_cap()], parameters={"type": "gp3"},
                   secrets=secrets("CreateVolume")).volume.volume_id
        d.call("ValidateVolumeCapabilities", volume_id=v, volume_capabilities=[mount_cap()],
               secrets=secrets("ValidateVolumeCapabilities"))
        grow, modify = concurrently(
            lambda: d.call("ControllerExpandVolume", volume_id=v, capacity_range={"required_bytes": 96 * MiB},
                           secrets=secrets("ControllerExpandVolume")),
            lambda: d.call("ControllerModifyVolume", volume_id=v, mutable_parameters={"tagSpecification_1": "team=metrics"},
                           secrets=secrets("ControllerModifyVolume")))
        assert not isinstance(grow, grpc.StatusCode) and not isinstance(modify, grpc.StatusCode), (grow, modify)
        a, b = concurrently(
            lambda: d.call("ControllerExpandVolume", volume_id=v, capacity_range={"required_bytes": 128 * MiB}),
            lambda: d.call("ControllerExpandVolume", volume_id=v, capacity_range={"required_bytes": 160 * MiB}))
        assert sorted(str(x) for x in (isinstance(a, grpc.StatusCode), isinstance(b, grpc.StatusCode))) == ["False", "True"], (a, b)
        aborted_expand = a if isinstance(a, grpc.StatusCode) else b
        assert aborted_expand == grpc.StatusCode.ABORTED, (a, b)
        pc = d.call("ControllerPublishVolume", volume_id=v, node_id="node-1",
                    volume_capability=mount_cap(),
                    secrets=secrets("ControllerPublishVolume")).publish_context
        stage_req = dict(volume_id=v, staging_target_path=stage, volume_capability=mount_cap(),
                         publish_context=dict(pc), secrets=secrets("NodeStageVolume"))
        # The second stage comes while the first holds the volume: ABORTED.
        first, second = concurrently(lambda: d.call("NodeStageVolume", **stage_req),
                                     lambda: (time.sleep(0.3), d.call("NodeStageVolume", **stage_req))[1])
        assert second == grpc.StatusCode.ABORTED and first is not None and not isinstance(first, grpc.StatusCode), (first, second)
        d.call("NodePublishVolume", volume_id=v, staging_target_path=stage, target_path=target,
               volume_capability=mount_cap(group="2000"), publish_context=dict(pc),
               secrets=secrets("NodePublishVolume"))
        middle = scrape(d, fresh=True)
        assert value(middle, "volplug_node_volumes_staged") == value(before, "volplug_node_volumes_staged") + 1
        assert value(middle, "volplug_node_volumes_published") == value(before, "volplug_node_volumes_published") + 1
        assert value(middle, "volplug_pool_loop_devices") == value(before, "volplug_pool_loop_devices") + 1
        assert value(middle, "volplug_pool_volumes") == value(before, "volplug_pool_volumes") + 1
        size = d.call("ControllerGetVolume", volume_id=v).volume.capacity_bytes
        assert size in (128 * MiB, 160 * MiB), size
        assert value(middle, "volplug_pool_provisioned_bytes") == value(before, "volplug_pool_provisioned_bytes") + size
        assert value(middle, "volplug_pool_available_bytes") == value(before, "volplug_pool_available_bytes") - size
        assert value(middle, "volplug_pool_capacity_bytes") == value(before, "volplug_pool_capacity_bytes") == 1 << 30

        d.call("NodeGetVolumeStats", volume_id=v, volume_path=target)
        # Grown before it was staged: the stage grew it, this finds nothing left to do.
        d.call("NodeExpandVolume", volume_id=v, volume_path=target, secrets=secrets("NodeExpandVolume"))
        s = d.call("CreateSnapshot", name="snap-metrics", source_volume_id=v,
                   secrets=secrets("CreateSnapshot")).snapshot.snapshot_id
        d.call("ListSnapshots", secrets=secrets("ListSnapshots"))
        d.call("DeleteSnapshot", snapshot_id=s, secrets=secrets("DeleteSnapshot"))
        g = d.call("CreateVolumeGroupSnapshot", name="group-metrics", source_volume_ids=[v],
                   secrets=secrets("CreateVolumeGroupSnapshot")).group_snapshot
        members = [m.snapshot_id for m in g.snapshots]
        d.call("GetVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id, snapshot_ids=members,
               secrets=secrets("GetVolumeGroupSnapshot"))
        d.call("DeleteVolumeGroupSnapshot", group_snapshot_id=g.group_snapshot_id, snapshot_ids=members,
               secrets=secrets("DeleteVolumeGroupSnapshot"))
        d.call("NodeUnpublishVolume", volume_id=v, target_path=target)
        d.call("NodeUnstageVolume", volume_id=v, staging_target_path=stage)
        d.call("ControllerUnpublishVolume", volume_id=v, node_id="node-1",
               secrets=secrets("ControllerUnpublishVolume"))
        d.call("DeleteVolume", volume_id=v, secrets=secrets("DeleteVolume"))
        d.expect_error(grpc.StatusCode.NOT_FOUND, "NodeStageVolume", volume_id=v,
                       staging_target_path=stage, volume_capability=mount_cap(),
                       secrets=secrets("NodeStageVolume-failing"))
    finally:
        umount_below(ctx.tmp)
    after = scrape(d, fresh=True)

    once = ["CreateVolume", "ValidateVolumeCapabilities", "ControllerPublishVolume",
            "NodeStageVolume", "NodePublishVolume", "NodeGetVolumeStats", "ControllerModifyVolume",
            "ControllerGetVolume", "CreateVolumeGroupSnapshot", "GetVolumeGroupSnapshot",
            "DeleteVolumeGroupSnapshot",
            "NodeExpandVolume", "CreateSnapshot", "ListSnapshots", "DeleteSnapshot",
            "NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume", "DeleteVolume"]
    for method in once:
        assert calls(after, method) - calls(before, method) == 1, (method, calls(after, method))
    assert calls(after, "ControllerExpandVolume") - calls(before, "ControllerExpandVolume") == 2
    assert calls(after, "ControllerExpandVolume", "ABORTED") - calls(before, "ControllerExpandVolume", "ABORTED") == 1
    assert calls(after, "NodeStageVolume", "ABORTED") - calls(before, "NodeStageVolume", "ABORTED") == 1
    assert calls(after, "NodeStageVolume", "NOT_FOUND") - calls(before, "NodeStageVolume", "NOT_FOUND") == 1
    moved = {k for k in after if k[0] == "volplug_csi_operation_duration_seconds_count" and after[k] != before.get(k, 0)}
    assert len(moved) == len(once) + 4, sorted(moved)  # nothing else was counted

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("volplug_csi_in_flight_conflicts_total", key="node") == 1
    assert delta("volplug_csi_coalesced_changes_total") == 2, "expand+modify, and the expand that won"
    assert delta("volplug_csi_coalesced_requests_total") == 1, "the one that joined"
    assert delta("volplug_csi_coalesce_conflicts_total") == 1
    assert delta("volplug_fsgroup_walk_duration_seconds_count", policy="OnRootMismatch") == 1
    assert delta("volplug_fsgroup_walk_entries_total", result="examined") >= 2
    assert delta("volplug_fsgroup_walk_entries_total", result="failed") == 0
    assert all(v == 0 for k, v in after.items() if k[0] == "volplug_csi_operations_in_flight"), after
    for gauge in ("volplug_pool_volumes", "volplug_pool_snapshots", "volplug_pool_provisioned_bytes",
                  "volplug_node_volumes_staged", "volplug_node_volumes_published", "volplug_pool_loop_devices"):
        assert value(after, gauge) == value(before, gauge), (gauge, value(before, gauge), value(after, gauge))
    h = [k for k in after if k[0] == "volplug_csi_operation_duration_seconds_bucket" and ("method", "CreateVolume") in k[1]]
    assert value(after, "volplug_csi_operation_duration_seconds_bucket", method="CreateVolume", code="OK", le="+Inf") == 1 and len(h) > 10

    logs = d.logs()
    assert "SECRET-" not in logs and "tok-" not in logs, "a secret reached the log"
    with_secrets = 18  # the calls above that carry secrets, the refused ones included
    assert logs.count('"secrets":"***stripped***"') == with_secrets, \
        "-v 5 logged each request, its secrets stripped: %d" % logs.count("***stripped***")
    assert re.search(r"\[NodeStageVolume volume_id=%s\] .*staged" % v, logs), "lines name the method and volume"
    return "%d calls counted" % (sum(after[k] - before.get(k, 0) for k in moved))


def test_storm_of_scrapes_and_garbage(ctx):
    """1,000 concurrent scrapes and garbage HTTP (binary junk, a 1 MiB header, a body, a
    request never finished) do not crash the daemon, and CSI calls made during the storm
    succeed promptly."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    d = ctx.daemon(args=ADDR)
    host, port = address(d).rsplit(":", 1)
    port = int(port)

    junk = [b"\x00\xff\x16\x03\x01garbage\r\n\r\n", b"GET /" + b"a" * (1 << 20) + b" HTTP/1.1\r\n\r\n",
            b"GET /metrics HTTP/1.1\r\nX: " + b"b" * (1 << 20) + b"\r\n\r\n",
            b"POST /metrics HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n" + b"c" * 65536,
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n",  # never finished
            b"BREW /healthz HTCPCP/1.0\r\n\r\n", b"GET /../../etc/passwd HTTP/1.1\r\n\r\n"]
    socks, answered, csi_times = [], [], []
    request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

    def csi_during_storm():
        for i in range(5):
            t = time.monotonic()
            d.call("CreateVolume", name="storm-%d" % i, capacity_range={"required_bytes": MiB},
                   volume_capabilities=[mount_cap()], timeout=20)
            assert d.call("GetPluginInfo", timeout=20).name == "test.volplug.io"
            csi_times.append(time.monotonic() - t)

    for j in junk * 5:
        s = socket.create_connection((host, port), timeout=5)
        try:
            s.sendall(j)
        except OSError:
            pass  # refused mid-way: fine
        socks.append(s)
    for _ in range(1000):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((host, port))
        socks.append(s)
    csi = threading.Thread(target=csi_during_storm)
    csi.start()
    pending = {s: b"" for s in socks[len(junk) * 5:]}
    sel = selectors.DefaultSelector()
    for s in pending:
        sel.register(s, selectors.EVENT_WRITE)
    deadline = time.monotonic() + 60
    while pending and time.monotonic() < deadline:
        for key, events in sel.select(0.1):
            s = key.fileobj
            try:
                if events & selectors.EVENT_WRITE:
                    s.send(request)
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                chunk = s.recv(65536)
            except OSError:
                chunk = b""
            if chunk:
                pending[s] += chunk
                continue
            answered.append(pending.pop(s))
            sel.unregister(s)
            s.close()
    csi.join(60)
    for s in socks:
        s.close()
    ok = [a for a in answered if a.startswith(b"HTTP/1.1 200")]
    assert len(ok) >= 100, "most scrapes are served (%d of 1000; %d still pending)" % (len(ok), len(pending))
    for a in ok:
        assert b"# TYPE volplug_csi_operation_duration_seconds histogram" in a, a[:200]
    assert len(csi_times) == 5 and max(csi_times) < 5, "CSI went on during the storm: %s" % csi_times
    assert d.proc.poll() is None, "volplugd survived"
    status, body = get(d, "/healthz")
    assert status == 200 and body == "ok\n", (status, body)
    samples = scrape(d)
    assert calls(samples, "CreateVolume") == 5
    return "%d of 1000 scrapes answered 200, CSI calls in %.0f ms at most" % (len(ok), 1000 * max(csi_times))


def test_healthz_and_probe_follow_the_pool(ctx):
    """/healthz is Probe's readiness; a lasting problem is logged once however often it is
    probed; the endpoint refuses what it does not serve."""
    d = ctx.daemon(args=ADDR)
    assert get(d, "/healthz") == (200, "ok\n")
    assert get(d, "/nope")[0] == 404
    req = urllib.request.Request("http://%s/metrics" % address(d), data=b"x=1", method="POST")
    try:
        urllib.request.urlopen(req, timeout=5)
        raise AssertionError("POST accepted")
    except urllib.error.HTTPError as e:
        assert e.code == 405 and e.headers["Allow"] == "GET, HEAD", e
    shutil.rmtree(d.pool)
    status, body = get(d, "/healthz")
    assert status == 503 and body.startswith("not ready: pool ") and "not usable" in body, (status, body)
    for _ in range(20):
        assert d.call("Probe").ready.value is False
    lines = d.logs().splitlines()
    assert len([l for l in lines if "not ready:" in l]) == 1, "20 Probes, one warning"


def test_off_by_default_and_bad_address(ctx):
    d = ctx.daemon()
    assert "metrics on" not in d.logs()
    bad = ctx.daemon(args=["--metrics-address", "127.0.0.1:notaport"], start=False, name="bad")
    bad.start(wait=False)
    assert bad.proc.wait(10) == 2
    assert "--metrics-address '127.0.0.1:notaport': want HOST:PORT" in bad.logs(), bad.logs()
    taken = ctx.daemon(args=["--metrics-address", address(ctx.daemon(args=ADDR, name="first"))],
                       start=False, name="taken")
    taken.start(wait=False)
    assert taken.proc.wait(10) == 2 and "Address already in use" in taken.logs(), taken.logs()


def mapped(d):
    """The file names the daemon maps (/proc/PID/maps)."""
    with open("/proc/%d/maps" % d.proc.pid) as f:
        return {os.path.basename(line.split()[5]) for line in f if len(line.split()) >= 6}


# Loaded when what needs them is asked for: the endpoint (libmicrohttpd, and gnutls which it
# needs), the AWS clients (libcurl, libcrypto, libexpat), the snapshot store (libzstd).
LAZY = ("libmicrohttpd.", "libgnutls.", "libcurl.", "libcrypto.", "libexpat.", "libzstd.")


def test_libraries_loaded_only_when_asked(ctx):
    """An idle pool daemon without --metrics-address maps none of LAZY; with it, the endpoint
    serves; a libmicrohttpd that cannot be loaded is named in the error, and the daemon does
    not start."""
    plain = mapped(ctx.daemon())
    lazy = {n for n in plain if n.startswith(LAZY)}
    assert lazy == set(), "mapped by an idle pool daemon: %s" % sorted(lazy)
    d = ctx.daemon(args=ADDR, name="served")
    assert get(d, "/healthz") == (200, "ok\n")
    assert any(n.startswith("libmicrohttpd.so.12") for n in mapped(d)), sorted(mapped(d))
    libdir = os.path.join(ctx.tmp, "broken-lib")
    os.mkdir(libdir)
    open(os.path.join(libdir, "libmicrohttpd.so.12"), "w").close()
    broken = ctx.daemon(args=ADDR, env={"LD_LIBRARY_PATH": libdir}, start=False, name="broken")
    broken.start(wait=False)
    assert broken.proc.wait(10) == 2, broken.logs()
    assert re.search(r"--metrics-address 127\.0\.0\.1:0: cannot load libmicrohttpd\.so\.12: "
                     r".*libmicrohttpd\.so\.12", broken.logs()), broken.logs()
    assert not os.path.exists(broken.socket), "no socket served"


def test_json_logs_and_verbosity(ctx):
    """--log-format json: every line one object with time, level, method and the object; -v 0
    keeps only warnings and errors."""
    d = ctx.daemon(args=["--log-format", "json"])
    d.call("CreateVolume", name="pvc-json", capacity_range={"required_bytes": MiB},
           volume_capabilities=[mount_cap()])
    d.expect_error(grpc.StatusCode.NOT_FOUND, "ControllerGetVolume", volume_id="vol-0000000000000000")
    records = [json.loads(line) for line in d.logs().splitlines()]
    assert records and all({"ts", "level", "msg"} <= set(r) for r in records), records
    created = [r for r in records if r.get("method") == "CreateVolume" and "created volume" in r["msg"]]
    assert created and created[0]["name"] == "pvc-json" and created[0]["level"] == "info", records
    failed = [r for r in records if r.get("method") == "ControllerGetVolume"]
    assert failed and failed[0]["volume_id"] == "vol-0000000000000000" and "NOT_FOUND" in failed[0]["msg"]

    quiet = ctx.daemon(args=["-v", "0"], name="quiet")
    quiet.call("CreateVolume", name="pvc-quiet", capacity_range={"required_bytes": MiB},
               volume_capabilities=[mount_cap()])
    assert "created volume" not in quiet.logs() and " info " not in quiet.logs(), quiet.logs()


def test_flex_drivers_and_their_calls(ctx):
    """Drivers loaded and failed, and each driver call by command and result; a driver that
    fails init is warned about once."""
    if not is_root() or not shutil.which("jq") or not shutil.which("mountpoint"):
        raise Skip("needs root and jq (the example tmpfs driver)")
    plugins = os.path.join(ctx.tmp, "plugins")
    for name, src in (("good", os.path.join(EXAMPLES, "tmpfs")), ("broken", os.path.join(TEST_DRIVERS, "initfail"))):
        os.makedirs(os.path.join(plugins, "volplug.test~" + name))
        shutil.copy(src, os.path.join(plugins, "volplug.test~" + name, name))
    d = ctx.daemon(args=ADDR + ["--flexvolume-dir", plugins])
    target = os.path.join(ctx.tmp, "pod", "v")
    os.makedirs(os.path.dirname(target))
    context = {"flexvolume.driver": "volplug.test/good", "csi.storage.k8s.io/ephemeral": "true"}
    before = scrape(d)
    try:
        d.call("NodePublishVolume", volume_id="flex-1", target_path=target,
               volume_capability={"mount": {}, "access_mode": {"mode": "SINGLE_NODE_WRITER"}},
               volume_context=context)
        d.call("NodeUnpublishVolume", volume_id="flex-1", target_path=target)
    finally:
        umount_below(ctx.tmp)
    after = wait_for(lambda: (lambda s: s if value(s, "volplug_flex_driver_loaded", driver="volplug.test/broken") == 0
                              and ("volplug_flex_driver_loaded", (("driver", "volplug.test/broken"),)) in s else None)(scrape(d)),
                     what="the drivers' gauges")
    assert value(after, "volplug_flex_driver_loaded", driver="volplug.test/good") == 1
    count = "volplug_flex_driver_call_duration_seconds_count"
    assert value(after, count, driver="volplug.test/good", command="init", result="success") == 1
    assert value(after, count, driver="volplug.test/broken", command="init", result="failure") == 1
    for command in ("mount", "unmount"):
        moved = value(after, count, driver="volplug.test/good", command=command, result="success") - \
            value(before, count, driver="volplug.test/good", command=command, result="success")
        assert moved == 1, (command, moved)
    assert len([l for l in d.logs().splitlines() if "volplug.test/broken is not usable" in l]) == 1


def write_into(d, volume_id, mib):
    """Writes mib MiB into a volume's data file, as writes in the volume land there."""
    path = os.path.join(d.pool, "volumes", volume_id.split(".")[0], "data")
    fd = os.open(path, os.O_WRONLY)
    try:
        for i in range(mib):
            os.pwrite(fd, b"\x5a" * MiB, i * 4 * MiB)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_volplugctl_status(ctx):
    """status shows the pool (provisioned and really allocated bytes), the volumes, the drivers
    and the recent problems, as text and as JSON, from the admin service (metrics endpoint or
    not)."""
    d = ctx.daemon(args=["--pool-capacity", "1G", "--flexvolume-dir", ""])
    for i in range(3):
        v = d.call("CreateVolume", name="pvc-st-%d" % i, capacity_range={"required_bytes": 100 * MiB},
                   volume_capabilities=[mount_cap()]).volume.volume_id
    write_into(d, v, 3)
    d.expect_error(grpc.StatusCode.NOT_FOUND, "ControllerPublishVolume", volume_id="vol-00000000000000aa",
                   node_id="node-1", volume_capability=mount_cap())
    s = d.ctl_json("status")
    assert s["ready"] is True and s["mode"] == "all" and s["node_id"] == "node-1", s
    p = s["pool"]
    assert p["path"] == d.pool and p["volumes"] == 3 and p["capacity_bytes"] == 1 << 30, p
    assert p["provisioned_bytes"] == 300 * MiB and p["available_bytes"] == (1 << 30) - 300 * MiB, p
    assert p["allocated_bytes"] == 3 * MiB and p["overprovision_ratio"] == 1, p
    assert s["calls"] >= 4 and s.get("calls_in_flight", 0) == 0, s
    assert s.get("flex_enabled", False) is False
    prob = s["recent_problems"][0]
    assert prob["what"] == "NOT_FOUND" and "vol-00000000000000aa" in prob["context"], prob
    text = d.ctl("status").stdout
    assert "test.volplug.io" in text and ": ready" in text, text
    assert "300.0 MiB provisioned of 1.0 GiB, 3.0 MiB allocated, 724.0 MiB available;" in text, text
    assert "3 volumes, 0 snapshots" in text, text
    assert "Flexvolume drivers: off" in text, text
    assert "NOT_FOUND  ControllerPublishVolume volume_id=vol-00000000000000aa:" in text, text


IO_SERIES = ["volplug_volume_reads_total", "volplug_volume_read_bytes_total",
             "volplug_volume_read_seconds_total", "volplug_volume_writes_total",
             "volplug_volume_written_bytes_total", "volplug_volume_write_seconds_total",
             "volplug_volume_io_busy_seconds_total", "volplug_volume_io_in_flight"]


def volume_series(samples, volume_id):
    """{name: value} of every sample labelled with volume_id."""
    return {name: v for (name, labels), v in samples.items() if ("volume_id", volume_id) in labels}


def test_volume_io(ctx):
    """A volume staged here has its loop device's I/O counters as series labelled by its id, and
    a line in volplugctl status: 8 MiB written and read with O_DIRECT through its filesystem move
    them by at least that. Unstaged, its series are gone."""
    if not is_root():
        raise Skip("needs root (loop devices, mkfs, mount)")
    d = ctx.daemon(args=ADDR + ["--flexvolume-dir", ""])
    stage = os.path.join(ctx.tmp, "stage-io")
    os.makedirs(stage)
    size = 8 * MiB
    try:
        v = d.call("CreateVolume", name="pvc-io", capacity_range={"required_bytes": 64 * MiB},
                   volume_capabilities=[mount_cap()]).volume.volume_id
        other = d.call("CreateVolume", name="pvc-io-idle", capacity_range={"required_bytes": 64 * MiB},
                       volume_capabilities=[mount_cap()]).volume.volume_id
        pc = d.call("ControllerPublishVolume", volume_id=v, node_id="node-1",
                    volume_capability=mount_cap()).publish_context
        d.call("NodeStageVolume", volume_id=v, staging_target_path=stage,
               volume_capability=mount_cap(), publish_context=dict(pc))
        before = scrape(d, fresh=True)
        mine = volume_series(before, v)
        assert sorted(mine) == sorted(IO_SERIES + ["volplug_volume_device_info"]), mine
        assert volume_series(before, other) == {}, "an unstaged volume has no series"
        dev = [dict(labels)["device"] for (name, labels) in before
               if name == "volplug_volume_device_info" and ("volume_id", v) in labels]
        assert len(dev) == 1 and dev[0].startswith("/dev/loop"), dev

        buf = mmap.mmap(-1, MiB)
        buf.write(os.urandom(MiB))
        path = os.path.join(stage, "direct")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_DIRECT, 0o644)
        try:
            for off in range(0, size, MiB):
                assert os.pwritev(fd, [buf], off) == MiB
            os.fsync(fd)
            for off in range(0, size, MiB):
                assert os.preadv(fd, [buf], off) == MiB
        finally:
            os.close(fd)

        after = volume_series(scrape(d, fresh=True), v)
        moved = {n: after[n] - mine[n] for n in IO_SERIES}
        assert moved["volplug_volume_written_bytes_total"] >= size, moved
        assert moved["volplug_volume_read_bytes_total"] >= size, moved
        assert moved["volplug_volume_writes_total"] >= 1 and moved["volplug_volume_reads_total"] >= 1, moved
        assert after["volplug_volume_io_busy_seconds_total"] > 0, after

        st = d.ctl_json("status")
        vols = st.get("staged_volumes", [])
        assert [x["volume_id"] for x in vols] == [v], vols
        io = vols[0]
        assert io["device"] == dev[0], io
        assert int(io["written_bytes"]) >= after["volplug_volume_written_bytes_total"] >= size, io
        assert int(io["read_bytes"]) >= size and int(io["writes"]) >= 1 and int(io["reads"]) >= 1, io
        assert int(io["busy_ms"]) > 0, io
        text = d.ctl("status").stdout
        assert re.search(r"^  %s  %s  read \d+\.\d MiB in \d+ ops, written \d+\.\d MiB in \d+ ops, "
                         r"busy \d+\.\d{3} s, \d+ in flight$" % (re.escape(v), re.escape(dev[0])),
                         text, re.M), text

        # A restart finds the volume staged: its series count again from what the new process
        # first saw, and go on counting.
        d.stop()
        d = ctx.daemon(args=ADDR + ["--flexvolume-dir", ""], pool=d.pool, name="restarted")
        again = volume_series(scrape(d), v)
        assert again["volplug_volume_written_bytes_total"] < size, again
        fd = os.open(path, os.O_RDWR | os.O_DIRECT)
        try:
            for off in range(0, size, MiB):
                assert os.pwritev(fd, [buf], off) == MiB
            os.fsync(fd)
        finally:
            os.close(fd)
        later = volume_series(scrape(d, fresh=True), v)
        assert later["volplug_volume_written_bytes_total"] - again["volplug_volume_written_bytes_total"] >= size, (again, later)

        d.call("NodeUnstageVolume", volume_id=v, staging_target_path=stage)
        gone = scrape(d, fresh=True)
        assert volume_series(gone, v) == {}, "unstaged: its series are gone"
        assert not any(name.startswith("volplug_volume_") for (name, _) in gone), gone
        assert d.ctl_json("status").get("staged_volumes", []) == []
        assert "staged volumes" not in d.ctl("status").stdout
        d.call("ControllerUnpublishVolume", volume_id=v, node_id="node-1")
        d.call("DeleteVolume", volume_id=v)
        d.call("DeleteVolume", volume_id=other)
    finally:
        umount_below(ctx.tmp)
    return "%d bytes written, %d read" % (moved["volplug_volume_written_bytes_total"],
                                          moved["volplug_volume_read_bytes_total"])


def test_thin_pool_gauges_and_status(ctx):
    """With --overprovision-ratio 2.5 more than the capacity is provisioned: the gauges and
    status say so, the limit spelled out. The same pool opened again without thin provisioning
    has more provisioned than it may: 0 available, never a figure wrapped below zero."""
    d = ctx.daemon(args=ADDR + ["--pool-capacity", "1G", "--overprovision-ratio", "2.5"])
    for i in range(3):
        v = d.call("CreateVolume", name="pvc-thin-%d" % i, capacity_range={"required_bytes": 600 * MiB},
                   volume_capabilities=[mount_cap()]).volume.volume_id
    write_into(d, v, 2)
    s = scrape(d, fresh=True)
    assert value(s, "volplug_pool_capacity_bytes") == 1 << 30
    assert value(s, "volplug_pool_overprovision_ratio") == 2.5
    assert value(s, "volplug_pool_provisioned_bytes") == 1800 * MiB
    assert value(s, "volplug_pool_allocated_bytes") == 2 * MiB
    assert value(s, "volplug_pool_available_bytes") == 2560 * MiB - 1800 * MiB
    text = d.ctl("status").stdout
    assert ("1.8 GiB provisioned of 2.5 GiB (1.0 GiB x overprovision ratio 2.5), 2.0 MiB allocated, "
            "760.0 MiB available;") in text, text
    assert d.ctl_json("status")["pool"]["overprovision_ratio"] == 2.5

    d.stop()
    d = ctx.daemon(args=ADDR + ["--pool-capacity", "1G"], pool=d.pool, name="thick")
    s = scrape(d)
    assert value(s, "volplug_pool_provisioned_bytes") == 1800 * MiB
    assert value(s, "volplug_pool_capacity_bytes") == 1 << 30
    assert value(s, "volplug_pool_available_bytes") == 0, "not below zero"
    assert value(s, "volplug_pool_overprovision_ratio") == 1
    p = d.ctl_json("status")["pool"]
    assert p["provisioned_bytes"] == 1800 * MiB and p.get("available_bytes", 0) == 0, p
    text = d.ctl("status").stdout
    assert "1.8 GiB provisioned of 1.0 GiB, 2.0 MiB allocated, 0 B available;" in text, text
    d.expect_error(grpc.StatusCode.RESOURCE_EXHAUSTED, "CreateVolume", name="pvc-more",
                   capacity_range={"required_bytes": MiB}, volume_capabilities=[mount_cap()],
                   match="1048576 bytes do not fit in the pool of node node-1 (0 bytes left): "
                         "1887436800 of 1073741824 bytes are provisioned")
    assert d.call("GetCapacity").available_capacity == 0


def test_docs_name_every_series(ctx):
    """docs/metrics.md has a row for every family the daemon exposes, and exposes what it lists
    (EC2's families appear when the EBS backend runs: the doc says so)."""
    d = ctx.daemon(args=ADDR)
    d.call("Probe")
    status, body = get(d, "/metrics")
    _, typed = parse(body)
    with open(os.path.join(SOURCE_ROOT, "docs", "metrics.md")) as f:
        documented = set(re.findall(r"^\| `(volplug_[a-z0-9_]+)`", f.read(), re.M))
    assert typed - documented == set(), "undocumented: %s" % sorted(typed - documented)
    missing = {n for n in documented - typed if not n.startswith("volplug_ec2_")}
    assert missing == set(), "documented but not exposed: %s" % sorted(missing)
    with open(os.path.join(SOURCE_ROOT, "deploy", "grafana", "volplug.json")) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    used = {re.sub(r"_(bucket|count|sum)$", "", n) for e in exprs for n in re.findall(r"volplug_[a-z0-9_]+", e)}
    assert used and used - documented == set(), "the dashboard queries unknown series: %s" % (used - documented)
    return "%d families, %d in the dashboard" % (len(typed), len(used))


def test_bench_script_runs(ctx):
    """bench/metrics.sh, shortened: both modes measured, the scraper at its rate without a
    failure, a ratio printed (its value is the benchmark's to judge, not this test's)."""
    env = dict(os.environ, ROUNDS="1", DURATION="1s", POPULATION="50",
               VOLPLUGD=os.path.abspath(VOLPLUGD), VOLPLUGCTL=os.path.abspath(VOLPLUGCTL))
    p = subprocess.run(["bash", os.path.join(SOURCE_ROOT, "bench", "metrics.sh")], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert re.search(r"^1 +\d+ +\d+ +scraper: \d+ scrapes in .* 0 failed$", p.stdout, re.M), p.stdout
    m = re.search(r"^ratio with/without: (\d+\.\d+)", p.stdout, re.M)
    assert m, p.stdout
    return "ratio %s in a 1 s round" % m.group(1)


if __name__ == "__main__":
    run([test_lifecycle_moves_counters_exactly, test_storm_of_scrapes_and_garbage,
         test_healthz_and_probe_follow_the_pool, test_off_by_default_and_bad_address,
         test_libraries_loaded_only_when_asked,
         test_json_logs_and_verbosity, test_flex_drivers_and_their_calls, test_volplugctl_status,
         test_thin_pool_gauges_and_status, test_volume_io,
         test_docs_name_every_series, test_bench_script_runs])
