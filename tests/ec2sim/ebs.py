# SPDX-License-Identifier: Apache-2.0
"""The EC2 world the simulator keeps: zones, instances, volumes and their attachments,
volume modifications, snapshots, client tokens, and the state changes that take time.

Time-taking changes are events on a heap, due at a monotonic time; every call first applies the
events that are due, so what a caller sees depends only on when it asks, never on a background
thread. Everything here runs under Cloud.lock."""

import heapq
import itertools
import random
import re
import threading
import time

import describe
import limits
from describe import check_id, check_tags, match_filters, page, tag_set
from wire import Ec2Error, combination, invalid, missing

FILTERS = [{"Name": str, "Value": [str]}]
TAGS = [{"Key": str, "Value": str}]
TAG_SPECS = [{"ResourceType": str, "Tag": TAGS}]

INSTANCE_STATE_CODES = {"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48,
                        "stopping": 64, "stopped": 80}
DEVICE_NAME = re.compile(r"^/dev/(sd[a-z][0-9]{0,2}|xvd[a-z]{1,2}[0-9]{0,2})$")
ROOT_DEVICE = "/dev/xvda"
# io1 and io2 volumes made with MultiAttachEnabled attach to this many instances of their zone
MULTI_ATTACH_TYPES = ("io1", "io2")
MULTI_ATTACH_MAX = 16
DEFAULT_KMS_KEY = "0e5c0000-ec25-4000-8000-00000000eb50"
KMS_KEY = re.compile(r"^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|"
                     r"mrk-[0-9a-f]{32}|alias/[A-Za-z0-9/_-]+|"
                     r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:"
                     r"(key/[0-9a-f-]+|alias/[A-Za-z0-9/_-]+))$")


def iso(wall):
    """EC2's timestamp format: 2024-01-02T03:04:05.678Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(wall)) + ".%03dZ" % (wall % 1 * 1000)


class Instance:
    def __init__(self, spec):
        self.id = spec["id"]
        self.type = spec["type"]
        self.zone = spec["zone"]
        self.state = spec.get("state", "running")
        self.enis = spec.get("enis")  # None: the enis setting, read at each attach
        self.tags = dict(spec.get("tags", {}))
        self.launched = time.time()


class Attachment:
    def __init__(self, instance_id, device, state, root=False):
        self.instance_id = instance_id
        self.device = device
        self.state = state
        self.time = time.time()
        self.delete_on_termination = root


class Volume:
    def __init__(self, vid, zone, size, vtype, iops, throughput, encrypted, kms, snapshot_id,
                 tags, visible_at):
        self.id = vid
        self.zone = zone
        self.size = size
        self.type = vtype
        self.iops = iops
        self.throughput = throughput
        self.encrypted = encrypted
        self.kms = kms
        self.snapshot_id = snapshot_id
        self.tags = tags
        self.state = "creating"
        self.created = time.time()
        self.visible_at = visible_at
        self.attachments = []  # one, or up to MULTI_ATTACH_MAX with multi_attach
        self.multi_attach = False
        self.initialization_rate = None
        self.root = False
        self.client_token = None

    def attachment_to(self, instance_id):
        for a in self.attachments:
            if a.instance_id == instance_id:
                return a
        return None


class Modification:
    def __init__(self, vol, size, vtype, iops, throughput, now):
        self.id = vol.id
        self.original = (vol.size, vol.type, vol.iops, vol.throughput)
        self.multi_attach = vol.multi_attach
        self.target = (size, vtype, iops, throughput)
        self.state = "modifying"
        self.message = None
        self.progress = 0
        self.start = time.time()
        self.start_mono = now
        self.end = None


class Snapshot:
    def __init__(self, sid, vol, description, owner, tags, visible_at):
        self.id = sid
        self.volume_id = vol.id
        self.size = vol.size
        self.encrypted = vol.encrypted
        self.kms = vol.kms
        self.description = description
        self.owner = owner
        self.tags = tags
        self.state = "pending"
        self.progress = "0%"
        self.start = time.time()
        self.visible_at = visible_at


def check_instances(specs, cfg):
    """Raises Ec2Error unless specs (the instances setting) fit cfg's zones and known types."""
    seen = set()
    for spec in specs:
        unknown = set(spec) - {"id", "type", "zone", "state", "enis", "tags"}
        if unknown:
            raise invalid("instances", "unknown instance fields: %s" % ", ".join(unknown))
        check_id("i", spec.get("id"))
        if spec["id"] in seen:
            raise invalid("instances", "instance %s given twice" % spec["id"])
        seen.add(spec["id"])
        limits.check_instance_type(spec.get("type", ""))
        if spec.get("zone") not in cfg["zones"]:
            raise invalid("instances", "zone %r of %s is not one of %s"
                          % (spec.get("zone"), spec["id"], cfg["zones"]))
        if spec.get("state", "running") not in INSTANCE_STATE_CODES:
            raise invalid("instances", "bad state %r" % spec.get("state"))


