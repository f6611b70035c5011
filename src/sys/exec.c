/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "alloc.h"
#include "exec.h"
#include "fileio.h"
#include "log.h"
#include "pinned-path.h"

#define DEFAULT_CAP (64 * 1024)
#define DEFAULT_KILL_GRACE (10 * USEC_PER_SEC)
/* After the program exits, how long its leftover children may hold our pipes open. */
#define DRAIN_AFTER_EXIT (500 * USEC_PER_MSEC)

const char *const exec_default_env[] = {
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

/* What the child reads, and where it reports the step that failed. The child shares this
 * memory (CLONE_VM) while the parent thread is suspended (CLONE_VFORK) until the child has
 * called execve() or exited, so err is read only after that. */
typedef struct SpawnArgs {
	const char *path;
	char *const *argv;
	char *const *envp;
	int out_w, err_w;
	pid_t parent;
	int err; /* errno of the failed step; 0 when execve() succeeded */
} SpawnArgs;

/* The child's set-up before execve(): only async-signal-safe calls, nothing that allocates or
 * takes a lock (another thread of the parent may hold it), and no sanitizer bookkeeping on the
 * memory it shares with the parent. Returns 0 or a negative errno. */
__attribute__((no_sanitize("address"))) static int child_setup(const SpawnArgs *a)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;
	int out = a->out_w, err = a->err_w;

	/* The daemon blocks and ignores signals for its own reasons: the child starts clean. Every
	 * disposition is reset while all are still blocked, so that no handler of the daemon can
	 * run here; glibc's own signals refuse and are left as they are. */
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &dfl, NULL);
	if (setpgid(0, 0) < 0)
		return -errno;
	/* Dies with the thread that started it. A parent that died before this line was not seen
	 * by the kernel: the child would be an orphan already. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return -errno;
	if (getppid() != a->parent)
		return -ESRCH;
	/* Pipe ends at 0-2 (a daemon started with those closed) would be clobbered below. */
	if (out < 3 && (out = fcntl(out, F_DUPFD_CLOEXEC, 3)) < 0)
		return -errno;
	if (err < 3 && (err = fcntl(err, F_DUPFD_CLOEXEC, 3)) < 0)
		return -errno;
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null < 0)
		return -errno;
	if (null == 0 ? fcntl(0, F_SETFD, 0) < 0 : dup2(null, STDIN_FILENO) < 0)
		return -errno;
	if (dup2(out, STDOUT_FILENO) < 0 || dup2(err, STDERR_FILENO) < 0)
		return -errno;
	sigemptyset(&none);
	if (sigprocmask(SIG_SETMASK, &none, NULL) < 0)
		return -errno;
	return 0;
}

__attribute__((no_sanitize("address"))) static int child_main(void *userdata)
{
	SpawnArgs *a = userdata;

	int r = child_setup(a);
	if (r == 0) {
		execve(a->path, a->argv, a->envp);
		r = -errno;
	}
	a->err = -r;
	_exit(127);
}

/* The child's stack, in the parent's frame: the parent thread does not run until the child
 * has exec'd or exited. Enough for the calls above, sanitizer interceptors included. */
#define CHILD_STACK_SIZE (32 * 1024)

/* Starts the program (posix_spawn cannot set a parent-death signal). Returns 0 with its pid
 * and a pidfd (-EBADF on kernels without CLONE_PIDFD), or the errno that kept it from
 * starting, the failed child reaped. */
static int spawn_child(const ExecOptions *o, int out_w, int err_w, pid_t *ret_pid, int *ret_pidfd)
{
	_Alignas(16) char stack[CHILD_STACK_SIZE];
	SpawnArgs a = {
		.path = o->argv[0],
		.argv = (char *const *)o->argv,
		.envp = (char *const *)(o->envp ? o->envp : exec_default_env),
		.out_w = out_w,
		.err_w = err_w,
		.parent = getpid(),
	};
	int pidfd = -EBADF, flags = CLONE_VM | CLONE_VFORK | SIGCHLD;
	sigset_t all, saved;

	/* No handler of the daemon may run in the child before it has reset them. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &saved);
	pid_t pid = clone(child_main, stack + sizeof(stack), flags | CLONE_PIDFD, &a, &pidfd);
	if (pid < 0 && errno == EINVAL) /* before Linux 5.2 */
		pid = clone(child_main, stack + sizeof(stack), flags, &a);
	int r = pid < 0 ? negative_errno() : 0;
	pthread_sigmask(SIG_SETMASK, &saved, NULL);
	if (r < 0)
		return r;
	if (a.err != 0) {
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		closep(&pidfd);
		return -a.err;
	}
	*ret_pid = pid;
	*ret_pidfd = pidfd;
	return 0;
}

