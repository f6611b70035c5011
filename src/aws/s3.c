/* SPDX-License-Identifier: Apache-2.0 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <string.h>

#include "alloc.h"
#include "aws-xml.h"
#include "base64.h"
#include "digest.h"
#include "error-util.h"
#include "s3.h"
#include "strbuf.h"

#define GET_MAX_DEFAULT ((size_t)64 << 20)
#define DELETE_BATCH 1000

struct S3Client {
	char *endpoint; /* scheme://host[:port], no trailing slash */
	char *bucket;
	char *base;  /* URL up to the key's leading slash */
	char *name;  /* "s3://bucket at endpoint" */
	char *sigv4; /* "aws:amz:<region>:s3" */
	bool unsigned_payload;
	AwsSigning signing;
	AwsRetry retry;
	HttpPool *pool;
	_Atomic uint64_t requests, attempts, retries, throttled, bytes_sent, bytes_received;
};

static bool bucket_valid(const char *b)
{
	size_t n = b ? strlen(b) : 0;

	if (n < 3 || n > 63)
		return false;
	for (const char *c = b; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '.' ||
		      *c == '-'))
			return false;
	return true;
}

bool s3_key_valid(const char *key)
{
	if (!key || !*key || strlen(key) > 1024)
		return false;
	for (const char *c = key; *c; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '/' || *c == '-'))
			return false;
	return true;
}

int s3_client_new(const S3Config *config, S3Client **ret, char **ret_error)
{
	if (!config->region || !*config->region)
		return errorf(ret_error, -EINVAL, "S3: no region");
	if (!bucket_valid(config->bucket))
		return errorf(ret_error, -EINVAL,
			      "S3 bucket \"%s\": not 3-63 of lower-case letters, digits, '.', '-'",
			      config->bucket ? config->bucket : "");
	const char *e = config->endpoint;
	if (e && strncmp(e, "https://", 8) != 0 && strncmp(e, "http://", 7) != 0)
		return errorf(ret_error, -EINVAL, "S3 endpoint %s: not an http:// or https:// URL",
			      e);
	S3Client *c = xnew0(S3Client, 1);
	c->endpoint = e ? xstrdup(e) : xasprintf("https://s3.%s.amazonaws.com", config->region);
	for (size_t n = strlen(c->endpoint); n > 0 && c->endpoint[n - 1] == '/'; n--)
		c->endpoint[n - 1] = 0;
	c->bucket = xstrdup(config->bucket);
	if (config->path_style) {
		c->base = xasprintf("%s/%s", c->endpoint, c->bucket);
	} else {
		const char *host = strstr(c->endpoint, "://") + 3;
		c->base = xasprintf("%.*s%s.%s", (int)(host - c->endpoint), c->endpoint, c->bucket,
				    host);
	}
	c->name = xasprintf("s3://%s at %s", c->bucket, c->endpoint);
	c->sigv4 = xasprintf("aws:amz:%s:s3", config->region);
	c->unsigned_payload = config->unsigned_payload;
	c->signing = (AwsSigning){.credentials = config->credentials, .sigv4 = c->sigv4};
	c->retry = config->retry;
	c->pool = http_pool_new(16);
	*ret = c;
	return 0;
}

void s3_client_free(S3Client *c)
{
	if (!c)
		return;
	http_pool_free(c->pool);
	free(c->endpoint);
	free(c->bucket);
	free(c->base);
	free(c->name);
	free(c->sigv4);
	free(c);
}

const char *s3_client_name(const S3Client *c)
{
	return c->name;
}

void s3_client_stats(S3Client *c, S3Stats *ret)
{
	*ret = (S3Stats){
		.requests = atomic_load(&c->requests),
		.attempts = atomic_load(&c->attempts),
		.retries = atomic_load(&c->retries),
		.throttled = atomic_load(&c->throttled),
		.bytes_sent = atomic_load(&c->bytes_sent),
		.bytes_received = atomic_load(&c->bytes_received),
	};
}

