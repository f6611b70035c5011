/* SPDX-License-Identifier: Apache-2.0 */
/* Volumes served by Flexvolume drivers, and the admin service that lists the drivers.
 *
 * A volume whose volume_context has "flexvolume.driver: vendor/name" (a static PV's
 * volumeAttributes or a CSI ephemeral inline volume) is handled by that driver. The CSI
 * handlers call the hooks below first. Each hook returns 1 when the request is not about a
 * Flexvolume volume (the caller serves it as usual); otherwise what a handler returns: 0 and
 * *ret, or a negative errno with the message set by rpc_fail(). Hooks block for the driver
 * calls (each has a deadline). */
#pragma once

#include "controller.h"

/* The volume_context key naming the driver. */
#define FLEX_CONTEXT_DRIVER "flexvolume.driver"

HANDLER(flex_controller_publish);
HANDLER(flex_controller_unpublish);
HANDLER(flex_controller_expand);
HANDLER(flex_node_stage);
HANDLER(flex_node_unstage);
HANDLER(flex_node_publish);
HANDLER(flex_node_unpublish);
HANDLER(flex_node_expand);
HANDLER(flex_node_get_volume_stats);

/* volplug.admin.v1.Admin/ListFlexDrivers: the drivers the prober knows, removed ones left out.
 * FAILED_PRECONDITION when Flexvolume is off. */
HANDLER(admin_list_flex_drivers);
