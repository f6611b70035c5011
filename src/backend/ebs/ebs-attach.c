/* SPDX-License-Identifier: Apache-2.0 */
/* ControllerPublishVolume and ControllerUnpublishVolume over EC2: AttachVolume with a device
 * name from the node's ordered list (devnames.h), DetachVolume, and a batched wait for the
 * attachment's state.
 *
 * The names instances' volumes hold come from EC2: the first publish to an instance after a
 * start reads its block device mapping (DescribeInstances) into the allocator, so a name is
 * never given twice, even to a volume a killed controller was attaching.
 *
 * A publish settles idempotency and exclusivity itself, whatever EC2 would refuse: it looks at
 * the volume's attachments first (one batched DescribeVolumes, ebs_waiter_look()): attached
 * here, the same device; attached elsewhere in a one-node mode, FAILED_PRECONDITION; read-only
 * where it was published read-write (or the reverse), ALREADY_EXISTS; detaching, wait. It
 * keeps the instance's attach limit too (ebs-limits.h), counting every EBS volume of its block
 * device mapping, the root volume and volumes volplug did not attach among them. What EC2 says
 * when it refuses stays the second line, for what changed since the look: VolumeInUse,
 * AttachmentLimitExceeded, IncorrectState (an unpublish while attaching: wait, then detach). */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "ebs-controller.h"
#include "error-util.h"
#include "ebs-limits.h"
#include "failpoint.h"
#include "log.h"
#include "strv.h"

#define PUBLISH_CONTEXT_DEVICE "devicePath"
/* Attempts with another device name, or after a state settled. */
#define ATTACH_TRIES 4
/* How long DescribeVolumes may fail to show an attachment EC2 accepted. */
#define ATTACHMENT_VISIBLE (15 * USEC_PER_SEC)

/* ---- instances ---- */

/* What a publish needs of an instance (c->instances' values). */
typedef struct NodeInfo {
	uint32_t max_volumes; /* EBS volumes it can have attached, the root volume included; 0: no
			       * limit known (a type of another shape) */
	size_t others;	      /* of its block device mapping when read: volumes at names outside
			       * the allocator's list (its root volume, volumes attached by others) */
	char zone[];
} NodeInfo;

static bool node_known(EbsController *c, const char *node)
{
	pthread_mutex_lock(&c->lock);
	bool known = hashmap_contains(c->instances, node);
	pthread_mutex_unlock(&c->lock);
	return known;
}

/* How many names of the allocator's list the node may hold: its limit less the volumes at
 * other names; 0: no limit known. *ret_full: none at all. */
static size_t node_names_max(EbsController *c, const char *node, bool *ret_full)
{
	size_t max = 0;

	pthread_mutex_lock(&c->lock);
	const NodeInfo *info = hashmap_get(c->instances, node);
	*ret_full = info && info->max_volumes && info->others >= info->max_volumes;
	if (info && info->max_volumes && !*ret_full)
		max = info->max_volumes - info->others;
	pthread_mutex_unlock(&c->lock);
	return max;
}

static int node_describe(EbsController *c, const char *node, usec_t deadline, char **ret_error);

/* The instance node: DescribeInstances once per process (or again with refresh), its block
 * device mapping restored into the allocator. -ENOENT naming node_id when EC2 has none. */
static int node_ensure(EbsController *c, const char *node, bool refresh, usec_t deadline,
		       char **ret_error)
{
	if (!refresh && node_known(c, node))
		return 0;
	/* concurrent first publishes to an instance: one asks, the others find it known */
	pthread_mutex_lock(&c->discover_lock);
	int r = !refresh && node_known(c, node) ? 0 : node_describe(c, node, deadline, ret_error);
	pthread_mutex_unlock(&c->discover_lock);
	return r;
}

