/* SPDX-License-Identifier: Apache-2.0 */
/* The pool: block volumes as sparse files in one directory, metadata beside them.
 *
 *   POOL/volumes/vol-<16 hex>/{meta.json,data}     one directory per volume (node.json and
 *                                                  node.lock: its use on this machine)
 *   POOL/snapshots/snap-<16 hex>/{meta.json,data}  one per snapshot
 *   POOL/groups/group-<16 hex>/meta.json           group snapshots (their snapshots' IDs)
 *   POOL/nodes/<node id>.json                      nodes that serve this pool
 *   POOL/nodes/<node id>.{devices,lock}            device names the node's volumes hold
 *   POOL/tmp/                                      objects being made or removed
 *   POOL/ledger                                    the pool lock; bytes provisioned
 *   POOL/run/                                      the serving processes' own state
 *
 * An object is made in tmp/ and renamed into place, and removed by renaming it back into
 * tmp/ first: after a crash at any moment an object is either whole or absent, and what is
 * left in tmp/ is cleaned at the next open. IDs derive from the CSI name (a hash), so a
 * retried create finds its volume without any index, also from another process. Whatever
 * several processes on one pool must agree on (capacity, device names, whether a volume is
 * in use) is decided from the pool's files under a lock, never from one process's memory.
 * See docs/pool.md. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "copy.h"
#include "node-use.h"
#include "pool-meta.h"
#include "quota.h"
#include "strmap.h"
#include "strv.h"

typedef struct Pool Pool;

typedef struct PoolConfig {
	const char *path;    /* the pool directory; created if missing */
	uint64_t capacity;   /* bytes; 0: no limit but the filesystem's (PoolSpace's capacity) */
	const char *zone;    /* topology zone of this pool */
	const char *node_id; /* the node it serves (recorded at first use); NULL: not checked */
	bool existing;	     /* refuse (-ENOENT) a directory that holds no pool yet */
	/* Make a new pool in an absent or empty directory although the record beside it
	 * (pool_record_path()) says a pool was there; without it that is -ENOMEDIUM. */
	bool init;
	/* Volumes and snapshots may be provisioned up to capacity x this (thin provisioning
	 * beyond 1: their data files are sparse); 0: 1, every byte provisioned is there. */
	double overprovision;
} PoolConfig;

/* Opens (laying out on first use) and recovers a pool: removes what a crash left in tmp/ and
 * recounts the provisioned bytes from the pool. Returns -ENOTDIR, -EACCES, ... when the
 * directory cannot hold a pool, -EXDEV when it serves another node than config->node_id
 * (POOL/node; pool_recorded_node() says which). Blocks. */
int pool_open(const PoolConfig *config, Pool **ret);

/* What is wrong with the pool's own layout at path (a subdirectory or the ledger that is a
 * symlink, or of the wrong type), for pool_open()'s -ELOOP, -ENOTDIR, ...; NULL when nothing
 * is. Caller frees. */
char *pool_layout_damage(const char *path);

/* The node recorded in the pool at path (POOL/node), or NULL when none is. Caller frees. */
char *pool_recorded_node(const char *path);
/* Where the record that a pool is at path is kept: PARENT/.NAME.volplug, beside it (NULL for
 * a path without a last component). Caller frees. */
char *pool_record_path(const char *path);
void pool_close(Pool *p);

/* How many fsyncs of the object directories (volumes/, snapshots/, groups/) this Pool ran:
 * concurrent creates and deletes share them (group commit, docs/pool.md). */
uint64_t pool_dir_fsyncs(Pool *p);

/* 0 when the pool can serve requests now, else a negative errno: -ENOMEDIUM when its directory
 * is gone (removed, or its path leads elsewhere now), -EROFS read-only. */
int pool_probe(Pool *p);

const char *pool_path(const Pool *p);
const char *pool_zone(const Pool *p);

