/* SPDX-License-Identifier: Apache-2.0 */
/* The EBS controller's start, what its files share, and volumes: create, delete, get, list,
 * capacity. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "digest.h"
#include "ebs-controller.h"
#include "error-util.h"
#include "failpoint.h"
#include "hash-util.h"
#include "log.h"
#include "strv.h"

/* CreateVolume's ClientToken generations: a name whose volume was deleted gets the next. */
#define TOKEN_GENERATIONS 8
/* How long a volume EC2 has under a client token may stay out of sight before the token is
 * taken for one whose volume is gone. */
#define MISMATCH_SEARCH (10 * USEC_PER_SEC)
#define LIST_PAGE 500

/* ---- start ---- */

static int volumes_fetch(void *userdata, char *const *ids, size_t n, usec_t deadline, EbsFound *ret,
			 char **ret_error);
static int names_fetch(void *userdata, char *const *names, size_t n, usec_t deadline, EbsFound *ret,
		       char **ret_error);
static void named_free(void *p);
int ebs_modifications_fetch(void *userdata, char *const *ids, size_t n, usec_t deadline,
			    EbsFound *ret, char **ret_error);

static void free_value(void *p)
{
	free(p);
}

int ebs_controller_new(const EbsControllerConfig *config, EbsController **ret, char **ret_error)
{
	_cleanup_free_ char *region = NULL, *err = NULL;
	EbsController *c;
	int r;

	Imds *imds = NULL;
	if (!config->imds_endpoint || *config->imds_endpoint)
		imds = imds_new(&(ImdsConfig){.endpoint = config->imds_endpoint});
	r = aws_region_discover(NULL, imds, now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC, &region,
				&err);
	if (r < 0) {
		imds_free(imds);
		return errorf(ret_error, r,
			      "EBS controller: no region: set AWS_REGION, or run on EC2 where the "
			      "instance metadata service tells it (%s)",
			      err ?: strerror(-r));
	}
	c = xnew0(EbsController, 1);
	c->driver_name = xstrdup(config->driver_name ?: "ebs.volplug.io");
	c->region = TAKE_PTR(region);
	c->imds = imds;
	if (config->extra_tags)
		strmap_copy(&c->extra_tags, config->extra_tags);
	c->credentials = aws_credentials_provider_new(&(AwsCredentialsConfig){
		.region = c->region,
		.imds_endpoint = config->imds_endpoint && *config->imds_endpoint
					 ? config->imds_endpoint
					 : NULL,
	});
	Ec2Config ec = config->ec2;
	ec.region = c->region;
	ec.endpoint = config->endpoint;
	ec.credentials = c->credentials;
	r = ec2_client_new(&ec, &c->ec2, &err);
	if (r < 0) {
		ebs_controller_free(c);
		return errorf(ret_error, r, "--ec2-endpoint: %s", err);
	}
	c->devnames = devnames_new(NULL);
	c->volumes = ebs_waiter_new(&(EbsWaiterConfig){
		.name = "DescribeVolumes",
		.fetch = volumes_fetch,
		.free_item = ebs_volume_free,
		.userdata = c,
	});
	c->names = ebs_waiter_new(&(EbsWaiterConfig){
		.name = "DescribeVolumes by name",
		.fetch = names_fetch,
		.free_item = named_free,
		.userdata = c,
	});
	c->modifications = ebs_waiter_new(&(EbsWaiterConfig){
		.name = "DescribeVolumesModifications",
		.fetch = ebs_modifications_fetch,
		.free_item = ebs_modification_free,
		.userdata = c,
	});
	c->snapshots = ebs_waiter_new(&(EbsWaiterConfig){
		.name = "DescribeSnapshots",
		.fetch = ebs_snapshots_fetch,
		.free_item = ebs_snapshot_free,
		.userdata = c,
	});
	pthread_mutex_init(&c->lock, NULL);
	pthread_mutex_init(&c->discover_lock, NULL);
	pthread_mutex_init(&c->probe_lock, NULL);
	c->instances = hashmap_new(free_value);
	c->recent_volumes = hashmap_new(free_value);
	log_debug("EBS controller: region %s, EC2 at %s, driver tag %s=%s", c->region,
		  ec2_client_endpoint(c->ec2), EBS_TAG_DRIVER, c->driver_name);
	*ret = c;
	return 0;
}

void ebs_controller_free(EbsController *c)
{
	if (!c)
		return;
	/* the pollers first: they call EC2 */
	ebs_waiter_free(c->volumes);
	ebs_waiter_free(c->names);
	ebs_waiter_free(c->modifications);
	ebs_waiter_free(c->snapshots);
	ec2_client_free(c->ec2);
	aws_credentials_provider_free(c->credentials);
	imds_free(c->imds);
	devnames_free(c->devnames);
	hashmap_free(c->instances);
	hashmap_free(c->recent_volumes);
	ebs_recent_snapshots_free(c);
	strv_free(c->zones);
	strmap_done(&c->extra_tags);
	free(c->driver_name);
	free(c->region);
	pthread_mutex_destroy(&c->lock);
	pthread_mutex_destroy(&c->discover_lock);
	pthread_mutex_destroy(&c->probe_lock);
	free(c->probe_error);
	free(c);
}

/* The last answer, under probe_lock. */
static int probe_answer(EbsController *c, char **ret_error)
{
	if (c->probe_result < 0 && ret_error)
		*ret_error = xstrdup(c->probe_error ?: strerror(-c->probe_result));
	return c->probe_result;
}

