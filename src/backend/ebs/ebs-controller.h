/* SPDX-License-Identifier: Apache-2.0 */
/* The EBS controller: backend.h's controller operations over the EC2 Query API (ec2.h).
 *
 * Everything it knows lives in EC2, so a controller that restarts finds it all again: volumes
 * and snapshots by their tags (ebs-objects.h), attachments and device names from the
 * instances' block device mappings. In memory it keeps only what saves calls or bridges EC2's
 * eventual consistency: the region's zones, the instances seen (their device names, in the
 * allocator devnames.h), the volumes and snapshots it made in the last minute.
 *
 * Every wait for a state (a volume available, attached, detached, a modification optimizing)
 * goes through one batched waiter per Describe action (ebs-waiter.h). Every operation is
 * bounded by the client's deadline (call_deadline()), or by EBS_OPERATION_TIMEOUT without one.
 *
 *   ebs-controller.c   start, zones, volumes: create, delete, get, list, capacity
 *   ebs-attach.c       attach and detach, device names
 *   ebs-modify.c       the merged expand + modify
 *   ebs-snapshot.c     snapshots
 *   ebs-group.c        group snapshots */
#pragma once

#include <pthread.h>

#include "backend.h"
#include "devnames.h"
#include "ebs-objects.h"
#include "ebs-waiter.h"
#include "aws-credentials.h"
#include "ec2.h"
#include "hashmap.h"

/* How long an operation may run when the client gave no deadline. */
#define EBS_OPERATION_TIMEOUT (5 * 60 * USEC_PER_SEC)
/* How long after making a volume or snapshot EC2's "not found" means "not visible yet". */
#define EBS_RECENT_WINDOW (2 * 60 * USEC_PER_SEC)
/* How long a volume made a moment ago may stay out of EC2's sight. */
#define EBS_VISIBLE_WAIT (30 * USEC_PER_SEC)
/* The EBS driver's default size of a volume whose request gives none. */
#define EBS_DEFAULT_SIZE (100 * EBS_GIB)
/* EC2's modification rate since 2026-01-15: this many ModifyVolume of a volume in any period
 * this long, each as soon as the one before completed. */
#define EBS_MODIFY_LIMIT 4
#define EBS_MODIFY_PERIOD (24 * 3600 * USEC_PER_SEC)

typedef struct EbsControllerConfig {
	const char *driver_name;   /* tags what it makes, and what it lists */
	const char *endpoint;	   /* NULL: EC2's own for the region */
	const char *imds_endpoint; /* NULL: the default; "": there is none */
	const Strmap *extra_tags;  /* NULL: none */
	Ec2Config ec2;		   /* retries and timeouts (tests); region, endpoint, credentials
				    * are filled in */
} EbsControllerConfig;

/* A snapshot this controller made lately: EC2 may not show it yet. */
typedef struct EbsRecentSnapshot {
	char *name;
	EbsSnapshot snapshot; /* as CreateSnapshot answered */
	usec_t at;
} EbsRecentSnapshot;

typedef struct EbsController {
	char *driver_name;
	char *region;
	Strmap extra_tags;
	Imds *imds;
	AwsCredentialsProvider *credentials;
	Ec2Client *ec2;
	DevNames *devnames;
	EbsWaiter *volumes;	  /* DescribeVolumes */
	EbsWaiter *names;	  /* DescribeVolumes by CSI name (its ids are names) */
	EbsWaiter *modifications; /* DescribeVolumesModifications */
	EbsWaiter *snapshots;	  /* DescribeSnapshots */

	/* Held across the one call that learns the zones or an instance, so that concurrent
	 * first requests make it once; taken before lock. */
	pthread_mutex_t discover_lock;
	pthread_mutex_t lock;
	/* guarded by lock: */
	char **zones;		 /* the region's, asked once; NULL: not yet */
	Hashmap *instances;	 /* instance id -> what publishes need (ebs-attach.c): seen,
				  * device names restored */
	Hashmap *recent_volumes; /* volume id -> usec_t * when made */
	EbsRecentSnapshot *recent_snapshots;
	size_t n_recent_snapshots;

	pthread_mutex_t probe_lock; /* a leaf: never held across the EC2 call */
	/* guarded by probe_lock: the last probe of EC2 */
	usec_t probed;	   /* CLOCK_MONOTONIC; 0: never */
	bool probing;	   /* a thread is asking EC2 now */
	int probe_result;  /* 0 or a negative errno */
	char *probe_error; /* why not, or NULL */
} EbsController;

