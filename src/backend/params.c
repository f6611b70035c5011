/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "error-util.h"
#include "hashmap.h"
#include "params.h"
#include "log.h"
#include "parse-util.h"

#define GIB (UINT64_C(1) << 30)
#define TIB_IN_GIB UINT64_C(1024)

typedef VolumeTypeLimits TypeInfo;

/* EC2's limits (the EC2 API reference and the EBS user guide, as of 2026): gp3 up to 80,000
 * IOPS, 2,000 MiB/s and 64 TiB since September 2025; io2 is io2 Block Express. The one table:
 * tests/ec2sim/limits.py models the same numbers and test-params compares the two. */
static const TypeInfo types[] = {
	{"gp3", 3000, 80000, 500, 125, 2000, 1, 64 * TIB_IN_GIB},
	{"gp2", 0, 0, 0, 0, 0, 1, 16 * TIB_IN_GIB},
	{"io1", 100, 64000, 50, 0, 0, 4, 16 * TIB_IN_GIB},
	{"io2", 100, 256000, 1000, 0, 0, 4, 64 * TIB_IN_GIB},
	{"sc1", 0, 0, 0, 0, 0, 125, 16 * TIB_IN_GIB},
	{"st1", 0, 0, 0, 0, 0, 125, 16 * TIB_IN_GIB},
	{"standard", 0, 0, 0, 0, 0, 1, 1 * TIB_IN_GIB},
};
#define TYPE_NAMES "gp3, gp2, io1, io2, sc1, st1, standard"
#define IOPS_TYPES "gp3, io1 and io2"

/* gp3's baseline; also what EC2 ModifyVolume gives a volume changed to gp3, io1 or io2
 * without iops. */
#define DEFAULT_IOPS 3000
#define KMS_KEY_ID_MAX 2048
/* CreateVolume's VolumeInitializationRate, MiB/s */
#define INIT_RATE_MIN 100
#define INIT_RATE_MAX 300

static bool streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

static bool is_fstype(const char *s)
{
	return streq(s, "ext2") || streq(s, "ext3") || streq(s, "ext4") || streq(s, "xfs");
}

const VolumeTypeLimits *volume_type_limits(size_t *ret_n)
{
	*ret_n = ELEMENTSOF(types);
	return types;
}

static const TypeInfo *type_find(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(types); i++)
		if (strcmp(types[i].name, name) == 0)
			return &types[i];
	return NULL;
}

typedef enum Key {
	K_TYPE,
	K_IOPS,
	K_IOPS_PER_GB,
	K_ALLOW_AUTO,
	K_THROUGHPUT,
	K_ENCRYPTED,
	K_KMS_KEY_ID,
	K_FSTYPE,
	K_BLOCK_SIZE,
	K_INODE_SIZE,
	K_BYTES_PER_INODE,
	K_NUMBER_OF_INODES,
	K_EXT4_BIGALLOC,
	K_EXT4_CLUSTER_SIZE,
	K_FS_GROUP_POLICY,
	K_EXT4_ENCRYPTION,
	K_EXT4_FAST_COMMIT,
	K_INIT_RATE,
	K_BLOCK_EXPRESS,
	K_AUTO_IOPS_ON_MODIFY,
	K_BLOCK_ATTACH_UNTIL_INIT,
	K_VOLUME_KIND,
	_K_NAMED, /* the keys above have one fixed name */
	K_TAG = _K_NAMED,
	K_IGNORED,
	K_UNKNOWN,
} Key;

static const char *const key_names[_K_NAMED] = {
	[K_TYPE] = "type",
	[K_IOPS] = "iops",
	[K_IOPS_PER_GB] = "iopsPerGB",
	[K_ALLOW_AUTO] = "allowAutoIOPSPerGBIncrease",
	[K_THROUGHPUT] = "throughput",
	[K_ENCRYPTED] = "encrypted",
	[K_KMS_KEY_ID] = "kmsKeyId",
	[K_FSTYPE] = "csi.storage.k8s.io/fstype",
	[K_BLOCK_SIZE] = "blockSize",
	[K_INODE_SIZE] = "inodeSize",
	[K_BYTES_PER_INODE] = "bytesPerInode",
	[K_NUMBER_OF_INODES] = "numberOfInodes",
	[K_EXT4_BIGALLOC] = "ext4BigAlloc",
	[K_EXT4_CLUSTER_SIZE] = "ext4ClusterSize",
	[K_FS_GROUP_POLICY] = "fsGroupChangePolicy",
	[K_EXT4_ENCRYPTION] = "ext4EncryptionSupport",
	[K_EXT4_FAST_COMMIT] = "ext4FastCommit",
	[K_INIT_RATE] = "volumeInitializationRate",
	[K_BLOCK_EXPRESS] = "blockExpress",
	[K_AUTO_IOPS_ON_MODIFY] = "allowAutoIOPSIncreaseOnModify",
	[K_BLOCK_ATTACH_UNTIL_INIT] = "blockAttachUntilInitialized",
	[K_VOLUME_KIND] = "volumeKind",
};

#define KNOWN_KEYS                                                                             \
	"type, iops, iopsPerGB, allowAutoIOPSPerGBIncrease, throughput, encrypted, kmsKeyId, " \
	"tagSpecification_N, "                                                                 \
	"csi.storage.k8s.io/fstype, blockSize, inodeSize, bytesPerInode, numberOfInodes, "     \
	"ext4BigAlloc, ext4ClusterSize, ext4EncryptionSupport, ext4FastCommit, "               \
	"fsGroupChangePolicy, "                                                                \
	"volumeInitializationRate, blockExpress, allowAutoIOPSIncreaseOnModify, "              \
	"blockAttachUntilInitialized, volumeKind"

#define TAG_PREFIX "tagSpecification_"
#define K8S_PREFIX "csi.storage.k8s.io/"

/* N of "tagSpecification_N": 0 and the number, or -EINVAL. */
static int tag_number(const char *key, uint32_t *ret)
{
	if (strncasecmp(key, TAG_PREFIX, strlen(TAG_PREFIX)) != 0)
		return -EINVAL;
	return parse_uint32(key + strlen(TAG_PREFIX), ret) < 0 ? -EINVAL : 0;
}

