# SPDX-License-Identifier: Apache-2.0
"""Where credentials and identity come from on EC2: an IMDSv2 stand-in (the instance's id,
zone, type and role credentials) and STS AssumeRoleWithWebIdentity (how EKS gives a pod a
role). Both hand out temporary credentials from the KeyStore, which EC2 calls then accept."""

import base64
import json
import re
import secrets
import threading
import time

import ebs
import wire
from wire import Ec2Error

STS_NS = "https://sts.amazonaws.com/doc/2011-06-15/"
STS_VERSION = "2011-06-15"
STS_ACTIONS = ("AssumeRoleWithWebIdentity",)
STS_SPEC = {"RoleArn": str, "RoleSessionName": str, "WebIdentityToken": str, "ProviderId": str,
            "Policy": str, "PolicyArns": {"member": [{"arn": str}]}, "DurationSeconds": int}
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]{1,64}$")
SESSION_NAME = re.compile(r"^[\w+=,.@-]{2,64}$")
TOKEN_TTL_MAX = 21600


def iso_seconds(wall):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))


def _validation(field, value, constraint):
    return Ec2Error("ValidationError", "1 validation error detected: Value %r at '%s' failed to "
                    "satisfy constraint: %s" % (value, field, constraint))


def _claims(token):
    """The claims of a JWT web identity token, {} when it is not one."""
    try:
        payload = token.split(".")[1]
        return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (IndexError, ValueError):
        return {}


def assume_role_with_web_identity(cfg, keys, p, request_id):
    """The XML reply of STS AssumeRoleWithWebIdentity. Raises Ec2Error (STS codes)."""
    role_arn = p.get("RoleArn")
    if not role_arn or not ROLE_ARN.match(role_arn):
        raise _validation("roleArn", role_arn, "Member must be an IAM role ARN")
    session = p.get("RoleSessionName")
    if not session or not SESSION_NAME.match(session):
        raise _validation("roleSessionName", session,
                          "Member must satisfy regular expression pattern: [\\w+=,.@-]{2,64}")
    token = p.get("WebIdentityToken")
    if not token:
        raise _validation("webIdentityToken", token, "Member must not be null")
    duration = p.get("DurationSeconds", 3600)
    if not 900 <= duration <= 43200:
        raise _validation("durationSeconds", duration,
                          "Member must have value between 900 and 43200")
    if cfg["web_identity_tokens"] and token not in cfg["web_identity_tokens"]:
        raise Ec2Error("InvalidIdentityToken", "The web identity token is not one this "
                       "simulator was told to accept (web_identity_tokens)")
    key = keys.issue(min(duration, cfg["credential_ttl"]), "sts")
    claims = _claims(token)
    role_name = role_arn.rsplit("/", 1)[1]
    account = role_arn.split(":")[4]
    result = {
        "Credentials": {"AccessKeyId": key.access_key, "SecretAccessKey": key.secret_key,
                        "SessionToken": key.token, "Expiration": iso_seconds(key.expires)},
        "SubjectFromWebIdentityToken": str(claims.get("sub", "ec2sim-subject")),
        "AssumedRoleUser": {"Arn": "arn:aws:sts::%s:assumed-role/%s/%s"
                            % (account, role_name, session),
                            "AssumedRoleId": "AROAEC2SIM%s:%s" % (secrets.token_hex(5).upper(),
                                                                  session)},
        "Provider": str(claims.get("iss", p.get("ProviderId", "ec2sim"))),
        "Audience": str(claims.get("aud", "sts.amazonaws.com")),
    }
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<AssumeRoleWithWebIdentityResponse '
            'xmlns="%s">%s%s</AssumeRoleWithWebIdentityResponse>'
            % (STS_NS, wire.xml_element("AssumeRoleWithWebIdentityResult", result),
               wire.xml_element("ResponseMetadata", {"RequestId": request_id}))).encode()


def sts_error_reply(err, request_id):
    kind = "Receiver" if err.status >= 500 else "Sender"
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<ErrorResponse xmlns="%s">%s%s'
            "</ErrorResponse>" % (STS_NS, wire.xml_element(
                "Error", {"Type": kind, "Code": err.code, "Message": err.message}),
                wire.xml_element("RequestId", request_id))).encode()


