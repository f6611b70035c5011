/* SPDX-License-Identifier: Apache-2.0 */
/* Node service handlers: every backend's volumes. */
#pragma once

#include "controller.h"

HANDLER(node_stage_volume);
HANDLER(node_unstage_volume);
HANDLER(node_publish_volume);
HANDLER(node_unpublish_volume);
HANDLER(node_get_volume_stats);
HANDLER(node_expand_volume);
HANDLER(node_get_capabilities);
HANDLER(node_get_info);
