/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's type: its options on volplugd's command line, and how it serves. */
#include <string.h>

#include "alloc.h"
#include "parse-util.h"
#include "pool-backend.h"
#include "time-util.h"

const PoolSettings pool_settings_default = {
	.path = (char *)"/var/lib/volplug/pool",
	.overprovision = 1,
	.trim_interval = 10 * 60 * USEC_PER_SEC,
	.store_gc_interval = 60 * 60 * USEC_PER_SEC,
	.store_chunk_size = STORE_CHUNK_SIZE_DEFAULT,
};

static const BackendOption options[] = {
	{"pool", "DIR", "pool directory (default /var/lib/volplug/pool)"},
	{"pool-init", NULL,
	 "make a new, empty pool in DIR although the record\n"
	 "says a pool was there (without it, a pool directory\n"
	 "found absent or empty is refused: its pool is lost)"},
	{"pool-capacity", "SIZE", "capacity of the pool, e.g. 100G (default: free space)"},
	{"overprovision-ratio", "R",
	 "provision volumes up to R x the capacity, 1-100 (thin\n"
	 "provisioning beyond 1; default 1)"},
	{"trim-interval", "TIME",
	 "how often the node gives the space of files deleted\n"
	 "in staged volumes back to the pool (default 10m; 0:\n"
	 "never)"},
	{"store-bucket", "NAME",
	 "the S3 bucket of the snapshot store: snapshots of the\n"
	 "VolumeSnapshotClass parameter location: store go\n"
	 "there (docs/snapshots.md; default: no store)"},
	{"store-endpoint", "URL",
	 "the store's S3 endpoint, http(s)://host[:port]\n"
	 "(default: AWS S3 of the region)"},
	{"store-prefix", "P", "where in the bucket the store lives (default: its root)"},
	{"store-region", "R", "the store's region (default: AWS_REGION, else us-east-1)"},
	{"store-path-style", NULL,
	 "address the bucket as URL/bucket/key (MinIO, Ceph)\n"
	 "rather than bucket.host/key"},
	{"store-chunk-size", "SIZE",
	 "the store's chunk size for new uploads, a power of two\n"
	 "from 64K to 64M: smaller sends less of a volume that\n"
	 "changed here and there, with more requests (default 4M)"},
	{"store-gc-interval", "TIME",
	 "how often chunks no snapshot names are collected from\n"
	 "the store (default 1h; 0: never)"},
	{},
};

static void *settings_new(void)
{
	PoolSettings *s = xnew0(PoolSettings, 1);

	*s = pool_settings_default;
	s->path = xstrdup(pool_settings_default.path);
	return s;
}

static void settings_free(void *settings)
{
	PoolSettings *s = settings;

	free(s->path);
	free(s->store_endpoint);
	free(s->store_bucket);
	free(s->store_prefix);
	free(s->store_region);
	free(s);
}

/* An overprovision ratio: a plain decimal number from 1 to 100 ("1.5"). */
static int parse_ratio(const char *s, double *ret)
{
	char *end;

	if (!*s || strchr(s, 'x') || strchr(s, 'X') || strchr(s, 'e') || strchr(s, 'E'))
		return -EINVAL; /* no hex floats, no exponents, no "inf" */
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || *end || v != v)
		return -EINVAL;
	if (v < 1 || v > 100)
		return -ERANGE;
	*ret = v;
	return 0;
}

/* A string option of the store: a new value for *field. */
static int set_string(char **field, const char *value)
{
	if (!*value)
		return -EINVAL;
	free(*field);
	*field = xstrdup(value);
	return 0;
}

/* The store's options: -ENOENT for another. */
static int store_option_set(PoolSettings *s, const char *option, const char *value)
{
	if (strcmp(option, "store-path-style") == 0) {
		s->store_path_style = true;
		return 0;
	}
	if (strcmp(option, "store-gc-interval") == 0)
		return parse_duration(value, &s->store_gc_interval);
	if (strcmp(option, "store-chunk-size") == 0) {
		uint64_t v;
		int r = parse_size(value, &v);
		if (r < 0)
			return r;
		if (v & (v - 1))
			return -EINVAL; /* not a power of two */
		if (v < ((uint64_t)64 << 10) || v > ((uint64_t)64 << 20))
			return -ERANGE;
		s->store_chunk_size = (size_t)v;
		return 0;
	}
	char **fields[] = {&s->store_bucket, &s->store_endpoint, &s->store_prefix,
			   &s->store_region};
	const char *names[] = {"store-bucket", "store-endpoint", "store-prefix", "store-region"};
	for (size_t i = 0; i < ELEMENTSOF(names); i++)
		if (strcmp(option, names[i]) == 0)
			return set_string(fields[i], value);
	return -ENOENT;
}

static int settings_set(void *settings, const char *option, const char *value, char **ret_error)
{
	PoolSettings *s = settings;

	(void)ret_error;
	if (strncmp(option, "store-", 6) == 0)
		return store_option_set(s, option, value);
	if (strcmp(option, "pool-init") == 0) {
		s->init = true;
		return 0;
	}
	if (strcmp(option, "pool") == 0)
		return set_string(&s->path, value);
	if (strcmp(option, "pool-capacity") == 0)
		return parse_size(value, &s->capacity);
	if (strcmp(option, "overprovision-ratio") == 0)
		return parse_ratio(value, &s->overprovision);
	if (strcmp(option, "trim-interval") == 0)
		return parse_duration(value, &s->trim_interval);
	return -ENOENT;
}

BACKEND_NEW(pool);
BACKEND_TYPE(pool) = {
	.name = "pool",
	.heading = "The pool (--backend pool, the default): sparse files on this node, and\n"
		   "Flexvolume drivers beside it",
	.options = options,
	.settings_new = settings_new,
	.settings_set = settings_set,
	.settings_free = settings_free,
	.new = pool_backend_new,
	.selectable = true,
	.companions = (const char *const[]){"flex", NULL},
	.flex_drivers = true,
};
