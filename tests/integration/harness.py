# SPDX-License-Identifier: Apache-2.0
"""Integration-test harness: starts the real volplugd on a temporary socket and talks CSI to
it over gRPC (Debian's python3-grpcio). Tests are plain functions taking a Ctx; run() prints
TAP, one line per test."""

import json
import shutil
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

sys.path.insert(0, os.environ.get("VOLPLUG_PROTO_PY", "build/proto"))

import grpc  # noqa: E402
from google.protobuf import json_format  # noqa: E402

import admin_pb2  # noqa: E402
import csi_pb2  # noqa: E402

VOLPLUGD = os.environ.get("VOLPLUGD", "build/src/cmd/volplugd")
VOLPLUGCTL = os.environ.get("VOLPLUGCTL", "build/src/cmd/volplugctl")
SOURCE_ROOT = os.environ.get("VOLPLUG_SOURCE_ROOT", ".")
EC2SIM = os.path.join(SOURCE_ROOT, "tests", "ec2sim", "ec2sim.py")

_SERVICES = {}
for _mod in (csi_pb2, admin_pb2):
    for _svc in _mod.DESCRIPTOR.services_by_name.values():
        for _m in _svc.methods:
            _SERVICES[_m.name] = (
                "/%s/%s" % (_svc.full_name, _m.name),
                getattr(_mod, _m.input_type.name),
                getattr(_mod, _m.output_type.name),
            )


def is_root():
    return os.geteuid() == 0


class Skip(Exception):
    pass


