#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Oversized parameter maps: how long volplugd takes to answer a CreateVolume carrying KEYS
tagSpecification_N parameters (the pool backend, and the EBS backend against ec2sim), and a
NodeStageVolume carrying KEYS volume_context entries; then how long GetPluginInfo waits while
CLIENTS such requests run at once. Prints one row per case: the request's size on the wire,
the seconds until the answer, the gRPC code and the start of its message.

Environment: BUILD (default build; VOLPLUGD overrides the daemon, to compare two builds),
KEYS (100000), CLIENTS (8), EBS (1: also the EBS backend against ec2sim; 0: skip it),
TIMEOUT (120: the deadline of each call, in seconds; a row that reaches it says so).
Needs no root: nothing is staged or mounted."""

import os
import sys
import threading
import time

BUILD = os.environ.get("BUILD", "build")
os.environ.setdefault("VOLPLUGD", os.path.join(BUILD, "src/cmd/volplugd"))
os.environ.setdefault("VOLPLUGCTL", os.path.join(BUILD, "src/cmd/volplugctl"))
os.environ.setdefault("VOLPLUG_PROTO_PY", os.path.join(BUILD, "proto"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))

import grpc  # noqa: E402

from harness import Ctx  # noqa: E402 (it finds the generated modules)

import csi_pb2  # noqa: E402

KEYS = int(os.environ.get("KEYS", 100000))
CLIENTS = int(os.environ.get("CLIENTS", 8))
EBS = os.environ.get("EBS", "1") == "1"
TIMEOUT = float(os.environ.get("TIMEOUT", 120))


def create_request(name):
    r = csi_pb2.CreateVolumeRequest(name=name)
    r.capacity_range.required_bytes = 1 << 30
    c = r.volume_capabilities.add()
    c.mount.fs_type = "ext4"
    c.access_mode.mode = csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
    for i in range(KEYS):
        r.parameters["tagSpecification_%d" % (i + 1)] = "k%d=v" % i
    return r


def stage_request(vid, tmp):
    r = csi_pb2.NodeStageVolumeRequest(volume_id=vid, staging_target_path=tmp + "/staging")
    r.volume_capability.mount.fs_type = "ext4"
    r.volume_capability.access_mode.mode = csi_pb2.VolumeCapability.AccessMode.SINGLE_NODE_WRITER
    for i in range(KEYS):
        r.volume_context["key%d" % i] = "value%d" % i
    return r


def timed(d, method, request, timeout=None):
    """Seconds, code name and message of one call."""
    start = time.monotonic()
    try:
        d.call(method, request, timeout=timeout or TIMEOUT)
        code, msg = "OK", ""
    except grpc.RpcError as e:
        code, msg = e.code().name, e.details() or ""
    return time.monotonic() - start, code, msg


def row(label, size, secs, code, msg):
    print("%-44s %9d %9.3f  %-18s %s" % (label, size, secs, code, msg[:60]), flush=True)


def info_latency(d, method, make):
    """GetPluginInfo's latency while CLIENTS calls of method run; and their longest time."""
    results = []
    threads = [threading.Thread(target=lambda i=i: results.append(timed(d, method, make(i))))
               for i in range(CLIENTS)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # let them reach the workers
    latency, code, _ = timed(d, "GetPluginInfo", csi_pb2.GetPluginInfoRequest())
    for t in threads:
        t.join()
    return latency, code, max(r[0] for r in results), results[0][1]


def main():
    print("%-44s %9s %9s  %-18s %s" % ("case (%d keys)" % KEYS, "bytes", "seconds", "code",
                                        "message"))
    ctx = Ctx()
    try:
        # A daemon for each row: a handler still running after its client gave up (the
        # deadline) must not slow the next row down. kill -9 ends it at once.
        def fresh(name):
            for old in ctx.daemons:
                if old.proc and old.proc.poll() is None:
                    old.kill9()
            return ctx.daemon(name=name)

        req = create_request("pvc-bench")
        sreq = stage_request("vol-bench", ctx.tmp)
        row("CreateVolume tagSpecification_N (pool)", req.ByteSize(),
            *timed(fresh("create"), "CreateVolume", req))
        row("NodeStageVolume volume_context (pool)", sreq.ByteSize(),
            *timed(fresh("stage"), "NodeStageVolume", sreq))
        lat, code, longest, theirs = info_latency(fresh("info-create"), "CreateVolume",
                                                  lambda i: req)
        row("GetPluginInfo during %d CreateVolume" % CLIENTS, 0, lat, code,
            "the %d took up to %.3f s: %s" % (CLIENTS, longest, theirs))
        lat, code, longest, theirs = info_latency(fresh("info-stage"), "NodeStageVolume",
                                                  lambda i: sreq)
        row("GetPluginInfo during %d NodeStageVolume" % CLIENTS, 0, lat, code,
            "the %d took up to %.3f s: %s" % (CLIENTS, longest, theirs))
        if EBS:
            from ebs_clouds import SimCloud, ebs_daemon
            fresh("idle")
            cloud = SimCloud(ctx)
            e = ebs_daemon(ctx, cloud, name="ebs")
            ereq = create_request("pvc-bench-ebs")
            ereq.accessibility_requirements.requisite.add().segments[
                "topology.kubernetes.io/zone"] = "us-east-1a"
            row("CreateVolume tagSpecification_N (ebs)", ereq.ByteSize(),
                *timed(e, "CreateVolume", ereq))
    finally:
        ctx.cleanup()


if __name__ == "__main__":
    main()
