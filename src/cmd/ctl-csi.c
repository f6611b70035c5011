/* SPDX-License-Identifier: Apache-2.0 */
/* volplugctl volume|snapshot|group|node|capacity|controller: one friendly subcommand per CSI
 * Controller, GroupController and Node RPC. Each builds the JSON request from its arguments
 * and flags and goes through ctl_call(), so errors and output look like `volplugctl call`. */
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "csi-util.h"
#include "ctl.h"
#include "parse-util.h"
#include "pbjson.h"

/* Flags the subcommands share; each command says which it takes. */
enum {
	OPT_SIZE = 1u << 0,
	OPT_FS = 1u << 1,
	OPT_BLOCK = 1u << 2,
	OPT_MODE = 1u << 3,
	OPT_FLAG = 1u << 4,
	OPT_PARAM = 1u << 5,
	OPT_MUTABLE = 1u << 6,
	OPT_FROM_SNAPSHOT = 1u << 7,
	OPT_FROM_VOLUME = 1u << 8,
	OPT_ZONE = 1u << 9,
	OPT_MAX = 1u << 10,
	OPT_TOKEN = 1u << 11,
	OPT_ALL = 1u << 12,
	OPT_READONLY = 1u << 13,
	OPT_STAGING = 1u << 14,
	OPT_GROUP = 1u << 15,
	OPT_CONTEXT = 1u << 16,
	OPT_PUBLISH_CONTEXT = 1u << 17,
	OPT_VOLUME = 1u << 18,
	OPT_ID = 1u << 19,
	OPT_SECRET = 1u << 20,
	OPT_OFFSET = 1u << 21,
};

/* The flags that make a volume_capability. */
#define OPT_CAP (OPT_FS | OPT_BLOCK | OPT_MODE)
#define OPT_LIST (OPT_MAX | OPT_TOKEN | OPT_ALL)

static const struct {
	const char *name;
	unsigned bit;
	bool has_arg;
	const char *help;
} csi_options[] = {
	{"size", OPT_SIZE, true, "--size SIZE"},
	{"fs", OPT_FS, true, "--fs FSTYPE"},
	{"block", OPT_BLOCK, false, "--block"},
	{"mode", OPT_MODE, true, "--mode ACCESS_MODE"},
	{"flag", OPT_FLAG, true, "--flag MOUNT_FLAG"},
	{"param", OPT_PARAM, true, "--param KEY=VALUE"},
	{"mutable", OPT_MUTABLE, true, "--mutable KEY=VALUE"},
	{"from-snapshot", OPT_FROM_SNAPSHOT, true, "--from-snapshot ID"},
	{"from-volume", OPT_FROM_VOLUME, true, "--from-volume ID"},
	{"zone", OPT_ZONE, true, "--zone ZONE"},
	{"max", OPT_MAX, true, "--max N"},
	{"token", OPT_TOKEN, true, "--token TOKEN"},
	{"all", OPT_ALL, false, "--all"},
	{"readonly", OPT_READONLY, false, "--readonly"},
	{"staging", OPT_STAGING, true, "--staging PATH"},
	{"group", OPT_GROUP, true, "--group GID"},
	{"context", OPT_CONTEXT, true, "--context KEY=VALUE"},
	{"publish-context", OPT_PUBLISH_CONTEXT, true, "--publish-context KEY=VALUE"},
	{"volume", OPT_VOLUME, true, "--volume ID"},
	{"id", OPT_ID, true, "--id ID"},
	{"secret", OPT_SECRET, true, "--secret KEY=VALUE"},
	{"offset", OPT_OFFSET, true, "--offset BYTES"},
};

/* What the command line said. JSON members are NULL when not given. */
typedef struct CsiCommand CsiCommand;

typedef struct CsiArgs {
	const CsiCommand *command;
	char **pos; /* positional arguments */
	size_t n_pos;
	unsigned given; /* OPT_* bits seen */
	int64_t size;
	const char *fs, *mode, *from_snapshot, *from_volume, *zone, *token, *staging, *volume, *id;
	char *group;
	int32_t max;
	int64_t offset;
	json_t *flags;
	json_t *params, *mutable_params, *context, *publish_context, *secrets;
} CsiArgs;

static void csi_args_done(CsiArgs *a)
{
	free(a->group);
	json_decref(a->flags);
	json_decref(a->params);
	json_decref(a->mutable_params);
	json_decref(a->context);
	json_decref(a->publish_context);
	json_decref(a->secrets);
}

/* Fills req from a; returns 0 or CTL_EXIT_USAGE after saying why. */
typedef int (*CsiBuildFn)(const CsiArgs *a, json_t *req);
/* Calls the method and shows the result; returns the exit code. */
typedef int (*CsiRunFn)(Ctl *ctl, const CsiCommand *c, const CsiArgs *a, json_t *req);

