/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "params.h"
#include "tap.h"

#define P(k, v) ((ParamKV){(char *)(k), (char *)(v)})
#define GiB (UINT64_C(1) << 30)
#define N(a) (sizeof(a) / sizeof((a)[0]))

static char *err;
static VolumeParams vp;

/* Parses for CreateVolume into vp; the error, if any, lands in err. */
static int parse(const ParamKV *kv, size_t n, uint64_t size)
{
	free(err);
	err = NULL;
	volume_params_done(&vp);
	return volume_params_parse(kv, n, size, &vp, &err);
}

/* The error message CreateVolume would give for one parameter. */
static const char *parse_error1(const char *key, const char *value, uint64_t size)
{
	ParamKV kv[] = {P(key, value)};
	parse(kv, 1, size);
	return err;
}

static bool starts_with(const char *s, const char *prefix)
{
	return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool streq(const char *a, const char *b)
{
	return a && b && strcmp(a, b) == 0;
}

static const char *kv_get(const ParamKV *kv, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(kv[i].key, key) == 0)
			return kv[i].value;
	return NULL;
}

static void test_create(void)
{
	is_int(parse(NULL, 0, 1 * GiB), 0, "no parameters: success");
	is_str(vp.type, "gp3", "default type gp3");
	is_int(vp.iops, 3000, "gp3 default iops 3000");
	is_int(vp.throughput, 125, "gp3 default throughput 125");
	is_str(vp.fstype, "", "no fstype: the capability decides");
	is_int(vp.n_tags, 0, "no tags");

	ParamKV ci[] = {P("TYPE", "io1"), P("Iops", "200")};
	is_int(parse(ci, N(ci), 10 * GiB), 0, "keys are case-insensitive");
	is_str(vp.type, "io1", "type io1");
	is_int(vp.iops, 200, "iops 200");
	is_int(vp.throughput, 0, "io1 has no throughput");

	is_int(parse((ParamKV[]){P("foo", "bar")}, 1, GiB), -EINVAL, "unknown key: -EINVAL");
	is_str(err,
	       "parameter 'foo' is not supported (known: type, iops, iopsPerGB, "
	       "allowAutoIOPSPerGBIncrease, throughput, encrypted, kmsKeyId, tagSpecification_N, "
	       "csi.storage.k8s.io/fstype, blockSize, inodeSize, bytesPerInode, numberOfInodes, "
	       "ext4BigAlloc, ext4ClusterSize, ext4EncryptionSupport, ext4FastCommit, "
	       "fsGroupChangePolicy, volumeInitializationRate, blockExpress, "
	       "allowAutoIOPSIncreaseOnModify, blockAttachUntilInitialized, volumeKind)",
	       "unknown key: the message names it and lists the known ones");

	ParamKV enc[] = {P("encrypted", "true"), P("kmsKeyId", "alias/volumes")};
	is_int(parse(enc, N(enc), GiB), 0, "encrypted with a KMS key: success");
	ok(vp.encrypted && strcmp(vp.kms_key_id, "alias/volumes") == 0,
	   "encrypted and the key recorded");
	ParamKV *ekv;
	size_t en;
	volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &ekv, &en);
	ok(streq(kv_get(ekv, en, "encrypted"), "true") &&
		   streq(kv_get(ekv, en, "kmsKeyId"), "alias/volumes"),
	   "encryption serialised with the volume's parameters");
	VolumeParams loaded = {};
	is_int(volume_params_load(ekv, en, &loaded, NULL), 0, "and read back");
	ok(volume_params_equal(&loaded, &vp), "read back equal");
	volume_params_done(&loaded);
	param_kv_free_many(ekv, en);
	volume_params_to_kv(&vp, VOLUME_PARAMS_NODE, &ekv, &en);
	ok(!kv_get(ekv, en, "encrypted") && !kv_get(ekv, en, "kmsKeyId"),
	   "the node is not told the key");
	param_kv_free_many(ekv, en);
	ParamKV plain[] = {P("encrypted", "false")};
	VolumeParams enc_vp = {};
	volume_params_copy(&vp, &enc_vp);
	is_int(parse(plain, N(plain), GiB), 0, "encrypted false: success");
	ok(!volume_params_equal(&enc_vp, &vp), "encrypted and plain volumes differ");
	volume_params_done(&enc_vp);
	is_str(parse_error1("kmsKeyId", "alias/volumes", GiB),
	       "kmsKeyId: needs encrypted set to \"true\"", "a key without encryption: message");
	is_str(parse_error1("encrypted", "yes", GiB),
	       "encrypted: wanted \"true\" or \"false\", got 'yes'", "bad encrypted: message");
	is_str(parse_error1("type", "gp4", GiB),
	       "type: wanted one of gp3, gp2, io1, io2, sc1, st1, standard, got 'gp4'",
	       "bad type: message");
	is_str(parse_error1("type", "GP3", GiB),
	       "type: wanted one of gp3, gp2, io1, io2, sc1, st1, standard, got 'GP3'",
	       "type values are lower-case, as EC2 has them");
	is_str(parse_error1("iops", "abc", GiB), "iops: wanted a positive integer, got 'abc'",
	       "bad iops: message");
	is_str(parse_error1("iops", "0", GiB), "iops: wanted a positive integer, got '0'",
	       "iops 0: message");
	is_str(parse_error1("throughput", "-5", GiB),
	       "throughput: wanted a positive integer, got '-5'", "negative throughput: message");
	is_str(parse_error1("allowAutoIOPSPerGBIncrease", "yes", GiB),
	       "allowAutoIOPSPerGBIncrease: wanted \"true\" or \"false\", got 'yes'",
	       "bad boolean: message");

	ParamKV gp2[] = {P("type", "gp2"), P("iops", "3000")};
	is_int(parse(gp2, N(gp2), 10 * GiB), -EINVAL, "gp2 with iops: -EINVAL");
	is_str(err, "iops: not accepted for type gp2 (only gp3, io1 and io2 take it)",
	       "gp2 with iops: message");
	ParamKV sc1[] = {P("type", "sc1"), P("iopsPerGB", "3")};
	is_int(parse(sc1, N(sc1), 500 * GiB), -EINVAL, "sc1 with iopsPerGB: -EINVAL");
	is_str(err, "iopsPerGB: not accepted for type sc1 (only gp3, io1 and io2 take it)",
	       "sc1 with iopsPerGB: message");
	ParamKV tpio1[] = {P("type", "io1"), P("iops", "500"), P("throughput", "250")};
	is_int(parse(tpio1, N(tpio1), 10 * GiB), -EINVAL, "io1 with throughput: -EINVAL");
	is_str(err, "throughput: not accepted for type io1 (only gp3 takes it)",
	       "io1 with throughput: message");
	ParamKV tpst1[] = {P("type", "st1"), P("throughput", "250")};
	is_int(parse(tpst1, N(tpst1), 500 * GiB), -EINVAL, "st1 with throughput: -EINVAL");
	is_str(parse_error1("throughput", "2001", GiB),
	       "throughput: wanted 125 to 2000 MiB/s for type gp3, got 2001",
	       "gp3 throughput out of range: message");
	is_str(parse_error1("throughput", "100", GiB),
	       "throughput: wanted 125 to 2000 MiB/s for type gp3, got 100",
	       "gp3 throughput below 125: message");
	ParamKV tp[] = {P("throughput", "1000")};
	is_int(parse(tp, 1, GiB), 0, "gp3 throughput 1000: success");
	is_int(vp.throughput, 1000, "throughput 1000 recorded");

	/* IOPS as the EBS driver resolves them */
	ParamKV cap1[] = {P("iops", "90000")};
	is_int(parse(cap1, 1, 200 * GiB), 0, "gp3 iops above the maximum: success");
	is_int(vp.iops, 80000, "capped to gp3's 80000");
	ParamKV cap1b[] = {P("iops", "20000")};
	is_int(parse(cap1b, 1, 100 * GiB), 0, "gp3 iops 20000 on 100 GiB: success");
	is_int(vp.iops, 20000, "above 2024's 16000: kept");
	ParamKV cap2[] = {P("iops", "10000")};
	is_int(parse(cap2, 1, 10 * GiB), 0, "gp3 iops above 500 per GiB: success");
	is_int(vp.iops, 5000, "capped to 500 x 10 GiB");
	ParamKV cap3[] = {P("iops", "5000")};
	is_int(parse(cap3, 1, 1 * GiB), 0, "gp3 iops on a 1 GiB volume: success");
	is_int(vp.iops, 3000, "capped, but never below gp3's 3000 baseline");
	ParamKV low[] = {P("iops", "1000")};
	is_int(parse(low, 1, 10 * GiB), -EINVAL, "gp3 iops below 3000: -EINVAL");
	is_str(err,
	       "iops: 1000 is below the minimum of 3000 for type gp3 (set "
	       "allowAutoIOPSPerGBIncrease to \"true\" to raise it)",
	       "gp3 iops below the minimum: message");
	ParamKV lowauto[] = {P("iops", "1000"), P("allowautoiopspergbincrease", "TRUE")};
	is_int(parse(lowauto, N(lowauto), 10 * GiB), 0, "with allowAutoIOPSPerGBIncrease: success");
	is_int(vp.iops, 3000, "raised to the minimum");
	ParamKV pergb[] = {P("type", "io1"), P("iopsPerGB", "10")};
	is_int(parse(pergb, N(pergb), 20 * GiB), 0, "io1 iopsPerGB: success");
	is_int(vp.iops, 200, "10 per GiB x 20 GiB = 200");
	ParamKV pergb_frac[] = {P("type", "io1"), P("iopsPerGB", "10")};
	is_int(parse(pergb_frac, N(pergb_frac), 20 * GiB + 1), 0, "a size just over 20 GiB");
	is_int(vp.iops, 210, "counts as 21 GiB, as EBS rounds sizes up");
	ParamKV pergb_low[] = {P("type", "io1"), P("iopsPerGB", "2")};
	is_int(parse(pergb_low, N(pergb_low), 10 * GiB), -EINVAL, "io1 iopsPerGB too low: -EINVAL");
	is_str(err,
	       "iopsPerGB: 2 x 10 GiB = 20 IOPS is below the minimum of 100 for type io1 (set "
	       "allowAutoIOPSPerGBIncrease to \"true\" to raise it)",
	       "iopsPerGB too low: message");
	ParamKV pergb_auto[] = {P("type", "io1"), P("iopsPerGB", "2"),
				P("allowAutoIOPSPerGBIncrease", "true")};
	is_int(parse(pergb_auto, N(pergb_auto), 10 * GiB), 0, "with auto increase: success");
	is_int(vp.iops, 100, "raised to io1's 100");
	ParamKV io1cap[] = {P("type", "io1"), P("iops", "1000")};
	is_int(parse(io1cap, N(io1cap), 10 * GiB), 0, "io1 above 50 per GiB: success");
	is_int(vp.iops, 500, "capped to 50 x 10 GiB");
	ParamKV io2pergb[] = {P("type", "io2"), P("iopsPerGB", "2000")};
	is_int(parse(io2pergb, N(io2pergb), 100 * GiB), 0, "io2 iopsPerGB above 1000: success");
	is_int(vp.iops, 100000, "capped to 1000 x 100 GiB");
	ParamKV io2max[] = {P("type", "io2"), P("iops", "300000")};
	is_int(parse(io2max, N(io2max), 1000 * GiB), 0, "io2 above 256000: success");
	is_int(vp.iops, 256000, "capped to io2's 256000");
	ParamKV both[] = {P("iops", "4000"), P("iopsPerGB", "10")};
	is_int(parse(both, N(both), 10 * GiB), -EINVAL, "iops with iopsPerGB: -EINVAL");
	is_str(err, "iops: cannot be combined with iopsPerGB (set one of them)",
	       "iops with iopsPerGB: message");
	ParamKV io1none[] = {P("type", "io1")};
	is_int(parse(io1none, 1, 10 * GiB), -EINVAL, "io1 without iops: -EINVAL");
	is_str(err, "iops: required for type io1 (set iops or iopsPerGB)",
	       "io1 without iops: message");
	ParamKV gp2ok[] = {P("type", "gp2")};
	is_int(parse(gp2ok, 1, 10 * GiB), 0, "gp2: success");
	is_int(vp.iops + vp.throughput, 0, "gp2 provisions neither iops nor throughput");

	/* size limits, only when the request names a type */
	ParamKV st1[] = {P("type", "st1")};
	is_int(parse(st1, 1, 1 * GiB), -EINVAL, "st1 of 1 GiB: -EINVAL");
	is_str(err, "type: st1 wants a volume of 125 GiB to 16 TiB, got 1 GiB",
	       "st1 size: message");
	is_int(parse(st1, 1, 125 * GiB), 0, "st1 of 125 GiB: success");
	ParamKV io2[] = {P("type", "io2"), P("iops", "100")};
	is_int(parse(io2, N(io2), 1 * GiB), -EINVAL, "io2 of 1 GiB: -EINVAL");
	is_str(err, "type: io2 wants a volume of 4 GiB to 64 TiB, got 1 GiB", "io2 size: message");
	is_int(parse(io2, N(io2), 3 * GiB + GiB / 2), 0, "io2 of 3.5 GiB counts as 4 GiB: success");
	is_int(parse(io2, N(io2), 64 * 1024 * GiB), 0, "io2 of 64 TiB: success");
	ParamKV gp3[] = {P("type", "gp3")};
	is_int(parse(gp3, 1, 20 * 1024 * GiB), 0, "gp3 named, 20 TiB: success");
	is_int(parse(gp3, 1, 65 * 1024 * GiB), -EINVAL, "gp3 named, 65 TiB: -EINVAL");
	is_str(err, "type: gp3 wants a volume of 1 GiB to 64 TiB, got 65 TiB", "gp3 size: message");
	is_int(parse(NULL, 0, 20 * 1024 * GiB), 0, "default type, 20 TiB: no size limit");
	is_int(parse(NULL, 0, 16 << 20), 0, "default type, 16 MiB: no size limit");
	ParamKV standard[] = {P("type", "standard")};
	is_int(parse(standard, 1, 2048 * GiB), -EINVAL, "standard of 2 TiB: -EINVAL");
	is_str(err, "type: standard wants a volume of 1 GiB to 1 TiB, got 2 TiB",
	       "standard size: message");

	/* passed through by external-provisioner, ignored */
	ParamKV ign[] = {P("csi.storage.k8s.io/pv/name", "pvc-1234"),
			 P("csi.storage.k8s.io/pvc/name", "data"),
			 P("CSI.Storage.K8s.io/pvc/namespace", "default"), P("fstype", "ext3")};
	is_int(parse(ign, N(ign), GiB), 0, "external-provisioner's keys are ignored");
	is_str(vp.fstype, "", "the deprecated fstype key sets nothing");

	ParamKV dup[] = {P("iops", "4000"), P("IOPS", "4000")};
	is_int(parse(dup, N(dup), 10 * GiB), -EINVAL, "one key twice: -EINVAL");
	is_str(err, "IOPS: given more than once (also as 'iops')", "one key twice: message");
}

