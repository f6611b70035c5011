/* SPDX-License-Identifier: Apache-2.0 */
/* Errors for the user: a negative errno and a message naming the field or object at fault. */
#pragma once

#include "macro.h"

/* Sets *ret_error to the formatted message (malloc'ed; an earlier one is freed) and returns
 * err, so that `return errorf(ret_error, -EINVAL, "volume_id: missing");` reads as one. */
int errorf(char **ret_error, int err, const char *fmt, ...) _printf_(3, 4);
