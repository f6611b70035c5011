/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <grpc/status.h>

/* The one errno -> gRPC status table. Takes a negative or positive errno; 0 -> OK. */
grpc_status_code rpc_status_from_errno(int err);

/* The upper-case name of a gRPC code ("NOT_FOUND"), or NULL for an unknown code. */
const char *rpc_status_name(int code);

/* The gRPC code for a name ("NOT_FOUND", case-insensitive) or -EINVAL. */
int rpc_status_from_name(const char *name);