static int node_describe(EbsController *c, const char *node, usec_t deadline, char **ret_error)
{
	Ec2Params p = {};
	Ec2Error e = {};
	XmlNode *reply = NULL;
	EbsInstance inst = {};
	uint32_t limit = 0;
	size_t others = 0;

	ec2_params_add(&p, "InstanceId.1", node);
	int r = ebs_call(c, "DescribeInstances", &p, deadline, NULL, &reply, &e, ret_error);
	ec2_params_done(&p);
	if (r == -ENOENT || r == -EINVAL)
		r = errorf(ret_error, -ENOENT, "node_id: instance %s not found (%s)", node,
			   e.code ?: "");
	ec2_error_done(&e);
	if (r < 0)
		return r;
	const XmlNode *item = xml_find(reply, "reservationSet/item/instancesSet/item");
	r = item ? ebs_instance_from_xml(item, &inst) : -ENOENT;
	xml_free(reply);
	if (r < 0)
		return errorf(ret_error, -ENOENT, "node_id: instance %s not found", node);
	if (strcmp(inst.state, "terminated") == 0 || strcmp(inst.state, "shutting-down") == 0) {
		r = errorf(ret_error, -ENOENT, "node_id: instance %s is %s", node, inst.state);
		ebs_instance_done(&inst);
		return r;
	}
	for (size_t i = 0; inst.devices && inst.devices[i]; i++) {
		r = devnames_restore(c->devnames, node, inst.volumes[i], inst.devices[i]);
		if (r == -EEXIST)
			log_debug("instance %s: %s of volume %s is held by another volume here",
				  node, inst.devices[i], inst.volumes[i]);
		else if (r == -EINVAL)
			/* a name the allocator never gives: its root volume, or not ours */
			others++;
	}
	/* The limit as NodeGetInfo computes it, with no volume left out: every EBS volume of the
	 * mapping is counted here. */
	if (ebs_attach_limit(&(EbsInstanceShape){.type = inst.type, .enis = inst.enis}, &limit) ==
	    0)
		limit++; /* its root volume */
	const char *zone = inst.zone ?: "";
	NodeInfo *info = xmalloc(sizeof(NodeInfo) + strlen(zone) + 1);
	*info = (NodeInfo){.max_volumes = limit, .others = others};
	strcpy(info->zone, zone);
	pthread_mutex_lock(&c->lock);
	free(hashmap_remove(c->instances, node));
	(void)hashmap_put(c->instances, node, info);
	pthread_mutex_unlock(&c->lock);
	log_debug("instance %s (%s): %zu volume(s) at other names, attach limit %u", node,
		  inst.type ?: "?", others, limit);
	ebs_instance_done(&inst);
	return 0;
}

/* A name for volume on node within the node's attach limit: 0 with *ret_device (the name it
 * holds already, if any), -EMLINK when the node is full (read again once before saying so),
 * -ENOSPC when no name of the list is left. */
static int node_allocate(EbsController *c, const BackendAttach *r, usec_t deadline,
			 char **ret_device, char **ret_error)
{
	bool full;
	int e = -EMLINK;

	for (unsigned pass = 0; pass < 2 && e == -EMLINK; pass++) {
		/* full: EC2 may have detached some since it was read */
		if (pass > 0 && (e = node_ensure(c, r->node_id, true, deadline, ret_error)) < 0)
			return e;
		size_t max = node_names_max(c, r->node_id, &full);
		if (full && devnames_lookup(c->devnames, r->node_id, r->volume_id, ret_device) == 0)
			return 0;
		e = full ? -EMLINK
			 : devnames_allocate_max(c->devnames, r->node_id, r->volume_id, max,
						 ret_device);
	}
	if (e == -EMLINK) {
		size_t others = 0;
		uint32_t limit = 0;
		pthread_mutex_lock(&c->lock);
		const NodeInfo *info = hashmap_get(c->instances, r->node_id);
		if (info) {
			others = info->others;
			limit = info->max_volumes;
		}
		pthread_mutex_unlock(&c->lock);
		return errorf(ret_error, -EMLINK,
			      "node %s cannot take volume %s: its %zu attached EBS volumes (the "
			      "root volume and any volplug did not attach included) reach its "
			      "attach limit of %u",
			      r->node_id, r->volume_id,
			      others + devnames_count(c->devnames, r->node_id), limit);
	}
	if (e < 0)
		return errorf(ret_error, -EMLINK,
			      "node %s has no free device name left (%d are in use)", r->node_id,
			      DEVNAMES_MAX);
	return 0;
}

/* ---- waiting for an attachment ---- */

