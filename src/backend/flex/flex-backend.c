/* SPDX-License-Identifier: Apache-2.0 */
/* Volumes served by Flexvolume drivers, called exactly as the kubelet and the
 * controller-manager call them (FLEXVOLUME.md):
 *
 *   attach         attach <json> <node>           attachable drivers only;
 *                  isattached <json> <node>       to verify a retry
 *   detach         detach <volumeName> <node>
 *   delete_volume  nothing to call: the controller record goes
 *   change_volume  expandvolume (a modification has no command: refused)
 *   stage          waitforattach <device> <json>, then
 *                  mountdevice <staging> <device> <json>   attachable drivers only
 *   publish        mount <target> <json>          pod info, secrets, fsGroup
 *   unpublish      unmount <target>
 *   unstage        unmountdevice <staging>
 *   node_expand    expandfs
 *
 * with Kubernetes' fallbacks for "Not supported" (flex-node.c for the node's). A volume is
 * this backend's when its volume_context names "flexvolume.driver: vendor/name" (a static PV's
 * volumeAttributes or a CSI ephemeral inline volume), or, for the requests that carry no
 * context, when a record of it exists (flex-records.h). Whether a path is mounted is read from
 * the machine, never remembered, so retries after a restart find their finished work. */
#include <string.h>

#include "alloc.h"
#include "error-util.h"
#include "flex-internal.h"
#include "log.h"
#include "strv.h"

#define CONTEXT_PREFIX "flexvolume."
#define CSI_PREFIX "csi.storage.k8s.io/"

/* ---- drivers ---- */

int flex_backend_driver(FlexBackend *fb, const FlexRecord *rec, FlexDriver **ret, char **ret_error)
{
	_cleanup_free_ char *err = NULL;

	if (!fb->registry)
		return errorf(ret_error, -ENOEXEC,
			      "volume %s needs Flexvolume driver \"%s\", but Flexvolume drivers "
			      "are off on this daemon (see --flexvolume-dir and its log)",
			      rec->volume_id, rec->driver);
	int r = flex_registry_get_loaded(fb->registry, rec->driver, ret, &err);
	if (r < 0)
		return errorf(ret_error, r, "volume %s: %s", rec->volume_id, err);
	return 0;
}

int flex_backend_run(FlexBackend *fb, FlexDriver *drv, const FlexRecord *rec, FlexCommand cmd,
		     const FlexCallArgs *args, FlexReply *ret, char **ret_error)
{
	_cleanup_free_ char *err = NULL;

	int r = flex_driver_call(drv, fb->call, cmd, args, ret, &err);
	if (r == -EOPNOTSUPP) {
		log_debug("volume %s: driver %s %s: Not supported, doing what Kubernetes does "
			  "instead",
			  rec->volume_id, drv->name, flex_command_to_string(cmd));
		return r;
	}
	if (r < 0)
		return errorf(ret_error, r, "volume %s: %s", rec->volume_id, err ?: strerror(-r));
	return 0;
}

int flex_backend_volume_name(FlexBackend *fb, FlexDriver *drv, const FlexRecord *rec,
			     char **ret_error)
{
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	FlexReply rep;

	flex_backend_spec(rec, &spec, &opts);
	FlexCallArgs args = {.spec = &spec};
	int r = flex_backend_run(fb, drv, rec, FLEX_GETVOLUMENAME, &args, &rep, ret_error);
	if (r == -EOPNOTSUPP)
		return 0;
	if (r < 0)
		return r;
	if (rep.volume_name && strcmp(rep.volume_name, rec->volume_name) != 0)
		log_debug("volume %s: driver %s getvolumename answered \"%s\": ignored, as "
			  "Kubernetes does; the volume's name is \"%s\"",
			  rec->volume_id, drv->name, rep.volume_name, rec->volume_name);
	flex_reply_done(&rep);
	return 0;
}

int flex_backend_not_supported(const FlexRecord *rec, const FlexDriver *drv, FlexCommand cmd,
			       const char *why, char **ret_error)
{
	return errorf(ret_error, -EOPNOTSUPP, "volume %s: driver \"%s\" %s: Not supported, %s",
		      rec->volume_id, drv->name, flex_command_to_string(cmd), why);
}

