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

static void strmap_from_kv(const ParamKV *kv, size_t n, Strmap *ret)
{
	for (size_t i = 0; i < n; i++)
		strmap_set(ret, kv[i].key, kv[i].value);
}

static ParamKV *strmap_as_kv(const Strmap *m)
{
	ParamKV *kv = xnew0(ParamKV, m->n);
	for (size_t i = 0; i < m->n; i++) {
		kv[i].key = m->keys[i];
		kv[i].value = m->values[i];
	}
	return kv;
}

/* The volume's parameters after a change, as its metadata stores them. */
static int params_after(const PoolVolume *v, uint64_t size, const ParamKV *kv, size_t n,
			Strmap *ret, char **ret_error)
{
	_cleanup_free_ ParamKV *cur = strmap_as_kv(&v->params);
	VolumeParams current = {}, next = {};
	ParamKV *out;
	size_t n_out;

	int e = volume_params_load(cur, v->params.n, &current, ret_error);
	if (e < 0)
		return e;
	e = volume_params_modify(&current, size, kv, n, &next, ret_error);
	volume_params_done(&current);
	if (e < 0)
		return e;
	volume_params_to_kv(&next, VOLUME_PARAMS_ALL, &out, &n_out);
	strmap_from_kv(out, n_out, ret);
	param_kv_free_many(out, n_out);
	volume_params_done(&next);
	return 0;
}

/* The coalescer's backend step: one locked read-modify-write of the volume. */
static int apply_change(void *userdata, const char *volume_id, const CoalescedChange *change,
			char **ret_error)
{
	Driver *d = userdata;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	int lock = -EBADF;

	int e = pool_volume_lock(d->pool, volume_id, &lock);
	if (e < 0) {
		*ret_error = xasprintf("volume %s not found", volume_id);
		return e;
	}
	e = pool_volume_load(d->pool, volume_id, &v);
	if (e < 0) {
		*ret_error = xasprintf("volume %s: cannot read it: %s", volume_id, strerror(-e));
		goto out;
	}
	uint64_t size = MAX(v->size, change->new_size);
	if (change->n_params > 0) {
		Strmap next = {};
		e = params_after(v, size, change->params, change->n_params, &next, ret_error);
		if (e < 0) {
			strmap_done(&next);
			goto out;
		}
		strmap_done(&v->params);
		v->params = next;
	}
	e = size > v->size ? pool_volume_grow(d->pool, v, size) : pool_volume_save(d->pool, v);
	if (e == -ENOSPC)
		*ret_error = xasprintf("volume %s: %llu bytes do not fit in the pool", volume_id,
				       (unsigned long long)size);
	else if (e < 0)
		*ret_error = xasprintf("volume %s: saving the change failed: %s", volume_id,
				       strerror(-e));
	else
		log_info("volume %s: applied %zu merged request(s): size %llu, %zu parameter(s)",
			 volume_id, change->n_callers, (unsigned long long)v->size,
			 change->n_params);
out:
	pool_unlock(lock);
	return e;
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

static int submit(char **ret_error, Driver *d, const char *volume_id, uint64_t size,
		  const ParamKV *kv, size_t n)
{
	_cleanup_free_ char *err = NULL;
	CoalesceRequest req = {
		.volume_id = volume_id,
		.new_size = size,
		.params = kv,
		.n_params = n,
	};
	int e = coalescer_submit(d->coalescer, &req, &err);
	if (e < 0)
		return errorf(ret_error, e, "%s", err ?: strerror(-e));
	return 0;
}

int controller_expand_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__ControllerExpandVolumeRequest *r = (const void *)req;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *err = NULL;
	uint64_t size;
	int e;

	/* The volumes of other backends go through their operations. */
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if (!backend_is_default(d, b))
		return controller_expand_through(d, b, r, ret, ret_error);
	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (!r->capacity_range)
		return errorf(ret_error, -EINVAL, "capacity_range: missing");
	if (r->volume_capability &&
	    capability_check(r->volume_capability, "volume_capability", &err) < 0)
		return errorf(ret_error, -EINVAL, "%s", err);
	if ((e = capacity_range_size(r->capacity_range, 0, &size, &err)) < 0)
		return errorf(ret_error, e, "%s", err);
	if (pool_volume_load(d->pool, r->volume_id, &v) < 0)
		return volume_not_found(ret_error, r->volume_id);
	if (!capacity_range_allows(r->capacity_range, v->size) && size <= v->size)
		return errorf(ret_error, -ERANGE,
			      "capacity_range.limit_bytes: volume %s is %llu bytes already, more "
			      "than %lld (volumes never shrink)",
			      r->volume_id, (unsigned long long)v->size,
			      (long long)r->capacity_range->limit_bytes);
	if (size > v->size) {
		if ((e = submit(ret_error, d, r->volume_id, size, NULL, 0)) < 0)
			return e;
		pool_volume_free(TAKE_PTR(v));
		if (pool_volume_load(d->pool, r->volume_id, &v) < 0)
			return errorf(ret_error, -ENOENT, "volume %s vanished while it grew",
				      r->volume_id);
	}
	Csi__V1__ControllerExpandVolumeResponse *resp =
		xnew0(Csi__V1__ControllerExpandVolumeResponse, 1);
	csi__v1__controller_expand_volume_response__init(resp);
	resp->capacity_bytes = (int64_t)v->size;
	/* Always: a loop device keeps its old size until NodeExpandVolume refreshes it, raw
	 * block too, and a filesystem must grow there as well. */
	resp->node_expansion_required = true;
	*ret = &resp->base;
	return 0;
}

int controller_modify_volume(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			     char **ret_error)
{
	const Csi__V1__ControllerModifyVolumeRequest *r = (const void *)req;
	_cleanup_(pool_volume_freep) PoolVolume *v = NULL;
	_cleanup_free_ char *err = NULL;
	_cleanup_free_ ParamKV *kv = NULL;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	/* The volumes of other backends go through their operations. */
	Backend *b = volume_backend(d, r->volume_id, NULL);
	if (!backend_is_default(d, b))
		return controller_modify_through(d, b, r, ret, ret_error);
	kv = pbmap_to_kv((void *const *)r->mutable_parameters, r->n_mutable_parameters);
	if (volume_params_check_mutable(kv, r->n_mutable_parameters, &err) < 0)
		return errorf(ret_error, -EINVAL, "mutable_parameters: %s", err);
	if (pool_volume_load(d->pool, r->volume_id, &v) < 0)
		return volume_not_found(ret_error, r->volume_id);
	/* Values are checked against the merged change (the size a concurrent expand brings
	 * included) when it is applied, as EC2 checks the EBS driver's merged modification. */
	if ((e = submit(ret_error, d, r->volume_id, 0, kv, r->n_mutable_parameters)) < 0)
		return e;

	Csi__V1__ControllerModifyVolumeResponse *resp =
		xnew0(Csi__V1__ControllerModifyVolumeResponse, 1);
	csi__v1__controller_modify_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}