int ebs_controller_probe(EbsController *c, char **ret_error)
{
	_cleanup_free_ char *err = NULL;
	usec_t now = now_usec(CLOCK_MONOTONIC);
	Ec2Params p = {};
	int r;

	pthread_mutex_lock(&c->probe_lock);
	if (c->probing || (c->probed && now - c->probed < EBS_PROBE_INTERVAL)) {
		r = probe_answer(c, ret_error);
		pthread_mutex_unlock(&c->probe_lock);
		return r;
	}
	c->probing = true;
	pthread_mutex_unlock(&c->probe_lock);

	const char *region[] = {c->region};
	ec2_params_add_filter(&p, "region-name", region, 1);
	/* within the Probe's own deadline too: the kubelet's liveness probe waits a second */
	r = ebs_call(c, "DescribeAvailabilityZones", &p,
		     MIN(now + EBS_PROBE_TIMEOUT, call_deadline()), NULL, NULL, NULL, &err);
	ec2_params_done(&p);
	if (r == -EAGAIN) {
		/* throttled or 5xx until the retries ran out: EC2 is there, and busy */
		log_debug("EBS controller probe: %s", err);
		r = 0;
	}

	pthread_mutex_lock(&c->probe_lock);
	c->probing = false;
	c->probed = now_usec(CLOCK_MONOTONIC);
	c->probe_result = r;
	free(c->probe_error);
	c->probe_error = r < 0 ? xasprintf("EC2 at %s does not answer the EBS controller: %s",
					   ec2_client_endpoint(c->ec2), err ?: strerror(-r))
			       : NULL;
	r = probe_answer(c, ret_error);
	pthread_mutex_unlock(&c->probe_lock);
	return r;
}

/* ---- shared ---- */

usec_t ebs_deadline(void)
{
	return MIN(call_deadline(), now_usec(CLOCK_MONOTONIC) + EBS_OPERATION_TIMEOUT);
}

int ebs_call(EbsController *c, const char *action, const Ec2Params *p, usec_t deadline,
	     const char *what, XmlNode **ret_reply, Ec2Error *ret_ec2, char **ret_error)
{
	Ec2Error e = {};
	XmlNode *reply = NULL;

	int r = ec2_call(c->ec2, action, p, deadline, &reply, &e);
	if (r < 0) {
		if (ret_error)
			errorf(ret_error, r, "%s: %s", what ?: action, e.message ?: strerror(-r));
		if (ret_ec2)
			*ret_ec2 = e;
		else
			ec2_error_done(&e);
		return r;
	}
	if (ret_reply)
		*ret_reply = reply;
	else
		xml_free(reply);
	return 0;
}

bool ebs_code_is(const Ec2Error *e, const char *code)
{
	return e->code && strcmp(e->code, code) == 0;
}

void ebs_driver_tags(EbsController *c, Strmap *tags)
{
	strmap_set(tags, EBS_TAG_DRIVER, c->driver_name);
	for (size_t i = 0; i < c->extra_tags.n; i++)
		if (!strmap_get(tags, c->extra_tags.keys[i]))
			strmap_set(tags, c->extra_tags.keys[i], c->extra_tags.values[i]);
}

/* Drops what is older than the window. Hold the lock. */
static void recent_prune(EbsController *c, const char *id)
{
	usec_t *at = hashmap_get(c->recent_volumes, id);
	if (at && now_usec(CLOCK_MONOTONIC) - *at > EBS_RECENT_WINDOW)
		free(hashmap_remove(c->recent_volumes, id));
}

void ebs_recent_volume_add(EbsController *c, const char *id)
{
	usec_t *at = xnew0(usec_t, 1);

	*at = now_usec(CLOCK_MONOTONIC);
	pthread_mutex_lock(&c->lock);
	free(hashmap_remove(c->recent_volumes, id));
	(void)hashmap_put(c->recent_volumes, id, at);
	pthread_mutex_unlock(&c->lock);
}

void ebs_recent_volume_forget(EbsController *c, const char *id)
{
	pthread_mutex_lock(&c->lock);
	free(hashmap_remove(c->recent_volumes, id));
	pthread_mutex_unlock(&c->lock);
}

bool ebs_recent_volume(EbsController *c, const char *id)
{
	pthread_mutex_lock(&c->lock);
	recent_prune(c, id);
	bool recent = hashmap_contains(c->recent_volumes, id);
	pthread_mutex_unlock(&c->lock);
	return recent;
}

/* ---- describing and waiting ---- */

static bool volume_id_valid(const char *s);

/* Parses every volumeSet item of reply into a heap array. */
static size_t volumes_parse(const XmlNode *reply, EbsVolume **ret)
{
	EbsVolume *v = NULL;
	size_t n = 0;

	XML_FOREACH (item, reply, "volumeSet/item") {
		v = xrealloc(v, (n + 1) * sizeof(EbsVolume));
		if (ebs_volume_from_xml(item, &v[n]) == 0)
			n++;
	}
	*ret = v;
	return n;
}

static void volumes_free(EbsVolume *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ebs_volume_done(&v[i]);
	free(v);
}

/* The waiter's call: the volumes asked about, by a filter, which leaves out what EC2 does not
 * show (yet) instead of failing the whole call. */
static int volumes_fetch(void *userdata, char *const *ids, size_t n, usec_t deadline, EbsFound *ret,
			 char **ret_error)
{
	EbsController *c = userdata;
	Ec2Params p = {};
	XmlNode *reply = NULL;
	EbsVolume *v;

	ec2_params_add_filter(&p, "volume-id", (const char *const *)ids, n);
	int r = ebs_call(c, "DescribeVolumes", &p, deadline, NULL, &reply, NULL, ret_error);
	ec2_params_done(&p);
	if (r < 0)
		return r;
	size_t m = volumes_parse(reply, &v);
	xml_free(reply);
	*ret = (EbsFound){.ids = xnew0(char *, m), .items = xnew0(void *, m), .n = m};
	for (size_t i = 0; i < m; i++) {
		EbsVolume *item = xnew0(EbsVolume, 1);
		*item = v[i];
		ret->ids[i] = xstrdup(item->id);
		ret->items[i] = item;
	}
	free(v);
	return 0;
}

