/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl flex: the Flexvolume drivers of a running volplugd (list), installing and
 * removing drivers atomically, calling one as Kubernetes does, and testing a driver through
 * the lifecycle Kubernetes would put it through. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "call.h"
#include "ctl.h"
#include "exec.h"
#include "install.h"
#include "mount-util.h"
#include "parse-util.h"
#include "prober.h"
#include "registry.h"

static const char flex_usage[] =
	"Usage: volplugctl flex COMMAND [ARGS...]\n"
	"\n"
	"  list                          the drivers the running volplugd has loaded\n"
	"  install SRC [--vendor V] --name N [--dir DIR]\n"
	"                                copy SRC to DIR/V~N/N atomically (never half a driver)\n"
	"  remove [--vendor V] --name N [--dir DIR]\n"
	"                                remove DIR/V~N in one rename\n"
	"  call DRIVER COMMAND ARGS... [--dir DIR] [--timeout T]\n"
	"                                run the driver as Kubernetes does; print its answer\n"
	"                                and its raw output; exits 1 unless it succeeded\n"
	"  test DRIVER [--dir DIR] [--options JSON] [--timeout T]\n"
	"                                run the driver through the lifecycle Kubernetes would\n"
	"                                and report every protocol violation; exits 1 when any\n"
	"\n"
	"DRIVER is a driver name (vendor/name) found in DIR, or a path to an executable when it\n"
	"starts with '/' or '.'. DIR defaults to " FLEX_DEFAULT_PLUGIN_DIR ".\n"
	"ARGS of call follow the command as Kubernetes passes them:\n"
	"  init | getvolumename JSON | attach JSON NODE | isattached JSON NODE\n"
	"  detach VOLUME_NAME NODE | waitforattach DEVICE JSON\n"
	"  mountdevice MOUNT_PATH DEVICE JSON | unmountdevice MOUNT_PATH\n"
	"  mount DIR JSON | unmount DIR | expandvolume JSON MOUNT_PATH NEW_SIZE OLD_SIZE\n"
	"  expandfs JSON DEVICE MOUNT_PATH NEW_SIZE OLD_SIZE\n"
	"JSON is the options object (string values); the kubernetes.io/fsType, readwrite and\n"
	"pvOrVolumeName keys Kubernetes always sends are added when missing.\n"
	"test uses the options given with --options, mounts in a temporary directory and\n"
	"needs root for everything after init and getvolumename. A step that answers Failure\n"
	"counts as a violation too: the test gives valid inputs.\n";

enum {
	FOPT_DIR = 1u << 0,
	FOPT_VENDOR = 1u << 1,
	FOPT_NAME = 1u << 2,
	FOPT_TIMEOUT = 1u << 3,
	FOPT_OPTIONS = 1u << 4,
};

typedef struct FlexArgs {
	const char *sub;
	char **pos;
	size_t n_pos;
	const char *dir, *vendor, *name, *options;
	usec_t timeout; /* 0: the per-command defaults */
} FlexArgs;

static int flex_bad_usage(const char *sub, const char *fmt, ...) _printf_(2, 3);

static int flex_bad_usage(const char *sub, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "volplugctl: flex %s: ", sub);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see volplugctl flex --help)\n", stderr);
	return CTL_EXIT_USAGE;
}

/* Parses the flags after "flex SUB"; allowed: FOPT_* bits. Returns 0, -1 for --help (done),
 * or CTL_EXIT_USAGE. */
static int flex_parse(int argc, char **argv, unsigned allowed, FlexArgs *a)
{
	static const struct option options[] = {{"dir", required_argument, NULL, 'd'},
						{"vendor", required_argument, NULL, 'v'},
						{"name", required_argument, NULL, 'n'},
						{"timeout", required_argument, NULL, 't'},
						{"options", required_argument, NULL, 'O'},
						{"help", no_argument, NULL, 'h'},
						{}};
	int opt, idx = 0;

	a->sub = argv[0];
	a->dir = FLEX_DEFAULT_PLUGIN_DIR;
	optind = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, &idx)) >= 0) {
		unsigned bit = opt == 'd'   ? FOPT_DIR
			       : opt == 'v' ? FOPT_VENDOR
			       : opt == 'n' ? FOPT_NAME
			       : opt == 't' ? FOPT_TIMEOUT
			       : opt == 'O' ? FOPT_OPTIONS
					    : 0;
		if (opt == 'h') {
			fputs(flex_usage, stdout);
			return -1;
		}
		if (opt == ':')
			return flex_bad_usage(a->sub, "%s needs a value", argv[optind - 1]);
		if (bit == 0)
			return flex_bad_usage(a->sub, "unknown option '%s'", argv[optind - 1]);
		if (!(allowed & bit))
			return flex_bad_usage(a->sub, "--%s is not an option of this command",
					      options[idx].name);
		switch (opt) {
		case 'd':
			a->dir = optarg;
			break;
		case 'v':
			a->vendor = optarg;
			break;
		case 'n':
			a->name = optarg;
			break;
		case 't':
			if (parse_duration(optarg, &a->timeout) < 0 || a->timeout == 0)
				return flex_bad_usage(a->sub,
						      "--timeout '%s': want a duration such as 30s",
						      optarg);
			break;
		case 'O':
			a->options = optarg;
			break;
		}
	}
	a->pos = argv + optind;
	a->n_pos = (size_t)(argc - optind);
	return 0;
}

/* ---- list ---- */

static char *capability_list(json_t *caps)
{
	const char *key;
	json_t *v;
	char *s = NULL;

	json_object_foreach (caps, key, v) {
		if (!json_is_true(v))
			continue;
		char *n = s ? xasprintf("%s,%s", s, key) : xstrdup(key);
		free(s);
		s = n;
	}
	return s ? s : xstrdup("-");
}

