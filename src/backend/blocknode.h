/* SPDX-License-Identifier: Apache-2.0 */
/* The node service of volumes that are block devices on this machine, for any backend: the
 * volume's device is formatted when blank (never when it holds anything), checked, mounted at
 * the staging path (or left raw for block volumes), then bound into each target. A backend
 * says how its volumes' devices are found (the pool: the loop device over the volume's data
 * file, attached on stage; EBS: the NVMe or xvd device EC2 attached) and where their use
 * records (node-use.h) live and how they are locked (BlockNodeOps).
 *
 * Every path comes from a request and is hostile until proved otherwise: it is checked as a
 * string, its parent is opened without following symlinks, and the last component is used only
 * through that fd. Nothing is unmounted or removed unless it is proved to be this volume's: a
 * mount whose device is the volume's device (the filesystem's st_dev, or a bound device node's
 * st_rdev), or a directory or file the node service itself made (recorded, with its inode, in
 * the volume's use record). A mount is made only on an empty directory or on a file made here.
 * Decisions that span processes are taken under the volume's node lock from the use record and
 * the machine (mountinfo, devices), never from memory. See docs/node-safety.md.
 *
 * Errors: a negative errno and *ret_error, a message naming the request field or the object at
 * fault: -EINVAL a bad argument, -ENOENT an unknown volume (or one not at a volume_path),
 * -ENOTEMPTY something is in the way (FAILED_PRECONDITION), -EEXIST published there already in
 * another way, -ERANGE a size out of range, -EBUSY something changed during the call. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "node-use.h"

/* A volume's block device on this machine. */
typedef struct BlockDevice {
	char *path; /* "/dev/loop3", "/dev/nvme1n1"; a directory's path for messages */
	dev_t rdev;
	/* Not 0: the volume is this directory of the filesystem rdev names (its st_dev), not a
	 * device: bound (not mounted) at the staging path, never formatted or checked; a mount of
	 * it is one of that filesystem whose root is this inode. */
	ino_t dir_ino;
	uint64_t dir_size; /* with dir_ino: the volume's size (its quota) */
	bool attached_now; /* made present by this call (device_get): released again on failure */
} BlockDevice;

void block_device_done(BlockDevice *d);

/* What a backend tells the node service. Every operation gets the backend's userdata. */
typedef struct BlockNodeOps {
	/* The volume's device as it is now: 0, -ENODEV when it has none on this machine, another
	 * negative errno when it cannot be looked for. publish_context: the stage's (NULL
	 * elsewhere). Never makes anything. */
	int (*device_find)(void *userdata, const char *id, const Strmap *publish_context,
			   BlockDevice *ret);
	/* The device of a volume without records here (use_lock: -ENOENT), when the backend can
	 * still prove one is the volume's (the pool: a loop device over its data file, deleted
	 * with the volume or the pool): 0, -ENODEV when there is none. An unpublish or unstage
	 * unmounts and releases it. NULL: such a volume has no device. */
	int (*device_find_lost)(void *userdata, const char *id, BlockDevice *ret);
	/* The volume's device for a stage, made present when the backend does that (the pool
	 * attaches a loop device: .attached_now), else waited for. block_size_max: the largest
	 * logical block size what the stage makes allows (a filesystem asked for with smaller
	 * blocks; 512 for raw block volumes, whose users may rely on the 512-byte sectors they
	 * always had), 0: any; a backend that chooses its devices' block size stays at or below
	 * it. 0, or a negative errno with *ret_error. Blocks. */
	int (*device_get)(void *userdata, const char *id, const Strmap *publish_context,
			  uint32_t block_size_max, BlockDevice *ret, char **ret_error);
	/* Gives the device up once nothing of the volume is mounted (the pool detaches its loop
	 * device): 0, -EBUSY while it is in use. NULL: the device stays, as EC2 attached it. */
	int (*device_release)(void *userdata, const BlockDevice *d);
	/* The device's size in bytes; refresh: after the volume grew, make the device see it
	 * first where the backend has to. */
	int (*device_size)(void *userdata, const BlockDevice *d, bool refresh, uint64_t *ret);
	/* What the volume's condition must say about the way to its storage beyond what its
	 * filesystem shows (the pool: its filesystem full for real, a loop device without
	 * direct I/O): a message (malloc'ed) and *ret_abnormal; NULL: nothing to say. NULL
	 * operation: never anything. */
	char *(*device_condition)(void *userdata, const char *id, const BlockDevice *d,
				  bool *ret_abnormal);

	/* A directory volume's directory (BlockDevice.dir_ino) opened O_PATH for the bind of a
	 * stage, never through a symlink: an fd, or a negative errno. NULL: the backend has no
	 * such volumes. */
	int (*dir_open)(void *userdata, const char *id);

	/* Whether the volume exists as far as this machine can tell (NodeExpandVolume and
	 * NodeGetVolumeStats answer NOT_FOUND otherwise). */
	bool (*volume_present)(void *userdata, const char *id);
	/* The message for a volume_id that names no volume of the backend (malloc'ed). */
	char *(*not_found)(const char *field, const char *id);

	/* The volume's node lock, blocking, also against other processes: -ENOENT when there is
	 * no such volume. Released by closing *ret_lock_fd (use_unlock, when set, first). */
	int (*use_lock)(void *userdata, const char *id, int *ret_lock_fd);
	/* Where the volume's node lock lives, for messages ("volumes/<id>/node.lock in pool
	 * /p", malloc'ed): use_lock fails -ELOOP (a symlink), -EISDIR or -EBADFD (not a regular
	 * file) when something else is in its place, which makes the volume damaged. */
	char *(*lock_name)(void *userdata, const char *id);
	/* Called with the lock held right before it is released: a backend may drop what an
	 * empty record leaves behind. NULL: nothing. */
	void (*use_unlock)(void *userdata, const char *id, int lock_fd);
	/* The record: an absent or void one loads empty. Hold the lock. */
	int (*use_load)(void *userdata, const char *id, NodeUse *ret);
	/* Writes it (removes it when empty and not marked "started"); durable: synced before
	 * this returns (a change of the mkfs mark must survive a crash of the machine). Hold
	 * the lock. */
	int (*use_save)(void *userdata, const char *id, const NodeUse *u, bool durable);
} BlockNodeOps;