/* The registry (see exec.h). registry_fd and registry_tag are set once by
 * exec_registry_open(), before any thread runs a program, and only read after that. A record
 * is a line in a slot of SLOT_SIZE bytes of this process's file: rewriting a slot costs one
 * pwrite(), where a file per record cost a create and an unlink (twenty times as much on
 * ext4). */
#define SLOT_SIZE 256
static int registry_fd = -EBADF;
static char registry_tag[128]; /* " sid=S boot=B pidns=N", the same in every record */
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;
static bool *slots_used; /* slots_lock: which slots hold a record */
static size_t n_slots;	 /* slots_lock */

typedef struct ProcStat {
	char state;
	pid_t pgrp, session;
	unsigned long long start; /* clock ticks after boot */
} ProcStat;

/* The text of field n (counted from 1 as proc(5) does, n >= 3) of a /proc/PID/stat line: the
 * fields after the command name, which may itself hold spaces and parentheses. */
static const char *stat_field(const char *line, int n)
{
	const char *p = strrchr(line, ')');

	for (int i = 2; p && i < n; i++)
		p = strchr(p + 1, ' ');
	return p ? p + 1 : NULL;
}

/* Reads the start of a /proc file (one read: the kernel makes these whole) into buf,
 * NUL-terminated. Returns its length or a negative errno. */
static ssize_t proc_read(const char *path, char *buf, size_t size)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	ssize_t n = read(fd, buf, size - 1);
	if (n < 0)
		return negative_errno();
	buf[n] = 0;
	return n;
}

/* Reads state, group, session and start time of a process: -ENOENT (or -ESRCH) when there is
 * none, -EIO for a line it cannot parse. */
static int proc_stat_read(pid_t pid, ProcStat *ret)
{
	char path[32], line[1024];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	ssize_t n = proc_read(path, line, sizeof(line));
	if (n < 0)
		return (int)n;
	const char *state = stat_field(line, 3), *pgrp = stat_field(line, 5),
		   *session = stat_field(line, 6), *start = stat_field(line, 22);
	if (!state || !pgrp || !session || !start)
		return -EIO;
	*ret = (ProcStat){.state = *state,
			  .pgrp = (pid_t)strtol(pgrp, NULL, 10),
			  .session = (pid_t)strtol(session, NULL, 10),
			  .start = strtoull(start, NULL, 10)};
	return 0;
}

static size_t slot_take(void)
{
	size_t i;

	pthread_mutex_lock(&slots_lock);
	for (i = 0; i < n_slots && slots_used[i]; i++)
		;
	if (i == n_slots) {
		slots_used = xrealloc(slots_used, (n_slots + 1) * sizeof(bool));
		n_slots++;
	}
	slots_used[i] = true;
	pthread_mutex_unlock(&slots_lock);
	return i;
}

static void slot_put(size_t slot)
{
	pthread_mutex_lock(&slots_lock);
	slots_used[slot] = false;
	pthread_mutex_unlock(&slots_lock);
}

/* Writes text (shorter than a slot) into a slot, padded with spaces to a whole line. */
static int slot_write(size_t slot, const char *text)
{
	char line[SLOT_SIZE];
	size_t len = strlen(text);

	memcpy(line, text, len);
	memset(line + len, ' ', SLOT_SIZE - 1 - len);
	line[SLOT_SIZE - 1] = '\n';
	ssize_t n = pwrite(registry_fd, line, SLOT_SIZE, (off_t)(slot * SLOT_SIZE));
	return n == SLOT_SIZE ? 0 : n < 0 ? negative_errno() : -EIO;
}

/* Records a child that runs now; returns its slot, or -1 when it is not recorded. Best effort:
 * without its record, a crash of the daemon still kills the child itself, only not what it
 * leaves in its group. */
static ssize_t registry_add(pid_t pid)
{
	char text[SLOT_SIZE];
	ProcStat st;

	if (registry_fd < 0 || proc_stat_read(pid, &st) < 0)
		return -1;
	snprintf(text, sizeof(text), "pid=%d pgid=%d start=%llu%s", (int)pid, (int)pid, st.start,
		 registry_tag);
	size_t slot = slot_take();
	int r = slot_write(slot, text);
	if (r < 0) {
		log_debug_errno(r, "exec: cannot record child %d: %m", (int)pid);
		slot_put(slot);
		return -1;
	}
	return (ssize_t)slot;
}

