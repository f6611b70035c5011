/* SPDX-License-Identifier: Apache-2.0 */
/* The Flexvolume backend without root: which volumes it claims, its records on disk (names and
 * format that earlier versions wrote, hash collisions, the check `pool check` runs), the
 * errors of its operations, and the controller operations against the record test driver
 * (tests/flex-drivers/record), which shows the argv it was called with. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "backend.h"
#include "fileio.h"
#include "flex-drivers.h"
#include "flex-records.h"
#include "registry.h"
#include "strv.h"
#include "tap.h"

#define VOLUMES_DIR "flex/volumes"

static char *pool;

static Backend *flex_new(FlexRegistry *registry)
{
	_cleanup_free_ char *error = NULL;
	BackendConfig bc = {
		.roles = BACKEND_ROLE_CONTROLLER | BACKEND_ROLE_NODE,
		.node_id = "node-1",
		.state_dir = pool, /* the pool's, as beside the pool */
		.flex = registry,
	};
	Backend *b = NULL;

	if (backend_type_find("flex")->new (&bc, &b, &error) < 0) {
		printf("Bail out! flex backend: %s\n", error);
		exit(1);
	}
	return b;
}

static char *pool_file(const char *rel)
{
	return xasprintf("%s/%s", pool, rel);
}

static bool exists(const char *rel)
{
	_cleanup_free_ char *p = pool_file(rel);
	return access(p, F_OK) == 0;
}

static void write_at(const char *rel, const char *text)
{
	_cleanup_free_ char *p = pool_file(rel);
	_cleanup_free_ char *dir = xstrdup(p);
	*strrchr(dir, '/') = 0;
	_cleanup_free_ char *cmd = xasprintf("mkdir -p '%s'", dir);
	if (system(cmd) != 0) {
		printf("Bail out! %s\n", cmd);
		exit(1);
	}
	_cleanup_close_ int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	(void)write_file_atomic_at(fd, strrchr(p, '/') + 1, text, strlen(text), 0600);
}

static void remove_records(void)
{
	_cleanup_free_ char *cmd = xasprintf("rm -rf '%s/flex'", pool);
	(void)system(cmd);
}

static FlexRecord *sample(const char *id)
{
	FlexRecord *rec = flex_record_new(id);
	flex_record_set(&rec->driver, "example/loop");
	flex_record_set(&rec->fs_type, "ext4");
	strmap_set(&rec->options, "size", "64M");
	return rec;
}

/* ---- records ---- */

