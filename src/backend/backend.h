/* SPDX-License-Identifier: Apache-2.0 */
/* The one table of operations every backend fills (BackendOps), and what a kind of backend is
 * (BackendType: its options, settings and companions): a backend is one folder under
 * src/backend and one line in backend-types.c's BACKEND_TYPES (docs/architecture.md).
 * Backends whose volumes are block devices on the node share its node service (blocknode.h).
 *
 * Plain C only: no protobuf, no gRPC. Every operation has the shape
 *
 *     int op(Backend *b, const XRequest *r, XResult *ret, char **ret_error);
 *
 * and returns 0, or a negative errno with *ret_error (malloc'ed) a message for the user that
 * names the request field or the object at fault; *ret is written on success only (and on
 * -EEXIST where that is said). The CSI layer maps the errno with the one table in src/rpc:
 * -EINVAL INVALID_ARGUMENT, -ENOENT NOT_FOUND, -EEXIST ALREADY_EXISTS, -ENOTEMPTY
 * FAILED_PRECONDITION, -EBUSY ABORTED, -ENOSPC/-EMLINK RESOURCE_EXHAUSTED, -ERANGE
 * OUT_OF_RANGE. An operation a backend does not have is NULL: the CSI layer answers
 * UNIMPLEMENTED.
 *
 * The CSI layer checks what the CSI spec says of a request (required fields, capabilities
 * well formed, capacity ranges, the parameters' syntax), holds its in-flight key (ABORTED for
 * a second call), merges expand and modify requests, and applies the idempotency rules that do
 * not depend on the backend. A backend judges the rest: which access modes and filesystems it
 * serves (check_access), what it reads from a volume context (filesystem options, the default
 * filesystem), whether its volumes need a staging path. It owns its objects: their per-object
 * locking, what spans processes (capacity, attach counts, device names), crash safety, and
 * every path and device it acts on on the node. Operations block; they may be called from
 * several threads at once. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "blockfs.h"
#include "params.h"
#include "strmap.h"

typedef struct Backend Backend;
typedef struct BackendOps BackendOps;

/* What every backend object starts with. */
struct Backend {
	const BackendOps *ops;
};

/* ---- objects ---- */

/* A topology segment: {"topology.volplug.io/node": "n1", "topology.volplug.io/zone": "z1", ...}. */
typedef Strmap BackendTopology;

/* The node a volume lives on, the zone (kept for volumes made before the node key), and the
 * well-known zone key taken as the same zone when a segment has no label of that name. */
#define BACKEND_TOPOLOGY_NODE "topology.volplug.io/node"
#define BACKEND_TOPOLOGY_ZONE "topology.volplug.io/zone"
#define BACKEND_TOPOLOGY_K8S_ZONE "topology.kubernetes.io/zone"

typedef struct BackendVolume {
	char *id;
	char *name;
	uint64_t size;
	int64_t created_ns;  /* CLOCK_REALTIME */
	VolumeParams params; /* what it was made with (and modified to) */
	Strmap context;	     /* volume_context for the node */
	char *source_kind;   /* "", "snapshot" or "volume" */
	char *source_id;
	char *access_mode;	  /* the CSI access mode it was made for */
	BackendTopology topology; /* where it can be reached */
	char **published_nodes;	  /* strv; NULL when none */
	bool abnormal;		  /* damaged, or not healthy */
	char *condition;	  /* its condition, in words */
	/* Its record is damaged: what is wrong (NULL: sound). Such a volume is listed and can
	 * be deleted; every other call treats it as absent. */
	char *damage;
	/* create_volume: how the content came from its source ("reflink", "sparse copy"), for
	 * the log; static storage, NULL when blank. */
	const char *copy_method;
} BackendVolume;

void backend_volume_done(BackendVolume *v);

typedef struct BackendSnapshot {
	char *id;
	char *name;
	char *source_volume_id;
	uint64_t size;
	int64_t created_ns;
	bool ready;
	char *group_id; /* "" when not a member of a group snapshot */
	Strmap params;
	const char *copy_method; /* create_snapshot: as BackendVolume's */
} BackendSnapshot;

void backend_snapshot_done(BackendSnapshot *s);

