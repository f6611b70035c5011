/* SPDX-License-Identifier: Apache-2.0 */
#include <string.h>

#include "admin.pb-c.h"
#include "controller.h"
#include "csi.pb-c.h"
#include "driver.h"
#include "admin.h"
#include "macro.h"
#include "node.h"
#include "request-check.h"
#include "snapshot-metadata.h"

/* A CSI method: its path, its request type and the handler (plain structs in, a reply or an
 * errno and a message out); csi_adapter() puts it on the wire. */
typedef struct CsiMethod {
	const char *path;
	const ProtobufCMessageDescriptor *request;
	CsiHandler handler;
	bool cheap;		 /* never blocks: see RpcMethod.cheap */
	CsiStreamHandler stream; /* instead of handler: the replies are a stream */
} CsiMethod;

#define METHOD(service, name, request, fn)                                         \
	{                                                                          \
		"/csi.v1." service "/" name, &csi__v1__##request##__descriptor, fn \
	}
#define CHEAP_METHOD(service, name, request, fn)                                         \
	{                                                                                \
		"/csi.v1." service "/" name, &csi__v1__##request##__descriptor, fn, true \
	}

static const CsiMethod identity_methods[] = {
	/* What the driver was made with (here and the services' GetCapabilities): answered where
	 * they arrive. Probe asks the backend, as NodeGetInfo does. */
	CHEAP_METHOD("Identity", "GetPluginInfo", get_plugin_info_request,
		     identity_get_plugin_info),
	CHEAP_METHOD("Identity", "GetPluginCapabilities", get_plugin_capabilities_request,
		     identity_get_plugin_capabilities),
	METHOD("Identity", "Probe", probe_request, identity_probe),
};

static const CsiMethod controller_methods[] = {
	METHOD("Controller", "CreateVolume", create_volume_request, controller_create_volume),
	METHOD("Controller", "DeleteVolume", delete_volume_request, controller_delete_volume),
	METHOD("Controller", "ControllerPublishVolume", controller_publish_volume_request,
	       controller_publish_volume),
	METHOD("Controller", "ControllerUnpublishVolume", controller_unpublish_volume_request,
	       controller_unpublish_volume),
	METHOD("Controller", "ValidateVolumeCapabilities", validate_volume_capabilities_request,
	       controller_validate_volume_capabilities),
	METHOD("Controller", "ListVolumes", list_volumes_request, controller_list_volumes),
	METHOD("Controller", "GetCapacity", get_capacity_request, controller_get_capacity),
	CHEAP_METHOD("Controller", "ControllerGetCapabilities", controller_get_capabilities_request,
		     controller_get_capabilities),
	METHOD("Controller", "CreateSnapshot", create_snapshot_request, controller_create_snapshot),
	METHOD("Controller", "DeleteSnapshot", delete_snapshot_request, controller_delete_snapshot),
	METHOD("Controller", "ListSnapshots", list_snapshots_request, controller_list_snapshots),
	METHOD("Controller", "ControllerExpandVolume", controller_expand_volume_request,
	       controller_expand_volume),
	METHOD("Controller", "ControllerGetVolume", controller_get_volume_request,
	       controller_get_volume),
	METHOD("Controller", "ControllerModifyVolume", controller_modify_volume_request,
	       controller_modify_volume),
};

static const CsiMethod group_controller_methods[] = {
	CHEAP_METHOD("GroupController", "GroupControllerGetCapabilities",
		     group_controller_get_capabilities_request, group_controller_get_capabilities),
	METHOD("GroupController", "CreateVolumeGroupSnapshot", create_volume_group_snapshot_request,
	       group_controller_create_snapshot),
	METHOD("GroupController", "DeleteVolumeGroupSnapshot", delete_volume_group_snapshot_request,
	       group_controller_delete_snapshot),
	METHOD("GroupController", "GetVolumeGroupSnapshot", get_volume_group_snapshot_request,
	       group_controller_get_snapshot),
};

static const CsiMethod node_methods[] = {
	METHOD("Node", "NodeStageVolume", node_stage_volume_request, node_stage_volume),
	METHOD("Node", "NodeUnstageVolume", node_unstage_volume_request, node_unstage_volume),
	METHOD("Node", "NodePublishVolume", node_publish_volume_request, node_publish_volume),
	METHOD("Node", "NodeUnpublishVolume", node_unpublish_volume_request, node_unpublish_volume),
	METHOD("Node", "NodeGetVolumeStats", node_get_volume_stats_request, node_get_volume_stats),
	METHOD("Node", "NodeExpandVolume", node_expand_volume_request, node_expand_volume),
	CHEAP_METHOD("Node", "NodeGetCapabilities", node_get_capabilities_request,
		     node_get_capabilities),
	METHOD("Node", "NodeGetInfo", node_get_info_request, node_get_info),
};

/* Changed-block tracking, beside the controller (Kubernetes' external-snapshot-metadata sidecar
 * runs there). */
