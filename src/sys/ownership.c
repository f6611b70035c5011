/* SPDX-License-Identifier: Apache-2.0 */
/* The fsGroup walk. A stack of frames, one per directory on the current path; each frame holds
 * the subdirectories of its directory that are still to visit. A directory is read whole
 * before the walk goes down: its other entries are queued for examination while reading, so
 * only subdirectory names are kept. A directory is fixed after its contents (post-order), the
 * root last. Only the root and the deepest OWNERSHIP_MAX_OPEN_DIRS frames hold an fd; the
 * others are "parked" and re-opened through ".." of their child when the walk comes back up,
 * after checking dev/ino (or, if that fails, from the root down by name, checking each step).
 *
 * Entries other than directories are examined in batches that span directories: up to
 * BATCH_MAX entries of up to BATCH_DIRS directories. With liburing a batch is one io_uring
 * submission, and the walk does not wait for it: it reads the next directories into the next
 * batch while the kernel examines this one, and handles this one (chown/chmod) when the next
 * is sent. So a directory is fixed, and its fd closed, only once the batches holding its
 * entries and its subdirectories' fixes are handled: such a fix waits in the newest batch
 * (Batch.fixes), and its frame's parent then waits for that batch too (Frame.wait). Until the
 * ring is up (it is set up when a batch first fills up), a batch is examined with one statx
 * syscall per entry when it is sent; without liburing, or when the kernel refuses a ring,
 * entries are examined as they are read. */
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
/* A batch: at most BATCH_MAX entries (one io_uring submission), of at most BATCH_DIRS
 * directories, holding at most BATCH_FIXES directory fds that wait for it. Two batches exist
 * (one in the kernel, one filling), so a walk holds at most 2 * BATCH_FIXES fds more than its
 * frames. The ring is set up when a batch first fills up (entries or directories): small
 * trees never make one. */
#define BATCH_MAX 256
#define BATCH_DIRS 32
#define BATCH_FIXES 16
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
	uint64_t wait;	  /* the newest batch holding its entries or its subdirectories' fixes */
	uint64_t dir_seq; /* the batch whose dirs[dir_slot] is this directory */
	unsigned dir_slot;
} Frame;

/* Where an entry is, for error lines: a directory path ("" for the root), or when dir is NULL
 * the directory of frames[depth - 1]. */
typedef struct Where {
	const char *dir;
	size_t depth;
} Where;

typedef enum BatchState {
	BATCH_OFF,     /* one statx syscall per entry */
	BATCH_UNTRIED, /* a ring is set up when a batch first fills up */
	BATCH_ON,      /* the ring is up */
} BatchState;

/* A directory whose entries a batch examines: its fd stays open until the batch is handled
 * (its frame, or a later batch's fixes, holds it), and its path for error lines. */
typedef struct BatchDir {
	int fd;
	size_t path; /* in Batch.text */
} BatchDir;

/* A directory fd that waits for a batch: after the batch's entries, the directory is fixed
 * (unless fix is false: a parked or lost frame) and the fd closed. */
typedef struct BatchFix {
	int fd;
	bool fix;
	mode_t mode;
	gid_t gid;
	size_t path; /* in Batch.text */
} BatchFix;

typedef struct BatchEntry {
	unsigned dir; /* in Batch.dirs */
	size_t name;  /* in Batch.text */
} BatchEntry;

typedef struct Batch {
	uint64_t seq;
	bool in_flight; /* sent to the ring, not handled yet */
	size_t n, n_dirs, n_fixes, unanswered;
	BatchEntry entries[BATCH_MAX];
	BatchDir dirs[BATCH_DIRS];
	BatchFix fixes[BATCH_FIXES];
	char *text; /* names and paths, NUL-terminated */
	size_t text_len, text_alloc;
	int res[BATCH_MAX]; /* statx result, -EINPROGRESS until answered */
	struct statx sx[BATCH_MAX];
} Batch;

typedef struct Batches {
	BatchState state;
	bool used; /* the ring examined some entries */
	Batch *b;  /* two, heap: the one filling is b[filling] */
	unsigned filling;
	uint64_t done; /* seq of the last batch handled */
#if HAVE_LIBURING
	struct io_uring ring;
	int cpu; /* where the ring's worker may run; -1 not set, -2 cannot be set */
#endif
} Batches;

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
	Batches batches;
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

/* The path of the directory of frames[depth - 1] relative to the root ("" for the root); of a
 * deep one only the last components, enough to fill an error line. */
