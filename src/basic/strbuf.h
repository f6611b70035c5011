/* SPDX-License-Identifier: Apache-2.0 */
/* A growing string: appends cost O(1) amortised, s is NUL-terminated after the first append
 * and NULL before it (so "nothing was added" is visible). */
#pragma once

#include <stddef.h>

#include "macro.h"

typedef struct StrBuf {
	char *s;
	size_t len, cap;
} StrBuf;

/* Appends n bytes of data (NUL bytes included). */
void strbuf_add(StrBuf *b, const void *data, size_t n);
/* Appends the string s. */
void strbuf_adds(StrBuf *b, const char *s);
/* Appends printf's output (%m included). */
void strbuf_printf(StrBuf *b, const char *fmt, ...) _printf_(2, 3);
/* Hands the text over ("" when nothing was added, never NULL) and empties b. */
char *strbuf_steal(StrBuf *b);
/* Frees the text and empties b. */
void strbuf_done(StrBuf *b);