class Imds:
    """IMDSv2: PUT /latest/api/token, then GETs carrying the token. Answers (status, content
    type, body, extra headers)."""

    def __init__(self, cloud, keys):
        self.cloud = cloud
        self.keys = keys
        self.lock = threading.Lock()
        self.tokens = {}  # session token -> monotonic expiry
        self.role_key = None

    def _instance(self):
        cfg = self.cloud.cfg
        with self.cloud.lock:
            instances = self.cloud.instances
            if cfg["imds_instance"]:
                return instances.get(cfg["imds_instance"])
            return next(iter(instances.values()), None)

    def _role_credentials(self):
        cfg = self.cloud.cfg
        ttl = cfg["credential_ttl"]
        with self.lock:
            key = self.role_key
            # Like EC2, hand out new credentials well before the old ones expire.
            if key is None or key.expires - time.time() < min(300, ttl / 4):
                key = self.role_key = self.keys.issue(ttl, "imds")
        return {"Code": "Success", "LastUpdated": iso_seconds(time.time()), "Type": "AWS-HMAC",
                "AccessKeyId": key.access_key, "SecretAccessKey": key.secret_key,
                "Token": key.token, "Expiration": iso_seconds(key.expires)}

    def token(self, headers):
        if headers.get("X-Forwarded-For"):
            return 403, "text/plain", b"Forbidden", {}
        ttl = headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        if ttl is None or not ttl.isdigit() or not 1 <= int(ttl) <= TOKEN_TTL_MAX:
            return 400, "text/plain", b"Bad Request: X-aws-ec2-metadata-token-ttl-seconds must "\
                b"be 1 to 21600", {}
        token = base64.urlsafe_b64encode(secrets.token_bytes(42)).decode()
        with self.lock:
            self.tokens[token] = time.monotonic() + int(ttl)
        return 200, "text/plain", token.encode(), {"X-aws-ec2-metadata-token-ttl-seconds": ttl}

    def _authorized(self, headers):
        token = headers.get("X-aws-ec2-metadata-token")
        if token is None:
            return self.cloud.cfg["imds_v1"]
        with self.lock:
            return self.tokens.get(token, 0) > time.monotonic()

    def get(self, path, headers):
        if not self._authorized(headers):
            return 401, "text/plain", b"Unauthorized", {}
        inst = self._instance()
        cfg = self.cloud.cfg
        role = cfg["role_name"]
        values = {}
        if inst is not None:
            zone_index = cfg["zones"].index(inst.zone)
            enis = cfg["enis"] if inst.enis is None else inst.enis
            mappings = cfg["imds_ebs_mappings"]
            values = {
                "/latest/meta-data/": "block-device-mapping/\ninstance-id\ninstance-type\n"
                                      "network/\nplacement/\n" + ("iam/" if role else ""),
                # The mapping the instance was last started with: the root volume and
                # imds_ebs_mappings more (ebs1..); as on EC2, never the volumes attached since.
                "/latest/meta-data/block-device-mapping/": "\n".join(
                    ["ami", "root"] + ["ebs%d" % (i + 1) for i in range(mappings)]),
                "/latest/meta-data/block-device-mapping/ami": "/dev/xvda",
                "/latest/meta-data/block-device-mapping/root": "/dev/xvda",
                # Each network interface takes one of a Nitro instance's attachment slots.
                "/latest/meta-data/network/": "interfaces/",
                "/latest/meta-data/network/interfaces/": "macs/",
                "/latest/meta-data/network/interfaces/macs/": "\n".join(
                    "0e:%02x:5e:00:00:%02x/" % (zone_index, i) for i in range(enis)),
                "/latest/meta-data/instance-id": inst.id,
                "/latest/meta-data/instance-type": inst.type,
                "/latest/meta-data/placement/": "availability-zone\navailability-zone-id\nregion",
                "/latest/meta-data/placement/availability-zone": inst.zone,
                "/latest/meta-data/placement/availability-zone-id":
                    ebs.zone_id(cfg["region"], zone_index),
                "/latest/meta-data/placement/region": cfg["region"],
                "/latest/dynamic/instance-identity/document": json.dumps({
                    "accountId": cfg["account_id"], "availabilityZone": inst.zone,
                    "instanceId": inst.id, "instanceType": inst.type, "region": cfg["region"],
                    "architecture": "x86_64", "imageId": "ami-0ec25000000000000",
                    "pendingTime": iso_seconds(inst.launched), "version": "2017-09-30"}),
            }
            for i in range(mappings):
                values["/latest/meta-data/block-device-mapping/ebs%d" % (i + 1)] = \
                    "sd" + chr(ord("b") + i)
        if role:
            values["/latest/meta-data/iam/"] = "info\nsecurity-credentials/"
            values["/latest/meta-data/iam/security-credentials/"] = role
            values["/latest/meta-data/iam/info"] = json.dumps({
                "Code": "Success", "LastUpdated": iso_seconds(time.time()),
                "InstanceProfileArn": "arn:aws:iam::%s:instance-profile/%s"
                                      % (cfg["account_id"], role),
                "InstanceProfileId": "AIPAEC2SIMULATOR0001"})
            if path == "/latest/meta-data/iam/security-credentials/" + role:
                return 200, "text/plain", json.dumps(self._role_credentials()).encode(), {}
        if path not in values:
            return 404, "text/plain", b"Not Found", {}
        return 200, "text/plain", values[path].encode(), {}
