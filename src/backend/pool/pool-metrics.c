/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's gauges, read from the pool when metrics are scraped (at most once a second, see
 * metrics.h): its space from the ledger, the data files and statvfs (pool_space()), objects and
 * uses from their records, loop devices from the kernel. Counted by every process on the pool
 * alike, so a node and a controller process on one pool report the same pool.
 *
 * A node process also reports each volume staged on it: the kernel's I/O counters of its loop
 * device (/sys/block/loopN/stat), labelled by volume_id. The kernel keeps a loop device's
 * counters across detach and attach, so they hold whatever the device did before it was the
 * volume's: each series counts from a baseline, the counters read when this process attached
 * the device, or when it first saw it attached (a device staged before a restart). Like every
 * counter of the process they start again with it, and with a new stage; their series go with
 * the stage. Prometheus' rate() takes each new start as a counter reset.
 *
 * The kernel counts I/O per block device, and a directory volume has none of its own: for each
 * directory volume of the pool the node process reports what its project quota counts instead
 * (bytes and inodes used, and the limits), staged or not, as the filesystem holds them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loopdev.h"
#include "metrics.h"
#include "alloc.h"
#include "hashmap.h"
#include "pool-backend.h"
#include "pool-node.h"
#include "pool-store.h"

#define POOL_GAUGE(var, name, help) METRIC_DEFINE_FULL(var, METRIC_GAUGE, name, help, true, NULL, 0)

POOL_GAUGE(capacity, "volplug_pool_capacity_bytes",
	   "Bytes the pool's filesystem has for it: its free bytes plus what the pool's files "
	   "hold, or --pool-capacity when less; it may provision this times the overprovision "
	   "ratio");
POOL_GAUGE(ratio, "volplug_pool_overprovision_ratio",
	   "The pool may provision its capacity times this (--overprovision-ratio; above 1: thin "
	   "provisioning)");
POOL_GAUGE(provisioned, "volplug_pool_provisioned_bytes",
	   "Bytes provisioned: the sizes of every volume and snapshot (above the capacity when "
	   "thin provisioned)");
POOL_GAUGE(allocated, "volplug_pool_allocated_bytes",
	   "Bytes the data files of volumes and snapshots really hold on the filesystem (what was "
	   "written and not trimmed)");
POOL_GAUGE(available, "volplug_pool_available_bytes",
	   "Bytes still free to provision (what GetCapacity reports; 0 when the filesystem is "
	   "full for real)");
POOL_GAUGE(fs_free, "volplug_pool_filesystem_free_bytes",
	   "Bytes free on the filesystem that holds the pool (its files are sparse: this is what "
	   "they can still fill)");
POOL_GAUGE(volumes, "volplug_pool_volumes", "Volumes in the pool, damaged ones included");
POOL_GAUGE(snapshots, "volplug_pool_snapshots", "Snapshots in the pool");
POOL_GAUGE(staged, "volplug_node_volumes_staged",
	   "Pool volumes staged on this node (NodeStageVolume done, NodeUnstageVolume not yet)");
POOL_GAUGE(
	published, "volplug_node_volumes_published",
	"Publish targets of pool volumes on this node (NodePublishVolume done, not unpublished)");
POOL_GAUGE(loops, "volplug_pool_loop_devices",
	   "Loop devices attached over the pool's files (the kernel's count)");

METRIC_DEFINE_FULL(store_info, METRIC_GAUGE, "volplug_store_info",
		   "1 when volplugd has a snapshot store (--store-bucket), labelled with its "
		   "endpoint (\"\": AWS S3), bucket and prefix; its figures are the other "
		   "volplug_store_* families",
		   true, NULL, 0, "endpoint", "bucket", "prefix");

#define VOLUME_COUNTER(var, name, help) \
	METRIC_DEFINE_FULL(var, METRIC_COUNTER, name, help, true, NULL, 0, "volume_id")

VOLUME_COUNTER(vol_reads, "volplug_volume_reads_total",
	       "Reads completed by the loop device of a volume staged on this node");
VOLUME_COUNTER(vol_read_bytes, "volplug_volume_read_bytes_total",
	       "Bytes read by the loop device of a volume staged on this node");
VOLUME_COUNTER(vol_read_seconds, "volplug_volume_read_seconds_total",
	       "Seconds spent by reads of a staged volume's loop device, summed over the reads");