typedef struct StateWait {
	const char *const *states;
	EbsVolume seen; /* as last seen */
	bool have;
} StateWait;

static int state_check(const void *item, void *userdata, char **ret_error)
{
	StateWait *s = userdata;
	const EbsVolume *v = item;

	if (!v)
		return 0; /* not visible yet */
	ebs_volume_done(&s->seen);
	ebs_volume_copy(v, &s->seen);
	s->have = true;
	for (const char *const *st = s->states; *st; st++)
		if (strcmp(v->state, *st) == 0)
			return 1;
	if (strcmp(v->state, "error") == 0)
		return errorf(ret_error, -EIO, "volume %s is in state error", v->id);
	if (strcmp(v->state, "deleting") == 0 || strcmp(v->state, "deleted") == 0)
		return errorf(ret_error, -ENOENT, "volume %s is being deleted", v->id);
	return 0;
}

int ebs_volume_wait_state(EbsController *c, const char *id, const char *kind,
			  const char *const *states, bool gone_ok, usec_t deadline, EbsVolume *ret,
			  char **ret_error)
{
	StateWait s = {.states = states};

	int r = ebs_waiter_wait(c->volumes, id, kind, state_check, &s, deadline, ret_error);
	if (r == -ENOENT && gone_ok)
		r = 0;
	if (r == -ETIMEDOUT && s.have)
		errorf(ret_error, r,
		       "volume %s is still %s after waiting for %s (deadline reached)", id,
		       s.seen.state, states[0]);
	if (r == 0 && ret)
		*ret = s.seen;
	else
		ebs_volume_done(&s.seen);
	return r;
}

/* DescribeVolumes of one id, as EC2 answers now: -ENOENT (with EC2's code in the message) when
 * it shows none. */
static int volume_describe_now(EbsController *c, const char *id, usec_t deadline, EbsVolume *ret,
			       char **ret_error)
{
	Ec2Params p = {};
	Ec2Error e = {};
	XmlNode *reply = NULL;
	EbsVolume *v;

	ec2_params_add(&p, "VolumeId.1", id);
	int r = ebs_call(c, "DescribeVolumes", &p, deadline, NULL, &reply, &e, ret_error);
	ec2_params_done(&p);
	if (r == -ENOENT || r == -EINVAL)
		/* not there, or no volume ID at all (InvalidVolumeID.Malformed) */
		r = errorf(ret_error, -ENOENT, "volume %s not found (%s)", id,
			   e.code ?: "not found");
	ec2_error_done(&e);
	if (r < 0)
		return r;
	size_t n = volumes_parse(reply, &v);
	xml_free(reply);
	if (n == 0) {
		volumes_free(v, n);
		return errorf(ret_error, -ENOENT, "volume %s not found", id);
	}
	*ret = v[0];
	for (size_t i = 1; i < n; i++)
		ebs_volume_done(&v[i]);
	free(v);
	return 0;
}

int ebs_volume_describe(EbsController *c, const char *id, const char *field, usec_t deadline,
			EbsVolume *ret, char **ret_error)
{
	static const char *const any[] = {"creating", "available", "in-use", "error", NULL};
	_cleanup_free_ char *err = NULL;

	int r = volume_describe_now(c, id, deadline, ret, &err);
	if (r == -ENOENT && ebs_recent_volume(c, id))
		/* made a moment ago: EC2 will show it */
		return ebs_volume_wait_state(
			c, id, "visible", any, false,
			MIN(deadline, now_usec(CLOCK_MONOTONIC) + EBS_VISIBLE_WAIT), ret,
			ret_error);
	if (r == -ENOENT)
		return errorf(ret_error, r, "%s: %s", field, err);
	if (r < 0)
		return error_pass(r, &err, ret_error);
	return 0;
}

typedef struct Look {
	EbsVolume seen;
	bool have;
} Look;

static int look_check(const void *item, void *userdata, char **ret_error _unused_)
{
	Look *l = userdata;

	if (item) {
		ebs_volume_copy(item, &l->seen);
		l->have = true;
	}
	return 1;
}

int ebs_volume_look(EbsController *c, const char *id, const char *field, usec_t deadline,
		    EbsVolume *ret, char **ret_error)
{
	Look l = {};

	/* An ID of another shape would fail the whole batch (InvalidVolumeID.Malformed). */
	if (!volume_id_valid(id))
		return errorf(ret_error, -ENOENT, "%s: volume %s not found (not a volume ID)",
			      field, id);
	int r = ebs_waiter_look(c->volumes, id, look_check, &l, deadline, ret_error);
	if (r < 0)
		return r;
	if (!l.have)
		/* made a moment ago and not shown yet, or not there: as describe says */
		return ebs_volume_describe(c, id, field, deadline, ret, ret_error);
	*ret = l.seen;
	return 0;
}

/* ---- volumes by name ---- */

/* What a poll by name found of one name: this driver's live volumes of that name. */
typedef struct Named {
	EbsVolume *volumes;
	size_t n;
} Named;

static void named_free(void *p)
{
	Named *x = p;

	volumes_free(x->volumes, x->n);
	free(x);
}

static bool volume_live(const EbsVolume *v)
{
	return strcmp(v->state, "deleting") != 0 && strcmp(v->state, "deleted") != 0;
}

/* The names waiter's call: one DescribeVolumes by this driver's tag and the names' tag (EC2
 * takes 200 values a filter, the waiter's batch), an item for every name asked. */