typedef struct AttachWait {
	const char *instance;
	bool detach;	     /* waiting for it to go, else to be attached */
	usec_t invisible_ok; /* until then, no attachment means "not shown yet" */
	char *device;	     /* attached as */
	char *state;	     /* the attachment's state as last seen; NULL: none */
	bool read_only;	     /* tagged as published read-only there, as last seen */
} AttachWait;

/* Whether v is recorded as published read-only to instance. */
static bool read_only_tagged(const EbsVolume *v, const char *instance)
{
	_cleanup_free_ char *key = xasprintf(EBS_TAG_READ_ONLY "%s", instance);
	return strmap_get(&v->tags, key) != NULL;
}

/* Records (or, set false, forgets) that volume is published read-only to instance. */
static int read_only_tag(EbsController *c, const char *volume, const char *instance, bool set,
			 usec_t deadline, char **ret_error)
{
	_cleanup_free_ char *key = xasprintf(EBS_TAG_READ_ONLY "%s", instance);
	Ec2Params p = {};

	ec2_params_add(&p, "ResourceId.1", volume);
	ec2_params_add(&p, "Tag.1.Key", key);
	if (set)
		ec2_params_add(&p, "Tag.1.Value", "true");
	int e = ebs_call(c, set ? "CreateTags" : "DeleteTags", &p, deadline, NULL, NULL, NULL,
			 ret_error);
	ec2_params_done(&p);
	return e;
}

static int attach_check(const void *item, void *userdata, char **ret_error)
{
	AttachWait *w = userdata;
	const EbsVolume *v = item;

	if (!v)
		return 0;
	const EbsAttachment *a = ebs_volume_attachment(v, w->instance);
	free(w->state);
	w->state = a ? xstrdup(a->state) : NULL;
	w->read_only = read_only_tagged(v, w->instance);
	if (w->detach)
		return !a || strcmp(a->state, "detached") == 0;
	if (a && strcmp(a->state, "attached") == 0) {
		free(w->device);
		w->device = xstrdup(a->device);
		return 1;
	}
	if (a && strcmp(a->state, "attaching") == 0)
		return 0;
	if (!a && now_usec(CLOCK_MONOTONIC) < w->invisible_ok)
		return 0;
	return errorf(ret_error, -EIO, "volume %s did not attach to instance %s: the attachment %s",
		      v->id, w->instance, a ? a->state : "is gone");
}

/* Waits until volume is attached to instance (0, *ret_device) or no longer attached there
 * (detach). *ret_read_only (may be NULL): whether it is then tagged read-only there. */
static int attachment_wait(EbsController *c, const char *volume, const char *instance, bool detach,
			   usec_t deadline, char **ret_device, bool *ret_read_only,
			   char **ret_error)
{
	AttachWait w = {
		.instance = instance,
		.detach = detach,
		.invisible_ok = now_usec(CLOCK_MONOTONIC) + ATTACHMENT_VISIBLE,
	};

	int r = ebs_waiter_wait(c->volumes, volume, detach ? "detach" : "attach", attach_check, &w,
				deadline, ret_error);
	if (r == -ETIMEDOUT)
		errorf(ret_error, r, "volume %s: still %s instance %s at the deadline", volume,
		       !w.state				   ? "not shown attached to"
		       : strcmp(w.state, "attaching") == 0 ? "attaching to"
		       : strcmp(w.state, "detaching") == 0 ? "detaching from"
							   : "attached to",
		       instance);
	if (r == 0 && ret_device)
		*ret_device = TAKE_PTR(w.device);
	if (r == 0 && ret_read_only)
		*ret_read_only = w.read_only;
	free(w.device);
	free(w.state);
	return r;
}

/* ---- ControllerPublishVolume ---- */

static void attachment_result(const char *device, bool existed, BackendAttachment *ret)
{
	*ret = (BackendAttachment){.device = xstrdup(device), .existed = existed};
	strmap_set(&ret->publish_context, PUBLISH_CONTEXT_DEVICE, device);
}

typedef enum {
	ATTACH_DONE = 1,  /* *ret filled */
	ATTACH_AGAIN = 2, /* a state settled: try AttachVolume again */
} AttachNext;

/* What the volume's attachments say before an AttachVolume (v as just seen): here, the same
 * device, once attached (ATTACH_DONE); elsewhere, FAILED_PRECONDITION unless the mode lets
 * several nodes have it; detaching, wait; ATTACH_AGAIN when nothing stands in the way. */
