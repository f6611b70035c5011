/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "alloc.h"
#include "csi.pb-c.h"
#include "driver.h"
#include "log.h"
#include "snapshot-metadata.h"

int identity_get_plugin_info(Driver *d, _unused_ const ProtobufCMessage *req,
			     ProtobufCMessage **ret, _unused_ char **ret_error)
{
	Csi__V1__GetPluginInfoResponse *r = xnew0(Csi__V1__GetPluginInfoResponse, 1);

	csi__v1__get_plugin_info_response__init(r);
	r->name = xstrdup(d->name);
	r->vendor_version = xstrdup(d->version);
	*ret = &r->base;
	return 0;
}

static Csi__V1__PluginCapability *service_capability(Csi__V1__PluginCapability__Service__Type t)
{
	Csi__V1__PluginCapability *c = xnew0(Csi__V1__PluginCapability, 1);
	csi__v1__plugin_capability__init(c);
	c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_SERVICE;
	c->service = xnew0(Csi__V1__PluginCapability__Service, 1);
	csi__v1__plugin_capability__service__init(c->service);
	c->service->type = t;
	return c;
}

static Csi__V1__PluginCapability *expansion_capability(void)
{
	Csi__V1__PluginCapability *c = xnew0(Csi__V1__PluginCapability, 1);
	csi__v1__plugin_capability__init(c);
	c->type_case = CSI__V1__PLUGIN_CAPABILITY__TYPE_VOLUME_EXPANSION;
	c->volume_expansion = xnew0(Csi__V1__PluginCapability__VolumeExpansion, 1);
	csi__v1__plugin_capability__volume_expansion__init(c->volume_expansion);
	c->volume_expansion->type = CSI__V1__PLUGIN_CAPABILITY__VOLUME_EXPANSION__TYPE__ONLINE;
	return c;
}

int identity_get_plugin_capabilities(Driver *d, _unused_ const ProtobufCMessage *req,
				     ProtobufCMessage **ret, _unused_ char **ret_error)
{
	Csi__V1__GetPluginCapabilitiesResponse *r =
		xnew0(Csi__V1__GetPluginCapabilitiesResponse, 1);

	csi__v1__get_plugin_capabilities_response__init(r);
	r->capabilities = xnew0(Csi__V1__PluginCapability *, 5);
	if (driver_has_controller(d)) {
		r->capabilities[r->n_capabilities++] = service_capability(
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__CONTROLLER_SERVICE);
		r->capabilities[r->n_capabilities++] = service_capability(
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__GROUP_CONTROLLER_SERVICE);
	}
	if (snapshot_metadata_served(d))
		r->capabilities[r->n_capabilities++] = service_capability(
			CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__SNAPSHOT_METADATA_SERVICE);
	r->capabilities[r->n_capabilities++] = service_capability(
		CSI__V1__PLUGIN_CAPABILITY__SERVICE__TYPE__VOLUME_ACCESSIBILITY_CONSTRAINTS);
	r->capabilities[r->n_capabilities++] = expansion_capability();
	*ret = &r->base;
	return 0;
}

int identity_probe(Driver *d, _unused_ const ProtobufCMessage *req, ProtobufCMessage **ret,
		   _unused_ char **ret_error)
{
	/* The kubelet's liveness probe asks every few seconds: a lasting problem is logged when
	 * it starts, changes and ends, not at every Probe. */
	static LogOnce not_ready = LOG_ONCE_INIT;
	Csi__V1__ProbeResponse *r = xnew0(Csi__V1__ProbeResponse, 1);
	_cleanup_free_ char *error = NULL;

	csi__v1__probe_response__init(r);
	r->ready = xnew0(Google__Protobuf__BoolValue, 1);
	google__protobuf__bool_value__init(r->ready);
	int e = driver_probe(d, &error);
	if (log_once_changed(&not_ready, e < 0 ? error : NULL)) {
		if (e < 0)
			log_warning("not ready: %s", error);
		else
			log_info("ready again");
	}
	r->ready->value = e >= 0;
	*ret = &r->base;
	return 0;
}
