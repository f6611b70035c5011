#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""ec2sim: the project's own EC2 simulator, a test peer for the EBS backend.

It speaks the EC2 Query API (form-encoded POST or GET with Action=...&Version=2016-11-15, XML
replies in the 2016-11-15 namespace, errors as <Response><Errors><Error><Code/><Message/>
</Error></Errors><RequestID/></Response> with their HTTP status) for the EBS actions, checks
SigV4 signatures, and models what simpler emulators skip: states that take time, ClientToken
idempotency, attachment limits, Multi-Attach, the volume modification rate, injected throttling and
5xx, eventual consistency. Written with the Python standard library; Debian's python3-botocore
is used only to compute the SigV4 signature a request should carry.

Run it with Debian's python3 (the one that has python3-botocore):

    /usr/bin/python3 tests/ec2sim/ec2sim.py --port 0 --imds-port 0 --port-file /tmp/sim.json \\
        --state-delay 1.5

It prints "ec2sim: ec2 http://127.0.0.1:PORT imds http://127.0.0.1:PORT" and, with
--port-file, writes {"ec2": URL, "imds": URL or null, "ec2_port": N, "imds_port": N, "pid": N}
there (atomically: the file appears once both ports listen). SIGTERM or SIGINT stop it.

One port serves:
  POST|GET /                   EC2 actions: CreateVolume DeleteVolume DescribeVolumes
                               AttachVolume DetachVolume ModifyVolume
                               DescribeVolumesModifications CreateSnapshot DeleteSnapshot
                               DescribeSnapshots CreateTags DeleteTags DescribeInstances
                               DescribeAvailabilityZones; anything else: InvalidAction (400).
                               Also STS AssumeRoleWithWebIdentity (Version=2011-06-15, unsigned)
  GET  /_sim/state             every volume (root volumes marked "root": true), snapshot,
                               modification, instance, client token and temporary credential
  GET  /_sim/stats             {"total", "calls": {action: n}, "errors": {action: {code: n}},
                               "faults": {code: n}, "imds": {path: n}}
  POST /_sim/stats/reset       zeroes the counters
  GET  /_sim/config            the settings;  POST /_sim/config {"key": value, ...} changes them
  POST /_sim/reset             forgets every object and counter (instances and their root
                               volumes are made anew); an optional JSON body sets any setting
                               first, region, zones, instances and seed included
  POST /_sim/credentials/expire  every temporary credential expires now
The IMDS port (--imds-port) serves IMDSv2: PUT /latest/api/token (header
X-aws-ec2-metadata-token-ttl-seconds), then with header X-aws-ec2-metadata-token: GET
/latest/meta-data/instance-id, instance-type, placement/availability-zone, placement/region,
placement/availability-zone-id, iam/info, iam/security-credentials/ (the role name),
iam/security-credentials/<role> (temporary credentials), /latest/dynamic/instance-identity/
document. Without a token: 401 (unless imds_v1).

Settings (flags set them at start, POST /_sim/config while running; see config.py):
  state_delay (s, 0)        how long each state change takes; delays {"create", "attach",
                            "detach", "modify", "optimize", "snapshot", "delete"} override it:
                            creating->available|error, attaching->attached, detaching->
                            (detached, gone)->available, modifying->optimizing->completed,
                            snapshot pending->completed|error, deleting->gone
  consistency_window (s, 0) a new volume or snapshot is not in Describe* replies that long
                            (by ID: InvalidVolume.NotFound / InvalidSnapshot.NotFound)
  modify_limit (4), modify_period (s, 24 h)
                            a volume is modified at most modify_limit times in any
                            modify_period (VolumeModificationRateExceeded; 0: no limit), the
                            next one as soon as the last completed (EC2's rule since
                            2026-01-15; before, once in 6 hours)
  enis (1), nitro_attachment_slots (28), xen_attachment_limit (40)
                            Nitro types share 28 slots between EBS volumes (root included) and
                            network interfaces; Xen types take 40 EBS volumes (limits.py)
  create_error_next (n), create_error_rate (0..1), snapshot_error_next, modify_fail_next
                            creates that end in "error", snapshots that end in "error",
                            modifications that end in "failed"
  faults [rules]            {"action", "code", "rate", "count", "when": before|after} (faults.py)
  latency (s, 0)            added to every call
  client_tokens (true), single_attach (true), attachment_limits (true)
                            false: as peers that refuse nothing for the caller (moto, some
                            EC2-compatible clouds): CreateVolume ignores ClientToken (a retry
                            makes another volume); AttachVolume of an attached volume moves the
                            attachment instead of VolumeInUse; no AttachmentLimitExceeded.
                            --refuse-nothing sets all three false
  auth (true), credentials [{access_key, secret_key[, token]}], max_clock_skew (300 s)
  credential_ttl (3600 s)   lifetime of the temporary credentials IMDS and STS hand out
  web_identity_tokens []    the tokens STS accepts (empty: any)
  role_name, imds_instance (the first instance), imds_v1 (false)
  imds_ebs_mappings (0)     EBS volumes besides the root one in the block device mapping IMDS
                            lists (ebs1..): those the instance was last started with, never
                            the ones attached since. Both it and enis change while running
  region (us-east-1), zones (<region>a,b,c), account_id, seed, instances
                            [{id, type, zone, state, enis, tags}] (default: two m5.large in
                            zone a, one t2.medium in zone b; each has a root volume at /dev/xvda)