static int attach_existing(EbsController *c, const BackendAttach *r, const EbsVolume *v,
			   usec_t deadline, BackendAttachment *ret, char **ret_error)
{
	_cleanup_free_ char *attached_as = NULL, *held = NULL;
	int e = 0;

	const EbsAttachment *here = ebs_volume_attachment(v, r->node_id);
	if (here && strcmp(here->state, "detaching") != 0 && strcmp(here->state, "detached") != 0) {
		bool read_only = read_only_tagged(v, r->node_id);
		if (read_only != r->read_only)
			return errorf(ret_error, -EEXIST,
				      "volume %s is already published to node %s with readonly=%s",
				      r->volume_id, r->node_id, read_only ? "true" : "false");
		if (devnames_lookup(c->devnames, r->node_id, r->volume_id, &held) < 0 ||
		    strcmp(held, here->device) != 0) {
			devnames_release(c->devnames, r->node_id, r->volume_id);
			(void)devnames_restore(c->devnames, r->node_id, r->volume_id, here->device);
		}
		bool existed = strcmp(here->state, "attached") == 0;
		if (existed)
			attached_as = xstrdup(here->device);
		else
			e = attachment_wait(c, r->volume_id, r->node_id, false, deadline,
					    &attached_as, NULL, ret_error);
		if (e < 0)
			return e;
		attachment_result(attached_as, existed, ret);
		return ATTACH_DONE;
	}
	const char *wait_for = here ? r->node_id : NULL;
	for (size_t i = 0; !wait_for && i < v->n_attachments; i++) {
		const EbsAttachment *a = &v->attachments[i];
		if (strcmp(a->state, "detaching") == 0 && !r->access.multi_node)
			wait_for = a->instance_id;
		else if (strcmp(a->state, "detached") != 0 &&
			 (!r->access.multi_node || !v->multi_attach)) {
			devnames_release(c->devnames, r->node_id, r->volume_id);
			if (r->access.multi_node)
				/* EC2 says VolumeInUse again and again: say why at once */
				return errorf(
					ret_error, -ENOTEMPTY,
					"volume %s is attached to node %s (EC2 attachment %s) and "
					"was made without Multi-Attach: one node only",
					r->volume_id, a->instance_id, a->state);
			else
				return errorf(
					ret_error, -ENOTEMPTY,
					"volume %s is attached to node %s (EC2 attachment %s) and "
					"its access mode %s allows one node only",
					r->volume_id, a->instance_id, a->state, r->access.mode);
		}
	}
	if (wait_for && (e = attachment_wait(c, r->volume_id, wait_for, true, deadline, NULL, NULL,
					     ret_error)) < 0)
		return e;
	return ATTACH_AGAIN;
}

/* VolumeInUse: what changed since the look? */
static int attach_in_use(EbsController *c, const BackendAttach *r, usec_t deadline,
			 BackendAttachment *ret, char **ret_error)
{
	EbsVolume v = {};

	int e = ebs_volume_describe(c, r->volume_id, "volume_id", deadline, &v, ret_error);
	if (e < 0)
		return e;
	e = attach_existing(c, r, &v, deadline, ret, ret_error);
	ebs_volume_done(&v);
	return e;
}

/* IncorrectState: a volume still being made is waited for; one going away is not there. */
static int attach_not_ready(EbsController *c, const BackendAttach *r, const Ec2Error *ec2,
			    usec_t deadline, char **ret_error)
{
	static const char *const available[] = {"available", "in-use", NULL};
	EbsVolume v = {};

	int e = ebs_volume_describe(c, r->volume_id, "volume_id", deadline, &v, ret_error);
	if (e < 0)
		return e;
	if (strcmp(v.state, "creating") == 0) {
		ebs_volume_done(&v);
		e = ebs_volume_wait_state(c, r->volume_id, "create", available, false, deadline,
					  NULL, ret_error);
		return e < 0 ? e : ATTACH_AGAIN;
	}
	if (strcmp(v.state, "available") == 0 || strcmp(v.state, "in-use") == 0) {
		ebs_volume_done(&v);
		return ATTACH_AGAIN;
	}
	e = errorf(ret_error, strcmp(v.state, "error") == 0 ? -ENOTEMPTY : -ENOENT,
		   "volume_id: volume %s is %s: %s", r->volume_id, v.state, ec2->message);
	ebs_volume_done(&v);
	return e;
}

