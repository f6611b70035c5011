# SPDX-License-Identifier: Apache-2.0
"""volplugd SIGKILLed and restarted at random moments while clients run whole volume lifecycles
against it (issue 21's finding, attacked again). CHAOS_CLIENTS clients (8) each run, until
CHAOS_KILLS kills (24) are done: CreateVolume, ControllerPublish, NodeStage (xfs and ext4 in
turn), NodePublish, a file written and read back, NodeUnpublish, NodeUnstage,
ControllerUnpublish; every other lifecycle also a snapshot, a volume restored from it (staged,
its file read back) and a clone; then everything deleted. Every call is retried as a CO
retries it (ABORTED, UNAVAILABLE, DEADLINE_EXCEEDED), a NodeStageVolume on any error for a
while (a volume whose stage never succeeds again is wedged).

Asserted: no other error; every name exists exactly once from its create until its delete and
never after (the pool's records read from the disk); at the end no volume or snapshot left, no
loop device, mount or tmp/ entry, `volplugctl pool check` clean, nothing wedged. CHAOS_SEED
makes the kill moments repeatable. One TAP line with the counts. Needs root."""

import collections
import glob
import json
import os
import random
import signal
import subprocess
import threading
import time
import traceback

import grpc
from google.protobuf import json_format

from harness import _SERVICES, VOLPLUGCTL, Ctx, is_root
from test_node import force_cleanup, loops_under, mount_cap, mounts_under

MiB = 1 << 20
C = grpc.StatusCode
RETRIED = (C.UNAVAILABLE, C.ABORTED, C.DEADLINE_EXCEEDED)
STAGE_PATIENCE = 90  # seconds a NodeStageVolume may keep failing before the volume is wedged
CALL_PATIENCE = 180  # seconds any other call may keep answering a retried code
SIZE = 320 * MiB  # mkfs.xfs wants 300 MB


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.lifecycles = 0
        self.retries = collections.Counter()
        self.stage_errors = collections.Counter()  # codes a stage answered before succeeding
        self.wedged = []
        self.errors = []  # (client, method, code, message): what no CO would retry
        self.names = []  # name-count violations

    def add(self, what, key=None, value=None):
        with self.lock:
            if what == "retry":
                self.retries[key] += 1
            elif what == "stage":
                self.stage_errors[key] += 1
            elif what == "lifecycle":
                self.lifecycles += 1
            else:
                getattr(self, what).append(value)


class Unexpected(Exception):
    pass


