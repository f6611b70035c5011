/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error-util.h"

int errorf(char **ret_error, int err, const char *fmt, ...)
{
	va_list ap;

	if (!ret_error)
		return err;
	free(*ret_error);
	va_start(ap, fmt);
	if (vasprintf(ret_error, fmt, ap) < 0)
		abort(); /* only on out of memory, as xasprintf */
	va_end(ap);
	return err;
}

int error_pass(int err, char **error, char **ret_error)
{
	char *m = *error;

	*error = NULL;
	if (!m)
		return errorf(ret_error, err, "%s", strerror(-err));
	free(*ret_error);
	*ret_error = m;
	return err;
}