/* An AttachVolume EC2 refused: what to do next (ATTACH_*), or the error for the user. */
static int attach_refused(EbsController *c, const BackendAttach *r, const char *device, int e,
			  const Ec2Error *ec2, usec_t deadline, BackendAttachment *ret,
			  char **ret_error)
{
	const char *msg = ec2->message ?: strerror(-e);

	if (ebs_code_is(ec2, "VolumeInUse"))
		return attach_in_use(c, r, deadline, ret, ret_error);
	/* From here on the volume was not attached with device. */
	devnames_release(c->devnames, r->node_id, r->volume_id);
	if (ebs_code_is(ec2, "IncorrectState"))
		return attach_not_ready(c, r, ec2, deadline, ret_error);
	if (ebs_code_is(ec2, "InvalidVolume.NotFound") ||
	    ebs_code_is(ec2, "InvalidVolumeID.Malformed")) {
		if (!ebs_recent_volume(c, r->volume_id))
			return errorf(ret_error, -ENOENT, "volume_id: volume %s not found (%s)",
				      r->volume_id, ec2->code);
		EbsVolume v = {};
		e = ebs_volume_describe(c, r->volume_id, "volume_id", deadline, &v, ret_error);
		ebs_volume_done(&v);
		return e < 0 ? e : ATTACH_AGAIN;
	}
	if (ebs_code_is(ec2, "InvalidInstanceID.NotFound") ||
	    ebs_code_is(ec2, "InvalidInstanceID.Malformed"))
		return errorf(ret_error, -ENOENT, "node_id: instance %s not found (%s)", r->node_id,
			      ec2->code);
	if (e == -EINVAL && strstr(msg, device)) {
		/* The name is taken by something this controller did not know of. */
		devnames_mark_failed(c->devnames, r->node_id, device);
		log_debug("instance %s: %s refused (%s), reading its devices again", r->node_id,
			  device, msg);
		int k = node_ensure(c, r->node_id, true, deadline, ret_error);
		return k < 0 ? k : ATTACH_AGAIN;
	}
	if (e == -EMLINK)
		return errorf(ret_error, e, "node %s cannot take another volume: %s", r->node_id,
			      msg);
	if (ebs_code_is(ec2, "InvalidVolume.ZoneMismatch"))
		return errorf(ret_error, -EINVAL,
			      "volume_id: volume %s and node %s are in different zones: %s",
			      r->volume_id, r->node_id, msg);
	devnames_mark_failed(c->devnames, r->node_id, device);
	return errorf(ret_error, e, "AttachVolume of %s to %s as %s: %s", r->volume_id, r->node_id,
		      device, msg);
}

/* Recording the attachment failed: it goes, so that a retry starts afresh. Returns e. */
static int attach_undo(EbsController *c, const BackendAttach *r, usec_t deadline, int e)
{
	_cleanup_free_ char *err = NULL;
	Ec2Params p = {};

	ec2_params_add(&p, "VolumeId", r->volume_id);
	ec2_params_add(&p, "InstanceId", r->node_id);
	if (ebs_call(c, "DetachVolume", &p, deadline, NULL, NULL, NULL, &err) < 0)
		log_debug("volume %s: detaching it from %s after a failed publish failed: %s",
			  r->volume_id, r->node_id, err);
	ec2_params_done(&p);
	return e;
}