static void test_format(void)
{
	_cleanup_(flex_record_freep) FlexRecord *rec = sample("vx"), *back = NULL, *old = NULL;
	rec->attachments = xnew0(FlexAttachment, 2);
	rec->attachments[0] =
		(FlexAttachment){xstrdup("node-1"), xstrdup("/dev/loop3"), true, true};
	rec->attachments[1] = (FlexAttachment){xstrdup("node-2"), xstrdup(""), true, false};
	rec->n_attachments = 2;
	rec->size = 1 << 30;

	_cleanup_free_ char *json = flex_record_to_json(rec);
	is_str(json,
	       "{\"attachments\":[{\"attach\":true,\"device\":\"/dev/loop3\",\"done\":true,"
	       "\"node\":\"node-1\"},{\"attach\":false,\"device\":\"\",\"done\":true,"
	       "\"node\":\"node-2\"}],"
	       "\"device\":\"\",\"device_mounted\":false,\"driver\":\"example/loop\","
	       "\"fs_type\":\"ext4\",\"options\":{\"size\":\"64M\"},\"path\":\"\","
	       "\"read_only\":false,\"size\":1073741824,\"staging_path\":\"\","
	       "\"volume_id\":\"vx\",\"volume_name\":\"vx\"}",
	       "a record's JSON: compact, sorted keys");
	is_int(flex_record_from_json(json, strlen(json), &back), 0, "and reads back");
	ok(back && back->n_attachments == 2 && back->attachments[0].done &&
		   back->attachments[0].attach && !back->attachments[1].attach &&
		   strcmp(back->attachments[0].device, "/dev/loop3") == 0 &&
		   strcmp(strmap_get(&back->options, "size"), "64M") == 0 && back->size == 1 << 30,
	   "with its attachments, options and size");
	static const char earlier[] =
		"{\"attachments\":[{\"device\":\"/dev/loop3\",\"done\":true,\"node\":\"node-1\"}],"
		"\"driver\":\"example/loop\",\"volume_id\":\"vx\",\"volume_name\":\"vx\"}";
	is_int(flex_record_from_json(earlier, strlen(earlier), &old), 0,
	       "a record an earlier version wrote");
	ok(old && old->n_attachments == 1 && old->attachments[0].attach,
	   "its attachments were made by attachable drivers: a detach is owed");
	is_int(flex_record_from_json("[1]", 3, &back), -EBADMSG, "not an object: -EBADMSG");
	ok(old && old->mkfs == NODE_MKFS_NONE && !*old->mkfs_uuid, "no mkfs mark: none");

	/* The mark of the mountdevice fallback's mkfs, as node-use.h writes it. */
	_cleanup_(flex_record_freep) FlexRecord *marked = NULL, *odd = NULL;
	rec->mkfs = NODE_MKFS_STARTED;
	flex_record_set(&rec->mkfs_fstype, "xfs");
	flex_record_set(&rec->mkfs_uuid, "0f6e1c1a-3b9d-4c55-9a4e-2d7f6a1b8c90");
	_cleanup_free_ char *with_mark = flex_record_to_json(rec);
	ok(with_mark && strstr(with_mark, "\"mkfs\":{\"fstype\":\"xfs\",\"state\":\"started\","
					  "\"uuid\":\"0f6e1c1a-3b9d-4c55-9a4e-2d7f6a1b8c90\"}"),
	   "a mkfs mark is written: %s", with_mark);
	is_int(flex_record_from_json(with_mark, strlen(with_mark), &marked), 0, "and read back");
	ok(marked && marked->mkfs == NODE_MKFS_STARTED &&
		   strcmp(marked->mkfs_uuid, "0f6e1c1a-3b9d-4c55-9a4e-2d7f6a1b8c90") == 0 &&
		   strcmp(marked->mkfs_fstype, "xfs") == 0,
	   "started, with its UUID and fstype");
	static const char strange[] = "{\"mkfs\":{\"state\":\"what\",\"uuid\":\"x\"},"
				      "\"volume_id\":\"vx\"}";
	is_int(flex_record_from_json(strange, strlen(strange), &odd), 0,
	       "a mark of no known state");
	ok(odd && odd->mkfs == NODE_MKFS_STARTED && !*odd->mkfs_uuid,
	   "stays a mark but proves no filesystem half made (no UUID)");

	flex_record_set(&rec->driver, "bad\xff");
	ok(!flex_record_to_json(rec), "a string that is not UTF-8 makes no record");
}

static void test_files(void)
{
	_cleanup_(flex_record_freep) FlexRecord *rec = sample("vx"), *got = NULL;
	_cleanup_free_ char *dir = flex_records_dir(pool);
	FlexRecords s, other;

	flex_records_init(&s, dir, "node-1");
	is_int(flex_record_save(&s, FLEX_RECORD_VOLUME, rec), 0, "save a controller record");
	ok(exists(VOLUMES_DIR "/08cf4407b570f203.json"),
	   "named by FNV-1a of the volume id, as earlier versions named it");
	flex_record_set(&rec->path, "/pods/t1");
	is_int(flex_record_save(&s, FLEX_RECORD_PUBLISHED, rec), 0, "save a published record");
	ok(exists("flex/nodes/node-1/published/00a7439f75ebe199.json"),
	   "under the node, named by the volume id and the target");
	is_int(flex_record_load(&s, FLEX_RECORD_PUBLISHED, "vx", "/pods/t1", &got), 0,
	       "loaded by its key");
	is_int(flex_record_load(&s, FLEX_RECORD_PUBLISHED, "vx", "/pods/t2", &got), -ENOENT,
	       "another target has no record");

	flex_records_init(&other, dir, "a/b");
	is_int(flex_record_save(&other, FLEX_RECORD_STAGED, rec), 0, "a node id that is no name");
	ok(exists("flex/nodes/node-e620c3190468cf61/staged/08cf4407b570f203.json"),
	   "gets a folder named by its hash");
	flex_records_done(&other);

	/* What a colliding volume id would find: another volume's record under its name. */
	_cleanup_(flex_record_freep) FlexRecord *vy = sample("vy");
	_cleanup_free_ char *json = flex_record_to_json(vy);
	write_at(VOLUMES_DIR "/08cf4407b570f203.json", json);
	is_int(flex_record_load(&s, FLEX_RECORD_VOLUME, "vx", NULL, &got), -ENOENT,
	       "a record of another volume under the name is not the volume's");
	is_int(flex_record_remove(&s, FLEX_RECORD_PUBLISHED, rec), 0, "remove");
	ok(!exists("flex/nodes/node-1/published/00a7439f75ebe199.json"), "the file is gone");
	is_int(flex_record_remove(&s, FLEX_RECORD_PUBLISHED, rec), 0, "removing twice is fine");
	flex_records_done(&s);
	remove_records();
}

