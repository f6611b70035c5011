/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "bench-seq.h"
#include "catalog.h"
#include "parse-util.h"
#include "path-util.h"
#include "pbjson.h"
#include "status.h"

int bench_seq_config_add(BenchSeqConfig *cfg, const char *key_value)
{
	const char *eq = strchr(key_value, '=');
	if (!eq || eq == key_value || cfg->n_params == BENCH_MAX_PARAMS)
		return -EINVAL;
	cfg->keys[cfg->n_params] = xstrndup(key_value, eq - key_value);
	cfg->values[cfg->n_params] = xstrdup(eq + 1);
	cfg->n_params++;
	return 0;
}

const char *bench_seq_param(const BenchSeqConfig *cfg, const char *key, const char *fallback)
{
	for (size_t i = cfg->n_params; i > 0; i--)
		if (strcmp(cfg->keys[i - 1], key) == 0)
			return cfg->values[i - 1];
	return fallback;
}

void bench_seq_config_done(BenchSeqConfig *cfg)
{
	for (size_t i = 0; i < cfg->n_params; i++) {
		free(cfg->keys[i]);
		free(cfg->values[i]);
	}
	free(cfg->path);
	free(cfg->request);
	free(cfg->state);
	*cfg = (BenchSeqConfig){};
}

static void single_rpc_iterate(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg,
			       _unused_ unsigned client_id, _unused_ uint64_t i)
{
	_cleanup_free_ void *reply = NULL;
	size_t reply_size;
	RpcStatus st = {};

	usec_t start = now_usec(CLOCK_MONOTONIC);
	int r = rpc_client_call_raw(client, cfg->path, cfg->request, cfg->request_size,
				    60 * USEC_PER_SEC, &reply, &reply_size, &st);
	usec_t took = now_usec(CLOCK_MONOTONIC) - start;
	if (r < 0 || st.code != 0)
		bench_fail(t, "%s: %s: %s", cfg->path,
			   r < 0 ? "transport" : rpc_status_name(st.code), st.message ?: "");
	else
		bench_record(t, 0, took);
	rpc_status_done(&st);
}

static BenchSequence single_rpc = {
	.name = "rpc",
	.n_steps = 1,
	.iterate = single_rpc_iterate,
};

int bench_sequence_single_rpc(const char *method, const char *request_json, BenchSeqConfig *cfg,
			      const BenchSequence **ret, char **ret_error)
{
	ProtobufCMessage *m = NULL;
	RpcMethodInfo info;
	json_error_t jerr;

	if (rpc_catalog_lookup(method, &info) < 0) {
		*ret_error = xasprintf("--rpc '%s': unknown method", method);
		return -EINVAL;
	}
	json_t *j = json_loads(request_json, 0, &jerr);
	if (!j) {
		*ret_error = xasprintf("--request: %s", jerr.text);
		return -EINVAL;
	}
	int r = pbjson_to_message(j, info.request, &m, ret_error);
	json_decref(j);
	if (r < 0)
		return r;
	/* Encoded once: the bench measures the server, not our encoder. */
	cfg->request_size = protobuf_c_message_get_packed_size(m);
	cfg->request = xmalloc(cfg->request_size);
	protobuf_c_message_pack(m, cfg->request);
	protobuf_c_message_free_unpacked(m, NULL);
	cfg->path = xstrdup(info.path);
	single_rpc.steps[0] = info.method->name;
	*ret = &single_rpc;
	return 0;
}

/* Lifecycle sequences. Requests are built as JSON and converted with pbjson, replies decoded
 * the same way, both outside the timed region: a step's time is the RPC as the driver serves
 * it. Every name carries the run, the client and the iteration, so runs never collide. */

#define SEQ_CALL_TIMEOUT (300 * USEC_PER_SEC) /* a mkfs of a large volume takes a while */
#define SEQ_DEFAULT_SIZE "1Gi"
#define SEQ_MAX_SLOTS 256
#define SEQ_MAX_NODES 64

typedef enum {
	M_CREATE_VOLUME,
	M_DELETE_VOLUME,
	M_CONTROLLER_PUBLISH,
	M_CONTROLLER_UNPUBLISH,
	M_NODE_STAGE,
	M_NODE_UNSTAGE,
	M_NODE_PUBLISH,
	M_NODE_UNPUBLISH,
	M_CREATE_SNAPSHOT,
	M_DELETE_SNAPSHOT,
	M_NODE_GET_INFO,
	M_CONTROLLER_CAPABILITIES,
	M_NODE_CAPABILITIES,
	_M_MAX,
} SeqMethod;