static int code_to_errno(const char *code, int status)
{
	static const struct {
		const char *code;
		int err;
	} table[] = {
		{"NoSuchKey", -ENOENT},
		{"NoSuchUpload", -ENOENT},
		{"NoSuchBucket", -ENXIO},
		{"InvalidAccessKeyId", -EACCES},
		{"SignatureDoesNotMatch", -EACCES},
		{"ExpiredToken", -EACCES},
		{"InvalidToken", -EACCES},
		{"AccessDenied", -EPERM},
		{"PreconditionFailed", -EEXIST},
		{"InvalidRange", -ERANGE},
		{"EntityTooLarge", -EFBIG},
		{"EntityTooSmall", -EINVAL},
		{"InvalidPart", -EINVAL},
		{"InvalidPartOrder", -EINVAL},
		{"InvalidBucketName", -EINVAL},
		{"NotImplemented", -EOPNOTSUPP},
	};

	if (aws_error_retryable(code, status))
		return -EAGAIN;
	for (size_t i = 0; code && i < ELEMENTSOF(table); i++)
		if (strcmp(code, table[i].code) == 0)
			return table[i].err;
	switch (status) {
	case 400:
		return -EINVAL;
	case 401:
		return -EACCES;
	case 403:
		return -EPERM;
	case 404:
		return -ENOENT;
	case 409:
		return -EBUSY;
	case 412:
		return -EEXIST;
	case 416:
		return -ERANGE;
	default:
		return -EPROTO;
	}
}

static char *md5_base64(const void *data, size_t len)
{
	unsigned char md[DIGEST_MD5_LEN];

	digest_md5(data, len, md);
	return base64_encode(md, sizeof(md));
}

typedef struct S3Request {
	const char *method;
	const char *key;   /* NULL: the bucket */
	const char *query; /* canonical: keys sorted, values encoded, "k=" for none; NULL: none */
	const char *const *headers;
	const void *body;
	size_t len;
	size_t max_reply;
} S3Request;

/* The object a message names: "s3://bucket/key at endpoint". */
static char *object_name(S3Client *c, const char *key)
{
	return key ? xasprintf("s3://%s/%s at %s", c->bucket, key, c->endpoint) : xstrdup(c->name);
}

/* Sends one request; 0 with *ret a reply of status < 300 (or a 404 of HEAD), else an errno with
 * *ret_error naming the object. */
static int s3_call(S3Client *c, const S3Request *r, usec_t deadline, HttpReply *ret,
		   char **ret_error)
{
	_cleanup_free_ char *url = NULL, *what = object_name(c, r->key), *sha = NULL;
	const char *headers[16] = {};
	size_t n = 0;
	char hex[65];
	AwsRequestStats stats = {};
	AwsError e = {};
	HttpReply reply = {};
	int k;

	if (r->key && !s3_key_valid(r->key))
		return errorf(ret_error, -EINVAL, "%s: key not made of [A-Za-z0-9._/-]", what);
	url = xasprintf("%s/%s%s%s", c->base, r->key ? r->key : "", r->query ? "?" : "",
			r->query ? r->query : "");
	if (c->signing.credentials) {
		if (c->unsigned_payload && r->body)
			sha = xstrdup("x-amz-content-sha256: UNSIGNED-PAYLOAD");
		else {
			digest_sha256_hex(r->body ? r->body : "", r->len, hex);
			sha = xasprintf("x-amz-content-sha256: %s", hex);
		}
		headers[n++] = sha;
	}
	for (const char *const *h = r->headers; h && *h && n < ELEMENTSOF(headers) - 2; h++)
		headers[n++] = *h;
	if (r->body)
		headers[n++] = "Content-Type: application/octet-stream";
	HttpRequest req = {
		.method = r->method,
		.url = url,
		.headers = headers,
		.body = r->body,
		.body_len = r->len,
		.max_reply = r->max_reply,
	};
	atomic_fetch_add(&c->requests, 1);
	k = aws_request(c->pool, &c->signing, &c->retry, &req, deadline, &reply, &stats, &e);
	atomic_fetch_add(&c->attempts, stats.attempts);
	atomic_fetch_add(&c->retries, stats.retries);
	atomic_fetch_add(&c->throttled, stats.throttled);
	atomic_fetch_add(&c->bytes_sent, (uint64_t)r->len * stats.attempts);
	if (k < 0) {
		if (e.code && k != -ETIMEDOUT && k != -EAGAIN)
			k = code_to_errno(e.code, e.http_status);
		errorf(ret_error, k, "%s: %s", what, e.message);
		aws_error_done(&e);
		return k;
	}
	atomic_fetch_add(&c->bytes_received, reply.body_len);
	if (reply.status < 300 || (reply.status == 404 && strcmp(r->method, "HEAD") == 0)) {
		*ret = reply;
		return 0;
	}
	aws_error_from_reply((int)reply.status, reply.body, reply.body_len, &e);
	if (!e.code && reply.status == 404)
		e.code = xstrdup("NoSuchKey");
	k = code_to_errno(e.code, e.http_status);
	errorf(ret_error, k, "%s: %s", what, e.message);
	aws_error_done(&e);
	http_reply_done(&reply);
	return k;
}