struct CsiCommand {
	const char *noun, *verb; /* verb NULL: the noun alone ("capacity") */
	const char *method;
	const char *args; /* positional arguments, for usage */
	size_t min_pos, max_pos;
	unsigned options;
	CsiBuildFn build;
	CsiRunFn run; /* NULL: call and print */
	/* Text output when the reply is empty: $1 and $2 are the first positionals. */
	const char *done;
	unsigned required; /* of the options, those the driver needs */
};

/* ---- helpers that build request members ---- */

static int bad_usage(const CsiCommand *c, const char *fmt, ...) _printf_(2, 3);

/* Says what is wrong with the command line and how it goes; returns CTL_EXIT_USAGE. */
#define usage_error(a, ...) bad_usage((a)->command, __VA_ARGS__)

static void set_str(json_t *o, const char *key, const char *value)
{
	if (value)
		json_object_set_new(o, key, json_string(value));
}

static void set_obj(json_t *o, const char *key, json_t *value)
{
	if (value)
		json_object_set(o, key, value);
}

static void set_size(json_t *o, const char *key, int64_t bytes)
{
	json_t *range = json_object();
	json_object_set_new(range, "required_bytes", json_integer(bytes));
	json_object_set_new(o, key, range);
}

static json_t *topology(const char *zone)
{
	json_t *t = json_object(), *seg = json_object();
	json_object_set_new(seg, TOPOLOGY_KEY, json_string(zone));
	json_object_set_new(t, "segments", seg);
	return t;
}

static bool have_capability_flags(const CsiArgs *a)
{
	return a->given & (OPT_CAP | OPT_FLAG | OPT_GROUP);
}

/* The volume_capability the flags describe: mount (with --fs, --flag, --group) unless
 * --block, access mode --mode or SINGLE_NODE_WRITER. */
static int capability(const CsiArgs *a, json_t **ret)
{
	if (a->fs && (a->given & OPT_BLOCK))
		return usage_error(a, "--fs and --block exclude each other");
	if ((a->given & OPT_BLOCK) && (a->flags || a->group))
		return usage_error(a, "--flag and --group need a mount volume, not --block");

	json_t *cap = json_object();
	if (a->given & OPT_BLOCK)
		json_object_set_new(cap, "block", json_object());
	else {
		json_t *m = json_object();
		set_str(m, "fs_type", a->fs);
		set_obj(m, "mount_flags", a->flags);
		set_str(m, "volume_mount_group", a->group);
		json_object_set_new(cap, "mount", m);
	}
	json_t *mode = json_object();
	json_object_set_new(mode, "mode", json_string(a->mode ?: "SINGLE_NODE_WRITER"));
	json_object_set_new(cap, "access_mode", mode);
	*ret = cap;
	return 0;
}

static int set_capability(const CsiArgs *a, json_t *req, const char *key, bool as_list)
{
	json_t *cap;
	int r = capability(a, &cap);
	if (r != 0)
		return r;
	if (as_list) {
		json_t *l = json_array();
		json_array_append_new(l, cap);
		cap = l;
	}
	json_object_set_new(req, key, cap);
	return 0;
}

/* --secret, for the commands that take it. */
static void set_secrets(const CsiArgs *a, json_t *req)
{
	set_obj(req, "secrets", a->secrets);
}

/* ---- builders ---- */

static int build_volume_create(const CsiArgs *a, json_t *req)
{
	if (a->from_snapshot && a->from_volume)
		return usage_error(a, "--from-snapshot and --from-volume exclude each other");
	set_str(req, "name", a->pos[0]);
	if (a->given & OPT_SIZE)
		set_size(req, "capacity_range", a->size);
	int r = set_capability(a, req, "volume_capabilities", true);
	if (r != 0)
		return r;
	set_obj(req, "parameters", a->params);
	set_obj(req, "mutable_parameters", a->mutable_params);
	set_secrets(a, req);
	if (a->from_snapshot || a->from_volume) {
		json_t *src = json_object(), *inner = json_object();
		if (a->from_snapshot)
			set_str(inner, "snapshot_id", a->from_snapshot);
		else
			set_str(inner, "volume_id", a->from_volume);
		json_object_set_new(src, a->from_snapshot ? "snapshot" : "volume", inner);
		json_object_set_new(req, "volume_content_source", src);
	}
	if (a->zone) {
		json_t *req_topo = json_object(), *requisite = json_array(),
		       *preferred = json_array();
		json_array_append_new(requisite, topology(a->zone));
		json_array_append_new(preferred, topology(a->zone));
		json_object_set_new(req_topo, "requisite", requisite);
		json_object_set_new(req_topo, "preferred", preferred);
		json_object_set_new(req, "accessibility_requirements", req_topo);
	}
	return 0;
}

/* The commands whose only argument is an ID (and maybe a second one). */
static int build_volume_id(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_secrets(a, req);
	return 0;
}

