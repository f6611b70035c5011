# SPDX-License-Identifier: Apache-2.0
"""ec2sim, the project's EC2 simulator (tests/ec2sim), driven by botocore's own EC2 and STS
clients (Debian's python3-botocore): every reply here went through the parser an AWS SDK uses,
so passing means the simulator speaks the real wire format. Also raw signed requests for what
an SDK never sends (unknown actions and parameters, tampered bodies, stale dates), and the
IMDS stand-in over plain HTTP."""

import json
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

from harness import Skip, run, wait_for

try:
    import botocore.session
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.config import Config
    from botocore.credentials import Credentials
    from botocore.exceptions import ClientError
except ImportError:
    botocore = None

KEY = "AKIAEC2SIMULATOR0001"
SECRET = "ec2sim/secret/key/for/tests/only/00000000"
REGION = "us-east-1"
ZONE_A, ZONE_B = "us-east-1a", "us-east-1b"
NITRO_1, NITRO_2, XEN = "i-0a000000000000001", "i-0a000000000000002", "i-0b000000000000003"
NS = "{http://ec2.amazonaws.com/doc/2016-11-15/}"
_SESSION = []


def client(sim, service="ec2", key=KEY, secret=SECRET, token=None, region=REGION, attempts=1,
           validate=True):
    """A botocore client for the simulator; by default without retries, so every error shows.
    validate=False lets bad parameters through to the simulator."""
    if botocore is None:
        raise Skip("python3-botocore is not installed (scripts/install-deps installs it)")
    if not _SESSION:
        _SESSION.append(botocore.session.get_session())
    return _SESSION[0].create_client(
        service, region_name=region, endpoint_url=sim.endpoint, aws_access_key_id=key,
        aws_secret_access_key=secret, aws_session_token=token,
        config=Config(retries={"total_max_attempts": attempts}, read_timeout=30,
                      parameter_validation=validate))


def start(ctx, *args):
    if botocore is None:
        raise Skip("python3-botocore is not installed (scripts/install-deps installs it)")
    return ctx.ec2sim(args=args)


def expect(code, call, status=None, match=None, **kw):
    """Calls a botocore client method and asserts the EC2 error code (status, message part)."""
    try:
        reply = call(**kw)
    except ClientError as e:
        err, meta = e.response["Error"], e.response["ResponseMetadata"]
        assert err["Code"] == code, "want %s, got %s: %s" % (code, err["Code"], err["Message"])
        if status is not None:
            assert meta["HTTPStatusCode"] == status, \
                "%s: want HTTP %d, got %d" % (code, status, meta["HTTPStatusCode"])
        if match is not None:
            assert match in err["Message"], "%s: message %r lacks %r" % (code, err["Message"],
                                                                        match)
        assert meta.get("RequestId"), "error reply without RequestID: %s" % e.response
        return e
    raise AssertionError("want %s, got success: %s" % (code, reply))


class _SignAt(SigV4Auth if botocore else object):
    """botocore's signer with the request time chosen by the test."""

    def __init__(self, credentials, service, region, when):
        super().__init__(credentials, service, region)
        self.when = when

    def add_auth(self, request):
        request.context["timestamp"] = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(self.when))
        self._modify_request_before_signing(request)
        canonical = self.canonical_request(request)
        signature = self.signature(self.string_to_sign(request, canonical), request)
        self._inject_signature_to_request(request, signature)


def raw(sim, params, key=KEY, secret=SECRET, token=None, service="ec2", region=REGION,
        when=None, tamper=None, method="POST", sign=True):
    """Sends a hand-made Query request, signed by botocore unless sign is False; tamper(body)
    changes the body after signing. Returns (HTTP status, content type, parsed XML root)."""
    body = urllib.parse.urlencode(params)
    url = sim.endpoint + "/"
    if method == "GET":
        url, body = url + "?" + body, ""
    req = AWSRequest(method=method, url=url, data=body.encode(),
                     headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
                     if method == "POST" else {})
    if sign:
        _SignAt(Credentials(key, secret, token), service, region,
                time.time() if when is None else when).add_auth(req)
    data = (tamper(body) if tamper else body).encode() if method == "POST" else None
    http = urllib.request.Request(url, data=data, headers=dict(req.headers.items()),
                                  method=method)
    try:
        with urllib.request.urlopen(http, timeout=10) as r:
            return r.status, r.headers["Content-Type"], ET.fromstring(r.read())
    except urllib.error.HTTPError as e:
        return e.code, e.headers["Content-Type"], ET.fromstring(e.read())


def error_of(root):
    """(Code, Message) of an EC2 error document, asserting its shape."""
    assert root.tag == "Response", root.tag
    assert root.find("RequestID").text, "no RequestID"
    err = root.find("Errors/Error")
    return err.find("Code").text, err.find("Message").text


def volume(ec2, vid):
    return ec2.describe_volumes(VolumeIds=[vid])["Volumes"][0]


def wait_state(ec2, vid, state, timeout=10):
    return wait_for(lambda: volume(ec2, vid)["State"] == state and volume(ec2, vid),
                    timeout, "%s to be %s" % (vid, state))


def attachment_state(ec2, vid):
    atts = volume(ec2, vid)["Attachments"]
    return atts[0]["State"] if atts else None


def create(ec2, size=10, zone=ZONE_A, **kw):
    return ec2.create_volume(AvailabilityZone=zone, Size=size, **kw)


# --- the wire format ----------------------------------------------------------------------


def test_wire_format(ctx):
    """Success replies are in the 2016-11-15 namespace with a requestId; errors are the EC2
    error document with the right status; unknown actions and parameters are refused in XML."""
    sim = start(ctx)
    status, ctype, root = raw(sim, {"Action": "DescribeAvailabilityZones",
                                    "Version": "2016-11-15"})
    assert status == 200 and ctype.startswith("text/xml"), (status, ctype)
    assert root.tag == NS + "DescribeAvailabilityZonesResponse", root.tag
    assert root.find(NS + "requestId").text
    zones = [i.find(NS + "zoneName").text for i in root.find(NS + "availabilityZoneInfo")]
    assert zones == ["us-east-1a", "us-east-1b", "us-east-1c"], zones

    status, ctype, root = raw(sim, {"Action": "DescribeVolumes", "Version": "2016-11-15"},
                              method="GET")
    assert status == 200 and root.tag == NS + "DescribeVolumesResponse", (status, root.tag)

    status, ctype, root = raw(sim, {"Action": "LaunchRockets", "Version": "2016-11-15"})
    assert (status, ctype.split(";")[0]) == (400, "text/xml"), (status, ctype)
    assert error_of(root) == ("InvalidAction", "The action LaunchRockets is not valid for this "
                              "web service."), error_of(root)

    status, _, root = raw(sim, {"Version": "2016-11-15"})
    assert (status, error_of(root)[0]) == (400, "MissingAction"), error_of(root)
    status, _, root = raw(sim, {"Action": "DescribeVolumes", "Version": "2014-01-01"})
    assert (status, error_of(root)[0]) == (400, "NoSuchVersion"), error_of(root)

    for params, name in (({"Frobnicate": "1"}, "Frobnicate"),
                         ({"VolumeId.x": "vol-1"}, "VolumeId.x"),
                         ({"Filter.1.Nme": "status"}, "Filter.1.Nme")):
        status, _, root = raw(sim, dict(params, Action="DescribeVolumes", Version="2016-11-15"))
        code, message = error_of(root)
        assert (status, code) == (400, "UnknownParameter"), (status, code, message)
        assert name in message, message

    status, _, root = raw(sim, {"Action": "CreateVolume", "Version": "2016-11-15",
                                "AvailabilityZone": ZONE_A, "Size": "ten"})
    code, message = error_of(root)
    assert code == "InvalidParameterValue" and "Size" in message, (code, message)

    ec2 = client(sim)
    expect("DryRunOperation", ec2.describe_volumes, status=412, DryRun=True)
    stats = sim.stats()
    assert stats["calls"]["LaunchRockets"] == 1 and \
        stats["errors"]["LaunchRockets"] == {"InvalidAction": 1}, stats


