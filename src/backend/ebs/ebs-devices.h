/* SPDX-License-Identifier: Apache-2.0 */
/* Where an attached EBS volume appears on its instance, and the proof that a device is it.
 *
 * On Nitro instances every EBS volume is an NVMe namespace whose controller's serial number is
 * the volume ID without its dash ("vol0123456789abcdef0"; sysfs pads it with spaces to 20
 * bytes); udev names it /dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_vol0123456789abcdef0.
 * On Xen instances the volume is the block device named at attach (/dev/xvdba, the publish
 * context's devicePath) and has no serial: the name is the only word for it.
 *
 * A device is the volume's when it is found, in this order: through the by-id link; as the
 * NVMe device whose serial in sysfs is the volume's; as the device at a path named at attach
 * (or recorded at stage), which must be a whole block device under /dev and, if it has an NVMe
 * serial at all, the volume's. Nothing here makes or changes a device. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#define EBS_BY_ID_DIR "/dev/disk/by-id"
#define EBS_BY_ID_PREFIX "nvme-Amazon_Elastic_Block_Store_"

/* Whether id is an EBS volume ID: "vol-" and 8 or 17 lower-case hex digits. */
bool ebs_volume_id_valid(const char *id);

/* The NVMe serial EC2 gives the volume: the ID without its dash ("vol0123..."). NULL for an
 * invalid ID. Caller frees. */
char *ebs_volume_serial(const char *id);

/* The volume ID an NVMe serial as sysfs shows it names ("vol0123...", trailing spaces and
 * NULs ignored), or NULL when it names none. Caller frees. */
char *ebs_serial_volume_id(const char *serial);

/* The name of the volume's by-id link ("nvme-Amazon_Elastic_Block_Store_vol0123..."). NULL for
 * an invalid ID. Caller frees. */
char *ebs_by_id_name(const char *id);

/* Where devices are looked for; NULL members: the machine's own. */
typedef struct EbsDeviceDirs {
	const char *by_id; /* /dev/disk/by-id */
	const char *sys;   /* /sys */
} EbsDeviceDirs;

/* The whole NVMe disk in sys_dir/block whose controller's serial is the volume's: its name
 * ("nvme1n1") and device number. -ENODEV when there is none. */
int ebs_sysfs_find(const char *sys_dir, const char *id, char **ret_name, dev_t *ret_devno);

/* The volume ID whose NVMe serial the block device devno has (sysfs), in *ret (NULL when it has
 * no NVMe serial: an xvd or loop device). -EISDIR for a partition: never a whole volume. */
int ebs_sysfs_devno_volume(const char *sys_dir, dev_t devno, char **ret);

/* The volume's device: 0 with its path (the device node the by-id link leads to, /dev/<name>
 * for the one sysfs names, or hint) and number; -ENODEV when it is not there (yet), with
 * *ret_why (malloc'ed) saying what was looked at and what was found instead. hint: a device
 * path named at attach or recorded at stage (NULL: none). Never blocks for long. */
int ebs_device_find(const EbsDeviceDirs *dirs, const char *id, const char *hint, char **ret_path,
		    dev_t *ret_rdev, char **ret_why);
