/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "alloc.h"
#include "fileio.h"
#include "log.h"
#include "meta-json.h"
#include "node-use.h"
#include "pinned-path.h"

#define USE_FORMAT 1
#define USE_MAX (1024 * 1024)

void node_use_done(NodeUse *u)
{
	if (!u)
		return;
	free(u->node);
	free(u->staging.path);
	free(u->fstype);
	free(u->device);
	for (size_t i = 0; i < u->n_targets; i++)
		free(u->targets[i].path);
	free(u->targets);
	free(u->mkfs_fstype);
	free(u->mkfs_uuid);
	*u = (NodeUse){};
}

void node_use_set_mkfs(NodeUse *u, NodeMkfs state, const char *fstype, const char *uuid)
{
	char *f = state != NODE_MKFS_NONE ? xstrdup(fstype ?: "") : NULL;
	char *id = state != NODE_MKFS_NONE ? xstrdup(uuid ?: "") : NULL;

	free(u->mkfs_fstype);
	free(u->mkfs_uuid);
	u->mkfs = state;
	u->mkfs_fstype = f;
	u->mkfs_uuid = id;
}

/* Only the mkfs mark of u stays: what a record of an earlier boot still says. */
static void keep_mkfs_only(NodeUse *u)
{
	NodeUse kept = {
		.mkfs = u->mkfs,
		.mkfs_fstype = TAKE_PTR(u->mkfs_fstype),
		.mkfs_uuid = TAKE_PTR(u->mkfs_uuid),
	};
	node_use_done(u);
	*u = kept;
}

bool node_use_empty(const NodeUse *u)
{
	return !u->staging.path && u->n_targets == 0;
}

NodeTarget *node_use_target(const NodeUse *u, const char *path)
{
	for (size_t i = 0; i < u->n_targets; i++)
		if (strcmp(u->targets[i].path, path) == 0)
			return &u->targets[i];
	return NULL;
}

void node_use_remove_target(NodeUse *u, const char *path)
{
	NodeTarget *t = node_use_target(u, path);
	if (!t)
		return;
	free(t->path);
	*t = u->targets[--u->n_targets];
}

void node_use_add_target(NodeUse *u, const NodeTarget *t)
{
	node_use_remove_target(u, t->path);
	u->targets = xrealloc(u->targets, (u->n_targets + 1) * sizeof(NodeTarget));
	u->targets[u->n_targets] = *t;
	u->targets[u->n_targets++].path = xstrdup(t->path);
}

/* ---- JSON ---- */

static json_t *target_to_json(const NodeTarget *t)
{
	json_t *o = json_object();
	json_object_set_new(o, "path", json_string(t->path));
	json_object_set_new(o, "created", json_boolean(t->created));
	json_object_set_new(o, "dev", json_integer((json_int_t)t->dev));
	json_object_set_new(o, "ino", json_integer((json_int_t)t->ino));
	return o;
}

static int target_from_json(json_t *o, NodeTarget *ret)
{
	const char *path = meta_json_string(o, "path");
	json_t *created = json_object_get(o, "created");
	uint64_t dev, ino;

	if (!path || !json_is_boolean(created) || meta_json_u64(o, "dev", &dev) < 0 ||
	    meta_json_u64(o, "ino", &ino) < 0)
		return -EBADMSG;
	*ret = (NodeTarget){
		.path = xstrdup(path),
		.created = json_is_true(created),
		.dev = dev,
		.ino = ino,
	};
	return 0;
}

char *node_use_to_json(const NodeUse *u, const char *boot_id, size_t *ret_len)
{
	json_t *o = json_object(), *targets = json_array();

	json_object_set_new(o, "format", json_integer(USE_FORMAT));
	json_object_set_new(o, "boot_id", json_string(boot_id));
	json_object_set_new(o, "node", json_string(u->node ?: ""));
	if (u->staging.path) {
		json_t *s = target_to_json(&u->staging);
		json_object_set_new(s, "block", json_boolean(u->staged_block));
		json_object_set_new(s, "fstype", json_string(u->fstype ?: ""));
		if (u->device)
			json_object_set_new(s, "device", json_string(u->device));
		json_object_set_new(o, "staging", s);
	}
	for (size_t i = 0; i < u->n_targets; i++)
		json_array_append_new(targets, target_to_json(&u->targets[i]));
	json_object_set_new(o, "targets", targets);
	if (u->mkfs != NODE_MKFS_NONE) {
		json_t *m = json_object();
		json_object_set_new(m, "state",
				    json_string(u->mkfs == NODE_MKFS_DONE ? "done" : "started"));
		json_object_set_new(m, "fstype", json_string(u->mkfs_fstype ?: ""));
		json_object_set_new(m, "uuid", json_string(u->mkfs_uuid ?: ""));
		json_object_set_new(o, "mkfs", m);
	}
	return meta_json_dump(o, ret_len);
}