def test_availability_zones_and_instances(ctx):
    """DescribeAvailabilityZones and DescribeInstances give what the node side reads: zone
    names and IDs, instance type, state, zone and the block device mappings."""
    sim = start(ctx)
    ec2 = client(sim)
    zones = ec2.describe_availability_zones()["AvailabilityZones"]
    assert [(z["ZoneName"], z["ZoneId"], z["State"]) for z in zones] == [
        ("us-east-1a", "use1-az1", "available"), ("us-east-1b", "use1-az2", "available"),
        ("us-east-1c", "use1-az3", "available")], zones
    assert [z["ZoneName"] for z in ec2.describe_availability_zones(
        Filters=[{"Name": "zone-id", "Values": ["use1-az2"]}])["AvailabilityZones"]] == [ZONE_B]
    expect("InvalidParameterValue", ec2.describe_availability_zones, match="us-east-1z",
           ZoneNames=["us-east-1z"])

    reply = ec2.describe_instances(InstanceIds=[NITRO_1])
    inst = reply["Reservations"][0]["Instances"][0]
    assert (inst["InstanceId"], inst["InstanceType"], inst["State"], inst["Placement"]
            ["AvailabilityZone"], inst["RootDeviceName"]) == (
        NITRO_1, "m5.large", {"Code": 16, "Name": "running"}, ZONE_A, "/dev/xvda"), inst
    [root] = inst["BlockDeviceMappings"]
    assert root["DeviceName"] == "/dev/xvda" and root["Ebs"]["Status"] == "attached", root
    assert volume(ec2, root["Ebs"]["VolumeId"])["Attachments"][0]["InstanceId"] == NITRO_1

    all_ids = [i["InstanceId"] for r in ec2.describe_instances()["Reservations"]
               for i in r["Instances"]]
    assert sorted(all_ids) == [NITRO_1, NITRO_2, XEN], all_ids
    in_b = ec2.describe_instances(Filters=[{"Name": "availability-zone", "Values": [ZONE_B]}])
    assert [i["InstanceId"] for r in in_b["Reservations"] for i in r["Instances"]] == [XEN]
    expect("InvalidInstanceID.NotFound", ec2.describe_instances, match="i-0ffffffffffffffff",
           InstanceIds=["i-0ffffffffffffffff"])
    expect("InvalidInstanceID.Malformed", ec2.describe_instances, InstanceIds=["node-1"])
    expect("InvalidParameterCombination", ec2.describe_instances, InstanceIds=[NITRO_1],
           MaxResults=5)


# --- volumes ------------------------------------------------------------------------------


def test_create_volume_takes_time(ctx):
    """A new volume is `creating` for the configured delay, then `available`, with the
    parameters asked for and EBS's defaults for the rest."""
    sim = start(ctx, "--delay", "create=0.6")
    ec2 = client(sim)
    began = time.monotonic()
    vol = create(ec2, size=20, VolumeType="gp3", Encrypted=True, TagSpecifications=[
        {"ResourceType": "volume", "Tags": [{"Key": "CSIVolumeName", "Value": "pvc-1"}]}])
    assert vol["State"] == "creating", vol
    assert volume(ec2, vol["VolumeId"])["State"] == "creating"
    got = wait_state(ec2, vol["VolumeId"], "available")
    assert time.monotonic() - began >= 0.55, "available after %.2fs" % (time.monotonic() - began)
    assert (got["Size"], got["VolumeType"], got["Iops"], got["Throughput"], got["Encrypted"],
            got["AvailabilityZone"], got["Tags"]) == (
        20, "gp3", 3000, 125, True, ZONE_A, [{"Key": "CSIVolumeName", "Value": "pvc-1"}]), got
    assert got["KmsKeyId"].startswith("arn:aws:kms:us-east-1:123456789012:key/"), got
    assert got["VolumeId"].startswith("vol-") and len(got["VolumeId"]) == 21, got

    gp2 = create(ec2, size=500)
    assert (gp2["VolumeType"], gp2["Iops"], "Throughput" in gp2) == ("gp2", 1500, False), gp2
    assert create(ec2, size=10)["Iops"] == 100
    io2 = create(ec2, size=100, VolumeType="io2", Iops=50000)
    assert (io2["VolumeType"], io2["Iops"]) == ("io2", 50000), io2
    st1 = create(ec2, size=125, VolumeType="st1")
    assert "Iops" not in st1, st1
    # botocore's own waiter polls DescribeVolumes until the state is right.
    ec2.get_waiter("volume_available").wait(VolumeIds=[st1["VolumeId"]],
                                            WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})


def test_volume_parameters_checked(ctx):
    """Sizes, IOPS and throughput outside EBS's limits, parameters a type does not take, a
    zone the region lacks: each refused with the parameter named, and nothing created."""
    sim = start(ctx)
    ec2 = client(sim)
    cases = [
        ("InvalidParameterValue", "Size", dict(Size=20000)),
        ("InvalidParameterValue", "Size", dict(Size=0)),
        ("InvalidParameterValue", "Size", dict(Size=100, VolumeType="st1")),
        ("InvalidParameterValue", "Size", dict(Size=2000, VolumeType="standard")),
        ("InvalidParameterValue", "Size", dict(Size=2, VolumeType="io1", Iops=100)),
        ("InvalidParameterValue", "VolumeType", dict(Size=10, VolumeType="gp9")),
        ("InvalidParameterCombination", "Iops", dict(Size=10, VolumeType="gp2", Iops=3000)),
        ("InvalidParameterCombination", "Throughput", dict(Size=10, VolumeType="io1",
                                                           Iops=100, Throughput=200)),
        ("MissingParameter", "Iops", dict(Size=10, VolumeType="io1")),
        ("InvalidParameterValue", "Iops", dict(Size=100, VolumeType="io1", Iops=64001)),
        ("InvalidParameterValue", "Iops", dict(Size=10, VolumeType="io1", Iops=1000)),
        ("InvalidParameterValue", "Iops", dict(Size=10, VolumeType="gp3", Iops=16001)),
        ("InvalidParameterValue", "Iops", dict(Size=8, VolumeType="gp3", Iops=4001)),
        ("InvalidParameterValue", "Iops", dict(Size=10, VolumeType="gp3", Iops=2999)),
        ("InvalidParameterValue", "Throughput", dict(Size=100, VolumeType="gp3", Iops=16000,
                                                     Throughput=2001)),
        # gp3 since September 2025: 64 TiB, 80,000 IOPS, 2,000 MiB/s
        ("InvalidParameterValue", "Size", dict(Size=65537, VolumeType="gp3")),
        ("InvalidParameterValue", "Iops", dict(Size=200, VolumeType="gp3", Iops=80001)),
        ("InvalidParameterCombination", "io1 and io2", dict(Size=10, MultiAttachEnabled=True)),
        ("InvalidParameterValue", "Throughput", dict(Size=100, VolumeType="gp3",
                                                     Throughput=751)),
        ("InvalidParameterDependency", "KmsKeyId", dict(Size=10, KmsKeyId="alias/mine")),
        ("InvalidParameterValue", "KmsKeyId", dict(Size=10, Encrypted=True, KmsKeyId="k e y")),
        ("MissingParameter", "size", dict()),
        ("InvalidParameterValue", "TagSpecification.1.ResourceType", dict(
            Size=10, TagSpecifications=[{"ResourceType": "snapshot",
                                         "Tags": [{"Key": "a", "Value": "b"}]}])),
        ("InvalidParameterValue", "aws:", dict(Size=10, TagSpecifications=[
            {"ResourceType": "volume", "Tags": [{"Key": "aws:x", "Value": "b"}]}])),
        ("InvalidParameterValue", "ClientToken", dict(Size=10, ClientToken="t" * 65)),
    ]
    for code, name, kw in cases:
        expect(code, ec2.create_volume, status=400, match=name, AvailabilityZone=ZONE_A, **kw)
    expect("InvalidZone.NotFound", ec2.create_volume, match="us-east-1z",
           AvailabilityZone="us-east-1z", Size=10)
    expect("InvalidZone.NotFound", ec2.create_volume, AvailabilityZone="eu-west-1a", Size=10)
    expect("InvalidSnapshot.NotFound", ec2.create_volume, AvailabilityZone=ZONE_A,
           SnapshotId="snap-0123456789abcdef0")
    # The limits hold exactly at their edges.
    for kw in (dict(Size=16384), dict(Size=8, VolumeType="gp3", Iops=4000),
               dict(Size=100, VolumeType="gp3", Iops=4000, Throughput=1000),
               dict(Size=4, VolumeType="io1", Iops=200), dict(Size=65536, VolumeType="io2",
                                                            Iops=256000)):
        ec2.create_volume(AvailabilityZone=ZONE_A, **kw)
    assert len(sim.volumes()) == 5, sim.volumes()


