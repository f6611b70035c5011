/* SPDX-License-Identifier: Apache-2.0 */
/* The pool backend's controller operations, and the checks of its node operations, called as
 * the CSI layer calls them (backend.h's table): what each answers, and the message the user
 * would read. Two backends opened on one
 * pool stand for two processes of its node (a controller and a node plugin); two pools, for two
 * nodes of a cluster. No loop devices: no root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "backend.h"
#include "pool-backend.h"
#include "scratch.h"
#include "strv.h"
#include "tap.h"

static char *pool_dir; /* the pool of the test running */
static char *reported; /* what the last backend started told report(), one line each */

static void report(const char *volume_id, const char *message, void *userdata)
{
	char *prev = reported;

	(void)userdata;
	reported = xasprintf("%s%s%s%s\n", prev ?: "", volume_id ?: "", volume_id ? ": " : "",
			     message);
	free(prev);
}

/* Each test gets a pool directory of its own. */
static void use_pool(const char *name)
{
	free(pool_dir);
	pool_dir = scratch_mkdir(name);
}

/* A backend on the test's pool for node (a process serving the controller and that node). */
static Backend *start_with(const char *node, uint32_t max_volumes, const Strmap *labels)
{
	_cleanup_free_ char *error = NULL;
	Backend *b = NULL;
	PoolSettings settings = {.path = pool_dir, .capacity = 64 * MIB, .overprovision = 1};
	BackendConfig config = {
		.roles = BACKEND_ROLE_CONTROLLER | BACKEND_ROLE_NODE,
		.node_id = node,
		.max_volumes_per_node = max_volumes,
		.zone = "z1",
		.topology_labels = labels,
		.settings = &settings,
		.report = report,
	};

	free(reported);
	reported = NULL;
	if (backend_type_find("pool")->new (&config, &b, &error) < 0) {
		printf("Bail out! cannot start a pool backend in %s: %s\n", pool_dir, error);
		exit(1);
	}
	return b;
}

static Backend *start(const char *node, uint32_t max_volumes)
{
	return start_with(node, max_volumes, NULL);
}

static char *error; /* the message of the last call that failed */

#define CALL(b, op, request, result) \
	(free(error), error = NULL, (b)->ops->op((b), (request), (result), &error))

static int create(Backend *b, const char *name, uint64_t size, const char *source_kind,
		  const char *source_id, BackendVolume *ret)
{
	VolumeParams params = {};
	BackendCreateVolume c = {
		.name = name,
		.size = size,
		.params = &params,
		.source_kind = source_kind,
		.source_id = source_id,
		.access = {.fstype = "xfs", .mode = "SINGLE_NODE_WRITER"},
	};

	*ret = (BackendVolume){};
	if (volume_params_parse(NULL, 0, size, &params, NULL) < 0)
		return -EINVAL;
	int e = CALL(b, create_volume, &c, ret);
	volume_params_done(&params);
	return e;
}

static void test_create(void)
{
	use_pool("create");
	Backend *b = start("node-a", 0);
	BackendVolume v, again, clone;
	BackendTopology other = {};
	VolumeParams params = {};

	is_int(create(b, "vol-one", 4 * MIB, NULL, NULL, &v), 0, "create: a blank volume");
	ok(strncmp(v.id, "vol-", 4) == 0 && v.size == 4 * MIB, "its id %s and size", v.id);
	is_str(strmap_get(&v.context, "csi.storage.k8s.io/fstype"), "xfs",
	       "the node gets the filesystem the capability asked for");
	is_str(strmap_get(&v.topology, BACKEND_TOPOLOGY_NODE), "node-a", "reachable on its node");
	is_str(strmap_get(&v.topology, BACKEND_TOPOLOGY_ZONE), "z1", "in its zone");
	is_str(v.id + strlen(v.id) - 7, ".node-a", "its id carries its node: %s", v.id);
	ok(!v.copy_method, "nothing was copied");
	is_int(create(b, "vol-one", 8 * MIB, NULL, NULL, &again), -EEXIST,
	       "the same name again: -EEXIST");
	ok(again.id && strcmp(again.id, v.id) == 0 && again.size == 4 * MIB,
	   "with the existing volume, for the caller to compare");
	backend_volume_done(&again);
	is_int(create(b, "too-big", 128 * MIB, NULL, NULL, &again), -ENOSPC, "beyond capacity");
	is_str(error,
	       "capacity_range: 134217728 bytes do not fit in the pool of node node-a (62914560 "
	       "bytes left): 4194304 of 67108864 bytes are provisioned (capacity 67108864 x "
	       "overprovision ratio 1)",
	       "message names the field and the node, what is left, what is provisioned, and the "
	       "limit");
	is_int(create(b, "from-snap", 4 * MIB, "snapshot", "snap-0123456789abcdef", &again),
	       -ENOENT, "from a snapshot that does not exist: -ENOENT");
	is_str(error, "volume_content_source: snapshot 'snap-0123456789abcdef' not found",
	       "message");
	is_int(create(b, "clone", 4 * MIB, "volume", v.id, &clone), 0, "a clone");
	ok(clone.copy_method && *clone.copy_method, "says how it copied: %s", clone.copy_method);

	strmap_set(&other, BACKEND_TOPOLOGY_ZONE, "z2");
	volume_params_parse(NULL, 0, MIB, &params, NULL);
	BackendCreateVolume c = {
		.name = "elsewhere",
		.size = MIB,
		.params = &params,
		.access = {.fstype = "", .mode = "SINGLE_NODE_WRITER"},
		.requisite = &other,
		.n_requisite = 1,
	};
	is_int(CALL(b, create_volume, &c, &again), -ENOSPC, "a requisite zone it does not serve");
	is_str(error,
	       "accessibility_requirements.requisite[0]: topology.volplug.io/zone=z2 is not this "
	       "node: this pool serves node node-a only (topology.volplug.io/zone=z1)",
	       "message");
	volume_params_done(&params);
	strmap_done(&other);

	/* A name that is not UTF-8 cannot be recorded: refused, and nothing is left behind (a
	 * record without its name would be damage, and the retry's answer "cannot be read"). */
	BackendVolumeList l = {};
	is_int(create(b, "pvc-\xff", MIB, NULL, NULL, &again), -EINVAL,
	       "a name that is not UTF-8: -EINVAL");
	ok(error && strncmp(error, "name, parameters: not valid UTF-8 (volume vol-", 46) == 0,
	   "the message names the fields: %s", error);
	is_int(create(b, "pvc-\xff", MIB, NULL, NULL, &again), -EINVAL, "and again on a retry");
	is_int(CALL(b, list_volumes, &(BackendListRequest){}, &l), 0, "list");
	is_int(l.n_volumes, 2, "only the two volumes made before are there");
	for (size_t i = 0; i < l.n_volumes; i++)
		ok(!l.volumes[i].damage, "%s is sound", l.volumes[i].id);
	backend_volume_list_done(&l);
	backend_volume_done(&v);
	backend_volume_done(&clone);
	b->ops->free(b);
}

