# SPDX-License-Identifier: Apache-2.0
"""The volplug image (make image) run by a real OCI runtime, as the kubelet would run the
volplugd container of deploy/kubernetes/multi-node/node.yaml: the image's layout unpacked into a
bundle (umoci unpack), the container privileged, its command line the manifest's args, its
mounts the manifest's volumeMounts with every hostPath a directory of the test's own, but /dev,
which is the host's (loop devices are made there). From the host, volplugctl then talks to the
socket in the plugin directory: Probe (what livenessprobe asks), and a whole CSI lifecycle whose
mounts the host must see (the kubelet directory is mounted Bidirectional). Inside the running
container, `volplugd --version` and the image's own volplugctl. Then the Flexvolume installer
DaemonSet's container (deploy/flexvolume-installer/daemonset.yaml), from the same image: the
example drivers appear in its host plugin directory, whole and executable. TAP output.

The runtime is crun or runc, whichever runs here (`--version` in the image); skipped, with each
runtime's own words, only when neither can run a container. Without an image: skipped, but a
failure when VOLPLUG_REQUIRE_IMAGE=1 (make test builds the image first)."""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

ROOT = os.environ.get("VOLPLUG_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
IMAGE = os.environ.get("VOLPLUG_IMAGE", os.path.join(ROOT, "build", "image", "oci"))
VERSION = os.environ.get("VOLPLUG_VERSION", "0.1.0")
VOLPLUGCTL = os.environ.get("VOLPLUGCTL", os.path.join(ROOT, "build", "src", "cmd", "volplugctl"))
MANIFEST = os.path.join(ROOT, "deploy", "kubernetes", "multi-node", "node.yaml")
INSTALLER = os.path.join(ROOT, "deploy", "flexvolume-installer", "daemonset.yaml")
EXAMPLES = os.path.join(ROOT, "examples", "flexvolume")
NODE = "image-node"
MiB = 1 << 20
# The capabilities by number (runc 1.1 and crun 1.8 know these).
CAP_NAMES = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
        "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
        "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
        "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
        "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
        "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
        "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"]


class Skip(Exception):
    pass


def current_caps():
    """What a privileged container gets, as from containerd: every capability this process
    may hold (its bounding set)."""
    with open("/proc/self/status") as f:
        bnd = int([line.split()[1] for line in f if line.startswith("CapBnd:")][0], 16)
    return [name for bit, name in enumerate(CAP_NAMES) if bnd & (1 << bit)]


def sh(*argv, check=True, timeout=120, **kw):
    p = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise AssertionError("%s: exit %d\n%s%s" % (" ".join(argv), p.returncode, p.stdout,
                                                     p.stderr))
    return p


def daemonset_container(path, name):
    """The container name of the DaemonSet in the manifest at path, and its pod's volumes."""
    with open(path) as f:
        ds = [d for d in yaml.safe_load_all(f) if d and d["kind"] == "DaemonSet"][0]
    spec = ds["spec"]["template"]["spec"]
    c = [c for c in spec["containers"] if c["name"] == name][0]
    return c, {v["name"]: v for v in spec["volumes"]}


def volplugd_container():
    return daemonset_container(MANIFEST, "volplugd")


