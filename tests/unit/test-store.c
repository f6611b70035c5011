/* SPDX-License-Identifier: Apache-2.0 */
/* The snapshot store against the small S3 of the tests (tests/s3sim): upload of a sparse
 * file's allocated ranges, a second snapshot that sends only what changed, restore with holes
 * and every chunk checked, damaged and missing chunks named, faults during upload, resume,
 * delete and collection with its rule for uploads in progress. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <linux/fs.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "aws-credentials.h"
#include "metrics.h"
#include "random-util.h"
#include "s3.h"
#include "s3sim.h"
#include "store.h"
#include "tap.h"

#define CHUNK ((size_t)64 << 10)
#define VOLUME ((uint64_t)64 * CHUNK) /* 4 MiB, 64 chunks */

static AwsCredentialsProvider *creds;
static S3Client *s3;
static char dir[] = "/tmp/test-store-XXXXXX";
static int dir_fd = -EBADF;

static usec_t in(usec_t d)
{
	return now_usec(CLOCK_MONOTONIC) + d;
}

static Store *store_with(usec_t lease, usec_t grace)
{
	Store *s = NULL;
	if (store_new(&(StoreConfig){.s3 = s3,
				     .prefix = "cluster-1/snaps",
				     .node = "node-a",
				     .chunk_size = CHUNK,
				     .parallel = 3,
				     .lease = lease,
				     .grace = grace},
		      &s, NULL) < 0) {
		printf("Bail out! store_new\n");
		exit(1);
	}
	return s;
}

/* Writes chunk i of the volume file full of byte v (a zero v writes zeros: allocated). */
static void fill(int fd, unsigned i, int v)
{
	_cleanup_free_ char *buf = xmalloc(CHUNK);
	memset(buf, v, CHUNK);
	snprintf(buf, 32, "chunk %u value %d", i, v); /* no two chunks alike */
	if (v == 0)
		memset(buf, 0, CHUNK);
	if (pwrite(fd, buf, CHUNK, (off_t)(i * CHUNK)) != (ssize_t)CHUNK) {
		printf("Bail out! pwrite\n");
		exit(1);
	}
}

static int volume_file(const char *name)
{
	int fd = openat(dir_fd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)VOLUME) < 0) {
		printf("Bail out! %s: %m\n", name);
		exit(1);
	}
	return fd;
}

static bool same_file(int a, int b)
{
	_cleanup_free_ char *x = xmalloc(VOLUME), *y = xmalloc(VOLUME);
	return pread(a, x, VOLUME, 0) == (ssize_t)VOLUME &&
	       pread(b, y, VOLUME, 0) == (ssize_t)VOLUME && memcmp(x, y, VOLUME) == 0;
}

static bool is_hole(int fd, uint64_t off)
{
	off_t d = lseek(fd, (off_t)off, SEEK_DATA);
	return d < 0 || (uint64_t)d >= off + CHUNK;
}

/* A chunk that covers some data and a hole restores as both: the hole is not written. */
static void test_restore_hole_in_chunk(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 0);
	_cleanup_close_ int fd = volume_file("vol-partial");
	_cleanup_free_ char *err = NULL;
	char block[4096];

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	memset(block, 'p', sizeof(block));
	/* 4 KiB of data at the start of chunk 20 and 4 KiB in the middle of it. */
	if (pwrite(fd, block, sizeof(block), (off_t)(20 * CHUNK)) != (ssize_t)sizeof(block) ||
	    pwrite(fd, block, sizeof(block), (off_t)(20 * CHUNK + CHUNK / 2)) !=
		    (ssize_t)sizeof(block)) {
		printf("Bail out! pwrite\n");
		exit(1);
	}
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "half-hole"}, in(20 * USEC_PER_SEC),
			    NULL, &err),
	       0, "upload of a chunk half hole: %s", err ? err : "ok");
	is_int(store_restore(s, "half-hole", dir_fd, "half-hole", in(20 * USEC_PER_SEC), NULL,
			     &err),
	       0, "...restore: %s", err ? err : "ok");
	_cleanup_close_ int rfd = openat(dir_fd, "half-hole", O_RDONLY | O_CLOEXEC);
	ok(rfd >= 0 && same_file(fd, rfd), "...the same bytes");
	off_t d1 = lseek(rfd, (off_t)(20 * CHUNK + 4096), SEEK_DATA);
	off_t h1 = lseek(rfd, (off_t)(20 * CHUNK + CHUNK / 2), SEEK_HOLE);
	struct stat a = {}, b = {};
	bool stat_ok = fstat(fd, &a) == 0 && fstat(rfd, &b) == 0;
	ok(d1 == (off_t)(20 * CHUNK + CHUNK / 2) && h1 == (off_t)(20 * CHUNK + CHUNK / 2 + 4096),
	   "...the chunk's holes left holes: data again at %jd (want %zu), a hole at %jd",
	   (intmax_t)d1, 20 * CHUNK + CHUNK / 2, (intmax_t)h1);
	ok(stat_ok && b.st_blocks <= a.st_blocks,
	   "...no more blocks allocated than the volume (%jd, the volume %jd)",
	   (intmax_t)b.st_blocks, (intmax_t)a.st_blocks);
}

