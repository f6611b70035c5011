/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "status.h"
#include "tap.h"

int main(void)
{
	static const struct {
		int err;
		grpc_status_code code;
	} cases[] = {
		{0, GRPC_STATUS_OK},
		{-ENOENT, GRPC_STATUS_NOT_FOUND},
		{ENOENT, GRPC_STATUS_NOT_FOUND},
		{-EEXIST, GRPC_STATUS_ALREADY_EXISTS},
		{-EINVAL, GRPC_STATUS_INVALID_ARGUMENT},
		{-EBUSY, GRPC_STATUS_ABORTED},
		{-EALREADY, GRPC_STATUS_ABORTED},
		{-ETIMEDOUT, GRPC_STATUS_DEADLINE_EXCEEDED},
		{-ENOSPC, GRPC_STATUS_RESOURCE_EXHAUSTED},
		{-EMLINK, GRPC_STATUS_RESOURCE_EXHAUSTED},
		{-ERANGE, GRPC_STATUS_OUT_OF_RANGE},
		{-ENOTEMPTY, GRPC_STATUS_FAILED_PRECONDITION},
		{-ENOMEDIUM, GRPC_STATUS_FAILED_PRECONDITION}, /* the pool's directory gone */
		{-ENOSYS, GRPC_STATUS_UNIMPLEMENTED},
		{-EPERM, GRPC_STATUS_PERMISSION_DENIED},
		{-EIO, GRPC_STATUS_INTERNAL},
		{-ENOEXEC, GRPC_STATUS_FAILED_PRECONDITION},
		{-ENXIO, GRPC_STATUS_FAILED_PRECONDITION},  /* the store's bucket missing */
		{-ENOKEY, GRPC_STATUS_FAILED_PRECONDITION}, /* no credentials for the store */
		{-EPROTO, GRPC_STATUS_INTERNAL},
		{-EOPNOTSUPP, GRPC_STATUS_UNIMPLEMENTED},
		{-12345, GRPC_STATUS_INTERNAL},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		is_int(rpc_status_from_errno(cases[i].err), cases[i].code, "errno %d -> %s",
		       cases[i].err, rpc_status_name(cases[i].code));

	is_str(rpc_status_name(GRPC_STATUS_FAILED_PRECONDITION), "FAILED_PRECONDITION", "name");
	ok(rpc_status_name(99) == NULL, "unknown code has no name");
	is_int(rpc_status_from_name("not_found"), GRPC_STATUS_NOT_FOUND, "name lookup");
	is_int(rpc_status_from_name("nope"), -EINVAL, "unknown name");
	return tap_done();
}
