/* SPDX-License-Identifier: Apache-2.0 */
/* The one way volplug runs another program: no shell, clean environment, stdin from
 * /dev/null, stdout and stderr captured apart with a cap, a deadline, always reaped. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "time-util.h"

typedef struct ExecOptions {
	const char *const *argv; /* argv[0]: an absolute path */
	const char *const *envp; /* NULL: PATH only */
	usec_t timeout;		 /* 0 or USEC_INFINITY: none */
	usec_t kill_grace;	 /* SIGTERM -> SIGKILL; 0: 10 s */
	size_t output_cap;	 /* bytes kept per stream; 0: 64 KiB */
} ExecOptions;

typedef struct ExecResult {
	int exit_code; /* -1 when killed by a signal */
	int signal;    /* the signal that killed it, or 0 */
	bool timed_out;
	char *out, *err; /* NUL-terminated, at most output_cap bytes each */
	size_t out_len, err_len;
	bool out_truncated, err_truncated;
	usec_t elapsed;
} ExecResult;

/* Runs a program to completion (or its deadline) and fills *ret. Returns 0 whenever the
 * program was started, whatever its exit, -ENOENT/-EACCES/-ENOEXEC when it could not be, or
 * -EINVAL for a relative path. Blocks; safe in threaded processes (posix_spawn). The child
 * runs in its own process group, and the whole group is signalled on timeout. */
int exec_run(const ExecOptions *options, ExecResult *ret);
void exec_result_done(ExecResult *r);

/* True when the program ran and exited 0. */
static inline bool exec_succeeded(const ExecResult *r)
{
	return !r->timed_out && r->signal == 0 && r->exit_code == 0;
}

/* A short human description of how it ended: "exit status 1", "killed by SIGKILL",
 * "timed out after 10.0 s". Static storage per thread. */
const char *exec_describe(const ExecResult *r);

/* The last line(s) of stderr (else stdout) for an error message, at most max bytes, with
 * newlines folded. Returns a pointer into a per-thread buffer. */
const char *exec_excerpt(const ExecResult *r, size_t max);
