#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""kill -9 of volplugd at every step of a store snapshot's life (issue 24, docs/snapshots.md
"What a crash at each step leaves"): for each failpoint, one lifecycle (two snapshots, a
delete, a collection, a restore) with volplugd SIGKILLing itself there, restarted on the
same pool and store and the step retried. Then: every manifest restores its volume's bytes,
every chunk a manifest names is there, after a last collection (everything aged past the
grace and the lease) nothing else is left in the store (no chunk, intent or marker), the
pool check is clean, and ListSnapshots shows exactly the snapshots kept, ready."""

import hashlib
import json
import os
import random
import time

from harness import local_id, run, wait_for

import grpc  # noqa: E402  (found through the path harness sets)
from test_controller import assert_pool_clean
from test_store_snapshot import (MIB, SimPeer, restore_check, store_daemon, until_ready,
                                 volume)

BLOCK = {"access_mode": {"mode": "SINGLE_NODE_WRITER"}, "block": {}}

# (failpoint, the step it fires in)
POINTS = [
    ("store-upload-after-intent", "upload"),
    ("store-upload-after-chunks", "upload"),
    ("store-upload-after-manifest", "upload"),
    ("store-delete-after-copy", "delete"),
    ("store-delete-after-manifest", "delete"),
    ("store-gc-after-marker", "collect"),
    ("store-gc-before-delete", "collect"),
    ("store-gc-after-delete", "collect"),
    ("store-restore-after-fill", "restore"),
]


class Life:
    """One volplugd on one pool and store prefix, its failpoint armed until it fires."""

    def __init__(self, ctx, peer, point, prefix):
        self.ctx, self.peer, self.point, self.prefix = ctx, peer, point, prefix
        self.kills, self.n, self.killed_in = 0, 0, None
        self.armed, self.gc = True, "0"
        self.d = self.start()

    def start(self, pool=None):
        self.n += 1
        env = {"VOLPLUG_FAILPOINTS": "%s=crash" % self.point} if self.armed else {}
        return store_daemon(self.ctx, self.peer, name="%s-%d" % (self.point, self.n),
                            prefix=self.prefix, gc=self.gc, env=env, pool=pool)

    def restart(self, gc):
        self.gc = gc
        pool = self.d.pool
        self.d.stop()
        self.d = self.start(pool)

    def step(self, where, fn, timeout=60):
        """fn(d) until it returns; a kill by the failpoint on the way restarts volplugd
        without it (the same pool and store, as a supervisor would) and fn runs again."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return fn(self.d)
            except (grpc.RpcError, AssertionError) as e:
                if time.monotonic() > deadline:
                    raise
                died = self.d.proc.poll() is not None or wait_for_exit(self.d)
                if not died:
                    raise
                assert self.d.proc.returncode == -9, (self.d.proc.returncode, e)
                assert "failpoint %s: crashing" % self.point in self.d.logs()
                self.kills += 1
                self.killed_in, self.armed = where, False
                pool = self.d.pool
                self.d.stop()
                self.d = self.start(pool)
                self.visible_whole()

    def visible_whole(self):
        """Each store snapshot ListSnapshots shows ready has its manifest in the store."""
        for e in self.d.call("ListSnapshots").entries:
            sid = e.snapshot.snapshot_id
            if sid.startswith("store:") and e.snapshot.ready_to_use:
                key = "%s/snapshots/%s.json" % (self.prefix, sid.split(":", 1)[1])
                assert self.peer.keys(key), (self.point, sid, "ready without its manifest")


def wait_for_exit(d, timeout=5):
    try:
        d.proc.wait(timeout)
        return True
    except Exception:
        return False


def keys(peer, prefix, folder):
    return peer.keys("%s/%s/" % (prefix, folder))


def named(peer, prefix):
    """The chunk keys the manifests in the store name."""
    out = set()
    for k in keys(peer, prefix, "snapshots"):
        m = json.loads(peer.get(k))
        out |= {"%s/chunks/%s/%s" % (prefix, c["hash"][:2], c["hash"]) for c in m["chunks"]}
    return out


def collection(d):
    """Waits for a collection that completed; an AssertionError if volplugd died first."""
    wait_for(lambda: "collected " in d.logs() or d.proc.poll() is not None, 20,
             "a collection")
    assert d.proc.poll() is None, "volplugd died"