/* Checks that a string is a volume ID ("vol-" + 16 lower-case hex) or a snapshot ID. */
bool pool_volume_id_valid(const char *id);
bool pool_snapshot_id_valid(const char *id);

/* The message for an ID that names no volume, saying whether it is not even the shape of one:
 * "volume_id: volume vol-... not found" or "volume_id: 'x' is not a volume ID of this pool".
 * Caller frees. */
char *pool_volume_not_found(const char *field, const char *id);

/* The ID a name maps to. */
void pool_volume_id_for_name(const char *name, char ret_id[POOL_ID_MAX]);
void pool_snapshot_id_for_name(const char *name, char ret_id[POOL_ID_MAX]);

/* Capacity: total (PoolSpace's capacity) and what is left to provision
 * (pool_space_available()), counted by every process on the pool (creates in flight included).
 * Blocks briefly on the pool lock. */
void pool_capacity(Pool *p, uint64_t *ret_total, uint64_t *ret_available);
/* The bytes provisioned: every volume's and snapshot's size (creates in flight included), which
 * may exceed the total above with an overprovision ratio above 1, or once the disk has less
 * free. Blocks briefly on the pool lock. */
int pool_provisioned(Pool *p, uint64_t *ret_bytes);

/* The pool's space, provisioned and real. */
typedef struct PoolSpace {
	uint64_t capacity;	   /* what the filesystem has for the pool now: its free bytes
				    * plus what the pool's files hold; --pool-capacity when that
				    * is less or the filesystem reports no size (ramfs) */
	double overprovision;	   /* provisioned may reach capacity x this */
	uint64_t provisioned;	   /* the sizes of every volume and snapshot, creates in flight
				    * included, counted by every process on the pool */
	uint64_t allocated;	   /* what their data files really hold on disk (shared extents of
				    * reflinked copies count once per file) */
	uint64_t fs_size, fs_free; /* the pool's filesystem: its size, what is free (f_bavail) */
	bool full;		   /* its filesystem is full for real (pool_fs_full()) */
} PoolSpace;

/* Fills *ret: the ledger under the pool lock (blocks briefly), the data files' allocation
 * (a stat of each), the filesystem's statvfs. -errno when the ledger cannot be read; the
 * filesystem's figures are 0 when statvfs fails. */
int pool_space(Pool *p, PoolSpace *ret);

/* What may still be provisioned: capacity x overprovision - provisioned, and 0 while the
 * filesystem is full for real. */
uint64_t pool_space_available(const PoolSpace *s);

/* "the pool's filesystem is full: 0 bytes free of 256 MiB; ...": why thin volumes' writes
 * fail, for conditions and errors (malloc'ed). */
char *pool_space_full_message(const PoolSpace *s);

/* pool_space_full_message() while the filesystem is full for real, else NULL. */
char *pool_space_full_condition(Pool *p);

/* Why bytes more could not be provisioned (after -ENOSPC), in the pool of node (NULL or "": not
 * named): the filesystem full for real, or what is left, what is provisioned and the limit
 * (malloc'ed). */
char *pool_space_refusal(Pool *p, uint64_t bytes, const char *node);

/* Whether the pool can make directory volumes (volumeKind: directory): 0 when its filesystem
 * enforces project quotas; -EUCLEAN when it does not, or another negative errno when it cannot
 * be asked, with *ret_why (malloc'ed) naming the pool's filesystem and how to mount it. */
int pool_directory_volumes_check(Pool *p, char **ret_why);

/* Volumes. All block; the per-volume ones take the volume's lock (flock, so also against
 * other processes on the same pool) for their duration. */