static int names_fetch(void *userdata, char *const *names, size_t n, usec_t deadline, EbsFound *ret,
		       char **ret_error)
{
	EbsController *c = userdata;
	const char *drivers[] = {c->driver_name};
	_cleanup_free_ char *next = NULL;
	Named **found = xnew0(Named *, n);

	for (size_t i = 0; i < n; i++)
		found[i] = xnew0(Named, 1);
	do {
		Ec2Params p = {};
		XmlNode *reply = NULL;
		EbsVolume *v;

		ec2_params_add_filter(&p, "tag:" EBS_TAG_VOLUME_NAME, (const char *const *)names,
				      n);
		ec2_params_add_filter(&p, "tag:" EBS_TAG_DRIVER, drivers, 1);
		if (next)
			ec2_params_add(&p, "NextToken", next);
		int r = ebs_call(c, "DescribeVolumes", &p, deadline, "DescribeVolumes by name",
				 &reply, NULL, ret_error);
		ec2_params_done(&p);
		if (r < 0) {
			for (size_t i = 0; i < n; i++)
				named_free(found[i]);
			free(found);
			return r;
		}
		free(next);
		const char *token = xml_text(reply, "nextToken");
		next = token && *token ? xstrdup(token) : NULL;
		size_t m = volumes_parse(reply, &v);
		xml_free(reply);
		for (size_t k = 0; k < m; k++) {
			/* a filter value may hold wildcards: only the exact name counts */
			const char *name = strmap_get(&v[k].tags, EBS_TAG_VOLUME_NAME);
			Named *x = NULL;
			for (size_t i = 0; name && i < n && !x; i++)
				if (strcmp(names[i], name) == 0)
					x = found[i];
			if (!x || !volume_live(&v[k])) {
				ebs_volume_done(&v[k]);
				continue;
			}
			x->volumes = xrealloc(x->volumes, (x->n + 1) * sizeof(EbsVolume));
			x->volumes[x->n++] = v[k];
		}
		free(v);
	} while (next);
	*ret = (EbsFound){.ids = xnew0(char *, n), .items = (void **)found, .n = n};
	for (size_t i = 0; i < n; i++)
		ret->ids[i] = xstrdup(names[i]);
	return 0;
}

static int named_check(const void *item, void *userdata, char **ret_error _unused_)
{
	const Named *x = item;
	Look *l = userdata;
	ssize_t best = -1;

	for (size_t i = 0; x && i < x->n; i++)
		if (best < 0 || x->volumes[i].created < x->volumes[best].created)
			best = (ssize_t)i;
	if (best >= 0) {
		ebs_volume_copy(&x->volumes[best], &l->seen);
		l->have = true;
	}
	return 1;
}

int ebs_volume_find_named(EbsController *c, const char *name, usec_t deadline, EbsVolume *ret,
			  char **ret_error)
{
	Look l = {};

	int r = ebs_waiter_look(c->names, name, named_check, &l, deadline, ret_error);
	if (r < 0)
		return r;
	if (!l.have)
		return -ENOENT;
	*ret = l.seen;
	return 0;
}

/* ---- zones ---- */

static char **zones_cached(EbsController *c)
{
	pthread_mutex_lock(&c->lock);
	char **zones = c->zones;
	pthread_mutex_unlock(&c->lock);
	return zones;
}

static int zones_fetch(EbsController *c, usec_t deadline, char ***ret, char **ret_error);

/* The region's zones (borrowed: kept for the controller's life), asked once. */
static int zones_get(EbsController *c, usec_t deadline, char ***ret, char **ret_error)
{
	if ((*ret = zones_cached(c)))
		return 0;
	pthread_mutex_lock(&c->discover_lock);
	int r = (*ret = zones_cached(c)) ? 0 : zones_fetch(c, deadline, ret, ret_error);
	pthread_mutex_unlock(&c->discover_lock);
	return r;
}

static int zones_fetch(EbsController *c, usec_t deadline, char ***ret, char **ret_error)
{
	XmlNode *reply = NULL;
	char **zones = NULL;
	size_t n = 0, cap = 0;

	int r = ebs_call(c, "DescribeAvailabilityZones", NULL, deadline, NULL, &reply, NULL,
			 ret_error);
	if (r < 0)
		return r;
	XML_FOREACH (z, reply, "availabilityZoneInfo/item") {
		const char *name = xml_text(z, "zoneName");
		if (name && *name)
			strv_push(&zones, &n, &cap, xstrdup(name));
	}
	xml_free(reply);
	if (n == 0) {
		strv_free(zones);
		return errorf(ret_error, -EIO, "DescribeAvailabilityZones: region %s has no zone",
			      c->region);
	}
	pthread_mutex_lock(&c->lock);
	if (!c->zones)
		c->zones = zones;
	else
		strv_free(zones);
	*ret = c->zones;
	pthread_mutex_unlock(&c->lock);
	return 0;
}

static bool zone_in(char *const *zones, const char *zone)
{
	for (char *const *z = zones; z && *z; z++)
		if (strcmp(*z, zone) == 0)
			return true;
	return false;
}

/* The zones of a list of segments, in order (those the region has), and whether any named
 * one (*ret_named) or names one the region lacks (*ret_missing, the first). */
