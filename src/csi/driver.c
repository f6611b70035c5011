/* SPDX-License-Identifier: Apache-2.0 */
#include "coalescer.h"
#include "controller.h"
#include "driver.h"
#include "log.h"

int driver_init(Driver *d)
{
	d->inflight = inflight_new();
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
