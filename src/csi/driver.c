/* SPDX-License-Identifier: Apache-2.0 */
#include "coalescer.h"
#include "controller.h"
#include "driver.h"
#include "log.h"

int driver_init(Driver *d)
{
	d->inflight = inflight_new();
	if (driver_has_node(d)) {
		PoolNode node = {
			.id = (char *)d->node_id,
			.max_volumes = d->max_volumes_per_node,
			.zone = (char *)d->zone,
		};
		int r = pool_node_register(d->pool, &node);
		if (r < 0)
			return log_error_errno(r, "registering node %s in pool %s failed: %m",
					       d->node_id, pool_path(d->pool));
	}
	if (driver_has_controller(d)) {
		d->devnames = devnames_new(NULL);
		controller_restore_attachments(d);
		controller_coalescer_init(d);
	}
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
