/* SPDX-License-Identifier: Apache-2.0 */
/* EBS as a backend: backend.h's table over the controller (ebs-controller.h: EC2 calls, with
 * credentials) and the node service (ebs-node.c: no credentials). A process makes only the
 * half its mode serves: a node never reads a credential. */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "ebs-backend.h"
#include "ebs-controller.h"
#include "ebs-node.h"
#include "error-util.h"

typedef struct EbsBackend {
	Backend base;
	EbsController *controller; /* NULL unless this process serves the controller role */
	EbsNode *node;		   /* NULL unless this process serves the node role */
} EbsBackend;

static EbsBackend *ebs_of(Backend *b)
{
	return (EbsBackend *)b;
}

static int ebs_probe(Backend *b, char **ret_error)
{
	EbsNode *n = ebs_of(b)->node;

	int r = n ? ebs_node_probe(n) : 0;
	if (r < 0)
		return errorf(ret_error, r, "the EBS node's state directory %s is not usable: %s",
			      ebs_node_state_dir(n), strerror(-r));
	/* the controller: EC2 with its credentials, asked at most every 30 s */
	return ebs_of(b)->controller ? ebs_controller_probe(ebs_of(b)->controller, ret_error) : 0;
}

static bool multi_attach_type(const char *type)
{
	return strcmp(type, "io1") == 0 || strcmp(type, "io2") == 0;
}

/* EBS volumes are used by one node at a time, or by several at once only as raw block
 * devices of io1 or io2 made with Multi-Attach (MULTI_NODE_MULTI_WRITER, block access: no
 * filesystem survives two nodes writing it, and EBS has no read-only attachment); the node
 * makes the filesystems of the block-device node service. */
static int check_access_op(Backend *b, const BackendAccessCheck *r, void *ret, char **ret_error)
{
	(void)b;
	(void)ret;
	if (r->access.multi_node && strcmp(r->access.mode, EBS_MULTI_ATTACH_MODE) != 0)
		return errorf(ret_error, -EINVAL,
			      "%s.access_mode: %s is not supported by EBS volumes (several nodes "
			      "use an EBS volume only as MULTI_NODE_MULTI_WRITER block volumes of "
			      "io1 or io2, with Multi-Attach)",
			      r->field, r->access.mode);
	if (r->access.multi_node && !r->access.block)
		return errorf(ret_error, -EINVAL,
			      "%s.access_mode: %s is not supported for EBS filesystem volumes "
			      "(Multi-Attach volumes are raw block devices: no filesystem survives "
			      "two nodes writing it; ask for block access)",
			      r->field, r->access.mode);
	if (r->access.multi_node && r->params && !multi_attach_type(r->params->type))
		return errorf(ret_error, -EINVAL,
			      "%s.access_mode: %s needs an io1 or io2 volume (EBS Multi-Attach), "
			      "not type %s (set parameters.type to io2)",
			      r->field, r->access.mode, r->params->type);
	if (r->access.multi_node && r->volume &&
	    strcmp(r->volume->access_mode ?: "", EBS_MULTI_ATTACH_MODE) != 0)
		return errorf(ret_error, -EINVAL,
			      "%s.access_mode: %s needs a volume made with Multi-Attach; volume %s "
			      "was made for one node",
			      r->field, r->access.mode, r->volume->id);
	if (!r->access.block && !blocknode_fstype_supported(r->access.fstype ?: ""))
		return errorf(
			ret_error, -EINVAL,
			"%s.mount.fs_type: '%s' is not supported (want ext2, ext3, ext4 or xfs)",
			r->field, r->access.fstype);
	return 0;
}

static int stage_op(Backend *b, const BackendStage *r, void *ret, char **ret_error)
{
	BlockfsMkfsOptions mkfs = {};
	BackendStage s = *r;

	(void)ret;
	if (!r->access.block) {
		int e = blocknode_stage_defaults(r, &s.access.fstype, &mkfs, ret_error);
		if (e < 0)
			return e;
	}
	return blocknode_stage(ebs_node_block(ebs_of(b)->node), &s, &mkfs, ret_error);
}