/* Makes a volume of spec->size bytes (spec->id derived from spec->name), blank or with the
 * content of the snapshot or volume of local ID source (spec->source_kind says which;
 * spec->source_id is what the record keeps). Returns -EEXIST when a volume with that ID exists
 * already (the caller loads and compares it), -ENOENT when the source does not exist, -EUCLEAN
 * when its data file is a symlink or no regular file, -ENOSPC beyond capacity, -ERANGE when the
 * source is larger than spec->size. *ret_method tells how
 * content was copied, when it was. A directory volume (spec->directory) gets its project ID in
 * spec->project, and from a source that source's tree/ (copy_tree_at(): reflinks where the
 * filesystem has them; -EPERM for a device file in it); -EMLINK when no free project ID was
 * found. */
int pool_volume_create(Pool *p, PoolVolume *spec, const char *source, CopyMethod *ret_method);

/* What makes a new volume's data file: the file name beneath dir_fd, whole or not at all (made
 * unnamed and linked when done), at most the volume's size. 0 or a negative errno with
 * *ret_error. */
typedef int (*PoolFill)(int dir_fd, const char *name, void *userdata, char **ret_error);

/* As pool_volume_create() of a blank volume, its data file made by fill (a restore) in the
 * staging directory once the space is reserved, then grown to spec->size: a crash or a failure
 * of fill leaves nothing (the staging directory goes, at the latest with the next open). Returns
 * pool_volume_create()'s errors, -ERANGE when fill made a file larger than spec->size, or fill's
 * errno with *ret_error (only then set). Blocks for as long as fill does. */
int pool_volume_create_filled(Pool *p, const PoolVolume *spec, PoolFill fill, void *userdata,
			      char **ret_error);

/* Loads a volume's metadata: -ENOENT when there is no such volume, -EBADMSG when its
 * meta.json is damaged. */
int pool_volume_load(Pool *p, const char *id, PoolVolume **ret);

/* Loads a volume for listing: as pool_volume_load(), but a damaged volume is returned too, and
 * *ret_damage (malloc'ed) says what is wrong, naming the file; NULL for a sound volume. Damaged
 * are: a meta.json that is missing or no record of this volume (then *ret has its ID, its data
 * file's size and the attachments the nodes' device indexes hold for it only), a data file that
 * is a symlink or no regular file (*ret is the volume as recorded), and a name in volumes/ that
 * is no directory (a symlink is never followed; *ret has its ID only). -ENOENT when there is no
 * such volume. */
int pool_volume_inspect(Pool *p, const char *id, PoolVolume **ret, char **ret_damage);

/* 0 when volume id is sound, or absent (the caller decides what that means), else -EUCLEAN
 * with *ret_error: "volume SHOWN is damaged: WHAT (naming the file): it can only be deleted",
 * the one answer of every call that needs the volume sound (shown: how the request named it;
 * NULL: id). */
int pool_volume_damaged(Pool *p, const char *id, const char *shown, char **ret_error);

/* What keeps a volume from being deleted. */
typedef enum {
	POOL_VOLUME_UNUSED,
	POOL_VOLUME_PUBLISHED, /* node: the node it is published to */
	POOL_VOLUME_STAGED,    /* device: the loop device over its data file (kernel truth); node
				* and staging_path: where its use record says it is staged, when
				* the record says so (NULL otherwise) */
} PoolVolumeUsedBy;

/* What pool_volume_delete() found under the volume's locks. */
typedef struct PoolVolumeFound {
	char *name; /* the volume's CSI name; NULL when its metadata is damaged */
	PoolVolumeUsedBy use;
	char *node;
	char *device;
	char *staging_path;
	bool directory; /* a directory volume: device is where its tree/ is mounted */
	/* With -EPERM: what in its directory cannot be removed (nothing was); with 0: what of its
	 * files is left in tmp/ (the volume is gone; a repair removes them once they can be). */
	char *why;
} PoolVolumeFound;

void pool_volume_found_done(PoolVolumeFound *f);