static void test_claims(void)
{
	Backend *b = flex_new(NULL);
	_cleanup_free_ char *dir = flex_records_dir(pool);
	Strmap with = {}, without = {};
	FlexRecords s;

	strmap_set(&with, "flexvolume.driver", "example/loop");
	strmap_set(&without, "size", "1Gi");
	flex_records_init(&s, dir, "node-1");
	ok(b->ops->claims(b, "v1", &with), "a context naming flexvolume.driver: claimed");
	ok(!b->ops->claims(b, "v1", &without), "a context without: not claimed");
	ok(!b->ops->claims(b, "v1", NULL), "no context, no record: not claimed");

	_cleanup_(flex_record_freep) FlexRecord *rec = sample("v1");
	flex_record_set(&rec->path, "/pods/p1");
	(void)flex_record_save(&s, FLEX_RECORD_PUBLISHED, rec);
	ok(b->ops->claims(b, "v1", NULL), "no context: a published record claims it");
	ok(!b->ops->claims(b, "v2", NULL), "and only its own volume");
	ok(!b->ops->claims(b, "v1", &without), "a context says more than records");
	(void)flex_record_remove(&s, FLEX_RECORD_PUBLISHED, rec);
	(void)flex_record_save(&s, FLEX_RECORD_STAGED, rec);
	ok(b->ops->claims(b, "v1", NULL), "a staged record claims it");
	(void)flex_record_remove(&s, FLEX_RECORD_STAGED, rec);
	ok(!b->ops->claims(b, "v1", NULL), "gone with its records");
	write_at(VOLUMES_DIR "/08cf4407b570f203.json", "{damaged");
	ok(b->ops->claims(b, "vx", NULL), "a damaged file under the volume's name: claimed (the "
					  "operation reports it)");

	Backend *list[] = {flex_new(NULL), b, NULL};
	ok(backend_for_volume(list, "v1", &with) == b, "backend_for_volume: the one that claims");
	ok(backend_for_volume(list, "v9", NULL) == list[0], "else the default");
	list[0]->ops->free(list[0]);

	strmap_done(&with);
	strmap_done(&without);
	flex_records_done(&s);
	b->ops->free(b);
	remove_records();
}