class Bundle:
    """The image unpacked, and the container the manifest describes, on host paths under
    self.host (the node's filesystem as the test lays it out)."""

    def __init__(self, tmp):
        self.tmp = tmp
        self.dir = os.path.join(tmp, "bundle")
        self.host = os.path.join(tmp, "node")
        self.log = os.path.join(tmp, "container.log")
        self.shared = []  # host dirs made shared mounts, for Bidirectional
        sh("umoci", "unpack", "--image", "%s:%s" % (IMAGE, VERSION), self.dir, timeout=300)
        with open(os.path.join(self.dir, "config.json")) as f:
            self.base = json.load(f)

    def host_path(self, path):
        return os.path.join(self.host, path.lstrip("/"))

    def config(self, args, pod=None):
        """config.json for args, privileged; after the image's entrypoint, or with pod, a
        manifest's (container, volumes), after the container's command, with its env and
        mounts."""
        c = json.loads(json.dumps(self.base))
        p = c["process"]
        command = pod and pod[0].get("command")
        p["args"] = (command or [c["process"]["args"][0]]) + args
        p["terminal"] = False
        env = container_env(pod[0]) if pod else {}
        p["env"] = [e for e in p["env"] if e.split("=", 1)[0] not in env] + [
            "%s=%s" % kv for kv in env.items()]
        caps = current_caps()
        p["capabilities"] = {k: caps for k in ("bounding", "effective", "permitted")}
        p["noNewPrivileges"] = False
        c["root"]["readonly"] = False
        linux = c["linux"]
        linux.pop("maskedPaths", None)
        linux.pop("readonlyPaths", None)
        linux.pop("seccomp", None)
        linux["namespaces"] = [n for n in linux["namespaces"] if n["type"] != "network"]
        linux["resources"] = {"devices": [{"allow": True, "access": "rwm"}]}
        for m in c["mounts"]:
            if m["destination"] in ("/sys", "/sys/fs/cgroup"):
                m["options"] = [o for o in m["options"] if o != "ro"] + ["rw"]
        if pod:
            container, volumes = pod
            for vm in container["volumeMounts"]:
                src = volumes[vm["name"]]["hostPath"]["path"]
                src = "/dev" if src == "/dev" else self.host_path(src)
                os.makedirs(src, exist_ok=True)
                bidirectional = vm.get("mountPropagation") == "Bidirectional"
                if bidirectional and src not in self.shared:
                    sh("mount", "--bind", src, src)
                    sh("mount", "--make-rshared", src)
                    self.shared.append(src)
                c["mounts"].append({"destination": vm["mountPath"], "type": "bind", "source": src,
                                    "options": ["rbind", "rw",
                                                "rshared" if bidirectional else "rprivate"]})
                if bidirectional:
                    linux["rootfsPropagation"] = "rshared"
        with open(os.path.join(self.dir, "config.json"), "w") as f:
            json.dump(c, f)

    def cleanup(self):
        for src in reversed(self.shared):
            subprocess.run(["umount", "-R", src], capture_output=True)


# What the kubelet gives the container's fieldRef variables here: the node's name, and the
# pod's address (the container shares the host's network, so its metrics are reachable).
POD_IP = "127.0.0.1"
FIELD_VALUES = {"spec.nodeName": NODE, "status.podIP": POD_IP}


def container_env(container):
    """A manifest container's env as the kubelet sets it: NAME -> value."""
    env = {}
    for e in container.get("env", []):
        field = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        assert "value" in e or field in FIELD_VALUES, "a variable the test cannot give: %s" % e
        env[e["name"]] = e["value"] if "value" in e else FIELD_VALUES[field]
    return env


def manifest_args():
    """The volplugd container's args with $(VAR) expanded as the kubelet expands them."""
    container, _ = volplugd_container()
    env = container_env(container)
    return [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a)
            for a in container["args"]]


def pick_runtime(bundle):
    """The first of crun and runc that runs `volplugd --version` in the image: (runtime,
    its output). Raises Skip with each runtime's words when none can."""
    bundle.config(["--version"])
    tried = []
    for rt in ("crun", "runc"):
        exe = shutil.which(rt)
        if not exe:
            tried.append("%s: not installed" % rt)
            continue
        name = "volplug-version-%d" % os.getpid()
        p = sh(exe, "run", "--bundle", bundle.dir, name, check=False, timeout=60)
        sh(exe, "delete", "-f", name, check=False)
        if p.returncode == 0:
            return exe, p.stdout, tried
        tried.append("%s: exit %d: %s" % (rt, p.returncode, (p.stderr or p.stdout).strip()))
    raise Skip("no OCI runtime runs a container here: " + "; ".join(tried))