static const char *const method_names[_M_MAX] = {
	[M_CREATE_VOLUME] = "CreateVolume",
	[M_DELETE_VOLUME] = "DeleteVolume",
	[M_CONTROLLER_PUBLISH] = "ControllerPublishVolume",
	[M_CONTROLLER_UNPUBLISH] = "ControllerUnpublishVolume",
	[M_NODE_STAGE] = "NodeStageVolume",
	[M_NODE_UNSTAGE] = "NodeUnstageVolume",
	[M_NODE_PUBLISH] = "NodePublishVolume",
	[M_NODE_UNPUBLISH] = "NodeUnpublishVolume",
	[M_CREATE_SNAPSHOT] = "CreateSnapshot",
	[M_DELETE_SNAPSHOT] = "DeleteSnapshot",
	[M_NODE_GET_INFO] = "NodeGetInfo",
	[M_CONTROLLER_CAPABILITIES] = "ControllerGetCapabilities",
	[M_NODE_CAPABILITIES] = "NodeGetCapabilities",
};

static RpcMethodInfo methods[_M_MAX]; /* written once, before any client thread starts */
static pthread_once_t methods_once = PTHREAD_ONCE_INIT;

/* Parameters the sequences read themselves; any other --param goes into
 * CreateVolume.parameters. */
static const char *const seq_keys[] = {"size",	 "access",  "fstype", "dir",
				       "source", "volumes", "nodes"};

/* How far a volume got, so a failed iteration undoes exactly what it did. */
typedef enum {
	VOL_NONE,
	VOL_CREATED,
	VOL_ATTACHED, /* ControllerPublishVolume done */
	VOL_STAGED,
	VOL_PUBLISHED,
} VolumeProgress;

typedef struct SeqVolume {
	struct SeqVolume *next; /* in SeqState.leftovers */
	VolumeProgress progress;
	char *id;
	json_t *context;	 /* volume_context from CreateVolume */
	json_t *publish_context; /* from ControllerPublishVolume */
	char *dir;		 /* made by us: DIR/NAME, holding the staging dir */
	char *staging, *target;
	char *snapshot_id; /* a snapshot left behind (snapshot sequence) */
} SeqVolume;

typedef struct SeqState {
	int step_of[_M_MAX]; /* the timed step of each method, or -1 */
	uint64_t size;
	bool block;
	const char *fstype, *dir, *source; /* point into the config's parameters */
	char node_id[256];
	bool stage_unstage, controller_publish; /* what the driver supports */

	void (*warn)(const char *msg, void *userdata); /* the config's */
	void *userdata;

	pthread_mutex_t lock; /* guards leftovers */
	SeqVolume *leftovers; /* what a failed iteration could not undo; cleanup retries */

	unsigned n_slots; /* publish: volumes staged once by prepare */
	SeqVolume *slots[SEQ_MAX_SLOTS];

	char nodes_text[4096]; /* create-publish: the nodes, split in place */
	const char *nodes[SEQ_MAX_NODES];
	size_t n_nodes;
} SeqState;

static void seq_warn(const SeqState *s, const char *fmt, ...) _printf_(2, 3);

static void seq_warn(const SeqState *s, const char *fmt, ...)
{
	_cleanup_free_ char *msg = NULL;
	va_list ap;

	if (!s->warn)
		return;
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (msg)
		s->warn(msg, s->userdata);
}

static void methods_init(void)
{
	for (size_t m = 0; m < _M_MAX; m++)
		if (rpc_catalog_lookup(method_names[m], &methods[m]) < 0)
			abort(); /* the catalog is compiled in: a missing method is a build bug */
}

static void seq_volume_free(SeqVolume *v)
{
	if (!v)
		return;
	free(v->id);
	json_decref(v->context);
	json_decref(v->publish_context);
	free(v->dir);
	free(v->staging);
	free(v->target);
	free(v->snapshot_id);
	free(v);
}

/* Sends request (consumed). With a thread, the call's time is recorded as its method's step
 * and a failure counts against the row; without one (set-up and clean-up), a failure other
 * than NOT_FOUND is printed. Returns 0 with the reply as JSON when ret_reply is given, -ENOENT
 * for NOT_FOUND, else -EIO. Blocks. */