static void test_check(void)
{
	_cleanup_free_ char *dir = flex_records_dir(pool);
	FlexRecordsReport rep;
	FlexRecords s;

	is_int(flex_records_check(dir, &rep), 0, "check: no records folder");
	ok(rep.records == 0 && rep.problems == 0 && !*rep.text, "nothing to report");
	flex_records_report_done(&rep);

	flex_records_init(&s, dir, "node-1");
	_cleanup_(flex_record_freep) FlexRecord *rec = sample("vx");
	rec->attachments = xnew0(FlexAttachment, 1);
	rec->attachments[0] = (FlexAttachment){xstrdup("node-1"), xstrdup(""), true, true};
	rec->n_attachments = 1;
	(void)flex_record_save(&s, FLEX_RECORD_VOLUME, rec);
	flex_record_set(&rec->path, pool); /* a staging path that exists */
	(void)flex_record_save(&s, FLEX_RECORD_STAGED, rec);
	_cleanup_(flex_record_freep) FlexRecord *grown = sample("vg");
	grown->size = 1 << 30;
	(void)flex_record_save(&s, FLEX_RECORD_VOLUME, grown);
	is_int(flex_records_check(dir, &rep), 0, "check: clean records");
	ok(rep.records == 3 && rep.problems == 0,
	   "3 records, no problem (one attached nowhere keeps the size an expansion set): %s",
	   rep.text);
	flex_records_report_done(&rep);

	/* What was undone but whose record stayed: reported as left behind. */
	_cleanup_(flex_record_freep) FlexRecord *idle = sample("vi");
	(void)flex_record_save(&s, FLEX_RECORD_VOLUME, idle);
	flex_record_set(&idle->path, "/nonexistent/staging/vi");
	(void)flex_record_save(&s, FLEX_RECORD_STAGED, idle);
	is_int(flex_records_check(dir, &rep), 0, "check: leftovers");
	ok(contains(rep.text, "volume vi: attached nowhere, no size to keep: left behind"),
	   "a controller record that owes nothing: %s", rep.text);
	ok(contains(rep.text, "volume vi: /nonexistent/staging/vi is gone: left behind"),
	   "a node record whose path is gone");
	is_int(rep.problems, 2, "2 problems");
	flex_records_report_done(&rep);
	/* Unstaged, but the mark of a mkfs killed half-way stays for the next stage. */
	idle->mkfs = NODE_MKFS_STARTED;
	flex_record_set(&idle->mkfs_uuid, "0f6e1c1a-3b9d-4c55-9a4e-2d7f6a1b8c90");
	(void)flex_record_save(&s, FLEX_RECORD_STAGED, idle);
	is_int(flex_records_check(dir, &rep), 0, "check: a record kept for its mkfs mark");
	ok(!contains(rep.text, "/nonexistent/staging/vi is gone") && rep.problems == 1,
	   "is no leftover: %s", rep.text);
	flex_records_report_done(&rep);
	(void)flex_record_remove(&s, FLEX_RECORD_STAGED, idle);
	(void)flex_record_remove(&s, FLEX_RECORD_VOLUME, idle);

	_cleanup_(flex_record_freep) FlexRecord *bad = sample("vz");
	flex_record_set(&bad->driver, "no driver");
	flex_record_set(&bad->path, "pods/relative");
	_cleanup_free_ char *json = flex_record_to_json(bad);
	write_at("flex/nodes/node-1/published/0000000000000001.json", json);
	write_at(VOLUMES_DIR "/0000000000000002.json", "not json");
	write_at(VOLUMES_DIR "/notes.txt", "x");
	write_at(VOLUMES_DIR "/.08cf4407b570f203.json.tmp-1234", "x");
	write_at("flex/nodes/bad node/staged/0000000000000003.json", "{}");
	write_at("flex/stray", "x");
	is_int(flex_records_check(dir, &rep), 0, "check: damaged records");
	ok(contains(rep.text, "flex/volumes/0000000000000002.json: damaged: not a JSON object"),
	   "a file that is no JSON object: %s", rep.text);
	ok(contains(rep.text, "flex/volumes/notes.txt: not a record"), "a file that is no record");
	ok(contains(rep.text, "flex/volumes/.08cf4407b570f203.json.tmp-1234: left by an "
			      "interrupted write"),
	   "a temporary left behind");
	ok(contains(rep.text, "flex/nodes/node-1/published/0000000000000001.json: the record of "
			      "volume vz under another name"),
	   "a record under another key's name");
	ok(contains(rep.text, "volume vz: driver 'no driver'"), "a driver name that is none");
	ok(contains(rep.text, "volume vz: path 'pods/relative' is not an absolute path"),
	   "a path that is not absolute");
	ok(contains(rep.text, "flex/nodes/bad node: not a node's folder"), "a stray node folder");
	ok(contains(rep.text, "flex/stray: not part of the records"), "a stray file");
	is_int(rep.problems, 8, "8 problems: %s", rep.text);
	is_int(rep.records, 4, "4 records read (3 good, 1 bad)");
	flex_records_report_done(&rep);
	flex_records_done(&s);
	remove_records();
}

/* ---- operations ---- */

