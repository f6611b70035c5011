/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "alloc.h"
#include "client.h"
#include "daemon-config.h"
#include "log.h"
#include "ownership.h"
#include "parse-util.h"
#include "strbuf.h"
#include "strv.h"

/* The generic options' help; each backend type's follow under its heading. */
static const char usage_head[] =
	"Usage: volplugd [all|controller|node] [OPTIONS]\n"
	"\n"
	"Serves the CSI Identity, Controller and Node services over gRPC on a unix socket.\n"
	"\n"
	"  --endpoint unix:///PATH         socket to listen on (default "
	"unix:///run/volplug/csi.sock)\n"
	"  --socket-mode MODE              socket file permissions, octal (default 0600)\n"
	"  --node-id ID                    this node's id (default: the host name)\n"
	"  --driver-name NAME              CSI driver name (default pool.volplug.io)\n"
	"  --zone ZONE                     topology zone (default local)\n"
	"  --topology-label KEY=VALUE      one more key of this node's topology segment, beside\n"
	"                                  topology.volplug.io/node and .../zone; repeatable\n"
	"  --distributed                   every node runs its own controller (a driver per\n"
	"                                  node): no ControllerPublish, expand or modify to\n"
	"                                  route; NodeExpandVolume grows the volume itself\n"
	"  --max-volumes-per-node N        attach limit reported and enforced (default 32)\n"
	"  --modify-coalesce-window TIME   merge expand/modify within this window (default 2s)\n"
	"  --flexvolume-dir DIR            Flexvolume plugin directory (default\n"
	"                                  /usr/libexec/kubernetes/kubelet-plugins/volume/exec;\n"
	"                                  \"\": no Flexvolume drivers), watched for the\n"
	"                                  backends that serve them\n"
	"  --flexvolume-timeout [CMD=]TIME deadline of Flexvolume driver calls: of every\n"
	"                                  command, or of one (mount=30s); repeatable\n"
	"  --flexvolume-env inherit|clean|NAME,...\n"
	"                                  Flexvolume drivers' environment: volplugd's own\n"
	"                                  (default, as the kubelet), only PATH and LC_ALL=C,\n"
	"                                  or those plus the variables named\n"
	"  --workers N                     handler threads (default 8, or the backend's)\n"
	"  --shutdown-grace TIME           how long in-flight calls may finish on SIGTERM (30s)\n"
	"  --fs-group-change-policy P      volume ownership when a volume names none: Always or\n"
	"                                  OnRootMismatch (default)\n"
	"  --metrics-address HOST:PORT     serve Prometheus metrics on /metrics and readiness on\n"
	"                                  /healthz there, e.g. 127.0.0.1:9810 (default: off)\n"
	"  --log-format text|json          one record per line, as text or a JSON object (text)\n"
	"  -v, --verbosity N               log detail, as klog's -v: 0 warnings and errors, 1-3\n"
	"                                  info, 4 debug, 5+ each request (secrets left out)\n"
	"                                  (default 2)\n"
	"  -h, --help                      show this help\n"
	"      --version                   show the version\n";

/* The names --backend takes, "a, b or c". */
static char *backend_choices(void)
{
	size_t n, k = 0;
	const BackendType *const *types = backend_types(&n);
	StrBuf b = {};

	for (size_t i = 0; i < n; i++)
		if (types[i]->selectable)
			k++;
	for (size_t i = 0, j = 0; i < n; i++) {
		if (!types[i]->selectable)
			continue;
		j++;
		strbuf_printf(&b, "%s%s", j == 1 ? "" : j == k ? " or " : ", ", types[i]->name);
	}
	return strbuf_steal(&b);
}

/* One option's help lines: "  --name METAVAR" in 34 columns, then its help. */
static void option_print(FILE *f, const BackendOption *o)
{
	_cleanup_free_ char *head =
		xasprintf("--%s%s%s", o->name, o->metavar ? " " : "", o->metavar ?: "");
	const char *help = o->help;

	if (strlen(head) > 31)
		fprintf(f, "  %s\n%34s", head, "");
	else
		fprintf(f, "  %-32s", head);
	for (const char *nl; (nl = strchr(help, '\n')); help = nl + 1)
		fprintf(f, "%.*s\n%34s", (int)(nl - help), help, "");
	fprintf(f, "%s\n", help);
}