class Chaos:
    def __init__(self, ctx, clients, kills, seed):
        self.ctx, self.n_clients, self.n_kills = ctx, clients, kills
        self.rand = random.Random(seed)
        self.seed = seed
        self.d = ctx.daemon(args=["--overprovision-ratio", "100"])
        self.pool = self.d.pool
        self.stats = Stats()
        self.kills = 0
        self.killed_children = collections.Counter()  # what volplugd ran when it was killed
        self.done = threading.Event()
        self.restarting = threading.Lock()

    # --- the killer ---

    def killer(self):
        try:
            while self.kills < self.n_kills:
                time.sleep(self.rand.uniform(0.2, 2.5))
                with self.restarting:
                    for child in children(self.d.proc.pid):
                        self.killed_children[child] += 1
                    self.d.proc.send_signal(signal.SIGKILL)
                    self.d.proc.wait()
                    self.kills += 1
                    self.d.log.close()
                    self.d.start(wait=False)
                    self.d.wait_ready(timeout=60)
        except Exception:
            self.stats.add("errors", value=("killer", traceback.format_exc()))
        finally:
            self.done.set()

    # --- calls as a CO makes them ---

    def call(self, ch, method, req, stage=False):
        path, req_cls, rep_cls = _SERVICES[method]
        msg = json_format.ParseDict(req, req_cls())
        stub = ch.unary_unary(path, request_serializer=req_cls.SerializeToString,
                              response_deserializer=rep_cls.FromString)
        start = time.monotonic()
        delay = 0.05
        while True:
            try:
                return stub(msg, timeout=20)
            except grpc.RpcError as e:
                code, details = e.code(), e.details()
            waited = time.monotonic() - start
            if code in RETRIED and waited < CALL_PATIENCE:
                self.stats.add("retry", code.name)
            elif stage and waited < STAGE_PATIENCE:
                self.stats.add("stage", "%s: %s" % (code.name, details[:120]))
            elif stage:
                self.stats.add("wedged", value="%s: %s: %s" % (req["volume_id"], code.name,
                                                              details))
                raise Unexpected("%s wedged: %s: %s" % (req["volume_id"], code.name, details))
            else:
                raise Unexpected("%s: %s: %s" % (method, code.name, details))
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    # --- the pool's records, read from the disk ---

    def names_on_disk(self, kind="volumes"):
        names = collections.Counter()
        for meta in glob.glob(os.path.join(self.pool, kind, "*", "meta.json")):
            try:
                with open(meta) as f:
                    names[json.load(f).get("name")] += 1
            except (OSError, ValueError):
                pass  # being written or removed this instant
        return names

    def expect_name(self, client, name, count, kind="volumes"):
        with self.restarting:  # no crash half-way through an object while counting
            found = self.names_on_disk(kind)[name]
        if found != count:
            self.stats.add("names", value="%s: %s %s on disk %d times, want %d" % (
                client, kind, name, found, count))

    # --- one client ---

    def node_cycle(self, ch, vid, name, fs, write):
        cap = mount_cap(fs)
        pub = self.call(ch, "ControllerPublishVolume", {"volume_id": vid, "node_id": "node-1",
                                                        "volume_capability": cap})
        staging = os.path.join(self.ctx.tmp, "plugins", name, "globalmount")
        target = os.path.join(self.ctx.tmp, "pods", name, "mount")
        os.makedirs(staging, exist_ok=True)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        self.call(ch, "NodeStageVolume", {"volume_id": vid, "staging_target_path": staging,
                                          "volume_capability": cap,
                                          "publish_context": dict(pub.publish_context)},
                  stage=True)
        self.call(ch, "NodePublishVolume", {"volume_id": vid, "staging_target_path": staging,
                                            "target_path": target, "volume_capability": cap})
        f = os.path.join(target, "data")
        if write:
            with open(f, "w") as out:
                out.write(name)
                out.flush()
                os.fsync(out.fileno())
        with open(f) as got:
            if got.read() != write_of(name):
                raise Unexpected("%s: the file on the volume does not hold what was written" %
                                 name)
        self.call(ch, "NodeUnpublishVolume", {"volume_id": vid, "target_path": target})
        self.call(ch, "NodeUnstageVolume", {"volume_id": vid, "staging_target_path": staging})
        self.call(ch, "ControllerUnpublishVolume", {"volume_id": vid, "node_id": "node-1"})

    def create(self, ch, client, name, fs, source=None):
        req = {"name": name, "capacity_range": {"required_bytes": SIZE},
               "volume_capabilities": [mount_cap(fs)]}
        if source:
            req["volume_content_source"] = source
        vid = self.call(ch, "CreateVolume", req).volume.volume_id
        self.expect_name(client, name, 1)
        return vid

    def delete(self, ch, client, vid, name):
        self.call(ch, "DeleteVolume", {"volume_id": vid})
        self.expect_name(client, name, 0)

    def lifecycle(self, ch, client, n):
        name = "chaos-%d-%d" % (client, n)
        fs = ("xfs", "ext4")[(client + n) % 2]
        vid = self.create(ch, client, name, fs)
        self.node_cycle(ch, vid, name, fs, write=True)
        if n % 2 == 0:
            snap = name + "-snap"
            sid = self.call(ch, "CreateSnapshot", {"name": snap, "source_volume_id": vid}
                            ).snapshot.snapshot_id
            self.expect_name(client, snap, 1, "snapshots")
            restored = self.create(ch, client, name + "-r", fs,
                                   {"snapshot": {"snapshot_id": sid}})
            self.node_cycle(ch, restored, name + "-r", fs, write=False)
            clone = self.create(ch, client, name + "-k", fs, {"volume": {"volume_id": vid}})
            self.delete(ch, client, clone, name + "-k")
            self.delete(ch, client, restored, name + "-r")
            self.call(ch, "DeleteSnapshot", {"snapshot_id": sid})
            self.expect_name(client, snap, 0, "snapshots")
        self.delete(ch, client, vid, name)
        self.stats.add("lifecycle")

    def client(self, i):
        # Reconnect quickly after a kill, as a CO's sidecar does (not gRPC's backoff to 120 s).
        ch = grpc.insecure_channel("unix:" + self.d.socket, options=[
            ("grpc.initial_reconnect_backoff_ms", 50), ("grpc.min_reconnect_backoff_ms", 50),
            ("grpc.max_reconnect_backoff_ms", 500)])
        n = 0
        try:
            while not self.done.is_set():
                self.lifecycle(ch, i, n)
                n += 1
        except Unexpected as e:
            self.stats.add("errors", value=("client %d" % i, str(e)))
        except Exception:
            self.stats.add("errors", value=("client %d" % i, traceback.format_exc()))
        finally:
            ch.close()

    def run(self):
        start = time.monotonic()
        threads = [threading.Thread(target=self.client, args=(i,)) for i in
                   range(self.n_clients)]
        killer = threading.Thread(target=self.killer)
        for t in threads + [killer]:
            t.start()
        for t in threads + [killer]:
            t.join()
        return time.monotonic() - start