static void test_fs(void)
{
	ParamKV xfs[] = {P("csi.storage.k8s.io/fstype", "xfs"), P("blockSize", "4k"),
			 P("inodeSize", "512"), P("fsGroupChangePolicy", "onrootmismatch")};
	is_int(parse(xfs, N(xfs), GiB), 0, "xfs with block and inode size: success");
	is_str(vp.fstype, "xfs", "fstype xfs");
	is_int(vp.block_size, 4096, "blockSize 4k is 4096");
	is_int(vp.inode_size, 512, "inodeSize 512");
	is_int(vp.fs_group_change_policy, FS_GROUP_CHANGE_POLICY_ON_ROOT_MISMATCH,
	       "fsGroupChangePolicy OnRootMismatch, case-insensitive");

	is_str(parse_error1("csi.storage.k8s.io/fstype", "ntfs", GiB),
	       "csi.storage.k8s.io/fstype: wanted one of ext2, ext3, ext4, xfs, got 'ntfs'",
	       "bad fstype: message");
	is_str(parse_error1("blockSize", "3000", GiB),
	       "blockSize: wanted a power of two from 512 to 65536 bytes, got '3000'",
	       "blockSize not a power of two: message");
	ParamKV bs512[] = {P("blockSize", "512")};
	is_int(parse(bs512, 1, GiB), 0, "blockSize 512 without fstype: the capability decides");
	is_int(volume_params_check_capability(&vp, false, "xfs", NULL), 0,
	       "blockSize 512 with an xfs capability: success");
	is_int(volume_params_check_capability(&vp, false, "", &err), -EINVAL,
	       "blockSize 512 with the default ext4: -EINVAL");
	is_str(err, "blockSize: wanted 1024 to 65536 bytes with fstype ext4, got 512",
	       "blockSize 512 with ext4: message");
	ParamKV bs512e[] = {P("csi.storage.k8s.io/fstype", "ext3"), P("blockSize", "512")};
	is_int(parse(bs512e, N(bs512e), GiB), -EINVAL, "blockSize 512 with fstype ext3: -EINVAL");
	is_str(err, "blockSize: wanted 1024 to 65536 bytes with fstype ext3, got 512",
	       "checked at parse when the fstype parameter is given");
	is_str(parse_error1("bytesPerInode", "512", GiB),
	       "bytesPerInode: wanted a byte count from 1024 to 67108864, got '512'",
	       "bytesPerInode too small: message");
	is_str(parse_error1("numberOfInodes", "lots", GiB),
	       "numberOfInodes: wanted a positive integer, got 'lots'",
	       "bad numberOfInodes: message");
	is_str(parse_error1("ext4ClusterSize", "65536", GiB),
	       "ext4ClusterSize: needs ext4BigAlloc set to \"true\"",
	       "cluster size without bigalloc: message");
	is_str(parse_error1("fsGroupChangePolicy", "Never", GiB),
	       "fsGroupChangePolicy: wanted Always or OnRootMismatch, got 'Never'",
	       "bad fsGroupChangePolicy: message");

	ParamKV xfs_big[] = {P("csi.storage.k8s.io/fstype", "xfs"), P("ext4BigAlloc", "true")};
	is_int(parse(xfs_big, N(xfs_big), GiB), -EINVAL, "bigalloc with xfs: -EINVAL");
	is_str(err, "ext4BigAlloc: not accepted with fstype xfs", "bigalloc with xfs: message");
	ParamKV xfs_bpi[] = {P("csi.storage.k8s.io/fstype", "xfs"), P("bytesPerInode", "16384")};
	is_int(parse(xfs_bpi, N(xfs_bpi), GiB), -EINVAL, "bytesPerInode with xfs: -EINVAL");
	is_str(err, "bytesPerInode: not accepted with fstype xfs",
	       "bytesPerInode with xfs: message");
	ParamKV xfs_inode[] = {P("csi.storage.k8s.io/fstype", "xfs"), P("inodeSize", "256")};
	is_int(parse(xfs_inode, N(xfs_inode), GiB), -EINVAL, "xfs inodeSize 256: -EINVAL");
	is_str(err, "inodeSize: wanted 512 to 2048 bytes with fstype xfs, got 256",
	       "xfs inodeSize: message");
	ParamKV ext3_big[] = {P("csi.storage.k8s.io/fstype", "ext3"), P("ext4BigAlloc", "true")};
	is_int(parse(ext3_big, N(ext3_big), GiB), -EINVAL, "bigalloc with ext3: -EINVAL");
	is_str(err, "ext4BigAlloc: not accepted with fstype ext3", "bigalloc with ext3: message");
	ParamKV ext4_inode[] = {P("csi.storage.k8s.io/fstype", "ext4"), P("blockSize", "1024"),
				P("inodeSize", "2048")};
	is_int(parse(ext4_inode, N(ext4_inode), GiB), -EINVAL, "ext4 inode above block: -EINVAL");
	is_str(err, "inodeSize: wanted at most the block size (1024) with fstype ext4, got 2048",
	       "ext4 inode above block: message");

	ParamKV ext4[] = {P("csi.storage.k8s.io/fstype", "ext4"),
			  P("blockSize", "4096"),
			  P("inodeSize", "256"),
			  P("bytesPerInode", "16384"),
			  P("numberOfInodes", "100000"),
			  P("ext4BigAlloc", "true"),
			  P("ext4ClusterSize", "64K")};
	is_int(parse(ext4, N(ext4), GiB), 0, "every ext4 option: success");
	is_int(vp.bytes_per_inode, 16384, "bytesPerInode");
	is_int(vp.number_of_inodes, 100000, "numberOfInodes");
	ok(vp.ext4_bigalloc, "bigalloc");
	is_int(vp.ext4_cluster_size, 65536, "cluster size 64K");

	/* against the volume capability */
	is_int(volume_params_check_capability(&vp, false, "ext4", &err), 0,
	       "ext4 options with an ext4 mount: success");
	free(err);
	err = NULL;
	is_int(volume_params_check_capability(&vp, true, "", &err), -EINVAL,
	       "mkfs options with a block volume: -EINVAL");
	is_str(err, "blockSize: not accepted for a block volume", "block volume: message");
	free(err);
	err = NULL;
	is_int(volume_params_check_capability(&vp, false, "xfs", &err), -EINVAL,
	       "fstype parameter against another capability fs_type: -EINVAL");
	is_str(err,
	       "csi.storage.k8s.io/fstype: 'ext4' differs from the volume capability's fs_type "
	       "'xfs'",
	       "fstype mismatch: message");
	ParamKV bpi[] = {P("bytesPerInode", "16384")};
	parse(bpi, 1, GiB);
	is_int(volume_params_check_capability(&vp, false, "xfs", &err), -EINVAL,
	       "bytesPerInode with an xfs capability: -EINVAL");
	is_str(err, "bytesPerInode: not accepted with fstype xfs",
	       "checked against the capability");
	free(err);
	err = NULL;
	is_int(volume_params_check_capability(&vp, false, "", &err), 0,
	       "no fstype anywhere: ext4, success");
	parse(NULL, 0, GiB);
	is_int(volume_params_check_capability(&vp, true, "", &err), 0,
	       "no options with a block volume: success");
}

