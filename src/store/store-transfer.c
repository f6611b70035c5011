/* SPDX-License-Identifier: Apache-2.0 */
/* Upload of a file's allocated ranges, and restore into a sparse file: chunk by chunk, by a
 * few threads each with its own buffers. */
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "alloc.h"
#include "digest.h"
#include "dlopen-util.h"
#include "fileio.h"
#include "failpoint.h"
#include "store-internal.h"

/* Loaded when a store is made (store_new()), not linked: 92 KiB of the resident set of a
 * daemon without one. */
#define LIBZSTD "libzstd.so.1"

static struct {
	__typeof__(ZSTD_compressBound) *compressBound;
	__typeof__(ZSTD_compress) *compress;
	__typeof__(ZSTD_isError) *isError;
	__typeof__(ZSTD_getErrorName) *getErrorName;
	__typeof__(ZSTD_getFrameContentSize) *getFrameContentSize;
	__typeof__(ZSTD_decompress) *decompress;
} zstd;

static const DlSym zstd_syms[] = {
	DL_SYM(zstd, compressBound, "ZSTD_"),
	DL_SYM(zstd, compress, "ZSTD_"),
	DL_SYM(zstd, isError, "ZSTD_"),
	DL_SYM(zstd, getErrorName, "ZSTD_"),
	DL_SYM(zstd, getFrameContentSize, "ZSTD_"),
	DL_SYM(zstd, decompress, "ZSTD_"),
};

static DlLibrary zstd_library = DL_LIBRARY(LIBZSTD, zstd_syms);

int store_zstd_load(char **ret_error)
{
	return dl_library_load(&zstd_library, ret_error);
}

