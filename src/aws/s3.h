/* SPDX-License-Identifier: Apache-2.0 */
/* A client of an S3-compatible object store: one bucket at one endpoint.
 *
 * Requests are signed with AWS Signature Version 4 (service "s3"; the body's SHA-256 in
 * x-amz-content-sha256, or UNSIGNED-PAYLOAD when asked), addressed path-style
 * (http://host/bucket/key: MinIO, Ceph, test peers) or virtual-hosted
 * (https://bucket.host/key: AWS), and retried by aws_request(): 500, 503 SlowDown, a dropped
 * or refused connection, an attempt that took too long, with backoff and jitter inside the
 * caller's deadline.
 *
 * Every error message names the store and the object ("s3://bucket/key at
 * http://127.0.0.1:9000: NoSuchKey: The specified key does not exist."). Errnos: NoSuchKey,
 * NoSuchUpload -ENOENT; NoSuchBucket -ENXIO; a refused key or signature -EACCES; AccessDenied
 * -EPERM; PreconditionFailed (If-None-Match) -EEXIST; InvalidRange -ERANGE; a reply that does
 * not parse -EPROTO; throttling and 5xx past max_retries -EAGAIN; the deadline -ETIMEDOUT.
 *
 * Keys are the caller's and must be made of [A-Za-z0-9._/-] (the store's own names are):
 * anything else is refused with -EINVAL, so a key never needs encoding. Thread-safe. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "aws-credentials.h"
#include "aws-request.h"
#include "macro.h"
#include "time-util.h"

typedef struct S3Client S3Client;

typedef struct S3Config {
	const char *endpoint;		     /* NULL: https://s3.<region>.amazonaws.com */
	const char *bucket;		     /* required: 3-63 of [a-z0-9.-] */
	const char *region;		     /* required */
	bool path_style;		     /* else virtual-hosted */
	bool unsigned_payload;		     /* UNSIGNED-PAYLOAD instead of the body's hash */
	AwsCredentialsProvider *credentials; /* borrowed; NULL: requests go unsigned */
	AwsRetry retry;
} S3Config;

/* A new client. Returns 0, or -EINVAL (no region, a bad bucket name, an endpoint that is not
 * http(s)://) with *ret_error (may be NULL) saying which. No I/O. */
int s3_client_new(const S3Config *config, S3Client **ret, char **ret_error);
void s3_client_free(S3Client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(S3Client *, s3_client_free);

/* "s3://bucket at endpoint", for messages. */
const char *s3_client_name(const S3Client *c);

/* True when key is made of the characters this client sends unencoded. */
bool s3_key_valid(const char *key);

/* PutObject of len bytes at data (copied into the request, not kept). With if_none_match,
 * only when no object has that key: -EEXIST when one has. Blocks until the deadline at most.
 * Returns 0 or an errno as above, with *ret_error (may be NULL) naming the object. */
int s3_put(S3Client *c, const char *key, const void *data, size_t len, bool if_none_match,
	   usec_t deadline, char **ret_error);

/* GetObject of length bytes from offset (length 0: to the end), at most max bytes (0: 64 MiB).
 * Returns 0 with *ret_data (malloc'd, NUL after the end) and *ret_len, or an errno. */
int s3_get(S3Client *c, const char *key, uint64_t offset, uint64_t length, size_t max,
	   usec_t deadline, char **ret_data, size_t *ret_len, char **ret_error);

/* HeadObject: 0 with *ret_size (may be NULL), -ENOENT when there is no such object. */
int s3_head(S3Client *c, const char *key, usec_t deadline, uint64_t *ret_size, char **ret_error);

/* DeleteObject (an absent object is no error). */
int s3_delete(S3Client *c, const char *key, usec_t deadline, char **ret_error);

/* DeleteObjects of n keys (any number: sent 1000 a request). Returns 0 when every one is gone,
 * else the first failure's errno, naming its key. */
int s3_delete_many(S3Client *c, const char *const *keys, size_t n, usec_t deadline,
		   char **ret_error);

typedef struct S3Object {
	const char *key;
	uint64_t size;
	usec_t last_modified; /* CLOCK_REALTIME; 0: not given */
} S3Object;

/* Calls fn for each object whose key starts with prefix, in key order, following
 * ListObjectsV2's continuation tokens. fn returns 0 to go on, > 0 to stop (returned), < 0 to
 * fail (returned). Returns 0 when every object was seen. */
int s3_list(S3Client *c, const char *prefix, int (*fn)(const S3Object *o, void *userdata),
	    void *userdata, usec_t deadline, char **ret_error);

/* Multipart upload: create (*ret_upload_id), put part 1..10000 (*ret_etag), complete with the
 * parts' ETags in order, or abort. */
int s3_multipart_create(S3Client *c, const char *key, usec_t deadline, char **ret_upload_id,
			char **ret_error);
int s3_multipart_put(S3Client *c, const char *key, const char *upload_id, unsigned part,
		     const void *data, size_t len, usec_t deadline, char **ret_etag,
		     char **ret_error);
int s3_multipart_complete(S3Client *c, const char *key, const char *upload_id,
			  const char *const *etags, unsigned n, usec_t deadline, char **ret_error);
int s3_multipart_abort(S3Client *c, const char *key, const char *upload_id, usec_t deadline,
		       char **ret_error);

/* Counters since the client was made. */
typedef struct S3Stats {
	uint64_t requests, attempts, retries, throttled;
	uint64_t bytes_sent, bytes_received;
} S3Stats;

void s3_client_stats(S3Client *c, S3Stats *ret);
