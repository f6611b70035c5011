/* SPDX-License-Identifier: Apache-2.0 */
#include <pthread.h>
#include <string.h>

#include "alloc.h"
#include "log.h"
#include "metrics.h"
#include "registry.h"

#define QUALIFIED_NAME_MAX 63
#define DNS1123_SUBDOMAIN_MAX 253

struct FlexRegistry {
	pthread_mutex_t lock; /* guards entries, n, cap and generation; snapshots need no lock */
	FlexDriver **entries; /* sorted by name */
	size_t n, cap;
	uint64_t generation;
};

const char *flex_driver_state_to_string(FlexDriverState s)
{
	switch (s) {
	case FLEX_DRIVER_LOADED:
		return "loaded";
	case FLEX_DRIVER_FAILED:
		return "failed";
	case FLEX_DRIVER_REMOVED:
		return "removed";
	}
	return "unknown";
}

static bool is_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool is_lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])? */
static bool qualified_name_part_ok(const char *s, size_t n)
{
	if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)* */
static bool dns1123_subdomain_ok(const char *s, size_t n)
{
	size_t label = 0;

	if (n == 0 || n > DNS1123_SUBDOMAIN_MAX)
		return false;
	for (size_t i = 0; i <= n; i++) {
		if (i == n || s[i] == '.') {
			if (i == label || !is_lower_alnum(s[label]) || !is_lower_alnum(s[i - 1]))
				return false;
			label = i + 1;
		} else if (!is_lower_alnum(s[i]) && s[i] != '-')
			return false;
	}
	return true;
}

static int name_error(const char *name, const char *why, char **ret_error)
{
	if (ret_error)
		*ret_error = xasprintf("invalid driver name \"%s\": %s", name, why);
	return -EINVAL;
}

int flex_driver_name_validate(const char *name, char **ret_error)
{
	const char *slash = strchr(name, '/');
	const char *part = name;

	if (slash) {
		if (strchr(slash + 1, '/'))
			return name_error(name,
					  "a qualified name has at most one '/' (folder "
					  "\"vendor~driver\")",
					  ret_error);
		if (slash == name)
			return name_error(name, "the prefix part must not be empty", ret_error);
		if (!dns1123_subdomain_ok(name, (size_t)(slash - name)))
			return name_error(name,
					  "the prefix part must be a DNS subdomain: lower case "
					  "alphanumerics, '-' and '.', starting and ending with an "
					  "alphanumeric, at most 253 characters",
					  ret_error);
		part = slash + 1;
	}
	size_t n = strlen(part);
	if (n == 0)
		return name_error(name, "the name part must not be empty", ret_error);
	if (n > QUALIFIED_NAME_MAX)
		return name_error(name, "the name part must be no more than 63 characters",
				  ret_error);
	if (!qualified_name_part_ok(part, n))
		return name_error(name,
				  "the name part must consist of alphanumeric characters, '-', '_' "
				  "or '.', and must start and end with an alphanumeric character",
				  ret_error);
	return 0;
}

int flex_driver_folder_parse(const char *folder, char **ret_name, char **ret_exe_name,
			     char **ret_error)
{
	_cleanup_free_ char *name = xstrdup(folder);
	const char *tilde = strrchr(folder, '~');

	for (char *p = name; *p; p++)
		if (*p == '~')
			*p = '/';
	int r = flex_driver_name_validate(name, ret_error);
	if (r < 0) {
		*ret_name = TAKE_PTR(name);
		return r;
	}
	if (ret_exe_name)
		*ret_exe_name = xstrdup(tilde ? tilde + 1 : folder);
	*ret_name = TAKE_PTR(name);
	return 0;
}

char *flex_driver_name_to_folder(const char *name)
{
	char *f = xstrdup(name);
	for (char *p = f; *p; p++)
		if (*p == '/')
			*p = '~';
	return f;
}

