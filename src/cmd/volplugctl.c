/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>

#include "alloc.h"
#include "ctl.h"
#include "pbjson.h"
#include "status.h"
#include "version.h"

static const char usage[] =
	"Usage: volplugctl [OPTIONS] COMMAND [ARGS...]\n"
	"\n"
	"A CSI client for any driver socket.\n"
	"\n"
	"Options:\n"
	"  -e, --endpoint unix:///PATH  driver socket (default $CSI_ENDPOINT or\n"
	"                               unix:///run/volplug/csi.sock)\n"
	"  -o, --output text|json       output format (default text)\n"
	"  -t, --timeout TIME           per-call deadline (default 60s)\n"
	"  -h, --help                   show this help\n"
	"      --version                show the version\n"
	"\n"
	"Commands:\n"
	"  info                         GetPluginInfo\n"
	"  capabilities                 GetPluginCapabilities\n"
	"  probe                        Probe; exits 1 when the driver is not ready\n"
	"  status                       what volplugd is doing: readiness, space used, volumes,\n"
	"                               staged/published counts, Flexvolume drivers, recent\n"
	"                               problems (volplugd only)\n"
	"  call METHOD [JSON|-]         any RPC by name, request as JSON (default {})\n"
	"  methods                      list the RPCs call knows\n"
	"  bench [--help]               load a driver and print throughput and latency\n"
	"  pool check [--repair] POOL_DIR\n"
	"                               verify a pool on disk; exits 1 when it has problems\n"
	"                               (--repair: fix what can be fixed, also while served)\n"
	"  ownership apply PATH --gid N apply an fsGroup to a tree (see ownership --help)\n"
	"  volume create|delete|list|get|expand|modify|validate|publish|unpublish ...\n"
	"                               the Controller's volume RPCs (see volume --help)\n"
	"  snapshot create|delete|list|allocated|diff\n"
	"                               snapshots, their allocated and changed ranges (see\n"
	"                               snapshot --help)\n"
	"  group create|get|delete|capabilities  group snapshots (see group --help)\n"
	"  node info|capabilities|stage|unstage|publish|unpublish|stats|expand ...\n"
	"                               the Node RPCs (see node --help)\n"
	"  capacity [--zone Z]          GetCapacity\n"
	"  controller capabilities      ControllerGetCapabilities\n"
	"  flex list|install|remove|call|test ...\n"
	"                               Flexvolume drivers (see flex --help)\n";