static Key key_classify(const char *key)
{
	for (size_t k = 0; k < _K_NAMED; k++)
		if (strcasecmp(key, key_names[k]) == 0)
			return (Key)k;
	uint32_t id;
	if (tag_number(key, &id) >= 0)
		return K_TAG;
	/* external-provisioner's pv/pvc names, and the fstype key the EBS driver deprecated and
	 * ignores: the volume capability carries the fstype. */
	if (strncasecmp(key, K8S_PREFIX, strlen(K8S_PREFIX)) == 0 || strcasecmp(key, "fstype") == 0)
		return K_IGNORED;
	return K_UNKNOWN;
}

/* errorf() of -EINVAL that keeps the first message: a printf, so ret_error comes first. */
static int invalidf(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int invalidf(char **ret_error, const char *fmt, ...)
{
	va_list ap;
	char *m;

	if (ret_error && !*ret_error) {
		va_start(ap, fmt);
		if (vasprintf(&m, fmt, ap) >= 0)
			*ret_error = m;
		va_end(ap);
	}
	return -EINVAL;
}

static uint64_t size_gib(uint64_t size_bytes)
{
	uint64_t g = size_bytes / GIB + (size_bytes % GIB != 0);
	return MAX(g, (uint64_t)1);
}

/* "16 TiB" or "125 GiB", for messages. */
static const char *gib_str(char buf[static 32], uint64_t gib)
{
	if (gib >= TIB_IN_GIB && gib % TIB_IN_GIB == 0)
		snprintf(buf, 32, "%llu TiB", (unsigned long long)(gib / TIB_IN_GIB));
	else
		snprintf(buf, 32, "%llu GiB", (unsigned long long)gib);
	return buf;
}

/* The most IOPS a volume of gib may have: the type's maximum, the per-GiB ratio, but never
 * below the type's minimum (a 1 GiB gp3 volume still has its 3000 baseline). */
static uint32_t max_iops_for(const TypeInfo *t, uint64_t gib)
{
	uint64_t by_size = (uint64_t)t->iops_per_gib * gib;
	return (uint32_t)MIN((uint64_t)t->max_iops, MAX((uint64_t)t->min_iops, by_size));
}

static bool is_pow2(uint64_t v)
{
	return v && (v & (v - 1)) == 0;
}

void param_kv_free_many(ParamKV *kv, size_t n)
{
	if (!kv)
		return;
	for (size_t i = 0; i < n; i++) {
		free(kv[i].key);
		free(kv[i].value);
	}
	free(kv);
}

static void tags_free(VolumeTag *tags, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(tags[i].key);
		free(tags[i].value);
	}
	free(tags);
}

void volume_params_done(VolumeParams *p)
{
	tags_free(p->tags, p->n_tags);
	free(p->kms_key_id);
	*p = (VolumeParams){};
}

static int tag_cmp(const void *a, const void *b)
{
	return strcmp(((const VolumeTag *)a)->key, ((const VolumeTag *)b)->key);
}

static int tag_find(const VolumeTag *tags, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(tags[i].key, key) == 0)
			return (int)i;
	return -ENOENT;
}

/* Sets key to value in the array: overwrite when present, else append. */
static void tag_set(VolumeTag **tags, size_t *n, const char *key, const char *value)
{
	int i = tag_find(*tags, *n, key);
	if (i >= 0) {
		free((*tags)[i].value);
		(*tags)[i].value = xstrdup(value);
		return;
	}
	*tags = xrealloc(*tags, (*n + 1) * sizeof(VolumeTag));
	(*tags)[*n] = (VolumeTag){xstrdup(key), xstrdup(value)};
	(*n)++;
}

void volume_params_copy(const VolumeParams *src, VolumeParams *ret)
{
	*ret = *src;
	ret->kms_key_id = src->kms_key_id ? xstrdup(src->kms_key_id) : NULL;
	ret->tags = NULL;
	ret->n_tags = 0;
	for (size_t i = 0; i < src->n_tags; i++)
		tag_set(&ret->tags, &ret->n_tags, src->tags[i].key, src->tags[i].value);
}

const char *fs_group_change_policy_to_string(FsGroupChangePolicy p)
{
	switch (p) {
	case FS_GROUP_CHANGE_POLICY_ALWAYS:
		return "Always";
	case FS_GROUP_CHANGE_POLICY_ON_ROOT_MISMATCH:
		return "OnRootMismatch";
	default:
		return NULL;
	}
}

/* What the keys of one request said, before the rules that tie them together. */
typedef struct Parsed {
	const char *spelled[_K_NAMED]; /* each key as the caller wrote it; NULL: absent */
	const TypeInfo *type;
	uint32_t iops, iops_per_gb, throughput;
	bool allow_auto, encrypted;
	uint32_t init_rate;
	const char *kms_key_id; /* borrowed from the request */
	VolumeParams fs;	/* fstype and the mkfs options */
	VolumeTag *tags;
	size_t n_tags;
	Hashmap *tag_keys; /* tag key -> position in tags + 1 */
} Parsed;

static void parsed_done(Parsed *x)
{
	tags_free(x->tags, x->n_tags);
	x->tags = NULL;
	x->n_tags = 0;
	hashmap_free(x->tag_keys);
	x->tag_keys = NULL;
}

typedef enum Mode {
	MODE_CREATE,
	MODE_LOAD,
	MODE_MODIFY,
} Mode;

static int parse_positive(const char *key, const char *value, uint32_t *ret, char **ret_error)
{
	uint32_t v;
	if (parse_uint32(value, &v) < 0 || v == 0)
		return invalidf(ret_error, "%s: wanted a positive integer, got '%s'", key, value);
	*ret = v;
	return 0;
}

static int parse_bool(const char *key, const char *value, bool *ret, char **ret_error)
{
	if (strcasecmp(value, "true") == 0)
		*ret = true;
	else if (strcasecmp(value, "false") == 0)
		*ret = false;
	else
		return invalidf(ret_error, "%s: wanted \"true\" or \"false\", got '%s'", key,
				value);
	return 0;
}