/* How often the controller's readiness asks EC2 (ebs_controller_probe()), and how long it
 * waits for the answer. */
#define EBS_PROBE_INTERVAL (30 * USEC_PER_SEC)
#define EBS_PROBE_TIMEOUT (5 * USEC_PER_SEC)

/* Finds the region (AWS_REGION, AWS_DEFAULT_REGION, the instance metadata) and makes the EC2
 * client; no call to EC2 yet, no credential read yet. Fills *ret, or a negative errno with
 * *ret_error naming what is missing. Blocks (the metadata service). */
int ebs_controller_new(const EbsControllerConfig *config, EbsController **ret, char **ret_error);
void ebs_controller_free(EbsController *c);

/* Readiness: whether EC2 answers with these credentials at this endpoint, by
 * DescribeAvailabilityZones of the region (what the controller asks first anyway, in every IAM
 * policy it needs) at most once per EBS_PROBE_INTERVAL; between calls, and while another
 * thread's call runs, the last answer. Throttling is an answer: EC2 is there. Returns 0 or the
 * call's negative errno with *ret_error saying why. Blocks up to EBS_PROBE_TIMEOUT. */
int ebs_controller_probe(EbsController *c, char **ret_error);

/* The deadline of the running operation: the client's, or EBS_OPERATION_TIMEOUT from now. */
usec_t ebs_deadline(void);

/* Calls EC2. On failure returns the errno with *ret_ec2 (may be NULL) filled and *ret_error
 * "what: <EC2's code and message>". */
int ebs_call(EbsController *c, const char *action, const Ec2Params *p, usec_t deadline,
	     const char *what, XmlNode **ret_reply, Ec2Error *ret_ec2, char **ret_error);

/* True when e carries EC2 error code. */
bool ebs_code_is(const Ec2Error *e, const char *code);

/* Remembers that a volume was just made (until it is deleted); whether it was made within
 * EBS_RECENT_WINDOW. */
void ebs_recent_volume_add(EbsController *c, const char *id);
void ebs_recent_volume_forget(EbsController *c, const char *id);
bool ebs_recent_volume(EbsController *c, const char *id);

/* The volume id names (DescribeVolumes): 0, -ENOENT with a message naming field, or the call's
 * error. A volume made a moment ago that EC2 does not show yet is waited for (up to
 * EBS_VISIBLE_WAIT). */
int ebs_volume_describe(EbsController *c, const char *id, const char *field, usec_t deadline,
			EbsVolume *ret, char **ret_error);

/* As ebs_volume_describe(), through the batched poll (ebs_waiter_look()): one DescribeVolumes
 * serves every look and wait of the moment. */
int ebs_volume_look(EbsController *c, const char *id, const char *field, usec_t deadline,
		    EbsVolume *ret, char **ret_error);

/* This driver's live volume named name (its CSIVolumeName and driver tags), the oldest when
 * there are several, through one batched DescribeVolumes for every name looked up at the
 * moment: 0 with *ret, -ENOENT when EC2 shows none, or the call's error. */
int ebs_volume_find_named(EbsController *c, const char *name, usec_t deadline, EbsVolume *ret,
			  char **ret_error);

/* Waits (batched) until the volume's state is one of states ("available", ...): 0 with *ret
 * the volume as then seen (may be NULL), -EIO when it went to "error", -ENOENT when it is gone
 * (gone_ok: 0), -ETIMEDOUT. */
int ebs_volume_wait_state(EbsController *c, const char *id, const char *kind,
			  const char *const *states, bool gone_ok, usec_t deadline, EbsVolume *ret,
			  char **ret_error);

/* The operations of backend.h's table. */
int ebs_create_volume(EbsController *c, const BackendCreateVolume *r, BackendVolume *ret,
		      char **ret_error);
int ebs_delete_volume(EbsController *c, const BackendRef *r, BackendDeleted *ret, char **ret_error);
int ebs_get_volume(EbsController *c, const BackendRef *r, BackendVolume *ret, char **ret_error);
int ebs_list_volumes(EbsController *c, const BackendListRequest *r, BackendVolumeList *ret,
		     char **ret_error);
