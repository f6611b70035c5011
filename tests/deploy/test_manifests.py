# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes manifests of deploy/, checked offline: each layout (deploy/kubernetes's
single-node and multi-node, its store (the multi-node one with the snapshot store), and
deploy/ebs, the single-node one patched for the EBS backend) is
built the way kustomize builds it (resources, recursively; patches, strategic merge with the
merge keys of the API schemas, or JSON 6902; the images transformer), and the objects are
checked for what a cluster would trip over: every reference (service account, role, volume,
socket path, driver name) resolves, every volplugd container mounts what its mode and backend
use, every sidecar has the roles it needs, the images are the versions deploy/README.md names,
and each layout has the shape its README promises (the multi-node one: distributed provisioning
with capacity tracking, per-node snapshots, one resizer, no attacher; the single-node one: one
pool node; the EBS one: the controller anywhere and unprivileged, credentials in it only). When
kubectl is on the machine, `kubectl kustomize` must build the same objects. Every metrics port
(volplugd's, the sidecars' own) is named, annotated where Prometheus annotations apply, and
scraped by the Services and ServiceMonitor of deploy/kubernetes/monitoring in every layout. TAP
output."""

import functools
import glob
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

ROOT = os.environ.get("VOLPLUG_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
DEPLOY = os.path.join(ROOT, "deploy", "kubernetes")
# Each layout: the directory kubectl apply -k takes, and the CSI driver it deploys.
LAYOUTS = {
    "single-node": (os.path.join(DEPLOY, "single-node"), "pool.volplug.io"),
    "multi-node": (os.path.join(DEPLOY, "multi-node"), "pool.volplug.io"),
    "ebs": (os.path.join(ROOT, "deploy", "ebs"), "ebs.volplug.io"),
    "store": (os.path.join(DEPLOY, "store"), "pool.volplug.io"),
    "snapshot-metadata": (os.path.join(DEPLOY, "snapshot-metadata"), "pool.volplug.io"),
}
SOCKET = "/csi/csi.sock"
# Each sidecar and the ClusterRole (rbac.yaml) its service account must be bound to.
SIDECAR_ROLES = {
    "csi-provisioner": "volplug-external-provisioner",
    "csi-attacher": "volplug-external-attacher",
    "csi-resizer": "volplug-external-resizer",
    "csi-snapshotter": "volplug-external-snapshotter",
}
# The containers that serve metrics, and their port's name and number (docs/metrics.md).
METRICS_PORTS = {
    "volplugd": ("metrics", 9810),
    "csi-provisioner": ("prov-metrics", 8080),
    "csi-attacher": ("attach-metrics", 8081),
    "csi-resizer": ("resize-metrics", 8082),
    "csi-snapshotter": ("snap-metrics", 8083),
}


# --- building a layout, as kustomize does -------------------------------------------------------


def load_docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def build(directory):
    """The objects of the kustomization in directory: its resources (files, or directories
    with a kustomization of their own, built first), then its patches, then its image
    overrides. A field of the kustomization this does not apply fails the build."""
    with open(os.path.join(directory, "kustomization.yaml")) as f:
        k = yaml.safe_load(f)
    assert k.get("kind") == "Kustomization", directory
    unknown = set(k) - {"apiVersion", "kind", "resources", "patches", "images"}
    assert not unknown, "%s: kustomization fields not built here: %s" % (directory, unknown)
    objs = []
    for r in k.get("resources", []):
        path = os.path.normpath(os.path.join(directory, r))
        objs += build(path) if os.path.isdir(path) else load_docs(path)
    for p in k.get("patches", []):
        apply_patch(objs, directory, p)
    for img in k.get("images", []):
        for c in containers(objs):
            name, _, tag = c["image"].rpartition(":")
            if name == img["name"]:
                c["image"] = "%s:%s" % (img.get("newName", name), img.get("newTag", tag))
    return objs


def apply_patch(objs, directory, p):
    """One entry of a kustomization's patches, as kustomize applies it: a strategic merge patch
    (a file, or inline) or a JSON 6902 patch (a list of operations) on each object its target
    selects, or on the object a strategic merge patch names when there is no target. A patch
    that selects nothing fails the build here (kustomize says so only when it has no target)."""
    unknown = set(p) - {"path", "patch", "target"}
    assert not unknown, "patch fields not applied here: %s" % unknown
    docs = load_docs(os.path.join(directory, p["path"])) if "path" in p else [yaml.safe_load(p["patch"])]
    for doc in docs:
        if "target" in p:
            targets = [o for o in objs if selected(o, p["target"])]
        else:
            targets = [o for o in objs if o["kind"] == doc["kind"] and
                       o["metadata"]["name"] == doc["metadata"]["name"] and
                       o["metadata"].get("namespace") == doc["metadata"].get("namespace")]
        assert targets, "%s: a patch selects nothing: %s" % (directory, p.get("target") or p.get("path"))
        for o in targets:
            if isinstance(doc, list):
                json6902(o, doc)
            elif doc.get("$patch") == "delete":
                objs[:] = [x for x in objs if x is not o]
            else:
                # With a target the patch's own kind and name are placeholders.
                body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
                body["metadata"] = {k: v for k, v in doc.get("metadata", {}).items()
                                    if k not in ("name", "namespace")}
                strategic_merge(o, body, api_schemas().schema_of(o))


def selected(obj, target):
    """Whether a patch's target selects obj: each field given a regular expression that must
    match the whole of the object's."""
    group, _, version = obj["apiVersion"].rpartition("/")
    have = {"kind": obj["kind"], "name": obj["metadata"]["name"], "group": group,
            "version": version, "namespace": obj["metadata"].get("namespace", "")}
    unknown = set(target) - set(have)
    assert not unknown, "target fields not matched here: %s" % unknown
    return all(re.fullmatch(str(v), have[k]) for k, v in target.items())