static int seq_call(BenchThread *t, const SeqState *s, RpcClient *client, SeqMethod m,
		    json_t *request, json_t **ret_reply)
{
	_cleanup_free_ char *err = NULL;
	ProtobufCMessage *req = NULL, *reply = NULL;
	RpcStatus st = {};

	int r = pbjson_to_message(request, methods[m].request, &req, &err);
	json_decref(request);
	if (r < 0) {
		if (t)
			bench_fail(t, "%s: bad request: %s", method_names[m], err);
		else
			seq_warn(s, "%s: bad request: %s", method_names[m], err);
		return -EINVAL;
	}
	usec_t start = now_usec(CLOCK_MONOTONIC);
	r = rpc_client_call(client, methods[m].path, req, methods[m].reply, SEQ_CALL_TIMEOUT,
			    &reply, &st);
	usec_t took = now_usec(CLOCK_MONOTONIC) - start;
	protobuf_c_message_free_unpacked(req, NULL);
	if (r < 0 || st.code != GRPC_STATUS_OK) {
		const char *what = r < 0 ? "transport" : rpc_status_name(st.code);
		if (t)
			bench_fail(t, "%s: %s: %s", method_names[m], what, st.message ?: "");
		else if (r < 0 || st.code != GRPC_STATUS_NOT_FOUND)
			seq_warn(s, "%s: %s: %s", method_names[m], what, st.message ?: "");
		r = r == 0 && st.code == GRPC_STATUS_NOT_FOUND ? -ENOENT : -EIO;
		rpc_status_done(&st);
		return r;
	}
	rpc_status_done(&st);
	if (t && s && s->step_of[m] >= 0)
		bench_record(t, (unsigned)s->step_of[m], took);
	if (ret_reply)
		*ret_reply = pbjson_from_message(reply);
	protobuf_c_message_free_unpacked(reply, NULL);
	return 0;
}

/* A clean-up call: gone already counts as done. */
static bool undo_ok(int r)
{
	return r == 0 || r == -ENOENT;
}

static json_t *seq_capability(const SeqState *s)
{
	json_t *cap = json_pack("{s:{s:s}}", "access_mode", "mode", "SINGLE_NODE_WRITER");
	if (s->block)
		json_object_set_new(cap, "block", json_object());
	else
		json_object_set_new(cap, "mount",
				    json_pack("{s:s}", "fs_type", s->fstype ? s->fstype : ""));
	return cap;
}

static json_t *seq_create_request(const BenchSeqConfig *cfg, const SeqState *s, const char *name)
{
	json_t *params = json_object();
	for (size_t i = 0; i < cfg->n_params; i++) {
		bool ours = false;
		for (size_t k = 0; k < ELEMENTSOF(seq_keys); k++)
			ours = ours || strcmp(cfg->keys[i], seq_keys[k]) == 0;
		if (!ours)
			json_object_set_new(params, cfg->keys[i], json_string(cfg->values[i]));
	}
	return json_pack("{s:s, s:{s:I}, s:[o], s:o}", "name", name, "capacity_range",
			 "required_bytes", (json_int_t)s->size, "volume_capabilities",
			 seq_capability(s), "parameters", params);
}

static char *seq_name(const BenchSeqConfig *cfg, const char *what, unsigned client_id, uint64_t i)
{
	return xasprintf("bench-%s-%llx-%u-%llu", what, (unsigned long long)cfg->run_id, client_id,
			 (unsigned long long)i);
}

static json_t *json_copy_or_empty(json_t *j, const char *key)
{
	json_t *v = j ? json_object_get(j, key) : NULL;
	return v ? json_deep_copy(v) : json_object();
}

/* The steps of a volume's life. Each sets v->progress to what volume_teardown() must undo:
 * after the call for CreateVolume (no ID before), before it for the others, whose undo is
 * harmless when the step did not happen. */

static int volume_create(BenchThread *t, const BenchSeqConfig *cfg, const SeqState *s,
			 RpcClient *client, const char *name, SeqVolume *v)
{
	json_t *reply = NULL;
	int r = seq_call(t, s, client, M_CREATE_VOLUME, seq_create_request(cfg, s, name), &reply);
	if (r < 0)
		return r;
	json_t *vol = json_object_get(reply, "volume");
	const char *id = json_string_value(json_object_get(vol, "volume_id"));
	if (!id) {
		if (t)
			bench_fail(t, "CreateVolume: the reply has no volume_id");
		json_decref(reply);
		return -EIO;
	}
	v->id = xstrdup(id);
	v->context = json_copy_or_empty(vol, "volume_context");
	v->progress = VOL_CREATED;
	json_decref(reply);
	return 0;
}