void flex_backend_spec(const FlexRecord *rec, FlexVolumeSpec *view, FlexOption **ret_options)
{
	FlexOption *o = xnew0(FlexOption, rec->options.n + 1);
	for (size_t i = 0; i < rec->options.n; i++)
		o[i] = (FlexOption){rec->options.keys[i], rec->options.values[i]};
	*view = (FlexVolumeSpec){
		.fs_type = rec->fs_type,
		.read_only = rec->read_only,
		.pv_or_volume_name = rec->volume_name,
		.options = o,
		.n_options = rec->options.n,
	};
	*ret_options = o;
}

/* ---- requests ---- */

static bool startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Flexvolume serves filesystems in any access mode: the driver decides what it can share. */
int flex_backend_check_access(const BackendAccess *access, char **ret_error)
{
	if (access->block)
		return errorf(ret_error, -EINVAL,
			      "volume_capability: Flexvolume drivers serve filesystems, not raw "
			      "block devices");
	return 0;
}

/* The pod volume's name in the kubelet's target path of an ephemeral inline volume,
 * .../volumes/kubernetes.io~csi/<name>/mount; NULL when the path is not of that shape. */
static char *ephemeral_name(const char *target_path)
{
	static const char suffix[] = "/mount", plugin[] = "/kubernetes.io~csi/";
	size_t n = target_path ? strlen(target_path) : 0;

	if (n <= strlen(suffix) || strcmp(target_path + n - strlen(suffix), suffix) != 0)
		return NULL;
	n -= strlen(suffix);
	size_t start = n;
	while (start > 0 && target_path[start - 1] != '/')
		start--;
	if (start == n || start < strlen(plugin) ||
	    strncmp(target_path + start - strlen(plugin), plugin, strlen(plugin)) != 0)
		return NULL;
	return xstrndup(target_path + start, n - start);
}

/* The name Kubernetes gives a volume (spec.Name(): the PV's, or the pod volume's for an
 * inline one), as far as CSI tells it: flexvolume.volumeName, else the PV name in the
 * context, else an ephemeral volume's name in its target path, else the volume id. */
static char *volume_name(const char *volume_id, const Strmap *context, const char *target_path)
{
	const char *keys[] = {FLEX_CONTEXT_VOLUME_NAME, FLEX_CONTEXT_PV_NAME};
	const char *ephemeral = strmap_get(context, FLEX_CONTEXT_EPHEMERAL);

	for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
		const char *v = strmap_get(context, keys[i]);
		if (v && *v)
			return xstrdup(v);
	}
	char *name =
		ephemeral && strcmp(ephemeral, "true") == 0 ? ephemeral_name(target_path) : NULL;
	return name ?: xstrdup(volume_id);
}

int flex_backend_record(const char *volume_id, const Strmap *context, const char *fs_type,
			bool read_only, const char *target_path, FlexRecord **ret, char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	const char *driver = context ? strmap_get(context, FLEX_CONTEXT_DRIVER) : NULL;

	if (flex_driver_name_validate(driver, &err) < 0)
		return errorf(ret_error, -EINVAL, "volume_context[%s]: %s", FLEX_CONTEXT_DRIVER,
			      err);
	FlexRecord *rec = flex_record_new(volume_id);
	flex_record_set(&rec->driver, driver);
	flex_record_set(&rec->fs_type, fs_type);
	rec->read_only = read_only;
	free(rec->volume_name);
	rec->volume_name = volume_name(volume_id, context, target_path);
	for (size_t i = 0; i < context->n; i++)
		if (!startswith(context->keys[i], CSI_PREFIX) &&
		    !startswith(context->keys[i], CONTEXT_PREFIX))
			strmap_set(&rec->options, context->keys[i], context->values[i]);
	*ret = rec;
	return 0;
}

/* ---- records ---- */

int flex_backend_save(FlexBackend *fb, FlexRecordKind k, const FlexRecord *rec, char **ret_error)
{
	int r = flex_record_save(&fb->records, k, rec);
	if (r < 0)
		return errorf(ret_error, r == -EINVAL ? -EINVAL : -EIO,
			      "volume %s: recording its Flexvolume state in %s failed: %s",
			      rec->volume_id, fb->records.dir,
			      r == -EINVAL ? "volume_context is not UTF-8" : strerror(-r));
	return 0;
}

