/* SPDX-License-Identifier: Apache-2.0 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>

#include "alloc.h"
#include "json-writer.h"
#include "log.h"

static LogLevel max_level = LOG_LEVEL_INFO;
static int verbosity = 2;
static LogFormat format = LOG_FORMAT_TEXT;

/* The thread's context: the method, the object, and both as the text format prints them. */
static _Thread_local struct {
	char method[96];
	char key[32];
	char value[160];
	char text[300];
} context;

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

void log_set_verbosity(int v)
{
	verbosity = v;
	max_level = v >= 4 ? LOG_LEVEL_DEBUG : v >= 1 ? LOG_LEVEL_INFO : LOG_LEVEL_WARNING;
}

int log_get_verbosity(void)
{
	return verbosity;
}

void log_set_format(LogFormat f)
{
	format = f;
}

int log_format_from_string(const char *s)
{
	if (strcmp(s, "text") == 0)
		return LOG_FORMAT_TEXT;
	if (strcmp(s, "json") == 0)
		return LOG_FORMAT_JSON;
	return -EINVAL;
}

/* Copies s into buf, control characters and spaces replaced: a value from a request must not
 * forge a record or a key. */
static void copy_printable(char *buf, size_t size, const char *s, bool spaces)
{
	size_t i = 0;
	for (; s && s[i] && i + 1 < size; i++) {
		unsigned char ch = (unsigned char)s[i];
		buf[i] = ch < 0x20 || ch == 0x7f || (!spaces && ch == ' ') ? '?' : (char)ch;
	}
	buf[i] = 0;
}

static void context_format(void)
{
	if (context.key[0])
		snprintf(context.text, sizeof(context.text), "%s %s=%s", context.method,
			 context.key, context.value);
	else
		snprintf(context.text, sizeof(context.text), "%s", context.method);
}

void log_set_context(const char *method)
{
	copy_printable(context.method, sizeof(context.method), method, false);
	context.key[0] = context.value[0] = 0;
	context_format();
}

void log_set_context_object(const char *key, const char *value)
{
	copy_printable(context.key, sizeof(context.key), key, false);
	copy_printable(context.value, sizeof(context.value), value, false);
	context_format();
}

const char *log_get_context(void)
{
	return context.text;
}

static char *record_json(const char *stamp, LogLevel level, const char *msg, const char *file,
			 int line)
{
	JsonWriter w = {};

	json_writer_object_begin(&w);
	json_writer_key(&w, "ts");
	json_writer_string(&w, stamp);
	json_writer_key(&w, "level");
	json_writer_string(&w, level_names[level]);
	if (context.method[0]) {
		json_writer_key(&w, "method");
		json_writer_string(&w, context.method);
	}
	if (context.key[0]) {
		json_writer_key(&w, context.key);
		json_writer_string(&w, context.value);
	}
	json_writer_key(&w, "msg");
	json_writer_string(&w, msg);
	if (max_level >= LOG_LEVEL_DEBUG) {
		char caller[300];
		snprintf(caller, sizeof(caller), "%s:%d", file, line);
		json_writer_key(&w, "caller");
		json_writer_string(&w, caller);
	}
	json_writer_object_end(&w);
	return json_writer_finish(&w);
}

static char *record_text(const char *stamp, LogLevel level, const char *msg, const char *file,
			 int line)
{
	const char *c = context.text;
	if (max_level >= LOG_LEVEL_DEBUG)
		return xasprintf("%s %-7s %s%s%s%s (%s:%d)", stamp, level_names[level],
				 c[0] ? "[" : "", c, c[0] ? "] " : "", msg, file, line);
	return xasprintf("%s %-7s %s%s%s%s", stamp, level_names[level], c[0] ? "[" : "", c,
			 c[0] ? "] " : "", msg);
}

int log_internal(LogLevel level, int err, const char *file, int line, const char *fmt, ...)
{
	char date[32], stamp[64], msg[2048];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int saved = errno;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(stamp, sizeof(stamp), "%s.%06dZ", date, (int)(ts.tv_nsec / 1000));

	if (err != 0)
		errno = abs(err); /* lets %m name the error */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	/* One record per line: a newline inside the message would forge a record. */
	for (char *p = msg; *p; p++)
		if (*p == '\n' || *p == '\r')
			*p = ' ';
	if (level <= LOG_LEVEL_WARNING)
		log_recent_add(level_names[level], msg);

	_cleanup_free_ char *out = format == LOG_FORMAT_JSON
					   ? record_json(stamp, level, msg, file, line)
					   : record_text(stamp, level, msg, file, line);
	size_t n = strlen(out);
	struct iovec iov[2] = {{out, n}, {(char *)"\n", 1}};
	/* A single write keeps lines from different threads whole. */
	if (writev(STDERR_FILENO, iov, 2) < 0) {
		/* stderr gone: nowhere to report it */
	}
	errno = saved;
	return -abs(err);
}

bool log_once_changed(LogOnce *o, const char *message)
{
	pthread_mutex_lock(&o->lock);
	bool changed = message ? !o->last || strcmp(o->last, message) != 0 : o->last != NULL;
	if (changed) {
		free(o->last);
		o->last = message ? xstrdup(message) : NULL;
	}
	pthread_mutex_unlock(&o->lock);
	return changed;
}

/* The ring of recent problems; recent_next is where the next one goes. */
static pthread_mutex_t recent_lock = PTHREAD_MUTEX_INITIALIZER;
static LogRecent recent[LOG_RECENT_MAX]; /* guarded by recent_lock */
static size_t recent_next, recent_n;	 /* guarded by recent_lock */

void log_recent_add(const char *what, const char *message)
{
	struct timespec ts;
	LogRecent r = {};

	clock_gettime(CLOCK_REALTIME, &ts);
	r.time_us = (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	snprintf(r.what, sizeof(r.what), "%s", what);
	memcpy(r.context, context.text, sizeof(r.context));
	copy_printable(r.message, sizeof(r.message), message, true);
	pthread_mutex_lock(&recent_lock);
	recent[recent_next] = r;
	recent_next = (recent_next + 1) % LOG_RECENT_MAX;
	if (recent_n < LOG_RECENT_MAX)
		recent_n++;
	pthread_mutex_unlock(&recent_lock);
}

size_t log_recent_list(LogRecent *ret, size_t max)
{
	pthread_mutex_lock(&recent_lock);
	size_t n = MIN(max, recent_n);
	for (size_t i = 0; i < n; i++)
		ret[i] = recent[(recent_next + LOG_RECENT_MAX - 1 - i) % LOG_RECENT_MAX];
	pthread_mutex_unlock(&recent_lock);
	return n;
}
