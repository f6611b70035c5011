# SPDX-License-Identifier: Apache-2.0
"""volplugd as a gRPC server: Identity, dispatch, errors, concurrency, shutdown, socket rules."""

import concurrent.futures
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import threading
import time

import grpc

from harness import VOLPLUGD, Skip, in_background, run, to_dict

HOST_PLUGIN_DIR = "/usr/libexec/kubernetes/kubelet-plugins/volume/exec"


def test_plugin_info(ctx):
    d = ctx.daemon()
    info = d.call("GetPluginInfo")
    assert info.name == "test.volplug.io", info
    version = subprocess.run([VOLPLUGD, "--version"], capture_output=True, text=True).stdout.split()[1]
    assert info.vendor_version == version, (info.vendor_version, version)


def service_types(d):
    caps = to_dict(d.call("GetPluginCapabilities"))["capabilities"]
    return {c["service"]["type"] for c in caps if "service" in c}, caps


def test_capabilities_follow_the_mode(ctx):
    for mode, has_controller in (("all", True), ("controller", True), ("node", False)):
        d = ctx.daemon(mode=mode, name=mode)
        types, caps = service_types(d)
        assert ("CONTROLLER_SERVICE" in types) == has_controller, (mode, caps)
        assert "VOLUME_ACCESSIBILITY_CONSTRAINTS" in types, caps
        assert {"volume_expansion": {"type": "ONLINE"}} in caps, caps
        d.stop()


def test_probe_reflects_the_pool(ctx):
    d = ctx.daemon()
    assert d.call("Probe").ready.value is True
    shutil.rmtree(d.pool)
    assert d.call("Probe").ready.value is False
    assert "not usable" in d.logs()


def test_unknown_method_is_unimplemented(ctx):
    d = ctx.daemon()
    try:
        d.call_raw("/csi.v1.Identity/NoSuchMethod", b"")
        raise AssertionError("unknown method succeeded")
    except grpc.RpcError as e:
        assert e.code() == grpc.StatusCode.UNIMPLEMENTED, e
        assert "NoSuchMethod" in e.details(), e.details()


def test_node_mode_does_not_serve_the_controller(ctx):
    d = ctx.daemon(mode="node")
    d.expect_error(grpc.StatusCode.UNIMPLEMENTED, "CreateVolume", name="x")


def test_malformed_request_bytes(ctx):
    d = ctx.daemon()
    for garbage in (b"\xff\xff\xff\xff", b"\x0a\x80", b"\x08" + b"\xff" * 11):
        try:
            d.call_raw("/csi.v1.Identity/GetPluginInfo", garbage)
            raise AssertionError("garbage accepted: %r" % garbage)
        except grpc.RpcError as e:
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, (garbage, e.code())
            assert "not a valid csi.v1.GetPluginInfoRequest" in e.details(), e.details()
    assert d.call("Probe").ready.value, "daemon survives garbage"


def test_200_concurrent_calls(ctx):
    d = ctx.daemon(args=["--workers", "4"])
    with concurrent.futures.ThreadPoolExecutor(max_workers=200) as pool:
        futures = [pool.submit(d.call, "GetPluginInfo") for _ in range(200)]
        names = [f.result(timeout=30).name for f in futures]
    assert names == ["test.volplug.io"] * 200


def test_capabilities_answered_while_every_worker_waits(ctx):
    d = ctx.daemon(args=["--workers", "1"], env={"VOLPLUG_FAILPOINTS": "rpc:Probe=sleep(3000ms)"})
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        slow = pool.submit(d.call, "Probe", timeout=20)
        time.sleep(0.4)  # the only worker now waits in Probe
        t0 = time.monotonic()
        assert d.call("GetPluginInfo", timeout=1).name == "test.volplug.io"
        assert d.call("GetPluginCapabilities", timeout=1).capabilities
        for rpc in ("ControllerGetCapabilities", "NodeGetCapabilities",
                    "GroupControllerGetCapabilities"):
            assert d.call(rpc, timeout=1).capabilities, rpc
        assert time.monotonic() - t0 < 1
        assert slow.result(timeout=20).ready.value