void daemon_usage_print(FILE *f)
{
	size_t n;
	const BackendType *const *types = backend_types(&n);
	_cleanup_free_ char *choices = backend_choices();

	fputs(usage_head, f);
	fprintf(f, "  --backend %-22swhere volumes live (default %s)\n", choices,
		backend_type_default()->name);
	for (size_t i = 0; i < n; i++) {
		if (!types[i]->options || !types[i]->options[0].name)
			continue;
		fprintf(f, "\n%s:\n", types[i]->heading ?: types[i]->name);
		for (const BackendOption *o = types[i]->options; o->name; o++)
			option_print(f, o);
	}
}

enum {
	OPT_ENDPOINT = 0x100,
	OPT_SOCKET_MODE,
	OPT_NODE_ID,
	OPT_DRIVER_NAME,
	OPT_ZONE,
	OPT_TOPOLOGY_LABEL,
	OPT_DISTRIBUTED,
	OPT_MAX_VOLUMES,
	OPT_COALESCE,
	OPT_FLEX_DIR,
	OPT_FLEX_TIMEOUT,
	OPT_FLEX_ENV,
	OPT_WORKERS,
	OPT_GRACE,
	OPT_FS_GROUP_POLICY,
	OPT_BACKEND,
	OPT_METRICS_ADDRESS,
	OPT_LOG_FORMAT,

	OPT_VERSION,
	/* the backends' options follow: OPT_BACKEND_FIRST + their index */
	OPT_BACKEND_FIRST = 0x1000,
};

static const struct option options[] = {
	{"endpoint", required_argument, NULL, OPT_ENDPOINT},
	{"socket-mode", required_argument, NULL, OPT_SOCKET_MODE},
	{"node-id", required_argument, NULL, OPT_NODE_ID},
	{"driver-name", required_argument, NULL, OPT_DRIVER_NAME},
	{"zone", required_argument, NULL, OPT_ZONE},
	{"topology-label", required_argument, NULL, OPT_TOPOLOGY_LABEL},
	{"distributed", no_argument, NULL, OPT_DISTRIBUTED},
	{"max-volumes-per-node", required_argument, NULL, OPT_MAX_VOLUMES},
	{"modify-coalesce-window", required_argument, NULL, OPT_COALESCE},
	{"flexvolume-dir", required_argument, NULL, OPT_FLEX_DIR},
	{"flexvolume-timeout", required_argument, NULL, OPT_FLEX_TIMEOUT},
	{"flexvolume-env", required_argument, NULL, OPT_FLEX_ENV},
	{"workers", required_argument, NULL, OPT_WORKERS},
	{"shutdown-grace", required_argument, NULL, OPT_GRACE},
	{"fs-group-change-policy", required_argument, NULL, OPT_FS_GROUP_POLICY},
	{"backend", required_argument, NULL, OPT_BACKEND},
	{"metrics-address", required_argument, NULL, OPT_METRICS_ADDRESS},
	{"log-format", required_argument, NULL, OPT_LOG_FORMAT},

	{"verbosity", required_argument, NULL, 'v'},
	{"help", no_argument, NULL, 'h'},
	{"version", no_argument, NULL, OPT_VERSION},
	{}};

static void set_string(char **field, const char *value)
{
	free(*field);
	*field = xstrdup(value);
}

static void config_defaults(DaemonConfig *c)
{
	char host[256] = "localhost";

	*c = (DaemonConfig){
		.mode = DRIVER_MODE_ALL,
		.socket_mode = 0600,
		.max_volumes_per_node = 32,
		.workers = 8,
		.verbosity = 2,
		.modify_coalesce_window = 2 * USEC_PER_SEC,
		.fs_group_policy = OWNERSHIP_ON_ROOT_MISMATCH,

		.shutdown_grace = 30 * USEC_PER_SEC,
	};
	gethostname(host, sizeof(host) - 1);
	set_string(&c->endpoint, "unix:///run/volplug/csi.sock");
	set_string(&c->node_id, host);
	set_string(&c->driver_name, "pool.volplug.io");
	set_string(&c->zone, "local");
	set_string(&c->flexvolume_dir, "/usr/libexec/kubernetes/kubelet-plugins/volume/exec");
	set_string(&c->backend, backend_type_default()->name);
	c->backend_settings = backend_settings_new();
}

