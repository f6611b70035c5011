/* SPDX-License-Identifier: Apache-2.0 */
/* What the Flexvolume backend's files share: the backend object, the driver lookup and call,
 * and the records as the operations use them (errors with their message for the user). */
#pragma once

#include "backend.h"
#include "call.h"
#include "flex-records.h"
#include "registry.h"

/* The volume_context key naming the driver; the others of the backend. */
#define FLEX_CONTEXT_DRIVER "flexvolume.driver"
#define FLEX_CONTEXT_VOLUME_NAME "flexvolume.volumeName"
#define FLEX_CONTEXT_FSGROUP_POLICY "flexvolume.fsGroupChangePolicy"
#define FLEX_PUBLISH_CONTEXT_DEVICE "devicePath"
/* What the CO may put in the context: the PV's name (a provisioner run with
 * --extra-create-metadata passes it as a parameter, which a driver may hand back in the volume
 * context), and the mark of a CSI ephemeral inline volume. */
#define FLEX_CONTEXT_PV_NAME "csi.storage.k8s.io/pv/name"
#define FLEX_CONTEXT_EPHEMERAL "csi.storage.k8s.io/ephemeral"
/* Where the kubelet mounts the devices of attachable drivers (its default --root-dir), each at
 * <driver>/mounts/<volume name>: the device mount path expandvolume gets there. */
#define FLEX_KUBELET_DEVICE_MOUNTS "/var/lib/kubelet/plugins/kubernetes.io/flexvolume"

typedef struct FlexBackend {
	Backend base;
	FlexRegistry *registry;	    /* the prober's (borrowed); NULL: Flexvolume off */
	const FlexCallConfig *call; /* deadlines of driver calls; may be NULL */
	FlexRecords records;
} FlexBackend;

static inline FlexBackend *flex_of(Backend *b)
{
	return (FlexBackend *)b;
}

/* A new reference to the loaded driver of rec, or an error naming it and why it cannot serve
 * (-ENOEXEC when Flexvolume is off or the driver failed, -ENOENT when it is not installed). */
int flex_backend_driver(FlexBackend *fb, const FlexRecord *rec, FlexDriver **ret, char **ret_error);

/* Runs one command. Returns 0, -EOPNOTSUPP for "Not supported" (no message set: the caller
 * falls back or fails), or another error with the driver's message. Blocks for the call. */
int flex_backend_run(FlexBackend *fb, FlexDriver *drv, const FlexRecord *rec, FlexCommand cmd,
		     const FlexCallArgs *args, FlexReply *ret, char **ret_error);

/* getvolumename, where Kubernetes calls it (before attach, detach, waitforattach and
 * mountdevice, the mount of an attachable driver, and expandvolume): "Not supported" or
 * Success go on with the volume's name (Kubernetes ignores the one a driver answers), anything
 * else stops the operation with the driver's message. Blocks for the call. */
int flex_backend_volume_name(FlexBackend *fb, FlexDriver *drv, const FlexRecord *rec,
			     char **ret_error);

/* -EOPNOTSUPP saying that drv answered "Not supported" to cmd, and why that is an error. */
int flex_backend_not_supported(const FlexRecord *rec, const FlexDriver *drv, FlexCommand cmd,
			       const char *why, char **ret_error);

/* The options JSON's inputs; view->options points into rec and *ret_options (free that). */
void flex_backend_spec(const FlexRecord *rec, FlexVolumeSpec *view, FlexOption **ret_options);

/* -EINVAL for a raw block access: drivers serve filesystems. */
int flex_backend_check_access(const BackendAccess *access, char **ret_error);

/* The volume as its driver will see it, from a request's volume_context (and target_path, the
 * publish target or NULL, where an ephemeral volume's name is found): -EINVAL naming the
 * context key when the driver name is not one. */
int flex_backend_record(const char *volume_id, const Strmap *context, const char *fs_type,
			bool read_only, const char *target_path, FlexRecord **ret,
			char **ret_error);

/* The records, with a message for the user on failure. load: 0 and *ret NULL when there is
 * none. */
int flex_backend_load(FlexBackend *fb, FlexRecordKind k, const char *volume_id, const char *path,
		      FlexRecord **ret, char **ret_error);
int flex_backend_save(FlexBackend *fb, FlexRecordKind k, const FlexRecord *rec, char **ret_error);
int flex_backend_remove(FlexBackend *fb, FlexRecordKind k, const FlexRecord *rec, char **ret_error);

/* The node operations (flex-node.c). */
int flex_stage(Backend *b, const BackendStage *r, void *ret, char **ret_error);
int flex_unstage(Backend *b, const BackendUnstage *r, void *ret, char **ret_error);
int flex_publish(Backend *b, const BackendPublish *r, void *ret, char **ret_error);
int flex_unpublish(Backend *b, const BackendUnpublish *r, void *ret, char **ret_error);
int flex_node_expand(Backend *b, const BackendNodeExpand *r, BackendNodeExpanded *ret,
		     char **ret_error);
int flex_node_stats(Backend *b, const BackendStatsRequest *r, BackendStats *ret, char **ret_error);
