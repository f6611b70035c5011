/* SPDX-License-Identifier: Apache-2.0 */
/* The fsGroup walk. A stack of frames, one per directory on the current path; each frame holds
 * the subdirectories of its directory that are still to visit. A directory is read whole
 * before the walk goes down: its other entries are fixed while reading, so only subdirectory
 * names are kept. A directory is fixed after its children (post-order), the root last.
 * Only the root and the deepest OWNERSHIP_MAX_OPEN_DIRS frames hold an fd; the others are
 * "parked" and re-opened through ".." of their child when the walk comes back up, after
 * checking dev/ino (or, if that fails, from the root down by name, checking each step).
 * With liburing, a directory's entries are examined BATCH_MAX at a time through an io_uring,
 * one io_uring_enter for all of them; the rest of a directory, and every entry of a walk
 * without a ring, gets its own statx syscall. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>

#if HAVE_LIBURING
#include <liburing.h>
#endif

#include "alloc.h"
#include "log.h"
#include "ownership.h"

#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452 /* Linux 6.6; the same number on all architectures but alpha */
#endif

#define RW_BITS 0660
#define RO_BITS 0440
#define DIR_BITS (0110 | S_ISGID)
#define STATX_WANT (STATX_TYPE | STATX_MODE | STATX_GID | STATX_INO | STATX_MNT_ID)
#define GETDENTS_BUF (64 * 1024)
#define PROGRESS_CHECK_EVERY 1024
#define MAX_SHOWN_PATH 200
/* Entries examined by one io_uring submission. Only full batches go to the ring: each wakes
 * the ring's worker thread, and smaller ones gain little or lose (docs/ownership.md: 20
 * entries, the typical directory, take longer than 20 statx syscalls). */
#define BATCH_MAX 256
#define NO_URING_ENV "VOLPLUG_OWNERSHIP_NO_URING"

typedef struct Frame {
	int fd;	   /* -EBADF while parked */
	bool lost; /* could not be re-opened: the rest of it is skipped */
	dev_t dev;
	ino_t ino;
	mode_t mode; /* as seen when opened */
	gid_t gid;
	const char *name; /* in the parent's names, which no longer grow; NULL for the root */
	char *names;	  /* subdirectories still to visit, NUL-separated */
	size_t names_len, names_alloc, pos;
} Frame;

/* Entries of the top frame waiting for their statx (batch_add). */
typedef enum BatchState {
	BATCH_OFF,     /* one statx syscall per entry */
	BATCH_UNTRIED, /* a ring is set up when a batch fills up first */
	BATCH_ON,      /* the ring is up */
} BatchState;

typedef struct Batch {
	BatchState state;
	bool used; /* the ring examined some entries */
	size_t n;
	const char *names[BATCH_MAX]; /* in Walk.buf: run before the next getdents64 call */
#if HAVE_LIBURING
	struct io_uring ring;
	int cpu;	    /* where the ring's worker may run; -1 not set, -2 cannot be set */
	int res[BATCH_MAX]; /* statx result, -EINPROGRESS until answered */
	struct statx *sx;   /* BATCH_MAX, written by the kernel */
#endif
} Batch;

typedef struct Walk {
	gid_t gid;
	mode_t bits; /* added to everything but symlinks; directories also get DIR_BITS */
	dev_t dev;   /* of the root: nothing on another device or mount is entered */
	uint64_t mnt_id;
	bool have_mnt_id;
	int noatime; /* O_NOATIME while it is accepted: reading must not dirty every directory */
	Frame *frames;
	size_t n_frames, n_alloc;
	size_t lo; /* frames[1 .. lo-1] are parked; frames[0] and frames[lo ..] are open */
	OwnershipReport report;
	unsigned n_reported;
	const OwnershipProgress *progress;
	usec_t start, next_progress;
	void *buf;
	Batch batch;
} Walk;

