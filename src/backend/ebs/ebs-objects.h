/* SPDX-License-Identifier: Apache-2.0 */
/* EC2's volumes, snapshots, volume modifications and instances as the controller reads them
 * from Describe* replies, and what the backend table makes of them.
 *
 * What volplug keeps about a volume lives in EC2, in its tags, so a controller that restarts
 * (or another one) finds it all again:
 *
 *   CSIVolumeName / CSIVolumeSnapshotName   the CSI name (the EBS CSI driver's tag keys)
 *   volplug.io/driver                       the CSI driver name that made it: what ListVolumes
 *                                           and ListSnapshots list
 *   volplug.io/parameters                   the node's parameters ("csi.storage.k8s.io/fstype=xfs
 *                                           blockSize=4096"): the volume context
 *   volplug.io/fstype                       the filesystem the volume capability asked for
 *   volplug.io/kms-key-id                   kmsKeyId as asked (EC2 answers with the key's ARN)
 *   volplug.io/source-volume                a clone's source volume
 *   volplug.io/clone-for                    on a snapshot made for a clone: the clone's name
 *   volplug.io/group-snapshot, -name        on a member of a group snapshot: the group's id and
 *   volplug.io/group-index                  name, and its place among the group's members
 *   volplug.io/read-only/<instance>         published read-only to that instance (EC2 attaches
 *                                           read-write only: the node mounts it read-only)
 *
 * Every other tag is the user's (tagSpecification_N), except the --extra-volume-tags. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "aws-xml.h"
#include "strmap.h"
#include "time-util.h"

#define EBS_TAG_VOLUME_NAME "CSIVolumeName"
#define EBS_TAG_SNAPSHOT_NAME "CSIVolumeSnapshotName"
#define EBS_TAG_DRIVER "volplug.io/driver"
#define EBS_TAG_PARAMETERS "volplug.io/parameters"
#define EBS_TAG_FSTYPE "volplug.io/fstype"
#define EBS_TAG_KMS_KEY "volplug.io/kms-key-id"
#define EBS_TAG_SOURCE_VOLUME "volplug.io/source-volume"
#define EBS_TAG_CLONE_FOR "volplug.io/clone-for"
#define EBS_TAG_GROUP_ID "volplug.io/group-snapshot"
#define EBS_TAG_GROUP_NAME "volplug.io/group-snapshot-name"
#define EBS_TAG_GROUP_INDEX "volplug.io/group-index"
#define EBS_TAG_READ_ONLY "volplug.io/read-only/" /* + instance id */

#define EBS_GIB (UINT64_C(1) << 30)

typedef struct EbsAttachment {
	char *instance_id;
	char *device;
	char *state; /* attaching, attached, detaching, detached, busy */
} EbsAttachment;

typedef struct EbsVolume {
	char *id;
	char *zone;
	char *state; /* creating, available, in-use, deleting, deleted, error */
	char *type;
	char *snapshot_id; /* "" when not from a snapshot */
	char *kms_key_id;  /* NULL when not encrypted */
	uint64_t size_gib;
	uint32_t iops, throughput;
	bool encrypted, multi_attach;
	usec_t created; /* CLOCK_REALTIME */
	Strmap tags;
	EbsAttachment *attachments;
	size_t n_attachments;
} EbsVolume;

void ebs_volume_done(EbsVolume *v);
void ebs_volume_free(void *v); /* an EbsVolume on the heap */
/* A volumeSet item (or CreateVolume's reply) into *ret. Returns 0, or -EBADMSG without an id. */
int ebs_volume_from_xml(const XmlNode *item, EbsVolume *ret);
void ebs_volume_copy(const EbsVolume *src, EbsVolume *ret);
/* Its attachment to instance_id, or NULL. */
const EbsAttachment *ebs_volume_attachment(const EbsVolume *v, const char *instance_id);

typedef struct EbsSnapshot {
	char *id;
	char *volume_id;
	char *state; /* pending, completed, error, recoverable, recovering */
	uint64_t size_gib;
	usec_t started; /* CLOCK_REALTIME */
	Strmap tags;
} EbsSnapshot;

void ebs_snapshot_done(EbsSnapshot *s);
void ebs_snapshot_free(void *s); /* an EbsSnapshot on the heap */
void ebs_snapshot_copy(const EbsSnapshot *src, EbsSnapshot *ret);
int ebs_snapshot_from_xml(const XmlNode *item, EbsSnapshot *ret);

/* BackendVolume.access_mode of a volume made with MultiAttachEnabled. */
#define EBS_MULTI_ATTACH_MODE "MULTI_NODE_MULTI_WRITER"

typedef struct EbsModification {
	char *volume_id;
	char *state; /* modifying, optimizing, completed, failed */
	char *message;
	uint64_t target_size_gib;
	char *target_type;
	uint32_t target_iops, target_throughput;
	usec_t started;
} EbsModification;

void ebs_modification_done(EbsModification *m);
void ebs_modification_free(void *m);
int ebs_modification_from_xml(const XmlNode *item, EbsModification *ret);

typedef struct EbsInstance {
	char *id;
	char *zone;
	char *type;
	char *state;
	char **devices; /* strv: the block device mapping's device names... */
	char **volumes; /* ...and the volume of each */
	unsigned enis;	/* network interfaces attached; 0: the reply lists none */
} EbsInstance;

void ebs_instance_done(EbsInstance *i);
int ebs_instance_from_xml(const XmlNode *item, EbsInstance *ret);

/* The user's tags of an object: every tag that is not volplug's or the EBS driver's, nor one of
 * extra (same key and value). */
bool ebs_tag_is_users(const char *key, const char *value, const Strmap *extra);

/* "k=v k=v" of the node's parameters (VOLUME_PARAMS_NODE) of p; "" when none. A new string. */
char *ebs_node_params_encode(const VolumeParams *p);

/* The volume as the backend table gives it: its name and parameters from its tags (extra: the
 * --extra-volume-tags, not the user's), its size in bytes, its zone as topology, the
 * instances it is attached to, its condition. */
void ebs_volume_to_backend(const EbsVolume *v, const Strmap *extra, BackendVolume *ret);

/* The snapshot as the backend table gives it (extra: as for volumes). */
void ebs_snapshot_to_backend(const EbsSnapshot *s, const Strmap *extra, BackendSnapshot *ret);

/* The zone a topology segment names under any of the zone keys volplug and the EBS driver use;
 * NULL when it names none. *ret_conflict: two of them name different zones. */
const char *ebs_topology_zone(const BackendTopology *t, bool *ret_conflict);

/* The segment of a volume in zone: both EBS topology keys. */
void ebs_topology_for_zone(const char *zone, BackendTopology *ret);
