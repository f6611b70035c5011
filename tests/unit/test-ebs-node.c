/* SPDX-License-Identifier: Apache-2.0 */
/* The EBS node's device discovery (volume IDs, NVMe serials, by-id names, a sysfs tree made
 * here, what is refused), the attach limits of instance types and NodeGetInfo's limit counted
 * again as volumes come and go. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc.h"
#include "ebs-devices.h"
#include "ebs-limits.h"
#include "ebs-node.h"
#include "path-util.h"
#include "tap.h"

#define VOL "vol-0a1b2c3d4e5f60001"
#define ROOT_VOL "vol-0123456789abcdef0"

static char root[] = "/tmp/volplug-test-ebs-XXXXXX";

static void put(const char *rel, const char *content)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
	mkdir_parents(path, 0755);
	FILE *f = fopen(path, "we");
	if (!f)
		abort();
	fputs(content, f);
	fclose(f);
}

static void link_to(const char *target, const char *rel)
{
	_cleanup_free_ char *path = xasprintf("%s/%s", root, rel);
	mkdir_parents(path, 0755);
	if (symlink(target, path) < 0)
		abort();
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static void test_names(void)
{
	ok(ebs_volume_id_valid(VOL), "17 hex digits");
	ok(ebs_volume_id_valid("vol-0a1b2c3d"), "the old 8 hex digits");
	ok(!ebs_volume_id_valid("vol-0A1B2C3D4E5F60001"), "upper case is not EC2's");
	ok(!ebs_volume_id_valid("vol-0a1b2c3d4e5f6000"), "16 digits");
	ok(!ebs_volume_id_valid("vol-../../etc/passwd"), "a path");
	ok(!ebs_volume_id_valid("snap-0a1b2c3d4e5f60001"), "a snapshot");
	ok(!ebs_volume_id_valid(NULL) && !ebs_volume_id_valid(""), "nothing");

	_cleanup_free_ char *serial = ebs_volume_serial(VOL), *name = ebs_by_id_name(VOL);
	is_str(serial, "vol0a1b2c3d4e5f60001", "the serial is the ID without its dash");
	is_str(name, "nvme-Amazon_Elastic_Block_Store_vol0a1b2c3d4e5f60001", "udev's by-id name");
	ok(!ebs_volume_serial("vol-x") && !ebs_by_id_name("../x"), "none for a bad ID");

	const struct {
		const char *serial, *id;
	} serials[] = {
		{"vol0a1b2c3d4e5f60001", VOL},
		{"vol0a1b2c3d4e5f60001   \n", VOL},
		{"vol0a1b2c3d         ", "vol-0a1b2c3d"},
		{"AWS2C1A8D9B1B1C1AB5 ", NULL}, /* an instance store volume */
		{"vol", NULL},
		{"vol0a1b2c3d4e5f6000", NULL},
		{"vol0a1b2c3d4e5f60001x", NULL},
		{"", NULL},
	};
	for (size_t i = 0; i < ELEMENTSOF(serials); i++) {
		_cleanup_free_ char *id = ebs_serial_volume_id(serials[i].serial);
		if (serials[i].id)
			is_str(id, serials[i].id, "serial '%s'", serials[i].serial);
		else
			ok(!id, "serial '%s' names no volume (got %s)", serials[i].serial,
			   id ?: "none");
	}
}

/* A sysfs as an instance shows it: the root volume, VOL, an instance store, a partition of VOL
 * and a Xen device. */
static void make_sysfs(void)
{
	put("sys/block/nvme90n1/dev", "259:0\n");
	put("sys/block/nvme90n1/device/serial", "vol0123456789abcdef0\n");
	put("sys/block/nvme91n1/dev", "259:1\n");
	put("sys/block/nvme91n1/device/serial", "vol0a1b2c3d4e5f60001\n");
	put("sys/block/nvme91n1/nvme91n1p1/dev", "259:2\n");
	put("sys/block/nvme91n1/nvme91n1p1/partition", "1\n");
	put("sys/block/nvme92n1/dev", "259:3\n");
	put("sys/block/nvme92n1/device/serial", "AWS2C1A8D9B1B1C1AB5 \n");
	put("sys/block/xvdf/dev", "202:80\n");
	link_to("../../block/nvme90n1", "sys/dev/block/259:0");
	link_to("../../block/nvme91n1", "sys/dev/block/259:1");
	link_to("../../block/nvme91n1/nvme91n1p1", "sys/dev/block/259:2");
	link_to("../../block/nvme92n1", "sys/dev/block/259:3");
	link_to("../../block/xvdf", "sys/dev/block/202:80");
}

