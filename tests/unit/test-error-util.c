/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "tap.h"

int main(void)
{
	char *ret_error = NULL;

	is_int(errorf(&ret_error, -EINVAL, "volume_id: %s", "missing"), -EINVAL,
	       "errorf returns the errno");
	is_str(ret_error, "volume_id: missing", "and sets the message");
	is_int(errorf(NULL, -EIO, "nobody asks: %s", "no message"), -EIO,
	       "a caller that wants no message passes NULL");

	/* error_pass hands a message on as it is: the very same string, not a copy. */
	char *below = xstrdup("volume vol-1 not found");
	char *kept = below;
	is_int(error_pass(-ENOENT, &below, &ret_error), -ENOENT, "error_pass returns the errno");
	ok(ret_error == kept, "the message handed on is the one made below, not a copy");
	ok(below == NULL, "and the caller's pointer is taken");
	is_str(ret_error, "volume vol-1 not found", "its text unchanged");

	char *none = NULL;
	is_int(error_pass(-EIO, &none, &ret_error), -EIO, "no message below");
	is_str(ret_error, strerror(EIO), "says what the errno says");
	free(ret_error);
	return tap_done();
}