static int build_list(const CsiArgs *a, json_t *req)
{
	if (a->given & OPT_MAX)
		json_object_set_new(req, "max_entries", json_integer(a->max));
	set_str(req, "starting_token", a->token);
	return 0;
}

static int build_volume_expand(const CsiArgs *a, json_t *req)
{
	uint64_t size;

	if (parse_size(a->pos[1], &size) < 0 || size > INT64_MAX)
		return usage_error(a, "size '%s': want bytes or a size such as 10G or 512Mi",
				   a->pos[1]);
	set_str(req, "volume_id", a->pos[0]);
	set_size(req, "capacity_range", (int64_t)size);
	set_secrets(a, req);
	return have_capability_flags(a) ? set_capability(a, req, "volume_capability", false) : 0;
}

/* KEY=VALUE arguments into an object; NULL after an error message. */
static json_t *kv_args(const CsiArgs *a, char **v, size_t n)
{
	json_t *o = json_object();
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(v[i], '=');
		if (!eq || eq == v[i]) {
			usage_error(a, "'%s': want KEY=VALUE", v[i]);
			json_decref(o);
			return NULL;
		}
		_cleanup_free_ char *key = xstrndup(v[i], (size_t)(eq - v[i]));
		json_object_set_new(o, key, json_string(eq + 1));
	}
	return o;
}

static int build_volume_modify(const CsiArgs *a, json_t *req)
{
	json_t *m = kv_args(a, a->pos + 1, a->n_pos - 1);
	if (!m)
		return CTL_EXIT_USAGE;
	set_str(req, "volume_id", a->pos[0]);
	json_object_set_new(req, "mutable_parameters", m);
	set_secrets(a, req);
	return 0;
}

static int build_volume_validate(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_obj(req, "parameters", a->params);
	set_obj(req, "mutable_parameters", a->mutable_params);
	set_obj(req, "volume_context", a->context);
	set_secrets(a, req);
	return set_capability(a, req, "volume_capabilities", true);
}

static int build_volume_publish(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_str(req, "node_id", a->pos[1]);
	if (a->given & OPT_READONLY)
		json_object_set_new(req, "readonly", json_true());
	set_obj(req, "volume_context", a->context);
	set_secrets(a, req);
	return set_capability(a, req, "volume_capability", false);
}

static int build_volume_unpublish(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	if (a->n_pos > 1)
		set_str(req, "node_id", a->pos[1]);
	set_secrets(a, req);
	return 0;
}

static int build_capacity(const CsiArgs *a, json_t *req)
{
	set_obj(req, "parameters", a->params);
	if (a->zone)
		json_object_set_new(req, "accessible_topology", topology(a->zone));
	return have_capability_flags(a) ? set_capability(a, req, "volume_capabilities", true) : 0;
}

static int build_empty(_unused_ const CsiArgs *a, _unused_ json_t *req)
{
	return 0;
}

static int build_snapshot_create(const CsiArgs *a, json_t *req)
{
	set_str(req, "name", a->pos[0]);
	set_str(req, "source_volume_id", a->pos[1]);
	set_obj(req, "parameters", a->params);
	set_secrets(a, req);
	return 0;
}

static int build_snapshot_id(const CsiArgs *a, json_t *req)
{
	set_str(req, "snapshot_id", a->pos[0]);
	set_secrets(a, req);
	return 0;
}

/* GetMetadataAllocated and GetMetadataDelta: the ranges from --offset on, --max a message. */
static void set_ranges_args(const CsiArgs *a, json_t *req)
{
	if (a->given & OPT_OFFSET)
		json_object_set_new(req, "starting_offset", json_integer(a->offset));
	if (a->given & OPT_MAX)
		json_object_set_new(req, "max_results", json_integer(a->max));
	set_secrets(a, req);
}

static int build_snapshot_allocated(const CsiArgs *a, json_t *req)
{
	set_str(req, "snapshot_id", a->pos[0]);
	set_ranges_args(a, req);
	return 0;
}

static int build_snapshot_diff(const CsiArgs *a, json_t *req)
{
	set_str(req, "base_snapshot_id", a->pos[0]);
	set_str(req, "target_snapshot_id", a->pos[1]);
	set_ranges_args(a, req);
	return 0;
}

static int build_snapshot_list(const CsiArgs *a, json_t *req)
{
	set_str(req, "source_volume_id", a->volume);
	set_str(req, "snapshot_id", a->id);
	set_secrets(a, req);
	return build_list(a, req);
}

static json_t *string_array(char **v, size_t n)
{
	json_t *l = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(l, json_string(v[i]));
	return l;
}

static int build_group_create(const CsiArgs *a, json_t *req)
{
	set_str(req, "name", a->pos[0]);
	json_object_set_new(req, "source_volume_ids", string_array(a->pos + 1, a->n_pos - 1));
	set_obj(req, "parameters", a->params);
	set_secrets(a, req);
	return 0;
}