def test_client_token(ctx):
    """The same ClientToken with the same parameters gives the same volume, also from calls
    racing each other; with other parameters, or once the volume is deleted, it is refused."""
    sim = start(ctx, "--state-delay", "0.2")
    ec2 = client(sim)
    first = create(ec2, ClientToken="pvc-1")
    again = create(ec2, ClientToken="pvc-1")
    assert again["VolumeId"] == first["VolumeId"], (first, again)
    expect("IdempotentParameterMismatch", ec2.create_volume, status=400, match="inconsistent",
           AvailabilityZone=ZONE_A, Size=11, ClientToken="pvc-1")
    expect("IdempotentParameterMismatch", ec2.create_volume, AvailabilityZone=ZONE_A, Size=10,
           VolumeType="gp3", ClientToken="pvc-1")

    ids, errors = [], []

    def racer(ec2):
        try:
            ids.append(create(ec2, ClientToken="pvc-2")["VolumeId"])
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=racer, args=(client(sim),)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(ids) == 8 and len(set(ids)) == 1, (ids, errors)
    assert len(sim.volumes()) == 2, sim.volumes()
    assert sim.state()["clientTokens"] == {"pvc-1": first["VolumeId"], "pvc-2": ids[0]}

    wait_state(ec2, first["VolumeId"], "available")
    ec2.delete_volume(VolumeId=first["VolumeId"])
    expect("IdempotentParameterMismatch", ec2.create_volume, match="already deleted",
           AvailabilityZone=ZONE_A, Size=10, ClientToken="pvc-1")
    assert create(ec2, ClientToken="pvc-1-2")["VolumeId"] != first["VolumeId"]


def test_delete_volume(ctx):
    """DeleteVolume: `deleting` for the delay, then gone (InvalidVolume.NotFound); refused
    while creating (IncorrectState) or attached (VolumeInUse)."""
    sim = start(ctx, "--state-delay", "0.4")
    ec2 = client(sim)
    vid = create(ec2)["VolumeId"]
    expect("IncorrectState", ec2.delete_volume, match=vid, VolumeId=vid)
    wait_state(ec2, vid, "available")
    ec2.delete_volume(VolumeId=vid)
    assert volume(ec2, vid)["State"] == "deleting"
    ec2.delete_volume(VolumeId=vid)  # again while deleting: accepted
    wait_for(lambda: not sim.volumes(), 5, "the volume to go")
    expect("InvalidVolume.NotFound", ec2.describe_volumes, status=400,
           match="The volume '%s' does not exist." % vid, VolumeIds=[vid])
    expect("InvalidVolume.NotFound", ec2.delete_volume, VolumeId=vid)
    expect("InvalidVolumeID.Malformed", ec2.delete_volume, VolumeId="pvc-123")


def test_describe_volumes_filters_and_pages(ctx):
    """Filters by tag, tag key, zone, status (with wildcards); MaxResults pages through every
    volume exactly once; the paging parameters are checked as EC2 checks them."""
    sim = start(ctx)
    ec2 = client(sim)
    made = {}
    for i in range(12):
        tags = [{"Key": "CSIVolumeName", "Value": "pvc-%d" % i}]
        if i % 3 == 0:
            tags.append({"Key": "team", "Value": "blue"})
        vol = create(ec2, zone=ZONE_B if i % 2 else ZONE_A, TagSpecifications=[
            {"ResourceType": "volume", "Tags": tags}])
        made[vol["VolumeId"]] = i

    def ids(**kw):
        return sorted(v["VolumeId"] for v in ec2.describe_volumes(**kw)["Volumes"])

    def made_where(cond):
        return sorted(v for v, i in made.items() if cond(i))

    assert ids(Filters=[{"Name": "tag:CSIVolumeName", "Values": ["pvc-3", "pvc-4"]}]) == \
        made_where(lambda i: i in (3, 4))
    assert ids(Filters=[{"Name": "tag-key", "Values": ["team"]}]) == \
        made_where(lambda i: i % 3 == 0)
    assert ids(Filters=[{"Name": "tag:CSIVolumeName", "Values": ["pvc-1*"]}]) == \
        made_where(lambda i: i in (1, 10, 11))
    assert ids(Filters=[{"Name": "availability-zone", "Values": [ZONE_B]},
                        {"Name": "tag:team", "Values": ["blue"]}]) == \
        made_where(lambda i: i % 2 and i % 3 == 0)
    assert len(ids(Filters=[{"Name": "status", "Values": ["in-use"]}])) == 3  # root volumes
    assert ids(VolumeIds=list(made)[:2]) == sorted(list(made)[:2])

    seen, token, pages = [], None, 0
    while True:
        kw = {"MaxResults": 5, "Filters": [{"Name": "status", "Values": ["available"]}]}
        if token:
            kw["NextToken"] = token
        reply = ec2.describe_volumes(**kw)
        assert len(reply["Volumes"]) <= 5
        seen += [v["VolumeId"] for v in reply["Volumes"]]
        pages += 1
        token = reply.get("NextToken")
        if not token:
            break
    assert sorted(seen) == sorted(made) and pages == 3, (pages, len(seen))
    paginator = ec2.get_paginator("describe_volumes")
    assert sum(len(p["Volumes"]) for p in paginator.paginate(
        PaginationConfig={"PageSize": 5})) == 15

    expect("InvalidParameterValue", ec2.describe_volumes, match="maxResults", MaxResults=4)
    expect("InvalidParameterValue", ec2.describe_volumes, match="maxResults", MaxResults=501)
    expect("InvalidParameterCombination", ec2.describe_volumes, VolumeIds=list(made)[:1],
           MaxResults=5)
    expect("InvalidPaginationToken", ec2.describe_volumes, MaxResults=5, NextToken="garbage")
    expect("InvalidParameterValue", ec2.describe_volumes, match="'colour'",
           Filters=[{"Name": "colour", "Values": ["red"]}])
    missing = "vol-0123456789abcdef0"
    expect("InvalidVolume.NotFound", ec2.describe_volumes, match=missing,
           VolumeIds=[list(made)[0], missing])