typedef struct BackendGroup {
	char *id;
	char *name;
	int64_t created_ns;
	bool ready;		    /* false when a member is missing */
	BackendSnapshot *snapshots; /* the members found, in the order of their source volumes */
	size_t n_snapshots;
} BackendGroup;

void backend_group_done(BackendGroup *g);

/* ---- requests and results ---- */

/* An object named by its id (delete, get). */
typedef struct BackendRef {
	const char *id;
	const Strmap *secrets; /* the request's; NULL: none */
} BackendRef;

/* What a delete did, for the caller's log. */
typedef struct BackendDeleted {
	bool found;	  /* false: nothing had that id (a success all the same) */
	bool damaged;	  /* its record was damaged */
	char *name;	  /* its name; NULL when unknown */
	size_t n_members; /* delete_group: the snapshots that went with it */
	char *leftover;	  /* gone, but this of its storage is left, and why (for a warning) */
} BackendDeleted;

void backend_deleted_done(BackendDeleted *d);

/* How a volume is to be used: what CSI calls a volume capability. */
typedef struct BackendAccess {
	bool block;	    /* raw block, else a filesystem */
	const char *fstype; /* filesystem volumes: the type asked, "" for the default */
	const char *mode;   /* the CSI access mode's name: "SINGLE_NODE_WRITER" */
	bool multi_node;    /* the mode lets several nodes use the volume at once */
	bool read_only;	    /* the mode is a reader-only one */
} BackendAccess;

/* check_access: may a volume be used as access says? field names the capability in the
 * request ("volume_capability", "volume_capabilities[1]") for the message. */
typedef struct BackendAccessCheck {
	const char *field;
	BackendAccess access;
	const VolumeParams *params;  /* CreateVolume: what the volume is made with; else NULL */
	const BackendVolume *volume; /* ValidateVolumeCapabilities: the volume; else NULL */
} BackendAccessCheck;

typedef struct BackendCreateVolume {
	const char *name;
	uint64_t size;		    /* bytes, within the request's range and rounded */
	const VolumeParams *params; /* parsed and checked */
	const char *source_kind;    /* NULL, "snapshot" or "volume" */
	const char *source_id;
	BackendAccess access;
	const BackendTopology *requisite; /* where it must be reachable; NULL: anywhere */
	size_t n_requisite;
	const BackendTopology *preferred; /* in order of preference */
	size_t n_preferred;
	const Strmap *secrets; /* the request's (provisioner secrets); NULL: none */
} BackendCreateVolume;

typedef struct BackendListRequest {
	const char *starting_token;   /* NULL or "": from the start */
	size_t max_entries;	      /* 0: the backend's default */
	const char *source_volume_id; /* snapshots only: of this volume (NULL: all) */
	const char *snapshot_id;      /* snapshots only: this one (NULL: all) */
	const Strmap *secrets;	      /* snapshots only: the request's; NULL: none */
} BackendListRequest;

typedef struct BackendVolumeList {
	BackendVolume *volumes;
	size_t n_volumes;
	char *next_token; /* NULL at the end */
} BackendVolumeList;

void backend_volume_list_done(BackendVolumeList *l);

typedef struct BackendSnapshotList {
	BackendSnapshot *snapshots;
	size_t n_snapshots;
	char *next_token;
} BackendSnapshotList;

void backend_snapshot_list_done(BackendSnapshotList *l);

typedef struct BackendCapacityRequest {
	const BackendTopology *topology; /* NULL: anywhere */
	/* The sizes the StorageClass parameters allow (the range of the type they name); 0: no
	 * bound. */
	uint64_t min_size, max_size;
} BackendCapacityRequest;

typedef struct BackendCapacity {
	uint64_t available;
	uint64_t maximum_volume_size;
	uint64_t minimum_volume_size;
} BackendCapacity;

/* ControllerPublishVolume. */
typedef struct BackendAttach {
	const char *volume_id;
	const char *node_id;
	bool read_only;
	BackendAccess access;
	const Strmap *volume_context;
} BackendAttach;

typedef struct BackendAttachment {
	Strmap publish_context; /* handed to the node: {"devicePath": "/dev/xvdba"} */
	char *device;		/* what it is attached as, for the log; may be NULL */
	bool existed;		/* attached there already: nothing was done */
} BackendAttachment;

void backend_attachment_done(BackendAttachment *a);

