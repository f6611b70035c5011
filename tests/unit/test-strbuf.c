/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "strbuf.h"
#include "tap.h"

int main(void)
{
	StrBuf b = {};

	ok(b.s == NULL, "empty: nothing allocated, so callers can tell nothing was added");
	_cleanup_free_ char *empty = strbuf_steal(&b);
	is_str(empty, "", "stealing an empty buffer gives \"\"");

	for (int i = 0; i < 10000; i++)
		strbuf_adds(&b, "ab");
	is_int(b.len, 20000, "20000 bytes appended");
	is_int(strlen(b.s), 20000, "NUL-terminated");
	strbuf_add(&b, "x\0y", 3);
	is_int(b.len, 20003, "NUL bytes count in len");
	ok(memcmp(b.s + 19998, "abx\0y", 6) == 0, "bytes as given, then the terminator");
	_cleanup_free_ char *s = strbuf_steal(&b);
	ok(b.s == NULL && b.len == 0 && b.cap == 0, "steal empties the buffer");

	strbuf_add(&b, "", 0);
	ok(b.s && b.s[0] == 0, "an empty append still makes a string");
	strbuf_done(&b);
	ok(b.s == NULL && b.len == 0, "done empties it");

	strbuf_adds(&b, "a");
	strbuf_printf(&b, "-%d-%s", 42, "b");
	errno = ENOENT;
	strbuf_printf(&b, " %m");
	is_str(b.s, "a-42-b No such file or directory", "printf appends, %m included");
	is_int(b.len, strlen(b.s), "its length counted");
	strbuf_done(&b);
	return tap_done();
}