/* ControllerPublishVolume to node (NULL: the driver's own node). */
static int volume_attach_to(BenchThread *t, const SeqState *s, RpcClient *client, SeqVolume *v,
			    const char *node)
{
	json_t *reply = NULL;
	v->progress = VOL_ATTACHED; /* a failed attempt is undone like a finished one */
	if (s->controller_publish) {
		json_t *req = json_pack("{s:s, s:s, s:o, s:b, s:O}", "volume_id", v->id, "node_id",
					node ?: s->node_id, "volume_capability", seq_capability(s),
					"readonly", false, "volume_context", v->context);
		int r = seq_call(t, s, client, M_CONTROLLER_PUBLISH, req, &reply);
		if (r < 0)
			return r;
	}
	v->publish_context = json_copy_or_empty(reply, "publish_context");
	json_decref(reply);
	return 0;
}

static int volume_attach(BenchThread *t, const SeqState *s, RpcClient *client, SeqVolume *v)
{
	return volume_attach_to(t, s, client, v, NULL);
}

static int volume_stage(BenchThread *t, const SeqState *s, RpcClient *client, const char *name,
			SeqVolume *v)
{
	/* The CO makes the staging directory (CSI spec); the plugin makes the target. */
	v->dir = xasprintf("%s/%s", s->dir, name);
	v->staging = xasprintf("%s/staging", v->dir);
	v->progress = VOL_STAGED; /* a failed attempt is undone like a finished one */
	int r = mkdir_p(v->staging, 0750);
	if (r < 0) {
		if (t)
			bench_fail(t, "mkdir %s: %s", v->staging, strerror(-r));
		return -EIO;
	}
	if (s->stage_unstage) {
		json_t *req = json_pack("{s:s, s:O, s:s, s:o, s:O}", "volume_id", v->id,
					"publish_context", v->publish_context,
					"staging_target_path", v->staging, "volume_capability",
					seq_capability(s), "volume_context", v->context);
		return seq_call(t, s, client, M_NODE_STAGE, req, NULL);
	}
	return 0;
}

static int volume_publish(BenchThread *t, const SeqState *s, RpcClient *client, SeqVolume *v,
			  const char *target)
{
	json_t *req = json_pack("{s:s, s:O, s:s, s:s, s:o, s:b, s:O}", "volume_id", v->id,
				"publish_context", v->publish_context, "staging_target_path",
				v->staging, "target_path", target, "volume_capability",
				seq_capability(s), "readonly", false, "volume_context", v->context);
	return seq_call(t, s, client, M_NODE_PUBLISH, req, NULL);
}

static int volume_unpublish(BenchThread *t, const SeqState *s, RpcClient *client, SeqVolume *v,
			    const char *target)
{
	json_t *req = json_pack("{s:s, s:s}", "volume_id", v->id, "target_path", target);
	return seq_call(t, s, client, M_NODE_UNPUBLISH, req, NULL);
}

/* Undoes what v->progress says was done, in order. With a thread the calls are timed steps
 * and the first failure stops it; without one, gone counts as done. */
static int volume_teardown(BenchThread *t, const SeqState *s, RpcClient *client, SeqVolume *v)
{
	int r;

	if (v->progress >= VOL_PUBLISHED) {
		r = volume_unpublish(t, s, client, v, v->target);
		if (t ? r < 0 : !undo_ok(r))
			return r;
		v->progress = VOL_STAGED;
	}
	if (v->progress >= VOL_STAGED) {
		if (s->stage_unstage) {
			r = seq_call(t, s, client, M_NODE_UNSTAGE,
				     json_pack("{s:s, s:s}", "volume_id", v->id,
					       "staging_target_path", v->staging),
				     NULL);
			if (t ? r < 0 : !undo_ok(r))
				return r;
		}
		v->progress = VOL_ATTACHED;
	}
	if (v->staging)
		(void)rmdir(v->staging);
	if (v->dir)
		(void)rmdir(v->dir);
	if (v->progress >= VOL_ATTACHED) {
		if (s->controller_publish) {
			r = seq_call(
				t, s, client, M_CONTROLLER_UNPUBLISH,
				json_pack("{s:s, s:s}", "volume_id", v->id, "node_id", s->node_id),
				NULL);
			if (t ? r < 0 : !undo_ok(r))
				return r;
		}
		v->progress = VOL_CREATED;
	}
	if (v->progress >= VOL_CREATED) {
		r = seq_call(t, s, client, M_DELETE_VOLUME, json_pack("{s:s}", "volume_id", v->id),
			     NULL);
		if (t ? r < 0 : !undo_ok(r))
			return r;
		v->progress = VOL_NONE;
	}
	return 0;
}