/* A reflink of fd named name beneath dir_fd (FICLONE). */
static int clone_of(int at, int fd, const char *name)
{
	int c = openat(at, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (c < 0 || ioctl(c, FICLONE, fd) < 0) {
		printf("Bail out! FICLONE %s: %m\n", name);
		exit(1);
	}
	return c;
}

/* A second snapshot taken as a reflink, with the first's reflink as its base: only the chunks
 * whose blocks the two no longer share are read (FIEMAP), the others are the base's. */
static void test_changed_ranges(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 0);
	_cleanup_free_ char *err = NULL;
	StoreUploadStats st = {};
	char xfs[64], cmd[512];

	if (geteuid() != 0 || system("command -v mkfs.xfs >/dev/null") != 0) {
		ok(1, "changed ranges # SKIP needs root and mkfs.xfs (a filesystem with reflinks)");
		return;
	}
	snprintf(xfs, sizeof(xfs), "%s/xfs", dir);
	snprintf(cmd, sizeof(cmd),
		 "truncate -s 320M %s.img && mkfs.xfs -q -m reflink=1 %s.img && mkdir %s && "
		 "mount -o loop %s.img %s",
		 xfs, xfs, xfs, xfs, xfs);
	if (system(cmd) != 0) {
		ok(1, "changed ranges # SKIP could not mount an xfs over a loop device");
		return;
	}
	_cleanup_close_ int xfd = open(xfs, O_DIRECTORY | O_CLOEXEC);
	_cleanup_close_ int vol = openat(xfd, "vol", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (xfd < 0 || vol < 0 || ftruncate(vol, (off_t)VOLUME) < 0) {
		printf("Bail out! %s: %m\n", xfs);
		exit(1);
	}
	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	for (unsigned i = 0; i < 10; i++)
		fill(vol, i, 'a' + (int)i);
	_cleanup_close_ int s1 = clone_of(xfd, vol, "s1");
	is_int(store_upload(s, s1, &(StoreUploadInfo){.id = "fm-1"}, in(20 * USEC_PER_SEC), &st,
			    &err),
	       0, "first snapshot from a reflink: %s", err ? err : "ok");
	is_int((long long)st.chunks_sent, 10, "...10 chunks sent");

	fill(vol, 3, 'X');  /* rewritten: new blocks in vol, s1 keeps the old */
	fill(vol, 12, 'Y'); /* written in a hole */
	_cleanup_close_ int s2 = clone_of(xfd, vol, "s2");
	is_int(store_upload(s, s2,
			    &(StoreUploadInfo){.id = "fm-2", .base_id = "fm-1", .base_fd = s1},
			    in(20 * USEC_PER_SEC), &st, &err),
	       0, "second snapshot, the first its base: %s", err ? err : "ok");
	is_int((long long)st.chunks_unchanged, 9, "...9 chunks found unchanged by their extents");
	is_int((long long)st.bytes_read, 2 * (long long)CHUNK, "...only the 2 changed chunks read");
	is_int((long long)st.chunks_sent, 2, "...and sent");
	is_int((long long)st.chunks, 11, "...11 chunks in its manifest");
	is_int(store_restore(s, "fm-2", dir_fd, "fm-2", in(20 * USEC_PER_SEC), NULL, &err), 0,
	       "...restore: %s", err ? err : "ok");
	_cleanup_close_ int r2 = openat(dir_fd, "fm-2", O_RDONLY | O_CLOEXEC);
	ok(r2 >= 0 && same_file(s2, r2), "...the same bytes as the second reflink");

	is_int(store_upload(s, s2,
			    &(StoreUploadInfo){.id = "fm-3", .base_id = "nope", .base_fd = s1},
			    in(20 * USEC_PER_SEC), &st, &err),
	       0, "a base the store does not hold: %s", err ? err : "ok");
	ok(st.chunks_unchanged == 0 && st.bytes_read == 11 * CHUNK && st.chunks_skipped == 11,
	   "...is not used: every chunk read and found by its hash");

	close(TAKE_FD(s1));
	close(TAKE_FD(s2));
	close(TAKE_FD(vol));
	close(TAKE_FD(xfd));
	snprintf(cmd, sizeof(cmd), "umount %s", xfs);
	if (system(cmd) != 0)
		printf("# could not unmount %s\n", xfs);
}

static int count(const char *id, void *userdata)
{
	(void)id;
	(*(int *)userdata)++;
	return 0;
}

static void test_upload_restore(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 0);
	_cleanup_close_ int fd = volume_file("vol");
	_cleanup_free_ char *err = NULL;
	StoreUploadStats st = {};
	StoreRestoreStats rs = {};
	Strmap params = {};

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	fill(fd, 0, 'a');
	fill(fd, 1, 'b');
	fill(fd, 10, 'c');
	fill(fd, 11, 0); /* allocated, but zeros */
	fill(fd, 63, 'd');
	strmap_set(&params, "type", "ext4");
	is_int(store_upload(s, fd,
			    &(StoreUploadInfo){
				    .id = "snap-1", .filesystem = "ext4", .parameters = &params},
			    in(20 * USEC_PER_SEC), &st, &err),
	       0, "upload of a sparse volume: %s", err ? err : "ok");
	is_int((long long)st.chunks, 4, "...4 chunks in its manifest");
	is_int((long long)st.zero_chunks, 1, "...an allocated chunk of zeros left out");
	is_int((long long)st.chunks_sent, 4, "...4 chunks sent");
	is_int((long long)st.bytes_read, 5 * (long long)CHUNK, "...only allocated ranges read");
	ok(st.bytes_sent < 4 * CHUNK / 10, "...compressed (%llu bytes for 4 chunks)",
	   (unsigned long long)st.bytes_sent);
	is_int((long long)s3sim_objects(), 5, "...4 chunks and a manifest; the intent is gone");

	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "snap-1"}, in(20 * USEC_PER_SEC), &st,
			    NULL),
	       0, "the same upload again");
	ok(st.existed && st.chunks == 4, "...answers the snapshot there already");

	fill(fd, 10, 'C');
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "snap-2"}, in(20 * USEC_PER_SEC), &st,
			    NULL),
	       0, "a second snapshot after one chunk changed");
	is_int((long long)st.chunks_sent, 1, "...sends one chunk");
	is_int((long long)st.chunks_skipped, 3, "...and skips the 3 the store holds");

	int n = 0;
	is_int(store_list(s, count, &n, in(5 * USEC_PER_SEC), NULL), 0, "list");
	is_int(n, 2, "...two snapshots");

	StoreManifest m = {};
	is_int(store_manifest_get(s, "snap-1", in(5 * USEC_PER_SEC), &m, NULL), 0,
	       "the manifest reads back");
	ok(m.volume_size == VOLUME && m.chunk_size == CHUNK && strcmp(m.filesystem, "ext4") == 0 &&
		   strcmp(m.node, "node-a") == 0 &&
		   strcmp(strmap_get(&m.parameters, "type") ?: "", "ext4") == 0 &&
		   m.n_chunks == 4 && m.chunks[2].offset == 10 * CHUNK,
	   "...size, chunk size, filesystem, node, parameters, chunks by offset");
	store_manifest_done(&m);

	fill(fd, 10, 'c'); /* back to snap-1's content */
	is_int(store_restore(s, "snap-1", dir_fd, "restored", in(20 * USEC_PER_SEC), &rs, &err), 0,
	       "restore: %s", err ? err : "ok");
	_cleanup_close_ int rfd = openat(dir_fd, "restored", O_RDONLY | O_CLOEXEC);
	ok(rfd >= 0 && same_file(fd, rfd), "...the same bytes as the volume");
	ok(is_hole(rfd, 5 * CHUNK) && is_hole(rfd, 11 * CHUNK) && !is_hole(rfd, 10 * CHUNK),
	   "...holes and the zero chunk left as holes, data where data was");
	is_int((long long)rs.bytes_written, 4 * (long long)CHUNK, "...4 chunks written");
	free(err);
	err = NULL;

	/* A chunk partly allocated: 4 KiB of data, the rest a hole. */
	_cleanup_close_ int pfd = volume_file("partial");
	char block[4096];
	memset(block, 'p', sizeof(block));
	if (pwrite(pfd, block, sizeof(block), 3 * CHUNK + 8192) != (ssize_t)sizeof(block))
		printf("Bail out! pwrite\n");
	is_int(store_upload(s, pfd, &(StoreUploadInfo){.id = "partial"}, in(20 * USEC_PER_SEC),
			    NULL, NULL),
	       0, "upload of a chunk holding 4 KiB of data");
	is_int(store_restore(s, "partial", dir_fd, "partial-r", in(20 * USEC_PER_SEC), &rs, NULL),
	       0, "...restored");
	_cleanup_close_ int prfd = openat(dir_fd, "partial-r", O_RDONLY | O_CLOEXEC);
	struct stat pst = {};
	if (prfd < 0 || fstat(prfd, &pst) < 0)
		printf("Bail out! partial-r: %m\n");
	ok(same_file(pfd, prfd) && lseek(prfd, 3 * CHUNK, SEEK_DATA) == 3 * CHUNK + 8192 &&
		   lseek(prfd, 3 * CHUNK + 8192, SEEK_HOLE) == 3 * CHUNK + 12288,
	   "...the same bytes, the zeros of the chunk left as holes (%lld blocks)",
	   (long long)pst.st_blocks);
	is_int((long long)rs.bytes_written, 4096, "...4 KiB written");

	/* Progress, read while it runs; a cancel before the first chunk leaves nothing. */
	StoreRestoreProgress pr = {};
	is_int(store_restore_progress(s, "snap-1", dir_fd, "progress", in(20 * USEC_PER_SEC), &pr,
				      NULL, NULL),
	       0, "restore with progress");
	ok(atomic_load(&pr.chunks_total) == 4 && atomic_load(&pr.chunks_done) == 4 &&
		   atomic_load(&pr.bytes_total) == 4 * (uint64_t)CHUNK &&
		   atomic_load(&pr.bytes_done) == 4 * (uint64_t)CHUNK,
	   "...4 of 4 chunks, %llu of %llu bytes", (unsigned long long)atomic_load(&pr.bytes_done),
	   (unsigned long long)atomic_load(&pr.bytes_total));
	StoreRestoreProgress cancelled = {};
	atomic_store(&cancelled.cancel, true);
	is_int(store_restore_progress(s, "snap-1", dir_fd, "cancelled", in(20 * USEC_PER_SEC),
				      &cancelled, NULL, &err),
	       -ECANCELED, "a cancelled restore: -ECANCELED");
	ok(err && strstr(err, "snap-1") && strstr(err, "cancelled") &&
		   faccessat(dir_fd, "cancelled", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
		   atomic_load(&cancelled.chunks_done) == 0,
	   "...naming it, no chunk fetched, nothing left: %s", err);
	free(err);
	err = NULL;

	is_int(store_restore(s, "snap-1", dir_fd, "restored", in(5 * USEC_PER_SEC), NULL, &err),
	       -EEXIST, "restore onto an existing name: -EEXIST");
	free(err);
	err = NULL;
	is_int(store_restore(s, "nope", dir_fd, "r2", in(5 * USEC_PER_SEC), NULL, &err), -ENOENT,
	       "restore of an unknown snapshot: -ENOENT");
	ok(err && strstr(err, "snapshot nope") && strstr(err, "s3://snaps at"),
	   "...naming it and the store: %s", err);
	free(err);
	err = NULL;
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "../x"}, in(5 * USEC_PER_SEC), NULL,
			    &err),
	       -EINVAL, "an ID out of the alphabet: -EINVAL");
	strmap_done(&params);
}