/* ControllerUnpublishVolume; node_id NULL or "": every node. */
typedef struct BackendDetach {
	const char *volume_id;
	const char *node_id;
} BackendDetach;

/* The attachments a detach removed, for the log. */
typedef struct BackendDetached {
	char **nodes;	/* strv; NULL: none */
	char **devices; /* strv: what it was attached as on each node ("" when nothing) */
} BackendDetached;

void backend_detached_done(BackendDetached *d);

/* ControllerExpandVolume and ControllerModifyVolume, merged into one change. */
typedef struct BackendChange {
	const char *volume_id;
	uint64_t new_size;     /* 0: unchanged */
	const ParamKV *params; /* mutable parameters to set */
	size_t n_params;
	size_t n_callers; /* how many requests were merged (for the log) */
} BackendChange;

typedef struct BackendChanged {
	uint64_t size;
	bool node_expansion_required;
} BackendChanged;

typedef struct BackendCreateSnapshot {
	const char *name;
	const char *source_volume_id;
	const Strmap *params;  /* checked tags */
	const char *location;  /* the class's location: NULL or "local", or "store" */
	const Strmap *secrets; /* the request's; NULL: none */
} BackendCreateSnapshot;

typedef struct BackendCreateGroup {
	const char *name;
	char *const *volume_ids;
	size_t n_volume_ids;
	const Strmap *params; /* checked tags, for each member */
	const char *location; /* the class's location: NULL or "local", or "store" */
} BackendCreateGroup;

/* get_group and delete_group: the group, and the member ids the request names (n 0: not
 * given), which must be exactly the group's (-EINVAL otherwise). */
typedef struct BackendGroupRequest {
	const char *id;
	char *const *snapshot_ids;
	size_t n_snapshot_ids;
} BackendGroupRequest;

/* Changed-block tracking: a snapshot's allocated ranges, or the ranges where a snapshot differs
 * from an earlier one of the same volume. */
typedef struct BackendRangesRequest {
	const char *snapshot_id;      /* allocated: the snapshot; delta: the target */
	const char *base_snapshot_id; /* delta: the earlier snapshot; NULL for allocated */
	const Strmap *secrets;	      /* the request's (a snapshot store's credentials); NULL */
	uint64_t starting_offset;     /* no range ends before it; beyond the size: -ERANGE */
	/* Called once, before any range, with the volume's size at the snapshot (the target's):
	 * a negative return stops the operation, which returns it. */
	int (*begin)(uint64_t volume_size, void *userdata);
	/* Takes one range (bytes), in increasing order, never overlapping, none ending at or
	 * before starting_offset; a negative return stops the operation, which returns it. */
	int (*range)(uint64_t offset, uint64_t length, void *userdata);
	/* Asked between pieces of work: a negative return (-ECANCELED: the client is gone)
	 * stops the operation, which returns it. May be NULL. */
	int (*check)(void *userdata);
	void *userdata;
} BackendRangesRequest;

/* What a walk did, for the log. */
typedef struct BackendRangesDone {
	uint64_t volume_size; /* as given to begin() */
	uint64_t reported;    /* bytes in the ranges */
	uint64_t read;	      /* delta: bytes read from each snapshot and compared */
	uint64_t shared;      /* delta: bytes equal without a read, the same extents in both */
	uint64_t holes;	      /* delta: bytes equal without a read, a hole in both */
	bool extents;	      /* delta: the filesystem told which extents the two share */
	bool manifests;	      /* delta: a store snapshot's manifest compared by its chunks */
	uint64_t chunks;      /* delta: chunks both manifests list, compared by their hash */
} BackendRangesDone;

/* ---- node requests ---- */

typedef struct BackendStage {
	const char *volume_id;
	const char *staging_path;
	BackendAccess access;
	char *const *mount_flags; /* one option each */
	size_t n_mount_flags;
	const Strmap *volume_context;
	const Strmap *publish_context;
	const Strmap *secrets;
} BackendStage;

typedef struct BackendUnstage {
	const char *volume_id;
	const char *staging_path;
} BackendUnstage;

/* Called on the root of a new (or republished) mount before the pod sees it: fsGroup. policy is
 * the fsGroupChangePolicy the backend asks for ("Always", "OnRootMismatch"), or NULL for the
 * caller's default (the volume's own, else the daemon's). The caller logs its progress. */
