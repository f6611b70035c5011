/* SPDX-License-Identifier: Apache-2.0 */
/* Minimal TAP producer for unit tests: one binary per module, exit 77 means skipped. */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

#define TAP_SKIP_ALL(why)                        \
	do {                                     \
		printf("1..0 # SKIP %s\n", why); \
		exit(77);                        \
	} while (0)

/* Prints one result line; a multi-line description is joined into one line. */
__attribute__((unused)) static int tap_result(int passed, const char *fmt, va_list ap)
{
	char desc[4096];

	vsnprintf(desc, sizeof(desc), fmt, ap);
	size_t len = strlen(desc);
	while (len > 0 && desc[len - 1] == '\n')
		desc[--len] = 0;
	for (char *nl = strchr(desc, '\n'); nl; nl = strchr(nl, '\n'))
		*nl = '|';
	printf("%sok %d - %s\n", passed ? "" : "not ", ++tap_n, desc);
	if (!passed)
		tap_failed++;
	return passed;
}

__attribute__((format(printf, 5, 6), unused)) static int
tap_ok(int cond, const char *expr, const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	tap_result(cond, fmt, ap);
	va_end(ap);
	if (!cond)
		printf("#   failed at %s:%d: %s\n", file, line, expr);
	fflush(stdout);
	return cond;
}

#define ok(cond, ...) tap_ok(!!(cond), #cond, __FILE__, __LINE__, __VA_ARGS__)

__attribute__((format(printf, 6, 7), unused)) static int tap_is_int(long long got, long long want,
								    const char *expr,
								    const char *file, int line,
								    const char *fmt, ...)
{
	va_list ap;
	int passed = got == want;

	va_start(ap, fmt);
	tap_result(passed, fmt, ap);
	va_end(ap);
	if (!passed)
		printf("#   failed at %s:%d: %s\n#   got %lld, want %lld\n", file, line, expr, got,
		       want);
	fflush(stdout);
	return passed;
}

__attribute__((format(printf, 6, 7), unused)) static int
tap_is_str(const char *got, const char *want, const char *expr, const char *file, int line,
	   const char *fmt, ...)
{
	va_list ap;
	int passed = got && want && strcmp(got, want) == 0;

	va_start(ap, fmt);
	tap_result(passed, fmt, ap);
	va_end(ap);
	if (!passed)
		printf("#   failed at %s:%d: %s\n#   got '%s', want '%s'\n", file, line, expr,
		       got ? got : "(null)", want ? want : "(null)");
	fflush(stdout);
	return passed;
}

/* Each argument is evaluated once. */
#define is_int(got, want, ...) \
	tap_is_int((long long)(got), (long long)(want), #got, __FILE__, __LINE__, __VA_ARGS__)
#define is_str(got, want, ...) tap_is_str((got), (want), #got, __FILE__, __LINE__, __VA_ARGS__)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
