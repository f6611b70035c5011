/* SPDX-License-Identifier: Apache-2.0 */
/* How many EBS volumes a node can take besides its root volume: NodeGetInfo's
 * max_volumes_per_node, computed as the AWS EBS CSI driver does from the instance type
 * (ebs-limits.c has the table and its sources). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

typedef struct EbsInstanceShape {
	const char *type;	 /* "m5.large" */
	unsigned enis;		 /* network interfaces attached (they share Nitro's slots); 0: 1 */
	unsigned extra_mappings; /* EBS volumes of its block device mapping besides the root one */
} EbsInstanceShape;

/* Whether type has the shape of an instance type ("family.size": m5.large, u-6tb1.metal). */
bool ebs_instance_type_valid(const char *type);

/* "nitro" or "xen": the hypervisor of the type's family (a family the table does not know is
 * taken for Nitro, as every family since 2017 is). */
const char *ebs_instance_hypervisor(const char *type);

/* The attach limit for data volumes: at least 1. -EINVAL for a type of the wrong shape. */
int ebs_attach_limit(const EbsInstanceShape *instance, uint32_t *ret);
