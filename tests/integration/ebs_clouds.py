# SPDX-License-Identifier: Apache-2.0
"""The EC2 peers the EBS controller's tests run against, behind one interface: ec2sim (the
project's simulator, tests/ec2sim) and moto (an EC2 emulator written by others, when it is
installed). A test asks a Cloud what EC2 holds (volumes, snapshots, attachments) to check that
nothing leaked or was made twice, whatever peer answered.

moto: the source tree of getmoto/moto (tag 5.1.22) in $MOTO_PATH (default /opt/moto), run with
Debian's python3 and its packages (python3-werkzeug, python3-flask, python3-flask-cors,
python3-jinja2, python3-xmltodict, python3-responses, python3-boto3, python3-botocore, ...)."""

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

from harness import Skip

REGION = "us-east-1"
ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
SIM_KEY = "AKIAEC2SIMULATOR0001"
SIM_SECRET = "ec2sim/secret/key/for/tests/only/00000000"
DRIVER = "test.volplug.io"
MOTO_PATH = os.environ.get("MOTO_PATH", "/opt/moto")


def botocore_client(endpoint, key, secret, token=None):
    try:
        import botocore.session
        from botocore.config import Config
    except ImportError:
        raise Skip("python3-botocore is not installed")
    return botocore.session.get_session().create_client(
        "ec2", region_name=REGION, endpoint_url=endpoint, aws_access_key_id=key,
        aws_secret_access_key=secret, aws_session_token=token,
        config=Config(retries={"total_max_attempts": 1}, read_timeout=30))


class Cloud:
    """What every peer offers. instances: {"a1", "a2" (zone a), "b1" (zone b)} -> instance ID."""

    name = "?"
    # What the peer does not model, each with the reason a test that needs it is skipped.
    lacks = {}

    def env(self):
        """The daemon's environment: region, credentials, no instance metadata service."""
        return {"AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": self.key,
                "AWS_SECRET_ACCESS_KEY": self.secret, "AWS_SESSION_TOKEN": None,
                "AWS_PROFILE": None, "AWS_DEFAULT_REGION": None,
                "AWS_WEB_IDENTITY_TOKEN_FILE": None, "AWS_ROLE_ARN": None,
                "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
                "AWS_EC2_METADATA_DISABLED": "true",
                "AWS_EC2_METADATA_SERVICE_ENDPOINT": None}

    def has(self, feature):
        """Whether the peer models feature; a test leaves out the part that needs it when not,
        and skipped() says what was left out."""
        if feature in self.lacks:
            self.left_out = getattr(self, "left_out", []) + [self.lacks[feature]]
            return False
        return True

    def skipped(self):
        return "; ".join(dict.fromkeys(getattr(self, "left_out", [])))

    def client(self):
        return botocore_client(self.endpoint, self.key, self.secret)

    def volumes(self):
        """Every data volume (no root volume) as {id, state, size, type, iops, throughput, zone,
        encrypted, kms, snapshot, tags, attachments: [{instance, device, state}]}."""
        raise NotImplementedError

    def snapshots(self):
        """Every snapshot as {id, volume, state, size, tags}."""
        raise NotImplementedError

    def calls(self):
        """{action: number of calls} since the last reset_calls(), or None when the peer does
        not count."""
        return None

    def reset_calls(self):
        pass

    def live_volumes(self):
        return [v for v in self.volumes() if v["state"] not in ("deleting", "deleted")]

    def volume(self, vid):
        found = [v for v in self.volumes() if v["id"] == vid]
        return found[0] if found else None

    def attachments(self):
        """[(volume, instance, device, state)] of every data volume."""
        return sorted((v["id"], a["instance"], a["device"], a["state"])
                      for v in self.volumes() for a in v["attachments"])