static bool all_zero(const char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

bool store_chunk_hash(const void *data, size_t len, char ret_hash[65])
{
	if (all_zero(data, len))
		return false;
	digest_sha256_hex(data, len, ret_hash);
	return true;
}

/* The indices of the chunks that hold allocated bytes, in order. */
static int data_chunks(int fd, uint64_t size, size_t chunk, uint64_t **ret, size_t *ret_n)
{
	uint64_t *idx = NULL;
	size_t n = 0, cap = 0;
	off_t off = 0;

	while ((uint64_t)off < size) {
		off_t d = lseek(fd, off, SEEK_DATA), h;
		if (d < 0 && errno == ENXIO)
			break;
		if (d < 0 && errno == EINVAL) { /* no SEEK_DATA here: all of it is data */
			d = off;
			h = (off_t)size;
		} else if (d < 0) {
			free(idx);
			return -errno;
		} else {
			h = lseek(fd, d, SEEK_HOLE);
			if (h < 0) {
				free(idx);
				return -errno;
			}
		}
		if ((uint64_t)d >= size)
			break;
		h = (off_t)MIN((uint64_t)h, size);
		for (uint64_t i = (uint64_t)d / chunk; i <= ((uint64_t)h - 1) / chunk; i++) {
			if (n > 0 && idx[n - 1] >= i)
				continue;
			if (n == cap) {
				cap = cap ? cap * 2 : 64;
				idx = xrealloc(idx, cap * sizeof(*idx));
			}
			idx[n++] = i;
		}
		off = h;
	}
	*ret = idx;
	*ret_n = n;
	return 0;
}

/* ---- upload ---- */

typedef struct Upload {
	Store *s;
	int fd;
	const char *id;
	uint64_t size;
	usec_t deadline;
	const uint64_t *idx;
	size_t n_idx;
	bool dedup; /* trust HEAD: no collection was running when the intent went up */
	const atomic_bool *cancel;
	const char *intent; /* the intent's body */
	int base_fd;	    /* -EBADF: no base */
	const StoreManifest *base;
	pthread_mutex_t lock; /* guards the fields below */
	size_t next;
	StoreChunkRef *refs; /* one per idx; hash "" for a zero chunk */
	int error;
	char *message;
	usec_t renewed; /* CLOCK_MONOTONIC */
	StoreUploadStats stats;
} Upload;

static void upload_set_error(Upload *u, int r, char *message)
{
	pthread_mutex_lock(&u->lock);
	if (u->error == 0) {
		u->error = r;
		u->message = message;
		message = NULL;
	}
	pthread_mutex_unlock(&u->lock);
	free(message);
}

static int put_chunk(Upload *u, const char *key, const char *data, size_t len, char **ret_error)
{
	Store *s = u->s;
	int r;

	if (len <= s->multipart_threshold) {
		/* While a collection runs, an old copy may be about to go: put over it. */
		r = s3_put(s->s3, key, data, len, u->dedup, u->deadline, ret_error);
		return r == -EEXIST ? 1 : r; /* another upload put the same bytes first */
	}
	_cleanup_free_ char *upload_id = NULL;
	size_t part = (size_t)8 << 20, n = (len + part - 1) / part;
	char **etags = xnew0(char *, n);
	r = s3_multipart_create(s->s3, key, u->deadline, &upload_id, ret_error);
	for (size_t i = 0; r == 0 && i < n; i++)
		r = s3_multipart_put(s->s3, key, upload_id, (unsigned)i + 1, data + i * part,
				     MIN(part, len - i * part), u->deadline, &etags[i], ret_error);
	if (r == 0)
		r = s3_multipart_complete(s->s3, key, upload_id, (const char *const *)etags,
					  (unsigned)n, u->deadline, ret_error);
	if (r < 0 && upload_id)
		(void)s3_multipart_abort(s->s3, key, upload_id, u->deadline, NULL);
	for (size_t i = 0; i < n; i++)
		free(etags[i]);
	free(etags);
	return r;
}

/* ---- changed ranges ---- */

#define EXTENTS_MAX 32

typedef struct Extents {
	struct fiemap map;
	struct fiemap_extent e[EXTENTS_MAX]; /* where the kernel writes map.fm_extents */
} Extents;
_Static_assert(offsetof(Extents, e) == sizeof(struct fiemap), "fm_extents is e");

/* fd's extents over [off, off + len): 0, or < 0 when they cannot be compared (too many, an
 * error, or a kind whose physical address does not name its bytes alone). */
static int extents_get(int fd, uint64_t off, uint64_t len, Extents *x)
{
	const uint32_t unfit = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
			       FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_ENCRYPTED |
			       FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE |
			       FIEMAP_EXTENT_DATA_TAIL;

	memset(x, 0, sizeof(*x));
	x->map.fm_start = off;
	x->map.fm_length = len;
	x->map.fm_extent_count = EXTENTS_MAX;
	if (ioctl(fd, FS_IOC_FIEMAP, &x->map) < 0)
		return -errno;
	if (x->map.fm_mapped_extents == 0 || x->map.fm_mapped_extents >= EXTENTS_MAX)
		return -E2BIG;
	for (uint32_t i = 0; i < x->map.fm_mapped_extents; i++)
		if (x->e[i].fe_flags & unfit)
			return -EOPNOTSUPP;
	return 0;
}

typedef struct Piece {
	uint64_t logical, physical, length;
	uint32_t flags;
} Piece;

/* The extents clipped to [off, off + len), those contiguous on disk and in the file merged:
 * two files that share those blocks give the same pieces however their extents are cut. */
static uint32_t pieces_of(const Extents *x, uint64_t off, uint64_t len, Piece *p)
{
	const uint32_t compared = ~(FIEMAP_EXTENT_LAST | FIEMAP_EXTENT_SHARED);
	uint32_t n = 0;

	for (uint32_t i = 0; i < x->map.fm_mapped_extents; i++) {
		const struct fiemap_extent *e = &x->e[i];
		uint64_t a = MAX(e->fe_logical, off),
			 b = MIN(e->fe_logical + e->fe_length, off + len);
		if (a >= b)
			continue;
		Piece q = {a, e->fe_physical + (a - e->fe_logical), b - a, e->fe_flags & compared};
		if (n > 0 && p[n - 1].logical + p[n - 1].length == q.logical &&
		    p[n - 1].physical + p[n - 1].length == q.physical && p[n - 1].flags == q.flags)
			p[n - 1].length += q.length;
		else
			p[n++] = q;
	}
	return n;
}

/* True when the chunk at [off, off + len) is the same blocks in the file and in the base's:
 * then *ret is the base's chunk (hash "" for a zero chunk or hole, not in its manifest). */
static bool chunk_unchanged(const Upload *u, uint64_t off, size_t len, StoreChunkRef *ret)
{
	Extents *a = xnew0(Extents, 2), *b = a + 1;
	Piece *pa = xnew0(Piece, 2 * EXTENTS_MAX), *pb = pa + EXTENTS_MAX;
	bool same = false;

	if (extents_get(u->fd, off, len, a) == 0 && extents_get(u->base_fd, off, len, b) == 0) {
		uint32_t na = pieces_of(a, off, len, pa), nb = pieces_of(b, off, len, pb);
		same = na > 0 && na == nb;
		for (uint32_t i = 0; same && i < na; i++)
			same = pa[i].logical == pb[i].logical && pa[i].physical == pb[i].physical &&
			       pa[i].length == pb[i].length && pa[i].flags == pb[i].flags;
		for (uint32_t i = 0; same && i < a->map.fm_mapped_extents; i++)
			same = a->e[i].fe_flags & FIEMAP_EXTENT_SHARED;
	}
	free(pa);
	free(a);
	if (!same)
		return false;
	/* The base's manifest by offset (in order: a binary search). */
	size_t lo = 0, hi = u->base->n_chunks;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (u->base->chunks[mid].offset < off)
			lo = mid + 1;
		else
			hi = mid;
	}
	*ret = (StoreChunkRef){.offset = off, .length = (uint32_t)len};
	if (lo < u->base->n_chunks && u->base->chunks[lo].offset == off) {
		if (u->base->chunks[lo].length != len)
			return false;
		memcpy(ret->hash, u->base->chunks[lo].hash, sizeof(ret->hash));
	}
	return true;
}

