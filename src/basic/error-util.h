/* SPDX-License-Identifier: Apache-2.0 */
/* Errors for the user: a negative errno and a message naming the field or object at fault. */
#pragma once

#include "macro.h"

/* The one place ret_error comes first: a printf-like function (errorf, and its kin that are
 * variadic) takes the format last, as snprintf does. Every other function takes ret_error as its
 * very last parameter (docs/architecture.md, checked by scripts/check-layers). */

/* Sets *ret_error to the formatted message (malloc'ed; an earlier one is freed; ret_error NULL:
 * none is wanted) and returns err, so that `return errorf(ret_error, -EINVAL, "volume_id:
 * missing");` reads as one. */
int errorf(char **ret_error, int err, const char *fmt, ...) _printf_(3, 4);

/* Hands the message *error (malloc'ed, from a call below) on as *ret_error without copying it
 * (an earlier *ret_error is freed; *error is NULL'ed) and returns err: for the caller that adds
 * nothing to it. A NULL *error becomes strerror(-err). */
int error_pass(int err, char **error, char **ret_error);