static int get(Backend *b, const char *id, BackendVolume *ret)
{
	*ret = (BackendVolume){};
	return CALL(b, get_volume, &(BackendRef){.id = id}, ret);
}

/* A file of volume id in the pool: its directory is its local ID, the ID up to its node. */
static char *pool_file(const char *id, const char *file)
{
	return xasprintf("%s/volumes/%.*s/%s", pool_dir, (int)strcspn(id, "."), id, file);
}

static void test_get_and_list(void)
{
	use_pool("list");
	Backend *b = start("node-a", 0);
	BackendVolume v, a;
	BackendVolumeList l = {};
	char *ids[3];

	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "list-%d", i);
		create(b, name, MIB, NULL, NULL, &v);
		ids[i] = TAKE_PTR(v.id);
		backend_volume_done(&v);
	}
	is_int(get(b, "vol-0123456789abcdef", &v), -ENOENT, "get: an unknown volume");
	is_str(error, "volume_id: volume vol-0123456789abcdef not found", "message");
	is_int(get(b, "x/..", &v), -ENOENT, "get: no volume id at all");
	is_str(error, "volume_id: 'x/..' is not a volume ID of this pool", "message");
	is_int(get(b, ids[0], &a), 0, "get: a volume");
	ok(!a.abnormal && !a.damage && !a.published_nodes, "healthy, published nowhere: %s",
	   a.condition);
	backend_volume_done(&a);

	_cleanup_free_ char *data = pool_file(ids[1], "data");
	ok(truncate(data, 4096) == 0, "the data file of %s shrinks", ids[1]);
	is_int(get(b, ids[1], &a), 0, "get: a volume whose data file shrank");
	ok(a.abnormal && !a.damage && strstr(a.condition, "is 4096 bytes, 1048576 expected"),
	   "is abnormal, saying why: %s", a.condition);
	backend_volume_done(&a);
	_cleanup_free_ char *meta = pool_file(ids[2], "meta.json");
	FILE *f = fopen(meta, "we");
	ok(f && fputs("{ not json", f) >= 0 && fclose(f) == 0, "the record of %s is damaged",
	   ids[2]);
	is_int(get(b, ids[2], &a), 0, "get: a volume whose record is damaged");
	ok(a.abnormal && a.damage && strstr(a.condition, "it can only be deleted"),
	   "is listed as damaged: %s", a.condition);
	backend_volume_done(&a);

	BackendListRequest q = {.max_entries = 2};
	is_int(CALL(b, list_volumes, &q, &l), 0, "list: a page of 2");
	ok(l.n_volumes == 2 && l.next_token, "two volumes, and a token for the rest");
	q.starting_token = l.next_token;
	BackendVolumeList rest = {};
	is_int(CALL(b, list_volumes, &q, &rest), 0, "list: from the token");
	ok(rest.n_volumes == 1 && !rest.next_token, "the last one, no token");
	backend_volume_list_done(&rest);
	q.starting_token = "bogus";
	is_int(CALL(b, list_volumes, &q, &rest), -EALREADY, "list: a token it never gave");
	is_str(error, "starting_token: 'bogus' is not a token ListVolumes gave", "message");
	backend_volume_list_done(&l);

	for (int i = 0; i < 3; i++)
		free(ids[i]);
	b->ops->free(b);
}

static int attach(Backend *b, const char *id, const char *node, bool read_only,
		  BackendAttachment *ret)
{
	BackendAttach a = {
		.volume_id = id,
		.node_id = node,
		.read_only = read_only,
		.access = {.mode = "SINGLE_NODE_WRITER"},
	};
	*ret = (BackendAttachment){};
	return CALL(b, attach, &a, ret);
}

