# SPDX-License-Identifier: Apache-2.0
"""test_hostile.py's table of hostile Node requests against the EBS backend's node service:
volplugd node --backend ebs in a private mount namespace, chrooted into the jail, its volumes
loop devices presented under their NVMe by-id names in the jail's /by-id. The same rows, codes
and checks as for the pool (the mount table and the files around are unchanged after each), the
two symlink races, and a teardown that leaves no mount and no record, and every device attached
(EC2 detaches, never the node). Needs root."""

import os
import subprocess
import sys

from test_hostile import (Jail, id_rows, option_rows, path_rows, run_jail, set_up_foreign,
                          stage_volumes, tear_down)

MiB = 1 << 20
VOLUMES = {name: "vol-0e0000000000000%02x" % i for i, name in enumerate("abcd", 1)}


class EbsJail(Jail):
    def __init__(self, tmp):
        super().__init__(tmp)
        self.disks = os.path.join(self.dir, "disks")
        os.makedirs(self.disks)
        os.makedirs(self.host("/by-id"))
        self.loops = []

    def command(self):
        return ("/volplugd node --backend ebs --endpoint unix:///run/csi.sock --state-dir /state "
                "--device-dir /by-id --node-id i-0e00000000000000a --zone us-east-1a "
                "--instance-type m5.large --device-wait 200ms --driver-name test.volplug.io "
                "-v 4")

    def attach(self, vid):
        """An attached EBS volume: a loop device named as udev names its NVMe device."""
        path = os.path.join(self.disks, vid)
        with open(path, "wb") as f:
            f.truncate(32 * MiB)
        dev = subprocess.run(["losetup", "-f", "--show", path], capture_output=True, text=True,
                             check=True).stdout.strip()
        self.loops.append(dev)
        os.symlink(dev, self.host("/by-id/nvme-Amazon_Elastic_Block_Store_" +
                                  vid.replace("-", "")))

    def records(self):
        return os.listdir(self.host("/state/ebs/volumes"))


def set_up(jail):
    set_up_foreign(jail)
    for vid in VOLUMES.values():
        jail.attach(vid)
    return stage_volumes(jail, dict(VOLUMES))


def node_rows(rows):
    """The rows of Node RPCs: the EBS backend has no controller yet."""
    return [r for r in rows if r[1].startswith("Node")]


def ebs_tear_down(jail, v):
    tear_down(jail, v)
    mounted = [m for m in jail.mounts() if m[2] in jail.loops]
    assert not mounted, "mounts left: %s" % mounted
    assert jail.records() == [], "records left: %s" % jail.records()
    attached = subprocess.run(["losetup", "-l", "-n", "-O", "NAME"], capture_output=True,
                              text=True).stdout.split()
    assert all(dev in attached for dev in jail.loops), "the node detached a device"
    return "teardown: nothing mounted, no record left, every device still attached"


def detach(jail):
    for dev in jail.loops:
        subprocess.run(["losetup", "-d", dev], capture_output=True)


if __name__ == "__main__":
    sys.exit(run_jail(EbsJail, set_up,
                      lambda v: path_rows(v) + node_rows(id_rows(v) + option_rows(v)),
                      ebs_tear_down, detach))