int ctl_error(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("volplugctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

int ctl_connect(Ctl *ctl)
{
	if (ctl->client)
		return 0;
	/* gRPC starts threads and costs tens of ms: only commands that talk to a socket pay. */
	grpc_init();
	if (rpc_client_new(ctl->endpoint, &ctl->client) < 0) {
		grpc_shutdown();
		return ctl_error(CTL_EXIT_USAGE, "--endpoint '%s': want unix:///absolute/path",
				 ctl->endpoint);
	}
	return 0;
}

/* Connects, finds method and builds its request from JSON: 0, or the exit code with the
 * error printed. */
static int ctl_request(Ctl *ctl, const char *method, json_t *request, RpcMethodInfo *ret_info,
		       ProtobufCMessage **ret_req)
{
	_cleanup_free_ char *error = NULL;

	int r = ctl_connect(ctl);
	if (r != 0)
		return r;
	if (rpc_catalog_lookup(method, ret_info) < 0)
		return ctl_error(CTL_EXIT_USAGE, "unknown method '%s' (see 'volplugctl methods')",
				 method);
	if (pbjson_to_message(request, ret_info->request, ret_req, &error) < 0)
		return ctl_error(CTL_EXIT_USAGE, "%s request: %s", ret_info->method->name, error);
	return 0;
}

int ctl_call(Ctl *ctl, const char *method, json_t *request, json_t **ret_reply)
{
	ProtobufCMessage *req = NULL, *reply = NULL;
	RpcMethodInfo info;
	RpcStatus st = {};

	int r = ctl_request(ctl, method, request, &info, &req);
	if (r != 0)
		return r;
	r = rpc_client_call(ctl->client, info.path, req, info.reply, ctl->timeout, &reply, &st);
	protobuf_c_message_free_unpacked(req, NULL);
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "%s: the reply is not a valid %s",
				 info.method->name, info.reply->name);
	if (st.code != 0) {
		r = ctl_error(CTL_EXIT_FAILED, "%s: %s: %s", info.method->name,
			      rpc_status_name(st.code) ?: "UNKNOWN", st.message ?: "");
		rpc_status_done(&st);
		return r;
	}
	*ret_reply = pbjson_from_message(reply);
	protobuf_c_message_free_unpacked(reply, NULL);
	return 0;
}

typedef struct StreamCall {
	CtlStreamFunc fn;
	void *userdata;
	int exit; /* fn's non-zero return */
} StreamCall;

static int stream_take(const ProtobufCMessage *reply, void *userdata)
{
	StreamCall *sc = userdata;
	sc->exit = sc->fn(reply, sc->userdata);
	return sc->exit != 0 ? -ECANCELED : 0;
}

int ctl_stream(Ctl *ctl, const char *method, json_t *request, CtlStreamFunc fn, void *userdata)
{
	ProtobufCMessage *req = NULL;
	RpcMethodInfo info;
	RpcStatus st = {};
	StreamCall sc = {fn, userdata, 0};

	int r = ctl_request(ctl, method, request, &info, &req);
	if (r != 0)
		return r;
	r = rpc_client_stream(ctl->client, info.path, req, info.reply, ctl->timeout, stream_take,
			      &sc, &st);
	protobuf_c_message_free_unpacked(req, NULL);
	if (sc.exit != 0)
		return sc.exit;
	if (r < 0)
		return ctl_error(CTL_EXIT_FAILED, "%s: a reply is not a valid %s",
				 info.method->name, info.reply->name);
	if (st.code != 0) {
		r = ctl_error(CTL_EXIT_FAILED, "%s: %s: %s", info.method->name,
			      rpc_status_name(st.code) ?: "UNKNOWN", st.message ?: "");
		rpc_status_done(&st);
		return r;
	}
	return 0;
}

static int print_reply(const ProtobufCMessage *reply, void *userdata)
{
	json_t *j = pbjson_from_message(reply);
	ctl_print(userdata, j);
	json_decref(j);
	return 0;
}

static int run_call(Ctl *ctl, const char *method, const char *body)
{
	json_error_t jerr;
	json_t *request, *reply = NULL;

	if (!body)
		request = json_object();
	else if (strcmp(body, "-") == 0)
		request = json_loadf(stdin, 0, &jerr);
	else
		request = json_loads(body, 0, &jerr);
	if (!request)
		return ctl_error(CTL_EXIT_USAGE, "request JSON, line %d: %s", jerr.line, jerr.text);
	RpcMethodInfo info;
	if (rpc_catalog_lookup(method, &info) == 0 && info.server_streaming) {
		/* Each reply of the stream as it comes. */
		int r = ctl_stream(ctl, method, request, print_reply, ctl);
		json_decref(request);
		return r;
	}
	int r = ctl_call(ctl, method, request, &reply);
	json_decref(request);
	if (r != 0)
		return r;
	ctl_print(ctl, reply);
	json_decref(reply);
	return 0;
}

static int run_probe(Ctl *ctl)
{
	json_t *reply = NULL, *request = json_object();
	int r = ctl_call(ctl, "Probe", request, &reply);
	json_decref(request);
	if (r != 0)
		return r;
	json_t *ready = json_object_get(json_object_get(reply, "ready"), "value");
	/* An absent "ready" means ready, by the spec. */
	bool ok = !json_object_get(reply, "ready") || json_is_true(ready);
	if (ctl->json)
		ctl_print(ctl, reply);
	else
		printf("ready: %s\n", ok ? "yes" : "no");
	json_decref(reply);
	return ok ? 0 : CTL_EXIT_FAILED;
}

static void print_method(const RpcMethodInfo *info, _unused_ void *userdata)
{
	printf("%-40s %s -> %s%s\n", info->path, info->request->name,
	       info->server_streaming ? "stream " : "", info->reply->name);
}

static int dispatch(Ctl *ctl, int argc, char **argv)
{
	const char *cmd = argv[0];

	if (strcmp(cmd, "info") == 0 && argc == 1)
		return run_call(ctl, "GetPluginInfo", NULL);
	if (strcmp(cmd, "capabilities") == 0 && argc == 1)
		return run_call(ctl, "GetPluginCapabilities", NULL);
	if (strcmp(cmd, "probe") == 0 && argc == 1)
		return run_probe(ctl);
	if (strcmp(cmd, "call") == 0 && (argc == 2 || argc == 3))
		return run_call(ctl, argv[1], argc == 3 ? argv[2] : NULL);
	if (strcmp(cmd, "methods") == 0 && argc == 1) {
		rpc_catalog_foreach(print_method, NULL);
		return 0;
	}
	if (strcmp(cmd, "bench") == 0)
		return ctl_bench(ctl, argc, argv);
	if (strcmp(cmd, "pool") == 0)
		return ctl_pool(ctl, argc, argv);
	if (strcmp(cmd, "ownership") == 0)
		return ctl_ownership(ctl, argc, argv);
	if (strcmp(cmd, "volume") == 0)
		return ctl_csi(ctl, argc, argv);
	if (strcmp(cmd, "snapshot") == 0)
		return ctl_csi(ctl, argc, argv);
	if (strcmp(cmd, "group") == 0)
		return ctl_csi(ctl, argc, argv);
	if (strcmp(cmd, "node") == 0)
		return ctl_csi(ctl, argc, argv);
	if (strcmp(cmd, "capacity") == 0)
		return ctl_csi(ctl, argc, argv);
	if (strcmp(cmd, "controller") == 0)
		return ctl_csi(ctl, argc, argv);
	if (strcmp(cmd, "flex") == 0)
		return ctl_flex(ctl, argc, argv);
	if (strcmp(cmd, "status") == 0)
		return ctl_status(ctl, argc, argv);
	return ctl_error(CTL_EXIT_USAGE, "unknown command or wrong arguments: '%s' (see --help)",
			 cmd);
}

int main(int argc, char **argv)
{
	static const struct option options[] = {{"endpoint", required_argument, NULL, 'e'},
						{"output", required_argument, NULL, 'o'},
						{"timeout", required_argument, NULL, 't'},
						{"help", no_argument, NULL, 'h'},
						{"version", no_argument, NULL, 'V'},
						{}};
	Ctl ctl = {.timeout = 60 * USEC_PER_SEC};
	int opt;

	ctl.endpoint = getenv("CSI_ENDPOINT") ?: "unix:///run/volplug/csi.sock";
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "+e:o:t:h", options, NULL)) >= 0) {
		switch (opt) {
		case 'e':
			ctl.endpoint = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "json") != 0 && strcmp(optarg, "text") != 0)
				return ctl_error(CTL_EXIT_USAGE, "--output '%s': want text or json",
						 optarg);
			ctl.json = strcmp(optarg, "json") == 0;
			break;
		case 't':
			if (parse_duration(optarg, &ctl.timeout) < 0 || ctl.timeout == 0)
				return ctl_error(CTL_EXIT_USAGE,
						 "--timeout '%s': want a duration "
						 "such as 30s",
						 optarg);
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case 'V':
			printf("volplugctl %s\n", VOLPLUG_VERSION);
			return 0;
		default:
			return ctl_error(CTL_EXIT_USAGE, "unknown option '%s' (see --help)",
					 argv[optind - 1]);
		}
	}
	if (optind >= argc) {
		fputs(usage, stderr);
		return CTL_EXIT_USAGE;
	}
	int r = dispatch(&ctl, argc - optind, argv + optind);
	if (ctl.client) {
		rpc_client_free(ctl.client);
		grpc_shutdown();
	}
	return r;
}
