/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "log.h"

static LogLevel max_level = LOG_LEVEL_INFO;
static _Thread_local char context[160];

static const char *const level_names[] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARNING] = "warning",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

void log_set_max_level(LogLevel level)
{
	max_level = level;
}

LogLevel log_get_max_level(void)
{
	return max_level;
}

void log_set_context(const char *c)
{
	snprintf(context, sizeof(context), "%s", c ? c : "");
}

const char *log_get_context(void)
{
	return context;
}

int log_internal(LogLevel level, int err, const char *file, int line, const char *fmt, ...)
{
	char stamp[40], msg[2048], out[2400];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int saved = errno;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);

	if (err != 0)
		errno = abs(err); /* lets %m name the error */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	/* One record per line: a newline inside the message would forge a record. */
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';

	int n = snprintf(out, sizeof(out), "%s.%06ldZ %-7s %s%s%s%s", stamp, ts.tv_nsec / 1000,
			 level_names[level], context[0] ? "[" : "", context, context[0] ? "] " : "",
			 msg);
	if (max_level >= LOG_LEVEL_DEBUG && n > 0 && (size_t)n < sizeof(out))
		n += snprintf(out + n, sizeof(out) - n, " (%s:%d)", file, line);
	if (n < 0)
		return -abs(err);
	if ((size_t)n >= sizeof(out) - 1)
		n = sizeof(out) - 2;
	out[n++] = '\n';
	/* A single write keeps lines from different threads whole. */
	if (write(STDERR_FILENO, out, n) < 0) {
		/* stderr gone: nowhere to report it */
	}
	errno = saved;
	return -abs(err);
}
