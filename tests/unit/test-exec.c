/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <signal.h>
#include <string.h>

#include "exec.h"
#include "tap.h"

static int run(ExecResult *r, usec_t timeout, size_t cap, const char *script)
{
	const char *argv[] = {"/bin/sh", "-c", script, NULL};
	ExecOptions o = {.argv = argv,
			 .timeout = timeout,
			 .output_cap = cap,
			 .kill_grace = 300 * USEC_PER_MSEC};
	return exec_run(&o, r);
}

int main(void)
{
	ExecResult r;

	is_int(run(&r, 0, 0, "echo out; echo err >&2; exit 3"), 0, "runs");
	is_int(r.exit_code, 3, "exit code");
	is_str(r.out, "out\n", "stdout captured apart");
	is_str(r.err, "err\n", "stderr captured apart");
	is_str(exec_describe(&r), "exit status 3", "describe");
	is_str(exec_excerpt(&r, 100), "err", "excerpt prefers stderr");
	exec_result_done(&r);

	is_int(run(&r, 0, 0, "cat; echo \"[$FOO]\" \"$PATH\""), 0, "stdin is /dev/null");
	ok(strncmp(r.out, "[] /usr/local/sbin", 18) == 0, "clean environment: %s", r.out);
	exec_result_done(&r);

	is_int(run(&r, 200 * USEC_PER_MSEC, 0, "sleep 30"), 0, "hanging program");
	ok(r.timed_out, "timed out");
	is_int(r.signal, SIGTERM, "stopped with SIGTERM");
	ok(r.elapsed < 2 * USEC_PER_SEC, "within the deadline (%llu us)",
	   (unsigned long long)r.elapsed);
	exec_result_done(&r);

	is_int(run(&r, 200 * USEC_PER_MSEC, 0, "trap '' TERM; while :; do sleep 0.05; done"), 0,
	       "program ignoring SIGTERM");
	is_int(r.signal, SIGKILL, "SIGKILL after the grace period");
	exec_result_done(&r);

	is_int(run(&r, 0, 100, "head -c 100000 /dev/zero | tr '\\0' x; echo done >&2"), 0,
	       "big output");
	is_int(r.out_len, 100, "output capped");
	ok(r.out_truncated, "truncation reported");
	is_str(r.err, "done\n", "program was never blocked by the cap");
	exec_result_done(&r);

	is_int(run(&r, 5 * USEC_PER_SEC, 0, "sleep 30 & echo started"), 0,
	       "program that leaves a child holding the pipe");
	ok(r.elapsed < 3 * USEC_PER_SEC, "does not wait for the grandchild (%llu us)",
	   (unsigned long long)r.elapsed);
	is_str(r.out, "started\n", "output read");
	exec_result_done(&r);

	const char *missing[] = {"/nonexistent/prog", NULL};
	is_int(exec_run(&(ExecOptions){.argv = missing}, &r), -ENOENT, "missing program");
	const char *relative[] = {"sh", NULL};
	is_int(exec_run(&(ExecOptions){.argv = relative}, &r), -EINVAL, "relative path refused");
	return tap_done();
}
