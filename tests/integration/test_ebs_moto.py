# SPDX-License-Identifier: Apache-2.0
"""The EBS controller's tests for any EC2 peer (test_ebs_controller.COMMON) against moto, an EC2
emulator written by others, as an independent check of what volplug sends and how it reads the
replies. Skipped, with the reason, where moto is not installed (ebs_clouds.MotoCloud says
where it looks). What moto does not model skips that part of a test, saying what differs."""

from ebs_clouds import MotoCloud
from harness import run
from test_ebs_controller import COMMON


def on_moto(fn):
    def test(ctx):
        cloud = MotoCloud(ctx)
        fn(ctx, cloud)
        return "left out: " + cloud.skipped() if cloud.skipped() else None
    test.__name__ = "test_moto_" + fn.__name__
    return test


TESTS = [on_moto(fn) for fn in COMMON]

if __name__ == "__main__":
    run(TESTS)