static int zones_of(const BackendTopology *t, size_t n, const char *field, char *const *region,
		    char ***ret, bool *ret_named, const char **ret_missing, char **ret_error)
{
	char **zones = NULL;
	size_t k = 0, cap = 0;

	*ret_named = false;
	*ret_missing = NULL;
	for (size_t i = 0; i < n; i++) {
		bool conflict;
		const char *z = ebs_topology_zone(&t[i], &conflict);
		if (conflict) {
			strv_free(zones);
			return errorf(
				ret_error, -EINVAL,
				"accessibility_requirements.%s[%zu]: names two different zones",
				field, i);
		}
		if (!z)
			continue;
		*ret_named = true;
		if (!zone_in(region, z))
			*ret_missing = *ret_missing ?: z;
		else if (!zone_in(zones, z))
			strv_push(&zones, &k, &cap, xstrdup(z));
	}
	*ret = zones;
	return 0;
}

/* Where a new volume goes: the first preferred zone it may go to, else one of the requisite
 * zones (or of the region's), picked by its name so that a retry picks the same. */
static int pick_zone(EbsController *c, const BackendCreateVolume *r, usec_t deadline,
		     char **ret_zone, char **ret_error)
{
	_cleanup_strv_free_ char **requisite = NULL, **preferred = NULL;
	char **region;
	const char *missing, *pref_missing;
	bool named, pref_named;

	int e = zones_get(c, deadline, &region, ret_error);
	if (e < 0)
		return e;
	if ((e = zones_of(r->requisite, r->n_requisite, "requisite", region, &requisite, &named,
			  &missing, ret_error)) < 0 ||
	    (e = zones_of(r->preferred, r->n_preferred, "preferred", region, &preferred,
			  &pref_named, &pref_missing, ret_error)) < 0)
		return e;
	if (named && !requisite) {
		_cleanup_free_ char *all = NULL;
		for (char **z = region; *z; z++) {
			char *s = xasprintf("%s%s%s", all ?: "", all ? ", " : "", *z);
			free(all);
			all = s;
		}
		return errorf(ret_error, -ENOSPC,
			      "accessibility_requirements: no requisite zone is one of region %s "
			      "(%s is not; its zones: %s)",
			      c->region, missing, all);
	}
	for (char **z = preferred; z && *z; z++)
		if (!requisite || zone_in(requisite, *z)) {
			*ret_zone = xstrdup(*z);
			return 0;
		}
	char **pool = requisite ?: region;
	size_t n = strv_length(pool);
	*ret_zone = xstrdup(pool[hash_mix64(fnv1a64_string(r->name, 0)) % n]);
	return 0;
}

/* ---- CreateVolume ---- */

/* The ClientToken of a name's generation: hex SHA-256, 64 characters, EC2's most. */
static void client_token(const char *name, unsigned gen, char ret[static 65])
{
	_cleanup_free_ char *input = gen ? xasprintf("%s\n%u", name, gen) : xstrdup(name);

	digest_sha256_hex(input, strlen(input), ret);
}

/* The tags of a new volume, in a fixed order (they are part of what the ClientToken stands
 * for). */
static void create_tags(EbsController *c, const BackendCreateVolume *r, Strmap *tags)
{
	_cleanup_free_ char *node = ebs_node_params_encode(r->params);

	strmap_set(tags, EBS_TAG_VOLUME_NAME, r->name);
	ebs_driver_tags(c, tags);
	if (*node)
		strmap_set(tags, EBS_TAG_PARAMETERS, node);
	if (!r->access.block && r->access.fstype && *r->access.fstype)
		strmap_set(tags, EBS_TAG_FSTYPE, r->access.fstype);
	if (r->params->kms_key_id && strlen(r->params->kms_key_id) <= 256)
		strmap_set(tags, EBS_TAG_KMS_KEY, r->params->kms_key_id);
	if (r->source_kind && strcmp(r->source_kind, "volume") == 0)
		strmap_set(tags, EBS_TAG_SOURCE_VOLUME, r->source_id);
	for (size_t i = 0; i < r->params->n_tags; i++)
		strmap_set(tags, r->params->tags[i].key, r->params->tags[i].value);
}

static bool type_has_iops(const char *type)
{
	return strcmp(type, "gp3") == 0 || strcmp(type, "io1") == 0 || strcmp(type, "io2") == 0;
}

static void create_params(EbsController *c, const BackendCreateVolume *r, const char *zone,
			  const char *snapshot_id, Ec2Params *p)
{
	Strmap tags = {};

	ec2_params_add(p, "AvailabilityZone", zone);
	ec2_params_addf(p, "Size", "%llu", (unsigned long long)((r->size + EBS_GIB - 1) / EBS_GIB));
	ec2_params_add(p, "VolumeType", r->params->type);
	if (type_has_iops(r->params->type) && r->params->iops)
		ec2_params_addf(p, "Iops", "%u", r->params->iops);
	if (strcmp(r->params->type, "gp3") == 0 && r->params->throughput)
		ec2_params_addf(p, "Throughput", "%u", r->params->throughput);
	if (r->params->encrypted)
		ec2_params_add(p, "Encrypted", "true");
	if (r->params->kms_key_id)
		ec2_params_add(p, "KmsKeyId", r->params->kms_key_id);
	if (snapshot_id)
		ec2_params_add(p, "SnapshotId", snapshot_id);
	/* EC2 refuses it without a snapshot, as the EBS driver leaves it to EC2 to say */
	if (r->params->initialization_rate)
		ec2_params_addf(p, "VolumeInitializationRate", "%u",
				r->params->initialization_rate);
	if (r->access.multi_node)
		ec2_params_add(p, "MultiAttachEnabled", "true");
	create_tags(c, r, &tags);
	ec2_params_add_tag_spec(p, "volume", &tags);
	strmap_done(&tags);
}

