/* SPDX-License-Identifier: Apache-2.0 */
/* The disk's floor under a CreateVolume + DeleteVolume pair: the files a pool volume is made of,
 * made and removed with bare syscalls in a loop, no gRPC, no checks, no locks, so that a
 * driver's pair rate can be set against what the filesystem alone allows. Three ways:
 *
 *   pool    the pool's durable sequence (docs/pool.md, "What each fsync is for"): mkdir of a
 *           staging directory in tmp/, a 1 MiB sparse data file, a 337-byte meta.json and its
 *           fsync, a rename into volumes/ and volumes/'s fsync; the delete's rename into tmp/
 *           and volumes/'s fsync, then the unlinks. Each thread syncs volumes/ itself (the
 *           pool shares that fsync between concurrent calls).
 *   nosync  the same files and renames, no fsync: what a driver that syncs nothing pays.
 *   log     nosync, plus what a log of the pool's own would cost instead of the fsyncs: one
 *           512-byte record written in place into a preallocated file of the thread's own and
 *           fdatasync'ed, once for the create and once for the delete.
 *
 * Usage: pair-floor DIR MODE CLIENTS SECONDS
 * Prints: MODE CLIENTS PAIRS PAIRS/S CPU_US_PER_PAIR (user + system of this process). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define VOLUME_SIZE (1024 * 1024)
#define META_BYTES 337
#define LOG_RECORD 512
#define LOG_SLOTS 256

typedef enum {
	MODE_POOL,
	MODE_NOSYNC,
	MODE_LOG
} Mode;

typedef struct Bench {
	Mode mode;
	int tmp_fd, volumes_fd;
	atomic_bool stop;
	atomic_ulong pairs;
	atomic_int failed; /* the first errno, negative */
} Bench;

typedef struct Worker {
	Bench *b;
	unsigned index;
	pthread_t thread;
	int log_fd;
	unsigned log_slot;
} Worker;

static int fail(Bench *b, const char *what)
{
	int r = errno > 0 ? -errno : -EIO; /* a short write sets no errno */
	int expected = 0;

	if (atomic_compare_exchange_strong(&b->failed, &expected, r))
		fprintf(stderr, "pair-floor: %s: %s\n", what, strerror(-r));
	atomic_store(&b->stop, true);
	return r;
}

static int write_file_at(Bench *b, int dir_fd, const char *name, size_t len, bool sync)
{
	static const char text[META_BYTES] = {'{'};
	int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);

	if (fd < 0)
		return fail(b, name);
	if ((len ? write(fd, text, len) != (ssize_t)len : ftruncate(fd, VOLUME_SIZE) < 0) ||
	    (sync && fsync(fd) < 0)) {
		close(fd);
		return fail(b, name);
	}
	return close(fd);
}

/* The log's stand-in for an fsync: one record written in place and made durable. */
static int log_append(Worker *w)
{
	static const char record[LOG_RECORD] = {'r'};
	off_t at = (off_t)(w->log_slot++ % LOG_SLOTS) * LOG_RECORD;

	if (pwrite(w->log_fd, record, LOG_RECORD, at) != LOG_RECORD || fdatasync(w->log_fd) < 0)
		return fail(w->b, "log");
	return 0;
}

static int sync_point(Worker *w, int fd)
{
	if (w->b->mode == MODE_LOG)
		return log_append(w);
	if (w->b->mode == MODE_POOL && fsync(fd) < 0)
		return fail(w->b, "fsync");
	return 0;
}