int flex_backend_load(FlexBackend *fb, FlexRecordKind k, const char *volume_id, const char *path,
		      FlexRecord **ret, char **ret_error)
{
	FlexRecord *rec = NULL;

	int r = flex_record_load(&fb->records, k, volume_id, path, &rec);
	if (r < 0 && r != -ENOENT)
		return errorf(ret_error, -EIO,
			      "volume %s: reading its Flexvolume record in %s failed: %s",
			      volume_id, fb->records.dir, strerror(-r));
	*ret = rec;
	return 0;
}

int flex_backend_remove(FlexBackend *fb, FlexRecordKind k, const FlexRecord *rec, char **ret_error)
{
	int r = flex_record_remove(&fb->records, k, rec);
	if (r < 0)
		return errorf(ret_error, -EIO,
			      "volume %s: removing its Flexvolume record failed: %s",
			      rec->volume_id, strerror(-r));
	return 0;
}

/* ---- controller ---- */

static void attachment_reply(const char *device, bool existed, BackendAttachment *ret)
{
	*ret = (BackendAttachment){.existed = existed};
	if (device && *device) {
		strmap_set(&ret->publish_context, FLEX_PUBLISH_CONTEXT_DEVICE, device);
		ret->device = xstrdup(device);
	}
}

static FlexAttachment *attachment_find(FlexRecord *rec, const char *node)
{
	for (size_t i = 0; i < rec->n_attachments; i++)
		if (strcmp(rec->attachments[i].node, node) == 0)
			return &rec->attachments[i];
	return NULL;
}

/* An attachment already made: isattached says whether it still holds. 1 yes, 0 no. */
static int attachment_verify(FlexBackend *fb, FlexDriver *drv, const FlexRecord *rec,
			     const FlexCallArgs *args, char **ret_error)
{
	FlexReply rep;
	int r = flex_backend_run(fb, drv, rec, FLEX_ISATTACHED, args, &rep, ret_error);
	if (r == -EOPNOTSUPP)
		return 1; /* Kubernetes assumes attached */
	if (r < 0)
		return r;
	bool attached = rep.attached; /* absent: false, as Go reads it */
	flex_reply_done(&rep);
	return attached;
}

/* The record of this publish, keeping what earlier publishes did. */
static int attach_record(FlexBackend *fb, const BackendAttach *r, FlexRecord **ret,
			 char **ret_error)
{
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL, *old = NULL;
	int e;

	if ((e = flex_backend_check_access(&r->access, ret_error)) < 0)
		return e;
	e = flex_backend_record(r->volume_id, r->volume_context, r->access.fstype,
				r->read_only || r->access.read_only, NULL, &rec, ret_error);
	if (e < 0)
		return e;
	if ((e = flex_backend_load(fb, FLEX_RECORD_VOLUME, r->volume_id, NULL, &old, ret_error)) <
	    0)
		return e;
	/* Several nodes only in a mode that lets them: a single-node mode keeps to the first. */
	for (size_t i = 0; old && !r->access.multi_node && i < old->n_attachments; i++)
		if (strcmp(old->attachments[i].node, r->node_id) != 0)
			return errorf(ret_error, -ENOTEMPTY,
				      "volume %s is published to node %s and its access mode %s "
				      "allows one node only",
				      r->volume_id, old->attachments[i].node, r->access.mode);
	if (old) {
		rec->attachments = TAKE_PTR(old->attachments);
		rec->n_attachments = old->n_attachments;
		old->n_attachments = 0;
		rec->size = old->size;
	}
	*ret = TAKE_PTR(rec);
	return 0;
}

static FlexAttachment *attachment_add(FlexRecord *rec, const char *node, bool attach)
{
	rec->attachments =
		xrealloc(rec->attachments, (rec->n_attachments + 1) * sizeof(FlexAttachment));
	FlexAttachment *a = &rec->attachments[rec->n_attachments++];
	*a = (FlexAttachment){.node = xstrdup(node), .device = xstrdup(""), .attach = attach};
	return a;
}

/* A driver that does not attach: Kubernetes calls nothing. The attachment is recorded all the
 * same, so that expansion finds the driver while the volume is published. */
static int attach_nothing(FlexBackend *fb, FlexRecord *rec, const FlexDriver *drv, const char *node,
			  BackendAttachment *ret, char **ret_error)
{
	bool existed = attachment_find(rec, node) != NULL;
	int e;

	if (!existed) {
		attachment_add(rec, node, false)->done = true;
		if ((e = flex_backend_save(fb, FLEX_RECORD_VOLUME, rec, ret_error)) < 0)
			return e;
	}
	log_debug("volume %s: Flexvolume driver %s does not attach", rec->volume_id, drv->name);
	attachment_reply(NULL, existed, ret);
	return 0;
}

