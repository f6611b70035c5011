/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

/* A new JSON object for a message (caller owns the reference). */
json_t *pbjson_from_message(const ProtobufCMessage *m);

/* Builds a heap message (free with protobuf_c_message_free_unpacked) from a JSON object.
 * Returns -EINVAL with *ret_error naming the field at fault ("volume_capabilities[0].mount:
 * want an object"). */
int pbjson_to_message(const json_t *j, const ProtobufCMessageDescriptor *d, ProtobufCMessage **ret,
		      char **ret_error);