static int build_group_id(const CsiArgs *a, json_t *req)
{
	set_str(req, "group_snapshot_id", a->pos[0]);
	if (a->n_pos > 1)
		json_object_set_new(req, "snapshot_ids", string_array(a->pos + 1, a->n_pos - 1));
	set_secrets(a, req);
	return 0;
}

static int build_node_stage(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_str(req, "staging_target_path", a->pos[1]);
	set_obj(req, "volume_context", a->context);
	set_obj(req, "publish_context", a->publish_context);
	set_secrets(a, req);
	return set_capability(a, req, "volume_capability", false);
}

static int build_node_unstage(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_str(req, "staging_target_path", a->pos[1]);
	return 0;
}

static int build_node_publish(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_str(req, "target_path", a->pos[1]);
	set_str(req, "staging_target_path", a->staging);
	if (a->given & OPT_READONLY)
		json_object_set_new(req, "readonly", json_true());
	set_obj(req, "volume_context", a->context);
	set_obj(req, "publish_context", a->publish_context);
	set_secrets(a, req);
	return set_capability(a, req, "volume_capability", false);
}

static int build_node_unpublish(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_str(req, "target_path", a->pos[1]);
	return 0;
}

static int build_node_stats(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_str(req, "volume_path", a->pos[1]);
	set_str(req, "staging_target_path", a->staging);
	return 0;
}

static int build_node_expand(const CsiArgs *a, json_t *req)
{
	set_str(req, "volume_id", a->pos[0]);
	set_str(req, "volume_path", a->pos[1]);
	set_str(req, "staging_target_path", a->staging);
	if (a->n_pos > 2) {
		uint64_t size;
		if (parse_size(a->pos[2], &size) < 0 || size > INT64_MAX)
			return usage_error(a,
					   "size '%s': want bytes or a size such as 10G or 512Mi",
					   a->pos[2]);
		set_size(req, "capacity_range", (int64_t)size);
	}
	set_secrets(a, req);
	return have_capability_flags(a) ? set_capability(a, req, "volume_capability", false) : 0;
}

/* ---- runners ---- */

/* "$1 deleted" with the positionals put in. */
static void print_done(const CsiCommand *c, const CsiArgs *a)
{
	for (const char *p = c->done; *p; p++) {
		if (p[0] == '$' && (p[1] == '1' || p[1] == '2')) {
			size_t i = (size_t)(p[1] - '1');
			fputs(i < a->n_pos ? a->pos[i] : "", stdout);
			p++;
		} else
			fputc(*p, stdout);
	}
	fputc('\n', stdout);
}

static int run_default(Ctl *ctl, const CsiCommand *c, const CsiArgs *a, json_t *req)
{
	json_t *reply = NULL;
	int r = ctl_call(ctl, c->method, req, &reply);
	if (r != 0)
		return r;
	if (!ctl->json && c->done && json_object_size(reply) == 0)
		print_done(c, a);
	else
		ctl_print(ctl, reply);
	json_decref(reply);
	return 0;
}

/* 1073741824 -> "1 GiB", 1536 -> "1.5 KiB": for a note, not for parsing. */
static void size_words(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "KMGTPE";
	double v = (double)bytes;
	int u = -1;

	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%" PRIu64 " bytes", bytes);
	else
		snprintf(buf, len, "%.4g %ciB", v, units[u]);
}

/* CreateVolume, and a note on stderr when the size made is not the size asked: the driver's
 * default without --size, or --size rounded up to what the driver allocates. */
static int run_volume_create(Ctl *ctl, const CsiCommand *c, const CsiArgs *a, json_t *req)
{
	json_t *reply = NULL;
	int r = ctl_call(ctl, c->method, req, &reply);
	if (r != 0)
		return r;
	ctl_print(ctl, reply);
	json_t *cap = json_object_get(json_object_get(reply, "volume"), "capacity_bytes");
	uint64_t made = json_is_integer(cap)  ? (uint64_t)json_integer_value(cap)
			: json_is_string(cap) ? strtoull(json_string_value(cap), NULL, 10)
					      : 0;
	char words[32];
	size_words(made, words, sizeof(words));
	if (ctl->json || !made)
		;
	else if (!(a->given & OPT_SIZE))
		fprintf(stderr,
			"volplugctl: volume %s: %" PRIu64 " bytes (%s), the driver's default size "
			"(no --size)\n",
			a->pos[0], made, words);
	else if ((uint64_t)a->size != made)
		fprintf(stderr,
			"volplugctl: volume %s: %" PRIu64 " bytes (%s), the driver's size for the "
			"%" PRId64 " bytes asked\n",
			a->pos[0], made, words, a->size);
	json_decref(reply);
	return 0;
}