def test_tags(ctx):
    """CreateTags and DeleteTags on volumes and snapshots, with EC2's rules."""
    sim = start(ctx)
    ec2 = client(sim)
    vid = create(ec2)["VolumeId"]
    sid = ec2.create_snapshot(VolumeId=vid)["SnapshotId"]
    ec2.create_tags(Resources=[vid, sid], Tags=[{"Key": "a", "Value": "1"},
                                                {"Key": "b", "Value": "2"}])
    assert {t["Key"]: t["Value"] for t in volume(ec2, vid)["Tags"]} == {"a": "1", "b": "2"}
    ec2.delete_tags(Resources=[vid], Tags=[{"Key": "a", "Value": "other"}])  # value differs
    ec2.delete_tags(Resources=[vid], Tags=[{"Key": "b"}])
    assert volume(ec2, vid)["Tags"] == [{"Key": "a", "Value": "1"}]
    snap = ec2.describe_snapshots(SnapshotIds=[sid])["Snapshots"][0]
    assert sorted(t["Key"] for t in snap["Tags"]) == ["a", "b"], snap
    ec2.delete_tags(Resources=[sid])
    assert "Tags" not in ec2.describe_snapshots(SnapshotIds=[sid])["Snapshots"][0]

    expect("InvalidParameterValue", ec2.create_tags, match="aws:", Resources=[vid],
           Tags=[{"Key": "aws:cloudformation", "Value": "x"}])
    expect("InvalidVolume.NotFound", ec2.create_tags, Resources=["vol-0123456789abcdef0"],
           Tags=[{"Key": "a", "Value": "1"}])
    expect("InvalidID", ec2.create_tags, Resources=["pvc-1"], Tags=[{"Key": "a", "Value": "1"}])
    many = [{"Key": "k%d" % i, "Value": "v"} for i in range(50)]
    expect("TagLimitExceeded", ec2.create_tags, Resources=[vid], Tags=many)
    assert volume(ec2, vid)["Tags"] == [{"Key": "a", "Value": "1"}], "a refused call changed tags"


# --- attachments --------------------------------------------------------------------------


def test_attach_detach(ctx):
    """attaching -> attached, detaching -> available, each taking the delay; the instance's
    block device mappings follow; the refusals EC2 gives for each wrong move."""
    sim = start(ctx, "--state-delay", "0.4")
    ec2 = client(sim)
    vid = create(ec2)["VolumeId"]
    expect("IncorrectState", ec2.attach_volume, match="creating", VolumeId=vid,
           InstanceId=NITRO_1, Device="/dev/xvdba")
    wait_state(ec2, vid, "available")
    att = ec2.attach_volume(VolumeId=vid, InstanceId=NITRO_1, Device="/dev/xvdba")
    assert (att["State"], att["Device"], att["InstanceId"]) == \
        ("attaching", "/dev/xvdba", NITRO_1), att
    assert volume(ec2, vid)["State"] == "in-use"
    assert attachment_state(ec2, vid) == "attaching"
    expect("VolumeInUse", ec2.attach_volume, match=vid, VolumeId=vid, InstanceId=NITRO_2,
           Device="/dev/xvdba")
    expect("VolumeInUse", ec2.attach_volume, VolumeId=vid, InstanceId=NITRO_1,
           Device="/dev/xvdbb")
    expect("VolumeInUse", ec2.delete_volume, match=NITRO_1, VolumeId=vid)
    expect("IncorrectState", ec2.detach_volume, match="attaching", VolumeId=vid)
    wait_for(lambda: attachment_state(ec2, vid) == "attached", 5, "attached")

    inst = ec2.describe_instances(InstanceIds=[NITRO_1])["Reservations"][0]["Instances"][0]
    mappings = {m["DeviceName"]: m["Ebs"]["VolumeId"] for m in inst["BlockDeviceMappings"]}
    assert mappings.get("/dev/xvdba") == vid and "/dev/xvda" in mappings, mappings

    other = create(ec2)["VolumeId"]
    wait_state(ec2, other, "available")
    expect("InvalidParameterValue", ec2.attach_volume, match="/dev/xvdba is already in use",
           VolumeId=other, InstanceId=NITRO_1, Device="/dev/xvdba")
    expect("InvalidParameterValue", ec2.attach_volume, match="Device", VolumeId=other,
           InstanceId=NITRO_1, Device="/dev/nvme1n1")
    expect("InvalidVolume.ZoneMismatch", ec2.attach_volume, VolumeId=other, InstanceId=XEN,
           Device="/dev/xvdbb")
    expect("InvalidInstanceID.NotFound", ec2.attach_volume, VolumeId=other,
           InstanceId="i-0ffffffffffffffff", Device="/dev/xvdbb")
    expect("InvalidAttachment.NotFound", ec2.detach_volume, VolumeId=vid, InstanceId=NITRO_2)
    expect("IncorrectState", ec2.detach_volume, match="available", VolumeId=other)
    root = mappings["/dev/xvda"]
    expect("OperationNotPermitted", ec2.detach_volume, VolumeId=root)

    began = time.monotonic()
    det = ec2.detach_volume(VolumeId=vid, InstanceId=NITRO_1)
    assert det["State"] == "detaching", det
    expect("IncorrectState", ec2.detach_volume, match="detaching", VolumeId=vid)
    wait_state(ec2, vid, "available")
    assert time.monotonic() - began >= 0.35
    assert volume(ec2, vid)["Attachments"] == []
    inst = ec2.describe_instances(InstanceIds=[NITRO_1])["Reservations"][0]["Instances"][0]
    assert [m["DeviceName"] for m in inst["BlockDeviceMappings"]] == ["/dev/xvda"]
    # Free again: the other instance may have it now.
    ec2.attach_volume(VolumeId=vid, InstanceId=NITRO_2, Device="/dev/xvdba")


