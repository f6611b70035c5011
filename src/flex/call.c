/* SPDX-License-Identifier: Apache-2.0 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "alloc.h"
#include "base64.h"
#include "call.h"
#include "error-util.h"
#include "exec.h"
#include "json-writer.h"
#include "log.h"
#include "metrics.h"
#include "redact.h"
#include "strbuf.h"
#include "strmap.h"
#include "strv.h"
#include "utf8.h"

#define KEY_FSTYPE "kubernetes.io/fsType"
#define KEY_READWRITE "kubernetes.io/readwrite"
#define KEY_PV_OR_VOLUME_NAME "kubernetes.io/pvOrVolumeName"
#define KEY_POD_NAME "kubernetes.io/pod.name"
#define KEY_POD_NAMESPACE "kubernetes.io/pod.namespace"
#define KEY_POD_UID "kubernetes.io/pod.uid"
#define KEY_SERVICE_ACCOUNT "kubernetes.io/serviceAccount.name"
#define KEY_SECRET_PREFIX "kubernetes.io/secret/"
#define KEY_FSGROUP "kubernetes.io/mounterArgs.FsGroup"

#define REDACTED "(redacted)"
#define EXCERPT_MAX 240
/* Bounds the search for the last JSON object in a hostile output (bytes parsed in total). */
#define SEARCH_BUDGET (1024 * 1024)

static const struct {
	const char *name;
	usec_t timeout;
} commands[_FLEX_COMMAND_MAX] = {
	[FLEX_INIT] = {"init", 30 * USEC_PER_SEC},
	[FLEX_GETVOLUMENAME] = {"getvolumename", 120 * USEC_PER_SEC},
	[FLEX_ATTACH] = {"attach", 120 * USEC_PER_SEC},
	[FLEX_ISATTACHED] = {"isattached", 120 * USEC_PER_SEC},
	[FLEX_DETACH] = {"detach", 120 * USEC_PER_SEC},
	[FLEX_WAITFORATTACH] = {"waitforattach", 600 * USEC_PER_SEC},
	[FLEX_MOUNTDEVICE] = {"mountdevice", 300 * USEC_PER_SEC},
	[FLEX_UNMOUNTDEVICE] = {"unmountdevice", 120 * USEC_PER_SEC},
	[FLEX_MOUNT] = {"mount", 120 * USEC_PER_SEC},
	[FLEX_UNMOUNT] = {"unmount", 120 * USEC_PER_SEC},
	[FLEX_EXPANDVOLUME] = {"expandvolume", 300 * USEC_PER_SEC},
	[FLEX_EXPANDFS] = {"expandfs", 300 * USEC_PER_SEC},
};

const char *flex_command_to_string(FlexCommand c)
{
	if ((unsigned)c >= _FLEX_COMMAND_MAX)
		return NULL;
	return commands[c].name;
}

int flex_command_from_string(const char *s)
{
	for (int i = 0; i < _FLEX_COMMAND_MAX; i++)
		if (s && strcmp(s, commands[i].name) == 0)
			return i;
	return -EINVAL;
}

usec_t flex_call_timeout(const FlexCallConfig *cfg, FlexCommand cmd)
{
	if ((unsigned)cmd >= _FLEX_COMMAND_MAX)
		return USEC_INFINITY;
	if (cfg && cfg->timeout[cmd] != 0)
		return cfg->timeout[cmd];
	return commands[cmd].timeout;
}

void flex_reply_done(FlexReply *r)
{
	free(r->status_text);
	free(r->message);
	free(r->device);
	free(r->volume_name);
	*r = (FlexReply){};
}

/* ---- environment ---- */

extern char **environ;

static bool env_name_valid(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_'))
			return false;
	return true;
}

/* Sets name (n bytes of it) in *env to its value in this process's environment, if any. */
static void env_keep(char ***env, const char *name, size_t n)
{
	const char *value = NULL;

	for (char **e = environ; e && *e && !value; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
			value = *e;
	if (!value)
		return;
	for (char **e = *env; e && *e; e++)
		if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
			free(*e);
			*e = xstrdup(value);
			return;
		}
	strv_append(env, xstrdup(value));
}