static int attach_op(Backend *b, const BackendAttach *r, BackendAttachment *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	FlexReply rep;
	int e;

	if ((e = attach_record(fb, r, &rec, ret_error)) < 0)
		return e;
	if ((e = flex_backend_driver(fb, rec, &drv, ret_error)) < 0)
		return e;
	if (!drv->capabilities.attach)
		return attach_nothing(fb, rec, drv, r->node_id, ret, ret_error);
	if ((e = flex_backend_volume_name(fb, drv, rec, ret_error)) < 0)
		return e;
	flex_backend_spec(rec, &spec, &opts);
	FlexCallArgs args = {.spec = &spec, .node_name = r->node_id};
	FlexAttachment *a = attachment_find(rec, r->node_id);
	if (a && a->done && a->attach) {
		e = attachment_verify(fb, drv, rec, &args, ret_error);
		if (e < 0)
			return e;
		if (e > 0) {
			attachment_reply(a->device, true, ret);
			return 0;
		}
		log_debug("volume %s: driver %s says it is no longer attached to %s: attaching "
			  "again",
			  rec->volume_id, drv->name, r->node_id);
	}
	if (!a)
		a = attachment_add(rec, r->node_id, true);
	a->done = false;
	a->attach = true;
	/* Written first: a detach is owed from the moment attach may have run. */
	if ((e = flex_backend_save(fb, FLEX_RECORD_VOLUME, rec, ret_error)) < 0)
		return e;
	e = flex_backend_run(fb, drv, rec, FLEX_ATTACH, &args, &rep, ret_error);
	if (e < 0 && e != -EOPNOTSUPP)
		return e;
	flex_record_set(&a->device, e == 0 ? rep.device : ""); /* Not supported: no device */
	if (e == 0)
		flex_reply_done(&rep);
	a->done = true;
	if ((e = flex_backend_save(fb, FLEX_RECORD_VOLUME, rec, ret_error)) < 0)
		return e;
	log_debug("volume %s: attached to node %s by Flexvolume driver %s%s%s", rec->volume_id,
		  r->node_id, drv->name, *a->device ? " as " : "", a->device);
	attachment_reply(a->device, false, ret);
	return 0;
}

static void attachment_remove(FlexRecord *rec, size_t i)
{
	FlexAttachment *a = &rec->attachments[i];

	free(a->node);
	free(a->device);
	memmove(a, a + 1, (rec->n_attachments - i - 1) * sizeof(FlexAttachment));
	rec->n_attachments--;
}

/* One attachment undone: detach <volumeName> <node> when the driver attached it. */
static int detach_one(FlexBackend *fb, FlexRecord *rec, const FlexAttachment *a, FlexDriver **drv,
		      char **ret_error)
{
	int e;

	if (!a->attach)
		return 0; /* a driver that does not attach: nothing to call */
	if (!*drv) {
		if ((e = flex_backend_driver(fb, rec, drv, ret_error)) < 0)
			return e;
		if ((*drv)->capabilities.attach &&
		    (e = flex_backend_volume_name(fb, *drv, rec, ret_error)) < 0)
			return e;
	}
	FlexCallArgs args = {.volume_name = rec->volume_name, .node_name = a->node};
	e = flex_backend_run(fb, *drv, rec, FLEX_DETACH, &args, NULL, ret_error);
	if (e < 0 && e != -EOPNOTSUPP) /* Not supported: success, like Kubernetes */
		return e;
	log_debug("volume %s: detached from node %s by Flexvolume driver %s", rec->volume_id,
		  a->node, (*drv)->name);
	return 0;
}

/* After the last detach the record goes, unless it holds the size an expansion set (the old
 * size of the next expandvolume: CSI gives none), which stays until DeleteVolume. */
static int detach_record(FlexBackend *fb, const FlexRecord *rec, char **ret_error)
{
	if (rec->n_attachments > 0 || rec->size > 0)
		return flex_backend_save(fb, FLEX_RECORD_VOLUME, rec, ret_error);
	return flex_backend_remove(fb, FLEX_RECORD_VOLUME, rec, ret_error);
}