static int staging_from_json(json_t *staging, NodeUse *u)
{
	json_t *block = json_object_get(staging, "block"), *device;
	const char *fstype = meta_json_string(staging, "fstype");

	if (!json_is_boolean(block) || !fstype || target_from_json(staging, &u->staging) < 0)
		return -EBADMSG;
	u->staged_block = json_is_true(block);
	u->fstype = xstrdup(fstype);
	if ((device = json_object_get(staging, "device"))) {
		if (!json_is_string(device))
			return -EBADMSG;
		u->device = xstrdup(json_string_value(device));
	}
	return 0;
}

static int mkfs_from_json(json_t *m, NodeUse *u)
{
	const char *state = meta_json_string(m, "state"), *fstype = meta_json_string(m, "fstype"),
		   *uuid = meta_json_string(m, "uuid");

	if (!state || !fstype || !uuid)
		return -EBADMSG;
	if (strcmp(state, "started") == 0)
		node_use_set_mkfs(u, NODE_MKFS_STARTED, fstype, uuid);
	else if (strcmp(state, "done") == 0)
		node_use_set_mkfs(u, NODE_MKFS_DONE, fstype, uuid);
	else
		return -EBADMSG;
	return 0;
}

static int use_fields(json_t *o, NodeUse *u)
{
	json_t *staging = json_object_get(o, "staging"), *targets = json_object_get(o, "targets"),
	       *t;
	const char *node = meta_json_string(o, "node");
	size_t i;

	if (!node || !json_is_array(targets))
		return -EBADMSG;
	u->node = xstrdup(node);
	if (staging && staging_from_json(staging, u) < 0)
		return -EBADMSG;
	json_t *mkfs = json_object_get(o, "mkfs");
	if (mkfs && mkfs_from_json(mkfs, u) < 0)
		return -EBADMSG;
	u->targets = xnew0(NodeTarget, json_array_size(targets));
	json_array_foreach (targets, i, t) {
		if (target_from_json(t, &u->targets[u->n_targets]) < 0)
			return -EBADMSG;
		u->n_targets++;
	}
	return 0;
}

int node_use_from_json(const char *text, size_t len, NodeUse *ret, char **ret_boot_id)
{
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
	const char *boot = meta_json_string(o, "boot_id");
	NodeUse u = {};
	uint64_t format;

	if (!json_is_object(o) || !boot || meta_json_u64(o, "format", &format) < 0 ||
	    format != USE_FORMAT || use_fields(o, &u) < 0) {
		json_decref(o);
		node_use_done(&u);
		return -EBADMSG;
	}
	*ret_boot_id = xstrdup(boot);
	json_decref(o);
	*ret = u;
	return 0;
}

/* ---- files ---- */

char *node_use_boot_id(void)
{
	char buf[64] = "";

	_cleanup_close_ int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (n <= 0)
		return xstrdup("unknown");
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	return xstrdup(buf);
}

int node_use_lock_at(int dir_fd, const char *name, int *ret_lock_fd)
{
	/* A regular file of the directory, never what a symlink there points to. */
	_cleanup_close_ int fd = open_beneath(dir_fd, name, O_RDWR | O_CREAT, 0600, S_IFREG);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX) < 0)
		return negative_errno();
	*ret_lock_fd = TAKE_FD(fd);
	return 0;
}

int node_use_load_at(int dir_fd, const char *name, const char *boot_id, NodeUse *ret)
{
	_cleanup_free_ char *text = NULL, *boot = NULL;
	size_t len;

	*ret = (NodeUse){};
	int r = read_file_at(dir_fd, name, USE_MAX, &text, &len);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	if ((r = node_use_from_json(text, len, ret, &boot)) < 0)
		return r;
	if (strcmp(boot, boot_id) != 0) {
		log_debug("%s is from an earlier boot: void but for its mkfs mark", name);
		keep_mkfs_only(ret);
	}
	return 0;
}

int node_use_save_at(int tmp_fd, int dir_fd, const char *name, const char *boot_id,
		     const NodeUse *u, bool durable)
{
	size_t len;

	/* "done" says no more than no mark: it goes with the rest. Its removal needs no sync: a
	 * crash brings back the durable "done", never the "started" before it. */
	if (node_use_empty(u) && u->mkfs != NODE_MKFS_STARTED) {
		if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
			return negative_errno();
		return 0;
	}
	_cleanup_free_ char *text = node_use_to_json(u, boot_id, &len);
	return write_file_atomic_via(tmp_fd, dir_fd, name, text, len, 0600,
				     durable ? WRITE_FILE_DURABLE : 0);
}