typedef int (*BackendPrepareFunc)(int root_fd, bool read_only, const char *policy, void *userdata,
				  char **ret_error);

typedef struct BackendPublish {
	const char *volume_id;
	const char *staging_path; /* NULL or "": not staged (the backend says if it must be) */
	const char *target_path;
	BackendAccess access;
	bool read_only;
	char *const *mount_flags;
	size_t n_mount_flags;
	gid_t group; /* volume_mount_group; (gid_t)-1: none */
	const Strmap *volume_context;
	const Strmap *publish_context;
	const Strmap *secrets;
	BackendPrepareFunc prepare; /* may be NULL */
	void *userdata;
} BackendPublish;

typedef struct BackendUnpublish {
	const char *volume_id;
	const char *target_path;
} BackendUnpublish;

typedef struct BackendNodeExpand {
	const char *volume_id;
	const char *volume_path;
	const char *staging_path;    /* may be NULL */
	uint64_t required, limit;    /* 0: none */
	const BackendAccess *access; /* NULL: not given */
	/* No controller expands volumes (a driver on every node): the node grows the volume
	 * itself to required first, with the capacity check ControllerExpandVolume makes. */
	bool grow;
} BackendNodeExpand;

typedef struct BackendNodeExpanded {
	uint64_t size;
} BackendNodeExpanded;

typedef struct BackendStatsRequest {
	const char *volume_id;
	const char *volume_path;
	const char *staging_path; /* may be NULL */
} BackendStatsRequest;

typedef struct BackendStats {
	bool block; /* a raw device: only fs.bytes_total is set */
	bool has_usage;
	BlockfsStats fs;
	bool abnormal;
	char *condition;
} BackendStats;

void backend_stats_done(BackendStats *s);

typedef struct BackendNodeInfo {
	uint32_t max_volumes; /* 0: no limit */
	BackendTopology topology;
	char *node_id; /* the node's id as the backend knows it (EC2's instance ID); NULL: the
			* driver's --node-id */
} BackendNodeInfo;

/* status: what the admin service and volplugctl status show of a backend, as it finds it now
 * (-1: a figure it does not count here). */
typedef struct BackendStatus {
	int64_t volumes;   /* its volumes (damaged ones included) */
	int64_t snapshots; /* its snapshots */
	int64_t staged;	   /* its volumes staged on this node */
	int64_t published; /* publish targets of its volumes on this node */
	/* The space it keeps volumes in on this node, when it has one (path NULL: none), and its
	 * figures when they could be read (has_space). */
	char *path;
	bool has_space;
	uint64_t capacity, provisioned, allocated, available, fs_free;
	double overprovision;
	int64_t devices; /* the devices it attached for them (loop devices) */
} BackendStatus;

void backend_status_done(BackendStatus *s);

/* ---- the table ---- */

struct BackendOps {
	const char *name; /* its type's */

	/* Its volumes' sizes are multiples of size_unit bytes (0: 1 MiB): the CSI layer rounds a
	 * capacity range up to it (EBS allocates whole GiB). default_size: the size of a volume
	 * whose request gives none (0: 1 GiB). */
	uint64_t size_unit;
	uint64_t default_size;

	/* Whether this backend serves the volume, judged from what a request carries: its id,
	 * and the volume context when the request has one (NULL otherwise). The default backend
	 * (the first of the driver) serves what no other claims; it may leave this NULL. */
	bool (*claims)(Backend *b, const char *volume_id, const Strmap *volume_context);

	/* 0 when the backend can serve requests now. */
	int (*probe)(Backend *b, char **ret_error);

	/* Whether it serves volumes used as r->access says (access mode, filesystem type): 0, or
	 * -EINVAL with a message naming r->field. The CSI layer asks before it calls an
	 * operation that takes a capability, and for ValidateVolumeCapabilities. NULL: whatever
	 * the CSI spec allows; the operations refuse what they cannot do. */
	int (*check_access)(Backend *b, const BackendAccessCheck *r, void *ret, char **ret_error);

