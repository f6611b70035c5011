# SPDX-License-Identifier: Apache-2.0
"""Who may call: SigV4 signatures checked against the credentials the simulator knows.

botocore (Debian's python3-botocore) computes the expected signature, so the simulator agrees
with a real SDK on every canonicalisation detail; this module decides what goes into it (only
the headers the client says it signed) and what to refuse before that: a wrong scope, a stale
date, an unknown key, a missing, wrong or expired session token, a body whose hash differs."""

import base64
import calendar
import email.utils
import hashlib
import hmac
import secrets
import string
import threading
import time

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.compat import HTTPHeaders
from botocore.credentials import Credentials

from wire import Ec2Error

AMZ_DATE = "%Y%m%dT%H%M%SZ"


def _auth_failure(message):
    return Ec2Error("AuthFailure", message)


class Key:
    """A credential the simulator accepts; expires is a wall-clock time or None."""

    def __init__(self, access_key, secret_key, token=None, expires=None, source="static"):
        self.access_key = access_key
        self.secret_key = secret_key
        self.token = token
        self.expires = expires
        self.source = source

    def as_dict(self):
        return {"access_key": self.access_key, "secret_key": self.secret_key,
                "token": self.token, "expires": self.expires, "source": self.source}


class KeyStore:
    """The temporary credentials handed out (by IMDS and STS), next to the static ones of the
    settings. Temporary keys are kept after they expire, so that using one says ExpiredToken."""

    def __init__(self):
        self.lock = threading.Lock()
        self.temporary = {}

    def issue(self, ttl, source):
        """A new temporary Key valid for ttl seconds."""
        alphabet = string.ascii_uppercase + "234567"
        key = Key("ASIA" + "".join(secrets.choice(alphabet) for _ in range(16)),
                  base64.b64encode(secrets.token_bytes(30)).decode(),
                  base64.b64encode(secrets.token_bytes(120)).decode(),
                  time.time() + ttl, source)
        with self.lock:
            self.temporary[key.access_key] = key
        return key

    def expire_all(self):
        """Makes every temporary key expired now; returns how many there were."""
        with self.lock:
            for key in self.temporary.values():
                key.expires = min(key.expires, time.time() - 1)
            return len(self.temporary)

    def lookup(self, access_key, cfg):
        for c in cfg["credentials"]:
            if c["access_key"] == access_key:
                return Key(c["access_key"], c["secret_key"], c.get("token"))
        with self.lock:
            return self.temporary.get(access_key)

    def dump(self):
        with self.lock:
            return [k.as_dict() for k in self.temporary.values()]


class _Signer(SigV4Auth):
    """botocore's SigV4 over exactly the headers the client listed in SignedHeaders."""

    def __init__(self, credentials, region, incoming, signed):
        super().__init__(credentials, "ec2", region)
        self._incoming = incoming
        self._signed = signed

    def headers_to_sign(self, request):
        out = HTTPHeaders()
        for name in self._signed:
            for value in self._incoming.get_all(name) or []:
                out[name] = value
        return out


def _parse_authorization(value):
    algorithm, _, rest = value.strip().partition(" ")
    if algorithm != "AWS4-HMAC-SHA256":
        raise _auth_failure("Unsupported signing algorithm %r: only AWS4-HMAC-SHA256 is "
                            "accepted" % algorithm)
    fields = {}
    for part in rest.split(","):
        k, _, v = part.strip().partition("=")
        fields[k] = v
    if not all(fields.get(k) for k in ("Credential", "SignedHeaders", "Signature")):
        raise _auth_failure("Authorization header requires Credential, SignedHeaders and "
                            "Signature")
    scope = fields["Credential"].split("/")
    if len(scope) != 5 or scope[4] != "aws4_request":
        raise _auth_failure("Credential must be <key>/<date>/<region>/ec2/aws4_request, not %r"
                            % fields["Credential"])
    return scope, fields["SignedHeaders"].split(";"), fields["Signature"]


def _request_time(headers):
    """(seconds since the epoch, the SigV4 timestamp string) of the request."""
    if headers.get("X-Amz-Date"):
        stamp = headers["X-Amz-Date"]
        try:
            return calendar.timegm(time.strptime(stamp, AMZ_DATE)), stamp
        except ValueError:
            raise _auth_failure("X-Amz-Date %r is not in the form YYYYMMDDTHHMMSSZ"
                                % stamp) from None
    if headers.get("Date"):
        try:
            when = email.utils.parsedate_to_datetime(headers["Date"]).timestamp()
        except (TypeError, ValueError):
            raise _auth_failure("Date %r is not an HTTP date" % headers["Date"]) from None
        return when, time.strftime(AMZ_DATE, time.gmtime(when))
    raise _auth_failure("The request must carry X-Amz-Date (or Date)")


def verify(cfg, keys, method, target, headers, body):
    """The Key that signed this request. Raises Ec2Error: AuthFailure (401), RequestExpired or
    ExpiredToken. target is the request line's path and query; headers an HTTPMessage."""
    if not headers.get("Authorization"):
        raise _auth_failure("The request is not signed: no Authorization header (only SigV4 "
                            "header signing is accepted)")
    (access_key, day, region, service, _), signed, signature = \
        _parse_authorization(headers["Authorization"])
    if service != "ec2":
        raise _auth_failure("Credential should be scoped to correct service: 'ec2'.")
    if region != cfg["region"]:
        raise _auth_failure("Credential should be scoped to a valid region, not '%s'." % region)
    if "host" not in signed or not ({"x-amz-date", "date"} & set(signed)):
        raise _auth_failure("SignedHeaders must include host and x-amz-date (or date)")
    when, stamp = _request_time(headers)
    skew = time.time() - when
    if abs(skew) > cfg["max_clock_skew"]:
        raise Ec2Error("RequestExpired", "Request has expired: its time %s is %.0f s %s the "
                       "server's (at most %.0f s allowed)." % (
                           stamp, abs(skew), "behind" if skew > 0 else "ahead of",
                           cfg["max_clock_skew"]))
    if day != stamp[:8]:
        raise _auth_failure("Date in Credential scope does not match YYYYMMDD from ISO-8601 "
                            "version of date from HTTP: '%s' != '%s'" % (day, stamp[:8]))
    key = keys.lookup(access_key, cfg)
    if key is None:
        raise _auth_failure("AWS was not able to validate the provided access credentials "
                            "(unknown access key %s)" % access_key)
    token = headers.get("X-Amz-Security-Token")
    if key.token is not None and token is None:
        raise _auth_failure("The access key %s needs its session token (X-Amz-Security-Token)"
                            % access_key)
    if token is not None and (key.token is None or not hmac.compare_digest(token, key.token)):
        raise _auth_failure("The security token included in the request is invalid.")
    if key.expires is not None and time.time() >= key.expires:
        raise Ec2Error("ExpiredToken", "The security token included in the request is expired")
    content_sha = headers.get("X-Amz-Content-SHA256")
    if content_sha is not None and content_sha != hashlib.sha256(body).hexdigest():
        raise _auth_failure("The provided 'x-amz-content-sha256' header does not match what "
                            "was computed.")
    request = AWSRequest(method=method, url="http://%s%s" % (headers.get("Host", ""), target),
                         data=body)
    request.context["timestamp"] = stamp
    signer = _Signer(Credentials(access_key, key.secret_key, key.token), region, headers, signed)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, signature):
        raise _auth_failure("The request signature we calculated does not match the signature "
                            "you provided. Check your AWS Secret Access Key and signing method.")
    return key