static int flex_list(Ctl *ctl, const FlexArgs *a)
{
	json_t *reply = NULL, *req = json_object();

	if (a->n_pos != 0)
		return flex_bad_usage(a->sub, "takes no arguments");
	int r = ctl_call(ctl, "ListFlexDrivers", req, &reply);
	json_decref(req);
	if (r != 0)
		return r;
	if (ctl->json) {
		ctl_print(ctl, reply);
		json_decref(reply);
		return 0;
	}
	json_t *drivers = json_object_get(reply, "drivers"), *d;
	size_t n = json_array_size(drivers), i;
	char **caps = xnew0(char *, n + 1);
	int w_name = 4, w_state = 5, w_caps = 12;

	json_array_foreach (drivers, i, d) {
		caps[i] = capability_list(json_object_get(d, "capabilities"));
		w_name = MAX(w_name,
			     (int)strlen(json_string_value(json_object_get(d, "name")) ?: ""));
		w_state = MAX(w_state,
			      (int)strlen(json_string_value(json_object_get(d, "state")) ?: ""));
		w_caps = MAX(w_caps, (int)strlen(caps[i]));
	}
	printf("%-*s  %-*s  %-*s  %s\n", w_name, "NAME", w_state, "STATE", w_caps, "CAPABILITIES",
	       "LAST ERROR");
	json_array_foreach (drivers, i, d) {
		const char *err = json_string_value(json_object_get(d, "last_error"));
		printf("%-*s  %-*s  %-*s  %s\n", w_name,
		       json_string_value(json_object_get(d, "name")) ?: "", w_state,
		       json_string_value(json_object_get(d, "state")) ?: "", w_caps, caps[i],
		       err && *err ? err : "-");
		free(caps[i]);
	}
	free(caps);
	json_decref(reply);
	return 0;
}

/* ---- install, remove ---- */

static int flex_install_cmd(const FlexArgs *a)
{
	_cleanup_free_ char *error = NULL;

	if (a->n_pos != 1 || !a->name)
		return flex_bad_usage(a->sub, "want SRC and --name N");
	int r = flex_install(a->dir, a->vendor, a->name, a->pos[0], &error);
	if (r < 0)
		return ctl_error(r == -EINVAL ? CTL_EXIT_USAGE : CTL_EXIT_FAILED,
				 "flex install: %s", error ?: strerror(-r));
	if (a->vendor && *a->vendor)
		printf("installed %s/%s~%s/%s\n", a->dir, a->vendor, a->name, a->name);
	else
		printf("installed %s/%s/%s\n", a->dir, a->name, a->name);
	return 0;
}

static int flex_remove_cmd(const FlexArgs *a)
{
	_cleanup_free_ char *error = NULL;

	if (a->n_pos != 0 || !a->name)
		return flex_bad_usage(a->sub, "want --name N (and --vendor V)");
	int r = flex_remove(a->dir, a->vendor, a->name, &error);
	if (r < 0)
		return ctl_error(r == -EINVAL ? CTL_EXIT_USAGE : CTL_EXIT_FAILED, "flex remove: %s",
				 error ?: strerror(-r));
	if (a->vendor && *a->vendor)
		printf("removed %s/%s~%s\n", a->dir, a->vendor, a->name);
	else
		printf("removed %s/%s\n", a->dir, a->name);
	return 0;
}

/* ---- running a driver ---- */

static int locate_path(const FlexArgs *a, const char *path, char **ret_exe, char **ret_name)
{
	char *exe = realpath(path, NULL);
	if (!exe)
		return ctl_error(CTL_EXIT_FAILED, "flex %s: %s: %s", a->sub, path, strerror(errno));
	*ret_name = xstrdup(strrchr(exe, '/') + 1);
	*ret_exe = exe;
	return 0;
}

/* Where the driver's executable is: a driver name in dir, as the prober finds it, or a path
 * (one starting with '/' or '.', or an executable not found as a driver in dir). *ret_name is
 * the driver name for messages. */
static int driver_locate(const FlexArgs *a, const char *driver, char **ret_exe, char **ret_name)
{
	_cleanup_free_ char *error = NULL, *folder = NULL, *name = NULL, *exe_name = NULL;
	bool is_file = access(driver, X_OK) == 0;

	if (driver[0] == '/' || driver[0] == '.')
		return locate_path(a, driver, ret_exe, ret_name);
	if (flex_driver_name_validate(driver, &error) < 0)
		return is_file ? locate_path(a, driver, ret_exe, ret_name)
			       : ctl_error(CTL_EXIT_USAGE, "flex %s: %s", a->sub, error);
	folder = flex_driver_name_to_folder(driver);
	if (flex_driver_folder_parse(folder, &name, &exe_name, &error) < 0)
		return ctl_error(CTL_EXIT_USAGE, "flex %s: %s", a->sub, error);
	char *exe = xasprintf("%s/%s/%s", a->dir, folder, exe_name);
	if (access(exe, X_OK) < 0) {
		int r = is_file ? locate_path(a, driver, ret_exe, ret_name)
				: ctl_error(CTL_EXIT_FAILED, "flex %s: driver \"%s\": %s: %s",
					    a->sub, driver, exe, strerror(errno));
		free(exe);
		return r;
	}
	*ret_exe = exe;
	*ret_name = TAKE_PTR(name);
	return 0;
}

/* One run of a driver command, with everything it printed. */
typedef struct FlexRun {
	char **argv; /* exe, command, args: NULL-terminated */
	int exec_r;  /* exec_run(): < 0 when it could not be started */
	ExecResult res;
	int parse_r; /* flex_reply_parse(), when it answered in time */
	FlexReply reply;
	char *type_error; /* -EPROTO: which key has the wrong type */
} FlexRun;

static void flex_run_done(FlexRun *run)
{
	for (size_t i = 0; run->argv && run->argv[i]; i++)
		free(run->argv[i]);
	free(run->argv);
	if (run->exec_r == 0)
		exec_result_done(&run->res);
	if (run->parse_r == 0)
		flex_reply_done(&run->reply);
	free(run->type_error);
	*run = (FlexRun){};
}

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

/* Names the known key of an answer that has the wrong type, as flex_reply_parse() judges
 * them (strings, a bool "attached", a "capabilities" object of bools; null is allowed). */
