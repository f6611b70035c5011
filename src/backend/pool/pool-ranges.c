/* SPDX-License-Identifier: Apache-2.0 */
/* Changed-block tracking of the pool's snapshots: a snapshot's allocated ranges (SEEK_DATA over
 * its data file) and the ranges where a later snapshot of the same volume differs (FIEMAP's
 * shared extents skipped where the pool's filesystem reflinks, the bytes of the rest compared).
 * Both read the data files only; a snapshot deleted meanwhile stays readable through the file
 * opened. A store snapshot answers from its manifest's chunk list (while it uploads, from its
 * copy in the pool): two manifests compare by their chunks' hashes, no byte read; a data file
 * and a manifest by hashing the file's chunks as an upload would. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fileio.h"
#include "error-util.h"
#include "pool-store.h"
#include "ranges.h"

/* A snapshot a request names, opened: a data file (a local snapshot, or a store snapshot's copy
 * while it uploads) or a store snapshot's manifest. */
typedef struct Side {
	const char *field, *id; /* as the request named it */
	uint64_t size;
	const char *source; /* the ID of the volume it was taken of; "" when unknown */
	PoolSnapshot *snap; /* a data file's record */
	int fd;		    /* the data file; -EBADF for a manifest */
	StoreManifest manifest;
	bool has_manifest;
} Side;

static void side_done(Side *s)
{
	pool_snapshot_free(s->snap);
	if (s->fd >= 0)
		close(s->fd);
	if (s->has_manifest)
		store_manifest_done(&s->manifest);
}

/* Opens the data file of s->snap (local ID local): -ENOENT without a message when it is gone
 * (deleted, or a store snapshot's copy dropped once uploaded, since its record was read). */
static int side_file(PoolBackend *pb, Side *s, const char *local, char **ret_error)
{
	struct stat st;

	int fd = pool_snapshot_data_open(pb->pool, local, O_RDONLY | O_CLOEXEC);
	if (fd == -ENOENT)
		return fd;
	if (fd < 0)
		return errorf(ret_error, fd == -EUCLEAN ? -EUCLEAN : fd,
			      "%s: the data file of snapshot %s cannot be read: %s", s->field,
			      s->id, fd == -EUCLEAN ? "it is no regular file" : strerror(-fd));
	s->fd = fd;
	if (fstat(fd, &st) < 0)
		return errorf(ret_error, negative_errno(), "%s: snapshot %s: %m", s->field, s->id);
	if ((uint64_t)st.st_size < s->snap->size)
		return errorf(ret_error, -EUCLEAN,
			      "%s: snapshot %s is damaged: its data file holds %" PRIu64
			      " bytes of %" PRIu64,
			      s->field, s->id, (uint64_t)st.st_size, s->snap->size);
	s->size = s->snap->size;
	s->source = s->snap->source_volume_id ?: "";
	return 0;
}

/* A store snapshot: its copy while it uploads, else its manifest (secrets: the store's
 * credentials). */
static int side_store(PoolBackend *pb, Side *s, const char *store_id, const Strmap *secrets,
		      char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	Store *store;

	int e = pool_backend_store(pb, secrets, &store, ret_error);
	if (e < 0)
		return e;
	if (pool_snapshot_load(pb->pool, store_id, &s->snap) == 0) {
		if (strmap_get(&s->snap->params, POOL_STORE_KEY) &&
		    (e = side_file(pb, s, store_id, ret_error)) != -ENOENT)
			return e;
		pool_snapshot_free(TAKE_PTR(s->snap)); /* uploaded since: its manifest says */
	}
	e = store_manifest_get(store, store_id, pool_store_deadline(), &s->manifest, &err);
	if (e == -ENOENT)
		return errorf(ret_error, e, "%s: snapshot %s not found: %s", s->field, s->id, err);
	if (e < 0)
		return errorf(ret_error, e, "%s: %s", s->field, err);
	s->has_manifest = true;
	s->size = s->manifest.volume_size;
	s->source = strmap_get(&s->manifest.parameters, POOL_STORE_SOURCE_KEY) ?: "";
	return 0;
}

