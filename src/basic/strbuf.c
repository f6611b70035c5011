/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "strbuf.h"

void strbuf_add(StrBuf *b, const void *data, size_t n)
{
	b->s = xgrow(b->s, &b->cap, b->len + n + 1, 1);
	if (n > 0)
		memcpy(b->s + b->len, data, n);
	b->len += n;
	b->s[b->len] = 0;
}

void strbuf_adds(StrBuf *b, const char *s)
{
	strbuf_add(b, s, strlen(s));
}

void strbuf_printf(StrBuf *b, const char *fmt, ...)
{
	int saved = errno;
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	b->s = xgrow(b->s, &b->cap, b->len + (size_t)n + 1, 1);
	errno = saved; /* for %m */
	va_start(ap, fmt);
	vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

char *strbuf_steal(StrBuf *b)
{
	char *s = b->s ?: xstrdup("");
	*b = (StrBuf){};
	return s;
}

void strbuf_done(StrBuf *b)
{
	free(b->s);
	*b = (StrBuf){};
}
