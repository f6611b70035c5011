/* SPDX-License-Identifier: Apache-2.0 */
#include "alloc.h"
#include "base64.h"
#include "tap.h"

static void check(const char *data, size_t n, const char *want, const char *what)
{
	_cleanup_free_ char *got = base64_encode(data, n);
	is_str(got, want, "%s", what);
}

int main(void)
{
	/* RFC 4648 section 10. */
	check("", 0, "", "empty");
	check("f", 1, "Zg==", "one byte: two pad characters");
	check("fo", 2, "Zm8=", "two bytes: one pad character");
	check("foo", 3, "Zm9v", "three bytes: no padding");
	check("foob", 4, "Zm9vYg==", "foob");
	check("fooba", 5, "Zm9vYmE=", "fooba");
	check("foobar", 6, "Zm9vYmFy", "foobar");
	check("\xfb\xff", 2, "+/8=", "the standard alphabet's + and /, not the URL one");
	check("a\0b", 3, "YQBi", "NUL bytes are data");
	check("hunter2", 7, "aHVudGVyMg==", "a secret as a Flexvolume driver gets it");
	return tap_done();
}
