/* SPDX-License-Identifier: Apache-2.0 */
/* Volumes served by Flexvolume drivers, called exactly as the kubelet and the
 * controller-manager call them (FLEXVOLUME.md):
 *
 *   ControllerPublishVolume    attach <json> <node>           attachable drivers only;
 *                              isattached <json> <node>       to verify a retry
 *   ControllerUnpublishVolume  detach <volumeName> <node>
 *   NodeStageVolume            waitforattach <device> <json>, then
 *                              mountdevice <staging> <device> <json>   attachable only
 *   NodePublishVolume          mount <target> <json>          pod info, secrets, fsGroup
 *   NodeUnpublishVolume        unmount <target>
 *   NodeUnstageVolume          unmountdevice <staging>
 *   ControllerExpandVolume     expandvolume;  NodeExpandVolume  expandfs
 *
 * with Kubernetes' fallbacks for "Not supported". The calls that undo a step carry no
 * volume_context, so each step leaves a small JSON record in the pool, written before the
 * driver runs (after a crash a record may name a step that did not happen, never the
 * reverse), removed once the step is undone:
 *
 *   POOL/flex/volumes/<hash of the volume id>.json              driver, options, attachments
 *   POOL/flex/nodes/<node>/staged/<hash of the volume id>.json  driver, options, device
 *   POOL/flex/nodes/<node>/published/<hash of id, target>.json  driver, options, target
 *
 * Secrets are never written there. Whether a path is mounted is read from the machine, never
 * remembered, so retries after a restart find their finished work. */
#include <ctype.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/stat.h>

#include "alloc.h"
#include "error-util.h"
#include "blockfs.h"
#include "csi-util.h"
#include "fileio.h"
#include "flex-volume.h"
#include "hash-util.h"
#include "log.h"
#include "mount-util.h"
#include "node.h"
#include "ownership.h"
#include "parse-util.h"
#include "pinned-path.h"
#include "registry.h"

#define CONTEXT_VOLUME_NAME "flexvolume.volumeName"
#define CONTEXT_FSGROUP_POLICY "flexvolume.fsGroupChangePolicy"
#define CONTEXT_PREFIX "flexvolume."
#define CSI_PREFIX "csi.storage.k8s.io/"
#define PUBLISH_CONTEXT_DEVICE "devicePath"
#define DEFAULT_FSTYPE "ext4"
#define RECORD_MAX (256 * 1024)

/* ---- records ---- */

typedef enum RecordKind {
	RECORD_VOLUME,	  /* controller: attachments, keyed by volume id */
	RECORD_STAGED,	  /* node: NodeStage, keyed by volume id */
	RECORD_PUBLISHED, /* node: NodePublish, keyed by volume id and target path */
} RecordKind;

typedef struct Attachment {
	char *node, *device;
	bool done; /* attach answered; false: started, outcome unknown */
} Attachment;

/* A volume as its driver sees it, and what was done with it. Strings are never NULL. */
typedef struct Record {
	char *volume_id;
	char *driver;
	char *fs_type;
	bool read_only;
	char *volume_name; /* kubernetes.io/pvOrVolumeName; detach's <volumeName> */
	Strmap options; /* the user's: volume_context minus csi.storage.k8s.io/ and flexvolume. */
	char *path;	/* staged: the staging path; published: the target path */
	char *staging_path;	 /* published: the staging path it came with ("" none) */
	char *device;		 /* staged: the device waitforattach named ("" none) */
	bool device_mounted;	 /* staged: mountdevice ran (the driver was attachable) */
	uint64_t size;		 /* bytes after the last expansion; 0 unknown */
	Attachment *attachments; /* volume */
	size_t n_attachments;
} Record;

static Record *record_free(Record *rec)
{
	if (!rec)
		return NULL;
	free(rec->volume_id);
	free(rec->driver);
	free(rec->fs_type);
	free(rec->volume_name);
	strmap_done(&rec->options);
	free(rec->path);
	free(rec->staging_path);
	free(rec->device);
	for (size_t i = 0; i < rec->n_attachments; i++) {
		free(rec->attachments[i].node);
		free(rec->attachments[i].device);
	}
	free(rec->attachments);
	free(rec);
	return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Record *, record_free);

static Record *record_new(const char *volume_id)
{
	Record *rec = xnew0(Record, 1);
	rec->volume_id = xstrdup(volume_id);
	rec->driver = xstrdup("");
	rec->fs_type = xstrdup("");
	rec->volume_name = xstrdup(volume_id);
	rec->path = xstrdup("");
	rec->staging_path = xstrdup("");
	rec->device = xstrdup("");
	return rec;
}

static void set_str(char **field, const char *value)
{
	free(*field);
	*field = xstrdup(value ?: "");
}

/* FNV-1a, 64 bits: record names only; a record holds its full key and is checked on load. */
static uint64_t key_hash(const char *a, const char *b)
{
	uint64_t h = fnv1a64_string(a, 0);
	if (b) {
		h = fnv1a64_update(h, "\xff", 1); /* never in UTF-8: a separator */
		h = fnv1a64_update(h, b, strlen(b));
	}
	return h;
}

/* The node's record folder: its id when that is a plain name, else a hash of it. */
static char *node_dir_name(const char *node)
{
	bool plain = *node && *node != '.' && strlen(node) <= 128;
	for (const char *p = node; plain && *p; p++)
		plain = isalnum((unsigned char)*p) || strchr("._-", *p);
	return plain ? xstrdup(node)
		     : xasprintf("node-%016llx", (unsigned long long)key_hash(node, NULL));
}

static int openat_dir(int parent, const char *name, bool create, int *ret_fd)
{
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && create) {
		if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST)
			return negative_errno();
		fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return negative_errno();
	*ret_fd = fd;
	return 0;
}

