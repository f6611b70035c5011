/* SPDX-License-Identifier: Apache-2.0 */
/* File ranges: the merger, SEEK_DATA walks, and deltas checked against the bytes: every block
 * that differs is reported, no block that is equal is, with FIEMAP and without, from any
 * starting offset. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fiemap.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "ranges.h"
#include "tap.h"

#define BLOCK FILE_DELTA_BLOCK
#define BLOCKS 512 /* 2 MiB files */

typedef struct Got {
	uint64_t off[4096], len[4096];
	size_t n;
	int stop_after; /* > 0: the range callback fails after that many */
	int checks;
	int cancel_at; /* > 0: check() fails at that call */
} Got;

static int got_range(uint64_t offset, uint64_t length, void *userdata)
{
	Got *g = userdata;
	if (g->stop_after > 0 && (int)g->n == g->stop_after)
		return -ECANCELED;
	if (g->n < 4096) {
		g->off[g->n] = offset;
		g->len[g->n] = length;
	}
	g->n++;
	return 0;
}

static int got_check(void *userdata)
{
	Got *g = userdata;
	return g->cancel_at > 0 && ++g->checks >= g->cancel_at ? -ECANCELED : 0;
}

static void test_merger(void)
{
	Got g = {};
	FileRangeSink sink = {.range = got_range, .userdata = &g};
	RangeMerger m = {.sink = &sink};

	range_merger_add(&m, 0, 4096);
	range_merger_add(&m, 4096, 4096); /* adjacent: joined */
	range_merger_add(&m, 8192, 0);	  /* empty: nothing */
	range_merger_add(&m, 16384, 4096);
	range_merger_flush(&m);
	range_merger_flush(&m); /* nothing held: nothing sent */
	ok(g.n == 2 && g.off[0] == 0 && g.len[0] == 8192 && g.off[1] == 16384 && g.len[1] == 4096,
	   "merger: adjacent ranges joined, a gap splits, empty ones dropped (%zu ranges)", g.n);
	ok(m.emitted == 12288, "merger: counts the bytes handed on (%llu)",
	   (unsigned long long)m.emitted);
}

static void test_fiemap_flags(void)
{
	ok(fiemap_flags_comparable(0, FIEMAP_EXTENT_SHARED | FIEMAP_EXTENT_LAST),
	   "fiemap: written extents at the same place read the same");
	ok(fiemap_flags_comparable(FIEMAP_EXTENT_UNWRITTEN, FIEMAP_EXTENT_UNWRITTEN),
	   "fiemap: two unwritten extents read the same");
	ok(!fiemap_flags_comparable(0, FIEMAP_EXTENT_UNWRITTEN),
	   "fiemap: written and unwritten at the same place may not read the same");
	ok(!fiemap_flags_comparable(FIEMAP_EXTENT_DELALLOC, FIEMAP_EXTENT_DELALLOC) &&
		   !fiemap_flags_comparable(FIEMAP_EXTENT_ENCODED, 0) &&
		   !fiemap_flags_comparable(FIEMAP_EXTENT_UNKNOWN, 0) &&
		   !fiemap_flags_comparable(FIEMAP_EXTENT_DATA_INLINE, 0),
	   "fiemap: delayed, encoded, unknown or inline extents are never taken as equal");
}

static int tmp_file(char *path)
{
	int fd = mkstemp(path);
	if (fd >= 0)
		unlink(path);
	return fd;
}

static void fill(uint8_t *buf, unsigned seed)
{
	for (size_t i = 0; i < BLOCK; i++)
		buf[i] = (uint8_t)(seed * 131 + i * 7 + 1);
}

