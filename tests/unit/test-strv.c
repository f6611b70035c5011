/* SPDX-License-Identifier: Apache-2.0 */
#include "alloc.h"
#include "strv.h"
#include "tap.h"

int main(void)
{
	_cleanup_strv_free_ char **v = NULL;
	size_t n = 0, cap = 0;

	is_int(strv_length(NULL), 0, "NULL has no strings");
	strv_free(NULL);
	ok(1, "strv_free(NULL) is a no-op");

	for (int i = 999; i >= 0; i--)
		strv_push(&v, &n, &cap, xasprintf("id-%03d", i));
	is_int(n, 1000, "1000 pushed");
	is_int(strv_length(v), 1000, "the array ends with NULL after the last push");
	is_str(v[0], "id-999", "in push order");
	ok(cap >= 1001, "room for the NULL too (%zu)", cap);

	strv_sort(v);
	is_str(v[0], "id-000", "sorted: first");
	is_str(v[999], "id-999", "sorted: last");
	ok(v[1000] == NULL, "sorting keeps the NULL");

	_cleanup_strv_free_ char **w = NULL;
	size_t wn = 0, wcap = 0;
	strv_push(&w, &wn, &wcap, xstrdup("b"));
	strv_push(&w, &wn, &wcap, xstrdup("B"));
	strv_push(&w, &wn, &wcap, xstrdup("\xc3\xa9"));
	strv_push(&w, &wn, &wcap, xstrdup("a"));
	strv_sort(w);
	ok(strcmp(w[0], "B") == 0 && strcmp(w[1], "a") == 0 && strcmp(w[2], "b") == 0 &&
		   strcmp(w[3], "\xc3\xa9") == 0,
	   "bytewise order: upper case first, UTF-8 last");

	_cleanup_strv_free_ char **s = NULL;
	for (int i = 0; i < 40; i++)
		strv_append(&s, xasprintf("%d", i));
	ok(strv_length(s) == 40 && strcmp(s[0], "0") == 0 && strcmp(s[39], "39") == 0,
	   "strv_append from NULL: 40 in order, NULL-terminated");

	_cleanup_strv_free_ char **u = NULL;
	size_t un = 0, ucap = 0;
	const char *in[] = {"a", "a", "b", "c", "c", "c"};
	for (size_t i = 0; i < ELEMENTSOF(in); i++)
		strv_push(&u, &un, &ucap, xstrdup(in[i]));
	un = strv_uniq(u, un);
	ok(un == 3 && strcmp(u[0], "a") == 0 && strcmp(u[1], "b") == 0 && strcmp(u[2], "c") == 0 &&
		   u[3] == NULL,
	   "strv_uniq: each string once, NULL-terminated");
	ok(strv_uniq(NULL, 0) == 0, "strv_uniq of nothing");
	return tap_done();
}