/* A list page, or with --all every page (following next_token) as one list. */
static int run_list(Ctl *ctl, const CsiCommand *c, const CsiArgs *a, json_t *req)
{
	if (!(a->given & OPT_ALL))
		return run_default(ctl, c, a, req);

	json_t *all = json_array();
	_cleanup_free_ char *token = a->token ? xstrdup(a->token) : NULL;
	int r = 0;

	for (;;) {
		json_t *reply = NULL;
		if (token)
			json_object_set_new(req, "starting_token", json_string(token));
		r = ctl_call(ctl, c->method, req, &reply);
		if (r != 0)
			break;
		json_t *entries = json_object_get(reply, "entries");
		if (entries)
			json_array_extend(all, entries);
		const char *next = json_string_value(json_object_get(reply, "next_token"));
		bool loop = next && token && strcmp(next, token) == 0;
		free(token);
		token = next && *next ? xstrdup(next) : NULL;
		json_decref(reply);
		if (loop) {
			r = ctl_error(CTL_EXIT_FAILED, "%s: next_token '%s' repeats itself",
				      c->method, token);
			break;
		}
		if (!token)
			break;
	}
	if (r == 0) {
		json_t *out = json_object();
		json_object_set(out, "entries", all);
		ctl_print(ctl, out);
		json_decref(out);
	}
	json_decref(all);
	return r;
}

/* What the replies of a ranges stream added up to. */
typedef struct RangesOut {
	Ctl *ctl;
	bool delta;
	uint64_t ranges, bytes;
} RangesOut;

/* One reply: "OFFSET LENGTH" a line (bytes), or the reply as one JSON line (-o json). */
static int ranges_print(const ProtobufCMessage *reply, void *userdata)
{
	RangesOut *o = userdata;
	size_t n;
	Csi__V1__BlockMetadata **items;

	if (o->ctl->json) {
		json_t *j = pbjson_from_message(reply);
		_cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);
		json_decref(j);
		puts(text ?: "{}");
		return 0;
	}
	if (o->delta) {
		const Csi__V1__GetMetadataDeltaResponse *r = (const void *)reply;
		n = r->n_block_metadata;
		items = r->block_metadata;
	} else {
		const Csi__V1__GetMetadataAllocatedResponse *r = (const void *)reply;
		n = r->n_block_metadata;
		items = r->block_metadata;
	}
	for (size_t i = 0; i < n; i++) {
		printf("%" PRId64 " %" PRId64 "\n", items[i]->byte_offset, items[i]->size_bytes);
		o->ranges++;
		o->bytes += (uint64_t)items[i]->size_bytes;
	}
	return 0;
}

/* Streams the ranges to stdout as they come, and says on stderr how many. */
static int run_ranges(Ctl *ctl, const CsiCommand *c, _unused_ const CsiArgs *a, json_t *req)
{
	RangesOut o = {.ctl = ctl, .delta = strcmp(c->method, "GetMetadataDelta") == 0};
	int r = ctl_stream(ctl, c->method, req, ranges_print, &o);
	if (r == 0 && !ctl->json)
		fprintf(stderr, "volplugctl: %" PRIu64 " ranges, %" PRIu64 " bytes\n", o.ranges,
			o.bytes);
	return r;
}

/* Validation answers with or without "confirmed": without is a failure for the user. */
static int run_validate(Ctl *ctl, const CsiCommand *c, _unused_ const CsiArgs *a, json_t *req)
{
	json_t *reply = NULL;
	int r = ctl_call(ctl, c->method, req, &reply);
	if (r != 0)
		return r;
	ctl_print(ctl, reply);
	bool confirmed = json_object_get(reply, "confirmed") != NULL;
	if (!confirmed)
		r = ctl_error(CTL_EXIT_FAILED, "%s: not confirmed: %s", c->method,
			      json_string_value(json_object_get(reply, "message")) ?: "no message");
	json_decref(reply);
	return r;
}

#define UNLIMITED SIZE_MAX

