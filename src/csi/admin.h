/* SPDX-License-Identifier: Apache-2.0 */
/* volplug.admin.v1.Admin: what volplugctl asks the running daemon. */
#pragma once

#include "controller.h"

/* ListFlexDrivers: the drivers the prober knows, removed ones left out. FAILED_PRECONDITION when
 * Flexvolume is off. */
HANDLER(admin_list_flex_drivers);

/* GetStatus: readiness, the pool's and the calls' figures from the metrics registry, the
 * Flexvolume drivers, the recent problems. */
HANDLER(admin_get_status);