/* After a failed step: undoes the rest untimed; what even that cannot undo is kept for the
 * row's cleanup to retry. Takes v. */
static void volume_abandon(SeqState *s, RpcClient *client, SeqVolume *v)
{
	if (volume_teardown(NULL, s, client, v) == 0 && !v->snapshot_id) {
		seq_volume_free(v);
		return;
	}
	pthread_mutex_lock(&s->lock);
	v->next = s->leftovers;
	s->leftovers = v;
	pthread_mutex_unlock(&s->lock);
}

static SeqState *seq_state_new(BenchSeqConfig *cfg, const BenchSequence *seq, char **ret_error)
{
	const char *size = bench_seq_param(cfg, "size", SEQ_DEFAULT_SIZE);
	const char *access = bench_seq_param(cfg, "access", "mount");
	SeqState *s = xnew0(SeqState, 1);

	pthread_once(&methods_once, methods_init);
	if (parse_size(size, &s->size) < 0 || s->size == 0 || s->size > INT64_MAX) {
		*ret_error = xasprintf("--param size=%s: want a size such as 1Gi", size);
		free(s);
		return NULL;
	}
	if (strcmp(access, "mount") != 0 && strcmp(access, "block") != 0) {
		*ret_error = xasprintf("--param access=%s: want mount or block", access);
		free(s);
		return NULL;
	}
	s->block = strcmp(access, "block") == 0;
	s->fstype = bench_seq_param(cfg, "fstype", NULL);
	s->dir = bench_seq_param(cfg, "dir", NULL);
	s->source = bench_seq_param(cfg, "source", NULL);
	s->warn = cfg->warn;
	s->userdata = cfg->userdata;
	pthread_mutex_init(&s->lock, NULL);
	for (size_t m = 0; m < _M_MAX; m++) {
		s->step_of[m] = -1;
		for (unsigned k = 0; k < seq->n_steps; k++)
			if (strcmp(seq->steps[k], method_names[m]) == 0)
				s->step_of[m] = (int)k;
	}
	if (cfg->run_id == 0)
		cfg->run_id =
			((now_usec(CLOCK_REALTIME) << 8) ^ (uint64_t)getpid()) & 0xffffffffffULL;
	cfg->state = s;
	return s;
}

/* True when a Get*Capabilities reply lists an RPC capability of that name. */
static bool has_capability(json_t *reply, const char *name)
{
	size_t i;
	json_t *c;

	json_array_foreach (json_object_get(reply, "capabilities"), i, c) {
		const char *type =
			json_string_value(json_object_get(json_object_get(c, "rpc"), "type"));
		if (type && strcmp(type, name) == 0)
			return true;
	}
	return false;
}

/* What the node path needs from the driver: its node ID and which optional steps it has. */
static int seq_prepare_node(RpcClient *client, SeqState *s, char **ret_error)
{
	json_t *info = NULL, *ccaps = NULL, *ncaps = NULL;

	if (!s->dir || s->dir[0] != '/') {
		*ret_error = xstrdup("--param dir=DIR: want the absolute directory for staging and "
				     "target paths");
		return -EINVAL;
	}
	if (s->fstype && !s->block && strcmp(s->fstype, "ext4") != 0 &&
	    strcmp(s->fstype, "xfs") != 0) {
		*ret_error = xasprintf("--param fstype=%s: want ext4 or xfs", s->fstype);
		return -EINVAL;
	}
	if (seq_call(NULL, s, client, M_NODE_GET_INFO, json_object(), &info) < 0 ||
	    seq_call(NULL, s, client, M_CONTROLLER_CAPABILITIES, json_object(), &ccaps) < 0 ||
	    seq_call(NULL, s, client, M_NODE_CAPABILITIES, json_object(), &ncaps) < 0) {
		json_decref(info);
		json_decref(ccaps);
		*ret_error = xstrdup("NodeGetInfo or Get*Capabilities failed: is the driver "
				     "serving the controller and node services?");
		return -EIO;
	}
	snprintf(s->node_id, sizeof(s->node_id), "%s",
		 json_string_value(json_object_get(info, "node_id")) ?: "");
	s->controller_publish = has_capability(ccaps, "PUBLISH_UNPUBLISH_VOLUME");
	s->stage_unstage = has_capability(ncaps, "STAGE_UNSTAGE_VOLUME");
	json_decref(info);
	json_decref(ccaps);
	json_decref(ncaps);
	return 0;
}

