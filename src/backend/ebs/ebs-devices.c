/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "alloc.h"
#include "ebs-devices.h"
#include "fileio.h"
#include "strbuf.h"

#define SYSFS_MAX 4096

static bool hex_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isdigit((unsigned char)s[i]) && !(s[i] >= 'a' && s[i] <= 'f'))
			return false;
	return s[n] == 0;
}

bool ebs_volume_id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;
	return (n == 4 + 8 || n == 4 + 17) && strncmp(id, "vol-", 4) == 0 &&
	       hex_digits(id + 4, n - 4);
}

char *ebs_volume_serial(const char *id)
{
	return ebs_volume_id_valid(id) ? xasprintf("vol%s", id + 4) : NULL;
}

char *ebs_serial_volume_id(const char *serial)
{
	size_t n = strlen(serial);

	/* NVMe serials are 20 bytes, padded with spaces; a short one may end in NULs. */
	while (n > 0 && (isspace((unsigned char)serial[n - 1]) || serial[n - 1] == 0))
		n--;
	if (n < 3 || strncmp(serial, "vol", 3) != 0)
		return NULL;
	_cleanup_free_ char *id = xasprintf("vol-%.*s", (int)(n - 3), serial + 3);
	return ebs_volume_id_valid(id) ? TAKE_PTR(id) : NULL;
}

char *ebs_by_id_name(const char *id)
{
	_cleanup_free_ char *serial = ebs_volume_serial(id);
	return serial ? xasprintf(EBS_BY_ID_PREFIX "%s", serial) : NULL;
}

/* A small sysfs attribute, without its trailing newline. */
static int sysfs_read(const char *path, char **ret)
{
	size_t len;

	int r = read_file(path, SYSFS_MAX, ret, &len);
	if (r < 0)
		return r;
	(*ret)[strcspn(*ret, "\n")] = 0;
	return 0;
}

static int sysfs_devno(const char *path, dev_t *ret)
{
	_cleanup_free_ char *text = NULL;
	unsigned major, minor;
	char end;

	int r = sysfs_read(path, &text);
	if (r < 0)
		return r;
	if (sscanf(text, "%u:%u%c", &major, &minor, &end) != 2)
		return -EBADMSG;
	*ret = makedev(major, minor);
	return 0;
}

int ebs_sysfs_find(const char *sys_dir, const char *id, char **ret_name, dev_t *ret_devno)
{
	_cleanup_free_ char *block = xasprintf("%s/block", sys_dir);
	_cleanup_closedir_ DIR *d = opendir(block);
	struct dirent *de;

	if (!d)
		return -ENODEV;
	while ((de = readdir(d))) {
		_cleanup_free_ char *serial = NULL, *named = NULL, *path = NULL;
		dev_t devno;
		if (strncmp(de->d_name, "nvme", 4) != 0)
			continue;
		path = xasprintf("%s/%s/device/serial", block, de->d_name);
		if (sysfs_read(path, &serial) < 0 || !(named = ebs_serial_volume_id(serial)) ||
		    strcmp(named, id) != 0)
			continue;
		free(path);
		path = xasprintf("%s/%s/dev", block, de->d_name);
		if (sysfs_devno(path, &devno) < 0)
			continue;
		*ret_name = xstrdup(de->d_name);
		*ret_devno = devno;
		return 0;
	}
	return -ENODEV;
}

/* The device's NVMe serial (trimmed) in *ret, NULL when it has none; -EISDIR for a partition. */
static int sysfs_devno_serial(const char *sys_dir, dev_t devno, char **ret)
{
	_cleanup_free_ char *dir =
		xasprintf("%s/dev/block/%u:%u", sys_dir, major(devno), minor(devno));
	_cleanup_free_ char *partition = xasprintf("%s/partition", dir);
	_cleanup_free_ char *path = xasprintf("%s/device/serial", dir);
	char *serial = NULL;

	if (access(partition, F_OK) == 0)
		return -EISDIR;
	int r = sysfs_read(path, &serial);
	if (r < 0 && r != -ENOENT)
		return r;
	if (serial) {
		size_t n = strlen(serial);
		while (n > 0 && isspace((unsigned char)serial[n - 1]))
			serial[--n] = 0;
	}
	*ret = serial;
	return 0;
}

int ebs_sysfs_devno_volume(const char *sys_dir, dev_t devno, char **ret)
{
	_cleanup_free_ char *serial = NULL;

	int r = sysfs_devno_serial(sys_dir, devno, &serial);
	if (r < 0)
		return r;
	*ret = serial ? ebs_serial_volume_id(serial) ?: xstrdup("") : NULL;
	return 0;
}

