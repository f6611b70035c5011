/* SPDX-License-Identifier: Apache-2.0 */
/* Snapshots over EC2: CreateSnapshot tagged with the CSI name (EC2 has no ClientToken for it:
 * a retry finds the snapshot by its tag, or, within the minute EC2 may take to show it, in
 * what this controller made lately), ready_to_use once EC2 says completed, ListSnapshots of
 * this driver's snapshots. And the snapshot a clone is made from. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "ebs-controller.h"
#include "error-util.h"
#include "log.h"

#define LIST_PAGE 1000

/* ---- describing ---- */

static size_t snapshots_parse(const XmlNode *reply, EbsSnapshot **ret)
{
	EbsSnapshot *s = NULL;
	size_t n = 0;

	XML_FOREACH (item, reply, "snapshotSet/item") {
		s = xrealloc(s, (n + 1) * sizeof(EbsSnapshot));
		if (ebs_snapshot_from_xml(item, &s[n]) == 0)
			n++;
	}
	*ret = s;
	return n;
}

static void snapshots_free(EbsSnapshot *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ebs_snapshot_done(&s[i]);
	free(s);
}

int ebs_snapshots_fetch(void *userdata, char *const *ids, size_t n, usec_t deadline, EbsFound *ret,
			char **ret_error)
{
	EbsController *c = userdata;
	Ec2Params p = {};
	XmlNode *reply = NULL;
	EbsSnapshot *s;

	ec2_params_add_filter(&p, "snapshot-id", (const char *const *)ids, n);
	int r = ebs_call(c, "DescribeSnapshots", &p, deadline, NULL, &reply, NULL, ret_error);
	ec2_params_done(&p);
	if (r < 0)
		return r;
	size_t m = snapshots_parse(reply, &s);
	xml_free(reply);
	*ret = (EbsFound){.ids = xnew0(char *, m), .items = xnew0(void *, m), .n = m};
	for (size_t i = 0; i < m; i++) {
		EbsSnapshot *item = xnew0(EbsSnapshot, 1);
		*item = s[i];
		ret->ids[i] = xstrdup(item->id);
		ret->items[i] = item;
	}
	free(s);
	return 0;
}

static int completed_check(const void *item, void *userdata, char **ret_error)
{
	const EbsSnapshot *s = item;

	(void)userdata;
	if (!s)
		return 0;
	if (strcmp(s->state, "completed") == 0)
		return 1;
	if (strcmp(s->state, "error") == 0)
		return errorf(ret_error, -EIO, "snapshot %s went to state error", s->id);
	return 0;
}

int ebs_snapshot_wait_completed(EbsController *c, const char *id, usec_t deadline, char **ret_error)
{
	return ebs_waiter_wait(c->snapshots, id, "snapshot", completed_check, NULL, deadline,
			       ret_error);
}

/* The snapshot id names: 0, -ENOENT (no such snapshot, or not a snapshot id at all). */
static int snapshot_describe(EbsController *c, const char *id, usec_t deadline, EbsSnapshot *ret,
			     char **ret_error)
{
	Ec2Params p = {};
	Ec2Error e = {};
	XmlNode *reply = NULL;
	EbsSnapshot *s;

	ec2_params_add(&p, "SnapshotId.1", id);
	int r = ebs_call(c, "DescribeSnapshots", &p, deadline, NULL, &reply, &e, ret_error);
	ec2_params_done(&p);
	if (r == -ENOENT || r == -EINVAL)
		r = errorf(ret_error, -ENOENT, "snapshot_id: snapshot %s not found (%s)", id,
			   e.code ?: "");
	ec2_error_done(&e);
	if (r < 0)
		return r;
	size_t n = snapshots_parse(reply, &s);
	xml_free(reply);
	if (n == 0) {
		snapshots_free(s, n);
		return errorf(ret_error, -ENOENT, "snapshot_id: snapshot %s not found", id);
	}
	*ret = s[0];
	s[0] = (EbsSnapshot){};
	snapshots_free(s, n);
	return 0;
}

