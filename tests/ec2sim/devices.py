# SPDX-License-Identifier: Apache-2.0
"""Devices for one instance: what a Nitro instance sees of the volumes EC2 attaches to it,
played by loop devices over sparse files, linked as udev links them
(by-id/nvme-Amazon_Elastic_Block_Store_vol0123...), so that a real EBS node service on this
machine (volplugd node --backend ebs --device-dir DIR/by-id) finds, formats and mounts them.

Each volume has a sparse file of its size in DIR/files from when it is made (from a snapshot:
a copy of the snapshot's file, taken when the snapshot was); attaching it to the instance
attaches a loop device and makes the link, detaching undoes both, a modification that grows
it grows the file and the loop device, deleting it removes the file. Needs root (losetup).
Called by the Cloud under its lock."""

import os
import shutil
import subprocess

BY_ID_PREFIX = "nvme-Amazon_Elastic_Block_Store_"
GIB = 1 << 30


def _run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()


class Devices:
    def __init__(self, instance, directory):
        self.instance = instance
        self.files = os.path.join(directory, "files")
        self.by_id = os.path.join(directory, "by-id")
        os.makedirs(self.files, exist_ok=True)
        os.makedirs(self.by_id, exist_ok=True)
        self.loops = {}  # volume id -> loop device

    def _file(self, oid):
        return os.path.join(self.files, oid)

    def _link(self, vid):
        return os.path.join(self.by_id, BY_ID_PREFIX + vid.replace("-", ""))

    def _size(self, vid, gib):
        with open(self._file(vid), "ab") as f:
            if f.tell() < gib * GIB:
                f.truncate(gib * GIB)

    def created(self, vol):
        src = self._file(vol.snapshot_id) if vol.snapshot_id else None
        if src and os.path.exists(src):
            _run("cp", "--sparse=always", src, self._file(vol.id))
        self._size(vol.id, vol.size)

    def attached(self, vol, instance):
        if instance != self.instance or vol.id in self.loops:
            return
        self._size(vol.id, vol.size)
        dev = _run("losetup", "-f", "--show", self._file(vol.id))
        self.loops[vol.id] = dev
        link = self._link(vol.id)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(dev, link)

    def detached(self, vol, instance):
        if instance != self.instance or vol.id not in self.loops:
            return
        if os.path.lexists(self._link(vol.id)):
            os.unlink(self._link(vol.id))
        # a device still mounted goes once it is unmounted (autoclear)
        subprocess.run(["losetup", "-d", self.loops.pop(vol.id)], capture_output=True)

    def resized(self, vol):
        self._size(vol.id, vol.size)
        if vol.id in self.loops:
            _run("losetup", "-c", self.loops[vol.id])

    def snapshot(self, snap):
        if os.path.exists(self._file(snap.volume_id)):
            _run("cp", "--sparse=always", self._file(snap.volume_id), self._file(snap.id))

    def removed(self, oid):
        if os.path.exists(self._file(oid)):
            os.unlink(self._file(oid))

    def close(self):
        for vid in list(self.loops):
            if os.path.lexists(self._link(vid)):
                os.unlink(self._link(vid))
            subprocess.run(["losetup", "-d", self.loops.pop(vid)], capture_output=True)
        shutil.rmtree(self.files, ignore_errors=True)
