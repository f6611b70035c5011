/* SPDX-License-Identifier: Apache-2.0 */
/* The small S3 of the tests (tests/s3sim/s3sim.py) from a C test: started once per test
 * binary, reset and given faults over HTTP. It exits when the test does (its stdin closes).
 * Needs SOURCE_ROOT and PYTHON3 defined by the build. */
#pragma once

#include <fcntl.h>
#include <jansson.h>
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

static struct {
	pid_t pid;
	int control_fd;
	char url[64];
	HttpPool *pool;
} s3sim;

static void s3sim_stop(void)
{
	if (s3sim.pid <= 0)
		return;
	close(s3sim.control_fd);
	(void)waitpid(s3sim.pid, NULL, 0);
	s3sim.pid = 0;
	http_pool_free(s3sim.pool);
}

/* Starts script under python3 with pipes on its stdin (kept in *control_fd: closing it ends
 * the script) and stdout; its first line in line. */
static void s3sim_spawn(const char *script, pid_t *pid, int *control_fd, char *line, size_t n)
{
	char *argv[] = {(char *)PYTHON3, (char *)script, NULL};
	posix_spawn_file_actions_t fa;
	int in[2], out[2];

	if (access(PYTHON3, X_OK) < 0)
		TAP_SKIP_ALL("no " PYTHON3);
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
	if (posix_spawn(pid, PYTHON3, &fa, NULL, argv, environ) != 0) {
		printf("Bail out! cannot start %s\n", script);
		exit(1);
	}
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	*control_fd = in[1];
	FILE *f = fdopen(out[0], "r");
	if (!f || !fgets(line, (int)n, f)) {
		printf("Bail out! %s did not start\n", script);
		exit(1);
	}
	fclose(f);
	line[strcspn(line, "\n")] = 0;
}

/* Starts the simulator; skips the whole test when python3 is missing. */
__attribute__((unused)) static void s3sim_start(void)
{
	char line[64];
	int port = 0;

	s3sim_spawn(SOURCE_ROOT "/tests/s3sim/s3sim.py", &s3sim.pid, &s3sim.control_fd, line,
		    sizeof(line));
	if (sscanf(line, "PORT %d", &port) != 1) {
		printf("Bail out! the S3 simulator did not start\n");
		exit(1);
	}
	snprintf(s3sim.url, sizeof(s3sim.url), "http://127.0.0.1:%d", port);
	s3sim.pool = http_pool_new(1);
	atexit(s3sim_stop);
}

/* A control request; bails out when it does not answer 200. Returns the body. */
static char *s3sim_control(const char *method, const char *what, const char *body)
{
	return sim_control(s3sim.pool, s3sim.url, "s3sim", method, what, body);
}

/* Forgets everything: buckets made empty, keys (id -> secret, JSON) checked when given. */
__attribute__((unused)) static void s3sim_reset(const char *json)
{
	free(s3sim_control("POST", "reset", json));
}

/* Appends faults (a JSON list). */
__attribute__((unused)) static void s3sim_faults(const char *json)
{
	free(s3sim_control("POST", "faults", json));
}

/* Forgets the faults. */
__attribute__((unused)) static void s3sim_clear(void)
{
	free(s3sim_control("POST", "clear", "{}"));
}

/* Its counters and objects (caller decrefs). */
__attribute__((unused)) static json_t *s3sim_stats(void)
{
	char *text = s3sim_control("GET", "stats", NULL);
	json_t *j = json_loads(text, 0, NULL);
	free(text);
	return j;
}

/* How many requests of method it received since the reset. */
__attribute__((unused)) static long s3sim_requests(const char *method)
{
	json_t *j = s3sim_stats();
	long n = (long)json_integer_value(json_object_get(json_object_get(j, "requests"), method));
	json_decref(j);
	return n;
}

/* How many objects it holds. */
__attribute__((unused)) static size_t s3sim_objects(void)
{
	json_t *j = s3sim_stats();
	size_t n = json_object_size(json_object_get(j, "objects"));
	json_decref(j);
	return n;
}