static int detach_op(Backend *b, const BackendDetach *r, BackendDetached *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	_cleanup_(backend_detached_done) BackendDetached gone = {};
	int e;

	if ((e = flex_backend_load(fb, FLEX_RECORD_VOLUME, r->volume_id, NULL, &rec, ret_error)) <
	    0)
		return e;
	for (size_t i = 0; rec && i < rec->n_attachments;) {
		FlexAttachment *a = &rec->attachments[i];
		/* No node: detach from every node, as the spec says. */
		if (r->node_id && *r->node_id && strcmp(a->node, r->node_id) != 0) {
			i++;
			continue;
		}
		if ((e = detach_one(fb, rec, a, &drv, ret_error)) < 0)
			return e;
		strv_append(&gone.nodes, TAKE_PTR(a->node));
		strv_append(&gone.devices, TAKE_PTR(a->device) ?: xstrdup(""));
		attachment_remove(rec, i);
		if ((e = detach_record(fb, rec, ret_error)) < 0)
			return e;
	}
	/* A record owing nothing (from an earlier version) goes too. */
	if (rec && !gone.nodes && rec->n_attachments == 0 && rec->size == 0 &&
	    (e = detach_record(fb, rec, ret_error)) < 0)
		return e;
	*ret = gone;
	gone = (BackendDetached){};
	return 0;
}

/* DeleteVolume: Flexvolume has no command for it (the driver's storage is its own business), so
 * only the controller record goes, once nothing is attached. Success for a volume without one. */
static int delete_volume_op(Backend *b, const BackendRef *r, BackendDeleted *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;

	int e = flex_backend_load(fb, FLEX_RECORD_VOLUME, r->id, NULL, &rec, ret_error);
	if (e < 0)
		return e;
	if (!rec) {
		*ret = (BackendDeleted){};
		return 0;
	}
	if (rec->n_attachments > 0)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s is still published to node %s: unpublish it first", r->id,
			      rec->attachments[0].node);
	if ((e = flex_backend_remove(fb, FLEX_RECORD_VOLUME, rec, ret_error)) < 0)
		return e;
	*ret = (BackendDeleted){.found = true, .name = xstrdup(rec->volume_name)};
	return 0;
}

/* The volume as its controller record has it (ControllerPublishVolume made it): its size as
 * the last expansion set it (0: not known), the nodes it is attached to, its driver. */
static int get_volume_op(Backend *b, const BackendRef *r, BackendVolume *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;

	int e = flex_backend_load(fb, FLEX_RECORD_VOLUME, r->id, NULL, &rec, ret_error);
	if (e < 0)
		return e;
	if (!rec)
		return errorf(ret_error, -ENOENT,
			      "volume_id: volume %s: no ControllerPublishVolume recorded which "
			      "Flexvolume driver serves it",
			      r->id);
	*ret = (BackendVolume){
		.id = xstrdup(rec->volume_id),
		.name = xstrdup(rec->volume_name),
		.size = rec->size,
		.source_kind = xstrdup(""),
		.source_id = xstrdup(""),
		.access_mode = xstrdup(""),
		.condition = xasprintf("served by Flexvolume driver %s", rec->driver),
	};
	strmap_copy(&ret->context, &rec->options);
	strmap_set(&ret->context, FLEX_CONTEXT_DRIVER, rec->driver);
	for (size_t i = 0; i < rec->n_attachments; i++)
		if (rec->attachments[i].done)
			strv_append(&ret->published_nodes, xstrdup(rec->attachments[i].node));
	return 0;
}

