/* SPDX-License-Identifier: Apache-2.0 */
/* The Flexvolume backend's records (flex-records.h): their JSON, their files, and their check. */
#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fileio.h"
#include "flex-records.h"
#include "hash-util.h"
#include "pinned-path.h"
#include "registry.h"

/* ---- the record ---- */

FlexRecord *flex_record_free(FlexRecord *rec)
{
	if (!rec)
		return NULL;
	free(rec->volume_id);
	free(rec->driver);
	free(rec->fs_type);
	free(rec->volume_name);
	strmap_done(&rec->options);
	free(rec->path);
	free(rec->staging_path);
	free(rec->device);
	free(rec->mkfs_fstype);
	free(rec->mkfs_uuid);
	for (size_t i = 0; i < rec->n_attachments; i++) {
		free(rec->attachments[i].node);
		free(rec->attachments[i].device);
	}
	free(rec->attachments);
	free(rec);
	return NULL;
}

FlexRecord *flex_record_new(const char *volume_id)
{
	FlexRecord *rec = xnew0(FlexRecord, 1);
	rec->volume_id = xstrdup(volume_id);
	rec->driver = xstrdup("");
	rec->fs_type = xstrdup("");
	rec->volume_name = xstrdup(volume_id);
	rec->path = xstrdup("");
	rec->staging_path = xstrdup("");
	rec->device = xstrdup("");
	rec->mkfs_fstype = xstrdup("");
	rec->mkfs_uuid = xstrdup("");
	return rec;
}

void flex_record_set(char **field, const char *value)
{
	free(*field);
	*field = xstrdup(value ?: "");
}

static json_t *json_str(const char *s, bool *bad)
{
	json_t *j = json_string(s ?: "");
	if (!j) { /* not UTF-8: the record could not be read back */
		*bad = true;
		j = json_string("");
	}
	return j;
}

static json_t *attachments_to_json(const FlexRecord *rec, bool *bad)
{
	json_t *atts = json_array();

	for (size_t i = 0; i < rec->n_attachments; i++) {
		json_t *a = json_object();
		json_object_set_new(a, "node", json_str(rec->attachments[i].node, bad));
		json_object_set_new(a, "device", json_str(rec->attachments[i].device, bad));
		json_object_set_new(a, "done", json_boolean(rec->attachments[i].done));
		json_object_set_new(a, "attach", json_boolean(rec->attachments[i].attach));
		json_array_append_new(atts, a);
	}
	return atts;
}

char *flex_record_to_json(const FlexRecord *rec)
{
	json_t *o = json_object(), *opts = json_object();
	bool bad = false;

	json_object_set_new(o, "volume_id", json_str(rec->volume_id, &bad));
	json_object_set_new(o, "driver", json_str(rec->driver, &bad));
	json_object_set_new(o, "fs_type", json_str(rec->fs_type, &bad));
	json_object_set_new(o, "read_only", json_boolean(rec->read_only));
	json_object_set_new(o, "volume_name", json_str(rec->volume_name, &bad));
	for (size_t i = 0; i < rec->options.n; i++)
		json_object_set_new(opts, rec->options.keys[i],
				    json_str(rec->options.values[i], &bad));
	json_object_set_new(o, "options", opts);
	json_object_set_new(o, "path", json_str(rec->path, &bad));
	json_object_set_new(o, "staging_path", json_str(rec->staging_path, &bad));
	json_object_set_new(o, "device", json_str(rec->device, &bad));
	json_object_set_new(o, "device_mounted", json_boolean(rec->device_mounted));
	json_object_set_new(o, "size", json_integer((json_int_t)rec->size));
	if (rec->mkfs != NODE_MKFS_NONE) {
		json_t *m = json_object();
		json_object_set_new(m, "state",
				    json_string(rec->mkfs == NODE_MKFS_DONE ? "done" : "started"));
		json_object_set_new(m, "fstype", json_str(rec->mkfs_fstype, &bad));
		json_object_set_new(m, "uuid", json_str(rec->mkfs_uuid, &bad));
		json_object_set_new(o, "mkfs", m);
	}
	json_object_set_new(o, "attachments", attachments_to_json(rec, &bad));
	char *s = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

static const char *json_get_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : "";
}