/* Removes what failed iterations left: volumes at any stage, snapshots. */
static void seq_cleanup(RpcClient *client, BenchSeqConfig *cfg)
{
	SeqState *s = cfg->state;
	SeqVolume *v, *next;

	for (v = s->leftovers; v; v = next) {
		next = v->next;
		if (v->snapshot_id &&
		    !undo_ok(seq_call(NULL, s, client, M_DELETE_SNAPSHOT,
				      json_pack("{s:s}", "snapshot_id", v->snapshot_id), NULL)))
			seq_warn(s, "snapshot %s is left behind", v->snapshot_id);
		if (volume_teardown(NULL, s, client, v) < 0)
			seq_warn(s, "volume %s is left behind", v->id);
		seq_volume_free(v);
	}
	s->leftovers = NULL;
}

/* create-delete: CreateVolume, then DeleteVolume of the volume it returned. */

static void create_delete_iterate(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg,
				  unsigned client_id, uint64_t i)
{
	SeqState *s = cfg->state;
	_cleanup_free_ char *name = seq_name(cfg, "cd", client_id, i);
	SeqVolume *v = xnew0(SeqVolume, 1);

	if (volume_create(t, cfg, s, client, name, v) < 0 || volume_teardown(t, s, client, v) < 0) {
		volume_abandon(s, client, v);
		return;
	}
	seq_volume_free(v);
}

static int create_delete_prepare(_unused_ RpcClient *client, BenchSeqConfig *cfg, char **ret_error);

static BenchSequence create_delete = {
	.name = "create-delete",
	.steps = {"CreateVolume", "DeleteVolume"},
	.n_steps = 2,
	.prepare = create_delete_prepare,
	.iterate = create_delete_iterate,
	.cleanup = seq_cleanup,
};

static int create_delete_prepare(_unused_ RpcClient *client, BenchSeqConfig *cfg, char **ret_error)
{
	return seq_state_new(cfg, &create_delete, ret_error) ? 0 : -EINVAL;
}

/* populate: CreateVolume only, to fill a pool before a measurement. The volumes stay. */

static void populate_iterate(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg,
			     unsigned client_id, uint64_t i)
{
	_cleanup_free_ char *name = seq_name(cfg, "pop", client_id, i);
	SeqVolume v = {};

	if (volume_create(t, cfg, cfg->state, client, name, &v) == 0) {
		free(v.id);
		json_decref(v.context);
	}
}

static int populate_prepare(RpcClient *client, BenchSeqConfig *cfg, char **ret_error);

static BenchSequence populate = {
	.name = "populate",
	.steps = {"CreateVolume"},
	.n_steps = 1,
	.prepare = populate_prepare,
	.iterate = populate_iterate,
};

static int populate_prepare(_unused_ RpcClient *client, BenchSeqConfig *cfg, char **ret_error)
{
	return seq_state_new(cfg, &populate, ret_error) ? 0 : -EINVAL;
}

/* create-publish: CreateVolume, then ControllerPublishVolume of it to a node of --param
 * nodes=ID[,ID...] (client c publishes to the (c mod n)th), both timed: a controller against
 * its cloud, no node service needed. The volumes stay published, as populate's stay, for the
 * caller to count what they cost and to remove. */

static void create_publish_iterate(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg,
				   unsigned client_id, uint64_t i)
{
	SeqState *s = cfg->state;
	_cleanup_free_ char *name = seq_name(cfg, "cp", client_id, i);
	SeqVolume v = {};

	if (volume_create(t, cfg, s, client, name, &v) == 0)
		(void)volume_attach_to(t, s, client, &v, s->nodes[client_id % s->n_nodes]);
	free(v.id);
	json_decref(v.context);
	json_decref(v.publish_context);
}