static void test_damage(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 0);
	_cleanup_close_ int fd = volume_file("vol-d");
	_cleanup_free_ char *err = NULL, *key = NULL;
	StoreManifest m = {};

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	fill(fd, 3, 'x');
	fill(fd, 4, 'y');
	store_upload(s, fd, &(StoreUploadInfo){.id = "d"}, in(20 * USEC_PER_SEC), NULL, NULL);
	store_manifest_get(s, "d", in(5 * USEC_PER_SEC), &m, NULL);

	s3sim_faults("[{\"method\": \"GET\", \"key\": \"chunks/\", \"corrupt\": true}]");
	is_int(store_restore(s, "d", dir_fd, "r-damaged", in(20 * USEC_PER_SEC), NULL, &err),
	       -EUCLEAN, "restore from damaged chunks: -EUCLEAN");
	ok(err && strstr(err, "snapshot d: chunk ") && strstr(err, "damaged"),
	   "...naming the chunk: %s", err);
	ok(faccessat(dir_fd, "r-damaged", F_OK, 0) < 0, "...and nothing left behind");

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	store_upload(s, fd, &(StoreUploadInfo){.id = "d"}, in(20 * USEC_PER_SEC), NULL, NULL);
	key = xasprintf("cluster-1/snaps/chunks/%.2s/%s", m.chunks[1].hash, m.chunks[1].hash);
	s3_delete(s3, key, in(5 * USEC_PER_SEC), NULL);
	free(err);
	err = NULL;
	is_int(store_restore(s, "d", dir_fd, "r-missing", in(20 * USEC_PER_SEC), NULL, &err),
	       -EUCLEAN, "restore from a missing chunk: -EUCLEAN");
	ok(err && strstr(err, m.chunks[1].hash) && strstr(err, "missing") &&
		   strstr(err, "offset 262144"),
	   "...naming the chunk and its offset: %s", err);
	ok(faccessat(dir_fd, "r-missing", F_OK, 0) < 0, "...and nothing left behind");
	store_manifest_done(&m);
}

