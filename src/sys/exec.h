/* SPDX-License-Identifier: Apache-2.0 */
/* The one way volplug runs another program: no shell, clean environment, stdin from
 * /dev/null, stdout and stderr captured apart with a cap, a deadline, always reaped, and never
 * left running by a daemon that dies: the child is killed with the thread that started it, and
 * a registry of running children lets the next daemon kill what that could not reach. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "time-util.h"

typedef struct ExecOptions {
	const char *const *argv; /* argv[0]: an absolute path */
	const char *const *envp; /* NULL: exec_default_env */
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

/* The clean environment programs get by default: a fixed PATH and LC_ALL=C. */
extern const char *const exec_default_env[];

/* Runs a program to completion (or its deadline) and fills *ret. Returns 0 whenever the
 * program was started, whatever its exit, -ENOENT/-EACCES/-ENOEXEC when it could not be, or
 * -EINVAL for a relative path, or another negative errno when it could not be watched (its
 * group is then killed and reaped before this returns; *ret is not written). Blocks; safe in
 * threaded processes (a vfork-style clone, never a fork). The child runs in its own process group,
 * and the whole group is signalled on timeout.
 *
 * The child gets SIGKILL when the thread that called exec_run() ends (PR_SET_PDEATHSIG: the
 * kernel ties it to the thread, not the process). Since exec_run() returns only once the child
 * is reaped, that is when the whole process dies, provided the thread is never cancelled or
 * ended from a signal handler inside exec_run(): call it only from threads that live as long
 * as the child should (volplugd's workers and the prober's init threads do). Processes the
 * child starts in its group do not get that signal: a registry (below) finds them. */
int exec_run(const ExecOptions *options, ExecResult *ret);
void exec_result_done(ExecResult *r);

/* True when the program ran and exited 0. */
static inline bool exec_succeeded(const ExecResult *r)
{
	return !r->timed_out && r->signal == 0 && r->exit_code == 0;
}

/* A short human description of how it ended: "exit status 1", "killed by signal KILL",
 * "timed out after 10.0 s". Static storage per thread. */
const char *exec_describe(const ExecResult *r);

/* The last line(s) of stderr (else stdout) for an error message, at most max bytes, with
 * newlines folded. Returns a pointer into a per-thread buffer. */
const char *exec_excerpt(const ExecResult *r, size_t max);

/* The first line of stderr (else stdout) that says something, past blank lines and a version
 * banner ("resize2fs 1.47.0 (5-Feb-2023)"): where mkfs, fsck and resize tools give their
 * reason, before any usage text. At most max bytes, in a per-thread buffer. */
const char *exec_first_line(const ExecResult *r, size_t max);

/* The leftover registry. While a child runs, exec_run() keeps one record of it, a line in
 * DIR/<owner>, the file of this process, which it holds flock'ed for its whole life:
 *
 *   pid=P pgid=G start=T sid=S boot=B pidns=N
 *
 * T being field 22 of /proc/P/stat (so that a recycled pid is never mistaken for the child),
 * S the session, B the boot ID and N the inode of the pid namespace the numbers belong to.
 * Each line fills a slot of 256 bytes, padded with spaces, rewritten with spaces when the
 * child is reaped: records that remain belong to a process that died before its children did.
 * A record costs a read of /proc/P/stat and two pwrite()s, no fsync (the processes it names
 * do not survive a reboot either). */

typedef struct ExecLeftover {
	pid_t pid;	     /* the child the record names */
	const char *program; /* command line of the first survivor found, arguments spaced */
	size_t n_processes;  /* how many processes of it were still running */
	bool gone;	     /* all of them were gone within the wait */
} ExecLeftover;

typedef void (*ExecLeftoverFn)(const ExecLeftover *leftover, void *userdata);

/* Makes state/sub the registry of this process, after dealing with the
 * records of processes that died: whatever a record still names, the child itself (same pid
 * and start time) or processes of its group and session that started no earlier, gets
 * SIGKILL, and the call waits until they are gone, 10 s at most in all. on_leftover (may be
 * NULL) is called once per record that still named running processes. Records whose pid now
 * belongs to another process, of another boot or pid namespace, or that name nothing alive
 * are only removed, with the dead owner's file. Files of live processes (locked) are left
 * alone, so several daemons may share dir. Call once, before any thread calls exec_run().
 * Returns 0, -EBUSY when a registry is open already, or a negative errno when dir cannot be
 * used: exec_run() then keeps no records. state (the daemon's state directory) is taken as
 * it is given; sub (relative: "run/children") is data on a disk others may write: its missing
 * components are made, none is ever followed if it is a symlink (-ELOOP; -ENOTDIR when one is
 * no directory), and only the regular files named as this function names them (PID.HEX) are
 * ever read or removed there. Blocks. */
int exec_registry_open(const char *state, const char *sub, ExecLeftoverFn on_leftover,
		       void *userdata);