/* n characters of alphanumerics and of extra (the punctuation allowed), starting and ending
 * with an alphanumeric: a DNS subdomain ("-."), a label name or value ("-._"). */
static bool name_valid(const char *s, size_t n, const char *extra)
{
	if (n == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9');
		if (!alnum && (!strchr(extra, ch) || i == 0 || i == n - 1))
			return false;
	}
	return true;
}

/* CSI driver names: at most 63 characters, a DNS subdomain. */
static bool driver_name_valid(const char *s)
{
	return strlen(s) <= 63 && name_valid(s, strlen(s), "-.");
}

/* KEY=VALUE of --topology-label: the kubelet makes a node label of it, so both must be valid
 * label syntax ([PREFIX/]NAME, PREFIX a DNS subdomain, NAME and VALUE at most 63 characters,
 * VALUE possibly empty); the node and zone keys are the other flags'. */
static int topology_label_apply(DaemonConfig *c, const char *arg, char **ret_error)
{
	const char *eq = strchr(arg, '=');
	_cleanup_free_ char *key = eq ? xstrndup(arg, eq - arg) : NULL;
	const char *slash = key ? strrchr(key, '/') : NULL;
	const char *name = slash ? slash + 1 : key;
	const char *value = eq ? eq + 1 : "";

	if (!key || strlen(name) > 63 || !name_valid(name, strlen(name), "-._") ||
	    (slash && (slash - key > 253 || !name_valid(key, (size_t)(slash - key), "-."))) ||
	    strlen(value) > 63 || (*value && !name_valid(value, strlen(value), "-._"))) {
		*ret_error = xasprintf("--topology-label '%s': want KEY=VALUE in Kubernetes label "
				       "syntax ([prefix/]name, a value of at most 63 characters)",
				       arg);
		return -EINVAL;
	}
	if (strcmp(key, "topology.volplug.io/node") == 0 ||
	    strcmp(key, "topology.volplug.io/zone") == 0) {
		*ret_error = xasprintf("--topology-label '%s': %s comes from --%s", arg, key,
				       strcmp(key, "topology.volplug.io/node") == 0 ? "node-id"
										    : "zone");
		return -EINVAL;
	}
	strmap_set(&c->topology_labels, key, value);
	return 0;
}

/* "TIME" sets every command's deadline, "COMMAND=TIME" one command's. */
static int flex_timeout_apply(DaemonConfig *c, const char *arg, char **ret_error)
{
	const char *eq = strchr(arg, '=');
	usec_t t;
	int cmd = -1;

	if (eq) {
		_cleanup_free_ char *name = xstrndup(arg, eq - arg);
		cmd = flex_command_from_string(name);
		if (cmd < 0) {
			*ret_error = xasprintf("--flexvolume-timeout '%s': unknown command '%s'",
					       arg, name);
			return -EINVAL;
		}
	}
	if (parse_duration(eq ? eq + 1 : arg, &t) < 0 || t == 0)
		return -EINVAL;
	for (int i = 0; i < _FLEX_COMMAND_MAX; i++)
		if (cmd < 0 || i == cmd)
			c->flexvolume_timeout[i] = t;
	return 0;
}