static void test_faults_and_resume(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 0);
	_cleanup_close_ int fd = volume_file("vol-f");
	_cleanup_free_ char *err = NULL;
	StoreUploadStats st = {};

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	for (unsigned i = 0; i < 8; i++)
		fill(fd, i * 4, 'a' + (int)i);
	s3sim_faults("[{\"method\": \"PUT\", \"key\": \"chunks/\", \"status\": 503, "
		     "\"code\": \"SlowDown\", \"times\": 3}, "
		     "{\"method\": \"PUT\", \"key\": \"chunks/\", \"drop\": true, \"times\": 1}, "
		     "{\"method\": \"HEAD\", \"status\": 500, \"times\": 2}]");
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "f"}, in(30 * USEC_PER_SEC), &st, &err),
	       0, "upload through SlowDown, a dropped connection and 500s: %s", err ? err : "ok");
	is_int((long long)st.chunks_sent, 8, "...every chunk went up");

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	/* The store fails for good after 3 chunks. */
	s3sim_faults("[{\"method\": \"PUT\", \"key\": \"chunks/\", \"times\": 3, \"delay\": 0}, "
		     "{\"method\": \"PUT\", \"key\": \"chunks/\", \"status\": 503, "
		     "\"code\": \"SlowDown\"}]");
	free(err);
	err = NULL;
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "f"}, in(1 * USEC_PER_SEC), &st, &err),
	       -ETIMEDOUT, "a store that keeps answering SlowDown: -ETIMEDOUT at the deadline");
	ok(err && strstr(err, "snapshot f: chunk at offset") && strstr(err, "SlowDown") &&
		   strstr(err, "cluster-1/snaps/chunks/"),
	   "...naming the snapshot, the object and the code: %s", err);
	StoreManifest m = {};
	is_int(store_manifest_get(s, "f", in(5 * USEC_PER_SEC), &m, NULL), -ENOENT,
	       "...no manifest: nothing half-visible");
	s3sim_reset("{\"buckets\": [], \"keys\": {\"AKID\": \"secret\"}}");
}

static int unfinished(const char *id, const char *node, bool stale, void *userdata)
{
	char **found = userdata;
	free(*found);
	*found = xasprintf("%s %s %s", id, node, stale ? "stale" : "live");
	return 0;
}