/* A byte count ("4096", "4k", "4KiB") that is a power of two in [min, max]. */
static int parse_pow2(const char *key, const char *value, uint64_t min, uint64_t max, uint32_t *ret,
		      char **ret_error)
{
	uint64_t v;
	if (parse_size(value, &v) < 0 || !is_pow2(v) || v < min || v > max)
		return invalidf(ret_error,
				"%s: wanted a power of two from %llu to %llu bytes, got '%s'", key,
				(unsigned long long)min, (unsigned long long)max, value);
	*ret = (uint32_t)v;
	return 0;
}

static int parse_tag(const char *key, const char *value, Parsed *x, char **ret_error)
{
	const char *eq = strchr(value, '=');
	if (!eq || eq == value)
		return invalidf(ret_error, "%s: wanted 'key=value', got '%s'", key, value);

	_cleanup_free_ char *k = xstrndup(value, (size_t)(eq - value));
	const char *v = eq + 1;
	if (strlen(k) > VOLUME_TAG_KEY_MAX)
		return invalidf(ret_error, "%s: wanted a tag key of at most %d characters", key,
				VOLUME_TAG_KEY_MAX);
	if (strlen(v) > VOLUME_TAG_VALUE_MAX)
		return invalidf(ret_error, "%s: wanted a tag value of at most %d characters", key,
				VOLUME_TAG_VALUE_MAX);
	if (strncasecmp(k, "aws:", 4) == 0)
		return invalidf(ret_error, "%s: tag keys starting with 'aws:' are reserved", key);
	if (!x->tag_keys)
		x->tag_keys = hashmap_new(NULL);
	uintptr_t pos = (uintptr_t)hashmap_get(x->tag_keys, k);
	if (pos > 0) {
		const VolumeTag *t = &x->tags[pos - 1];
		if (strcmp(t->value, v) != 0)
			return invalidf(ret_error,
					"%s: tag '%s' is already set to '%s' by another %sN", key,
					k, t->value, TAG_PREFIX);
		return 0;
	}
	x->tags = xrealloc(x->tags, (x->n_tags + 1) * sizeof(VolumeTag));
	x->tags[x->n_tags] = (VolumeTag){xstrdup(k), xstrdup(v)};
	x->n_tags++;
	(void)hashmap_put(x->tag_keys, k, (void *)(uintptr_t)x->n_tags);
	return 0;
}

static int parse_one(Key k, const char *key, const char *value, Parsed *x, char **ret_error)
{
	switch (k) {
	case K_TYPE:
		x->type = type_find(value);
		if (!x->type)
			return invalidf(ret_error, "%s: wanted one of " TYPE_NAMES ", got '%s'",
					key, value);
		return 0;
	case K_IOPS:
		return parse_positive(key, value, &x->iops, ret_error);
	case K_IOPS_PER_GB:
		return parse_positive(key, value, &x->iops_per_gb, ret_error);
	case K_ALLOW_AUTO:
		return parse_bool(key, value, &x->allow_auto, ret_error);
	case K_THROUGHPUT:
		return parse_positive(key, value, &x->throughput, ret_error);
	case K_ENCRYPTED:
		return parse_bool(key, value, &x->encrypted, ret_error);
	case K_KMS_KEY_ID:
		if (!*value || strlen(value) > KMS_KEY_ID_MAX)
			return invalidf(ret_error,
					"%s: wanted a KMS key ID, alias or ARN of 1-%d "
					"characters",
					key, KMS_KEY_ID_MAX);
		x->kms_key_id = value;
		return 0;
	case K_FSTYPE:
		if (!is_fstype(value))
			return invalidf(ret_error,
					"%s: wanted one of ext2, ext3, ext4, xfs, got '%s'", key,
					value);
		snprintf(x->fs.fstype, sizeof(x->fs.fstype), "%s", value);
		return 0;
	case K_BLOCK_SIZE:
		return parse_pow2(key, value, 512, 65536, &x->fs.block_size, ret_error);
	case K_INODE_SIZE:
		return parse_pow2(key, value, 128, 65536, &x->fs.inode_size, ret_error);
	case K_BYTES_PER_INODE: {
		/* mke2fs -i: from the smallest to 1024 times the largest block size */
		uint64_t v;
		if (parse_size(value, &v) < 0 || v < 1024 || v > 65536 * 1024)
			return invalidf(ret_error,
					"%s: wanted a byte count from 1024 to 67108864, got '%s'",
					key, value);
		x->fs.bytes_per_inode = (uint32_t)v;
		return 0;
	}
	case K_NUMBER_OF_INODES:
		/* ext4 counts inodes in 32 bits */
		return parse_positive(key, value, &x->fs.number_of_inodes, ret_error);
	case K_EXT4_BIGALLOC:
		return parse_bool(key, value, &x->fs.ext4_bigalloc, ret_error);
	case K_EXT4_ENCRYPTION:
		return parse_bool(key, value, &x->fs.ext4_encryption, ret_error);
	case K_EXT4_FAST_COMMIT:
		return parse_bool(key, value, &x->fs.ext4_fast_commit, ret_error);
	case K_INIT_RATE: {
		int r = parse_positive(key, value, &x->init_rate, ret_error);
		if (r >= 0 && (x->init_rate < INIT_RATE_MIN || x->init_rate > INIT_RATE_MAX))
			r = invalidf(ret_error, "%s: wanted %d to %d MiB/s, got %u", key,
				     INIT_RATE_MIN, INIT_RATE_MAX, x->init_rate);
		return r;
	}
	case K_BLOCK_EXPRESS:
		/* The EBS driver ignores it too: every io2 volume is Block Express now. */
		log_debug("parameter '%s' is deprecated and has no effect: every io2 volume is "
			  "io2 Block Express",
			  key);
		return 0;
	case K_AUTO_IOPS_ON_MODIFY:
	case K_BLOCK_ATTACH_UNTIL_INIT: {
		bool v = false;
		int r = parse_bool(key, value, &v, ret_error);
		if (r < 0 || !v)
			return r;
		if (k == K_AUTO_IOPS_ON_MODIFY)
			return invalidf(
				ret_error,
				"%s: \"true\" is not supported: volplug keeps no iopsPerGB after "
				"CreateVolume, so an expansion keeps the volume's IOPS (leave it "
				"out, and set iops in a VolumeAttributesClass to change them)",
				key);
		return invalidf(
			ret_error,
			"%s: \"true\" is not supported: ControllerPublishVolume attaches a "
			"volume made from a snapshot at once, while EBS still fills it (leave "
			"it out; volumeInitializationRate bounds how long the filling takes)",
			key);
	}
	case K_EXT4_CLUSTER_SIZE:
		/* mke2fs -C: 2048 bytes to 256 MiB */
		return parse_pow2(key, value, 2048, 256 << 20, &x->fs.ext4_cluster_size, ret_error);
	case K_FS_GROUP_POLICY:
		if (strcasecmp(value, "Always") == 0)
			x->fs.fs_group_change_policy = FS_GROUP_CHANGE_POLICY_ALWAYS;
		else if (strcasecmp(value, "OnRootMismatch") == 0)
			x->fs.fs_group_change_policy = FS_GROUP_CHANGE_POLICY_ON_ROOT_MISMATCH;
		else
			return invalidf(ret_error, "%s: wanted Always or OnRootMismatch, got '%s'",
					key, value);
		return 0;
	case K_VOLUME_KIND:
		if (strcasecmp(value, "file") == 0)
			x->fs.directory = false;
		else if (strcasecmp(value, "directory") == 0)
			x->fs.directory = true;
		else
			return invalidf(ret_error, "%s: wanted file or directory, got '%s'", key,
					value);
		return 0;
	case K_TAG:
		return parse_tag(key, value, x, ret_error);
	default:
		return 0;
	}
}