/* This driver's live volumes named name (DescribeVolumes by tag), the oldest first in *ret. */
static int volume_find_by_name(EbsController *c, const char *name, usec_t deadline, EbsVolume *ret,
			       char **ret_error)
{
	Ec2Params p = {};
	XmlNode *reply = NULL;
	EbsVolume *v;
	const char *names[] = {name}, *drivers[] = {c->driver_name};
	ssize_t best = -1;

	ec2_params_add_filter(&p, "tag:" EBS_TAG_VOLUME_NAME, names, 1);
	ec2_params_add_filter(&p, "tag:" EBS_TAG_DRIVER, drivers, 1);
	int r = ebs_call(c, "DescribeVolumes", &p, deadline, NULL, &reply, NULL, ret_error);
	ec2_params_done(&p);
	if (r < 0)
		return r;
	size_t n = volumes_parse(reply, &v);
	xml_free(reply);
	for (size_t i = 0; i < n; i++)
		if (strcmp(v[i].state, "deleting") != 0 && strcmp(v[i].state, "deleted") != 0 &&
		    (best < 0 || v[i].created < v[best].created))
			best = (ssize_t)i;
	if (best >= 0) {
		*ret = v[best];
		v[best] = (EbsVolume){};
	}
	volumes_free(v, n);
	return best >= 0 ? 0 : -ENOENT;
}

/* CreateVolume answered IdempotentParameterMismatch: the token stands for another request.
 * 0 with the live volume of that name (*ret: the caller compares), 1 when the token's volume
 * is gone (the next generation may be taken), or an error. */
static int create_mismatch(EbsController *c, const char *name, const Ec2Error *e, usec_t deadline,
			   EbsVolume *ret, char **ret_error)
{
	bool deleted = e->message && strstr(e->message, "already deleted");
	usec_t until = MIN(deadline, now_usec(CLOCK_MONOTONIC) + MISMATCH_SEARCH);
	usec_t pause = 200 * USEC_PER_MSEC;

	for (;;) {
		int r = volume_find_by_name(c, name, deadline, ret, ret_error);
		if (r != -ENOENT)
			return r;
		/* EC2 does not show a new volume at once: look again before taking the token
		 * for one whose volume is gone, unless EC2 said so. */
		if (deleted || now_usec(CLOCK_MONOTONIC) + pause > until)
			return 1;
		usec_t wake = now_usec(CLOCK_MONOTONIC) + pause;
		struct timespec ts = {.tv_sec = (time_t)(wake / USEC_PER_SEC),
				      .tv_nsec = (long)(wake % USEC_PER_SEC * NSEC_PER_USEC)};
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
		pause *= 2;
	}
}

/* What a failed CreateVolume tells the user. */
static int create_failed(EbsController *c, const BackendCreateVolume *r, const char *zone, int e,
			 const Ec2Error *ec2, char **ret_error)
{
	const char *msg = ec2->message ?: strerror(-e);

	if (ebs_code_is(ec2, "InvalidZone.NotFound"))
		return errorf(ret_error, -ENOSPC,
			      "accessibility_requirements: zone %s is not one of region %s: %s",
			      zone, c->region, msg);
	if (ebs_code_is(ec2, "InvalidSnapshot.NotFound") ||
	    ebs_code_is(ec2, "InvalidSnapshotID.Malformed"))
		return errorf(ret_error, -ENOENT,
			      "volume_content_source: snapshot %s not found: %s", r->source_id,
			      msg);
	if (e == -EINVAL)
		return errorf(ret_error, e, "parameters: CreateVolume refused them: %s", msg);
	return errorf(ret_error, e, "CreateVolume of '%s' in %s: %s", r->name, zone, msg);
}

/* CreateVolume with the name's tokens: 0 with the volume (as CreateVolume answered), -EEXIST
 * with a live volume of that name made with other arguments, or an error. */
static int create_call(EbsController *c, const BackendCreateVolume *r, const char *zone,
		       const char *snapshot_id, usec_t deadline, EbsVolume *ret, char **ret_error)
{
	for (unsigned gen = 0; gen < TOKEN_GENERATIONS; gen++) {
		Ec2Params p = {};
		Ec2Error e = {};
		XmlNode *reply = NULL;
		char token[65] = "";

		create_params(c, r, zone, snapshot_id, &p);
		client_token(r->name, gen, token);
		ec2_params_add(&p, "ClientToken", token);
		int k = ebs_call(c, "CreateVolume", &p, deadline, NULL, &reply, &e, NULL);
		ec2_params_done(&p);
		if (k == 0) {
			k = ebs_volume_from_xml(reply, ret);
			xml_free(reply);
			return k < 0 ? errorf(ret_error, -EPROTO,
					      "CreateVolume of '%s': the reply has no volumeId",
					      r->name)
				     : 0;
		}
		if (!ebs_code_is(&e, "IdempotentParameterMismatch")) {
			k = create_failed(c, r, zone, k, &e, ret_error);
			ec2_error_done(&e);
			return k;
		}
		k = create_mismatch(c, r->name, &e, deadline, ret, ret_error);
		ec2_error_done(&e);
		if (k <= 0)
			return k == 0 ? -EEXIST : k;
		log_debug("volume '%s': the volume of ClientToken generation %u is gone, taking "
			  "the next",
			  r->name, gen);
	}
	return errorf(ret_error, -EEXIST,
		      "volume '%s': every ClientToken of the name was used by volumes since "
		      "deleted",
		      r->name);
}

/* A create that ended in state error: the volume goes (its token with it), the CO retries. */
static int create_errored(EbsController *c, const BackendCreateVolume *r, const char *id,
			  usec_t deadline, char **ret_error)
{
	Ec2Params p = {};
	_cleanup_free_ char *err = NULL;

	ec2_params_add(&p, "VolumeId", id);
	int e = ebs_call(c, "DeleteVolume", &p, deadline, NULL, NULL, NULL, &err);
	ec2_params_done(&p);
	if (e < 0)
		log_debug("volume %s ('%s') went to state error and deleting it failed: %s", id,
			  r->name, err);
	return errorf(ret_error, -EIO,
		      "volume %s ('%s') went to state error: EC2 could not make it; %s", id,
		      r->name, e < 0 ? "deleting it failed, retry" : "it was deleted, retry");
}