/* Opens (making it when create) the folder of a kind of record. -ENOENT when absent. */
static int record_dir(Driver *d, RecordKind k, bool create, int *ret_fd)
{
	_cleanup_free_ char *node = node_dir_name(d->node_id);
	const char *parts[5];
	size_t n = 0;

	parts[n++] = "flex";
	if (k == RECORD_VOLUME)
		parts[n++] = "volumes";
	else {
		parts[n++] = "nodes";
		parts[n++] = node;
		parts[n++] = k == RECORD_STAGED ? "staged" : "published";
	}
	int fd = open(d->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return negative_errno();
	for (size_t i = 0; i < n; i++) {
		int next;
		int r = openat_dir(fd, parts[i], create, &next);
		close(fd);
		if (r < 0)
			return r;
		fd = next;
	}
	*ret_fd = fd;
	return 0;
}

static void record_file_name(RecordKind k, const char *volume_id, const char *path,
			     char ret[static 32])
{
	snprintf(ret, 32, "%016llx.json",
		 (unsigned long long)key_hash(volume_id, k == RECORD_PUBLISHED ? path : NULL));
}

static json_t *json_str(const char *s, bool *bad)
{
	json_t *j = json_string(s ?: "");
	if (!j) { /* not UTF-8: the record could not be read back */
		*bad = true;
		j = json_string("");
	}
	return j;
}

static char *record_to_json(const Record *rec)
{
	json_t *o = json_object(), *opts = json_object(), *atts = json_array();
	bool bad = false;

	json_object_set_new(o, "volume_id", json_str(rec->volume_id, &bad));
	json_object_set_new(o, "driver", json_str(rec->driver, &bad));
	json_object_set_new(o, "fs_type", json_str(rec->fs_type, &bad));
	json_object_set_new(o, "read_only", json_boolean(rec->read_only));
	json_object_set_new(o, "volume_name", json_str(rec->volume_name, &bad));
	for (size_t i = 0; i < rec->options.n; i++)
		json_object_set_new(opts, rec->options.keys[i],
				    json_str(rec->options.values[i], &bad));
	json_object_set_new(o, "options", opts);
	json_object_set_new(o, "path", json_str(rec->path, &bad));
	json_object_set_new(o, "staging_path", json_str(rec->staging_path, &bad));
	json_object_set_new(o, "device", json_str(rec->device, &bad));
	json_object_set_new(o, "device_mounted", json_boolean(rec->device_mounted));
	json_object_set_new(o, "size", json_integer((json_int_t)rec->size));
	for (size_t i = 0; i < rec->n_attachments; i++) {
		json_t *a = json_object();
		json_object_set_new(a, "node", json_str(rec->attachments[i].node, &bad));
		json_object_set_new(a, "device", json_str(rec->attachments[i].device, &bad));
		json_object_set_new(a, "done", json_boolean(rec->attachments[i].done));
		json_array_append_new(atts, a);
	}
	json_object_set_new(o, "attachments", atts);
	char *s = bad ? NULL : json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

static const char *json_get_str(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : "";
}

static int record_from_json(const char *text, size_t len, Record **ret)
{
	json_t *o = json_loadb(text, len, 0, NULL), *v;
	const char *key;
	size_t i;

	if (!json_is_object(o)) {
		json_decref(o);
		return -EBADMSG;
	}
	Record *rec = record_new(json_get_str(o, "volume_id"));
	set_str(&rec->driver, json_get_str(o, "driver"));
	set_str(&rec->fs_type, json_get_str(o, "fs_type"));
	rec->read_only = json_is_true(json_object_get(o, "read_only"));
	set_str(&rec->volume_name, json_get_str(o, "volume_name"));
	json_object_foreach (json_object_get(o, "options"), key, v)
		if (json_is_string(v))
			strmap_set(&rec->options, key, json_string_value(v));
	set_str(&rec->path, json_get_str(o, "path"));
	set_str(&rec->staging_path, json_get_str(o, "staging_path"));
	set_str(&rec->device, json_get_str(o, "device"));
	rec->device_mounted = json_is_true(json_object_get(o, "device_mounted"));
	v = json_object_get(o, "size");
	rec->size = json_is_integer(v) && json_integer_value(v) > 0 ? json_integer_value(v) : 0;
	json_t *atts = json_object_get(o, "attachments");
	rec->attachments = xnew0(Attachment, json_array_size(atts) + 1);
	json_array_foreach (atts, i, v) {
		Attachment *a = &rec->attachments[rec->n_attachments++];
		a->node = xstrdup(json_get_str(v, "node"));
		a->device = xstrdup(json_get_str(v, "device"));
		a->done = json_is_true(json_object_get(v, "done"));
	}
	json_decref(o);
	*ret = rec;
	return 0;
}

/* The record of (volume_id, path): -ENOENT when there is none. */
static int record_load(Driver *d, RecordKind k, const char *volume_id, const char *path,
		       Record **ret)
{
	_cleanup_close_ int dir = -EBADF;
	_cleanup_free_ char *text = NULL;
	char name[32];
	size_t len;
	Record *rec;

	int r = record_dir(d, k, false, &dir);
	if (r < 0)
		return r;
	record_file_name(k, volume_id, path, name);
	r = read_file_at(dir, name, RECORD_MAX, &text, &len);
	if (r < 0)
		return r;
	r = record_from_json(text, len, &rec);
	if (r < 0)
		return r;
	/* A hash collision is another volume's record: not ours. */
	if (strcmp(rec->volume_id, volume_id) != 0 ||
	    (k == RECORD_PUBLISHED && strcmp(rec->path, path) != 0)) {
		record_free(rec);
		return -ENOENT;
	}
	*ret = rec;
	return 0;
}

static int record_save(Driver *d, RecordKind k, const Record *rec)
{
	_cleanup_close_ int dir = -EBADF;
	_cleanup_free_ char *text = record_to_json(rec);
	char name[32];

	if (!text)
		return -EINVAL;
	int r = record_dir(d, k, true, &dir);
	if (r < 0)
		return r;
	record_file_name(k, rec->volume_id, rec->path, name);
	return write_file_atomic_at(dir, name, text, strlen(text), 0600);
}

static int record_remove(Driver *d, RecordKind k, const Record *rec)
{
	_cleanup_close_ int dir = -EBADF;
	char name[32];

	int r = record_dir(d, k, false, &dir);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return r;
	record_file_name(k, rec->volume_id, rec->path, name);
	if (unlinkat(dir, name, 0) < 0)
		return errno == ENOENT ? 0 : negative_errno();
	return fsync_dir(dir);
}

static int save_or_fail(char **ret_error, Driver *d, RecordKind k, const Record *rec)
{
	int r = record_save(d, k, rec);
	if (r < 0)
		return errorf(ret_error, r == -EINVAL ? -EINVAL : -EIO,
			      "volume %s: recording its Flexvolume state in %s/flex failed: %s",
			      rec->volume_id, d->state_dir,
			      r == -EINVAL ? "volume_context is not UTF-8" : strerror(-r));
	return 0;
}

static int load_or_fail(char **ret_error, Driver *d, RecordKind k, const char *volume_id,
			const char *path, Record **ret)
{
	int r = record_load(d, k, volume_id, path, ret);
	if (r == -ENOENT)
		return 1;
	if (r < 0)
		return errorf(ret_error, -EIO,
			      "volume %s: reading its Flexvolume record in %s/flex failed: %s",
			      volume_id, d->state_dir, strerror(-r));
	return 0;
}

static int remove_or_fail(char **ret_error, Driver *d, RecordKind k, const Record *rec)
{
	int r = record_remove(d, k, rec);
	if (r < 0)
		return errorf(ret_error, -EIO,
			      "volume %s: removing its Flexvolume record failed: %s",
			      rec->volume_id, strerror(-r));
	return 0;
}

/* ---- requests ---- */

typedef struct StringEntry {
	ProtobufCMessage base;
	char *key, *value;
} StringEntry;

static const char *map_get(void *const *entries, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const StringEntry *e = entries[i];
		if (strcmp(e->key, key) == 0)
			return e->value;
	}
	return NULL;
}

static bool startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool capability_read_only(const Csi__V1__VolumeCapability *cap)
{
	Csi__V1__VolumeCapability__AccessMode__Mode m = cap->access_mode->mode;
	return m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
	       m == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
}

/* Flexvolume serves filesystems in any access mode: the driver decides what it can share. */
static int capability_check_flex(char **ret_error, const Csi__V1__VolumeCapability *cap)
{
	if (!cap)
		return errorf(ret_error, -EINVAL, "volume_capability: missing");
	if (cap->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK)
		return errorf(ret_error, -EINVAL,
			      "volume_capability: Flexvolume drivers serve filesystems, not raw "
			      "block devices");
	if (cap->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT)
		return errorf(ret_error, -EINVAL, "volume_capability: access_type must be mount");
	if (!cap->access_mode ||
	    cap->access_mode->mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN)
		return errorf(ret_error, -EINVAL, "volume_capability.access_mode: missing");
	return 0;
}

/* The volume as its driver will see it, from a request's volume_context and capability. */
static int record_from_context(char **ret_error, const char *volume_id, void *const *ctx, size_t n,
			       const Csi__V1__VolumeCapability *cap, bool read_only, Record **ret)
{
	_cleanup_free_ char *err = NULL;
	const char *driver = map_get(ctx, n, FLEX_CONTEXT_DRIVER);

	if (flex_driver_name_validate(driver, &err) < 0)
		return errorf(ret_error, -EINVAL, "volume_context[%s]: %s", FLEX_CONTEXT_DRIVER,
			      err);
	Record *rec = record_new(volume_id);
	set_str(&rec->driver, driver);
	if (cap && cap->mount && cap->mount->fs_type)
		set_str(&rec->fs_type, cap->mount->fs_type);
	rec->read_only = read_only;
	const char *name = map_get(ctx, n, CONTEXT_VOLUME_NAME);
	if (name && *name)
		set_str(&rec->volume_name, name);
	for (size_t i = 0; i < n; i++) {
		const StringEntry *e = ctx[i];
		if (!startswith(e->key, CSI_PREFIX) && !startswith(e->key, CONTEXT_PREFIX))
			strmap_set(&rec->options, e->key, e->value);
	}
	*ret = rec;
	return 0;
}

/* The options JSON's inputs; view->options points into rec and *ret_options. */
static void spec_view(const Record *rec, FlexVolumeSpec *view, FlexOption **ret_options)
{
	FlexOption *o = xnew0(FlexOption, rec->options.n + 1);
	for (size_t i = 0; i < rec->options.n; i++)
		o[i] = (FlexOption){rec->options.keys[i], rec->options.values[i]};
	*view = (FlexVolumeSpec){
		.fs_type = rec->fs_type,
		.read_only = rec->read_only,
		.pv_or_volume_name = rec->volume_name,
		.options = o,
		.n_options = rec->options.n,
	};
	*ret_options = o;
}

/* ---- drivers ---- */

/* A new reference to the loaded driver, or an error naming it and why it cannot serve. */
static int driver_get(char **ret_error, Driver *d, const Record *rec, FlexDriver **ret)
{
	_cleanup_free_ char *err = NULL;

	if (!d->flex)
		return errorf(ret_error, -ENOEXEC,
			      "volume %s needs Flexvolume driver \"%s\", but Flexvolume drivers "
			      "are off on this daemon (see --flexvolume-dir and its log)",
			      rec->volume_id, rec->driver);
	int r = flex_registry_get_loaded(d->flex, rec->driver, ret, &err);
	if (r < 0)
		return errorf(ret_error, r, "volume %s: %s", rec->volume_id, err);
	return 0;
}

/* Runs one command. Returns 0, -EOPNOTSUPP for "Not supported" (no message set: the caller
 * falls back or fails), or another error with the driver's message set on call. */
static int driver_run(char **ret_error, Driver *d, FlexDriver *drv, const Record *rec,
		      FlexCommand cmd, const FlexCallArgs *args, FlexReply *ret)
{
	_cleanup_free_ char *err = NULL;

	int r = flex_driver_call(drv, d->flex_call, cmd, args, ret, &err);
	if (r == -EOPNOTSUPP) {
		log_info("volume %s: driver %s %s: Not supported, doing what Kubernetes does "
			 "instead",
			 rec->volume_id, drv->name, flex_command_to_string(cmd));
		return r;
	}
	if (r < 0)
		return errorf(ret_error, r, "volume %s: %s", rec->volume_id, err ?: strerror(-r));
	return 0;
}

static int not_supported(char **ret_error, const Record *rec, const FlexDriver *drv,
			 FlexCommand cmd, const char *why)
{
	return errorf(ret_error, -EOPNOTSUPP, "volume %s: driver \"%s\" %s: Not supported, %s",
		      rec->volume_id, drv->name, flex_command_to_string(cmd), why);
}

/* What is at a request path, never following a symlink on the way (pinned-path.h). */
static int place_stat(const char *path, PathObject *ret)
{
	PinnedPath pin = PINNED_PATH_NULL;

	int r = pinned_path_open(path, &pin);
	if (r >= 0)
		r = pinned_path_stat(&pin, ret);
	pinned_path_done(&pin);
	return r;
}

/* Opens the object at a request path through its pinned parent (kept in *pin). */
static int open_place(const char *path, int flags, PinnedPath *pin)
{
	int r = pinned_path_open(path, pin);
	return r < 0 ? r : pinned_path_open_object(pin, flags);
}

static bool path_exists(const char *path)
{
	PathObject o;
	return place_stat(path, &o) == 0;
}

static bool mounted(const char *path)
{
	PathObject o;
	return place_stat(path, &o) == 0 && o.mount_root;
}

/* Makes the directory a driver mounts on, through its pinned parent. */
static int make_place(char **ret_error, const char *field, const char *path)
{
	PinnedPath pin = PINNED_PATH_NULL;

	int r = pinned_path_open(path, &pin);
	if (r >= 0 && mkdirat(pin.parent_fd, pin.base, 0750) < 0 && errno != EEXIST)
		r = negative_errno();
	pinned_path_done(&pin);
	if (r < 0)
		return errorf(ret_error, r, "%s: cannot create %s: %s", field, path, strerror(-r));
	return 0;
}

/* Removes the (empty) directory at a recorded path, through its pinned parent. */
static int remove_place(const char *path)
{
	PinnedPath pin = PINNED_PATH_NULL;

	int r = pinned_path_open(path, &pin);
	if (r >= 0 && unlinkat(pin.parent_fd, pin.base, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = negative_errno();
	pinned_path_done(&pin);
	return r == -ENOENT ? 0 : r;
}

/* Kubernetes' fallback for unmount and unmountdevice: unmount, then remove the dir. The path is
 * the one recorded when the volume was put there; it is reached without following symlinks. */
static int unmount_and_remove(char **ret_error, const Record *rec, const char *field,
			      const char *path)
{
	PinnedPath pin = PINNED_PATH_NULL;
	int r = pinned_path_open(path, &pin);

	for (int i = 0; r >= 0 && i < 64; i++)
		if ((r = umount_at(&pin)) == 0)
			break;
	pinned_path_done(&pin);
	if (r < 0)
		return errorf(ret_error, r, "volume %s: %s: unmounting %s failed: %s",
			      rec->volume_id, field, path, strerror(-r));
	if ((r = remove_place(path)) < 0)
		return errorf(ret_error, r, "volume %s: %s: removing %s failed: %s", rec->volume_id,
			      field, path, strerror(-r));
	return 0;
}

/* After the driver's op (unmount, unmountdevice) answered Success: nothing may be mounted at
 * path any more; then its directory goes, as Kubernetes removes it. */
static int remove_unmounted(char **ret_error, const Record *rec, const char *op, const char *field,
			    const char *path)
{
	if (mounted(path))
		return errorf(
			ret_error, -EBUSY,
			"volume %s: driver \"%s\" %s answered Success but %s is still mounted",
			rec->volume_id, rec->driver, op, path);
	int r = remove_place(path);
	if (r < 0)
		return errorf(ret_error, r, "%s: removing %s failed: %s", field, path,
			      strerror(-r));
	return 0;
}

/* ---- controller ---- */

static ProtobufCMessage *publish_reply(const char *device)
{
	Csi__V1__ControllerPublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerPublishVolumeResponse, 1);
	Strmap m = {};

	csi__v1__controller_publish_volume_response__init(resp);
	if (device && *device)
		strmap_set(&m, PUBLISH_CONTEXT_DEVICE, device);
	resp->publish_context = pbmap_from_strmap(
		&csi__v1__controller_publish_volume_response__publish_context_entry__descriptor, &m,
		&resp->n_publish_context);
	strmap_done(&m);
	return &resp->base;
}

static Attachment *attachment_find(Record *rec, const char *node)
{
	for (size_t i = 0; i < rec->n_attachments; i++)
		if (strcmp(rec->attachments[i].node, node) == 0)
			return &rec->attachments[i];
	return NULL;
}

/* An attachment already made: isattached says whether it still holds. 1 yes, 0 no. */
static int attachment_verify(char **ret_error, Driver *d, FlexDriver *drv, const Record *rec,
			     const FlexCallArgs *args)
{
	FlexReply rep;
	int r = driver_run(ret_error, d, drv, rec, FLEX_ISATTACHED, args, &rep);
	if (r == -EOPNOTSUPP)
		return 1; /* Kubernetes assumes attached */
	if (r < 0)
		return r;
	bool attached = !rep.has_attached || rep.attached;
	flex_reply_done(&rep);
	return attached;
}

int flex_controller_publish(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			    char **ret_error)
{
	const Csi__V1__ControllerPublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL, *old = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	FlexReply rep;
	int e;

	if (!map_get((void *const *)r->volume_context, r->n_volume_context, FLEX_CONTEXT_DRIVER))
		return 1;
	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if (!r->node_id || !*r->node_id)
		return errorf(ret_error, -EINVAL, "node_id: missing");
	if ((e = capability_check_flex(ret_error, r->volume_capability)) < 0)
		return e;
	e = record_from_context(ret_error, r->volume_id, (void *const *)r->volume_context,
				r->n_volume_context, r->volume_capability,
				r->readonly || capability_read_only(r->volume_capability), &rec);
	if (e < 0)
		return e;
	if ((e = driver_get(ret_error, d, rec, &drv)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	if ((e = load_or_fail(ret_error, d, RECORD_VOLUME, r->volume_id, NULL, &old)) < 0)
		return e;
	if (old) { /* keep what earlier publishes did */
		rec->attachments = TAKE_PTR(old->attachments);
		rec->n_attachments = old->n_attachments;
		old->n_attachments = 0;
		rec->size = old->size;
	}
	if (!drv->capabilities.attach) {
		/* Nothing to attach; the record still lets expansion find the driver. */
		if ((e = save_or_fail(ret_error, d, RECORD_VOLUME, rec)) < 0)
			return e;
		log_info("volume %s: published to node %s (Flexvolume driver %s does not attach)",
			 rec->volume_id, r->node_id, drv->name);
		*ret = publish_reply(NULL);
		return 0;
	}
	spec_view(rec, &spec, &opts);
	FlexCallArgs args = {.spec = &spec, .node_name = r->node_id};
	Attachment *a = attachment_find(rec, r->node_id);
	if (a && a->done) {
		e = attachment_verify(ret_error, d, drv, rec, &args);
		if (e < 0)
			return e;
		if (e > 0) {
			*ret = publish_reply(a->device);
			return 0;
		}
		log_info("volume %s: driver %s says it is no longer attached to %s: attaching "
			 "again",
			 rec->volume_id, drv->name, r->node_id);
	}
	if (!a) {
		rec->attachments =
			xrealloc(rec->attachments, (rec->n_attachments + 1) * sizeof(Attachment));
		a = &rec->attachments[rec->n_attachments++];
		*a = (Attachment){.node = xstrdup(r->node_id), .device = xstrdup("")};
	}
	a->done = false;
	/* Written first: a detach is owed from the moment attach may have run. */
	if ((e = save_or_fail(ret_error, d, RECORD_VOLUME, rec)) < 0)
		return e;
	e = driver_run(ret_error, d, drv, rec, FLEX_ATTACH, &args, &rep);
	if (e < 0 && e != -EOPNOTSUPP)
		return e;
	set_str(&a->device, e == 0 ? rep.device : ""); /* Not supported: no device */
	if (e == 0)
		flex_reply_done(&rep);
	a->done = true;
	if ((e = save_or_fail(ret_error, d, RECORD_VOLUME, rec)) < 0)
		return e;
	log_info("volume %s: attached to node %s by Flexvolume driver %s%s%s", rec->volume_id,
		 r->node_id, drv->name, *a->device ? " as " : "", a->device);
	*ret = publish_reply(a->device);
	return 0;
}

int flex_controller_unpublish(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			      char **ret_error)
{
	const Csi__V1__ControllerUnpublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return 1;
	if ((e = load_or_fail(ret_error, d, RECORD_VOLUME, r->volume_id, NULL, &rec)) != 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	record_free(TAKE_PTR(rec)); /* again, under the hold */
	if ((e = load_or_fail(ret_error, d, RECORD_VOLUME, r->volume_id, NULL, &rec)) != 0)
		return e;
	for (size_t i = 0; i < rec->n_attachments;) {
		Attachment *a = &rec->attachments[i];
		/* No node: detach from every node, as the spec says. */
		if (r->node_id && *r->node_id && strcmp(a->node, r->node_id) != 0) {
			i++;
			continue;
		}
		if (!drv && (e = driver_get(ret_error, d, rec, &drv)) < 0)
			return e;
		FlexCallArgs args = {.volume_name = rec->volume_name, .node_name = a->node};
		e = driver_run(ret_error, d, drv, rec, FLEX_DETACH, &args, NULL);
		if (e < 0 && e != -EOPNOTSUPP) /* Not supported: success, like Kubernetes */
			return e;
		log_info("volume %s: detached from node %s by Flexvolume driver %s", rec->volume_id,
			 a->node, drv->name);
		free(a->node);
		free(a->device);
		memmove(a, a + 1, (rec->n_attachments - i - 1) * sizeof(Attachment));
		rec->n_attachments--;
		if ((e = save_or_fail(ret_error, d, RECORD_VOLUME, rec)) < 0)
			return e;
	}
	Csi__V1__ControllerUnpublishVolumeResponse *resp =
		xnew0(Csi__V1__ControllerUnpublishVolumeResponse, 1);
	csi__v1__controller_unpublish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

static int requested_size(char **ret_error, const Csi__V1__CapacityRange *range, bool required,
			  uint64_t *ret)
{
	if (!range) {
		if (required)
			return errorf(ret_error, -EINVAL, "capacity_range: missing");
		*ret = 0;
		return 0;
	}
	if (range->required_bytes < 0 || range->limit_bytes < 0)
		return errorf(ret_error, -EINVAL, "capacity_range: bytes must not be negative");
	if (range->limit_bytes > 0 && range->required_bytes > range->limit_bytes)
		return errorf(ret_error, -ERANGE,
			      "capacity_range: required_bytes %lld exceeds limit_bytes %lld",
			      (long long)range->required_bytes, (long long)range->limit_bytes);
	*ret = (uint64_t)(range->required_bytes > 0 ? range->required_bytes : range->limit_bytes);
	if (required && *ret == 0)
		return errorf(ret_error, -EINVAL, "capacity_range: no size given");
	return 0;
}

int flex_controller_expand(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			   char **ret_error)
{
	const Csi__V1__ControllerExpandVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	uint64_t size;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return 1;
	if ((e = load_or_fail(ret_error, d, RECORD_VOLUME, r->volume_id, NULL, &rec)) != 0)
		return e;
	if ((e = requested_size(ret_error, r->capacity_range, true, &size)) < 0)
		return e;
	if ((e = driver_get(ret_error, d, rec, &drv)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "vol:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	spec_view(rec, &spec, &opts);
	/* The device mount path lives on the node: the controller has none to give. */
	FlexCallArgs args = {
		.spec = &spec,
		.device_mount_path = "",
		.new_size = size,
		.old_size = rec->size,
	};
	e = driver_run(ret_error, d, drv, rec, FLEX_EXPANDVOLUME, &args, NULL);
	if (e < 0 && e != -EOPNOTSUPP) /* Not supported: success, like Kubernetes */
		return e;
	rec->size = size;
	if ((e = save_or_fail(ret_error, d, RECORD_VOLUME, rec)) < 0)
		return e;
	log_info("volume %s: expanded to %llu bytes by Flexvolume driver %s", rec->volume_id,
		 (unsigned long long)size, drv->name);
	Csi__V1__ControllerExpandVolumeResponse *resp =
		xnew0(Csi__V1__ControllerExpandVolumeResponse, 1);
	csi__v1__controller_expand_volume_response__init(resp);
	resp->capacity_bytes = (int64_t)size;
	resp->node_expansion_required = drv->capabilities.requires_fs_resize;
	*ret = &resp->base;
	return 0;
}

/* ---- node ---- */

/* Kubernetes' fallback for mountdevice: format the device when blank, then mount it. */
static int mountdevice_fallback(char **ret_error, const Record *rec, const char *dev,
				const char *staging)
{
	_cleanup_free_ char *found = NULL, *err = NULL;
	const char *fstype = *rec->fs_type ? rec->fs_type : DEFAULT_FSTYPE;

	int e = blockfs_probe(dev, &found);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: probing %s failed: %s", rec->volume_id, dev,
			      strerror(-e));
	if (!*found) {
		if (rec->read_only)
			return errorf(ret_error, -EROFS,
				      "volume %s: %s is blank and the volume is read-only: not "
				      "formatting it",
				      rec->volume_id, dev);
		e = blockfs_mkfs(dev, fstype, NULL, &err);
		if (e < 0)
			return errorf(ret_error, e, "volume %s: %s", rec->volume_id,
				      err ?: strerror(-e));
		log_info("volume %s: made %s on %s", rec->volume_id, fstype, dev);
	} else if (strcmp(found, fstype) != 0)
		return errorf(ret_error, -ENOTEMPTY,
			      "volume %s: %s holds %s, not the requested %s: it is never "
			      "reformatted",
			      rec->volume_id, dev, found, fstype);
	_cleanup_free_ char *why = NULL;
	PinnedPath pin = PINNED_PATH_NULL;
	int fd = open_place(staging, O_PATH | O_DIRECTORY, &pin);
	e = fd < 0	       ? fd
	    : mounted(staging) ? 0
			       : mount_fs_at(dev, fd, fstype, NULL, rec->read_only, &why);
	closep(&fd);
	pinned_path_done(&pin);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: mounting %s on %s failed: %s%s%s",
			      rec->volume_id, dev, staging, strerror(-e), why ? ": " : "",
			      why ?: "");
	return 0;
}

static int stage_attached(char **ret_error, Driver *d, FlexDriver *drv, Record *rec,
			  const char *device)
{
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	FlexReply rep;
	int e;

	spec_view(rec, &spec, &opts);
	FlexCallArgs args = {.spec = &spec, .device = device};
	e = driver_run(ret_error, d, drv, rec, FLEX_WAITFORATTACH, &args, &rep);
	if (e < 0 && e != -EOPNOTSUPP) /* Not supported: the device as attach named it */
		return e;
	set_str(&rec->device, e == 0 && rep.device && *rep.device ? rep.device : device);
	if (e == 0)
		flex_reply_done(&rep);
	if ((e = save_or_fail(ret_error, d, RECORD_STAGED, rec)) < 0)
		return e;
	if ((e = make_place(ret_error, "staging_target_path", rec->path)) < 0)
		return e;
	args = (FlexCallArgs){.spec = &spec, .device = rec->device, .device_mount_path = rec->path};
	e = driver_run(ret_error, d, drv, rec, FLEX_MOUNTDEVICE, &args, NULL);
	if (e == -EOPNOTSUPP)
		/* Without a device (attach unsupported too) there is nothing to mount. */
		e = *rec->device ? mountdevice_fallback(ret_error, rec, rec->device, rec->path) : 0;
	return e;
}

int flex_node_stage(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		    char **ret_error)
{
	const Csi__V1__NodeStageVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL, *old = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	int e;

	if (!map_get((void *const *)r->volume_context, r->n_volume_context, FLEX_CONTEXT_DRIVER))
		return 1;
	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if ((e = node_path_check(ret_error, "staging_target_path", r->staging_target_path)) < 0)
		return e;
	if ((e = capability_check_flex(ret_error, r->volume_capability)) < 0)
		return e;
	e = record_from_context(ret_error, r->volume_id, (void *const *)r->volume_context,
				r->n_volume_context, r->volume_capability,
				capability_read_only(r->volume_capability), &rec);
	if (e < 0)
		return e;
	set_str(&rec->path, r->staging_target_path);
	if ((e = driver_get(ret_error, d, rec, &drv)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	if ((e = load_or_fail(ret_error, d, RECORD_STAGED, r->volume_id, NULL, &old)) < 0)
		return e;
	if (old)
		rec->size = old->size;
	const char *device = map_get((void *const *)r->publish_context, r->n_publish_context,
				     PUBLISH_CONTEXT_DEVICE);
	if (old && old->device_mounted && strcmp(old->path, rec->path) == 0 && mounted(rec->path)) {
		/* Mount only once, as Kubernetes does; the record (maybe of a driver version
		 * before an upgrade) says how to undo it. */
	} else if (!drv->capabilities.attach) {
		/* Kubernetes stages nothing for these; the record names the driver for expand. */
		if ((e = save_or_fail(ret_error, d, RECORD_STAGED, rec)) < 0)
			return e;
	} else {
		rec->device_mounted = true;
		set_str(&rec->device, device);
		if ((e = save_or_fail(ret_error, d, RECORD_STAGED, rec)) < 0)
			return e;
		e = stage_attached(ret_error, d, drv, rec, device ?: "");
		if (e < 0) {
			if (!mounted(rec->path))
				(void)record_remove(d, RECORD_STAGED, rec);
			return e;
		}
		log_info("volume %s: staged at %s by Flexvolume driver %s%s%s", rec->volume_id,
			 rec->path, drv->name, *rec->device ? " from " : "", rec->device);
	}
	Csi__V1__NodeStageVolumeResponse *resp = xnew0(Csi__V1__NodeStageVolumeResponse, 1);
	csi__v1__node_stage_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int flex_node_unstage(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		      char **ret_error)
{
	const Csi__V1__NodeUnstageVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	int e;

	if (!r->volume_id || !*r->volume_id || !r->staging_target_path)
		return 1;
	if ((e = load_or_fail(ret_error, d, RECORD_STAGED, r->volume_id, NULL, &rec)) != 0)
		return e;
	if ((e = node_path_check(ret_error, "staging_target_path", r->staging_target_path)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	const char *path = r->staging_target_path;
	/* Only where it was staged: the request's path is not proof of anything. */
	if (rec->device_mounted && rec->path && strcmp(rec->path, path) != 0)
		return errorf(ret_error, -ENOTEMPTY,
			      "staging_target_path: volume %s is staged at '%s', not at '%s'",
			      rec->volume_id, rec->path, path);
	/* Like Kubernetes: unmountdevice only when something is mounted, then the dir goes. */
	if (rec->device_mounted && path_exists(path)) {
		if (mounted(path)) {
			if ((e = driver_get(ret_error, d, rec, &drv)) < 0)
				return e;
			FlexCallArgs args = {.device_mount_path = path};
			e = driver_run(ret_error, d, drv, rec, FLEX_UNMOUNTDEVICE, &args, NULL);
			if (e == -EOPNOTSUPP)
				e = unmount_and_remove(ret_error, rec, "staging_target_path", path);
			if (e < 0)
				return e;
		}
		e = remove_unmounted(ret_error, rec, "unmountdevice", "staging_target_path", path);
		if (e < 0)
			return e;
		log_info("volume %s: unstaged from %s (Flexvolume driver %s)", rec->volume_id, path,
			 rec->driver);
	}
	if ((e = remove_or_fail(ret_error, d, RECORD_STAGED, rec)) < 0)
		return e;
	Csi__V1__NodeUnstageVolumeResponse *resp = xnew0(Csi__V1__NodeUnstageVolumeResponse, 1);
	csi__v1__node_unstage_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

/* The pod information Kubernetes passes to mount when podInfoOnMount is set, and the secrets.
 * Strings point into the request. */
static void pod_info(const Csi__V1__NodePublishVolumeRequest *r, int64_t fs_group, FlexPodInfo *ret,
		     FlexOption **ret_secrets)
{
	void *const *ctx = (void *const *)r->volume_context;
	size_t n = r->n_volume_context;
	FlexOption *s = xnew0(FlexOption, r->n_secrets + 1);

	for (size_t i = 0; i < r->n_secrets; i++)
		s[i] = (FlexOption){r->secrets[i]->key, r->secrets[i]->value};
	*ret = (FlexPodInfo){
		.name = map_get(ctx, n, CSI_PREFIX "pod.name"),
		.namespace = map_get(ctx, n, CSI_PREFIX "pod.namespace"),
		.uid = map_get(ctx, n, CSI_PREFIX "pod.uid"),
		.service_account = map_get(ctx, n, CSI_PREFIX "serviceAccount.name"),
		.secrets = s,
		.n_secrets = r->n_secrets,
		.fs_group = fs_group,
	};
	*ret_secrets = s;
}

static int publish_mount(char **ret_error, Driver *d, FlexDriver *drv, const Record *rec,
			 const Csi__V1__NodePublishVolumeRequest *r, int64_t fs_group)
{
	_cleanup_free_ FlexOption *opts = NULL, *secrets = NULL;
	FlexVolumeSpec spec;
	FlexPodInfo pod;

	spec_view(rec, &spec, &opts);
	pod_info(r, fs_group, &pod, &secrets);
	FlexCallArgs args = {.spec = &spec, .pod = &pod, .pod_volume_dir = rec->path};
	int e = driver_run(ret_error, d, drv, rec, FLEX_MOUNT, &args, NULL);
	if (e != -EOPNOTSUPP)
		return e;
	/* Kubernetes binds the device mount path: here the staging path. */
	if (!*rec->staging_path)
		return not_supported(ret_error, rec, drv, FLEX_MOUNT,
				     "and the volume has no staged mount to bind instead "
				     "(ephemeral volumes are never staged)");
	PinnedPath from = PINNED_PATH_NULL, to = PINNED_PATH_NULL;
	int source = open_place(rec->staging_path, O_PATH | O_DIRECTORY, &from);
	int target = source < 0 ? source : open_place(rec->path, O_PATH | O_DIRECTORY, &to);
	e = target < 0 ? target : mount_bind_at(source, &to, target, rec->read_only, NULL);
	closep(&source);
	closep(&target);
	pinned_path_done(&from);
	pinned_path_done(&to);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: binding %s to %s failed: %s",
			      rec->volume_id, rec->staging_path, rec->path, strerror(-e));
	return 0;
}

int flex_node_publish(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		      char **ret_error)
{
	const Csi__V1__NodePublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	void *const *ctx = (void *const *)r->volume_context;
	int64_t fs_group = -1;
	int e;

	if (!map_get(ctx, r->n_volume_context, FLEX_CONTEXT_DRIVER))
		return 1;
	if (!r->volume_id || !*r->volume_id)
		return errorf(ret_error, -EINVAL, "volume_id: missing");
	if ((e = node_path_check(ret_error, "target_path", r->target_path)) < 0)
		return e;
	/* Ephemeral inline volumes come without a staging path. */
	if (r->staging_target_path && *r->staging_target_path &&
	    (e = node_path_check(ret_error, "staging_target_path", r->staging_target_path)) < 0)
		return e;
	if ((e = capability_check_flex(ret_error, r->volume_capability)) < 0)
		return e;
	const char *group = r->volume_capability->mount->volume_mount_group;
	if (group && *group) {
		uint32_t gid;
		if (parse_uint32(group, &gid) < 0 || gid == (uint32_t)-1)
			return errorf(ret_error, -EINVAL,
				      "volume_capability.mount.volume_mount_group: '%s' is not a "
				      "group id",
				      group);
		fs_group = gid;
	}
	e = record_from_context(ret_error, r->volume_id, ctx, r->n_volume_context,
				r->volume_capability,
				r->readonly || capability_read_only(r->volume_capability), &rec);
	if (e < 0)
		return e;
	set_str(&rec->path, r->target_path);
	set_str(&rec->staging_path, r->staging_target_path);
	if ((e = driver_get(ret_error, d, rec, &drv)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	/* Mount only once, as Kubernetes does; the record may predate an upgrade: keep it. */
	bool done = mounted(rec->path);
	if (done) {
		_cleanup_(record_freep) Record *old = NULL;
		if ((e = load_or_fail(ret_error, d, RECORD_PUBLISHED, rec->volume_id, rec->path,
				      &old)) < 0)
			return e;
		if (!old && (e = save_or_fail(ret_error, d, RECORD_PUBLISHED, rec)) < 0)
			return e;
	} else {
		if ((e = save_or_fail(ret_error, d, RECORD_PUBLISHED, rec)) < 0)
			return e;
		e = make_place(ret_error, "target_path", rec->path);
		if (e >= 0)
			e = publish_mount(ret_error, d, drv, rec, r, fs_group);
		if (e < 0) {
			/* Nothing mounted: leave nothing behind, as Kubernetes does. */
			if (!mounted(rec->path)) {
				(void)remove_place(rec->path);
				(void)record_remove(d, RECORD_PUBLISHED, rec);
			}
			return e;
		}
		/* Kubernetes never changes the ownership of read-only Flexvolume mounts. */
		if (fs_group >= 0 && !rec->read_only && drv->capabilities.fs_group) {
			/* Kubernetes' default policy for Flexvolume is Always; failures are
			 * logged, not fatal, as there. */
			e = volume_ownership_apply(
				rec->volume_id, rec->path, (gid_t)fs_group, false,
				map_get(ctx, r->n_volume_context, CONTEXT_FSGROUP_POLICY),
				OWNERSHIP_ALWAYS);
			if (e < 0)
				log_warning_errno(e,
						  "volume %s: giving %s to group %lld failed: %m",
						  rec->volume_id, rec->path, (long long)fs_group);
		}
		log_info("volume %s: published at %s by Flexvolume driver %s%s", rec->volume_id,
			 rec->path, drv->name, rec->read_only ? " (read-only)" : "");
	}
	Csi__V1__NodePublishVolumeResponse *resp = xnew0(Csi__V1__NodePublishVolumeResponse, 1);
	csi__v1__node_publish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

int flex_node_unpublish(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			char **ret_error)
{
	const Csi__V1__NodeUnpublishVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	int e;

	if (!r->volume_id || !*r->volume_id || !r->target_path)
		return 1;
	if ((e = load_or_fail(ret_error, d, RECORD_PUBLISHED, r->volume_id, r->target_path,
			      &rec)) != 0)
		return e;
	if ((e = node_path_check(ret_error, "target_path", r->target_path)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	/* Like Kubernetes: a target that is gone needs nothing; one that exists gets unmount. */
	if (path_exists(rec->path)) {
		e = driver_get(ret_error, d, rec, &drv);
		if (e < 0 && mounted(rec->path))
			return e;
		if (e >= 0) {
			FlexCallArgs args = {.pod_volume_dir = rec->path};
			e = driver_run(ret_error, d, drv, rec, FLEX_UNMOUNT, &args, NULL);
			if (e == -EOPNOTSUPP)
				e = unmount_and_remove(ret_error, rec, "target_path", rec->path);
			if (e < 0)
				return e;
		}
		e = remove_unmounted(ret_error, rec, "unmount", "target_path", rec->path);
		if (e < 0)
			return e;
		log_info("volume %s: unpublished from %s by Flexvolume driver %s", rec->volume_id,
			 rec->path, rec->driver);
	}
	if ((e = remove_or_fail(ret_error, d, RECORD_PUBLISHED, rec)) < 0)
		return e;
	Csi__V1__NodeUnpublishVolumeResponse *resp = xnew0(Csi__V1__NodeUnpublishVolumeResponse, 1);
	csi__v1__node_unpublish_volume_response__init(resp);
	*ret = &resp->base;
	return 0;
}

/* The node record of a volume: staged, else published at path. 1 when none. */
static int node_record(char **ret_error, Driver *d, const char *volume_id, const char *path,
		       RecordKind *ret_kind, Record **ret)
{
	int e = load_or_fail(ret_error, d, RECORD_STAGED, volume_id, NULL, ret);
	*ret_kind = RECORD_STAGED;
	if (e == 1 && path) {
		e = load_or_fail(ret_error, d, RECORD_PUBLISHED, volume_id, path, ret);
		*ret_kind = RECORD_PUBLISHED;
	}
	return e;
}

/* Kubernetes' fallback for expandfs: grow the filesystem on the device, when there is one. */
static int expandfs_fallback(char **ret_error, const Record *rec, const char *dev,
			     const char *mount_path)
{
	_cleanup_free_ char *err = NULL;
	MountInfo mi = {};

	if (!*dev || mount_find(mount_path, &mi) < 0)
		return 0; /* no block device of ours: nothing to grow */
	int e = blockfs_resize(dev, mount_path, mi.fstype, &err);
	mount_info_done(&mi);
	if (e < 0)
		return errorf(ret_error, e, "volume %s: growing the filesystem failed: %s",
			      rec->volume_id, err ?: strerror(-e));
	return 0;
}

int flex_node_expand(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
		     char **ret_error)
{
	const Csi__V1__NodeExpandVolumeRequest *r = (const void *)req;
	_cleanup_(inflight_releasep) InflightHold *hold = NULL;
	_cleanup_(record_freep) Record *rec = NULL;
	_cleanup_flex_driver_ FlexDriver *drv = NULL;
	_cleanup_free_ FlexOption *opts = NULL;
	FlexVolumeSpec spec;
	RecordKind kind;
	uint64_t size;
	int e;

	if (!r->volume_id || !*r->volume_id)
		return 1;
	if ((e = node_record(ret_error, d, r->volume_id, r->volume_path, &kind, &rec)) != 0)
		return e;
	if ((e = requested_size(ret_error, r->capacity_range, false, &size)) < 0)
		return e;
	if ((e = driver_get(ret_error, d, rec, &drv)) < 0)
		return e;
	if (inflight_holdf(d->inflight, &hold, "node:%s", r->volume_id) < 0)
		return errorf(ret_error, -EBUSY, "an operation on volume %s is in progress",
			      r->volume_id);
	if (drv->capabilities.requires_fs_resize) {
		const char *dmp = kind == RECORD_STAGED ? rec->path
				  : r->staging_target_path && *r->staging_target_path
					  ? r->staging_target_path
					  : r->volume_path;
		spec_view(rec, &spec, &opts);
		FlexCallArgs args = {
			.spec = &spec,
			.device = rec->device,
			.device_mount_path = dmp ?: "",
			.new_size = size,
			.old_size = rec->size,
		};
		e = driver_run(ret_error, d, drv, rec, FLEX_EXPANDFS, &args, NULL);
		if (e == -EOPNOTSUPP)
			e = expandfs_fallback(ret_error, rec, rec->device, dmp ?: "");
		if (e < 0)
			return e;
		log_info("volume %s: filesystem expanded by Flexvolume driver %s", rec->volume_id,
			 drv->name);
	}
	if (size > 0) {
		rec->size = size;
		if ((e = save_or_fail(ret_error, d, kind, rec)) < 0)
			return e;
	}
	Csi__V1__NodeExpandVolumeResponse *resp = xnew0(Csi__V1__NodeExpandVolumeResponse, 1);
	csi__v1__node_expand_volume_response__init(resp);
	resp->capacity_bytes = (int64_t)size;
	*ret = &resp->base;
	return 0;
}

int flex_node_get_volume_stats(Driver *d, const ProtobufCMessage *req, ProtobufCMessage **ret,
			       char **ret_error)
{
	const Csi__V1__NodeGetVolumeStatsRequest *r = (const void *)req;
	_cleanup_(record_freep) Record *rec = NULL;
	RecordKind kind;
	BlockfsStats s = {};
	int e;

	if (!r->volume_id || !*r->volume_id || !r->volume_path || !*r->volume_path)
		return 1;
	if ((e = node_record(ret_error, d, r->volume_id, r->volume_path, &kind, &rec)) != 0)
		return e;
	if ((e = node_path_check(ret_error, "volume_path", r->volume_path)) < 0)
		return e;
	if (!path_exists(r->volume_path))
		return errorf(ret_error, -ENOENT, "volume_path: %s does not exist", r->volume_path);
	Csi__V1__NodeGetVolumeStatsResponse *resp = xnew0(Csi__V1__NodeGetVolumeStatsResponse, 1);
	csi__v1__node_get_volume_stats_response__init(resp);
	*ret = &resp->base;
	resp->volume_condition = xnew0(Csi__V1__VolumeCondition, 1);
	csi__v1__volume_condition__init(resp->volume_condition);
	if (!mounted(r->volume_path) || blockfs_stats(r->volume_path, &s) < 0) {
		resp->volume_condition->abnormal = true;
		resp->volume_condition->message =
			xasprintf("volume %s is not mounted at %s", r->volume_id, r->volume_path);
		return 0;
	}
	resp->usage = xnew0(Csi__V1__VolumeUsage *, 2);
	resp->usage[0] = usage_new(CSI__V1__VOLUME_USAGE__UNIT__BYTES, s.bytes_total, s.bytes_used,
				   s.bytes_available);
	resp->usage[1] = usage_new(CSI__V1__VOLUME_USAGE__UNIT__INODES, s.inodes_total,
				   s.inodes_used, s.inodes_free);
	resp->n_usage = 2;
	resp->volume_condition->message = xasprintf("mounted by Flexvolume driver %s", rec->driver);
	return 0;
}
