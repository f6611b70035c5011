/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stddef.h>
#include "macro.h"

/* Allocation that never returns NULL: running out of memory aborts the process, which a
 * supervisor restarts; state lives in the backend, so nothing is lost. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) _printf_(1, 2);

/* Returns p (maybe moved) with room for at least need elements of size bytes; *cap counts the
 * room and grows by doubling (16 at least), so n appends cost O(n) copies. */
void *xgrow(void *p, size_t *cap, size_t need, size_t size);

#define xnew0(type, n) ((type *)xcalloc((n), sizeof(type)))