def fill(ec2, instance, zone, count):
    """Attaches count new volumes to instance; returns their IDs."""
    ids = []
    for i in range(count):
        vid = create(ec2, zone=zone)["VolumeId"]
        ec2.attach_volume(VolumeId=vid, InstanceId=instance,
                          Device="/dev/xvd%s%s" % ("bcdefgh"[i // 26], "abcdefghijklmnopqrstuvwxyz"
                                                   [i % 26]))
        ids.append(vid)
    return ids


def test_attachment_limits(ctx):
    """Nitro: 28 slots shared by EBS volumes (root included) and network interfaces, so 26
    data volumes with one interface; Xen: 40 EBS volumes. Then AttachmentLimitExceeded."""
    sim = start(ctx)
    ec2 = client(sim)
    fill(ec2, NITRO_1, ZONE_A, 26)
    spare = create(ec2)["VolumeId"]
    expect("AttachmentLimitExceeded", ec2.attach_volume, status=400, match=NITRO_1,
           VolumeId=spare, InstanceId=NITRO_1, Device="/dev/xvdzz")
    assert volume(ec2, spare)["State"] == "available", "a refused attach changed the volume"

    sim.config(enis=3)
    fill(ec2, NITRO_2, ZONE_A, 24)
    expect("AttachmentLimitExceeded", ec2.attach_volume, VolumeId=spare, InstanceId=NITRO_2,
           Device="/dev/xvdzz")

    fill(ec2, XEN, ZONE_B, 39)
    spare_b = create(ec2, zone=ZONE_B)["VolumeId"]
    expect("AttachmentLimitExceeded", ec2.attach_volume, match="t2.medium", VolumeId=spare_b,
           InstanceId=XEN, Device="/dev/xvdzz")
    # Detaching frees a slot.
    first = [m for m in ec2.describe_instances(InstanceIds=[XEN])["Reservations"][0]
             ["Instances"][0]["BlockDeviceMappings"] if m["DeviceName"] != "/dev/xvda"][0]
    ec2.detach_volume(VolumeId=first["Ebs"]["VolumeId"])
    wait_state(ec2, first["Ebs"]["VolumeId"], "available")
    ec2.attach_volume(VolumeId=spare_b, InstanceId=XEN, Device="/dev/xvdzz")


# --- modifications ------------------------------------------------------------------------


def test_modify_volume(ctx):
    """modifying -> optimizing -> completed; the new size shows from optimizing on; the
    modification rate (VolumeModificationRateExceeded, here 1 a day); no shrinking."""
    sim = start(ctx, "--delay", "modify=0.4", "--delay", "optimize=0.4", "--modify-limit", "1")
    ec2 = client(sim)
    vid = create(ec2, size=10)["VolumeId"]
    expect("InvalidVolumeModification.NotFound", ec2.describe_volumes_modifications,
           VolumeIds=[vid])
    mod = ec2.modify_volume(VolumeId=vid, Size=20, VolumeType="gp3", Iops=4000)
    mod = mod["VolumeModification"]
    assert (mod["ModificationState"], mod["OriginalSize"], mod["TargetSize"],
            mod["OriginalVolumeType"], mod["TargetVolumeType"], mod["TargetIops"],
            mod["TargetThroughput"]) == ("modifying", 10, 20, "gp2", "gp3", 4000, 125), mod
    assert volume(ec2, vid)["Size"] == 10

    def mod_state():
        return ec2.describe_volumes_modifications(VolumeIds=[vid])["VolumesModifications"][0]
    wait_for(lambda: mod_state()["ModificationState"] == "optimizing", 5, "optimizing")
    got = volume(ec2, vid)
    assert (got["Size"], got["VolumeType"], got["Iops"]) == (20, "gp3", 4000), got
    wait_for(lambda: mod_state()["ModificationState"] == "completed", 5, "completed")
    assert mod_state()["Progress"] == 100 and "EndTime" in mod_state()

    expect("VolumeModificationRateExceeded", ec2.modify_volume, match="1 modifications in 24 "
           "hours", VolumeId=vid, Size=30)
    sim.config(modify_limit=0)
    expect("InvalidParameterValue", ec2.modify_volume, match="Size", VolumeId=vid, Size=19)
    expect("InvalidParameterCombination", ec2.modify_volume, match="No modification",
           VolumeId=vid, Size=20)
    expect("InvalidParameterValue", ec2.modify_volume, match="Throughput", VolumeId=vid,
           Throughput=1001)
    expect("MissingParameter", ec2.modify_volume, match="Iops", VolumeId=vid, VolumeType="io2")
    ec2.modify_volume(VolumeId=vid, Throughput=500)  # only throughput: gp3 keeps its IOPS
    expect("IncorrectModificationState", ec2.modify_volume, VolumeId=vid, Size=40)
    wait_for(lambda: mod_state()["ModificationState"] == "completed", 5, "completed")
    got = volume(ec2, vid)
    assert (got["Iops"], got["Throughput"]) == (4000, 500), got

    sim.config(modify_fail_next=1)
    ec2.modify_volume(VolumeId=vid, Size=50)
    wait_for(lambda: mod_state()["ModificationState"] == "failed", 5, "failed")
    assert volume(ec2, vid)["Size"] == 20, "a failed modification changed the volume"
    listed = ec2.describe_volumes_modifications(
        Filters=[{"Name": "modification-state", "Values": ["failed"]}])["VolumesModifications"]
    assert [m["VolumeId"] for m in listed] == [vid], listed


def test_modify_rate_2026(ctx):
    """EC2's rule since 2026-01-15: up to 4 modifications of a volume in a rolling 24 hours,
    each as soon as the one before completed (no 6-hour cool-down); a fifth is
    VolumeModificationRateExceeded saying when the next one is allowed;
    DescribeVolumesModifications lists the day's modifications, the latest first."""
    sim = start(ctx, "--delay", "modify=0.2", "--delay", "optimize=0.2")
    ec2 = client(sim)
    vid = create(ec2, size=10, VolumeType="gp3")["VolumeId"]
    wait_state(ec2, vid, "available")

    def mods():
        return ec2.describe_volumes_modifications(VolumeIds=[vid])["VolumesModifications"]
    t0 = time.monotonic()
    for i in range(4):
        ec2.modify_volume(VolumeId=vid, Size=11 + i)
        if i == 0:
            expect("IncorrectModificationState", ec2.modify_volume, match="being modified",
                   VolumeId=vid, Size=20)
        wait_for(lambda: mods()[0]["ModificationState"] == "completed", 5, "completed")
    took = time.monotonic() - t0
    assert took < 10, "4 modifications took %.1f s: no cool-down between them" % took
    assert [m["TargetSize"] for m in mods()] == [14, 13, 12, 11], mods()
    msg = expect("VolumeModificationRateExceeded", ec2.modify_volume, VolumeId=vid,
                 Size=20).response["Error"]["Message"]
    assert "4 modifications in 24 hours" in msg, msg
    wait = float(msg.split("again in ")[1].split(" s")[0])
    assert 86400 - 15 < wait <= 86400, "the first one leaves the window in a day: %s" % msg
    assert volume(ec2, vid)["Size"] == 14 and len(mods()) == 4
    # a shorter period: the oldest leaves the window and the next one is allowed
    sim.config(modify_period=1.0)
    time.sleep(1.1)
    ec2.modify_volume(VolumeId=vid, Size=20)
    return "4 modifications in %.1f s, the fifth refused" % took


def test_multi_attach(ctx):
    """io1 and io2 volumes made with MultiAttachEnabled attach to up to 16 instances of their
    zone; other types refuse the flag; a volume without it attaches to one instance."""
    instances = ["i-0a0000000000000%02x" % i for i in range(1, 18)]
    args = []
    for iid in instances:
        args += ["--instance", "%s:m5.large:%s" % (iid, ZONE_A)]
    args += ["--instance", "i-0b000000000000099:m5.large:%s" % ZONE_B]
    sim = start(ctx, *args)
    ec2 = client(sim)
    expect("InvalidParameterCombination", create, match="io1 and io2", ec2=ec2,
           VolumeType="gp3", MultiAttachEnabled=True)
    vid = create(ec2, VolumeType="io2", Iops=1000, MultiAttachEnabled=True)["VolumeId"]
    wait_state(ec2, vid, "available")
    assert volume(ec2, vid)["MultiAttachEnabled"] is True
    expect("InvalidVolume.ZoneMismatch", ec2.attach_volume, VolumeId=vid,
           InstanceId="i-0b000000000000099", Device="/dev/xvdba")
    for iid in instances[:16]:
        ec2.attach_volume(VolumeId=vid, InstanceId=iid, Device="/dev/xvdba")
    wait_for(lambda: all(a["State"] == "attached" for a in volume(ec2, vid)["Attachments"]),
             5, "16 attachments")
    assert sorted(a["InstanceId"] for a in volume(ec2, vid)["Attachments"]) == instances[:16]
    expect("AttachmentLimitExceeded", ec2.attach_volume, match="16 instances", VolumeId=vid,
           InstanceId=instances[16], Device="/dev/xvdba")
    expect("VolumeInUse", ec2.attach_volume, VolumeId=vid, InstanceId=instances[0],
           Device="/dev/xvdbb")
    expect("MissingParameter", ec2.detach_volume, match="InstanceId", VolumeId=vid)
    ec2.detach_volume(VolumeId=vid, InstanceId=instances[0])
    wait_for(lambda: len(volume(ec2, vid)["Attachments"]) == 15, 5, "15 attachments")
    assert volume(ec2, vid)["State"] == "in-use"
    ec2.attach_volume(VolumeId=vid, InstanceId=instances[16], Device="/dev/xvdba")
    single = create(ec2, VolumeType="io2", Iops=1000)["VolumeId"]
    wait_state(ec2, single, "available")
    ec2.attach_volume(VolumeId=single, InstanceId=instances[0], Device="/dev/xvdbc")
    expect("VolumeInUse", ec2.attach_volume, VolumeId=single, InstanceId=instances[1],
           Device="/dev/xvdbc")
    return "16 instances attached, the 17th refused"


# --- snapshots ----------------------------------------------------------------------------


def test_snapshots(ctx):
    """pending -> completed; tags, owner, paging; volumes from a snapshot (not from a pending
    one, not smaller than it); deleted snapshots are gone."""
    sim = start(ctx, "--delay", "snapshot=0.4")
    ec2 = client(sim)
    vid = create(ec2, size=30, Encrypted=True)["VolumeId"]
    snap = ec2.create_snapshot(VolumeId=vid, Description="backup", TagSpecifications=[
        {"ResourceType": "snapshot", "Tags": [{"Key": "CSIVolumeSnapshotName",
                                               "Value": "snap-1"}]}])
    sid = snap["SnapshotId"]
    assert (snap["State"], snap["VolumeId"], snap["VolumeSize"], snap["OwnerId"],
            snap["Encrypted"]) == ("pending", vid, 30, "123456789012", True), snap
    expect("IncorrectState", ec2.create_volume, match="pending", AvailabilityZone=ZONE_A,
           SnapshotId=sid)
    ec2.get_waiter("snapshot_completed").wait(SnapshotIds=[sid],
                                              WaiterConfig={"Delay": 0.2, "MaxAttempts": 50})
    assert ec2.describe_snapshots(SnapshotIds=[sid])["Snapshots"][0]["Progress"] == "100%"

    restored = ec2.create_volume(AvailabilityZone=ZONE_B, SnapshotId=sid)
    assert (restored["Size"], restored["SnapshotId"], restored["Encrypted"]) == \
        (30, sid, True), restored
    expect("InvalidParameterValue", ec2.create_volume, match="Size", AvailabilityZone=ZONE_A,
           SnapshotId=sid, Size=20)

    by_tag = ec2.describe_snapshots(Filters=[{"Name": "tag:CSIVolumeSnapshotName",
                                              "Values": ["snap-1"]}])["Snapshots"]
    assert [s["SnapshotId"] for s in by_tag] == [sid], by_tag
    assert len(ec2.describe_snapshots(OwnerIds=["self"])["Snapshots"]) == 1
    assert len(ec2.describe_snapshots(OwnerIds=["123456789012"])["Snapshots"]) == 1
    assert ec2.describe_snapshots(OwnerIds=["amazon"])["Snapshots"] == []
    assert ec2.describe_snapshots(Filters=[{"Name": "owner-id",
                                            "Values": ["999999999999"]}])["Snapshots"] == []

    more = [ec2.create_snapshot(VolumeId=vid)["SnapshotId"] for _ in range(6)]
    seen, token = [], None
    while True:
        reply = ec2.describe_snapshots(MaxResults=5, **({"NextToken": token} if token else {}))
        seen += [s["SnapshotId"] for s in reply["Snapshots"]]
        token = reply.get("NextToken")
        if not token:
            break
    assert sorted(seen) == sorted(more + [sid]), seen
    expect("InvalidParameterCombination", ec2.describe_snapshots, SnapshotIds=[sid],
           MaxResults=5)

    ec2.delete_snapshot(SnapshotId=sid)
    expect("InvalidSnapshot.NotFound", ec2.describe_snapshots, match=sid, SnapshotIds=[sid])
    expect("InvalidSnapshot.NotFound", ec2.delete_snapshot, SnapshotId=sid)
    expect("InvalidSnapshotID.Malformed", ec2.delete_snapshot, SnapshotId="backup-1")
    expect("InvalidVolume.NotFound", ec2.create_snapshot, VolumeId="vol-0123456789abcdef0")

    sim.config(snapshot_error_next=1)
    bad = ec2.create_snapshot(VolumeId=vid)["SnapshotId"]
    wait_for(lambda: ec2.describe_snapshots(SnapshotIds=[bad])["Snapshots"][0]["State"] ==
             "error", 5, "snapshot error")


# --- injected trouble ---------------------------------------------------------------------


def test_create_ends_in_error(ctx):
    """An injected failed create ends in `error`; the volume can be deleted, leaving nothing."""
    sim = start(ctx, "--state-delay", "0.2")
    ec2 = client(sim)
    sim.config(create_error_next=1)
    bad = create(ec2, ClientToken="pvc-bad")["VolumeId"]
    good = create(ec2)["VolumeId"]
    wait_state(ec2, bad, "error")
    wait_state(ec2, good, "available")
    assert create(ec2, ClientToken="pvc-bad")["State"] == "error", "token replay"
    expect("IncorrectState", ec2.attach_volume, VolumeId=bad, InstanceId=NITRO_1,
           Device="/dev/xvdba")
    ec2.delete_volume(VolumeId=bad)
    wait_for(lambda: [v["volumeId"] for v in sim.volumes()] == [good], 5, "the bad one gone")


def test_faults(ctx):
    """RequestLimitExceeded (503) and InternalError (500) at a rate, for a count, per action;
    an `after` fault acts and still answers the error; botocore's retries get through."""
    sim = start(ctx, "--seed", "7")
    ec2 = client(sim)
    sim.config(faults=[{"action": "*", "code": "RequestLimitExceeded", "count": 2}])
    expect("RequestLimitExceeded", ec2.describe_volumes, status=503)
    expect("RequestLimitExceeded", ec2.describe_volumes, status=503)
    ec2.describe_volumes()

    sim.config(faults=[{"action": "CreateVolume", "code": "InternalError", "count": 1}])
    ec2.describe_volumes()
    expect("InternalError", ec2.create_volume, status=500, AvailabilityZone=ZONE_A, Size=10)
    assert sim.volumes() == [], "a `before` fault acted"

    vid = create(ec2)["VolumeId"]
    sim.config(faults=[{"action": "AttachVolume", "code": "InternalError", "when": "after",
                        "count": 1}])
    expect("InternalError", ec2.attach_volume, VolumeId=vid, InstanceId=NITRO_1,
           Device="/dev/xvdba")
    assert attachment_state(ec2, vid) in ("attaching", "attached"), "an `after` fault did not act"

    sim.config(faults=[{"action": "*", "code": "RequestLimitExceeded", "rate": 0.5}])
    sim.control("POST", "/_sim/stats/reset")
    failures = 0
    for _ in range(60):
        try:
            ec2.describe_availability_zones()
        except ClientError as e:
            assert e.response["Error"]["Code"] == "RequestLimitExceeded"
            failures += 1
    assert 10 <= failures <= 50, failures
    stats = sim.stats()
    assert stats["faults"] == {"RequestLimitExceeded": failures}, stats
    assert stats["calls"]["DescribeAvailabilityZones"] == 60, stats
    sim.config(faults=[{"action": "*", "code": "RequestLimitExceeded", "rate": 0.3}])
    patient = client(sim, attempts=10)
    for _ in range(5):
        patient.describe_availability_zones()


def test_eventual_consistency(ctx):
    """Within the consistency window a new volume or snapshot is not found by Describe*, by ID
    or in lists; afterwards it is."""
    sim = start(ctx, "--consistency-window", "0.6")
    ec2 = client(sim)
    vid = create(ec2)["VolumeId"]
    expect("InvalidVolume.NotFound", ec2.describe_volumes, VolumeIds=[vid])
    assert vid not in [v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]]
    wait_for(lambda: vid in [v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]], 5,
             "the volume to show")
    assert volume(ec2, vid)["VolumeId"] == vid
    sid = ec2.create_snapshot(VolumeId=vid)["SnapshotId"]
    expect("InvalidSnapshot.NotFound", ec2.describe_snapshots, SnapshotIds=[sid])
    wait_for(lambda: ec2.describe_snapshots()["Snapshots"], 5, "the snapshot to show")
    assert [v["visible"] for v in sim.volumes()] == [True]