static char *find_type_error(const FlexRun *run)
{
	static const char *const strings[] = {"status", "message", "device", "volumeName"};
	static const char *const caps[] = {"attach", "selinuxRelabel", "supportsMetrics", "fsGroup",
					   "requiresFSResize"};
	json_t *o = json_loadb(run->res.out, run->res.out_len, 0, NULL);
	const char *key;
	json_t *v;
	char *what = NULL;

	if (!json_is_object(o)) {
		json_decref(o);
		o = json_loadb(run->res.err, run->res.err_len, 0, NULL);
	}
	if (!json_is_object(o)) {
		json_decref(o);
		return xstrdup("a known key has the wrong type");
	}
	json_object_foreach (o, key, v) {
		if (what || json_is_null(v))
			continue;
		for (size_t i = 0; i < ELEMENTSOF(strings) && !what; i++)
			if (strcasecmp(key, strings[i]) == 0 && !json_is_string(v))
				what = xasprintf("\"%s\" is %s, not a string", key, json_kind(v));
		if (strcasecmp(key, "attached") == 0 && !json_is_boolean(v))
			what = xasprintf("\"attached\" is %s, not a bool", json_kind(v));
		if (strcasecmp(key, "capabilities") == 0) {
			const char *ck;
			json_t *cv;
			if (!json_is_object(v))
				what = xasprintf("\"capabilities\" is %s, not an object",
						 json_kind(v));
			else
				json_object_foreach (v, ck, cv)
					for (size_t i = 0; i < ELEMENTSOF(caps) && !what; i++)
						if (strcasecmp(ck, caps[i]) == 0 &&
						    !json_is_null(cv) && !json_is_boolean(cv))
							what = xasprintf("capability \"%s\" is %s, "
									 "not a bool",
									 ck, json_kind(cv));
		}
	}
	json_decref(o);
	return what ?: xstrdup("a known key has the wrong type");
}

/* Runs exe for cmd with the argv flex_call() would build, its deadline (or timeout), and parses
 * the answer with flex_reply_parse(). Returns 0 when the driver ran (whatever it did), or
 * -EINVAL when args lack a field the command needs; run->exec_r tells whether it started. */
static int flex_run(const char *exe, FlexCommand cmd, const FlexCallArgs *args, usec_t timeout,
		    FlexRun *run)
{
	char **rest = NULL;
	size_t n = 0;

	*run = (FlexRun){.exec_r = -ENODATA, .parse_r = -ENODATA};
	int r = flex_call_argv(cmd, args, &rest);
	if (r < 0)
		return r;
	while (rest[n])
		n++;
	run->argv = xnew0(char *, n + 3);
	run->argv[0] = xstrdup(exe);
	run->argv[1] = xstrdup(flex_command_to_string(cmd));
	memcpy(run->argv + 2, rest, n * sizeof(char *));
	free(rest);

	ExecOptions o = {
		.argv = (const char *const *)run->argv,
		.timeout = timeout ?: flex_call_timeout(NULL, cmd),
	};
	run->exec_r = exec_run(&o, &run->res);
	if (run->exec_r < 0 || run->res.timed_out)
		return 0;
	run->parse_r = flex_reply_parse(run->res.out, run->res.out_len, run->res.err,
					run->res.err_len, &run->reply);
	if (run->parse_r == -EPROTO)
		run->type_error = find_type_error(run);
	return 0;
}

/* What went wrong with a run in the terms of the protocol, or NULL when it answered Success
 * with exit status 0. Mirrors flex_call()'s verdict. */
static char *flex_run_problem(const FlexRun *run)
{
	if (run->exec_r < 0)
		return xasprintf("cannot run %s: %s", run->argv[0], strerror(-run->exec_r));
	if (run->res.timed_out)
		return xasprintf("no answer within the deadline (%s)", exec_describe(&run->res));
	if (run->parse_r == -EBADMSG)
		return xasprintf("the answer is not a JSON object (%s): %s",
				 exec_describe(&run->res), exec_excerpt(&run->res, 200));
	if (run->parse_r < 0)
		return xasprintf("the answer has a key of the wrong type: %s", run->type_error);
	const FlexReply *rep = &run->reply;
	if (rep->status == FLEX_STATUS_NOT_SUPPORTED)
		return xstrdup("Not supported");
	if (rep->status == FLEX_STATUS_FAILURE) {
		if (rep->status_text && strcmp(rep->status_text, "Failure") == 0)
			return xasprintf("Failure (%s): %s", exec_describe(&run->res),
					 rep->message ?: "no message");
		if (!rep->status_text)
			return xasprintf("no \"status\" in the answer (%s)",
					 exec_describe(&run->res));
		return xasprintf("unknown status \"%s\" (%s), a failure to Kubernetes: %s",
				 rep->status_text, exec_describe(&run->res),
				 rep->message ?: "no message");
	}
	if (!exec_succeeded(&run->res))
		return xasprintf("answered \"Success\" but ended with %s",
				 exec_describe(&run->res));
	return NULL;
}

static json_t *capabilities_json(const FlexCapabilities *c)
{
	json_t *o = json_object();
	json_object_set_new(o, "attach", json_boolean(c->attach));
	json_object_set_new(o, "selinuxRelabel", json_boolean(c->selinux_relabel));
	json_object_set_new(o, "supportsMetrics", json_boolean(c->supports_metrics));
	json_object_set_new(o, "fsGroup", json_boolean(c->fs_group));
	json_object_set_new(o, "requiresFSResize", json_boolean(c->requires_fs_resize));
	return o;
}

static char *capabilities_text(const FlexCapabilities *c)
{
	return xasprintf("attach=%s selinuxRelabel=%s supportsMetrics=%s fsGroup=%s "
			 "requiresFSResize=%s",
			 c->attach ? "true" : "false", c->selinux_relabel ? "true" : "false",
			 c->supports_metrics ? "true" : "false", c->fs_group ? "true" : "false",
			 c->requires_fs_resize ? "true" : "false");
}