/* One AttachVolume with the name the volume holds (or gets) on the node. */
static int attach_once(EbsController *c, const BackendAttach *r, usec_t deadline,
		       BackendAttachment *ret, char **ret_error)
{
	_cleanup_free_ char *device = NULL, *attached_as = NULL;
	Ec2Params p = {};
	Ec2Error ec2 = {};

	int e = node_allocate(c, r, deadline, &device, ret_error);
	if (e < 0)
		return e;
	ec2_params_add(&p, "VolumeId", r->volume_id);
	ec2_params_add(&p, "InstanceId", r->node_id);
	ec2_params_add(&p, "Device", device);
	e = ebs_call(c, "AttachVolume", &p, deadline, NULL, NULL, &ec2, ret_error);
	ec2_params_done(&p);
	if (e < 0) {
		/* A refusal is settled; a transport failure, the deadline or retries that ran
		 * out leave it unknown whether it attached: the name stays. */
		if (ec2.code && !ec2_error_retryable(ec2.code, ec2.http_status))
			e = attach_refused(c, r, device, e, &ec2, deadline, ret, ret_error);
		ec2_error_done(&ec2);
		return e;
	}
	/* Between AttachVolume and here a controller may be killed: the next one finds the
	 * attachment in the instance's block device mapping. */
	failpoint("ebs-attach-after-call");
	bool read_only;
	e = attachment_wait(c, r->volume_id, r->node_id, false, deadline, &attached_as, &read_only,
			    ret_error);
	if (e == -EIO)
		devnames_release(c->devnames, r->node_id, r->volume_id);
	if (e < 0)
		return e;
	/* Read-only is only a record for a later publish to compare with; a stale one (a
	 * read-only attachment that went without its unpublish) goes. */
	if (read_only != r->read_only &&
	    (e = read_only_tag(c, r->volume_id, r->node_id, r->read_only, deadline, ret_error)) < 0)
		return attach_undo(c, r, deadline, e);
	attachment_result(attached_as, false, ret);
	return ATTACH_DONE;
}

/* The volume as it is before the first AttachVolume: its attachments (attach_existing()), or
 * a wait while it is still being made. */
static int attach_look(EbsController *c, const BackendAttach *r, usec_t deadline,
		       BackendAttachment *ret, char **ret_error)
{
	static const char *const available[] = {"available", "in-use", NULL};
	EbsVolume v = {};

	int e = ebs_volume_look(c, r->volume_id, "volume_id", deadline, &v, ret_error);
	if (e < 0)
		return e;
	if (strcmp(v.state, "creating") == 0)
		e = ebs_volume_wait_state(c, r->volume_id, "create", available, false, deadline,
					  NULL, ret_error);
	else if (strcmp(v.state, "deleting") == 0 || strcmp(v.state, "deleted") == 0)
		e = errorf(ret_error, -ENOENT, "volume_id: volume %s is %s", r->volume_id, v.state);
	else
		e = attach_existing(c, r, &v, deadline, ret, ret_error);
	ebs_volume_done(&v);
	return e < 0 ? e : e == ATTACH_DONE ? ATTACH_DONE : ATTACH_AGAIN;
}

int ebs_attach(EbsController *c, const BackendAttach *r, BackendAttachment *ret, char **ret_error)
{
	usec_t deadline = ebs_deadline();

	int e = node_ensure(c, r->node_id, false, deadline, ret_error);
	if (e < 0)
		return e;
	e = attach_look(c, r, deadline, ret, ret_error);
	if (e == ATTACH_DONE)
		return 0;
	if (e < 0)
		return e;
	for (unsigned i = 0; i < ATTACH_TRIES; i++) {
		e = attach_once(c, r, deadline, ret, ret_error);
		if (e == ATTACH_DONE)
			return 0;
		if (e < 0)
			return e;
	}
	return errorf(ret_error, -EBUSY,
		      "volume %s: its attachment to %s kept changing (%d attempts): try again",
		      r->volume_id, r->node_id, ATTACH_TRIES);
}

/* ---- ControllerUnpublishVolume ---- */

static void detached_add(BackendDetached *d, const char *node, const char *device)
{
	strv_append(&d->nodes, xstrdup(node));
	strv_append(&d->devices, xstrdup(device ?: ""));
}

/* DetachVolume refused: is it attached there at all, or on its way? 1 when nothing is
 * attached there (done), 0 to detach again, or an error. */
