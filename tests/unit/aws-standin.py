#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A stand-in for the AWS endpoints the EC2 client talks to (the EC2 and STS Query APIs, the
instance metadata service), for the unit tests: it replays canned replies and records every
request, checking each SigV4 signature by recomputing it with botocore (Debian's
python3-botocore), an implementation independent of the client's (libcurl's).

Listens on 127.0.0.1 (an ephemeral port, printed as "PORT <n>" on stdout) and exits when its
stdin closes, so it never outlives the test that started it. Controlled over HTTP:

    POST /_standin/rules     a JSON list of rules, appended; each reply consumes the first rule
                             that matches, in order: {"action": "DescribeVolumes" (form
                             Action), "path": "/latest/api/token", "method": "PUT", "status":
                             200, "body": "...", "headers": {...}, "count": 1 (-1: forever),
                             "delay": 0.5 (seconds before replying)}
    POST /_standin/keys      {"access key id": "secret"}: keys whose signatures are checked
    POST /_standin/reset     forgets rules, keys and requests
    GET  /_standin/requests  the requests so far: [{"method", "path", "headers" (lower-case
                             names), "body", "params" (the form, when one), "sigv4": "ok",
                             "unsigned", "unverified: ..." or "bad: ..."}]

A request no rule matches gets HTTP 400 with the EC2 error code StandinNoRule."""

import http.server
import json
import os
import re
import sys
import threading
import time
import urllib.parse

try:
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
    HAVE_BOTOCORE = True
except ImportError:
    HAVE_BOTOCORE = False

AUTH = re.compile(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request,"
                  r" ?SignedHeaders=([a-z0-9;-]+), ?Signature=([0-9a-f]{64})$")

lock = threading.Lock()  # guards the three below
rules = []
keys = {}
requests = []


def verify_sigv4(method, path, headers, body):
    """What botocore makes of the request's signature."""
    auth = headers.get("authorization")
    if not auth:
        return "unsigned"
    m = AUTH.match(auth)
    if not m:
        return "bad: malformed Authorization: " + auth
    akid, date, region, service, signed, signature = m.groups()
    with lock:
        secret = keys.get(akid)
    if secret is None:
        return "unverified: unknown key " + akid
    if not HAVE_BOTOCORE:
        return "unverified: no botocore"
    amz_date = headers.get("x-amz-date", "")
    if not amz_date.startswith(date):
        return "bad: X-Amz-Date %r outside the credential scope %s" % (amz_date, date)
    names = signed.split(";")
    missing = [n for n in names if n not in headers]
    if missing:
        return "bad: signed headers not sent: %s" % missing
    req = AWSRequest(method=method, url="http://%s%s" % (headers["host"], path), data=body,
                     headers={n: headers[n] for n in names})
    req.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(akid, secret, headers.get("x-amz-security-token")),
                       service, region)
    canonical = signer.canonical_request(req)
    expected = signer.signature(signer.string_to_sign(req, canonical), req)
    if expected != signature:
        return "bad: signature differs; botocore's canonical request: " + canonical
    return "ok"


def error_xml(code, message):
    return ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>%s</Code>"
            "<Message>%s</Message></Error></Errors><RequestID>standin</RequestID></Response>"
            % (code, message))


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes

    def log_message(self, fmt, *args):
        pass

    def reply(self, status, body, headers=None):
        data = body.encode() if isinstance(body, str) else body
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def read_body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def control(self, body):
        global rules, keys, requests
        with lock:
            if self.path == "/_standin/rules":
                rules.extend(json.loads(body))
            elif self.path == "/_standin/keys":
                keys.update(json.loads(body))
            elif self.path == "/_standin/reset":
                rules, keys, requests = [], {}, []
            elif self.path == "/_standin/requests":
                return self.reply(200, json.dumps(requests), {"Content-Type": "application/json"})
            else:
                return self.reply(404, "no such control")
        self.reply(200, "{}")

    def handle_any(self):
        body = self.read_body()
        if self.path.startswith("/_standin/"):
            return self.control(body)
        headers = {k.lower(): v for k, v in self.headers.items()}
        params = {}
        if headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            params = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace"),
                                                 keep_blank_values=True))
        record = {
            "method": self.command, "path": self.path, "headers": headers,
            "body": body.decode("utf-8", "replace"), "params": params,
            "sigv4": verify_sigv4(self.command, self.path, headers, body),
        }
        with lock:
            requests.append(record)
            rule = None
            for r in rules:
                if r.get("count", 1) == 0:
                    continue
                if "action" in r and params.get("Action") != r["action"]:
                    continue
                if "path" in r and self.path != r["path"]:
                    continue
                if "method" in r and self.command != r["method"]:
                    continue
                rule = r
                if r.get("count", 1) > 0:
                    r["count"] = r.get("count", 1) - 1
                break
        if rule is None:
            return self.reply(400, error_xml("StandinNoRule", "no rule for %s %s %s" %
                                             (self.command, self.path, params.get("Action", ""))))
        if rule.get("delay"):
            time.sleep(rule["delay"])
        self.reply(rule.get("status", 200), rule.get("body", ""), rule.get("headers"))

    do_GET = do_POST = do_PUT = handle_any


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test closes our stdin, or dies
    os._exit(0)


if __name__ == "__main__":
    main()
