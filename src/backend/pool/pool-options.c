/* SPDX-License-Identifier: Apache-2.0 */
/* The pool's type: its options on volplugd's command line, and how it serves. */
#include <string.h>

#include "alloc.h"
#include "parse-util.h"
#include "pool-backend.h"
#include "time-util.h"

const PoolSettings pool_settings_default = {
	.path = (char *)"/var/lib/volplug/pool",
	.overprovision = 1,
	.trim_interval = 10 * 60 * USEC_PER_SEC,
};

static const BackendOption options[] = {
	{"pool", "DIR", "pool directory (default /var/lib/volplug/pool)"},
	{"pool-init", NULL,
	 "make a new, empty pool in DIR although the record\n"
	 "says a pool was there (without it, a pool directory\n"
	 "found absent or empty is refused: its pool is lost)"},
	{"pool-capacity", "SIZE", "capacity of the pool, e.g. 100G (default: free space)"},
	{"overprovision-ratio", "R",
	 "provision volumes up to R x the capacity, 1-100 (thin\n"
	 "provisioning beyond 1; default 1)"},
	{"trim-interval", "TIME",
	 "how often the node gives the space of files deleted\n"
	 "in staged volumes back to the pool (default 10m; 0:\n"
	 "never)"},
	{},
};

static void *settings_new(void)
{
	PoolSettings *s = xnew0(PoolSettings, 1);

	*s = pool_settings_default;
	s->path = xstrdup(pool_settings_default.path);
	return s;
}

static void settings_free(void *settings)
{
	PoolSettings *s = settings;

	free(s->path);
	free(s);
}

/* An overprovision ratio: a plain decimal number from 1 to 100 ("1.5"). */
static int parse_ratio(const char *s, double *ret)
{
	char *end;

	if (!*s || strchr(s, 'x') || strchr(s, 'X') || strchr(s, 'e') || strchr(s, 'E'))
		return -EINVAL; /* no hex floats, no exponents, no "inf" */
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || *end || v != v)
		return -EINVAL;
	if (v < 1 || v > 100)
		return -ERANGE;
	*ret = v;
	return 0;
}

static int settings_set(void *settings, const char *option, const char *value, char **ret_error)
{
	PoolSettings *s = settings;

	(void)ret_error;
	if (strcmp(option, "pool-init") == 0) {
		s->init = true;
		return 0;
	}
	if (strcmp(option, "pool") == 0) {
		if (!*value)
			return -EINVAL;
		free(s->path);
		s->path = xstrdup(value);
		return 0;
	}
	if (strcmp(option, "pool-capacity") == 0)
		return parse_size(value, &s->capacity);
	if (strcmp(option, "overprovision-ratio") == 0)
		return parse_ratio(value, &s->overprovision);
	if (strcmp(option, "trim-interval") == 0)
		return parse_duration(value, &s->trim_interval);
	return -ENOENT;
}

BACKEND_NEW(pool);
BACKEND_TYPE(pool) = {
	.name = "pool",
	.heading = "The pool (--backend pool, the default): sparse files on this node, and\n"
		   "Flexvolume drivers beside it",
	.options = options,
	.settings_new = settings_new,
	.settings_set = settings_set,
	.settings_free = settings_free,
	.new = pool_backend_new,
	.selectable = true,
	.companions = (const char *const[]){"flex", NULL},
	.flex_drivers = true,
};