def strategic_merge(orig, patch, schema):
    """patch merged into the map orig as a strategic merge patch: maps merge, a null removes a
    key; the list of a field whose schema says patch strategy merge merges item by item on the
    field's merge key (an item with $patch: delete removes its match; the patch's items come
    first, in the patch's order, then the others), any other list is replaced."""
    schema = api_schemas().resolve(schema)
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    for k, v in patch.items():
        assert not k.startswith("$"), "patch directive not applied here: %s" % k
        field = props.get(k) or (extra if isinstance(extra, dict) else {})
        if v is None:
            orig.pop(k, None)
        elif isinstance(v, dict):
            if not isinstance(orig.get(k), dict):
                orig[k] = {}
            strategic_merge(orig[k], v, field)
        elif isinstance(v, list) and "merge" in field.get("x-kubernetes-patch-strategy", "").split(","):
            orig[k] = merge_list(orig.get(k) or [], v, field)
        else:
            orig[k] = v


def merge_list(orig, patch, field):
    key = field["x-kubernetes-patch-merge-key"]
    merged, patched = [], set()
    for p in patch:
        assert isinstance(p, dict) and key in p, "a list item without its merge key %s: %s" % (key, p)
        patched.add(p[key])
        if p.get("$patch") == "delete":
            assert set(p) == {key, "$patch"}, p
            continue
        item = next((dict(o) for o in orig if o.get(key) == p[key]), {})
        strategic_merge(item, p, field["items"])
        merged.append(item)
    return merged + [o for o in orig if o.get(key) not in patched]


def json6902(obj, ops):
    """JSON patch operations add, replace and remove (RFC 6902) on obj, in place."""
    for op in ops:
        assert op["op"] in ("add", "replace", "remove"), "JSON patch op not applied here: %s" % op
        path = [x.replace("~1", "/").replace("~0", "~") for x in op["path"].split("/")[1:]]
        parent = obj
        for x in path[:-1]:
            parent = parent[int(x)] if isinstance(parent, list) else parent[x]
        last = path[-1]
        if isinstance(parent, list):
            last = len(parent) if last == "-" else int(last)
            if op["op"] == "add":
                parent.insert(last, op["value"])
                continue
        else:
            assert op["op"] == "add" or last in parent, "%s: no %s" % (op, op["path"])
        if op["op"] == "remove":
            del parent[last]
        else:
            parent[last] = op["value"]


def pod_specs(objs):
    return [(o, o["spec"]["template"]["spec"]) for o in objs
            if o["kind"] in ("Deployment", "DaemonSet", "StatefulSet")]


def containers(objs):
    return [c for _, spec in pod_specs(objs) for c in spec["containers"]]