static void test_resume(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 0);
	_cleanup_close_ int fd = volume_file("vol-r");
	_cleanup_free_ char *err = NULL;
	StoreUploadStats st = {};

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	for (unsigned i = 0; i < 8; i++)
		fill(fd, i * 4, 'a' + (int)i);
	s3sim_faults("[{\"method\": \"PUT\", \"key\": \"snapshots/\", \"status\": 500}]");
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "r"}, in(1 * USEC_PER_SEC), &st, &err),
	       -ETIMEDOUT, "an upload whose manifest cannot be written fails");
	ok(err && strstr(err, "snapshot r: manifest: ") && strstr(err, "InternalError"),
	   "...naming the manifest: %s", err);
	is_int((long long)s3sim_objects(), 9, "...its 8 chunks and its intent stay");
	s3sim_clear();
	_cleanup_free_ char *found = NULL;
	is_int(store_unfinished(s, unfinished, &found, in(5 * USEC_PER_SEC), NULL), 0,
	       "the unfinished uploads");
	is_str(found, "r node-a live", "...name it, its node, its lease not run out");
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "r"}, in(10 * USEC_PER_SEC), &st, NULL),
	       0, "run again, it resumes");
	is_int((long long)st.chunks_sent, 0, "...sending no chunk again");
	is_int((long long)st.chunks_skipped, 8, "...the 8 up already are skipped");
	is_int((long long)s3sim_objects(), 9, "...8 chunks and the manifest; the intent is gone");
}

static void test_cancel(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 0);
	_cleanup_close_ int fd = volume_file("vol-c");
	_cleanup_free_ char *err = NULL;
	atomic_bool cancel = true;

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	for (unsigned i = 0; i < 4; i++)
		fill(fd, i * 4, 'a' + (int)i);
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "c", .cancel = &cancel},
			    in(10 * USEC_PER_SEC), NULL, &err),
	       -ECANCELED, "a cancelled upload stops");
	ok(err && strstr(err, "snapshot c: upload cancelled"), "...saying so: %s", err);
	is_int((long long)s3sim_objects(), 0, "...no chunk sent, no manifest, no intent left");
}

static void test_gc(void)
{
	_cleanup_(store_freep) Store *s = store_with(1500 * USEC_PER_MSEC, 1);
	_cleanup_(store_freep) Store *patient = store_with(0, 0);
	_cleanup_close_ int fd = volume_file("vol-g");
	_cleanup_free_ char *err = NULL;
	StoreGcStats gs = {};
	StoreUploadStats st = {};

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	fill(fd, 0, 'a');
	fill(fd, 1, 'b');
	store_upload(s, fd, &(StoreUploadInfo){.id = "g1"}, in(10 * USEC_PER_SEC), NULL, NULL);
	fill(fd, 1, 'B');
	store_upload(s, fd, &(StoreUploadInfo){.id = "g2"}, in(10 * USEC_PER_SEC), NULL, NULL);
	is_int(store_delete(s, "g1", in(5 * USEC_PER_SEC), NULL), 0, "delete of g1");
	is_int(store_delete(s, "g1", in(5 * USEC_PER_SEC), NULL), 0, "...again: no error");

	is_int(store_gc(patient, in(10 * USEC_PER_SEC), &gs, NULL), 0,
	       "collection with an hour's grace");
	is_int((long long)gs.chunks_deleted, 0, "...deletes no young chunk");
	is_int((long long)gs.chunks_young, 1, "...the one g1 alone named is kept, young");

	/* An upload in progress on another node: its intent. */
	const char *intent = "{\"snapshot\":\"g3\",\"node\":\"node-b\"}";
	s3_put(s3, "cluster-1/snaps/intents/g3", intent, strlen(intent), false,
	       in(5 * USEC_PER_SEC), NULL);
	is_int(store_gc(s, in(10 * USEC_PER_SEC), &gs, &err), -EBUSY,
	       "collection while an upload is in progress: -EBUSY");
	ok(err && strstr(err, "g3") && strstr(err, "node-b"),
	   "...naming the upload and its node: %s", err);
	is_int((long long)s3sim_objects(), 5, "...nothing deleted (3 chunks, 1 manifest, intent)");

	usleep(1600 * 1000); /* past the lease: node-b died */
	is_int(store_gc(s, in(10 * USEC_PER_SEC), &gs, NULL), 0, "collection after the lease");
	is_int((long long)gs.stale_intents, 1, "...removes the stale intent");
	is_int((long long)gs.chunks_deleted, 1, "...deletes the chunk only g1 named");
	is_int((long long)gs.manifests, 1, "...g2's manifest marked");
	is_int((long long)s3sim_objects(), 3, "...g2's 2 chunks and manifest are left");
	is_int(store_restore(s, "g2", dir_fd, "g2-restored", in(10 * USEC_PER_SEC), NULL, NULL), 0,
	       "...and g2 restores whole");

	/* A collection is running (its marker) when an upload starts: HEAD is not trusted. */
	s3_put(s3, "cluster-1/snaps/gc/0123456789abcdef", "node-b", 6, false, in(5 * USEC_PER_SEC),
	       NULL);
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "g4"}, in(10 * USEC_PER_SEC), &st,
			    NULL),
	       0, "an upload while a collection runs");
	is_int((long long)st.chunks_sent, 2,
	       "...puts its chunks again, though the store holds them (they become young)");

	/* That collection was killed: its marker stays until it is older than the lease. */
	is_int(store_gc(s, in(10 * USEC_PER_SEC), &gs, NULL), 0, "collection with a young marker");
	is_int((long long)gs.stale_markers, 0, "...leaves it (the collection may run)");
	usleep(1600 * 1000);
	is_int(store_gc(s, in(10 * USEC_PER_SEC), &gs, NULL), 0, "collection after the lease");
	is_int((long long)gs.stale_markers, 1, "...removes the dead collection's marker");
	is_int(s3_head(s3, "cluster-1/snaps/gc/0123456789abcdef", in(5 * USEC_PER_SEC), NULL, NULL),
	       -ENOENT, "...gone from the store");

	/* A run killed after its manifest left its intent: a run again removes it. */
	s3_put(s3, "cluster-1/snaps/intents/g4", intent, strlen(intent), false,
	       in(5 * USEC_PER_SEC), NULL);
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "g4"}, in(10 * USEC_PER_SEC), &st,
			    NULL),
	       0, "an upload of a snapshot whose manifest is there, its intent left");
	ok(st.existed, "...does nothing...");
	is_int(s3_head(s3, "cluster-1/snaps/intents/g4", in(5 * USEC_PER_SEC), NULL, NULL), -ENOENT,
	       "...but remove the intent");
}

