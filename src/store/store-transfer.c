/* SPDX-License-Identifier: Apache-2.0 */
/* Upload of a file's allocated ranges, and restore into a sparse file: chunk by chunk, by a
 * few threads each with its own buffers. */
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "alloc.h"
#include "failpoint.h"
#include "store-internal.h"

void store_sha256_hex(const void *data, size_t len, char out[65])
{
	unsigned char md[32];
	unsigned int n = 0;

	EVP_Digest(data, len, md, &n, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", md[i]);
}

static bool all_zero(const char *p, size_t n)
{
	return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

/* Reads len bytes at off; past the end of the file reads zeros. */
static int read_full(int fd, char *buf, size_t len, uint64_t off)
{
	size_t done = 0;

	while (done < len) {
		ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0) {
			memset(buf + done, 0, len - done);
			break;
		}
		done += (size_t)n;
	}
	return 0;
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
	const char *intent;   /* the intent's body */
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

static void *upload_worker(void *userdata)
{
	Upload *u = userdata;
	Store *s = u->s;
	size_t bound = ZSTD_compressBound(s->chunk_size);
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
		r = read_full(u->fd, buf, len, off);
		if (r < 0) {
			upload_set_error(u, r,
					 xasprintf("snapshot %s: reading offset %" PRIu64 ": %s",
						   u->id, off, strerror(-r)));
			break;
		}
		bool zero = all_zero(buf, len), sent = false;
		size_t zlen = 0;
		if (!zero) {
			store_sha256_hex(buf, len, ref.hash);
			key = store_chunk_key(s, ref.hash);
			r = u->dedup ? s3_head(s->s3, key, u->deadline, NULL, &msg) : -ENOENT;
			if (r == -ENOENT) {
				zlen = ZSTD_compress(z, bound, buf, len, s->zstd_level);
				if (ZSTD_isError(zlen)) {
					upload_set_error(u, -EIO,
							 xasprintf("snapshot %s: zstd: %s", u->id,
								   ZSTD_getErrorName(zlen)));
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

	Upload u = {
		.s = s,
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
	pthread_mutex_t lock; /* guards the fields below */
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
		const StoreChunkRef *c = &x->m->chunks[x->next++];
		pthread_mutex_unlock(&x->lock);

		_cleanup_free_ char *key = store_chunk_key(s, c->hash), *z = NULL, *msg = NULL;
		size_t zlen = 0;
		char hash[65];
		int r = s3_get(s->s3, key, 0, 0, ZSTD_compressBound(cap) + 4096, x->deadline, &z,
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
		unsigned long long want = ZSTD_getFrameContentSize(z, zlen);
		size_t n = want == c->length ? ZSTD_decompress(buf, cap, z, zlen) : 0;
		if (want != c->length || ZSTD_isError(n) || n != c->length ||
		    (store_sha256_hex(buf, n, hash), strcmp(hash, c->hash) != 0)) {
			restore_set_error(x, -EUCLEAN,
					  xasprintf("snapshot %s: chunk %s (offset %" PRIu64
						    ") in %s is damaged: %s",
						    x->m->id, c->hash, c->offset,
						    s3_client_name(s->s3),
						    want != c->length || ZSTD_isError(n)
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
	}
	free(buf);
	return NULL;
}

static int restore_run(Store *s, const char *id, int dir_fd, const char *name, usec_t deadline,
		       StoreRestoreStats *ret_stats, char **ret_error)
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
	Restore x = {.s = s, .m = &m, .fd = fd, .deadline = deadline};
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