static bool mutable_key(Key k)
{
	return k == K_TYPE || k == K_IOPS || k == K_THROUGHPUT || k == K_TAG;
}

/* The limits that depend only on how many keys there are, checked before any key is parsed:
 * a request of 100,000 keys costs one pass of prefix compares, not 100,000 parses. */
static int check_counts(const ParamKV *kv, size_t n, char **ret_error)
{
	size_t tags = 0;

	if (n > VOLUME_PARAMS_MAX_KEYS)
		return invalidf(ret_error, "wanted at most %d parameters, got %zu",
				VOLUME_PARAMS_MAX_KEYS, n);
	for (size_t i = 0; i < n; i++)
		if (kv[i].key && strncasecmp(kv[i].key, TAG_PREFIX, strlen(TAG_PREFIX)) == 0)
			tags++;
	if (tags > VOLUME_PARAMS_MAX_TAGS)
		return invalidf(ret_error, TAG_PREFIX "N: wanted at most %d tags, got %zu",
				VOLUME_PARAMS_MAX_TAGS, tags);
	return 0;
}

/* Reads every key of one request into *x (zeroed first); x is released on failure. */
static int parse_keys(Mode mode, const ParamKV *kv, size_t n, Parsed *x, char **ret_error)
{
	/* tagSpecification_N numbers seen, in decimal: "1" and "01" are one key */
	_cleanup_(hashmap_freep) Hashmap *tag_ids = NULL;
	int r;

	*x = (Parsed){};
	r = check_counts(kv, n, ret_error);
	if (r < 0)
		return r;
	for (size_t i = 0; i < n && r >= 0; i++) {
		const char *key = kv[i].key ? kv[i].key : "";
		const char *value = kv[i].value ? kv[i].value : "";
		Key k = key_classify(key);

		/* csi.storage.k8s.io/ keys come with a modify too (external-resizer
		 * --extra-modify-metadata), as the EBS driver takes them */
		if (k == K_IGNORED)
			continue;
		if (mode == MODE_MODIFY && !mutable_key(k)) {
			r = invalidf(ret_error,
				     "parameter '%s' cannot be modified (mutable: type, iops, "
				     "throughput, " TAG_PREFIX "N)",
				     key);
			break;
		}
		if (k == K_UNKNOWN) {
			r = invalidf(ret_error,
				     "parameter '%s' is not supported (known: " KNOWN_KEYS ")",
				     key);
			break;
		}
		if (k < _K_NAMED) {
			if (x->spelled[k]) {
				r = invalidf(ret_error, "%s: given more than once (also as '%s')",
					     key, x->spelled[k]);
				break;
			}
			x->spelled[k] = key;
		} else if (k == K_TAG) {
			char id[16];
			uint32_t number = 0;

			(void)tag_number(key, &number);
			snprintf(id, sizeof(id), "%u", number);
			if (!tag_ids)
				tag_ids = hashmap_new(NULL);
			if (hashmap_put(tag_ids, id, NULL) == -EEXIST) {
				r = invalidf(ret_error, "%s: given more than once", key);
				break;
			}
		}
		r = parse_one(k, key, value, x, ret_error);
	}
	if (r >= 0 && x->n_tags > VOLUME_PARAMS_MAX_TAGS)
		r = invalidf(ret_error, TAG_PREFIX "N: wanted at most %d tags, got %zu",
			     VOLUME_PARAMS_MAX_TAGS, x->n_tags);
	if (r < 0)
		parsed_done(x);
	return r;
}

static const char *key_name(const Parsed *x, Key k)
{
	return x && x->spelled[k] ? x->spelled[k] : key_names[k];
}

static bool fstype_is_ext(const char *fstype)
{
	return streq(fstype, "ext2") || streq(fstype, "ext3") || streq(fstype, "ext4");
}

/* The mkfs options of p, against fstype when known (NULL: the capability will tell, so only
 * what holds for every fstype). x gives the caller's spelling. */