static void test_errors(void)
{
	Backend *b = flex_new(NULL);
	_cleanup_free_ char *err = NULL;
	Strmap ctx = {};
	BackendAccess fs = {.fstype = "", .mode = "SINGLE_NODE_WRITER"};

	strmap_set(&ctx, "flexvolume.driver", "example/loop");
	_cleanup_free_ char *target = xasprintf("%s/pods-t", pool);
	BackendPublish pub = {
		.volume_id = "v1",
		.target_path = target,
		.access = fs,
		.group = (gid_t)-1,
		.volume_context = &ctx,
	};
	is_int(b->ops->publish(b, &pub, NULL, &err), -ENOEXEC,
	       "Flexvolume off: FAILED_PRECONDITION");
	ok(contains(err, "example/loop") && contains(err, "Flexvolume drivers are off"),
	   "naming the driver: %s", err);
	ok(!exists("pods-t") && !exists("flex/nodes/node-1/published"),
	   "a refused publish leaves nothing");

	pub.access.block = true;
	is_int(b->ops->publish(b, &pub, NULL, &err), -EINVAL, "raw block: INVALID_ARGUMENT");
	ok(contains(err, "not raw block devices"), "%s", err);
	pub.access.block = false;

	strmap_set(&ctx, "flexvolume.driver", "bad name");
	is_int(b->ops->publish(b, &pub, NULL, &err), -EINVAL, "a bad driver name");
	ok(contains(err, "volume_context[flexvolume.driver]"), "names the key: %s", err);

	_cleanup_free_ char *link = xasprintf("%s/link", pool);
	_cleanup_free_ char *through = xasprintf("%s/link/t", pool);
	(void)symlink("/etc", link);
	pub.target_path = through;
	is_int(b->ops->publish(b, &pub, NULL, &err), -EINVAL, "a target through a symlink");
	ok(contains(err, "target_path") && contains(err, "symlink"), "%s", err);

	BackendUnpublish up = {.volume_id = "v1", .target_path = target};
	is_int(b->ops->unpublish(b, &up, NULL, &err), 0, "unpublish with no record: done");
	up.target_path = "relative";
	is_int(b->ops->unpublish(b, &up, NULL, &err), -EINVAL, "unpublish checks its path");

	/* Unstage happens at the recorded path only. */
	_cleanup_free_ char *dir = flex_records_dir(pool);
	FlexRecords s;
	flex_records_init(&s, dir, "node-1");
	_cleanup_(flex_record_freep) FlexRecord *rec = sample("v1");
	flex_record_set(&rec->path, "/staging/v1");
	rec->device_mounted = true;
	(void)flex_record_save(&s, FLEX_RECORD_STAGED, rec);
	_cleanup_free_ char *elsewhere = xasprintf("%s/elsewhere", pool);
	BackendUnstage us = {.volume_id = "v1", .staging_path = elsewhere};
	is_int(b->ops->unstage(b, &us, NULL, &err), -ENOTEMPTY, "unstage elsewhere: refused");
	ok(contains(err, "staged at '/staging/v1'"), "%s", err);
	ok(exists("flex/nodes/node-1/staged/08cf0b07b5709128.json"), "the record stays");
	us.volume_id = "v2";
	is_int(b->ops->unstage(b, &us, NULL, &err), 0, "unstage with no record: done");

	BackendStatsRequest st = {.volume_id = "v9", .volume_path = elsewhere};
	BackendStats stats = {};
	is_int(b->ops->node_stats(b, &st, &stats, &err), -ENOENT, "stats of nothing: NOT_FOUND");

	BackendChange ch = {.volume_id = "v1", .new_size = 1 << 30};
	BackendChanged changed;
	is_int(b->ops->change_volume(b, &ch, &changed, &err), -ENOENT,
	       "expand without a ControllerPublish record: NOT_FOUND");
	ParamKV kv[] = {{"iops", "3000"}};
	BackendChange mod = {.volume_id = "v1", .params = kv, .n_params = 1};
	is_int(b->ops->change_volume(b, &mod, &changed, &err), -EINVAL, "modify: refused");
	ok(contains(err, "mutable_parameters") && contains(err, "not supported"), "%s", err);
	BackendDetach dt = {.volume_id = "v1", .node_id = "node-1"};
	BackendDetached gone = {};
	is_int(b->ops->detach(b, &dt, &gone, &err), 0, "detach with no record: done");
	ok(!gone.nodes, "nothing was detached");
	BackendVolume v = {};
	is_int(b->ops->get_volume(b, &(BackendRef){.id = "v1"}, &v, &err), -ENOENT,
	       "get without a ControllerPublish record: NOT_FOUND");
	ok(contains(err, "volume_id") && contains(err, "v1"), "%s", err);

	flex_records_done(&s);
	strmap_done(&ctx);
	b->ops->free(b);
	remove_records();
}

