/* SPDX-License-Identifier: Apache-2.0 */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "alloc.h"
#include "exec.h"
#include "log.h"

#define DEFAULT_CAP (64 * 1024)
#define DEFAULT_KILL_GRACE (10 * USEC_PER_SEC)
/* After the program exits, how long its leftover children may hold our pipes open. */
#define DRAIN_AFTER_EXIT (500 * USEC_PER_MSEC)

static const char *const default_env[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL};

typedef struct Stream {
	int fd;
	char *buf;
	size_t len, cap;
	bool truncated;
} Stream;

static void stream_read(Stream *s)
{
	char tmp[16384];
	ssize_t n = read(s->fd, tmp, sizeof(tmp));

	if (n < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (n <= 0) {
		closep(&s->fd);
		s->fd = -EBADF;
		return;
	}
	size_t keep = MIN((size_t)n, s->cap - s->len);
	memcpy(s->buf + s->len, tmp, keep);
	s->len += keep;
	s->buf[s->len] = 0;
	if (keep < (size_t)n)
		s->truncated = true; /* keep reading so the child never blocks on a full pipe */
}

static int spawn_child(const ExecOptions *o, int out_w, int err_w, pid_t *ret_pid)
{
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;
	sigset_t none, all;

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, out_w, STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, err_w, STDERR_FILENO);
	posix_spawnattr_init(&attr);
	sigemptyset(&none);
	sigfillset(&all);
	/* The daemon blocks and ignores signals for its own reasons: the child starts clean. */
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_USEVFORK);
	int r = posix_spawn(ret_pid, o->argv[0], &fa, &attr, (char *const *)o->argv,
			    (char *const *)(o->envp ? o->envp : default_env));
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	return -r;
}

/* The next moment the loop must wake for: a kill step or the end of draining. */
static usec_t next_wakeup(usec_t deadline, usec_t kill_at, bool termed, bool exited,
			  usec_t drain_until)
{
	if (exited)
		return drain_until;
	if (termed)
		return kill_at;
	return deadline;
}

int exec_run(const ExecOptions *o, ExecResult *ret)
{
	size_t cap = o->output_cap ? o->output_cap : DEFAULT_CAP;
	usec_t grace = o->kill_grace ? o->kill_grace : DEFAULT_KILL_GRACE;
	int out_pipe[2], err_pipe[2];
	ExecResult res = {.exit_code = -1};
	pid_t pid;
	int r;

	if (!o->argv || !o->argv[0] || o->argv[0][0] != '/')
		return -EINVAL;
	if (pipe2(out_pipe, O_CLOEXEC) < 0)
		return negative_errno();
	if (pipe2(err_pipe, O_CLOEXEC) < 0) {
		r = negative_errno();
		close(out_pipe[0]);
		close(out_pipe[1]);
		return r;
	}
	usec_t start = now_usec(CLOCK_MONOTONIC);
	r = spawn_child(o, out_pipe[1], err_pipe[1], &pid);
	close(out_pipe[1]);
	close(err_pipe[1]);
	Stream streams[2] = {
		{.fd = out_pipe[0], .buf = xmalloc(cap + 1), .cap = cap},
		{.fd = err_pipe[0], .buf = xmalloc(cap + 1), .cap = cap},
	};
	streams[0].buf[0] = streams[1].buf[0] = 0;
	if (r < 0) {
		for (int i = 0; i < 2; i++) {
			closep(&streams[i].fd);
			free(streams[i].buf);
		}
		return r;
	}

	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	usec_t deadline = (o->timeout == 0 || o->timeout == USEC_INFINITY) ? USEC_INFINITY
									   : start + o->timeout;
	usec_t kill_at = USEC_INFINITY, drain_until = USEC_INFINITY;
	bool termed = false, killed = false, exited = false;
	int status = 0;

	for (;;) {
		struct pollfd pfd[3];
		int n = 0;
		for (int i = 0; i < 2; i++)
			if (streams[i].fd >= 0)
				pfd[n++] = (struct pollfd){.fd = streams[i].fd, .events = POLLIN};
		if (!exited && pidfd >= 0)
			pfd[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		bool pipes_open = streams[0].fd >= 0 || streams[1].fd >= 0;
		if (exited && !pipes_open)
			break;

		usec_t now = now_usec(CLOCK_MONOTONIC);
		usec_t wake = next_wakeup(deadline, kill_at, termed, exited, drain_until);
		/* Without a pidfd, poll the child's state every 50 ms. */
		int ms = poll_timeout_ms(now, wake);
		if (pidfd < 0 && !exited && (ms < 0 || ms > 50))
			ms = 50;
		if (poll(pfd, n, ms) < 0 && errno != EINTR) {
			r = negative_errno();
			break;
		}
		for (int i = 0; i < 2; i++)
			if (streams[i].fd >= 0)
				for (int k = 0; k < n; k++)
					if (pfd[k].fd == streams[i].fd && pfd[k].revents)
						stream_read(&streams[i]);

		if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
			exited = true;
			drain_until = now_usec(CLOCK_MONOTONIC) + DRAIN_AFTER_EXIT;
			continue;
		}
		now = now_usec(CLOCK_MONOTONIC);
		if (exited && now >= drain_until)
			break; /* a leftover grandchild holds the pipe: stop listening */
		if (!exited && !termed && now >= deadline) {
			res.timed_out = true;
			termed = true;
			kill_at = now + grace;
			(void)kill(-pid, SIGTERM);
		} else if (!exited && termed && !killed && now >= kill_at) {
			killed = true;
			(void)kill(-pid, SIGKILL);
			kill_at = USEC_INFINITY;
		}
	}
	if (!exited)
		(void)waitpid(pid, &status, 0);
	for (int i = 0; i < 2; i++)
		closep(&streams[i].fd);

	res.elapsed = now_usec(CLOCK_MONOTONIC) - start;
	if (WIFEXITED(status))
		res.exit_code = WEXITSTATUS(status);
	else if (WIFSIGNALED(status))
		res.signal = WTERMSIG(status);
	res.out = streams[0].buf;
	res.out_len = streams[0].len;
	res.out_truncated = streams[0].truncated;
	res.err = streams[1].buf;
	res.err_len = streams[1].len;
	res.err_truncated = streams[1].truncated;
	*ret = res;
	return 0;
}

void exec_result_done(ExecResult *r)
{
	free(r->out);
	free(r->err);
	*r = (ExecResult){};
}

const char *exec_describe(const ExecResult *r)
{
	static _Thread_local char buf[96];

	if (r->timed_out)
		snprintf(buf, sizeof(buf), "timed out after %.1f s", (double)r->elapsed / 1e6);
	else if (r->signal)
		snprintf(buf, sizeof(buf), "killed by signal %s", sigabbrev_np(r->signal) ?: "?");
	else
		snprintf(buf, sizeof(buf), "exit status %d", r->exit_code);
	return buf;
}

const char *exec_excerpt(const ExecResult *r, size_t max)
{
	static _Thread_local char buf[1024];
	const char *src = r->err_len > 0 ? r->err : r->out;
	size_t len = r->err_len > 0 ? r->err_len : r->out_len;

	if (!src)
		return "";
	while (len > 0 && (src[len - 1] == '\n' || src[len - 1] == ' '))
		len--;
	max = MIN(max, sizeof(buf) - 1);
	size_t from = len > max ? len - max : 0;
	size_t n = len - from;
	memcpy(buf, src + from, n);
	buf[n] = 0;
	for (char *p = buf; *p; p++)
		if (*p == '\n' || *p == '\r' || *p == '\t')
			*p = ' ';
	return buf;
}
