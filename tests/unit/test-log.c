/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <jansson.h>
#include <sys/mman.h>

#include "alloc.h"
#include "log.h"
#include "tap.h"

static int capture_fd = -EBADF, saved_stderr = -EBADF;

/* Sends stderr to a fresh memfd. */
static void capture_begin(void)
{
	capture_fd = memfd_create("log", MFD_CLOEXEC);
	saved_stderr = dup(STDERR_FILENO);
	dup2(capture_fd, STDERR_FILENO);
}

/* Restores stderr; returns what was written. */
static char *capture_end(void)
{
	char buf[16384];
	dup2(saved_stderr, STDERR_FILENO);
	close(saved_stderr);
	ssize_t n = pread(capture_fd, buf, sizeof(buf) - 1, 0);
	close(capture_fd);
	buf[n > 0 ? n : 0] = 0;
	return xstrdup(buf);
}

static size_t count_lines(const char *s)
{
	size_t n = 0;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void test_verbosity(void)
{
	capture_begin();
	log_set_verbosity(0);
	log_info("hidden info");
	log_warning("shown warning");
	log_set_verbosity(2);
	log_info("shown info");
	log_v(3, "hidden v3");
	log_debug("hidden debug");
	log_set_verbosity(5);
	log_v(5, "shown v5");
	log_debug("shown debug");
	log_set_verbosity(2);
	_cleanup_free_ char *out = capture_end();

	ok(!strstr(out, "hidden"), "records above -v are dropped");
	ok(strstr(out, "shown warning") && strstr(out, "shown info") && strstr(out, "shown v5") &&
		   strstr(out, "shown debug"),
	   "-v 0 warnings, 2 info, 4+ debug and log_v(n) from n");
	is_int(count_lines(out), 4, "one line per record");
}

static void test_text_context(void)
{
	capture_begin();
	log_set_context("NodeStageVolume");
	log_set_context_object("volume_id", "vol-1\nforged 2024 error x");
	log_info("staged");
	log_set_context("Bogus");
	log_info("no object");
	log_set_context(NULL);
	log_info("bare");
	_cleanup_free_ char *out = capture_end();

	ok(strstr(out, " info    [NodeStageVolume volume_id=vol-1?forged?2024?error?x] staged\n"),
	   "text: method and object in brackets, a newline in the object neutralised: %s", out);
	ok(strstr(out, " info    [Bogus] no object\n"), "a method alone stays as it was");
	ok(strstr(out, " info    bare\n"), "no context, no brackets");
	is_int(count_lines(out), 3, "no record forged");
}

static void test_json(void)
{
	capture_begin();
	log_set_format(LOG_FORMAT_JSON);
	log_set_context("CreateVolume");
	log_set_context_object("name", "pvc-\"1\"");
	log_warning("quota \"low\"\nsecond line");
	log_set_context(NULL);
	log_set_format(LOG_FORMAT_TEXT);
	_cleanup_free_ char *out = capture_end();

	json_error_t e;
	json_t *j = json_loads(out, JSON_DISABLE_EOF_CHECK, &e);
	ok(j != NULL, "json: one object per line: %s", out);
	is_str(json_string_value(json_object_get(j, "level")), "warning", "json: level");
	is_str(json_string_value(json_object_get(j, "method")), "CreateVolume", "json: method");
	is_str(json_string_value(json_object_get(j, "name")), "pvc-\"1\"", "json: the object");
	is_str(json_string_value(json_object_get(j, "msg")), "quota \"low\" second line",
	       "json: the message, escaped");
	const char *ts = json_string_value(json_object_get(j, "ts"));
	ok(ts && strlen(ts) == 27 && ts[26] == 'Z', "json: an RFC 3339 time in UTC: %s", ts);
	is_int(count_lines(out), 1, "json: one line");
	json_decref(j);
}

static void test_once(void)
{
	static LogOnce o = LOG_ONCE_INIT;
	ok(!log_once_changed(&o, NULL), "no problem, none reported: nothing to say");
	ok(log_once_changed(&o, "pool gone"), "a new problem is news");
	ok(!log_once_changed(&o, "pool gone"), "the same again is not");
	ok(log_once_changed(&o, "pool read-only"), "another one is");
	ok(log_once_changed(&o, NULL), "its end is news");
	ok(!log_once_changed(&o, NULL), "once");
	free(o.last);
}

static void test_recent(void)
{
	LogRecent r[LOG_RECENT_MAX + 5];
	char m[32];

	capture_begin();
	log_set_context("DeleteVolume");
	log_set_context_object("volume_id", "vol-9");
	log_recent_add("NOT_FOUND", "volume vol-9 not found");
	log_info("an info record is no problem");
	log_error("disk on fire");
	log_set_context(NULL);
	free(capture_end());
	size_t n = log_recent_list(r, ELEMENTSOF(r));
	bool info = false;
	for (size_t i = 0; i < n; i++)
		info = info || strstr(r[i].message, "an info record");
	ok(n >= 2 && !info, "problems: the failed call and the error, not the info");
	is_str(r[0].what, "error", "newest first");
	is_str(r[0].message, "disk on fire", "its message");
	is_str(r[1].context, "DeleteVolume volume_id=vol-9", "with the context");
	is_str(r[1].what, "NOT_FOUND", "the caller's word");

	for (int i = 0; i < 30; i++) {
		snprintf(m, sizeof(m), "problem %d", i);
		log_recent_add("x", m);
	}
	n = log_recent_list(r, ELEMENTSOF(r));
	is_int(n, LOG_RECENT_MAX, "at most %d kept", LOG_RECENT_MAX);
	is_str(r[0].message, "problem 29", "the newest");
	is_str(r[LOG_RECENT_MAX - 1].message, "problem 10", "the oldest kept");
}

int main(void)
{
	test_verbosity();
	test_text_context();
	test_json();
	test_once();
	test_recent();
	return tap_done();
}