# --- credentials --------------------------------------------------------------------------


def test_signatures(ctx):
    """Only correct SigV4 signatures pass: a wrong secret, an unknown key, a body changed after
    signing, another region or service, no signature: AuthFailure (401); a stale date:
    RequestExpired; a missing session token: AuthFailure."""
    sim = start(ctx, "--credentials", KEY + ":" + SECRET,
                "--credentials", "ASIAEC2SIMSESSION001:session-secret:session-token")
    ok = {"Action": "DescribeVolumes", "Version": "2016-11-15"}
    assert raw(sim, ok)[0] == 200
    cases = [
        ("AuthFailure", "signature", dict(secret="wrong")),
        ("AuthFailure", "AKIAUNKNOWN000000000", dict(key="AKIAUNKNOWN000000000")),
        ("AuthFailure", "signature", dict(tamper=lambda b: b + "&MaxResults=5")),
        ("AuthFailure", "region", dict(region="eu-west-1")),
        ("AuthFailure", "service", dict(service="s3")),
        ("AuthFailure", "not signed", dict(sign=False)),
        ("RequestExpired", "expired", dict(when=time.time() - 900)),
        ("RequestExpired", "ahead", dict(when=time.time() + 900)),
        ("AuthFailure", "session token", dict(key="ASIAEC2SIMSESSION001",
                                              secret="session-secret")),
        ("AuthFailure", "token", dict(key="ASIAEC2SIMSESSION001", secret="session-secret",
                                      token="other-token")),
    ]
    for code, match, kw in cases:
        status, _, root = raw(sim, ok, **kw)
        got, message = error_of(root)
        assert got == code and match in message, (kw, got, message)
        assert status == (401 if code == "AuthFailure" else 400), (kw, status)
    assert raw(sim, ok, key="ASIAEC2SIMSESSION001", secret="session-secret",
               token="session-token")[0] == 200
    assert raw(sim, ok, method="GET")[0] == 200
    expect("AuthFailure", client(sim, secret="nope").describe_volumes, status=401)
    assert sim.stats()["errors"]["DescribeVolumes"] == {"AuthFailure": 9, "RequestExpired": 2}
    # libcurl's own SigV4 signing (CURLOPT_AWS_SIGV4), as a C client signs.
    curl = shutil.which("curl")
    if curl:
        for secret, code in ((SECRET, "200"), ("wrong", "401")):
            out = subprocess.run([curl, "-s", "-o", "/dev/null", "-w", "%{http_code}",
                                  "--aws-sigv4", "aws:amz:%s:ec2" % REGION, "--user",
                                  "%s:%s" % (KEY, secret), "--data", urllib.parse.urlencode(ok),
                                  sim.endpoint + "/"], capture_output=True, text=True)
            assert out.stdout == code, (secret, out.stdout, out.stderr)
    sim.config(auth=False)
    assert raw(sim, ok, sign=False)[0] == 200