static void test_tags(void)
{
	ParamKV tags[] = {P("tagSpecification_2", "team=db=primary"),
			  P("TagSpecification_1", "env=prod"), P("tagSpecification_3", "empty=")};
	is_int(parse(tags, N(tags), GiB), 0, "tags: success");
	is_int(vp.n_tags, 3, "three tags");
	is_str(vp.tags[0].key, "empty", "sorted by key: empty");
	is_str(vp.tags[0].value, "", "an empty value is allowed");
	is_str(vp.tags[1].key, "env", "env");
	is_str(vp.tags[2].key, "team", "team");
	is_str(vp.tags[2].value, "db=primary", "the value keeps later '='");

	is_str(parse_error1("tagSpecification_1", "noequals", GiB),
	       "tagSpecification_1: wanted 'key=value', got 'noequals'",
	       "tag without '=': message");
	is_str(parse_error1("tagSpecification_1", "=v", GiB),
	       "tagSpecification_1: wanted 'key=value', got '=v'", "tag without key: message");
	is_str(parse_error1("tagSpecification_1", "aws:owner=me", GiB),
	       "tagSpecification_1: tag keys starting with 'aws:' are reserved",
	       "aws: prefix: message");
	parse_error1("tagSpecification_x", "a=b", GiB);
	ok(starts_with(err, "parameter 'tagSpecification_x' is not supported"),
	   "tagSpecification_ without a number is an unknown key");
	ParamKV clash[] = {P("tagSpecification_1", "env=prod"), P("tagSpecification_2", "env=dev")};
	is_int(parse(clash, N(clash), GiB), -EINVAL, "one tag key with two values: -EINVAL");
	is_str(err,
	       "tagSpecification_2: tag 'env' is already set to 'prod' by another "
	       "tagSpecification_N",
	       "tag clash: message");
	ParamKV same_n[] = {P("tagSpecification_1", "a=1"), P("tagSpecification_01", "b=2")};
	is_int(parse(same_n, N(same_n), GiB), -EINVAL, "one N twice: -EINVAL");
	is_str(err, "tagSpecification_01: given more than once", "one N twice: message");

	ParamKV many[51];
	char keys[51][32], values[51][32];
	for (int i = 0; i < 51; i++) {
		snprintf(keys[i], sizeof(keys[i]), "tagSpecification_%d", i + 1);
		snprintf(values[i], sizeof(values[i]), "k%d=v", i);
		many[i] = P(keys[i], values[i]);
	}
	is_int(parse(many, 50, GiB), 0, "50 tags: success");
	is_int(parse(many, 51, GiB), -EINVAL, "51 tags: -EINVAL");
	is_str(err, "tagSpecification_N: wanted at most 50 tags, got 51", "51 tags: message");
}

