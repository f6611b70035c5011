/* SPDX-License-Identifier: Apache-2.0 */
/* ControllerExpandVolume and ControllerModifyVolume, merged by the CSI layer into one change:
 * one ModifyVolume (size, type, IOPS, throughput) waited for until EC2 says optimizing (the
 * volume serves its new size and performance from then on), then CreateTags for new tags.
 *
 * EC2 modifies a volume at most EBS_MODIFY_LIMIT times in a rolling EBS_MODIFY_PERIOD, each as
 * soon as the one before completed (the rule since 2026-01-15; before it, once in 6 hours),
 * which is why the change is merged. A retry of a change EC2 is still making finds that
 * modification (DescribeVolumesModifications) and waits for it instead of asking again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "alloc.h"
#include "ebs-controller.h"
#include "error-util.h"
#include "log.h"

/* ---- DescribeVolumesModifications ---- */

int ebs_modifications_fetch(void *userdata, char *const *ids, size_t n, usec_t deadline,
			    EbsFound *ret, char **ret_error);

/* Parses the modifications of a reply, the latest of each volume only. */
static void modifications_parse(const XmlNode *reply, EbsFound *ret)
{
	EbsFound f = {};

	XML_FOREACH (item, reply, "volumeModificationSet/item") {
		EbsModification *m = xnew0(EbsModification, 1);
		if (ebs_modification_from_xml(item, m) < 0) {
			free(m);
			continue;
		}
		size_t i = 0;
		while (i < f.n && strcmp(f.ids[i], m->volume_id) != 0)
			i++;
		if (i < f.n) {
			EbsModification *old = f.items[i];
			if (old->started > m->started) {
				ebs_modification_free(m);
				continue;
			}
			ebs_modification_free(old);
			f.items[i] = m;
			continue;
		}
		f.ids = xrealloc(f.ids, (f.n + 1) * sizeof(char *));
		f.items = xrealloc(f.items, (f.n + 1) * sizeof(void *));
		f.ids[f.n] = xstrdup(m->volume_id);
		f.items[f.n++] = m;
	}
	*ret = f;
}

int ebs_modifications_fetch(void *userdata, char *const *ids, size_t n, usec_t deadline,
			    EbsFound *ret, char **ret_error)
{
	EbsController *c = userdata;
	Ec2Params p = {};
	XmlNode *reply = NULL;

	ec2_params_add_filter(&p, "volume-id", (const char *const *)ids, n);
	int r = ebs_call(c, "DescribeVolumesModifications", &p, deadline, NULL, &reply, NULL,
			 ret_error);
	ec2_params_done(&p);
	if (r < 0)
		return r;
	modifications_parse(reply, ret);
	xml_free(reply);
	return 0;
}

typedef struct ModWait {
	char *state; /* as last seen */
} ModWait;

static int modification_check(const void *item, void *userdata, char **ret_error)
{
	const EbsModification *m = item;
	ModWait *w = userdata;

	if (!m)
		return 0;
	free(w->state);
	w->state = xstrdup(m->state);
	if (strcmp(m->state, "optimizing") == 0 || strcmp(m->state, "completed") == 0)
		return 1;
	if (strcmp(m->state, "failed") == 0)
		return errorf(ret_error, -EIO, "EC2 could not modify volume %s: %s", m->volume_id,
			      *m->message ? m->message : "modification failed");
	return 0;
}

static int modification_wait(EbsController *c, const char *id, usec_t deadline, char **ret_error)
{
	ModWait w = {};

	int r = ebs_waiter_wait(c->modifications, id, "modify", modification_check, &w, deadline,
				ret_error);
	if (r == -ETIMEDOUT)
		errorf(ret_error, r, "volume %s: its modification is still %s at the deadline", id,
		       w.state ?: "not shown");
	free(w.state);
	return r;
}

/* ---- the change ---- */

typedef struct Target {
	uint64_t size_gib;
	VolumeParams params;
} Target;

static bool type_has_iops(const char *type)
{
	return strcmp(type, "gp3") == 0 || strcmp(type, "io1") == 0 || strcmp(type, "io2") == 0;
}

/* Whether the volume as EC2 has it already is t (size, type, IOPS, throughput). */
static bool target_reached(const EbsVolume *v, const Target *t)
{
	return v->size_gib >= t->size_gib && strcmp(v->type, t->params.type) == 0 &&
	       (!type_has_iops(t->params.type) || v->iops == t->params.iops) &&
	       (strcmp(t->params.type, "gp3") != 0 || v->throughput == t->params.throughput);
}

