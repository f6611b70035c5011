/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "strmap.h"

/* StorageClass parameters of CreateVolume and mutable parameters of ControllerModifyVolume,
 * with the AWS EBS CSI driver's names and rules, so a StorageClass written for EBS means the
 * same here. On the pool, IOPS and throughput are recorded and reported, not enforced.
 *
 * Keys are case-insensitive. CreateVolume accepts: type (gp3 when absent; gp2, io1, io2, sc1,
 * st1, standard), iops, iopsPerGB, allowAutoIOPSPerGBIncrease, throughput, encrypted ("true" or
 * "false"), kmsKeyId (with encrypted "true"), tagSpecification_N
 * ("key=value"), csi.storage.k8s.io/fstype (ext2, ext3, ext4, xfs), blockSize, inodeSize,
 * bytesPerInode, numberOfInodes, ext4BigAlloc, ext4ClusterSize, ext4EncryptionSupport,
 * ext4FastCommit (volplug's own, not the EBS driver's: mkfs.ext4 -O fast_commit),
 * fsGroupChangePolicy (Always, OnRootMismatch), volumeInitializationRate (100-300 MiB/s);
 * allowAutoIOPSIncreaseOnModify and blockAttachUntilInitialized at "false" only (the message
 * of "true" says why). Ignored, as the EBS driver does: every other csi.storage.k8s.io/ key (the
 * pv/pvc names external-provisioner adds), the deprecated "fstype" and "blockExpress". Anything
 * else, or a value out of range, is -EINVAL with a message naming the key and what it wants.
 *
 * IOPS (EBS driver and EC2 limits, volume_type_limits()): gp3 3000-80000 and 500 per GiB, io1
 * 100-64000 and 50 per GiB, io2 100-256000 and 1000 per GiB; gp2, sc1, st1 and standard take
 * neither iops nor iopsPerGB; iops and iopsPerGB exclude each other; io1 and io2 need one of them;
 * gp3 without them gets 3000. At CreateVolume, a request above what the type and size allow is
 * capped to the most allowed, never below the type's minimum (the EBS driver does this); one below
 * the minimum fails unless allowAutoIOPSPerGBIncrease is "true", which raises it to the minimum. At
 * ModifyVolume, EC2 rules apply: an out-of-range iops fails, nothing is capped. Throughput: gp3
 * only, 125-2000 MiB/s, 125 when absent.
 *
 * Size limits per type (gp2 1 GiB-16 TiB; gp3 1 GiB-64 TiB; io1 4 GiB-16 TiB; io2 4 GiB-64
 * TiB; sc1, st1 125 GiB-16 TiB; standard 1 GiB-1 TiB) are checked only when the request itself
 * names a type: pool volumes made with default parameters (csi-sanity's, tests') may have any
 * size, while a StorageClass that asks for st1 gets the answer EBS would give. Sizes count in whole
 * GiB, rounded up, as EBS allocates them.
 *
 * The filesystem options are checked against the fstype (ext2/ext3: no ext4BigAlloc,
 * ext4ClusterSize, ext4EncryptionSupport or ext4FastCommit; xfs: none of those, nor
 * bytesPerInode or numberOfInodes) and travel to the node in the volume context; mkfs gets
 * them there. The fstype usually comes in the volume capability (external-provisioner moves
 * csi.storage.k8s.io/fstype there), so CreateVolume calls volume_params_check_capability()
 * after volume_params_parse().
 *
 * Functions taking `char **ret_error` set it on failure only, to a message for the client
 * (caller frees); it may be NULL. */

/* One parameter. As input the strings are borrowed (protobuf map entries may be pointed at);
 * as output of volume_params_to_kv() both are owned. */
typedef struct ParamKV {
	char *key;
	char *value;
} ParamKV;

/* Frees the strings and the array; NULL is a no-op. */
void param_kv_free_many(ParamKV *kv, size_t n);

typedef enum FsGroupChangePolicy {
	FS_GROUP_CHANGE_POLICY_UNSET,
	FS_GROUP_CHANGE_POLICY_ALWAYS,
	FS_GROUP_CHANGE_POLICY_ON_ROOT_MISMATCH,
} FsGroupChangePolicy;

typedef struct VolumeTag {
	char *key;
	char *value;
} VolumeTag;

