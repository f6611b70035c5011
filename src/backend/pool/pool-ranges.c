/* SPDX-License-Identifier: Apache-2.0 */
/* Changed-block tracking of the pool's snapshots: a snapshot's allocated ranges (SEEK_DATA over
 * its data file) and the ranges where a later snapshot of the same volume differs (FIEMAP's
 * shared extents skipped where the pool's filesystem reflinks, the bytes of the rest compared).
 * Both read the data files only; a snapshot deleted meanwhile stays readable through the file
 * opened. Store snapshots (src/store) would answer from their manifests' chunk lists. */
#include <fcntl.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "error-util.h"
#include "pool-backend.h"
#include "ranges.h"

/* A snapshot a request names (field), its record and its data file opened for reading. */
static int snapshot_open(PoolBackend *pb, const char *field, const char *id, PoolSnapshot **ret,
			 int *ret_fd, char **ret_error)
{
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	char local[POOL_ID_MAX];
	struct stat st;

	if (!id || !*id)
		return errorf(ret_error, -EINVAL, "%s: missing", field);
	int e = pool_backend_id_find(pb, POOL_ID_SNAPSHOT, field, id, local, ret_error);
	if (e < 0)
		return e;
	if (pool_snapshot_load(pb->pool, local, &s) < 0)
		return errorf(ret_error, -ENOENT, "%s: snapshot %s not found", field, id);
	_cleanup_close_ int fd = pool_snapshot_data_open(pb->pool, local, O_RDONLY);
	if (fd == -ENOENT) /* deleted since its record was read */
		return errorf(ret_error, -ENOENT, "%s: snapshot %s not found", field, id);
	if (fd < 0)
		return errorf(ret_error, fd == -EUCLEAN ? -EUCLEAN : fd,
			      "%s: the data file of snapshot %s cannot be read: %s", field, id,
			      fd == -EUCLEAN ? "it is no regular file" : strerror(-fd));
	if (fstat(fd, &st) < 0)
		return errorf(ret_error, negative_errno(), "%s: snapshot %s: %m", field, id);
	if ((uint64_t)st.st_size < s->size)
		return errorf(ret_error, -EUCLEAN,
			      "%s: snapshot %s is damaged: its data file holds %" PRIu64
			      " bytes of %" PRIu64,
			      field, id, (uint64_t)st.st_size, s->size);
	*ret = TAKE_PTR(s);
	*ret_fd = TAKE_FD(fd);
	return 0;
}

static int start_check(const BackendRangesRequest *r, const char *id, uint64_t size,
		       char **ret_error)
{
	if (r->starting_offset > size)
		return errorf(ret_error, -ERANGE,
			      "starting_offset: %" PRIu64 " is beyond the %" PRIu64
			      " bytes of snapshot %s",
			      r->starting_offset, size, id);
	return 0;
}

/* The local ID of the volume a snapshot was taken of ("" when its record names none). */
static void source_local(PoolBackend *pb, const PoolSnapshot *s, char ret[POOL_ID_MAX])
{
	_cleanup_free_ char *ignored = NULL;

	if (!s->source_volume_id ||
	    pool_backend_id_local(pb, POOL_ID_VOLUME, "", s->source_volume_id, ret, &ignored) < 0)
		ret[0] = 0;
}

int pool_backend_snapshot_allocated(Backend *b, const BackendRangesRequest *r,
				    BackendRangesDone *ret, char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	_cleanup_(pool_snapshot_freep) PoolSnapshot *s = NULL;
	_cleanup_close_ int fd = -EBADF;
	FileRangeSink sink = {.range = r->range, .check = r->check, .userdata = r->userdata};

	int e = pool_backend_usable(pb, ret_error);
	if (e < 0 ||
	    (e = snapshot_open(pb, "snapshot_id", r->snapshot_id, &s, &fd, ret_error)) < 0 ||
	    (e = start_check(r, r->snapshot_id, s->size, ret_error)) < 0)
		return e;
	if ((e = r->begin(s->size, r->userdata)) < 0)
		return errorf(ret_error, e, "snapshot %s: %s", r->snapshot_id, strerror(-e));
	e = file_data_ranges(fd, r->starting_offset, s->size, &sink);
	if (e < 0)
		return errorf(ret_error, e,
			      "finding the allocated ranges of snapshot %s failed: %s",
			      r->snapshot_id, strerror(-e));
	*ret = (BackendRangesDone){.volume_size = s->size};
	return 0;
}

int pool_backend_snapshot_delta(Backend *b, const BackendRangesRequest *r, BackendRangesDone *ret,
				char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	_cleanup_(pool_snapshot_freep) PoolSnapshot *base = NULL, *target = NULL;
	_cleanup_close_ int base_fd = -EBADF, target_fd = -EBADF;
	FileRangeSink sink = {.range = r->range, .check = r->check, .userdata = r->userdata};
	char base_volume[POOL_ID_MAX], target_volume[POOL_ID_MAX];
	FileDeltaStats stats;

	int e = pool_backend_usable(pb, ret_error);
	if (e < 0 ||
	    (e = snapshot_open(pb, "base_snapshot_id", r->base_snapshot_id, &base, &base_fd,
			       ret_error)) < 0 ||
	    (e = snapshot_open(pb, "target_snapshot_id", r->snapshot_id, &target, &target_fd,
			       ret_error)) < 0)
		return e;
	source_local(pb, base, base_volume);
	source_local(pb, target, target_volume);
	if (!base_volume[0] || strcmp(base_volume, target_volume) != 0)
		return errorf(ret_error, -EINVAL,
			      "base_snapshot_id: snapshot %s is of volume %s, target_snapshot_id: "
			      "snapshot %s of volume %s: a delta is between two snapshots of one "
			      "volume",
			      r->base_snapshot_id, base->source_volume_id ?: "?", r->snapshot_id,
			      target->source_volume_id ?: "?");
	if ((e = start_check(r, r->snapshot_id, target->size, ret_error)) < 0)
		return e;
	if ((e = r->begin(target->size, r->userdata)) < 0)
		return errorf(ret_error, e, "snapshot %s: %s", r->snapshot_id, strerror(-e));
	/* A base smaller than the target (the volume grew between them): its data file's bytes
	 * beyond its size are not the snapshot's, and read as zeros. */
	e = file_delta_ranges(base_fd, target_fd, r->starting_offset, target->size, 0, &sink,
			      &stats);
	if (e < 0)
		return errorf(ret_error, e, "comparing snapshot %s with snapshot %s failed: %s",
			      r->snapshot_id, r->base_snapshot_id, strerror(-e));
	*ret = (BackendRangesDone){
		.volume_size = target->size,
		.reported = stats.changed,
		.read = stats.compared,
		.shared = stats.shared,
		.holes = stats.holes,
		.extents = stats.fiemap,
	};
	return 0;
}
