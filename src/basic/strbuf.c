/* SPDX-License-Identifier: Apache-2.0 */
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