static void *upload_worker(void *userdata)
{
	Upload *u = userdata;
	Store *s = u->s;
	size_t bound = zstd.compressBound(s->chunk_size);
	char *buf = xmalloc(s->chunk_size), *z = xmalloc(bound);

	for (;;) {
		bool renew = false;
		pthread_mutex_lock(&u->lock);
		if (u->error || u->next >= u->n_idx) {
			pthread_mutex_unlock(&u->lock);
			break;
		}
		if (u->cancel && atomic_load(u->cancel)) {
			pthread_mutex_unlock(&u->lock);
			upload_set_error(u, -ECANCELED,
					 xasprintf("snapshot %s: upload cancelled", u->id));
			break;
		}
		size_t i = u->next++;
		usec_t now = now_usec(CLOCK_MONOTONIC);
		if (now - u->renewed > s->lease / 3) {
			u->renewed = now;
			renew = true;
		}
		pthread_mutex_unlock(&u->lock);

		_cleanup_free_ char *msg = NULL, *key = NULL, *ikey = NULL;
		uint64_t off = u->idx[i] * s->chunk_size;
		size_t len = (size_t)MIN((uint64_t)s->chunk_size, u->size - off);
		StoreChunkRef ref = {.offset = off, .length = (uint32_t)len};
		int r;

		if (renew) {
			ikey = store_intent_key(s, u->id);
			r = s3_put(s->s3, ikey, u->intent, strlen(u->intent), false, u->deadline,
				   &msg);
			if (r < 0) {
				upload_set_error(u, r,
						 xasprintf("snapshot %s: renewing its intent: %s",
							   u->id, msg));
				break;
			}
		}
		if (u->base && chunk_unchanged(u, off, len, &ref)) {
			pthread_mutex_lock(&u->lock);
			u->refs[i] = ref;
			u->stats.chunks_unchanged++;
			if (ref.hash[0])
				u->stats.chunks_skipped++;
			else
				u->stats.zero_chunks++;
			pthread_mutex_unlock(&u->lock);
			continue;
		}
		r = pread_zero_filled(u->fd, buf, len, off);
		if (r < 0) {
			upload_set_error(u, r,
					 xasprintf("snapshot %s: reading offset %" PRIu64 ": %s",
						   u->id, off, strerror(-r)));
			break;
		}
		bool zero = !store_chunk_hash(buf, len, ref.hash), sent = false;
		size_t zlen = 0;
		if (!zero) {
			key = store_chunk_key(s, ref.hash);
			r = u->dedup ? s3_head(s->s3, key, u->deadline, NULL, &msg) : -ENOENT;
			if (r == -ENOENT) {
				zlen = zstd.compress(z, bound, buf, len, s->zstd_level);
				if (zstd.isError(zlen)) {
					upload_set_error(u, -EIO,
							 xasprintf("snapshot %s: zstd: %s", u->id,
								   zstd.getErrorName(zlen)));
					break;
				}
				r = put_chunk(u, key, z, zlen, &msg);
				sent = r == 0;
				r = MIN(r, 0);
			}
			if (r < 0) {
				upload_set_error(u, r,
						 xasprintf("snapshot %s: chunk at offset %" PRIu64
							   ": %s",
							   u->id, off, msg));
				break;
			}
		}
		store_count_chunk(len, zero, sent, zlen);
		pthread_mutex_lock(&u->lock);
		u->refs[i] = ref;
		u->stats.bytes_read += len;
		if (zero)
			u->stats.zero_chunks++;
		else if (sent) {
			u->stats.chunks_sent++;
			u->stats.bytes_sent += zlen;
		} else
			u->stats.chunks_skipped++;
		pthread_mutex_unlock(&u->lock);
	}
	free(buf);
	free(z);
	return NULL;
}