def test_pool_daemon_maps_no_libcurl(ctx):
    d = ctx.daemon()
    assert d.call("Probe").ready.value
    with open("/proc/%d/maps" % d.proc.pid) as f:
        curl = [line.split()[-1] for line in f if "libcurl" in line]
    assert not curl, "the pool backend mapped %s" % curl[0]


def test_sigterm_lets_a_slow_call_finish(ctx):
    d = ctx.daemon(env={"VOLPLUG_FAILPOINTS": "rpc:GetPluginInfo=sleep(1500ms)"})
    result = {}

    def slow():
        try:
            result["reply"] = d.call("GetPluginInfo", timeout=20)
        except grpc.RpcError as e:
            result["error"] = e

    t = threading.Thread(target=slow)
    t.start()
    time.sleep(0.4)
    d.proc.send_signal(signal.SIGTERM)
    t.join(20)
    rc = d.proc.wait(20)
    assert "reply" in result, result
    assert result["reply"].name == "test.volplug.io"
    assert rc == 0, rc
    assert not os.path.exists(d.socket), "socket file removed on shutdown"


def test_sigterm_waits_for_the_handler_of_a_client_gone(ctx):
    """A client leaves while its call's handler runs, then SIGTERM: the call of a client that
    waits gets its answer; once that client is gone too, gRPC's shutdown completes (the other
    call is cancelled), but that handler still answers 2 s later. The daemon waits for it
    instead of shutting the completion queue under it (SIGABRT, "assertion failed:
    grpc_cq_begin_op")."""
    d = ctx.daemon(args=["--workers", "2"],
                   env={"VOLPLUG_FAILPOINTS": "rpc:Probe=sleep(3000ms);rpc:GetPluginInfo=sleep(1000ms)"})
    gone = grpc.insecure_channel("unix:" + d.socket)
    probe = gone.unary_unary("/csi.v1.Identity/Probe")
    left, left_result = in_background(probe, b"", timeout=20)
    stays, stays_result = in_background(d.call, "GetPluginInfo", timeout=20)
    time.sleep(0.4)  # both handlers run now
    gone.close()
    left.join(5)
    assert left_result["error"].code() == grpc.StatusCode.CANCELLED, left_result
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    stays.join(20)
    d.channel.close()  # no client left: gRPC's shutdown completes while Probe still runs
    rc = d.proc.wait(20)
    took = time.monotonic() - t0
    logs = d.logs()
    assert rc == 0, (rc, logs[-1500:])  # was -6: "assertion failed: grpc_cq_begin_op"
    assert stays_result["value"].name == "test.volplug.io", stays_result
    assert re.search(r"\[Probe\] done in \d+ us", logs), "the Probe handler ran to its end"
    assert logs.rstrip().splitlines()[-1].split()[2] == "stopped", logs[-500:]
    assert 2 < took < 10, took
    assert not os.path.exists(d.socket), "socket file removed on shutdown"
    return "stopped in %.1f s, after the handler of the client gone" % took


def test_socket_is_private_by_default(ctx):
    d = ctx.daemon()
    assert stat.S_IMODE(os.stat(d.socket).st_mode) == 0o600
    e = ctx.daemon(args=["--socket-mode", "0660"], name="shared")
    assert stat.S_IMODE(os.stat(e.socket).st_mode) == 0o660


def test_stale_socket_is_replaced(ctx):
    d = ctx.daemon(start=False)
    os.makedirs(os.path.dirname(d.socket), exist_ok=True)
    s = socket.socket(socket.AF_UNIX)
    s.bind(d.socket)
    s.close()  # a socket file nobody listens on, as after a crash
    d.start()
    assert d.call("Probe").ready.value


def test_live_socket_is_not_stolen(ctx):
    first = ctx.daemon()
    second = ctx.daemon(start=False, name="second")
    argv = second.argv()
    argv[argv.index("--endpoint") + 1] = first.endpoint
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "another server is listening there" in p.stderr, p.stderr
    assert first.call("Probe").ready.value, "first server still answers"


def test_socket_path_that_is_a_regular_file(ctx):
    d = ctx.daemon(start=False)
    os.makedirs(os.path.dirname(d.socket), exist_ok=True)
    with open(d.socket, "w") as f:
        f.write("keep me")
    p = subprocess.run(d.argv(), capture_output=True, text=True, timeout=20)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "cannot listen" in p.stderr, p.stderr
    assert open(d.socket).read() == "keep me", "a user's file is never removed"