/* n keys "tagSpecification_1".. with distinct tags, the first one malformed: a parse that
 * reached it would fail on it, so a count message proves the count came first. */
static ParamKV *tag_keys(size_t n)
{
	ParamKV *kv = xnew0(ParamKV, n);
	for (size_t i = 0; i < n; i++)
		kv[i] = (ParamKV){xasprintf("tagSpecification_%zu", i + 1),
				  i == 0 ? xstrdup("noequals") : xasprintf("k%zu=v", i)};
	return kv;
}

static void test_limits(void)
{
	ParamKV *kv = tag_keys(100000);
	is_int(parse(kv, 100000, GiB), -EINVAL, "100000 parameters: -EINVAL");
	is_str(err, "wanted at most 512 parameters, got 100000",
	       "100000 parameters: refused on the count, before any key is parsed");
	is_int(volume_params_check_mutable(kv, 100000, &err), -EINVAL,
	       "100000 mutable parameters: -EINVAL");
	is_str(err, "wanted at most 512 parameters, got 100000",
	       "100000 mutable parameters: refused on the count");
	uint64_t lo, hi;
	free(err);
	err = NULL;
	is_int(volume_params_size_range(kv, 100000, &lo, &hi, &err), -EINVAL,
	       "GetCapacity's 100000 parameters: -EINVAL");
	is_str(err, "wanted at most 512 parameters, got 100000",
	       "GetCapacity's 100000 parameters: refused on the count");

	is_int(parse(kv, 51, GiB), -EINVAL, "51 tag keys: -EINVAL");
	is_str(err, "tagSpecification_N: wanted at most 50 tags, got 51",
	       "51 tag keys: refused on the count, before the malformed first one is parsed");
	is_int(parse(kv, 2, GiB), -EINVAL, "2 tag keys, one malformed: -EINVAL");
	is_str(err, "tagSpecification_1: wanted 'key=value', got 'noequals'",
	       "under the limits the keys are parsed");
	param_kv_free_many(kv, 100000);

	/* keys that are otherwise ignored count too */
	kv = xnew0(ParamKV, 513);
	for (size_t i = 0; i < 513; i++)
		kv[i] = (ParamKV){xasprintf("csi.storage.k8s.io/k%zu", i), xstrdup("v")};
	is_int(parse(kv, 512, GiB), 0, "512 parameters: success");
	is_int(parse(kv, 513, GiB), -EINVAL, "513 parameters: -EINVAL");
	is_str(err, "wanted at most 512 parameters, got 513", "513 parameters: message");
	param_kv_free_many(kv, 513);

	/* the same tag from two keys is one tag: 50 tags in 50 keys, found by hash */
	ParamKV dup[] = {P("tagSpecification_7", "env=prod"), P("tagSpecification_9", "env=prod")};
	is_int(parse(dup, N(dup), GiB), 0, "one tag from two keys: success");
	is_int(vp.n_tags, 1, "one tag from two keys: one tag");
}

