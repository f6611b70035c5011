/* SPDX-License-Identifier: Apache-2.0 */
/* volplug.admin.v1.Admin: what volplugctl asks the running daemon. */
#include <stdlib.h>
#include <string.h>

#include "admin.pb-c.h"
#include "alloc.h"
#include "error-util.h"
#include "admin.h"
#include "log.h"
#include "metrics.h"
#include "registry.h"
#include "store.h"

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

/* A gauge or counter of the registry as an integer; 0 when it has no series. */
static int64_t figure(const char *name)
{
	double v = 0;
	(void)metrics_sum(name, &v);
	return v >= 0x1p63 ? INT64_MAX : v <= 0 ? 0 : (int64_t)v;
}

/* A byte figure as the proto's int64: beyond its range (a capacity of exabytes) clamped. */
static int64_t clamp(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static Volplug__Admin__V1__PoolStatus *space_to_pb(const BackendStatus *s)
{
	Volplug__Admin__V1__PoolStatus *p = xnew0(Volplug__Admin__V1__PoolStatus, 1);

	volplug__admin__v1__pool_status__init(p);
	p->path = xstrdup(s->path);
	p->capacity_bytes = clamp(s->capacity);
	p->overprovision_ratio = s->overprovision ?: 1;
	p->provisioned_bytes = clamp(s->provisioned);
	p->allocated_bytes = clamp(s->allocated);
	p->available_bytes = clamp(s->available);
	p->filesystem_free_bytes = clamp(s->fs_free);
	p->volumes = MAX(s->volumes, 0);
	p->snapshots = MAX(s->snapshots, 0);
	p->staged = MAX(s->staged, 0);
	p->published = MAX(s->published, 0);
	p->loop_devices = MAX(s->devices, 0);
	return p;
}

/* Each backend's own status; the totals of this node's stages and publishes over all of them;
 * the first local space as the pool figures. */
static void backends_status(Driver *d, Volplug__Admin__V1__GetStatusResponse *r)
{
	size_t n = 0;

	while (d->backends && d->backends[n])
		n++;
	r->backends = xnew0(Volplug__Admin__V1__BackendStatus *, n + 1);
	for (size_t i = 0; i < n; i++) {
		Backend *b = d->backends[i];
		BackendStatus s = {-1, -1, -1, -1};
		if (b->ops->status && b->ops->status(b, NULL, &s, NULL) < 0)
			s = (BackendStatus){-1, -1, -1, -1};
		Volplug__Admin__V1__BackendStatus *m = xnew0(Volplug__Admin__V1__BackendStatus, 1);
		volplug__admin__v1__backend_status__init(m);
		m->name = xstrdup(b->ops->name);
		m->volumes = s.volumes;
		m->snapshots = s.snapshots;
		m->staged = s.staged;
		m->published = s.published;
		r->backends[r->n_backends++] = m;
		r->staged += MAX(s.staged, 0);
		r->published += MAX(s.published, 0);
		if (s.path && s.has_space && !r->pool)
			r->pool = space_to_pb(&s);
		backend_status_done(&s);
	}
}

/* The value of the series of family name whose first label is id; 0 when it has none. */
static int64_t volume_figure(const char *name, const char *id, double scale)
{
	MetricSample *list = NULL;
	size_t n = 0;
	double v = 0;

	if (metrics_samples(name, &list, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (list[i].values[0] && strcmp(list[i].values[0], id) == 0)
				v = list[i].value * scale;
	metric_samples_free(list, n);
	/* Rounded: milliseconds come back from seconds a hair below the whole number. */
	return v >= 0x1p63 ? INT64_MAX : v <= 0 ? 0 : (int64_t)(v + 0.5);
}

static int volume_io_cmp(const void *a, const void *b)
{
	const Volplug__Admin__V1__VolumeIO *x = *(Volplug__Admin__V1__VolumeIO *const *)a,
					   *y = *(Volplug__Admin__V1__VolumeIO *const *)b;
	return strcmp(x->volume_id, y->volume_id);
}

/* The volumes staged on this node and their I/O, from the pool backend's collector: one
 * volplug_volume_device_info series each. */
static void staged_volumes(Volplug__Admin__V1__GetStatusResponse *r)
{
	MetricSample *list = NULL;
	size_t n = 0;

	if (metrics_samples("volplug_volume_device_info", &list, &n) < 0 || n == 0)
		return;
	r->staged_volumes = xnew0(Volplug__Admin__V1__VolumeIO *, n);
	for (size_t i = 0; i < n; i++) {
		const char *id = list[i].values[0], *dev = id ? list[i].values[1] : NULL;
		if (!dev)
			continue;
		Volplug__Admin__V1__VolumeIO *v = xnew0(Volplug__Admin__V1__VolumeIO, 1);
		volplug__admin__v1__volume_io__init(v);
		v->volume_id = xstrdup(id);
		v->device = xstrdup(dev);
		v->read_bytes = volume_figure("volplug_volume_read_bytes_total", id, 1);
		v->reads = volume_figure("volplug_volume_reads_total", id, 1);
		v->written_bytes = volume_figure("volplug_volume_written_bytes_total", id, 1);
		v->writes = volume_figure("volplug_volume_writes_total", id, 1);
		v->read_ms = volume_figure("volplug_volume_read_seconds_total", id, 1000);
		v->write_ms = volume_figure("volplug_volume_write_seconds_total", id, 1000);
		v->busy_ms = volume_figure("volplug_volume_io_busy_seconds_total", id, 1000);
		v->in_flight = volume_figure("volplug_volume_io_in_flight", id, 1);
		r->staged_volumes[r->n_staged_volumes++] = v;
	}
	metric_samples_free(list, n);
	qsort(r->staged_volumes, r->n_staged_volumes, sizeof(*r->staged_volumes), volume_io_cmp);
}

static int dir_volume_cmp(const void *a, const void *b)
{
	const Volplug__Admin__V1__DirectoryVolume
		*x = *(Volplug__Admin__V1__DirectoryVolume *const *)a,
		*y = *(Volplug__Admin__V1__DirectoryVolume *const *)b;
	return strcmp(x->volume_id, y->volume_id);
}

/* The pool's directory volumes and what their quotas count, from the pool backend's collector:
 * one volplug_volume_quota_limit_bytes series each. */
static void directory_volumes(Volplug__Admin__V1__GetStatusResponse *r)
{
	MetricSample *list = NULL;
	size_t n = 0;

	if (metrics_samples("volplug_volume_quota_limit_bytes", &list, &n) < 0 || n == 0)
		return;
	r->directory_volumes = xnew0(Volplug__Admin__V1__DirectoryVolume *, n);
	for (size_t i = 0; i < n; i++) {
		const char *id = list[i].values[0];
		if (!id)
			continue;
		Volplug__Admin__V1__DirectoryVolume *v =
			xnew0(Volplug__Admin__V1__DirectoryVolume, 1);
		volplug__admin__v1__directory_volume__init(v);
		v->volume_id = xstrdup(id);
		v->limit_bytes = volume_figure("volplug_volume_quota_limit_bytes", id, 1);
		v->used_bytes = volume_figure("volplug_volume_quota_used_bytes", id, 1);
		v->used_inodes = volume_figure("volplug_volume_quota_used_inodes", id, 1);
		v->limit_inodes = volume_figure("volplug_volume_quota_limit_inodes", id, 1);
		r->directory_volumes[r->n_directory_volumes++] = v;
	}
	metric_samples_free(list, n);
	qsort(r->directory_volumes, r->n_directory_volumes, sizeof(*r->directory_volumes),
	      dir_volume_cmp);
}

/* The value of the series of family name whose first label is v0 (NULL: the family's sum). */
static int64_t labelled_figure(const char *name, const char *v0)
{
	MetricSample *list = NULL;
	size_t n = 0;
	double v = 0;

	if (metrics_samples(name, &list, &n) == 0)
		for (size_t i = 0; i < n; i++)
			if (!v0 || (list[i].values[0] && strcmp(list[i].values[0], v0) == 0))
				v += list[i].value;
	metric_samples_free(list, n);
	return v >= 0x1p63 ? INT64_MAX : v <= 0 ? 0 : (int64_t)(v + 0.5);
}

/* The snapshot store, from its metrics (volplug_store_info names it), and the newest of its
 * last errors. */
static void store_status(Volplug__Admin__V1__GetStatusResponse *r)
{
	MetricSample *list = NULL;
	size_t n = 0;

	if (metrics_samples("volplug_store_info", &list, &n) < 0 || n == 0 || !list[0].values[0] ||
	    !list[0].values[1] || !list[0].values[2]) {
		metric_samples_free(list, n);
		return;
	}
	Volplug__Admin__V1__StoreStatus *st = xnew0(Volplug__Admin__V1__StoreStatus, 1);
	volplug__admin__v1__store_status__init(st);
	st->endpoint = xstrdup(list[0].values[0]);
	st->bucket = xstrdup(list[0].values[1]);
	st->prefix = xstrdup(list[0].values[2]);
	metric_samples_free(list, n);
	st->uploads_in_progress = labelled_figure("volplug_store_uploads_in_progress", NULL);
	st->sent_bytes = labelled_figure("volplug_store_sent_bytes_total", NULL);
	st->uploads_done = labelled_figure("volplug_store_uploads_total", "done");
	st->uploads_failed = labelled_figure("volplug_store_uploads_total", "failed");
	usec_t newest = 0;
	char *last = NULL;
	for (StoreErrorKind k = 0; k < _STORE_ERROR_KIND_MAX; k++) {
		_cleanup_free_ char *message = NULL;
		usec_t when = 0;
		if (store_last_error(k, &when, &message) < 0 && when >= newest) {
			newest = when;
			free(last);
			last = xasprintf("%s: %s", store_error_kind_to_string(k), message);
			st->last_error_unix_ms = (int64_t)(when / USEC_PER_MSEC);
		}
	}
	st->last_error = last ?: xstrdup("");
	r->store = st;
}

static void recent_problems(Volplug__Admin__V1__GetStatusResponse *r)
{
	LogRecent list[LOG_RECENT_MAX];
	size_t n = log_recent_list(list, ELEMENTSOF(list));

	r->recent_problems = xnew0(Volplug__Admin__V1__Problem *, n + 1);
	for (size_t i = 0; i < n; i++) {
		Volplug__Admin__V1__Problem *p = xnew0(Volplug__Admin__V1__Problem, 1);
		volplug__admin__v1__problem__init(p);
		p->time_unix_ms = list[i].time_us / 1000;
		p->what = xstrdup(list[i].what);
		p->context = xstrdup(list[i].context);
		p->message = xstrdup(list[i].message);
		r->recent_problems[r->n_recent_problems++] = p;
	}
}

static void flex_drivers(const Driver *d, Volplug__Admin__V1__GetStatusResponse *r)
{
	FlexDriver **list;
	size_t n;

	r->flex_enabled = d->flex != NULL;
	if (!d->flex)
		return;
	flex_registry_list(d->flex, &list, &n);
	r->flex_drivers = xnew0(Volplug__Admin__V1__FlexDriver *, n + 1);
	for (size_t i = 0; i < n; i++)
		if (list[i]->state != FLEX_DRIVER_REMOVED)
			r->flex_drivers[r->n_flex_drivers++] = driver_to_pb(list[i]);
	flex_driver_list_free(list, n);
}

int admin_get_status(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		     char **ret_error)
{
	_cleanup_free_ char *not_ready = NULL;
	Volplug__Admin__V1__GetStatusResponse *r = xnew0(Volplug__Admin__V1__GetStatusResponse, 1);

	(void)req;
	(void)ret_error;
	volplug__admin__v1__get_status_response__init(r);
	r->driver_name = xstrdup(d->name);
	r->version = xstrdup(d->version);
	r->mode = xstrdup(driver_mode_to_string(d->mode));
	r->node_id = xstrdup(d->node_id ?: "");
	r->uptime_seconds = (int64_t)((now_usec(CLOCK_MONOTONIC) - d->started) / USEC_PER_SEC);
	r->ready = driver_probe(d, &not_ready) >= 0;
	r->not_ready_reason = xstrdup(not_ready ?: "");
	backends_status(d, r);
	r->calls = figure("volplug_csi_operation_duration_seconds");
	r->calls_in_flight = MAX(figure("volplug_csi_operations_in_flight") - 1, 0);
	flex_drivers(d, r);
	recent_problems(r);
	staged_volumes(r);
	directory_volumes(r);
	store_status(r);
	*ret = &r->base;
	return 0;
}