typedef struct Race {
	Store *s;
	_Atomic bool done;
	unsigned collections, deferred;
} Race;

static void *collect_loop(void *userdata)
{
	Race *race = userdata;

	while (!race->done) {
		int r = store_gc(race->s, in(10 * USEC_PER_SEC), NULL, NULL);
		race->collections++;
		race->deferred += r == -EBUSY;
	}
	return NULL;
}

/* Uploads and deletes while collections run back to back, with no grace at all: only the
 * intents and markers keep the chunks uploads reference. */
static void test_gc_race(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 1);
	_cleanup_close_ int fd = volume_file("vol-race");
	Race race = {.s = s};
	pthread_t t;
	int failed = 0;

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	for (unsigned i = 0; i < 6; i++)
		fill(fd, i, 'a' + (int)i);
	pthread_create(&t, NULL, collect_loop, &race);
	/* Slow uploads: a collection has time to run between a HEAD and the manifest. */
	s3sim_faults("[{\"method\": \"PUT\", \"key\": \"snapshots/\", \"delay\": 0.3}]");
	for (unsigned i = 0; i < 12; i++) {
		char id[16], prev[16], name[32];
		snprintf(id, sizeof(id), "race-%u", i);
		snprintf(prev, sizeof(prev), "race-%u", i - 1);
		/* The previous snapshot goes first: its chunks are garbage the next one reuses. */
		if (i > 0)
			store_delete(s, prev, in(5 * USEC_PER_SEC), NULL);
		fill(fd, i % 6, 'A' + (int)i); /* one chunk changes, five stay */
		if (store_upload(s, fd, &(StoreUploadInfo){.id = id}, in(20 * USEC_PER_SEC), NULL,
				 NULL) < 0)
			failed++;
		snprintf(name, sizeof(name), "race-restored-%u", i);
		_cleanup_free_ char *err = NULL;
		if (store_restore(s, id, dir_fd, name, in(20 * USEC_PER_SEC), NULL, &err) < 0) {
			printf("# %s: %s\n", id, err);
			failed++;
		}
		unlinkat(dir_fd, name, 0);
	}
	race.done = true;
	pthread_join(t, NULL);
	is_int(failed, 0, "12 uploads and restores while %u collections ran (%u deferred)",
	       race.collections, race.deferred);
	ok(race.collections > 12, "...collections ran all along");
	is_int(store_gc(s, in(10 * USEC_PER_SEC), NULL, NULL), 0, "a last collection");
	is_int((long long)s3sim_objects(), 7,
	       "...leaves the last snapshot's 6 chunks and manifest");
}

/* Chunks that do not compress, sent as multipart uploads (the threshold made tiny). */
static void test_multipart(void)
{
	Store *s = NULL;
	_cleanup_close_ int fd = volume_file("vol-m");
	_cleanup_free_ char *buf = xmalloc(CHUNK), *err = NULL;
	StoreUploadStats st = {};

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	store_new(&(StoreConfig){.s3 = s3, .chunk_size = CHUNK, .multipart_threshold = 1024}, &s,
		  NULL);
	for (unsigned i = 0; i < 3; i++) {
		for (size_t j = 0; j < CHUNK; j += 8) {
			uint64_t v = random_u64();
			memcpy(buf + j, &v, 8);
		}
		if (pwrite(fd, buf, CHUNK, (off_t)(i * 7 * CHUNK)) != (ssize_t)CHUNK) {
			printf("Bail out! pwrite: %m\n");
			exit(1);
		}
	}
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "m"}, in(20 * USEC_PER_SEC), &st, &err),
	       0, "upload of incompressible chunks above the multipart threshold: %s",
	       err ? err : "ok");
	ok(st.bytes_sent > 3 * CHUNK, "...sent as they are (%llu bytes)",
	   (unsigned long long)st.bytes_sent);
	is_int(s3sim_requests("POST"), 6, "...3 multipart uploads created and completed");
	is_int(store_restore(s, "m", dir_fd, "m-restored", in(20 * USEC_PER_SEC), NULL, &err), 0,
	       "...and restored");
	_cleanup_close_ int rfd = openat(dir_fd, "m-restored", O_RDONLY | O_CLOEXEC);
	ok(rfd >= 0 && same_file(fd, rfd), "...the same bytes");
	store_free(s);
}