/* The arguments the record driver got last (after its own path), space-separated. */
static char *argv_of(const char *name)
{
	_cleanup_free_ char *p = xasprintf("%s/test~%s/.argv", tmpdir, name);
	_cleanup_fclose_ FILE *f = fopen(p, "re");
	char buf[4096];
	size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

	buf[len] = 0;
	for (size_t i = 0; i < len; i++)
		if (!buf[i])
			buf[i] = ' ';
	return xstrdup(strchr(buf, ' ') ? strchr(buf, ' ') + 1 : "");
}

static void test_controller(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "record");
	FlexRegistry *reg = flex_registry_new();
	FlexCapabilities caps = FLEX_CAPABILITIES_DEFAULT;
	flex_registry_publish(reg, flex_driver_new("test/record", "test~record", exe,
						   FLEX_DRIVER_LOADED, &caps, NULL));
	Backend *b = flex_new(reg);
	_cleanup_free_ char *err = NULL, *a1 = NULL, *a2 = NULL, *a3 = NULL, *a4 = NULL;
	Strmap ctx = {};
	BackendAttachment att = {};

	strmap_set(&ctx, "flexvolume.driver", "test/record");
	strmap_set(&ctx, "opt", "1");
	put("record", ".stdout", "{\"status\":\"Success\",\"device\":\"/dev/xvdf\"}");
	BackendAttach at = {
		.volume_id = "vx",
		.node_id = "node-1",
		.access = {.fstype = "ext4", .mode = "SINGLE_NODE_WRITER"},
		.volume_context = &ctx,
	};
	is_int(b->ops->attach(b, &at, &att, &err), 0, "attach");
	is_str(strmap_get(&att.publish_context, "devicePath"), "/dev/xvdf",
	       "the device attach named, in the publish context");
	ok(att.device && strcmp(att.device, "/dev/xvdf") == 0 && !att.existed,
	   "and for the log: a new attachment as /dev/xvdf");
	a1 = argv_of("record");
	ok(contains(a1, "attach {") && contains(a1, "\"opt\":\"1\"") && contains(a1, "} node-1"),
	   "attach <json> <node>: %s", a1);
	ok(exists(VOLUMES_DIR "/08cf4407b570f203.json"), "the attachment is recorded");
	ok(b->ops->claims(b, "vx", NULL), "and claims the volume for calls without a context");
	backend_attachment_done(&att);

	put("record", ".stdout",
	    "{\"status\":\"Success\",\"device\":\"/dev/xvdf\",\"attached\":true}");
	is_int(b->ops->attach(b, &at, &att, &err), 0, "attach again");
	a2 = argv_of("record");
	ok(contains(a2, "isattached {"), "a retry asks isattached: %s", a2);
	is_str(strmap_get(&att.publish_context, "devicePath"), "/dev/xvdf", "same device");
	ok(att.existed, "attached already: nothing new to log");
	backend_attachment_done(&att);
	put("record", ".stdout", "{\"status\":\"Success\",\"device\":\"/dev/xvdg\"}");
	is_int(b->ops->attach(b, &at, &att, &err), 0, "attach once more");
	_cleanup_free_ char *a5 = argv_of("record");
	ok(contains(a5, "attach {") && !contains(a5, "isattached"),
	   "isattached without \"attached\" is false, as Kubernetes reads it: attached again");
	is_str(strmap_get(&att.publish_context, "devicePath"), "/dev/xvdg", "the new device");
	backend_attachment_done(&att);

	/* the access mode decides whether another node may attach it too */
	BackendAttach other = at;
	other.node_id = "node-2";
	free(err);
	err = NULL;
	is_int(b->ops->attach(b, &other, &att, &err), -ENOTEMPTY,
	       "SINGLE_NODE_WRITER, another node: -ENOTEMPTY (FAILED_PRECONDITION)");
	is_str(err,
	       "volume vx is published to node node-1 and its access mode SINGLE_NODE_WRITER "
	       "allows one node only",
	       "the message names the node and the mode");
	other.access.mode = "MULTI_NODE_MULTI_WRITER";
	other.access.multi_node = true;
	is_int(b->ops->attach(b, &other, &att, &err), 0, "MULTI_NODE_MULTI_WRITER: node-2 too");
	backend_attachment_done(&att);
	BackendDetach dt2 = {.volume_id = "vx", .node_id = "node-2"};
	BackendDetached dd = {};
	is_int(b->ops->detach(b, &dt2, &dd, &err), 0, "detach from node-2");
	backend_detached_done(&dd);

	put("record", ".stdout", NULL);
	BackendChange ch = {.volume_id = "vx", .new_size = 2ULL << 30};
	BackendChanged changed = {};
	is_int(b->ops->change_volume(b, &ch, &changed, &err), 0, "expand");
	a3 = argv_of("record");
	ok(contains(a3, "expandvolume {") &&
		   contains(a3, "} /var/lib/kubelet/plugins/kubernetes.io/flexvolume/test/record/"
				"mounts/vx 2147483648 0 "),
	   "expandvolume <json> <the kubelet's device mount path> <new> <old: unknown>: %s", a3);
	ok(changed.size == 2ULL << 30 && changed.node_expansion_required,
	   "the new size; the node grows the filesystem (requiresFSResize)");
	BackendVolume v = {};
	is_int(b->ops->get_volume(b, &(BackendRef){.id = "vx"}, &v, &err), 0, "get");
	ok(v.size == 2ULL << 30 && strcmp(v.id, "vx") == 0, "its size as expanded: %llu",
	   (unsigned long long)v.size);
	ok(strv_length(v.published_nodes) == 1 && strcmp(v.published_nodes[0], "node-1") == 0,
	   "published to node-1");
	is_str(strmap_get(&v.context, "flexvolume.driver"), "test/record", "its driver");
	is_str(strmap_get(&v.context, "opt"), "1", "its options");
	backend_volume_done(&v);

	put("record", ".stdout", "{\"status\":\"Failure\",\"message\":\"pool is full\"}");
	ch.new_size = 3ULL << 30;
	is_int(b->ops->change_volume(b, &ch, &changed, &err), -EIO, "a driver failure: INTERNAL");
	ok(contains(err, "pool is full") && contains(err, "vx"), "with its message: %s", err);
	put("record", ".stdout", NULL);

	BackendDeleted del = {};
	BackendRef ref = {.id = "vx"};
	is_int(b->ops->delete_volume(b, &ref, &del, &err), -ENOTEMPTY,
	       "delete while attached: FAILED_PRECONDITION");
	ok(contains(err, "node-1") && contains(err, "unpublish"), "%s", err);

	BackendDetach dt = {.volume_id = "vx", .node_id = "node-1"};
	BackendDetached gone = {};
	is_int(b->ops->detach(b, &dt, &gone, &err), 0, "detach");
	a4 = argv_of("record");
	is_str(a4, "detach vx node-1 ", "detach <volumeName> <node>");
	ok(strv_length(gone.nodes) == 1 && strcmp(gone.nodes[0], "node-1") == 0 &&
		   strcmp(gone.devices[0], "/dev/xvdg") == 0,
	   "what was detached, for the log");
	backend_detached_done(&gone);
	is_int(b->ops->get_volume(b, &(BackendRef){.id = "vx"}, &v, &err), 0, "get after detach");
	ok(!v.published_nodes && v.size == 2ULL << 30,
	   "published nowhere: the record stays for the size an expansion set");
	backend_volume_done(&v);
	is_int(b->ops->delete_volume(b, &ref, &del, &err), 0, "delete");
	ok(del.found && strcmp(del.name, "vx") == 0, "it had a record");
	backend_deleted_done(&del);
	ok(!exists(VOLUMES_DIR "/08cf4407b570f203.json"), "the record is gone");
	ok(!b->ops->claims(b, "vx", NULL), "so the volume is no longer claimed");
	is_int(b->ops->delete_volume(b, &ref, &del, &err), 0, "delete again: done");
	ok(!del.found, "nothing was there");

	strmap_done(&ctx);
	b->ops->free(b);
	flex_registry_free(reg);
	remove_records();
}

