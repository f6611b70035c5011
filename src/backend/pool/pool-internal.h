/* SPDX-License-Identifier: Apache-2.0 */
/* What the pool's own modules share beyond pool.h (the Pool itself, the pool lock, the
 * volume's directory); not for other layers. */
#pragma once

#include <dirent.h>
#include <pthread.h>

#include "fileio.h"
#include "pool.h"

#define META_FILE "meta.json"
#define DATA_FILE "data"
/* A directory volume's content (pool-meta.h: PoolVolume.directory). */
#define TREE_DIR "tree"
#define META_MAX (1024 * 1024)
/* A volume's use record on this machine (pool.h) and the node lock it is written under. */
#define USE_FILE "node.json"
#define USE_LOCK "node.lock"
#define USE_MAX (1024 * 1024)
/* The pool lock (its flock) and the ledger of provisioned bytes (its content). */
#define LEDGER_FILE "ledger"
/* What the names of volumes, snapshots and staging directories in tmp/ start with. */
#define POOL_VOLUME_PREFIX "vol-"
#define POOL_SNAPSHOT_PREFIX "snap-"
#define POOL_STAGING_PREFIX "new-"

/* Group commit of one directory's fsync: every caller that changed the directory (a rename into
 * or out of it) before calling dir_sync_wait() is covered by the first fsync that starts after
 * its call; concurrent callers share it (one of them runs it, the others wait for it). */
typedef struct DirSync {
	pthread_mutex_t lock;
	pthread_cond_t done_cond;
	uint64_t ticket; /* callers so far */
	uint64_t done;	 /* every caller up to this one is durable */
	bool running;	 /* an fsync is under way */
	uint64_t fsyncs; /* fsyncs run: for tests and benchmarks */
} DirSync;

struct Pool {
	char *path;
	char *real_path; /* path made absolute without symlinks at open; NULL if it could not be */
	int dir_fd;	 /* pinned pool directory */
	int volumes_fd, snapshots_fd, groups_fd, nodes_fd, tmp_fd;
	int ledger_fd;
	char *zone;
	char *boot_id; /* this boot (/proc/sys/kernel/random/boot_id), read at open */
	uint64_t capacity;
	double overprovision; /* >= 1 */

	/* The threads' half of the pool lock: flock() excludes other open files, not the threads
	 * sharing ledger_fd. Taken before the flock, released after it. */
	pthread_mutex_t lock;

	/* The object directories' fsyncs, by kind (volumes/, snapshots/, groups/). */
	DirSync dir_syncs[3];

	/* The pool's filesystem makes a new file's directory entry durable with the file's own
	 * fsync (ext4, XFS, btrfs: pool_open()), so that a create needs no fsync of its staging
	 * directory (docs/pool.md, What each fsync is for). */
	bool entry_with_file;

	char **recovered; /* a strv: what pool_open() removed from tmp/, for pool_check_repair() */
};

/* Whether the ledger may reach provisioned bytes: up to capacity x overprovision (PoolSpace),
 * the filesystem not full for real. Hold the pool lock. */
bool pool_space_fits(Pool *p, uint64_t provisioned);
/* Whether the pool's filesystem is full for real: less free for it than 1% of its size (at
 * most 1 GiB). Writes to thin volumes that need new blocks then fail, or soon will. */
bool pool_fs_full(const Pool *p);
/* What the data files of volumes and snapshots hold on disk. */
uint64_t pool_allocated(Pool *p);

/* POOL/reserve: a few MiB the pool's records can be written with when its filesystem is full.
 * restore: takes them again where the filesystem has room (at open, after a delete, by the
 * trimmer); release: gives them up, true when it held any. */
void pool_reserve_restore(Pool *p);
bool pool_reserve_release(Pool *p);

/* write_file_atomic_via() of one of the pool's records (0600) through tmp/; on a full
 * filesystem once more with the reserve given up (pool.c). */
int pool_write_atomic(Pool *p, int dir_fd, const char *name, const char *text, size_t len,
		      WriteFileFlags flags);

/* Takes the pool lock (threads and processes): every change of what the ledger counts happens
 * under it, together with the ledger's update. Blocks. (pool-space.c, with the ledger.) */
int pool_lock_take(Pool *p);
void pool_lock_release(Pool *p);

/* The ledger (pool-space.c), beside the rules of what may be provisioned. Hold the pool lock.
 * reserve: adds bytes, -ENOSPC beyond what the pool may provision or when its filesystem is full
 * for real; release: gives bytes back; recount: what it should say, counted from the pool;
 * write: sets it. */
int pool_ledger_reserve(Pool *p, uint64_t bytes);
void pool_ledger_release(Pool *p, uint64_t bytes);
uint64_t pool_ledger_recount(Pool *p);
int pool_ledger_write(Pool *p, uint64_t bytes);
/* The bytes a staging directory in tmp/ reserves, from its name; 0 for anything else. */
uint64_t pool_staging_reserved(const char *name);

/* Whether name is one the pool makes in tmp/ (a staging directory, a removal, a temporary of
 * an atomic write, the direct I/O probe): nothing else there is ever removed. */
bool pool_tmp_name_ours(const char *name);

/* Removes tmp/name unless a live operation holds it (-EBUSY) or the pool never makes such a
 * name (-EPERM); a staging directory's reserved
 * bytes go back to the ledger. What cannot be removed (pool_tree_remove()) stays: a negative
 * errno and *ret_why (NULL'ed by the caller) naming it. Takes the pool lock. */
