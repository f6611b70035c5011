/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* klog's -v: errors and warnings always; info from 1; debug from 4; log_v(n) records from n.
 * Sets the level to match. Not locked: set it before threads start. */
void log_set_verbosity(int v);
int log_get_verbosity(void);

typedef enum {
	LOG_FORMAT_TEXT, /* 2024-01-02T03:04:05.000006Z info    [Method key=value] message */
	LOG_FORMAT_JSON, /* {"ts":"...","level":"info","method":"...","key":"value","msg":"..."} */
} LogFormat;

void log_set_format(LogFormat f);
/* "text" or "json" -> LogFormat, or -EINVAL. */
int log_format_from_string(const char *s);

/* What every record of this thread is about until cleared: the RPC (method), and the object it
 * concerns (key "volume_id", "name", ...; value from the request: control characters are
 * replaced, length capped). Strings are copied. log_set_context() sets the method and clears
 * the object; NULL clears both. */
void log_set_context(const char *method);
void log_set_context_object(const char *key, const char *value);
/* The context as the text format prints it: "Method key=value", "" when none. */
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

/* An info record shown from -v n on (klog's V(n).Info). */
#define log_v(n, ...)                                                               \
	((n) <= log_get_verbosity()                                                 \
		 ? log_internal(LOG_LEVEL_INFO, 0, __FILE__, __LINE__, __VA_ARGS__) \
		 : 0)

/* For a problem that persists (a pool gone, a driver that keeps failing): tells whether
 * message differs from the last one this state saw, and remembers it, so the caller logs it
 * once and not at every call that meets it. NULL says the problem is over (true when there
 * was one). Thread-safe. */
typedef struct LogOnce {
	pthread_mutex_t lock;
	char *last; /* guarded by lock */
} LogOnce;
#define LOG_ONCE_INIT                           \
	{                                       \
		PTHREAD_MUTEX_INITIALIZER, NULL \
	}
bool log_once_changed(LogOnce *o, const char *message);

/* Recent problems, for volplugctl status: every record at warning or error, and what callers
 * add (a failed call), newest first, at most LOG_RECENT_MAX kept. */
#define LOG_RECENT_MAX 20
typedef struct LogRecent {
	int64_t time_us;   /* CLOCK_REALTIME */
	char what[32];	   /* "warning", "error", or the caller's word ("NOT_FOUND") */
	char context[300]; /* as log_get_context() */
	char message[512];
} LogRecent;

/* Adds a problem with this thread's context. */
void log_recent_add(const char *what, const char *message);
/* Copies up to max problems into ret, newest first; returns how many. */
size_t log_recent_list(LogRecent *ret, size_t max);
