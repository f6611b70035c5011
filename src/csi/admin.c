/* SPDX-License-Identifier: Apache-2.0 */
/* volplug.admin.v1.Admin: what volplugctl asks the running daemon. */
#include <string.h>

#include "admin.pb-c.h"
#include "alloc.h"
#include "error-util.h"
#include "admin.h"
#include "registry.h"

static Volplug__Admin__V1__FlexDriver__CapabilitiesEntry *capability_new(const char *key,
									 bool value)
{
	Volplug__Admin__V1__FlexDriver__CapabilitiesEntry *e =
		xnew0(Volplug__Admin__V1__FlexDriver__CapabilitiesEntry, 1);
	volplug__admin__v1__flex_driver__capabilities_entry__init(e);
	e->key = xstrdup(key);
	e->value = value;
	return e;
}

static Volplug__Admin__V1__FlexDriver *driver_to_pb(const FlexDriver *drv)
{
	const FlexCapabilities *c = &drv->capabilities;
	const struct {
		const char *key;
		bool value;
	} caps[] = {
		{"attach", c->attach},
		{"selinuxRelabel", c->selinux_relabel},
		{"supportsMetrics", c->supports_metrics},
		{"fsGroup", c->fs_group},
		{"requiresFSResize", c->requires_fs_resize},
	};
	Volplug__Admin__V1__FlexDriver *m = xnew0(Volplug__Admin__V1__FlexDriver, 1);

	volplug__admin__v1__flex_driver__init(m);
	m->name = xstrdup(drv->name);
	m->state = xstrdup(flex_driver_state_to_string(drv->state));
	m->path = xstrdup(drv->exe ?: "");
	m->last_error = xstrdup(drv->error ?: "");
	if (drv->state == FLEX_DRIVER_LOADED) {
		/* Capabilities are the driver's answer only when its init succeeded. */
		m->capabilities = xnew0(Volplug__Admin__V1__FlexDriver__CapabilitiesEntry *,
					ELEMENTSOF(caps));
		for (size_t i = 0; i < ELEMENTSOF(caps); i++)
			m->capabilities[i] = capability_new(caps[i].key, caps[i].value);
		m->n_capabilities = ELEMENTSOF(caps);
		m->loaded_at_unix = (int64_t)(drv->published / USEC_PER_SEC);
	}
	return m;
}

int admin_list_flex_drivers(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			    char **ret_error)
{
	FlexDriver **list;
	size_t n;

	(void)req;
	if (!d->flex)
		return errorf(
			ret_error, -ENOEXEC,
			"Flexvolume drivers are off on this daemon (--flexvolume-dir \"\", or "
			"the plugin dir could not be watched: see its log)");
	flex_registry_list(d->flex, &list, &n);
	Volplug__Admin__V1__ListFlexDriversResponse *resp =
		xnew0(Volplug__Admin__V1__ListFlexDriversResponse, 1);
	volplug__admin__v1__list_flex_drivers_response__init(resp);
	resp->drivers = xnew0(Volplug__Admin__V1__FlexDriver *, n + 1);
	for (size_t i = 0; i < n; i++)
		if (list[i]->state != FLEX_DRIVER_REMOVED)
			resp->drivers[resp->n_drivers++] = driver_to_pb(list[i]);
	flex_driver_list_free(list, n);
	*ret = &resp->base;
	return 0;
}