static void test_manifest_parse(void)
{
	static const struct {
		const char *text, *why;
	} bad[] = {
		{"[]", "not an object"},
		{"{\"format\":\"volplug-snapshot/2\",\"id\":\"a\",\"volume_size\":65536,"
		 "\"chunk_size\":65536,\"chunks\":[]}",
		 "another format"},
		{"{\"format\":\"volplug-snapshot/1\",\"id\":\"../a\",\"volume_size\":65536,"
		 "\"chunk_size\":65536,\"chunks\":[]}",
		 "an ID with a slash"},
		{"{\"format\":\"volplug-snapshot/1\",\"id\":\"a\",\"volume_size\":131072,"
		 "\"chunk_size\":65536,\"chunks\":[{\"offset\":1,\"length\":65536,\"hash\":"
		 "\"0000000000000000000000000000000000000000000000000000000000000000\"}]}",
		 "an offset not aligned"},
		{"{\"format\":\"volplug-snapshot/1\",\"id\":\"a\",\"volume_size\":131072,"
		 "\"chunk_size\":65536,\"chunks\":[{\"offset\":65536,\"length\":65536,\"hash\":"
		 "\"00\"}]}",
		 "a short hash"},
		{"{\"format\":\"volplug-snapshot/1\",\"id\":\"a\",\"volume_size\":100000,"
		 "\"chunk_size\":65536,\"chunks\":[{\"offset\":65536,\"length\":65536,\"hash\":"
		 "\"0000000000000000000000000000000000000000000000000000000000000000\"}]}",
		 "a length past the volume's end"},
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		StoreManifest m = {};
		_cleanup_free_ char *err = NULL;
		int r = store_manifest_parse(bad[i].text, strlen(bad[i].text), &m, &err);
		is_int(r, -EUCLEAN, "manifest refused: %s (%s)", bad[i].why, err ? err : "-");
	}
}

