/* SPDX-License-Identifier: Apache-2.0 */
/* Checks on a request's wire bytes that decoding cannot make: protobuf-c hands strings over
 * NUL-terminated, so a string with a NUL inside would silently arrive cut at the NUL (a path
 * "/a\0/b" acted on as "/a"). */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <protobuf-c/protobuf-c.h>

/* Walks an encoded message of type d and finds the first string field (at any depth, map
 * entries included) that holds a NUL byte. Returns 0 when there is none, or -EINVAL with the
 * field's dotted name in *ret_field ("volume_capability.mount.fs_type"). Malformed input is
 * left to the decoder: 0. */
int wire_strings_check(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
		       char **ret_field);
