/* SPDX-License-Identifier: Apache-2.0 */
/* File ranges: data (SEEK_DATA) and differences (FIEMAP, then bytes). A delta walks both files
 * at once in segments, each a stretch where neither file changes its state (a hole, or one
 * extent mapped contiguously): a segment both files hold as a hole, or map to the same
 * physical bytes, is equal without a read; any other is read from both and compared block by
 * block. Without FIEMAP (tmpfs, FILE_DELTA_NO_FIEMAP) the segments come from SEEK_DATA and
 * SEEK_HOLE, and only holes in both are skipped. */
#include <fcntl.h>
#include <string.h>
#include <linux/fiemap.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "fileio.h"
#include "ranges.h"

/* Extents asked of FIEMAP at once: 256 x 56 bytes. */
#define EXTENTS_BATCH 256
/* Bytes read from each file at once when comparing. */
#define COMPARE_CHUNK (1024u * 1024u)

int range_merger_add(RangeMerger *m, uint64_t offset, uint64_t length)
{
	if (length == 0)
		return 0;
	if (m->length > 0 && m->offset + m->length == offset) {
		m->length += length;
		return 0;
	}
	int r = range_merger_flush(m);
	if (r < 0)
		return r;
	m->offset = offset;
	m->length = length;
	return 0;
}

int range_merger_flush(RangeMerger *m)
{
	if (m->length == 0)
		return 0;
	uint64_t offset = m->offset, length = m->length;
	m->length = 0;
	m->emitted += length;
	return m->sink->range(offset, length, m->sink->userdata);
}

static int sink_check(const FileRangeSink *sink)
{
	return sink->check ? sink->check(sink->userdata) : 0;
}