class Container:
    def __init__(self, runtime, bundle, name):
        self.runtime, self.bundle, self.name = runtime, bundle, name
        self.proc = None

    def start(self):
        log = open(self.bundle.log, "wb")
        self.proc = subprocess.Popen([self.runtime, "run", "--bundle", self.bundle.dir, self.name],
                                     stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        log.close()

    def logs(self):
        with open(self.bundle.log, errors="replace") as f:
            return f.read()

    def exec(self, *argv):
        return sh(self.runtime, "exec", self.name, *argv, check=False, timeout=60)

    def stop(self):
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            sh(self.runtime, "kill", self.name, "TERM", check=False)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                sh(self.runtime, "kill", self.name, "KILL", check=False)
                self.proc.wait(timeout=20)
        sh(self.runtime, "delete", "-f", self.name, check=False)
        return self.proc.returncode


def mount_at(path):
    """The fstype of the topmost mount at path, as the host sees it, or None."""
    found = None
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, right = line.rstrip("\n").split(" - ", 1)
            if left.split(" ")[4] == path:
                found = right.split(" ")[0]
    return found


def metrics_get(path):
    """GET path from the metrics address the manifest gives volplugd."""
    address = [a.split("=", 1)[1] for a in manifest_args() if a.startswith("--metrics-address=")]
    assert address, "the manifest gives volplugd no --metrics-address"
    with urllib.request.urlopen("http://%s%s" % (address[0], path), timeout=10) as r:
        return r.read().decode()


def lifecycle(ctr, bundle, runtime_note):
    sock = bundle.host_path("/var/lib/kubelet/plugins/pool.volplug.io/csi.sock")
    deadline = time.monotonic() + 30
    while not os.path.exists(sock):
        assert ctr.proc.poll() is None, "the container ended: %s" % ctr.logs()
        assert time.monotonic() < deadline, "no socket after 30 s: %s" % ctr.logs()
        time.sleep(0.1)

    def ctl(*args, check=0):
        p = sh(VOLPLUGCTL, "--endpoint", "unix://" + sock, *args, check=False)
        assert p.returncode == check, "volplugctl %s: exit %d: %s%s\n%s" % (
            " ".join(args), p.returncode, p.stdout, p.stderr, ctr.logs())
        return p

    def ctl_json(*args):
        return json.loads(ctl("-o", "json", *args).stdout)

    assert ctl("probe").stdout == "ready: yes\n"
    healthz = metrics_get("/healthz")
    assert healthz == "ok\n", healthz
    assert "volplug_pool_capacity_bytes" in metrics_get("/metrics")
    assert ctl_json("info")["name"] == "pool.volplug.io"
    info = ctl_json("node", "info")
    assert info["node_id"] == NODE, info

    # xfs: growing a mounted ext4 needs CAP_SYS_RESOURCE, which some hosts do not give.
    vol = ctl_json("volume", "create", "pvc-image", "--size", "320Mi", "--fs", "xfs",
                   "--param", "type=gp3")["volume"]
    vid = vol["volume_id"]
    assert vid.endswith("." + NODE) and vol["capacity_bytes"] == 320 * MiB, vol
    try:
        return volume_lifecycle(ctr, bundle, ctl, ctl_json, vid) + " via " + runtime_note
    finally:  # what a failure left: unmounted and deleted, so no loop device stays
        for args in (("node", "unpublish", vid, TARGET), ("node", "unstage", vid, STAGE),
                     ("volume", "delete", vid)):
            sh(VOLPLUGCTL, "--endpoint", "unix://" + sock, *args, check=False)


# The paths the kubelet would give, as the container (and the kubelet) sees them.
STAGE = "/var/lib/kubelet/plugins/kubernetes.io/csi/pool.volplug.io/image/globalmount"
TARGET = "/var/lib/kubelet/pods/0000-image/volumes/kubernetes.io~csi/pvc-image/mount"


def volume_lifecycle(ctr, bundle, ctl, ctl_json, vid):
    assert os.listdir(bundle.host_path("/var/lib/volplug/pool")), "the pool is in the host dir"

    stage, target = STAGE, TARGET
    os.makedirs(bundle.host_path(stage), exist_ok=True)
    ctl("node", "stage", vid, stage, "--fs", "xfs")
    assert mount_at(bundle.host_path(stage)) == "xfs", "the host sees the staging mount"
    host_target = bundle.host_path(target)
    os.makedirs(os.path.dirname(host_target))  # the kubelet makes the target's parent
    ctl("node", "publish", vid, target, "--staging", stage, "--fs", "xfs")
    assert mount_at(host_target) == "xfs", "the host sees the pod's mount"
    with open(os.path.join(host_target, "hello"), "w") as f:
        f.write("from the host")
    with open(os.path.join(bundle.host_path(stage), "hello")) as f:
        assert f.read() == "from the host"

    stats = ctl_json("node", "stats", vid, target)
    assert any(u["unit"] == "BYTES" and u["used"] > 0 for u in stats["usage"]), stats
    grown = ctl_json("node", "expand", vid, target, "400Mi")
    assert grown["capacity_bytes"] == 400 * MiB, grown
    st = os.statvfs(host_target)
    assert st.f_blocks * st.f_frsize > 320 * MiB, "the host sees the grown filesystem"
    snap = ctl_json("snapshot", "create", "snap-image", vid)["snapshot"]
    assert snap["ready_to_use"], snap
    ctl("snapshot", "delete", snap["snapshot_id"])

    # Inside the container: the image's own tools.
    p = ctr.exec("/usr/bin/volplugd", "--version")
    assert p.returncode == 0 and p.stdout == "volplugd %s\n" % VERSION, (p.stdout, p.stderr)
    p = ctr.exec("/usr/bin/volplugctl", "--endpoint", "unix:///csi/csi.sock", "probe")
    assert p.returncode == 0 and p.stdout == "ready: yes\n", (p.stdout, p.stderr)

    ctl("node", "unpublish", vid, target)
    assert mount_at(host_target) is None
    ctl("node", "unstage", vid, stage)
    assert mount_at(bundle.host_path(stage)) is None
    ctl("volume", "delete", vid)
    assert ctl_json("volume", "list").get("entries", []) == []
    return "CreateVolume, NodeStage, NodePublish (seen by the host), NodeGetVolumeStats, " \
        "NodeExpandVolume, snapshots, NodeUnpublish, NodeUnstage, DeleteVolume"


def installed(path, want):
    """path is an executable file holding the bytes want."""
    try:
        with open(path, "rb") as f:
            return f.read() == want and os.stat(path).st_mode & 0o111 == 0o111
    except FileNotFoundError:
        return False


def installer(runtime, bundle):
    """The installer DaemonSet's container, from the image, with its host plugin directory:
    the example drivers appear there, each whole and executable, no dot-file is left, and it
    stops on SIGTERM."""
    pod = daemonset_container(INSTALLER, "installer")
    container, volumes = pod
    (mount,) = [vm for vm in container["volumeMounts"] if vm["mountPath"] == "/flexmnt"]
    flexdir = bundle.host_path(volumes[mount["name"]]["hostPath"]["path"])
    want = {}
    for name in ("tmpfs", "loop"):
        with open(os.path.join(EXAMPLES, name), "rb") as f:
            want["volplug.example~%s/%s" % (name, name)] = f.read()
    bundle.config(container.get("args", []), pod)
    ctr = Container(runtime, bundle, "volplug-installer-%d" % os.getpid())
    ctr.start()
    try:
        deadline = time.monotonic() + 30
        while not all(installed(os.path.join(flexdir, p), b) for p, b in want.items()):
            assert ctr.proc.poll() is None, "the installer ended: %s" % ctr.logs()
            assert time.monotonic() < deadline, "no drivers after 30 s: %s" % ctr.logs()
            time.sleep(0.1)
        dots = [os.path.join(d, n) for d, dirs, files in os.walk(flexdir)
                for n in dirs + files if n.startswith(".")]
        assert not dots, "left behind: %s" % dots
    finally:
        code = ctr.stop()
    assert code == 0, "exit %s on SIGTERM: %s" % (code, ctr.logs())
    return "%s in the host's plugin directory, stopped on SIGTERM" % ", ".join(sorted(want))


def image_size():
    """The bytes of the image's layers, compressed, as a registry would store them."""
    with open(os.path.join(IMAGE, "index.json")) as f:
        digest = json.load(f)["manifests"][0]["digest"].split(":")[1]
    with open(os.path.join(IMAGE, "blobs", "sha256", digest)) as f:
        manifest = json.load(f)
    return sum(layer["size"] for layer in manifest["layers"])


def main():
    tests = ["the image runs volplugd --version", "volplugd serves CSI from the image",
             "volplugd stops on SIGTERM", "the Flexvolume installer installs the example drivers"]
    print("1..%d" % len(tests))

    def skip_all(why):
        for i, t in enumerate(tests, 1):
            print("ok %d - %s # SKIP %s" % (i, t, why))

    if not os.path.exists(os.path.join(IMAGE, "index.json")):
        why = "no image at %s (make image builds it)" % IMAGE
        if os.environ.get("VOLPLUG_REQUIRE_IMAGE") == "1":
            print("not ok 1 - %s\n#   %s" % (tests[0], why))
            sys.exit(1)
        return skip_all(why)
    if os.geteuid() != 0:
        return skip_all("needs root (a privileged container, loop devices, mounts)")
    if not shutil.which("umoci"):
        return skip_all("umoci is not installed (scripts/install-deps --image)")

    tmp = tempfile.mkdtemp(prefix="volplug-image-")
    bundle = Bundle(tmp)
    ctr = None
    failed = 0
    try:
        try:
            runtime, out, tried = pick_runtime(bundle)
        except Skip as e:
            return skip_all(str(e))
        ok = out == "volplugd %s\n" % VERSION
        note = "%s: %s%s; image %.1f MiB compressed" % (
            os.path.basename(runtime), out.strip(),
            " (%s)" % "; ".join(tried) if tried else "", image_size() / MiB)
        print("%s 1 - %s: %s" % ("ok" if ok else "not ok", tests[0], note), flush=True)
        failed += not ok

        bundle.config(manifest_args(), volplugd_container())
        ctr = Container(runtime, bundle, "volplug-image-%d" % os.getpid())
        ctr.start()
        try:
            note = lifecycle(ctr, bundle, os.path.basename(runtime))
            print("ok 2 - %s: %s" % (tests[1], note), flush=True)
        except Exception as e:  # noqa: BLE001 - reported as a failed test
            failed += 1
            print("not ok 2 - %s" % tests[1])
            for line in (repr(e) + "\n" + ctr.logs()[-3000:]).splitlines():
                print("#   " + line)
        code = ctr.stop()
        ok = code == 0 and re.search(r"volplugd \S+ serving all mode as pool\.volplug\.io",
                                     ctr.logs())
        print("%s 3 - %s: exit %s" % ("ok" if ok else "not ok", tests[2], code), flush=True)
        failed += not ok

        try:
            print("ok 4 - %s: %s" % (tests[3], installer(runtime, bundle)), flush=True)
        except Exception as e:  # noqa: BLE001 - reported as a failed test
            failed += 1
            print("not ok 4 - %s" % tests[3])
            for line in repr(e).splitlines():
                print("#   " + line)
    finally:
        if ctr:
            ctr.stop()
        bundle.cleanup()
        with open("/proc/self/mountinfo") as f:
            mounted = [line for line in f if " %s/" % tmp in line]
        if not mounted:  # never remove through a mount left behind
            shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