int flex_env_parse(const char *value, char ***ret_env, char **ret_error)
{
	_cleanup_strv_free_ char **env = NULL;

	if (strcmp(value, "inherit") == 0) {
		*ret_env = NULL;
		return 0;
	}
	for (size_t i = 0; exec_default_env[i]; i++)
		strv_append(&env, xstrdup(exec_default_env[i]));
	if (strcmp(value, "clean") != 0)
		for (const char *p = value;; p++) {
			size_t n = strcspn(p, ",");
			if (!env_name_valid(p, n))
				return errorf(ret_error, -EINVAL,
					      "'%s': want inherit, clean or a comma-separated "
					      "list of variable names ('%.*s' is none)",
					      value, (int)n, p);
			env_keep(&env, p, n);
			p += n;
			if (!*p)
				break;
		}
	*ret_env = TAKE_PTR(env);
	return 0;
}

/* ---- options JSON ---- */

static int cmp_index(const void *a, const void *b, void *keys)
{
	char **k = keys;
	return strcmp(k[*(const size_t *)a], k[*(const size_t *)b]);
}

/* Compact, keys sorted bytewise: Go's json.Marshal of a map[string]string. */
static char *map_to_json(const Strmap *m)
{
	_cleanup_free_ size_t *order = xnew0(size_t, m->n);
	JsonWriter w = {};

	for (size_t i = 0; i < m->n; i++)
		order[i] = i;
	qsort_r(order, m->n, sizeof(size_t), cmp_index, m->keys);
	json_writer_object_begin(&w);
	for (size_t i = 0; i < m->n; i++) {
		json_writer_key(&w, m->keys[order[i]]);
		json_writer_string(&w, m->values[order[i]]);
	}
	json_writer_object_end(&w);
	return json_writer_finish(&w);
}

/* A secret as the driver gets it; NULL as "". */
static char *secret_base64(const char *value)
{
	return base64_encode(value ?: "", value ? strlen(value) : 0);
}

/* NULL values are sent as "" (strmap_set() stores NULL as ""). */
char *flex_options_json(const FlexVolumeSpec *spec, const FlexPodInfo *pod)
{
	Strmap m = {};

	strmap_set(&m, KEY_FSTYPE, spec->fs_type);
	strmap_set(&m, KEY_READWRITE, spec->read_only ? "ro" : "rw");
	strmap_set(&m, KEY_PV_OR_VOLUME_NAME, spec->pv_or_volume_name);
	if (pod) {
		strmap_set(&m, KEY_POD_NAME, pod->name);
		strmap_set(&m, KEY_POD_NAMESPACE, pod->namespace);
		strmap_set(&m, KEY_POD_UID, pod->uid);
		strmap_set(&m, KEY_SERVICE_ACCOUNT, pod->service_account);
		for (size_t i = 0; i < pod->n_secrets; i++) {
			_cleanup_free_ char *key =
				xasprintf(KEY_SECRET_PREFIX "%s", pod->secrets[i].key);
			_cleanup_free_ char *value = secret_base64(pod->secrets[i].value);
			strmap_set(&m, key, value);
		}
		if (pod->fs_group >= 0) {
			char v[32];
			snprintf(v, sizeof(v), "%" PRId64, pod->fs_group);
			strmap_set(&m, KEY_FSGROUP, v);
		}
	}
	for (size_t i = 0; i < spec->n_options; i++)
		if (spec->options[i].key)
			strmap_set(&m, spec->options[i].key, spec->options[i].value);
	char *json = map_to_json(&m);
	strmap_done(&m);
	return json;
}

