/* SPDX-License-Identifier: Apache-2.0 */
/* The snapshot store: volumes' snapshots in an S3-compatible bucket, content-addressed,
 * incremental and verified (docs/snapshots.md has the format and the collection rule).
 *
 *   PREFIX/chunks/<hh>/<sha256>   a chunk: zstd of chunk_size bytes of a volume (the last one
 *                                 shorter), named by the SHA-256 of the uncompressed bytes
 *   PREFIX/snapshots/<id>.json    a manifest: the volume's size, filesystem, parameters and
 *                                 its chunks by offset (holes and zero chunks left out);
 *                                 written last, once: a snapshot exists whole or not at all
 *   PREFIX/intents/<id>           an upload in progress (its node, renewed while it runs)
 *   PREFIX/gc/<random>            a collection in progress
 *
 * Every operation blocks until it is done or its deadline (CLOCK_MONOTONIC) passes; messages
 * name the store, the snapshot and the chunk or object at fault. Thread-safe: any number of
 * operations may run at once on one Store. */
#pragma once

#include <stdatomic.h>
#include <stdint.h>

#include "macro.h"
#include "s3.h"
#include "strmap.h"
#include "time-util.h"

#define STORE_CHUNK_SIZE_DEFAULT ((size_t)4 << 20)
#define STORE_ID_MAX 128

typedef struct Store Store;

typedef struct StoreConfig {
	S3Client *s3;		    /* borrowed; must outlive the store */
	const char *prefix;	    /* "" or [A-Za-z0-9._/-] not starting or ending with '/' */
	const char *node;	    /* this node's name, in intents; NULL: "unknown" */
	size_t chunk_size;	    /* power of two, 64 KiB - 64 MiB; 0: 4 MiB */
	unsigned parallel;	    /* chunks in flight at once; 0: 4 */
	int zstd_level;		    /* 0: 1 (fast: level 3 costs 46% more CPU for 2% fewer bytes) */
	usec_t lease;		    /* an intent's life without renewal; 0: 10 min */
	usec_t grace;		    /* a chunk younger than this is never collected; 0: 1 h */
	size_t multipart_threshold; /* a compressed chunk above goes up in parts; 0: 16 MiB */
} StoreConfig;

/* A store over config->s3. Returns 0 or -EINVAL (bad prefix, chunk size), -ENOENT (libzstd
 * cannot be loaded) with *ret_error. The first store loads libzstd. */