static void test_attach(void)
{
	use_pool("attach");
	Backend *b = start("node-a", 2), *other = start("node-a", 2);
	BackendAttachment at;
	BackendDetached gone = {};
	BackendDeleted del = {};
	BackendVolume v[3];

	for (int i = 0; i < 3; i++) {
		char name[16];
		snprintf(name, sizeof(name), "att-%d", i);
		create(b, name, MIB, NULL, NULL, &v[i]);
	}
	is_int(attach(b, v[0].id, "node-x", false, &at), -ENOENT, "attach: to another node");
	_cleanup_free_ char *want = xasprintf(
		"node_id: volume %s is on node node-a and cannot be published to node node-x",
		v[0].id);
	is_str(error, want, "message: its data is on node-a only");
	is_int(attach(b, v[0].id, "node-a", false, &at), 0, "attach: to node-a");
	is_str(strmap_get(&at.publish_context, "devicePath"), "/dev/xvdba",
	       "the first device name of the list");
	ok(!at.existed, "a new attachment");
	backend_attachment_done(&at);
	is_int(attach(b, v[0].id, "node-a", false, &at), 0, "attach: again");
	ok(at.existed && strcmp(at.device, "/dev/xvdba") == 0, "the same name, nothing done");
	backend_attachment_done(&at);
	is_int(attach(b, v[0].id, "node-a", true, &at), -EEXIST, "attach: read-only this time");
	is_int(attach(other, v[1].id, "node-a", false, &at), 0,
	       "attach: a second volume to node-a from another process");
	is_str(at.device, "/dev/xvdbb", "gets the next name: the other's claim counts");
	backend_attachment_done(&at);
	is_int(attach(b, v[2].id, "node-a", false, &at), -EMLINK, "attach: a third, limit 2");
	is_str(error, "node node-a already has 2 volumes published, its limit", "message");

	is_int(CALL(b, delete_volume, &(BackendRef){.id = v[0].id}, &del), -ENOTEMPTY,
	       "delete: refused while attached");
	ok(strstr(error, "is still published to node node-a: unpublish it first"), "message: %s",
	   error);
	BackendDetach d = {.volume_id = v[0].id};
	is_int(CALL(b, detach, &d, &gone), 0, "detach: from every node");
	ok(strv_length(gone.nodes) == 1 && strcmp(gone.nodes[0], "node-a") == 0 &&
		   strcmp(gone.devices[0], "/dev/xvdba") == 0,
	   "it was on node-a as /dev/xvdba");
	backend_detached_done(&gone);
	is_int(CALL(b, detach, &d, &gone), 0, "detach: again");
	ok(!gone.nodes, "nothing left to detach");
	is_int(CALL(b, delete_volume, &(BackendRef){.id = v[0].id}, &del), 0, "delete");
	ok(del.found && strcmp(del.name, "att-0") == 0, "says what it deleted");
	backend_deleted_done(&del);
	is_int(CALL(b, delete_volume, &(BackendRef){.id = v[0].id}, &del), 0, "delete: again");
	ok(!del.found, "nothing was there");
	for (int i = 0; i < 3; i++)
		backend_volume_done(&v[i]);
	b->ops->free(b);
	other->ops->free(other);
}

static void test_capacity_and_change(void)
{
	use_pool("change");
	Backend *b = start("node-a", 0);
	BackendCapacity c;
	BackendChanged changed;
	BackendVolume v, after;
	BackendTopology z2 = {};

	is_int(CALL(b, get_capacity, &(BackendCapacityRequest){}, &c), 0, "capacity");
	uint64_t before = c.available;
	ok(c.maximum_volume_size == before / MIB * MIB && c.minimum_volume_size == MIB,
	   "maximum: what is left, minimum: 1 MiB");
	strmap_set(&z2, BACKEND_TOPOLOGY_ZONE, "z2");
	is_int(CALL(b, get_capacity, &(BackendCapacityRequest){.topology = &z2}, &c), 0,
	       "capacity in another zone");
	is_int(c.available, 0, "is none");
	strmap_done(&z2);

	create(b, "grow", 2 * MIB, NULL, NULL, &v);
	ParamKV throughput[] = {{(char *)"throughput", (char *)"200"}};
	BackendChange ch = {
		.volume_id = v.id, .new_size = 3 * MIB, .params = throughput, .n_params = 1};
	is_int(CALL(b, change_volume, &ch, &changed), 0, "change: grow and set the throughput");
	is_int(changed.size, 3 * MIB, "the new size");
	get(b, v.id, &after);
	ok(after.size == 3 * MIB && after.params.throughput == 200,
	   "recorded: %llu bytes, %u MiB/s", (unsigned long long)after.size,
	   after.params.throughput);
	backend_volume_done(&after);
	CALL(b, get_capacity, &(BackendCapacityRequest){}, &c);
	is_int(c.available, before - 3 * MIB, "the pool counts the volume's new size");
	ch = (BackendChange){.volume_id = v.id, .new_size = 128 * MIB};
	is_int(CALL(b, change_volume, &ch, &changed), -ENOSPC, "change: beyond capacity");
	ch = (BackendChange){.volume_id = "vol-0123456789abcdef", .new_size = 4 * MIB};
	is_int(CALL(b, change_volume, &ch, &changed), -ENOENT, "change: an unknown volume");
	is_str(error, "volume_id: volume vol-0123456789abcdef not found", "message");
	backend_volume_done(&v);
	b->ops->free(b);
}

