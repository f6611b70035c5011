/* SPDX-License-Identifier: Apache-2.0 */
/* EBS as a backend: backend.h's table over the node service (ebs-node.c). The controller's
 * operations (EC2 calls, with credentials) are not here yet: they stay NULL, and a process
 * that would serve them refuses to start rather than pretend. */
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "backend.h"
#include "ebs-node.h"
#include "error-util.h"

typedef struct EbsBackend {
	Backend base;
	EbsNode *node; /* NULL unless this process serves the node role */
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
	return 0;
}

/* EBS volumes are used by one node at a time, or by many at once as raw devices (io2
 * Multi-Attach); the node makes the filesystems of the block-device node service. */
static int check_access_op(Backend *b, const BackendAccessCheck *r, void *ret, char **ret_error)
{
	(void)b;
	(void)ret;
	if (r->access.multi_node &&
	    (strcmp(r->access.mode, "MULTI_NODE_MULTI_WRITER") != 0 || !r->access.block))
		return errorf(ret_error, -EINVAL,
			      "%s.access_mode: %s is not supported by EBS volumes (several nodes "
			      "only write raw block devices, with io2 Multi-Attach)",
			      r->field, r->access.mode);
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

static int node_info_op(Backend *b, const void *r, BackendNodeInfo *ret, char **ret_error)
{
	(void)r;
	(void)ret_error;
	ebs_node_info(ebs_of(b)->node, ret);
	return 0;
}

static void ebs_backend_free(Backend *b)
{
	ebs_node_free(ebs_of(b)->node);
	free(b);
}

static const BackendOps ebs_ops = {
	.name = "ebs",
	.probe = ebs_probe,
	.check_access = check_access_op,
	.stage = stage_op,
	.unstage = unstage_op,
	.publish = publish_op,
	.unpublish = unpublish_op,
	.node_expand = node_expand_op,
	.node_stats = node_stats_op,
	.node_info = node_info_op,
	.free = ebs_backend_free,
};

/* The node's identity: what the operator set, the rest from the instance metadata service. */
static int node_start(const BackendConfig *config, EbsNode **ret, char **ret_error)
{
	EbsNodeConfig nc = {
		.node_id = config->node_id_set ? config->node_id : NULL,
		.zone = config->zone_set ? config->zone : NULL,
		.instance_type = config->instance_type,
		.max_volumes = config->max_volumes_set ? config->max_volumes_per_node : 0,
		.state_dir = config->state_dir,
		.devices = {.by_id = config->device_dir},
		.device_wait = config->device_wait,
		.imds_endpoint = config->imds_endpoint,
	};
	return ebs_node_new(&nc, ret, ret_error);
}

BACKEND_NEW(ebs);
BACKEND_NEW(ebs)
{
	EbsBackend *eb;
	int r;

	if (config->roles & BACKEND_ROLE_CONTROLLER)
		return errorf(ret_error, -EOPNOTSUPP,
			      "the EBS backend serves the node service only so far: run it in "
			      "node mode");
	eb = xnew0(EbsBackend, 1);
	eb->base.ops = &ebs_ops;
	if ((config->roles & BACKEND_ROLE_NODE) &&
	    (r = node_start(config, &eb->node, ret_error)) < 0) {
		free(eb);
		return r;
	}
	*ret = &eb->base;
	return 0;
}
