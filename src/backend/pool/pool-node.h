/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's node service: a volume's data file becomes a loop device, formatted and mounted
 * at the staging path (or left raw for block volumes), then bound into each target. It is the
 * block-device node service (blocknode.h, which says what is proved before anything is touched,
 * and the errors) over the pool's loop devices and its use records (volumes/<id>/node.json under
 * node.lock), so a DeleteVolume on the pool sees what the node service records. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "loopdev.h"
#include "pool.h"
#include "time-util.h"

/* Each call takes the volume's local ID (its directory's name, which the pool's files and paths
 * use) and the ID the request named it by (r->volume_id, volume_id: what its messages name). */

/* NodeStageVolume: attach, make a filesystem on a blank device (never on one that holds
 * anything) with mkfs's options, check it, mount it at staging_path (r->access.fstype:
 * resolved, not empty). Idempotent. Blocks (mkfs, fsck). */
int pool_node_stage(Pool *p, const char *node_id, const char *local, const BackendStage *r,
		    const BlockfsMkfsOptions *mkfs, char **ret_error);

/* NodeUnstageVolume: unmount the volume's staging mount, remove the directory if made here,
 * detach. Idempotent. */
int pool_node_unstage(Pool *p, const char *local, const char *volume_id, const char *staging_path,
		      char **ret_error);

/* NodePublishVolume: bind the staging mount (or the raw device) onto target_path, made here
 * when missing. Idempotent; r->prepare runs every time. */
int pool_node_publish(Pool *p, const char *node_id, const char *local, const BackendPublish *r,
		      char **ret_error);

/* NodeUnpublishVolume: unmount the volume at target_path, remove what was made there. */
int pool_node_unpublish(Pool *p, const char *local, const char *volume_id, const char *target_path,
			char **ret_error);

/* NodeExpandVolume: the device takes the data file's new size, the filesystem at volume_path
 * (this volume's) grows to fill it. required/limit 0: none. *ret_size: the device's size. */
int pool_node_expand(Pool *p, const char *local, const char *volume_id, const char *volume_path,
		     uint64_t required, uint64_t limit, uint64_t *ret_size, char **ret_error);

/* NodeGetVolumeStats of the volume at volume_path (this volume's, else -ENOENT). */
int pool_node_stats(Pool *p, const char *local, const char *volume_id, const char *volume_path,
		    BackendStats *ret, char **ret_error);

/* Trims the filesystem of every volume staged on this machine (blocknode_trim()), so the
 * space of files deleted in them goes back to the pool: their loop devices punch holes in the
 * data files. Returns how many were trimmed, *ret_trimmed the bytes their filesystems
 * trimmed. Volumes not mounted, or whose devices cannot discard, are skipped. Blocks. */
int pool_node_trim_all(Pool *p, uint64_t *ret_trimmed);

/* The volume a loop device's backing file is the data file of: "<volumes>/<id>/data", volumes
 * the canonical path of the pool's volumes/. False for any other device. */
bool pool_node_loop_volume(const char *volumes, const LoopInfo *l, char ret_id[POOL_ID_MAX]);

/* Notes the I/O counters of a loop device just attached over a volume: the volume's I/O
 * metrics count from there (pool-metrics.c). */
void pool_metrics_device_attached(const char *devpath);

/* 0 when the pool's filesystem takes direct I/O (a file in tmp/ opens with O_DIRECT),
 * -EOPNOTSUPP when it refuses it: loop devices over it then work buffered. */
int pool_node_direct_io_check(Pool *p);

/* Runs pool_node_trim_all() on p every interval in a thread of its own, until
 * pool_trimmer_stop() (which waits for a trim under way to end, then frees it). */
typedef struct PoolTrimmer PoolTrimmer;
int pool_trimmer_start(Pool *p, usec_t interval, PoolTrimmer **ret);
void pool_trimmer_stop(PoolTrimmer *t);