def children(pid):
    """The names of the programs pid runs now (mkfs.xfs, fsck.ext4, ...)."""
    names = []
    for path in glob.glob("/proc/%d/task/*/children" % pid):
        try:
            with open(path) as f:
                pids = f.read().split()
        except OSError:
            continue
        for child in pids:
            try:
                with open("/proc/%s/cmdline" % child, "rb") as f:
                    name = os.path.basename(f.read().split(b"\0")[0].decode())
            except OSError:
                continue
            if name:  # empty: a zombie, or between fork and exec
                names.append(name)
    return names


def write_of(name):
    """What the lifecycle of name wrote on its volume (a restore holds its source's)."""
    return name[:-2] if name.endswith("-r") else name


def main():
    if not is_root():
        print("1..0 # SKIP needs root (loop devices, mkfs, mount)")
        return 0
    clients = int(os.environ.get("CHAOS_CLIENTS", "8"))
    kills = int(os.environ.get("CHAOS_KILLS", "24"))
    seed = int(os.environ.get("CHAOS_SEED", str(random.randrange(1 << 30))))
    ctx = Ctx()
    print("1..1", flush=True)
    ok = False
    try:
        chaos = Chaos(ctx, clients, kills, seed)
        took = chaos.run()
        s = chaos.stats
        d = chaos.d
        pool = chaos.pool
        left_volumes = sorted(chaos.names_on_disk())
        left_snapshots = sorted(chaos.names_on_disk("snapshots"))
        listed = [e.volume.volume_id for e in d.call("ListVolumes").entries]
        snaps = [e.snapshot.snapshot_id for e in d.call("ListSnapshots").entries]
        mounts = [m["target"] for m in mounts_under(ctx.tmp)]
        loops = loops_under(ctx.tmp)
        d.stop()
        tmp_left = sorted(os.listdir(os.path.join(pool, "tmp")))
        check = subprocess.run([VOLPLUGCTL, "pool", "check", pool], capture_output=True,
                               text=True)
        last = (check.stdout.strip().splitlines() or [""])[-1]
        counts = ("seed %d, %d clients, %.0f s: %d lifecycles, %d kills, %d retries (%s), "
                  "%d killed with a child running (%s), "
                  "%d stages that failed before succeeding, %d wedged, leftovers: %d volumes, "
                  "%d snapshots, %d mounts, %d loop devices, %d in tmp/; pool check: %s" % (
                      seed, clients, took, s.lifecycles, chaos.kills,
                      sum(s.retries.values()),
                      ", ".join("%s %d" % kv for kv in sorted(s.retries.items())) or "none",
                      sum(chaos.killed_children.values()),
                      ", ".join("%s %d" % kv for kv in sorted(chaos.killed_children.items()))
                      or "none",
                      sum(s.stage_errors.values()), len(s.wedged),
                      len(listed), len(snaps), len(mounts), len(loops), len(tmp_left), last))
        problems = []
        if s.errors:
            problems.append("errors no CO retries:\n" + "\n".join("%s: %s" % e
                                                                  for e in s.errors))
        if s.wedged:
            problems.append("wedged:\n" + "\n".join(s.wedged))
        if s.names:
            problems.append("names not exactly once:\n" + "\n".join(s.names))
        if listed or snaps or left_volumes or left_snapshots:
            problems.append("left: volumes %s %s, snapshots %s %s" % (
                listed, left_volumes, snaps, left_snapshots))
        if mounts or loops or tmp_left:
            problems.append("leaked: mounts %s, loop devices %s, tmp/ %s" % (
                mounts, loops, tmp_left))
        if check.returncode != 0 or not last.endswith(" 0 problems"):
            problems.append("pool check: exit %d:\n%s" % (check.returncode,
                                                          check.stdout + check.stderr))
        if not s.lifecycles or chaos.kills < kills:
            problems.append("too little ran: %d lifecycles, %d kills" % (s.lifecycles,
                                                                        chaos.kills))
        if s.stage_errors:
            print("# stages that failed before succeeding: %s" % dict(s.stage_errors))
        if problems:
            print("not ok 1 - chaos: %s" % counts)
            for p in problems:
                for line in p.splitlines():
                    print("#   " + line)
        else:
            print("ok 1 - chaos: %s" % counts)
            ok = True
    except Exception:
        print("not ok 1 - chaos")
        for line in traceback.format_exc().splitlines():
            print("#   " + line)
    finally:
        leaked = force_cleanup(ctx.tmp)
        if leaked:
            print("# force-cleaned: %s" % leaked)
        ctx.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