static void test_serialise(void)
{
	ParamKV in[] = {P("type", "gp3"),
			P("iops", "4000"),
			P("throughput", "250"),
			P("csi.storage.k8s.io/fstype", "ext4"),
			P("blockSize", "4096"),
			P("ext4BigAlloc", "true"),
			P("ext4ClusterSize", "16384"),
			P("fsGroupChangePolicy", "Always"),
			P("tagSpecification_7", "b=2"),
			P("tagSpecification_3", "a=1")};
	is_int(parse(in, N(in), 10 * GiB), 0, "parameters for serialising");

	ParamKV *kv = NULL;
	size_t n = 0;
	is_int(volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &kv, &n), 0, "serialise all");
	is_int(n, 10, "ten keys");
	is_str(kv[0].key, "type", "type first");
	is_str(kv_get(kv, n, "type"), "gp3", "type");
	is_str(kv_get(kv, n, "iops"), "4000", "iops");
	is_str(kv_get(kv, n, "throughput"), "250", "throughput");
	is_str(kv_get(kv, n, "csi.storage.k8s.io/fstype"), "ext4", "fstype");
	is_str(kv_get(kv, n, "blockSize"), "4096", "blockSize");
	is_str(kv_get(kv, n, "ext4BigAlloc"), "true", "ext4BigAlloc");
	is_str(kv_get(kv, n, "ext4ClusterSize"), "16384", "ext4ClusterSize");
	is_str(kv_get(kv, n, "fsGroupChangePolicy"), "Always", "fsGroupChangePolicy");
	is_str(kv_get(kv, n, "tagSpecification_1"), "a=1", "tags renumbered in key order: 1");
	is_str(kv_get(kv, n, "tagSpecification_2"), "b=2", "tags renumbered in key order: 2");

	VolumeParams back = {};
	_cleanup_free_ char *e = NULL;
	is_int(volume_params_load(kv, n, &back, &e), 0, "load what was serialised");
	ok(volume_params_equal(&vp, &back), "the round trip gives equal parameters");
	back.iops = 5000;
	ok(!volume_params_equal(&vp, &back), "different iops are not equal");
	volume_params_done(&back);
	param_kv_free_many(kv, n);

	is_int(volume_params_to_kv(&vp, VOLUME_PARAMS_NODE, &kv, &n), 0, "serialise for the node");
	is_int(n, 5, "five keys for the node");
	ok(!kv_get(kv, n, "type") && !kv_get(kv, n, "iops") && !kv_get(kv, n, "tagSpecification_1"),
	   "no type, iops or tags in the volume context");
	is_str(kv_get(kv, n, "csi.storage.k8s.io/fstype"), "ext4", "the node gets the fstype");
	is_str(kv_get(kv, n, "fsGroupChangePolicy"), "Always", "and the ownership policy");
	param_kv_free_many(kv, n);

	/* a small volume made with defaults loads back without size rules */
	parse(NULL, 0, 16 << 20);
	volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &kv, &n);
	is_int(volume_params_load(kv, n, &back, NULL), 0, "load a 16 MiB default volume");
	ok(volume_params_equal(&vp, &back), "equal");
	volume_params_done(&back);
	param_kv_free_many(kv, n);

	ParamKV bad[] = {P("type", "gp9")};
	is_int(volume_params_load(bad, 1, &back, NULL), -EINVAL, "damaged metadata: -EINVAL");
}

static int modify(const VolumeParams *cur, uint64_t size, const ParamKV *kv, size_t n)
{
	free(err);
	err = NULL;
	volume_params_done(&vp);
	return volume_params_modify(cur, size, kv, n, &vp, &err);
}