/* Removes a volume unless something uses it, deciding both under one hold of its lock and its
 * node lock (in that order, as pool_volume_use_lock() callers must), kept until the volume is
 * renamed away: a publish or a stage from any process comes before or after, never between. 0,
 * -ENOENT when there was none, -ENOTEMPTY when it is published or staged on this machine,
 * -EPERM when its files cannot all be removed (found->why says which; nothing changed). *found
 * (zeroed by the caller; free it with pool_volume_found_done()) says what the volume was, and
 * what uses it. A volume whose metadata is damaged can be removed too. Blocks. */
int pool_volume_delete(Pool *p, const char *id, PoolVolumeFound *found);

/* Locks a volume against other writers (threads and processes) until pool_unlock(): -ENOENT
 * when it is gone (also when it was removed while we waited). */
int pool_volume_lock(Pool *p, const char *id, int *ret_lock_fd);
void pool_unlock(int lock_fd);

/* Writes a loaded volume's metadata back (attachments, params). Hold its lock. */
int pool_volume_save(Pool *p, const PoolVolume *v);

/* Grows a volume's data file to new_size and saves v with it. Hold its lock. -ENOSPC beyond
 * capacity; shrinking is refused with -ERANGE. */
int pool_volume_grow(Pool *p, PoolVolume *v, uint64_t new_size);

/* The data file of a volume (for the node's loop device). Caller frees. */
char *pool_volume_data_path(const Pool *p, const char *id);

/* Opens a volume's data file with flags (O_RDWR, O_PATH, ...) beneath the pool, never through a
 * symlink: -ENOENT when there is no such file, -EUCLEAN when something else than a regular file
 * is there or a symlink is on the way (pool_volume_inspect() says what). */
int pool_volume_data_open(Pool *p, const char *id, int flags);

/* What the project quota of directory volume id counts (its tree/'s project, what the kernel
 * charges, whatever its record says) and its limits: 1 with *ret, 0 when id has no tree/ with a
 * project (a loop volume, or one being made), -EUCLEAN when its tree/ is a symlink or no
 * directory, another negative errno when the quota cannot be read. Takes no lock. */
int pool_dirvol_usage(Pool *p, const char *id, QuotaUsage *ret);

/* All volume IDs, sorted: a strv (free it with strv_free()) and its length. */
int pool_volume_list(Pool *p, char ***ret_ids, size_t *ret_n);

/* Snapshots: the same life cycle. create copies the volume of local ID source (the record
 * keeps spec->source_volume_id; spec->directory: a directory volume, whose tree/ is copied),
 * returns -EEXIST when the ID exists, -ENOENT when the source volume does not. */
int pool_snapshot_create(Pool *p, const PoolSnapshot *spec, const char *source,
			 CopyMethod *ret_method);
int pool_snapshot_load(Pool *p, const char *id, PoolSnapshot **ret);
/* Rewrites an existing snapshot's record (atomically, as pool_volume_save()). */
int pool_snapshot_save(Pool *p, const PoolSnapshot *s);
/* Opens a snapshot's data file as pool_volume_data_open() does a volume's. An open file stays
 * readable after the snapshot is deleted. */
int pool_snapshot_data_open(Pool *p, const char *id, int flags);
/* delete: -EPERM when its files cannot all be removed, *ret_why (NULL'ed by the caller) saying
 * which (nothing changed); 0 with *ret_why set: gone, but that is left in tmp/. */
int pool_snapshot_delete(Pool *p, const char *id, char **ret_why);
int pool_snapshot_list(Pool *p, char ***ret_ids, size_t *ret_n);

/* Group snapshots: a record of member snapshots made together (each a PoolSnapshot). */
bool pool_group_id_valid(const char *id);
void pool_group_id_for_name(const char *name, char ret_id[POOL_ID_MAX]);
int pool_group_create(Pool *p, const PoolGroup *spec); /* -EEXIST when the ID exists */
int pool_group_load(Pool *p, const char *id, PoolGroup **ret);
int pool_group_delete(Pool *p, const char *id, char **ret_why); /* as pool_snapshot_delete() */

