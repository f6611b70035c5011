/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's gauges, read from the pool when metrics are scraped (at most once a second, see
 * metrics.h): its space from the ledger, the data files and statvfs (pool_space()), objects and
 * uses from their records, loop devices from the kernel. Counted by every process on the pool
 * alike, so a node and a controller process on one pool report the same pool. */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "loopdev.h"
#include "metrics.h"
#include "pool-backend.h"

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
static void count_uses(PoolBackend *pb, BackendStatus *s)
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
		}
		node_use_done(&u);
	}
	strv_free(ids);
}

static int64_t count_loops(Pool *p)
{
	_cleanup_free_ char *canon = realpath(pool_path(p), NULL);
	LoopInfo *list = NULL;
	size_t n = 0;
	int64_t found = -1;

	if (canon && loop_list_for_dir(canon, &list, &n) == 0)
		found = (int64_t)n;
	loop_info_array_free(list, n);
	return found;
}

/* One look at the pool: its space (for all its byte figures at once, so they agree with each
 * other and with GetCapacity: none when the ledger cannot be read), objects, this node's uses
 * and loop devices. What its gauges and its status show. */
int pool_backend_status(Backend *b, const void *r, BackendStatus *ret, char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	BackendStatus s = {.staged = -1, .published = -1};
	PoolSpace space;

	(void)r;
	(void)ret_error;
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
		count_uses(pb, &s);
	s.devices = count_loops(pb->pool);
	*ret = s;
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
	BackendStatus s;

	(void)pool_backend_status(&pb->base, NULL, &s, NULL);
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
