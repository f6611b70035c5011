/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <strings.h>

#include "macro.h"
#include "status.h"

/* How an errno from any layer reaches a CSI client. Keep docs/errors.md in step. */
static const struct {
	int err;
	grpc_status_code code;
} errno_table[] = {
	{EINVAL, GRPC_STATUS_INVALID_ARGUMENT},
	{ENAMETOOLONG, GRPC_STATUS_INVALID_ARGUMENT},
	{EBADMSG, GRPC_STATUS_INVALID_ARGUMENT},
	{ENOENT, GRPC_STATUS_NOT_FOUND},
	{ENODEV, GRPC_STATUS_NOT_FOUND},
	{EEXIST, GRPC_STATUS_ALREADY_EXISTS},
	{EBUSY, GRPC_STATUS_ABORTED},
	{EALREADY, GRPC_STATUS_ABORTED},
	{ENOTEMPTY, GRPC_STATUS_FAILED_PRECONDITION},
	{EROFS, GRPC_STATUS_FAILED_PRECONDITION},
	/* A damaged object of the pool: metadata unreadable, a symlink in its place. */
	{EUCLEAN, GRPC_STATUS_FAILED_PRECONDITION},
	/* The pool's directory is gone from under the daemon. */
	{ENOMEDIUM, GRPC_STATUS_FAILED_PRECONDITION},
	/* The snapshot store's bucket does not exist; no credentials configured for it. */
	{ENXIO, GRPC_STATUS_FAILED_PRECONDITION},
	{ENOKEY, GRPC_STATUS_FAILED_PRECONDITION},
	/* A Flexvolume driver that is not usable (its init failed). */
	{ENOEXEC, GRPC_STATUS_FAILED_PRECONDITION},
	{EMLINK, GRPC_STATUS_RESOURCE_EXHAUSTED},
	{ENOSPC, GRPC_STATUS_RESOURCE_EXHAUSTED},
	{EDQUOT, GRPC_STATUS_RESOURCE_EXHAUSTED},
	{ENOMEM, GRPC_STATUS_RESOURCE_EXHAUSTED},
	{ERANGE, GRPC_STATUS_OUT_OF_RANGE},
	{EFBIG, GRPC_STATUS_OUT_OF_RANGE},
	{ETIMEDOUT, GRPC_STATUS_DEADLINE_EXCEEDED},
	{ECANCELED, GRPC_STATUS_CANCELLED},
	/* A Flexvolume driver that broke the protocol (garbage, Success with an exit code). */
	{EPROTO, GRPC_STATUS_INTERNAL},
	{EPERM, GRPC_STATUS_PERMISSION_DENIED},
	{EACCES, GRPC_STATUS_PERMISSION_DENIED},
	{ENOSYS, GRPC_STATUS_UNIMPLEMENTED},
	{EOPNOTSUPP, GRPC_STATUS_UNIMPLEMENTED},
	{EAGAIN, GRPC_STATUS_UNAVAILABLE},
	{ECONNREFUSED, GRPC_STATUS_UNAVAILABLE},
	{ESHUTDOWN, GRPC_STATUS_UNAVAILABLE},
};

static const char *const status_names[] = {
	[GRPC_STATUS_OK] = "OK",
	[GRPC_STATUS_CANCELLED] = "CANCELLED",
	[GRPC_STATUS_UNKNOWN] = "UNKNOWN",
	[GRPC_STATUS_INVALID_ARGUMENT] = "INVALID_ARGUMENT",
	[GRPC_STATUS_DEADLINE_EXCEEDED] = "DEADLINE_EXCEEDED",
	[GRPC_STATUS_NOT_FOUND] = "NOT_FOUND",
	[GRPC_STATUS_ALREADY_EXISTS] = "ALREADY_EXISTS",
	[GRPC_STATUS_PERMISSION_DENIED] = "PERMISSION_DENIED",
	[GRPC_STATUS_RESOURCE_EXHAUSTED] = "RESOURCE_EXHAUSTED",
	[GRPC_STATUS_FAILED_PRECONDITION] = "FAILED_PRECONDITION",
	[GRPC_STATUS_ABORTED] = "ABORTED",
	[GRPC_STATUS_OUT_OF_RANGE] = "OUT_OF_RANGE",
	[GRPC_STATUS_UNIMPLEMENTED] = "UNIMPLEMENTED",
	[GRPC_STATUS_INTERNAL] = "INTERNAL",
	[GRPC_STATUS_UNAVAILABLE] = "UNAVAILABLE",
	[GRPC_STATUS_DATA_LOSS] = "DATA_LOSS",
	[GRPC_STATUS_UNAUTHENTICATED] = "UNAUTHENTICATED",
};

grpc_status_code rpc_status_from_errno(int err)
{
	err = abs(err);
	if (err == 0)
		return GRPC_STATUS_OK;
	for (size_t i = 0; i < ELEMENTSOF(errno_table); i++)
		if (errno_table[i].err == err)
			return errno_table[i].code;
	return GRPC_STATUS_INTERNAL;
}

const char *rpc_status_name(int code)
{
	if (code < 0 || (size_t)code >= ELEMENTSOF(status_names))
		return NULL;
	return status_names[code];
}

int rpc_status_from_name(const char *name)
{
	for (size_t i = 0; i < ELEMENTSOF(status_names); i++)
		if (status_names[i] && strcasecmp(status_names[i], name) == 0)
			return (int)i;
	return -EINVAL;
}
