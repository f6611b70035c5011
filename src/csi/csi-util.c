/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "csi-util.h"
#include "log.h"
#include "metrics.h"
#include "driver.h"
#include "ownership.h"

/* Every map entry message is { base; char *key; char *value; } for string maps. */
typedef struct StringEntry {
	ProtobufCMessage base;
	char *key;
	char *value;
} StringEntry;

ParamKV *pbmap_to_kv(void *const *entries, size_t n)
{
	ParamKV *kv = xnew0(ParamKV, n);
	for (size_t i = 0; i < n; i++) {
		const StringEntry *e = entries[i];
		kv[i].key = e->key;
		kv[i].value = e->value;
	}
	return kv;
}

void pbmap_to_strmap(void *const *entries, size_t n, Strmap *ret)
{
	for (size_t i = 0; i < n; i++) {
		const StringEntry *e = entries[i];
		strmap_set(ret, e->key, e->value);
	}
}

void *pbmap_from_strmap(const ProtobufCMessageDescriptor *entry_type, const Strmap *m,
			size_t *ret_n)
{
	*ret_n = m->n;
	if (m->n == 0)
		return NULL;
	void **entries = xnew0(void *, m->n);
	for (size_t i = 0; i < m->n; i++) {
		StringEntry *e = xmalloc(entry_type->sizeof_message);
		entry_type->message_init((ProtobufCMessage *)e);
		e->key = xstrdup(m->keys[i]);
		e->value = xstrdup(m->values[i]);
		entries[i] = e;
	}
	return entries;
}

const char *access_mode_name(Csi__V1__VolumeCapability__AccessMode__Mode m)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(
		&csi__v1__volume_capability__access_mode__mode__descriptor, (int)m);
	return v ? v->name : "UNKNOWN";
}

bool access_mode_multi_node(Csi__V1__VolumeCapability__AccessMode__Mode m)
{
	return m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
}

int capability_check_spec(const Csi__V1__VolumeCapability *cap, const char *field, char **ret_error)
{
	if (!cap)
		return errorf(ret_error, -EINVAL, "%s: missing", field);
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT &&
	    cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
		return errorf(ret_error, -EINVAL, "%s: access_type must be mount or block", field);
	if (!cap->access_mode ||
	    cap->access_mode->mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN)
		return errorf(ret_error, -EINVAL, "%s.access_mode: missing", field);
	return 0;
}

int capability_check(Backend *b, const Csi__V1__VolumeCapability *cap, const char *field,
		     char **ret_error)
{
	return capability_check_for(b, cap, field, NULL, NULL, ret_error);
}

int capability_check_for(Backend *b, const Csi__V1__VolumeCapability *cap, const char *field,
			 const VolumeParams *params, const BackendVolume *volume, char **ret_error)
{
	BackendAccessCheck q = {.field = field, .params = params, .volume = volume};

	int e = capability_check_spec(cap, field, ret_error);
	if (e < 0 || !b->ops->check_access)
		return e;
	backend_access_from(cap, &q.access);
	return b->ops->check_access(b, &q, NULL, ret_error);
}

/* "MiB", "GiB", or the unit in bytes, for messages. */
static const char *unit_name(uint64_t unit, char buf[static 32])
{
	if (unit == MIB)
		return "MiB";
	if (unit == GIB)
		return "GiB";
	snprintf(buf, 32, "%llu-byte units", (unsigned long long)unit);
	return buf;
}

int capacity_range_size(const Csi__V1__CapacityRange *range, uint64_t fallback, uint64_t unit,
			uint64_t *ret, char **ret_error)
{
	int64_t required = range ? range->required_bytes : 0,
		limit = range ? range->limit_bytes : 0;
	char buf[32];

	if (required < 0 || limit < 0) {
		*ret_error = xstrdup("capacity_range: bytes must not be negative");
		return -EINVAL;
	}
	if (limit > 0 && required > limit) {
		*ret_error =
			xasprintf("capacity_range: required_bytes %lld exceeds limit_bytes %lld",
				  (long long)required, (long long)limit);
		return -ERANGE;
	}
	uint64_t size = required > 0 ? (uint64_t)required : fallback;
	size = (size + unit - 1) / unit * unit;
	if (limit > 0 && size > (uint64_t)limit) {
		size = (uint64_t)limit / unit * unit;
		if (size < (uint64_t)required || size == 0) {
			*ret_error = xasprintf("capacity_range: no size in whole %s lies between "
					       "%lld and %lld bytes",
					       unit_name(unit, buf), (long long)required,
					       (long long)limit);
			return -ERANGE;
		}
	}
	*ret = size;
	return 0;
}

bool capacity_range_allows(const Csi__V1__CapacityRange *range, uint64_t size)
{
	if (!range)
		return true;
	if (range->required_bytes > 0 && size < (uint64_t)range->required_bytes)
		return false;
	if (range->limit_bytes > 0 && size > (uint64_t)range->limit_bytes)
		return false;
	return true;
}

Google__Protobuf__Timestamp *timestamp_new(int64_t ns)
{
	Google__Protobuf__Timestamp *ts = xnew0(Google__Protobuf__Timestamp, 1);
	google__protobuf__timestamp__init(ts);
	ts->seconds = ns / 1000000000;
	ts->nanos = (int32_t)(ns % 1000000000);
	return ts;
}

