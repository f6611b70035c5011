# SPDX-License-Identifier: Apache-2.0
"""HTTP: the EC2 (and STS) Query endpoint with the /_sim/ control endpoints on one port, the
IMDS stand-in on another. Sim ties the parts together: settings, the Cloud, credentials,
faults and the per-action counters."""

import json
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import auth
import config
import ebs
import faults
import metadata
import wire
from wire import Ec2Error


class Sim:
    def __init__(self, cfg, verbose=False):
        ebs.check_instances(cfg["instances"], cfg)
        self.cloud = ebs.Cloud(cfg)
        self.keys = auth.KeyStore()
        self.faults = faults.Faults(cfg["seed"])
        self.imds = metadata.Imds(self.cloud, self.keys)
        self.verbose = verbose
        self.stats_lock = threading.Lock()
        self.reset_stats()

    @property
    def cfg(self):
        return self.cloud.cfg

    # --- counters ----------------------------------------------------------------------------

    def reset_stats(self):
        with self.stats_lock:
            self.stats = {"total": 0, "calls": {}, "errors": {}, "faults": {}, "imds": {}}

    def _count(self, action, code=None, injected=False):
        with self.stats_lock:
            self.stats["total"] += 1
            self.stats["calls"][action] = self.stats["calls"].get(action, 0) + 1
            if code is not None:
                errors = self.stats["errors"].setdefault(action, {})
                errors[code] = errors.get(code, 0) + 1
            if injected:
                self.stats["faults"][code] = self.stats["faults"].get(code, 0) + 1

    def count_imds(self, what):
        with self.stats_lock:
            self.stats["imds"][what] = self.stats["imds"].get(what, 0) + 1

    def stats_copy(self):
        with self.stats_lock:
            return json.loads(json.dumps(self.stats))

    # --- settings ----------------------------------------------------------------------------

    def configure(self, changes):
        """Applies setting changes while running; returns the settings."""
        with self.cloud.lock:
            self.cloud.cfg = config.merged(self.cloud.cfg, changes)
            return self.cloud.cfg

    def reset(self, changes):
        """Forgets every object and counter; changes may set any setting first."""
        with self.cloud.lock:
            cfg = config.merged(self.cloud.cfg, changes, running=False)
            ebs.check_instances(cfg["instances"], cfg)
            self.cloud.cfg = cfg
            self.cloud.reset()
            self.faults = faults.Faults(cfg["seed"])
        self.reset_stats()
        return cfg

    # --- the Query endpoint ------------------------------------------------------------------

    def query(self, method, target, headers, body):
        """One EC2 or STS call: (HTTP status, content type, body)."""
        request_id = wire.new_request_id()
        if self.cfg["latency"]:
            time.sleep(self.cfg["latency"])
        url = urllib.parse.urlsplit(target)
        form = body.decode("utf-8", "replace") if method == "POST" else url.query
        pairs = urllib.parse.parse_qsl(form, keep_blank_values=True)
        action = next((v for k, v in pairs if k == "Action"), None)
        if action in metadata.STS_ACTIONS:
            return self._sts(action, pairs, request_id)
        label = action or "(no Action)"
        injected = False
        try:
            if self.cfg["auth"]:
                auth.verify(self.cfg, self.keys, method, target, headers, body)
            if not action:
                raise Ec2Error("MissingAction", "The request must contain the parameter Action")
            version = next((v for k, v in pairs if k == "Version"), None)
            if action not in ebs.SPECS:
                raise Ec2Error("InvalidAction", "The action %s is not valid for this web "
                               "service." % action)
            if version != wire.EC2_VERSION:
                raise Ec2Error("NoSuchVersion", "The requested version (%s) of service "
                               "AmazonEC2 does not exist; this simulator speaks %s"
                               % (version, wire.EC2_VERSION))
            params = wire.parse([(k, v) for k, v in pairs if k not in ("Action", "Version")],
                                dict(ebs.SPECS[action], DryRun=bool))
            fault = self.faults.pick(self.cfg, action, "before")
            if fault:
                injected = True
                raise fault
            if params.get("DryRun"):
                raise Ec2Error("DryRunOperation", "Request would have succeeded, but DryRun "
                               "flag is set.")
            reply = self.cloud.call(action, params)
            fault = self.faults.pick(self.cfg, action, "after")
            if fault:
                injected = True
                raise fault
        except Ec2Error as e:
            self._count(label, e.code, injected)
            self._log(label, e.status, e.code)
            return e.status, "text/xml;charset=UTF-8", wire.error_reply(e, request_id)
        except Exception:
            traceback.print_exc()
            e = Ec2Error("InternalError", "ec2sim failed on %s (a simulator bug: see its "
                         "log)" % label)
            self._count(label, e.code)
            return e.status, "text/xml;charset=UTF-8", wire.error_reply(e, request_id)
        self._count(label)
        self._log(label, 200, None)
        return 200, "text/xml;charset=UTF-8", wire.reply(action, reply, request_id)

    def _sts(self, action, pairs, request_id):
        injected = False
        try:
            version = next((v for k, v in pairs if k == "Version"), None)
            if version != metadata.STS_VERSION:
                raise Ec2Error("InvalidAction", "Could not find operation %s for version %s"
                               % (action, version))
            params = wire.parse([(k, v) for k, v in pairs if k not in ("Action", "Version")],
                                metadata.STS_SPEC)
            fault = self.faults.pick(self.cfg, action, "before", ec2_action=False)
            if fault:
                injected = True
                raise fault
            body = metadata.assume_role_with_web_identity(self.cfg, self.keys, params,
                                                          request_id)
        except Ec2Error as e:
            self._count(action, e.code, injected)
            self._log(action, e.status, e.code)
            return e.status, "text/xml", metadata.sts_error_reply(e, request_id)
        self._count(action)
        self._log(action, 200, None)
        return 200, "text/xml", body

    def _log(self, action, status, code):
        if self.verbose:
            print("ec2sim: %s %d %s" % (action, status, code or ""), file=sys.stderr, flush=True)

    # --- /_sim/ ------------------------------------------------------------------------------

    def control(self, method, path, body):
        """A control endpoint: (HTTP status, JSON-ready reply)."""
        try:
            changes = json.loads(body or b"{}")
        except ValueError as e:
            return 400, {"error": "the body must be JSON: %s" % e}
        try:
            if (method, path) == ("GET", "/_sim/state"):
                state = self.cloud.dump()
                state["temporaryCredentials"] = self.keys.dump()
                return 200, state
            if (method, path) == ("GET", "/_sim/stats"):
                return 200, self.stats_copy()
            if (method, path) == ("POST", "/_sim/stats/reset"):
                self.reset_stats()
                return 200, self.stats_copy()
            if (method, path) == ("GET", "/_sim/config"):
                return 200, self.cfg
            if (method, path) == ("POST", "/_sim/config"):
                return 200, self.configure(changes)
            if (method, path) == ("POST", "/_sim/reset"):
                return 200, self.reset(changes)
            if (method, path) == ("POST", "/_sim/credentials/expire"):
                return 200, {"expired": self.keys.expire_all()}
        except (config.ConfigError, Ec2Error) as e:
            return 400, {"error": str(e)}
        return 404, {"error": "no control endpoint %s %s (see ec2sim.py)" % (method, path)}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ec2sim"
    sys_version = ""
    # Headers and body go out in separate writes: without TCP_NODELAY the body waits for the
    # client's delayed ACK, 40 ms a call on keep-alive connections.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):
        pass

    def _body(self):
        if self.headers.get("Transfer-Encoding"):
            return None
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _send(self, status, content_type, body, extra=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


class Ec2Handler(_Handler):
    sim = None

    def _serve(self):
        body = self._body()
        if body is None:
            self._send(411, "text/plain", b"Length Required: send a Content-Length body\n")
            return
        path = urllib.parse.urlsplit(self.path).path
        if path.startswith("/_sim/"):
            status, reply = self.sim.control(self.command, path, body)
            self._send(status, "application/json", json.dumps(reply, indent=1).encode())
            return
        if path != "/":
            self._send(404, "text/plain", b"Not Found: the Query API is served at /\n")
            return
        status, content_type, reply = self.sim.query(self.command, self.path, self.headers, body)
        self._send(status, content_type, reply)

    do_GET = do_POST = _serve


class ImdsHandler(_Handler):
    sim = None

    def do_PUT(self):
        self._body()
        if urllib.parse.urlsplit(self.path).path != "/latest/api/token":
            self._send(405, "text/plain", b"Method Not Allowed")
            return
        self.sim.count_imds("token")
        self._send(*self.sim.imds.token(self.headers))

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        self.sim.count_imds(path)
        self._send(*self.sim.imds.get(path, self.headers))


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def serve(sim, handler, host, port):
    """Starts a server thread for sim with handler on host:port (0: any free port); returns
    the server (its port in server.server_address[1])."""
    cls = type(handler.__name__, (handler,), {"sim": sim})
    server = Server((host, port), cls)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server