static void test_snapshots(void)
{
	use_pool("snapshots");
	Backend *b = start("node-a", 0);
	BackendVolume v[2];
	BackendSnapshot s, again;
	BackendGroup g = {};
	BackendDeleted del = {};
	BackendSnapshotList l = {};

	create(b, "snap-src-0", MIB, NULL, NULL, &v[0]);
	create(b, "snap-src-1", MIB, NULL, NULL, &v[1]);
	BackendCreateSnapshot cs = {.name = "snap", .source_volume_id = v[0].id};
	is_int(CALL(b, create_snapshot, &cs, &s), 0, "snapshot: made");
	ok(s.ready && strcmp(s.source_volume_id, v[0].id) == 0 && s.copy_method,
	   "ready, of its volume, copied by %s", s.copy_method);
	is_int(CALL(b, create_snapshot, &cs, &again), -EEXIST, "snapshot: the same name again");
	is_str(again.id, s.id, "with the existing snapshot");
	backend_snapshot_done(&again);
	cs = (BackendCreateSnapshot){.name = "orphan", .source_volume_id = "vol-0123456789abcdef"};
	is_int(CALL(b, create_snapshot, &cs, &again), -ENOENT, "snapshot: of no volume");
	is_str(error, "source_volume_id: volume vol-0123456789abcdef not found", "message");

	char *ids[] = {v[0].id, v[1].id};
	BackendCreateGroup cg = {.name = "grp", .volume_ids = ids, .n_volume_ids = 2};
	is_int(CALL(b, create_group, &cg, &g), 0, "group: made of two volumes");
	ok(g.ready && g.n_snapshots == 2 && strcmp(g.snapshots[1].source_volume_id, v[1].id) == 0 &&
		   strcmp(g.snapshots[0].group_id, g.id) == 0,
	   "its members, in order, know their group");
	is_int(CALL(b, delete_snapshot, &(BackendRef){.id = g.snapshots[0].id}, &del), -ENOTEMPTY,
	       "delete: a member alone is refused");
	ok(strstr(error, "delete the group"), "message: %s", error);

	BackendListRequest q = {.source_volume_id = v[0].id};
	is_int(CALL(b, list_snapshots, &q, &l), 0, "list snapshots of one volume");
	is_int(l.n_snapshots, 2, "its own and the group's member");
	backend_snapshot_list_done(&l);

	char *wrong[] = {s.id};
	BackendGroupRequest gq = {.id = g.id, .snapshot_ids = wrong, .n_snapshot_ids = 1};
	BackendGroup got = {};
	is_int(CALL(b, get_group, &gq, &got), -EINVAL, "get group: with ids not its members");
	is_int(CALL(b, delete_group, &gq, &del), -EINVAL, "delete group: likewise");
	gq = (BackendGroupRequest){.id = g.id};
	is_int(CALL(b, delete_group, &gq, &del), 0, "delete group");
	ok(del.found && del.n_members == 2, "with its 2 snapshots");
	backend_deleted_done(&del);
	is_int(CALL(b, get_group, &gq, &got), -ENOENT, "gone");
	is_int(CALL(b, delete_snapshot, &(BackendRef){.id = s.id}, &del), 0, "delete snapshot");
	ok(del.found, "it was there");
	backend_group_done(&g);
	backend_snapshot_done(&s);
	backend_volume_done(&v[0]);
	backend_volume_done(&v[1]);
	b->ops->free(b);
}

/* What a start finds and repairs is told to the daemon, a damaged volume by its id. */
static void test_report(void)
{
	use_pool("report");
	Backend *b = start("node-a", 0);
	BackendVolume v;

	create(b, "broken", MIB, NULL, NULL, &v);
	b->ops->free(b);
	_cleanup_free_ char *meta = pool_file(v.id, "meta.json");
	_cleanup_free_ char *junk = xasprintf("%s/tmp/new-junk", pool_dir);
	ok(truncate(meta, 0) == 0 && mkdir(junk, 0755) == 0,
	   "a volume's record emptied, a leftover in tmp/");
	b = start("node-a", 0);
	_cleanup_free_ char *want = xasprintf("%s: ", v.id);
	ok(reported && strstr(reported, want), "the damaged volume, by its id: %s", reported);
	ok(reported && strstr(reported, "tmp/new-junk"), "the leftover in tmp/");
	backend_volume_done(&v);
	b->ops->free(b);
}

/* What the pool judges that the CSI spec leaves open: the access modes and filesystems it
 * serves, the filesystem options in a volume context, a staging path for every publish. Each
 * is refused before anything is touched on the node (no root needed). */
static void test_node_checks(void)
{
	use_pool("node-checks");
	Backend *b = start("node-a", 0);
	BackendAccessCheck q = {
		.field = "volume_capabilities[1]",
		.access = {.fstype = "", .mode = "SINGLE_NODE_WRITER"},
	};
	BackendVolume v;

	is_int(CALL(b, check_access, &q, NULL), 0, "a single node writer, default filesystem");
	q.access.fstype = "xfs";
	is_int(CALL(b, check_access, &q, NULL), 0, "xfs");
	q.access.fstype = "ntfs";
	is_int(CALL(b, check_access, &q, NULL), -EINVAL, "ntfs: refused");
	is_str(error,
	       "volume_capabilities[1].mount.fs_type: 'ntfs' is not supported (want ext2, ext3, "
	       "ext4 or xfs)",
	       "the message names the field");
	q.access.block = true;
	is_int(CALL(b, check_access, &q, NULL), 0, "raw block: no filesystem to judge");
	/* the volume lives on this node: every mode is served here */
	static const char *const modes[] = {"SINGLE_NODE_SINGLE_WRITER", "SINGLE_NODE_MULTI_WRITER",
					    "MULTI_NODE_READER_ONLY", "MULTI_NODE_SINGLE_WRITER",
					    "MULTI_NODE_MULTI_WRITER"};
	for (size_t i = 0; i < ELEMENTSOF(modes); i++) {
		q.access.mode = modes[i];
		q.access.block = i % 2 == 0;
		q.access.fstype = "";
		is_int(CALL(b, check_access, &q, NULL), 0, "%s: served on the pool's node",
		       modes[i]);
	}
	q.access.mode = "SINGLE_NODE_WRITER";
	q.access.block = true;

	create(b, "checked", MIB, NULL, NULL, &v);
	Strmap ctx = {};
	strmap_set(&ctx, "blockSize", "lots");
	_cleanup_free_ char *staging = xasprintf("%s/staging", pool_dir);
	BackendStage st = {
		.volume_id = v.id,
		.staging_path = staging,
		.access = {.fstype = "", .mode = "SINGLE_NODE_WRITER"},
		.volume_context = &ctx,
	};
	is_int(CALL(b, stage, &st, NULL), -EINVAL, "stage: filesystem options that are not");
	ok(error && strncmp(error, "volume_context: ", 16) == 0 && strstr(error, "blockSize"),
	   "the message names the context key: %s", error);
	struct stat sb;
	ok(stat(staging, &sb) < 0, "nothing made at the staging path");
	BackendPublish pub = {
		.volume_id = v.id,
		.target_path = staging,
		.access = st.access,
		.group = (gid_t)-1,
	};
	is_int(CALL(b, publish, &pub, NULL), -EINVAL, "publish without a staging path: refused");
	is_str(error, "staging_target_path: missing", "the message names the field");
	strmap_done(&ctx);
	backend_volume_done(&v);
	b->ops->free(b);
}