static int detach_refused(EbsController *c, const char *volume, const char *node,
			  const Ec2Error *ec2, usec_t deadline, char **ret_device, char **ret_error)
{
	EbsVolume v = {};

	if (ebs_code_is(ec2, "InvalidAttachment.NotFound") ||
	    ebs_code_is(ec2, "InvalidVolume.NotFound") ||
	    ebs_code_is(ec2, "InvalidVolumeID.Malformed") ||
	    ebs_code_is(ec2, "InvalidInstanceID.NotFound") ||
	    ebs_code_is(ec2, "InvalidInstanceID.Malformed"))
		return 1; /* not attached there: as the spec says, done */
	if (ebs_code_is(ec2, "OperationNotPermitted"))
		return errorf(ret_error, -ENOTEMPTY, "volume %s cannot be detached from %s: %s",
			      volume, node, ec2->message);
	if (!ebs_code_is(ec2, "IncorrectState"))
		return errorf(ret_error, ec2_code_to_errno(ec2->code, ec2->http_status),
			      "DetachVolume of %s from %s: %s", volume, node, ec2->message);
	int e = ebs_volume_describe(c, volume, "volume_id", deadline, &v, ret_error);
	if (e == -ENOENT)
		return 1;
	if (e < 0)
		return e;
	const EbsAttachment *a = ebs_volume_attachment(&v, node);
	bool attaching = a && strcmp(a->state, "attaching") == 0;
	bool detaching = a && strcmp(a->state, "detaching") == 0;
	if (a)
		*ret_device = xstrdup(a->device);
	ebs_volume_done(&v);
	if (!a)
		return 1;
	if (attaching || detaching) {
		/* an unpublish while attaching: once attached, detach; while detaching: wait */
		e = attachment_wait(c, volume, node, detaching, deadline, NULL, NULL, ret_error);
		if (e < 0)
			return e;
		return detaching ? 1 : 0;
	}
	return 0;
}

static int detach_one(EbsController *c, const char *volume, const char *node, usec_t deadline,
		      BackendDetached *ret, char **ret_error)
{
	for (unsigned i = 0; i < ATTACH_TRIES; i++) {
		_cleanup_free_ char *device = NULL;
		Ec2Params p = {};
		Ec2Error ec2 = {};
		XmlNode *reply = NULL;

		ec2_params_add(&p, "VolumeId", volume);
		ec2_params_add(&p, "InstanceId", node);
		int e = ebs_call(c, "DetachVolume", &p, deadline, NULL, &reply, &ec2, ret_error);
		ec2_params_done(&p);
		if (e == 0) {
			bool read_only = false;
			device = xstrdup(xml_text(reply, "device") ?: "");
			xml_free(reply);
			e = attachment_wait(c, volume, node, true, deadline, NULL, &read_only,
					    ret_error);
			if (e < 0)
				return e;
			_cleanup_free_ char *err = NULL;
			if (read_only && read_only_tag(c, volume, node, false, deadline, &err) < 0)
				log_debug("volume %s: forgetting it was read-only on %s failed: %s",
					  volume, node, err);
			devnames_release(c->devnames, node, volume);
			detached_add(ret, node, device);
			return 0;
		}
		if (!ec2.code)
			return e; /* transport, deadline: it may be detaching */
		e = detach_refused(c, volume, node, &ec2, deadline, &device, ret_error);
		ec2_error_done(&ec2);
		if (e < 0)
			return e;
		if (e == 1) {
			devnames_release(c->devnames, node, volume);
			if (device)
				detached_add(ret, node, device);
			return 0;
		}
	}
	return errorf(ret_error, -EBUSY,
		      "volume %s: its attachment to %s kept changing (%d attempts): try again",
		      volume, node, ATTACH_TRIES);
}

int ebs_detach(EbsController *c, const BackendDetach *r, BackendDetached *ret, char **ret_error)
{
	usec_t deadline = ebs_deadline();
	BackendDetached gone = {};
	EbsVolume v = {};
	int e = 0;

	if (r->node_id && *r->node_id)
		e = detach_one(c, r->volume_id, r->node_id, deadline, &gone, ret_error);
	else {
		/* every node, as the spec says of an empty node_id */
		e = ebs_volume_describe(c, r->volume_id, "volume_id", deadline, &v, ret_error);
		if (e == -ENOENT)
			e = 0;
		for (size_t i = 0; e == 0 && i < v.n_attachments; i++)
			e = detach_one(c, r->volume_id, v.attachments[i].instance_id, deadline,
				       &gone, ret_error);
		ebs_volume_done(&v);
	}
	if (e < 0) {
		backend_detached_done(&gone);
		return e;
	}
	*ret = gone;
	return 0;
}