	/* Parses and checks a request's parameters for r->use: 0, or -EINVAL with a message
	 * naming "parameters" or "mutable_parameters" and the key at fault. The CSI layer passes
	 * the result to create_volume and compares it with an existing volume's. NULL: the
	 * backend takes no parameters (any given is -EINVAL). volume_params_request()
	 * (params.h) is the EBS driver's rules, for a backend that takes them. */
	int (*parse_params)(Backend *b, const BackendParamsRequest *r, BackendParams *ret,
			    char **ret_error);

	/* -EEXIST with *ret the existing volume when one of that name exists: the caller
	 * compares. -ENOENT for a missing source, -ENOSPC beyond capacity, -ERANGE when the
	 * source is larger than the size. */
	int (*create_volume)(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
			     char **ret_error);
	/* The existing volume of r->name (only name and secrets set), from the backend's own
	 * records (no call to a source's store): 0 with *ret, -ENOENT when there is none, -EBUSY
	 * while it is being made. The CSI layer asks before it looks up a content source, so
	 * that the retry for a volume made already does not depend on the source's store. NULL:
	 * the source is looked up first. */
	int (*find_volume)(Backend *b, const BackendCreateVolume *r, BackendVolume *ret,
			   char **ret_error);
	/* Succeeds for an id that names nothing; -ENOTEMPTY while it is in use. */
	int (*delete_volume)(Backend *b, const BackendRef *r, BackendDeleted *ret,
			     char **ret_error);
	/* The volume with its status (published nodes, condition); a damaged one too (.damage).
	 * -ENOENT with a message naming volume_id when there is none. */
	int (*get_volume)(Backend *b, const BackendRef *r, BackendVolume *ret, char **ret_error);
	/* -EALREADY for a token the backend never gave (ABORTED). */
	int (*list_volumes)(Backend *b, const BackendListRequest *r, BackendVolumeList *ret,
			    char **ret_error);
	int (*get_capacity)(Backend *b, const BackendCapacityRequest *r, BackendCapacity *ret,
			    char **ret_error);
	/* Idempotent: a volume attached to the node already gets the same context. -ENOENT for
	 * an unknown volume or node, -EEXIST attached there with the other read-only state,
	 * -ENOTEMPTY attached to another node when the mode allows one, -EMLINK beyond the
	 * node's limit. */
	int (*attach)(Backend *b, const BackendAttach *r, BackendAttachment *ret, char **ret_error);
	/* Succeeds when not attached. */
	int (*detach)(Backend *b, const BackendDetach *r, BackendDetached *ret, char **ret_error);
	/* One merged expand + modify. -ERANGE for a smaller size, -ENOSPC beyond capacity. */
	int (*change_volume)(Backend *b, const BackendChange *r, BackendChanged *ret,
			     char **ret_error);

	/* -EEXIST with *ret the existing snapshot when one of that name exists: the caller
	 * compares; -EEXIST with *ret left empty (id NULL) and *ret_error naming it when one
	 * exists that the request's parameters cannot match (another location). -ENOENT for a
	 * missing source volume. */
	int (*create_snapshot)(Backend *b, const BackendCreateSnapshot *r, BackendSnapshot *ret,
			       char **ret_error);
	/* Succeeds for an id that names nothing; -ENOTEMPTY for a member of a group. */
	int (*delete_snapshot)(Backend *b, const BackendRef *r, BackendDeleted *ret,
			       char **ret_error);
	int (*get_snapshot)(Backend *b, const BackendRef *r, BackendSnapshot *ret,
			    char **ret_error);
	/* -EALREADY for a token the backend never gave (ABORTED). */
	int (*list_snapshots)(Backend *b, const BackendListRequest *r, BackendSnapshotList *ret,
			      char **ret_error);
	/* -EEXIST with *ret the existing group when one of that name exists: the caller
	 * compares. -ENOENT for a missing source volume. */
	int (*create_group)(Backend *b, const BackendCreateGroup *r, BackendGroup *ret,
			    char **ret_error);
	/* Succeeds for an id that names nothing. */
	int (*delete_group)(Backend *b, const BackendGroupRequest *r, BackendDeleted *ret,
			    char **ret_error);
	int (*get_group)(Backend *b, const BackendGroupRequest *r, BackendGroup *ret,
			 char **ret_error);
	/* Changed-block tracking (BackendRangesRequest): the snapshot's ranges that hold data
	 * (snapshot_allocated), or where it differs from base_snapshot_id (snapshot_delta): exact,
	 * or more than exact, never less (a range left out is equal in both). -ENOENT naming the
	 * snapshot that is not found, -EINVAL when the two are snapshots of different volumes,
	 * -ERANGE when starting_offset is beyond the size. Streams: memory does not grow with the
	 * volume. NULL: the backend has no such tracking (UNIMPLEMENTED). */
	int (*snapshot_allocated)(Backend *b, const BackendRangesRequest *r, BackendRangesDone *ret,
				  char **ret_error);
	int (*snapshot_delta)(Backend *b, const BackendRangesRequest *r, BackendRangesDone *ret,
			      char **ret_error);

