/* SPDX-License-Identifier: Apache-2.0 */
/* The snapshot store's side of bench/store.sh: one upload, one restore, or the cost of the
 * store's own work on a file's data without any HTTP, each printed as one line of key=value
 * pairs (its wall time, CPU seconds and peak RSS included) for the script to put in its table.
 *
 *   store-bench upload  [OPTIONS] ID FILE        store_upload() of FILE as snapshot ID
 *   store-bench restore [OPTIONS] ID DIR NAME    store_restore() of ID into DIR/NAME
 *   store-bench cost    [--chunk-size N] [--zstd-level N] FILE  one thread: read, SHA-256,
 *                                                zstd, unzstd
 *   store-bench scribble FILE PERCENT RUN SEED   rewrite PERCENT of FILE's 4 KiB blocks with
 *                                                random bytes, RUN blocks at a time, at
 *                                                random places among its allocated blocks
 *
 * OPTIONS: --endpoint URL (required) --bucket B (volplug-snaps) --region R (us-east-1)
 * --prefix P ("") --chunk-size N (0: the store's) --parallel N (0: the store's)
 * --zstd-level N (0: the store's) --unsigned-payload; for upload, --base ID:FILE (the
 * snapshot before and a reflink of the file it was taken from: changed ranges by FIEMAP).
 * Credentials come from the environment (AWS_ACCESS_KEY_ID, ...), as for the aws command the script
 * compares with. Exit 1 on a failure, its message on stderr. */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "alloc.h"
#include "aws-credentials.h"
#include "macro.h"
#include "parse-util.h"
#include "s3.h"
#include "store.h"
#include "time-util.h"

static struct {
	const char *endpoint, *bucket, *region, *prefix;
	uint64_t chunk_size;
	unsigned parallel;
	int zstd_level;
	const char *base_id, *base_file;
	bool unsigned_payload;
} arg = {.bucket = "volplug-snaps", .region = "us-east-1", .prefix = ""};

static usec_t started;