static const char *const policy_names[_OWNERSHIP_POLICY_MAX] = {
	[OWNERSHIP_ALWAYS] = "Always",
	[OWNERSHIP_ON_ROOT_MISMATCH] = "OnRootMismatch",
};

int ownership_policy_from_string(const char *s)
{
	for (int i = 0; s && i < _OWNERSHIP_POLICY_MAX; i++)
		if (strcasecmp(s, policy_names[i]) == 0)
			return i;
	return -EINVAL;
}

const char *ownership_policy_to_string(OwnershipPolicy policy)
{
	return policy >= 0 && policy < _OWNERSHIP_POLICY_MAX ? policy_names[policy] : NULL;
}

void ownership_report_done(OwnershipReport *report)
{
	free(report->first_errors);
	report->first_errors = NULL;
}

/* The path of frames[1 .. depth-1] plus name, relative to the root; long ones keep their
 * tail, which names the entry. */
static char *entry_path(const Walk *w, size_t depth, const char *name)
{
	size_t len = 0;

	for (size_t i = 1; i < depth; i++)
		len += strlen(w->frames[i].name) + 1;
	if (name)
		len += strlen(name) + 1;
	if (len == 0)
		return xstrdup(".");

	char *p = xmalloc(len + 1), *q = p;
	for (size_t i = 1; i < depth; i++)
		q = stpcpy(stpcpy(q, w->frames[i].name), "/");
	if (name)
		q = stpcpy(q, name);
	else
		*--q = 0;
	if (len - 1 > MAX_SHOWN_PATH) {
		memcpy(p, "...", 3);
		memmove(p + 3, p + len - 1 - (MAX_SHOWN_PATH - 3), MAX_SHOWN_PATH - 3 + 1);
	}
	return p;
}

/* Counts an entry that could not be examined or changed; keeps the first few lines. */
static void record_error(Walk *w, size_t depth, const char *name, const char *op, int err,
			 const char *why)
{
	w->report.errors++;
	if (w->n_reported >= OWNERSHIP_MAX_REPORTED_ERRORS)
		return;
	w->n_reported++;

	_cleanup_free_ char *path = entry_path(w, depth, name);
	_cleanup_free_ char *old = w->report.first_errors;
	errno = -err;
	if (why)
		w->report.first_errors = xasprintf("%s%s: %s: %s\n", old ?: "", path, op, why);
	else
		w->report.first_errors = xasprintf("%s%s: %s: %m\n", old ?: "", path, op);
	log_debug("ownership: %s: %s: %s", path, op, why ?: strerrordesc_np(-err) ?: "error");
}

static void count_entry(Walk *w)
{
	w->report.entries++;
	if (w->report.entries % PROGRESS_CHECK_EVERY != 0 || !w->progress || !w->progress->func)
		return;
	usec_t now = now_usec(CLOCK_MONOTONIC);
	if (now < w->next_progress)
		return;
	w->report.elapsed = now - w->start;
	w->progress->func(&w->report, w->progress->userdata);
	w->next_progress = now + (w->progress->interval ?: OWNERSHIP_PROGRESS_INTERVAL_DEFAULT);
}

static bool other_mount(const Walk *w, const struct statx *sx)
{
	if (makedev(sx->stx_dev_major, sx->stx_dev_minor) != w->dev)
		return true;
	return w->have_mnt_id && (sx->stx_mask & STATX_MNT_ID) && sx->stx_mnt_id != w->mnt_id;
}