int s3_put(S3Client *c, const char *key, const void *data, size_t len, bool if_none_match,
	   usec_t deadline, char **ret_error)
{
	const char *headers[] = {if_none_match ? "If-None-Match: *" : NULL, NULL};
	HttpReply reply = {};
	int r = s3_call(c,
			&(S3Request){.method = "PUT",
				     .key = key,
				     .headers = headers,
				     .body = data ? data : "",
				     .len = len},
			deadline, &reply, ret_error);
	http_reply_done(&reply);
	return r;
}

int s3_get(S3Client *c, const char *key, uint64_t offset, uint64_t length, size_t max,
	   usec_t deadline, char **ret_data, size_t *ret_len, char **ret_error)
{
	_cleanup_free_ char *range = NULL;
	HttpReply reply = {};
	int r;

	if (offset > 0 || length > 0)
		range = length > 0 ? xasprintf("Range: bytes=%" PRIu64 "-%" PRIu64, offset,
					       offset + length - 1)
				   : xasprintf("Range: bytes=%" PRIu64 "-", offset);
	const char *headers[] = {range, NULL};
	r = s3_call(c,
		    &(S3Request){.method = "GET",
				 .key = key,
				 .headers = headers,
				 .max_reply = max ? max : GET_MAX_DEFAULT},
		    deadline, &reply, ret_error);
	if (r < 0)
		return r;
	*ret_len = reply.body_len;
	*ret_data = TAKE_PTR(reply.body);
	http_reply_done(&reply);
	return 0;
}

int s3_head(S3Client *c, const char *key, usec_t deadline, uint64_t *ret_size, char **ret_error)
{
	_cleanup_free_ char *what = NULL;
	HttpReply reply = {};
	int r = s3_call(c, &(S3Request){.method = "HEAD", .key = key}, deadline, &reply, ret_error);
	if (r < 0)
		return r;
	if (reply.status == 404) {
		http_reply_done(&reply);
		what = object_name(c, key);
		return errorf(ret_error, -ENOENT, "%s: no such object", what);
	}
	const char *len = strmap_get(&reply.headers, "content-length");
	if (ret_size)
		*ret_size = len ? strtoull(len, NULL, 10) : 0;
	http_reply_done(&reply);
	return 0;
}

int s3_delete(S3Client *c, const char *key, usec_t deadline, char **ret_error)
{
	HttpReply reply = {};
	int r = s3_call(c, &(S3Request){.method = "DELETE", .key = key}, deadline, &reply,
			ret_error);
	http_reply_done(&reply);
	return r == -ENOENT ? 0 : r;
}

