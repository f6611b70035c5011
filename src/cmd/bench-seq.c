/* SPDX-License-Identifier: Apache-2.0 */
#include <jansson.h>
#include <string.h>

#include "alloc.h"
#include "bench-seq.h"
#include "catalog.h"
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

/* Named lifecycle sequences; each issue's bench adds its own. */
static const BenchSequence *const sequences[] = {
	NULL,
};

int bench_sequence_find(const char *name, BenchSeqConfig *cfg, const BenchSequence **ret,
			char **ret_error)
{
	for (size_t i = 0; sequences[i]; i++)
		if (strcmp(sequences[i]->name, name) == 0) {
			if (sequences[i]->prepare) {
				int r = sequences[i]->prepare(cfg, ret_error);
				if (r < 0)
					return r;
			}
			*ret = sequences[i];
			return 0;
		}
	*ret_error = xasprintf("--sequence '%s': unknown sequence", name);
	return -EINVAL;
}