static int create_volume(Worker *w, const char *staging, const char *id)
{
	Bench *b = w->b;

	if (mkdirat(b->tmp_fd, staging, 0700) < 0)
		return fail(b, staging);
	int fd = openat(b->tmp_fd, staging, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return fail(b, staging);
	/* The pool syncs meta.json alone: its fsync makes the new directory entries durable
	 * on ext4, XFS and btrfs, and a blank data file is made again at start if lost. */
	int r = write_file_at(b, fd, "data", 0, false);
	if (r == 0)
		r = write_file_at(b, fd, "meta.json", META_BYTES, b->mode == MODE_POOL);
	close(fd);
	if (r < 0)
		return r;
	if (renameat(b->tmp_fd, staging, b->volumes_fd, id) < 0)
		return fail(b, "rename into volumes/");
	return sync_point(w, b->volumes_fd);
}

static int delete_volume(Worker *w, const char *id, const char *trash)
{
	Bench *b = w->b;

	if (renameat(b->volumes_fd, id, b->tmp_fd, trash) < 0)
		return fail(b, "rename into tmp/");
	int r = sync_point(w, b->volumes_fd);
	if (r < 0)
		return r;
	int fd = openat(b->tmp_fd, trash, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return fail(b, trash);
	if (unlinkat(fd, "data", 0) < 0 || unlinkat(fd, "meta.json", 0) < 0) {
		close(fd);
		return fail(b, "unlink");
	}
	close(fd);
	if (unlinkat(b->tmp_fd, trash, AT_REMOVEDIR) < 0)
		return fail(b, trash);
	return 0;
}

static void *worker_main(void *arg)
{
	Worker *w = arg;
	char staging[64], id[64], trash[64];

	for (unsigned long n = 0; !atomic_load(&w->b->stop); n++) {
		snprintf(staging, sizeof(staging), "new-%u-%lu", w->index, n);
		snprintf(id, sizeof(id), "vol-%u-%lu", w->index, n);
		snprintf(trash, sizeof(trash), "del-%u-%lu", w->index, n);
		if (create_volume(w, staging, id) < 0 || delete_volume(w, id, trash) < 0)
			break;
		atomic_fetch_add(&w->b->pairs, 1);
	}
	return NULL;
}

/* A preallocated, synced log file of the worker's own: a record's fdatasync then writes
 * one block and flushes, no metadata. */
static int log_open(Bench *b, Worker *w)
{
	char name[32];
	static const char zero[LOG_SLOTS * LOG_RECORD];

	snprintf(name, sizeof(name), "log-%u", w->index);
	w->log_fd = openat(b->tmp_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (w->log_fd < 0 || write(w->log_fd, zero, sizeof(zero)) != sizeof(zero) ||
	    fsync(w->log_fd) < 0 || fsync(b->tmp_fd) < 0)
		return fail(b, name);
	return 0;
}

static double cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
	       (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int open_dir(int at, const char *name)
{
	if (mkdirat(at, name, 0700) < 0 && errno != EEXIST)
		return -1;
	return openat(at, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
}

int main(int argc, char **argv)
{
	static const char *const modes[] = {
		[MODE_POOL] = "pool", [MODE_NOSYNC] = "nosync", [MODE_LOG] = "log"};
	Bench b = {.mode = MODE_POOL};
	struct timespec pause;
	unsigned clients;
	double seconds;

	if (argc != 5 || (clients = (unsigned)atoi(argv[3])) < 1 || clients > 256 ||
	    (seconds = atof(argv[4])) <= 0) {
		fprintf(stderr, "Usage: pair-floor DIR pool|nosync|log CLIENTS SECONDS\n");
		return 2;
	}
	while (b.mode <= MODE_LOG && strcmp(argv[2], modes[b.mode]) != 0)
		b.mode++;
	if (b.mode > MODE_LOG) {
		fprintf(stderr, "pair-floor: MODE: pool, nosync or log, not %s\n", argv[2]);
		return 2;
	}
	int dir = openat(AT_FDCWD, argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	b.tmp_fd = dir < 0 ? -1 : open_dir(dir, "tmp");
	b.volumes_fd = dir < 0 ? -1 : open_dir(dir, "volumes");
	if (b.tmp_fd < 0 || b.volumes_fd < 0) {
		fprintf(stderr, "pair-floor: %s: %s\n", argv[1], strerror(errno));
		return 1;
	}

	Worker *w = calloc(clients, sizeof(*w));
	for (unsigned i = 0; i < clients; i++) {
		w[i] = (Worker){.b = &b, .index = i, .log_fd = -1};
		if (b.mode == MODE_LOG && log_open(&b, &w[i]) < 0)
			return 1;
	}
	double cpu0 = cpu_seconds();
	for (unsigned i = 0; i < clients; i++)
		pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
	pause.tv_sec = (time_t)seconds;
	pause.tv_nsec = (long)((seconds - (double)pause.tv_sec) * 1e9);
	nanosleep(&pause, NULL);
	atomic_store(&b.stop, true);
	for (unsigned i = 0; i < clients; i++)
		pthread_join(w[i].thread, NULL);
	double cpu = cpu_seconds() - cpu0;
	unsigned long pairs = atomic_load(&b.pairs);

	for (unsigned i = 0; i < clients; i++) {
		char name[32];
		snprintf(name, sizeof(name), "log-%u", i);
		if (w[i].log_fd >= 0) {
			close(w[i].log_fd);
			unlinkat(b.tmp_fd, name, 0);
		}
	}
	free(w);
	if (atomic_load(&b.failed) < 0)
		return 1;
	printf("%s %u %lu %.0f %.0f\n", modes[b.mode], clients, pairs, (double)pairs / seconds,
	       pairs ? cpu * 1e6 / (double)pairs : 0.0);
	return 0;
}
