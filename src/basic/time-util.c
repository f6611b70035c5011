/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "time-util.h"

int parse_duration(const char *s, usec_t *ret)
{
	static const struct {
		const char *suffix;
		double usec;
	} units[] = {
		{"us", 1}, {"ms", 1e3}, {"s", 1e6}, {"m", 60e6}, {"h", 3600e6}, {"", 1e6},
	};
	char *end;

	if (!s || !*s)
		return -EINVAL;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || !isfinite(v) || v < 0)
		return -EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(end, units[i].suffix) != 0)
			continue;
		double us = v * units[i].usec;
		if (us >= 1e18)
			return -ERANGE;
		*ret = (usec_t)us;
		return 0;
	}
	return -EINVAL;
}

static _Thread_local usec_t thread_call_deadline = USEC_INFINITY;

void call_deadline_set(usec_t deadline)
{
	thread_call_deadline = deadline;
}

usec_t call_deadline(void)
{
	return thread_call_deadline;
}