/* chmod that never follows a symlink at name, even one swapped in since it was examined. */
static int chmod_nofollow(int dir_fd, const char *name, mode_t mode)
{
	static atomic_bool no_fchmodat2;

	if (!atomic_load_explicit(&no_fchmodat2, memory_order_relaxed)) {
		if (syscall(__NR_fchmodat2, dir_fd, name, mode, AT_SYMLINK_NOFOLLOW) >= 0)
			return 0;
		if (errno == ENOSYS)
			atomic_store_explicit(&no_fchmodat2, true, memory_order_relaxed);
		else if (errno != EPERM) /* EPERM may be a seccomp filter that predates it */
			return -errno;
	}
	/* glibc's fallback opens name O_PATH|O_NOFOLLOW, refuses a symlink, and chmods that very
	 * inode through /proc/self/fd: no race either. */
	if (fchmodat(dir_fd, name, mode, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	return 0;
}

/* Fixes a non-directory entry of the top frame, as statx saw it. */
static void fix_entry(Walk *w, int dir_fd, const char *name, const struct statx *sx)
{
	mode_t mode = sx->stx_mode & 07777;
	bool chowned = false, changed = false;

	if (sx->stx_gid != w->gid) {
		if (fchownat(dir_fd, name, (uid_t)-1, w->gid, AT_SYMLINK_NOFOLLOW) < 0) {
			record_error(w, w->n_frames, name, "chown", -errno, NULL);
			return;
		}
		chowned = changed = true;
	}
	/* A symlink's mode means nothing, and chmod on one would reach its target. */
	if (!S_ISLNK(sx->stx_mode)) {
		mode_t want = mode | w->bits;
		/* chown clears setuid (and setgid with group x) on non-directories: put them back,
		 * as Kubernetes does by chmod'ing to the mode it saw before its chown. */
		if (want != mode || (chowned && (mode & (S_ISUID | S_ISGID)))) {
			int r = chmod_nofollow(dir_fd, name, want);
			if (r < 0)
				record_error(w, w->n_frames, name, "chmod", r, NULL);
			else
				changed = true;
		}
	}
	if (changed)
		w->report.changed++;
}

/* Fixes the directory of frames[i] through its own fd. */
static void fix_dir(Walk *w, size_t i)
{
	const Frame *f = &w->frames[i];
	mode_t mode = f->mode & 07777, want = mode | w->bits | DIR_BITS;
	bool changed = false;

	if (f->gid != w->gid) {
		if (fchown(f->fd, (uid_t)-1, w->gid) < 0) {
			record_error(w, i + 1, NULL, "chown", -errno, NULL);
			return;
		}
		changed = true;
	}
	if (want != mode) {
		if (fchmod(f->fd, want) < 0)
			record_error(w, i + 1, NULL, "chmod", -errno, NULL);
		else
			changed = true;
	}
	if (changed)
		w->report.changed++;
}

static void add_name(Frame *f, const char *name)
{
	size_t n = strlen(name) + 1;

	if (f->names_len + n > f->names_alloc) {
		f->names_alloc = MAX(f->names_alloc * 2, f->names_len + n + 256);
		f->names = xrealloc(f->names, f->names_alloc);
	}
	memcpy(f->names + f->names_len, name, n);
	f->names_len += n;
}

/* An entry of the top frame as statx (AT_SYMLINK_NOFOLLOW) saw it: fix it, or queue it when
 * it is a directory (if may_queue; else it changed type under us again). */
static void examined(Walk *w, const char *name, bool may_queue, const struct statx *sx)
{
	Frame *f = &w->frames[w->n_frames - 1];

	if (other_mount(w, sx)) {
		w->report.mounts++;
		return;
	}
	if (S_ISDIR(sx->stx_mode)) {
		if (may_queue)
			add_name(f, name);
		else
			record_error(w, w->n_frames, name, "open", 0, "replaced during the walk");
		return;
	}
	count_entry(w);
	fix_entry(w, f->fd, name, sx);
}

/* An entry of the top frame not known to be a directory: statx it, then as examined(). */
static void visit(Walk *w, const char *name, bool may_queue)
{
	struct statx sx;

	if (statx(w->frames[w->n_frames - 1].fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
		  STATX_WANT, &sx) < 0) {
		if (errno != ENOENT) /* ENOENT: removed since listed, nothing left to own */
			record_error(w, w->n_frames, name, "stat", -errno, NULL);
		return;
	}
	examined(w, name, may_queue, &sx);
}

/* Reads the VOLPLUG_OWNERSHIP_NO_URING knob, once per walk, so a test can compare both ways.
 * The ring itself is set up when a batch first fills up: most trees never need one. */
static void batch_init(Walk *w)
{
	const char *no = getenv(NO_URING_ENV);

	w->batch.state =
		HAVE_LIBURING && !(no && *no && strcmp(no, "0") != 0) ? BATCH_UNTRIED : BATCH_OFF;
}

#if HAVE_LIBURING
/* Sets the ring up on first use, or turns batching off for the rest of the walk when the
 * kernel refuses (too old, io_uring disabled by sysctl or seccomp). */
static bool batch_ring(Walk *w)
{
	Batch *b = &w->batch;

	if (b->state != BATCH_UNTRIED)
		return b->state == BATCH_ON;
	/* DEFER_TASKRUN: the walk collects all completions when it waits, one wake-up a batch. */
	int r = io_uring_queue_init(BATCH_MAX, &b->ring,
				    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	if (r == -EINVAL) /* before Linux 6.1 */
		r = io_uring_queue_init(BATCH_MAX, &b->ring, 0);
	if (r < 0) {
		log_debug("ownership: no io_uring (%s), one statx per entry", strerror(-r));
		b->state = BATCH_OFF;
		return false;
	}
	b->sx = xmalloc(BATCH_MAX * sizeof(struct statx));
	b->cpu = -1;
	b->state = BATCH_ON;
	return true;
}

static void batch_done(Walk *w)
{
	Batch *b = &w->batch;

	if (b->state != BATCH_ON)
		return;
	io_uring_queue_exit(&b->ring);
	free(b->sx);
	b->state = BATCH_OFF;
}

/* The ring failed with requests possibly still in flight: their results may yet be written,
 * so the result buffer is left to them (a leak, on a path that should never run) and the
 * rest of the walk uses plain statx. */
static void batch_lost(Walk *w, int err)
{
	Batch *b = &w->batch;

	log_debug("ownership: io_uring failed (%s), one statx per entry from here", strerror(-err));
	io_uring_queue_exit(&b->ring);
	b->sx = NULL;
	b->state = BATCH_OFF;
}

/* The kernel runs a ring's statx calls in a worker thread (io-wq) while the walk waits. On
 * the walk's own CPU that is a switch between two threads; on another, idle CPU it is a
 * wake-up that can cost more than the syscalls saved (a first run 1.5x slower on a 2-vCPU
 * VM). So the worker is kept on the CPU the walk runs on, and follows it. */
static void batch_follow_cpu(Batch *b)
{
	int cpu = sched_getcpu();

	if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == b->cpu || b->cpu == -2)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	b->cpu = io_uring_register_iowq_aff(&b->ring, sizeof(set), &set) < 0 ? -2 : cpu;
}

/* Examines the n queued entries of the top frame with one submission, then handles them in
 * order. The ring's statx is the same call as visit()'s, relative to the frame's fd: its
 * results are only hints, every change goes through fix_entry() and never follows a
 * symlink. An entry without an answer, or with an error, is examined again by visit(), so
 * errors read the same as without the ring. */
static void batch_examine(Walk *w, size_t n)
{
	Batch *b = &w->batch;
	int fd = w->frames[w->n_frames - 1].fd;
	size_t left = n;
	unsigned stuck = 0;

	batch_follow_cpu(b);
	for (size_t i = 0; i < n; i++) {
		/* Never NULL: the ring has BATCH_MAX entries and nothing else is queued. */
		struct io_uring_sqe *sqe = io_uring_get_sqe(&b->ring);
		io_uring_prep_statx(sqe, fd, b->names[i], AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT,
				    STATX_WANT, &b->sx[i]);
		io_uring_sqe_set_data64(sqe, i);
		b->res[i] = -EINPROGRESS;
	}
	while (left > 0) {
		/* Submits what the kernel has not taken yet, waits for the answers. */
		int r = io_uring_submit_and_wait(&b->ring, left);
		struct io_uring_cqe *cqe;
		unsigned head, k = 0;

		io_uring_for_each_cqe(&b->ring, head, cqe)
		{
			uint64_t i = io_uring_cqe_get_data64(cqe);
			if (i < n)
				b->res[i] = cqe->res;
			k++;
		}
		io_uring_cq_advance(&b->ring, k);
		left -= MIN(k, left);
		stuck = k > 0 ? 0 : stuck + 1;
		if (left > 0 && r < 0 &&
		    ((r != -EINTR && r != -EAGAIN && r != -EBUSY) || stuck > 100)) {
			batch_lost(w, r);
			break;
		}
	}
	b->used = true;
	for (size_t i = 0; i < n; i++)
		if (b->res[i] == 0)
			examined(w, b->names[i], true, &b->sx[i]);
		else if (b->res[i] != -ENOENT) /* ENOENT: removed since listed */
			visit(w, b->names[i], true);
}
#else
static void batch_done(Walk *w)
{
	(void)w;
}
#endif

/* Handles the queued entries of the top frame: a full batch through the ring if there is
 * one, else one statx each. */
static void batch_run(Walk *w)
{
	Batch *b = &w->batch;
	size_t n = b->n;

	b->n = 0;
#if HAVE_LIBURING
	if (n == BATCH_MAX && batch_ring(w)) {
		batch_examine(w, n);
		return;
	}
#endif
	for (size_t i = 0; i < n; i++)
		visit(w, b->names[i], true);
}

/* Queues an entry of the top frame; runs the batch when it is full. */
static void batch_add(Walk *w, const char *name)
{
	w->batch.names[w->batch.n++] = name;
	if (w->batch.n == BATCH_MAX)
		batch_run(w);
}

/* Reads the whole directory of the top frame: fixes its entries, queues its subdirectories. */
static void read_dir(Walk *w)
{
	int fd = w->frames[w->n_frames - 1].fd;

	for (;;) {
		ssize_t n = getdents64(fd, w->buf, GETDENTS_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			record_error(w, w->n_frames, NULL, "read", -errno, NULL);
			return;
		}
		if (n == 0)
			return;
		for (ssize_t off = 0; off < n;) {
			struct dirent64 *de = (struct dirent64 *)((char *)w->buf + off);
			off += de->d_reclen;
			if (de->d_name[0] == '.' &&
			    (de->d_name[1] == 0 || (de->d_name[1] == '.' && de->d_name[2] == 0)))
				continue;
			if (de->d_type == DT_DIR)
				add_name(&w->frames[w->n_frames - 1], de->d_name);
			else if (w->batch.state != BATCH_OFF)
				batch_add(w, de->d_name);
			else
				visit(w, de->d_name, true);
		}
		batch_run(w); /* the names are in buf, which the next getdents64 overwrites */
	}
}

static int open_dir_at(Walk *w, int dir_fd, const char *name, int flags)
{
	flags |= O_RDONLY | O_DIRECTORY | O_CLOEXEC;
	for (;;) {
		int fd = openat(dir_fd, name, flags | w->noatime);
		if (fd >= 0)
			return fd;
		if (errno != EPERM || !w->noatime)
			return -errno;
		w->noatime = 0; /* not the owner and no CAP_FOWNER */
	}
}

static bool same_dir(int fd, const Frame *f)
{
	struct statx sx;

	return statx(fd, "", AT_EMPTY_PATH, STATX_INO, &sx) >= 0 &&
	       makedev(sx.stx_dev_major, sx.stx_dev_minor) == f->dev && sx.stx_ino == f->ino;
}

static void push(Walk *w, int fd, const struct statx *sx, const char *name)
{
	if (w->n_frames == w->n_alloc) {
		w->n_alloc = MAX(w->n_alloc * 2, 64u);
		w->frames = xrealloc(w->frames, w->n_alloc * sizeof(Frame));
	}
	w->frames[w->n_frames++] = (Frame){
		.fd = fd,
		.dev = makedev(sx->stx_dev_major, sx->stx_dev_minor),
		.ino = sx->stx_ino,
		.mode = sx->stx_mode,
		.gid = sx->stx_gid,
		.name = name,
	};
	if (w->n_frames - w->lo > OWNERSHIP_MAX_OPEN_DIRS) {
		closep(&w->frames[w->lo].fd);
		w->frames[w->lo++].fd = -EBADF;
	}
}

/* Opens the next queued subdirectory of the top frame and pushes it. Returns true if pushed. */
static bool descend(Walk *w)
{
	Frame *f = &w->frames[w->n_frames - 1];
	const char *name = f->names + f->pos;
	struct statx sx;

	f->pos += strlen(name) + 1;
	/* O_NOFOLLOW on one component from a directory we hold: a symlink swapped in is refused,
	 * and what we then work on is the fd itself, whatever its name points at later. */
	int fd = open_dir_at(w, f->fd, name, O_NOFOLLOW);
	if (fd == -ELOOP || fd == -ENOTDIR) {
		visit(w, name, false); /* no longer a directory: fix what is there now */
		return false;
	}
	if (fd == -ENOENT)
		return false;
	if (fd < 0) {
		record_error(w, w->n_frames, name, "open", fd, NULL);
		return false;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_WANT, &sx) < 0) {
		record_error(w, w->n_frames, name, "stat", -errno, NULL);
		close(fd);
		return false;
	}
	if (other_mount(w, &sx)) {
		w->report.mounts++;
		close(fd);
		return false;
	}
	count_entry(w);
	push(w, fd, &sx, name);
	return true;
}

/* Opens frames[i] again from the root, one checked component at a time. */
static int reopen_from_root(Walk *w, size_t i)
{
	_cleanup_close_ int owned = -EBADF;
	int cur = w->frames[0].fd;

	for (size_t k = 1; k <= i; k++) {
		int fd = open_dir_at(w, cur, w->frames[k].name, O_NOFOLLOW);
		if (fd < 0)
			return fd;
		closep(&owned);
		owned = cur = fd;
		if (!same_dir(fd, &w->frames[k]))
			return -ESTALE;
	}
	return TAKE_FD(owned);
}

/* Re-opens parked frames[i] through ".." of its child (child_fd, if open). */
static void unpark(Walk *w, size_t i, int child_fd)
{
	Frame *f = &w->frames[i];
	int fd = -EBADF;

	if (child_fd >= 0) {
		fd = open_dir_at(w, child_fd, "..", 0);
		if (fd >= 0 && !same_dir(fd, f)) {
			close(fd);
			fd = -EBADF;
		}
	}
	if (fd < 0)
		fd = reopen_from_root(w, i); /* the child was moved */
	if (fd < 0)
		f->lost = true;
	else
		f->fd = fd;
	w->lo = i;
}

static void pop(Walk *w)
{
	size_t i = w->n_frames - 1;
	Frame *f = &w->frames[i];

	if (i >= 2 && w->frames[i - 1].fd < 0)
		unpark(w, i - 1, f->fd);
	closep(&f->fd);
	free(f->names);
	w->n_frames--;
	if (w->lo > w->n_frames)
		w->lo = MAX(w->n_frames, 1u);
}

static void walk(Walk *w)
{
	read_dir(w);
	while (w->n_frames > 0) {
		Frame *f = &w->frames[w->n_frames - 1];

		if (f->lost)
			record_error(w, w->n_frames, NULL, "reopen", 0, "moved during the walk");
		else if (f->pos < f->names_len) {
			if (descend(w))
				read_dir(w);
			continue;
		} else
			fix_dir(w, w->n_frames - 1);
		pop(w);
	}
}

static bool root_done(const struct statx *sx, gid_t gid, mode_t bits)
{
	mode_t want = bits | DIR_BITS;

	return sx->stx_gid == gid && (sx->stx_mode & want) == want;
}

/* Takes root_fd. */
static int apply(int root_fd, gid_t gid, bool read_only, OwnershipPolicy policy,
		 const OwnershipProgress *progress, usec_t start, OwnershipReport *ret_report)
{
	_cleanup_close_ int fd = root_fd;
	struct statx sx;

	if (statx(fd, "", AT_EMPTY_PATH, STATX_WANT, &sx) < 0)
		return -errno;

	Walk w = {
		.gid = gid,
		.bits = read_only ? RO_BITS : RW_BITS,
		.dev = makedev(sx.stx_dev_major, sx.stx_dev_minor),
		.mnt_id = sx.stx_mnt_id,
		.have_mnt_id = sx.stx_mask & STATX_MNT_ID,
		.noatime = O_NOATIME,
		.lo = 1,
		.progress = progress,
		.start = start,
		.next_progress = start + (progress && progress->interval
						  ? progress->interval
						  : OWNERSHIP_PROGRESS_INTERVAL_DEFAULT),
	};

	if (policy == OWNERSHIP_ON_ROOT_MISMATCH && root_done(&sx, gid, w.bits)) {
		*ret_report = (OwnershipReport){
			.entries = 1,
			.skipped = true,
			.elapsed = now_usec(CLOCK_MONOTONIC) - start,
		};
		return 0;
	}

	w.buf = xmalloc(GETDENTS_BUF);
	batch_init(&w);
	count_entry(&w);
	push(&w, TAKE_FD(fd), &sx, NULL);
	walk(&w);
	batch_done(&w);
	w.report.batched = w.batch.used;
	free(w.buf);
	free(w.frames);

	w.report.elapsed = now_usec(CLOCK_MONOTONIC) - start;
	log_debug("ownership: gid %u%s: %" PRIu64 " entries, %" PRIu64 " changed, %" PRIu64
		  " errors, %" PRIu64 " mounts skipped, %" PRIu64 " ms",
		  (unsigned)gid, read_only ? " (read-only)" : "", w.report.entries,
		  w.report.changed, w.report.errors, w.report.mounts,
		  w.report.elapsed / USEC_PER_MSEC);
	*ret_report = w.report;
	return 0;
}

static int open_root(int dir_fd, const char *path)
{
	int fd = openat(dir_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOATIME);
	if (fd < 0 && errno == EPERM)
		fd = openat(dir_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

static bool args_ok(OwnershipPolicy policy, const OwnershipReport *ret_report)
{
	return policy >= 0 && policy < _OWNERSHIP_POLICY_MAX && ret_report;
}

int ownership_apply_fd(int dir_fd, gid_t gid, bool read_only, OwnershipPolicy policy,
		       const OwnershipProgress *progress, OwnershipReport *ret_report)
{
	usec_t start = now_usec(CLOCK_MONOTONIC);

	if (dir_fd < 0 || !args_ok(policy, ret_report))
		return -EINVAL;
	if (gid == OWNERSHIP_GID_NONE) {
		*ret_report = (OwnershipReport){.skipped = true};
		return 0;
	}
	/* Our own fd: reading must not move the caller's offset. */
	int fd = open_root(dir_fd, ".");
	if (fd < 0)
		return fd;
	return apply(fd, gid, read_only, policy, progress, start, ret_report);
}

int ownership_apply(const char *path, gid_t gid, bool read_only, OwnershipPolicy policy,
		    const OwnershipProgress *progress, OwnershipReport *ret_report)
{
	usec_t start = now_usec(CLOCK_MONOTONIC);

	if (!path || !args_ok(policy, ret_report))
		return -EINVAL;
	if (gid == OWNERSHIP_GID_NONE) {
		*ret_report = (OwnershipReport){.skipped = true};
		return 0;
	}
	int fd = open_root(AT_FDCWD, path);
	if (fd < 0)
		return fd;
	return apply(fd, gid, read_only, policy, progress, start, ret_report);
}