/* A backend's node service: its operations, their userdata, and the node id records name. */
typedef struct BlockNode {
	const BlockNodeOps *ops;
	void *userdata;
	const char *node_id;
	bool record_device; /* record the staged device's path in the use record */
} BlockNode;

/* The filesystems the node service makes: ext2, ext3, ext4, xfs ("" asks for the default). */
bool blocknode_fstype_supported(const char *fstype);

#define BLOCKNODE_CONTEXT_FSTYPE "csi.storage.k8s.io/fstype"
#define BLOCKNODE_DEFAULT_FSTYPE "ext4"

/* What a stage of r makes: the filesystem (the capability's, else the volume context's
 * csi.storage.k8s.io/fstype, else ext4; static or r's storage) and mkfs's options from the
 * volume context (params.h's names: blockSize, inodeSize, ...). -EINVAL naming volume_context
 * for options that do not parse or a filesystem that is not made here. */
int blocknode_stage_defaults(const BackendStage *r, const char **ret_fstype,
			     BlockfsMkfsOptions *ret_mkfs, char **ret_error);

/* The mark of the node service's mkfs of a volume (node-use.h: "mkfs"), where a backend keeps
 * it: as last saved, and how a new one is saved, durably (synced before save returns: the mark
 * must survive a crash of the machine), with a message on failure. */
typedef struct BlockMkfsMark {
	NodeMkfs state;
	const char *uuid; /* the UUID of the mark's mkfs (NODE_MKFS_NONE: NULL) */
	int (*save)(void *userdata, NodeMkfs state, const char *fstype, const char *uuid,
		    char **ret_error);
	void *userdata;
} BlockMkfsMark;

/* Makes fstype on dev with mkfs's options (NULL: the tool's defaults) when dev is blank, or
 * when it holds only what an interrupted mkfs under mark left (a signature with the UUID of a
 * "started" mark: wiped and made again with that UUID); the mark is saved "started" with the
 * UUID before mkfs runs, "done" after it succeeded. Anything else on dev is never touched:
 * *ret_found (malloc'ed) says what it holds, for the caller to check; "" when formatted here.
 * Blocks (mkfs). */
int blocknode_format(const char *volume_id, const char *dev, const char *fstype,
		     const BlockfsMkfsOptions *mkfs, const BlockMkfsMark *mark, char **ret_found,
		     char **ret_error);

/* NodeStageVolume: the device (device_get), a filesystem made with mkfs's options (NULL: the
 * tool's defaults) on a blank device (never on one that holds anything), checked, mounted at
 * r->staging_path (r->access.fstype: resolved, not empty). Idempotent. Blocks (mkfs, fsck). */
int blocknode_stage(const BlockNode *n, const BackendStage *r, const BlockfsMkfsOptions *mkfs,
		    char **ret_error);

/* NodeUnstageVolume: unmount the volume's staging mount, remove the directory if made here,
 * release the device. Idempotent. */
int blocknode_unstage(const BlockNode *n, const char *volume_id, const char *staging_path,
		      char **ret_error);

/* NodePublishVolume: bind the staging mount (or the raw device) onto target_path, made here
 * when missing. Idempotent; r->prepare runs every time. */
int blocknode_publish(const BlockNode *n, const BackendPublish *r, char **ret_error);

/* NodeUnpublishVolume: unmount the volume at target_path, remove what was made there. */
int blocknode_unpublish(const BlockNode *n, const char *volume_id, const char *target_path,
			char **ret_error);

/* NodeExpandVolume: the device takes the volume's new size, the filesystem at volume_path
 * (this volume's) grows to fill it. required/limit 0: none. *ret_size: the device's size. */
int blocknode_expand(const BlockNode *n, const char *volume_id, const char *volume_path,
		     uint64_t required, uint64_t limit, uint64_t *ret_size, char **ret_error);

/* Trims the mounted filesystem of the volume (blockfs_trim_fd()) so its device gives the
 * space of deleted files back, under the volume's node lock (a stage or unstage waits for it):
 * the mount is found by the device's number and proved the volume's through the fd trimmed.
 * *ret_trimmed: the bytes the filesystem trimmed. -ENODEV when the volume has no device here,
 * -ENOENT when no filesystem of it is mounted writable. Blocks. */
int blocknode_trim(const BlockNode *n, const char *volume_id, uint64_t *ret_trimmed);

/* NodeGetVolumeStats of the volume at volume_path (this volume's, else -ENOENT). */
int blocknode_stats(const BlockNode *n, const char *volume_id, const char *volume_path,
		    BackendStats *ret, char **ret_error);