class SimCloud(Cloud):
    name = "ec2sim"

    def __init__(self, ctx, args=()):
        self.sim = ctx.ec2sim(args=list(args))
        self.endpoint = self.sim.endpoint
        self.imds = self.sim.imds
        self.key, self.secret = SIM_KEY, SIM_SECRET
        self.instances = {"a1": "i-0a000000000000001", "a2": "i-0a000000000000002",
                          "b1": "i-0b000000000000003"}

    def volumes(self):
        out = []
        for v in self.sim.state()["volumes"]:
            if v["root"]:
                continue
            out.append({"id": v["volumeId"], "state": v["status"], "size": v["size"],
                        "type": v["volumeType"], "iops": v["iops"],
                        "throughput": v["throughput"], "zone": v["availabilityZone"],
                        "encrypted": v["encrypted"], "kms": v["kmsKeyId"],
                        "snapshot": v["snapshotId"], "tags": v["tags"],
                        "token": v["clientToken"],
                        "multi_attach": v["multiAttachEnabled"],
                        "init_rate": v["volumeInitializationRate"],
                        "attachments": [{"instance": a["instanceId"], "device": a["device"],
                                         "state": a["status"]} for a in v["attachmentSet"]]})
        return out

    def snapshots(self):
        return [{"id": s["snapshotId"], "volume": s["volumeId"], "state": s["status"],
                 "size": s["volumeSize"], "tags": s["tags"]}
                for s in self.sim.state()["snapshots"]]

    def calls(self):
        return self.sim.stats()["calls"]

    def stats(self):
        return self.sim.stats()

    def reset_calls(self):
        self.sim.control("POST", "/_sim/stats/reset")


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class MotoCloud(Cloud):
    """moto's server on a free port, three instances made in it (two in zone a, one in b)."""

    name = "moto"
    # moto also ignores CreateVolume's ClientToken, attaches a volume that is attached already
    # (to another instance, or to the same one) instead of VolumeInUse, and has no attachment
    # limit: the controller settles those itself, so no test leaves them out.
    lacks = {
        "delays": "moto changes every state at once",
        "faults": "moto injects no fault",
        "modify_rate": "moto has no modification rate limit",
        "counting": "moto does not count calls",
        "zones": "moto attaches a volume to an instance in another zone",
    }

    def __init__(self, ctx):
        if not os.path.isfile(os.path.join(MOTO_PATH, "moto", "server.py")):
            raise Skip("moto is not installed: want its source tree (getmoto/moto 5.1.22) in "
                       "%s (set MOTO_PATH)" % MOTO_PATH)
        port = _free_port()
        self.log_path = os.path.join(ctx.tmp, "moto.log")
        # The first three calls are free: they make the user whose key signs every other one,
        # and moto checks those signatures.
        env = {"PATH": "/usr/bin:/bin", "HOME": ctx.tmp, "PYTHONPATH": MOTO_PATH,
               "MOTO_EC2_LOAD_DEFAULT_AMIS": "false", "INITIAL_NO_AUTH_ACTION_COUNT": "3"}
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1",
                                      "-p", str(port)], env=env, stdout=self.log,
                                     stderr=self.log)
        self.dir = ctx.tmp
        ctx.sims.append(self)
        self.endpoint = "http://127.0.0.1:%d" % port
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise Skip("moto did not start (exit %d): %s" % (self.proc.returncode,
                                                                 self.logs()[-500:]))
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("moto did not listen within 20 s")
                time.sleep(0.05)
        self.key, self.secret = self._user()
        ec2 = self.client()
        try:
            botocore_client(self.endpoint, self.key, "not-the-secret").describe_volumes()
            raise AssertionError("moto took a request signed with the wrong secret")
        except Exception as e:
            assert "AuthFailure" in str(e), e
        self.instances, self.roots = {}, set()
        for name, zone in (("a1", ZONE_A), ("a2", ZONE_A), ("b1", ZONE_B)):
            inst = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
                                     InstanceType="m5.large",
                                     Placement={"AvailabilityZone": zone})["Instances"][0]
            self.instances[name] = inst["InstanceId"]
            for m in inst.get("BlockDeviceMappings", []):
                self.roots.add(m["Ebs"]["VolumeId"])

    def _user(self):
        """An IAM user allowed ec2:*, made with moto's three unsigned calls: its key."""
        import botocore.session
        iam = botocore.session.get_session().create_client(
            "iam", region_name=REGION, endpoint_url=self.endpoint,
            aws_access_key_id="AKIAMOTOBOOTSTRAP000", aws_secret_access_key="bootstrap")
        iam.create_user(UserName="volplug")
        key = iam.create_access_key(UserName="volplug")["AccessKey"]
        iam.put_user_policy(UserName="volplug", PolicyName="ec2", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "ec2:*", "Resource": "*"}]}))
        return key["AccessKeyId"], key["SecretAccessKey"]

    def logs(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def volumes(self):
        out = []
        for v in self.client().describe_volumes()["Volumes"]:
            if v["VolumeId"] in self.roots:
                continue
            out.append({"id": v["VolumeId"], "state": v["State"], "size": v["Size"],
                        "type": v["VolumeType"], "iops": v.get("Iops"),
                        "throughput": v.get("Throughput"), "zone": v["AvailabilityZone"],
                        "encrypted": v.get("Encrypted"), "kms": v.get("KmsKeyId"),
                        "snapshot": v.get("SnapshotId", ""),
                        "tags": {t["Key"]: t["Value"] for t in v.get("Tags", [])},
                        "token": None,
                        "attachments": [{"instance": a["InstanceId"], "device": a["Device"],
                                         "state": a["State"]} for a in v["Attachments"]]})
        return out

    def snapshots(self):
        return [{"id": s["SnapshotId"], "volume": s["VolumeId"], "state": s["State"],
                 "size": s["VolumeSize"], "tags": {t["Key"]: t["Value"]
                                                    for t in s.get("Tags", [])}}
                for s in self.client().describe_snapshots(OwnerIds=["self"])["Snapshots"]]


def ebs_daemon(ctx, cloud, mode="controller", args=(), env=None, name="ebs-ctl", start=True):
    """volplugd with --backend ebs against cloud, credentials in its environment."""
    e = cloud.env()
    e.update(env or {})
    return ctx.daemon(mode, name=name, env=e, start=start,
                      args=["--backend", "ebs", "--ec2-endpoint", cloud.endpoint] + list(args))


def http_json(url, method="GET", body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.load(r)