static int unstage_op(Backend *b, const BackendUnstage *r, void *ret, char **ret_error)
{
	(void)ret;
	return blocknode_unstage(ebs_node_block(ebs_of(b)->node), r->volume_id, r->staging_path,
				 ret_error);
}

static int publish_op(Backend *b, const BackendPublish *r, void *ret, char **ret_error)
{
	(void)ret;
	return blocknode_publish(ebs_node_block(ebs_of(b)->node), r, ret_error);
}

static int unpublish_op(Backend *b, const BackendUnpublish *r, void *ret, char **ret_error)
{
	(void)ret;
	return blocknode_unpublish(ebs_node_block(ebs_of(b)->node), r->volume_id, r->target_path,
				   ret_error);
}

static int node_expand_op(Backend *b, const BackendNodeExpand *r, BackendNodeExpanded *ret,
			  char **ret_error)
{
	return blocknode_expand(ebs_node_block(ebs_of(b)->node), r->volume_id, r->volume_path,
				r->required, r->limit, &ret->size, ret_error);
}

static int node_stats_op(Backend *b, const BackendStatsRequest *r, BackendStats *ret,
			 char **ret_error)
{
	return blocknode_stats(ebs_node_block(ebs_of(b)->node), r->volume_id, r->volume_path, ret,
			       ret_error);
}

/* The controller's operations: the CSI layer calls them only in a mode that serves them. */
#define CONTROLLER_OP(op, request, result)                                              \
	static int op##_op(Backend *b, const request *r, result *ret, char **ret_error) \
	{                                                                               \
		return ebs_##op(ebs_of(b)->controller, r, ret, ret_error);              \
	}

CONTROLLER_OP(create_volume, BackendCreateVolume, BackendVolume)
CONTROLLER_OP(delete_volume, BackendRef, BackendDeleted)
CONTROLLER_OP(get_volume, BackendRef, BackendVolume)
CONTROLLER_OP(list_volumes, BackendListRequest, BackendVolumeList)
CONTROLLER_OP(get_capacity, BackendCapacityRequest, BackendCapacity)
CONTROLLER_OP(attach, BackendAttach, BackendAttachment)
CONTROLLER_OP(detach, BackendDetach, BackendDetached)
CONTROLLER_OP(change_volume, BackendChange, BackendChanged)
CONTROLLER_OP(create_snapshot, BackendCreateSnapshot, BackendSnapshot)
CONTROLLER_OP(delete_snapshot, BackendRef, BackendDeleted)
CONTROLLER_OP(get_snapshot, BackendRef, BackendSnapshot)
CONTROLLER_OP(list_snapshots, BackendListRequest, BackendSnapshotList)
CONTROLLER_OP(create_group, BackendCreateGroup, BackendGroup)
CONTROLLER_OP(delete_group, BackendGroupRequest, BackendDeleted)
CONTROLLER_OP(get_group, BackendGroupRequest, BackendGroup)

static int node_info_op(Backend *b, const void *r, BackendNodeInfo *ret, char **ret_error)
{
	(void)r;
	(void)ret_error;
	ebs_node_info(ebs_of(b)->node, ret);
	return 0;
}

static void ebs_backend_free(Backend *b)
{
	ebs_controller_free(ebs_of(b)->controller);
	ebs_node_free(ebs_of(b)->node);
	free(b);
}

/* A controller does not count EC2's volumes for a status (a Describe each time): the node its
 * stages and publishes. */
static int status_op(Backend *b, const void *r, BackendStatus *ret, char **ret_error)
{
	EbsNode *n = ebs_of(b)->node;
	BackendStatus s = {
		.volumes = -1, .snapshots = -1, .staged = -1, .published = -1, .devices = -1};

	(void)r;
	(void)ret_error;
	if (n)
		ebs_node_uses(n, &s.staged, &s.published);
	*ret = s;
	return 0;
}

