/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers the CSI handlers share: protobuf map fields, capabilities, sizes, topology. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "csi.pb-c.h"
#include "backend.h"
#include "params.h"
#include "rpc-call.h"
#include "strmap.h"

#define MIB (1024ULL * 1024ULL)
#define GIB (1024ULL * MIB)
#define TOPOLOGY_KEY BACKEND_TOPOLOGY_ZONE

/* A protobuf map field (an array of key/value entry messages) as borrowed ParamKVs: the
 * strings point into the request. Free the array only. */
ParamKV *pbmap_to_kv(void *const *entries, size_t n);

/* Copies a protobuf map field into a Strmap. */
void pbmap_to_strmap(void *const *entries, size_t n, Strmap *ret);

/* Builds a heap map field of the given entry type from a Strmap: returns the entry array
 * (NULL when empty) and its length in *ret_n. */
void *pbmap_from_strmap(const ProtobufCMessageDescriptor *entry_type, const Strmap *m,
			size_t *ret_n);

/* Checks what the CSI spec asks of every volume capability: present, an access type (mount or
 * block) and an access mode. -EINVAL with *ret_error naming what is wrong. */
int capability_check_spec(const Csi__V1__VolumeCapability *cap, const char *field,
			  char **ret_error);

/* capability_check_spec(), then whether b serves volumes used that way (its check_access):
 * -EINVAL with *ret_error naming what is wrong. */
int capability_check(Backend *b, const Csi__V1__VolumeCapability *cap, const char *field,
		     char **ret_error);

/* capability_check(), telling the backend the parameters a volume is to be made with
 * (CreateVolume) or the volume it is about (ValidateVolumeCapabilities); either may be NULL. */
int capability_check_for(Backend *b, const Csi__V1__VolumeCapability *cap, const char *field,
			 const VolumeParams *params, const BackendVolume *volume, char **ret_error);

/* A checked capability as the backends take it (fstype: the capability's own, "" if none). */
void backend_access_from(const Csi__V1__VolumeCapability *cap, BackendAccess *ret);

/* Whether an access mode lets the volume be attached to more than one node at once:
 * MULTI_NODE_READER_ONLY, MULTI_NODE_SINGLE_WRITER, MULTI_NODE_MULTI_WRITER. */
bool access_mode_multi_node(Csi__V1__VolumeCapability__AccessMode__Mode m);

/* Name of an access mode ("SINGLE_NODE_WRITER"). */
const char *access_mode_name(Csi__V1__VolumeCapability__AccessMode__Mode m);

/* The size a capacity range asks for: required (or fallback when it gives none) rounded up to
 * a multiple of unit (the backend's: backend_size_unit()), kept within limit. -EINVAL for
 * negative values, -ERANGE when the range cannot be met. */
int capacity_range_size(const Csi__V1__CapacityRange *range, uint64_t fallback, uint64_t unit,
			uint64_t *ret, char **ret_error);

/* Whether size satisfies the range. */
bool capacity_range_allows(const Csi__V1__CapacityRange *range, uint64_t size);

/* A heap google.protobuf.Timestamp for a CLOCK_REALTIME nanosecond count. */
Google__Protobuf__Timestamp *timestamp_new(int64_t ns);

/* A heap VolumeUsage (NodeGetVolumeStats). */
Csi__V1__VolumeUsage *usage_new(Csi__V1__VolumeUsage__Unit unit, uint64_t total, uint64_t used,
				uint64_t available);

/* fsGroup for a volume just mounted, open as root_fd (O_PATH is fine; neither closed nor
 * moved), before the pod sees it: policy_name as the volume asks (NULL or unknown: fallback, an
 * OwnershipPolicy). Errors on single entries are logged, not fatal, as Kubernetes does; the
 * outcome is logged, and a long walk's progress every few seconds. Returns ownership_apply()'s
 * result: negative when the root itself cannot be changed, which is the caller's to report. */
int volume_ownership_apply_fd(const char *volume_id, int root_fd, gid_t gid, bool read_only,
			      const char *policy_name, int fallback);

/* The backend that serves a volume (backend_for_volume() over the driver's backends). context:
 * the request's volume_context where it has one, else NULL. */
struct Driver;
Backend *volume_backend(const struct Driver *d, const char *volume_id, const Strmap *context);

/* Calls a backend operation, or answers UNIMPLEMENTED naming it when the backend has none. */
#define BACKEND_CALL(b, op, request, result, ret_error)                     \
	((b)->ops->op ? (b)->ops->op((b), (request), (result), (ret_error)) \
		      : backend_unimplemented((b), #op, (ret_error)))
int backend_unimplemented(const Backend *b, const char *op, char **ret_error);

/* The backend's parse_params, or for a backend without it: no parameters, or -EINVAL naming
 * the first one given. */
int backend_parse_params(Backend *b, const BackendParamsRequest *r, BackendParams *ret,
			 char **ret_error);

/* CSI topologies and the backends' (BackendTopology, a Strmap of segments). */

/* A heap Topology with the segments of m. */
Csi__V1__Topology *topology_from_strmap(const Strmap *m);

/* Adds the segments of t to *ret. */
void topology_to_strmap(const Csi__V1__Topology *t, Strmap *ret);

/* An array of n segments, one per topology (free with topologies_free()). */
BackendTopology *topologies_from(Csi__V1__Topology *const *t, size_t n);
void topologies_free(BackendTopology *m, size_t n);