/* The parsed answer as JSON (capabilities with their defaults filled in, for init). */
static json_t *reply_json(const FlexRun *run, FlexCommand cmd)
{
	const FlexReply *rep = &run->reply;

	if (run->parse_r < 0)
		return json_null();
	json_t *o = json_object();
	json_object_set_new(o, "status",
			    rep->status_text ? json_string(rep->status_text) : json_null());
	if (rep->message)
		json_object_set_new(o, "message", json_string(rep->message));
	if (rep->device)
		json_object_set_new(o, "device", json_string(rep->device));
	if (rep->volume_name)
		json_object_set_new(o, "volumeName", json_string(rep->volume_name));
	if (rep->has_attached)
		json_object_set_new(o, "attached", json_boolean(rep->attached));
	if (rep->has_capabilities || cmd == FLEX_INIT)
		json_object_set_new(o, "capabilities", capabilities_json(&rep->capabilities));
	return o;
}

/* Driver output as a JSON string; jansson refuses invalid UTF-8. */
static json_t *text_json(const char *s, size_t len)
{
	return json_stringn(s, len) ?: json_string("(not valid UTF-8)");
}

static void print_quoted(const char *s)
{
	if (*s &&
	    strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
		      "_-./:=@%+,~") == strlen(s) &&
	    s[0] != '~') {
		fputs(s, stdout);
		return;
	}
	fputc('\'', stdout);
	for (; *s; s++)
		if (*s == '\'')
			fputs("'\\''", stdout);
		else
			fputc(*s, stdout);
	fputc('\'', stdout);
}

static void print_stream(const char *label, const char *text, size_t len, bool truncated)
{
	if (len == 0) {
		printf("%s: (nothing)\n", label);
		return;
	}
	printf("%s:%s\n", label, truncated ? " (truncated)" : "");
	const char *p = text, *end = text + len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
		printf("  %.*s\n", (int)n, p);
		p += n + (nl ? 1 : 0);
	}
}

/* ---- call ---- */

typedef struct CallArgSpec {
	FlexCommand cmd;
	const char *usage; /* the args after the command */
	size_t n;
} CallArgSpec;

static const CallArgSpec call_specs[] = {
	{FLEX_INIT, "", 0},
	{FLEX_GETVOLUMENAME, "JSON", 1},
	{FLEX_ATTACH, "JSON NODE", 2},
	{FLEX_ISATTACHED, "JSON NODE", 2},
	{FLEX_DETACH, "VOLUME_NAME NODE", 2},
	{FLEX_WAITFORATTACH, "DEVICE JSON", 2},
	{FLEX_MOUNTDEVICE, "MOUNT_PATH DEVICE JSON", 3},
	{FLEX_UNMOUNTDEVICE, "MOUNT_PATH", 1},
	{FLEX_MOUNT, "DIR JSON", 2},
	{FLEX_UNMOUNT, "DIR", 1},
	{FLEX_EXPANDVOLUME, "JSON MOUNT_PATH NEW_SIZE OLD_SIZE", 4},
	{FLEX_EXPANDFS, "JSON DEVICE MOUNT_PATH NEW_SIZE OLD_SIZE", 5},
};

/* The user's options JSON as a spec: every key passed on as a user option (they win, so the
 * driver sees exactly them), the three kubernetes.io keys Kubernetes always sends read into
 * the spec so that missing ones are added. Returns 0 or CTL_EXIT_USAGE. */
static int spec_from_json(const char *sub, const char *text, json_t **ret_json,
			  FlexOption **ret_options, FlexVolumeSpec *spec)
{
	json_error_t jerr;
	json_t *o = json_loads(text, 0, &jerr);
	const char *key;
	json_t *v;
	size_t n = 0;

	if (!json_is_object(o)) {
		json_decref(o);
		return flex_bad_usage(sub, "options '%s': want a JSON object of strings", text);
	}
	FlexOption *opts = xnew0(FlexOption, json_object_size(o) + 1);
	json_object_foreach (o, key, v) {
		if (!json_is_string(v)) {
			/* key lives in o: report before letting go of it */
			int r = flex_bad_usage(sub, "options: \"%s\" is not a string", key);
			free(opts);
			json_decref(o);
			return r;
		}

		opts[n++] = (FlexOption){key, json_string_value(v)};
		if (strcmp(key, "kubernetes.io/fsType") == 0)
			spec->fs_type = json_string_value(v);
		else if (strcmp(key, "kubernetes.io/readwrite") == 0)
			spec->read_only = strcmp(json_string_value(v), "ro") == 0;
		else if (strcmp(key, "kubernetes.io/pvOrVolumeName") == 0)
			spec->pv_or_volume_name = json_string_value(v);
	}
	spec->options = opts;
	spec->n_options = n;
	*ret_json = o;
	*ret_options = opts;
	return 0;
}

static int size_arg(const char *sub, const char *s, uint64_t *ret)
{
	if (parse_size(s, ret) < 0)
		return flex_bad_usage(sub, "size '%s': want bytes or a size such as 10G", s);
	return 0;
}