static void test_modify(void)
{
	_cleanup_free_ char *e = NULL;
	ParamKV foo[] = {P("type", "gp2"), P("foo", "1")};
	is_int(volume_params_check_mutable(foo, N(foo), &e), -EINVAL,
	       "unknown mutable key: -EINVAL");
	is_str(e,
	       "parameter 'foo' cannot be modified (mutable: type, iops, throughput, "
	       "tagSpecification_N)",
	       "unknown mutable key: message");
	free(e);
	e = NULL;
	ParamKV bs[] = {P("blockSize", "4096")};
	is_int(volume_params_check_mutable(bs, 1, &e), -EINVAL, "blockSize is not mutable");
	is_str(e,
	       "parameter 'blockSize' cannot be modified (mutable: type, iops, throughput, "
	       "tagSpecification_N)",
	       "blockSize: message");
	free(e);
	e = NULL;
	ParamKV okm[] = {P("Type", "io2"), P("IOPS", "4000"), P("throughput", "300"),
			 P("tagSpecification_1", "a=b")};
	is_int(volume_params_check_mutable(okm, N(okm), &e), 0, "mutable keys, any case: success");
	ParamKV badv[] = {P("iops", "many")};
	is_int(volume_params_check_mutable(badv, 1, &e), -EINVAL, "bad mutable value: -EINVAL");
	is_str(e, "iops: wanted a positive integer, got 'many'", "bad mutable value: message");

	VolumeParams cur = {};
	ParamKV c0[] = {P("tagSpecification_1", "env=prod"), P("blockSize", "4096")};
	is_int(volume_params_parse(c0, N(c0), 10 * GiB, &cur, NULL), 0, "a gp3 volume of 10 GiB");

	ParamKV m1[] = {P("iops", "4000")};
	is_int(modify(&cur, 10 * GiB, m1, 1), 0, "gp3 iops 4000: success");
	is_int(vp.iops, 4000, "iops 4000");
	is_int(vp.throughput, 125, "throughput kept");
	is_int(vp.block_size, 4096, "mkfs options kept");
	is_int(vp.n_tags, 1, "tags kept");

	ParamKV m2[] = {P("iops", "6000")};
	is_int(modify(&cur, 10 * GiB, m2, 1), -EINVAL, "gp3 iops above 500 per GiB: -EINVAL");
	is_str(err, "iops: wanted 3000 to 5000 for a 10 GiB gp3 volume, got 6000",
	       "modify does not cap: message");
	ParamKV m3[] = {P("iops", "90000")};
	is_int(modify(&cur, 200 * GiB, m3, 1), -EINVAL, "gp3 iops 90000: -EINVAL");
	is_str(err, "iops: wanted 3000 to 80000 for a 200 GiB gp3 volume, got 90000",
	       "gp3 maximum: message");

	ParamKV m4[] = {P("type", "io2")};
	is_int(modify(&cur, 10 * GiB, m4, 1), 0, "gp3 -> io2 without iops: success");
	is_str(vp.type, "io2", "type io2");
	is_int(vp.iops, 3000, "EC2's default of 3000 iops");
	is_int(vp.throughput, 0, "no throughput for io2");

	ParamKV m5[] = {P("type", "io1")};
	is_int(modify(&cur, 10 * GiB, m5, 1), -EINVAL,
	       "gp3 -> io1 at 10 GiB without iops: -EINVAL");
	is_str(err,
	       "iops: wanted 100 to 500 for a 10 GiB io1 volume, got 3000 (the default when the "
	       "type changes to io1)",
	       "the default that does not fit: message");
	ParamKV m5b[] = {P("type", "io1"), P("iops", "500")};
	is_int(modify(&cur, 10 * GiB, m5b, N(m5b)), 0, "gp3 -> io1 with iops 500: success");

	ParamKV m6[] = {P("type", "gp2"), P("iops", "3000")};
	is_int(modify(&cur, 10 * GiB, m6, N(m6)), -EINVAL, "gp2 with iops: -EINVAL");
	is_str(err, "iops: not accepted for type gp2 (only gp3, io1 and io2 take it)",
	       "gp2 with iops: message");
	ParamKV m7[] = {P("type", "gp2")};
	is_int(modify(&cur, 10 * GiB, m7, 1), 0, "gp3 -> gp2: success");
	is_int(vp.iops + vp.throughput, 0, "iops and throughput dropped");

	ParamKV m8[] = {P("throughput", "2001")};
	is_int(modify(&cur, 10 * GiB, m8, 1), -EINVAL, "throughput 2001: -EINVAL");
	is_str(err, "throughput: wanted 125 to 2000 MiB/s for type gp3, got 2001",
	       "throughput range: message");

	VolumeParams io2 = {};
	ParamKV c1[] = {P("type", "io2"), P("iops", "8000")};
	is_int(volume_params_parse(c1, N(c1), 20 * GiB, &io2, NULL), 0, "an io2 volume");
	ParamKV m9[] = {P("throughput", "300")};
	is_int(modify(&io2, 20 * GiB, m9, 1), -EINVAL, "throughput on io2: -EINVAL");
	is_str(err, "throughput: not accepted for type io2 (only gp3 takes it)",
	       "throughput on io2: message");
	ParamKV m10[] = {P("type", "gp3")};
	is_int(modify(&io2, 20 * GiB, m10, 1), 0, "io2 -> gp3: success");
	is_int(vp.iops, 3000, "gp3 gets 3000 iops");
	is_int(vp.throughput, 125, "and 125 MiB/s");
	ParamKV m11[] = {P("throughput", "500")};
	is_int(modify(&io2, 20 * GiB, (ParamKV[]){P("type", "gp3"), m11[0]}, 2), 0,
	       "io2 -> gp3 with throughput 500: success");
	is_int(vp.throughput, 500, "throughput 500");
	ParamKV m12[] = {P("iops", "9000")};
	is_int(modify(&io2, 20 * GiB, m12, 1), 0, "io2 iops 9000: success");
	is_int(vp.iops, 9000, "iops 9000");
	volume_params_done(&io2);

	ParamKV m13[] = {P("type", "st1")};
	is_int(modify(&cur, 10 * GiB, m13, 1), -EINVAL, "gp3 -> st1 at 10 GiB: -EINVAL");
	is_str(err, "type: st1 wants a volume of 125 GiB to 16 TiB, got 10 GiB",
	       "st1 size: message");

	ParamKV m14[] = {P("tagSpecification_1", "env=dev"), P("tagSpecification_2", "team=db")};
	is_int(modify(&cur, 10 * GiB, m14, N(m14)), 0, "tags: success");
	is_int(vp.n_tags, 2, "two tags");
	is_str(vp.tags[0].value, "dev", "env overwritten");
	is_str(vp.tags[1].key, "team", "team added");
	is_str(cur.tags[0].value, "prod", "the current parameters are untouched");
	ParamKV m14k[] = {P("csi.storage.k8s.io/pvc/name", "data"), P("iops", "4000")};
	is_int(volume_params_check_mutable(m14k, N(m14k), &err), 0,
	       "the resizer's csi.storage.k8s.io/ keys: ignored, as the EBS driver does");
	ParamKV m15[] = {P("size", "10")};
	is_int(modify(&cur, 10 * GiB, m15, 1), -EINVAL, "a non-mutable key: -EINVAL");
	is_str(err,
	       "parameter 'size' cannot be modified (mutable: type, iops, throughput, "
	       "tagSpecification_N)",
	       "a non-mutable key: message");

	volume_params_done(&cur);
}

/* ext4FastCommit: volplug's own, mkfs.ext4 -O fast_commit, ext4 only, carried as the other
 * mkfs options are. */