static void test_data_ranges(void)
{
	char path[] = "/tmp/volplug-test-ranges-XXXXXX";
	int fd = tmp_file(path);
	uint8_t buf[BLOCK];
	Got g = {};
	FileRangeSink sink = {.range = got_range, .check = got_check, .userdata = &g};

	fill(buf, 1);
	if (ftruncate(fd, BLOCKS * BLOCK) < 0 || pwrite(fd, buf, BLOCK, 2 * BLOCK) != BLOCK ||
	    pwrite(fd, buf, BLOCK, 3 * BLOCK) != BLOCK ||
	    pwrite(fd, buf, BLOCK, 256 * BLOCK) != BLOCK) {
		ok(0, "data ranges: cannot write a test file");
		return;
	}
	fsync(fd);
	ok(file_data_ranges(fd, 0, BLOCKS * BLOCK, &sink) == 0, "data ranges: walk");
	/* A filesystem may allocate more than was written, never less. */
	bool covers = g.n >= 1 && g.off[0] <= 2 * BLOCK && g.off[0] + g.len[0] >= 4 * BLOCK;
	bool covers2 = false;
	for (size_t i = 0; i < g.n; i++)
		covers2 |= g.off[i] <= 256 * BLOCK && g.off[i] + g.len[i] >= 257 * BLOCK;
	ok(covers && covers2, "data ranges: every block written is covered (%zu ranges)", g.n);
	uint64_t total = 0;
	for (size_t i = 0; i < g.n; i++)
		total += g.len[i];
	ok(total < BLOCKS * BLOCK / 2, "data ranges: holes are left out (%llu bytes of %u)",
	   (unsigned long long)total, BLOCKS * BLOCK);

	g = (Got){};
	int r = file_data_ranges(fd, 3 * BLOCK + 100, BLOCKS * BLOCK, &sink);
	ok(r == 0 && g.n >= 1 && g.off[0] == 3 * BLOCK + 100,
	   "data ranges: a range across the start is cut at the start (%llu)",
	   (unsigned long long)g.off[0]);

	g = (Got){.stop_after = 1};
	ok(file_data_ranges(fd, 0, BLOCKS * BLOCK, &sink) == -ECANCELED,
	   "data ranges: the sink's error stops the walk and is returned");
	close(fd);
}

/* Two files with known blocks; returns the map of blocks that differ. */
typedef struct Pair {
	int base, target;
	bool differs[BLOCKS];
} Pair;

