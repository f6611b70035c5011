/* SPDX-License-Identifier: Apache-2.0 */
#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#include "alloc.h"
#include "store-internal.h"

#define MANIFEST_FORMAT "volplug-snapshot/1"
#define MANIFEST_MAX ((size_t)64 << 20)

static bool prefix_valid(const char *p)
{
	size_t n = strlen(p);

	if (n == 0)
		return true;
	if (p[0] == '/' || p[n - 1] == '/' || strstr(p, "//") || n > 512)
		return false;
	return s3_key_valid(p);
}

int store_new(const StoreConfig *config, Store **ret, char **ret_error)
{
	const char *prefix = config->prefix ? config->prefix : "";
	size_t chunk = config->chunk_size ? config->chunk_size : STORE_CHUNK_SIZE_DEFAULT;

	if (!config->s3)
		return errorf(ret_error, -EINVAL, "snapshot store: no S3 client");
	if (!prefix_valid(prefix))
		return errorf(ret_error, -EINVAL,
			      "snapshot store prefix \"%s\": not made of [A-Za-z0-9._/-], or "
			      "starts or ends with '/'",
			      prefix);
	if (chunk < ((size_t)64 << 10) || chunk > ((size_t)64 << 20) || (chunk & (chunk - 1)))
		return errorf(ret_error, -EINVAL,
			      "snapshot store chunk size %zu: not a power of two from 64 KiB "
			      "to 64 MiB",
			      chunk);
	int r = store_zstd_load(ret_error);
	if (r < 0)
		return r;
	store_metrics_init();
	Store *s = xnew0(Store, 1);
	s->s3 = config->s3;
	s->prefix = *prefix ? xasprintf("%s/", prefix) : xstrdup("");
	s->node = xstrdup(config->node ? config->node : "unknown");
	s->chunk_size = chunk;
	s->parallel = config->parallel ? config->parallel : 4;
	s->zstd_level = config->zstd_level ? config->zstd_level : 1;
	s->lease = config->lease ? config->lease : 10 * 60 * USEC_PER_SEC;
	s->grace = config->grace ? config->grace : 60 * 60 * USEC_PER_SEC;
	s->multipart_threshold =
		config->multipart_threshold ? config->multipart_threshold : (size_t)16 << 20;
	*ret = s;
	return 0;
}

void store_free(Store *s)
{
	if (!s)
		return;
	free(s->prefix);
	free(s->node);
	free(s);
}