static char *frames_path(const Walk *w, size_t depth)
{
	size_t first = depth, len = 0;

	while (first > 1 && len <= MAX_SHOWN_PATH)
		len += strlen(w->frames[--first].name) + 1;

	char *p = xmalloc(strlen(".../") + len + 1), *q = p;
	if (first > 1)
		q = stpcpy(q, ".../");
	for (size_t i = first; i < depth; i++)
		q = stpcpy(stpcpy(q, w->frames[i].name), "/");
	if (q > p)
		q--;
	*q = 0;
	return p;
}

/* dir/name for an error line ("." for the root itself); long ones keep their tail, which
 * names the entry. */
static char *shown_path(const char *dir, const char *name)
{
	char *p = *dir && name ? xasprintf("%s/%s", dir, name) : xstrdup(name ?: *dir ? dir : ".");
	size_t len = strlen(p);

	if (len > MAX_SHOWN_PATH) {
		memcpy(p, "...", 3);
		memmove(p + 3, p + len - (MAX_SHOWN_PATH - 3), MAX_SHOWN_PATH - 3 + 1);
	}
	return p;
}

/* Counts an entry that could not be examined or changed (name NULL: the directory itself);
 * keeps the first few lines. */
static void record_error(Walk *w, Where at, const char *name, const char *op, int err,
			 const char *why)
{
	w->report.errors++;
	if (w->n_reported >= OWNERSHIP_MAX_REPORTED_ERRORS)
		return;
	w->n_reported++;

	_cleanup_free_ char *dir = at.dir ? NULL : frames_path(w, at.depth);
	_cleanup_free_ char *path = shown_path(at.dir ?: dir, name);
	_cleanup_free_ char *old = w->report.first_errors;
	errno = -err;
	if (why)
		w->report.first_errors = xasprintf("%s%s: %s: %s\n", old ?: "", path, op, why);
	else
		w->report.first_errors = xasprintf("%s%s: %s: %m\n", old ?: "", path, op);
	log_debug("ownership: %s: %s: %s", path, op, why ?: strerrordesc_np(-err) ?: "error");
}