static int check_fs_options(const VolumeParams *p, const char *fstype, const Parsed *x,
			    char **ret_error)
{
	if (p->ext4_cluster_size && !p->ext4_bigalloc)
		return invalidf(ret_error, "%s: needs %s set to \"true\"",
				key_name(x, K_EXT4_CLUSTER_SIZE), key_name(x, K_EXT4_BIGALLOC));
	if (p->ext4_cluster_size && p->block_size && p->ext4_cluster_size <= p->block_size)
		return invalidf(ret_error, "%s: wanted more than the block size (%u), got %u",
				key_name(x, K_EXT4_CLUSTER_SIZE), p->block_size,
				p->ext4_cluster_size);
	if (!fstype)
		return 0;

	bool ext = fstype_is_ext(fstype), ext4 = streq(fstype, "ext4");
	if (p->ext4_bigalloc && !ext4)
		return invalidf(ret_error, "%s: not accepted with fstype %s",
				key_name(x, K_EXT4_BIGALLOC), fstype);
	if (p->ext4_cluster_size && !ext4)
		return invalidf(ret_error, "%s: not accepted with fstype %s",
				key_name(x, K_EXT4_CLUSTER_SIZE), fstype);
	if (p->ext4_encryption && !ext4)
		return invalidf(ret_error, "%s: not accepted with fstype %s",
				key_name(x, K_EXT4_ENCRYPTION), fstype);
	if (p->ext4_fast_commit && !ext4)
		return invalidf(ret_error, "%s: not accepted with fstype %s",
				key_name(x, K_EXT4_FAST_COMMIT), fstype);
	if (p->bytes_per_inode && !ext)
		return invalidf(ret_error, "%s: not accepted with fstype %s",
				key_name(x, K_BYTES_PER_INODE), fstype);
	if (p->number_of_inodes && !ext)
		return invalidf(ret_error, "%s: not accepted with fstype %s",
				key_name(x, K_NUMBER_OF_INODES), fstype);
	if (p->block_size && ext && p->block_size < 1024)
		return invalidf(ret_error, "%s: wanted 1024 to 65536 bytes with fstype %s, got %u",
				key_name(x, K_BLOCK_SIZE), fstype, p->block_size);
	if (p->inode_size && !ext && (p->inode_size < 512 || p->inode_size > 2048))
		/* mkfs.xfs: 512 is the minimum with metadata checksums, its default */
		return invalidf(ret_error, "%s: wanted 512 to 2048 bytes with fstype %s, got %u",
				key_name(x, K_INODE_SIZE), fstype, p->inode_size);
	if (p->inode_size && p->block_size && ext && p->inode_size > p->block_size)
		return invalidf(ret_error,
				"%s: wanted at most the block size (%u) with fstype %s, got %u",
				key_name(x, K_INODE_SIZE), p->block_size, fstype, p->inode_size);
	if (p->inode_size && p->block_size && !ext && p->inode_size > p->block_size / 2)
		return invalidf(
			ret_error,
			"%s: wanted at most half the block size (%u) with fstype %s, got %u",
			key_name(x, K_INODE_SIZE), p->block_size / 2, fstype, p->inode_size);
	return 0;
}

static int check_size(const TypeInfo *t, uint64_t gib, const char *key, char **ret_error)
{
	char a[32], b[32], c[32];

	if (gib < t->min_gib || gib > t->max_gib)
		return invalidf(ret_error, "%s: %s wants a volume of %s to %s, got %s", key,
				t->name, gib_str(a, t->min_gib), gib_str(b, t->max_gib),
				gib_str(c, gib));
	return 0;
}

static void take_fs(VolumeParams *ret, const Parsed *x)
{
	memcpy(ret->fstype, x->fs.fstype, sizeof(ret->fstype));
	ret->block_size = x->fs.block_size;
	ret->inode_size = x->fs.inode_size;
	ret->bytes_per_inode = x->fs.bytes_per_inode;
	ret->number_of_inodes = x->fs.number_of_inodes;
	ret->ext4_bigalloc = x->fs.ext4_bigalloc;
	ret->ext4_cluster_size = x->fs.ext4_cluster_size;
	ret->ext4_encryption = x->fs.ext4_encryption;
	ret->ext4_fast_commit = x->fs.ext4_fast_commit;
	ret->fs_group_change_policy = x->fs.fs_group_change_policy;
	ret->directory = x->fs.directory;
}

static void take_encryption(VolumeParams *ret, const Parsed *x)
{
	ret->encrypted = x->encrypted;
	ret->kms_key_id = x->kms_key_id ? xstrdup(x->kms_key_id) : NULL;
}

static void take_tags(VolumeParams *ret, Parsed *x)
{
	ret->tags = TAKE_PTR(x->tags);
	ret->n_tags = x->n_tags;
	x->n_tags = 0;
	parsed_done(x); /* the key index */
	if (ret->n_tags > 1)
		qsort(ret->tags, ret->n_tags, sizeof(VolumeTag), tag_cmp);
}

/* iops for CreateVolume from iops or iopsPerGB, as the EBS driver computes it. */
static int resolve_create_iops(const Parsed *x, const TypeInfo *t, uint64_t gib, uint32_t *ret,
			       char **ret_error)
{
	Key given = x->spelled[K_IOPS] ? K_IOPS : K_IOPS_PER_GB;
	uint64_t want;

	if (x->spelled[K_IOPS] && x->spelled[K_IOPS_PER_GB])
		return invalidf(ret_error, "%s: cannot be combined with %s (set one of them)",
				x->spelled[K_IOPS], x->spelled[K_IOPS_PER_GB]);
	if (!x->spelled[K_IOPS] && !x->spelled[K_IOPS_PER_GB]) {
		if (t->min_iops == 0)
			*ret = 0;
		else if (streq(t->name, "gp3"))
			*ret = DEFAULT_IOPS;
		else
			return invalidf(ret_error, "%s: required for type %s (set %s or %s)",
					key_names[K_IOPS], t->name, key_names[K_IOPS],
					key_names[K_IOPS_PER_GB]);
		return 0;
	}
	if (t->min_iops == 0)
		return invalidf(ret_error,
				"%s: not accepted for type %s (only " IOPS_TYPES " take it)",
				x->spelled[given], t->name);

	if (given == K_IOPS)
		want = x->iops;
	else
		want = (uint64_t)x->iops_per_gb * gib;
	if (want < t->min_iops) {
		if (!x->allow_auto) {
			if (given == K_IOPS)
				return invalidf(
					ret_error,
					"%s: %llu is below the minimum of %u for type %s (set "
					"%s to \"true\" to raise it)",
					x->spelled[given], (unsigned long long)want, t->min_iops,
					t->name, key_names[K_ALLOW_AUTO]);
			return invalidf(
				ret_error,
				"%s: %u x %llu GiB = %llu IOPS is below the minimum of %u for type "
				"%s (set %s to \"true\" to raise it)",
				x->spelled[given], x->iops_per_gb, (unsigned long long)gib,
				(unsigned long long)want, t->min_iops, t->name,
				key_names[K_ALLOW_AUTO]);
		}
		want = t->min_iops;
	}
	*ret = (uint32_t)MIN(want, (uint64_t)max_iops_for(t, gib));
	return 0;
}

