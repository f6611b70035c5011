/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "parse-util.h"
#include "tap.h"
#include "time-util.h"

int main(void)
{
	uint64_t u;
	uint32_t m;
	usec_t t;

	is_int(parse_size("4096", &u), 0, "plain bytes");
	is_int(u, 4096, "4096 bytes");
	is_int(parse_size("1G", &u), 0, "1G parses");
	is_int(u, 1ULL << 30, "1G is 2^30");
	is_int(parse_size("512Mi", &u), 0, "512Mi parses");
	is_int(u, 512ULL << 20, "512Mi value");
	is_int(parse_size("1.5KiB", &u), 0, "1.5KiB parses");
	is_int(u, 1536, "1.5KiB value");
	is_int(parse_size("10X", &u), -EINVAL, "unknown unit rejected");
	is_int(parse_size("-1G", &u), -EINVAL, "negative rejected");
	is_int(parse_size("", &u), -EINVAL, "empty rejected");
	is_int(parse_size("99999E", &u), -ERANGE, "overflow rejected");
	is_int(parse_size("1e3", &u), -EINVAL, "no exponent: 1e3 is not 1000 bytes");
	is_int(parse_size("0x10", &u), -EINVAL, "no hexadecimal");
	is_int(parse_size("1E", &u), 0, "1E: an exbibyte, not an exponent");
	is_int(u, 1ULL << 60, "1E is 2^60");
	is_int(parse_uint32("4294967296", &m), -ERANGE, "uint32 overflow");
	is_int(parse_uint32("12a", &m), -EINVAL, "trailing junk");
	is_int(parse_mode("0660", &m), 0, "mode parses");
	is_int(m, 0660, "mode value");
	is_int(parse_mode("0999", &m), -EINVAL, "non-octal mode rejected");
	is_int(parse_duration("250ms", &t), 0, "250ms parses");
	is_int(t, 250000, "250ms value");
	is_int(parse_duration("2", &t), 0, "bare seconds parse");
	is_int(t, 2000000, "2 s value");
	is_int(parse_duration("1.5m", &t), 0, "minutes parse");
	is_int(t, 90000000, "1.5m value");
	is_int(parse_duration("5 s", &t), -EINVAL, "space rejected");
	return tap_done();
}