def zone_id(region, index):
    """use1-az1 style zone IDs, from the region's name."""
    parts = region.split("-")
    return "%s%s%s-az%d" % (parts[0], "".join(p[0] for p in parts[1:-1]), parts[-1], index + 1)


class Cloud:
    """One region of one account. Public methods lock; the action methods (named after the
    actions) run under the lock from call()."""

    def __init__(self, cfg):
        self.lock = threading.RLock()
        self.cfg = cfg
        self.devices = None  # devices.Devices of one instance, when asked for
        self.reset()

    # --- bookkeeping -------------------------------------------------------------------------

    def reset(self):
        """Forgets every object and recreates the configured instances with their root volumes."""
        with self.lock:
            if self.devices:
                self.devices.close()
            self.rng = random.Random(self.cfg["seed"])
            self.events = []
            self.seq = itertools.count()
            self.volumes = {}
            self.snapshots = {}
            self.modifications = {}  # volume ID -> its modifications, oldest first
            self.tokens = {}
            self.instances = {}
            for spec in self.cfg["instances"]:
                self._add_instance(spec)

    def _add_instance(self, spec):
        inst = Instance(spec)
        self.instances[inst.id] = inst
        root = Volume(self._new_id("vol"), inst.zone, 8, "gp3", 3000, 125, False, None, "",
                      {}, 0.0)
        root.state = "in-use"
        root.root = True
        root.attachments = [Attachment(inst.id, ROOT_DEVICE, "attached", root=True)]
        self.volumes[root.id] = root

    def _new_id(self, prefix):
        return "%s-%017x" % (prefix, self.rng.getrandbits(68))

    def _delay(self, kind):
        return float(self.cfg["delays"].get(kind, self.cfg["state_delay"]))

    def _device(self, event, *args):
        """Tells the instance's devices (devices.py), if any, what happened."""
        if self.devices:
            getattr(self.devices, event)(*args)

    def _after(self, due, fn):
        heapq.heappush(self.events, (due, next(self.seq), fn))

    def _advance(self):
        now = time.monotonic()
        while self.events and self.events[0][0] <= now:
            due, _, fn = heapq.heappop(self.events)
            fn(due)
        return now

    def _visible(self, obj, now):
        return obj.visible_at <= now

    def _chance(self, next_key, rate_key):
        """True when an injected failure is due: a pending count first, then the rate."""
        if self.cfg[next_key] > 0:
            self.cfg[next_key] -= 1
            return True
        return self.rng.random() < self.cfg[rate_key] if rate_key else False

    def call(self, action, params):
        """Runs one action on parsed parameters; returns the reply body (a dict)."""
        with self.lock:
            self._now = self._advance()
            return getattr(self, action)(params)

    # --- lookups -----------------------------------------------------------------------------

    def _volume(self, vid, param="VolumeId"):
        if not vid:
            raise missing(param)
        check_id("vol", vid)
        vol = self.volumes.get(vid)
        if vol is None:
            raise Ec2Error("InvalidVolume.NotFound", "The volume '%s' does not exist." % vid)
        return vol

    def _snapshot(self, sid, param="SnapshotId"):
        if not sid:
            raise missing(param)
        check_id("snap", sid)
        snap = self.snapshots.get(sid)
        if snap is None:
            raise Ec2Error("InvalidSnapshot.NotFound", "The snapshot '%s' does not exist." % sid)
        return snap

    def _instance(self, iid, param="InstanceId"):
        if not iid:
            raise missing(param)
        check_id("i", iid)
        inst = self.instances.get(iid)
        if inst is None:
            raise Ec2Error("InvalidInstanceID.NotFound",
                           "The instance ID '%s' does not exist" % iid)
        return inst

    def _attached(self, inst):
        """Volumes attached to inst (in any attachment state), by attach time."""
        vols = [v for v in self.volumes.values() if v.attachment_to(inst.id)]
        return sorted(vols, key=lambda v: v.attachment_to(inst.id).time)

    def _ids_found(self, ids, table, kind, code, noun):
        """Raises <code> naming every ID of ids that table lacks or that is not visible yet."""
        for i in ids:
            check_id(kind, i)
        absent = [i for i in ids if i not in table or not self._visible(table[i], self._now)]
        if len(absent) == 1:
            raise Ec2Error(code, "The %s '%s' does not exist." % (noun, absent[0]))
        if absent:
            raise Ec2Error(code, "The %ss '%s' do not exist." % (noun, ", ".join(absent)))

    # --- replies -----------------------------------------------------------------------------

    def _attachment_body(self, vol, a):
        return {"volumeId": vol.id, "instanceId": a.instance_id, "device": a.device,
                "status": a.state, "attachTime": iso(a.time),
                "deleteOnTermination": a.delete_on_termination}

    def _volume_body(self, vol):
        return {
            "volumeId": vol.id,
            "size": vol.size,
            "snapshotId": vol.snapshot_id,
            "availabilityZone": vol.zone,
            "status": vol.state,
            "createTime": iso(vol.created),
            "attachmentSet": [self._attachment_body(vol, a) for a in vol.attachments],
            "tagSet": tag_set(vol.tags),
            "volumeType": vol.type,
            "iops": vol.iops,
            "throughput": vol.throughput,
            "encrypted": vol.encrypted,
            "kmsKeyId": vol.kms,
            "multiAttachEnabled": vol.multi_attach,
            "volumeInitializationRate": vol.initialization_rate,
        }

    def _modification_body(self, mod):
        osize, otype, oiops, othroughput = mod.original
        tsize, ttype, tiops, tthroughput = mod.target
        return {
            "volumeId": mod.id,
            "modificationState": mod.state,
            "statusMessage": mod.message,
            "targetSize": tsize, "targetIops": tiops, "targetVolumeType": ttype,
            "targetThroughput": tthroughput, "targetMultiAttachEnabled": mod.multi_attach,
            "originalSize": osize, "originalIops": oiops, "originalVolumeType": otype,
            "originalThroughput": othroughput, "originalMultiAttachEnabled": mod.multi_attach,
            "progress": mod.progress,
            "startTime": iso(mod.start),
            "endTime": iso(mod.end) if mod.end else None,
        }

    def _snapshot_body(self, snap):
        return {
            "snapshotId": snap.id,
            "volumeId": snap.volume_id,
            "status": snap.state,
            "startTime": iso(snap.start),
            "progress": snap.progress,
            "ownerId": snap.owner,
            "volumeSize": snap.size,
            "description": snap.description,
            "encrypted": snap.encrypted,
            "kmsKeyId": snap.kms,
            "tagSet": tag_set(snap.tags),
            "storageTier": "standard",
        }

    def _instance_body(self, inst):
        family = inst.type.split(".")[0]
        return {
            "instanceId": inst.id,
            "imageId": "ami-0ec25000000000000",
            "instanceState": {"code": INSTANCE_STATE_CODES[inst.state], "name": inst.state},
            "privateDnsName": "ip-10-0-0-%d.ec2.internal" % (int(inst.id[-2:], 16) % 250 + 1),
            "instanceType": inst.type,
            "launchTime": iso(inst.launched),
            "placement": {"availabilityZone": inst.zone, "tenancy": "default"},
            "architecture": "arm64" if family == "a1" or "g" in family[1:] else "x86_64",
            "rootDeviceType": "ebs",
            "rootDeviceName": ROOT_DEVICE,
            "blockDeviceMapping": [
                {"deviceName": a.device,
                 "ebs": {"volumeId": v.id, "status": a.state, "attachTime": iso(a.time),
                         "deleteOnTermination": a.delete_on_termination}}
                for v, a in ((v, v.attachment_to(inst.id)) for v in self._attached(inst))],
            "virtualizationType": "hvm",
            "hypervisor": "xen",
            "tagSet": tag_set(inst.tags),
        }

    # --- volumes -----------------------------------------------------------------------------

    def _token_replay(self, p):
        """The volume an earlier CreateVolume with this ClientToken made, or None when the
        token is new. Raises IdempotentParameterMismatch when the token cannot be reused."""
        token = p.get("ClientToken")
        if token is None or not self.cfg["client_tokens"]:
            return None
        if not 0 < len(token) <= 64:
            raise invalid("ClientToken", "Client token must be 1 to 64 characters long")
        known = self.tokens.get(token)
        if known is None:
            return None
        fingerprint, vid = known
        if fingerprint != self._fingerprint(p):
            raise Ec2Error("IdempotentParameterMismatch", "Parameters on this idempotent request "
                           "are inconsistent with parameters used in previous request(s)")
        vol = self.volumes.get(vid)
        if vol is None or vol.state == "deleting":
            raise Ec2Error("IdempotentParameterMismatch", "The client token you have provided "
                           "is associated with a resource that is already deleted. Please use "
                           "a different client token.")
        return vol

    @staticmethod
    def _fingerprint(p):
        return repr(sorted((k, v) for k, v in p.items() if k not in ("ClientToken", "DryRun")))

    def _resource_tags(self, p, resource_type):
        tags = {}
        for i, spec in enumerate(p.get("TagSpecification") or [], 1):
            if spec.get("ResourceType") != resource_type:
                raise invalid("TagSpecification.%d.ResourceType" % i, "'%s' is not a valid "
                              "taggable resource type for this operation"
                              % spec.get("ResourceType"))
            for key, value in check_tags(spec.get("Tag"), "TagSpecification.%d.Tag" % i).items():
                tags[key] = value
        if len(tags) > describe.MAX_TAGS:
            raise Ec2Error("TagLimitExceeded", "The maximum number of tags (%d) per resource "
                           "has been exceeded" % describe.MAX_TAGS)
        return tags

    def _kms_arn(self, key):
        if key is None:
            key = DEFAULT_KMS_KEY
        if not KMS_KEY.match(key):
            raise invalid("KmsKeyId", "Invalid KMS key '%s': expected a key ID, alias, key ARN "
                          "or alias ARN" % key)
        if key.startswith("arn:"):
            return key
        return "arn:aws:kms:%s:%s:%s" % (self.cfg["region"], self.cfg["account_id"],
                                         key if key.startswith("alias/") else "key/" + key)

    def CreateVolume(self, p):
        vol = self._token_replay(p)
        if vol is not None:
            return self._volume_body(vol)
        zone = p.get("AvailabilityZone")
        if not zone:
            raise missing("AvailabilityZone")
        if zone not in self.cfg["zones"]:
            raise Ec2Error("InvalidZone.NotFound", "The zone '%s' does not exist in region %s "
                           "(parameter AvailabilityZone)" % (zone, self.cfg["region"]))
        snap = None
        size = p.get("Size")
        if p.get("SnapshotId"):
            snap = self._snapshot(p["SnapshotId"])
            if snap.state != "completed":
                raise Ec2Error("IncorrectState", "Snapshot '%s' is in invalid state - %s"
                               % (snap.id, snap.state))
            if size is None:
                size = snap.size
            elif size < snap.size:
                raise invalid("Size", "Volume of size %d GiB is smaller than snapshot '%s', "
                              "expect size >= %d GiB" % (size, snap.id, snap.size))
        if size is None:
            raise Ec2Error("MissingParameter", "The request must contain the parameter size or "
                           "snapshotId")
        vtype = p.get("VolumeType", "gp2")
        iops, throughput = limits.check_volume(vtype, size, p.get("Iops"), p.get("Throughput"))
        if p.get("KmsKeyId") is not None and not p.get("Encrypted"):
            raise Ec2Error("InvalidParameterDependency", "The parameter KmsKeyId requires the "
                           "parameter Encrypted to be set.")
        encrypted = bool(p.get("Encrypted")) or bool(snap and snap.encrypted)
        kms = None
        if encrypted:
            kms = snap.kms if snap and snap.encrypted and "KmsKeyId" not in p else \
                self._kms_arn(p.get("KmsKeyId"))
        multi = bool(p.get("MultiAttachEnabled"))
        if multi and vtype not in MULTI_ATTACH_TYPES:
            raise combination("Multi-Attach is supported only on io1 and io2 volumes, not %s"
                              % vtype)
        rate = p.get("VolumeInitializationRate")
        if rate is not None:
            if not snap:
                raise combination("The parameter VolumeInitializationRate requires the "
                                  "parameter SnapshotId")
            if not 100 <= rate <= 300:
                raise invalid("VolumeInitializationRate", "Volume initialization rate %d MiB/s "
                              "is out of range: 100 to 300" % rate)
        tags = self._resource_tags(p, "volume")

        vol = Volume(self._new_id("vol"), zone, size, vtype, iops, throughput, encrypted, kms,
                     snap.id if snap else "", tags, self._now + self.cfg["consistency_window"])
        vol.multi_attach = multi
        vol.initialization_rate = rate
        self.volumes[vol.id] = vol
        self._device("created", vol)
        if "ClientToken" in p:
            vol.client_token = p["ClientToken"]
            self.tokens[p["ClientToken"]] = (self._fingerprint(p), vol.id)
        fails = self._chance("create_error_next", "create_error_rate")

        def created(due):
            if vol.state == "creating":
                vol.state = "error" if fails else "available"
        self._after(self._now + self._delay("create"), created)
        return self._volume_body(vol)

    def DeleteVolume(self, p):
        vol = self._volume(p.get("VolumeId"))
        if vol.attachments:
            raise Ec2Error("VolumeInUse", "Volume %s is currently attached to %s"
                           % (vol.id, vol.attachments[0].instance_id))
        if vol.state == "creating":
            raise Ec2Error("IncorrectState", "The volume '%s' is 'creating'" % vol.id)
        if vol.state != "deleting":
            vol.state = "deleting"

            def deleted(due):
                self.volumes.pop(vol.id, None)
                self.modifications.pop(vol.id, None)
                self._device("removed", vol.id)
            self._after(self._now + self._delay("delete"), deleted)
        return {"return": True}

    VOLUME_FILTERS = {
        "volume-id": lambda v: [v.id],
        "availability-zone": lambda v: [v.zone],
        "status": lambda v: [v.state],
        "volume-type": lambda v: [v.type],
        "size": lambda v: [v.size],
        "snapshot-id": lambda v: [v.snapshot_id],
        "encrypted": lambda v: [describe.bool_text(v.encrypted)],
        "attachment.instance-id": lambda v: [a.instance_id for a in v.attachments],
        "attachment.device": lambda v: [a.device for a in v.attachments],
        "attachment.status": lambda v: [a.state for a in v.attachments],
        "attachment.delete-on-termination":
            lambda v: [describe.bool_text(a.delete_on_termination) for a in v.attachments],
        "multi-attach-enabled": lambda v: [describe.bool_text(v.multi_attach)],
    }

    def DescribeVolumes(self, p):
        ids = p.get("VolumeId") or []
        self._ids_found(ids, self.volumes, "vol", "InvalidVolume.NotFound", "volume")
        items = [v for v in self.volumes.values()
                 if self._visible(v, self._now) and (not ids or v.id in ids)
                 and match_filters(p.get("Filter"), self.VOLUME_FILTERS, v, v.tags)]
        items, token = page(items, p, "volumes", 5, 500, "VolumeId")
        return {"volumeSet": [self._volume_body(v) for v in items], "nextToken": token}

    # --- attachments -------------------------------------------------------------------------

    def AttachVolume(self, p):
        vol = self._volume(p.get("VolumeId"))
        inst = self._instance(p.get("InstanceId"))
        device = p.get("Device")
        if not device:
            raise missing("Device")
        if not DEVICE_NAME.match(device):
            raise invalid("Device", "Value (%s) for parameter device is invalid. %s is not a "
                          "valid EBS device name." % (device, device))
        here = vol.attachment_to(inst.id)
        in_use = here is not None or (vol.attachments and not vol.multi_attach)
        if in_use and self.cfg["single_attach"]:
            raise Ec2Error("VolumeInUse", "%s is already attached to an instance (%s)"
                           % (vol.id, (here or vol.attachments[0]).instance_id))
        if in_use and not vol.root:
            for old in list(vol.attachments):  # refusing nothing: the attachment moves here
                vol.attachments.remove(old)
                self._device("detached", vol, old.instance_id)
            vol.state = "available"
        if len(vol.attachments) >= MULTI_ATTACH_MAX:
            raise Ec2Error("AttachmentLimitExceeded", "Multi-Attach volume %s is attached to "
                           "%d instances already, the most it takes"
                           % (vol.id, MULTI_ATTACH_MAX))
        if vol.state != "available" and not (vol.multi_attach and vol.state == "in-use"):
            raise Ec2Error("IncorrectState", "%s is not 'available' (it is '%s')."
                           % (vol.id, vol.state))
        if inst.state not in ("running", "stopped"):
            raise Ec2Error("IncorrectInstanceState", "The instance '%s' is '%s': volumes attach "
                           "only to running or stopped instances" % (inst.id, inst.state))
        if vol.zone != inst.zone:
            raise Ec2Error("InvalidVolume.ZoneMismatch", "The volume '%s' is not in the same "
                           "availability zone as instance '%s'" % (vol.id, inst.id))
        attached = self._attached(inst)
        if any(v.attachment_to(inst.id).device == device for v in attached):
            raise invalid("Device", "Invalid value '%s' for unixDevice. Attachment point %s is "
                          "already in use" % (device, device))
        enis = self.cfg["enis"] if inst.enis is None else inst.enis
        most = limits.max_ebs_volumes(inst.type, enis, self.cfg)
        if len(attached) >= most and self.cfg["attachment_limits"]:
            raise Ec2Error("AttachmentLimitExceeded", "You have reached the maximum number of "
                           "EBS volumes (%d, the root volume included) for instance %s (%s)"
                           % (most, inst.id, inst.type))
        att = Attachment(inst.id, device, "attaching")
        vol.attachments.append(att)
        vol.state = "in-use"

        def attached_now(due):
            if att in vol.attachments and att.state == "attaching":
                att.state = "attached"
                self._device("attached", vol, inst.id)
        self._after(self._now + self._delay("attach"), attached_now)
        return self._attachment_body(vol, att)

    def DetachVolume(self, p):
        vol = self._volume(p.get("VolumeId"))
        if not vol.attachments:
            raise Ec2Error("IncorrectState", "Volume '%s' is in the '%s' state."
                           % (vol.id, vol.state))
        att = vol.attachments[0]
        if p.get("InstanceId"):
            self._instance(p["InstanceId"])
            att = vol.attachment_to(p["InstanceId"])
            if att is None:
                raise Ec2Error("InvalidAttachment.NotFound", "The volume '%s' is not attached "
                               "to instance '%s'" % (vol.id, p["InstanceId"]))
        elif len(vol.attachments) > 1:
            raise missing("InstanceId")
        if p.get("Device") and p["Device"] != att.device:
            raise Ec2Error("InvalidAttachment.NotFound", "The volume '%s' is not attached at "
                           "'%s'" % (vol.id, p["Device"]))
        if vol.root:
            raise Ec2Error("OperationNotPermitted", "Unable to detach root volume '%s' from "
                           "instance '%s'" % (vol.id, att.instance_id))
        if att.state != "attached":
            raise Ec2Error("IncorrectState", "Volume '%s' is %s instance '%s'"
                           % (vol.id, "attaching to" if att.state == "attaching"
                              else "already detaching from", att.instance_id))
        att.state = "detaching"
        body = self._attachment_body(vol, att)

        def detached(due):
            if att in vol.attachments:
                vol.attachments.remove(att)
                if not vol.attachments:
                    vol.state = "available"
                self._device("detached", vol, att.instance_id)
        self._after(self._now + self._delay("detach"), detached)
        return body

    # --- modifications -----------------------------------------------------------------------

    def ModifyVolume(self, p):
        vol = self._volume(p.get("VolumeId"))
        if vol.state not in ("available", "in-use"):
            raise Ec2Error("IncorrectState", "The volume '%s' is '%s'; only available or in-use "
                           "volumes can be modified" % (vol.id, vol.state))
        if p.get("MultiAttachEnabled"):
            raise Ec2Error("UnsupportedOperation", "Multi-Attach is not simulated")
        history = self.modifications.get(vol.id, [])
        last = history[-1] if history else None
        # Since 2026-01-15: at most modify_limit modifications in any modify_period, the next
        # one as soon as the last completed (before: one per 6 hours).
        limit, period = self.cfg["modify_limit"], self.cfg["modify_period"]
        recent = [m for m in history if self._now - m.start_mono < period]
        if limit and len(recent) >= limit:
            wait = recent[-limit].start_mono + period - self._now
            raise Ec2Error("VolumeModificationRateExceeded", "You've reached the maximum "
                           "modification rate per volume limit: %d modifications in %s. %s "
                           "can be modified again in %.0f s." % (limit, _duration(period),
                                                                vol.id, wait))
        if last is not None and last.state in ("modifying", "optimizing"):
            raise Ec2Error("IncorrectModificationState", "Volume %s is already being modified "
                           "(%s)" % (vol.id, last.state))
        size = p.get("Size", vol.size)
        vtype = p.get("VolumeType", vol.type)
        if size < vol.size:
            raise invalid("Size", "New size %d GiB cannot be smaller than the existing size "
                          "%d GiB" % (size, vol.size))
        keep = vtype == vol.type and vtype in ("gp3", "io1", "io2")
        iops = p.get("Iops", vol.iops if keep else None)
        throughput = p.get("Throughput", vol.throughput if keep and vtype == "gp3" else None)
        iops, throughput = limits.check_volume(vtype, size, iops, throughput, "target")
        if (size, vtype, iops, throughput) == (vol.size, vol.type, vol.iops, vol.throughput):
            raise combination("No modification requested for %s: Size, VolumeType, Iops and "
                              "Throughput all equal the volume's" % vol.id)
        mod = Modification(vol, size, vtype, iops, throughput, self._now)
        # what the rate limit and DescribeVolumesModifications look at: the last period's
        self.modifications[vol.id] = [m for m in history if self._now - m.start_mono < period
                                      or m is last] + [mod]
        fails = self._chance("modify_fail_next", None)

        def optimizing(due):
            if mod not in self.modifications.get(vol.id, []):
                return
            if fails:
                mod.state, mod.message, mod.end = "failed", "injected failure", time.time()
                return
            vol.size, vol.type, vol.iops, vol.throughput = mod.target
            self._device("resized", vol)
            mod.state, mod.progress = "optimizing", 50
            self._after(due + self._delay("optimize"), completed)

        def completed(due):
            if mod in self.modifications.get(vol.id, []):
                mod.state, mod.progress, mod.end = "completed", 100, time.time()
        self._after(self._now + self._delay("modify"), optimizing)
        return {"volumeModification": self._modification_body(mod)}

    MODIFICATION_FILTERS = {
        "volume-id": lambda m: [m.id],
        "modification-state": lambda m: [m.state],
        "target-size": lambda m: [m.target[0]],
        "target-volume-type": lambda m: [m.target[1]],
        "target-iops": lambda m: [m.target[2]],
        "target-throughput": lambda m: [m.target[3]],
        "original-size": lambda m: [m.original[0]],
        "original-volume-type": lambda m: [m.original[1]],
    }

    def DescribeVolumesModifications(self, p):
        ids = p.get("VolumeId") or []
        for vid in ids:
            self._volume(vid)
            if vid not in self.modifications:
                raise Ec2Error("InvalidVolumeModification.NotFound",
                               "Modification for volume '%s' does not exist." % vid)
        # each volume's modifications of the rate limit's period, the latest first
        items = [m for history in self.modifications.values() for m in reversed(history)
                 if (not ids or m.id in ids)
                 and match_filters(p.get("Filter"), self.MODIFICATION_FILTERS, m, {})]
        items, token = page(items, p, "modifications", 5, 500, "VolumeId")
        return {"volumeModificationSet": [self._modification_body(m) for m in items],
                "nextToken": token}

    # --- snapshots ---------------------------------------------------------------------------

    def CreateSnapshot(self, p):
        vol = self._volume(p.get("VolumeId"))
        if vol.state not in ("available", "in-use"):
            raise Ec2Error("IncorrectState", "The volume '%s' is '%s'; only available or in-use "
                           "volumes can be snapshotted" % (vol.id, vol.state))
        description = p.get("Description", "")
        if len(description) > 255:
            raise invalid("Description", "The description exceeds 255 characters")
        tags = self._resource_tags(p, "snapshot")
        snap = Snapshot(self._new_id("snap"), vol, description, self.cfg["account_id"], tags,
                        self._now + self.cfg["consistency_window"])
        self.snapshots[snap.id] = snap
        self._device("snapshot", snap)
        fails = self._chance("snapshot_error_next", None)

        def completed(due):
            if self.snapshots.get(snap.id) is snap:
                snap.state, snap.progress = ("error", "0%") if fails else ("completed", "100%")
        self._after(self._now + self._delay("snapshot"), completed)
        return self._snapshot_body(snap)

    def DeleteSnapshot(self, p):
        snap = self._snapshot(p.get("SnapshotId"))
        del self.snapshots[snap.id]
        self._device("removed", snap.id)
        return {"return": True}

    SNAPSHOT_FILTERS = {
        "snapshot-id": lambda s: [s.id],
        "volume-id": lambda s: [s.volume_id],
        "status": lambda s: [s.state],
        "owner-id": lambda s: [s.owner],
        "progress": lambda s: [s.progress],
        "volume-size": lambda s: [s.size],
        "description": lambda s: [s.description],
        "encrypted": lambda s: [describe.bool_text(s.encrypted)],
    }

    def DescribeSnapshots(self, p):
        ids = p.get("SnapshotId") or []
        self._ids_found(ids, self.snapshots, "snap", "InvalidSnapshot.NotFound", "snapshot")
        owners = p.get("Owner") or []
        ours = not owners or any(o in ("self", self.cfg["account_id"]) for o in owners)
        items = [s for s in self.snapshots.values()
                 if ours and self._visible(s, self._now) and (not ids or s.id in ids)
                 and match_filters(p.get("Filter"), self.SNAPSHOT_FILTERS, s, s.tags)]
        items, token = page(items, p, "snapshots", 5, 1000, "SnapshotId")
        return {"snapshotSet": [self._snapshot_body(s) for s in items], "nextToken": token}

    # --- tags --------------------------------------------------------------------------------

    def _taggable(self, rid):
        if rid.startswith("vol-"):
            return self._volume(rid, "ResourceId")
        if rid.startswith("snap-"):
            return self._snapshot(rid, "ResourceId")
        if rid.startswith("i-"):
            return self._instance(rid, "ResourceId")
        raise Ec2Error("InvalidID", "The ID '%s' is not valid" % rid)

    def CreateTags(self, p):
        resources = [self._taggable(r) for r in p.get("ResourceId") or []]
        if not resources:
            raise missing("ResourceId")
        if not p.get("Tag"):
            raise missing("Tag")
        tags = check_tags(p["Tag"], "Tag")
        for r in resources:
            if len(dict(r.tags, **tags)) > describe.MAX_TAGS:
                raise Ec2Error("TagLimitExceeded", "The maximum number of tags (%d) for "
                               "resource '%s' has been reached" % (describe.MAX_TAGS, r.id))
        for r in resources:
            describe.add_tags(r, tags)
        return {"return": True}

    def DeleteTags(self, p):
        resources = [self._taggable(r) for r in p.get("ResourceId") or []]
        if not resources:
            raise missing("ResourceId")
        for r in resources:
            if not p.get("Tag"):
                r.tags = {}
            for t in p.get("Tag") or []:
                key = t.get("Key")
                if key in r.tags and ("Value" not in t or t["Value"] == r.tags[key]):
                    del r.tags[key]
        return {"return": True}

    # --- instances and zones -----------------------------------------------------------------

    INSTANCE_FILTERS = {
        "instance-id": lambda i: [i.id],
        "availability-zone": lambda i: [i.zone],
        "instance-type": lambda i: [i.type],
        "instance-state-name": lambda i: [i.state],
    }

    def DescribeInstances(self, p):
        ids = p.get("InstanceId") or []
        for iid in ids:
            self._instance(iid)
        filters = dict(self.INSTANCE_FILTERS)
        filters["block-device-mapping.volume-id"] = \
            lambda i: [v.id for v in self._attached(i)]
        filters["block-device-mapping.device-name"] = \
            lambda i: [v.attachment_to(i.id).device for v in self._attached(i)]
        items = [i for i in self.instances.values()
                 if (not ids or i.id in ids) and match_filters(p.get("Filter"), filters, i, i.tags)]
        items, token = page(items, p, "instances", 5, 1000, "InstanceId")
        return {"reservationSet": [
            {"reservationId": "r-%s" % i.id[2:], "ownerId": self.cfg["account_id"],
             "groupSet": [], "instancesSet": [self._instance_body(i)]} for i in items],
            "nextToken": token}

    def _zones(self):
        region = self.cfg["region"]
        return [{"zoneName": z, "zoneState": "available", "regionName": region,
                 "zoneId": zone_id(region, i), "zoneType": "availability-zone",
                 "optInStatus": "opt-in-not-required", "messageSet": [],
                 "groupName": region, "networkBorderGroup": region}
                for i, z in enumerate(self.cfg["zones"])]

    ZONE_FILTERS = {
        "zone-name": lambda z: [z["zoneName"]],
        "zone-id": lambda z: [z["zoneId"]],
        "state": lambda z: [z["zoneState"]],
        "region-name": lambda z: [z["regionName"]],
        "zone-type": lambda z: [z["zoneType"]],
    }

    def DescribeAvailabilityZones(self, p):
        zones = self._zones()
        for param, key in (("ZoneName", "zoneName"), ("ZoneId", "zoneId")):
            for want in p.get(param) or []:
                if want not in [z[key] for z in zones]:
                    raise invalid(param, "Invalid availability zone: [%s]" % want)
            if p.get(param):
                zones = [z for z in zones if z[key] in p[param]]
        zones = [z for z in zones if match_filters(p.get("Filter"), self.ZONE_FILTERS, z, {})]
        return {"availabilityZoneInfo": zones}

    # --- the control side --------------------------------------------------------------------

    def dump(self):
        """Every object as JSON-ready dicts, for tests that assert nothing leaked."""
        with self.lock:
            now = self._advance()

            def with_tags(body, obj):
                body = dict(body, tags=dict(obj.tags))
                body.pop("tagSet", None)
                return body
            volumes = []
            for v in sorted(self.volumes.values(), key=lambda v: v.created):
                body = with_tags(self._volume_body(v), v)
                body.update(root=v.root, clientToken=v.client_token,
                            visible=self._visible(v, now))
                volumes.append(body)
            return {
                "volumes": volumes,
                "snapshots": [dict(with_tags(self._snapshot_body(s), s),
                                   visible=self._visible(s, now))
                              for s in sorted(self.snapshots.values(), key=lambda s: s.start)],
                "modifications": [self._modification_body(m)
                                  for history in self.modifications.values()
                                  for m in history],
                "instances": [with_tags(self._instance_body(i), i)
                              for i in self.instances.values()],
                "clientTokens": {t: vid for t, (_, vid) in self.tokens.items()},
                "pendingEvents": len(self.events),
            }