static void test_sysfs(void)
{
	_cleanup_free_ char *sys = xasprintf("%s/sys", root);
	char *name = NULL, *owner = NULL;
	dev_t devno = 0;

	make_sysfs();
	is_int(ebs_sysfs_find(sys, VOL, &name, &devno), 0, "the volume's NVMe disk is found");
	is_str(name, "nvme91n1", "by its serial");
	ok(devno == makedev(259, 1), "with its device number");
	free(name);
	is_int(ebs_sysfs_find(sys, "vol-0a1b2c3d4e5f60009", &name, &devno), -ENODEV,
	       "a volume not attached: none");
	is_int(ebs_sysfs_find("/nonexistent", VOL, &name, &devno), -ENODEV, "no sysfs: none");

	is_int(ebs_sysfs_devno_volume(sys, makedev(259, 1), &owner), 0, "a device's volume");
	is_str(owner, VOL, "the NVMe disk is the volume's");
	free(owner);
	is_int(ebs_sysfs_devno_volume(sys, makedev(259, 0), &owner), 0, "the root disk");
	is_str(owner, ROOT_VOL, "is the root volume's");
	free(owner);
	is_int(ebs_sysfs_devno_volume(sys, makedev(259, 3), &owner), 0, "an instance store");
	is_str(owner, "", "is no volume's");
	free(owner);
	is_int(ebs_sysfs_devno_volume(sys, makedev(202, 80), &owner), 0, "a Xen device");
	ok(owner == NULL, "has no serial: only its name says which volume it is");
	is_int(ebs_sysfs_devno_volume(sys, makedev(259, 2), &owner), -EISDIR,
	       "a partition is never a whole volume");
}

static void find_fails(const EbsDeviceDirs *dirs, const char *id, const char *hint,
		       const char *want, const char *what)
{
	_cleanup_free_ char *why = NULL, *path = NULL;
	dev_t rdev;

	is_int(ebs_device_find(dirs, id, hint, &path, &rdev, &why), -ENODEV, "%s: not found", what);
	ok(why && strstr(why, want), "%s: says '%s' (%s)", what, want, why ?: "nothing");
}

static void test_find(void)
{
	_cleanup_free_ char *by_id = xasprintf("%s/by-id", root), *sys = xasprintf("%s/sys", root);
	EbsDeviceDirs dirs = {.by_id = by_id, .sys = sys};
	char *path = NULL;
	dev_t rdev;

	mkdir_p(by_id, 0755);
	is_int(ebs_device_find(&dirs, "vol-../x", NULL, &path, &rdev, NULL), -ENODEV,
	       "a bad ID is never looked for");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60009", NULL,
		   "by-id/" EBS_BY_ID_PREFIX "vol0a1b2c3d4e5f60009, ", "no link");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60009", NULL,
		   "no NVMe device with serial "
		   "vol0a1b2c3d4e5f60009",
		   "no serial");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60009", NULL, "no device path named at attach",
		   "no hint");
	/* sysfs names nvme91n1, which this machine's /dev lacks: not taken on sysfs' word. */
	find_fails(&dirs, VOL, NULL, "/dev/nvme91n1: No such file", "sysfs only");

	link_to("/dev/null", "by-id/" EBS_BY_ID_PREFIX "vol0a1b2c3d4e5f60009");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60009", NULL, "/dev/null is not a block device",
		   "a link to a character device");
	link_to("/etc/passwd", "by-id/" EBS_BY_ID_PREFIX "vol0a1b2c3d4e5f60008");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60008", NULL, "leads to /etc/passwd, outside /dev",
		   "a link out of /dev");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60007", "/etc/passwd",
		   "'/etc/passwd' (named at attach) is not a device path under /dev", "a hint");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60007", "/dev/../etc/passwd", "is not a device path",
		   "a hint with ..");
	find_fails(&dirs, "vol-0a1b2c3d4e5f60007", "/dev/xvdzz", "/dev/xvdzz: No such file",
		   "a hint of nothing");
}

static uint32_t limit(const char *type, unsigned enis, unsigned extra)
{
	uint32_t n = 0;
	EbsInstanceShape i = {.type = type, .enis = enis, .extra_mappings = extra};
	return ebs_attach_limit(&i, &n) == 0 ? n : 0;
}