/* Checked before any key is parsed: Kubernetes allows a StorageClass at most 512 parameters,
 * EC2 a resource at most 50 tags (tagSpecification_N keys are counted, duplicates too). */
#define VOLUME_PARAMS_MAX_KEYS 512
#define VOLUME_PARAMS_MAX_TAGS 50 /* EC2's limit per resource */
#define VOLUME_TAG_KEY_MAX 128
#define VOLUME_TAG_VALUE_MAX 256

#define VOLUME_TYPE_DEFAULT "gp3"

typedef struct VolumeParams {
	char type[16];	     /* always set: "gp3" when not given */
	uint32_t iops;	     /* provisioned IOPS, resolved; 0 for types that take none */
	uint32_t throughput; /* MiB/s; gp3 only, else 0 */
	bool encrypted;
	char *kms_key_id;    /* with encrypted: the KMS key; NULL: the account's default; owned */
	char fstype[8];	     /* "" when not given: the volume capability decides */
	uint32_t block_size; /* bytes; 0: mkfs's default, as are the fields below */
	uint32_t inode_size; /* bytes */
	uint32_t bytes_per_inode;  /* bytes */
	uint32_t number_of_inodes; /* count */
	bool ext4_bigalloc;
	uint32_t ext4_cluster_size; /* bytes; needs ext4_bigalloc */
	bool ext4_encryption;	    /* ext4 made with the encrypt feature (fscrypt) */
	bool ext4_fast_commit;	    /* ext4 made with the fast_commit journal feature */
	FsGroupChangePolicy fs_group_change_policy;
	/* volumeKind: directory: a directory of the pool's filesystem with a project quota at
	 * the volume's size, not a device (the pool only; filesystem volumes only) */
	bool directory;
	VolumeTag *tags; /* sorted by key, keys unique; owned */
	size_t n_tags;
	/* CreateVolume from a snapshot: EBS's VolumeInitializationRate in MiB/s, 0: EBS's
	 * default. How the volume is filled, not what it is: neither serialised nor compared. */
	uint32_t initialization_rate;
} VolumeParams;

/* One EBS volume type's limits, as EC2 has them. */
typedef struct VolumeTypeLimits {
	const char *name;
	uint32_t min_iops; /* 0: the type takes no provisioned IOPS */
	uint32_t max_iops;
	uint32_t iops_per_gib;			 /* the most IOPS per GiB of size */
	uint32_t min_throughput, max_throughput; /* MiB/s; 0: not provisioned (gp3 only) */
	uint64_t min_gib, max_gib;
} VolumeTypeLimits;

/* The table of every type (gp3 first, the default), static. Never fails. */
const VolumeTypeLimits *volume_type_limits(size_t *ret_n);

/* CreateVolume: parses and validates parameters for a volume of size_bytes, resolving iops
 * (iopsPerGB x GiB, capping, allowAutoIOPSPerGBIncrease) and the gp3 defaults. Returns 0 and
 * fills *ret (release with volume_params_done()), or -EINVAL. */
int volume_params_parse(const ParamKV *kv, size_t n, uint64_t size_bytes, VolumeParams *ret,
			char **ret_error);

/* GetCapacity: checks the keys and values of a StorageClass's parameters as CreateVolume would
 * (without the rules that depend on a size) and gives the sizes in bytes they allow: those that
 * count (in whole GiB, rounded up) within the range of the type they name, or 0 and 0 (no
 * bound) when they name none. Returns 0 or -EINVAL. */
int volume_params_size_range(const ParamKV *kv, size_t n, uint64_t *ret_min, uint64_t *ret_max,
			     char **ret_error);

/* The smallest and largest sizes in bytes of an EBS volume type (e.g. VOLUME_TYPE_DEFAULT).
 * Returns 0, or -EINVAL for a name that is no type. */
int volume_type_sizes(const char *type, uint64_t *ret_min, uint64_t *ret_max);

/* Reads back what volume_params_to_kv(VOLUME_PARAMS_ALL) wrote (pool metadata): the same keys
 * and value syntax, without size rules or capping. Returns 0 and fills *ret, or -EINVAL. */
int volume_params_load(const ParamKV *kv, size_t n, VolumeParams *ret, char **ret_error);

/* ControllerModifyVolume: checks that only mutable keys are present (type, iops, throughput,
 * tagSpecification_N) with well-formed values. Returns 0 or -EINVAL ("parameter 'foo' cannot
 * be modified"). Cheap: a handler calls it before queueing a request. */
