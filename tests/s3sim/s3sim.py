#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A small S3 for the tests of the S3 client and the snapshot store: one process, buckets in
memory, path-style and virtual-hosted addressing, SigV4 checked (service s3, the payload's
hash or UNSIGNED-PAYLOAD), and faults on demand.

Listens on 127.0.0.1 (an ephemeral port, printed as "PORT <n>" on stdout) and exits when its
stdin closes. Speaks PutObject (If-None-Match: *), GetObject (Range), HeadObject,
DeleteObject, DeleteObjects, ListObjectsV2 (max-keys, continuation tokens), and multipart
uploads (create, part, complete, abort). Controlled over HTTP:

    POST /_s3sim/reset    {"buckets": [...], "keys": {id: secret}, "page": n}: forget all
    POST /_s3sim/clear    forget the faults
    POST /_s3sim/faults   a JSON list, appended; each fault matches requests by "method" and
                          "key" (a regular expression; absent: any) and applies "times"
                          times (absent: always): {"status": 503, "code": "SlowDown"},
                          {"drop": true} (close the connection mid-reply), {"delay": seconds},
                          {"corrupt": true} (flip a byte of a GET's body)
    GET  /_s3sim/stats    {"requests": {"PUT": n, ...}, "kinds": {"GET chunks": n, ...},
                          "objects": {key: size}, "uploads": n} (kinds: requests by method and
                          the store's folder their key is in: chunks, snapshots, intents, gc)
    POST /_s3sim/put      {"bucket", "key", "body_hex"}: place an object without a request
    POST /_s3sim/get      {"bucket", "key"}: an object's bytes without a request (404: none)
    POST /_s3sim/age      {"key": regex, "seconds": n}: make the objects whose keys match n
                          seconds older (what a collection's grace sees)
"""

import email.utils
import hashlib
import hmac
import http.server
import json
import re
import sys
import threading
import time
import urllib.parse
from xml.etree import ElementTree

lock = threading.Lock()
state = {}


def reset(buckets=(), keys=None, page=1000):
    state.clear()
    state.update(buckets={b: {} for b in buckets}, keys=keys or {}, page=page, faults=[],
                 requests={}, kinds={}, uploads={}, next_upload=1)


reset()


def stamp(t):
    """ISO 8601 with milliseconds, as S3 writes LastModified."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + ".%03dZ" % (int(t * 1000) % 1000)


def xml(body):
    return ('<?xml version="1.0" encoding="UTF-8"?>' + body).encode()


def error_xml(code, message, resource=""):
    return xml("<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource>"
               "<RequestId>s3sim</RequestId></Error>" % (code, message, resource))


def sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


def check_signature(handler, path, query, body):
    """None when the request is signed right by a known key (or no key is known), else the
    error code."""
    keys = state["keys"]
    auth = handler.headers.get("Authorization")
    if not keys:
        return None
    if not auth or not auth.startswith("AWS4-HMAC-SHA256 "):
        return "AccessDenied"
    fields = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    cred = fields["Credential"].split("/")
    key_id, date, region, service = cred[0], cred[1], cred[2], cred[3]
    if key_id not in keys:
        return "InvalidAccessKeyId"
    if service != "s3":
        return "SignatureDoesNotMatch"
    signed = fields["SignedHeaders"].split(";")
    payload = handler.headers.get("x-amz-content-sha256")
    if payload is None:
        return "SignatureDoesNotMatch"
    if payload != "UNSIGNED-PAYLOAD" and payload != hashlib.sha256(body).hexdigest():
        return "XAmzContentSHA256Mismatch"
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    canon_query = "&".join("%s=%s" % (urllib.parse.quote(k, safe="-_.~"),
                                      urllib.parse.quote(v, safe="-_.~")) for k, v in pairs)
    canon_headers = "".join("%s:%s\n" % (h, " ".join((handler.headers.get(h) or "").split()))
                            for h in signed)
    canon = "\n".join([handler.command, path, canon_query, canon_headers,
                       fields["SignedHeaders"], payload])
    amz_date = handler.headers.get("x-amz-date")
    scope = "/".join(cred[1:])
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canon.encode()).hexdigest()])
    k = sign(("AWS4" + keys[key_id]).encode(), date)
    for part in (region, service, "aws4_request"):
        k = sign(k, part)
    want = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    return None if hmac.compare_digest(want, fields["Signature"]) else "SignatureDoesNotMatch"


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body=b"", headers=None):
        headers = dict(headers or {})
        head_len = headers.pop("_len", len(body))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", str(head_len))
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def control(self, what, body):
        with lock:
            if what == "reset":
                j = json.loads(body or b"{}")
                reset(j.get("buckets", ()), j.get("keys"), j.get("page", 1000))
            elif what == "faults":
                state["faults"].extend(json.loads(body))
            elif what == "clear":
                state["faults"] = []
            elif what == "put":
                j = json.loads(body)
                state["buckets"][j["bucket"]][j["key"]] = (bytes.fromhex(j["body_hex"]),
                                                           time.time())
            elif what == "get":
                j = json.loads(body)
                obj = state["buckets"][j["bucket"]].get(j["key"])
                return self.reply(200, obj[0]) if obj else self.reply(404)
            elif what == "age":
                j = json.loads(body)
                for objects in state["buckets"].values():
                    for k, (data, t) in list(objects.items()):
                        if re.search(j["key"], k):
                            objects[k] = (data, t - j["seconds"])
            elif what == "stats":
                objs = {"%s/%s" % (b, k): len(v[0]) for b, o in state["buckets"].items()
                        for k, v in o.items()}
                return self.reply(200, json.dumps({"requests": state["requests"],
                                                   "kinds": state["kinds"],
                                                   "objects": objs,
                                                   "uploads": len(state["uploads"])}).encode())
        self.reply(200, b"{}")

    def fault(self, key):
        with lock:
            for f in state["faults"]:
                if f.get("method") and f["method"] != self.command:
                    continue
                if f.get("key") and not re.search(f["key"], key or ""):
                    continue
                if f.get("times", 1) <= 0:
                    continue
                if "times" in f:
                    f["times"] -= 1
                return dict(f)
        return None

    def handle_any(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        if url.path.startswith("/_s3sim/"):
            return self.control(url.path[len("/_s3sim/"):], body)
        host = (self.headers.get("Host") or "").split(":")[0]
        path = url.path
        if host.endswith(".localhost") or (host.count(".") and not host[0].isdigit()):
            bucket, key = host.split(".", 1)[0], path[1:]
        else:
            bucket, _, key = path[1:].partition("/")
        with lock:
            state["requests"][self.command] = state["requests"].get(self.command, 0) + 1
            kind = next((k for k in ("chunks", "snapshots", "intents", "gc")
                         if "/%s/" % k in "/" + key), None)
            if kind:
                kind = "%s %s" % (self.command, kind)
                state["kinds"][kind] = state["kinds"].get(kind, 0) + 1
            bad = check_signature(self, path, url.query, body)
        if bad:
            return self.reply(403, error_xml(bad, "The request signature we calculated does "
                                             "not match the signature you provided.", path))
        f = self.fault(key)
        if f and f.get("delay"):
            time.sleep(f["delay"])
        if f and f.get("drop"):
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(b"partial")
            self.wfile.flush()
            self.close_connection = True
            return
        if f and f.get("status"):
            return self.reply(f["status"], error_xml(f.get("code", "InternalError"),
                                                     "injected", path))
        q = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
        with lock:
            objects = state["buckets"].get(bucket)
            if objects is None:
                return self.reply(404, error_xml("NoSuchBucket",
                                                 "The specified bucket does not exist", bucket))
            return self.serve(objects, bucket, key, q, body, f)

    def serve(self, objects, bucket, key, q, body, f):
        cmd = self.command
        if cmd == "GET" and not key:
            prefix, page = q.get("prefix", ""), int(q.get("max-keys", state["page"]))
            keys = sorted(k for k in objects if k.startswith(prefix))
            after = q.get("continuation-token", "")
            keys = [k for k in keys if k > after]
            out, rest = keys[:page], keys[page:]
            items = "".join(
                "<Contents><Key>%s</Key><Size>%d</Size><LastModified>%s</LastModified>"
                "</Contents>" % (k, len(objects[k][0]),
                                 stamp(objects[k][1])) for k in out)
            more = "<IsTruncated>true</IsTruncated><NextContinuationToken>%s" \
                   "</NextContinuationToken>" % out[-1] if rest else \
                   "<IsTruncated>false</IsTruncated>"
            return self.reply(200, xml("<ListBucketResult><Name>%s</Name><KeyCount>%d"
                                       "</KeyCount>%s%s</ListBucketResult>"
                                       % (bucket, len(out), more, items)))
        if cmd == "POST" and "delete" in q:
            root = ElementTree.fromstring(body)
            for obj in root.iter():
                if obj.tag.endswith("Key"):
                    objects.pop(obj.text, None)
            return self.reply(200, xml("<DeleteResult></DeleteResult>"))
        if cmd == "POST" and "uploads" in q:
            uid = "up%d" % state["next_upload"]
            state["next_upload"] += 1
            state["uploads"][uid] = (bucket, key, {})
            return self.reply(200, xml("<InitiateMultipartUploadResult><Bucket>%s</Bucket>"
                                       "<Key>%s</Key><UploadId>%s</UploadId>"
                                       "</InitiateMultipartUploadResult>" % (bucket, key, uid)))
        if "uploadId" in q:
            up = state["uploads"].get(q["uploadId"])
            if not up:
                return self.reply(404, error_xml("NoSuchUpload", "no such upload", key))
            if cmd == "PUT":
                etag = '"%s"' % hashlib.md5(body).hexdigest()
                up[2][int(q["partNumber"])] = (body, etag)
                return self.reply(200, b"", {"ETag": etag})
            if cmd == "DELETE":
                del state["uploads"][q["uploadId"]]
                return self.reply(204)
            if cmd == "POST":
                root = ElementTree.fromstring(body)
                parts = []
                for p in root:
                    num = int(next(c.text for c in p if c.tag.endswith("PartNumber")))
                    etag = next(c.text for c in p if c.tag.endswith("ETag"))
                    if num not in up[2] or up[2][num][1] != etag:
                        return self.reply(400, error_xml("InvalidPart", "bad part", key))
                    parts.append(up[2][num][0])
                objects[key] = (b"".join(parts), time.time())
                del state["uploads"][q["uploadId"]]
                return self.reply(200, xml("<CompleteMultipartUploadResult><Key>%s</Key>"
                                           "</CompleteMultipartUploadResult>" % key))
        if cmd == "PUT":
            if self.headers.get("If-None-Match") == "*" and key in objects:
                return self.reply(412, error_xml("PreconditionFailed", "At least one of the "
                                                 "pre-conditions you specified did not hold",
                                                 key))
            objects[key] = (body, time.time())
            return self.reply(200, b"", {"ETag": '"%s"' % hashlib.md5(body).hexdigest()})
        if cmd == "DELETE":
            objects.pop(key, None)
            return self.reply(204)
        if key not in objects:
            if cmd == "HEAD":
                return self.reply(404)
            return self.reply(404, error_xml("NoSuchKey", "The specified key does not exist.",
                                             key))
        data, mtime = objects[key]
        # What `aws s3 cp` reads before a download: the object's date and an ETag (not its
        # MD5: hashing a large object for each ranged GET would be the simulator's own cost).
        meta = {"Last-Modified": email.utils.formatdate(mtime, usegmt=True),
                "ETag": '"%x-%x"' % (int(mtime * 1e6), len(data))}
        if cmd == "HEAD":
            return self.reply(200, b"", dict(meta, _len=len(data)))
        rng = self.headers.get("Range")
        if rng:
            m = re.match(r"bytes=(\d+)-(\d*)$", rng)
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) else len(data) - 1
            if start >= len(data):
                return self.reply(416, error_xml("InvalidRange", "range not satisfiable", key))
            data = data[start:end + 1]
        if f and f.get("corrupt") and data:
            data = bytes([data[0] ^ 0xff]) + data[1:]
        return self.reply(206 if rng else 200, data, meta)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True


def main():
    server = Server(("127.0.0.1", 0), Handler)
    print("PORT %d" % server.server_address[1], flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()  # until the test closes our stdin, or dies
    return 0


if __name__ == "__main__":
    sys.exit(main())