static int resolve_throughput(const TypeInfo *t, bool given, uint32_t v, const char *key,
			      uint32_t fallback, uint32_t *ret, char **ret_error)
{
	if (!given) {
		*ret = t->max_throughput ? fallback : 0;
		return 0;
	}
	if (!t->max_throughput)
		return invalidf(ret_error, "%s: not accepted for type %s (only gp3 takes it)", key,
				t->name);
	if (v < t->min_throughput || v > t->max_throughput)
		return invalidf(ret_error, "%s: wanted %u to %u MiB/s for type %s, got %u", key,
				t->min_throughput, t->max_throughput, t->name, v);
	*ret = v;
	return 0;
}

int volume_params_size_range(const ParamKV *kv, size_t n, uint64_t *ret_min, uint64_t *ret_max,
			     char **ret_error)
{
	Parsed x;

	int r = parse_keys(MODE_CREATE, kv, n, &x, ret_error);
	if (r < 0)
		return r;
	/* Sizes are checked against a type only when the parameters name one, in whole GiB
	 * rounded up: the smallest size is a byte more than one GiB short of the type's. */
	*ret_min = x.spelled[K_TYPE] ? (x.type->min_gib - 1) * GIB + 1 : 0;
	*ret_max = x.spelled[K_TYPE] ? x.type->max_gib * GIB : 0;
	parsed_done(&x);
	return 0;
}

int volume_type_sizes(const char *type, uint64_t *ret_min, uint64_t *ret_max)
{
	const TypeInfo *t = type_find(type);

	if (!t)
		return -EINVAL;
	*ret_min = t->min_gib * GIB;
	*ret_max = t->max_gib * GIB;
	return 0;
}

int volume_params_parse(const ParamKV *kv, size_t n, uint64_t size_bytes, VolumeParams *ret,
			char **ret_error)
{
	VolumeParams p = {};
	Parsed x;
	int r;

	r = parse_keys(MODE_CREATE, kv, n, &x, ret_error);
	if (r < 0)
		return r;

	const TypeInfo *t = x.type ? x.type : type_find(VOLUME_TYPE_DEFAULT);
	uint64_t gib = size_gib(size_bytes);

	if (x.spelled[K_TYPE])
		r = check_size(t, gib, x.spelled[K_TYPE], ret_error);
	if (r >= 0)
		r = resolve_create_iops(&x, t, gib, &p.iops, ret_error);
	if (r >= 0)
		r = resolve_throughput(t, x.spelled[K_THROUGHPUT], x.throughput,
				       key_name(&x, K_THROUGHPUT), t->min_throughput, &p.throughput,
				       ret_error);
	if (r >= 0 && x.kms_key_id && !x.encrypted)
		r = invalidf(ret_error, "%s: needs %s set to \"true\"", x.spelled[K_KMS_KEY_ID],
			     key_names[K_ENCRYPTED]);
	if (r >= 0)
		/* without the fstype parameter the volume capability decides: see
		 * volume_params_check_capability() */
		r = check_fs_options(&x.fs, x.fs.fstype[0] ? x.fs.fstype : NULL, &x, ret_error);
	if (r < 0) {
		parsed_done(&x);
		return r;
	}
	snprintf(p.type, sizeof(p.type), "%s", t->name);
	p.initialization_rate = x.init_rate;
	take_encryption(&p, &x);
	take_fs(&p, &x);
	take_tags(&p, &x);
	*ret = p;
	return 0;
}

int volume_params_load(const ParamKV *kv, size_t n, VolumeParams *ret, char **ret_error)
{
	VolumeParams p = {};
	Parsed x;
	int r;

	r = parse_keys(MODE_LOAD, kv, n, &x, ret_error);
	if (r < 0)
		return r;
	const TypeInfo *t = x.type ? x.type : type_find(VOLUME_TYPE_DEFAULT);
	snprintf(p.type, sizeof(p.type), "%s", t->name);
	p.iops = x.iops;
	p.throughput = x.throughput;
	take_encryption(&p, &x);
	take_fs(&p, &x);
	take_tags(&p, &x);
	*ret = p;
	return 0;
}

int volume_params_check_mutable(const ParamKV *kv, size_t n, char **ret_error)
{
	Parsed x;
	int r = parse_keys(MODE_MODIFY, kv, n, &x, ret_error);
	if (r < 0)
		return r;
	parsed_done(&x);
	return 0;
}