/* Nodes that use this pool register themselves, so the controller can check a node ID and
 * learn its attach limit. */
int pool_node_register(Pool *p, const PoolNode *n);
int pool_node_load(Pool *p, const char *id, PoolNode **ret);

/* Where this machine's node service uses a volume (node-use.h): runtime state, kept beside the
 * volume as volumes/<id>/node.json under its own lock (node.lock), so that every process on the
 * pool decides from it (DeleteVolume refuses a staged volume) and the node service knows which
 * directories and files it made. */

/* Takes the volume's node lock (blocking, also against other processes): -ENOENT when there is
 * no such volume (also when it was deleted, or deleted and made again, while we waited). Whoever
 * holds both takes the volume's lock (pool_volume_lock()) first, as pool_volume_delete() does. */
int pool_volume_use_lock(Pool *p, const char *id, int *ret_lock_fd);
/* Loads the record; an absent one loads empty, a void one (another boot's) with its mkfs mark
 * only. Hold the node lock. */
int pool_volume_use_load(Pool *p, const char *id, NodeUse *ret);
/* Writes the record (removes it when empty and not marked "started"). Atomic; synced only when
 * durable (a change of the mkfs mark): the rest describes the running machine. Hold the node
 * lock. */
int pool_volume_use_save(Pool *p, const char *id, const NodeUse *u, bool durable);

/* Locks node's device names against every other process and thread until pool_unlock(). Take
 * it while holding the volume's lock, never the other way round. -EINVAL for a bad node ID.
 * Blocks. */
int pool_node_lock(Pool *p, const char *node, int *ret_lock_fd);

/* The device names node's volumes hold (nodes/<node>.devices), each confirmed by its volume's
 * record: a claim whose volume is gone or records no such attachment (a process was killed
 * between the two writes) is dropped; one whose volume's metadata is damaged is kept. Rebuilt
 * from every volume's attachments when the index is missing or unreadable. Hold the node's
 * lock. */
int pool_node_devices_load(Pool *p, const char *node, PoolNodeDevice **ret, size_t *ret_n);

/* Replaces node's index, atomically and durably. Hold the node's lock: a publish saves its
 * claim before the volume's attachment, an unpublish drops it after. */
int pool_node_devices_save(Pool *p, const char *node, const PoolNodeDevice *d, size_t n);

/* pool check: what is wrong in a pool. */
typedef struct PoolCheckItem {
	char *object;		     /* "volumes/vol-...", "tmp/new-...", "/dev/loop3" */
	char *problem;		     /* what is wrong with it */
	char *repair;		     /* what pool_check_repair() did about it; NULL: nothing */
	char volume_id[POOL_ID_MAX]; /* the volume whose metadata is damaged, else "" */
} PoolCheckItem;

typedef struct PoolCheckReport {
	size_t volumes, snapshots;
	/* The data files of volumes and snapshots: their sizes, and what they hold on disk; the
	 * pool's filesystem: its size and free space (f_bavail). */
	uint64_t provisioned, allocated, fs_size, fs_free;
	PoolCheckItem *items; /* the problems, repaired or not */
	size_t n_items, repaired;
} PoolCheckReport;

void pool_check_report_done(PoolCheckReport *r);

/* Verifies every object, the temporaries anywhere in the pool and the loop devices over its
 * files, without changing anything. Returns 0 (problems listed in the report) or a negative
 * errno when the pool cannot be read. Blocks. */
int pool_check(const char *path, PoolCheckReport *ret);

/* As pool_check(), and repairs what can be repaired without losing anything: detaches loop
 * devices over pool files that no record uses (deleted ones included), removes stray
 * temporaries (and reports what pool_open() cleaned from tmp/), records the size of a data
 * file an interrupted expand left larger than its metadata. Mounts of such loop devices are
 * only reported, never unmounted. Safe while other processes serve the pool. Blocks. */
int pool_check_repair(Pool *p, PoolCheckReport *ret);
