/* SPDX-License-Identifier: Apache-2.0 */
/* The EBS node service: who this instance is (NodeGetInfo) and its volumes' devices served by
 * the block-device node service (blocknode.h).
 *
 * Identity comes from the flags, and what they leave out from the instance metadata service
 * (IMDSv2: instance-id, placement/availability-zone, instance-type), asked once at start. The
 * attach limit is counted again on each NodeGetInfo (at most every limit_refresh): the network
 * interfaces and the block device mapping from the metadata service, and the EBS volumes
 * attached now that are not volplug's (a by-id device without a use record) from the devices. The
 * node never reads a credential and never calls EC2: EC2 attaches, the node only finds the device
 * (ebs-devices.h).
 *
 * Use records (node-use.h) live in the node's own state directory:
 *
 *   STATE/ebs/volumes/<volume id>.json   the volume's use record (absent: not used here)
 *   STATE/ebs/volumes/<volume id>.lock   its node lock (flock), removed with the record
 *   STATE/ebs/tmp/                       temporaries of atomic writes
 *
 * The device a volume was staged from is recorded too: a device named at attach (Xen's xvd)
 * has no serial to find it by on later calls. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "blocknode.h"
#include "ebs-devices.h"
#include "time-util.h"

#define EBS_STATE_DIR_DEFAULT "/var/lib/volplug"
#define EBS_DEVICE_WAIT_DEFAULT (10 * USEC_PER_SEC)

/* The topology keys of a zone: the EBS CSI driver's and Kubernetes' well-known one. */
#define EBS_TOPOLOGY_ZONE "topology.ebs.csi.aws.com/zone"
#define EBS_TOPOLOGY_K8S_ZONE "topology.kubernetes.io/zone"

typedef struct EbsNode EbsNode;

typedef struct EbsNodeConfig {
	const char *node_id;	   /* NULL: the instance ID from the metadata service */
	const char *zone;	   /* NULL: from the metadata service */
	const char *instance_type; /* NULL: from the metadata service (unless max_volumes) */
	uint32_t max_volumes;	   /* 0: the instance type's attach limit (ebs-limits.h) */
	const char *state_dir;	   /* NULL: EBS_STATE_DIR_DEFAULT */
	EbsDeviceDirs devices;
	usec_t device_wait;	   /* how long a stage waits for the device; 0: the default */
	const char *imds_endpoint; /* NULL: the default; "": no metadata service */
	usec_t imds_timeout;	   /* the whole identity lookup; 0: 10 s */
	usec_t limit_refresh;	   /* how long a counted attach limit stands; 0: 5 s */
} EbsNodeConfig;

/* Learns the node's identity and opens its state directory (made when missing); removes
 * temporaries a crash left. Fills *ret, or a negative errno with *ret_error naming the flag
 * or the service at fault. Blocks (the metadata service). */
int ebs_node_new(const EbsNodeConfig *config, EbsNode **ret, char **ret_error);
void ebs_node_free(EbsNode *n);

/* The node service over this node's devices (borrowed from n). */
const BlockNode *ebs_node_block(EbsNode *n);

/* NodeGetInfo: the node id, its attach limit as counted now (or at most limit_refresh ago) and
 * its zone. Blocks for the metadata service (at most 2 s) when the count is due. */
void ebs_node_info(EbsNode *n, BackendNodeInfo *ret);

/* The state directory of the node's records ("STATE/ebs"). */
const char *ebs_node_state_dir(EbsNode *n);

/* The volumes staged and the publish targets on this node, from its records (-1 and -1 when
 * they cannot be read). Blocks on the records only. */
void ebs_node_uses(EbsNode *n, int64_t *ret_staged, int64_t *ret_published);

/* 0 when the state directory can take records now. */
int ebs_node_probe(EbsNode *n);
