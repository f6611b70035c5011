/* SPDX-License-Identifier: Apache-2.0 */
/* Group snapshots over EC2: one snapshot per source volume, taken one after the other (so,
 * as the pool's, consistent per volume, not across volumes: EC2's CreateSnapshots takes
 * crash-consistent sets of one instance's volumes only), each tagged with the group's id,
 * name and its place in the group. The group's id is derived from its name, so a retry after
 * a deadline or a restart finds the members made so far and makes the rest. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "digest.h"
#include "ebs-controller.h"
#include "error-util.h"
#include "log.h"

#define GROUP_PREFIX "vgs-"

/* "vgs-" and 17 hex digits of SHA-256 of the driver and the name: an id of EC2's shape. */
static char *group_id_for(EbsController *c, const char *name)
{
	_cleanup_free_ char *input = xasprintf("%s\n%s", c->driver_name, name);
	char hex[2 * DIGEST_SHA256_LEN + 1];

	digest_sha256_hex(input, strlen(input), hex);
	hex[17] = 0;
	return xasprintf(GROUP_PREFIX "%s", hex);
}

static int member_index(const EbsSnapshot *s)
{
	const char *i = strmap_get(&s->tags, EBS_TAG_GROUP_INDEX);
	return i ? atoi(i) : 0;
}

static int member_cmp(const void *a, const void *b)
{
	return member_index(a) - member_index(b);
}

/* The members of group id (this driver's snapshots tagged with it), in their order. */
static int members_find(EbsController *c, const char *id, usec_t deadline, EbsSnapshot **ret,
			size_t *ret_n, char **ret_error)
{
	int r = ebs_snapshots_tagged(c, EBS_TAG_GROUP_ID, id, deadline, ret, ret_n, ret_error);
	if (r < 0)
		return r;
	qsort_safe(*ret, *ret_n, sizeof(EbsSnapshot), member_cmp);
	return 0;
}

static void members_free(EbsSnapshot *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ebs_snapshot_done(&s[i]);
	free(s);
}

static void group_to_backend(EbsController *c, const char *id, const EbsSnapshot *m, size_t n,
			     BackendGroup *ret)
{
	const char *name = n > 0 ? strmap_get(&m[0].tags, EBS_TAG_GROUP_NAME) : NULL;

	*ret = (BackendGroup){
		.id = xstrdup(id),
		.name = xstrdup(name ?: ""),
		.ready = true,
		.snapshots = xnew0(BackendSnapshot, n + 1),
		.n_snapshots = n,
	};
	for (size_t i = 0; i < n; i++) {
		ebs_snapshot_to_backend(&m[i], &c->extra_tags, &ret->snapshots[i]);
		free(ret->snapshots[i].group_id);
		ret->snapshots[i].group_id = xstrdup(id);
		ret->ready = ret->ready && ret->snapshots[i].ready;
		if (i == 0 || (int64_t)m[i].started * 1000 < ret->created_ns)
			ret->created_ns = (int64_t)m[i].started * 1000;
	}
}

static bool volume_asked(const BackendCreateGroup *r, const char *volume_id)
{
	for (size_t i = 0; i < r->n_volume_ids; i++)
		if (strcmp(r->volume_ids[i], volume_id) == 0)
			return true;
	return false;
}

static const EbsSnapshot *member_of(const EbsSnapshot *m, size_t n, const char *volume_id)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(m[i].volume_id, volume_id) == 0)
			return &m[i];
	return NULL;
}