def _duration(seconds):
    if seconds >= 3600 and seconds % 3600 == 0:
        return "%d hours" % (seconds // 3600)
    return "%g seconds" % seconds


SPECS = {
    "CreateVolume": {"AvailabilityZone": str, "Size": int, "VolumeType": str, "Iops": int,
                     "Throughput": int, "Encrypted": bool, "KmsKeyId": str, "SnapshotId": str,
                     "TagSpecification": TAG_SPECS, "ClientToken": str,
                     "MultiAttachEnabled": bool, "VolumeInitializationRate": int},
    "DeleteVolume": {"VolumeId": str},
    "DescribeVolumes": {"VolumeId": [str], "Filter": FILTERS, "MaxResults": int,
                        "NextToken": str},
    "AttachVolume": {"VolumeId": str, "InstanceId": str, "Device": str},
    "DetachVolume": {"VolumeId": str, "InstanceId": str, "Device": str, "Force": bool},
    "ModifyVolume": {"VolumeId": str, "Size": int, "VolumeType": str, "Iops": int,
                     "Throughput": int, "MultiAttachEnabled": bool},
    "DescribeVolumesModifications": {"VolumeId": [str], "Filter": FILTERS, "MaxResults": int,
                                     "NextToken": str},
    "CreateSnapshot": {"VolumeId": str, "Description": str, "TagSpecification": TAG_SPECS},
    "DeleteSnapshot": {"SnapshotId": str},
    "DescribeSnapshots": {"SnapshotId": [str], "Owner": [str], "RestorableBy": [str],
                          "Filter": FILTERS, "MaxResults": int, "NextToken": str},
    "CreateTags": {"ResourceId": [str], "Tag": TAGS},
    "DeleteTags": {"ResourceId": [str], "Tag": TAGS},
    "DescribeInstances": {"InstanceId": [str], "Filter": FILTERS, "MaxResults": int,
                          "NextToken": str},
    "DescribeAvailabilityZones": {"ZoneName": [str], "ZoneId": [str], "Filter": FILTERS,
                                  "AllAvailabilityZones": bool},
}