static int create_publish_prepare(RpcClient *client, BenchSeqConfig *cfg, char **ret_error);

static BenchSequence create_publish = {
	.name = "create-publish",
	.steps = {"CreateVolume", "ControllerPublishVolume"},
	.n_steps = 2,
	.prepare = create_publish_prepare,
	.iterate = create_publish_iterate,
};

static int create_publish_prepare(_unused_ RpcClient *client, BenchSeqConfig *cfg, char **ret_error)
{
	const char *nodes = bench_seq_param(cfg, "nodes", NULL);
	SeqState *s = seq_state_new(cfg, &create_publish, ret_error);

	if (!s)
		return -EINVAL;
	if (!nodes || !*nodes) {
		*ret_error = xstrdup("--param nodes=ID[,ID...]: the nodes to publish to");
		return -EINVAL;
	}
	if (strlen(nodes) >= sizeof(s->nodes_text)) {
		*ret_error = xstrdup("--param nodes: too long");
		return -EINVAL;
	}
	snprintf(s->nodes_text, sizeof(s->nodes_text), "%s", nodes);
	char *save = NULL;
	for (char *n = strtok_r(s->nodes_text, ",", &save); n && s->n_nodes < SEQ_MAX_NODES;
	     n = strtok_r(NULL, ",", &save))
		s->nodes[s->n_nodes++] = n;
	s->controller_publish = true;
	return 0;
}

/* stage-publish: a volume's whole life on one node, every step timed. */

static void stage_publish_iterate(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg,
				  unsigned client_id, uint64_t i)
{
	SeqState *s = cfg->state;
	_cleanup_free_ char *name = seq_name(cfg, "sp", client_id, i);
	SeqVolume *v = xnew0(SeqVolume, 1);

	if (volume_create(t, cfg, s, client, name, v) < 0 || volume_attach(t, s, client, v) < 0 ||
	    volume_stage(t, s, client, name, v) < 0)
		goto fail;
	v->target = xasprintf("%s/target", v->dir);
	v->progress = VOL_PUBLISHED; /* a failed attempt is undone like a finished one */
	if (volume_publish(t, s, client, v, v->target) < 0)
		goto fail;
	if (volume_teardown(t, s, client, v) < 0)
		goto fail;
	seq_volume_free(v);
	return;
fail:
	volume_abandon(s, client, v);
}

static int stage_publish_prepare(RpcClient *client, BenchSeqConfig *cfg, char **ret_error);

static BenchSequence stage_publish = {
	.name = "stage-publish",
	.steps = {"CreateVolume", "ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume",
		  "NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume",
		  "DeleteVolume"},
	.n_steps = 8,
	.prepare = stage_publish_prepare,
	.iterate = stage_publish_iterate,
	.cleanup = seq_cleanup,
};

static int stage_publish_prepare(RpcClient *client, BenchSeqConfig *cfg, char **ret_error)
{
	SeqState *s = seq_state_new(cfg, &stage_publish, ret_error);
	return s ? seq_prepare_node(client, s, ret_error) : -EINVAL;
}

/* publish: volumes staged once by prepare (--param volumes=N, default 16), then
 * NodePublishVolume + NodeUnpublishVolume per iteration; client c uses volume c mod N. */

static void publish_iterate(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg,
			    unsigned client_id, uint64_t i)
{
	SeqState *s = cfg->state;
	SeqVolume *v = s->slots[client_id % s->n_slots];
	_cleanup_free_ char *target =
		xasprintf("%s/t-%u-%llu", v->dir, client_id, (unsigned long long)i);

	if (volume_publish(t, s, client, v, target) < 0) {
		(void)volume_unpublish(NULL, s, client, v, target);
		return;
	}
	if (volume_unpublish(t, s, client, v, target) < 0)
		(void)volume_unpublish(NULL, s, client, v, target);
}

static void publish_finish(RpcClient *client, BenchSeqConfig *cfg)
{
	SeqState *s = cfg->state;

	for (unsigned k = 0; k < s->n_slots; k++) {
		if (volume_teardown(NULL, s, client, s->slots[k]) < 0)
			seq_warn(s, "volume %s is left behind", s->slots[k]->id);
		seq_volume_free(s->slots[k]);
		s->slots[k] = NULL;
	}
	s->n_slots = 0;
}

static int publish_prepare(RpcClient *client, BenchSeqConfig *cfg, char **ret_error);