static void test_ext4_fast_commit(void)
{
	ParamKV on[] = {P("csi.storage.k8s.io/fstype", "ext4"), P("ext4FastCommit", "true")};
	is_int(parse(on, N(on), GiB), 0, "ext4FastCommit \"true\": accepted");
	ok(vp.ext4_fast_commit, "ext4FastCommit: recorded for mkfs");
	is_int(volume_params_check_capability(&vp, false, "ext4", &err), 0,
	       "ext4FastCommit with an ext4 mount: success");

	ParamKV *kv = NULL;
	size_t n = 0;
	volume_params_to_kv(&vp, VOLUME_PARAMS_NODE, &kv, &n);
	is_str(kv_get(kv, n, "ext4FastCommit"), "true", "it travels to the node");
	VolumeParams back = {};
	_cleanup_free_ char *e = NULL;
	is_int(volume_params_load(kv, n, &back, &e), 0, "the volume context loads back");
	ok(back.ext4_fast_commit, "with fast commit");
	volume_params_done(&back);
	param_kv_free_many(kv, n);

	volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &kv, &n);
	is_str(kv_get(kv, n, "ext4FastCommit"), "true", "kept with the volume's parameters");
	is_int(volume_params_load(kv, n, &back, &e), 0, "the stored form loads back");
	ok(volume_params_equal(&vp, &back), "the round trip gives equal parameters");
	back.ext4_fast_commit = false;
	ok(!volume_params_equal(&vp, &back), "with and without fast commit are not equal");
	volume_params_done(&back);
	param_kv_free_many(kv, n);

	ParamKV off[] = {P("csi.storage.k8s.io/fstype", "ext4"), P("EXT4FASTCOMMIT", "false")};
	is_int(parse(off, N(off), GiB), 0, "ext4FastCommit \"false\": accepted");
	ok(!vp.ext4_fast_commit, "ext4FastCommit \"false\": off");
	volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &kv, &n);
	ok(!kv_get(kv, n, "ext4FastCommit"), "off, the default, is left out");
	param_kv_free_many(kv, n);

	is_str(parse_error1("ext4FastCommit", "yes", GiB),
	       "ext4FastCommit: wanted \"true\" or \"false\", got 'yes'",
	       "bad ext4FastCommit: message names the key");

	ParamKV xfs[] = {P("csi.storage.k8s.io/fstype", "xfs"), P("ext4FastCommit", "true")};
	is_int(parse(xfs, N(xfs), GiB), -EINVAL, "ext4FastCommit with fstype xfs: -EINVAL");
	is_str(err, "ext4FastCommit: not accepted with fstype xfs", "with xfs: message");
	ParamKV ext3[] = {P("csi.storage.k8s.io/fstype", "ext3"), P("ext4FastCommit", "true")};
	is_int(parse(ext3, N(ext3), GiB), -EINVAL, "ext4FastCommit with fstype ext3: -EINVAL");
	is_str(err, "ext4FastCommit: not accepted with fstype ext3", "with ext3: message");

	/* the fstype from the volume capability */
	ParamKV bare[] = {P("ext4FastCommit", "true")};
	is_int(parse(bare, N(bare), GiB), 0, "ext4FastCommit without an fstype: accepted");
	is_int(volume_params_check_capability(&vp, false, "xfs", &err), -EINVAL,
	       "with an xfs capability: -EINVAL");
	is_str(err, "ext4FastCommit: not accepted with fstype xfs", "xfs capability: message");
	free(err);
	err = NULL;
	is_int(volume_params_check_capability(&vp, false, "ext2", &err), -EINVAL,
	       "with an ext2 capability: -EINVAL");
	is_str(err, "ext4FastCommit: not accepted with fstype ext2", "ext2 capability: message");
	free(err);
	err = NULL;
	is_int(volume_params_check_capability(&vp, true, "", &err), -EINVAL,
	       "with a block capability: -EINVAL");
	is_str(err, "ext4FastCommit: not accepted for a block volume", "block: message");
	free(err);
	err = NULL;
	ParamKV dir[] = {P("volumeKind", "directory"), P("ext4FastCommit", "true")};
	is_int(parse(dir, N(dir), GiB), 0, "with volumeKind directory: parsed");
	is_int(volume_params_check_capability(&vp, false, "", &err), -EINVAL,
	       "for a directory volume: -EINVAL");
	is_str(err, "ext4FastCommit: not accepted for a directory volume (no filesystem is made)",
	       "directory: message");
}

/* The keys of the AWS EBS CSI driver's StorageClasses: each accepted with its meaning there, or
 * refused saying why and what to write instead. */
static void test_upstream_keys(void)
{
	ParamKV bx[] = {P("type", "io2"), P("iops", "100000"), P("blockExpress", "true")};
	is_int(parse(bx, N(bx), 200 * GiB), 0, "blockExpress: accepted");
	is_int(vp.iops, 100000, "blockExpress: no effect (every io2 is Block Express)");
	ParamKV bx2[] = {P("BlockExpress", "whatever")};
	is_int(parse(bx2, 1, GiB), 0, "blockExpress: ignored, whatever its value, as upstream");

	ParamKV rate[] = {P("volumeInitializationRate", "200")};
	is_int(parse(rate, 1, GiB), 0, "volumeInitializationRate: accepted");
	is_int(vp.initialization_rate, 200, "volumeInitializationRate: 200 MiB/s for CreateVolume");
	is_str(parse_error1("volumeInitializationRate", "50", GiB),
	       "volumeInitializationRate: wanted 100 to 300 MiB/s, got 50",
	       "volumeInitializationRate below EC2's 100: message");
	is_str(parse_error1("volumeinitializationrate", "fast", GiB),
	       "volumeinitializationrate: wanted a positive integer, got 'fast'",
	       "volumeInitializationRate not a number: message");
	ParamKV *kv = NULL;
	size_t n = 0;
	volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &kv, &n);
	ok(!kv_get(kv, n, "volumeInitializationRate"),
	   "the rate is how EBS fills the volume, not a setting kept with it");
	param_kv_free_many(kv, n);

	ParamKV enc[] = {P("ext4EncryptionSupport", "true")};
	is_int(parse(enc, 1, GiB), 0, "ext4EncryptionSupport: accepted");
	ok(vp.ext4_encryption, "ext4EncryptionSupport: recorded for mkfs");
	volume_params_to_kv(&vp, VOLUME_PARAMS_NODE, &kv, &n);
	is_str(kv_get(kv, n, "ext4EncryptionSupport"), "true", "it travels to the node");
	param_kv_free_many(kv, n);
	free(err);
	err = NULL;
	is_int(volume_params_check_capability(&vp, false, "xfs", &err), -EINVAL,
	       "ext4EncryptionSupport with xfs: -EINVAL");
	is_str(err, "ext4EncryptionSupport: not accepted with fstype xfs", "with xfs: message");
	free(err);
	err = NULL;
	is_int(volume_params_check_capability(&vp, false, "ext4", &err), 0, "with ext4: success");

	ParamKV off[] = {P("allowAutoIOPSIncreaseOnModify", "false"),
			 P("blockAttachUntilInitialized", "false")};
	is_int(parse(off, N(off), GiB), 0, "the two upstream switches at \"false\": accepted");
	is_str(parse_error1("allowAutoIOPSIncreaseOnModify", "true", GiB),
	       "allowAutoIOPSIncreaseOnModify: \"true\" is not supported: volplug keeps no "
	       "iopsPerGB after CreateVolume, so an expansion keeps the volume's IOPS (leave it "
	       "out, and set iops in a VolumeAttributesClass to change them)",
	       "allowAutoIOPSIncreaseOnModify \"true\": says why and what to write");
	is_str(parse_error1("blockAttachUntilInitialized", "true", GiB),
	       "blockAttachUntilInitialized: \"true\" is not supported: ControllerPublishVolume "
	       "attaches a volume made from a snapshot at once, while EBS still fills it (leave "
	       "it out; volumeInitializationRate bounds how long the filling takes)",
	       "blockAttachUntilInitialized \"true\": says why and what to write");
}

