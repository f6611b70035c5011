#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""scripts/check-layers on a copy of the tree: the tree as it is passes; each planted violation
(a backend's name in the daemon, a circle of includes inside a backend's folder) fails, named.
TAP."""

import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.environ.get("VOLPLUG_SOURCE_ROOT", ".")
SCRIPT = os.path.join(ROOT, "scripts", "check-layers")

# (what, file, text appended, what the failure names)
PLANTS = [
    ("a backend's name as a string in volplugd", "src/cmd/volplugd.c",
     '\nstatic int is_that(const char *b) { return strcmp(b, "ebs") == 0; }\n',
     '"ebs" names backend ebs'),
    ("a backend's option in daemon-config", "src/cmd/daemon-config.c",
     '\nstatic const char *const opt = "--pool-capacity";\n', 'names backend pool'),
    ("a backend's field in the CSI layer", "src/csi/driver.h",
     "\nstruct Planted { const char *pool_path; };\n", "pool_path names backend pool"),
    ("a backend's metric read by name", "src/csi/admin.c",
     '\nstatic const char *m = "volplug_pool_volumes";\n', "names backend pool"),
    ("a layer-named backend's constructor", "src/rpc/server.c",
     "\nextern int flex_backend_new(void);\n", "flex_backend_new names backend flex"),
    ("ret_error before another parameter", "src/backend/devnames.c",
     "\nint planted_check(char **ret_error, const char *name);\n",
     "planted_check takes ret_error as parameter 1 of 2"),
    ("a circle of includes in a backend's folder", "src/backend/pool/pool-space.h",
     '#pragma once\n#include "pool.h"\n', "backend/pool: pool includes pool-space includes pool"),
]


def run(root):
    p = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


def copy():
    tmp = tempfile.mkdtemp(prefix="volplug-layers.")
    for d in ("src", "proto"):
        shutil.copytree(os.path.join(ROOT, d), os.path.join(tmp, d))
    return tmp


def main():
    print("1..%d" % (1 + len(PLANTS)))
    tmp = copy()
    rc, out = run(tmp)
    print("%s 1 - the tree as it is passes" % ("ok" if rc == 0 else "not ok"))
    if rc != 0:
        print("".join("#   %s\n" % l for l in out.splitlines()), end="")
    shutil.rmtree(tmp)
    failed = rc != 0
    for i, (what, rel, text, named) in enumerate(PLANTS, 2):
        tmp = copy()
        path = os.path.join(tmp, rel)
        with open(path, "a") as f:
            f.write(text)
        if rel.endswith("pool-space.h"):
            # pool.h includes the new header: pool.h -> pool-space.h -> pool.h
            with open(os.path.join(tmp, "src/backend/pool/pool.h"), "a") as f:
                f.write('#include "pool-space.h"\n')
        rc, out = run(tmp)
        good = rc != 0 and named in out
        failed |= not good
        print("%s %d - fails on %s" % ("ok" if good else "not ok", i, what))
        if not good:
            print("".join("#   %s\n" % l for l in out.splitlines()), end="")
        shutil.rmtree(tmp)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