/* Two nodes, each with its own pool: an ID says whose object it is, and an ID of the other node
 * is NOT_FOUND (naming both nodes) before anything of this pool is looked at, even where this
 * pool has an object of the same name, hence of the same local ID. */
static void test_ids_carry_their_node(void)
{
	use_pool("ids-b");
	Backend *b = start("node-b", 0);
	use_pool("ids-a");
	Backend *a = start("node-a", 0);
	BackendVolume va, vb, got;
	BackendSnapshot sb, sa;
	BackendDeleted del;

	create(a, "same-name", MIB, NULL, NULL, &va);
	create(b, "same-name", MIB, NULL, NULL, &vb);
	ok(strcmp(va.id, vb.id) != 0 && strncmp(va.id, vb.id, strcspn(va.id, ".")) == 0,
	   "one name, two nodes: %s and %s, the same local ID", va.id, vb.id);

	_cleanup_free_ char *want = xasprintf(
		"volume_id: volume %s is on node node-b, not on this node (node-a)", vb.id);
	is_int(get(a, vb.id, &got), -ENOENT, "get: node-b's volume on node-a");
	is_str(error, want, "message names both nodes");
	is_int(CALL(a, delete_volume, &(BackendRef){.id = vb.id}, &del), -ENOENT,
	       "delete: node-b's volume on node-a is NOT_FOUND, not gone");
	is_str(error, want, "message names both nodes");
	is_int(get(a, va.id, &got), 0, "node-a's own volume of that name is untouched");
	backend_volume_done(&got);
	BackendChange ch = {.volume_id = vb.id, .new_size = 2 * MIB};
	BackendChanged changed;
	is_int(CALL(a, change_volume, &ch, &changed), -ENOENT, "change: node-b's volume");
	_cleanup_free_ char *staging = xasprintf("%s/staging", pool_dir);
	BackendStage st = {
		.volume_id = vb.id,
		.staging_path = staging,
		.access = {.block = true, .mode = "SINGLE_NODE_WRITER"},
	};
	is_int(CALL(a, stage, &st, NULL), -ENOENT, "stage: node-b's volume on node-a");
	is_str(error, want, "message names both nodes");

	/* The node service's messages name the volume as the request did, and a path as it was
	 * given, though the path holds the volume's local ID. */
	char loc[32];
	snprintf(loc, sizeof(loc), "%.*s", (int)strcspn(va.id, "."), va.id);
	_cleanup_free_ char *odd_path = xasprintf("%s/missing/st-%s", pool_dir, loc);
	is_int(CALL(a, unstage, &((BackendUnstage){.volume_id = va.id, .staging_path = odd_path}),
		    NULL),
	       -EINVAL, "unstage where no parent directory is: INVALID_ARGUMENT");
	_cleanup_free_ char *says = xasprintf(
		"staging_target_path: the parent directory of '%s' does not exist", odd_path);
	is_str(error, says, "the message names the path as given");

	/* The local ID alone (an ID made before IDs carried their node) is this node's. */
	char local[32];
	snprintf(local, sizeof(local), "%.*s", (int)strcspn(va.id, "."), va.id);
	is_int(get(a, local, &got), 0, "get: the local ID alone is node-a's volume");
	is_str(got.id, va.id, "the same volume");
	backend_volume_done(&got);

	BackendCreateSnapshot cs = {.name = "snap-b", .source_volume_id = vb.id};
	is_int(CALL(b, create_snapshot, &cs, &sb), 0, "node-b snapshots its volume");
	ok(strstr(sb.id, ".node-b") != NULL, "its snapshot ID carries node-b: %s", sb.id);
	cs = (BackendCreateSnapshot){.name = "snap-x", .source_volume_id = vb.id};
	is_int(CALL(a, create_snapshot, &cs, &sa), -ENOENT,
	       "snapshot of node-b's volume on node-a");
	ok(strstr(error, "source_volume_id: ") == error && strstr(error, "node-b") &&
		   strstr(error, "node-a"),
	   "message: %s", error);
	is_int(CALL(a, get_snapshot, &(BackendRef){.id = sb.id}, &sa), -ENOENT,
	       "get: node-b's snapshot on node-a");
	is_int(CALL(a, delete_snapshot, &(BackendRef){.id = sb.id}, &del), -ENOENT,
	       "delete: node-b's snapshot on node-a is NOT_FOUND");
	is_int(create(a, "restored", MIB, "snapshot", sb.id, &got), -ENOSPC,
	       "restore of node-b's snapshot on node-a: RESOURCE_EXHAUSTED");
	ok(strstr(error, "volume_content_source.snapshot.snapshot_id: ") == error &&
		   strstr(error, "is on node node-b, not on this node (node-a)") &&
		   strstr(error, "on the source's node only"),
	   "message names the field and both nodes: %s", error);
	is_int(create(a, "cloned", MIB, "volume", vb.id, &got), -ENOSPC,
	       "clone of node-b's volume on node-a: RESOURCE_EXHAUSTED");
	ok(strstr(error, "volume_content_source.volume.volume_id: ") == error, "message: %s",
	   error);
	BackendVolumeList l = {};
	is_int(CALL(a, list_volumes, &(BackendListRequest){}, &l), 0, "list on node-a");
	ok(l.n_volumes == 1 && strcmp(l.volumes[0].id, va.id) == 0, "its own volume only");
	backend_volume_list_done(&l);

	backend_snapshot_done(&sb);
	backend_volume_done(&va);
	backend_volume_done(&vb);
	a->ops->free(a);
	b->ops->free(b);
}