/* The mkfs mark; one that is not whole reads as "started" with no UUID: never proof of a
 * half-made filesystem, never forgotten either. */
static void mkfs_from_json(json_t *m, FlexRecord *rec)
{
	if (!json_is_object(m))
		return;
	const char *state = json_get_str(m, "state");
	rec->mkfs = strcmp(state, "done") == 0 ? NODE_MKFS_DONE : NODE_MKFS_STARTED;
	flex_record_set(&rec->mkfs_fstype, json_get_str(m, "fstype"));
	flex_record_set(&rec->mkfs_uuid, rec->mkfs == NODE_MKFS_STARTED && strcmp(state, "started")
						 ? ""
						 : json_get_str(m, "uuid"));
}

static void attachments_from_json(json_t *atts, FlexRecord *rec)
{
	json_t *v;
	size_t i;

	rec->attachments = xnew0(FlexAttachment, json_array_size(atts) + 1);
	json_array_foreach (atts, i, v) {
		FlexAttachment *a = &rec->attachments[rec->n_attachments++];
		a->node = xstrdup(json_get_str(v, "node"));
		a->device = xstrdup(json_get_str(v, "device"));
		a->done = json_is_true(json_object_get(v, "done"));
		/* Records from before this key held attachable drivers' attachments only. */
		a->attach = !json_is_false(json_object_get(v, "attach"));
	}
}

int flex_record_from_json(const char *text, size_t len, FlexRecord **ret)
{
	json_t *o = json_loadb(text, len, 0, NULL), *v;
	const char *key;

	if (!json_is_object(o)) {
		json_decref(o);
		return -EBADMSG;
	}
	FlexRecord *rec = flex_record_new(json_get_str(o, "volume_id"));
	flex_record_set(&rec->driver, json_get_str(o, "driver"));
	flex_record_set(&rec->fs_type, json_get_str(o, "fs_type"));
	rec->read_only = json_is_true(json_object_get(o, "read_only"));
	flex_record_set(&rec->volume_name, json_get_str(o, "volume_name"));
	json_object_foreach (json_object_get(o, "options"), key, v)
		if (json_is_string(v))
			strmap_set(&rec->options, key, json_string_value(v));
	flex_record_set(&rec->path, json_get_str(o, "path"));
	flex_record_set(&rec->staging_path, json_get_str(o, "staging_path"));
	flex_record_set(&rec->device, json_get_str(o, "device"));
	rec->device_mounted = json_is_true(json_object_get(o, "device_mounted"));
	v = json_object_get(o, "size");
	rec->size = json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
	attachments_from_json(json_object_get(o, "attachments"), rec);
	mkfs_from_json(json_object_get(o, "mkfs"), rec);
	json_decref(o);
	*ret = rec;
	return 0;
}

/* ---- where records live ---- */

/* FNV-1a, 64 bits: record names only; a record holds its full key and is checked on load. */
static uint64_t key_hash(const char *a, const char *b)
{
	uint64_t h = fnv1a64_string(a, 0);
	if (b) {
		h = fnv1a64_update(h, "\xff", 1); /* never in UTF-8: a separator */
		h = fnv1a64_update(h, b, strlen(b));
	}
	return h;
}

static bool node_name_plain(const char *node)
{
	bool plain = *node && *node != '.' && strlen(node) <= 128;
	for (const char *p = node; plain && *p; p++)
		plain = isalnum((unsigned char)*p) || strchr("._-", *p);
	return plain;
}

/* The node's record folder: its id when that is a plain name, else a hash of it. */
static char *node_dir_name(const char *node)
{
	return node_name_plain(node)
		       ? xstrdup(node)
		       : xasprintf("node-%016llx", (unsigned long long)key_hash(node, NULL));
}

char *flex_records_dir(const char *pool_path)
{
	return xasprintf("%s/" FLEX_RECORDS_FOLDER, pool_path);
}

void flex_records_init(FlexRecords *s, const char *dir, const char *node_id)
{
	*s = (FlexRecords){.dir = xstrdup(dir), .node = node_dir_name(node_id ?: "")};
}

void flex_records_done(FlexRecords *s)
{
	free(s->dir);
	free(s->node);
	*s = (FlexRecords){};
}