char *flex_options_redact(const char *json)
{
	json_error_t e;
	json_t *o = json_loads(json, 0, &e);
	const char *key;
	json_t *v;
	Strmap m = {};

	if (!o || !json_is_object(o)) {
		json_decref(o);
		return xstrdup("<options: not a JSON object>");
	}
	json_object_foreach (o, key, v) {
		if (strncmp(key, KEY_SECRET_PREFIX, strlen(KEY_SECRET_PREFIX)) == 0)
			strmap_set(&m, key, REDACTED);
		else if (json_is_string(v))
			strmap_set(&m, key, json_string_value(v));
		else {
			_cleanup_free_ char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
			strmap_set(&m, key, s);
		}
	}
	json_decref(o);
	char *out = map_to_json(&m);
	strmap_done(&m);
	return out;
}

/* ---- argv ---- */

/* Builds argv after the executable; *ret_json_index is the position of the options JSON (-1:
 * none), so it can be redacted for logs. */
static int build_argv(FlexCommand cmd, const FlexCallArgs *a, char ***ret_argv, int *ret_json_index)
{
	const FlexCallArgs none = {};
	_cleanup_strv_free_ char **v = NULL;
	char size_new[24], size_old[24];
	size_t n = 0, cap = 0;
	int json_index = -1;

	if (!a)
		a = &none;
	snprintf(size_new, sizeof(size_new), "%" PRIu64, a->new_size);
	snprintf(size_old, sizeof(size_old), "%" PRIu64, a->old_size);

#define ARG(s)                                       \
	do {                                         \
		if (!(s))                            \
			return -EINVAL;              \
		strv_push(&v, &n, &cap, xstrdup(s)); \
	} while (0)
#define JSON(pod)                                                           \
	do {                                                                \
		if (!a->spec)                                               \
			return -EINVAL;                                     \
		json_index = (int)n;                                        \
		strv_push(&v, &n, &cap, flex_options_json(a->spec, (pod))); \
	} while (0)

	switch (cmd) {
	case FLEX_INIT:
		break;
	case FLEX_GETVOLUMENAME:
		JSON(NULL);
		break;
	case FLEX_ATTACH:
	case FLEX_ISATTACHED:
		JSON(NULL);
		ARG(a->node_name);
		break;
	case FLEX_DETACH:
		ARG(a->volume_name);
		ARG(a->node_name);
		break;
	case FLEX_WAITFORATTACH:
		ARG(a->device);
		JSON(NULL);
		break;
	case FLEX_MOUNTDEVICE:
		ARG(a->device_mount_path);
		ARG(a->device);
		JSON(NULL);
		break;
	case FLEX_UNMOUNTDEVICE:
		ARG(a->device_mount_path);
		break;
	case FLEX_MOUNT:
		ARG(a->pod_volume_dir);
		JSON(a->pod);
		break;
	case FLEX_UNMOUNT:
		ARG(a->pod_volume_dir);
		break;
	case FLEX_EXPANDVOLUME:
		JSON(NULL);
		ARG(a->device_mount_path);
		strv_push(&v, &n, &cap, xstrdup(size_new));
		strv_push(&v, &n, &cap, xstrdup(size_old));
		break;
	case FLEX_EXPANDFS:
		JSON(NULL);
		ARG(a->device);
		ARG(a->device_mount_path);
		strv_push(&v, &n, &cap, xstrdup(size_new));
		strv_push(&v, &n, &cap, xstrdup(size_old));
		break;
	default:
		return -EINVAL;
	}
#undef ARG
#undef JSON

	*ret_argv = v ? TAKE_PTR(v) : xnew0(char *, 1);
	*ret_json_index = json_index;
	return 0;
}

int flex_call_argv(FlexCommand cmd, const FlexCallArgs *args, char ***ret_argv)
{
	int json_index;
	return build_argv(cmd, args, ret_argv, &json_index);
}

/* ---- answer ---- */

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
	case JSON_REAL:
		return "a number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a bool";
	default:
		return "null";
	}
}

/* -EPROTO, with what is wrong (key as the driver spelled it) in *ret_error when wanted. */
static int wrong_type(const char *what, const char *key, const json_t *v, const char *want,
		      char **ret_error)
{
	if (ret_error)
		*ret_error = xasprintf("%s\"%s\" is %s, not %s", what, key, json_kind(v), want);
	return -EPROTO;
}