/* A node ID too long or too odd for an ID appears as a hash, and the ID stays within CSI's 128
 * bytes. */
static void test_long_node_ids(void)
{
	char node[129];
	BackendVolume v;

	memset(node, 'n', 128);
	node[128] = 0;
	use_pool("long-node");
	Backend *b = start(node, 0);
	is_int(create(b, "long", MIB, NULL, NULL, &v), 0, "a volume on a node of a 128-byte ID");
	ok(strlen(v.id) <= 128 && strchr(v.id, '~'), "its ID %s: at most 128 bytes, a hash", v.id);
	BackendVolume got;
	is_int(get(b, v.id, &got), 0, "found by that ID");
	backend_volume_done(&got);
	backend_volume_done(&v);
	b->ops->free(b);
}

/* Where a volume may go: this node's segment (node, zone, the operator's labels), preferred
 * segments first, then the requisite ones; never another node's. */
static void test_topology(void)
{
	Strmap labels = {}, here = {}, there = {}, odd = {}, zone_only = {};
	BackendVolume v;
	VolumeParams params = {};

	strmap_set(&labels, "example.com/rack", "r1");
	use_pool("topology");
	Backend *b = start_with("node-a", 0, &labels);
	BackendNodeInfo info = {};
	is_int(CALL(b, node_info, NULL, &info), 0, "node info");
	ok(info.topology.n == 3 &&
		   strcmp(strmap_get(&info.topology, BACKEND_TOPOLOGY_NODE), "node-a") == 0 &&
		   strcmp(strmap_get(&info.topology, BACKEND_TOPOLOGY_ZONE), "z1") == 0 &&
		   strcmp(strmap_get(&info.topology, "example.com/rack"), "r1") == 0,
	   "its segment: node, zone and the label");
	strmap_copy(&here, &info.topology);
	strmap_done(&info.topology);
	strmap_set(&there, BACKEND_TOPOLOGY_NODE, "node-b");
	strmap_set(&there, "example.com/row", "7"); /* node-b's labels need not be ours */
	strmap_set(&odd, "example.com/unheard-of", "x");
	strmap_set(&zone_only, BACKEND_TOPOLOGY_K8S_ZONE, "z1");

	volume_params_parse(NULL, 0, MIB, &params, NULL);
	BackendCreateVolume c = {
		.name = "t1",
		.size = MIB,
		.params = &params,
		.access = {.fstype = "", .mode = "SINGLE_NODE_WRITER"},
		.requisite = (BackendTopology[]){there, here},
		.n_requisite = 2,
		.preferred = (BackendTopology[]){there},
		.n_preferred = 1,
	};
	is_int(CALL(b, create_volume, &c, &v), 0,
	       "preferred node-b, requisite node-b or here: here");
	ok(strmap_equal(&v.topology, &here), "accessible from exactly this node's segment");
	backend_volume_done(&v);

	c = (BackendCreateVolume){.name = "t2",
				  .size = MIB,
				  .params = &params,
				  .access = c.access,
				  .requisite = &there,
				  .n_requisite = 1};
	is_int(CALL(b, create_volume, &c, &v), -ENOSPC,
	       "requisite node-b only: RESOURCE_EXHAUSTED");
	is_str(error,
	       "accessibility_requirements.requisite[0]: topology.volplug.io/node=node-b is not "
	       "this node: this pool serves node node-a only (topology.volplug.io/node=node-a)",
	       "message names the field, the key and both nodes");
	c.requisite = &odd;
	is_int(CALL(b, create_volume, &c, &v), -EINVAL, "a key this node does not have: INVALID");
	is_str(error,
	       "accessibility_requirements.requisite[0]: example.com/unheard-of is not a topology "
	       "key of node node-a (it has topology.volplug.io/node=node-a)",
	       "message names the field, the key and the node");
	c.requisite = NULL;
	c.n_requisite = 0;
	c.preferred = &odd;
	c.n_preferred = 1;
	is_int(CALL(b, create_volume, &c, &v), -EINVAL, "an unknown key in preferred: INVALID");
	c.preferred = &there;
	is_int(CALL(b, create_volume, &c, &v), 0,
	       "preferred node-b without requisite: here, as the spec lets the plugin choose");
	backend_volume_done(&v);
	c = (BackendCreateVolume){.name = "t3",
				  .size = MIB,
				  .params = &params,
				  .access = c.access,
				  .requisite = &zone_only,
				  .n_requisite = 1};
	is_int(CALL(b, create_volume, &c, &v), 0, "requisite topology.kubernetes.io/zone=z1: fits");
	backend_volume_done(&v);
	_cleanup_free_ char *vols = xasprintf("%s/volumes", pool_dir);
	DIR *d = opendir(vols);
	size_t n = 0;
	for (struct dirent *de; d && (de = readdir(d));)
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	is_int(n, 3, "the refused requests made nothing");

	/* Capacity per segment and per class. */
	BackendCapacity cap;
	is_int(CALL(b, get_capacity, &(BackendCapacityRequest){.topology = &here}, &cap), 0,
	       "capacity of this node's segment");
	ok(cap.available == 61 * MIB && cap.maximum_volume_size == 61 * MIB,
	   "64 MiB less the 3 MiB made: %llu", (unsigned long long)cap.available);
	CALL(b, get_capacity, &(BackendCapacityRequest){.topology = &there}, &cap);
	is_int(cap.available, 0, "node-b's segment: nothing of this pool");
	CALL(b, get_capacity, &(BackendCapacityRequest){.topology = &odd}, &cap);
	is_int(cap.available, 0, "a segment of an unknown key: nothing");
	CALL(b, get_capacity, &(BackendCapacityRequest){.max_size = 16 * MIB}, &cap);
	ok(cap.available == 61 * MIB && cap.maximum_volume_size == 16 * MIB,
	   "a class whose largest volume is 16 MiB: that is the largest");
	CALL(b, get_capacity, &(BackendCapacityRequest){.min_size = 124 * 1024 * MIB + 1}, &cap);
	ok(cap.maximum_volume_size == 0 && cap.minimum_volume_size == (124 * 1024 + 1) * MIB,
	   "a class of volumes above 124 GiB: none fits, the smallest in whole MiB");

	volume_params_done(&params);
	strmap_done(&labels);
	strmap_done(&here);
	strmap_done(&there);
	strmap_done(&odd);
	strmap_done(&zone_only);
	b->ops->free(b);
}