/* ---- what was made lately ---- */

/* Hold the lock. */
static void recent_prune(EbsController *c)
{
	usec_t now = now_usec(CLOCK_MONOTONIC);
	size_t kept = 0;

	for (size_t i = 0; i < c->n_recent_snapshots; i++) {
		EbsRecentSnapshot *x = &c->recent_snapshots[i];
		if (now - x->at <= EBS_RECENT_WINDOW) {
			c->recent_snapshots[kept++] = *x;
			continue;
		}
		free(x->name);
		ebs_snapshot_done(&x->snapshot);
	}
	c->n_recent_snapshots = kept;
}

static void recent_add(EbsController *c, const char *name, const EbsSnapshot *s)
{
	pthread_mutex_lock(&c->lock);
	recent_prune(c);
	c->recent_snapshots = xrealloc(c->recent_snapshots,
				       (c->n_recent_snapshots + 1) * sizeof(EbsRecentSnapshot));
	EbsRecentSnapshot *x = &c->recent_snapshots[c->n_recent_snapshots++];
	*x = (EbsRecentSnapshot){.name = xstrdup(name), .at = now_usec(CLOCK_MONOTONIC)};
	ebs_snapshot_copy(s, &x->snapshot);
	pthread_mutex_unlock(&c->lock);
}