int ebs_get_capacity(EbsController *c, const BackendCapacityRequest *r, BackendCapacity *ret,
		     char **ret_error);
int ebs_attach(EbsController *c, const BackendAttach *r, BackendAttachment *ret, char **ret_error);
int ebs_detach(EbsController *c, const BackendDetach *r, BackendDetached *ret, char **ret_error);
/* Counts the modifications of volume id in a DescribeVolumesModifications reply that started
 * within EBS_MODIFY_PERIOD before now (CLOCK_REALTIME). Returns -EAGAIN when they reach
 * EBS_MODIFY_LIMIT, with *ret_next the time EC2 takes the next, else 0 (*ret_next 0). */
int ebs_modify_rate_check(const XmlNode *reply, const char *id, usec_t now, size_t *ret_count,
			  usec_t *ret_next);
int ebs_change_volume(EbsController *c, const BackendChange *r, BackendChanged *ret,
		      char **ret_error);
int ebs_create_snapshot(EbsController *c, const BackendCreateSnapshot *r, BackendSnapshot *ret,
			char **ret_error);
int ebs_delete_snapshot(EbsController *c, const BackendRef *r, BackendDeleted *ret,
			char **ret_error);
int ebs_get_snapshot(EbsController *c, const BackendRef *r, BackendSnapshot *ret, char **ret_error);
int ebs_list_snapshots(EbsController *c, const BackendListRequest *r, BackendSnapshotList *ret,
		       char **ret_error);

/* INVALID_ARGUMENT naming the parameter unless location is NULL or "store". */
int ebs_snapshot_location_check(const char *location, char **ret_error);
int ebs_create_group(EbsController *c, const BackendCreateGroup *r, BackendGroup *ret,
		     char **ret_error);
int ebs_delete_group(EbsController *c, const BackendGroupRequest *r, BackendDeleted *ret,
		     char **ret_error);
int ebs_get_group(EbsController *c, const BackendGroupRequest *r, BackendGroup *ret,
		  char **ret_error);

/* Snapshot helpers the clone and group paths share (ebs-snapshot.c). */

/* Every snapshot of this driver tagged key = value, in *ret (an array of *ret_n). */
int ebs_snapshots_tagged(EbsController *c, const char *key, const char *value, usec_t deadline,
			 EbsSnapshot **ret, size_t *ret_n, char **ret_error);
/* DeleteSnapshot: 0 also when there is none. */
int ebs_snapshot_remove(EbsController *c, const char *id, usec_t deadline, char **ret_error);

/* The snapshot this driver made under a tag (key = value), not in state error: 0 with *ret,
 * -ENOENT when there is none. */
int ebs_snapshot_find_tagged(EbsController *c, const char *key, const char *value, usec_t deadline,
			     EbsSnapshot *ret, char **ret_error);
/* CreateSnapshot of volume_id with tags (this driver's added). */
int ebs_snapshot_make(EbsController *c, const char *volume_id, const Strmap *tags,
		      const char *description, usec_t deadline, EbsSnapshot *ret, char **ret_error);
/* Waits (batched) until the snapshot completed: 0, -EIO when it went to state error. */
int ebs_snapshot_wait_completed(EbsController *c, const char *id, usec_t deadline,
				char **ret_error);
/* The waiter's call for snapshots; frees the recent snapshots (ebs-snapshot.c). */
int ebs_snapshots_fetch(void *userdata, char *const *ids, size_t n, usec_t deadline, EbsFound *ret,
			char **ret_error);
void ebs_recent_snapshots_free(EbsController *c);

/* A clone: the snapshot of its source made for it (made, or found again on a retry) and
 * completed, in *ret_snapshot; ebs_clone_done() deletes it once the clone is made. */
int ebs_clone_snapshot(EbsController *c, const BackendCreateVolume *r, usec_t deadline,
		       char **ret_snapshot, char **ret_error);
void ebs_clone_done(EbsController *c, const char *snapshot_id, usec_t deadline);

/* The tags every object of this driver gets: the driver tag, then --extra-volume-tags. */
void ebs_driver_tags(EbsController *c, Strmap *tags);