static const char *state_dir_op(Backend *b)
{
	EbsNode *n = ebs_of(b)->node;

	/* A controller runs no program: only a node has records. */
	return n ? ebs_node_state_dir(n) : NULL;
}

/* Who the node found it is (flags, or the instance metadata), and where its state is. */
static char *describe_op(Backend *b)
{
	EbsNode *n = ebs_of(b)->node;
	BackendNodeInfo info = {};

	if (!n)
		return xstrdup("EBS controller");
	ebs_node_info(n, &info);
	char *s = xasprintf("EBS node %s in zone %s, up to %u volumes, state in %s", info.node_id,
			    strmap_get(&info.topology, EBS_TOPOLOGY_K8S_ZONE) ?: "?",
			    (unsigned)info.max_volumes, ebs_node_state_dir(n));
	free(info.node_id);
	strmap_done(&info.topology);
	return s;
}

static const BackendOps ebs_ops = {
	.name = "ebs",
	.size_unit = EBS_GIB,
	.default_size = EBS_DEFAULT_SIZE,
	.probe = ebs_probe,
	.check_access = check_access_op,
	.parse_params = volume_params_request,
	.create_volume = create_volume_op,
	.delete_volume = delete_volume_op,
	.get_volume = get_volume_op,
	.list_volumes = list_volumes_op,
	.get_capacity = get_capacity_op,
	.attach = attach_op,
	.detach = detach_op,
	.change_volume = change_volume_op,
	.create_snapshot = create_snapshot_op,
	.delete_snapshot = delete_snapshot_op,
	.get_snapshot = get_snapshot_op,
	.list_snapshots = list_snapshots_op,
	.create_group = create_group_op,
	.delete_group = delete_group_op,
	.get_group = get_group_op,
	.stage = stage_op,
	.unstage = unstage_op,
	.publish = publish_op,
	.unpublish = unpublish_op,
	.node_expand = node_expand_op,
	.node_stats = node_stats_op,
	.node_info = node_info_op,
	.status = status_op,
	.state_dir = state_dir_op,
	.describe = describe_op,
	.free = ebs_backend_free,
};

/* The node's identity: what the operator set, the rest from the instance metadata service. */
static int node_start(const BackendConfig *config, const EbsSettings *es, EbsNode **ret,
		      char **ret_error)
{
	EbsNodeConfig nc = {
		.node_id = config->node_id_set ? config->node_id : NULL,
		.zone = config->zone_set ? config->zone : NULL,
		.instance_type = es->instance_type,
		.max_volumes = config->max_volumes_set ? config->max_volumes_per_node : 0,
		.state_dir = es->state_dir,
		.devices = {.by_id = es->device_dir},
		.device_wait = es->device_wait,
		.imds_endpoint = ebs_imds_endpoint(),
	};
	return ebs_node_new(&nc, ret, ret_error);
}

BACKEND_NEW(ebs);
BACKEND_NEW(ebs)
{
	static const EbsSettings defaults = {};
	const EbsSettings *es = config->settings ?: &defaults;
	EbsBackend *eb = xnew0(EbsBackend, 1);
	int r = 0;

	eb->base.ops = &ebs_ops;
	if (config->roles & BACKEND_ROLE_CONTROLLER)
		r = ebs_controller_new(
			&(EbsControllerConfig){
				.driver_name = config->driver_name,
				.endpoint = es->ec2_endpoint,
				.imds_endpoint = ebs_imds_endpoint(),
				.extra_tags = &es->extra_tags,
			},
			&eb->controller, ret_error);
	if (r >= 0 && (config->roles & BACKEND_ROLE_NODE))
		r = node_start(config, es, &eb->node, ret_error);
	if (r < 0) {
		ebs_backend_free(&eb->base);
		return r;
	}
	*ret = &eb->base;
	return 0;
}