FlexDriver *flex_driver_new(const char *name, const char *folder, const char *exe,
			    FlexDriverState state, const FlexCapabilities *caps, const char *error)
{
	FlexDriver *d = xnew0(FlexDriver, 1);

	d->name = xstrdup(name);
	d->folder = xstrdup(folder);
	d->exe = xstrdup(exe ?: "");
	d->state = state;
	d->capabilities = caps ? *caps : FLEX_CAPABILITIES_DEFAULT;
	d->error = state == FLEX_DRIVER_FAILED ? xstrdup(error ?: "init failed") : NULL;
	atomic_init(&d->n_ref, 1);
	atomic_init(&d->unsupported, 0);
	return d;
}

FlexDriver *flex_driver_ref(FlexDriver *d)
{
	if (d)
		atomic_fetch_add_explicit(&d->n_ref, 1, memory_order_relaxed);
	return d;
}

FlexDriver *flex_driver_unref(FlexDriver *d)
{
	if (!d || atomic_fetch_sub_explicit(&d->n_ref, 1, memory_order_acq_rel) != 1)
		return NULL;
	free(d->name);
	free(d->folder);
	free(d->exe);
	free(d->error);
	free(d);
	return NULL;
}

bool flex_driver_is_unsupported(const FlexDriver *d, FlexCommand cmd)
{
	if ((unsigned)cmd >= _FLEX_COMMAND_MAX)
		return false;
	return atomic_load_explicit(&((FlexDriver *)d)->unsupported, memory_order_relaxed) &
	       (1u << cmd);
}

int flex_driver_call(FlexDriver *d, const FlexCallConfig *cfg, FlexCommand cmd,
		     const FlexCallArgs *args, FlexReply *ret, char **ret_error)
{
	if (d->state != FLEX_DRIVER_LOADED) {
		if (ret_error)
			*ret_error = xasprintf("driver \"%s\" is %s%s%s", d->name,
					       flex_driver_state_to_string(d->state),
					       d->error ? ": " : "", d->error ?: "");
		return -ENOEXEC;
	}
	if (flex_driver_is_unsupported(d, cmd)) {
		if (ret_error)
			*ret_error = xasprintf("driver \"%s\" %s: Not supported (remembered)",
					       d->name, flex_command_to_string(cmd));
		return -EOPNOTSUPP;
	}
	int r = flex_call(d->name, d->exe, cfg, cmd, args, ret, ret_error);
	if (r == -EOPNOTSUPP)
		atomic_fetch_or_explicit(&d->unsupported, 1u << cmd, memory_order_relaxed);
	return r;
}

METRIC_DEFINE_FULL(driver_loaded, METRIC_GAUGE, "volplug_flex_driver_loaded",
		   "Flexvolume drivers found in the plugin directory: 1 loaded (its init "
		   "succeeded), 0 failed",
		   true, NULL, 0, "driver");

static void registry_collect(void *userdata)
{
	FlexRegistry *r = userdata;

	pthread_mutex_lock(&r->lock);
	for (size_t i = 0; i < r->n; i++)
		if (r->entries[i]->state != FLEX_DRIVER_REMOVED)
			metric_set(&driver_loaded, r->entries[i]->state == FLEX_DRIVER_LOADED,
				   r->entries[i]->name);
	pthread_mutex_unlock(&r->lock);
}

FlexRegistry *flex_registry_new(void)
{
	FlexRegistry *r = xnew0(FlexRegistry, 1);
	pthread_mutex_init(&r->lock, NULL);
	metrics_collector_add(registry_collect, r);
	return r;
}

FlexRegistry *flex_registry_free(FlexRegistry *r)
{
	if (!r)
		return NULL;
	metrics_collector_remove(registry_collect, r);
	for (size_t i = 0; i < r->n; i++)
		flex_driver_unref(r->entries[i]);
	free(r->entries);
	pthread_mutex_destroy(&r->lock);
	free(r);
	return NULL;
}

/* Index of name, or of where it would go; *found tells which. Lock held. */
static size_t find(FlexRegistry *r, const char *name, bool *found)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(r->entries[mid]->name, name);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = false;
	return lo;
}