def imds(sim, path, token=None, method="GET", headers=None):
    h = dict(headers or {})
    if token:
        h["X-aws-ec2-metadata-token"] = token
    req = urllib.request.Request(sim.imds + path, headers=h, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def imds_token(sim, ttl="60"):
    status, token = imds(sim, "/latest/api/token", method="PUT",
                         headers={"X-aws-ec2-metadata-token-ttl-seconds": ttl})
    assert status == 200 and len(token) > 20, (status, token)
    return token


def test_imds(ctx):
    """IMDSv2: a session token first (GET without one: 401), then the instance's identity and
    its role's temporary credentials, which sign EC2 calls until they expire; then IMDS hands
    out new ones."""
    sim = start(ctx, "--credential-ttl", "3")
    assert imds(sim, "/latest/meta-data/instance-id")[0] == 401
    assert imds(sim, "/latest/api/token", method="PUT")[0] == 400
    assert imds(sim, "/latest/api/token", method="PUT",
                headers={"X-aws-ec2-metadata-token-ttl-seconds": "21601"})[0] == 400
    token = imds_token(sim)
    assert imds(sim, "/latest/meta-data/instance-id", "wrong-token")[0] == 401
    assert imds(sim, "/latest/meta-data/instance-id", token) == (200, NITRO_1)
    assert imds(sim, "/latest/meta-data/instance-type", token) == (200, "m5.large")
    assert imds(sim, "/latest/meta-data/placement/availability-zone", token) == (200, ZONE_A)
    assert imds(sim, "/latest/meta-data/placement/region", token) == (200, REGION)
    doc = json.loads(imds(sim, "/latest/dynamic/instance-identity/document", token)[1])
    assert (doc["instanceId"], doc["region"], doc["accountId"]) == \
        (NITRO_1, REGION, "123456789012"), doc
    assert imds(sim, "/latest/meta-data/no-such-thing", token)[0] == 404
    status, role = imds(sim, "/latest/meta-data/iam/security-credentials/", token)
    assert (status, role) == (200, "ec2sim-role"), (status, role)
    status, text = imds(sim, "/latest/meta-data/iam/security-credentials/" + role, token)
    creds = json.loads(text)
    assert creds["Code"] == "Success" and creds["AccessKeyId"].startswith("ASIA"), creds

    ec2 = client(sim, key=creds["AccessKeyId"], secret=creds["SecretAccessKey"],
                 token=creds["Token"])
    ec2.describe_volumes()
    expect("AuthFailure", client(sim, key=creds["AccessKeyId"],
                                 secret=creds["SecretAccessKey"]).describe_volumes)
    time.sleep(3.1)
    expect("ExpiredToken", ec2.describe_volumes, status=400, match="expired")
    fresh = json.loads(imds(sim, "/latest/meta-data/iam/security-credentials/" + role,
                            token)[1])
    assert fresh["AccessKeyId"] != creds["AccessKeyId"], "IMDS handed out expired credentials"
    client(sim, key=fresh["AccessKeyId"], secret=fresh["SecretAccessKey"],
           token=fresh["Token"]).describe_volumes()

    sim.config(imds_instance=XEN, role_name=None)
    assert imds(sim, "/latest/meta-data/instance-type", token) == (200, "t2.medium")
    assert imds(sim, "/latest/meta-data/iam/security-credentials/", token)[0] == 404
    assert sim.stats()["imds"]["token"] == 3


def test_sts_web_identity(ctx):
    """STS AssumeRoleWithWebIdentity through botocore's STS client: temporary credentials that
    sign EC2 calls until they expire (ExpiredToken) or are expired by the control endpoint;
    tokens and parameters checked."""
    sim = start(ctx, "--web-identity-token", "good-token")
    sts = client(sim, service="sts", validate=False)
    role = "arn:aws:iam::123456789012:role/ebs-csi"
    reply = sts.assume_role_with_web_identity(RoleArn=role, RoleSessionName="controller",
                                              WebIdentityToken="good-token")
    creds = reply["Credentials"]
    assert creds["AccessKeyId"].startswith("ASIA") and creds["SessionToken"], creds
    assert reply["AssumedRoleUser"]["Arn"] == \
        "arn:aws:sts::123456789012:assumed-role/ebs-csi/controller", reply
    left = creds["Expiration"].timestamp() - time.time()
    assert 3500 < left <= 3600, left
    ec2 = client(sim, key=creds["AccessKeyId"], secret=creds["SecretAccessKey"],
                 token=creds["SessionToken"])
    ec2.describe_volumes()

    expect("InvalidIdentityToken", sts.assume_role_with_web_identity, status=400,
           RoleArn=role, RoleSessionName="controller", WebIdentityToken="stolen")
    expect("ValidationError", sts.assume_role_with_web_identity, match="roleArn",
           RoleArn="ebs-csi", RoleSessionName="controller", WebIdentityToken="good-token")
    expect("ValidationError", sts.assume_role_with_web_identity, match="durationSeconds",
           RoleArn=role, RoleSessionName="controller", WebIdentityToken="good-token",
           DurationSeconds=60)

    assert sim.control("POST", "/_sim/credentials/expire") == {"expired": 1}
    expect("ExpiredToken", ec2.describe_volumes)
    sim.config(credential_ttl=1)
    short = sts.assume_role_with_web_identity(RoleArn=role, RoleSessionName="controller",
                                              WebIdentityToken="good-token")["Credentials"]
    assert short["Expiration"].timestamp() - time.time() <= 1.5
    assert sim.stats()["calls"]["AssumeRoleWithWebIdentity"] == 5


# --- the control side ---------------------------------------------------------------------


def test_control_endpoints(ctx):
    """/_sim/state shows every object (so tests can assert nothing leaked), /_sim/stats counts
    calls per action, /_sim/config checks what it is given, /_sim/reset forgets everything."""
    sim = start(ctx)
    ec2 = client(sim)
    vid = create(ec2, ClientToken="t1")["VolumeId"]
    ec2.attach_volume(VolumeId=vid, InstanceId=NITRO_1, Device="/dev/xvdba")
    ec2.create_snapshot(VolumeId=vid)
    state = sim.state()
    [vol] = sim.volumes()
    assert (vol["volumeId"], vol["attachmentSet"][0]["instanceId"], vol["clientToken"]) == \
        (vid, NITRO_1, "t1"), vol
    assert len(state["volumes"]) == 4 and len(state["snapshots"]) == 1, state
    assert len(state["instances"]) == 3
    stats = sim.stats()
    assert stats["calls"] == {"CreateVolume": 1, "AttachVolume": 1, "CreateSnapshot": 1}, stats
    assert stats["total"] == 3 and stats["errors"] == {}, stats

    for bad in ({"state_delay": -1}, {"no_such_setting": 1}, {"region": "eu-west-1"},
                {"faults": [{"code": "InternalError", "rate": 2}]}, {"delays": {"boot": 1}}):
        try:
            sim.config(**bad)
        except AssertionError as e:
            assert "400" in str(e), e
        else:
            raise AssertionError("config accepted %s" % bad)
    assert sim.control("GET", "/_sim/config")["state_delay"] == 0

    cfg = sim.reset(region="eu-west-1", instances=[{"id": "i-0c000000000000009",
                                                    "type": "c6g.large",
                                                    "zone": "eu-west-1c"}])
    assert cfg["zones"] == ["eu-west-1a", "eu-west-1b", "eu-west-1c"], cfg
    assert sim.volumes() == [] and sim.state()["snapshots"] == [] and \
        sim.stats()["total"] == 0
    ec2 = client(sim, region="eu-west-1")
    inst = ec2.describe_instances()["Reservations"][0]["Instances"][0]
    assert (inst["InstanceId"], inst["Architecture"], inst["Placement"]["AvailabilityZone"]) == \
        ("i-0c000000000000009", "arm64", "eu-west-1c"), inst
    expect("AuthFailure", client(sim).describe_volumes, match="region")


def test_states_under_load(ctx):
    """16 clients creating and attaching at once with state delays: every volume ends
    available or attached, no call fails, the counters add up."""
    sim = start(ctx, "--state-delay", "0.3")
    errors, done = [], []

    def worker(n, ec2):
        try:
            for i in range(3):
                vid = create(ec2, ClientToken="w%d-%d" % (n, i))["VolumeId"]
                wait_state(ec2, vid, "available")
                if i == 0:
                    ec2.attach_volume(VolumeId=vid, InstanceId=(NITRO_1, NITRO_2)[n % 2],
                                      Device="/dev/xvd" + "bcdefghi"[n // 2] * 2)
                done.append(vid)
        except Exception as e:
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(n, client(sim))) for n in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(done) == 48 and len(sim.volumes()) == 48
    wait_for(lambda: all(v["attachmentSet"][0]["status"] == "attached"
                         for v in sim.volumes() if v["attachmentSet"]), 5, "attachments")
    assert sum(1 for v in sim.volumes() if v["attachmentSet"]) == 16
    stats = sim.stats()
    assert stats["calls"]["CreateVolume"] == 48 and stats["calls"]["AttachVolume"] == 16, stats
    assert stats["errors"] == {}, stats


if __name__ == "__main__":
    run([test_wire_format, test_availability_zones_and_instances, test_create_volume_takes_time,
         test_volume_parameters_checked, test_client_token, test_delete_volume,
         test_describe_volumes_filters_and_pages, test_tags, test_attach_detach,
         test_attachment_limits, test_modify_volume, test_modify_rate_2026, test_multi_attach,
         test_snapshots, test_create_ends_in_error,
         test_faults, test_eventual_consistency, test_signatures, test_imds,
         test_sts_web_identity, test_control_endpoints, test_states_under_load])