static void test_limits(void)
{
	const struct {
		const char *type;
		unsigned enis, extra;
		uint32_t want;
		const char *why;
	} rows[] = {
		{"m5.large", 1, 0, 26, "Nitro: 28 slots - 1 ENI - root"},
		{"m5.large", 3, 0, 24, "each ENI takes a slot"},
		{"m5.large", 0, 0, 26, "ENIs unknown: one"},
		{"m5.large", 1, 2, 24, "other EBS volumes of the mapping"},
		{"c5d.large", 1, 0, 25, "an NVMe instance store takes a slot"},
		{"i3en.24xlarge", 1, 0, 18, "8 instance store volumes"},
		{"i3.large", 1, 0, 39, "i3 is Xen"},
		{"i3.metal", 1, 0, 18, "but i3.metal is Nitro, with 8 instance store volumes"},
		{"t2.medium", 1, 0, 39, "Xen: 40 with the root volume"},
		{"t2.medium", 5, 0, 39, "Xen: ENIs take no slot"},
		{"m4.xlarge", 1, 1, 38, "Xen, one more EBS volume mapped"},
		{"m7i.large", 4, 0, 31, "dedicated: 32 with the root volume, ENIs apart"},
		{"m7i.48xlarge", 1, 0, 127, "dedicated by size"},
		{"c7a.metal-48xl", 1, 0, 78, "dedicated metal"},
		{"d3.8xlarge", 1, 0, 2, "EC2 caps it at 3 EBS volumes, the root among them"},
		{"d3.8xlarge", 4, 0, 1, "at least 1 left"},
		{"inf1.24xlarge", 1, 0, 10, "capped at 11"},
		{"g5.48xlarge", 1, 0, 8, "capped at 9 (its GPUs take slots)"},
		{"c5d.large", 3, 0, 23,
		 "a listed shared type: each ENI past the first takes a slot"},
		{"m8g.large", 3, 0, 31, "Graviton4: dedicated, 32"},
		{"m8i.96xlarge", 1, 0, 127, "8th-generation Intel: dedicated, 128"},
		{"m7i.metal-24xl", 1, 0, 38, "dedicated metal-24xl: 39"},
		{"p5.48xlarge", 8, 0, 63, "a dedicated type off its size's rule: 64"},
		{"hpc7a.96xlarge", 1, 0, 26, "dedicated, 27"},
		{"u-6tb1.metal", 1, 0, 17, "high memory metal: 19"},
		{"zz9.large", 1, 0, 26, "a family the table lacks: Nitro"},
		{"m5.large", 40, 0, 1, "never below 1 (0 would mean no limit)"},
	};
	for (size_t i = 0; i < ELEMENTSOF(rows); i++)
		is_int(limit(rows[i].type, rows[i].enis, rows[i].extra), rows[i].want,
		       "%s, %u ENIs, %u more: %s", rows[i].type, rows[i].enis, rows[i].extra,
		       rows[i].why);
	uint32_t n;
	for (const char *const *bad = (const char *const[]){"m5", "M5.large", "m5.large.x",
							    ".large", "m5.", "m5 .large", NULL};
	     *bad; bad++)
		is_int(ebs_attach_limit(&(EbsInstanceShape){.type = *bad}, &n), -EINVAL,
		       "'%s' is not an instance type", *bad);
	is_str(ebs_instance_hypervisor("t2.micro"), "xen", "t2 on Xen");
	is_str(ebs_instance_hypervisor("m6g.large"), "nitro", "m6g on Nitro");
}

static uint32_t info_limit(EbsNode *n)
{
	BackendNodeInfo info = {};

	ebs_node_info(n, &info);
	free(info.node_id);
	strmap_done(&info.topology);
	return info.max_volumes;
}

/* NodeGetInfo counts what is attached when it is asked: EBS volumes not volplug's take slots,
 * volplug's own (those with a use record) do not. */
static void test_limit_counted_again(void)
{
	_cleanup_free_ char *by_id = xasprintf("%s/limit-by-id", root),
			    *state = xasprintf("%s/limit-state", root), *err = NULL;
	EbsNodeConfig c = {
		.node_id = "i-0fedcba9876543210",
		.zone = "eu-west-1b",
		.instance_type = "m5.large",
		.state_dir = state,
		.devices = {.by_id = by_id},
		.imds_endpoint = "",
		.limit_refresh = 1,
	};
	EbsNode *n = NULL;

	mkdir_p(by_id, 0755);
	link_to("../../nvme0n1", "limit-by-id/" EBS_BY_ID_PREFIX "vol0123456789abcdef0");
	link_to("../../nvme0n1p1", "limit-by-id/" EBS_BY_ID_PREFIX "vol0123456789abcdef0-part1");
	if (!ok(ebs_node_new(&c, &n, &err) == 0, "a node from flags (%s)", err ?: "ok"))
		return;
	is_int(info_limit(n), 26, "the root volume alone: 28 - 1 ENI - root");

	link_to("../../nvme1n1", "limit-by-id/" EBS_BY_ID_PREFIX "vol0a1b2c3d4e5f60005");
	usleep(10);
	is_int(info_limit(n), 25, "a volume attached by someone else takes a slot");

	link_to("../../nvme2n1", "limit-by-id/" EBS_BY_ID_PREFIX "vol0a1b2c3d4e5f60006");
	put("limit-state/ebs/volumes/vol-0a1b2c3d4e5f60006.json", "{}");
	usleep(10);
	is_int(info_limit(n), 25, "volplug's own volume (it has a use record) is not counted");

	_cleanup_free_ char *foreign =
		xasprintf("%s/limit-by-id/" EBS_BY_ID_PREFIX "vol0a1b2c3d4e5f60005", root);
	unlink(foreign);
	usleep(10);
	is_int(info_limit(n), 26, "the other volume detached: its slot is free again");
	ebs_node_free(n);

	c.max_volumes = 7;
	n = NULL;
	if (ebs_node_new(&c, &n, &err) == 0)
		is_int(info_limit(n), 7, "--max-volumes-per-node is never counted again");
	ebs_node_free(n);
}

int main(void)
{
	if (!mkdtemp(root))
		return 1;
	test_names();
	test_sysfs();
	test_find();
	test_limits();
	test_limit_counted_again();
	nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
	return tap_done();
}