/* Puts d in place; returns the snapshot it replaced (to unref outside the lock). Lock held. */
static FlexDriver *put_locked(FlexRegistry *r, FlexDriver *d)
{
	bool found;
	size_t i = find(r, d->name, &found);

	d->generation = ++r->generation;
	d->published = now_usec(CLOCK_REALTIME);
	if (found) {
		FlexDriver *old = r->entries[i];
		r->entries[i] = d;
		return old;
	}
	r->entries = xgrow(r->entries, &r->cap, r->n + 1, sizeof(*r->entries));
	memmove(r->entries + i + 1, r->entries + i, (r->n - i) * sizeof(*r->entries));
	r->entries[i] = d;
	r->n++;
	return NULL;
}

void flex_registry_publish(FlexRegistry *r, FlexDriver *d)
{
	pthread_mutex_lock(&r->lock);
	FlexDriver *old = put_locked(r, d);
	pthread_mutex_unlock(&r->lock);
	log_debug("flex registry: driver \"%s\" %s (generation %llu)", d->name,
		  flex_driver_state_to_string(d->state), (unsigned long long)d->generation);
	flex_driver_unref(old);
}

bool flex_registry_remove(FlexRegistry *r, const char *name)
{
	FlexDriver *old = NULL;
	bool found;

	pthread_mutex_lock(&r->lock);
	size_t i = find(r, name, &found);
	if (found && r->entries[i]->state != FLEX_DRIVER_REMOVED) {
		FlexDriver *cur = r->entries[i];
		FlexDriver *tomb = flex_driver_new(cur->name, cur->folder, cur->exe,
						   FLEX_DRIVER_REMOVED, NULL, NULL);
		old = put_locked(r, tomb);
	}
	pthread_mutex_unlock(&r->lock);
	if (old)
		log_debug("flex registry: driver \"%s\" removed", name);
	flex_driver_unref(old);
	return old != NULL;
}

int flex_registry_get(FlexRegistry *r, const char *name, FlexDriver **ret)
{
	FlexDriver *d = NULL;
	bool found;

	pthread_mutex_lock(&r->lock);
	size_t i = find(r, name, &found);
	if (found)
		d = flex_driver_ref(r->entries[i]);
	pthread_mutex_unlock(&r->lock);
	if (!d)
		return -ENOENT;
	*ret = d;
	return 0;
}

int flex_registry_get_loaded(FlexRegistry *r, const char *name, FlexDriver **ret, char **ret_error)
{
	_cleanup_flex_driver_ FlexDriver *d = NULL;

	if (flex_registry_get(r, name, &d) < 0) {
		if (ret_error)
			*ret_error = xasprintf("no Flexvolume driver \"%s\" is installed", name);
		return -ENOENT;
	}
	switch (d->state) {
	case FLEX_DRIVER_LOADED:
		*ret = TAKE_PTR(d);
		return 0;
	case FLEX_DRIVER_REMOVED:
		if (ret_error)
			*ret_error = xasprintf("Flexvolume driver \"%s\" was removed", name);
		return -ENOENT;
	case FLEX_DRIVER_FAILED:
	default:
		if (ret_error)
			*ret_error = xasprintf("Flexvolume driver \"%s\" is not usable: %s", name,
					       d->error ?: "failed");
		return -ENOEXEC;
	}
}

void flex_registry_list(FlexRegistry *r, FlexDriver ***ret, size_t *ret_n)
{
	pthread_mutex_lock(&r->lock);
	FlexDriver **l = xnew0(FlexDriver *, r->n + 1);
	for (size_t i = 0; i < r->n; i++)
		l[i] = flex_driver_ref(r->entries[i]);
	size_t n = r->n;
	pthread_mutex_unlock(&r->lock);
	*ret = l;
	*ret_n = n;
}

void flex_driver_list_free(FlexDriver **list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		flex_driver_unref(list[i]);
	free(list);
}

uint64_t flex_registry_generation(FlexRegistry *r)
{
	pthread_mutex_lock(&r->lock);
	uint64_t g = r->generation;
	pthread_mutex_unlock(&r->lock);
	return g;
}
