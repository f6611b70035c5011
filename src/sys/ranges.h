/* SPDX-License-Identifier: Apache-2.0 */
/* The byte ranges of files: where a file holds data (SEEK_DATA/SEEK_HOLE), and where two files
 * differ (FIEMAP, skipping what both share physically, then the bytes of the rest compared).
 * What changed-block tracking reports (docs/snapshots.md, "Changed-block tracking"). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

/* The unit of comparison: a range that differs is reported in whole blocks of this size
 * (the last one of a file may be shorter). */
#define FILE_DELTA_BLOCK 4096u

/* Where ranges go, in increasing order of offset and never overlapping. */
typedef struct FileRangeSink {
	/* Takes one range; a negative return stops the walk, which returns it. */
	int (*range)(uint64_t offset, uint64_t length, void *userdata);
	/* Asked between pieces of work (every MiB compared, every extent batch): a negative
	 * return (-ECANCELED, -ETIMEDOUT) stops the walk, which returns it. May be NULL. */
	int (*check)(void *userdata);
	void *userdata;
} FileRangeSink;

/* Joins adjacent ranges before they go to a sink: ranges added in increasing order; one that
 * starts where the last one ended extends it. */
typedef struct RangeMerger {
	const FileRangeSink *sink;
	uint64_t offset, length; /* the range held back; length 0: none */
	uint64_t emitted;	 /* bytes handed on */
} RangeMerger;

/* Adds a range (length 0: nothing). Returns 0 or the sink's negative return. */
int range_merger_add(RangeMerger *m, uint64_t offset, uint64_t length);
/* Hands on the range held back. */
int range_merger_flush(RangeMerger *m);

/* The ranges of fd that hold data, within [start, end), clipped to it: SEEK_DATA/SEEK_HOLE
 * (all of it where the filesystem cannot say). Returns 0 or a negative errno (the sink's). */
int file_data_ranges(int fd, uint64_t start, uint64_t end, const FileRangeSink *sink);

typedef enum FileDeltaFlags {
	FILE_DELTA_NO_FIEMAP = 1 << 0, /* never ask FIEMAP: compare every byte either holds */
} FileDeltaFlags;

typedef struct FileDeltaStats {
	bool fiemap;	   /* FIEMAP answered for both files */
	uint64_t shared;   /* bytes skipped: the same physical extent in both */
	uint64_t holes;	   /* bytes skipped: a hole in both */
	uint64_t compared; /* bytes read from each file and compared */
	uint64_t changed;  /* bytes reported */
} FileDeltaStats;

/* The ranges where target differs from base, within [start, end) and clipped to it, in whole
 * FILE_DELTA_BLOCK blocks: exact at that grain, never less. Bytes beyond base's size count as
 * zeros. What both files map to the same physical extent (a reflink's shared extents, by
 * FIEMAP) or neither holds (holes) is skipped unread; the rest is read from both and
 * compared, a MiB at a time (two buffers of 1 MiB whatever the size). Returns 0 or a negative
 * errno: a read's, or the sink's. *ret_stats (may be NULL) is written on success. Blocks. */
int file_delta_ranges(int base_fd, int target_fd, uint64_t start, uint64_t end, unsigned flags,
		      const FileRangeSink *sink, FileDeltaStats *ret_stats);

/* Whether two FIEMAP extents that map the same logical range at the same physical bytes read
 * the same for certain: neither in a state (delayed, encoded, inline, unknown) where the
 * physical address does not say what a read returns, and both written or both unwritten. */
bool fiemap_flags_comparable(uint32_t a, uint32_t b);
