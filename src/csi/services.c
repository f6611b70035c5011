/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "csi.pb-c.h"
#include "driver.h"

#define METHOD(service, name, request, fn)                                         \
	{                                                                          \
		"/csi.v1." service "/" name, &csi__v1__##request##__descriptor, fn \
	}

static const RpcMethod identity_methods[] = {
	METHOD("Identity", "GetPluginInfo", get_plugin_info_request, identity_get_plugin_info),
	METHOD("Identity", "GetPluginCapabilities", get_plugin_capabilities_request,
	       identity_get_plugin_capabilities),
	METHOD("Identity", "Probe", probe_request, identity_probe),
};

const RpcMethod *csi_methods(DriverMode mode, size_t *ret_n)
{
	(void)mode;
	*ret_n = ELEMENTSOF(identity_methods);
	return identity_methods;
}

static const char *const mode_names[] = {
	[DRIVER_MODE_ALL] = "all",
	[DRIVER_MODE_CONTROLLER] = "controller",
	[DRIVER_MODE_NODE] = "node",
};

const char *driver_mode_to_string(DriverMode m)
{
	return mode_names[m];
}

int driver_mode_from_string(const char *s)
{
	for (size_t i = 0; i < ELEMENTSOF(mode_names); i++)
		if (strcmp(mode_names[i], s) == 0)
			return (int)i;
	return -EINVAL;
}