static int openat_dir(int parent, const char *name, bool create, int *ret_fd)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
			return negative_errno();
		fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return negative_errno();
	*ret_fd = fd;
	return 0;
}

/* Opens (making it when create) the folder of a kind of record. -ENOENT when absent. */
static int record_dir(const FlexRecords *s, FlexRecordKind k, bool create, int *ret_fd)
{
	const char *parts[4];
	size_t n = 0;

	if (k == FLEX_RECORD_VOLUME)
		parts[n++] = "volumes";
	else {
		parts[n++] = "nodes";
		parts[n++] = s->node;
		parts[n++] = k == FLEX_RECORD_STAGED ? "staged" : "published";
	}
	int fd;
	int r = openat_dir(AT_FDCWD, s->dir, create, &fd);
	for (size_t i = 0; r >= 0 && i < n; i++) {
		int next;
		r = openat_dir(fd, parts[i], create, &next);
		close(fd);
		fd = next;
	}
	if (r < 0)
		return r;
	*ret_fd = fd;
	return 0;
}

static void record_file_name(FlexRecordKind k, const char *volume_id, const char *path,
			     char ret[static 32])
{
	snprintf(ret, 32, "%016llx.json",
		 (unsigned long long)key_hash(volume_id, k == FLEX_RECORD_PUBLISHED ? path : NULL));
}

static int record_read(int dir, const char *name, FlexRecord **ret)
{
	_cleanup_free_ char *text = NULL;
	size_t len;

	int r = read_file_at(dir, name, 256 * 1024, &text, &len);
	return r < 0 ? r : flex_record_from_json(text, len, ret);
}

int flex_record_load(const FlexRecords *s, FlexRecordKind k, const char *volume_id,
		     const char *path, FlexRecord **ret)
{
	_cleanup_close_ int dir = -EBADF;
	FlexRecord *rec;
	char name[32];

	int r = record_dir(s, k, false, &dir);
	if (r < 0)
		return r;
	record_file_name(k, volume_id, path, name);
	if ((r = record_read(dir, name, &rec)) < 0)
		return r;
	/* A hash collision is another volume's record: not ours. */
	if (strcmp(rec->volume_id, volume_id) != 0 ||
	    (k == FLEX_RECORD_PUBLISHED && strcmp(rec->path, path) != 0)) {
		flex_record_free(rec);
		return -ENOENT;
	}
	*ret = rec;
	return 0;
}

int flex_record_save(const FlexRecords *s, FlexRecordKind k, const FlexRecord *rec)
{
	_cleanup_close_ int dir = -EBADF;
	_cleanup_free_ char *text = flex_record_to_json(rec);
	char name[32];

	if (!text)
		return -EINVAL;
	int r = record_dir(s, k, true, &dir);
	if (r < 0)
		return r;
	record_file_name(k, rec->volume_id, rec->path, name);
	return write_file_atomic_at(dir, name, text, strlen(text), 0600);
}

