/* SPDX-License-Identifier: Apache-2.0 */
/* ControllerExpandVolume and ControllerModifyVolume: both go through the coalescer, so that
 * a resize and a parameter change arriving together become one change of the volume. */
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "coalescer.h"
#include "controller.h"
#include "csi-util.h"
#include "log.h"

/* The coalescer's apply step: the volume's backend makes the merged change. */
static int apply_change(void *userdata, const char *volume_id, const CoalescedChange *change,
			CoalescedResult *ret, char **ret_error)
{
	Driver *d = userdata;
	BackendChange c = {
		.volume_id = volume_id,
		.new_size = change->new_size,
		.params = change->params,
		.n_params = change->n_params,
		.n_callers = change->n_callers,
	};
	BackendChanged done;

	Backend *b = volume_backend(d, volume_id, NULL);
	int e = BACKEND_CALL(b, change_volume, &c, &done, ret_error);
	if (e < 0)
		return e;
	log_info("volume %s: applied %zu merged request(s): size %llu, %zu parameter(s) (%s "
		 "backend)",
		 volume_id, change->n_callers, (unsigned long long)done.size, change->n_params,
		 b->ops->name);
	*ret = (CoalescedResult){
		.size = done.size,
		.node_expansion_required = done.node_expansion_required,
	};
	return 0;
}

int controller_coalescer_init(Driver *d)
{
	CoalescerConfig config = {
		.window = d->coalesce_window,
		.apply = apply_change,
		.userdata = d,
	};
	d->coalescer = coalescer_new(&config);
	return 0;
}

/* Expand and modify hold no in-flight key: concurrent calls for a volume meet in the
 * coalescer, which merges them into one change or refuses the one in the way (ABORTED). */
static int submit(Driver *d, const char *volume_id, uint64_t size, const ParamKV *kv, size_t n,
		  CoalescedResult *ret, char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	CoalesceRequest req = {
		.volume_id = volume_id,
		/* the window closes early enough for the backend call to meet it */
		.deadline = call_deadline(),
		.new_size = size,
		.params = kv,
		.n_params = n,
	};
	int e = coalescer_submit(d->coalescer, &req, ret, &err);
	if (e < 0)
		return error_pass(e, &err, ret_error);
	return 0;
}

int controller_expand_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__ControllerExpandVolumeRequest *r = (const void *)req;
	_cleanup_free_ char *err = NULL;
	BackendVolume v = {};
	uint64_t size;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (!r->capacity_range)
		return errorf(ret_error, -EINVAL, "capacity_range: missing");
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if (r->volume_capability &&
	    (e = capability_check(b, r->volume_capability, "volume_capability", ret_error)) < 0)
		return e;
	if ((e = capacity_range_size(r->capacity_range, 0, backend_size_unit(b), &size, &err)) < 0)
		return error_pass(e, &err, ret_error);
	if ((e = volume_lookup(b, r->volume_id, &v, ret_error)) < 0)
		return e;
	/* Nothing to grow: its size as it is, and the node refreshes what it sees. */
	CoalescedResult done = {.size = v.size, .node_expansion_required = true};
	backend_volume_done(&v);
	if (!capacity_range_allows(r->capacity_range, done.size) && size <= done.size)
		return errorf(ret_error, -ERANGE,
			      "capacity_range.limit_bytes: volume %s is %llu bytes already, more "
			      "than %lld (volumes never shrink)",
			      r->volume_id, (unsigned long long)done.size,
			      (long long)r->capacity_range->limit_bytes);
	if (size > done.size && (e = submit(d, r->volume_id, size, NULL, 0, &done, ret_error)) < 0)
		return e;
	Csi__V1__ControllerExpandVolumeResponse *resp =
		xnew0(Csi__V1__ControllerExpandVolumeResponse, 1);
	csi__v1__controller_expand_volume_response__init(resp);
	resp->capacity_bytes = (int64_t)done.size;
	resp->node_expansion_required = done.node_expansion_required;
	*ret = &resp->base;
	return 0;
}

int controller_modify_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__ControllerModifyVolumeRequest *r = (const void *)req;
	_cleanup_free_ char *err = NULL;
	BackendVolume v = {};
	_cleanup_free_ ParamKV *kv = NULL;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	Backend *b = volume_backend(d, r->volume_id, NULL);
	kv = pbmap_to_kv((void *const *)r->mutable_parameters, r->n_mutable_parameters);
	BackendParams p = {};
	e = backend_parse_params(
		b,
		&(BackendParamsRequest){.use = BACKEND_PARAMS_MODIFY,
					.mutable_parameters = kv,
					.n_mutable_parameters = r->n_mutable_parameters},
		&p, ret_error);
	if (e < 0)
		return e;
	if ((e = volume_lookup(b, r->volume_id, &v, ret_error)) < 0)
		return e;
	backend_volume_done(&v);
	/* Values are checked against the merged change (the size a concurrent expand brings
	 * included) when it is applied, as EC2 checks the EBS driver's merged modification. */
	if ((e = submit(d, r->volume_id, 0, kv, r->n_mutable_parameters, NULL, ret_error)) < 0)
		return e;

	Csi__V1__ControllerModifyVolumeResponse *resp =
		xnew0(Csi__V1__ControllerModifyVolumeResponse, 1);
	csi__v1__controller_modify_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}