/* A volume of the name exists (made by another request, or by this one before a restart or
 * a deadline): -EEXIST with it once it is made, for the caller to compare. */
static int create_existing(EbsController *c, EbsVolume *v, usec_t deadline, BackendVolume *ret,
			   char **ret_error)
{
	static const char *const settled[] = {"available", "in-use", NULL};
	EbsVolume now = {};

	if (strcmp(v->state, "creating") == 0) {
		int e = ebs_volume_wait_state(c, v->id, "create", settled, false, deadline, &now,
					      ret_error);
		if (e < 0)
			return e;
		ebs_volume_done(v);
		*v = now;
	}
	ebs_volume_to_backend(v, &c->extra_tags, ret);
	return -EEXIST;
}

int ebs_create_volume(EbsController *c, const BackendCreateVolume *r, BackendVolume *ret,
		      char **ret_error)
{
	/* in-use: the ClientToken's volume, made by an earlier attempt and published since */
	static const char *const available[] = {"available", "in-use", NULL};
	_cleanup_free_ char *zone = NULL, *clone_snapshot = NULL;
	usec_t deadline = ebs_deadline();
	EbsVolume made = {}, v = {};
	bool clone = r->source_kind && strcmp(r->source_kind, "volume") == 0;
	int e;

	if (r->params->directory)
		/* an EBS volume is a device: a directory of the host's filesystem is a pool's */
		return errorf(ret_error, -EINVAL,
			      "parameters: volumeKind: directory: EBS volumes are devices (only "
			      "pool volumes can be directories)");
	if ((e = pick_zone(c, r, deadline, &zone, ret_error)) < 0)
		return e;
	/* This driver's volume of the name first, whatever EC2 makes of a ClientToken (the second
	 * line, for a volume EC2 does not show yet); a clone's snapshot may be gone by now. */
	e = ebs_volume_find_named(c, r->name, deadline, &made, ret_error);
	if (e == 0 && strcmp(made.state, "error") == 0)
		e = create_errored(c, r, made.id, deadline, ret_error);
	else if (e == 0)
		e = create_existing(c, &made, deadline, ret, ret_error);
	if (e == -ENOENT)
		e = clone ? ebs_clone_snapshot(c, r, deadline, &clone_snapshot, ret_error) : 0;
	if (e < 0) {
		ebs_volume_done(&made);
		return e;
	}
	const char *snapshot = clone ? clone_snapshot
			       : r->source_kind && strcmp(r->source_kind, "snapshot") == 0
				       ? r->source_id
				       : NULL;
	e = create_call(c, r, zone, snapshot, deadline, &made, ret_error);
	if (e == -EEXIST)
		e = create_existing(c, &made, deadline, ret, ret_error);
	if (e < 0) {
		ebs_volume_done(&made);
		return e;
	}
	ebs_recent_volume_add(c, made.id);
	failpoint("ebs-create-after-call");
	if (strcmp(made.state, "available") == 0 || strcmp(made.state, "in-use") == 0) {
		/* the ClientToken's volume, made by an earlier attempt */
		v = made;
		made = (EbsVolume){};
	} else
		e = ebs_volume_wait_state(c, made.id, "create", available, false, deadline, &v,
					  ret_error);
	if (e == -EIO)
		e = create_errored(c, r, made.id, deadline, ret_error);
	if (e == 0) {
		ebs_volume_to_backend(&v, &c->extra_tags, ret);
		if (clone)
			ebs_clone_done(c, clone_snapshot, deadline);
	}
	ebs_volume_done(&made);
	ebs_volume_done(&v);
	return e;
}

/* ---- DeleteVolume ---- */

int ebs_delete_volume(EbsController *c, const BackendRef *r, BackendDeleted *ret, char **ret_error)
{
	static const char *const settled[] = {"available", "in-use", NULL};
	usec_t deadline = ebs_deadline();
	_cleanup_free_ char *err = NULL;
	EbsVolume v = {};
	Ec2Params p = {};
	Ec2Error ec2 = {};

	/* Its name for the log, and what keeps it: a describe that finds nothing (deleted, or
	 * not visible yet) still lets DeleteVolume have the last word. */
	int e = volume_describe_now(c, r->id, deadline, &v, &err);
	if (e < 0 && e != -ENOENT)
		return error_pass(e, &err, ret_error);
	if (e == 0 && v.n_attachments > 0) {
		e = errorf(ret_error, -ENOTEMPTY,
			   "volume %s is attached to node %s (EC2 attachment %s): unpublish it "
			   "first",
			   r->id, v.attachments[0].instance_id, v.attachments[0].state);
		ebs_volume_done(&v);
		return e;
	}
	if (e == 0 && strcmp(v.state, "creating") == 0) {
		/* EC2 deletes no volume it is still making */
		EbsVolume now = {};
		e = ebs_volume_wait_state(c, r->id, "create", settled, true, deadline, &now,
					  ret_error);
		ebs_volume_done(&now);
		if (e < 0 && e != -EIO) {
			ebs_volume_done(&v);
			return e;
		}
	}
	ec2_params_add(&p, "VolumeId", r->id);
	e = ebs_call(c, "DeleteVolume", &p, deadline, NULL, NULL, &ec2, ret_error);
	ec2_params_done(&p);
	if (e == 0 || e == -ENOENT)
		ebs_recent_volume_forget(c, r->id);
	if (e == -ENOENT || ebs_code_is(&ec2, "InvalidVolumeID.Malformed")) {
		*ret = (BackendDeleted){}; /* gone already: success, as the spec asks */
		e = 0;
	} else if (e == -ENOTEMPTY)
		e = errorf(ret_error, e, "volume %s is attached to a node: unpublish it first (%s)",
			   r->id, ec2.message);
	else if (e == 0)
		*ret = (BackendDeleted){
			.found = true,
			.name = xstrdup(strmap_get(&v.tags, EBS_TAG_VOLUME_NAME) ?: ""),
		};
	ec2_error_done(&ec2);
	ebs_volume_done(&v);
	return e;
}