int flex_record_remove(const FlexRecords *s, FlexRecordKind k, const FlexRecord *rec)
{
	_cleanup_close_ int dir = -EBADF;
	char name[32];

	int r = record_dir(s, k, false, &dir);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	record_file_name(k, rec->volume_id, rec->path, name);
	if (unlinkat(dir, name, 0) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	return fsync_dir(dir);
}

/* A listing of the directory open as fd, on a stream of its own (a dup would share the fd's
 * offset). */
static DIR *list_open(int fd)
{
	int own = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = own < 0 ? NULL : fdopendir(own);
	if (!d && own >= 0)
		close(own);
	return d;
}

static bool is_entry(const struct dirent *de)
{
	return strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
}

/* Published records are named by (id, target): the volume's are found by reading them all, a
 * handful on a node. */
static bool published_know(const FlexRecords *s, const char *volume_id)
{
	_cleanup_close_ int dir = -EBADF;

	if (record_dir(s, FLEX_RECORD_PUBLISHED, false, &dir) < 0)
		return false;
	_cleanup_closedir_ DIR *d = list_open(dir);
	struct dirent *de;
	bool found = false;
	while (d && !found && (de = readdir(d))) {
		_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
		if (*de->d_name != '.' && record_read(dir, de->d_name, &rec) >= 0)
			found = strcmp(rec->volume_id, volume_id) == 0;
	}
	return found;
}

bool flex_records_know(const FlexRecords *s, const char *volume_id)
{
	static const FlexRecordKind by_id[] = {FLEX_RECORD_VOLUME, FLEX_RECORD_STAGED};

	/* No records at all (a daemon that never served a Flexvolume): one look, not three. */
	if (faccessat(AT_FDCWD, s->dir, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
		return false;
	for (size_t i = 0; i < ELEMENTSOF(by_id); i++) {
		FlexRecord *rec = NULL;
		int r = flex_record_load(s, by_id[i], volume_id, NULL, &rec);
		flex_record_free(rec);
		if (r >= 0 || r == -EBADMSG)
			return true;
	}
	return published_know(s, volume_id);
}

int64_t flex_records_count(const FlexRecords *s, FlexRecordKind k)
{
	_cleanup_close_ int dir = -EBADF;
	int r = record_dir(s, k, false, &dir);

	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return -1;
	_cleanup_closedir_ DIR *d = list_open(dir);
	struct dirent *de;
	int64_t n = 0;
	while (d && (de = readdir(d))) {
		size_t len = strlen(de->d_name);
		n += *de->d_name != '.' && len > 5 && strcmp(de->d_name + len - 5, ".json") == 0;
	}
	return d ? n : -1;
}

/* ---- the check ---- */

typedef struct Checker {
	const char *top; /* the folder's name, for the messages */
	FlexRecordsReport *report;
	FILE *out;
} Checker;

static void problem(Checker *c, const char *fmt, ...) _printf_(2, 3);
static void problem(Checker *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(c->out, "%s/", c->top);
	va_start(ap, fmt);
	vfprintf(c->out, fmt, ap);
	va_end(ap);
	fputc('\n', c->out);
	c->report->problems++;
}

static bool record_name_valid(const char *name)
{
	size_t n = strspn(name, "0123456789abcdef");
	return n == 16 && strcmp(name + n, ".json") == 0;
}

/* A record that owes nothing: the controller's with no attachment and no size to keep, a
 * node's whose path is gone (what it did was undone, its removal was not) and that keeps no
 * "started" mark of a mkfs (which the next stage needs). */
static void check_leftover(Checker *c, const char *where, FlexRecordKind k, const FlexRecord *rec,
			   const char *name)
{
	struct stat st;

	if (k == FLEX_RECORD_VOLUME && rec->n_attachments == 0 && rec->size == 0)
		problem(c,
			"%s/%s: volume %s: attached nowhere, no size to keep: left behind "
			"(safe to remove)",
			where, name, rec->volume_id);
	else if (k != FLEX_RECORD_VOLUME && rec->mkfs != NODE_MKFS_STARTED && *rec->path == '/' &&
		 lstat(rec->path, &st) < 0 && errno == ENOENT)
		problem(c, "%s/%s: volume %s: %s is gone: left behind (safe to remove)", where,
			name, rec->volume_id, rec->path);
}

/* What a record says of itself against the file it is in. */
static void check_record(Checker *c, const char *where, FlexRecordKind k, const FlexRecord *rec,
			 const char *name)
{
	_cleanup_free_ char *why = NULL;
	const char *path_why;
	char expect[32];

	if (!*rec->volume_id) {
		problem(c, "%s/%s: names no volume", where, name);
		return;
	}
	record_file_name(k, rec->volume_id, rec->path, expect);
	if (strcmp(expect, name) != 0)
		problem(c, "%s/%s: the record of volume %s under another name (%s): never found",
			where, name, rec->volume_id, expect);
	if (flex_driver_name_validate(rec->driver, &why) < 0)
		problem(c, "%s/%s: volume %s: driver '%s': %s", where, name, rec->volume_id,
			rec->driver, why);
	if (k != FLEX_RECORD_VOLUME && request_path_check(rec->path, &path_why) < 0)
		problem(c, "%s/%s: volume %s: path '%s' is %s", where, name, rec->volume_id,
			rec->path, path_why);
	for (size_t i = 0; i < rec->n_attachments; i++)
		if (!*rec->attachments[i].node)
			problem(c, "%s/%s: volume %s: an attachment names no node", where, name,
				rec->volume_id);
	check_leftover(c, where, k, rec, name);
	c->report->records++;
}

static void check_file(Checker *c, int dir, const char *where, FlexRecordKind k, const char *name)
{
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;

	if (*name == '.' && strstr(name, ".tmp-")) {
		problem(c, "%s/%s: left by an interrupted write: safe to remove", where, name);
		return;
	}
	if (!record_name_valid(name)) {
		problem(c, "%s/%s: not a record (left as it is)", where, name);
		return;
	}
	int r = record_read(dir, name, &rec);
	if (r == -EBADMSG)
		problem(c, "%s/%s: damaged: not a JSON object", where, name);
	else if (r < 0)
		problem(c, "%s/%s: unreadable: %s", where, name, strerror(-r));
	else
		check_record(c, where, k, rec, name);
}

/* A folder of records of one kind: where is its path below the top. */
static void check_records(Checker *c, int parent, const char *where, FlexRecordKind k)
{
	_cleanup_close_ int dir = -EBADF;
	const char *base = strrchr(where, '/') ? strrchr(where, '/') + 1 : where;

	int r = openat_dir(parent, base, false, &dir);
	if (r < 0) {
		problem(c, "%s: not a readable folder: %s", where, strerror(-r));
		return;
	}
	_cleanup_closedir_ DIR *d = list_open(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (is_entry(de))
			check_file(c, dir, where, k, de->d_name);
}

static void check_node(Checker *c, int nodes, const char *node)
{
	_cleanup_close_ int dir = -EBADF;
	bool hashed = strncmp(node, "node-", 5) == 0 && strlen(node) == 21 &&
		      strspn(node + 5, "0123456789abcdef") == 16;

	if (!node_name_plain(node) && !hashed) {
		problem(c, "nodes/%s: not a node's folder (left as it is)", node);
		return;
	}
	int r = openat_dir(nodes, node, false, &dir);
	if (r < 0) {
		problem(c, "nodes/%s: not a readable folder: %s", node, strerror(-r));
		return;
	}
	_cleanup_closedir_ DIR *d = list_open(dir);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		_cleanup_free_ char *where = xasprintf("nodes/%s/%s", node, de->d_name);
		if (strcmp(de->d_name, "staged") == 0)
			check_records(c, dir, where, FLEX_RECORD_STAGED);
		else if (strcmp(de->d_name, "published") == 0)
			check_records(c, dir, where, FLEX_RECORD_PUBLISHED);
		else if (is_entry(de))
			problem(c, "%s: not part of the records (left as it is)", where);
	}
}

static void check_nodes(Checker *c, int top)
{
	_cleanup_close_ int dir = -EBADF;

	int r = openat_dir(top, "nodes", false, &dir);
	if (r < 0) {
		problem(c, "nodes: not a readable folder: %s", strerror(-r));
		return;
	}
	_cleanup_closedir_ DIR *d = list_open(dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (is_entry(de))
			check_node(c, dir, de->d_name);
}

int flex_records_check(const char *dir, FlexRecordsReport *ret)
{
	FlexRecordsReport report = {};
	_cleanup_free_ char *top = NULL;
	size_t len = 0;
	int fd;

	int r = openat_dir(AT_FDCWD, dir, false, &fd);
	if (r == -ENOENT) {
		*ret = (FlexRecordsReport){.text = xstrdup("")};
		return 0;
	}
	if (r < 0)
		return r;
	_cleanup_close_ int top_fd = fd;
	top = xstrdup(strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir);
	Checker c = {.top = top, .report = &report, .out = open_memstream(&report.text, &len)};
	if (!c.out)
		return -ENOMEM;
	_cleanup_closedir_ DIR *d = list_open(top_fd);
	struct dirent *de;
	while (d && (de = readdir(d))) {
		if (strcmp(de->d_name, "volumes") == 0)
			check_records(&c, top_fd, "volumes", FLEX_RECORD_VOLUME);
		else if (strcmp(de->d_name, "nodes") == 0)
			check_nodes(&c, top_fd);
		else if (is_entry(de))
			problem(&c, "%s: not part of the records (left as it is)", de->d_name);
	}
	fclose(c.out);
	*ret = report;
	return 0;
}

void flex_records_report_done(FlexRecordsReport *r)
{
	free(r->text);
	*r = (FlexRecordsReport){};
}
