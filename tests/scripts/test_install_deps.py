# SPDX-License-Identifier: Apache-2.0
"""scripts/install-deps while another process holds the package lock, as unattended-upgrades
or a second apt does: it waits with a message naming the holder, then goes on; it gives up
only after INSTALL_DEPS_LOCK_TIMEOUT. apt-get runs on a private, empty package state
(APT_CONFIG: its own lists, dpkg status and lock files, no sources), so the test needs no
network and touches nothing of the machine's; the package asked for exists nowhere, so the
run ends at apt's "Unable to locate package", after the lock. TAP output; skipped without
root (install-deps installs only as root)."""

import fcntl
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("VOLPLUG_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
INSTALL_DEPS = os.path.join(ROOT, "scripts", "install-deps")
PACKAGE = "volplug-no-such-package"


def private_apt(tmp):
    """An apt configuration whose every state file is under tmp; returns (env, lists lock,
    dpkg frontend lock)."""
    for d in ("lists/partial", "cache/archives/partial", "dpkg/updates", "etc/parts",
              "etc/preferences.d", "etc/sources.list.d"):
        os.makedirs(os.path.join(tmp, d))
    open(os.path.join(tmp, "dpkg", "status"), "w").close()
    open(os.path.join(tmp, "etc", "sources.list"), "w").close()
    conf = os.path.join(tmp, "apt.conf")
    with open(conf, "w") as f:
        for key, path in (("Dir::State::lists", "lists"), ("Dir::State::status", "dpkg/status"),
                          ("Dir::Cache", "cache"), ("Dir::Etc::sourcelist", "etc/sources.list"),
                          ("Dir::Etc::sourceparts", "etc/sources.list.d"),
                          ("Dir::Etc::parts", "etc/parts"),
                          ("Dir::Etc::preferencesparts", "etc/preferences.d")):
            f.write('%s "%s";\n' % (key, os.path.join(tmp, path)))
    env = dict(os.environ, APT_CONFIG=conf)
    return env, os.path.join(tmp, "lists", "lock"), os.path.join(tmp, "dpkg", "lock-frontend")


def hold(path):
    """Holds the lock apt and dpkg take (fcntl, as theirs); close the fd to release it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o640)
    fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def run_install_deps(env, timeout):
    env = dict(env, INSTALL_DEPS_LOCK_TIMEOUT=str(timeout))
    return subprocess.Popen([INSTALL_DEPS, PACKAGE], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_waits_for_the_lock_then_goes_on():
    with tempfile.TemporaryDirectory() as tmp:
        env, lists_lock, dpkg_lock = private_apt(tmp)
        fds = [hold(lists_lock), hold(dpkg_lock)]
        start = time.monotonic()
        p = run_install_deps(env, 60)
        time.sleep(2.5)
        assert p.poll() is None, "gave up while the lock was held: %s" % p.communicate()[1]
        for fd in fds:
            os.close(fd)
        _, err = p.communicate(timeout=60)
        took = time.monotonic() - start
    assert p.returncode != 0, err
    want = "install-deps: waiting for the package lock (up to 60s): %s. It is held by " \
        "process %d (" % (lists_lock, os.getpid())
    assert want in err, err
    assert "Unable to locate package %s" % PACKAGE in err, "not past the lock: " + err
    assert "gave up" not in err, err
    return "waited %.1fs, then went on to the install" % took


def test_gives_up_after_the_timeout():
    with tempfile.TemporaryDirectory() as tmp:
        env, _, dpkg_lock = private_apt(tmp)
        fd = hold(dpkg_lock)
        start = time.monotonic()
        p = run_install_deps(env, 2)
        _, err = p.communicate(timeout=60)
        took = time.monotonic() - start
        os.close(fd)
    assert p.returncode != 0 and took >= 2, (p.returncode, took, err)
    assert "install-deps: waiting for the package lock (up to 2s): %s." % dpkg_lock in err, err
    assert "install-deps: gave up after " in err and dpkg_lock in err.splitlines()[-1], err
    return "gave up after %.1fs" % took


def main():
    tests = [test_waits_for_the_lock_then_goes_on, test_gives_up_after_the_timeout]
    print("1..%d" % len(tests))
    if os.geteuid() != 0:
        for i, t in enumerate(tests, 1):
            print("ok %d - %s # SKIP install-deps installs only as root" % (i, t.__name__))
        return
    failed = 0
    for i, t in enumerate(tests, 1):
        try:
            note = t()
            print("ok %d - %s%s" % (i, t.__name__, ": " + note if note else ""))
        except Exception as e:  # noqa: BLE001 - reported as a failed test
            failed += 1
            print("not ok %d - %s" % (i, t.__name__))
            for line in repr(e).splitlines():
                print("#   " + line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