/* Maps the positional ARGS of `flex call` onto FlexCallArgs in Kubernetes' order. */
static int call_args(const FlexArgs *a, FlexCommand cmd, char **v, FlexCallArgs *args,
		     FlexVolumeSpec *spec, json_t **ret_json, FlexOption **ret_options)
{
	int r = 0;
	/* Position of <json> in each command's args (-1: none). */
	static const int json_at[_FLEX_COMMAND_MAX] = {
		[FLEX_INIT] = -1,	[FLEX_GETVOLUMENAME] = 0,  [FLEX_ATTACH] = 0,
		[FLEX_ISATTACHED] = 0,	[FLEX_DETACH] = -1,	   [FLEX_WAITFORATTACH] = 1,
		[FLEX_MOUNTDEVICE] = 2, [FLEX_UNMOUNTDEVICE] = -1, [FLEX_MOUNT] = 1,
		[FLEX_UNMOUNT] = -1,	[FLEX_EXPANDVOLUME] = 0,   [FLEX_EXPANDFS] = 0,
	};

	if (json_at[cmd] >= 0) {
		r = spec_from_json(a->sub, v[json_at[cmd]], ret_json, ret_options, spec);
		if (r != 0)
			return r;
		args->spec = spec;
	}
	switch (cmd) {
	case FLEX_ATTACH:
	case FLEX_ISATTACHED:
		args->node_name = v[1];
		break;
	case FLEX_DETACH:
		args->volume_name = v[0];
		args->node_name = v[1];
		break;
	case FLEX_WAITFORATTACH:
		args->device = v[0];
		break;
	case FLEX_MOUNTDEVICE:
		args->device_mount_path = v[0];
		args->device = v[1];
		break;
	case FLEX_UNMOUNTDEVICE:
		args->device_mount_path = v[0];
		break;
	case FLEX_MOUNT:
	case FLEX_UNMOUNT:
		args->pod_volume_dir = v[0];
		break;
	case FLEX_EXPANDVOLUME:
		args->device_mount_path = v[1];
		r = size_arg(a->sub, v[2], &args->new_size)
			    ?: size_arg(a->sub, v[3], &args->old_size);
		break;
	case FLEX_EXPANDFS:
		args->device = v[1];
		args->device_mount_path = v[2];
		r = size_arg(a->sub, v[3], &args->new_size)
			    ?: size_arg(a->sub, v[4], &args->old_size);
		break;
	default:
		break;
	}
	return r;
}

static int flex_call_cmd(Ctl *ctl, const FlexArgs *a)
{
	_cleanup_free_ char *exe = NULL, *name = NULL, *problem = NULL;
	_cleanup_free_ FlexOption *options = NULL;
	FlexVolumeSpec spec = {};
	FlexCallArgs args = {};
	json_t *opts_json = NULL;
	FlexRun run;

	if (a->n_pos < 2)
		return flex_bad_usage(a->sub, "want DRIVER COMMAND ARGS...");
	int c = flex_command_from_string(a->pos[1]);
	if (c < 0)
		return flex_bad_usage(a->sub,
				      "unknown command '%s': want init, getvolumename, attach, "
				      "isattached, detach, waitforattach, mountdevice, "
				      "unmountdevice, mount, unmount, expandvolume or expandfs",
				      a->pos[1]);
	const CallArgSpec *cs = NULL;
	for (size_t i = 0; i < ELEMENTSOF(call_specs); i++)
		if (call_specs[i].cmd == (FlexCommand)c)
			cs = &call_specs[i];
	if (a->n_pos - 2 != cs->n)
		return flex_bad_usage(a->sub, "%s takes %zu argument(s)%s%s", a->pos[1], cs->n,
				      cs->n ? ": " : "", cs->usage);
	int r = call_args(a, c, a->pos + 2, &args, &spec, &opts_json, &options);
	if (r == 0)
		r = driver_locate(a, a->pos[0], &exe, &name);
	if (r != 0) {
		json_decref(opts_json);
		return r;
	}
	r = flex_run(exe, c, &args, a->timeout, &run);
	json_decref(opts_json);
	if (r < 0)
		return flex_bad_usage(a->sub, "%s: missing arguments", a->pos[1]);
	problem = flex_run_problem(&run);

	if (ctl->json) {
		json_t *o = json_object(), *argv = json_array();
		for (size_t i = 0; run.argv[i]; i++)
			json_array_append_new(argv, json_string(run.argv[i]));
		json_object_set_new(o, "driver", json_string(name));
		json_object_set_new(o, "argv", argv);
		if (run.exec_r == 0) {
			json_object_set_new(o, "exit_code", json_integer(run.res.exit_code));
			json_object_set_new(o, "signal", json_integer(run.res.signal));
			json_object_set_new(o, "timed_out", json_boolean(run.res.timed_out));
			json_object_set_new(o, "elapsed_us",
					    json_integer((json_int_t)run.res.elapsed));
			json_object_set_new(o, "stdout", text_json(run.res.out, run.res.out_len));
			json_object_set_new(o, "stderr", text_json(run.res.err, run.res.err_len));
		}
		json_object_set_new(o, "reply", reply_json(&run, c));
		json_object_set_new(o, "ok", json_boolean(!problem));
		json_object_set_new(o, "problem", problem ? json_string(problem) : json_null());
		ctl_print(ctl, o);
		json_decref(o);
	} else {
		fputs("command:", stdout);
		for (size_t i = 0; run.argv[i]; i++) {
			fputc(' ', stdout);
			print_quoted(run.argv[i]);
		}
		fputc('\n', stdout);
		if (run.exec_r == 0) {
			printf("ended: %s after %.3f s\n", exec_describe(&run.res),
			       (double)run.res.elapsed / 1e6);
			print_stream("stdout", run.res.out, run.res.out_len, run.res.out_truncated);
			print_stream("stderr", run.res.err, run.res.err_len, run.res.err_truncated);
		}
		if (run.parse_r == 0) {
			json_t *o = json_object();
			json_object_set_new(o, "reply", reply_json(&run, c));
			ctl_print(ctl, o);
			json_decref(o);
		}
	}
	flex_run_done(&run);
	if (problem)
		return ctl_error(CTL_EXIT_FAILED, "flex call: driver \"%s\" %s: %s", name,
				 a->pos[1], problem);
	return 0;
}

/* ---- test ---- */

typedef struct Tester {
	const Ctl *ctl;
	const char *exe;
	usec_t timeout;
	unsigned checks, violations;
	json_t *steps; /* -o json: one object per step */
	json_t *step;  /* the current one */
	bool step_ok;
} Tester;

static void step_begin(Tester *t, const char *label)
{
	t->step = json_object();
	t->step_ok = true;
	json_object_set_new(t->step, "step", json_string(label));
	json_object_set_new(t->step, "violations", json_array());
	json_object_set_new(t->step, "notes", json_array());
	if (!t->ctl->json) {
		printf("%-22s ", label);
		fflush(stdout);
	}
}

static void check(Tester *t, bool ok, const char *fmt, ...) _printf_(3, 4);