/* Whether modification m is the one that makes t. */
static bool modification_makes(const EbsModification *m, const Target *t)
{
	return m->target_size_gib == t->size_gib && strcmp(m->target_type, t->params.type) == 0 &&
	       (!type_has_iops(t->params.type) || m->target_iops == t->params.iops) &&
	       (strcmp(t->params.type, "gp3") != 0 || m->target_throughput == t->params.throughput);
}

static int usec_cmp_desc(const void *a, const void *b)
{
	usec_t x = *(const usec_t *)a, y = *(const usec_t *)b;
	return x < y ? 1 : x > y ? -1 : 0;
}

/* "2026-01-15T10:00:00Z" for a CLOCK_REALTIME time. */
static const char *iso_time(char buf[static 32], usec_t t)
{
	time_t s = (time_t)(t / USEC_PER_SEC);
	struct tm tm;

	if (!gmtime_r(&s, &tm) || strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
		snprintf(buf, 32, "(unknown)");
	return buf;
}

int ebs_modify_rate_check(const XmlNode *reply, const char *id, usec_t now, size_t *ret_count,
			  usec_t *ret_next)
{
	_cleanup_free_ usec_t *starts = NULL;
	size_t n = 0;

	XML_FOREACH (item, reply, "volumeModificationSet/item") {
		EbsModification m = {};
		if (ebs_modification_from_xml(item, &m) < 0)
			continue;
		/* a modification started in the period counts, failed or not */
		if (strcmp(m.volume_id, id) == 0 && m.started > 0 &&
		    m.started + EBS_MODIFY_PERIOD > now) {
			starts = xrealloc(starts, (n + 1) * sizeof(usec_t));
			starts[n++] = m.started;
		}
		ebs_modification_done(&m);
	}
	qsort_safe(starts, n, sizeof(usec_t), usec_cmp_desc);
	*ret_count = n;
	/* the limit-th latest leaves the period first */
	*ret_next = n >= EBS_MODIFY_LIMIT ? starts[EBS_MODIFY_LIMIT - 1] + EBS_MODIFY_PERIOD : 0;
	return n >= EBS_MODIFY_LIMIT ? -EAGAIN : 0;
}

/* ModifyVolume was refused as one is running or was made lately: if that one makes t, it is
 * ours (a retry): 0 to wait for it; else the refusal stands, a refusal of the rate with the
 * time EC2 takes the next change. */
static int modify_busy(EbsController *c, const char *id, const Target *t, int e,
		       const Ec2Error *ec2, usec_t deadline, char **ret_error)
{
	Ec2Params p = {};
	XmlNode *reply = NULL;
	EbsFound f = {};
	const char *ids[] = {id};

	size_t count = 0;
	usec_t next = 0;

	ec2_params_add_list(&p, "VolumeId", ids, 1);
	int r = ebs_call(c, "DescribeVolumesModifications", &p, deadline, NULL, &reply, NULL, NULL);
	ec2_params_done(&p);
	if (r == 0) {
		modifications_parse(reply, &f);
		(void)ebs_modify_rate_check(reply, id, now_usec(CLOCK_REALTIME), &count, &next);
		xml_free(reply);
	}
	bool ours = f.n > 0 && strcmp(((EbsModification *)f.items[0])->state, "failed") != 0 &&
		    modification_makes(f.items[0], t);
	for (size_t i = 0; i < f.n; i++) {
		free(f.ids[i]);
		ebs_modification_free(f.items[i]);
	}
	free(f.ids);
	free(f.items);
	if (ours)
		return 0;
	if (ebs_code_is(ec2, "VolumeModificationRateExceeded") && next > 0) {
		char when[32];
		return errorf(ret_error, -EAGAIN,
			      "volume %s was modified %zu times in the last 24 hours, the most EC2 "
			      "allows; the next change is allowed at %s: %s",
			      id, count, iso_time(when, next), ec2->message);
	}
	if (ebs_code_is(ec2, "VolumeModificationRateExceeded"))
		return errorf(
			ret_error, -EAGAIN,
			"volume %s: EC2 takes no more changes of it for now (at most %d in 24 "
			"hours; it shows %zu in the last 24 hours): %s",
			id, EBS_MODIFY_LIMIT, count, ec2->message);
	return errorf(ret_error, e, "volume %s is being modified: %s", id, ec2->message);
}

static int modify_call(EbsController *c, const EbsVolume *v, const Target *t, usec_t deadline,
		       char **ret_error)
{
	const VolumeParams *n = &t->params;
	bool retype = strcmp(v->type, n->type) != 0;
	Ec2Params p = {};
	Ec2Error ec2 = {};

	ec2_params_add(&p, "VolumeId", v->id);
	if (t->size_gib > v->size_gib)
		ec2_params_addf(&p, "Size", "%llu", (unsigned long long)t->size_gib);
	if (retype)
		ec2_params_add(&p, "VolumeType", n->type);
	if (type_has_iops(n->type) && (retype || n->iops != v->iops))
		ec2_params_addf(&p, "Iops", "%u", n->iops);
	if (strcmp(n->type, "gp3") == 0 && (retype || n->throughput != v->throughput))
		ec2_params_addf(&p, "Throughput", "%u", n->throughput);
	int e = ebs_call(c, "ModifyVolume", &p, deadline, NULL, NULL, &ec2, ret_error);
	ec2_params_done(&p);
	if (e < 0 && (ebs_code_is(&ec2, "IncorrectModificationState") ||
		      ebs_code_is(&ec2, "VolumeModificationRateExceeded")))
		e = modify_busy(c, v->id, t, e, &ec2, deadline, ret_error);
	else if (e == -EINVAL)
		e = errorf(ret_error, e, "mutable_parameters: ModifyVolume of %s refused them: %s",
			   v->id, ec2.message);
	else if (e < 0)
		e = errorf(ret_error, e, "ModifyVolume of %s: %s", v->id,
			   ec2.message ?: strerror(-e));
	ec2_error_done(&ec2);
	if (e < 0)
		return e;
	return modification_wait(c, v->id, deadline, ret_error);
}

/* The user's tags of t the volume lacks (or has with another value), by CreateTags. */
static int tags_apply(EbsController *c, const EbsVolume *v, const VolumeParams *t, usec_t deadline,
		      char **ret_error)
{
	Strmap add = {};
	Ec2Params p = {};

	for (size_t i = 0; i < t->n_tags; i++) {
		const char *have = strmap_get(&v->tags, t->tags[i].key);
		if (!have || strcmp(have, t->tags[i].value) != 0)
			strmap_set(&add, t->tags[i].key, t->tags[i].value);
	}
	if (add.n == 0)
		return 0;
	ec2_params_add(&p, "ResourceId.1", v->id);
	ec2_params_add_tags(&p, "Tag", &add);
	int e = ebs_call(c, "CreateTags", &p, deadline, "CreateTags (mutable_parameters)", NULL,
			 NULL, ret_error);
	ec2_params_done(&p);
	strmap_done(&add);
	return e;
}

int ebs_change_volume(EbsController *c, const BackendChange *r, BackendChanged *ret,
		      char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	usec_t deadline = ebs_deadline();
	BackendVolume current = {};
	EbsVolume v = {};
	Target t = {};

	int e = ebs_volume_describe(c, r->volume_id, "volume_id", deadline, &v, ret_error);
	if (e < 0)
		return e;
	ebs_volume_to_backend(&v, &c->extra_tags, &current);
	t.size_gib = MAX(v.size_gib, (r->new_size + EBS_GIB - 1) / EBS_GIB);
	if (r->n_params > 0)
		e = volume_params_modify(&current.params, t.size_gib * EBS_GIB, r->params,
					 r->n_params, &t.params, &err);
	else
		volume_params_copy(&current.params, &t.params);
	if (e < 0)
		e = errorf(ret_error, e, "mutable_parameters: %s", err);
	if (e == 0 && !target_reached(&v, &t))
		e = modify_call(c, &v, &t, deadline, ret_error);
	if (e == 0)
		e = tags_apply(c, &v, &t.params, deadline, ret_error);
	if (e == 0)
		*ret = (BackendChanged){
			.size = t.size_gib * EBS_GIB,
			/* also when an earlier attempt grew it: the node has not seen it */
			.node_expansion_required = r->new_size > 0,
		};
	volume_params_done(&t.params);
	backend_volume_done(&current);
	ebs_volume_done(&v);
	return e;
}