static const CsiCommand commands[] = {
	{"volume", "create", "CreateVolume", "NAME", 1, 1,
	 OPT_SIZE | OPT_CAP | OPT_FLAG | OPT_PARAM | OPT_MUTABLE | OPT_FROM_SNAPSHOT |
		 OPT_FROM_VOLUME | OPT_ZONE | OPT_SECRET,
	 build_volume_create, run_volume_create, NULL},
	{"volume", "delete", "DeleteVolume", "ID", 1, 1, OPT_SECRET, build_volume_id, NULL,
	 "volume $1 deleted"},
	{"volume", "list", "ListVolumes", "", 0, 0, OPT_LIST, build_list, run_list, NULL},
	{"volume", "get", "ControllerGetVolume", "ID", 1, 1, 0, build_volume_id, NULL, NULL},
	{"volume", "expand", "ControllerExpandVolume", "ID SIZE", 2, 2,
	 OPT_CAP | OPT_FLAG | OPT_SECRET, build_volume_expand, NULL, NULL},
	{"volume", "modify", "ControllerModifyVolume", "ID KEY=VALUE...", 2, UNLIMITED, OPT_SECRET,
	 build_volume_modify, NULL, "volume $1 modified"},
	{"volume", "validate", "ValidateVolumeCapabilities", "ID", 1, 1,
	 OPT_CAP | OPT_FLAG | OPT_PARAM | OPT_MUTABLE | OPT_CONTEXT | OPT_SECRET,
	 build_volume_validate, run_validate, NULL},
	{"volume", "publish", "ControllerPublishVolume", "ID NODE", 2, 2,
	 OPT_CAP | OPT_FLAG | OPT_READONLY | OPT_CONTEXT | OPT_SECRET, build_volume_publish, NULL,
	 "volume $1 published to $2"},
	{"volume", "unpublish", "ControllerUnpublishVolume", "ID [NODE]", 1, 2, OPT_SECRET,
	 build_volume_unpublish, NULL, "volume $1 unpublished"},
	{"capacity", NULL, "GetCapacity", "", 0, 0, OPT_ZONE | OPT_PARAM | OPT_CAP, build_capacity,
	 NULL, NULL},
	{"controller", "capabilities", "ControllerGetCapabilities", "", 0, 0, 0, build_empty, NULL,
	 NULL},
	{"snapshot", "create", "CreateSnapshot", "NAME VOLUME_ID", 2, 2, OPT_PARAM | OPT_SECRET,
	 build_snapshot_create, NULL, NULL},
	{"snapshot", "delete", "DeleteSnapshot", "ID", 1, 1, OPT_SECRET, build_snapshot_id, NULL,
	 "snapshot $1 deleted"},
	{"snapshot", "list", "ListSnapshots", "", 0, 0, OPT_LIST | OPT_VOLUME | OPT_ID | OPT_SECRET,
	 build_snapshot_list, run_list, NULL},
	{"snapshot", "allocated", "GetMetadataAllocated", "SNAPSHOT_ID", 1, 1,
	 OPT_OFFSET | OPT_MAX | OPT_SECRET, build_snapshot_allocated, run_ranges, NULL},
	{"snapshot", "diff", "GetMetadataDelta", "BASE_SNAPSHOT_ID TARGET_SNAPSHOT_ID", 2, 2,
	 OPT_OFFSET | OPT_MAX | OPT_SECRET, build_snapshot_diff, run_ranges, NULL},
	{"group", "create", "CreateVolumeGroupSnapshot", "NAME VOLUME_ID...", 2, UNLIMITED,
	 OPT_PARAM | OPT_SECRET, build_group_create, NULL, NULL},
	{"group", "get", "GetVolumeGroupSnapshot", "ID [SNAPSHOT_ID...]", 1, UNLIMITED, OPT_SECRET,
	 build_group_id, NULL, NULL},
	{"group", "delete", "DeleteVolumeGroupSnapshot", "ID [SNAPSHOT_ID...]", 1, UNLIMITED,
	 OPT_SECRET, build_group_id, NULL, "group snapshot $1 deleted"},
	{"group", "capabilities", "GroupControllerGetCapabilities", "", 0, 0, 0, build_empty, NULL,
	 NULL},
	{"node", "info", "NodeGetInfo", "", 0, 0, 0, build_empty, NULL, NULL},
	{"node", "capabilities", "NodeGetCapabilities", "", 0, 0, 0, build_empty, NULL, NULL},
	{"node", "stage", "NodeStageVolume", "ID STAGING_PATH", 2, 2,
	 OPT_CAP | OPT_FLAG | OPT_GROUP | OPT_CONTEXT | OPT_PUBLISH_CONTEXT | OPT_SECRET,
	 build_node_stage, NULL, "volume $1 staged at $2"},
	{"node", "unstage", "NodeUnstageVolume", "ID STAGING_PATH", 2, 2, 0, build_node_unstage,
	 NULL, "volume $1 unstaged from $2"},
	{"node", "publish", "NodePublishVolume", "ID TARGET_PATH", 2, 2,
	 OPT_CAP | OPT_FLAG | OPT_GROUP | OPT_STAGING | OPT_READONLY | OPT_CONTEXT |
		 OPT_PUBLISH_CONTEXT | OPT_SECRET,
	 build_node_publish, NULL, "volume $1 published at $2", OPT_STAGING},
	{"node", "unpublish", "NodeUnpublishVolume", "ID TARGET_PATH", 2, 2, 0,
	 build_node_unpublish, NULL, "volume $1 unpublished from $2"},
	{"node", "stats", "NodeGetVolumeStats", "ID VOLUME_PATH", 2, 2, OPT_STAGING,
	 build_node_stats, NULL, NULL},
	{"node", "expand", "NodeExpandVolume", "ID VOLUME_PATH [SIZE]", 2, 3,
	 OPT_CAP | OPT_FLAG | OPT_STAGING | OPT_SECRET, build_node_expand, NULL, NULL},
};

