/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "error-util.h"

int errorf(char **ret_error, int err, const char *fmt, ...)
{
	va_list ap;

	free(*ret_error);
	va_start(ap, fmt);
	if (vasprintf(ret_error, fmt, ap) < 0)
		abort(); /* only on out of memory, as xasprintf */
	va_end(ap);
	return err;
}