/* The volume-type table against tests/ec2sim/limits.py, the simulator's model of EC2. */
static void test_limits_match_simulator(void)
{
	static const char *const cmd =
		PYTHON3 " -c 'import sys; sys.path.insert(0, \"" SOURCE_ROOT "/tests/ec2sim\"); "
			"import limits\n"
			"for t, l in sorted(limits.VOLUME_TYPES.items()):\n"
			"    i = l.get(\"iops\", (0, 0)); th = l.get(\"throughput\", (0, 0))\n"
			"    print(t, l[\"size\"][0], l[\"size\"][1], i[0], i[1], "
			"l.get(\"iops_per_gib\", 0), th[0], th[1])'";
	size_t n_types, seen = 0;
	const VolumeTypeLimits *types = volume_type_limits(&n_types);
	char name[32];
	unsigned long long smin, smax, imin, imax, per, tmin, tmax;

	FILE *f = popen(cmd, "r");
	ok(f != NULL, "the simulator's table is read");
	if (!f)
		return;
	while (fscanf(f, "%31s %llu %llu %llu %llu %llu %llu %llu", name, &smin, &smax, &imin,
		      &imax, &per, &tmin, &tmax) == 8) {
		const VolumeTypeLimits *t = NULL;
		for (size_t i = 0; i < n_types; i++)
			if (strcmp(types[i].name, name) == 0)
				t = &types[i];
		ok(t, "%s: in volplug's table", name);
		if (!t)
			continue;
		seen++;
		ok(t->min_gib == smin && t->max_gib == smax,
		   "%s: sizes %llu-%llu GiB, the simulator's %llu-%llu", name,
		   (unsigned long long)t->min_gib, (unsigned long long)t->max_gib, smin, smax);
		ok(t->min_iops == imin && t->max_iops == imax && t->iops_per_gib == per,
		   "%s: IOPS %u-%u, %u/GiB, the simulator's %llu-%llu, %llu/GiB", name, t->min_iops,
		   t->max_iops, t->iops_per_gib, imin, imax, per);
		ok(t->min_throughput == tmin && t->max_throughput == tmax,
		   "%s: throughput %u-%u MiB/s, the simulator's %llu-%llu", name, t->min_throughput,
		   t->max_throughput, tmin, tmax);
	}
	is_int(pclose(f), 0, "the simulator's table printed");
	is_int(seen, n_types, "every type of volplug's table is the simulator's");
}

/* GetCapacity's sizes: a type's own range, and the range the parameters allow. */
static void test_sizes(void)
{
	uint64_t min = 0, max = 0;

	is_int(volume_type_sizes("io2", &min, &max), 0, "io2's sizes");
	ok(min == 4 * GiB && max == 65536 * GiB, "io2: 4 GiB to 64 TiB");
	is_int(volume_type_sizes(VOLUME_TYPE_DEFAULT, &min, &max), 0, "the default type's sizes");
	ok(min == GiB && max == 65536 * GiB, "gp3: 1 GiB to 64 TiB");
	is_int(volume_type_sizes("gp9", &min, &max), -EINVAL, "no such type: -EINVAL");
	ok(min == GiB && max == 65536 * GiB, "and nothing written");

	ParamKV st1[] = {P("type", "st1")};
	free(err);
	err = NULL;
	is_int(volume_params_size_range(st1, 1, &min, &max, &err), 0, "st1's range");
	ok(min == 124 * GiB + 1 && max == 16384 * GiB,
	   "a byte over 124 GiB (counts as 125) to 16 TiB");
	is_int(volume_params_size_range(NULL, 0, &min, &max, &err), 0, "no parameters");
	ok(min == 0 && max == 0, "no bound");
}

/* volumeKind: file (the default: a loop device) or directory (the pool's filesystem with a
 * project quota): recorded, handed to the node, compared, and kept from block volumes and mkfs
 * options. */
static void test_volume_kind(void)
{
	ParamKV dir[] = {P("volumeKind", "directory")};
	is_int(parse(dir, 1, GiB), 0, "volumeKind: directory: success");
	ok(vp.directory, "a directory volume");
	is_int(volume_params_check_capability(&vp, false, "ext4", &err), 0,
	       "directory with a filesystem capability: success");
	is_int(volume_params_check_capability(&vp, true, "", &err), -EINVAL,
	       "directory with a block capability: -EINVAL");
	is_str(err,
	       "volumeKind: directory is for filesystem volumes: a block volume is a device "
	       "(leave it out, or set it to file)",
	       "block directory: message");

	ParamKV *kv = NULL;
	size_t n = 0;
	volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &kv, &n);
	is_str(kv_get(kv, n, "volumeKind"), "directory", "recorded");
	VolumeParams back = {};
	is_int(volume_params_load(kv, n, &back, NULL), 0, "loads back");
	ok(back.directory && volume_params_equal(&vp, &back), "equal after the round trip");
	param_kv_free_many(kv, n);
	volume_params_to_kv(&vp, VOLUME_PARAMS_NODE, &kv, &n);
	is_str(kv_get(kv, n, "volumeKind"), "directory", "the node is told");
	param_kv_free_many(kv, n);

	ParamKV file[] = {P("volumeKind", "File")};
	is_int(parse(file, 1, GiB), 0, "volumeKind: File (any case): success");
	ok(!vp.directory, "file: a loop device, as without the key");
	ok(!volume_params_equal(&vp, &back), "a file volume is not the directory volume");
	volume_params_done(&back);
	volume_params_to_kv(&vp, VOLUME_PARAMS_ALL, &kv, &n);
	ok(!kv_get(kv, n, "volumeKind"), "file is not recorded: records stay as they were");
	param_kv_free_many(kv, n);

	is_str(parse_error1("volumeKind", "tree", GiB),
	       "volumeKind: wanted file or directory, got 'tree'", "a bad kind: message");
	ParamKV opts[] = {P("volumeKind", "directory"), P("inodeSize", "512")};
	is_int(parse(opts, 2, GiB), 0, "mkfs options parse");
	is_int(volume_params_check_capability(&vp, false, "", &err), -EINVAL,
	       "mkfs options for a directory volume: -EINVAL");
	is_str(err, "inodeSize: not accepted for a directory volume (no filesystem is made)",
	       "no mkfs: message");
	ParamKV fs[] = {P("volumeKind", "directory"), P("csi.storage.k8s.io/fstype", "xfs")};
	parse(fs, 2, GiB);
	is_int(volume_params_check_capability(&vp, false, "", &err), -EINVAL,
	       "an fstype parameter for a directory volume: -EINVAL");
	is_str(err,
	       "csi.storage.k8s.io/fstype: not accepted for a directory volume (no filesystem is "
	       "made) (its filesystem is the pool's)",
	       "fstype: message");
}

int main(void)
{
	test_create();
	test_fs();
	test_tags();
	test_limits();
	test_serialise();
	test_volume_kind();
	test_modify();
	test_sizes();
	test_upstream_keys();
	test_ext4_fast_commit();
	test_limits_match_simulator();
	volume_params_done(&vp);
	free(err);
	return tap_done();
}