class Daemon:
    """One volplugd process on its own socket and pool."""

    def __init__(self, tmp, mode="all", args=(), env=None, pool=None, name="d", node_id="node-1"):
        self.dir = tempfile.mkdtemp(prefix=name + "-", dir=tmp)
        self.socket = os.path.join(self.dir, "csi.sock")
        self.pool = pool or os.path.join(self.dir, "pool")
        self.log_path = os.path.join(self.dir, "daemon.log")
        self.flexvolume_dir = os.path.join(self.dir, "flexvolume")
        self.mode = mode
        self.node_id = node_id
        self.args = list(args)
        self.env = dict(os.environ)
        for k, v in (env or {}).items():  # None: unset
            if v is None:
                self.env.pop(k, None)
            else:
                self.env[k] = v
        self.proc = None
        self.channel = None

    @property
    def endpoint(self):
        return "unix://" + self.socket

    def argv(self):
        # node_id None: the daemon finds its own (the EBS backend asks the instance metadata).
        # Its own plugin dir, never the host's (the default, which volplugd would create and
        # watch); a test's own --flexvolume-dir comes later and wins.
        node = ["--node-id", self.node_id] if self.node_id is not None else []
        return [VOLPLUGD, self.mode, "--endpoint", self.endpoint] + node + [
            "--driver-name", "test.volplug.io", "--pool", self.pool, "-v", "4",
            "--flexvolume-dir", self.flexvolume_dir] + self.args

    def start(self, wait=True):
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.argv(), stdout=self.log, stderr=self.log, env=self.env)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError("volplugd exited with %d:\n%s" % (self.proc.returncode, self.logs()))
            if os.path.exists(self.socket):
                try:
                    s = socket.socket(socket.AF_UNIX)
                    s.connect(self.socket)
                    s.close()
                    return
                except OSError:
                    pass
            time.sleep(0.02)
        raise AssertionError("volplugd did not listen within %ss" % timeout)

    def logs(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def _channel(self):
        if self.channel is None:
            self.channel = grpc.insecure_channel("unix:" + self.socket)
        return self.channel

    def call(self, method, request=None, timeout=30, **fields):
        """Calls a CSI method by name. request: a message, a dict (proto field names) or None
        with keyword fields. Returns the reply message; raises grpc.RpcError."""
        path, req_cls, rep_cls = _SERVICES[method]
        if request is None:
            request = fields
        if isinstance(request, dict):
            request = json_format.ParseDict(request, req_cls())
        stub = self._channel().unary_unary(path, request_serializer=req_cls.SerializeToString,
                                          response_deserializer=rep_cls.FromString)
        return stub(request, timeout=timeout)

    def call_raw(self, path, data, timeout=10):
        stub = self._channel().unary_unary(path)
        return stub(data, timeout=timeout)

    def expect_error(self, code, method, request=None, match=None, **fields):
        """Calls and asserts it fails with the gRPC code (and message containing match)."""
        try:
            reply = self.call(method, request, **fields)
        except grpc.RpcError as e:
            assert e.code() == code, "%s: want %s, got %s: %s" % (method, code, e.code(), e.details())
            if match is not None:
                assert match in (e.details() or ""), "%s: message %r lacks %r" % (method, e.details(), match)
            return e
        raise AssertionError("%s: want %s, got success: %s" % (method, code, reply))

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.channel is not None:
            self.channel.close()
            self.channel = None
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("volplugd did not stop within %ss" % timeout)

    def kill9(self):
        return self.stop(signal.SIGKILL)

    def ctl(self, *args, check=True, input=None):
        """Runs volplugctl against this daemon; returns CompletedProcess (text)."""
        p = subprocess.run([VOLPLUGCTL, "--endpoint", self.endpoint] + list(args),
                           capture_output=True, text=True, input=input)
        if check and p.returncode != 0:
            raise AssertionError("volplugctl %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr))
        return p

    def ctl_json(self, *args):
        return json.loads(self.ctl("-o", "json", *args).stdout)


class Ec2Sim:
    """One ec2sim process (tests/ec2sim): the EC2 Query API and STS on one local port, IMDS on
    another, with its control endpoints (/_sim/...) wrapped as methods."""

    def __init__(self, tmp, args=(), name="ec2sim"):
        self.dir = tempfile.mkdtemp(prefix=name + "-", dir=tmp)
        self.port_file = os.path.join(self.dir, "ports.json")
        self.log_path = os.path.join(self.dir, "ec2sim.log")
        self.args = list(args)
        self.proc = None

    def start(self, timeout=10):
        self.log = open(self.log_path, "ab")
        # The python running the tests is Debian's (meson finds /usr/bin/python3), the one
        # with python3-botocore.
        self.proc = subprocess.Popen([sys.executable, EC2SIM, "--port", "0", "--imds-port", "0",
                                      "--port-file", self.port_file] + self.args,
                                     stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None:
                raise AssertionError("ec2sim exited with %d:\n%s" % (self.proc.returncode,
                                                                     self.logs()))
            if time.monotonic() > deadline:
                raise AssertionError("ec2sim did not listen within %ss" % timeout)
            time.sleep(0.02)
        with open(self.port_file) as f:
            info = json.load(f)
        self.endpoint, self.imds = info["ec2"], info["imds"]
        return self

    def control(self, method, path, body=None):
        """Calls a /_sim/ endpoint; returns its JSON reply, raises AssertionError on an error."""
        data = json.dumps(body).encode() if body is not None else b""
        req = urllib.request.Request(self.endpoint + path, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.load(r)
        except urllib.error.HTTPError as e:
            raise AssertionError("%s %s: %d %s" % (method, path, e.code, e.read().decode()))

    def state(self):
        return self.control("GET", "/_sim/state")

    def volumes(self):
        """The volumes the simulator holds, root volumes left out."""
        return [v for v in self.state()["volumes"] if not v["root"]]

    def stats(self):
        return self.control("GET", "/_sim/stats")

    def config(self, **changes):
        return self.control("POST", "/_sim/config", changes)

    def reset(self, **changes):
        return self.control("POST", "/_sim/reset", changes)

    def logs(self):
        try:
            with open(self.log_path, "r", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None


class Ctx:
    """What a test gets: a temp dir, and daemons and simulators that are stopped after it."""

    def __init__(self):
        self.tmp = tempfile.mkdtemp(prefix="volplug-it-")
        self.daemons = []
        self.cleanups = []  # callables run in order after the daemons stop (umount, losetup -d)
        self.sims = []

    def ec2sim(self, args=(), start=True, name="ec2sim"):
        sim = Ec2Sim(self.tmp, args, name)
        self.sims.append(sim)
        if start:
            sim.start()
        return sim

    def daemon(self, mode="all", args=(), env=None, pool=None, start=True, name="d", node_id="node-1"):
        d = Daemon(self.tmp, mode, args, env, pool, name, node_id)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def cleanup(self):
        for d in self.daemons + self.sims:
            try:
                d.stop()
            except Exception:
                pass
        for fn in self.cleanups:
            try:
                fn()
            except Exception:
                pass
        # Never delete through a mount a test left behind: that would reach into it.
        with open("/proc/self/mountinfo") as f:
            mounted = [line.split()[4] for line in f]
        if any(m == self.tmp or m.startswith(self.tmp + "/") for m in mounted):
            print("# leaving %s: something is still mounted below it" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)



def process(pid):
    """What /proc shows of a running process: {"pid", "ppid", "args"} (args a list), or None
    when there is none. A zombie counts as gone: it runs nothing and holds nothing open."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            args = [a.decode(errors="replace") for a in f.read().split(b"\0")[:-1]]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return {"pid": pid, "ppid": int(fields[1]), "args": args}


def processes(ppid=None):
    """Running processes (see process()), those whose parent is ppid when given."""
    found = []
    for entry in os.listdir("/proc"):
        p = process(int(entry)) if entry.isdigit() else None
        if p is not None and (ppid is None or p["ppid"] == ppid):
            found.append(p)
    return found


def wait_for(cond, timeout=10, what="condition"):
    """Polls cond every 10 ms until it returns something true, which it returns."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.01)
    raise AssertionError("timed out waiting for " + what)


def in_background(fn, *args, **kw):
    """Runs fn in a thread; returns (thread, result dict with 'value' or 'error')."""
    result = {}

    def body():
        try:
            result["value"] = fn(*args, **kw)
        except grpc.RpcError as e:
            result["error"] = e

    t = threading.Thread(target=body)
    t.start()
    return t, result


def local_id(object_id):
    """The name of a pool object's directory: its ID without the node part ("vol-<16 hex>"
    of "vol-<16 hex>.node-1"; IDs carry their node)."""
    return object_id.split(".", 1)[0]


def to_dict(msg):
    return json_format.MessageToDict(msg, preserving_proto_field_name=True)


def run(tests):
    """Runs test functions in order and prints TAP, with what a test returns (a string of
    counts) appended to its description. Exit status 1 when any failed."""
    failed = 0
    print("1..%d" % len(tests), flush=True)
    for i, fn in enumerate(tests, 1):
        ctx = Ctx()
        name = fn.__name__
        start = time.monotonic()
        try:
            note = fn(ctx)  # a test may return a line of counts for its description
            print("ok %d - %s (%.2fs)%s" % (i, name, time.monotonic() - start,
                                            ": " + note if note else ""), flush=True)
        except Skip as e:
            print("ok %d - %s # SKIP %s" % (i, name, e), flush=True)
        except Exception:
            failed += 1
            print("not ok %d - %s" % (i, name), flush=True)
            for line in traceback.format_exc().splitlines():
                print("#   " + line)
            for d in ctx.daemons + ctx.sims:
                tail = d.logs().splitlines()[-30:]
                print("#   --- %s log (last lines) ---" % d.dir)
                for line in tail:
                    print("#   " + line)
        finally:
            ctx.cleanup()
    sys.exit(1 if failed else 0)
