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
 * ("device" only where the backend records the device it staged.) */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct NodeTarget {
	char *path;
	bool created;	   /* volplug made the directory or file at path, and removes it */
	uint64_t dev, ino; /* what was at path before anything was mounted on it */
} NodeTarget;

typedef struct NodeUse {
	char *node;	    /* the node id that uses it */
	NodeTarget staging; /* where it is staged; .path NULL: not staged */
	bool staged_block;  /* staged for raw block access: nothing is mounted */
	char *fstype;	    /* the filesystem it is staged with */
	char *device;	    /* the device it was staged from, where the backend records it; NULL */
	NodeTarget *targets;
	size_t n_targets;
} NodeUse;

void node_use_done(NodeUse *u);
bool node_use_empty(const NodeUse *u);
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

/* Loads dir_fd/name: an absent record, or one of another boot than boot_id, loads empty.
 * -EBADMSG when it is damaged. */
int node_use_load_at(int dir_fd, const char *name, const char *boot_id, NodeUse *ret);

/* Writes dir_fd/name through a flock'ed temporary in tmp_fd renamed into place (a crash leaves
 * the old record or the new one), or removes it when u is empty. Not synced: the record
 * describes the running machine. Hold the record's lock. */
int node_use_save_at(int tmp_fd, int dir_fd, const char *name, const char *boot_id,
		     const NodeUse *u);