/* wall, user+sys CPU seconds and peak RSS (MiB) of this process so far. */
static void print_usage(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	printf(" wall=%.3f user=%.3f sys=%.3f rss_mib=%.1f\n",
	       (double)(now_usec(CLOCK_MONOTONIC) - started) / 1e6,
	       (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6,
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6,
	       (double)ru.ru_maxrss / 1024.0);
}

static int open_store(AwsCredentialsProvider **ret_creds, S3Client **ret_s3, Store **ret_store)
{
	_cleanup_free_ char *err = NULL;
	AwsCredentialsProvider *creds = aws_credentials_provider_new(&(AwsCredentialsConfig){});
	S3Client *s3 = NULL;
	Store *store = NULL;
	int r;

	r = s3_client_new(&(S3Config){.endpoint = arg.endpoint,
				      .bucket = arg.bucket,
				      .region = arg.region,
				      .path_style = true,
				      .unsigned_payload = arg.unsigned_payload,
				      .credentials = creds},
			  &s3, &err);
	if (r == 0)
		r = store_new(&(StoreConfig){.s3 = s3,
					     .prefix = arg.prefix,
					     .node = "bench",
					     .chunk_size = (size_t)arg.chunk_size,
					     .parallel = arg.parallel,
					     .zstd_level = arg.zstd_level},
			      &store, &err);
	if (r < 0) {
		fprintf(stderr, "store-bench: %s\n", err);
		s3_client_free(s3);
		aws_credentials_provider_free(creds);
		return r;
	}
	*ret_creds = creds;
	*ret_s3 = s3;
	*ret_store = store;
	return 0;
}

static void print_http(S3Client *s3)
{
	S3Stats st;

	s3_client_stats(s3, &st);
	printf(" requests=%" PRIu64 " retries=%" PRIu64 " http_sent=%" PRIu64
	       " http_received=%" PRIu64,
	       st.requests, st.retries, st.bytes_sent, st.bytes_received);
}

static int cmd_upload(const char *id, const char *path)
{
	_cleanup_(aws_credentials_provider_freep) AwsCredentialsProvider *creds = NULL;
	_cleanup_(s3_client_freep) S3Client *s3 = NULL;
	_cleanup_(store_freep) Store *store = NULL;
	_cleanup_free_ char *err = NULL;
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	_cleanup_close_ int base_fd = -EBADF;
	StoreUploadStats st = {};

	if (fd < 0) {
		fprintf(stderr, "store-bench: %s: %m\n", path);
		return 1;
	}
	if (arg.base_file && (base_fd = open(arg.base_file, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "store-bench: %s: %m\n", arg.base_file);
		return 1;
	}
	if (open_store(&creds, &s3, &store) < 0)
		return 1;
	if (store_upload(store, fd,
			 &(StoreUploadInfo){.id = id,
					    .filesystem = "ext4",
					    .base_id = arg.base_file ? arg.base_id : NULL,
					    .base_fd = base_fd},
			 now_usec(CLOCK_MONOTONIC) + 3600 * USEC_PER_SEC, &st, &err) < 0) {
		fprintf(stderr, "store-bench: %s\n", err);
		return 1;
	}
	printf("chunks=%" PRIu64 " chunks_sent=%" PRIu64 " chunks_skipped=%" PRIu64
	       " chunks_unchanged=%" PRIu64 " zero_chunks=%" PRIu64 " bytes_read=%" PRIu64
	       " bytes_sent=%" PRIu64,
	       st.chunks, st.chunks_sent, st.chunks_skipped, st.chunks_unchanged, st.zero_chunks,
	       st.bytes_read, st.bytes_sent);
	print_http(s3);
	print_usage();
	return 0;
}

static int cmd_restore(const char *id, const char *dir, const char *name)
{
	_cleanup_(aws_credentials_provider_freep) AwsCredentialsProvider *creds = NULL;
	_cleanup_(s3_client_freep) S3Client *s3 = NULL;
	_cleanup_(store_freep) Store *store = NULL;
	_cleanup_free_ char *err = NULL;
	_cleanup_close_ int dir_fd = open(dir, O_DIRECTORY | O_CLOEXEC);
	StoreRestoreStats st = {};

	if (dir_fd < 0) {
		fprintf(stderr, "store-bench: %s: %m\n", dir);
		return 1;
	}
	if (open_store(&creds, &s3, &store) < 0)
		return 1;
	if (store_restore(store, id, dir_fd, name, now_usec(CLOCK_MONOTONIC) + 3600 * USEC_PER_SEC,
			  &st, &err) < 0) {
		fprintf(stderr, "store-bench: %s\n", err);
		return 1;
	}
	printf("chunks=%" PRIu64 " bytes_received=%" PRIu64 " bytes_written=%" PRIu64, st.chunks,
	       st.bytes_received, st.bytes_written);
	print_http(s3);
	print_usage();
	return 0;
}

/* This thread's CPU time: what a step costs, whatever else the machine runs. */
static usec_t cpu_now(void)
{
	return now_usec(CLOCK_THREAD_CPUTIME_ID);
}

static double seconds_since(usec_t t0)
{
	return (double)(cpu_now() - t0) / 1e6;
}

/* Where an upload's CPU goes, one thread, no HTTP: each allocated chunk read (page cache),
 * hashed, compressed (level 3 or --zstd-level), decompressed; CPU seconds per GiB each. */
static int cmd_cost(const char *path)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t chunk = arg.chunk_size ? (size_t)arg.chunk_size : STORE_CHUNK_SIZE_DEFAULT;
	size_t bound = ZSTD_compressBound(chunk);
	_cleanup_free_ char *buf = xmalloc(chunk), *z = xmalloc(bound), *back = xmalloc(chunk);
	double t_read = 0, t_hash = 0, t_zstd = 0, t_unzstd = 0;
	uint64_t bytes = 0, zbytes = 0;
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned mdlen;
	struct stat st;

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "store-bench: %s: %m\n", path);
		return 1;
	}
	for (off_t off = 0; off < st.st_size;) {
		off_t d = lseek(fd, off, SEEK_DATA);
		if (d < 0)
			break;
		d = d / (off_t)chunk * (off_t)chunk;
		usec_t t0 = cpu_now();
		ssize_t n = pread(fd, buf, chunk, d);
		if (n <= 0)
			break;
		t_read += seconds_since(t0);
		t0 = cpu_now();
		EVP_Digest(buf, (size_t)n, md, &mdlen, EVP_sha256(), NULL);
		t_hash += seconds_since(t0);
		t0 = cpu_now();
		size_t zn = ZSTD_compress(z, bound, buf, (size_t)n, arg.zstd_level ?: 3);
		t_zstd += seconds_since(t0);
		t0 = cpu_now();
		size_t bn = ZSTD_decompress(back, chunk, z, zn);
		t_unzstd += seconds_since(t0);
		if (ZSTD_isError(zn) || ZSTD_isError(bn) || bn != (size_t)n) {
			fprintf(stderr, "store-bench: zstd failed at %jd\n", (intmax_t)d);
			return 1;
		}
		bytes += (uint64_t)n;
		zbytes += zn;
		off = d + n;
	}
	double gib = (double)bytes / (1 << 30);
	printf("bytes=%" PRIu64 " zbytes=%" PRIu64 " ratio=%.3f read_s_gib=%.3f sha256_s_gib=%.3f "
	       "zstd_s_gib=%.3f unzstd_s_gib=%.3f",
	       bytes, zbytes, bytes ? (double)zbytes / (double)bytes : 0, t_read / gib,
	       t_hash / gib, t_zstd / gib, t_unzstd / gib);
	print_usage();
	return 0;
}

/* A xorshift64*: the same seed, the same blocks and bytes. */
static uint64_t next_random(uint64_t *x)
{
	*x ^= *x >> 12;
	*x ^= *x << 25;
	*x ^= *x >> 27;
	return *x * 2685821657736338717ULL;
}

