/* SPDX-License-Identifier: Apache-2.0 */
/* The AWS stand-in (aws-standin.py) from a C test: started once per test binary, told which
 * replies to give, asked what it received. It exits when the test does (its stdin closes).
 * Needs SOURCE_ROOT and PYTHON3 defined by the build. */
#pragma once

#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "aws-http.h"
#include "sim-control.h"
#include "tap.h"

extern char **environ;

typedef struct Standin {
	pid_t pid;
	int control_fd; /* its stdin: closing it ends it */
	char url[64];	/* http://127.0.0.1:PORT */
	HttpPool *pool;
} Standin;

static Standin standin;

static void standin_stop(void)
{
	if (standin.pid <= 0)
		return;
	close(standin.control_fd);
	(void)waitpid(standin.pid, NULL, 0);
	standin.pid = 0;
	http_pool_free(standin.pool);
}

/* Starts the stand-in; skips the whole test when python3 is missing, bails out otherwise. */
__attribute__((unused)) static void standin_start(void)
{
	static const char *const script = SOURCE_ROOT "/tests/unit/aws-standin.py";
	char *argv[] = {(char *)PYTHON3, (char *)script, NULL};
	int in[2], out[2], port = 0;
	posix_spawn_file_actions_t fa;
	char line[64];

	if (access(PYTHON3, X_OK) < 0)
		TAP_SKIP_ALL("no " PYTHON3);
	/* The stand-in is on 127.0.0.1: never through a proxy the environment names. */
	static const char *const proxies[] = {"http_proxy",  "HTTP_PROXY", "https_proxy",
					      "HTTPS_PROXY", "all_proxy",  "ALL_PROXY"};
	for (size_t i = 0; i < sizeof(proxies) / sizeof(proxies[0]); i++)
		unsetenv(proxies[i]);
	if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0) {
		printf("Bail out! pipe: %s\n", strerror(errno));
		exit(1);
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	if (posix_spawn(&standin.pid, PYTHON3, &fa, NULL, argv, environ) != 0) {
		printf("Bail out! cannot start %s\n", script);
		exit(1);
	}
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	standin.control_fd = in[1];
	FILE *f = fdopen(out[0], "r");
	if (!f || !fgets(line, sizeof(line), f) || sscanf(line, "PORT %d", &port) != 1) {
		printf("Bail out! the stand-in did not start\n");
		exit(1);
	}
	fclose(f);
	snprintf(standin.url, sizeof(standin.url), "http://127.0.0.1:%d", port);
	standin.pool = http_pool_new(1);
	atexit(standin_stop);
}

/* A control request; bails out when the stand-in does not answer 200. Returns the body. */
static char *standin_control(const char *method, const char *what, const char *body)
{
	return sim_control(standin.pool, standin.url, "standin", method, what, body);
}

/* Appends rules (a JSON list). */
__attribute__((unused)) static void standin_rules(const char *json)
{
	free(standin_control("POST", "rules", json));
}

/* Forgets rules and requests; key id -> secret for the signature check. */
__attribute__((unused)) static void standin_reset(const char *key, const char *secret)
{
	free(standin_control("POST", "reset", "{}"));
	if (key) {
		json_auto_t *j = json_pack("{ss}", key, secret);
		char *s = json_dumps(j, 0);
		free(standin_control("POST", "keys", s));
		free(s);
	}
}

/* The requests received so far (a JSON array, caller decrefs). */
__attribute__((unused)) static json_t *standin_requests(void)
{
	char *text = standin_control("GET", "requests", NULL);
	json_t *j = json_loads(text, 0, NULL);
	free(text);
	if (!json_is_array(j)) {
		printf("Bail out! stand-in requests: not a list\n");
		exit(1);
	}
	return j;
}

/* How many requests it received so far. */
__attribute__((unused)) static size_t standin_count(void)
{
	json_auto_t *j = standin_requests();
	return json_array_size(j);
}

/* Field of request i ("method", "path", "sigv4", "body"), or of its headers or params with
 * "headers.x-amz-date" / "params.Action"; NULL when absent. Borrowed from j. */
__attribute__((unused)) static const char *standin_field(json_t *j, size_t i, const char *field)
{
	json_t *r = json_array_get(j, i);
	const char *dot = strchr(field, '.');

	if (dot) {
		char group[16];
		snprintf(group, sizeof(group), "%.*s", (int)(dot - field), field);
		return json_string_value(json_object_get(json_object_get(r, group), dot + 1));
	}
	return json_string_value(json_object_get(r, field));
}

/* A JSON string literal of s (for rule bodies); a new string. */
__attribute__((unused)) static char *json_quote(const char *s)
{
	json_auto_t *j = json_string(s);
	return json_dumps(j, JSON_ENCODE_ANY);
}