static int delete_batch(S3Client *c, const char *const *keys, size_t n, usec_t deadline,
			char **ret_error)
{
	StrBuf b = {};
	_cleanup_free_ char *body = NULL, *md5 = NULL, *md5_header = NULL;
	_cleanup_xml_free_ XmlNode *root = NULL;
	HttpReply reply = {};
	int r;

	strbuf_adds(
		&b,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
		"<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>");
	for (size_t i = 0; i < n; i++) {
		if (!s3_key_valid(keys[i])) {
			strbuf_done(&b);
			return errorf(ret_error, -EINVAL,
				      "s3://%s/%s: key not made of "
				      "[A-Za-z0-9._/-]",
				      c->bucket, keys[i]);
		}
		strbuf_adds(&b, "<Object><Key>");
		strbuf_adds(&b, keys[i]);
		strbuf_adds(&b, "</Key></Object>");
	}
	strbuf_adds(&b, "</Delete>");
	size_t len = b.len;
	body = strbuf_steal(&b);
	md5 = md5_base64(body, len);
	md5_header = xasprintf("Content-MD5: %s", md5);
	const char *headers[] = {md5_header, NULL};
	r = s3_call(c,
		    &(S3Request){.method = "POST",
				 .query = "delete=",
				 .headers = headers,
				 .body = body,
				 .len = len},
		    deadline, &reply, ret_error);
	if (r < 0)
		return r;
	r = xml_parse(reply.body, reply.body_len, &root, NULL);
	http_reply_done(&reply);
	if (r < 0)
		return errorf(ret_error, -EPROTO, "%s: DeleteObjects: unreadable reply", c->name);
	XML_FOREACH (err, root, "Error") {
		const char *key = xml_text(err, "Key"), *code = xml_text(err, "Code");
		if (code && strcmp(code, "NoSuchKey") == 0)
			continue;
		return errorf(ret_error, code_to_errno(code, 500), "s3://%s/%s at %s: %s: %s",
			      c->bucket, key ? key : "?", c->endpoint, code ? code : "?",
			      xml_text(err, "Message") ?: "");
	}
	return 0;
}

int s3_delete_many(S3Client *c, const char *const *keys, size_t n, usec_t deadline,
		   char **ret_error)
{
	for (size_t i = 0; i < n; i += DELETE_BATCH) {
		int r = delete_batch(c, keys + i, MIN(n - i, (size_t)DELETE_BATCH), deadline,
				     ret_error);
		if (r < 0)
			return r;
	}
	return 0;
}

int s3_list(S3Client *c, const char *prefix, int (*fn)(const S3Object *o, void *userdata),
	    void *userdata, usec_t deadline, char **ret_error)
{
	_cleanup_free_ char *token = NULL;
	int r;

	if (prefix && *prefix && !s3_key_valid(prefix))
		return errorf(ret_error, -EINVAL, "%s: prefix %s not made of [A-Za-z0-9._/-]",
			      c->name, prefix);
	for (;;) {
		_cleanup_free_ char *enc = token ? http_url_encode(token) : NULL, *query = NULL;
		_cleanup_free_ char *pfx = http_url_encode(prefix ? prefix : "");
		_cleanup_xml_free_ XmlNode *root = NULL;
		HttpReply reply = {};

		/* Canonical order: continuation-token, list-type, prefix. */
		query = xasprintf("%s%s%slist-type=2&prefix=%s", enc ? "continuation-token=" : "",
				  enc ? enc : "", enc ? "&" : "", pfx);
		r = s3_call(c, &(S3Request){.method = "GET", .query = query}, deadline, &reply,
			    ret_error);
		if (r < 0)
			return r;
		r = xml_parse(reply.body, reply.body_len, &root, NULL);
		http_reply_done(&reply);
		if (r < 0)
			return errorf(ret_error, -EPROTO, "%s: ListObjectsV2: unreadable reply",
				      c->name);
		XML_FOREACH (item, root, "Contents") {
			const char *key = xml_text(item, "Key"), *size = xml_text(item, "Size");
			const char *mod = xml_text(item, "LastModified");
			S3Object o = {.key = key, .size = size ? strtoull(size, NULL, 10) : 0};
			if (!key)
				continue;
			if (mod && aws_parse_time(mod, &o.last_modified) < 0)
				o.last_modified = 0;
			r = fn(&o, userdata);
			if (r != 0)
				return r;
		}
		const char *trunc = xml_text(root, "IsTruncated");
		const char *next = xml_text(root, "NextContinuationToken");
		if (!trunc || strcmp(trunc, "true") != 0 || !next || !*next)
			return 0;
		free(token);
		token = xstrdup(next);
	}
}