	/* The node service: every path in a request is hostile until proved the volume's. */
	int (*stage)(Backend *b, const BackendStage *r, void *ret, char **ret_error);
	int (*unstage)(Backend *b, const BackendUnstage *r, void *ret, char **ret_error);
	int (*publish)(Backend *b, const BackendPublish *r, void *ret, char **ret_error);
	int (*unpublish)(Backend *b, const BackendUnpublish *r, void *ret, char **ret_error);
	int (*node_expand)(Backend *b, const BackendNodeExpand *r, BackendNodeExpanded *ret,
			   char **ret_error);
	int (*node_stats)(Backend *b, const BackendStatsRequest *r, BackendStats *ret,
			  char **ret_error);
	int (*node_info)(Backend *b, const void *r, BackendNodeInfo *ret, char **ret_error);

	/* What it has, for the admin service's status (BackendStatus). Blocks on its records
	 * only. NULL: nothing to show. */
	int (*status)(Backend *b, const void *r, BackendStatus *ret, char **ret_error);

	/* Where the node-local records of what this process runs for it live (the programs it
	 * runs: DIR/run/children), and where its companions keep theirs (BackendConfig.state_dir);
	 * NULL: it runs no program here. Valid for the backend's life. */
	const char *(*state_dir)(Backend *b);
	/* What the daemon's start line says of it ("node n1, pool /var/lib/volplug/pool"),
	 * malloc'ed. NULL: its name. May block briefly. */
	char *(*describe)(Backend *b);

	/* Frees the backend. */
	void (*free)(Backend *b);
};

/* ---- making backends ---- */

typedef enum BackendRole {
	BACKEND_ROLE_CONTROLLER = 1 << 0,
	BACKEND_ROLE_NODE = 1 << 1,
} BackendRole;

struct FlexRegistry;
struct FlexCallConfig;

/* Told of each problem a backend found, and repaired where it could, while it started: the
 * daemon logs each once. volume_id: the volume whose record is damaged (listed, deletable),
 * else NULL. */
typedef void (*BackendReportFunc)(const char *volume_id, const char *message, void *userdata);

/* What every backend may need to start; its own settings (its options) come beside. */
typedef struct BackendConfig {
	unsigned roles; /* BackendRole bits: what this process serves */
	const char *node_id;
	uint32_t max_volumes_per_node;
	const char *zone;
	const Strmap *topology_labels; /* the operator's own segment keys; NULL: none */
	struct FlexRegistry *flex;     /* Flexvolume drivers; NULL: Flexvolume off */
	const struct FlexCallConfig *flex_call;
	BackendReportFunc report; /* NULL: nobody is told */
	void *report_userdata;
	/* Which of node_id, zone and max_volumes_per_node the operator gave: a backend that
	 * learns them elsewhere (a cloud's instance metadata) takes the others from there. */
	bool node_id_set, zone_set, max_volumes_set;
	const char *driver_name; /* the CSI driver's name: a cloud tags what it makes with it */
	/* The backend's own settings, made by its type's settings_new and set from its options
	 * (NULL: its defaults). */
	const void *settings;
	/* A companion (BackendType.companions): the state directory of the backend it serves
	 * beside (BackendOps.state_dir), where it keeps its records; NULL otherwise. */
	const char *state_dir;
} BackendConfig;

/* What makes a backend of a name (its folder defines it): fills *ret, or a negative errno with
 * *ret_error. Blocks (it may open, recover, register). */
#define BACKEND_NEW(name) \
	int name##_backend_new(const BackendConfig *config, Backend **ret, char **ret_error)