/* One rule evaluated: counted, and reported when broken. */
static void check(Tester *t, bool ok, const char *fmt, ...)
{
	t->checks++;
	if (ok)
		return;
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		abort();
	va_end(ap);
	t->violations++;
	t->step_ok = false;
	json_array_append_new(json_object_get(t->step, "violations"), json_string(msg));
}

static void note(Tester *t, const char *fmt, ...) _printf_(2, 3);

static void note(Tester *t, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	_cleanup_free_ char *msg = NULL;
	if (vasprintf(&msg, fmt, ap) < 0)
		abort();
	va_end(ap);
	json_array_append_new(json_object_get(t->step, "notes"), json_string(msg));
}

/* Text: "ok[: notes]" after the label, or one line per violation, then the notes. */
static void step_end(Tester *t)
{
	json_t *violations = json_object_get(t->step, "violations");
	json_t *notes = json_object_get(t->step, "notes");
	const char *indent = "                       ";
	json_t *v;
	size_t i;

	json_object_set_new(t->step, "ok", json_boolean(t->step_ok));
	if (!t->ctl->json) {
		if (json_array_size(violations) == 0) {
			fputs("ok", stdout);
			json_array_foreach (notes, i, v)
				printf("%s%s", i == 0 ? ": " : "; ", json_string_value(v));
			fputc('\n', stdout);
		} else {
			json_array_foreach (violations, i, v)
				printf("%sVIOLATION: %s\n", i == 0 ? "" : indent,
				       json_string_value(v));
			json_array_foreach (notes, i, v)
				printf("%s%s\n", indent, json_string_value(v));
		}
	}
	json_array_append_new(t->steps, t->step);
	t->step = NULL;
}

/* Runs one command and checks what every answer owes the protocol: in time, one JSON object
 * with keys of the right types, a known status, exit status 0 with Success. A Failure counts
 * too: the test passes valid inputs. Fills *run (flex_run_done() it); returns the status, or
 * -1 when there is no usable answer. The step stays open for command-specific checks. */
static int run_step(Tester *t, const char *label, FlexCommand cmd, const FlexCallArgs *args,
		    FlexRun *run)
{
	step_begin(t, label);
	if (flex_run(t->exe, cmd, args, t->timeout, run) < 0) {
		check(t, false, "volplugctl built an incomplete argv (a bug)");
		return -1;
	}
	if (run->exec_r < 0) {
		check(t, false, "cannot run %s: %s", t->exe, strerror(-run->exec_r));
		return -1;
	}
	check(t, !run->res.timed_out, "no answer within the deadline: %s; output: %s",
	      exec_describe(&run->res), exec_excerpt(&run->res, 160));
	if (run->res.timed_out)
		return -1;
	check(t, run->parse_r != -EBADMSG, "the output is not a JSON object (%s): %s",
	      exec_describe(&run->res), exec_excerpt(&run->res, 160));
	if (run->parse_r == -EBADMSG)
		return -1;
	check(t, run->parse_r == 0, "%s", run->type_error ?: "");
	if (run->parse_r < 0)
		return -1;
	const FlexReply *rep = &run->reply;
	check(t, rep->status_text != NULL, "the answer has no \"status\"");
	if (rep->status_text)
		check(t,
		      strcmp(rep->status_text, "Success") == 0 ||
			      strcmp(rep->status_text, "Failure") == 0 ||
			      strcmp(rep->status_text, "Not supported") == 0,
		      "unknown status \"%s\": want Success, Failure or Not supported",
		      rep->status_text);
	if (rep->status == FLEX_STATUS_SUCCESS)
		check(t, exec_succeeded(&run->res), "answered \"Success\" but ended with %s",
		      exec_describe(&run->res));
	if (rep->status == FLEX_STATUS_FAILURE &&
	    (rep->status_text && strcmp(rep->status_text, "Failure") == 0))
		check(t, false, "answered Failure (%s): %s", exec_describe(&run->res),
		      rep->message ?: "no message");
	return (int)rep->status;
}

/* The whole step in one call, for steps with no checks of their own. */
static int simple_step(Tester *t, const char *label, FlexCommand cmd, const FlexCallArgs *args,
		       const char *if_not_supported)
{
	FlexRun run;
	int s = run_step(t, label, cmd, args, &run);
	if (s == FLEX_STATUS_NOT_SUPPORTED)
		note(t, "Not supported: %s", if_not_supported);
	step_end(t);
	flex_run_done(&run);
	return s;
}

static void check_mounted(Tester *t, const char *cmd, const char *path, bool want)
{
	int m = is_mount_point(path);
	if (want)
		check(t, m > 0, "%s answered Success but nothing is mounted at %s", cmd, path);
	else
		check(t, m <= 0, "%s answered Success but %s is still mounted", cmd, path);
}

/* mountdevice and mount must leave path mounted, unmount and unmountdevice must not. Not
 * supported is fine when the host has a fallback (if_not_supported says which), a violation
 * when it has none (NULL). Returns the status. */
static int mount_step(Tester *t, FlexCommand cmd, const FlexCallArgs *args, const char *path,
		      const char *if_not_supported)
{
	FlexRun run;
	const char *label = flex_command_to_string(cmd);
	int s = run_step(t, label, cmd, args, &run);
	if (s == FLEX_STATUS_SUCCESS)
		check_mounted(t, label, path, cmd == FLEX_MOUNTDEVICE || cmd == FLEX_MOUNT);
	else if (s == FLEX_STATUS_NOT_SUPPORTED && if_not_supported)
		note(t, "Not supported: %s", if_not_supported);
	else if (s == FLEX_STATUS_NOT_SUPPORTED)
		check(t, false,
		      "%s answered Not supported: a driver that is not attachable must implement "
		      "it (Kubernetes has no device mount path to bind)",
		      label);
	step_end(t);
	flex_run_done(&run);
	return s;
}