/* Blanks the slot before it can be taken again. */
static void registry_remove(ssize_t slot)
{
	if (slot < 0)
		return;
	(void)slot_write((size_t)slot, "");
	slot_put((size_t)slot);
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
	_cleanup_close_ int pidfd = -EBADF;
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
	r = spawn_child(o, out_pipe[1], err_pipe[1], &pid, &pidfd);
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

	ssize_t slot = registry_add(pid);
	int failed = 0; /* the loop could not go on: the child is killed and this returned */
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
		/* Without a pidfd (before Linux 5.2), poll the child's state every 50 ms. */
		int ms = poll_timeout_ms(now, wake);
		if (pidfd < 0 && !exited && (ms < 0 || ms > 50))
			ms = 50;
		if (poll(pfd, n, ms) < 0 && errno != EINTR) {
			failed = negative_errno();
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
	/* Nothing watches the child any more: it must not outlive this call, deadline or not. */
	if (failed < 0 && !exited)
		(void)kill(-pid, SIGKILL);
	if (!exited)
		(void)waitpid(pid, &status, 0);
	registry_remove(slot);
	for (int i = 0; i < 2; i++)
		closep(&streams[i].fd);
	if (failed < 0) {
		free(streams[0].buf);
		free(streams[1].buf);
		return failed;
	}

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

/* "NAME 1.47.0 (5-Feb-2023)": a program's name, a version, a date. */
static bool is_version_banner(const char *line, size_t len)
{
	const char *sp = memchr(line, ' ', len);

	return sp && sp > line && sp + 1 < line + len && sp[1] >= '0' && sp[1] <= '9' &&
	       line[len - 1] == ')' && memmem(sp, len - (size_t)(sp - line), " (", 2);
}

const char *exec_first_line(const ExecResult *r, size_t max)
{
	static _Thread_local char buf[1024];
	const char *p = r->err_len > 0 ? r->err : r->out;
	const char *end = p + (r->err_len > 0 ? r->err_len : r->out_len);

	buf[0] = 0;
	while (p && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ?: end, *start = p;
		p = nl ? nl + 1 : end;
		while (start < eol && (*start == ' ' || *start == '\t'))
			start++;
		size_t len = (size_t)(eol - start);
		while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\r'))
			len--;
		if (len == 0 || is_version_banner(start, len))
			continue;
		len = MIN(len, MIN(max, sizeof(buf) - 1));
		memcpy(buf, start, len);
		buf[len] = 0;
		break;
	}
	return buf;
}

/* Registry: what dead processes left */

#define LEFTOVER_WAIT (10 * USEC_PER_SEC)
#define LEFTOVER_POLL_MS 20
#define RECORD_FILE_MAX (1024 * 1024)

typedef struct Record {
	pid_t pid, pgid, sid;
	unsigned long long start;
	bool recycled;	/* the pid was seen with another start time: names nothing */
	size_t running; /* processes it named at the last look */
	size_t found;	/* the most it named at any look */
	char *program;
} Record;

typedef struct Recovery {
	const char *boot;
	unsigned long long pidns;
	Record *records;
	size_t n_records;
	int *owner_fds; /* dead owners' directories, locked until they are removed */
	char **owner_names;
	size_t n_owners;
} Recovery;

/* Parses a record of this boot and pid namespace whose pid does not belong to another process
 * now. Returns false for anything else: such a record is only removed. */
static bool record_parse(const Recovery *rc, const char *text, Record *ret)
{
	char boot[40];
	unsigned long long pidns;
	Record r = {};
	ProcStat st;

	if (sscanf(text, "pid=%d pgid=%d start=%llu sid=%d boot=%39s pidns=%llu", &r.pid, &r.pgid,
		   &r.start, &r.sid, boot, &pidns) != 6 ||
	    r.pid <= 0 || r.pgid <= 0)
		return false;
	if (strcmp(boot, rc->boot) != 0 || pidns != rc->pidns)
		return false;
	if (proc_stat_read(r.pid, &st) == 0 && st.start != r.start)
		return false;
	*ret = r;
	return true;
}

/* Whether a running process is one the record names: the child itself (same pid and start
 * time), or a process of its group and session that started no earlier. Once the pid shows up
 * with another start time, the group's number may have been reused as well: the record then
 * names nothing more. */
static bool record_names(Record *r, pid_t pid, const ProcStat *st)
{
	if (r->recycled)
		return false;
	if (pid == r->pid) {
		if (st->start == r->start)
			return true;
		r->recycled = true;
		return false;
	}
	return st->pgrp == r->pgid && st->session == r->sid && st->start >= r->start;
}

/* SIGKILL to pid if it is still the process that started at start: through a pidfd taken
 * before checking, so that a pid recycled in between is never signalled. */
static void kill_exact(pid_t pid, unsigned long long start)
{
	ProcStat st;

	_cleanup_close_ int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 && errno != ENOSYS)
		return;
	if (proc_stat_read(pid, &st) < 0 || st.start != start)
		return;
	if (pidfd >= 0)
		(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	else
		(void)kill(pid, SIGKILL); /* before Linux 5.3 */
}

/* The command line of a process, arguments spaced, or "?". */
static char *cmdline_read(pid_t pid)
{
	char path[40], buf[256];

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	ssize_t n = proc_read(path, buf, sizeof(buf));
	while (n > 0 && buf[n - 1] == 0)
		n--;
	if (n <= 0)
		return xstrdup("?");
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == 0)
			buf[i] = ' ';
	buf[n] = 0;
	return xstrdup(buf);
}

/* One look at every process: each one a record names gets SIGKILL. Returns how many there
 * were. */
static size_t leftovers_kill(Recovery *rc)
{
	_cleanup_closedir_ DIR *d = opendir("/proc");
	pid_t self = getpid();
	struct dirent *de;
	size_t total = 0;

	for (size_t i = 0; i < rc->n_records; i++)
		rc->records[i].running = 0;
	while (d && (de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		ProcStat st;
		if (*end || pid <= 0 || pid == self)
			continue;
		if (proc_stat_read((pid_t)pid, &st) < 0 || st.state == 'Z' || st.state == 'X')
			continue;
		for (size_t i = 0; i < rc->n_records; i++) {
			Record *r = &rc->records[i];
			if (!record_names(r, (pid_t)pid, &st))
				continue;
			if (!r->program) /* before the kill: a dying process has none */
				r->program = cmdline_read((pid_t)pid);
			kill_exact((pid_t)pid, st.start);
			r->running++;
			total++;
			break;
		}
	}
	for (size_t i = 0; i < rc->n_records; i++)
		rc->records[i].found = MAX(rc->records[i].found, rc->records[i].running);
	return total;
}

/* Reads the records of a dead owner's file, one a line (blank lines are free slots). */
static void owner_read(Recovery *rc, int dir_fd, const char *name)
{
	_cleanup_free_ char *text = NULL;

	if (read_file_at(dir_fd, name, RECORD_FILE_MAX, &text, NULL) < 0)
		return;
	char *save = NULL;
	for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		Record r;
		if (!record_parse(rc, line, &r))
			continue;
		rc->records = xrealloc(rc->records, (rc->n_records + 1) * sizeof(Record));
		rc->records[rc->n_records++] = r;
	}
}

/* Whether name is one owner_create() makes: the pid, a dot, hex digits. */
static bool owner_name_valid(const char *name)
{
	const char *c = name;

	if (*c < '0' || *c > '9')
		return false;
	while (*c >= '0' && *c <= '9')
		c++;
	if (*c++ != '.' || !*c)
		return false;
	for (; *c; c++)
		if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
			return false;
	return true;
}

/* Collects the records of every owner whose process is gone (the lock on its file is free),
 * keeping the files locked until they are removed. Only the regular files named as
 * owner_create() names them are records: anything else here is left as it is. */
static void owners_scan(Recovery *rc, int dir_fd)
{
	_cleanup_closedir_ DIR *d = fdopendir(fcntl(dir_fd, F_DUPFD_CLOEXEC, 3));
	struct dirent *de;

	while (d && (de = readdir(d))) {
		if (!owner_name_valid(de->d_name)) {
			if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
				log_debug("exec registry: %s is no record of ours, left alone",
					  de->d_name);
			continue;
		}
		int fd = open_beneath(dir_fd, de->d_name, O_RDONLY, 0, S_IFREG);
		if (fd < 0) {
			log_debug_errno(fd, "exec registry: %s left alone: %m", de->d_name);
			continue;
		}
		if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
			close(fd); /* a live process's, or one being cleaned by another */
			continue;
		}
		owner_read(rc, dir_fd, de->d_name);
		rc->owner_fds = xrealloc(rc->owner_fds, (rc->n_owners + 1) * sizeof(int));
		rc->owner_names = xrealloc(rc->owner_names, (rc->n_owners + 1) * sizeof(char *));
		rc->owner_fds[rc->n_owners] = fd;
		rc->owner_names[rc->n_owners++] = xstrdup(de->d_name);
	}
}