/* True when a collection is running: a marker under gc/ younger than the lease, by the
 * store's clock (compared with the intent just written). */
typedef struct GcSeen {
	usec_t intent_time;
	usec_t lease;
	bool running;
} GcSeen;

static int gc_marker(const S3Object *o, void *userdata)
{
	GcSeen *g = userdata;
	if (o->last_modified + g->lease > g->intent_time)
		g->running = true;
	return 0;
}

static int intent_time(const S3Object *o, void *userdata)
{
	*(usec_t *)userdata = o->last_modified;
	return 1;
}

static bool same_chunks(const StoreManifest *a, const StoreManifest *b)
{
	if (a->volume_size != b->volume_size || a->n_chunks != b->n_chunks)
		return false;
	for (size_t i = 0; i < a->n_chunks; i++)
		if (a->chunks[i].offset != b->chunks[i].offset ||
		    strcmp(a->chunks[i].hash, b->chunks[i].hash) != 0)
			return false;
	return true;
}

static int write_manifest(Store *s, Upload *u, const StoreUploadInfo *info, char **ret_error)
{
	StoreManifest m = {
		.id = (char *)info->id,
		.volume_size = u->size,
		.chunk_size = (uint32_t)s->chunk_size,
		.filesystem = (char *)(info->filesystem ? info->filesystem : ""),
		.node = s->node,
		.created = now_usec(CLOCK_REALTIME),
		.chunks = xnew0(StoreChunkRef, u->n_idx ? u->n_idx : 1),
	};
	_cleanup_free_ char *key = store_manifest_key(s, info->id), *text = NULL, *msg = NULL;
	int r;

	if (info->parameters)
		m.parameters = *info->parameters;
	for (size_t i = 0; i < u->n_idx; i++)
		if (u->refs[i].hash[0])
			m.chunks[m.n_chunks++] = u->refs[i];
	u->stats.chunks = m.n_chunks;
	text = store_manifest_format(&m);
	r = s3_put(s->s3, key, text, strlen(text), true, u->deadline, &msg);
	if (r == -EEXIST) {
		/* Written by a run before ours (a retry after a lost reply): the same or not. */
		StoreManifest old = {};
		r = store_manifest_get(s, info->id, u->deadline, &old, &msg);
		if (r == 0 && !same_chunks(&old, &m))
			r = errorf(&msg, -EEXIST, "another snapshot of that ID is in %s",
				   s3_client_name(s->s3));
		store_manifest_done(&old);
	}
	free(m.chunks);
	if (r < 0)
		return errorf(ret_error, r, "snapshot %s: manifest: %s", info->id, msg);
	return 0;
}