int ebs_create_group(EbsController *c, const BackendCreateGroup *r, BackendGroup *ret,
		     char **ret_error)
{
	_cleanup_free_ char *id = group_id_for(c, r->name);
	usec_t deadline = ebs_deadline();
	EbsSnapshot *m = NULL;
	size_t n = 0;

	int e = ebs_snapshot_location_check(r->location, ret_error);
	if (e < 0)
		return e;
	e = members_find(c, id, deadline, &m, &n, ret_error);
	if (e < 0)
		return e;
	for (size_t i = 0; i < n; i++)
		if (!volume_asked(r, m[i].volume_id)) {
			/* another group of that name: the caller compares */
			group_to_backend(c, id, m, n, ret);
			members_free(m, n);
			return -EEXIST;
		}
	/* what an earlier attempt did not make yet */
	for (size_t i = 0; i < r->n_volume_ids && e == 0; i++) {
		if (member_of(m, n, r->volume_ids[i]))
			continue;
		_cleanup_free_ char *index = xasprintf("%zu", i);
		_cleanup_free_ char *description = xasprintf(
			"Created by %s for group snapshot %s (%s)", c->driver_name, r->name, id);
		Strmap tags = {};
		strmap_set(&tags, EBS_TAG_GROUP_ID, id);
		strmap_set(&tags, EBS_TAG_GROUP_NAME, r->name);
		strmap_set(&tags, EBS_TAG_GROUP_INDEX, index);
		for (size_t k = 0; r->params && k < r->params->n; k++) {
			const char *kv = r->params->values[k], *eq = strchr(kv, '=');
			_cleanup_free_ char *key = eq ? xstrndup(kv, (size_t)(eq - kv)) : NULL;
			if (key)
				strmap_set(&tags, key, eq + 1);
		}
		m = xrealloc(m, (n + 1) * sizeof(EbsSnapshot));
		e = ebs_snapshot_make(c, r->volume_ids[i], &tags, description, deadline, &m[n],
				      ret_error);
		if (e == 0)
			n++;
		else if (e == -ENOENT)
			e = errorf(ret_error, e, "source_volume_ids: volume %s not found",
				   r->volume_ids[i]);
		strmap_done(&tags);
	}
	if (e == 0) {
		qsort_safe(m, n, sizeof(EbsSnapshot), member_cmp);
		group_to_backend(c, id, m, n, ret);
	}
	members_free(m, n);
	return e;
}

/* The members of the group a request names, checked against its snapshot_ids (n 0: not
 * given). -ENOENT when the group has none. */
static int group_load(EbsController *c, const BackendGroupRequest *r, usec_t deadline,
		      EbsSnapshot **ret, size_t *ret_n, char **ret_error)
{
	EbsSnapshot *m = NULL;
	size_t n = 0;

	if (strncmp(r->id, GROUP_PREFIX, strlen(GROUP_PREFIX)) != 0)
		return errorf(ret_error, -ENOENT, "group snapshot %s not found", r->id);
	int e = members_find(c, r->id, deadline, &m, &n, ret_error);
	if (e < 0)
		return e;
	if (n == 0) {
		free(m);
		return errorf(ret_error, -ENOENT, "group snapshot %s not found", r->id);
	}
	bool match = r->n_snapshot_ids == 0 || r->n_snapshot_ids == n;
	for (size_t i = 0; match && i < r->n_snapshot_ids; i++) {
		bool found = false;
		for (size_t k = 0; k < n && !found; k++)
			found = strcmp(r->snapshot_ids[i], m[k].id) == 0;
		match = found;
	}
	if (!match) {
		members_free(m, n);
		return errorf(ret_error, -EINVAL,
			      "snapshot_ids: not the %zu snapshots of group snapshot %s", n, r->id);
	}
	*ret = m;
	*ret_n = n;
	return 0;
}

int ebs_get_group(EbsController *c, const BackendGroupRequest *r, BackendGroup *ret,
		  char **ret_error)
{
	EbsSnapshot *m;
	size_t n;

	int e = group_load(c, r, ebs_deadline(), &m, &n, ret_error);
	if (e < 0)
		return e;
	group_to_backend(c, r->id, m, n, ret);
	members_free(m, n);
	return 0;
}

int ebs_delete_group(EbsController *c, const BackendGroupRequest *r, BackendDeleted *ret,
		     char **ret_error)
{
	usec_t deadline = ebs_deadline();
	EbsSnapshot *m;
	size_t n;

	int e = group_load(c, r, deadline, &m, &n, ret_error);
	if (e == -ENOENT) {
		*ret = (BackendDeleted){}; /* gone already */
		return 0;
	}
	if (e < 0)
		return e;
	_cleanup_free_ char *name = xstrdup(strmap_get(&m[0].tags, EBS_TAG_GROUP_NAME) ?: "");
	for (size_t i = 0; i < n && e == 0; i++)
		e = ebs_snapshot_remove(c, m[i].id, deadline, ret_error);
	members_free(m, n);
	if (e < 0)
		return e;
	*ret = (BackendDeleted){.found = true, .name = TAKE_PTR(name), .n_members = n};
	return 0;
}
