/* SPDX-License-Identifier: Apache-2.0 */
/* Controller and GroupController service handlers: CSI's checks, then the backend. */
#pragma once

#include "csi.pb-c.h"
#include "driver.h"

#define HANDLER(name) \
	int name(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret, char **ret_error)

HANDLER(controller_get_capabilities);
HANDLER(controller_create_volume);
HANDLER(controller_delete_volume);
HANDLER(controller_validate_volume_capabilities);
HANDLER(controller_list_volumes);
HANDLER(controller_get_volume);
HANDLER(controller_get_capacity);
HANDLER(controller_publish_volume);
HANDLER(controller_unpublish_volume);
HANDLER(controller_create_snapshot);
HANDLER(controller_delete_snapshot);
HANDLER(controller_list_snapshots);
HANDLER(controller_expand_volume);
HANDLER(controller_modify_volume);

HANDLER(group_controller_get_capabilities);
HANDLER(group_controller_create_snapshot);
HANDLER(group_controller_delete_snapshot);
HANDLER(group_controller_get_snapshot);

/* Shared by the controller files. */

/* A heap csi.v1.Snapshot. */
Csi__V1__Snapshot *snapshot_to_csi(const BackendSnapshot *s);

/* Checks the name of a CreateVolume/CreateSnapshot/CreateVolumeGroupSnapshot request: 0, or
 * INVALID_ARGUMENT naming the field. */
int create_name_check(const char *name, char **ret_error);

/* Checks VolumeSnapshotClass parameters (tagSpecification_N; csi.storage.k8s.io/ ignored)
 * into ret; INVALID_ARGUMENT naming the key otherwise. */
int snapshot_params_parse(void *const *entries, size_t n, Strmap *ret, const char **ret_location,
			  char **ret_error);

/* The volume id names, from b (the backend that serves it): NOT_FOUND naming volume_id when
 * there is none or its record is damaged (such a volume is only listed and deleted). */
int volume_lookup(Backend *b, const char *id, BackendVolume *ret, char **ret_error);

/* Warns about a damaged volume at the default log level, once per process whoever finds it
 * (the backend's check at start or a call). */
void volume_damage_warn(const char *id, const char *damage);

/* Counts a problem a backend found (volplug_problems_found_total): a damaged volume, else a
 * stray object. */
void volume_problem_count(bool damaged);

/* Creates the coalescer that merges ControllerExpandVolume and ControllerModifyVolume. */
int controller_coalescer_init(Driver *d);
