/* SPDX-License-Identifier: Apache-2.0 */
/* Nodes of a pool: their registrations (nodes/<node>.json) and the device names their volumes
 * hold (nodes/<node>.devices, under nodes/<node>.lock).
 *
 * The index of device names is a cache of the volumes' attachments that every controller
 * process reads and writes under the node's lock, so that none decides from its own memory: a
 * publish claims a name in the index first and then records the attachment in the volume's
 * meta.json, an unpublish removes the attachment first and then the claim, both inside the
 * node's lock. A process killed between the two leaves a claim without an attachment, never an
 * attachment without a claim; loading confirms every claim against its volume's record, so
 * such a claim is dropped and no name leaks. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>

#include "alloc.h"
#include "fileio.h"
#include "pinned-path.h"
#include "pool-internal.h"
#include "pool-meta.h"

#define NODE_NAME_MAX 160 /* node ID (128) + suffix */

bool pool_node_id_valid(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > 128 || id[0] == '.')
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.'))
			return false;
	return true;
}

/* nodes/<node><suffix>. Each kind of file has its own suffix, so no node's file can be
 * another node's (node IDs may contain dots). */
static int node_file(const char *node, const char *suffix, char ret[NODE_NAME_MAX])
{
	if (!pool_node_id_valid(node))
		return -EINVAL;
	snprintf(ret, NODE_NAME_MAX, "%s%s", node, suffix);
	return 0;
}

int pool_node_register(Pool *p, const PoolNode *n)
{
	char name[NODE_NAME_MAX];
	size_t len;

	int r = node_file(n->id, ".json", name);
	if (r < 0)
		return r;
	_cleanup_free_ char *text = pool_node_to_json(n, &len);
	return pool_write_atomic(p, p->nodes_fd, name, text, len, WRITE_FILE_DURABLE);
}

int pool_node_load(Pool *p, const char *id, PoolNode **ret)
{
	_cleanup_free_ char *text = NULL;
	char name[NODE_NAME_MAX];
	size_t len;

	if (node_file(id, ".json", name) < 0)
		return -ENOENT;
	int r = read_file_at(p->nodes_fd, name, META_MAX, &text, &len);
	if (r < 0)
		return r;
	return pool_node_from_json(text, len, ret);
}

int pool_node_lock(Pool *p, const char *node, int *ret_lock_fd)
{
	char name[NODE_NAME_MAX];

	int r = node_file(node, ".lock", name);
	if (r < 0)
		return r;
	_cleanup_close_ int fd = open_beneath(p->nodes_fd, name, O_RDWR | O_CREAT, 0600, S_IFREG);
	if (fd < 0)
		return fd;
	if (flock(fd, LOCK_EX) < 0)
		return negative_errno();
	*ret_lock_fd = TAKE_FD(fd);
	return 0;
}

static void devices_add(PoolNodeDevice **d, size_t *n, size_t *cap, const char *device,
			const char *volume_id)
{
	*d = xgrow(*d, cap, *n + 1, sizeof(PoolNodeDevice));
	(*d)[(*n)++] = (PoolNodeDevice){.device = xstrdup(device), .volume_id = xstrdup(volume_id)};
}

/* Whether the pool's records confirm that volume_id holds device on node: its meta.json has
 * that attachment, or cannot be read (a damaged volume keeps its name: it may still be
 * attached). A volume that is gone holds nothing. */
static bool claim_confirmed(Pool *p, const char *node, const PoolNodeDevice *claim)
{
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;

	int r = pool_volume_load(p, claim->volume_id, &v);
	if (r == -ENOENT)
		return false;
	if (r < 0)
		return true;
	for (size_t i = 0; i < v->n_attachments; i++)
		if (strcmp(v->attachments[i].node, node) == 0)
			return strcmp(v->attachments[i].device, claim->device) == 0;
	return false;
}

/* The index from scratch: every volume's attachments to node. */
static int devices_rebuild(Pool *p, const char *node, PoolNodeDevice **ret, size_t *ret_n)
{
	PoolNodeDevice *d = NULL;
	size_t n = 0, cap = 0, n_ids;
	_cleanup_strv_free_ char **ids = NULL;

	int r = pool_volume_list(p, &ids, &n_ids);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n_ids; i++) {
		_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
		if (pool_volume_load(p, ids[i], &v) < 0)
			continue;
		for (size_t k = 0; k < v->n_attachments; k++)
			if (strcmp(v->attachments[k].node, node) == 0)
				devices_add(&d, &n, &cap, v->attachments[k].device, v->id);
	}
	*ret = d;
	*ret_n = n;
	return 0;
}

int pool_node_devices_load(Pool *p, const char *node, PoolNodeDevice **ret, size_t *ret_n)
{
	_cleanup_free_ char *text = NULL;
	char name[NODE_NAME_MAX];
	PoolNodeDevice *all = NULL, *kept = NULL;
	size_t len, n_all = 0, n_kept = 0, cap = 0;

	int r = node_file(node, ".devices", name);
	if (r < 0)
		return r;
	r = read_file_at(p->nodes_fd, name, META_MAX, &text, &len);
	if (r == 0)
		r = pool_node_devices_from_json(text, len, &all, &n_all);
	if (r < 0)
		return devices_rebuild(p, node, ret, ret_n);
	for (size_t i = 0; i < n_all; i++)
		if (claim_confirmed(p, node, &all[i]))
			devices_add(&kept, &n_kept, &cap, all[i].device, all[i].volume_id);
	pool_node_devices_free(all, n_all);
	*ret = kept;
	*ret_n = n_kept;
	return 0;
}

int pool_node_devices_save(Pool *p, const char *node, const PoolNodeDevice *d, size_t n)
{
	char name[NODE_NAME_MAX];
	size_t len;

	int r = node_file(node, ".devices", name);
	if (r < 0)
		return r;
	_cleanup_free_ char *text = pool_node_devices_to_json(node, d, n, &len);
	return pool_write_atomic(p, p->nodes_fd, name, text, len, WRITE_FILE_DURABLE);
}

/* Adds the nodes whose index holds a name for volume_id to v's attachments. */
static void attachments_from_index(Pool *p, const char *node, PoolVolume *v)
{
	_cleanup_free_ char *text = NULL;
	char name[NODE_NAME_MAX];
	PoolNodeDevice *d = NULL;
	size_t len, n = 0;

	if (node_file(node, ".devices", name) < 0 ||
	    read_file_at(p->nodes_fd, name, META_MAX, &text, &len) < 0 ||
	    pool_node_devices_from_json(text, len, &d, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(d[i].volume_id, v->id) != 0)
			continue;
		v->attachments =
			xrealloc(v->attachments, (v->n_attachments + 1) * sizeof(PoolAttachment));
		v->attachments[v->n_attachments++] =
			(PoolAttachment){.node = xstrdup(node), .device = xstrdup(d[i].device)};
	}
	pool_node_devices_free(d, n);
}

void pool_node_devices_attachments(Pool *p, PoolVolume *v)
{
	_cleanup_closedir_ DIR *dir = pool_opendir(p->nodes_fd);
	const char *suffix = ".devices";
	struct dirent *de;

	while (dir && (de = readdir(dir))) {
		size_t len = strlen(de->d_name), slen = strlen(suffix);
		if (len <= slen || strcmp(de->d_name + len - slen, suffix) != 0)
			continue;
		_cleanup_free_ char *node = xstrndup(de->d_name, len - slen);
		attachments_from_index(p, node, v);
	}
}