int volume_params_modify(const VolumeParams *current, uint64_t size_bytes, const ParamKV *kv,
			 size_t n, VolumeParams *ret, char **ret_error)
{
	VolumeParams p = {};
	Parsed x;
	int r;

	r = parse_keys(MODE_MODIFY, kv, n, &x, ret_error);
	if (r < 0)
		return r;

	const TypeInfo *cur = type_find(current->type);
	if (!cur)
		cur = type_find(VOLUME_TYPE_DEFAULT);
	const TypeInfo *t = x.type ? x.type : cur;
	bool same_type = t == cur;
	uint64_t gib = size_gib(size_bytes);
	char s[32];

	if (x.spelled[K_TYPE])
		r = check_size(t, gib, x.spelled[K_TYPE], ret_error);

	/* iops: given, or kept when the type stays, or EC2's default for a new type */
	if (r >= 0 && x.spelled[K_IOPS] && t->min_iops == 0)
		r = invalidf(ret_error,
			     "%s: not accepted for type %s (only " IOPS_TYPES " take it)",
			     x.spelled[K_IOPS], t->name);
	if (r >= 0 && t->min_iops > 0) {
		uint32_t v = x.spelled[K_IOPS]		      ? x.iops
			     : same_type && current->iops > 0 ? current->iops
							      : DEFAULT_IOPS;
		uint32_t max = max_iops_for(t, gib);
		char why[64] = "";
		if (!x.spelled[K_IOPS])
			/* only a type change can leave a default that does not fit */
			snprintf(why, sizeof(why), " (the default when the type changes to %s)",
				 t->name);
		if (v < t->min_iops || v > max)
			r = invalidf(ret_error, "%s: wanted %u to %u for a %s %s volume, got %u%s",
				     key_name(&x, K_IOPS), t->min_iops, max, gib_str(s, gib),
				     t->name, v, why);
		p.iops = v;
	}
	if (r >= 0)
		r = resolve_throughput(
			t, x.spelled[K_THROUGHPUT], x.throughput, key_name(&x, K_THROUGHPUT),
			same_type && current->throughput ? current->throughput : t->min_throughput,
			&p.throughput, ret_error);
	if (r >= 0) {
		size_t total = current->n_tags;
		for (size_t i = 0; i < x.n_tags; i++)
			if (tag_find(current->tags, current->n_tags, x.tags[i].key) < 0)
				total++;
		if (total > VOLUME_PARAMS_MAX_TAGS)
			r = invalidf(ret_error,
				     TAG_PREFIX
				     "N: wanted at most %d tags on a volume, would have %zu",
				     VOLUME_PARAMS_MAX_TAGS, total);
	}
	if (r < 0) {
		parsed_done(&x);
		return r;
	}

	uint32_t iops = p.iops, throughput = p.throughput;
	volume_params_copy(current, &p);
	snprintf(p.type, sizeof(p.type), "%s", t->name);
	p.iops = iops;
	p.throughput = throughput;
	for (size_t i = 0; i < x.n_tags; i++)
		tag_set(&p.tags, &p.n_tags, x.tags[i].key, x.tags[i].value);
	if (p.n_tags > 1)
		qsort(p.tags, p.n_tags, sizeof(VolumeTag), tag_cmp);
	parsed_done(&x);
	*ret = p;
	return 0;
}

int volume_params_check_capability(const VolumeParams *p, bool block, const char *fstype,
				   char **ret_error)
{
	if (block && p->directory)
		return invalidf(ret_error,
				"%s: directory is for filesystem volumes: a block volume is a "
				"device (leave it out, or set it to file)",
				key_names[K_VOLUME_KIND]);
	if (block || p->directory) {
		static const struct {
			Key key;
			size_t offset;
		} opts[] = {
			{K_BLOCK_SIZE, offsetof(VolumeParams, block_size)},
			{K_INODE_SIZE, offsetof(VolumeParams, inode_size)},
			{K_BYTES_PER_INODE, offsetof(VolumeParams, bytes_per_inode)},
			{K_NUMBER_OF_INODES, offsetof(VolumeParams, number_of_inodes)},
			{K_EXT4_CLUSTER_SIZE, offsetof(VolumeParams, ext4_cluster_size)},
		};
		/* no mkfs: a directory volume is a directory of the pool's filesystem */
		const char *what =
			block ? "block volume" : "directory volume (no filesystem is made)";
		for (size_t i = 0; i < ELEMENTSOF(opts); i++)
			if (*(const uint32_t *)((const char *)p + opts[i].offset))
				return invalidf(ret_error, "%s: not accepted for a %s",
						key_names[opts[i].key], what);
		Key flag = p->ext4_bigalloc	 ? K_EXT4_BIGALLOC
			   : p->ext4_encryption	 ? K_EXT4_ENCRYPTION
			   : p->ext4_fast_commit ? K_EXT4_FAST_COMMIT
						 : _K_NAMED;
		if (flag != _K_NAMED)
			return invalidf(ret_error, "%s: not accepted for a %s", key_names[flag],
					what);
		if (p->directory && p->fstype[0])
			return invalidf(ret_error,
					"%s: not accepted for a %s (its filesystem is the pool's)",
					key_names[K_FSTYPE], what);
		return 0;
	}
	if (fstype && *fstype && p->fstype[0] && !streq(fstype, p->fstype))
		return invalidf(ret_error,
				"%s: '%s' differs from the volume capability's fs_type '%s'",
				key_names[K_FSTYPE], p->fstype, fstype);
	const char *fs = fstype && *fstype ? fstype : p->fstype[0] ? p->fstype : "ext4";
	return check_fs_options(p, fs, NULL, ret_error);
}

static void kv_add(ParamKV **kv, size_t *n, const char *key, char *value)
{
	*kv = xrealloc(*kv, (*n + 1) * sizeof(ParamKV));
	(*kv)[*n] = (ParamKV){xstrdup(key), value};
	(*n)++;
}

static void kv_add_u32(ParamKV **kv, size_t *n, Key k, uint32_t v)
{
	if (v)
		kv_add(kv, n, key_names[k], xasprintf("%u", v));
}