/* ---- GetVolume, ListVolumes ---- */

int ebs_get_volume(EbsController *c, const BackendRef *r, BackendVolume *ret, char **ret_error)
{
	EbsVolume v = {};

	int e = ebs_volume_describe(c, r->id, "volume_id", ebs_deadline(), &v, ret_error);
	if (e < 0)
		return e;
	ebs_volume_to_backend(&v, &c->extra_tags, ret);
	ebs_volume_done(&v);
	return 0;
}

static int volume_id_cmp(const void *a, const void *b)
{
	return strcmp(((const EbsVolume *)a)->id, ((const EbsVolume *)b)->id);
}

/* Every live volume of this driver, sorted by id, paging through EC2's NextToken. */
static int volumes_list_all(EbsController *c, usec_t deadline, EbsVolume **ret, size_t *ret_n,
			    char **ret_error)
{
	_cleanup_free_ char *next = NULL;
	const char *drivers[] = {c->driver_name};
	EbsVolume *all = NULL;
	size_t n = 0;

	do {
		Ec2Params p = {};
		XmlNode *reply = NULL;
		EbsVolume *v;

		ec2_params_add_filter(&p, "tag:" EBS_TAG_DRIVER, drivers, 1);
		ec2_params_addf(&p, "MaxResults", "%d", LIST_PAGE);
		if (next)
			ec2_params_add(&p, "NextToken", next);
		int r = ebs_call(c, "DescribeVolumes", &p, deadline, NULL, &reply, NULL, ret_error);
		ec2_params_done(&p);
		if (r < 0) {
			volumes_free(all, n);
			return r;
		}
		free(next);
		const char *token = xml_text(reply, "nextToken");
		next = token && *token ? xstrdup(token) : NULL;
		size_t m = volumes_parse(reply, &v);
		xml_free(reply);
		all = xrealloc(all, (n + m + 1) * sizeof(EbsVolume));
		for (size_t i = 0; i < m; i++)
			if (strcmp(v[i].state, "deleting") != 0 && strcmp(v[i].state, "deleted"))
				all[n++] = v[i];
			else
				ebs_volume_done(&v[i]);
		free(v);
	} while (next);
	qsort_safe(all, n, sizeof(EbsVolume), volume_id_cmp);
	*ret = all;
	*ret_n = n;
	return 0;
}

static bool volume_id_valid(const char *s)
{
	if (strncmp(s, "vol-", 4) != 0 || strlen(s) < 12 || strlen(s) > 21)
		return false;
	for (const char *p = s + 4; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int ebs_list_volumes(EbsController *c, const BackendListRequest *r, BackendVolumeList *ret,
		     char **ret_error)
{
	const char *token = r->starting_token && *r->starting_token ? r->starting_token : NULL;
	BackendVolumeList l = {};
	EbsVolume *all;
	size_t n, i = 0;

	/* The token is the last volume ID of the page before: paging holds when volumes come
	 * and go between pages. */
	if (token && !volume_id_valid(token))
		return errorf(ret_error, -EALREADY,
			      "starting_token: '%s' is not a token ListVolumes gave", token);
	int e = volumes_list_all(c, ebs_deadline(), &all, &n, ret_error);
	if (e < 0)
		return e;
	while (token && i < n && strcmp(all[i].id, token) <= 0)
		i++;
	size_t max = r->max_entries ?: n;
	l.volumes = xnew0(BackendVolume, MIN(max, n - i) + 1);
	for (; i < n && l.n_volumes < max; i++)
		ebs_volume_to_backend(&all[i], &c->extra_tags, &l.volumes[l.n_volumes++]);
	if (i < n)
		l.next_token = xstrdup(l.volumes[l.n_volumes - 1].id);
	volumes_free(all, n);
	*ret = l;
	return 0;
}

/* ---- GetCapacity ---- */

/* The largest and smallest volume of a type, in GiB. */
/* EBS has no pool to run out of: what can be made is one volume of the type's largest size
 * (the type the parameters name, else the default one), in a zone of the region (none
 * elsewhere). */
int ebs_get_capacity(EbsController *c, const BackendCapacityRequest *r, BackendCapacity *ret,
		     char **ret_error)
{
	uint64_t min = r->min_size, max = r->max_size;
	bool elsewhere = false;
	char **zones;
	int e;

	if (!max && (e = volume_type_sizes(VOLUME_TYPE_DEFAULT, &min, &max)) < 0)
		return e;
	if (r->topology) {
		bool conflict;
		const char *zone = ebs_topology_zone(r->topology, &conflict);
		e = zones_get(c, ebs_deadline(), &zones, ret_error);
		if (e < 0)
			return e;
		elsewhere = conflict || (zone && !zone_in(zones, zone));
	}
	*ret = (BackendCapacity){
		.available = elsewhere ? 0 : max,
		.maximum_volume_size = max,
		/* EBS sizes are whole GiB: the smallest one the range holds. */
		.minimum_volume_size = (min + EBS_GIB - 1) / EBS_GIB * EBS_GIB,
	};
	return 0;
}