/* A snapshot made lately under name (name NULL: with id): a copy in *ret. */
static bool recent_find(EbsController *c, const char *name, const char *id, EbsSnapshot *ret)
{
	bool found = false;

	pthread_mutex_lock(&c->lock);
	recent_prune(c);
	for (size_t i = 0; i < c->n_recent_snapshots && !found; i++) {
		EbsRecentSnapshot *x = &c->recent_snapshots[i];
		if (name ? strcmp(x->name, name) == 0 : strcmp(x->snapshot.id, id) == 0) {
			ebs_snapshot_copy(&x->snapshot, ret);
			found = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}

static void recent_forget(EbsController *c, const char *id)
{
	size_t kept = 0;

	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n_recent_snapshots; i++) {
		EbsRecentSnapshot *x = &c->recent_snapshots[i];
		if (strcmp(x->snapshot.id, id) != 0) {
			c->recent_snapshots[kept++] = *x;
			continue;
		}
		free(x->name);
		ebs_snapshot_done(&x->snapshot);
	}
	c->n_recent_snapshots = kept;
	pthread_mutex_unlock(&c->lock);
}

void ebs_recent_snapshots_free(EbsController *c)
{
	for (size_t i = 0; i < c->n_recent_snapshots; i++) {
		free(c->recent_snapshots[i].name);
		ebs_snapshot_done(&c->recent_snapshots[i].snapshot);
	}
	free(c->recent_snapshots);
	c->recent_snapshots = NULL;
	c->n_recent_snapshots = 0;
}

/* ---- making ---- */

int ebs_snapshots_tagged(EbsController *c, const char *key, const char *value, usec_t deadline,
			 EbsSnapshot **ret, size_t *ret_n, char **ret_error)
{
	_cleanup_free_ char *filter = xasprintf("tag:%s", key);
	const char *values[] = {value}, *drivers[] = {c->driver_name}, *self[] = {"self"};
	Ec2Params p = {};
	XmlNode *reply = NULL;

	ec2_params_add_list(&p, "Owner", self, 1);
	ec2_params_add_filter(&p, filter, values, 1);
	ec2_params_add_filter(&p, "tag:" EBS_TAG_DRIVER, drivers, 1);
	int r = ebs_call(c, "DescribeSnapshots", &p, deadline, NULL, &reply, NULL, ret_error);
	ec2_params_done(&p);
	if (r < 0)
		return r;
	*ret_n = snapshots_parse(reply, ret);
	xml_free(reply);
	return 0;
}

int ebs_snapshot_find_tagged(EbsController *c, const char *key, const char *value, usec_t deadline,
			     EbsSnapshot *ret, char **ret_error)
{
	EbsSnapshot *s;
	size_t n;
	ssize_t best = -1;

	int r = ebs_snapshots_tagged(c, key, value, deadline, &s, &n, ret_error);
	if (r < 0)
		return r;
	/* the oldest: should two have been made, the one a caller may have seen first */
	for (size_t i = 0; i < n; i++)
		if (best < 0 || s[i].started < s[best].started)
			best = (ssize_t)i;
	if (best >= 0) {
		*ret = s[best];
		s[best] = (EbsSnapshot){};
	}
	snapshots_free(s, n);
	return best >= 0 ? 0 : -ENOENT;
}

int ebs_snapshot_make(EbsController *c, const char *volume_id, const Strmap *tags,
		      const char *description, usec_t deadline, EbsSnapshot *ret, char **ret_error)
{
	Strmap all = {};
	Ec2Params p = {};
	Ec2Error e = {};
	XmlNode *reply = NULL;

	strmap_copy(&all, tags);
	ebs_driver_tags(c, &all);
	ec2_params_add(&p, "VolumeId", volume_id);
	ec2_params_add(&p, "Description", description);
	ec2_params_add_tag_spec(&p, "snapshot", &all);
	strmap_done(&all);
	int r = ebs_call(c, "CreateSnapshot", &p, deadline, NULL, &reply, &e, ret_error);
	ec2_params_done(&p);
	if (ebs_code_is(&e, "InvalidVolume.NotFound") ||
	    ebs_code_is(&e, "InvalidVolumeID.Malformed"))
		r = errorf(ret_error, -ENOENT, "source_volume_id: volume %s not found (%s)",
			   volume_id, e.code);
	else if (ebs_code_is(&e, "IncorrectState"))
		r = errorf(ret_error, -EBUSY, "source_volume_id: %s", e.message);
	ec2_error_done(&e);
	if (r < 0)
		return r;
	r = ebs_snapshot_from_xml(reply, ret);
	xml_free(reply);
	if (r < 0)
		return errorf(ret_error, -EPROTO,
			      "CreateSnapshot of %s: the reply has no snapshotId", volume_id);
	return 0;
}

static int snapshot_delete(EbsController *c, const char *id, usec_t deadline, bool *ret_found,
			   char **ret_error)
{
	Ec2Params p = {};
	Ec2Error e = {};

	ec2_params_add(&p, "SnapshotId", id);
	int r = ebs_call(c, "DeleteSnapshot", &p, deadline, NULL, NULL, &e, ret_error);
	ec2_params_done(&p);
	*ret_found = r == 0;
	if (r == -ENOENT || ebs_code_is(&e, "InvalidSnapshotID.Malformed"))
		r = 0; /* gone already: done */
	else if (r == -ENOTEMPTY)
		r = errorf(ret_error, r, "snapshot %s is in use: %s", id, e.message);
	ec2_error_done(&e);
	recent_forget(c, id);
	return r;
}

/* The snapshot of that name, made lately or found by its tag; one in state error is deleted
 * (a new one is made). 0 with it, -ENOENT when there is none. */
static int snapshot_existing(EbsController *c, const char *name, usec_t deadline, EbsSnapshot *ret,
			     char **ret_error)
{
	EbsSnapshot s = {};
	bool found;

	if (recent_find(c, name, NULL, &s)) {
		/* what EC2 says of it now, if it shows it already */
		_cleanup_free_ char *ignored = NULL;
		EbsSnapshot now = {};
		if (snapshot_describe(c, s.id, deadline, &now, &ignored) == 0) {
			ebs_snapshot_done(&s);
			s = now;
		}
	} else {
		int r = ebs_snapshot_find_tagged(c, EBS_TAG_SNAPSHOT_NAME, name, deadline, &s,
						 ret_error);
		if (r < 0)
			return r;
	}
	if (strcmp(s.state, "error") == 0) {
		log_debug("snapshot %s ('%s') is in state error: deleting it, making another", s.id,
			  name);
		int r = snapshot_delete(c, s.id, deadline, &found, ret_error);
		ebs_snapshot_done(&s);
		return r < 0 ? r : -ENOENT;
	}
	*ret = s;
	return 0;
}

/* An EBS snapshot is always in S3, off the node: what location: store asks for. */
int ebs_snapshot_location_check(const char *location, char **ret_error)
{
	if (location && strcmp(location, "store") != 0)
		return errorf(ret_error, -EINVAL,
			      "parameters: location: an EBS snapshot is kept in S3, off the node: "
			      "want store (or leave it out), got '%s'",
			      location);
	return 0;
}

int ebs_create_snapshot(EbsController *c, const BackendCreateSnapshot *r, BackendSnapshot *ret,
			char **ret_error)
{
	_cleanup_free_ char *description =
		xasprintf("Created by %s for %s", c->driver_name, r->name);
	usec_t deadline = ebs_deadline();
	EbsSnapshot s = {};
	Strmap tags = {};

	int e = ebs_snapshot_location_check(r->location, ret_error);
	if (e < 0)
		return e;
	e = snapshot_existing(c, r->name, deadline, &s, ret_error);
	if (e == 0) {
		ebs_snapshot_to_backend(&s, &c->extra_tags, ret);
		ebs_snapshot_done(&s);
		return -EEXIST;
	}
	if (e != -ENOENT)
		return e;
	strmap_set(&tags, EBS_TAG_SNAPSHOT_NAME, r->name);
	/* the user's tags, tagSpecification_N -> "key=value" */
	for (size_t i = 0; r->params && i < r->params->n; i++) {
		const char *kv = r->params->values[i], *eq = strchr(kv, '=');
		_cleanup_free_ char *key = eq ? xstrndup(kv, (size_t)(eq - kv)) : NULL;
		if (key)
			strmap_set(&tags, key, eq + 1);
	}
	e = ebs_snapshot_make(c, r->source_volume_id, &tags, description, deadline, &s, ret_error);
	strmap_done(&tags);
	if (e < 0)
		return e;
	recent_add(c, r->name, &s);
	ebs_snapshot_to_backend(&s, &c->extra_tags, ret);
	ebs_snapshot_done(&s);
	return 0;
}

int ebs_snapshot_remove(EbsController *c, const char *id, usec_t deadline, char **ret_error)
{
	bool found;
	return snapshot_delete(c, id, deadline, &found, ret_error);
}

int ebs_delete_snapshot(EbsController *c, const BackendRef *r, BackendDeleted *ret,
			char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	usec_t deadline = ebs_deadline();
	EbsSnapshot s = {};
	bool found;

	/* a member of a group goes with its group only; a snapshot EC2 does not show (gone, or
	 * not yet) is still DeleteSnapshot's to judge */
	int e = snapshot_describe(c, r->id, deadline, &s, &err);
	if (e < 0 && e != -ENOENT)
		return error_pass(e, &err, ret_error);
	const char *group = e == 0 ? strmap_get(&s.tags, EBS_TAG_GROUP_ID) : NULL;
	if (group) {
		e = errorf(ret_error, -ENOTEMPTY,
			   "snapshot %s belongs to group snapshot %s: delete the group", r->id,
			   group);
		ebs_snapshot_done(&s);
		return e;
	}
	ebs_snapshot_done(&s);
	e = snapshot_delete(c, r->id, deadline, &found, ret_error);
	if (e < 0)
		return e;
	*ret = (BackendDeleted){.found = found};
	return 0;
}

int ebs_get_snapshot(EbsController *c, const BackendRef *r, BackendSnapshot *ret, char **ret_error)
{
	EbsSnapshot s = {};

	int e = snapshot_describe(c, r->id, ebs_deadline(), &s, ret_error);
	if (e == -ENOENT && recent_find(c, NULL, r->id, &s))
		e = 0; /* made a moment ago: EC2 will show it */
	if (e < 0)
		return e;
	ebs_snapshot_to_backend(&s, &c->extra_tags, ret);
	ebs_snapshot_done(&s);
	return 0;
}

/* ---- ListSnapshots ---- */

static int snapshot_id_cmp(const void *a, const void *b)
{
	return strcmp(((const EbsSnapshot *)a)->id, ((const EbsSnapshot *)b)->id);
}

/* This driver's snapshots (of one volume, when given), sorted by id, paging through EC2's
 * NextToken. */
static int snapshots_list_all(EbsController *c, const char *volume_id, usec_t deadline,
			      EbsSnapshot **ret, size_t *ret_n, char **ret_error)
{
	_cleanup_free_ char *next = NULL;
	const char *drivers[] = {c->driver_name}, *self[] = {"self"}, *volumes[] = {volume_id};
	EbsSnapshot *all = NULL;
	size_t n = 0;

	do {
		Ec2Params p = {};
		XmlNode *reply = NULL;
		EbsSnapshot *s;

		ec2_params_add_list(&p, "Owner", self, 1);
		ec2_params_add_filter(&p, "tag:" EBS_TAG_DRIVER, drivers, 1);
		if (volume_id)
			ec2_params_add_filter(&p, "volume-id", volumes, 1);
		ec2_params_addf(&p, "MaxResults", "%d", LIST_PAGE);
		if (next)
			ec2_params_add(&p, "NextToken", next);
		int r = ebs_call(c, "DescribeSnapshots", &p, deadline, NULL, &reply, NULL,
				 ret_error);
		ec2_params_done(&p);
		if (r < 0) {
			snapshots_free(all, n);
			return r;
		}
		free(next);
		const char *token = xml_text(reply, "nextToken");
		next = token && *token ? xstrdup(token) : NULL;
		size_t m = snapshots_parse(reply, &s);
		xml_free(reply);
		all = xrealloc(all, (n + m + 1) * sizeof(EbsSnapshot));
		for (size_t i = 0; i < m; i++)
			all[n++] = s[i];
		free(s);
	} while (next);
	qsort_safe(all, n, sizeof(EbsSnapshot), snapshot_id_cmp);
	*ret = all;
	*ret_n = n;
	return 0;
}

static bool snapshot_id_valid(const char *s)
{
	if (strncmp(s, "snap-", 5) != 0 || strlen(s) < 13 || strlen(s) > 22)
		return false;
	for (const char *p = s + 5; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

/* Adds to the n sorted snapshots of *all those made lately that EC2 does not show yet (of
 * volume, when given): a snapshot just made is listed. Returns the new count. */
static size_t recent_merge(EbsController *c, const char *volume, EbsSnapshot **all, size_t n)
{
	size_t m = n;

	pthread_mutex_lock(&c->lock);
	recent_prune(c);
	for (size_t i = 0; i < c->n_recent_snapshots; i++) {
		const EbsSnapshot *x = &c->recent_snapshots[i].snapshot;
		bool listed = false;
		for (size_t k = 0; k < n && !listed; k++)
			listed = strcmp((*all)[k].id, x->id) == 0;
		if (listed || (volume && strcmp(x->volume_id, volume) != 0))
			continue;
		*all = xrealloc(*all, (m + 1) * sizeof(EbsSnapshot));
		ebs_snapshot_copy(x, &(*all)[m++]);
	}
	pthread_mutex_unlock(&c->lock);
	if (m > n)
		qsort(*all, m, sizeof(EbsSnapshot), snapshot_id_cmp);
	return m;
}

/* ListSnapshots of one snapshot id: it, or nothing (no such snapshot, another volume's). */
static int list_one(EbsController *c, const BackendListRequest *r, BackendSnapshotList *ret,
		    char **ret_error)
{
	EbsSnapshot s = {};

	*ret = (BackendSnapshotList){.snapshots = xnew0(BackendSnapshot, 1)};
	int e = snapshot_describe(c, r->snapshot_id, ebs_deadline(), &s, ret_error);
	if (e == -ENOENT && recent_find(c, NULL, r->snapshot_id, &s))
		e = 0; /* made a moment ago: EC2 will show it */
	if (e == -ENOENT)
		return 0;
	if (e < 0) {
		backend_snapshot_list_done(ret);
		return e;
	}
	if (!r->source_volume_id || !*r->source_volume_id ||
	    strcmp(s.volume_id, r->source_volume_id) == 0)
		ebs_snapshot_to_backend(&s, &c->extra_tags, &ret->snapshots[ret->n_snapshots++]);
	ebs_snapshot_done(&s);
	return 0;
}

int ebs_list_snapshots(EbsController *c, const BackendListRequest *r, BackendSnapshotList *ret,
		       char **ret_error)
{
	const char *token = r->starting_token && *r->starting_token ? r->starting_token : NULL;
	BackendSnapshotList l = {};
	EbsSnapshot *all;
	size_t n, i = 0;

	if (token && !snapshot_id_valid(token))
		return errorf(ret_error, -EALREADY,
			      "starting_token: '%s' is not a token ListSnapshots gave", token);
	if (r->snapshot_id && *r->snapshot_id)
		return list_one(c, r, ret, ret_error);
	const char *volume =
		r->source_volume_id && *r->source_volume_id ? r->source_volume_id : NULL;
	int e = snapshots_list_all(c, volume, ebs_deadline(), &all, &n, ret_error);
	if (e < 0)
		return e;
	n = recent_merge(c, volume, &all, n);
	while (token && i < n && strcmp(all[i].id, token) <= 0)
		i++;
	size_t max = r->max_entries ?: n;
	l.snapshots = xnew0(BackendSnapshot, MIN(max, n - i) + 1);
	for (; i < n && l.n_snapshots < max; i++)
		ebs_snapshot_to_backend(&all[i], &c->extra_tags, &l.snapshots[l.n_snapshots++]);
	if (i < n)
		l.next_token = xstrdup(l.snapshots[l.n_snapshots - 1].id);
	snapshots_free(all, n);
	*ret = l;
	return 0;
}

/* ---- clones ---- */

int ebs_clone_snapshot(EbsController *c, const BackendCreateVolume *r, usec_t deadline,
		       char **ret_snapshot, char **ret_error)
{
	_cleanup_free_ char *description = xasprintf("Created by %s to clone %s into %s",
						     c->driver_name, r->source_id, r->name);
	EbsSnapshot s = {};
	bool found;

	int e = ebs_snapshot_find_tagged(c, EBS_TAG_CLONE_FOR, r->name, deadline, &s, ret_error);
	if (e == 0 && strcmp(s.state, "error") == 0) {
		e = snapshot_delete(c, s.id, deadline, &found, ret_error);
		ebs_snapshot_done(&s);
		if (e < 0)
			return e;
		e = -ENOENT;
	}
	if (e == -ENOENT) {
		Strmap tags = {};
		strmap_set(&tags, EBS_TAG_CLONE_FOR, r->name);
		e = ebs_snapshot_make(c, r->source_id, &tags, description, deadline, &s, ret_error);
		strmap_done(&tags);
		if (e == -ENOENT)
			e = errorf(ret_error, e, "volume_content_source: volume %s not found",
				   r->source_id);
	}
	if (e < 0)
		return e;
	if (strcmp(s.state, "completed") != 0)
		e = ebs_snapshot_wait_completed(c, s.id, deadline, ret_error);
	if (e == -EIO) {
		/* the next attempt takes another */
		_cleanup_free_ char *ignored = NULL;
		(void)snapshot_delete(c, s.id, deadline, &found, &ignored);
		e = errorf(ret_error, -EIO,
			   "volume_content_source: the snapshot of volume %s to clone it from "
			   "failed; retry",
			   r->source_id);
	}
	if (e == 0)
		*ret_snapshot = TAKE_PTR(s.id);
	ebs_snapshot_done(&s);
	return e;
}

void ebs_clone_done(EbsController *c, const char *snapshot_id, usec_t deadline)
{
	_cleanup_free_ char *err = NULL;
	bool found;

	if (snapshot_delete(c, snapshot_id, deadline, &found, &err) < 0)
		log_warning("the snapshot %s a clone was made from is left behind: %s", snapshot_id,
			    err);
}