int file_data_ranges(int fd, uint64_t start, uint64_t end, const FileRangeSink *sink)
{
	RangeMerger m = {.sink = sink};
	uint64_t pos = start;
	int r = 0;

	while (pos < end) {
		off_t data = lseek(fd, (off_t)pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			break; /* only a hole is left */
		if (data < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
			r = range_merger_add(&m, pos, end - pos); /* cannot say: all of it */
			break;
		}
		if (data < 0)
			return negative_errno();
		if ((uint64_t)data >= end)
			break;
		off_t hole = lseek(fd, data, SEEK_HOLE);
		if (hole < 0)
			return negative_errno();
		uint64_t stop = MIN((uint64_t)hole, end);
		if ((r = range_merger_add(&m, (uint64_t)data, stop - (uint64_t)data)) < 0 ||
		    (r = sink_check(sink)) < 0)
			return r;
		pos = stop;
	}
	return r < 0 ? r : range_merger_flush(&m);
}

bool fiemap_flags_comparable(uint32_t a, uint32_t b)
{
	const uint32_t unsure = FIEMAP_EXTENT_UNKNOWN | FIEMAP_EXTENT_DELALLOC |
				FIEMAP_EXTENT_ENCODED | FIEMAP_EXTENT_DATA_ENCRYPTED |
				FIEMAP_EXTENT_NOT_ALIGNED | FIEMAP_EXTENT_DATA_INLINE |
				FIEMAP_EXTENT_DATA_TAIL;

	if ((a | b) & unsure)
		return false;
	return (a & FIEMAP_EXTENT_UNWRITTEN) == (b & FIEMAP_EXTENT_UNWRITTEN);
}

/* One file's state over a stretch from a position on. */
typedef struct Segment {
	bool data;	   /* else a hole: reads zeros */
	bool mapped;	   /* data whose physical address is known (FIEMAP) */
	uint64_t physical; /* of the segment's first byte, when mapped */
	uint32_t flags;	   /* FIEMAP's, when mapped */
	uint64_t end;	   /* where the state changes (or the walk's end) */
} Segment;

/* Where a file is in a walk: the extents FIEMAP gave from some offset on. */
typedef struct Cursor {
	int fd;
	bool fiemap; /* else SEEK_DATA/SEEK_HOLE */
	struct fiemap *fm;
	size_t i;  /* the first extent that may end after the position */
	bool last; /* no extent after those fetched, up to the walk's end */
} Cursor;

static int cursor_fetch(Cursor *c, uint64_t pos, uint64_t end)
{
	memset(c->fm, 0, sizeof(*c->fm));
	c->fm->fm_start = pos;
	c->fm->fm_length = end - pos;
	c->fm->fm_flags = FIEMAP_FLAG_SYNC;
	c->fm->fm_extent_count = EXTENTS_BATCH;
	if (ioctl(c->fd, FS_IOC_FIEMAP, c->fm) < 0)
		return negative_errno();
	uint32_t n = c->fm->fm_mapped_extents;
	const struct fiemap_extent *e = c->fm->fm_extents;
	c->i = 0;
	c->last = n < EXTENTS_BATCH || (n > 0 && (e[n - 1].fe_flags & FIEMAP_EXTENT_LAST)) ||
		  e[n - 1].fe_logical + e[n - 1].fe_length <= pos; /* no progress: stop */
	return 0;
}

static int segment_fiemap(Cursor *c, uint64_t pos, uint64_t end, Segment *ret)
{
	for (;;) {
		const struct fiemap_extent *e = c->fm->fm_extents;
		uint32_t n = c->fm->fm_mapped_extents;
		while (c->i < n && e[c->i].fe_logical + e[c->i].fe_length <= pos)
			c->i++;
		if (c->i < n) {
			const struct fiemap_extent *x = &e[c->i];
			if (x->fe_logical > pos) {
				*ret = (Segment){.end = MIN(x->fe_logical, end)};
				return 0;
			}
			*ret = (Segment){
				.data = true,
				.mapped = true,
				.physical = x->fe_physical + (pos - x->fe_logical),
				.flags = x->fe_flags,
				.end = MIN(x->fe_logical + x->fe_length, end),
			};
			return 0;
		}
		if (c->last) {
			*ret = (Segment){.end = end};
			return 0;
		}
		int r = cursor_fetch(c, pos, end);
		if (r < 0)
			return r;
	}
}

static int segment_seek(Cursor *c, uint64_t pos, uint64_t end, Segment *ret)
{
	off_t data = lseek(c->fd, (off_t)pos, SEEK_DATA);

	if (data < 0 && errno == ENXIO) {
		*ret = (Segment){.end = end};
		return 0;
	}
	if (data < 0 && (errno == EINVAL || errno == EOPNOTSUPP)) {
		*ret = (Segment){.data = true, .end = end};
		return 0;
	}
	if (data < 0)
		return negative_errno();
	if ((uint64_t)data > pos) {
		*ret = (Segment){.end = MIN((uint64_t)data, end)};
		return 0;
	}
	off_t hole = lseek(c->fd, data, SEEK_HOLE);
	if (hole < 0)
		return negative_errno();
	*ret = (Segment){.data = true, .end = MIN((uint64_t)hole, end)};
	return 0;
}

static int segment_at(Cursor *c, uint64_t pos, uint64_t end, Segment *ret)
{
	return c->fiemap ? segment_fiemap(c, pos, end, ret) : segment_seek(c, pos, end, ret);
}

typedef struct Delta {
	int base_fd, target_fd;
	uint64_t start; /* ranges are clipped to start here */
	uint8_t *a, *b;
	RangeMerger merger;
	const FileRangeSink *sink;
	FileDeltaStats stats;
} Delta;

/* Compares [from, to) (from block-aligned) block by block and reports the blocks that differ. */
static int delta_compare(Delta *d, uint64_t from, uint64_t to)
{
	for (uint64_t pos = from; pos < to;) {
		size_t n = (size_t)MIN((uint64_t)COMPARE_CHUNK, to - pos);
		int r;
		if ((r = sink_check(d->sink)) < 0 ||
		    (r = pread_zero_filled(d->base_fd, d->a, n, pos)) < 0 ||
		    (r = pread_zero_filled(d->target_fd, d->b, n, pos)) < 0)
			return r;
		d->stats.compared += n;
		for (size_t i = 0; i < n; i += FILE_DELTA_BLOCK) {
			size_t k = MIN((size_t)FILE_DELTA_BLOCK, n - i);
			if (memcmp(d->a + i, d->b + i, k) == 0)
				continue;
			uint64_t s = MAX(pos + i, d->start), e = pos + i + k;
			if ((r = range_merger_add(&d->merger, s, e - s)) < 0)
				return r;
		}
		pos += n;
	}
	return 0;
}

static bool cursor_fiemap_works(int fd)
{
	struct fiemap fm = {.fm_length = 1};
	return ioctl(fd, FS_IOC_FIEMAP, &fm) == 0;
}

int file_delta_ranges(int base_fd, int target_fd, uint64_t start, uint64_t end, unsigned flags,
		      const FileRangeSink *sink, FileDeltaStats *ret_stats)
{
	size_t fm_size = sizeof(struct fiemap) + EXTENTS_BATCH * sizeof(struct fiemap_extent);
	bool fiemap = !(flags & FILE_DELTA_NO_FIEMAP) && cursor_fiemap_works(base_fd) &&
		      cursor_fiemap_works(target_fd);
	/* Zeroed: no extent fetched yet, the first segment asks. */
	_cleanup_free_ struct fiemap *fm_a = fiemap ? xcalloc(1, fm_size) : NULL;
	_cleanup_free_ struct fiemap *fm_b = fiemap ? xcalloc(1, fm_size) : NULL;
	_cleanup_free_ uint8_t *a = xmalloc(COMPARE_CHUNK), *b = xmalloc(COMPARE_CHUNK);
	Cursor ca = {.fd = base_fd, .fiemap = fiemap, .fm = fm_a};
	Cursor cb = {.fd = target_fd, .fiemap = fiemap, .fm = fm_b};
	Delta d = {
		.base_fd = base_fd,
		.target_fd = target_fd,
		.start = start,
		.a = a,
		.b = b,
		.merger = {.sink = sink},
		.sink = sink,
		.stats = {.fiemap = fiemap},
	};
	/* Blocks are counted from the file's start: a walk from the middle of one compares it
	 * whole and reports from start on. */
	uint64_t pos = start - start % FILE_DELTA_BLOCK;
	int r;

	while (pos < end) {
		Segment sa, sb;
		if ((r = segment_at(&ca, pos, end, &sa)) < 0 ||
		    (r = segment_at(&cb, pos, end, &sb)) < 0)
			return r;
		uint64_t stop = MIN(sa.end, sb.end);
		if (!sa.data && !sb.data)
			d.stats.holes += stop - pos;
		else if (sa.mapped && sb.mapped && sa.physical == sb.physical &&
			 fiemap_flags_comparable(sa.flags, sb.flags))
			d.stats.shared += stop - pos;
		else {
			/* Whole blocks: a segment may end inside one (extents are the
			 * filesystem's blocks, which may be smaller than ours). */
			uint64_t from = pos - pos % FILE_DELTA_BLOCK;
			uint64_t to = MIN(end, (stop + FILE_DELTA_BLOCK - 1) / FILE_DELTA_BLOCK *
						       FILE_DELTA_BLOCK);
			if ((r = delta_compare(&d, from, to)) < 0)
				return r;
			stop = to;
		}
		pos = stop;
		if ((r = sink_check(sink)) < 0)
			return r;
	}
	if ((r = range_merger_flush(&d.merger)) < 0)
		return r;
	d.stats.changed = d.merger.emitted;
	if (ret_stats)
		*ret_stats = d.stats;
	return 0;
}
