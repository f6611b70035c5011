/* SPDX-License-Identifier: Apache-2.0 */
#include "coalescer.h"
#include "controller.h"
#include "driver.h"
#include "log.h"

/* Repairs what earlier runs left on the pool (loop devices over files no record uses,
 * temporaries, the size an interrupted expand did not record) and warns once per item; a
 * damaged volume is warned about through the record the calls use, so only once. */
static void driver_repair_pool(Driver *d)
{
	PoolCheckReport report;

	if (!d->pool)
		return; /* a backend without a pool (EBS) */
	int r = pool_check_repair(d->pool, &report);
	if (r < 0) {
		log_warning_errno(r, "pool %s: checking it at start failed: %m",
				  pool_path(d->pool));
		return;
	}
	for (size_t i = 0; i < report.n_items; i++) {
		const PoolCheckItem *it = &report.items[i];
		if (*it->volume_id)
			volume_damage_warn(it->volume_id, it->problem);
		else
			log_warning("pool %s: %s: %s%s%s", pool_path(d->pool), it->object,
				    it->problem, it->repair ? ": " : "", it->repair ?: "");
	}
	pool_check_report_done(&report);
}

int driver_init(Driver *d)
{
	d->inflight = inflight_new();
	if (driver_has_controller(d)) {
		d->devnames = devnames_new(NULL);
		controller_coalescer_init(d);
	}
	driver_repair_pool(d);
	return 0;
}

void driver_done(Driver *d)
{
	coalescer_free(d->coalescer);
	devnames_free(d->devnames);
	inflight_free(d->inflight);
	d->coalescer = NULL;
	d->devnames = NULL;
	d->inflight = NULL;
}