/* The snapshot a request names in field. */
static int side_open(PoolBackend *pb, const char *field, const char *id, const Strmap *secrets,
		     Side *s, char **ret_error)
{
	const char *store_id = pool_store_id_of(id);
	char local[POOL_ID_MAX];

	*s = (Side){.field = field, .id = id, .fd = -EBADF};
	if (!id || !*id)
		return errorf(ret_error, -EINVAL, "%s: missing", field);
	if (store_id)
		return side_store(pb, s, store_id, secrets, ret_error);
	int e = pool_backend_id_find(pb, POOL_ID_SNAPSHOT, field, id, local, ret_error);
	if (e < 0)
		return e;
	if (pool_snapshot_load(pb->pool, local, &s->snap) < 0 ||
	    (e = side_file(pb, s, local, ret_error)) == -ENOENT)
		return errorf(ret_error, -ENOENT, "%s: snapshot %s not found", field, id);
	return e;
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

/* Whether two snapshots are of one volume: the same ID recorded, or two forms of one local
 * volume's ID. */
static bool same_volume(PoolBackend *pb, const Side *a, const Side *b)
{
	_cleanup_free_ char *e1 = NULL, *e2 = NULL;
	char la[POOL_ID_MAX], lb[POOL_ID_MAX];

	if (!*a->source || !*b->source)
		return false;
	if (strcmp(a->source, b->source) == 0)
		return true;
	return pool_backend_id_local(pb, POOL_ID_VOLUME, "", a->source, la, &e1) == 0 &&
	       pool_backend_id_local(pb, POOL_ID_VOLUME, "", b->source, lb, &e2) == 0 &&
	       strcmp(la, lb) == 0;
}

/* Ranges clipped to [start, end) and to what was added before (chunks of two manifests may
 * overlap when their chunk sizes differ), joined, then to the sink. Offsets come in
 * non-decreasing order. */
typedef struct Clip {
	RangeMerger merger;
	uint64_t start, end;
	uint64_t done; /* the end of the last range added */
} Clip;

static int clip_add(Clip *c, uint64_t offset, uint64_t length)
{
	uint64_t from = MAX(offset, MAX(c->start, c->done));
	uint64_t to = MIN(offset + length, c->end);

	if (from >= to)
		return 0;
	c->done = to;
	return range_merger_add(&c->merger, from, to - from);
}

/* Chunks between checks for a cancelled call. */
#define CHUNKS_PER_CHECK 256

/* A manifest's allocated ranges: its chunks (zero chunks were left out at upload). */
static int manifest_allocated(const StoreManifest *m, const BackendRangesRequest *r, Clip *c)
{
	for (size_t i = 0; i < m->n_chunks; i++) {
		int e;
		if (i % CHUNKS_PER_CHECK == 0 && r->check && (e = r->check(r->userdata)) < 0)
			return e;
		if ((e = clip_add(c, m->chunks[i].offset, m->chunks[i].length)) < 0)
			return e;
	}
	return 0;
}

/* Two manifests: a chunk at an offset in one and not the other, or whose length or hash
 * differs, is reported; one that both list the same is equal; what neither lists is zeros in
 * both. Nothing read. */
static int manifest_delta(const StoreManifest *a, const StoreManifest *b,
			  const BackendRangesRequest *r, Clip *c, uint64_t *ret_compared)
{
	size_t i = 0, j = 0, steps = 0;
	uint64_t compared = 0;
	int e;

	while (i < a->n_chunks || j < b->n_chunks) {
		if (steps++ % CHUNKS_PER_CHECK == 0 && r->check && (e = r->check(r->userdata)) < 0)
			return e;
		const StoreChunkRef *x = i < a->n_chunks ? &a->chunks[i] : NULL;
		const StoreChunkRef *y = j < b->n_chunks ? &b->chunks[j] : NULL;
		if (x && y && x->offset == y->offset) {
			i++, j++;
			compared++;
			if (x->length == y->length && strcmp(x->hash, y->hash) == 0)
				continue;
			e = clip_add(c, x->offset, MAX(x->length, y->length));
		} else if (x && (!y || x->offset < y->offset)) {
			i++;
			e = clip_add(c, x->offset, x->length);
		} else {
			j++;
			e = clip_add(c, y->offset, y->length);
		}
		if (e < 0)
			return e;
	}
	*ret_compared = compared;
	return 0;
}

/* Whether fd holds data in [off, end): SEEK_DATA, its answer kept in *data_at for the next
 * chunks (UINT64_MAX: none after it; a filesystem that cannot say: data everywhere). */
static bool has_data(int fd, uint64_t off, uint64_t end, uint64_t *data_at, bool *known)
{
	if (!*known || *data_at < off) {
		off_t d = lseek(fd, (off_t)off, SEEK_DATA);
		*data_at = d >= 0 ? (uint64_t)d : errno == ENXIO ? UINT64_MAX : off;
		*known = true;
	}
	return *data_at < end;
}

/* A data file (its snapshot file_size bytes) and a manifest of one volume, in the target's
 * [c->start, c->end): the file's chunks, at the manifest's chunk size, hashed as an upload
 * hashes them (a chunk of zeros has no hash: the manifest leaves it out) and compared with the
 * manifest's chunk at that offset. Holes of the file are not read. One chunk-sized buffer. */
static int file_manifest_delta(int fd, uint64_t file_size, const StoreManifest *m,
			       const BackendRangesRequest *r, Clip *c, uint64_t *ret_read)
{
	uint64_t cs = m->chunk_size, data_at = 0, read = 0;
	_cleanup_free_ char *buf = xmalloc(cs);
	bool known = false;
	size_t i = 0;
	int e;

	for (uint64_t off = c->start / cs * cs; off < c->end; off += cs) {
		if (r->check && (e = r->check(r->userdata)) < 0)
			return e;
		uint64_t len = MIN(cs, c->end - off);
		for (; i < m->n_chunks && m->chunks[i].offset < off; i++) /* none: aligned */
			if ((e = clip_add(c, m->chunks[i].offset, m->chunks[i].length)) < 0)
				return e;
		const StoreChunkRef *ref =
			i < m->n_chunks && m->chunks[i].offset == off ? &m->chunks[i++] : NULL;
		char hash[65];
		bool data = off < file_size &&
			    has_data(fd, off, MIN(off + len, file_size), &data_at, &known);
		if (data) {
			size_t n = (size_t)MIN(len, file_size - off);
			if ((e = pread_zero_filled(fd, buf, n, off)) < 0)
				return e;
			memset(buf + n, 0, len - n);
			read += n;
			data = store_chunk_hash(buf, len, hash);
		}
		if (!data && !ref)
			continue; /* zeros in both */
		if (data && ref && ref->length == len && strcmp(hash, ref->hash) == 0)
			continue;
		if ((e = clip_add(c, off, MAX(len, ref ? ref->length : 0))) < 0)
			return e;
	}
	*ret_read = read;
	return 0;
}

int pool_backend_snapshot_allocated(Backend *b, const BackendRangesRequest *r,
				    BackendRangesDone *ret, char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	_cleanup_(side_done) Side s = {.fd = -EBADF};
	FileRangeSink sink = {.range = r->range, .check = r->check, .userdata = r->userdata};

	int e = pool_backend_usable(pb, ret_error);
	if (e < 0 ||
	    (e = side_open(pb, "snapshot_id", r->snapshot_id, r->secrets, &s, ret_error)) < 0 ||
	    (e = start_check(r, r->snapshot_id, s.size, ret_error)) < 0)
		return e;
	if ((e = r->begin(s.size, r->userdata)) < 0)
		return errorf(ret_error, e, "snapshot %s: %s", r->snapshot_id, strerror(-e));
	if (s.fd >= 0)
		e = file_data_ranges(s.fd, r->starting_offset, s.size, &sink);
	else {
		Clip c = {.merger = {.sink = &sink}, .start = r->starting_offset, .end = s.size};
		e = manifest_allocated(&s.manifest, r, &c);
		if (e >= 0)
			e = range_merger_flush(&c.merger);
	}
	if (e < 0)
		return errorf(ret_error, e,
			      "finding the allocated ranges of snapshot %s failed: %s",
			      r->snapshot_id, strerror(-e));
	*ret = (BackendRangesDone){.volume_size = s.size};
	return 0;
}

int pool_backend_snapshot_delta(Backend *b, const BackendRangesRequest *r, BackendRangesDone *ret,
				char **ret_error)
{
	PoolBackend *pb = pool_of(b);
	_cleanup_(side_done) Side base = {.fd = -EBADF}, target = {.fd = -EBADF};
	FileRangeSink sink = {.range = r->range, .check = r->check, .userdata = r->userdata};
	BackendRangesDone done = {};
	FileDeltaStats stats = {};

	int e = pool_backend_usable(pb, ret_error);
	if (e < 0 ||
	    (e = side_open(pb, "base_snapshot_id", r->base_snapshot_id, r->secrets, &base,
			   ret_error)) < 0 ||
	    (e = side_open(pb, "target_snapshot_id", r->snapshot_id, r->secrets, &target,
			   ret_error)) < 0)
		return e;
	if (!same_volume(pb, &base, &target))
		return errorf(ret_error, -EINVAL,
			      "base_snapshot_id: snapshot %s is of volume %s, target_snapshot_id: "
			      "snapshot %s of volume %s: a delta is between two snapshots of one "
			      "volume",
			      r->base_snapshot_id, *base.source ? base.source : "?", r->snapshot_id,
			      *target.source ? target.source : "?");
	if ((e = start_check(r, r->snapshot_id, target.size, ret_error)) < 0)
		return e;
	if ((e = r->begin(target.size, r->userdata)) < 0)
		return errorf(ret_error, e, "snapshot %s: %s", r->snapshot_id, strerror(-e));
	Clip c = {.merger = {.sink = &sink}, .start = r->starting_offset, .end = target.size};
	if (base.fd >= 0 && target.fd >= 0) {
		/* A base smaller than the target (the volume grew between them): its data file's
		 * bytes beyond its size are not the snapshot's, and read as zeros. */
		e = file_delta_ranges(base.fd, target.fd, r->starting_offset, target.size, 0, &sink,
				      &stats);
		done = (BackendRangesDone){
			.reported = stats.changed,
			.read = stats.compared,
			.shared = stats.shared,
			.holes = stats.holes,
			.extents = stats.fiemap,
		};
	} else if (base.fd < 0 && target.fd < 0) {
		e = manifest_delta(&base.manifest, &target.manifest, r, &c, &done.chunks);
		done.manifests = true;
	} else {
		const Side *file = base.fd >= 0 ? &base : &target;
		const Side *store = base.fd >= 0 ? &target : &base;
		e = file_manifest_delta(file->fd, file->size, &store->manifest, r, &c, &done.read);
		done.manifests = true;
	}
	if (e >= 0 && done.manifests) {
		e = range_merger_flush(&c.merger);
		done.reported = c.merger.emitted;
	}
	if (e < 0)
		return errorf(ret_error, e, "comparing snapshot %s with snapshot %s failed: %s",
			      r->snapshot_id, r->base_snapshot_id, strerror(-e));
	done.volume_size = target.size;
	*ret = done;
	return 0;
}