static const CsiMethod snapshot_metadata_methods[] = {
	{"/csi.v1.SnapshotMetadata/GetMetadataAllocated",
	 &csi__v1__get_metadata_allocated_request__descriptor, NULL, false,
	 snapshot_metadata_allocated},
	{"/csi.v1.SnapshotMetadata/GetMetadataDelta",
	 &csi__v1__get_metadata_delta_request__descriptor, NULL, false, snapshot_metadata_delta},
};

/* volplug's own service, in every mode. */
static const CsiMethod admin_methods[] = {
	{"/volplug.admin.v1.Admin/ListFlexDrivers",
	 &volplug__admin__v1__list_flex_drivers_request__descriptor, admin_list_flex_drivers},
	{"/volplug.admin.v1.Admin/GetStatus", &volplug__admin__v1__get_status_request__descriptor,
	 admin_get_status},
};

/* The table for a mode, built once: Identity always, then the services the mode serves. */
static RpcMethod tables[3][ELEMENTSOF(identity_methods) + ELEMENTSOF(controller_methods) +
			   ELEMENTSOF(group_controller_methods) + ELEMENTSOF(node_methods) +
			   ELEMENTSOF(snapshot_metadata_methods) + ELEMENTSOF(admin_methods)];

int csi_call(Driver *d, CsiHandler handler, const ProtobufCMessage *req, ProtobufCMessage **ret,
	     char **ret_error)
{
	int r = csi_request_check(req, ret_error);
	if (r < 0)
		return r;
	return handler(d, req, ret, ret_error);
}

int csi_call_stream(Driver *d, CsiStreamHandler handler, const ProtobufCMessage *req,
		    const CsiStream *out, char **ret_error)
{
	int r = csi_request_check(req, ret_error);
	if (r < 0)
		return r;
	return handler(d, req, out, ret_error);
}

static int stream_send(const ProtobufCMessage *reply, void *userdata)
{
	return rpc_call_send(userdata, reply);
}

static bool stream_cancelled(void *userdata)
{
	return rpc_call_cancelled(userdata);
}

/* Runs a streaming CSI handler for the server: its replies on the wire as they come. */
static int csi_stream_adapter(RpcCall *call, const ProtobufCMessage *req)
{
	const CsiMethod *m = rpc_call_method_data(call);
	_cleanup_free_ char *error = NULL;
	CsiStream out = {.send = stream_send, .cancelled = stream_cancelled, .userdata = call};

	call_deadline_set(rpc_call_deadline(call));
	int r = csi_call_stream(rpc_call_userdata(call), m->stream, req, &out, &error);
	call_deadline_set(USEC_INFINITY);
	if (r < 0)
		return rpc_fail(call, r, "%s", error ?: strerror(-r));
	return 0;
}

/* Runs a CSI handler for the server: the driver in, the errno and message out. */
static int csi_adapter(RpcCall *call, const ProtobufCMessage *req, ProtobufCMessage **ret)
{
	const CsiMethod *m = rpc_call_method_data(call);
	_cleanup_free_ char *error = NULL;

	/* The backends bound their waits and retries by the client's deadline. */
	call_deadline_set(rpc_call_deadline(call));
	int r = csi_call(rpc_call_userdata(call), m->handler, req, ret, &error);
	call_deadline_set(USEC_INFINITY);
	if (r < 0)
		return rpc_fail(call, r, "%s", error ?: strerror(-r));
	return r;
}

static size_t table_append(RpcMethod *t, size_t n, const CsiMethod *m, size_t count)
{
	for (size_t i = 0; i < count; i++)
		t[n++] = (RpcMethod){
			.path = m[i].path,
			.request = m[i].request,
			.handler = m[i].stream ? NULL : csi_adapter,
			.stream = m[i].stream ? csi_stream_adapter : NULL,
			.data = &m[i],
			.cheap = m[i].cheap,
		};
	return n;
}

const RpcMethod *csi_methods(DriverMode mode, size_t *ret_n)
{
	RpcMethod *t = tables[mode];
	size_t n = 0;

	n = table_append(t, n, identity_methods, ELEMENTSOF(identity_methods));
	if (mode == DRIVER_MODE_ALL || mode == DRIVER_MODE_CONTROLLER)
		n = table_append(t, n, controller_methods, ELEMENTSOF(controller_methods));
	if (mode == DRIVER_MODE_ALL || mode == DRIVER_MODE_CONTROLLER)
		n = table_append(t, n, group_controller_methods,
				 ELEMENTSOF(group_controller_methods));
	if (mode == DRIVER_MODE_ALL || mode == DRIVER_MODE_NODE)
		n = table_append(t, n, node_methods, ELEMENTSOF(node_methods));
	if (mode == DRIVER_MODE_ALL || mode == DRIVER_MODE_CONTROLLER)
		n = table_append(t, n, snapshot_metadata_methods,
				 ELEMENTSOF(snapshot_metadata_methods));
	n = table_append(t, n, admin_methods, ELEMENTSOF(admin_methods));
	*ret_n = n;
	return t;
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