/* ---- parsing ---- */

static void print_usage_line(FILE *f, const CsiCommand *c, const char *prefix)
{
	fprintf(f, "%svolplugctl %s%s%s%s%s", prefix, c->noun, c->verb ? " " : "", c->verb ?: "",
		c->args[0] ? " " : "", c->args);
	for (size_t i = 0; i < ELEMENTSOF(csi_options); i++)
		if (c->required & csi_options[i].bit)
			fprintf(f, " %s", csi_options[i].help);
	for (size_t i = 0; i < ELEMENTSOF(csi_options); i++)
		if ((c->options & ~c->required) & csi_options[i].bit)
			fprintf(f, " [%s]", csi_options[i].help);
	fputc('\n', f);
}

static void print_noun_usage(FILE *f, const char *noun)
{
	fprintf(f, "Usage:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strcmp(commands[i].noun, noun) == 0)
			print_usage_line(f, &commands[i], "  ");
	fputs("\nSizes: bytes or 10G, 512Mi, 1.5T (base 1024). Modes: SINGLE_NODE_WRITER "
	      "(default),\n"
	      "SINGLE_NODE_READER_ONLY, MULTI_NODE_READER_ONLY, MULTI_NODE_SINGLE_WRITER,\n"
	      "MULTI_NODE_MULTI_WRITER, SINGLE_NODE_SINGLE_WRITER, SINGLE_NODE_MULTI_WRITER.\n"
	      "Flags that repeat (--param, --mutable, --context, --publish-context, --secret,\n"
	      "--flag) add one entry each.\n",
	      f);
}

static int bad_usage(const CsiCommand *c, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "volplugctl: %s%s%s: ", c->noun, c->verb ? " " : "", c->verb ?: "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	print_usage_line(stderr, c, "usage: ");
	return CTL_EXIT_USAGE;
}

static int add_kv(const CsiCommand *c, json_t **map, const char *flag, const char *arg)
{
	const char *eq = strchr(arg, '=');
	if (!eq || eq == arg) {
		return bad_usage(c, "--%s '%s': want KEY=VALUE", flag, arg);
	}
	if (!*map)
		*map = json_object();
	_cleanup_free_ char *key = xstrndup(arg, (size_t)(eq - arg));
	json_object_set_new(*map, key, json_string(eq + 1));
	return 0;
}

static int check_mode(const CsiCommand *c, const char *mode)
{
	const ProtobufCEnumDescriptor *d =
		&csi__v1__volume_capability__access_mode__mode__descriptor;
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(d, mode);
	if (v && v->value != 0)
		return 0;
	_cleanup_free_ char *m = xasprintf("--mode '%s': want one of", mode);
	for (unsigned i = 0; i < d->n_values; i++)
		if (d->values[i].value != 0) {
			char *n = xasprintf("%s%s %s", m, i > 1 ? "," : "", d->values[i].name);
			free(m);
			m = n;
		}
	return bad_usage(c, "%s", m);
}

/* One flag into a; returns 0 or CTL_EXIT_USAGE. */
static int take_option(const CsiCommand *c, CsiArgs *a, unsigned bit, const char *name,
		       const char *arg)
{
	uint64_t u;
	uint32_t u32;

	if (!(c->options & bit)) {
		return bad_usage(c, "--%s is not an option of this command", name);
	}
	a->given |= bit;
	switch (bit) {
	case OPT_SIZE:
		if (parse_size(arg, &u) < 0 || u > INT64_MAX)
			return bad_usage(
				c, "--size '%s': want bytes or a size such as 10G or 512Mi", arg);
		/* 0 is "no requirement" in CSI: the driver would pick its default silently. */
		if (u == 0)
			return bad_usage(c,
					 "--size '%s': want at least 1 byte (without --size the "
					 "driver picks its default size)",
					 arg);
		a->size = (int64_t)u;
		return 0;
	case OPT_FS:
		if (!*arg)
			return bad_usage(c, "--fs: want a file system type such as ext4");
		a->fs = arg;
		return 0;
	case OPT_MODE:
		a->mode = arg;
		return check_mode(c, arg);
	case OPT_FLAG:
		if (!a->flags)
			a->flags = json_array();
		json_array_append_new(a->flags, json_string(arg));
		return 0;
	case OPT_PARAM:
		return add_kv(c, &a->params, name, arg);
	case OPT_MUTABLE:
		return add_kv(c, &a->mutable_params, name, arg);
	case OPT_CONTEXT:
		return add_kv(c, &a->context, name, arg);
	case OPT_PUBLISH_CONTEXT:
		return add_kv(c, &a->publish_context, name, arg);
	case OPT_SECRET:
		return add_kv(c, &a->secrets, name, arg);
	case OPT_FROM_SNAPSHOT:
		a->from_snapshot = arg;
		return 0;
	case OPT_FROM_VOLUME:
		a->from_volume = arg;
		return 0;
	case OPT_ZONE:
		a->zone = arg;
		return 0;
	case OPT_MAX:
		if (parse_uint32(arg, &u32) < 0 || u32 > INT32_MAX)
			return bad_usage(c, "--max '%s': want a number of entries", arg);
		a->max = (int32_t)u32;
		return 0;
	case OPT_TOKEN:
		a->token = arg;
		return 0;
	case OPT_STAGING:
		a->staging = arg;
		return 0;
	case OPT_GROUP:
		if (parse_uint32(arg, &u32) < 0)
			return bad_usage(c, "--group '%s': want a group number", arg);
		free(a->group);
		a->group = xasprintf("%u", u32);
		return 0;
	case OPT_VOLUME:
		a->volume = arg;
		return 0;
	case OPT_ID:
		a->id = arg;
		return 0;
	case OPT_OFFSET:
		if (parse_size(arg, &u) < 0 || u > INT64_MAX)
			return bad_usage(c, "--offset '%s': want bytes or a size such as 1G", arg);
		a->offset = (int64_t)u;
		return 0;
	default: /* OPT_BLOCK, OPT_ALL, OPT_READONLY: no argument */
		return 0;
	}
}

static int parse_args(const CsiCommand *c, int argc, char **argv, CsiArgs *a)
{
	struct option longopts[ELEMENTSOF(csi_options) + 2] = {};
	int opt, idx = 0;

	for (size_t i = 0; i < ELEMENTSOF(csi_options); i++)
		longopts[i] = (struct option){
			csi_options[i].name,
			csi_options[i].has_arg ? required_argument : no_argument, NULL, (int)i};
	longopts[ELEMENTSOF(csi_options)] = (struct option){"help", no_argument, NULL, 'h'};

	optind = 0; /* re-initialize getopt: flags may follow the positionals */
	while ((opt = getopt_long(argc, argv, ":h", longopts, &idx)) >= 0) {
		if (opt == 'h') {
			print_usage_line(stdout, c, "Usage: ");
			return -1;
		}
		if (opt == '?' || opt == ':') {
			if (opt == ':')
				return bad_usage(c, "%s needs a value", argv[optind - 1]);
			return bad_usage(c, "unknown option '%s'", argv[optind - 1]);
		}
		int r = take_option(c, a, csi_options[opt].bit, csi_options[opt].name, optarg);
		if (r != 0)
			return r;
	}
	for (size_t i = 0; i < ELEMENTSOF(csi_options); i++)
		if ((c->required & csi_options[i].bit) && !(a->given & csi_options[i].bit))
			return bad_usage(c, "missing %s", csi_options[i].help);
	a->pos = argv + optind;
	a->n_pos = (size_t)(argc - optind);
	if (a->n_pos < c->min_pos)
		return bad_usage(c, "missing arguments: want %s", c->args);
	if (a->n_pos > c->max_pos)
		return bad_usage(c, "unexpected argument '%s'", a->pos[c->max_pos]);
	for (size_t i = 0; i < a->n_pos; i++)
		if (!a->pos[i][0])
			return bad_usage(c, "argument %zu is empty", i + 1);
	return 0;
}

static bool is_noun(const char *word)
{
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (strcmp(commands[i].noun, word) == 0)
			return true;
	return false;
}

int ctl_csi(Ctl *ctl, int argc, char **argv)
{
	const char *noun = argv[0];
	const CsiCommand *c = NULL;

	if (!is_noun(noun))
		return ctl_error(CTL_EXIT_USAGE, "unknown command '%s'", noun);
	for (size_t i = 0; i < ELEMENTSOF(commands) && !c; i++) {
		if (strcmp(commands[i].noun, noun) != 0)
			continue;
		if (!commands[i].verb)
			c = &commands[i];
		else if (argc >= 2 && strcmp(commands[i].verb, argv[1]) == 0)
			c = &commands[i];
	}
	if (!c) {
		if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
			print_noun_usage(stdout, noun);
			return 0;
		}
		if (argc >= 2)
			fprintf(stderr, "volplugctl: %s: unknown subcommand '%s'\n", noun, argv[1]);
		else
			fprintf(stderr, "volplugctl: %s: missing subcommand\n", noun);
		print_noun_usage(stderr, noun);
		return CTL_EXIT_USAGE;
	}
	/* argv[0] becomes the last command word, so getopt sees only what follows. */
	int skip = c->verb ? 1 : 0;
	CsiArgs a = {.command = c};
	int r = parse_args(c, argc - skip, argv + skip, &a);
	if (r != 0) {
		csi_args_done(&a);
		return r < 0 ? 0 : r;
	}
	json_t *req = json_object();
	r = c->build(&a, req);
	if (r == 0)
		r = (c->run ?: run_default)(ctl, c, &a, req);
	json_decref(req);
	csi_args_done(&a);
	return r;
}
