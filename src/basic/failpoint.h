/* SPDX-License-Identifier: Apache-2.0 */
/* Fault injection for tests: named points in the code that can be told, through the
 * VOLPLUG_FAILPOINTS environment variable read once at start-up, to sleep or to kill the
 * process on the spot (as kill -9 would). Unset, a failpoint costs one branch.
 *
 *   VOLPLUG_FAILPOINTS="rpc:GetPluginInfo=sleep(2s);pool-create-data=crash"
 */
#pragma once

#include <stdbool.h>

/* Parses the environment; call once before threads start. Returns -EINVAL on a bad spec. */
int failpoints_init(void);

/* Runs the action configured for name, if any: sleeps, or SIGKILLs the process. */
void failpoint(const char *name);

bool failpoints_enabled(void);
