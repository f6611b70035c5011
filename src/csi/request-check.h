/* SPDX-License-Identifier: Apache-2.0 */
/* What every CSI request must hold before a handler reads it, checked over the decoded message
 * in time linear in its size: map fields (parameters, volume_context, secrets, ...) within
 * their limits, and every string valid UTF-8, as protobuf wants of a string field (protobuf-c
 * does not check it, and the backends' JSON records cannot hold anything else). */
#pragma once

#include <protobuf-c/protobuf-c.h>

/* Limits of one map field, consistent with Kubernetes: a StorageClass holds at most 512
 * parameters of at most 256 KiB in all, and a volume's attributes (volume_context) live in
 * the same kind of object; a Secret holds at most 1 MiB. */
#define CSI_MAP_MAX_ENTRIES 512
#define CSI_MAP_MAX_BYTES (256 * 1024)	    /* keys and values, summed */
#define CSI_SECRETS_MAX_BYTES (1024 * 1024) /* fields named "secrets" */

/* Checks req: first the entry count of every map field (before any per-entry work), then the
 * bytes each map holds and that every string, map keys and values included, is valid UTF-8.
 * Returns 0, or -EINVAL with *ret_error naming the field and the limit
 * ("parameters: at most 512 entries, got 100000"; "name: not valid UTF-8"). Never blocks. */
int csi_request_check(const ProtobufCMessage *req, char **ret_error);