static int take_string(const char *key, json_t *v, char **field, char **ret_error)
{
	if (json_is_null(v))
		return 0; /* like Go: null leaves the field alone */
	if (!json_is_string(v))
		return wrong_type("", key, v, "a string", ret_error);
	free(*field);
	*field = xstrdup(json_string_value(v));
	return 0;
}

static int take_bool(const char *what, const char *key, json_t *v, bool *field, char **ret_error)
{
	if (json_is_null(v))
		return 0;
	if (!json_is_boolean(v))
		return wrong_type(what, key, v, "a bool", ret_error);
	*field = json_is_true(v);
	return 0;
}

static int parse_capabilities(json_t *o, FlexCapabilities *caps, char **ret_error)
{
	const char *key;
	json_t *v;
	int r = 0;

	json_object_foreach (o, key, v) {
		if (strcasecmp(key, "attach") == 0)
			r = take_bool("capability ", key, v, &caps->attach, ret_error);
		else if (strcasecmp(key, "selinuxRelabel") == 0)
			r = take_bool("capability ", key, v, &caps->selinux_relabel, ret_error);
		else if (strcasecmp(key, "supportsMetrics") == 0)
			r = take_bool("capability ", key, v, &caps->supports_metrics, ret_error);
		else if (strcasecmp(key, "fsGroup") == 0)
			r = take_bool("capability ", key, v, &caps->fs_group, ret_error);
		else if (strcasecmp(key, "requiresFSResize") == 0)
			r = take_bool("capability ", key, v, &caps->requires_fs_resize, ret_error);
		if (r < 0)
			return r;
	}
	return 0;
}

static int reply_from_object(json_t *o, FlexReply *ret, char **ret_error)
{
	FlexReply rep = {.capabilities = FLEX_CAPABILITIES_DEFAULT};
	const char *key;
	json_t *v;
	int r = 0;

	json_object_foreach (o, key, v) {
		if (strcasecmp(key, "status") == 0)
			r = take_string(key, v, &rep.status_text, ret_error);
		else if (strcasecmp(key, "message") == 0)
			r = take_string(key, v, &rep.message, ret_error);
		else if (strcasecmp(key, "device") == 0)
			r = take_string(key, v, &rep.device, ret_error);
		else if (strcasecmp(key, "volumeName") == 0)
			r = take_string(key, v, &rep.volume_name, ret_error);
		else if (strcasecmp(key, "attached") == 0) {
			r = take_bool("", key, v, &rep.attached, ret_error);
			rep.has_attached = rep.has_attached || json_is_boolean(v);
		} else if (strcasecmp(key, "capabilities") == 0) {
			if (json_is_null(v)) {
				rep.capabilities = FLEX_CAPABILITIES_DEFAULT;
				rep.has_capabilities = false;
			} else if (json_is_object(v)) {
				r = parse_capabilities(v, &rep.capabilities, ret_error);
				rep.has_capabilities = true;
			} else
				r = wrong_type("", key, v, "an object", ret_error);
		}
		if (r < 0) {
			flex_reply_done(&rep);
			return r;
		}
	}
	if (rep.status_text && strcmp(rep.status_text, "Success") == 0)
		rep.status = FLEX_STATUS_SUCCESS;
	else if (rep.status_text && strcmp(rep.status_text, "Not supported") == 0)
		rep.status = FLEX_STATUS_NOT_SUPPORTED;
	else
		rep.status = FLEX_STATUS_FAILURE;
	*ret = rep;
	return 0;
}