int s3_multipart_create(S3Client *c, const char *key, usec_t deadline, char **ret_upload_id,
			char **ret_error)
{
	_cleanup_xml_free_ XmlNode *root = NULL;
	_cleanup_free_ char *what = NULL;
	HttpReply reply = {};
	int r = s3_call(c, &(S3Request){.method = "POST", .key = key, .query = "uploads="},
			deadline, &reply, ret_error);
	if (r < 0)
		return r;
	r = xml_parse(reply.body, reply.body_len, &root, NULL);
	http_reply_done(&reply);
	const char *id = r < 0 ? NULL : xml_text(root, "UploadId");
	if (!id || !*id) {
		what = object_name(c, key);
		return errorf(ret_error, -EPROTO, "%s: CreateMultipartUpload: no UploadId", what);
	}
	*ret_upload_id = xstrdup(id);
	return 0;
}

int s3_multipart_put(S3Client *c, const char *key, const char *upload_id, unsigned part,
		     const void *data, size_t len, usec_t deadline, char **ret_etag,
		     char **ret_error)
{
	_cleanup_free_ char *enc = http_url_encode(upload_id), *query = NULL, *what = NULL;
	HttpReply reply = {};
	int r;

	query = xasprintf("partNumber=%u&uploadId=%s", part, enc);
	r = s3_call(c,
		    &(S3Request){.method = "PUT",
				 .key = key,
				 .query = query,
				 .body = data ? data : "",
				 .len = len},
		    deadline, &reply, ret_error);
	if (r < 0)
		return r;
	const char *etag = strmap_get(&reply.headers, "etag");
	if (!etag || !*etag) {
		http_reply_done(&reply);
		what = object_name(c, key);
		return errorf(ret_error, -EPROTO, "%s: UploadPart %u: no ETag", what, part);
	}
	*ret_etag = xstrdup(etag);
	http_reply_done(&reply);
	return 0;
}

int s3_multipart_complete(S3Client *c, const char *key, const char *upload_id,
			  const char *const *etags, unsigned n, usec_t deadline, char **ret_error)
{
	_cleanup_free_ char *enc = http_url_encode(upload_id), *query = NULL, *body = NULL;
	StrBuf b = {};
	HttpReply reply = {};
	int r;

	strbuf_adds(&b, "<CompleteMultipartUpload>");
	for (unsigned i = 0; i < n; i++) {
		char part[96];
		snprintf(part, sizeof(part), "<Part><PartNumber>%u</PartNumber><ETag>", i + 1);
		strbuf_adds(&b, part);
		strbuf_adds(&b, etags[i]);
		strbuf_adds(&b, "</ETag></Part>");
	}
	strbuf_adds(&b, "</CompleteMultipartUpload>");
	size_t len = b.len;
	body = strbuf_steal(&b);
	query = xasprintf("uploadId=%s", enc);
	r = s3_call(c,
		    &(S3Request){
			    .method = "POST", .key = key, .query = query, .body = body, .len = len},
		    deadline, &reply, ret_error);
	if (r < 0)
		return r;
	/* S3 may answer 200 with an error inside when the parts fail late. */
	AwsError e = {};
	if (reply.body_len > 0 && memmem(reply.body, reply.body_len, "<Error>", 7)) {
		_cleanup_free_ char *what = object_name(c, key);
		aws_error_from_reply(500, reply.body, reply.body_len, &e);
		r = errorf(ret_error, code_to_errno(e.code, 500), "%s: %s", what, e.message);
		aws_error_done(&e);
	}
	http_reply_done(&reply);
	return r;
}

int s3_multipart_abort(S3Client *c, const char *key, const char *upload_id, usec_t deadline,
		       char **ret_error)
{
	_cleanup_free_ char *enc = http_url_encode(upload_id), *query = NULL;
	HttpReply reply = {};

	query = xasprintf("uploadId=%s", enc);
	int r = s3_call(c, &(S3Request){.method = "DELETE", .key = key, .query = query}, deadline,
			&reply, ret_error);
	http_reply_done(&reply);
	return r;
}