static bool has_record(const char *id)
{
	_cleanup_free_ char *dir = flex_records_dir(pool);
	FlexRecords s;
	FlexRecord *rec = NULL;

	flex_records_init(&s, dir, "node-1");
	int r = flex_record_load(&s, FLEX_RECORD_VOLUME, id, NULL, &rec);
	flex_record_free(rec);
	flex_records_done(&s);
	return r == 0;
}

/* ControllerPublish and ControllerUnpublish leave no record behind, for drivers that attach and
 * for those that do not (nothing is called for these); getvolumename goes before attach and
 * detach, as Kubernetes calls it, and its failure stops them. */
static void test_controller_records(void)
{
	_cleanup_free_ char *exe = install("tests/flex-drivers", "record");
	_cleanup_free_ char *argv_file = xasprintf("%s/test~record/.argv", tmpdir);
	FlexRegistry *reg = flex_registry_new();
	FlexCapabilities caps = FLEX_CAPABILITIES_DEFAULT, plain = FLEX_CAPABILITIES_DEFAULT;
	plain.attach = false;
	flex_registry_publish(reg, flex_driver_new("test/record", "test~record", exe,
						   FLEX_DRIVER_LOADED, &caps, NULL));
	flex_registry_publish(reg, flex_driver_new("test/plain", "test~record", exe,
						   FLEX_DRIVER_LOADED, &plain, NULL));
	Backend *b = flex_new(reg);
	_cleanup_free_ char *err = NULL;
	Strmap ctx = {};
	BackendAttachment att = {};
	BackendDetached gone = {};
	BackendVolume v = {};

	strmap_set(&ctx, "flexvolume.driver", "test/plain");
	BackendAttach at = {
		.volume_id = "vp",
		.node_id = "node-1",
		.access = {.fstype = "ext4", .mode = "SINGLE_NODE_WRITER"},
		.volume_context = &ctx,
	};
	BackendDetach dt = {.volume_id = "vp", .node_id = "node-1"};
	unlink(argv_file);
	is_int(b->ops->attach(b, &at, &att, &err), 0, "attach, a driver that does not attach");
	ok(access(argv_file, F_OK) < 0 && !att.publish_context.n, "nothing called, no device");
	backend_attachment_done(&att);
	is_int(b->ops->get_volume(b, &(BackendRef){.id = "vp"}, &v, &err), 0, "get");
	ok(strv_length(v.published_nodes) == 1, "published to node-1: recorded");
	backend_volume_done(&v);
	is_int(b->ops->detach(b, &dt, &gone, &err), 0, "detach");
	ok(access(argv_file, F_OK) < 0, "nothing called");
	ok(strv_length(gone.nodes) == 1, "detached from node-1");
	backend_detached_done(&gone);
	ok(!has_record("vp"), "no record left");

	strmap_set(&ctx, "flexvolume.driver", "test/record");
	put("record", ".stdout",
	    "{\"status\":\"Failure\",\"message\":\"no pool named in the options\"}");
	is_int(b->ops->attach(b, &at, &att, &err), -EIO, "getvolumename fails: attach fails");
	_cleanup_free_ char *a1 = argv_of("record");
	ok(contains(a1, "getvolumename {") && contains(err, "no pool named"),
	   "attach never ran: %s; %s", a1, err);
	ok(!has_record("vp"), "nothing recorded");

	put("record", ".stdout", "{\"status\":\"Success\",\"device\":\"/dev/xvdh\"}");
	is_int(b->ops->attach(b, &at, &att, &err), 0, "attach");
	backend_attachment_done(&att);
	put("record", ".stdout", "{\"status\":\"Failure\",\"message\":\"no pool named\"}");
	is_int(b->ops->detach(b, &dt, &gone, &err), -EIO, "getvolumename fails: detach fails");
	ok(has_record("vp"), "the attachment stays recorded: a detach is owed");
	put("record", ".stdout", NULL);
	is_int(b->ops->detach(b, &dt, &gone, &err), 0, "detach");
	_cleanup_free_ char *a2 = argv_of("record");
	is_str(a2, "detach vp node-1 ", "detach <volumeName> <node>");
	backend_detached_done(&gone);
	ok(!has_record("vp"), "no record left after the last detach");

	strmap_done(&ctx);
	b->ops->free(b);
	flex_registry_free(reg);
	remove_records();
}

int main(void)
{
	drivers_init("flex-backend");
	pool = xasprintf("%s/pool", tmpdir);
	if (mkdir(pool, 0700) < 0) {
		printf("Bail out! mkdir %s\n", pool);
		return 1;
	}
	test_format();
	test_files();
	test_claims();
	test_check();
	test_errors();
	test_controller();
	test_controller_records();
	free(pool);
	drivers_done();
	return tap_done();
}