static void recover(int dir_fd, const char *boot, unsigned long long pidns, ExecLeftoverFn fn,
		    void *userdata)
{
	Recovery rc = {.boot = boot, .pidns = pidns};

	owners_scan(&rc, dir_fd);
	usec_t deadline = now_usec(CLOCK_MONOTONIC) + LEFTOVER_WAIT;
	while (rc.n_records > 0 && leftovers_kill(&rc) > 0 && now_usec(CLOCK_MONOTONIC) < deadline)
		(void)poll(NULL, 0, LEFTOVER_POLL_MS);
	for (size_t i = 0; i < rc.n_records; i++) {
		Record *r = &rc.records[i];
		if (r->found > 0 && fn)
			fn(&(ExecLeftover){.pid = r->pid,
					   .program = r->program,
					   .n_processes = r->found,
					   .gone = r->running == 0},
			   userdata);
		free(r->program);
	}
	for (size_t i = 0; i < rc.n_owners; i++) {
		/* Still locked: no other process is reading it. */
		if (unlinkat(dir_fd, rc.owner_names[i], 0) < 0)
			log_debug("exec registry: cannot remove %s: %m", rc.owner_names[i]);
		close(rc.owner_fds[i]);
		free(rc.owner_names[i]);
	}
	free(rc.records);
	free(rc.owner_fds);
	free(rc.owner_names);
}