/* The whole buffer as one JSON object (whitespace around it allowed), or NULL. */
static json_t *whole_object(const char *buf, size_t len)
{
	if (!buf || len == 0)
		return NULL;
	json_t *o = json_loadb(buf, len, 0, NULL);
	if (o && !json_is_object(o)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static bool has_status(json_t *o)
{
	const char *key;
	json_t *v;

	json_object_foreach (o, key, v)
		if (strcasecmp(key, "status") == 0)
			return true;
	return false;
}

/* The last top-level JSON object printed in buf among other text (debug lines before or after
 * it); one with a "status" key is preferred over one without. */
static json_t *last_object(const char *buf, size_t len)
{
	json_t *best = NULL, *best_status = NULL;
	size_t budget = SEARCH_BUDGET, i = 0;

	while (buf && i < len && budget > 0) {
		const char *b = memchr(buf + i, '{', len - i);
		if (!b)
			break;
		size_t off = (size_t)(b - buf);
		json_error_t e;
		json_t *o = json_loadb(b, len - off, JSON_DISABLE_EOF_CHECK, &e);
		size_t used = (size_t)MAX(e.position, 1);
		budget -= MIN(budget, used);
		if (o && json_is_object(o)) {
			if (has_status(o)) {
				json_decref(best_status);
				best_status = json_incref(o);
			}
			json_decref(best);
			best = o;
			i = off + used;
		} else {
			json_decref(o);
			i = off + 1;
		}
	}
	if (best_status) {
		json_decref(best);
		return best_status;
	}
	return best;
}

/* flex_reply_parse(), and on -EPROTO which key is wrong in *ret_type_error (may be NULL). */
static int reply_parse(const char *out, size_t out_len, const char *err, size_t err_len,
		       FlexReply *ret, char **ret_type_error)
{
	/* Invalid UTF-8 read as Go's decoder reads it; jansson would refuse it. */
	size_t n;
	_cleanup_free_ char *out_fixed = utf8_replace_invalid(out, out_len, &n);
	if (out_fixed) {
		out = out_fixed;
		out_len = n;
	}
	_cleanup_free_ char *err_fixed = utf8_replace_invalid(err, err_len, &n);
	if (err_fixed) {
		err = err_fixed;
		err_len = n;
	}

	json_t *o = whole_object(out, out_len);

	if (!o)
		o = whole_object(err, err_len);
	if (!o)
		o = last_object(out, out_len);
	if (!o)
		o = last_object(err, err_len);
	if (!o)
		return -EBADMSG;
	int r = reply_from_object(o, ret, ret_type_error);
	json_decref(o);
	return r;
}

int flex_reply_parse(const char *out, size_t out_len, const char *err, size_t err_len,
		     FlexReply *ret)
{
	return reply_parse(out, out_len, err, err_len, ret, NULL);
}

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!strchr(" \t\r\n", s[i]) || !s[i])
			return false;
	return true;
}

/* One JSON object and white space, as Go's json.Unmarshal takes it (invalid UTF-8 read as
 * U+FFFD). */
static bool one_object(const char *buf, size_t len)
{
	size_t n;
	_cleanup_free_ char *fixed = utf8_replace_invalid(buf, len, &n);
	json_t *o = fixed ? whole_object(fixed, n) : whole_object(buf, len);
	bool ok = o != NULL;
	json_decref(o);
	return ok;
}

bool flex_run_kubelet_parses(const FlexRun *run)
{
	const ExecResult *res = &run->res;

	if (run->verdict == FLEX_VERDICT_CANNOT_RUN || res->timed_out)
		return false;
	if (blank(res->err, res->err_len))
		return one_object(res->out, res->out_len);
	return blank(res->out, res->out_len) && one_object(res->err, res->err_len);
}

/* ---- the call ---- */

/* A strv of every form of every secret a driver may print back (redact.h); NULL when there is
 * none. */
static char **secrets_collect(const FlexCallArgs *a, FlexCommand cmd)
{
	char **forms = NULL;

	if (cmd != FLEX_MOUNT || !a || !a->pod)
		return NULL;
	for (size_t i = 0; i < a->pod->n_secrets; i++)
		flex_secret_forms(a->pod->secrets[i].value, &forms);
	return forms;
}

/* A copy of a string the driver wrote with every secret cut out; NULL for NULL. */
static char *scrub(const char *text, char *const *secrets)
{
	return text ? flex_redact(text, strlen(text), false, secrets) : NULL;
}

