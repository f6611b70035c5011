/* SPDX-License-Identifier: Apache-2.0 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sys/resource.h>
#include <signal.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "exec.h"
#include "scratch.h"
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

/* What the registry's contract promises, read from /proc independently of exec.c. */

/* Field 22 of /proc/PID/stat (the start time), or 0 when there is no such process. */
static unsigned long long start_of(pid_t pid)
{
	char path[32], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return 0;
	char *p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
	fclose(f);
	for (int field = 2; p && field < 22; field++)
		p = strchr(p + 1, ' ');
	return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Running: there is such a process and it is not a zombie. */
static bool running(pid_t pid)
{
	char path[32], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return false;
	char *p = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
	fclose(f);
	return p && p[2] != 'Z' && p[2] != 'X';
}

/* The one child of pid, once it runs comm, waiting up to 5 s; -1 when there is none. */
static pid_t child_running(pid_t pid, const char *comm)
{
	char path[64], buf[64];

	for (int i = 0; i < 500; i++, poll(NULL, 0, 10)) {
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
		FILE *f = fopen(path, "re");
		int child = 0;
		if (!f)
			return -1;
		if (fscanf(f, "%d", &child) != 1)
			child = 0;
		fclose(f);
		snprintf(path, sizeof(path), "/proc/%d/comm", child);
		if (child <= 0 || !(f = fopen(path, "re")))
			continue;
		bool match = fgets(buf, sizeof(buf), f) && strncmp(buf, comm, strlen(comm)) == 0 &&
			     buf[strlen(comm)] == '\n';
		fclose(f);
		if (match)
			return child;
	}
	return -1;
}

/* Waits up to timeout for our child (or orphan: we are a subreaper) to end; its wait status,
 * or -1. */
static int reaped(pid_t pid, usec_t timeout)
{
	usec_t until = now_usec(CLOCK_MONOTONIC) + timeout;
	int status;

	do {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return status;
	} while (now_usec(CLOCK_MONOTONIC) < until && poll(NULL, 0, 5) >= 0);
	return -1;
}

/* A process in a group of its own that runs sleep SECONDS (its pid). */
static pid_t sleeper(const char *seconds)
{
	pid_t pid = fork();
	if (pid == 0) {
		setpgid(0, 0);
		execl("/bin/sleep", "sleep", seconds, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid);
	return pid;
}

/* exec_registry_open() of the directory dir: its parent is the state, its name the sub. */
static int registry_open(const char *dir, ExecLeftoverFn fn, void *userdata)
{
	_cleanup_free_ char *state = xstrdup(dir);
	char *slash = strrchr(state, '/');

	*slash = 0;
	return exec_registry_open(state, slash + 1, fn, userdata);
}

/* A process that opens the registry in dir, then runs argv through exec_run() and hangs there:
 * a daemon in the middle of a call, to be killed. */
static pid_t daemon_running(const char *dir, const char *const *argv)
{
	pid_t pid = fork();
	if (pid == 0) {
		ExecResult r;
		if (registry_open(dir, NULL, NULL) < 0)
			_exit(2);
		exec_run(&(ExecOptions){.argv = argv}, &r);
		_exit(0);
	}
	return pid;
}

/* The record of pid (a line starting "pid=PID ") in any owner's file below dir, trailing
 * spaces cut, read within 2 s; NULL when none appears. With pid 0: the first record found. */
static char *record_of(const char *dir, pid_t pid)
{
	_cleanup_free_ char *prefix = pid ? xasprintf("pid=%d ", (int)pid) : xstrdup("pid=");

	for (int i = 0; i < 200; i++, poll(NULL, 0, 10)) {
		DIR *d = opendir(dir);
		struct dirent *de;
		char *found = NULL;
		while (d && !found && (de = readdir(d))) {
			_cleanup_free_ char *path = xasprintf("%s/%s", dir, de->d_name);
			FILE *f = de->d_name[0] != '.' ? fopen(path, "re") : NULL;
			char line[512];
			while (f && !found && fgets(line, sizeof(line), f))
				if (strncmp(line, prefix, strlen(prefix)) == 0) {
					size_t len = strlen(line);
					while (len > 0 &&
					       (line[len - 1] == ' ' || line[len - 1] == '\n'))
						line[--len] = 0;
					found = xstrdup(line);
				}
			if (f)
				fclose(f);
		}
		if (d)
			closedir(d);
		if (found || !pid)
			return found;
	}
	return NULL;
}

static size_t entries_in(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

/* Appends a record to an owner's file, as the registry's contract describes it. */
static void write_record(const char *owner, pid_t pid, unsigned long long start)
{
	char boot[64] = "";
	struct stat ns = {};
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	if (f) {
		if (fgets(boot, sizeof(boot), f))
			boot[strcspn(boot, "\n")] = 0;
		fclose(f);
	}
	stat("/proc/self/ns/pid", &ns);
	f = fopen(owner, "ae");
	fprintf(f, "pid=%d pgid=%d start=%llu sid=%d boot=%s pidns=%llu\n\n", (int)pid, (int)pid,
		start, (int)getsid(0), boot, (unsigned long long)ns.st_ino);
	fclose(f);
}

typedef struct Seen {
	size_t n;
	char programs[4][64];
	bool all_gone;
} Seen;

static void on_leftover(const ExecLeftover *l, void *userdata)
{
	Seen *seen = userdata;

	if (seen->n < 4)
		snprintf(seen->programs[seen->n], sizeof(seen->programs[0]), "%s", l->program);
	seen->n++;
	seen->all_gone = (seen->n == 1 || seen->all_gone) && l->gone && l->n_processes == 1;
}

static bool seen_program(const Seen *seen, const char *program)
{
	for (size_t i = 0; i < MIN(seen->n, 4u); i++)
		if (strcmp(seen->programs[i], program) == 0)
			return true;
	return false;
}

/* A program outlives nothing: killing the process that runs it kills it. */
static void test_dies_with_the_daemon(const char *dir)
{
	const char *argv[] = {"/bin/sleep", "60", NULL};
	pid_t daemon = daemon_running(dir, argv);
	pid_t child = child_running(daemon, "sleep");

	ok(child > 0, "the daemon runs sleep 60 (pid %d)", (int)child);
	_cleanup_free_ char *want = xasprintf("pid=%d pgid=%d start=%llu sid=%d boot=", (int)child,
					      (int)child, start_of(child), (int)getsid(0));
	_cleanup_free_ char *record = record_of(dir, child);
	ok(record && strncmp(record, want, strlen(want)) == 0, "recorded while it runs: %s",
	   record ?: "(none)");
	kill(daemon, SIGKILL);
	is_int(reaped(daemon, 5 * USEC_PER_SEC), SIGKILL, "daemon killed with -9");
	int status = reaped(child, USEC_PER_SEC);
	ok(status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	   "its sleep died with it, of SIGKILL, within a second (status %d)", status);
}

/* The exit status of a child that opens the registry state/sub and says what it found: 0 when
 * it opened, else the errno. */
static int registry_open_in_child(const char *state, const char *sub)
{
	pid_t pid = fork();
	if (pid == 0) {
		int r = exec_registry_open(state, sub, NULL, NULL);
		_exit(r < 0 ? -r : 0);
	}
	int status = reaped(pid, 15 * USEC_PER_SEC);
	return status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The registry lies in a directory others can write (the pool's run/): a symlink there is
 * refused, never followed, and nothing but the files it makes is ever removed. */
static void test_registry_hostile(void)
{
	_cleanup_free_ char *state = scratch_mkdir("hostile-state");
	_cleanup_free_ char *canary = scratch_mkdir("hostile-canary");
	_cleanup_free_ char *run = xasprintf("%s/run", state);
	_cleanup_free_ char *children = xasprintf("%s/run/children", state);
	_cleanup_free_ char *victim = xasprintf("%s/victim", canary);
	_cleanup_free_ char *named = xasprintf("%s/4242.1f", canary);
	struct stat st;

	close(open(victim, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	close(open(named, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	ok(mkdir(run, 0700) == 0 && symlink(canary, children) == 0, "run/children -> %s", canary);
	is_int(registry_open_in_child(state, "run/children"), ELOOP,
	       "run/children as a symlink: ELOOP");
	ok(stat(victim, &st) == 0 && stat(named, &st) == 0,
	   "the files it points to are untouched, even one named like a record");
	ok(unlink(children) == 0 && rmdir(run) == 0 && symlink(canary, run) == 0, "run -> %s",
	   canary);
	is_int(registry_open_in_child(state, "run/children"), ELOOP, "run as a symlink: ELOOP");
	_cleanup_free_ char *made = xasprintf("%s/children", canary);
	ok(lstat(made, &st) < 0 && errno == ENOENT, "nothing made where it points");
	ok(unlink(run) == 0 && mkdir(run, 0700) == 0 && mkdir(children, 0700) == 0,
	   "run/children a real directory");

	/* Strays in the registry: only regular files named PID.HEX are records. */
	_cleanup_free_ char *notes = xasprintf("%s/notes", children);
	_cleanup_free_ char *fifo = xasprintf("%s/77.1", children);
	_cleanup_free_ char *link = xasprintf("%s/78.2", children);
	_cleanup_free_ char *dir = xasprintf("%s/79.3", children);
	close(open(notes, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	ok(mkfifo(fifo, 0600) == 0 && symlink(named, link) == 0 && mkdir(dir, 0700) == 0,
	   "a FIFO, a symlink and a directory named like records");
	is_int(registry_open_in_child(state, "run/children"), 0,
	       "the registry opens (and did not hang on the FIFO)");
	ok(stat(notes, &st) == 0 && lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode) &&
		   lstat(link, &st) == 0 && S_ISLNK(st.st_mode) && stat(dir, &st) == 0,
	   "none of them removed");
	ok(stat(named, &st) == 0, "what the symlink points to is untouched");
}

/* What the kernel cannot do and the registry does: a daemon dies, its child dies with it, but
 * the child's own child lives on in the group; records of a sleep of our own, of a recycled
 * pid, and of a daemon still alive. Then one exec_registry_open(). */
static void test_registry(const char *dir)
{
	const char *argv[] = {"/bin/sh", "-c", "sleep 61 & exec sleep 62", NULL};
	pid_t daemon = daemon_running(dir, argv);
	pid_t child = child_running(daemon, "sleep");
	pid_t grandchild = child > 0 ? child_running(child, "sleep") : -1;
	_cleanup_free_ char *record = child > 0 ? record_of(dir, child) : NULL;

	ok(grandchild > 0 && record, "a daemon runs sleep 62 (%d) which runs sleep 61 (%d)",
	   (int)child, (int)grandchild);
	kill(daemon, SIGKILL);
	reaped(daemon, 5 * USEC_PER_SEC);
	int status = reaped(child, USEC_PER_SEC);
	ok(status >= 0 && WTERMSIG(status) == SIGKILL, "the daemon's child died with it");
	ok(running(grandchild), "its grandchild did not: only the registry finds it");

	/* A dead daemon's records, made by hand as its contract says. */
	_cleanup_free_ char *dead = xasprintf("%s/1.dead", dir),
			    *live = xasprintf("%s/2.11fe", dir);
	pid_t mine = sleeper("63"), recycled = sleeper("64"), others = sleeper("65");
	poll(NULL, 0, 50); /* the sleepers have exec'd */
	write_record(dead, mine, start_of(mine));
	write_record(dead, recycled, start_of(recycled) + 1);
	write_record(dead, 999999999, 1); /* no such process */
	write_record(live, others, start_of(others));
	int live_fd = open(live, O_RDONLY | O_CLOEXEC);
	ok(live_fd >= 0 && flock(live_fd, LOCK_EX) == 0, "a live daemon holds its file");

	Seen seen = {};
	usec_t t0 = now_usec(CLOCK_MONOTONIC);
	is_int(registry_open(dir, on_leftover, &seen), 0, "registry opened");
	usec_t took = now_usec(CLOCK_MONOTONIC) - t0;
	ok(took < 2 * USEC_PER_SEC, "in %llu ms", (unsigned long long)(took / USEC_PER_MSEC));
	is_int(seen.n, 2, "two leftovers reported");
	ok(seen_program(&seen, "sleep 61") && seen_program(&seen, "sleep 63"),
	   "named by their command lines: '%s', '%s'", seen.programs[0], seen.programs[1]);
	ok(seen.all_gone, "one process each, gone");
	status = reaped(grandchild, USEC_PER_SEC);
	ok(status >= 0 && WTERMSIG(status) == SIGKILL, "the grandchild was killed");
	status = reaped(mine, USEC_PER_SEC);
	ok(status >= 0 && WTERMSIG(status) == SIGKILL, "the recorded sleep was killed");
	ok(running(recycled), "a recycled pid (other start time) is never killed");
	ok(running(others), "a live daemon's child is left alone");
	ok(access(dead, F_OK) < 0 && errno == ENOENT, "the dead daemon's records are gone");
	_cleanup_free_ char *live_record = record_of(dir, others);
	ok(live_record, "the live daemon's record stays");
	is_int(entries_in(dir), 2, "left: the live daemon's file and ours");
	is_int(registry_open(dir, NULL, NULL), -EBUSY, "opened once per process");

	/* Our own records go when the child is reaped. */
	close(live_fd);
	unlink(live);
	kill(others, SIGKILL);
	reaped(others, USEC_PER_SEC);
	const char *truth[] = {"/bin/true", NULL};
	ExecResult r;
	is_int(exec_run(&(ExecOptions){.argv = truth}, &r), 0, "a program runs with the registry");
	exec_result_done(&r);
	_cleanup_free_ char *any = record_of(dir, 0);
	ok(!any, "its record is gone once it is reaped: %s", any ?: "none left");

	kill(recycled, SIGKILL);
	reaped(recycled, USEC_PER_SEC);
}

static void *lower_fd_limit(void *arg)
{
	const struct rlimit *saved = arg;

	poll(NULL, 0, 300);
	/* poll() refuses more fds than the soft limit (EINVAL): exec_run() can watch no more. */
	(void)setrlimit(RLIMIT_NOFILE, &(struct rlimit){1, saved->rlim_max});
	return NULL;
}

/* A child that exec_run() can no longer watch is killed and reaped, and the call fails: it
 * never waits without a deadline on a program that may hang. */
static void test_watch_fails(const char *dir)
{
	struct rlimit saved;
	pthread_t t;
	ExecResult r = {};
	_cleanup_free_ char *pidfile = xasprintf("%s/watched.pid", dir);
	_cleanup_free_ char *script = xasprintf(
		"echo $$ > %s; i=0; while [ $i -lt 100 ]; do echo x; sleep 0.05; i=$((i+1)); done",
		pidfile);

	getrlimit(RLIMIT_NOFILE, &saved);
	pthread_create(&t, NULL, lower_fd_limit, &saved);
	usec_t t0 = now_usec(CLOCK_MONOTONIC);
	int e = run(&r, 0, 0, script);
	usec_t took = now_usec(CLOCK_MONOTONIC) - t0;
	pthread_join(t, NULL);
	setrlimit(RLIMIT_NOFILE, &saved);

	is_int(e, -EINVAL, "poll() failing: the call fails with its errno");
	ok(took < 2 * USEC_PER_SEC, "at once, not when the program ends on its own (%llu ms)",
	   (unsigned long long)(took / USEC_PER_MSEC));
	FILE *f = fopen(pidfile, "re");
	int pid = 0;
	ok(f && fscanf(f, "%d", &pid) == 1 && pid > 0, "the program had started (pid %d)", pid);
	if (f)
		fclose(f);
	ok(pid > 0 && !running(pid) && kill(pid, 0) < 0 && errno == ESRCH,
	   "and was killed and reaped: no such process left");
	if (e == 0)
		exec_result_done(&r);
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

	/* A tool's reason comes first; usage text and a version banner are not it. */
	is_int(run(&r, 0, 0,
		   "echo; echo 'resize2fs 1.47.0 (5-Feb-2023)' >&2; echo >&2; "
		   "printf '  Invalid value 4096 for -i size option.\r\nUsage: mkfs.xfs\n"
		   "   [-L label (maximum 12 characters)]\n' >&2; exit 1"),
	       0, "a tool that fails with its usage");
	is_str(exec_first_line(&r, 100), "Invalid value 4096 for -i size option.",
	       "first line: the reason, past blank lines and the banner");
	is_str(exec_first_line(&r, 7), "Invalid", "at most max bytes");
	exec_result_done(&r);
	is_int(run(&r, 0, 0, "echo only stdout; echo second"), 0, "silent on stderr");
	is_str(exec_first_line(&r, 100), "only stdout", "first line of stdout");
	exec_result_done(&r);
	is_int(run(&r, 0, 0, "true"), 0, "silent");
	is_str(exec_first_line(&r, 100), "", "nothing said: empty");
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

	/* Orphans come to us, so that a test can see how they died. */
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	scratch_init("exec");
	_cleanup_free_ char *registry = scratch_path("children");
	test_registry_hostile();
	test_dies_with_the_daemon(registry);
	test_registry(registry);
	test_watch_fails(scratch);
	return tap_done();
}