static int upload_run(Store *s, int fd, const StoreUploadInfo *info, usec_t deadline,
		      StoreUploadStats *ret_stats, char **ret_error)
{
	_cleanup_free_ char *ikey = NULL, *intent = NULL, *msg = NULL, *gc_prefix = NULL;
	_cleanup_free_ uint64_t *idx = NULL;
	StoreManifest existing = {};
	struct stat st;
	size_t n_idx = 0;
	int r;

	if (!store_id_valid(info->id))
		return errorf(ret_error, -EINVAL,
			      "snapshot ID \"%s\": not 1-%d of "
			      "[A-Za-z0-9._-]",
			      info->id ? info->id : "", STORE_ID_MAX);
	if (fstat(fd, &st) < 0)
		return errorf(ret_error, -errno, "snapshot %s: fstat: %m", info->id);
	uint64_t size = info->volume_size ? info->volume_size : (uint64_t)st.st_size;
	if (size == 0)
		return errorf(ret_error, -EINVAL, "snapshot %s: an empty volume", info->id);

	/* Already whole: the same answer as the first time. A run stopped (killed) after its
	 * manifest left its intent: it goes now, not a lease later (a live intent defers every
	 * collection in the store). */
	r = store_manifest_get(s, info->id, deadline, &existing, &msg);
	if (r == 0) {
		ikey = store_intent_key(s, info->id);
		(void)s3_delete(s->s3, ikey, deadline, NULL);
		if (ret_stats)
			*ret_stats =
				(StoreUploadStats){.chunks = existing.n_chunks, .existed = true};
		store_manifest_done(&existing);
		return 0;
	}
	if (r != -ENOENT)
		return errorf(ret_error, r, "%s", msg);

	r = data_chunks(fd, size, s->chunk_size, &idx, &n_idx);
	if (r < 0)
		return errorf(ret_error, r, "snapshot %s: finding its data: %s", info->id,
			      strerror(-r));

	/* The intent first: a collection that starts from now on sees it and deletes nothing. */
	json_t *j = json_pack("{ssss}", "snapshot", info->id, "node", s->node);
	intent = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	ikey = store_intent_key(s, info->id);
	r = s3_put(s->s3, ikey, intent, strlen(intent), false, deadline, &msg);
	if (r < 0)
		return errorf(ret_error, r, "snapshot %s: intent: %s", info->id, msg);
	failpoint("store-upload-after-intent");

	/* ...and one that started before it is seen here: then HEAD is not trusted (the chunk
	 * found may be about to go), every chunk is put again, which makes it young. */
	GcSeen gc = {.lease = s->lease};
	r = s3_list(s->s3, ikey, intent_time, &gc.intent_time, deadline, &msg);
	gc_prefix = xasprintf("%sgc/", s->prefix);
	if (r >= 0)
		r = s3_list(s->s3, gc_prefix, gc_marker, &gc, deadline, &msg);
	if (r < 0)
		return errorf(ret_error, r, "snapshot %s: %s", info->id, msg);

	/* The base, read after the intent and the look for a collection: while its manifest is
	 * there its chunks are, and a collection that runs from now on deletes none. */
	StoreManifest base = {};
	bool have_base = false;
	if (info->base_id && !gc.running) {
		r = store_manifest_get(s, info->base_id, deadline, &base, &msg);
		if (r < 0 && r != -ENOENT && r != -EUCLEAN)
			return errorf(ret_error, r, "snapshot %s: its base: %s", info->id, msg);
		have_base = r == 0 && base.volume_size == size && base.chunk_size == s->chunk_size;
		free(msg);
		msg = NULL;
	}

	Upload u = {
		.s = s,
		.base_fd = have_base ? info->base_fd : -EBADF,
		.base = have_base ? &base : NULL,
		.fd = fd,
		.id = info->id,
		.size = size,
		.deadline = deadline,
		.idx = idx,
		.n_idx = n_idx,
		.dedup = !gc.running,
		.intent = intent,
		.cancel = info->cancel,
		.refs = xnew0(StoreChunkRef, n_idx ? n_idx : 1),
		.renewed = now_usec(CLOCK_MONOTONIC),
	};
	pthread_mutex_init(&u.lock, NULL);
	unsigned n_threads = (unsigned)MIN((size_t)s->parallel, MAX(n_idx, (size_t)1));
	pthread_t *threads = xnew0(pthread_t, n_threads);
	for (unsigned i = 0; i < n_threads; i++)
		if (pthread_create(&threads[i], NULL, upload_worker, &u) != 0)
			abort();
	for (unsigned i = 0; i < n_threads; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	pthread_mutex_destroy(&u.lock);

	r = u.error;
	if (r == 0 && info->cancel && atomic_load(info->cancel)) {
		r = u.error = -ECANCELED;
		u.message = xasprintf("snapshot %s: upload cancelled", info->id);
	}
	if (r == -ECANCELED)
		(void)s3_delete(s->s3, ikey, deadline, NULL); /* nothing will name its chunks */
	if (r < 0) {
		/* Else the intent stays: a run again resumes, a collection leaves its chunks
		 * alone. */
		errorf(ret_error, r, "%s", u.message);
		goto out;
	}
	failpoint("store-upload-after-chunks");
	/* Lost its intent (collected as stale while this node stood still): the chunks it
	 * found may be gone. */
	r = s3_head(s->s3, ikey, deadline, NULL, &msg);
	if (r == -ENOENT) {
		r = errorf(ret_error, -EAGAIN,
			   "snapshot %s: its upload intent was collected as stale; run "
			   "again",
			   info->id);
		goto out;
	}
	if (r < 0) {
		errorf(ret_error, r, "snapshot %s: intent: %s", info->id, msg);
		goto out;
	}
	r = write_manifest(s, &u, info, ret_error);
	if (r < 0)
		goto out;
	failpoint("store-upload-after-manifest");
	(void)s3_delete(s->s3, ikey, deadline, NULL); /* a leftover goes stale, then away */
	if (ret_stats)
		*ret_stats = u.stats;
out:
	free(u.refs);
	free(u.message);
	store_manifest_done(&base);
	return r;
}

int store_upload(Store *s, int fd, const StoreUploadInfo *info, usec_t deadline,
		 StoreUploadStats *ret_stats, char **ret_error)
{
	_cleanup_free_ char *msg = NULL;

	store_count_upload_start();
	int r = upload_run(s, fd, info, deadline, ret_stats, &msg);
	store_count_upload_end(r, msg);
	return r < 0 && ret_error ? error_pass(r, &msg, ret_error) : r;
}

/* ---- restore ---- */

typedef struct Restore {
	Store *s;
	const StoreManifest *m;
	int fd;
	usec_t deadline;
	StoreRestoreProgress *progress; /* NULL: none */
	pthread_mutex_t lock;		/* guards the fields below */
	size_t next;
	int error;
	char *message;
	StoreRestoreStats stats;
} Restore;

static void restore_set_error(Restore *x, int r, char *message)
{
	pthread_mutex_lock(&x->lock);
	if (x->error == 0) {
		x->error = r;
		x->message = message;
		message = NULL;
	}
	pthread_mutex_unlock(&x->lock);
	free(message);
}

/* The block a restore leaves a hole where a chunk holds zeros: the file system's usual one. */
#define RESTORE_HOLE_BLOCK 4096

/* Writes the n bytes of buf at offset of fd, except the whole blocks of zeros, which stay
 * holes of the (new, sparse) file: a chunk that was partly allocated is restored as it was.
 * Returns 0 and the bytes written in *ret_written, or -errno. */
static int write_sparse(int fd, const char *buf, size_t n, uint64_t offset, uint64_t *ret_written)
{
	static const char zeros[RESTORE_HOLE_BLOCK];
	uint64_t written = 0;
	size_t at = 0;

	while (at < n) {
		/* Skip the zero blocks, then take the run of blocks up to the next one. */
		size_t b = MIN((size_t)RESTORE_HOLE_BLOCK, n - at);
		if (memcmp(buf + at, zeros, b) == 0) {
			at += b;
			continue;
		}
		size_t end = at + b;
		while (end < n) {
			size_t e = MIN((size_t)RESTORE_HOLE_BLOCK, n - end);
			if (memcmp(buf + end, zeros, e) == 0)
				break;
			end += e;
		}
		while (at < end) {
			ssize_t w = pwrite(fd, buf + at, end - at, (off_t)(offset + at));
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return -errno;
			at += (size_t)w;
			written += (uint64_t)w;
		}
	}
	*ret_written = written;
	return 0;
}

static void *restore_worker(void *userdata)
{
	Restore *x = userdata;
	Store *s = x->s;
	size_t cap = x->m->chunk_size;
	char *buf = xmalloc(cap);

	for (;;) {
		pthread_mutex_lock(&x->lock);
		if (x->error || x->next >= x->m->n_chunks) {
			pthread_mutex_unlock(&x->lock);
			break;
		}
		if (x->progress && atomic_load(&x->progress->cancel)) {
			pthread_mutex_unlock(&x->lock);
			restore_set_error(x, -ECANCELED,
					  xasprintf("snapshot %s: restore cancelled", x->m->id));
			break;
		}
		const StoreChunkRef *c = &x->m->chunks[x->next++];
		pthread_mutex_unlock(&x->lock);

		_cleanup_free_ char *key = store_chunk_key(s, c->hash), *z = NULL, *msg = NULL;
		size_t zlen = 0;
		char hash[65];
		int r = s3_get(s->s3, key, 0, 0, zstd.compressBound(cap) + 4096, x->deadline, &z,
			       &zlen, &msg);
		if (r == -ENOENT) {
			restore_set_error(x, -EUCLEAN,
					  xasprintf("snapshot %s: chunk %s (offset %" PRIu64
						    ") is missing from %s",
						    x->m->id, c->hash, c->offset,
						    s3_client_name(s->s3)));
			break;
		}
		if (r < 0) {
			restore_set_error(x, r,
					  xasprintf("snapshot %s: chunk %s (offset %" PRIu64
						    "): %s",
						    x->m->id, c->hash, c->offset, msg));
			break;
		}
		unsigned long long want = zstd.getFrameContentSize(z, zlen);
		size_t n = want == c->length ? zstd.decompress(buf, cap, z, zlen) : 0;
		if (want != c->length || zstd.isError(n) || n != c->length ||
		    (digest_sha256_hex(buf, n, hash), strcmp(hash, c->hash) != 0)) {
			restore_set_error(x, -EUCLEAN,
					  xasprintf("snapshot %s: chunk %s (offset %" PRIu64
						    ") in %s is damaged: %s",
						    x->m->id, c->hash, c->offset,
						    s3_client_name(s->s3),
						    want != c->length || zstd.isError(n)
							    ? "not the zstd frame of its bytes"
							    : "its bytes do not match its hash"));
			break;
		}
		uint64_t written = 0;
		r = write_sparse(x->fd, buf, n, c->offset, &written);
		if (r < 0) {
			restore_set_error(x, r,
					  xasprintf("snapshot %s: writing offset %" PRIu64 ": %s",
						    x->m->id, c->offset, strerror(-r)));
			break;
		}
		store_count_restore_chunk(zlen, n);
		pthread_mutex_lock(&x->lock);
		x->stats.chunks++;
		x->stats.bytes_received += zlen;
		x->stats.bytes_written += written;
		pthread_mutex_unlock(&x->lock);
		if (x->progress) {
			atomic_fetch_add_explicit(&x->progress->chunks_done, 1,
						  memory_order_relaxed);
			atomic_fetch_add_explicit(&x->progress->bytes_done, n,
						  memory_order_relaxed);
		}
	}
	free(buf);
	return NULL;
}

static int restore_run(Store *s, const char *id, int dir_fd, const char *name, usec_t deadline,
		       StoreRestoreStats *ret_stats, char **ret_error)
{
	return store_restore_progress(s, id, dir_fd, name, deadline, NULL, ret_stats, ret_error);
}

int store_restore_progress(Store *s, const char *id, int dir_fd, const char *name, usec_t deadline,
			   StoreRestoreProgress *progress, StoreRestoreStats *ret_stats,
			   char **ret_error)
{
	StoreManifest m = {};
	_cleanup_close_ int fd = -EBADF;
	char path[64];
	int r;

	r = store_manifest_get(s, id, deadline, &m, ret_error);
	if (r < 0)
		return r;
	if (faccessat(dir_fd, name, F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		r = errorf(ret_error, -EEXIST, "restore of snapshot %s: %s exists", id, name);
		goto out;
	}
	/* Unnamed until whole: a failure leaves nothing behind. */
	fd = openat(dir_fd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)m.volume_size) < 0) {
		r = errorf(ret_error, -errno, "restore of snapshot %s: %m", id);
		goto out;
	}
	if (progress) {
		uint64_t bytes = 0;
		for (size_t i = 0; i < m.n_chunks; i++)
			bytes += m.chunks[i].length;
		atomic_store_explicit(&progress->bytes_total, bytes, memory_order_relaxed);
		atomic_store_explicit(&progress->chunks_total, m.n_chunks, memory_order_relaxed);
	}
	Restore x = {.s = s, .m = &m, .fd = fd, .deadline = deadline, .progress = progress};
	pthread_mutex_init(&x.lock, NULL);
	unsigned n_threads = (unsigned)MIN((size_t)s->parallel, MAX(m.n_chunks, (size_t)1));
	pthread_t *threads = xnew0(pthread_t, n_threads);
	for (unsigned i = 0; i < n_threads; i++)
		if (pthread_create(&threads[i], NULL, restore_worker, &x) != 0)
			abort();
	for (unsigned i = 0; i < n_threads; i++)
		pthread_join(threads[i], NULL);
	free(threads);
	pthread_mutex_destroy(&x.lock);
	if (x.error < 0) {
		r = errorf(ret_error, x.error, "%s", x.message);
		free(x.message);
		goto out;
	}
	if (fsync(fd) < 0) {
		r = errorf(ret_error, -errno, "restore of snapshot %s: fsync: %m", id);
		goto out;
	}
	failpoint("store-restore-after-fill");
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	if (linkat(AT_FDCWD, path, dir_fd, name, AT_SYMLINK_FOLLOW) < 0) {
		r = errorf(ret_error, -errno, "restore of snapshot %s: naming it %s: %m", id, name);
		goto out;
	}
	if (ret_stats)
		*ret_stats = x.stats;
	r = 0;
out:
	store_manifest_done(&m);
	return r;
}

int store_restore(Store *s, const char *id, int dir_fd, const char *name, usec_t deadline,
		  StoreRestoreStats *ret_stats, char **ret_error)
{
	_cleanup_free_ char *msg = NULL;

	store_count_restore_start();
	int r = restore_run(s, id, dir_fd, name, deadline, ret_stats, &msg);
	store_count_restore(r, msg);
	return r < 0 && ret_error ? error_pass(r, &msg, ret_error) : r;
}