Csi__V1__VolumeUsage *usage_new(Csi__V1__VolumeUsage__Unit unit, uint64_t total, uint64_t used,
				uint64_t available)
{
	Csi__V1__VolumeUsage *u = xnew0(Csi__V1__VolumeUsage, 1);
	csi__v1__volume_usage__init(u);
	u->unit = unit;
	u->total = (int64_t)total;
	u->used = (int64_t)used;
	u->available = (int64_t)available;
	return u;
}

/* Every few seconds of a long walk (OWNERSHIP_PROGRESS_INTERVAL_DEFAULT). */
static void log_ownership_progress(const OwnershipReport *so_far, void *userdata)
{
	log_info("volume %s: giving it to a group: %llu entries so far, %llu changed, %llu errors, "
		 "%llu s",
		 (const char *)userdata, (unsigned long long)so_far->entries,
		 (unsigned long long)so_far->changed, (unsigned long long)so_far->errors,
		 (unsigned long long)(so_far->elapsed / USEC_PER_SEC));
}

METRIC_DEFINE(walk_seconds, METRIC_HISTOGRAM, "volplug_fsgroup_walk_duration_seconds",
	      "Time volume ownership (fsGroup) took in NodePublishVolume, by fsGroupChangePolicy; "
	      "its _count counts walks",
	      "policy");
METRIC_DEFINE(walk_entries, METRIC_COUNTER, "volplug_fsgroup_walk_entries_total",
	      "Entries the fsGroup walks met, by result: examined (every one), changed (a chown or "
	      "chmod was done), failed",
	      "result");

static void ownership_count(const OwnershipReport *r, int policy)
{
	metric_observe(&walk_seconds, (double)r->elapsed / 1e6, ownership_policy_to_string(policy));
	metric_add(&walk_entries, (double)r->entries, "examined");
	metric_add(&walk_entries, (double)r->changed, "changed");
	metric_add(&walk_entries, (double)r->errors, "failed");
}

int volume_ownership_apply_fd(const char *volume_id, int root_fd, gid_t gid, bool read_only,
			      const char *policy_name, int fallback)
{
	OwnershipReport report = {};
	OwnershipProgress progress = {.func = log_ownership_progress,
				      .userdata = (void *)volume_id};
	int policy = policy_name ? ownership_policy_from_string(policy_name) : fallback;

	if (policy < 0)
		policy = fallback;
	int e = ownership_apply_fd(root_fd, gid, read_only, policy, &progress, &report);
	if (e < 0)
		return e;
	ownership_count(&report, policy);
	if (report.errors > 0)
		log_warning("volume %s: %llu entries could not be given to group %u: %s", volume_id,
			    (unsigned long long)report.errors, (unsigned)gid,
			    report.first_errors ?: "");
	log_info("volume %s: group %u applied (%s): %llu entries, %llu changed, %llu ms", volume_id,
		 (unsigned)gid, ownership_policy_to_string(policy),
		 (unsigned long long)report.entries, (unsigned long long)report.changed,
		 (unsigned long long)(report.elapsed / USEC_PER_MSEC));
	ownership_report_done(&report);
	return 0;
}

void backend_access_from(const Csi__V1__VolumeCapability *cap, BackendAccess *ret)
{
	Csi__V1__VolumeCapability__AccessMode__Mode m = cap->access_mode->mode;
	bool block = cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;

	*ret = (BackendAccess){
		.block = block,
		.fstype = !block && cap->mount->fs_type ? cap->mount->fs_type : "",
		.mode = access_mode_name(m),
		.multi_node = access_mode_multi_node(m),
		.read_only =
			m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
			m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY,
	};
}

Backend *volume_backend(const Driver *d, const char *volume_id, const Strmap *context)
{
	return backend_for_volume(d->backends, volume_id, context);
}

int backend_parse_params(Backend *b, const BackendParamsRequest *r, BackendParams *ret,
			 char **ret_error)
{
	if (b->ops->parse_params)
		return b->ops->parse_params(b, r, ret, ret_error);
	if (r->n_parameters > 0)
		return errorf(ret_error, -EINVAL, "parameters: %s: %s volumes take no parameters",
			      r->parameters[0].key, b->ops->name);
	if (r->n_mutable_parameters > 0)
		return errorf(ret_error, -EINVAL,
			      "mutable_parameters: %s: %s volumes take no parameters",
			      r->mutable_parameters[0].key, b->ops->name);
	*ret = (BackendParams){};
	return 0;
}

int backend_unimplemented(const Backend *b, const char *op, char **ret_error)
{
	return errorf(ret_error, -EOPNOTSUPP, "the %s backend has no %s", b->ops->name, op);
}

Csi__V1__Topology *topology_from_strmap(const Strmap *m)
{
	Csi__V1__Topology *t = xnew0(Csi__V1__Topology, 1);
	csi__v1__topology__init(t);
	t->segments = pbmap_from_strmap(&csi__v1__topology__segments_entry__descriptor, m,
					&t->n_segments);
	return t;
}

void topology_to_strmap(const Csi__V1__Topology *t, Strmap *ret)
{
	pbmap_to_strmap((void *const *)t->segments, t->n_segments, ret);
}

BackendTopology *topologies_from(Csi__V1__Topology *const *t, size_t n)
{
	BackendTopology *m = xnew0(BackendTopology, n);

	for (size_t i = 0; i < n; i++)
		topology_to_strmap(t[i], &m[i]);
	return m;
}

void topologies_free(BackendTopology *m, size_t n)
{
	for (size_t i = 0; m && i < n; i++)
		strmap_done(&m[i]);
	free(m);
}