static int option_apply(DaemonConfig *c, int opt, const char *arg, char **ret_error)
{
	uint32_t u32;
	int r = 0;

	switch (opt) {
	case OPT_ENDPOINT:
		set_string(&c->endpoint, arg);
		break;
	case OPT_SOCKET_MODE:
		r = parse_mode(arg, &u32);
		if (r == 0)
			c->socket_mode = u32;
		break;
	case OPT_NODE_ID:
		if (!*arg || strlen(arg) > 128)
			r = -EINVAL;
		set_string(&c->node_id, arg);
		c->node_id_set = true;
		break;
	case OPT_DRIVER_NAME:
		if (!driver_name_valid(arg)) {
			*ret_error = xasprintf("--driver-name '%s': want at most 63 characters of "
					       "[a-zA-Z0-9.-], starting and ending alphanumeric",
					       arg);
			return -EINVAL;
		}
		set_string(&c->driver_name, arg);
		break;
	case OPT_ZONE:
		if (!*arg)
			r = -EINVAL;
		set_string(&c->zone, arg);
		c->zone_set = true;
		break;
	case OPT_TOPOLOGY_LABEL:
		r = topology_label_apply(c, arg, ret_error);
		break;
	case OPT_DISTRIBUTED:
		c->distributed = true;
		break;
	case OPT_MAX_VOLUMES:
		r = parse_uint32(arg, &c->max_volumes_per_node);
		if (r == 0 && c->max_volumes_per_node == 0)
			r = -ERANGE;
		c->max_volumes_set = true;
		break;
	case OPT_COALESCE:
		r = parse_duration(arg, &c->modify_coalesce_window);
		break;
	case OPT_FS_GROUP_POLICY:
		c->fs_group_policy = ownership_policy_from_string(arg);
		if (c->fs_group_policy < 0)
			r = -EINVAL;
		break;
	case OPT_GRACE:

		r = parse_duration(arg, &c->shutdown_grace);
		break;
	case OPT_FLEX_DIR:
		if (arg[0] && arg[0] != '/')
			r = -EINVAL;
		set_string(&c->flexvolume_dir, arg);
		break;
	case OPT_BACKEND: {
		const BackendType *t = backend_type_find(arg);
		if (!t || !t->selectable) {
			_cleanup_free_ char *choices = backend_choices();
			*ret_error = xasprintf("--backend '%s': want %s", arg, choices);
			return -EINVAL;
		}
		set_string(&c->backend, arg);
		break;
	}
	case OPT_FLEX_TIMEOUT:
		r = flex_timeout_apply(c, arg, ret_error);
		break;
	case OPT_FLEX_ENV: {
		_cleanup_free_ char *why = NULL;
		char **env;
		r = flex_env_parse(arg, &env, &why);
		if (r < 0) {
			*ret_error = xasprintf("--flexvolume-env %s", why);
			return r;
		}
		strv_free(c->flexvolume_env);
		c->flexvolume_env = env;
		break;
	}
	case OPT_WORKERS:
		r = parse_uint32(arg, &u32);
		if (r == 0 && (u32 == 0 || u32 > 1024))
			r = -ERANGE;
		c->workers = u32;
		c->workers_set = true;
		break;
	case OPT_METRICS_ADDRESS:
		/* "" turns it off again; the address itself is checked when it is bound. */
		free(c->metrics_address);
		c->metrics_address = *arg ? xstrdup(arg) : NULL;
		break;
	case OPT_LOG_FORMAT:
		c->log_format = log_format_from_string(arg);
		if (c->log_format < 0)
			r = -EINVAL;
		break;
	case 'v':
		r = parse_uint32(arg, &u32);
		if (r == 0 && u32 > 10)
			r = -ERANGE;
		c->verbosity = (int)u32;
		break;
	}
	return r;
}

/* getopt's table: the generic options, then every backend type's (val OPT_BACKEND_FIRST + k,
 * names[k] the option's name). */
typedef struct OptionTable {
	struct option *list;
	const char **names;
} OptionTable;

static void option_table_make(OptionTable *t)
{
	size_t n_types, n = ELEMENTSOF(options), k = 0;
	const BackendType *const *types = backend_types(&n_types);

	for (size_t i = 0; i < n_types; i++)
		for (const BackendOption *o = types[i]->options; o && o->name; o++)
			n++;
	t->list = xnew0(struct option, n);
	t->names = xnew0(const char *, n);
	memcpy(t->list, options, sizeof(options) - sizeof(options[0]));
	n = ELEMENTSOF(options) - 1;
	for (size_t i = 0; i < n_types; i++)
		for (const BackendOption *o = types[i]->options; o && o->name; o++, k++) {
			t->names[k] = o->name;
			t->list[n++] = (struct option){o->name,
						       o->metavar ? required_argument : no_argument,
						       NULL, OPT_BACKEND_FIRST + (int)k};
		}
}

