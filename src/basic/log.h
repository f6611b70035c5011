/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdbool.h>
#include "macro.h"

typedef enum {
	LOG_LEVEL_ERROR,
	LOG_LEVEL_WARNING,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
} LogLevel;

/* Records below this level are dropped. Not locked: set it before threads start. */
void log_set_max_level(LogLevel level);
LogLevel log_get_max_level(void);

/* A short tag (the RPC and the object it concerns) printed with every record of this thread
 * until cleared; the string is copied. NULL clears it. */
void log_set_context(const char *context);
const char *log_get_context(void);

/* Writes one line to stderr: time, level, context, message. Returns -abs(err) when err != 0,
 * so callers can `return log_error_errno(r, ...)`. */
int log_internal(LogLevel level, int err, const char *file, int line, const char *fmt, ...)
	_printf_(5, 6);

#define log_full_errno(level, err, ...)                                              \
	({                                                                           \
		int _e = (err);                                                      \
		(level) <= log_get_max_level()                                       \
			? log_internal((level), _e, __FILE__, __LINE__, __VA_ARGS__) \
			: -abs(_e);                                                  \
	})

#define log_error(...) log_full_errno(LOG_LEVEL_ERROR, 0, __VA_ARGS__)
#define log_warning(...) log_full_errno(LOG_LEVEL_WARNING, 0, __VA_ARGS__)
#define log_info(...) log_full_errno(LOG_LEVEL_INFO, 0, __VA_ARGS__)
#define log_debug(...) log_full_errno(LOG_LEVEL_DEBUG, 0, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_LEVEL_ERROR, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_LEVEL_WARNING, (e), __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_LEVEL_INFO, (e), __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_LEVEL_DEBUG, (e), __VA_ARGS__)