def find(objs, kind, name=None):
    return [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def flag(container, name):
    """The value of --name=VALUE in a container's args, True for a bare --name, else None."""
    for a in container.get("args", []):
        if a == "--" + name:
            return True
        if a.startswith("--%s=" % name):
            return a.split("=", 1)[1]
    return None


def env_field(container, name):
    for e in container.get("env", []):
        if e["name"] == name:
            return e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
    return None


# --- the API schemas ----------------------------------------------------------------------------

OPENAPI = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kubernetes-1.34-openapi-subset.json")
CRDS = os.path.join(DEPLOY, "snapshot-crds")
SMS_CRD = os.path.join(DEPLOY, "snapshot-metadata-crd")


class Schemas:
    """The Kubernetes 1.34 schemas of the kinds deploy/ uses (the kept OpenAPI subset: its
    "info" says where from), and the CRDs' schemas (deploy/kubernetes/snapshot-crds and
    snapshot-metadata-crd)."""

    def __init__(self):
        with open(OPENAPI) as f:
            self.components = json.load(f)["components"]["schemas"]
        self.kinds = {}
        for name, schema in self.components.items():
            for gvk in schema.get("x-kubernetes-group-version-kind", []):
                api = "/".join(x for x in (gvk["group"], gvk["version"]) if x)
                self.kinds[(api, gvk["kind"])] = {"$ref": "#/components/schemas/" + name}
        for crd in build(CRDS) + build(SMS_CRD):
            spec = crd["spec"]
            for v in spec["versions"]:
                api = "%s/%s" % (spec["group"], v["name"])
                self.kinds[(api, spec["names"]["kind"])] = v["schema"]["openAPIV3Schema"]

    def schema_of(self, obj):
        """The schema of obj's apiVersion and kind, {} when none is kept."""
        return self.kinds.get((obj.get("apiVersion"), obj.get("kind")), {})

    def resolve(self, schema):
        while "$ref" in schema or ("allOf" in schema and len(schema["allOf"]) == 1):
            if "$ref" in schema:
                schema = self.components[schema["$ref"].rsplit("/", 1)[1]]
            else:
                schema = schema["allOf"][0]
        return schema

    def check(self, obj):
        """The problems of obj against the schema of its apiVersion and kind: a list of
        "path: what" strings, empty when it is valid."""
        key = (obj.get("apiVersion"), obj.get("kind"))
        if key not in self.kinds:
            return ["%s %s: no schema kept for it" % key]
        problems = []
        self.walk(self.kinds[key], obj, obj["kind"], problems)
        return problems

    def walk(self, schema, v, path, problems):
        schema = self.resolve(schema)
        if schema.get("x-kubernetes-preserve-unknown-fields"):
            return
        if "oneOf" in schema:
            if not any(not self.sub(alt, v, path) for alt in schema["oneOf"]):
                problems.append("%s: %r fits none of %s" % (path, v, schema["oneOf"]))
            return
        t = schema.get("type")
        if schema.get("x-kubernetes-int-or-string"):
            t = None
            if not isinstance(v, (int, str)) or isinstance(v, bool):
                problems.append("%s: want an integer or a string, got %r" % (path, v))
        want = {"object": dict, "array": list, "string": str, "boolean": bool,
                "integer": int, "number": (int, float)}.get(t)
        if want and (not isinstance(v, want) or (t in ("integer", "number") and isinstance(v, bool))):
            problems.append("%s: want %s, got %r" % (path, t, v))
            return
        if "enum" in schema and v not in schema["enum"]:
            problems.append("%s: %r is not one of %s" % (path, v, schema["enum"]))
        if isinstance(v, dict):
            self.walk_object(schema, v, path, problems)
        elif isinstance(v, list) and "items" in schema:
            for i, item in enumerate(v):
                self.walk(schema["items"], item, "%s[%d]" % (path, i), problems)
            self.list_keys(schema, v, path, problems)

    def sub(self, schema, v, path):
        problems = []
        self.walk(schema, v, path, problems)
        return problems

    def walk_object(self, schema, v, path, problems):
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for k in schema.get("required", []):
            if k not in v:
                problems.append("%s: %s is required" % (path, k))
        for k, x in v.items():
            if k in props:
                self.walk(props[k], x, "%s.%s" % (path, k), problems)
            elif isinstance(extra, dict):
                self.walk(extra, x, "%s.%s" % (path, k), problems)
            elif props and extra is not True:
                problems.append("%s: unknown field %s" % (path, k))

    def list_keys(self, schema, v, path, problems):
        """x-kubernetes-list-type map: the keys unique (absent keys at their default); set:
        the items unique."""
        kind = schema.get("x-kubernetes-list-type")
        if kind == "set" and len({json.dumps(x, sort_keys=True) for x in v}) != len(v):
            problems.append("%s: items repeat in a set" % path)
        if kind == "map":
            item = self.resolve(schema["items"])
            keys = schema.get("x-kubernetes-list-map-keys", [])
            seen = set()
            for x in v:
                k = tuple(x.get(n, self.resolve(item["properties"][n]).get("default"))
                          if isinstance(x, dict) else x for n in keys)
                if k in seen:
                    problems.append("%s: %s %s repeats" % (path, "/".join(keys), k))
                seen.add(k)


@functools.lru_cache(maxsize=None)
def api_schemas():
    return Schemas()


def check_schemas(objs, schemas):
    problems = [p for o in objs for p in schemas.check(o)]
    assert not problems, "\n".join(problems)
    return "%d objects valid against Kubernetes 1.34's schemas" % len(objs)


def check_schema_catches_mistakes(schemas):
    """The validation fails where a cluster would refuse: a misspelt field, a wrong type, a
    missing required field, a container name twice."""
    ds = [o for o in build(os.path.join(DEPLOY, "multi-node")) if o["kind"] == "DaemonSet"][0]
    spec = ds["spec"]["template"]["spec"]
    spec["containers"][0]["volumeMount"] = []
    spec["containers"][0]["ports"] = [{"containerPort": "9808"}]
    del spec["containers"][1]["name"]
    spec["containers"].append(dict(spec["containers"][2]))
    vsc = [o for o in build(os.path.join(DEPLOY, "base")) if o["kind"] == "VolumeSnapshotClass"][0]
    vsc["deletionPolicy"] = "Sometimes"
    got = schemas.check(ds) + schemas.check(vsc) + schemas.check({"apiVersion": "v1", "kind": "Pod"})
    want = ["DaemonSet.spec.template.spec.containers[0]: unknown field volumeMount",
            "DaemonSet.spec.template.spec.containers[0].ports[0].containerPort: want integer, "
            "got '9808'",
            "DaemonSet.spec.template.spec.containers[1]: name is required",
            "DaemonSet.spec.template.spec.containers: name ('%s',) repeats" % spec["containers"][2]["name"],
            "VolumeSnapshotClass.deletionPolicy: 'Sometimes' is not one of ['Delete', 'Retain']",
            "v1 Pod: no schema kept for it"]
    assert sorted(got) == sorted(want), got
    return "%d mistakes found" % len(want)


def check_mounts_catch_a_dropped_mount():
    """The mounts check fails where a patch took volplugd's mounts away, naming the first one
    missing: deploy/ebs with every volumeMount of its node plugin's volplugd deleted."""
    objs = build(LAYOUTS["ebs"][0])
    paths = [m["mountPath"] for _, spec in pod_specs(find(objs, "DaemonSet"))
             for m in volplugd(spec)["volumeMounts"]]
    apply_patch(objs, LAYOUTS["ebs"][0], {
        "target": {"kind": "DaemonSet", "name": "volplug-node"},
        "patch": yaml.safe_dump({"spec": {"template": {"spec": {"containers": [{
            "name": "volplugd", "volumeMounts": [{"mountPath": p, "$patch": "delete"}
                                                 for p in paths]}]}}}})})
    (_, spec), = pod_specs(find(objs, "DaemonSet"))
    assert volplugd(spec)["volumeMounts"] == [], volplugd(spec)
    try:
        check_mounts(objs)
    except AssertionError as e:
        assert str(e) == "volplug-node/volplugd: /var/lib/kubelet is not mounted from the host", e
        return "%d mounts dropped: %s" % (len(paths), e)
    raise AssertionError("no mount missed")


def check_crds():
    """The snapshot CRDs are in the repository, from the external-snapshotter release whose
    csi-snapshotter the layouts run, and the README installs them from there."""
    crds = build(CRDS)
    kinds = sorted(c["spec"]["names"]["kind"] for c in crds)
    assert kinds == ["VolumeGroupSnapshot", "VolumeGroupSnapshotClass", "VolumeGroupSnapshotContent",
                     "VolumeSnapshot", "VolumeSnapshotClass", "VolumeSnapshotContent"], kinds
    version = readme_images()["csi-snapshotter"]
    for name in os.listdir(CRDS):
        with open(os.path.join(CRDS, name)) as f:
            head = f.read(400)
        if name != "kustomization.yaml":
            assert "kubernetes-csi/external-snapshotter %s" % version in head, (name, head)
    with open(os.path.join(ROOT, "deploy", "README.md")) as f:
        readme = f.read()
    assert "kubectl create -k deploy/kubernetes/snapshot-crds" in readme
    assert "client/config/crd" not in readme.replace("client/config/crd/", ""), \
        "the README still fetches the CRDs"
    return "%d CRDs of external-snapshotter %s" % (len(crds), version)


# --- the checks ----------------------------------------------------------------------------------


def check_common(objs, driver):
    """What any layout needs: unique, well-formed objects whose references resolve, all of
    one CSI driver."""
    seen = set()
    for o in objs:
        assert o.get("apiVersion") and o.get("kind") and o.get("metadata", {}).get("name"), o
        key = (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"])
        assert key not in seen, "twice: %s" % (key,)
        seen.add(key)
        if o["metadata"].get("namespace"):
            assert o["metadata"]["namespace"] == "volplug", key
    assert [d["metadata"]["name"] for d in find(objs, "CSIDriver")] == [driver]
    accounts = {o["metadata"]["name"] for o in find(objs, "ServiceAccount")}
    roles = {(o["kind"], o["metadata"]["name"]) for o in objs if o["kind"] in ("Role", "ClusterRole")}
    for b in [o for o in objs if o["kind"] in ("RoleBinding", "ClusterRoleBinding")]:
        assert (b["roleRef"]["kind"], b["roleRef"]["name"]) in roles, b["metadata"]["name"]
        for s in b["subjects"]:
            assert s["kind"] == "ServiceAccount" and s["name"] in accounts, b["metadata"]["name"]
    for w, spec in pod_specs(objs):
        name = w["metadata"]["name"]
        assert spec["serviceAccountName"] in accounts, name
        labels = w["spec"]["template"]["metadata"]["labels"]
        assert all(labels.get(k) == v for k, v in w["spec"]["selector"]["matchLabels"].items()), name
        volumes = {v["name"]: v for v in spec["volumes"]}
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                assert m["name"] in volumes, "%s/%s mounts %s" % (name, c["name"], m["name"])
            sock = flag(c, "csi-address") or flag(c, "endpoint")
            if sock:
                sock = sock.replace("unix://", "")
                assert sock == SOCKET, (name, c["name"], sock)
                assert any(m["mountPath"] == os.path.dirname(SOCKET) for m in c["volumeMounts"]), \
                    "%s/%s: its socket's directory is not mounted" % (name, c["name"])
            if c["name"] in SIDECAR_ROLES:
                assert bound(objs, spec["serviceAccountName"], SIDECAR_ROLES[c["name"]]), \
                    "%s/%s: %s lacks %s" % (name, c["name"], spec["serviceAccountName"],
                                            SIDECAR_ROLES[c["name"]])
            if flag(c, "leader-election"):
                assert bound(objs, spec["serviceAccountName"], "volplug-leader-election", "Role"), c["name"]
            if c["name"] == "node-driver-registrar":
                path = flag(c, "kubelet-registration-path")
                assert path == "/var/lib/kubelet/plugins/%s/csi.sock" % driver, path
                assert volumes["plugin-dir"]["hostPath"]["path"] == os.path.dirname(path), name
            if c["name"] == "volplugd":
                assert flag(c, "driver-name") in (None if driver == "pool.volplug.io" else driver,
                                                  driver), (name, c["args"])
    for sc in find(objs, "StorageClass"):
        assert sc["provisioner"] == driver and sc["volumeBindingMode"] == "WaitForFirstConsumer", sc
    for vsc in find(objs, "VolumeSnapshotClass"):
        assert vsc["driver"] == driver, vsc
    return len(objs)


def mounted(spec, container, path):
    """The volume of container that holds path (its mount whose mountPath is path or above it,
    the deepest), with the mount: (volume, mount), or (None, None)."""
    volumes = {v["name"]: v for v in spec["volumes"]}
    best = None
    for m in container.get("volumeMounts", []):
        top = m["mountPath"].rstrip("/") or "/"
        if path == top or path.startswith(top.rstrip("/") + "/"):
            if not best or len(top) > len(best["mountPath"]):
                best = m
    return (volumes[best["name"]], best) if best else (None, None)


def check_mounts(objs):
    """Each volplugd container mounts what its mode and backend use, from the host: every
    node service the kubelet's directory (its mounts propagating back: Bidirectional) and /dev
    (loop devices, the volumes EC2 attached); the pool backend its pool and the Flexvolume
    plugin directory, where it runs; the EBS node its --state-dir. A patch that drops a mount
    leaves volplugd writing into its container, its volumes unreachable by the kubelet."""
    n = 0
    for w, spec in pod_specs(objs):
        for c in spec["containers"]:
            if c["name"] != "volplugd":
                continue
            mode = c["args"][0] if c["args"][0] in ("all", "controller", "node") else "all"
            backend = flag(c, "backend") or "pool"
            need = []
            if mode != "controller":
                devices = "/dev/loop-control" if backend == "pool" else "/dev/disk/by-id"
                need += [("/var/lib/kubelet", "Bidirectional"), (devices, None)]
            if backend == "pool":
                need += [(flag(c, "pool") or "/var/lib/volplug/pool", None)]
                flex = flag(c, "flexvolume-dir")
                if flex != "":
                    need += [(flex or "/usr/libexec/kubernetes/kubelet-plugins/volume/exec", None)]
            elif mode != "controller":
                need += [(flag(c, "state-dir") or "/var/lib/volplug", None)]
            for path, propagation in need:
                what = "%s/%s" % (w["metadata"]["name"], c["name"])
                volume, mount = mounted(spec, c, path)
                assert volume and "hostPath" in volume, "%s: %s is not mounted from the host" % (
                    what, path)
                if propagation:
                    assert mount.get("mountPropagation") == propagation, "%s: %s not %s" % (
                        what, path, propagation)
                n += 1
    return "%d mounts volplugd uses, each from the host" % n


def bound(objs, account, role, kind="ClusterRole"):
    return any(b["roleRef"]["name"] == role and b["roleRef"]["kind"] == kind and
               any(s["name"] == account for s in b["subjects"])
               for b in objs if b["kind"] in ("RoleBinding", "ClusterRoleBinding"))


def readme_images():
    """The sidecar images and versions deploy/README.md names ("csi-provisioner v6.3.0")."""
    with open(os.path.join(ROOT, "deploy", "README.md")) as f:
        text = f.read()
    return dict(re.findall(r"\b(csi-[a-z-]+|livenessprobe) (v\d+\.\d+\.\d+)", text))


def check_images(objs):
    named = readme_images()
    for c in containers(objs):
        repo, _, tag = c["image"].rpartition(":")
        if repo.startswith("registry.k8s.io/sig-storage/"):
            short = repo.rsplit("/", 1)[1]
            assert named.get(short) == tag, "%s: README names %s" % (c["image"], named.get(short))
        else:
            # The image make image builds, under the name its archive gives it, used as the
            # node has it (imported, never pulled).
            assert c["image"] == "volplug:" + project_version(), c["image"]
            assert c.get("imagePullPolicy") == "IfNotPresent", c
    with open(os.path.join(ROOT, "deploy", "container", "build-image")) as f:
        build_image = f.read()
    assert '"io.containerd.image.name"] = "docker.io/library/volplug:" + version' in build_image


def check_installer_image(objs):
    """The Flexvolume installer runs the image make image builds, with the command
    deploy/container/build-image installs in it."""
    (c,) = containers(objs)
    check_images(objs)
    command = c.get("command", [])
    assert len(command) == 1, command
    with open(os.path.join(ROOT, "deploy", "container", "build-image")) as f:
        assert '"$1%s"' % command[0] in f.read(), "build-image does not install %s" % command[0]
    return "%s %s" % (c["image"], command[0])


def project_version():
    with open(os.path.join(ROOT, "meson.build")) as f:
        return re.search(r"^\s*version\s*:\s*'([^']+)'", f.read(), re.M).group(1)


def volplugd(spec):
    return next(c for c in spec["containers"] if c["name"] == "volplugd")


def check_multi_node(objs):
    d = find(objs, "CSIDriver", "pool.volplug.io")[0]["spec"]
    assert d["attachRequired"] is False and d["storageCapacity"] is True, d
    assert not find(objs, "Deployment"), "no central controller"
    (ds, spec), = [(o, s) for o, s in pod_specs(objs) if o["kind"] == "DaemonSet"]
    assert "volplug.io/pool" not in spec["nodeSelector"], "every node, not one"
    names = [c["name"] for c in spec["containers"]]
    assert "csi-attacher" not in names, names
    v = volplugd(spec)
    assert v["args"][0] == "all" and flag(v, "distributed") is True, v["args"]
    assert flag(v, "node-id") == "$(NODE_NAME)" and env_field(v, "NODE_NAME") == "spec.nodeName"
    p = next(c for c in spec["containers"] if c["name"] == "csi-provisioner")
    for f in ("node-deployment", "enable-capacity", "strict-topology"):
        assert flag(p, f) is True, f
    assert flag(p, "leader-election") is None, "each node's provisioner acts for its node"
    assert flag(p, "capacity-ownerref-level") == "1", "owned by the DaemonSet"
    assert {env_field(p, n) for n in ("NODE_NAME", "NAMESPACE", "POD_NAME")} == \
        {"spec.nodeName", "metadata.namespace", "metadata.name"}
    assert bound(objs, spec["serviceAccountName"], "volplug-external-provisioner-capacity", "Role")
    cap = find(objs, "Role", "volplug-external-provisioner-capacity")[0]
    assert any("csistoragecapacities" in r["resources"] for r in cap["rules"]), cap
    s = next(c for c in spec["containers"] if c["name"] == "csi-snapshotter")
    assert flag(s, "node-deployment") is True and flag(s, "leader-election") is None, s["args"]
    assert env_field(s, "NODE_NAME") == "spec.nodeName"
    assert flag(s, "feature-gates") is None, "no group snapshots in this layout"
    r = next(c for c in spec["containers"] if c["name"] == "csi-resizer")
    assert flag(r, "leader-election") is True, "one resizer in the cluster"
    assert "livenessprobe" in str(spec["containers"]) and "node-driver-registrar" in names


def check_store(objs):
    """The multi-node layout with the snapshot store: volplugd has a bucket, the class asks for
    the store and names a Secret that exists with the keys volplugd reads, which the sidecars'
    service account may get."""
    check_multi_node(objs)
    (_, spec), = [(o, s) for o, s in pod_specs(objs) if o["kind"] == "DaemonSet"]
    assert flag(volplugd(spec), "store-bucket"), volplugd(spec)["args"]
    c = find(objs, "VolumeSnapshotClass", "volplug-store")[0]
    params = c["parameters"]
    assert params["location"] == "store", params
    name = params["csi.storage.k8s.io/snapshotter-secret-name"]
    ns = params["csi.storage.k8s.io/snapshotter-secret-namespace"]
    secret = [o for o in find(objs, "Secret", name) if o["metadata"]["namespace"] == ns]
    assert secret and {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= \
        set(secret[0]["stringData"]), secret
    assert bound(objs, spec["serviceAccountName"], name, "Role")
    rules = find(objs, "Role", name)[0]["rules"]
    assert any("secrets" in r["resources"] and "get" in r["verbs"] and
               name in r.get("resourceNames", [name]) for r in rules), rules


def check_snapshot_metadata(objs):
    """The single-node layout with the external-snapshot-metadata sidecar in the controller
    pod: on volplugd's socket, TLS from a Secret volume; a Service that selects that pod and
    reaches the sidecar's port; the SnapshotMetadataService named after the driver publishing
    that Service's address and the audience the sidecar checks; the sidecar's account bound to
    the reviews and reads it makes."""
    check_single_node(objs)
    (ctrl, spec), = [(o, s) for o, s in pod_specs(objs) if o["kind"] == "Deployment"]
    c = next(x for x in spec["containers"] if x["name"] == "csi-snapshot-metadata")
    assert c["image"].startswith("registry.k8s.io/sig-storage/csi-snapshot-metadata:"), c["image"]
    assert flag(c, "csi-address") == SOCKET, c["args"]
    port = int(flag(c, "port") or 50051)
    (named,) = [p for p in c["ports"] if p["containerPort"] == port]
    for f in ("tls-cert", "tls-key"):
        volume, _ = mounted(spec, c, flag(c, f))
        assert volume and volume.get("secret", {}).get("secretName"), (f, volume)
    labels = ctrl["spec"]["template"]["metadata"]["labels"]
    (sms,) = find(objs, "SnapshotMetadataService")
    assert sms["metadata"]["name"] == "pool.volplug.io", sms["metadata"]
    host, _, sport = sms["spec"]["address"].rpartition(":")
    name, _, ns = host.partition(".")
    (svc,) = [s for s in find(objs, "Service", name) if s["metadata"]["namespace"] == ns]
    assert selects(svc["spec"]["selector"], labels), (svc["spec"]["selector"], labels)
    (sp,) = [p for p in svc["spec"]["ports"] if p["port"] == int(sport)]
    assert sp["targetPort"] in (named["name"], port), (sp, named)
    assert sms["spec"]["audience"] and flag(c, "audience") in (None, sms["spec"]["audience"])
    assert "caCert" in sms["spec"], sms["spec"]
    assert bound(objs, spec["serviceAccountName"], "volplug-snapshot-metadata")
    rules = find(objs, "ClusterRole", "volplug-snapshot-metadata")[0]["rules"]
    need = {("cbt.storage.k8s.io", "snapshotmetadataservices", "get"),
            ("authentication.k8s.io", "tokenreviews", "create"),
            ("authorization.k8s.io", "subjectaccessreviews", "create"),
            ("snapshot.storage.k8s.io", "volumesnapshots", "get"),
            ("snapshot.storage.k8s.io", "volumesnapshotcontents", "get")}
    have = {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}
    assert need <= have, need - have
    return "sidecar on %s, %s -> port %d" % (SOCKET, sms["spec"]["address"], port)


def check_single_node(objs):
    d = find(objs, "CSIDriver", "pool.volplug.io")[0]["spec"]
    assert d["attachRequired"] is True, d
    (ctrl, cspec), = [(o, s) for o, s in pod_specs(objs) if o["kind"] == "Deployment"]
    (node, nspec), = [(o, s) for o, s in pod_specs(objs) if o["kind"] == "DaemonSet"]
    assert ctrl["spec"]["replicas"] == 1 and ctrl["spec"]["strategy"]["type"] == "Recreate"
    for spec in (cspec, nspec):
        assert spec["nodeSelector"].get("volplug.io/pool") == "true", "on the pool node only"
    c, n = volplugd(cspec), volplugd(nspec)
    assert c["args"][0] == "controller" and n["args"][0] == "node", (c["args"], n["args"])
    for f in ("pool", "zone", "node-id"):
        assert flag(c, f) and flag(c, f) == flag(n, f), "--%s differs: %s, %s" % (f, flag(c, f), flag(n, f))
    names = {x["name"] for x in cspec["containers"]}
    assert set(SIDECAR_ROLES) <= names, names


def check_ebs(objs):
    """The single-node layout with the EBS backend: the controller on any node, two replicas,
    unprivileged, with no host path and the only one with AWS credentials; the node plugin on
    every Linux node, with no token and no credential; both volplugd with --backend ebs and the
    driver's name, no pool."""
    d = find(objs, "CSIDriver", "ebs.volplug.io")[0]["spec"]
    assert d["attachRequired"] is True, d
    # The kubelet asks NodeGetInfo again for the attach limit (MutableCSINodeAllocatableCount,
    # beta in 1.34): the API takes 10 s at least.
    assert d.get("nodeAllocatableUpdatePeriodSeconds", 0) >= 10, d
    (ctrl, cspec), = [(o, s) for o, s in pod_specs(objs) if o["kind"] == "Deployment"]
    (node, nspec), = [(o, s) for o, s in pod_specs(objs) if o["kind"] == "DaemonSet"]
    assert ctrl["spec"]["replicas"] == 2 and ctrl["spec"]["strategy"]["type"] == "RollingUpdate"
    for spec in (cspec, nspec):
        assert spec["nodeSelector"] == {"kubernetes.io/os": "linux"}, spec["nodeSelector"]
    c, n = volplugd(cspec), volplugd(nspec)
    assert c["args"][0] == "controller" and n["args"][0] == "node", (c["args"], n["args"])
    for v in (c, n):
        assert flag(v, "backend") == "ebs" and flag(v, "pool") is None, v["args"]
    assert not c["securityContext"].get("privileged") and \
        c["securityContext"]["allowPrivilegeEscalation"] is False, c["securityContext"]
    assert not [v for v in cspec["volumes"] if "hostPath" in v], cspec["volumes"]
    secrets = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in c["env"] if "secretKeyRef" in
               e.get("valueFrom", {})}
    assert {k: (r["name"], r.get("optional")) for k, r in secrets.items()} == {
        "AWS_ACCESS_KEY_ID": ("aws-secret", True), "AWS_SECRET_ACCESS_KEY": ("aws-secret", True)}
    assert not [e for x in nspec["containers"] for e in x.get("env", []) if e["name"].startswith("AWS_")]
    assert nspec["automountServiceAccountToken"] is False, "the node calls no API"
    assert set(SIDECAR_ROLES) <= {x["name"] for x in cspec["containers"]}


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in selector.items())


def scraped_ports(pod_labels):
    """The port names (targetPort) of the pods with pod_labels that the ServiceMonitor of
    deploy/kubernetes/monitoring scrapes: through a Service it selects, which selects the pod."""
    monitoring = build(os.path.join(DEPLOY, "monitoring"))
    (sm,) = find(monitoring, "ServiceMonitor")
    assert "volplug" in sm["spec"]["namespaceSelector"]["matchNames"], sm
    endpoints = {e["port"] for e in sm["spec"]["endpoints"]}
    return {p["targetPort"] for s in find(monitoring, "Service")
            if selects(sm["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
            and selects(s["spec"]["selector"], pod_labels)
            for p in s["spec"]["ports"] if p["name"] in endpoints}


def check_metrics(objs):
    """volplugd serves /metrics on the pod's address at a port named as the annotations say,
    each CSI sidecar its own (--http-endpoint), a pod's ports are distinct, and monitoring/
    scrapes every one of them."""
    n = 0
    for w, spec in pod_specs(objs):
        name = w["metadata"]["name"]
        meta = w["spec"]["template"]["metadata"]
        ports = [(p["name"], p["containerPort"]) for c in spec["containers"] for p in c.get("ports", [])]
        assert len({p[0] for p in ports}) == len({p[1] for p in ports}) == len(ports), (name, ports)
        scraped = scraped_ports(meta["labels"])
        for c in spec["containers"]:
            if c["name"] not in METRICS_PORTS:
                continue
            port, number = METRICS_PORTS[c["name"]]
            assert (port, number) in [(p["name"], p["containerPort"]) for p in c.get("ports", [])], \
                "%s/%s: no port %s %d" % (name, c["name"], port, number)
            if c["name"] == "volplugd":
                assert flag(c, "metrics-address") == "$(POD_IP):%d" % number, c["args"]
                assert env_field(c, "POD_IP") == "status.podIP", name
                ann = meta.get("annotations", {})
                assert (ann.get("prometheus.io/scrape"), ann.get("prometheus.io/port"),
                        ann.get("prometheus.io/path")) == ("true", str(number), "/metrics"), (name, ann)
            else:
                assert flag(c, "http-endpoint") == ":%d" % number, (name, c["name"], c["args"])
            assert port in scraped, "%s/%s: monitoring/ does not scrape %s" % (name, c["name"], port)
            n += 1
    return "%d metrics ports, each scraped" % n


def check_kubectl(directory, objs):
    """kubectl kustomize builds the same objects, field for field, when kubectl is there."""
    kubectl = shutil.which("kubectl")
    if not kubectl:
        return "kubectl not found: the kustomize build itself is not checked"
    p = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    built = [d for d in yaml.safe_load_all(p.stdout) if d]

    def keyed(docs):
        return {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}

    assert sorted(keyed(built)) == sorted(keyed(objs)), (sorted(keyed(built)), sorted(keyed(objs)))
    differ = [k for k, d in keyed(built).items() if keyed(objs)[k] != d]
    assert not differ, "built otherwise by kubectl: %s" % differ
    return "kubectl kustomize builds the same %d objects" % len(built)


def check_example_vendor():
    """The example Flexvolume drivers' vendor is spelled one way in every document that names
    it: README.md, deploy/README.md, docs/ and the examples' own headers."""
    docs = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "deploy", "README.md")]
    docs += sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
    docs += sorted(glob.glob(os.path.join(ROOT, "examples", "flexvolume", "*")))
    vendors = {}
    for path in docs:
        with open(path, errors="replace") as f:
            text = f.read()
        found = re.findall(r"--vendor ([\w.-]+) --name (?:tmpfs|loop)\b", text)
        found += re.findall(r"flexvolume\.driver:? `?([\w.-]+)/(?:tmpfs|loop)\b", text)
        for v in found:
            vendors.setdefault(v, set()).add(os.path.relpath(path, ROOT))
    assert len(vendors) == 1, "the example driver's vendor differs: %s" % vendors
    (vendor, where), = vendors.items()
    return "%s in %s" % (vendor, ", ".join(sorted(where)))


def main():
    tests = []
    shapes = {"single-node": check_single_node, "multi-node": check_multi_node, "ebs": check_ebs,
              "store": check_store, "snapshot-metadata": check_snapshot_metadata}
    for layout, (directory, driver) in LAYOUTS.items():
        tests.append(("%s: objects and references" % layout,
                      lambda d=directory, v=driver: "%d objects" % check_common(build(d), v)))
        tests.append(("%s: volplugd's mounts" % layout, lambda d=directory: check_mounts(build(d))))
        tests.append(("%s: images are the versions README.md names" % layout,
                      lambda d=directory: check_images(build(d))))
        tests.append(("%s: the layout's shape" % layout,
                      lambda d=directory, f=shapes[layout]: f(build(d))))
        tests.append(("%s: metrics ports, annotations, scraped by monitoring/" % layout,
                      lambda d=directory: check_metrics(build(d))))
        tests.append(("%s: kubectl kustomize" % layout,
                      lambda d=directory: check_kubectl(d, build(d))))
    schemas = api_schemas()
    for layout, (directory, _) in LAYOUTS.items():
        tests.append(("%s: valid against the API schemas" % layout,
                      lambda d=directory: check_schemas(build(d), schemas)))
    tests.append(("flexvolume installer: valid against the API schemas",
                  lambda: check_schemas(load_docs(os.path.join(ROOT, "deploy", "flexvolume-installer",
                                                               "daemonset.yaml")), schemas)))
    tests.append(("flexvolume installer: the image make image builds, its installer command",
                  lambda: check_installer_image(load_docs(os.path.join(
                      ROOT, "deploy", "flexvolume-installer", "daemonset.yaml")))))
    tests.append(("the schema check finds mistakes", lambda: check_schema_catches_mistakes(schemas)))
    tests.append(("the mounts check finds a mount a patch dropped", check_mounts_catch_a_dropped_mount))
    tests.append(("the snapshot CRDs are kept, from the sidecar's release", check_crds))
    tests.append(("the example driver's vendor is named alike everywhere", check_example_vendor))
    tests.append(("no kustomization at the top: a layout is chosen",
                  lambda: None if not os.path.exists(os.path.join(DEPLOY, "kustomization.yaml"))
                  else (_ for _ in ()).throw(AssertionError("deploy/kubernetes/kustomization.yaml"))))
    print("1..%d" % len(tests))
    failed = 0
    for i, (name, fn) in enumerate(tests, 1):
        try:
            note = fn()
            print("ok %d - %s%s" % (i, name, ": " + note if note else ""))
        except Exception as e:  # noqa: BLE001 - reported as a failed test
            failed += 1
            print("not ok %d - %s" % (i, name))
            for line in repr(e).splitlines():
                print("#   " + line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