/* One option of a backend's own, on volplugd's command line: --name METAVAR. */
typedef struct BackendOption {
	const char *name;    /* "pool-capacity" */
	const char *metavar; /* "SIZE"; NULL: a flag that takes no value */
	const char *help;    /* lines of at most 50 columns, joined by '\n' */
} BackendOption;

/* A kind of backend: how it is made, its options and how it serves beside others. Its folder
 * defines it as BACKEND_TYPE(name) (name_backend_type); backend.c lists every one. */
typedef struct BackendType {
	const char *name;
	const char *heading;	      /* --help: the line above its options */
	const BackendOption *options; /* ends with {}; NULL: none */
	/* Its settings: made with the defaults, each option applied (value NULL for a flag:
	 * 0, or -EINVAL with *ret_error naming the option), freed. NULL: it has none. */
	void *(*settings_new)(void);
	int (*settings_set)(void *settings, const char *option, const char *value,
			    char **ret_error);
	void (*settings_free)(void *settings);
	int (*new)(const BackendConfig *config, Backend **ret, char **ret_error);
	/* --backend may name it (false: it only serves beside another). */
	bool selectable;
	/* The types made after it, serving what they claim (NULL-terminated; NULL: none). */
	const char *const *companions;
	/* The daemon watches the Flexvolume plugin directory for it. */
	bool flex_drivers;
	/* Handler threads when --workers is not given (0: the daemon's default): a backend whose
	 * calls wait on a remote service wants more. */
	unsigned workers;
} BackendType;

#define BACKEND_TYPE(name) const BackendType name##_backend_type

/* The types of this build, in BACKEND_TYPES order; the first selectable is the default. */
const BackendType *const *backend_types(size_t *ret_n);
const BackendType *backend_type_find(const char *name);
/* The first selectable type: what runs without --backend. */
const BackendType *backend_type_default(void);

/* The settings of every type of the build, from the command line. */
typedef struct BackendSettings BackendSettings;
BackendSettings *backend_settings_new(void);
BackendSettings *backend_settings_free(BackendSettings *s);
/* Applies --option value to the type that has that option: 0; -ENOENT when no type has it;
 * -EINVAL with *ret_error from the type. An option of a type not selected is parsed and
 * checked all the same (a bad value is refused whichever backend runs), then not used. */
int backend_settings_set(BackendSettings *s, const char *option, const char *value,
			 char **ret_error);
const void *backend_settings_get(const BackendSettings *s, const char *type);

/* Makes the backend of type name and its companions, in that order (the first is the default,
 * serving what the others do not claim), each with its settings from s (NULL: defaults).
 * Returns a NULL-terminated array, or -EINVAL with *ret_error for an unknown name, or what a
 * backend's start returned. Blocks. */
int backends_new(const char *name, const BackendConfig *config, const BackendSettings *s,
		 Backend ***ret, char **ret_error);
void backends_free(Backend **backends);

/* The backend that serves a volume: the first of the others that claims it, else the
 * default. */
Backend *backend_for_volume(Backend **backends, const char *volume_id,
			    const Strmap *volume_context);

/* The default backend: where volumes and snapshots are created. */
Backend *backend_default(Backend **backends);

/* What a backend's sizes are multiples of (BackendOps.size_unit), and the size of a volume
 * whose request gives none (BackendOps.default_size), the defaults filled in. */
uint64_t backend_size_unit(const Backend *b);
uint64_t backend_default_size(const Backend *b);

/* How a requested topology segment t stands to a node's own segment ours. */
typedef enum BackendTopologyFit {
	BACKEND_TOPOLOGY_FITS,	      /* every key of t has ours' value: the node is in t */
	BACKEND_TOPOLOGY_ELSEWHERE,   /* a key of ours has another value in t */
	BACKEND_TOPOLOGY_UNKNOWN_KEY, /* t names a key ours does not have */
} BackendTopologyFit;

/* Compares t with ours, key by key (BACKEND_TOPOLOGY_K8S_ZONE stands for BACKEND_TOPOLOGY_ZONE
 * when ours has no key of its own by that name); a segment without keys fits everywhere.
 * *ret_key: the key that decided, when it does not fit (borrowed from t). */
BackendTopologyFit backend_topology_fit(const BackendTopology *ours, const BackendTopology *t,
					const char **ret_key);