def test_bad_flags_exit_2_with_one_line(ctx):
    cases = [
        (["--bogus"], "unknown option '--bogus'"),
        (["sideways"], "unknown mode 'sideways'"),
        (["--endpoint", "tcp://127.0.0.1:1"], "--endpoint 'tcp://127.0.0.1:1'"),
        (["--workers", "0"], "--workers '0': out of range"),
    ]
    for args, msg in cases:
        p = subprocess.run([VOLPLUGD] + args, capture_output=True, text=True, timeout=10)
        assert p.returncode == 2, (args, p.returncode)
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and msg in lines[0], (args, p.stderr)


def test_unusable_pool_exits_2(ctx):
    path = os.path.join(ctx.tmp, "not-a-dir")
    with open(path, "w") as f:
        f.write("x")
    p = subprocess.run([VOLPLUGD, "--pool", path, "--endpoint", "unix://%s/s.sock" % ctx.tmp,
                        "--flexvolume-dir", ""],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2, p.returncode
    assert "--pool %s: cannot use it as a pool" % path in p.stderr, p.stderr


def test_daemons_watch_their_own_plugin_dir(ctx):
    """No test daemon touches the host's Flexvolume plugin dir (volplugd's default, which it
    creates and watches): the harness gives each its own."""
    d = ctx.daemon()
    assert "Flexvolume plugin dir %s watched" % d.flexvolume_dir in d.logs(), d.logs()
    assert os.path.isdir(d.flexvolume_dir) and d.flexvolume_dir.startswith(ctx.tmp + "/")
    assert HOST_PLUGIN_DIR not in d.logs(), d.logs()


def test_help_and_version(ctx):
    p = subprocess.run([VOLPLUGD, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--endpoint" in p.stdout and "--pool" in p.stdout
    p = subprocess.run([VOLPLUGD, "--version"], capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("volplugd ")


def test_log_records_name_the_rpc(ctx):
    d = ctx.daemon()
    try:
        d.call_raw("/csi.v1.Identity/Bogus", b"")
    except grpc.RpcError:
        pass
    lines = [l for l in d.logs().splitlines() if "[Bogus]" in l]
    assert lines, d.logs()
    assert " info " in lines[0] and "UNIMPLEMENTED" in lines[0], lines[0]
    assert lines[0][:4].isdigit(), "records start with the time: " + lines[0]


def test_volplugctl_identity(ctx):
    d = ctx.daemon()
    out = d.ctl("info").stdout
    assert "name: test.volplug.io" in out, out
    caps = d.ctl_json("capabilities")
    assert {"service": {"type": "CONTROLLER_SERVICE"}} in caps["capabilities"], caps
    assert d.ctl("probe").stdout.strip() == "ready: yes"
    p = d.ctl("call", "NoSuchRpc", check=False)
    assert p.returncode == 2 and "unknown method 'NoSuchRpc'" in p.stderr, p.stderr
    p = d.ctl("call", "GetPluginInfo", '{"bogus": 1}', check=False)
    assert p.returncode == 2 and "bogus: no such field" in p.stderr, p.stderr
    d.stop()
    p = d.ctl("info", check=False)
    assert p.returncode == 1 and "GetPluginInfo: UNAVAILABLE" in p.stderr, p.stderr


if __name__ == "__main__":
    run([test_plugin_info, test_capabilities_follow_the_mode, test_probe_reflects_the_pool,
         test_unknown_method_is_unimplemented, test_node_mode_does_not_serve_the_controller,
         test_malformed_request_bytes, test_200_concurrent_calls,
         test_capabilities_answered_while_every_worker_waits, test_pool_daemon_maps_no_libcurl,
         test_sigterm_lets_a_slow_call_finish,
         test_sigterm_waits_for_the_handler_of_a_client_gone, test_socket_is_private_by_default,
         test_stale_socket_is_replaced, test_live_socket_is_not_stolen,
         test_socket_path_that_is_a_regular_file, test_bad_flags_exit_2_with_one_line,
         test_unusable_pool_exits_2, test_daemons_watch_their_own_plugin_dir,
         test_help_and_version, test_log_records_name_the_rpc,
         test_volplugctl_identity])