/* isattached, right after attach (want true) or detach (want false). */
static void isattached_step(Tester *t, const char *label, const FlexCallArgs *args, bool want)
{
	FlexRun run;
	int s = run_step(t, label, FLEX_ISATTACHED, args, &run);
	if (s == FLEX_STATUS_SUCCESS) {
		check(t, run.reply.has_attached, "no \"attached\" bool in a Success answer");
		if (run.reply.has_attached)
			check(t, run.reply.attached == want, "\"attached\" is %s %s",
			      run.reply.attached ? "true" : "false",
			      want ? "right after a successful attach"
				   : "after a successful detach");
	} else if (s == FLEX_STATUS_NOT_SUPPORTED)
		note(t, "Not supported: Kubernetes assumes attached");
	step_end(t);
	flex_run_done(&run);
}

/* attach or waitforattach: Success must name the device. Returns it (or NULL). */
static char *device_step(Tester *t, FlexCommand cmd, const FlexCallArgs *args, int *ret_status)
{
	FlexRun run;
	char *device = NULL;
	*ret_status = run_step(t, flex_command_to_string(cmd), cmd, args, &run);
	if (*ret_status == FLEX_STATUS_SUCCESS) {
		check(t, run.reply.device && *run.reply.device,
		      "no \"device\" in a Success answer");
		if (run.reply.device && *run.reply.device) {
			device = xstrdup(run.reply.device);
			note(t, "device %s", device);
		}
	} else if (*ret_status == FLEX_STATUS_NOT_SUPPORTED)
		note(t, "Not supported: the host goes on without a device");
	step_end(t);
	flex_run_done(&run);
	return device;
}

static char *random_hex(void)
{
	uint64_t rnd;
	if (getrandom(&rnd, sizeof(rnd), 0) != sizeof(rnd))
		rnd = (uint64_t)getpid() ^ (uint64_t)now_usec(CLOCK_MONOTONIC);
	return xasprintf("%016" PRIx64, rnd);
}

/* Whatever the driver left mounted at path is unmounted, so a broken driver leaves nothing
 * behind; then the directory goes if empty. */
static void cleanup_dir(Tester *t, const char *path)
{
	int n = umount_all_at(path);
	if (n > 0 && !t->ctl->json)
		printf("%-22s unmounted %s, which the driver left mounted\n", "cleanup", path);
	(void)rmdir(path);
}

/* The lifecycle Kubernetes runs, mounts in a temporary directory. */
static void lifecycle(Tester *t, const char *driver, const FlexCapabilities *caps,
		      const FlexVolumeSpec *spec, const char *tmp)
{
	char node[HOST_NAME_MAX + 1] = "localhost";
	_cleanup_free_ char *folder = flex_driver_name_to_folder(driver);
	_cleanup_free_ char *pods = xasprintf("%s/pods", tmp);
	_cleanup_free_ char *volumes = xasprintf("%s/pods/volumes", tmp);
	_cleanup_free_ char *pod_dir = xasprintf("%s/pods/volumes/%s", tmp, folder);
	_cleanup_free_ char *dev_dir = xasprintf("%s/mounts", tmp);
	_cleanup_free_ char *vol_dir = xasprintf("%s/vol", pod_dir);
	_cleanup_free_ char *devmnt = xasprintf("%s/mounts/%s", tmp, spec->pv_or_volume_name);
	_cleanup_free_ char *uid = random_hex();
	FlexPodInfo pod = {.name = "volplugctl-flex-test",
			   .namespace = "default",
			   .uid = uid,
			   .service_account = "default",
			   .fs_group = -1};
	FlexCallArgs args = {.spec = spec};
	bool mounted = false;
	int s;

	(void)gethostname(node, sizeof(node) - 1);
	args.node_name = node;
	/* The kubelet makes the parents; the driver the directory itself. */
	(void)mkdir(pods, 0750);
	(void)mkdir(volumes, 0750);
	(void)mkdir(pod_dir, 0750);
	(void)mkdir(dev_dir, 0750);

	if (caps->attach) {
		_cleanup_free_ char *device = device_step(t, FLEX_ATTACH, &args, &s);
		bool attached = s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED;
		bool staged = false;
		if (attached) {
			isattached_step(t, "isattached", &args, true);
			args.device = device ?: "";
			_cleanup_free_ char *dev2 = device_step(t, FLEX_WAITFORATTACH, &args, &s);
			if (s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED) {
				args.device = dev2 ?: device ?: "";
				args.device_mount_path = devmnt;
				s = mount_step(t, FLEX_MOUNTDEVICE, &args, devmnt,
					       "the host formats a blank device and mounts it");
				staged = true;
				if (s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED) {
					args.pod_volume_dir = vol_dir;
					args.pod = &pod;
					s = mount_step(
						t, FLEX_MOUNT, &args, vol_dir,
						"the host bind-mounts the device mount path");
					args.pod = NULL;
					mounted = true;
				}
			}
			if (mounted &&
			    (s == FLEX_STATUS_SUCCESS || s == FLEX_STATUS_NOT_SUPPORTED)) {
				args.new_size = 2ULL << 30;
				args.old_size = 1ULL << 30;
				simple_step(t, "expandvolume", FLEX_EXPANDVOLUME, &args,
					    "Kubernetes takes the volume as grown");
				if (caps->requires_fs_resize)
					simple_step(t, "expandfs", FLEX_EXPANDFS, &args,
						    "Kubernetes takes the file system as grown");
			}
			args.device = device ?: "";
			if (mounted)
				mount_step(t, FLEX_UNMOUNT, &args, vol_dir,
					   "the host unmounts the directory");
			if (staged)
				mount_step(t, FLEX_UNMOUNTDEVICE, &args, devmnt,
					   "the host unmounts the device mount path");
		}
		/* Kubernetes retries detach after a failed attach too. */
		args.volume_name = spec->pv_or_volume_name;
		simple_step(t, "detach", FLEX_DETACH, &args, "Kubernetes takes it as detached");
		if (attached)
			isattached_step(t, "isattached (detached)", &args, false);
	} else {
		args.pod_volume_dir = vol_dir;
		args.pod = &pod;
		s = mount_step(t, FLEX_MOUNT, &args, vol_dir, NULL);
		args.pod = NULL;
		if (s == FLEX_STATUS_SUCCESS) {
			args.device = "";
			args.device_mount_path = devmnt;
			args.new_size = 2ULL << 30;
			args.old_size = 1ULL << 30;
			simple_step(t, "expandvolume", FLEX_EXPANDVOLUME, &args,
				    "Kubernetes takes the volume as grown");
			if (caps->requires_fs_resize)
				simple_step(t, "expandfs", FLEX_EXPANDFS, &args,
					    "Kubernetes takes the file system as grown");
		}
		mount_step(t, FLEX_UNMOUNT, &args, vol_dir, "the host unmounts the directory");
	}
	cleanup_dir(t, vol_dir);
	cleanup_dir(t, devmnt);
	(void)rmdir(pod_dir);
	(void)rmdir(volumes);
	(void)rmdir(pods);
	(void)rmdir(dev_dir);
}