/* Whether the block device at path may be volume id's: a whole device, and if it has an NVMe
 * serial, the volume's. 0 with its number, or -ENODEV with what it is instead in why. */
static int candidate_check(const EbsDeviceDirs *dirs, const char *id, const char *path,
			   dev_t *ret_rdev, StrBuf *why)
{
	_cleanup_free_ char *owner = NULL;
	struct stat st;

	if (stat(path, &st) < 0) {
		strbuf_printf(why, "; %s: %m", path);
		return -ENODEV;
	}
	if (!S_ISBLK(st.st_mode)) {
		strbuf_printf(why, "; %s is not a block device", path);
		return -ENODEV;
	}
	int r = ebs_sysfs_devno_volume(dirs->sys, st.st_rdev, &owner);
	if (r == -EISDIR) {
		strbuf_printf(why, "; %s is a partition, not a whole volume", path);
		return -ENODEV;
	}
	if (r == 0 && owner && strcmp(owner, id) != 0) {
		strbuf_printf(why, "; %s is the NVMe device of %s", path,
			      *owner ? owner : "no EBS volume");
		return -ENODEV;
	}
	*ret_rdev = st.st_rdev;
	return 0;
}

static int find_by_id(const EbsDeviceDirs *dirs, const char *id, char **ret_path, dev_t *ret_rdev,
		      StrBuf *why)
{
	_cleanup_free_ char *name = ebs_by_id_name(id);
	_cleanup_free_ char *link = xasprintf("%s/%s", dirs->by_id, name);
	_cleanup_free_ char *path = realpath(link, NULL);

	if (!path) {
		strbuf_printf(why, "no %s", link);
		return -ENODEV;
	}
	if (strncmp(path, "/dev/", 5) != 0) {
		strbuf_printf(why, "%s leads to %s, outside /dev", link, path);
		return -ENODEV;
	}
	int r = candidate_check(dirs, id, path, ret_rdev, why);
	if (r < 0)
		return r;
	*ret_path = TAKE_PTR(path);
	return 0;
}

static int find_in_sysfs(const EbsDeviceDirs *dirs, const char *id, char **ret_path,
			 dev_t *ret_rdev, StrBuf *why)
{
	_cleanup_free_ char *name = NULL, *serial = ebs_volume_serial(id);
	dev_t devno;

	if (ebs_sysfs_find(dirs->sys, id, &name, &devno) < 0) {
		strbuf_printf(why, ", no NVMe device with serial %s in %s/block", serial,
			      dirs->sys);
		return -ENODEV;
	}
	_cleanup_free_ char *path = xasprintf("/dev/%s", name);
	int r = candidate_check(dirs, id, path, ret_rdev, why);
	if (r < 0)
		return r;
	if (*ret_rdev != devno) {
		strbuf_printf(why, "; %s is not the device sysfs names (%u:%u)", path, major(devno),
			      minor(devno));
		return -ENODEV;
	}
	*ret_path = TAKE_PTR(path);
	return 0;
}

/* A device named at attach: a path under /dev (udev's links there are followed). */
static int find_at_hint(const EbsDeviceDirs *dirs, const char *id, const char *hint,
			char **ret_path, dev_t *ret_rdev, StrBuf *why)
{
	if (strncmp(hint, "/dev/", 5) != 0 || strstr(hint, "/..") || strstr(hint, "/./")) {
		strbuf_printf(why, "; '%s' (named at attach) is not a device path under /dev",
			      hint);
		return -ENODEV;
	}
	int r = candidate_check(dirs, id, hint, ret_rdev, why);
	if (r < 0)
		return r;
	*ret_path = xstrdup(hint);
	return 0;
}

int ebs_device_find(const EbsDeviceDirs *dirs, const char *id, const char *hint, char **ret_path,
		    dev_t *ret_rdev, char **ret_why)
{
	EbsDeviceDirs d = {
		.by_id = dirs && dirs->by_id ? dirs->by_id : EBS_BY_ID_DIR,
		.sys = dirs && dirs->sys ? dirs->sys : "/sys",
	};
	_cleanup_(strbuf_done) StrBuf why = {};

	if (!ebs_volume_id_valid(id))
		return -ENODEV;
	if (find_by_id(&d, id, ret_path, ret_rdev, &why) == 0 ||
	    find_in_sysfs(&d, id, ret_path, ret_rdev, &why) == 0 ||
	    (hint && *hint && find_at_hint(&d, id, hint, ret_path, ret_rdev, &why) == 0))
		return 0;
	if (!hint || !*hint)
		strbuf_printf(&why, ", and no device path named at attach");
	if (ret_why)
		*ret_why = strbuf_steal(&why);
	return -ENODEV;
}
