/* SPDX-License-Identifier: Apache-2.0 */
/* The EBS backend's own settings (ebs-options.c), for ebs-backend.c. */
#pragma once

#include "backend.h"
#include "strmap.h"
#include "time-util.h"

typedef struct EbsSettings {
	char *state_dir;     /* node: NULL: EBS_STATE_DIR_DEFAULT */
	char *instance_type; /* node: NULL: from the instance metadata */
	char *device_dir;    /* node: its devices' by-id links; NULL: /dev/disk/by-id */
	usec_t device_wait;  /* node: how long a stage waits for the device; 0: 10 s */
	char *ec2_endpoint;  /* controller: NULL: EC2's own for the region */
	Strmap extra_tags;   /* controller: added to every volume and snapshot */
} EbsSettings;

/* The instance metadata service's endpoint from the environment, as the AWS SDKs find it:
 * NULL the default, "" switched off. */
const char *ebs_imds_endpoint(void);
