/* SPDX-License-Identifier: Apache-2.0 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "failpoint.h"
#include "log.h"
#include "time-util.h"

typedef struct Failpoint {
	char *name;
	enum {
		FP_SLEEP,
		FP_CRASH
	} action;
	usec_t duration;
} Failpoint;

static Failpoint *points;
static size_t n_points;

bool failpoints_enabled(void)
{
	return n_points > 0;
}

static int parse_one(char *spec)
{
	char *eq = strchr(spec, '=');
	Failpoint fp = {};

	if (!eq || eq == spec)
		return -EINVAL;
	*eq = 0;
	const char *action = eq + 1;
	if (strcmp(action, "crash") == 0)
		fp.action = FP_CRASH;
	else if (strncmp(action, "sleep(", 6) == 0 && action[strlen(action) - 1] == ')') {
		_cleanup_free_ char *d = xstrndup(action + 6, strlen(action) - 7);
		if (parse_duration(d, &fp.duration) < 0)
			return -EINVAL;
		fp.action = FP_SLEEP;
	} else
		return -EINVAL;
	fp.name = xstrdup(spec);
	points = xrealloc(points, (n_points + 1) * sizeof(Failpoint));
	points[n_points++] = fp;
	return 0;
}

int failpoints_init(void)
{
	const char *env = getenv("VOLPLUG_FAILPOINTS");
	if (!env || !*env)
		return 0;
	_cleanup_free_ char *copy = xstrdup(env);
	char *save = NULL;
	for (char *tok = strtok_r(copy, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
		int r = parse_one(tok);
		if (r < 0)
			return log_error_errno(r, "VOLPLUG_FAILPOINTS: bad entry '%s'", tok);
	}
	log_warning("failpoints are active (VOLPLUG_FAILPOINTS): for tests only");
	return 0;
}

void failpoint(const char *name)
{
	for (size_t i = 0; i < n_points; i++) {
		if (strcmp(points[i].name, name) != 0)
			continue;
		if (points[i].action == FP_CRASH) {
			log_warning("failpoint %s: crashing", name);
			raise(SIGKILL);
		}
		struct timespec ts = {
			.tv_sec = (time_t)(points[i].duration / USEC_PER_SEC),
			.tv_nsec = (long)(points[i].duration % USEC_PER_SEC) * 1000,
		};
		log_debug("failpoint %s: sleeping", name);
		while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
			;
	}
}