/* The tail of a stream, whitespace folded, at most max bytes. */
static void excerpt_add(StrBuf *b, const char *label, const char *text, size_t max)
{
	size_t len = strlen(text);
	while (len > 0 && strchr(" \n\r\t", text[len - 1]))
		len--;
	if (len == 0)
		return;
	size_t from = len > max ? len - max : 0;
	if (b->len > 0)
		strbuf_adds(b, "; ");
	strbuf_adds(b, label);
	strbuf_adds(b, " \"");
	if (from > 0)
		strbuf_adds(b, "...");
	for (size_t i = from; i < len; i++) {
		char c = text[i];
		if (c == '\n' || c == '\r' || c == '\t')
			c = ' ';
		strbuf_add(b, &c, 1);
	}
	strbuf_adds(b, "\"");
}

static char *output_excerpt(const ExecResult *res, char *const *s)
{
	_cleanup_free_ char *out = flex_redact(res->out, res->out_len, res->out_truncated, s);
	_cleanup_free_ char *err = flex_redact(res->err, res->err_len, res->err_truncated, s);
	StrBuf b = {};

	excerpt_add(&b, "stdout", out, EXCERPT_MAX);
	excerpt_add(&b, "stderr", err, EXCERPT_MAX);
	if (!b.s)
		return xstrdup("no output");
	return b.s;
}

static const char *how_it_ended(const ExecResult *res)
{
	static _Thread_local char buf[128];

	if (res->timed_out)
		snprintf(buf, sizeof(buf), "%s, stopped with %s", exec_describe(res),
			 res->signal == SIGKILL ? "SIGKILL" : "SIGTERM");
	else
		snprintf(buf, sizeof(buf), "%s", exec_describe(res));
	return buf;
}

/* "exe command args...", the options JSON redacted. */
static char *loggable_argv(const char *const *full, int json_index)
{
	StrBuf b = {};

	for (int i = 0; full[i]; i++) {
		if (i > 0)
			strbuf_adds(&b, " ");
		if (json_index >= 0 && i == json_index + 2) {
			_cleanup_free_ char *red = flex_options_redact(full[i]);
			strbuf_adds(&b, "'");
			strbuf_adds(&b, red);
			strbuf_adds(&b, "'");
		} else
			strbuf_adds(&b, full[i]);
	}
	return b.s;
}

/* exe, command, the args: one NULL-terminated array, every string its own. */
static char **full_argv(const char *exe, const char *cmd_name, char **rest)
{
	size_t n = strv_length(rest);
	char **argv = xnew0(char *, n + 3);
	argv[0] = xstrdup(exe);
	argv[1] = xstrdup(cmd_name);
	memcpy(argv + 2, rest, n * sizeof(char *));
	return argv;
}

/* The verdict on a run that ended; parse_r is the parser's result (-ENODATA: not parsed). */
static FlexVerdict judge(const ExecResult *res, int parse_r, const FlexReply *rep)
{
	if (res->timed_out)
		return FLEX_VERDICT_TIMEOUT;
	if (parse_r == -EBADMSG)
		return FLEX_VERDICT_NOT_JSON;
	if (parse_r < 0)
		return FLEX_VERDICT_BAD_TYPE;
	if (!rep->status_text)
		return FLEX_VERDICT_NO_STATUS;
	if (rep->status == FLEX_STATUS_NOT_SUPPORTED)
		return FLEX_VERDICT_NOT_SUPPORTED;
	if (rep->status == FLEX_STATUS_FAILURE)
		return strcmp(rep->status_text, "Failure") == 0 ? FLEX_VERDICT_FAILURE
								: FLEX_VERDICT_UNKNOWN_STATUS;
	return exec_succeeded(res) ? FLEX_VERDICT_SUCCESS : FLEX_VERDICT_BAD_EXIT;
}

/* The message for a run that did not succeed: driver, command, how it ended, the driver's
 * message or an excerpt of its output, secrets cut out. NULL on SUCCESS. */
