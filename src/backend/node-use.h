/* SPDX-License-Identifier: Apache-2.0 */
/* Use records: where this machine's node service staged and published a volume, which
 * directories and files it made there (with their inodes), and the boot they belong to. The
 * block-device node service (blocknode.h) writes one per volume before each step it takes and
 * clears it after the step is undone, under the volume's node lock; every process on the machine
 * decides from it, never from its own memory. A record of an earlier boot is void: mounts and
 * devices do not survive one.
 *
 * A backend decides where records live (the pool: volumes/<id>/node.json in the pool; EBS: a
 * node-local state directory); the format and the file handling here are the same for all:
 *
 *     {"format": 1, "boot_id": "...", "node": "node-1",
 *      "staging": {"path": "...", "created": true, "dev": 64768, "ino": 12, "block": false,
 *                  "fstype": "ext4", "device": "/dev/xvdba"},
 *      "targets": [{"path": "...", "created": true, "dev": 64768, "ino": 13}]}
 *
 * ("device" only where the backend records the device it staged.) And, once the node service
 * formatted the volume, the mark of that mkfs:
 *
 *     "mkfs": {"state": "started", "fstype": "xfs", "uuid": "..."}
 *
 * "started" is written (durably) before mkfs runs on a blank device, with the UUID mkfs is
 * given; "done" after mkfs succeeded, before anything mounts the filesystem. A filesystem
 * whose UUID is that of a "started" mark is half made by volplug and holds nothing: it is
 * made again. A "started" mark outlives the boot and the stage (the record stays while it
 * carries one); a "done" one lives as long as the rest of the record, since no mark at all
 * means the same: never format a filesystem. See docs/node-safety.md, "Formatting". */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct NodeTarget {
	char *path;
	bool created;	   /* volplug made the directory or file at path, and removes it */
	uint64_t dev, ino; /* what was at path before anything was mounted on it */
} NodeTarget;

typedef enum NodeMkfs {
	NODE_MKFS_NONE,	   /* never formatted by this machine's node service */
	NODE_MKFS_STARTED, /* mkfs was started and has not been seen to succeed */
	NODE_MKFS_DONE,	   /* mkfs succeeded */
} NodeMkfs;

typedef struct NodeUse {
	char *node;	    /* the node id that uses it */
	NodeTarget staging; /* where it is staged; .path NULL: not staged */
	bool staged_block;  /* staged for raw block access: nothing is mounted */
	char *fstype;	    /* the filesystem it is staged with */
	char *device;	    /* the device it was staged from, where the backend records it; NULL */
	NodeTarget *targets;
	size_t n_targets;
	NodeMkfs mkfs;	   /* the mark of the node service's mkfs of the volume */
	char *mkfs_fstype; /* what it makes or made (NODE_MKFS_NONE: NULL) */
	char *mkfs_uuid;   /* the UUID it gives the filesystem (NODE_MKFS_NONE: NULL) */
} NodeUse;

void node_use_done(NodeUse *u);
/* Nothing of the volume staged or published (a mkfs mark may remain). */
bool node_use_empty(const NodeUse *u);
/* Sets the mkfs mark (NODE_MKFS_NONE clears it), taking copies. */
void node_use_set_mkfs(NodeUse *u, NodeMkfs state, const char *fstype, const char *uuid);
/* The publish target at path in u, or NULL. */
NodeTarget *node_use_target(const NodeUse *u, const char *path);
/* Adds (or replaces) the target at t->path, taking a copy. */
void node_use_add_target(NodeUse *u, const NodeTarget *t);
void node_use_remove_target(NodeUse *u, const char *path);

/* The record as JSON (malloc'ed, NUL-terminated), with the boot it belongs to. */
char *node_use_to_json(const NodeUse *u, const char *boot_id, size_t *ret_len);
/* -EBADMSG for anything that is not a whole, valid record. */
int node_use_from_json(const char *text, size_t len, NodeUse *ret, char **ret_boot_id);

/* This boot's id (/proc/sys/kernel/random/boot_id), "unknown" when it cannot be read. Caller
 * frees. */
char *node_use_boot_id(void);

/* Opens dir_fd/name (made when missing, never through a symlink) and takes its flock. Blocks. */
int node_use_lock_at(int dir_fd, const char *name, int *ret_lock_fd);

/* Loads dir_fd/name: an absent record loads empty, one of another boot than boot_id loads
 * with its mkfs mark only. -EBADMSG when it is damaged. */
int node_use_load_at(int dir_fd, const char *name, const char *boot_id, NodeUse *ret);

/* Writes dir_fd/name through a flock'ed temporary in tmp_fd renamed into place (a crash leaves
 * the old record or the new one), or removes it when u is empty and has no "started" mark. Synced
 * only when durable (a change of the mkfs mark): the rest describes the running machine. Hold
 * the record's lock. */
int node_use_save_at(int tmp_fd, int dir_fd, const char *name, const char *boot_id,
		     const NodeUse *u, bool durable);
