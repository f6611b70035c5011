/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl's human output of a reply: YAML (block style, keys in the reply's order) that any
 * YAML reader loads to the same values as -o json, but for times ({seconds, nanos} under a key
 * ending in "_time"), which print as RFC 3339. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "ctl.h"

typedef struct Emitter {
	bool dash; /* the next line opens a sequence item: "- " takes its indent's last two */
} Emitter;

static void line_start(Emitter *e, int indent)
{
	if (e->dash) {
		printf("%*s- ", indent - 2, "");
		e->dash = false;
	} else
		printf("%*s", indent, "");
}

/* Words YAML 1.1 readers take for booleans or null, in any common case. */
static bool is_yaml_word(const char *s)
{
	static const char *const words[] = {"y",  "yes", "n",	 "no", "true", "false",
					    "on", "off", "null", "~",  NULL};
	for (size_t i = 0; words[i]; i++)
		if (strcasecmp(s, words[i]) == 0)
			return true;
	return false;
}

/* Whether s reads back as the same string without quotes: no number, date, keyword or
 * indicator look, nothing that starts a comment or a mapping. */
static bool plain_safe(const char *s)
{
	if (!*s || is_yaml_word(s) || (!isalpha((unsigned char)s[0]) && s[0] != '/'))
		return false;
	for (const char *p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (!isalnum(c) && !strchr(" ._/@=,+-()", c) && !(c == ':' && p[1] && p[1] != ' '))
			return false;
		if (c == ' ' && (p[1] == '#' || p[1] == 0))
			return false;
	}
	return true;
}

/* A string as a YAML scalar: plain, or double-quoted (a JSON string is a valid one). */
static void print_scalar_string(const char *s)
{
	if (plain_safe(s)) {
		fputs(s, stdout);
		return;
	}
	json_t *j = json_string(s);
	_cleanup_free_ char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
	json_decref(j);
	fputs(q ?: "\"\"", stdout);
}

static void print_scalar(json_t *v)
{
	if (json_is_string(v)) {
		print_scalar_string(json_string_value(v));
		return;
	}
	if (json_is_null(v)) {
		fputs("null", stdout);
		return;
	}
	_cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY);
	fputs(s ?: "null", stdout);
}

/* A google.protobuf.Timestamp as pbjson gives it, under a key ending in "_time": its
 * seconds (a number or a numeric string) and nanos. */
static bool timestamp_of(const char *key, json_t *v, long long *ret_sec, long *ret_nsec)
{
	size_t kl = key ? strlen(key) : 0;
	if (kl < 5 || strcmp(key + kl - 5, "_time") != 0 || !json_is_object(v))
		return false;
	json_t *sec = json_object_get(v, "seconds"), *ns = json_object_get(v, "nanos");
	if (json_object_size(v) != (size_t)(sec != NULL) + (ns != NULL) ||
	    (ns && !json_is_integer(ns)))
		return false;
	long long s = 0;
	if (json_is_integer(sec))
		s = json_integer_value(sec);
	else if (json_is_string(sec))
		s = strtoll(json_string_value(sec), NULL, 10);
	else if (sec)
		return false;
	*ret_sec = s;
	*ret_nsec = ns ? (long)json_integer_value(ns) : 0;
	return true;
}

/* 2026-11-25T13:10:18.488006Z: UTC, the fraction without trailing zeros. */
static void print_rfc3339(long long sec, long nsec)
{
	time_t t = (time_t)sec;
	struct tm tm;
	char buf[64], frac[16] = "";

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	if (nsec > 0 && nsec < 1000000000) {
		snprintf(frac, sizeof(frac), ".%09ld", nsec);
		for (size_t n = strlen(frac); frac[n - 1] == '0'; n--)
			frac[n - 1] = 0;
	}
	printf("%s%sZ", buf, frac);
}

static void emit(Emitter *e, json_t *v, int indent, const char *key);

static void emit_members(Emitter *e, json_t *o, int indent)
{
	const char *k;
	json_t *child;
	json_object_foreach (o, k, child)
		emit(e, child, indent, k);
}

static void emit_items(Emitter *e, json_t *a, int indent)
{
	size_t i;
	json_t *child;
	json_array_foreach (a, i, child) {
		e->dash = true;
		emit(e, child, indent + 4, NULL);
	}
}

/* One node: "key: value", "key:" and its block below, or (key NULL) a sequence item. */
static void emit(Emitter *e, json_t *v, int indent, const char *key)
{
	long long sec = 0;
	long nsec = 0;
	bool time = timestamp_of(key, v, &sec, &nsec);
	bool obj = !time && json_is_object(v) && json_object_size(v) > 0;
	bool arr = json_is_array(v) && json_array_size(v) > 0;

	if (!key && obj) {
		emit_members(e, v, indent); /* "- first: ..." and the rest under it */
		return;
	}
	line_start(e, indent);
	if (key) {
		print_scalar_string(key);
		fputs(obj || (arr && key) ? ":\n" : ": ", stdout);
	}
	if (obj)
		emit_members(e, v, indent + 2);
	else if (arr && key)
		emit_items(e, v, indent);
	else {
		if (time)
			print_rfc3339(sec, nsec);
		else if (json_is_object(v) || json_is_array(v)) {
			/* {} and [], and a list in a list (no CSI reply has one): flow style */
			_cleanup_free_ char *flow = json_dumps(v, JSON_COMPACT);
			fputs(flow ?: "[]", stdout);
		} else
			print_scalar(v);
		fputc('\n', stdout);
	}
}

void ctl_print(const Ctl *ctl, json_t *reply)
{
	Emitter e = {};

	if (ctl->json) {
		json_dumpf(reply, stdout, JSON_INDENT(2) | JSON_SORT_KEYS);
		fputc('\n', stdout);
	} else if (json_is_object(reply))
		emit_members(&e, reply, 0);
	else
		emit(&e, reply, 0, NULL);
}