VOLUME_COUNTER(vol_writes, "volplug_volume_writes_total",
	       "Writes completed by the loop device of a volume staged on this node");
VOLUME_COUNTER(vol_written_bytes, "volplug_volume_written_bytes_total",
	       "Bytes written by the loop device of a volume staged on this node");
VOLUME_COUNTER(vol_write_seconds, "volplug_volume_write_seconds_total",
	       "Seconds spent by writes of a staged volume's loop device, summed over the writes");
VOLUME_COUNTER(
	vol_busy_seconds, "volplug_volume_io_busy_seconds_total",
	"Seconds a staged volume's loop device had I/O in flight (its utilisation: the rate)");
METRIC_DEFINE_FULL(vol_in_flight, METRIC_GAUGE, "volplug_volume_io_in_flight",
		   "Requests issued to a staged volume's loop device and not yet completed", true,
		   NULL, 0, "volume_id");
METRIC_DEFINE_FULL(vol_device, METRIC_GAUGE, "volplug_volume_device_info",
		   "1 for each volume staged on this node, labelled with its loop device", true,
		   NULL, 0, "volume_id", "device");

#define VOLUME_GAUGE(var, name, help) \
	METRIC_DEFINE_FULL(var, METRIC_GAUGE, name, help, true, NULL, 0, "volume_id")

VOLUME_GAUGE(quota_used, "volplug_volume_quota_used_bytes",
	     "Bytes the project quota of a directory volume of the pool counts against it");
VOLUME_GAUGE(quota_limit, "volplug_volume_quota_limit_bytes",
	     "The hard limit of bytes of a directory volume's project quota: its size");
VOLUME_GAUGE(quota_inodes, "volplug_volume_quota_used_inodes",
	     "Inodes (files, directories, links) the project quota of a directory volume counts");
VOLUME_GAUGE(quota_inode_limit, "volplug_volume_quota_limit_inodes",
	     "The hard limit of inodes of a directory volume's project quota, when it has one");

#define SECTOR 512.0

static int64_t count_ids(Pool *p, int (*list)(Pool *, char ***, size_t *))
{
	char **ids = NULL;
	size_t n = 0;
	int r = list(p, &ids, &n);

	strv_free(ids);
	return r < 0 ? -1 : (int64_t)n;
}

/* The node's uses, from each volume's record: written atomically, so reading one without its
 * lock sees the record before or after a change, never half of it. */
static void count_uses(PoolBackend *pb, BackendStatus *s, Hashmap *staged_ids)
{
	char **ids = NULL;
	size_t n = 0;

	if (pool_volume_list(pb->pool, &ids, &n) < 0)
		return;
	s->staged = s->published = 0;
	for (size_t i = 0; i < n; i++) {
		NodeUse u = {};
		if (pool_volume_use_load(pb->pool, ids[i], &u) == 0 && u.node &&
		    strcmp(u.node, pb->node_id) == 0) {
			s->staged += u.staging.path != NULL;
			s->published += (int64_t)u.n_targets;
			if (u.staging.path && staged_ids)
				(void)hashmap_put(staged_ids, ids[i],
						  pool_backend_id(ids[i], pb->node_part));
		}
		node_use_done(&u);
	}
	strv_free(ids);
}

/* The baselines: loop device number -> the file it was bound to and its counters then, one per
 * loop device over a volume of a pool of this process (attached by it or seen by its
 * collector): at most one per loop device of the machine, replaced when the device is bound to
 * another file, dropped when the collector no longer sees it bound. */
typedef struct Baseline {
	char *backing_file;
	LoopStat stat;
} Baseline;

static pthread_mutex_t baselines_lock = PTHREAD_MUTEX_INITIALIZER;
static Hashmap *baselines;

static void baseline_free(void *v)
{
	Baseline *b = v;

	free(b->backing_file);
	free(b);
}

/* Sets the baseline of l to st. Hold baselines_lock. */
static Baseline *baseline_put(const LoopInfo *l, const LoopStat *st)
{
	char key[16];

	snprintf(key, sizeof(key), "%u", l->number);
	if (!baselines)
		baselines = hashmap_new(baseline_free);
	Baseline *b = hashmap_remove(baselines, key);
	if (b)
		baseline_free(b);
	b = xnew0(Baseline, 1);
	b->backing_file = xstrdup(l->backing_file);
	b->stat = *st;
	(void)hashmap_put(baselines, key, b);
	return b;
}