/* Reads a whole small file; NULL when it cannot. */
static char *slurp(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf = xnew0(char, 2 * MIB + 1);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, 2 * MIB);

	if (n < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void copy_file(const char *from, const char *to)
{
	_cleanup_free_ char *text = slurp(from);
	struct stat st;
	FILE *f = fopen(to, "we");

	if (!text || !f || stat(from, &st) < 0 ||
	    fwrite(text, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
		printf("Bail out! cannot copy %s\n", from);
		exit(1);
	}
	fclose(f);
}

/* The pool's own names are data on a disk others can write: each one of a volume replaced by a
 * symlink to a copy outside the pool (which would work, if it were followed) makes the volume
 * damaged, the same answer from every call, deletable, and the copy is never touched. */
static void test_symlinks_in_the_pool(void)
{
	static const struct {
		const char *name;   /* in the volume's directory; "" the directory itself */
		const char *object; /* what the messages name, after "volumes/<local>" */
		bool garbage;	    /* not a symlink: the file's content is damaged */
	} rows[] = {
		{"data", "/data is a symbolic link"},
		{"meta.json", "/meta.json is a symbolic link"},
		{"", " is a symbolic link, not a directory of the pool"},
		{"meta.json", "/meta.json is damaged: not a volume record", true},
	};

	use_pool("symlinks");
	Backend *b = start("node-a", 0);
	_cleanup_free_ char *canaries = scratch_mkdir("symlink-canaries");

	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		const char *row = rows[i].garbage ? "damaged meta.json"
				  : *rows[i].name ? rows[i].name
						  : "the volume's directory";
		char name[32];
		BackendVolume v, a, clone;
		BackendVolumeList l = {};
		BackendSnapshot snap;
		BackendAttachment at;
		BackendDeleted del = {};
		struct stat st;

		snprintf(name, sizeof(name), "sym-%zu", i);
		create(b, name, MIB, NULL, NULL, &v);
		_cleanup_free_ char *local = xstrndup(v.id, strcspn(v.id, "."));
		_cleanup_free_ char *entry = pool_file(v.id, rows[i].name);
		if (!*rows[i].name)
			entry[strlen(entry) - 1] = 0; /* no trailing slash */
		_cleanup_free_ char *canary = xasprintf("%s/%zu", canaries, i);
		_cleanup_free_ char *meta = pool_file(v.id, "meta.json");
		_cleanup_free_ char *data = pool_file(v.id, "data");
		if (rows[i].garbage) {
			FILE *f = fopen(entry, "we");
			ok(f && fputs("{ not json", f) >= 0 && fclose(f) == 0, "%s: made", row);
		} else if (*rows[i].name) {
			copy_file(entry, canary);
		} else {
			_cleanup_free_ char *cm = xasprintf("%s/meta.json", canary);
			_cleanup_free_ char *cd = xasprintf("%s/data", canary);
			mkdir(canary, 0700);
			copy_file(meta, cm);
			copy_file(data, cd);
			unlink(meta);
			unlink(data);
		}
		_cleanup_free_ char *gone = xasprintf("%s.gone", canary);
		if (!rows[i].garbage)
			ok(rename(entry, gone) == 0 && symlink(canary, entry) == 0,
			   "%s: replaced by a symlink to a working copy outside the pool", row);
		_cleanup_free_ char *object = xasprintf("volumes/%s%s", local, rows[i].object);

		is_int(get(b, v.id, &a), 0, "%s: get answers", row);
		ok(a.abnormal && a.damage && strstr(a.condition, object) &&
			   strstr(a.condition, "it can only be deleted"),
		   "%s: damaged, naming it: %s", row, a.condition);
		backend_volume_done(&a);
		is_int(CALL(b, list_volumes, &(BackendListRequest){}, &l), 0, "%s: list answers",
		       row);
		bool listed = false;
		for (size_t j = 0; j < l.n_volumes; j++)
			if (strcmp(l.volumes[j].id, v.id) == 0)
				listed = l.volumes[j].abnormal && l.volumes[j].damage;
		ok(listed, "%s: listed, damaged", row);
		backend_volume_list_done(&l);

		_cleanup_free_ char *want = xasprintf("volume %s is damaged: %s", v.id, object);
		BackendChange ch = {.volume_id = v.id, .new_size = 2 * MIB};
		BackendChanged changed;
		is_int(CALL(b, change_volume, &ch, &changed), -EUCLEAN, "%s: expand refused", row);
		ok(error && strstr(error, want), "%s: message: %s", row, error);
		is_int(attach(b, v.id, "node-a", false, &at), -EUCLEAN, "%s: publish refused", row);
		ok(error && strstr(error, want), "%s: message: %s", row, error);
		BackendCreateSnapshot cs = {.name = name, .source_volume_id = v.id};
		is_int(CALL(b, create_snapshot, &cs, &snap), -EUCLEAN, "%s: snapshot refused", row);
		ok(error && strstr(error, want), "%s: message: %s", row, error);
		_cleanup_free_ char *clone_name = xasprintf("%s-clone", name);
		is_int(create(b, clone_name, MIB, "volume", v.id, &clone), -EUCLEAN,
		       "%s: clone refused", row);
		ok(error && strstr(error, want), "%s: message: %s", row, error);
		backend_volume_done(&clone);

		is_int(CALL(b, delete_volume, &(BackendRef){.id = v.id}, &del), 0,
		       "%s: delete works", row);
		/* Its name is known as long as its record is. */
		ok(del.found && del.damaged == (strcmp(rows[i].name, "data") != 0),
		   "%s: says what it deleted", row);
		backend_deleted_done(&del);
		ok(lstat(entry, &st) < 0 && errno == ENOENT, "%s: no trace left in the pool", row);
		is_int(get(b, v.id, &a), -ENOENT, "%s: the volume is gone", row);
		if (rows[i].garbage) {
			/* nothing outside */
		} else if (*rows[i].name) {
			_cleanup_free_ char *c = slurp(canary), *w = slurp(gone);
			struct stat was;
			bool same = c && w && stat(canary, &st) == 0 && stat(gone, &was) == 0 &&
				    st.st_size == was.st_size &&
				    memcmp(c, w, (size_t)st.st_size) == 0;
			ok(same, "%s: the copy outside is untouched (%lld bytes)", row,
			   (long long)st.st_size);
		} else {
			_cleanup_free_ char *cm = xasprintf("%s/meta.json", canary);
			_cleanup_free_ char *cd = xasprintf("%s/data", canary);
			ok(stat(cm, &st) == 0 && stat(cd, &st) == 0 && st.st_size == (off_t)MIB,
			   "%s: the directory outside and its files are untouched", row);
		}
		backend_volume_done(&v);
	}
	b->ops->free(b);
}

/* The pool's own layout: each subdirectory or the ledger replaced by a symlink to a canary
 * outside stops the backend at start, naming it, and the canary is untouched. */
static void test_symlinked_layout(void)
{
	static const char *const names[] = {"volumes", "snapshots", "groups",
					    "nodes",   "tmp",	    "ledger"};

	for (size_t i = 0; i < ELEMENTSOF(names); i++) {
		_cleanup_free_ char *pool = xasprintf("layout-%s", names[i]);
		_cleanup_free_ char *canary_name = xasprintf("layout-canary-%s", names[i]);
		use_pool(pool);
		Backend *b = start("node-a", 0);
		b->ops->free(b);
		b = NULL;
		_cleanup_free_ char *canary = scratch_mkdir(canary_name);
		_cleanup_free_ char *keep = xasprintf("%s/keep", canary);
		_cleanup_free_ char *entry = xasprintf("%s/%s", pool_dir, names[i]);
		_cleanup_free_ char *moved = xasprintf("%s/moved", canary);
		close(open(keep, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
		ok(rename(entry, moved) == 0 && symlink(canary, entry) == 0,
		   "%s: replaced by a symlink to a directory outside", names[i]);

		_cleanup_free_ char *err = NULL;
		PoolSettings settings = {
			.path = pool_dir, .capacity = 64 * MIB, .overprovision = 1};
		BackendConfig config = {
			.roles = BACKEND_ROLE_CONTROLLER | BACKEND_ROLE_NODE,
			.node_id = "node-a",
			.zone = "z1",
			.settings = &settings,
		};
		int r = backend_type_find("pool")->new (&config, &b, &err);
		ok(r < 0, "%s: the backend does not start", names[i]);
		_cleanup_free_ char *want = xasprintf("%s%s is a symbolic link", names[i],
						      strcmp(names[i], "ledger") == 0 ? "" : "/");
		ok(err && strstr(err, want), "%s: saying so: %s", names[i], err);
		struct stat st;
		_cleanup_free_ char *made = xasprintf("%s/volumes", canary);
		ok(stat(keep, &st) == 0 && st.st_size == 0 && lstat(made, &st) < 0,
		   "%s: the directory outside is untouched", names[i]);
		if (r == 0)
			b->ops->free(b);
	}
}

int main(void)
{
	scratch_init("pool-backend");
	test_create();
	test_get_and_list();
	test_attach();
	test_capacity_and_change();
	test_snapshots();
	test_report();
	test_node_checks();
	test_ids_carry_their_node();
	test_long_node_ids();
	test_topology();
	test_symlinks_in_the_pool();
	test_symlinked_layout();
	free(error);
	free(reported);
	free(pool_dir);
	return tap_done();
}