Devices (--devices-instance ID --devices-dir DIR, as root): the volumes attached to that instance
appear on this machine as a Nitro instance sees them, loop devices linked as
DIR/by-id/nvme-Amazon_Elastic_Block_Store_vol... (devices.py), for an EBS node service to stage.

Default credentials: access key AKIAEC2SIMULATOR0001, secret ec2sim/secret/key/for/tests/only/
00000000 (config.py). Requests must be signed with SigV4 for service ec2 in the simulator's
region; a wrong secret, a changed body, an unknown key or a bad session token is AuthFailure
(401), a request time off by more than max_clock_skew is RequestExpired, an expired temporary
credential is ExpiredToken.
"""

import argparse
import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import config  # noqa: E402


def _pair(text, what):
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError("%s must be KEY=VALUE, not %r" % (what, text))
    return key, value


def parse_args(argv):
    a = argparse.ArgumentParser(prog="ec2sim", description="An EC2 Query API simulator for "
                                "tests (see the docstring of ec2sim.py).")
    a.add_argument("--host", default="127.0.0.1")
    a.add_argument("--port", type=int, default=0, help="EC2/STS/control port (0: any free)")
    a.add_argument("--imds-port", type=int, help="IMDS port (0: any free; default: no IMDS)")
    a.add_argument("--port-file", help="write the endpoints as JSON to this file")
    a.add_argument("--config", help="a JSON file of settings, applied before the flags")
    a.add_argument("--region")
    a.add_argument("--zones", help="comma-separated zone names")
    a.add_argument("--account-id")
    a.add_argument("--instance", action="append", metavar="ID:TYPE:ZONE",
                   help="an instance (repeat; replaces the default three)")
    a.add_argument("--state-delay", type=float)
    a.add_argument("--delay", action="append", metavar="KIND=SECONDS",
                   type=lambda t: _pair(t, "--delay"))
    a.add_argument("--consistency-window", type=float)
    a.add_argument("--modify-limit", type=int)
    a.add_argument("--modify-period", type=float)
    a.add_argument("--enis", type=int)
    a.add_argument("--nitro-slots", type=int, dest="nitro_attachment_slots")
    a.add_argument("--xen-limit", type=int, dest="xen_attachment_limit")
    a.add_argument("--throttle-rate", type=float, help="rate of RequestLimitExceeded (503)")
    a.add_argument("--error-rate", type=float, help="rate of InternalError (500)")
    a.add_argument("--create-error-rate", type=float)
    a.add_argument("--latency", type=float)
    a.add_argument("--seed", type=int)
    a.add_argument("--no-auth", action="store_true", help="accept unsigned requests")
    a.add_argument("--refuse-nothing", action="store_true", help="ignore ClientToken, move "
                   "attachments, no attachment limit (as moto)")
    a.add_argument("--credentials", action="append", metavar="KEY:SECRET[:TOKEN]",
                   help="accepted credentials (repeat; replaces the default pair)")
    a.add_argument("--credential-ttl", type=float)
    a.add_argument("--max-clock-skew", type=float)
    a.add_argument("--web-identity-token", action="append")
    a.add_argument("--role-name")
    a.add_argument("--imds-instance")
    a.add_argument("--imds-v1", action="store_true", help="IMDS answers without a token too")
    a.add_argument("--devices-instance", help="present the volumes attached to this instance "
                   "as loop devices (needs root)")
    a.add_argument("--devices-dir", help="where: DIR/by-id links, DIR/files backing files")
    a.add_argument("-v", "--verbose", action="store_true", help="one line per call on stderr")
    return a.parse_args(argv)


def settings(args):
    """The settings the flags ask for. Raises config.ConfigError."""
    cfg = config.defaults(args.region or "us-east-1")
    if args.config:
        with open(args.config) as f:
            cfg = config.merged(cfg, json.load(f), running=False)
    changes = {}
    if args.region:
        changes["region"] = args.region
    if args.zones:
        changes["zones"] = args.zones.split(",")
    if args.instance:
        changes["instances"] = []
        for spec in args.instance:
            parts = spec.split(":")
            if len(parts) != 3:
                raise config.ConfigError("--instance must be ID:TYPE:ZONE, not %r" % spec)
            changes["instances"].append(dict(zip(("id", "type", "zone"), parts)))
    if args.delay:
        changes["delays"] = {k: float(v) for k, v in args.delay}
    if args.credentials:
        changes["credentials"] = []
        for spec in args.credentials:
            parts = spec.split(":")
            if len(parts) not in (2, 3):
                raise config.ConfigError("--credentials must be KEY:SECRET[:TOKEN]")
            changes["credentials"].append(dict(zip(("access_key", "secret_key", "token"), parts)))
    faults = []
    if args.throttle_rate:
        faults.append({"action": "*", "code": "RequestLimitExceeded", "rate": args.throttle_rate})
    if args.error_rate:
        faults.append({"action": "*", "code": "InternalError", "rate": args.error_rate})
    if faults:
        changes["faults"] = faults
    if args.web_identity_token:
        changes["web_identity_tokens"] = args.web_identity_token
    if args.no_auth:
        changes["auth"] = False
    if args.refuse_nothing:
        changes.update(client_tokens=False, single_attach=False, attachment_limits=False)
    if args.imds_v1:
        changes["imds_v1"] = True
    for key in ("account_id", "state_delay", "consistency_window", "modify_limit", "modify_period",
                "enis",
                "nitro_attachment_slots", "xen_attachment_limit", "create_error_rate", "latency",
                "seed", "credential_ttl", "max_clock_skew", "role_name", "imds_instance"):
        if getattr(args, key) is not None:
            changes[key] = getattr(args, key)
    return config.merged(cfg, changes, running=False)


def write_port_file(path, info):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        json.dump(info, f)
    os.rename(tmp, path)


STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def main(argv):
    # Blocked before any server thread starts, so that every thread inherits the mask and the
    # main thread alone takes them, in sigwait.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    args = parse_args(argv)
    try:
        cfg = settings(args)
    except (config.ConfigError, OSError, ValueError) as e:
        print("ec2sim: %s" % e, file=sys.stderr)
        return 2
    try:
        import server
    except ImportError as e:
        print("ec2sim: %s (install Debian's python3-botocore and run /usr/bin/python3)" % e,
              file=sys.stderr)
        return 2
    from wire import Ec2Error
    try:
        sim = server.Sim(cfg, verbose=args.verbose)
    except Ec2Error as e:
        print("ec2sim: bad instances: %s" % e.message, file=sys.stderr)
        return 2
    if args.devices_instance:
        import devices
        if not args.devices_dir:
            print("ec2sim: --devices-instance needs --devices-dir", file=sys.stderr)
            return 2
        sim.cloud.devices = devices.Devices(args.devices_instance, args.devices_dir)
    ec2 = server.serve(sim, server.Ec2Handler, args.host, args.port)
    imds = None
    if args.imds_port is not None:
        imds = server.serve(sim, server.ImdsHandler, args.host, args.imds_port)
    info = {"ec2": "http://%s:%d" % (args.host, ec2.server_address[1]),
            "ec2_port": ec2.server_address[1],
            "imds": "http://%s:%d" % (args.host, imds.server_address[1]) if imds else None,
            "imds_port": imds.server_address[1] if imds else None,
            "pid": os.getpid()}
    if args.port_file:
        write_port_file(args.port_file, info)
    print("ec2sim: ec2 %s imds %s" % (info["ec2"], info["imds"] or "-"), flush=True)
    signal.sigwait(STOP_SIGNALS)
    with sim.cloud.lock:
        if sim.cloud.devices:
            sim.cloud.devices.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