static Where at_top(const Walk *w)
{
	return (Where){.depth = w->n_frames};
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

/* Fixes a non-directory entry of directory dir_fd, as statx saw it. */
static void fix_entry(Walk *w, int dir_fd, Where at, const char *name, const struct statx *sx)
{
	mode_t mode = sx->stx_mode & 07777;
	bool chowned = false, changed = false;

	if (sx->stx_gid != w->gid) {
		if (fchownat(dir_fd, name, (uid_t)-1, w->gid, AT_SYMLINK_NOFOLLOW) < 0) {
			record_error(w, at, name, "chown", -errno, NULL);
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
				record_error(w, at, name, "chmod", r, NULL);
			else
				changed = true;
		}
	}
	if (changed)
		w->report.changed++;
}

/* Fixes a directory through its own fd; mode and gid as seen when it was opened. */
static void fix_dir(Walk *w, int fd, mode_t mode, gid_t gid, Where at)
{
	mode_t want = (mode & 07777) | w->bits | DIR_BITS;
	bool changed = false;

	if (gid != w->gid) {
		if (fchown(fd, (uid_t)-1, w->gid) < 0) {
			record_error(w, at, NULL, "chown", -errno, NULL);
			return;
		}
		changed = true;
	}
	if (want != (mode & 07777)) {
		if (fchmod(fd, want) < 0)
			record_error(w, at, NULL, "chmod", -errno, NULL);
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

/* An entry of directory dir_fd as statx (AT_SYMLINK_NOFOLLOW) saw it: fix it. A directory is
 * queued in the top frame when may_queue (dir_fd is the top frame's); else it was listed as
 * something else and replaced since. */
static void examined(Walk *w, int dir_fd, Where at, const char *name, bool may_queue,
		     const struct statx *sx)
{
	if (other_mount(w, sx)) {
		w->report.mounts++;
		return;
	}
	if (S_ISDIR(sx->stx_mode)) {
		if (may_queue)
			add_name(&w->frames[w->n_frames - 1], name);
		else
			record_error(w, at, name, "open", 0, "replaced during the walk");
		return;
	}
	count_entry(w);
	fix_entry(w, dir_fd, at, name, sx);
}

/* statx and examined(); ENOENT (removed since listed) leaves nothing to own. */
static void visit(Walk *w, int dir_fd, Where at, const char *name, bool may_queue)
{
	struct statx sx;

	if (statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_WANT, &sx) < 0) {
		if (errno != ENOENT)
			record_error(w, at, name, "stat", -errno, NULL);
		return;
	}
	examined(w, dir_fd, at, name, may_queue, &sx);
}

static void visit_top(Walk *w, const char *name, bool may_queue)
{
	visit(w, w->frames[w->n_frames - 1].fd, at_top(w), name, may_queue);
}

/* Reads the VOLPLUG_OWNERSHIP_NO_URING knob, once per walk, so a test can compare both ways. */
static void batches_init(Walk *w)
{
	Batches *bs = &w->batches;
	const char *no = getenv(NO_URING_ENV);

	bs->state =
		HAVE_LIBURING && !(no && *no && strcmp(no, "0") != 0) ? BATCH_UNTRIED : BATCH_OFF;
	bs->b = xcalloc(2, sizeof(Batch));
	bs->b[0].seq = 1;
	bs->b[1].seq = 2;
}

static Batch *filling(Walk *w)
{
	return &w->batches.b[w->batches.filling];
}

static size_t batch_text(Batch *b, const char *s)
{
	size_t at = b->text_len, n = strlen(s) + 1;

	if (at + n > b->text_alloc) {
		b->text_alloc = MAX(b->text_alloc * 2, at + n + 4096);
		b->text = xrealloc(b->text, b->text_alloc);
	}
	memcpy(b->text + at, s, n);
	b->text_len += n;
	return at;
}

/* Fixes what a handled batch's entries waited for, then closes the fds it held. */
static void batch_fixes(Walk *w, Batch *b)
{
	for (size_t i = 0; i < b->n_fixes; i++) {
		BatchFix *x = &b->fixes[i];
		if (x->fix)
			fix_dir(w, x->fd, x->mode, x->gid, (Where){.dir = b->text + x->path});
		close(x->fd);
	}
}

/* Handles a batch whose entries have their statx answers in res/sx (or -EINPROGRESS: none),
 * then readies it for refilling as the batch after the next. An entry without an answer, or
 * with an error, is examined again by visit(), so errors read the same either way. */
static void batch_handle(Walk *w, Batch *b)
{
	for (size_t i = 0; i < b->n; i++) {
		const BatchDir *d = &b->dirs[b->entries[i].dir];
		const char *name = b->text + b->entries[i].name;
		Where at = {.dir = b->text + d->path};

		if (b->res[i] == 0)
			examined(w, d->fd, at, name, false, &b->sx[i]);
		else if (b->res[i] != -ENOENT) /* ENOENT: removed since listed */
			visit(w, d->fd, at, name, false);
	}
	batch_fixes(w, b);
	w->batches.done = b->seq;
	b->seq += 2;
	b->in_flight = false;
	b->n = b->n_dirs = b->n_fixes = b->text_len = 0;
}

#if HAVE_LIBURING
/* Sets the ring up on first use, or turns batching off for the rest of the walk when the
 * kernel refuses (too old, io_uring disabled by sysctl or seccomp). */
static bool batch_ring(Walk *w)
{
	Batches *bs = &w->batches;

	if (bs->state != BATCH_UNTRIED)
		return bs->state == BATCH_ON;
	/* DEFER_TASKRUN: the walk collects completions only when it asks, not on every one. */
	int r = io_uring_queue_init(2 * BATCH_MAX, &bs->ring,
				    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN);
	if (r == -EINVAL) /* before Linux 6.1 */
		r = io_uring_queue_init(2 * BATCH_MAX, &bs->ring, 0);
	if (r < 0) {
		log_debug("ownership: no io_uring (%s), one statx per entry", strerror(-r));
		bs->state = BATCH_OFF;
		return false;
	}
	bs->cpu = -1;
	bs->state = BATCH_ON;
	return true;
}

static void batches_ring_done(Walk *w)
{
	if (w->batches.state == BATCH_ON)
		io_uring_queue_exit(&w->batches.ring);
}

/* The ring failed with requests possibly still in flight: their results may yet be written,
 * so the batches are left to them (a leak, on a path that should never run) and the rest of
 * the walk uses plain statx. */
static void batch_lost(Walk *w, int err)
{
	Batches *bs = &w->batches;
	Batch *old = bs->b;

	log_debug("ownership: io_uring failed (%s), one statx per entry from here", strerror(-err));
	io_uring_queue_exit(&bs->ring);
	bs->state = BATCH_OFF;
	bs->b = xmalloc(2 * sizeof(Batch));
	memcpy(bs->b, old, 2 * sizeof(Batch));
	for (int i = 0; i < 2; i++)
		old[i].text = NULL; /* now the copies' */
}

/* The kernel runs a ring's statx calls in a worker thread (io-wq). Kept on the CPU the walk
 * runs on, and following it: on an idle 2-vCPU VM, waking it on the other CPU made first runs
 * slower than the syscalls it saves. */
static void batch_follow_cpu(Batches *bs)
{
	int cpu = sched_getcpu();

	if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == bs->cpu || bs->cpu == -2)
		return;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	bs->cpu = io_uring_register_iowq_aff(&bs->ring, sizeof(set), &set) < 0 ? -2 : cpu;
}

/* Sends a batch's statx calls to the ring without waiting: the same call as visit()'s,
 * relative to the same directory fd. Its answers are only hints: every change goes through
 * fix_entry() and never follows a symlink. */
static void batch_submit(Walk *w, Batch *b)
{
	Batches *bs = &w->batches;

	batch_follow_cpu(bs);
	for (size_t i = 0; i < b->n; i++) {
		/* Never NULL: the ring has room for both batches. */
		struct io_uring_sqe *sqe = io_uring_get_sqe(&bs->ring);
		io_uring_prep_statx(sqe, b->dirs[b->entries[i].dir].fd,
				    b->text + b->entries[i].name,
				    AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_WANT, &b->sx[i]);
		io_uring_sqe_set_data64(sqe, (uint64_t)(b - bs->b) << 32 | i);
		b->res[i] = -EINPROGRESS;
	}
	b->unanswered = b->n;
	b->in_flight = true;
	bs->used |= b->n > 0;
	int r = io_uring_submit(&bs->ring);
	if (r < 0 && r != -EINTR && r != -EAGAIN && r != -EBUSY)
		batch_lost(w, r);
}

/* Waits until every entry of in-flight batch b is answered (answers to the other batch are
 * filed as they come). */
static void batch_wait(Walk *w, Batch *b)
{
	Batches *bs = &w->batches;
	unsigned stuck = 0;

	while (b->unanswered > 0) {
		/* Answers to the batch sent after b count towards the number too: then the
		 * loop waits again for what b still lacks. */
		int r = io_uring_submit_and_wait(&bs->ring, b->unanswered);
		struct io_uring_cqe *cqe;
		unsigned head, k = 0;

		io_uring_for_each_cqe(&bs->ring, head, cqe)
		{
			uint64_t data = io_uring_cqe_get_data64(cqe);
			Batch *to = &bs->b[data >> 32 & 1];
			size_t i = data & UINT32_MAX;
			if (to->in_flight && i < to->n && to->res[i] == -EINPROGRESS) {
				to->res[i] = cqe->res;
				to->unanswered--;
			}
			k++;
		}
		io_uring_cq_advance(&bs->ring, k);
		stuck = k > 0 ? 0 : stuck + 1;
		if (r < 0 && ((r != -EINTR && r != -EAGAIN && r != -EBUSY) || stuck > 100)) {
			batch_lost(w, r);
			return;
		}
	}
}
#else
static bool batch_ring(Walk *w)
{
	(void)w;
	return false;
}

static void batches_ring_done(Walk *w)
{
	(void)w;
}
#endif

/* Handles the batch in the kernel, if any. */
static void batch_finish_in_flight(Walk *w)
{
	Batch *b = &w->batches.b[!w->batches.filling];

	if (!b->in_flight)
		return;
#if HAVE_LIBURING
	if (w->batches.state == BATCH_ON)
		batch_wait(w, b);
	b = &w->batches.b[!w->batches.filling]; /* moved if the ring was lost */
#endif
	batch_handle(w, b);
}

/* Sends the filling batch: to the ring if there is one (set up when the first batch fills
 * up), handling the one sent before; else examines it here, one statx each. The other batch
 * then fills. */
static void batch_send(Walk *w)
{
	Batches *bs = &w->batches;
	Batch *b = filling(w);

	bool full = b->n == BATCH_MAX || b->n_dirs == BATCH_DIRS;

	if (bs->state == BATCH_ON || (full && batch_ring(w))) {
#if HAVE_LIBURING
		batch_submit(w, b);
#endif
		batch_finish_in_flight(w);
		if (bs->state != BATCH_ON) /* the ring was lost: b is handled here too */
			batch_handle(w, filling(w));
	} else {
		batch_finish_in_flight(w);
		for (size_t i = 0; i < b->n; i++)
			b->res[i] = -EAGAIN; /* visit() them */
		batch_handle(w, b);
	}
	bs->filling = !bs->filling;
}

/* Handles everything queued: every fix that waits is done when it returns. */
static void batch_flush(Walk *w)
{
	batch_send(w);
	batch_finish_in_flight(w);
}

static void batches_done(Walk *w)
{
	batches_ring_done(w);
	for (int i = 0; i < 2; i++)
		free(w->batches.b[i].text);
	free(w->batches.b);
}

/* Queues an entry of the top frame (not a directory) for examination. */
static void batch_add(Walk *w, const char *name)
{
	Frame *f = &w->frames[w->n_frames - 1];
	Batch *b = filling(w);

	if (f->dir_seq != b->seq) {
		if (b->n_dirs == BATCH_DIRS) {
			batch_send(w);
			b = filling(w);
		}
		_cleanup_free_ char *path = frames_path(w, w->n_frames);
		b->dirs[b->n_dirs] = (BatchDir){.fd = f->fd, .path = batch_text(b, path)};
		f->dir_slot = b->n_dirs++;
		f->dir_seq = b->seq;
	}
	b->entries[b->n++] = (BatchEntry){.dir = f->dir_slot, .name = batch_text(b, name)};
	f->wait = b->seq;
	if (b->n == BATCH_MAX)
		batch_send(w);
}

/* Frame i gives up its fd (popped, fixed or not, or parked): at once when nothing it waits
 * for is pending, else after the filling batch, which the parent then waits for too. */
static void release_frame(Walk *w, size_t i, bool fix)
{
	Frame *f = &w->frames[i];

	if (f->wait > w->batches.done && filling(w)->n_fixes == BATCH_FIXES)
		batch_send(w);
	if (f->wait <= w->batches.done) {
		if (fix)
			fix_dir(w, f->fd, f->mode, f->gid, (Where){.depth = i + 1});
		close(TAKE_FD(f->fd));
		return;
	}

	Batch *b = filling(w);
	_cleanup_free_ char *path = fix ? frames_path(w, i + 1) : NULL;
	b->fixes[b->n_fixes++] = (BatchFix){
		.fd = TAKE_FD(f->fd),
		.fix = fix,
		.mode = f->mode,
		.gid = f->gid,
		.path = batch_text(b, path ?: ""),
	};
	if (fix && i > 0) /* popped: the parent is fixed after it */
		w->frames[i - 1].wait = MAX(w->frames[i - 1].wait, b->seq);
}

/* Reads the whole directory of the top frame: queues its entries, and its subdirectories. */
static void read_dir(Walk *w)
{
	int fd = w->frames[w->n_frames - 1].fd;

	for (;;) {
		ssize_t n = getdents64(fd, w->buf, GETDENTS_BUF);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			record_error(w, at_top(w), NULL, "read", -errno, NULL);
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
			else if (de->d_type == DT_UNKNOWN || w->batches.state == BATCH_OFF)
				visit_top(w, de->d_name, true); /* may be a directory */
			else
				batch_add(w, de->d_name);
		}
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
		release_frame(w, w->lo++, false);
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
		visit_top(w, name, false); /* no longer a directory: fix what is there now */
		return false;
	}
	if (fd == -ENOENT)
		return false;
	if (fd < 0) {
		record_error(w, at_top(w), name, "open", fd, NULL);
		return false;
	}
	if (statx(fd, "", AT_EMPTY_PATH, STATX_WANT, &sx) < 0) {
		record_error(w, at_top(w), name, "stat", -errno, NULL);
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

/* Leaves the top frame: fixes its directory (now, or once what it waits for is handled),
 * unless it was lost. */
static void pop(Walk *w)
{
	size_t i = w->n_frames - 1;
	Frame *f = &w->frames[i];

	if (f->lost)
		record_error(w, at_top(w), NULL, "reopen", 0, "moved during the walk");
	if (i >= 2 && w->frames[i - 1].fd < 0)
		unpark(w, i - 1, f->fd);
	if (f->fd >= 0)
		release_frame(w, i, !f->lost);
	else if (i > 0)
		w->frames[i - 1].wait = MAX(w->frames[i - 1].wait, f->wait);
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

		if (!f->lost && f->pos < f->names_len) {
			if (descend(w))
				read_dir(w);
			continue;
		}
		pop(w);
	}
	batch_flush(w);
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
	batches_init(&w);
	count_entry(&w);
	push(&w, TAKE_FD(fd), &sx, NULL);
	walk(&w);
	w.report.batched = w.batches.used;
	batches_done(&w);
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