static int pair_make(Pair *p, unsigned seed, uint64_t base_blocks)
{
	char a[] = "/tmp/volplug-test-ranges-XXXXXX", b[] = "/tmp/volplug-test-ranges-XXXXXX";
	uint8_t buf[BLOCK], other[BLOCK];

	srand(seed);
	*p = (Pair){.base = tmp_file(a), .target = tmp_file(b)};
	if (p->base < 0 || p->target < 0 || ftruncate(p->base, (off_t)(base_blocks * BLOCK)) < 0 ||
	    ftruncate(p->target, BLOCKS * BLOCK) < 0)
		return -errno;
	for (unsigned i = 0; i < BLOCKS; i++) {
		int what = rand() % 10;
		bool in_base = i < base_blocks;
		fill(buf, (unsigned)rand());
		switch (what) {
		case 0: /* written in both, the same */
		case 1:
			if (in_base && pwrite(p->base, buf, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			if (pwrite(p->target, buf, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			p->differs[i] = !in_base;
			break;
		case 2: /* rewritten */
			fill(other, (unsigned)rand());
			if (in_base && pwrite(p->base, buf, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			if (pwrite(p->target, other, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			p->differs[i] = true;
			break;
		case 3: /* written in the target only */
			if (pwrite(p->target, buf, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			p->differs[i] = true;
			break;
		case 4: /* zeroed in the target: data -> zeros */
			if (in_base && pwrite(p->base, buf, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			memset(other, 0, BLOCK);
			if (pwrite(p->target, other, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			p->differs[i] = in_base;
			break;
		case 5: /* one byte changed */
			if (in_base && pwrite(p->base, buf, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			buf[BLOCK - 1] ^= 0x80;
			if (pwrite(p->target, buf, BLOCK, i * BLOCK) != BLOCK)
				return -EIO;
			p->differs[i] = true;
			break;
		default: /* a hole in both */
			break;
		}
	}
	fsync(p->base);
	fsync(p->target);
	return 0;
}

/* Whether the ranges report exactly the blocks that differ at or after start. */
static bool ranges_exact(const Pair *p, const Got *g, uint64_t start, char *why, size_t len)
{
	bool reported[BLOCKS] = {};
	uint64_t last_end = 0;

	for (size_t i = 0; i < g->n; i++) {
		if (g->len[i] == 0 || g->off[i] < last_end || g->off[i] < start) {
			snprintf(why, len, "range %zu (%llu+%llu) out of order or before start", i,
				 (unsigned long long)g->off[i], (unsigned long long)g->len[i]);
			return false;
		}
		last_end = g->off[i] + g->len[i];
		for (uint64_t o = g->off[i]; o < last_end; o = (o / BLOCK + 1) * BLOCK)
			reported[o / BLOCK] = true;
	}
	for (unsigned b = 0; b < BLOCKS; b++) {
		bool want = p->differs[b] && (uint64_t)(b + 1) * BLOCK > start;
		if (want != reported[b]) {
			snprintf(why, len, "block %u: differs %d, reported %d", b, want,
				 reported[b]);
			return false;
		}
	}
	return true;
}

static void test_delta(unsigned seed, uint64_t base_blocks, unsigned flags, const char *what)
{
	Pair p;
	char why[256] = "";
	static const uint64_t starts[] = {0, BLOCK * 7 + 100, BLOCK * 300, BLOCKS * BLOCK};

	if (pair_make(&p, seed, base_blocks) < 0) {
		ok(0, "delta %s: cannot write the test files", what);
		return;
	}
	for (size_t s = 0; s < ELEMENTSOF(starts); s++) {
		Got g = {};
		FileRangeSink sink = {.range = got_range, .check = got_check, .userdata = &g};
		FileDeltaStats st = {};
		int r = file_delta_ranges(p.base, p.target, starts[s], BLOCKS * BLOCK, flags, &sink,
					  &st);
		ok(r == 0 && ranges_exact(&p, &g, starts[s], why, sizeof(why)),
		   "delta %s from %llu: exactly the blocks that differ (%zu ranges, %llu bytes "
		   "compared, %llu in holes skipped, fiemap %d) %s",
		   what, (unsigned long long)starts[s], g.n, (unsigned long long)st.compared,
		   (unsigned long long)st.holes, st.fiemap, why);
		if (s == 0)
			ok(st.holes > 0 && st.compared < BLOCKS * BLOCK,
			   "delta %s: holes in both are not read (%llu bytes compared)", what,
			   (unsigned long long)st.compared);
	}
	close(p.base);
	close(p.target);
}

static void test_delta_stops(void)
{
	Pair p;

	if (pair_make(&p, 99, BLOCKS) < 0) {
		ok(0, "delta stop: cannot write the test files");
		return;
	}
	Got g = {.cancel_at = 2};
	FileRangeSink sink = {.range = got_range, .check = got_check, .userdata = &g};
	int r = file_delta_ranges(p.base, p.target, 0, BLOCKS * BLOCK, 0, &sink, NULL);
	ok(r == -ECANCELED, "delta: check() failing stops the walk, its error returned (%d checks)",
	   g.checks);
	g = (Got){.stop_after = 1};
	ok(file_delta_ranges(p.base, p.target, 0, BLOCKS * BLOCK, 0, &sink, NULL) == -ECANCELED,
	   "delta: the sink's error stops the walk and is returned");
	close(p.base);
	close(p.target);
}

int main(void)
{
	test_merger();
	test_fiemap_flags();
	test_data_ranges();
	for (unsigned seed = 1; seed <= 3; seed++) {
		char what[64];
		snprintf(what, sizeof(what), "seed %u", seed);
		test_delta(seed, BLOCKS, 0, what);
		snprintf(what, sizeof(what), "seed %u without FIEMAP", seed);
		test_delta(seed, BLOCKS, FILE_DELTA_NO_FIEMAP, what);
	}
	test_delta(7, BLOCKS / 2, 0, "base half the target's size");
	test_delta_stops();
	printf("1..%d\n", tap_n);
	return tap_failed ? 1 : 0;
}