int volume_params_check_mutable(const ParamKV *kv, size_t n, char **ret_error);

/* ControllerModifyVolume: the parameters current would have after applying kv to a volume of
 * size_bytes, checked as a whole: a new type keeps iops and throughput when it can, or takes
 * EC2's defaults (3000 IOPS for gp3, io1, io2; 125 MiB/s for gp3); tags are added or
 * overwritten by key. Returns 0 and fills *ret (current is untouched), or -EINVAL. */
int volume_params_modify(const VolumeParams *current, uint64_t size_bytes, const ParamKV *kv,
			 size_t n, VolumeParams *ret, char **ret_error);

/* Checks the filesystem options against the volume capability: block access takes none, and
 * the fstype (fstype if non-empty, else the parameter's, else ext4) must accept each one; a
 * parameter fstype that differs from a non-empty fstype is refused. Returns 0 or -EINVAL. */
int volume_params_check_capability(const VolumeParams *p, bool block, const char *fstype,
				   char **ret_error);

typedef enum VolumeParamsScope {
	VOLUME_PARAMS_ALL,  /* everything: the pool's metadata */
	VOLUME_PARAMS_NODE, /* what the node needs: fstype, mkfs options, fsGroupChangePolicy */
} VolumeParamsScope;

/* Serialises p in canonical spelling ("type", "iops", "tagSpecification_1", ...), tags
 * numbered from 1 in key order; fields at their zero value are left out. Returns 0 and a new
 * array in *ret / *ret_n (free with param_kv_free_many()). Never fails. */
int volume_params_to_kv(const VolumeParams *p, VolumeParamsScope scope, ParamKV **ret,
			size_t *ret_n);

/* As volume_params_to_kv(), into *ret (entries are added). */
void volume_params_to_strmap(const VolumeParams *p, VolumeParamsScope scope, Strmap *ret);

/* volume_params_load() of a Strmap. */
int volume_params_load_strmap(const Strmap *m, VolumeParams *ret, char **ret_error);

/* True when a and b describe the same volume settings (CreateVolume idempotency). */
bool volume_params_equal(const VolumeParams *a, const VolumeParams *b);

/* A deep copy of src into *ret. Never fails. */
void volume_params_copy(const VolumeParams *src, VolumeParams *ret);

/* Frees what p owns and zeroes it. */
void volume_params_done(VolumeParams *p);

/* "Always", "OnRootMismatch", or NULL for unset. */
const char *fs_group_change_policy_to_string(FsGroupChangePolicy p);

struct Backend;

/* parse_params: a request's StorageClass parameters, for the use they are put to. */
typedef enum BackendParamsUse {
	BACKEND_PARAMS_CREATE, /* CreateVolume: parameters, mutable_parameters applied over them */
	BACKEND_PARAMS_CAPACITY, /* GetCapacity: parameters: the sizes they allow */
	BACKEND_PARAMS_MODIFY,	 /* ControllerModifyVolume: mutable_parameters, well formed */
} BackendParamsUse;

typedef struct BackendParamsRequest {
	BackendParamsUse use;
	const ParamKV *parameters; /* borrowed */
	size_t n_parameters;
	const ParamKV *mutable_parameters;
	size_t n_mutable_parameters;
	uint64_t size;	    /* CREATE: the volume's, rounded */
	bool block;	    /* CREATE: raw block access */
	const char *fstype; /* CREATE: the capability's filesystem, "" when it names none */
} BackendParamsRequest;

typedef struct BackendParams {
	VolumeParams params;	     /* CREATE: release with volume_params_done() */
	uint64_t min_size, max_size; /* CAPACITY: 0: no bound */
} BackendParams;

/* BackendOps.parse_params with the EBS driver's rules (above): what a backend that takes them
 * points its operation at, or calls (b is not used). CREATE: volume_params_parse() of parameters,
 * then volume_params_check_mutable() and volume_params_modify() of mutable_parameters, then
 * volume_params_check_capability(); CAPACITY: volume_params_size_range(); MODIFY:
 * volume_params_check_mutable(). Messages start with the field ("parameters: ..."). */
int volume_params_request(struct Backend *b, const BackendParamsRequest *r, BackendParams *ret,
			  char **ret_error);