int volume_params_to_kv(const VolumeParams *p, VolumeParamsScope scope, ParamKV **ret,
			size_t *ret_n)
{
	ParamKV *kv = NULL;
	size_t n = 0;

	if (scope == VOLUME_PARAMS_ALL) {
		kv_add(&kv, &n, key_names[K_TYPE],
		       xstrdup(p->type[0] ? p->type : VOLUME_TYPE_DEFAULT));
		kv_add_u32(&kv, &n, K_IOPS, p->iops);
		kv_add_u32(&kv, &n, K_THROUGHPUT, p->throughput);
		if (p->encrypted)
			kv_add(&kv, &n, key_names[K_ENCRYPTED], xstrdup("true"));
		if (p->kms_key_id)
			kv_add(&kv, &n, key_names[K_KMS_KEY_ID], xstrdup(p->kms_key_id));
	}
	if (p->fstype[0])
		kv_add(&kv, &n, key_names[K_FSTYPE], xstrdup(p->fstype));
	kv_add_u32(&kv, &n, K_BLOCK_SIZE, p->block_size);
	kv_add_u32(&kv, &n, K_INODE_SIZE, p->inode_size);
	kv_add_u32(&kv, &n, K_BYTES_PER_INODE, p->bytes_per_inode);
	kv_add_u32(&kv, &n, K_NUMBER_OF_INODES, p->number_of_inodes);
	if (p->ext4_bigalloc)
		kv_add(&kv, &n, key_names[K_EXT4_BIGALLOC], xstrdup("true"));
	kv_add_u32(&kv, &n, K_EXT4_CLUSTER_SIZE, p->ext4_cluster_size);
	if (p->ext4_encryption)
		kv_add(&kv, &n, key_names[K_EXT4_ENCRYPTION], xstrdup("true"));
	if (p->ext4_fast_commit)
		kv_add(&kv, &n, key_names[K_EXT4_FAST_COMMIT], xstrdup("true"));
	if (p->fs_group_change_policy != FS_GROUP_CHANGE_POLICY_UNSET)
		kv_add(&kv, &n, key_names[K_FS_GROUP_POLICY],
		       xstrdup(fs_group_change_policy_to_string(p->fs_group_change_policy)));
	if (p->directory)
		kv_add(&kv, &n, key_names[K_VOLUME_KIND], xstrdup("directory"));
	if (scope == VOLUME_PARAMS_ALL) {
		_cleanup_free_ VolumeTag *sorted = NULL;
		if (p->n_tags > 0) {
			sorted = xnew0(VolumeTag, p->n_tags);
			memcpy(sorted, p->tags, p->n_tags * sizeof(VolumeTag));
			qsort(sorted, p->n_tags, sizeof(VolumeTag), tag_cmp);
		}
		for (size_t i = 0; i < p->n_tags; i++) {
			_cleanup_free_ char *key = xasprintf(TAG_PREFIX "%zu", i + 1);
			kv_add(&kv, &n, key, xasprintf("%s=%s", sorted[i].key, sorted[i].value));
		}
	}
	*ret = kv;
	*ret_n = n;
	return 0;
}

void volume_params_to_strmap(const VolumeParams *p, VolumeParamsScope scope, Strmap *ret)
{
	ParamKV *kv;
	size_t n;

	volume_params_to_kv(p, scope, &kv, &n);
	for (size_t i = 0; i < n; i++)
		strmap_set(ret, kv[i].key, kv[i].value);
	param_kv_free_many(kv, n);
}

int volume_params_load_strmap(const Strmap *m, VolumeParams *ret, char **ret_error)
{
	ParamKV *kv = xnew0(ParamKV, m->n);

	for (size_t i = 0; i < m->n; i++)
		kv[i] = (ParamKV){.key = m->keys[i], .value = m->values[i]};
	int r = volume_params_load(kv, m->n, ret, ret_error);
	free(kv);
	return r;
}

bool volume_params_equal(const VolumeParams *a, const VolumeParams *b)
{
	if (a->encrypted != b->encrypted || !streq(a->kms_key_id ?: "", b->kms_key_id ?: ""))
		return false;
	if (!streq(a->type, b->type) || a->iops != b->iops || a->throughput != b->throughput ||
	    !streq(a->fstype, b->fstype) || a->block_size != b->block_size ||
	    a->inode_size != b->inode_size || a->bytes_per_inode != b->bytes_per_inode ||
	    a->number_of_inodes != b->number_of_inodes || a->ext4_bigalloc != b->ext4_bigalloc ||
	    a->ext4_cluster_size != b->ext4_cluster_size ||
	    a->ext4_encryption != b->ext4_encryption ||
	    a->ext4_fast_commit != b->ext4_fast_commit ||
	    a->fs_group_change_policy != b->fs_group_change_policy ||
	    a->directory != b->directory || a->n_tags != b->n_tags)
		return false;
	/* tags are kept sorted by key */
	for (size_t i = 0; i < a->n_tags; i++) {
		int j = tag_find(b->tags, b->n_tags, a->tags[i].key);
		if (j < 0 || !streq(a->tags[i].value, b->tags[j].value))
			return false;
	}
	return true;
}

int volume_params_request(struct Backend *b, const BackendParamsRequest *r, BackendParams *ret,
			  char **ret_error)
{
	(void)b;
	_cleanup_free_ char *err = NULL;
	VolumeParams p = {}, modified;

	if (r->use == BACKEND_PARAMS_MODIFY) {
		if (volume_params_check_mutable(r->mutable_parameters, r->n_mutable_parameters,
						&err) < 0)
			return errorf(ret_error, -EINVAL, "mutable_parameters: %s", err);
		*ret = (BackendParams){};
		return 0;
	}
	if (r->use == BACKEND_PARAMS_CAPACITY) {
		uint64_t min, max;
		if (volume_params_size_range(r->parameters, r->n_parameters, &min, &max, &err) < 0)
			return errorf(ret_error, -EINVAL, "parameters: %s", err);
		*ret = (BackendParams){.min_size = min, .max_size = max};
		return 0;
	}
	if (volume_params_parse(r->parameters, r->n_parameters, r->size, &p, &err) < 0)
		return errorf(ret_error, -EINVAL, "parameters: %s", err);
	if (r->n_mutable_parameters > 0) {
		if (volume_params_check_mutable(r->mutable_parameters, r->n_mutable_parameters,
						&err) < 0 ||
		    volume_params_modify(&p, r->size, r->mutable_parameters,
					 r->n_mutable_parameters, &modified, &err) < 0) {
			volume_params_done(&p);
			return errorf(ret_error, -EINVAL, "mutable_parameters: %s", err);
		}
		volume_params_done(&p);
		p = modified;
	}
	if (volume_params_check_capability(&p, r->block, r->fstype ?: "", &err) < 0) {
		volume_params_done(&p);
		return errorf(ret_error, -EINVAL, "parameters: %s", err);
	}
	*ret = (BackendParams){.params = p};
	return 0;
}
