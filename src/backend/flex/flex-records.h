/* SPDX-License-Identifier: Apache-2.0 */
/* What the Flexvolume backend remembers of its volumes. The calls that undo a step carry no
 * volume context, so each step leaves a small JSON record, written before the driver runs (after
 * a crash a record may name a step that did not happen, never the reverse), removed once the
 * step is undone:
 *
 *   DIR/volumes/<hash of the volume id>.json              driver, options, attachments
 *   DIR/nodes/<node>/staged/<hash of the volume id>.json  driver, options, device, mkfs mark
 *   DIR/nodes/<node>/published/<hash of id, target>.json  driver, options, target
 *
 * DIR is POOL/flex (flex_records_dir()). Secrets are never written there. The hash (FNV-1a, 64
 * bits) only names the file: a record holds its whole key and is checked against it on load.
 * Calls block on the filesystem only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "macro.h"
#include "node-use.h"
#include "strmap.h"

/* The folder of the records in a pool directory. */
#define FLEX_RECORDS_FOLDER "flex"

typedef enum FlexRecordKind {
	FLEX_RECORD_VOLUME,    /* controller: attachments, keyed by volume id */
	FLEX_RECORD_STAGED,    /* node: NodeStage, keyed by volume id */
	FLEX_RECORD_PUBLISHED, /* node: NodePublish, keyed by volume id and target path */
} FlexRecordKind;

typedef struct FlexAttachment {
	char *node, *device;
	bool done;   /* attach answered; false: started, outcome unknown */
	bool attach; /* made by an attachable driver: detach is owed (else nothing to call) */
} FlexAttachment;

/* A volume as its driver sees it, and what was done with it. Strings are never NULL. */
typedef struct FlexRecord {
	char *volume_id;
	char *driver;
	char *fs_type;
	bool read_only;
	char *volume_name; /* kubernetes.io/pvOrVolumeName; detach's <volumeName> */
	Strmap options; /* the user's: volume_context minus csi.storage.k8s.io/ and flexvolume. */
	char *path;	/* staged: the staging path; published: the target path */
	char *staging_path;  /* published: the staging path it came with ("" none) */
	char *device;	     /* staged: the device waitforattach named ("" none) */
	bool device_mounted; /* staged: mountdevice ran (the driver was attachable) */
	/* staged: the mark of volplug's own mkfs of the device (node-use.h's "mkfs", made by
	 * the mountdevice fallback); a "started" one keeps the record after an unstage */
	NodeMkfs mkfs;
	char *mkfs_fstype, *mkfs_uuid; /* NODE_MKFS_NONE: "" */
	uint64_t size; /* bytes: as the last expansion left it, else flexvolume.size; 0 unknown */
	FlexAttachment *attachments; /* volume */
	size_t n_attachments;
} FlexRecord;

/* A record of volume_id with every string "" (volume_name: the id). Never fails. */
FlexRecord *flex_record_new(const char *volume_id);
FlexRecord *flex_record_free(FlexRecord *rec);
DEFINE_TRIVIAL_CLEANUP_FUNC(FlexRecord *, flex_record_free);

/* Replaces the string *field by a copy of value (NULL: ""). */
void flex_record_set(char **field, const char *value);

/* The record as its file holds it (compact JSON, sorted keys); NULL when a string is not UTF-8
 * (the record could not be read back). */
char *flex_record_to_json(const FlexRecord *rec);
/* Parses a record file; absent or mistyped keys read as empty. -EBADMSG when it is not a JSON
 * object. */
int flex_record_from_json(const char *text, size_t len, FlexRecord **ret);

/* The records a process keeps: its controller's and its node's. */
typedef struct FlexRecords {
	char *dir;  /* DIR above */
	char *node; /* the node's folder: its id when that is a plain name, else node-<hash> */
} FlexRecords;

/* DIR of the pool at pool_path. */
char *flex_records_dir(const char *pool_path);
void flex_records_init(FlexRecords *s, const char *dir, const char *node_id);
void flex_records_done(FlexRecords *s);

/* The record of (volume_id, path; path for FLEX_RECORD_PUBLISHED only): -ENOENT when there is
 * none, -EBADMSG when its file is damaged. */
int flex_record_load(const FlexRecords *s, FlexRecordKind k, const char *volume_id,
		     const char *path, FlexRecord **ret);
/* Writes rec atomically and durably, making its folders. -EINVAL when a string of it is not
 * UTF-8. */
int flex_record_save(const FlexRecords *s, FlexRecordKind k, const FlexRecord *rec);
/* Removes rec's file; 0 when there is none. */
int flex_record_remove(const FlexRecords *s, FlexRecordKind k, const FlexRecord *rec);

/* Whether any record of this process names volume_id: its controller record, its staged record
 * or one of its published ones. A file under the volume's name that cannot be read counts (the
 * operation then says what is wrong with it). */
bool flex_records_know(const FlexRecords *s, const char *volume_id);

/* How many records of kind k this process has (the node's own for staged and published): a
 * count of their files, -1 when their folder cannot be read. */
int64_t flex_records_count(const FlexRecords *s, FlexRecordKind k);

/* What is wrong under DIR, changing nothing. */
typedef struct FlexRecordsReport {
	size_t records, problems;
	char *text; /* one line per problem, each naming the file as FOLDER/... */
} FlexRecordsReport;

/* Reads every record under dir (absent: none, no problem) and reports files that are damaged,
 * stored under another key's name, name no volume or driver, left by an interrupted write, or
 * not records at all. Returns 0 (problems counted in the report) or a negative errno when dir
 * exists but cannot be read. */
int flex_records_check(const char *dir, FlexRecordsReport *ret);
void flex_records_report_done(FlexRecordsReport *r);
