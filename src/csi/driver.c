/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "alloc.h"
#include "coalescer.h"
#include "controller.h"
#include "driver.h"
#include "log.h"

void driver_backend_report(const char *volume_id, const char *message, void *userdata)
{
	(void)userdata;
	if (volume_id)
		volume_damage_warn(volume_id, message);
	else {
		volume_problem_count(false);
		log_warning("%s", message);
	}
}

int driver_probe(Driver *d, char **ret_error)
{
	for (Backend **b = d->backends; *b; b++) {
		_cleanup_free_ char *error = NULL;
		int r = (*b)->ops->probe ? (*b)->ops->probe(*b, &error) : 0;
		if (r < 0) {
			*ret_error = error ? TAKE_PTR(error) : xstrdup(strerror(-r));
			return r;
		}
	}
	return 0;
}

int driver_init(Driver *d)
{
	d->started = now_usec(CLOCK_MONOTONIC);
	d->inflight = inflight_new();
	if (driver_has_controller(d))
		controller_coalescer_init(d);
	return 0;
}

void driver_done(Driver *d)
{
	coalescer_free(d->coalescer);
	inflight_free(d->inflight);
	d->coalescer = NULL;
	d->inflight = NULL;
}