int store_new(const StoreConfig *config, Store **ret, char **ret_error);
void store_free(Store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(Store *, store_free);

/* True for a snapshot ID the store takes: 1-128 of [A-Za-z0-9._-], not "." or "..". */
bool store_id_valid(const char *id);

typedef struct StoreChunkRef {
	uint64_t offset;
	uint32_t length;
	char hash[65]; /* SHA-256 of the uncompressed bytes, lower-case hex */
} StoreChunkRef;

typedef struct StoreManifest {
	char *id;
	uint64_t volume_size;
	uint32_t chunk_size;
	char *filesystem; /* "" for a block volume */
	char *node;	  /* where it was taken */
	Strmap parameters;
	usec_t created; /* CLOCK_REALTIME */
	StoreChunkRef *chunks;
	size_t n_chunks;
} StoreManifest;

void store_manifest_done(StoreManifest *m);
/* The manifest as stored (JSON); a new string. */
char *store_manifest_format(const StoreManifest *m);
/* Reads a manifest (untrusted: every field checked: offsets aligned, in order, inside the
 * volume, lengths, hashes). Returns 0 or -EUCLEAN with *ret_error saying what is wrong. */
int store_manifest_parse(const char *text, size_t len, StoreManifest *ret, char **ret_error);

/* A chunk's name as an upload gives it: false for a chunk of zeros (a manifest leaves it out,
 * as a hole), else true and the SHA-256 of its bytes in ret_hash (lower-case hex). What
 * changed-block tracking compares a file's chunks with a manifest's by. */
bool store_chunk_hash(const void *data, size_t len, char ret_hash[65]);

typedef struct StoreUploadInfo {
	const char *id;		  /* the snapshot's ID */
	uint64_t volume_size;	  /* 0: the file's size */
	const char *filesystem;	  /* NULL: "" */
	const Strmap *parameters; /* NULL: none */
	/* NULL, or set by another thread to stop the upload at its next chunk: -ECANCELED, its
	 * intent removed (a collection need not wait for its lease) */
	const atomic_bool *cancel;
	/* A snapshot of the same volume already in the store, and base_fd a reflink of the file
	 * it was uploaded from (neither written since): a chunk whose extents the two files still
	 * share (FIEMAP: the same physical blocks) is the base's chunk, taken from its manifest
	 * without reading or hashing it. NULL: every allocated chunk is read and hashed. A base
	 * that is missing or of another volume size or chunk size is not used. */
	const char *base_id;
	int base_fd;
} StoreUploadInfo;

typedef struct StoreUploadStats {
	uint64_t chunks;	   /* chunks in the manifest */
	uint64_t chunks_sent;	   /* chunks put (the store lacked them) */
	uint64_t chunks_skipped;   /* chunks the store held already */
	uint64_t zero_chunks;	   /* allocated but all zero: left out, as holes */
	uint64_t bytes_read;	   /* allocated bytes read from the file */
	uint64_t bytes_sent;	   /* compressed bytes put */
	bool existed;		   /* the manifest was there already: nothing done */
	uint64_t chunks_unchanged; /* of chunks_skipped and zero_chunks: found unchanged since
				    * info->base_id by their extents, not read */
} StoreUploadStats;

/* Uploads the allocated ranges of fd (SEEK_DATA/SEEK_HOLE) as snapshot info->id: an intent
 * first, then each chunk the store lacks (config->parallel at once, each buffer its own:
 * memory is parallel x (chunk + its compressed bound)), then the manifest, then the intent
 * goes. Run again after a failure or a restart, it resumes: the chunks already up are not sent
 * again. Returns 0 (also when the same manifest exists already), -EEXIST when another
 * snapshot of that ID exists, -EAGAIN when its intent was collected as stale (run again), or
 * the store's errno, with *ret_error naming the snapshot and the object. stats may be NULL. */
int store_upload(Store *s, int fd, const StoreUploadInfo *info, usec_t deadline,
		 StoreUploadStats *ret_stats, char **ret_error);

/* The manifest of snapshot id: 0, -ENOENT when there is none, -EUCLEAN when it is damaged. */
int store_manifest_get(Store *s, const char *id, usec_t deadline, StoreManifest *ret,
		       char **ret_error);

/* Calls fn with the ID of each snapshot in the store, whichever node took it. fn returns 0 to
 * go on, else that value is returned. */
int store_list(Store *s, int (*fn)(const char *id, void *userdata), void *userdata, usec_t deadline,
	       char **ret_error);

/* Calls fn with each upload left unfinished (its intent still there: failed, or its volplugd
 * stopped), the node that ran it, and whether its lease ran out: a restarted volplugd runs its
 * own again with store_upload(), which resumes. fn returns 0 to go on, else that value is
 * returned. */
int store_unfinished(Store *s,
		     int (*fn)(const char *id, const char *node, bool stale, void *userdata),
		     void *userdata, usec_t deadline, char **ret_error);

typedef struct StoreRestoreStats {
	uint64_t chunks;
	uint64_t bytes_received; /* compressed */
	uint64_t bytes_written;
} StoreRestoreStats;

/* What a restore has done so far, read by other threads while it runs (all relaxed atomics,
 * zero to start with), and how another thread stops it. */
typedef struct StoreRestoreProgress {
	atomic_uint_fast64_t chunks_total; /* set once the manifest is read */
	atomic_uint_fast64_t bytes_total;  /* the chunks' bytes, uncompressed */
	atomic_uint_fast64_t chunks_done;
	atomic_uint_fast64_t bytes_done;
	/* set by another thread to stop the restore at its next chunk: -ECANCELED, nothing left */
	atomic_bool cancel;
} StoreRestoreProgress;

/* Restores snapshot id into a new sparse file name beneath dir_fd (made with O_TMPFILE, linked
 * only when whole: on any failure nothing is left): holes stay holes, every chunk is checked
 * against its hash. Returns 0, -ENOENT (no such snapshot), -EEXIST (name exists), -EUCLEAN (a
 * chunk missing or damaged: the message names it and its offset) or the store's errno. */
int store_restore(Store *s, const char *id, int dir_fd, const char *name, usec_t deadline,
		  StoreRestoreStats *ret_stats, char **ret_error);
/* store_restore(), progress (NULL: none) updated as it goes and its cancel obeyed. */
int store_restore_progress(Store *s, const char *id, int dir_fd, const char *name, usec_t deadline,
			   StoreRestoreProgress *progress, StoreRestoreStats *ret_stats,
			   char **ret_error);

/* Removes snapshot id's manifest (an absent one is no error); its chunks wait for store_gc(). */
int store_delete(Store *s, const char *id, usec_t deadline, char **ret_error);

typedef struct StoreGcStats {
	uint64_t manifests;
	uint64_t chunks;	 /* chunks listed */
	uint64_t chunks_deleted; /* named by no manifest, older than the grace */
	uint64_t chunks_young;	 /* named by none, but younger than the grace: kept */
	uint64_t stale_intents;	 /* intents past their lease (their node died): removed */
	uint64_t stale_markers;	 /* markers of collections killed midway, past the lease */
} StoreGcStats;

/* Collects the chunks no manifest names, never one an upload in progress may reference: while
 * a live intent exists it deletes nothing and returns -EBUSY naming that upload. */
int store_gc(Store *s, usec_t deadline, StoreGcStats *ret_stats, char **ret_error);

/* Metrics (store-metrics.c): the volplug_store_* families, counted by every Store of the process
 * alike. The kinds of error whose last one is kept. */
typedef enum StoreErrorKind {
	STORE_ERROR_UPLOAD,
	STORE_ERROR_RESTORE,
	STORE_ERROR_COLLECTION,
	_STORE_ERROR_KIND_MAX,
} StoreErrorKind;

/* "upload", "restore", "collection"; NULL for another value. */
const char *store_error_kind_to_string(StoreErrorKind kind);

/* The last error of kind since the process started: its errno (0: none, and nothing written),
 * when (CLOCK_REALTIME) and its message (a new string). Thread-safe, never blocks. */
int store_last_error(StoreErrorKind kind, usec_t *ret_when, char **ret_message);

/* For a restore from the store that does not go through store_restore() (which counts its
 * own): its start, each chunk written (compressed bytes received, bytes written), its end (r:
 * 0 or its errno; message: what failed, NULL for strerror). Thread-safe, never block. */
void store_count_restore_start(void);
void store_count_restore_chunk(uint64_t received, uint64_t written);
void store_count_restore(int r, const char *message);