static int flex_test_cmd(Ctl *ctl, const FlexArgs *a)
{
	_cleanup_free_ char *exe = NULL, *name = NULL, *tmp = NULL, *vol_name = NULL;
	_cleanup_free_ FlexOption *options = NULL;
	FlexVolumeSpec spec = {};
	json_t *opts_json = NULL;
	Tester t = {.ctl = ctl, .timeout = a->timeout, .steps = json_array()};
	FlexRun run;
	int r;

	if (a->n_pos != 1) {
		json_decref(t.steps);
		return flex_bad_usage(a->sub, "want DRIVER");
	}
	r = spec_from_json(a->sub, a->options ?: "{}", &opts_json, &options, &spec);
	if (r == 0)
		r = driver_locate(a, a->pos[0], &exe, &name);
	if (r != 0) {
		json_decref(opts_json);
		json_decref(t.steps);
		return r;
	}
	t.exe = exe;
	if (!spec.pv_or_volume_name) {
		_cleanup_free_ char *hex = random_hex();
		vol_name = xasprintf("flex-test-%.8s", hex);
		spec.pv_or_volume_name = vol_name;
	}

	/* init: without a Success the driver would not be loaded at all. */
	int s = run_step(&t, "init", FLEX_INIT, NULL, &run);
	FlexCapabilities caps = s >= 0 ? run.reply.capabilities : FLEX_CAPABILITIES_DEFAULT;
	if (s == FLEX_STATUS_NOT_SUPPORTED)
		check(&t, false,
		      "init answered Not supported: Kubernetes does not load the driver");
	if (s == FLEX_STATUS_SUCCESS) {
		_cleanup_free_ char *text = capabilities_text(&caps);
		note(&t, "%s%s", text,
		     run.reply.has_capabilities ? "" : " (no capabilities: the defaults)");
	}
	step_end(&t);
	flex_run_done(&run);

	if (s == FLEX_STATUS_SUCCESS) {
		FlexCallArgs args = {.spec = &spec};
		simple_step(&t, "getvolumename", FLEX_GETVOLUMENAME, &args,
			    "Kubernetes uses the volume's name");
		if (geteuid() != 0)
			fprintf(stderr,
				"volplugctl: flex test: not root: only init and getvolumename ran; "
				"attach and mount steps need root\n");
		else {
			const char *tmpdir = getenv("TMPDIR");
			tmp = xasprintf("%s/volplugctl-flex-test-XXXXXX",
					tmpdir && *tmpdir == '/' ? tmpdir : "/tmp");
			if (!mkdtemp(tmp)) {
				json_decref(opts_json);
				json_decref(t.steps);
				return ctl_error(CTL_EXIT_FAILED, "flex test: mkdtemp: %s",
						 strerror(errno));
			}
			lifecycle(&t, name, &caps, &spec, tmp);
			if (rmdir(tmp) < 0 && !ctl->json)
				printf("%-22s %s is left behind: the driver put files in it\n",
				       "cleanup", tmp);
		}
	} else if (!ctl->json)
		printf("%-22s the driver would not be loaded: stopped\n", "");

	if (ctl->json) {
		json_t *o = json_object();
		json_object_set_new(o, "driver", json_string(name));
		json_object_set_new(o, "executable", json_string(exe));
		json_object_set_new(o, "steps", t.steps);
		json_object_set_new(o, "checks", json_integer(t.checks));
		json_object_set_new(o, "violations", json_integer(t.violations));
		ctl_print(ctl, o);
		json_decref(o);
	} else {
		json_decref(t.steps);
		printf("%u checks, %u violations\n", t.checks, t.violations);
	}
	json_decref(opts_json);
	return t.violations ? CTL_EXIT_FAILED : 0;
}

int ctl_flex(Ctl *ctl, int argc, char **argv)
{
	static const struct {
		const char *name;
		unsigned options;
	} subs[] = {
		{"list", 0},
		{"install", FOPT_DIR | FOPT_VENDOR | FOPT_NAME},
		{"remove", FOPT_DIR | FOPT_VENDOR | FOPT_NAME},
		{"call", FOPT_DIR | FOPT_TIMEOUT},
		{"test", FOPT_DIR | FOPT_TIMEOUT | FOPT_OPTIONS},
	};
	FlexArgs a = {};

	if (argc < 2) {
		fputs(flex_usage, stderr);
		return CTL_EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(flex_usage, stdout);
		return 0;
	}
	for (size_t i = 0; i < ELEMENTSOF(subs); i++) {
		if (strcmp(argv[1], subs[i].name) != 0)
			continue;
		int r = flex_parse(argc - 1, argv + 1, subs[i].options, &a);
		if (r != 0)
			return r < 0 ? 0 : r;
		switch (i) {
		case 0:
			return flex_list(ctl, &a);
		case 1:
			return flex_install_cmd(&a);
		case 2:
			return flex_remove_cmd(&a);
		case 3:
			return flex_call_cmd(ctl, &a);
		default:
			return flex_test_cmd(ctl, &a);
		}
	}
	return flex_bad_usage(argv[1], "unknown command");
}