static int cmd_scribble(const char *path, const char *percent_s, const char *run_s,
			const char *seed_s)
{
	_cleanup_close_ int fd = open(path, O_RDWR | O_CLOEXEC);
	_cleanup_free_ uint64_t *blocks = NULL;
	size_t n = 0, cap = 0;
	uint64_t run, seed, written = 0;
	double percent = strtod(percent_s, NULL);
	struct stat st;
	char buf[4096];

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "store-bench: %s: %m\n", path);
		return 1;
	}
	if (parse_uint64(run_s, &run) < 0 || run == 0 || parse_uint64(seed_s, &seed) < 0 ||
	    percent <= 0 || percent > 100) {
		fprintf(stderr, "store-bench: scribble FILE PERCENT RUN SEED\n");
		return 1;
	}
	/* The allocated blocks, as the first block of each run of RUN that fits in an extent. */
	for (off_t off = 0; off < st.st_size;) {
		off_t d = lseek(fd, off, SEEK_DATA), h;
		if (d < 0)
			break;
		h = lseek(fd, d, SEEK_HOLE);
		for (uint64_t b = (uint64_t)d / 4096; (b + run) * 4096 <= (uint64_t)h; b += run) {
			if (n == cap) {
				cap = cap ? cap * 2 : 4096;
				blocks = xrealloc(blocks, cap * sizeof(*blocks));
			}
			blocks[n++] = b;
		}
		off = h;
	}
	uint64_t want = (uint64_t)((double)st.st_size / 4096 * percent / 100) / run;
	if (want > n) {
		fprintf(stderr, "store-bench: %s has too few allocated blocks\n", path);
		return 1;
	}
	uint64_t x = seed * 2 + 1;
	/* A partial Fisher-Yates: want distinct runs. */
	for (uint64_t i = 0; i < want; i++) {
		uint64_t j = i + next_random(&x) % (n - i), t = blocks[i];
		blocks[i] = blocks[j];
		blocks[j] = t;
		for (uint64_t k = 0; k < run; k++) {
			for (size_t w = 0; w < sizeof(buf); w += 8) {
				uint64_t v = next_random(&x);
				memcpy(buf + w, &v, 8);
			}
			if (pwrite(fd, buf, sizeof(buf), (off_t)((blocks[i] + k) * 4096)) !=
			    (ssize_t)sizeof(buf)) {
				fprintf(stderr, "store-bench: %s: write: %m\n", path);
				return 1;
			}
			written += sizeof(buf);
		}
	}
	if (fsync(fd) < 0) {
		fprintf(stderr, "store-bench: %s: fsync: %m\n", path);
		return 1;
	}
	printf("runs=%" PRIu64 " bytes_written=%" PRIu64 "\n", want, written);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{"endpoint", required_argument, NULL, 'e'},
		{"bucket", required_argument, NULL, 'b'},
		{"region", required_argument, NULL, 'r'},
		{"prefix", required_argument, NULL, 'p'},
		{"chunk-size", required_argument, NULL, 'c'},
		{"parallel", required_argument, NULL, 'j'},
		{"zstd-level", required_argument, NULL, 'z'},
		{"base", required_argument, NULL, 'B'},
		{"unsigned-payload", no_argument, NULL, 'u'},
		{},
	};
	int c;

	started = now_usec(CLOCK_MONOTONIC);
	if (argc < 2) {
		fprintf(stderr, "usage: store-bench upload|restore|cost|scribble ...\n");
		return 2;
	}
	const char *cmd = argv[1];
	argv++;
	argc--;
	while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0) {
		switch (c) {
		case 'e':
			arg.endpoint = optarg;
			break;
		case 'b':
			arg.bucket = optarg;
			break;
		case 'r':
			arg.region = optarg;
			break;
		case 'p':
			arg.prefix = optarg;
			break;
		case 'c':
			if (parse_size(optarg, &arg.chunk_size) < 0) {
				fprintf(stderr, "store-bench: --chunk-size %s\n", optarg);
				return 2;
			}
			break;
		case 'j':
			arg.parallel = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'B':
			/* ID:FILE, the snapshot before and a reflink of its file */
			arg.base_id = optarg;
			arg.base_file = strchr(optarg, ':');
			if (!arg.base_file) {
				fprintf(stderr, "store-bench: --base ID:FILE\n");
				return 2;
			}
			*(char *)arg.base_file++ = 0;
			break;
		case 'z':
			arg.zstd_level = atoi(optarg);
			break;
		case 'u':
			arg.unsigned_payload = true;
			break;
		default:
			return 2;
		}
	}
	argv += optind;
	argc -= optind;
	if ((strcmp(cmd, "upload") == 0) && argc == 2 && arg.endpoint)
		return cmd_upload(argv[0], argv[1]);
	if ((strcmp(cmd, "restore") == 0) && argc == 3 && arg.endpoint)
		return cmd_restore(argv[0], argv[1], argv[2]);
	if ((strcmp(cmd, "cost") == 0) && argc == 1)
		return cmd_cost(argv[0]);
	if ((strcmp(cmd, "scribble") == 0) && argc == 4)
		return cmd_scribble(argv[0], argv[1], argv[2], argv[3]);
	fprintf(stderr, "store-bench: bad arguments (see the top of bench/store-bench.c)\n");
	return 2;
}
