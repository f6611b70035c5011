/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl flex: the Flexvolume drivers of a running volplugd (list), installing and
 * removing drivers atomically, calling one as Kubernetes does, and testing a driver through
 * the lifecycle Kubernetes would put it through. Arguments and output only: src/flex runs and
 * judges the driver (call.h) and runs the lifecycle (conformance.h), as the daemon does. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "call.h"
#include "conformance.h"
#include "ctl.h"
#include "install.h"
#include "parse-util.h"
#include "path-util.h"
#include "prober.h"
#include "strv.h"

static const char flex_usage[] =
	"Usage: volplugctl flex COMMAND [ARGS...]\n"
	"\n"
	"  list                          the drivers the running volplugd has loaded\n"
	"  install SRC [--vendor V] --name N [--dir DIR]\n"
	"                                copy SRC to DIR/V~N/N atomically (never half a driver)\n"
	"  remove [--vendor V] --name N [--dir DIR]\n"
	"                                remove DIR/V~N in one rename\n"
	"  call DRIVER COMMAND ARGS... [--dir DIR] [--timeout T] [--env E]\n"
	"                                run the driver as Kubernetes does; print its answer\n"
	"                                and its raw output; exits 1 unless it succeeded\n"
	"  test DRIVER [--dir DIR] [--options JSON] [--timeout T] [--env E]\n"
	"                                run the driver through the lifecycle Kubernetes would\n"
	"                                and report what fails there (violations: exit 1) and\n"
	"                                what it accepts but is likely a bug (warnings)\n"
	"\n"
	"DRIVER is a driver name (vendor/name) found in DIR, or a path to an executable when it\n"
	"starts with '/' or '.'. DIR defaults to " FLEX_DEFAULT_PLUGIN_DIR ".\n"
	"The driver runs with volplugctl's environment, as the kubelet runs drivers with its own;\n"
	"--env clean gives it only PATH and LC_ALL=C, --env NAME,... those and the names given\n"
	"(volplugd's --flexvolume-env).\n"
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
	"counts as a violation too: the test gives valid inputs. call and test make the\n"
	"directory of mount and mountdevice first (mode 0750), as the kubelet does.\n";

enum {
	FOPT_DIR = 1u << 0,
	FOPT_VENDOR = 1u << 1,
	FOPT_NAME = 1u << 2,
	FOPT_TIMEOUT = 1u << 3,
	FOPT_OPTIONS = 1u << 4,
	FOPT_ENV = 1u << 5,
};

