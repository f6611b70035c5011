/* SPDX-License-Identifier: Apache-2.0 */
/* The SnapshotMetadata service's handlers (changed-block tracking). */
#pragma once

#include "csi.pb-c.h"
#include "driver.h"

/* GetMetadataAllocated and GetMetadataDelta: stream their replies through out (CsiStream),
 * then return 0, or a negative errno with *ret_error naming the field or snapshot at fault
 * (-ECANCELED, -ETIMEDOUT: the client went away mid-stream). Block. */
int snapshot_metadata_allocated(Driver *d, const ProtobufCMessage *req, const CsiStream *out,
				char **ret_error);
int snapshot_metadata_delta(Driver *d, const ProtobufCMessage *req, const CsiStream *out,
			    char **ret_error);

/* Whether the driver serves the service: a controller whose default backend tracks changed
 * blocks. What GetPluginCapabilities says. */
bool snapshot_metadata_served(Driver *d);