static char *problem_message(const char *driver, const char *cmd_name, const FlexRun *run,
			     char *const *secrets)
{
	const FlexReply *rep = &run->reply;

	if (run->verdict == FLEX_VERDICT_SUCCESS)
		return NULL;
	if (run->verdict == FLEX_VERDICT_CANNOT_RUN)
		return xasprintf("driver \"%s\" %s: cannot run %s: %s", driver, cmd_name,
				 run->argv[0], strerror(-run->exec_error));

	_cleanup_free_ char *ex = output_excerpt(&run->res, secrets);
	/* What the driver wrote goes into logs: secrets cut out of all of it. */
	_cleanup_free_ char *st = scrub(rep->status_text, secrets);
	_cleanup_free_ char *key = scrub(run->type_error, secrets);
	/* An empty message says nothing: what the driver printed says more, as the kubelet logs. */
	const char *how = how_it_ended(&run->res);
	const char *text = rep->message && *rep->message ? rep->message : ex;

	switch (run->verdict) {
	case FLEX_VERDICT_TIMEOUT:
		return xasprintf("driver \"%s\" %s: no answer within the deadline (%s); %s", driver,
				 cmd_name, how, ex);
	case FLEX_VERDICT_NOT_JSON:
		return xasprintf("driver \"%s\" %s: the answer is not a JSON object (%s); %s",
				 driver, cmd_name, how, ex);
	case FLEX_VERDICT_BAD_TYPE:
		return xasprintf("driver \"%s\" %s: the answer has a key of the wrong type: %s "
				 "(%s); %s",
				 driver, cmd_name, key, how, ex);
	case FLEX_VERDICT_NOT_SUPPORTED:
		return xasprintf("driver \"%s\" %s: Not supported (%s)", driver, cmd_name, how);
	case FLEX_VERDICT_FAILURE:
		return xasprintf("driver \"%s\" %s failed (%s): %s", driver, cmd_name, how, text);
	case FLEX_VERDICT_NO_STATUS:
		return xasprintf("driver \"%s\" %s failed (%s, no \"status\"): %s", driver,
				 cmd_name, how, text);
	case FLEX_VERDICT_UNKNOWN_STATUS:
		return xasprintf("driver \"%s\" %s failed (%s, unknown status \"%s\"): %s", driver,
				 cmd_name, how, st, text);
	default: /* FLEX_VERDICT_BAD_EXIT */
		return xasprintf("driver \"%s\" %s: answered \"Success\" but ended with %s; %s",
				 driver, cmd_name, how, ex);
	}
}

METRIC_DEFINE(call_seconds, METRIC_HISTOGRAM, "volplug_flex_driver_call_duration_seconds",
	      "Time Flexvolume driver calls took, by driver, command and result (success, failure, "
	      "not_supported, timeout, cannot_run, bad_answer); its _count counts calls",
	      "driver", "command", "result");

/* A verdict in the words of the metric's result label. */
static const char *verdict_result(FlexVerdict v)
{
	switch (v) {
	case FLEX_VERDICT_SUCCESS:
		return "success";
	case FLEX_VERDICT_FAILURE:
		return "failure";
	case FLEX_VERDICT_NOT_SUPPORTED:
		return "not_supported";
	case FLEX_VERDICT_TIMEOUT:
		return "timeout";
	case FLEX_VERDICT_CANNOT_RUN:
		return "cannot_run";
	default:
		return "bad_answer";
	}
}