typedef struct FlexArgs {
	const char *sub;
	char **pos;
	size_t n_pos;
	const char *dir, *vendor, *name, *options;
	usec_t timeout; /* 0: the per-command defaults */
	char **env;	/* --env (flex_env_parse()); NULL: volplugctl's own */
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

static void flex_args_done(FlexArgs *a)
{
	strv_free(a->env);
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
						{"env", required_argument, NULL, 'e'},
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
			       : opt == 'e' ? FOPT_ENV
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
		case 'e': {
			_cleanup_free_ char *why = NULL;
			strv_free(TAKE_PTR(a->env));
			if (flex_env_parse(optarg, &a->env, &why) < 0)
				return flex_bad_usage(a->sub, "--env %s", why);
			break;
		}
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

/* The executable of DRIVER (see the usage) and the name to report it under. */
static int driver_locate(const FlexArgs *a, const char *driver, char **ret_exe, char **ret_name)
{
	_cleanup_free_ char *error = NULL;

	int r = flex_driver_locate(a->dir, driver, ret_exe, ret_name, &error);
	if (r < 0)
		return ctl_error(r == -EINVAL ? CTL_EXIT_USAGE : CTL_EXIT_FAILED, "flex %s: %s",
				 a->sub, error);
	return 0;
}

/* --timeout for every command, else Kubernetes' deadlines; --env. */
static FlexCallConfig call_config(const FlexArgs *a)
{
	FlexCallConfig cfg = {.env = a->env};

	for (size_t i = 0; a->timeout && i < _FLEX_COMMAND_MAX; i++)
		cfg.timeout[i] = a->timeout;
	return cfg;
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

/* The parsed answer as JSON (capabilities with their defaults filled in, for init). */
static json_t *reply_json(const FlexRun *run, FlexCommand cmd)
{
	const FlexReply *rep = &run->reply;

	if (!run->parsed)
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

static json_t *strings_json(char *const *v)
{
	json_t *a = json_array();
	for (size_t i = 0; v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

static void print_run_json(const Ctl *ctl, const char *name, FlexCommand cmd, const FlexRun *run)
{
	json_t *o = json_object();

	json_object_set_new(o, "driver", json_string(name));
	json_object_set_new(o, "argv", strings_json(run->argv));
	if (run->exec_error == 0) {
		json_object_set_new(o, "exit_code", json_integer(run->res.exit_code));
		json_object_set_new(o, "signal", json_integer(run->res.signal));
		json_object_set_new(o, "timed_out", json_boolean(run->res.timed_out));
		json_object_set_new(o, "elapsed_us", json_integer((json_int_t)run->res.elapsed));
		json_object_set_new(o, "stdout", text_json(run->res.out, run->res.out_len));
		json_object_set_new(o, "stderr", text_json(run->res.err, run->res.err_len));
	}
	json_object_set_new(o, "reply", reply_json(run, cmd));
	json_object_set_new(o, "ok", json_boolean(!run->problem));
	json_object_set_new(o, "problem", run->problem ? json_string(run->problem) : json_null());
	ctl_print(ctl, o);
	json_decref(o);
}

/* The command line, how it ended, its raw output, then the parsed answer. */
static void print_run_text(const Ctl *ctl, FlexCommand cmd, const FlexRun *run)
{
	fputs("command:", stdout);
	for (size_t i = 0; run->argv[i]; i++) {
		fputc(' ', stdout);
		print_quoted(run->argv[i]);
	}
	fputc('\n', stdout);
	if (run->exec_error == 0) {
		printf("ended: %s after %.3f s\n", exec_describe(&run->res),
		       (double)run->res.elapsed / 1e6);
		print_stream("stdout", run->res.out, run->res.out_len, run->res.out_truncated);
		print_stream("stderr", run->res.err, run->res.err_len, run->res.err_truncated);
	}
	if (run->parsed) {
		json_t *o = json_object();
		json_object_set_new(o, "reply", reply_json(run, cmd));
		ctl_print(ctl, o);
		json_decref(o);
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

/* What the kubelet does before mountdevice and mount: the directory is made, with its
 * parents, mode 0750. */
static int prepare_for_mount(FlexCommand cmd, const FlexCallArgs *args)
{
	const char *dir = cmd == FLEX_MOUNT	    ? args->pod_volume_dir
			  : cmd == FLEX_MOUNTDEVICE ? args->device_mount_path
						    : NULL;
	int r = dir ? mkdir_p(dir, 0750) : 0;
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "flex call: cannot create %s: %s", dir,
				 strerror(-r));
	return 0;
}

static int flex_call_cmd(Ctl *ctl, const FlexArgs *a)
{
	_cleanup_free_ char *exe = NULL, *name = NULL;
	_cleanup_free_ FlexOption *options = NULL;
	FlexVolumeSpec spec = {};
	FlexCallArgs args = {};
	FlexCallConfig cfg = call_config(a);
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
	r = prepare_for_mount(c, &args);
	if (r != 0) {
		json_decref(opts_json);
		return r;
	}
	r = flex_run(name, exe, &cfg, c, &args, &run);
	json_decref(opts_json);
	if (r < 0)
		return flex_bad_usage(a->sub, "%s: missing arguments", a->pos[1]);

	if (ctl->json)
		print_run_json(ctl, name, c, &run);
	else
		print_run_text(ctl, c, &run);
	r = run.problem ? ctl_error(CTL_EXIT_FAILED, "flex call: %s", run.problem) : 0;
	flex_run_done(&run);
	return r;
}

/* ---- test ---- */

static void test_step_begin(const char *label, _unused_ void *userdata)
{
	printf("%-22s ", label);
	fflush(stdout);
}

/* "ok[: notes]" after the label, or one line per violation and warning, then the notes. */
static void test_step_end(const FlexConformanceStep *step, _unused_ void *userdata)
{
	const char *indent = "                       ";
	bool first = true;

	if (!step->violations && !step->warnings) {
		fputs("ok", stdout);
		for (size_t i = 0; step->notes && step->notes[i]; i++)
			printf("%s%s", i == 0 ? ": " : "; ", step->notes[i]);
		fputc('\n', stdout);
		return;
	}
	for (size_t i = 0; step->violations && step->violations[i]; i++, first = false)
		printf("%sVIOLATION: %s\n", first ? "" : indent, step->violations[i]);
	for (size_t i = 0; step->warnings && step->warnings[i]; i++, first = false)
		printf("%sWARNING: %s\n", first ? "" : indent, step->warnings[i]);
	for (size_t i = 0; step->notes && step->notes[i]; i++)
		printf("%s%s\n", indent, step->notes[i]);
}

static void print_conformance_json(const Ctl *ctl, const char *name, const char *exe,
				   const FlexConformance *c)
{
	json_t *o = json_object(), *steps = json_array();

	for (size_t i = 0; i < c->n_steps; i++) {
		const FlexConformanceStep *s = &c->steps[i];
		json_array_append_new(steps,
				      json_pack("{s:s, s:o, s:o, s:o, s:b}", "step", s->label,
						"violations", strings_json(s->violations),
						"warnings", strings_json(s->warnings), "notes",
						strings_json(s->notes), "ok", !s->violations));
	}
	json_object_set_new(o, "driver", json_string(name));
	json_object_set_new(o, "executable", json_string(exe));
	json_object_set_new(o, "steps", steps);
	json_object_set_new(o, "checks", json_integer(c->checks));
	json_object_set_new(o, "violations", json_integer(c->violations));
	json_object_set_new(o, "warnings", json_integer(c->warnings));
	ctl_print(ctl, o);
	json_decref(o);
}

static int flex_test_cmd(Ctl *ctl, const FlexArgs *a)
{
	_cleanup_free_ char *exe = NULL, *name = NULL, *error = NULL;
	_cleanup_free_ FlexOption *options = NULL;
	FlexVolumeSpec spec = {};
	FlexCallConfig call = call_config(a);
	FlexConformance c;
	json_t *opts_json = NULL;
	int r;

	if (a->n_pos != 1)
		return flex_bad_usage(a->sub, "want DRIVER");
	r = spec_from_json(a->sub, a->options ?: "{}", &opts_json, &options, &spec);
	if (r == 0)
		r = driver_locate(a, a->pos[0], &exe, &name);
	if (r != 0) {
		json_decref(opts_json);
		return r;
	}
	const char *tmpdir = getenv("TMPDIR");
	FlexConformanceConfig cfg = {
		.driver = name,
		.exe = exe,
		.spec = &spec,
		.call = &call,
		.tmp_dir = tmpdir && *tmpdir == '/' ? tmpdir : NULL,
		.step_begin = ctl->json ? NULL : test_step_begin,
		.step_end = ctl->json ? NULL : test_step_end,
	};
	r = flex_conformance_run(&cfg, &c, &error);
	json_decref(opts_json);
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "flex test: %s", error);

	if (c.root_skipped)
		fprintf(stderr, "volplugctl: flex test: not root: only init and getvolumename ran; "
				"attach and mount steps need root\n");
	if (ctl->json)
		print_conformance_json(ctl, name, exe, &c);
	else {
		for (size_t i = 0; c.cleanups && c.cleanups[i]; i++)
			printf("%-22s %s\n", "cleanup", c.cleanups[i]);
		if (!c.loaded)
			printf("%-22s the driver would not be loaded: stopped\n", "");
		printf("%u checks, %u violations, %u warnings\n", c.checks, c.violations,
		       c.warnings);
	}
	r = c.violations ? CTL_EXIT_FAILED : 0;
	flex_conformance_done(&c);
	return r;
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
		{"call", FOPT_DIR | FOPT_TIMEOUT | FOPT_ENV},
		{"test", FOPT_DIR | FOPT_TIMEOUT | FOPT_OPTIONS | FOPT_ENV},
	};
	_cleanup_(flex_args_done) FlexArgs a = {};

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