/* The baseline of l, if it has one for the file it is bound to. Hold baselines_lock. */
static Baseline *baseline_get(const LoopInfo *l)
{
	char key[16];

	snprintf(key, sizeof(key), "%u", l->number);
	Baseline *b = baselines ? hashmap_get(baselines, key) : NULL;
	return b && strcmp(b->backing_file, l->backing_file) == 0 ? b : NULL;
}

void pool_metrics_device_attached(const char *devpath)
{
	LoopInfo info = {};
	LoopStat st;

	if (loop_get_info(devpath, &info) == 0 && loop_get_stat(info.number, &st) == 0) {
		pthread_mutex_lock(&baselines_lock);
		(void)baseline_put(&info, &st);
		pthread_mutex_unlock(&baselines_lock);
	}
	loop_info_done(&info);
}

/* What the device did since its baseline, taken now when it has none; a counter below its
 * baseline (the device was removed and made again) makes the baseline zero. */
static void since_baseline(const LoopInfo *l, LoopStat *st)
{
	pthread_mutex_lock(&baselines_lock);
	Baseline *base = baseline_get(l) ?: baseline_put(l, st);
	LoopStat *b = &base->stat;
	if (st->reads < b->reads || st->read_sectors < b->read_sectors ||
	    st->read_ms < b->read_ms || st->writes < b->writes ||
	    st->write_sectors < b->write_sectors || st->write_ms < b->write_ms ||
	    st->io_ms < b->io_ms)
		*b = (LoopStat){};
	st->reads -= b->reads;
	st->read_sectors -= b->read_sectors;
	st->read_ms -= b->read_ms;
	st->writes -= b->writes;
	st->write_sectors -= b->write_sectors;
	st->write_ms -= b->write_ms;
	st->io_ms -= b->io_ms;
	pthread_mutex_unlock(&baselines_lock);
}

/* Drops the baselines of devices not in list (detached, or bound to another file). */
static void baselines_prune(const LoopInfo *list, size_t n)
{
	_cleanup_(hashmap_freep) Hashmap *keep = hashmap_new(baseline_free);

	pthread_mutex_lock(&baselines_lock);
	for (size_t i = 0; baselines && i < n; i++) {
		char key[16];
		if (!baseline_get(&list[i]))
			continue;
		snprintf(key, sizeof(key), "%u", list[i].number);
		(void)hashmap_put(keep, key, hashmap_remove(baselines, key));
	}
	hashmap_free(baselines);
	baselines = TAKE_PTR(keep);
	pthread_mutex_unlock(&baselines_lock);
}

/* One volume's I/O: from its loop device's counters, when they can be read. */
static void count_volume_io(const char *id, const LoopInfo *l)
{
	LoopStat st;

	if (loop_get_stat(l->number, &st) < 0)
		return;
	since_baseline(l, &st);
	metric_add(&vol_reads, (double)st.reads, id);
	metric_add(&vol_read_bytes, (double)st.read_sectors * SECTOR, id);
	metric_add(&vol_read_seconds, (double)st.read_ms / 1000, id);
	metric_add(&vol_writes, (double)st.writes, id);
	metric_add(&vol_written_bytes, (double)st.write_sectors * SECTOR, id);
	metric_add(&vol_write_seconds, (double)st.write_ms / 1000, id);
	metric_add(&vol_busy_seconds, (double)st.io_ms / 1000, id);
	metric_add(&vol_in_flight, (double)st.in_flight, id);
	metric_add(&vol_device, 1, id, l->devpath);
}

/* The pool's loop devices; the I/O of those over volumes in staged_ids (pool ID -> the ID the
 * CSI layer sees, which labels the series; NULL: none). */
static int64_t count_loops(Pool *p, const Hashmap *staged_ids)
{
	_cleanup_free_ char *canon = realpath(pool_path(p), NULL);
	LoopInfo *list = NULL;
	size_t n = 0;

	if (!canon || loop_list_for_dir(canon, &list, &n) < 0)
		return -1;
	_cleanup_free_ char *vdir = xasprintf("%s/volumes", canon);
	for (size_t i = 0; staged_ids && i < n; i++) {
		char id[POOL_ID_MAX];
		/* A device over a volume staged here: on a pool shared by several nodes, another
		 * node's devices are not this node's to report. */
		const char *csi_id = pool_node_loop_volume(vdir, &list[i], id)
					     ? hashmap_get(staged_ids, id)
					     : NULL;
		if (csi_id)
			count_volume_io(csi_id, &list[i]);
	}
	/* Only a node process (staged_ids) keeps baselines: the controller has none to drop. */
	if (staged_ids)
		baselines_prune(list, n);
	loop_info_array_free(list, n);
	return (int64_t)n;
}