/* The value of the series of family name whose labels are values (NULL: the family's sum). */
static double figure(const char *name, const char *v0, const char *v1)
{
	MetricSample *list = NULL;
	size_t n = 0;
	double v = 0;

	if (metrics_samples(name, &list, &n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if ((!v0 || (list[i].values[0] && strcmp(list[i].values[0], v0) == 0)) &&
		    (!v1 || (list[i].values[0] && list[i].values[1] &&
			     strcmp(list[i].values[1], v1) == 0)))
			v += list[i].value;
	metric_samples_free(list, n);
	return v;
}

/* The volplug_store_* metrics count what uploads, restores and collections did, and keep the
 * last error of each kind. */
static void test_metrics(void)
{
	_cleanup_(store_freep) Store *s = store_with(0, 1);
	_cleanup_close_ int fd = volume_file("vol-metrics");
	_cleanup_free_ char *err = NULL, *last = NULL;
	StoreUploadStats st = {};
	usec_t when = 0;

	s3sim_reset("{\"buckets\": [\"snaps\"], \"keys\": {\"AKID\": \"secret\"}}");
	metrics_collect_now();
	double read0 = figure("volplug_store_read_bytes_total", NULL, NULL),
	       sent0 = figure("volplug_store_sent_bytes_total", NULL, NULL),
	       csent0 = figure("volplug_store_upload_chunks_total", "sent", NULL),
	       cskip0 = figure("volplug_store_upload_chunks_total", "skipped", NULL),
	       czero0 = figure("volplug_store_upload_chunks_total", "zero", NULL),
	       done0 = figure("volplug_store_uploads_total", "done", NULL),
	       failed0 = figure("volplug_store_uploads_total", "failed", NULL),
	       rdone0 = figure("volplug_store_restores_total", "done", NULL),
	       rfailed0 = figure("volplug_store_restores_total", "failed", NULL),
	       rbytes0 = figure("volplug_store_restore_written_bytes_total", NULL, NULL),
	       gdone0 = figure("volplug_store_collections_total", "done", NULL),
	       gbusy0 = figure("volplug_store_collections_total", "put_off", NULL),
	       gchunks0 = figure("volplug_store_collected_chunks_total", NULL, NULL);
	ok(read0 >= 0 && csent0 >= 0 && gbusy0 >= 0 && rfailed0 >= 0,
	   "the store's families are registered, their series made at 0");

	fill(fd, 0, 'a');
	fill(fd, 1, 'b');
	fill(fd, 2, 0);
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "met-1"}, in(20 * USEC_PER_SEC), &st,
			    NULL),
	       0, "an upload");
	fill(fd, 1, 'B');
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "met-2"}, in(20 * USEC_PER_SEC), &st,
			    NULL),
	       0, "a second one, one chunk changed");
	metrics_collect_now();
	is_int((long long)(figure("volplug_store_read_bytes_total", NULL, NULL) - read0),
	       6 * (long long)CHUNK, "volplug_store_read_bytes_total: the 6 allocated chunks read");
	is_int((long long)(figure("volplug_store_upload_chunks_total", "sent", NULL) - csent0), 3,
	       "..._upload_chunks_total{outcome=\"sent\"}: 3");
	is_int((long long)(figure("volplug_store_upload_chunks_total", "skipped", NULL) - cskip0),
	       1, "...{outcome=\"skipped\"}: 1");
	is_int((long long)(figure("volplug_store_upload_chunks_total", "zero", NULL) - czero0), 2,
	       "...{outcome=\"zero\"}: 2");
	double sent = figure("volplug_store_sent_bytes_total", NULL, NULL) - sent0;
	ok(sent > 0 && sent < 3 * CHUNK, "volplug_store_sent_bytes_total: compressed (%.0f)", sent);
	is_int((long long)(figure("volplug_store_uploads_total", "done", NULL) - done0), 2,
	       "volplug_store_uploads_total{result=\"done\"}: 2");
	is_int((long long)figure("volplug_store_uploads_in_progress", NULL, NULL), 0,
	       "volplug_store_uploads_in_progress: 0 once done");

	is_int(store_restore(s, "met-2", dir_fd, "met-restored", in(20 * USEC_PER_SEC), NULL, NULL),
	       0, "a restore");
	store_restore(s, "met-none", dir_fd, "met-r2", in(5 * USEC_PER_SEC), NULL, NULL);
	metrics_collect_now();
	is_int((long long)(figure("volplug_store_restores_total", "done", NULL) - rdone0), 1,
	       "volplug_store_restores_total{result=\"done\"}: 1");
	is_int((long long)(figure("volplug_store_restores_total", "failed", NULL) - rfailed0), 1,
	       "...{result=\"failed\"}: 1");
	is_int((long long)(figure("volplug_store_restore_written_bytes_total", NULL, NULL) -
			   rbytes0),
	       2 * (long long)CHUNK, "volplug_store_restore_written_bytes_total: 2 chunks");
	is_int(store_last_error(STORE_ERROR_RESTORE, &when, &last), -ENOENT,
	       "the last restore error is kept");
	ok(last && strstr(last, "met-none"), "...with its message: %s", last);
	ok(figure("volplug_store_last_error_timestamp_seconds", "restore", "ENOENT") >=
		   (double)(now_usec(CLOCK_REALTIME) / USEC_PER_SEC - 60),
	   "volplug_store_last_error_timestamp_seconds{kind=\"restore\",error=\"ENOENT\"}: "
	   "now");

	const char *intent = "{\"snapshot\":\"met-9\",\"node\":\"node-b\"}";
	s3_put(s3, "cluster-1/snaps/intents/met-9", intent, strlen(intent), false,
	       in(5 * USEC_PER_SEC), NULL);
	is_int(store_gc(s, in(10 * USEC_PER_SEC), NULL, NULL), -EBUSY,
	       "a collection put off by an upload in progress");
	s3_delete(s3, "cluster-1/snaps/intents/met-9", in(5 * USEC_PER_SEC), NULL);
	store_delete(s, "met-1", in(5 * USEC_PER_SEC), NULL);
	usleep(10 * 1000);
	is_int(store_gc(s, in(10 * USEC_PER_SEC), NULL, NULL), 0, "a collection");
	metrics_collect_now();
	is_int((long long)(figure("volplug_store_collections_total", "put_off", NULL) - gbusy0), 1,
	       "volplug_store_collections_total{result=\"put_off\"}: 1");
	is_int((long long)(figure("volplug_store_collections_total", "done", NULL) - gdone0), 1,
	       "...{result=\"done\"}: 1");
	is_int((long long)(figure("volplug_store_collected_chunks_total", NULL, NULL) - gchunks0),
	       1, "volplug_store_collected_chunks_total: the chunk only met-1 named");

	s3sim_faults("[{\"method\": \"PUT\", \"key\": \"chunks/\", \"status\": 403, "
		     "\"code\": \"AccessDenied\"}]");
	fill(fd, 5, 'z');
	is_int(store_upload(s, fd, &(StoreUploadInfo){.id = "met-3"}, in(5 * USEC_PER_SEC), NULL,
			    &err),
	       -EPERM, "an upload the store refuses");
	metrics_collect_now();
	is_int((long long)(figure("volplug_store_uploads_total", "failed", NULL) - failed0), 1,
	       "volplug_store_uploads_total{result=\"failed\"}: 1");
	free(last);
	last = NULL;
	is_int(store_last_error(STORE_ERROR_UPLOAD, &when, &last), -EPERM,
	       "the last upload error is kept");
	ok(last && err && strcmp(last, err) == 0, "...the message the caller got: %s", last);
	ok(figure("volplug_store_last_error_timestamp_seconds", "upload", "EPERM") > 0,
	   "volplug_store_last_error_timestamp_seconds{kind=\"upload\",error=\"EPERM\"}");
	is_int(store_last_error(STORE_ERROR_COLLECTION, &when, &last), 0,
	       "no collection error: a put-off collection is none");
	s3sim_reset("{\"buckets\": [], \"keys\": {\"AKID\": \"secret\"}}");
}

int main(void)
{
	char *env[] = {"AWS_ACCESS_KEY_ID=AKID", "AWS_SECRET_ACCESS_KEY=secret",
		       "AWS_EC2_METADATA_DISABLED=true", NULL};

	s3sim_start();
	if (!mkdtemp(dir) || (dir_fd = open(dir, O_DIRECTORY | O_CLOEXEC)) < 0) {
		printf("Bail out! mkdtemp: %m\n");
		return 1;
	}
	creds = aws_credentials_provider_new(&(AwsCredentialsConfig){.environment = env});
	if (s3_client_new(
		    &(S3Config){.endpoint = s3sim.url,
				.bucket = "snaps",
				.region = "us-east-1",
				.path_style = true,
				.credentials = creds,
				.retry = {.base = 10 * USEC_PER_MSEC, .cap = 50 * USEC_PER_MSEC}},
		    &s3, NULL) < 0) {
		printf("Bail out! s3_client_new\n");
		return 1;
	}
	test_manifest_parse();
	test_upload_restore();
	test_restore_hole_in_chunk();
	test_changed_ranges();
	test_damage();
	test_faults_and_resume();
	test_resume();
	test_cancel();
	test_gc();
	test_multipart();
	test_gc_race();
	test_metrics();
	s3_client_free(s3);
	aws_credentials_provider_free(creds);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	return tap_done();
}
