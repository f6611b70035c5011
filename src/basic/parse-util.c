/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "parse-util.h"

int parse_uint64(const char *s, uint64_t *ret)
{
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_uint32(const char *s, uint32_t *ret)
{
	uint64_t v;
	int r = parse_uint64(s, &v);
	if (r < 0)
		return r;
	if (v > UINT32_MAX)
		return -ERANGE;
	*ret = (uint32_t)v;
	return 0;
}

int parse_int64(const char *s, int64_t *ret)
{
	char *end;

	if (!s || !*s || isspace((unsigned char)s[0]))
		return -EINVAL;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	if (*end)
		return -EINVAL;
	*ret = v;
	return 0;
}

int parse_size(const char *s, uint64_t *ret)
{
	static const char units[] = "KMGTPE";
	char *end;

	if (!s || !isdigit((unsigned char)s[0]))
		return -EINVAL;
	/* Digits with an optional fraction, then the unit: strtod alone would take "1e3" (1000
	 * bytes) and "0x10" too. */
	size_t n = strspn(s, "0123456789");
	if (s[n] == '.')
		n += 1 + strspn(s + n + 1, "0123456789");
	errno = 0;
	double v = strtod(s, &end);
	if (end != s + n)
		return -EINVAL;
	if (errno != 0 || !isfinite(v))
		return -EINVAL;
	double mult = 1;
	if (*end) {
		const char *u = strchr(units, toupper((unsigned char)*end));
		if (!u)
			return -EINVAL;
		mult = ldexp(1, 10 * (int)(u - units + 1));
		end++;
		if (strcasecmp(end, "i") == 0 || strcasecmp(end, "ib") == 0 ||
		    strcasecmp(end, "b") == 0)
			end += strlen(end);
	}
	if (*end)
		return -EINVAL;
	double bytes = v * mult;
	if (bytes >= 18446744073709551616.0)
		return -ERANGE;
	*ret = (uint64_t)bytes;
	return 0;
}

int parse_mode(const char *s, uint32_t *ret)
{
	char *end;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 8);
	if (errno != 0 || *end || v > 07777)
		return -EINVAL;
	*ret = (uint32_t)v;
	return 0;
}