/* Each directory volume's quota figures, labelled by the ID the CSI layer sees. Read without
 * locks: a volume being deleted may still show, once. */
static void count_dirvols(PoolBackend *pb)
{
	char **ids = NULL;
	size_t n = 0;

	if (pool_volume_list(pb->pool, &ids, &n) < 0)
		return;
	for (size_t i = 0; i < n; i++) {
		QuotaUsage u;
		if (pool_dirvol_usage(pb->pool, ids[i], &u) <= 0)
			continue;
		_cleanup_free_ char *id = pool_backend_id(ids[i], pb->node_part);
		metric_add(&quota_used, (double)u.bytes_used, id);
		metric_add(&quota_limit, (double)u.bytes_limit, id);
		metric_add(&quota_inodes, (double)u.inodes_used, id);
		if (u.inodes_limit)
			metric_add(&quota_inode_limit, (double)u.inodes_limit, id);
	}
	strv_free(ids);
}

/* One look at the pool: its space (for all its byte figures at once, so they agree with each
 * other and with GetCapacity: none when the ledger cannot be read), objects, this node's uses
 * (the volumes staged here into staged_ids when not NULL) and loop devices (with the I/O of
 * those of staged_ids). What its gauges and its status show. */
static void pool_look(PoolBackend *pb, BackendStatus *ret, Hashmap *staged_ids)
{
	BackendStatus s = {.staged = -1, .published = -1};
	PoolSpace space;

	s.path = xstrdup(pool_path(pb->pool));
	if (pool_space(pb->pool, &space) >= 0) {
		s.has_space = true;
		s.capacity = space.capacity;
		s.overprovision = space.overprovision;
		s.provisioned = space.provisioned;
		s.allocated = space.allocated;
		s.available = pool_space_available(&space);
		s.fs_free = space.fs_free;
	}
	s.volumes = count_ids(pb->pool, pool_volume_list);
	s.snapshots = count_ids(pb->pool, pool_snapshot_list);
	if (*pb->node_id)
		count_uses(pb, &s, staged_ids);
	s.devices = count_loops(pb->pool, staged_ids);
	*ret = s;
}

int pool_backend_status(Backend *b, const void *r, BackendStatus *ret, char **ret_error)
{
	(void)r;
	(void)ret_error;
	pool_look(pool_of(b), ret, NULL);
	return 0;
}

static void add_count(MetricFamily *f, int64_t v)
{
	if (v >= 0)
		metric_add(f, (double)v);
}

static void pool_collect(void *userdata)
{
	PoolBackend *pb = userdata;
	_cleanup_(hashmap_freep) Hashmap *staged_ids = *pb->node_id ? hashmap_new(free) : NULL;
	BackendStatus s;

	pool_look(pb, &s, staged_ids);
	/* The byte gauges only when the ledger is read: a pool that cannot say has none. */
	if (s.has_space) {
		metric_add(&capacity, (double)s.capacity);
		metric_add(&ratio, s.overprovision);
		metric_add(&provisioned, (double)s.provisioned);
		metric_add(&allocated, (double)s.allocated);
		metric_add(&available, (double)s.available);
		metric_add(&fs_free, (double)s.fs_free);
	}
	add_count(&volumes, s.volumes);
	add_count(&snapshots, s.snapshots);
	add_count(&staged, s.staged);
	add_count(&published, s.published);
	add_count(&loops, s.devices);
	if (pb->serves_node)
		count_dirvols(pb);
	/* Set once at start, never changed: read without the store's lock. */
	if (pb->store)
		metric_set(&store_info, 1, pb->store->endpoint ?: "", pb->store->bucket,
			   pb->store->prefix);
	backend_status_done(&s);
}

void pool_metrics_start(PoolBackend *pb)
{
	metrics_collector_add(pool_collect, pb);
}

void pool_metrics_stop(PoolBackend *pb)
{
	metrics_collector_remove(pool_collect, pb);
}