static void option_table_done(OptionTable *t)
{
	free(t->list);
	free(t->names);
}

static const char *option_name(const OptionTable *t, int opt)
{
	for (const struct option *o = t->list; o->name; o++)
		if (o->val == opt)
			return o->name;
	return "?";
}

/* Whether getopt took the whole next argument as a value and it looks like an option
 * ("-v --pool X"): then the user forgot the value. "--opt=-x" stays a value. */
static bool value_is_option(int argc, char **argv, const char *value)
{
	return value && optind >= 1 && optind <= argc && value == argv[optind - 1] &&
	       value[0] == '-' && value[1];
}

static int positional_mode(DaemonConfig *c, int argc, char **argv, char **ret_error)
{
	if (optind >= argc)
		return 0;
	int m = driver_mode_from_string(argv[optind]);
	if (m < 0) {
		*ret_error =
			xasprintf("unknown mode '%s': want all, controller or node", argv[optind]);
		return -EINVAL;
	}
	c->mode = m;
	if (optind + 1 < argc) {
		*ret_error = xasprintf("unexpected argument '%s'", argv[optind + 1]);
		return -EINVAL;
	}
	return 0;
}

int daemon_config_parse(int argc, char **argv, DaemonConfig *ret, char **ret_error)
{
	_cleanup_(option_table_done) OptionTable t = {};
	DaemonConfig c;
	int opt, r;

	config_defaults(&c);
	option_table_make(&t);
	optind = 0;
	opterr = 0;
	/* The leading ':' tells a missing value (':') from an unknown option ('?'). */
	while ((opt = getopt_long(argc, argv, ":hv:", t.list, NULL)) >= 0) {
		switch (opt) {
		case 'h':
			c.action = DAEMON_HELP;
			break;
		case OPT_VERSION:
			c.action = DAEMON_VERSION;
			break;
		case ':':
			*ret_error = xasprintf("--%s: missing its value", option_name(&t, optopt));
			daemon_config_done(&c);
			return -EINVAL;
		case '?':
			*ret_error = xasprintf("unknown option '%s'", argv[optind - 1]);
			daemon_config_done(&c);
			return -EINVAL;
		default:
			if (value_is_option(argc, argv, optarg)) {
				*ret_error = xasprintf(
					"--%s: missing its value (next is the option "
					"'%s'; --%s=VALUE takes a value starting "
					"with '-')",
					option_name(&t, opt), optarg, option_name(&t, opt));
				daemon_config_done(&c);
				return -EINVAL;
			}
			/* A backend's option goes to its type, selected or not (backend.h). */
			r = opt >= OPT_BACKEND_FIRST
				    ? backend_settings_set(c.backend_settings,
							   t.names[opt - OPT_BACKEND_FIRST], optarg,
							   ret_error)
				    : option_apply(&c, opt, optarg, ret_error);
			if (r < 0) {
				if (!*ret_error)
					*ret_error = xasprintf(
						"--%s '%s': %s", option_name(&t, opt), optarg,
						r == -ERANGE ? "out of range" : "invalid value");
				daemon_config_done(&c);
				return -EINVAL;
			}
		}
	}
	if (!c.workers_set)
		c.workers = backend_type_find(c.backend)->workers ?: c.workers;
	r = positional_mode(&c, argc, argv, ret_error);
	if (r == 0) {
		r = endpoint_to_path(c.endpoint, &c.socket_path);
		if (r < 0)
			*ret_error =
				xasprintf("--endpoint '%s': want unix:///absolute/path (at most "
					  "107 bytes)",
					  c.endpoint);
	}
	if (r < 0) {
		daemon_config_done(&c);
		return r;
	}
	*ret = c;
	return 0;
}

void daemon_config_done(DaemonConfig *c)
{
	free(c->endpoint);
	free(c->socket_path);
	free(c->node_id);
	free(c->driver_name);
	free(c->zone);
	strmap_done(&c->topology_labels);
	free(c->flexvolume_dir);
	free(c->backend);
	backend_settings_free(c->backend_settings);
	strv_free(c->flexvolume_env);
	free(c->metrics_address);
	*c = (DaemonConfig){};
}