/* ControllerExpandVolume; ControllerModifyVolume has nothing to call. */
static int change_volume_op(Backend *b, const BackendChange *r, BackendChanged *ret,
			    char **ret_error)
{
	FlexBackend *fb = flex_of(b);
	_cleanup_(flex_record_freep) FlexRecord *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	int e;

	if (r->n_params > 0 || r->new_size == 0)
		return errorf(
			ret_error, -EINVAL,
			"mutable_parameters: volume %s is served by a Flexvolume driver, and "
			"Flexvolume has no command to modify a volume: ControllerModifyVolume "
			"is not supported for it",
			r->volume_id);
	if ((e = flex_backend_load(fb, FLEX_RECORD_VOLUME, r->volume_id, NULL, &rec, ret_error)) <
	    0)
		return e;
	if (!rec)
		return errorf(ret_error, -ENOENT,
			      "volume %s: no ControllerPublishVolume recorded which Flexvolume "
			      "driver serves it",
			      r->volume_id);
	if ((e = flex_backend_driver(fb, rec, &drv, ret_error)) < 0)
		return e;
	/* Kubernetes computes the device mount path from the volume's name. */
	if ((e = flex_backend_volume_name(fb, drv, rec, ret_error)) < 0)
		return e;
	flex_backend_spec(rec, &spec, &opts);
	/* The kubelet's device mount path (where CSI stages the volume is known on its node
	 * only); the old size as the last expansion left it, 0 before the first (CSI tells no
	 * size of a volume it did not create). */
	_cleanup_free_ char *dmp = xasprintf(FLEX_KUBELET_DEVICE_MOUNTS "/%s/mounts/%s",
					     rec->driver, rec->volume_name);
	FlexCallArgs args = {
		.spec = &spec,
		.device_mount_path = dmp,
		.new_size = r->new_size,
		.old_size = rec->size,
	};
	e = flex_backend_run(fb, drv, rec, FLEX_EXPANDVOLUME, &args, NULL, ret_error);
	if (e < 0 && e != -EOPNOTSUPP) /* Not supported: success, like Kubernetes */
		return e;
	rec->size = r->new_size;
	if ((e = flex_backend_save(fb, FLEX_RECORD_VOLUME, rec, ret_error)) < 0)
		return e;
	log_debug("volume %s: expanded to %llu bytes by Flexvolume driver %s", rec->volume_id,
		  (unsigned long long)r->new_size, drv->name);
	*ret = (BackendChanged){
		.size = r->new_size,
		.node_expansion_required = drv->capabilities.requires_fs_resize,
	};
	return 0;
}

/* ---- the backend ---- */

static bool claims_op(Backend *b, const char *volume_id, const Strmap *volume_context)
{
	if (volume_context)
		return strmap_get(volume_context, FLEX_CONTEXT_DRIVER) != NULL;
	return volume_id && *volume_id && flex_records_know(&flex_of(b)->records, volume_id);
}

static void flex_backend_free(Backend *b)
{
	FlexBackend *fb = flex_of(b);

	flex_records_done(&fb->records);
	free(fb);
}

/* The volumes it attached (controller records), and this node's stages and publishes. */
static int status_op(Backend *b, const void *r, BackendStatus *ret, char **ret_error)
{
	FlexBackend *fb = flex_of(b);

	(void)r;
	(void)ret_error;
	*ret = (BackendStatus){
		.volumes = flex_records_count(&fb->records, FLEX_RECORD_VOLUME),
		.snapshots = -1,
		.staged = flex_records_count(&fb->records, FLEX_RECORD_STAGED),
		.published = flex_records_count(&fb->records, FLEX_RECORD_PUBLISHED),
		.devices = -1,
	};
	return 0;
}

/* No probe: a driver that fails, or Flexvolume off, concerns its volumes only, never whether
 * the plugin is ready. */
static const BackendOps flex_ops = {
	.name = "flex",
	.claims = claims_op,
	.delete_volume = delete_volume_op,
	.get_volume = get_volume_op,
	.attach = attach_op,
	.detach = detach_op,
	.change_volume = change_volume_op,
	.stage = flex_stage,
	.unstage = flex_unstage,
	.publish = flex_publish,
	.unpublish = flex_unpublish,
	.node_expand = flex_node_expand,
	.node_stats = flex_node_stats,
	.status = status_op,
	.free = flex_backend_free,
};

BACKEND_NEW(flex);
BACKEND_NEW(flex)
{
	_cleanup_free_ char *dir = NULL;

	if (!config->state_dir || !*config->state_dir)
		return errorf(
			ret_error, -EINVAL,
			"the Flexvolume backend keeps its records in the state of the backend "
			"it serves beside: none");
	dir = flex_records_dir(config->state_dir);
	FlexBackend *fb = xnew0(FlexBackend, 1);
	fb->base.ops = &flex_ops;
	fb->registry = config->flex;
	fb->call = config->flex_call;
	flex_records_init(&fb->records, dir, config->node_id);
	*ret = &fb->base;
	return 0;
}

/* Flexvolume drivers serve beside a backend with a state directory (the pool's), never alone. */
BACKEND_TYPE(flex) = {
	.name = "flex",
	.new = flex_backend_new,
	.flex_drivers = true,
};
