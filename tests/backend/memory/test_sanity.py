#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""csi-sanity's Controller Service specs against volplugd-test-backend --backend memory: a
backend that lives in tests/ served by the daemon's own CSI layer. Skips, saying why, when
csi-sanity is not on PATH (or in $CSI_SANITY). TAP: one line for the run."""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

VOLPLUGD = os.environ.get("VOLPLUGD", "volplugd-test-backend")


def main():
    sanity = os.environ.get("CSI_SANITY") or shutil.which("csi-sanity")
    if not sanity:
        print("1..0 # SKIP csi-sanity is not on PATH (nor in CSI_SANITY)")
        return 0
    print("1..2")
    tmp = tempfile.mkdtemp(prefix="volplug-memory-sanity.")
    sock = os.path.join(tmp, "csi.sock")
    log = open(os.path.join(tmp, "daemon.log"), "w")
    d = subprocess.Popen([VOLPLUGD, "all", "--backend", "memory", "--endpoint", "unix://" + sock,
                          "--node-id", "sanity-node", "--driver-name", "memory.volplug.io",
                          "--flexvolume-dir", ""], stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(200):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        print("%s - volplugd-test-backend serves --backend memory" %
              ("ok 1" if os.path.exists(sock) else "not ok 1"))
        with open(os.path.join(tmp, "mutable.yaml"), "w") as f:
            f.write('throughput: "200"\n')
        p = subprocess.run([sanity, "--csi.endpoint", sock,
                            "--csi.stagingdir", os.path.join(tmp, "stage"),
                            "--csi.mountdir", os.path.join(tmp, "mnt"),
                            "--csi.testvolumesize", "1073741824",
                            "--csi.testvolumeexpandsize", "2147483648",
                            "--csi.testvolumemutableparameters",
                            os.path.join(tmp, "mutable.yaml"),
                            "--ginkgo.focus", "Controller Service", "--ginkgo.no-color"],
                           capture_output=True, text=True, timeout=500)
        out = p.stdout + p.stderr
        summary = re.findall(r"\d+ Passed \| \d+ Failed[^\n]*", out)
        ok = p.returncode == 0
        print("%s - csi-sanity Controller Service: %s" %
              ("ok 2" if ok else "not ok 2", summary[-1] if summary else "no summary"))
        if not ok:
            for line in out.splitlines():
                if "[FAIL]" in line or "Expected" in line:
                    print("#   " + line.strip()[:200])
        return 0 if ok else 1
    finally:
        d.send_signal(signal.SIGTERM)
        try:
            d.wait(timeout=30)
        except subprocess.TimeoutExpired:
            d.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