/* Makes this process's own file of records, locked for as long as the process lives. Another
 * process opening the registry at the same moment may take the new file for a dead one's and
 * remove it before the lock is ours: then it has no links left, and a new one is made. */
static int owner_create(int dir_fd)
{
	for (unsigned attempt = 0; attempt < 16; attempt++) {
		char name[48];
		struct stat st;
		snprintf(name, sizeof(name), "%d.%llx", (int)getpid(),
			 (unsigned long long)now_usec(CLOCK_MONOTONIC) + attempt);
		int fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
				0600);
		if (fd < 0 && errno == EEXIST)
			continue;
		if (fd < 0)
			return negative_errno();
		if (flock(fd, LOCK_EX) < 0 || fstat(fd, &st) < 0) {
			int r = negative_errno();
			close(fd);
			return r;
		}
		if (st.st_nlink > 0)
			return fd;
		close(fd);
	}
	return -EBUSY;
}

/* Opens sub beneath state_fd, each missing component made, none followed if a symlink: each
 * is made and opened in the directory opened before it. */
static int registry_dir_open(int state_fd, const char *sub)
{
	_cleanup_free_ char *path = xstrdup(sub);
	_cleanup_close_ int fd = -EBADF;
	char *save = NULL;

	for (char *c = strtok_r(path, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		int at = fd >= 0 ? fd : state_fd;
		if (mkdirat(at, c, 0700) < 0 && errno != EEXIST)
			return negative_errno();
		int next = open_beneath(at, c, O_RDONLY | O_DIRECTORY, 0, S_IFDIR);
		if (next < 0)
			return next;
		closep(&fd);
		fd = next;
	}
	return fd >= 0 ? TAKE_FD(fd) : -EINVAL;
}

int exec_registry_open(const char *state, const char *sub, ExecLeftoverFn on_leftover,
		       void *userdata)
{
	char boot[40];
	struct stat ns;

	if (registry_fd >= 0)
		return -EBUSY;
	_cleanup_close_ int state_fd = open(state, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (state_fd < 0)
		return negative_errno();
	_cleanup_close_ int dir_fd = registry_dir_open(state_fd, sub);
	if (dir_fd < 0)
		return dir_fd;
	if (proc_read("/proc/sys/kernel/random/boot_id", boot, sizeof(boot)) < 0)
		strcpy(boot, "-");
	boot[strcspn(boot, "\n")] = 0;
	if (stat("/proc/self/ns/pid", &ns) < 0)
		ns.st_ino = 0;
	recover(dir_fd, boot, (unsigned long long)ns.st_ino, on_leftover, userdata);

	int fd = owner_create(dir_fd);
	if (fd < 0)
		return fd;
	snprintf(registry_tag, sizeof(registry_tag), " sid=%d boot=%s pidns=%llu", (int)getsid(0),
		 boot, (unsigned long long)ns.st_ino);
	registry_fd = fd;
	return 0;
}
