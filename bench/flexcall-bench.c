/* SPDX-License-Identifier: Apache-2.0 */
/* Calls per second of one Flexvolume driver through flex_call() against a bare
 * posix_spawn + pipe + waitpid loop running the same executable with the same argv and
 * environment: what volplug's call path (stderr capture, deadline, pidfd, answer parsing)
 * costs on top of starting the program. The two loops alternate in blocks, so a noisy
 * machine slows both alike.
 *
 * Usage: flexcall-bench [--registry DIR] DRIVER_EXE [CALLS]   (default 2000 calls per loop
 * and command). --registry: exec_run() records its children in DIR as volplugd does (in
 * POOL/run/children), to measure what that costs.
 * Prints one line per command: command calls volplug/s spawn/s ratio (spawn/s over
 * volplug/s: how many times slower volplug's path is). Exit 1 when a call fails. */
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "alloc.h"
#include "call.h"
#include "exec.h"
#include "macro.h"
#include "parse-util.h"
#include "strv.h"
#include "time-util.h"

#define BLOCK 50

/* exec_run()'s environment, so both loops start the same process. */
static char *const bench_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};

/* The baseline this bench exists to measure against, hence posix_spawn here and not
 * exec_run(): spawn with stdout on a pipe, read it to EOF, reap. Returns 0 when the program
 * exited 0 and printed something. */
static int bare_call(char *const *argv)
{
	int fds[2];
	posix_spawn_file_actions_t fa;
	pid_t pid;
	char buf[4096];
	size_t total = 0;
	int status, r;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return negative_errno();
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
	r = -posix_spawn(&pid, argv[0], &fa, NULL, argv, bench_env);
	posix_spawn_file_actions_destroy(&fa);
	close(fds[1]);
	if (r < 0) {
		close(fds[0]);
		return r;
	}
	for (;;) {
		ssize_t n = read(fds[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		total += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return negative_errno();
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || total == 0)
		return -EPROTO;
	return 0;
}

static int one_flex_call(const char *exe, FlexCommand cmd, const FlexCallArgs *args)
{
	_cleanup_free_ char *error = NULL;
	int r = flex_call("bench/trivial", exe, NULL, cmd, args, NULL, &error);
	if (r < 0)
		fprintf(stderr, "flexcall-bench: %s\n", error);
	return r;
}

/* Runs calls of cmd both ways, alternating blocks; prints the row. Returns 0 or the first
 * failure. */
static int bench_command(const char *exe, FlexCommand cmd, const FlexCallArgs *args, unsigned calls)
{
	char **tail = NULL;
	int r = flex_call_argv(cmd, args, &tail);
	if (r < 0)
		return r;
	size_t n = strv_length(tail);
	char **argv = xnew0(char *, n + 3);
	argv[0] = (char *)exe;
	argv[1] = (char *)flex_command_to_string(cmd);
	for (size_t i = 0; i < n; i++)
		argv[i + 2] = tail[i];

	usec_t t_flex = 0, t_bare = 0;
	for (unsigned done = 0, block = 0; done < calls && r >= 0; done += BLOCK, block++) {
		unsigned k = MIN((unsigned)BLOCK, calls - done);
		/* Each loop goes first every other block: neither always follows the other. */
		for (unsigned half = 0; half < 2 && r >= 0; half++) {
			bool flex = (half + block) % 2 == 0;
			usec_t t0 = now_usec(CLOCK_MONOTONIC);
			for (unsigned i = 0; i < k && r >= 0; i++)
				r = flex ? one_flex_call(exe, cmd, args) : bare_call(argv);
			usec_t t = now_usec(CLOCK_MONOTONIC) - t0;
			if (flex)
				t_flex += t;
			else
				t_bare += t;
		}
	}
	if (r < 0)
		fprintf(stderr, "flexcall-bench: %s %s: a call failed: %s\n", exe, argv[1],
			strerror(-r));
	else {
		double flex_rate = calls / ((double)t_flex / 1e6);
		double bare_rate = calls / ((double)t_bare / 1e6);
		printf("%s %u %.0f %.0f %.3f\n", argv[1], calls, flex_rate, bare_rate,
		       bare_rate / flex_rate);
	}
	free(argv);
	strv_free(tail);
	return r;
}

int main(int argc, char **argv)
{
	const char *prog = argv[0];
	uint32_t calls = 2000;
	int r;

	if (argc >= 3 && strcmp(argv[1], "--registry") == 0) {
		/* A directory of the caller's: itself, as given. */
		if ((mkdir(argv[2], 0700) < 0 && errno != EEXIST && (r = -errno) < 0) ||
		    (r = exec_registry_open(argv[2], ".", NULL, NULL)) < 0) {
			fprintf(stderr, "%s: --registry %s: %s\n", prog, argv[2], strerror(-r));
			return 1;
		}
		argc -= 2;
		argv += 2;
	}
	if (argc < 2 || argc > 3 || argv[1][0] != '/' ||
	    (argc == 3 && (parse_uint32(argv[2], &calls) < 0 || calls == 0))) {
		fprintf(stderr, "usage: %s [--registry DIR] /ABSOLUTE/DRIVER_EXE [CALLS]\n", prog);
		return 2;
	}
	const FlexOption opts[] = {{"size", "64m"}};
	const FlexVolumeSpec spec = {
		.pv_or_volume_name = "bench-vol", .options = opts, .n_options = 1};
	const FlexPodInfo pod = {.name = "web-0",
				 .namespace = "shop",
				 .uid = "uid-1234",
				 .service_account = "sa-web",
				 .fs_group = -1};
	const FlexCallArgs mount_args = {
		.spec = &spec, .pod = &pod, .pod_volume_dir = "/var/lib/kubelet/pods/uid-1234/v"};

	printf("command calls volplug/s spawn/s ratio\n");
	if (bench_command(argv[1], FLEX_INIT, NULL, calls) < 0 ||
	    bench_command(argv[1], FLEX_MOUNT, &mount_args, calls) < 0)
		return 1;
	return 0;
}