def uploaded(life, name, vol):
    """The snapshot, once ready, its upload's intent gone (a live one defers every
    collection in the store for a lease)."""
    s = life.step("upload", lambda d: until_ready(d, name, vol))
    wait_for(lambda: not keys(life.peer, life.prefix, "intents"), 10,
             "%s: the intent removed once %s is ready" % (life.point, name))
    return s


def lifecycle(ctx, peer, point, where, prefix):
    life = Life(ctx, peer, point, prefix)
    vol, path = volume(life.d, "pvc-" + prefix, ranges=[(0, MIB), (5 * MIB, MIB), (9 * MIB, MIB)])
    with open(path, "rb") as f:
        bytes_a = f.read()
    a = uploaded(life, "snap-a", vol)
    restore_check(peer, prefix, a.snapshot_id, path, bytes_a)
    with open(path, "r+b") as f:
        f.seek(0)
        f.write(random.randbytes(MIB))  # chunk 0 changes: snap-a keeps one of its own
        f.seek(0)
        bytes_b = f.read()
    b = uploaded(life, "snap-b", vol)
    # the delete: again until it answers (as csi-snapshotter does)
    life.step("delete", lambda d: d.call("DeleteSnapshot", snapshot_id=a.snapshot_id))
    assert not peer.keys("%s/snapshots/%s.json" % (prefix, a.snapshot_id.split(":")[1]))
    # a collection with everything past its grace and lease: on a restart with it every second
    peer.age("%s/" % prefix)
    life.restart(gc="1s")
    life.step("collect", collection)
    # a restore of snap-b into a new volume, its bytes those of the volume at snapshot time
    req = dict(name="restored-" + prefix, capacity_range={"required_bytes": 16 * MIB},
               volume_capabilities=[BLOCK],
               volume_content_source={"snapshot": {"snapshot_id": b.snapshot_id}})
    v = life.step("restore", lambda d: d.call("CreateVolume", req).volume)
    restored = os.path.join(life.d.pool, "volumes", local_id(v.volume_id), "data")
    with open(restored, "rb") as f:
        assert hashlib.sha256(f.read()).digest() == hashlib.sha256(bytes_b).digest(), point
    assert (life.kills, life.killed_in) == (1, where), (point, life.kills, life.killed_in)

    # the invariants, after a last collection with everything aged
    manifests = keys(peer, prefix, "snapshots")
    assert manifests == {"%s/snapshots/%s.json" % (prefix, b.snapshot_id.split(":")[1])}, \
        (point, manifests)
    restore_check(peer, prefix, b.snapshot_id, path, bytes_b)
    assert named(peer, prefix) <= keys(peer, prefix, "chunks"), point
    peer.age("%s/" % prefix)
    n = life.d.logs().count("collected ")
    wait_for(lambda: life.d.logs().count("collected ") > n + 1, 20, "two more collections")
    left = peer.keys("%s/" % prefix) - manifests - named(peer, prefix)
    assert not left, (point, sorted(left))
    assert named(peer, prefix) <= keys(peer, prefix, "chunks"), point
    restore_check(peer, prefix, b.snapshot_id, path, bytes_b)
    listed = [e.snapshot for e in life.d.call("ListSnapshots").entries]
    assert [(s.snapshot_id, s.ready_to_use) for s in listed] == [(b.snapshot_id, True)], \
        (point, listed)
    life.d.stop()
    assert_pool_clean(life.d.pool)
    assert not os.listdir(os.path.join(life.d.pool, "snapshots")), point
    return life


def test_kill9_every_step(ctx):
    """For each failpoint: volplugd SIGKILLs itself there, is restarted on the same pool and
    store, the step is retried; then no manifest restores wrong bytes, none lacks a chunk,
    nothing is left after the next collection, the pool is clean and ListSnapshots shows only
    the snapshot kept, ready."""
    peer = SimPeer(ctx)
    kills = lives = 0
    for i, (point, where) in enumerate(POINTS):
        life = lifecycle(ctx, peer, point, where, "k%d" % i)
        kills += life.kills
        lives += 1
    line = "points %d, kills %d, lifecycles %d" % (len(POINTS), kills, lives)
    print("# " + line)
    return line


if __name__ == "__main__":
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (the pool's reflinked copies)")
        raise SystemExit(0)
    run([test_kill9_every_step])