int pool_tmp_clean(Pool *p, const char *name, char **ret_why);

/* Whether a pool may be opened or made at path (pool-record.c): 0; -ENOMEDIUM when the
 * directory is absent or empty (or holds no pool) and the record beside it says a pool was
 * there, unless init; -ENOTEMPTY with init when it holds files but no pool. */
int pool_place_check(const char *path, bool init);
/* Records beside the pool at path that a pool is there, once (failures only logged). */
void pool_record_write(const char *path);

/* Whether dir_fd/name, an object's directory or an entry of tmp/ (where: its parent's path in
 * the pool, "volumes" or "tmp", for messages), can be removed whole: only the pool's names in
 * it (meta.json, data, node.json, node.lock, temporaries of atomic writes; below a directory in
 * place of one of them, anything), nothing immutable or append-only, no mount point, and
 * nothing followed. 0, or a negative errno and *ret_why (NULL'ed by the caller) naming the
 * first object in the way and what to do about it: -EPERM immutable or append-only, -ENOTEMPTY
 * a name that is no file of the pool, -EBUSY a mount point. Changes nothing. */
int pool_tree_check(int dir_fd, const char *name, const char *where, char **ret_why);
/* Removes dir_fd/name by the same rules; whatever is in the way stays, with all that was not
 * yet removed, and is named as by pool_tree_check(). 0 once it is gone, also when it was not
 * there. */
int pool_tree_remove(int dir_fd, const char *name, const char *where, char **ret_why);

/* What pool_tree_check_files() saw in the directory: its entries' names when each is a file
 * (a volume's meta.json, data, node.lock: no directory, as a directory volume's tree/ is), so
 * that they can be removed without a second look. */
#define POOL_TREE_FILES_MAX 8
typedef struct PoolTreeFiles {
	bool flat; /* false: a directory among them, too many or too long names */
	size_t n;
	char names[POOL_TREE_FILES_MAX][64];
} PoolTreeFiles;
/* pool_tree_check(), noting in *ret_files the names it found. */
int pool_tree_check_files(int dir_fd, const char *name, const char *where, PoolTreeFiles *ret_files,
			  char **ret_why);
/* Removes dir_fd/name, whose directory object_fd is, as pool_tree_remove() does: the files the
 * check found unlinked by name through object_fd, then the directory; where anything else is
 * found (something added or changed since, a file that resists), the whole walk of
 * pool_tree_remove() does the rest and says what is in the way. */
int pool_tree_remove_files(int dir_fd, const char *name, int object_fd, const PoolTreeFiles *files,
			   const char *where, char **ret_why);

/* A directory stream of its own on dir_fd's directory: a dup of dir_fd would share its offset
 * with every other reader (threads listing at once would each miss entries). NULL on error. */
DIR *pool_opendir(int dir_fd);

/* Sorted IDs of the objects in dir_fd whose names are prefix + 16 hex: a strv and its length. */
int pool_list_ids(int dir_fd, const char *prefix, char ***ret_ids, size_t *ret_n);

/* Opens volumes/<id> (O_DIRECTORY, never following a symlink): -ENOENT for a bad or unknown
 * ID. Caller closes. */
int pool_volume_dir_open(const Pool *p, const char *id);

/* Whether volumes/<id> is in place (a volume being deleted is renamed away first). */
bool pool_volume_present(const Pool *p, const char *id);

/* Whether dir_fd (opened as volumes/<id>) is still the directory at volumes/<id>: after a wait
 * for a lock, the volume may have been deleted, or deleted and made again. */
bool pool_volume_dir_current(const Pool *p, const char *id, int dir_fd);

/* Opens volumes/<id>/node.lock in the volume's directory dir_fd (made when missing) and takes
 * it. Blocks. Callers check the directory is still the volume's once they hold it. */
int pool_volume_use_lock_at(int dir_fd, int *ret_lock_fd);

/* Node IDs: [A-Za-z0-9._-], 1-128, not starting with a dot. */
bool pool_node_id_valid(const char *id);

/* Adds to v (a volume whose own record is damaged) the attachments the nodes' device indexes
 * hold for it: where it is published, as far as the pool still knows. */
void pool_node_devices_attachments(Pool *p, PoolVolume *v);

/* Directory volumes (pool-dirvol.c). make: tree/ in a staging directory, with a project ID the
 * pool picks (free: nothing counted, no limit) set on it with inheritance and limited to size,
 * under the pool lock; -EMLINK when no free ID was found. set_size: the project's limit
 * (-EUCLEAN when the filesystem enforces no project quotas any more).
 * project: the project ID of obj_fd's tree/ (0: none, or no tree). release: clears that
 * project's limit once obj_fd's tree/ is gone. open: volumes/<id>/tree (-EUCLEAN for a symlink
 * or no directory there). mounted: 1 with *ret_target when a mount on this machine has the
 * volume's tree/ as its root (it is staged or published), 0 when none has. */
int pool_dirvol_make(Pool *p, int staging_fd, uint64_t size, uint32_t *ret_project);
int pool_dirvol_set_size(Pool *p, uint32_t project, uint64_t size);
uint32_t pool_dirvol_project(int obj_fd);
void pool_dirvol_release(Pool *p, int obj_fd, uint32_t project);
int pool_dirvol_open(Pool *p, const char *id, int flags);
int pool_dirvol_mounted(Pool *p, const char *id, char **ret_target);