int flex_run(const char *driver, const char *exe, const FlexCallConfig *cfg, FlexCommand cmd,
	     const FlexCallArgs *args, FlexRun *ret)
{
	_cleanup_strv_free_ char **rest = NULL;
	const char *cmd_name = flex_command_to_string(cmd);
	int json_index, r;

	if (!cmd_name)
		return -EINVAL;
	r = build_argv(cmd, args, &rest, &json_index);
	if (r < 0)
		return r;
	FlexRun run = {.argv = full_argv(exe, cmd_name, rest)};
	free(TAKE_PTR(rest)); /* its strings now belong to run.argv */

	if (log_get_max_level() >= LOG_LEVEL_DEBUG) {
		_cleanup_free_ char *line =
			loggable_argv((const char *const *)run.argv, json_index);
		log_debug("driver \"%s\" %s: running %s", driver, cmd_name, line);
	}
	ExecOptions o = {
		.argv = (const char *const *)run.argv,
		.timeout = flex_call_timeout(cfg, cmd),
		.kill_grace = cfg ? cfg->kill_grace : 0,
		.output_cap = cfg ? cfg->output_cap : 0,
		.envp = (const char *const *)(cfg && cfg->env ? cfg->env : environ),
	};
	r = exec_run(&o, &run.res);
	if (r < 0) {
		run.verdict = FLEX_VERDICT_CANNOT_RUN;
		run.exec_error = r;
	} else {
		int parse_r = -ENODATA;
		if (!run.res.timed_out)
			parse_r = reply_parse(run.res.out, run.res.out_len, run.res.err,
					      run.res.err_len, &run.reply, &run.type_error);
		run.parsed = parse_r == 0;
		run.verdict = judge(&run.res, parse_r, &run.reply);
	}

	_cleanup_strv_free_ char **secrets = secrets_collect(args, cmd);
	if (run.reply.message) {
		/* The caller may log it: a driver echoing its options must not leak through. */
		char *m = scrub(run.reply.message, secrets);
		free(run.reply.message);
		run.reply.message = m;
	}
	run.problem = problem_message(driver, cmd_name, &run, secrets);
	metric_observe(&call_seconds, (double)run.res.elapsed / 1e6, driver, cmd_name,
		       verdict_result(run.verdict));
	if (run.problem)
		log_debug("%s", run.problem);
	else
		log_debug("driver \"%s\" %s: Success (%.3f s)", driver, cmd_name,
			  (double)run.res.elapsed / 1e6);
	*ret = run;
	return 0;
}

void flex_run_done(FlexRun *run)
{
	strv_free(run->argv);
	exec_result_done(&run->res);
	flex_reply_done(&run->reply);
	free(run->type_error);
	free(run->problem);
	*run = (FlexRun){};
}

int flex_verdict_to_errno(const FlexRun *run)
{
	switch (run->verdict) {
	case FLEX_VERDICT_SUCCESS:
		return 0;
	case FLEX_VERDICT_CANNOT_RUN:
		return run->exec_error;
	case FLEX_VERDICT_TIMEOUT:
		return -ETIMEDOUT;
	case FLEX_VERDICT_NOT_SUPPORTED:
		return -EOPNOTSUPP;
	case FLEX_VERDICT_FAILURE:
	case FLEX_VERDICT_NO_STATUS:
	case FLEX_VERDICT_UNKNOWN_STATUS:
		return -EIO;
	default: /* NOT_JSON, BAD_TYPE, BAD_EXIT */
		return -EPROTO;
	}
}

static int fail(int r, char *msg, char **ret_error)
{
	if (ret_error)
		*ret_error = msg;
	else
		free(msg);
	return r;
}

int flex_call(const char *driver, const char *exe, const FlexCallConfig *cfg, FlexCommand cmd,
	      const FlexCallArgs *args, FlexReply *ret, char **ret_error)
{
	const char *cmd_name = flex_command_to_string(cmd);
	FlexRun run;

	if (!cmd_name)
		return fail(-EINVAL,
			    xasprintf("driver \"%s\": unknown command %d", driver, (int)cmd),
			    ret_error);
	int r = flex_run(driver, exe, cfg, cmd, args, &run);
	if (r < 0) {
		char *msg = xasprintf("driver \"%s\" %s: missing argument", driver, cmd_name);
		log_debug("%s", msg);
		return fail(r, msg, ret_error);
	}
	r = flex_verdict_to_errno(&run);
	if (r < 0)
		fail(r, TAKE_PTR(run.problem), ret_error);
	else if (ret) {
		*ret = run.reply;
		run.reply = (FlexReply){};
	}
	flex_run_done(&run);
	return r;
}

int flex_call_init(const char *driver, const char *exe, const FlexCallConfig *cfg,
		   FlexCapabilities *ret, char **ret_error)
{
	FlexReply rep;
	int r = flex_call(driver, exe, cfg, FLEX_INIT, NULL, &rep, ret_error);
	if (r < 0)
		return r;
	*ret = rep.capabilities;
	flex_reply_done(&rep);
	return 0;
}