static BenchSequence publish = {
	.name = "publish",
	.steps = {"NodePublishVolume", "NodeUnpublishVolume"},
	.n_steps = 2,
	.prepare = publish_prepare,
	.iterate = publish_iterate,
	.finish = publish_finish,
};

static int publish_prepare(RpcClient *client, BenchSeqConfig *cfg, char **ret_error)
{
	const char *volumes = bench_seq_param(cfg, "volumes", "16");
	uint32_t n;

	SeqState *s = seq_state_new(cfg, &publish, ret_error);
	if (!s)
		return -EINVAL;
	if (parse_uint32(volumes, &n) < 0 || n == 0 || n > SEQ_MAX_SLOTS) {
		*ret_error = xasprintf("--param volumes=%s: want 1..%d", volumes, SEQ_MAX_SLOTS);
		return -EINVAL;
	}
	int r = seq_prepare_node(client, s, ret_error);
	if (r < 0)
		return r;
	for (unsigned k = 0; k < n; k++) {
		_cleanup_free_ char *name = seq_name(cfg, "pub", k, 0);
		SeqVolume *v = xnew0(SeqVolume, 1);
		s->slots[s->n_slots++] = v;
		if (volume_create(NULL, cfg, s, client, name, v) < 0 ||
		    volume_attach(NULL, s, client, v) < 0 ||
		    volume_stage(NULL, s, client, name, v) < 0) {
			publish_finish(client, cfg);
			*ret_error =
				xasprintf("setting up volume %u of %u (%s) failed", k + 1, n, name);
			return -EIO;
		}
	}
	return 0;
}

/* snapshot: CreateSnapshot of a prepared volume (--param source=VOLUME_ID), DeleteSnapshot. */

static void snapshot_iterate(BenchThread *t, RpcClient *client, BenchSeqConfig *cfg,
			     unsigned client_id, uint64_t i)
{
	SeqState *s = cfg->state;
	_cleanup_free_ char *name = seq_name(cfg, "snap", client_id, i);
	json_t *reply = NULL;

	if (seq_call(t, s, client, M_CREATE_SNAPSHOT,
		     json_pack("{s:s, s:s}", "source_volume_id", s->source, "name", name),
		     &reply) < 0)
		return;
	const char *id = json_string_value(
		json_object_get(json_object_get(reply, "snapshot"), "snapshot_id"));
	if (!id)
		bench_fail(t, "CreateSnapshot: the reply has no snapshot_id");
	else if (seq_call(t, s, client, M_DELETE_SNAPSHOT, json_pack("{s:s}", "snapshot_id", id),
			  NULL) < 0) {
		SeqVolume *v = xnew0(SeqVolume, 1);
		v->snapshot_id = xstrdup(id);
		volume_abandon(s, client, v);
	}
	json_decref(reply);
}

static int snapshot_prepare(RpcClient *client, BenchSeqConfig *cfg, char **ret_error);

static BenchSequence snapshot = {
	.name = "snapshot",
	.steps = {"CreateSnapshot", "DeleteSnapshot"},
	.n_steps = 2,
	.prepare = snapshot_prepare,
	.iterate = snapshot_iterate,
	.cleanup = seq_cleanup,
};

static int snapshot_prepare(_unused_ RpcClient *client, BenchSeqConfig *cfg, char **ret_error)
{
	SeqState *s = seq_state_new(cfg, &snapshot, ret_error);
	if (!s)
		return -EINVAL;
	if (!s->source || !*s->source) {
		*ret_error = xstrdup("--param source=VOLUME_ID: the volume to snapshot");
		return -EINVAL;
	}
	return 0;
}

/* Named lifecycle sequences. */
static const BenchSequence *const sequences[] = {
	&create_delete, &stage_publish, &publish, &snapshot, &populate, &create_publish, NULL,
};

int bench_sequence_find(const char *name, RpcClient *client, BenchSeqConfig *cfg,
			const BenchSequence **ret, char **ret_error)
{
	for (size_t i = 0; sequences[i]; i++)
		if (strcmp(sequences[i]->name, name) == 0) {
			if (sequences[i]->prepare) {
				int r = sequences[i]->prepare(client, cfg, ret_error);
				if (r < 0)
					return r;
			}
			*ret = sequences[i];
			return 0;
		}
	*ret_error = xasprintf("--sequence '%s': unknown sequence", name);
	return -EINVAL;
}