bool store_id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	if (n == 0 || n > STORE_ID_MAX || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
		return false;
	for (const char *c = id; *c; c++)
		if (!((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
			return false;
	return true;
}

static bool hash_valid(const char *h)
{
	if (!h || strlen(h) != 64)
		return false;
	for (const char *c = h; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

char *store_chunk_key(const Store *s, const char *hash)
{
	return xasprintf("%schunks/%.2s/%s", s->prefix, hash, hash);
}

char *store_manifest_key(const Store *s, const char *id)
{
	return xasprintf("%ssnapshots/%s.json", s->prefix, id);
}

char *store_intent_key(const Store *s, const char *id)
{
	return xasprintf("%sintents/%s", s->prefix, id);
}

void store_manifest_done(StoreManifest *m)
{
	free(m->id);
	free(m->filesystem);
	free(m->node);
	strmap_done(&m->parameters);
	free(m->chunks);
	*m = (StoreManifest){};
}

char *store_manifest_format(const StoreManifest *m)
{
	json_t *params = json_object(), *chunks = json_array();
	char created[32];
	time_t t = (time_t)(m->created / USEC_PER_SEC);
	struct tm tm;

	for (size_t i = 0; i < m->parameters.n; i++)
		json_object_set_new(params, m->parameters.keys[i],
				    json_string(m->parameters.values[i]));
	for (size_t i = 0; i < m->n_chunks; i++)
		json_array_append_new(chunks, json_pack("{sIsIss}", "offset",
							(json_int_t)m->chunks[i].offset, "length",
							(json_int_t)m->chunks[i].length, "hash",
							m->chunks[i].hash));
	gmtime_r(&t, &tm);
	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	json_t *o = json_pack("{sssssIsIsssssssoso}", "format", MANIFEST_FORMAT, "id", m->id,
			      "volume_size", (json_int_t)m->volume_size, "chunk_size",
			      (json_int_t)m->chunk_size, "filesystem",
			      m->filesystem ? m->filesystem : "", "node", m->node ? m->node : "",
			      "created", created, "parameters", params, "chunks", chunks);
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		abort();
	return text;
}

int store_manifest_parse(const char *text, size_t len, StoreManifest *ret, char **ret_error)
{
	json_error_t jerr;
	json_auto_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	StoreManifest m = {};
	json_int_t size = -1, chunk = -1;
	const char *format = NULL, *id = NULL, *fs = "", *node = "", *created = NULL;
	json_t *params = NULL, *chunks = NULL;
	int r = -EUCLEAN;

	if (!o)
		return errorf(ret_error, r, "manifest: not JSON: %s (line %d)", jerr.text,
			      jerr.line);
	if (json_unpack_ex(o, &jerr, 0, "{ss ss sI sI s?s s?s s?s s?o so}", "format", &format, "id",
			   &id, "volume_size", &size, "chunk_size", &chunk, "filesystem", &fs,
			   "node", &node, "created", &created, "parameters", &params, "chunks",
			   &chunks) < 0)
		return errorf(ret_error, r, "manifest: %s", jerr.text);
	if (strcmp(format, MANIFEST_FORMAT) != 0)
		return errorf(ret_error, r, "manifest: format \"%s\", not " MANIFEST_FORMAT,
			      format);
	if (!store_id_valid(id))
		return errorf(ret_error, r, "manifest: id not made of [A-Za-z0-9._-]");
	if (size <= 0 || chunk < (64 << 10) || chunk > (64 << 20) || (chunk & (chunk - 1)))
		return errorf(ret_error, r,
			      "manifest %s: volume_size or chunk_size out of "
			      "range",
			      id);
	if (!json_is_array(chunks) || (params && !json_is_object(params)))
		return errorf(ret_error, r, "manifest %s: chunks or parameters malformed", id);
	m.id = xstrdup(id);
	m.volume_size = (uint64_t)size;
	m.chunk_size = (uint32_t)chunk;
	m.filesystem = xstrdup(fs);
	m.node = xstrdup(node);
	if (created)
		(void)aws_parse_time(created, &m.created);
	const char *k;
	json_t *v;
	json_object_foreach (params, k, v) {
		if (!json_is_string(v)) {
			store_manifest_done(&m);
			return errorf(ret_error, r, "manifest %s: parameter %s not a string", id,
				      k);
		}
		strmap_set(&m.parameters, k, json_string_value(v));
	}
	m.n_chunks = json_array_size(chunks);
	m.chunks = xnew0(StoreChunkRef, m.n_chunks ? m.n_chunks : 1);
	for (size_t i = 0; i < m.n_chunks; i++) {
		json_int_t off = -1, l = -1;
		const char *hash = NULL;
		if (json_unpack(json_array_get(chunks, i), "{sIsIss}", "offset", &off, "length", &l,
				"hash", &hash) < 0 ||
		    off < 0 || off % chunk != 0 || (uint64_t)off >= m.volume_size ||
		    (uint64_t)l != MIN((uint64_t)chunk, m.volume_size - (uint64_t)off) ||
		    (i > 0 && (uint64_t)off <= m.chunks[i - 1].offset) || !hash_valid(hash)) {
			store_manifest_done(&m);
			return errorf(ret_error, r,
				      "manifest %s: chunk %zu malformed (offset, length or hash)",
				      id, i);
		}
		m.chunks[i].offset = (uint64_t)off;
		m.chunks[i].length = (uint32_t)l;
		memcpy(m.chunks[i].hash, hash, 65);
	}
	*ret = m;
	return 0;
}

int store_manifest_get(Store *s, const char *id, usec_t deadline, StoreManifest *ret,
		       char **ret_error)
{
	_cleanup_free_ char *key = NULL, *text = NULL, *msg = NULL;
	size_t len = 0;
	int r;

	if (!store_id_valid(id))
		return errorf(ret_error, -EINVAL,
			      "snapshot ID \"%s\": not 1-%d of "
			      "[A-Za-z0-9._-]",
			      id ? id : "", STORE_ID_MAX);
	key = store_manifest_key(s, id);
	r = s3_get(s->s3, key, 0, 0, MANIFEST_MAX, deadline, &text, &len, &msg);
	if (r == -ENOENT)
		return errorf(ret_error, r, "snapshot %s: not in %s", id, s3_client_name(s->s3));
	if (r < 0)
		return errorf(ret_error, r, "snapshot %s: %s", id, msg);
	r = store_manifest_parse(text, len, ret, &msg);
	if (r < 0)
		return errorf(ret_error, r, "snapshot %s in %s: %s", id, s3_client_name(s->s3),
			      msg);
	if (strcmp(ret->id, id) != 0) {
		store_manifest_done(ret);
		return errorf(ret_error, -EUCLEAN, "snapshot %s in %s: its manifest names %s", id,
			      s3_client_name(s->s3), ret->id);
	}
	return 0;
}

typedef struct ListCtx {
	size_t skip; /* length of the snapshots/ prefix */
	int (*fn)(const char *id, void *userdata);
	void *userdata;
} ListCtx;

static int list_one(const S3Object *o, void *userdata)
{
	ListCtx *ctx = userdata;
	const char *name = o->key + ctx->skip;
	size_t n = strlen(name);

	if (n <= 5 || strcmp(name + n - 5, ".json") != 0)
		return 0;
	_cleanup_free_ char *id = xstrndup(name, n - 5);
	if (!store_id_valid(id))
		return 0;
	return ctx->fn(id, ctx->userdata);
}

int store_list(Store *s, int (*fn)(const char *id, void *userdata), void *userdata, usec_t deadline,
	       char **ret_error)
{
	_cleanup_free_ char *prefix = xasprintf("%ssnapshots/", s->prefix);
	ListCtx ctx = {.skip = strlen(prefix), .fn = fn, .userdata = userdata};

	return s3_list(s->s3, prefix, list_one, &ctx, deadline, ret_error);
}

int store_delete(Store *s, const char *id, usec_t deadline, char **ret_error)
{
	_cleanup_free_ char *key = NULL;

	if (!store_id_valid(id))
		return errorf(ret_error, -EINVAL,
			      "snapshot ID \"%s\": not 1-%d of "
			      "[A-Za-z0-9._-]",
			      id ? id : "", STORE_ID_MAX);
	key = store_manifest_key(s, id);
	return s3_delete(s->s3, key, deadline, ret_error);
}
