/* SPDX-License-Identifier: Apache-2.0 */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "call.h"
#include "driver.h"
#include "strmap.h"
#include "time-util.h"

typedef struct DaemonConfig {
	DriverMode mode;
	char *endpoint;
	char *socket_path; /* derived from endpoint */
	mode_t socket_mode;
	char *node_id;
	char *driver_name;
	char *backend; /* "pool" or "ebs": the backend volumes are made and served by */
	bool node_id_set, zone_set, max_volumes_set; /* given on the command line */
	char *pool;
	bool pool_init; /* --pool-init: a new pool where the record beside it says one was lost */
	uint64_t pool_capacity;
	double overprovision; /* the pool provisions up to capacity x this */
	usec_t trim_interval; /* 0: the node never trims */
	char *zone;
	Strmap topology_labels; /* --topology-label KEY=VALUE */
	bool distributed;
	uint32_t max_volumes_per_node;
	unsigned workers;
	int verbosity;
	int log_format;	       /* LogFormat */
	char *metrics_address; /* "HOST:PORT" of /metrics and /healthz; NULL: off */
	usec_t modify_coalesce_window;
	usec_t shutdown_grace;
	char *flexvolume_dir; /* "": Flexvolume off */
	int fs_group_policy;  /* OwnershipPolicy */
	char *state_dir;      /* node-local state of the EBS backend */
	char *instance_type;  /* EBS: NULL: from the instance metadata */
	char *device_dir;     /* EBS: where volumes' by-id links are; NULL: /dev/disk/by-id */
	usec_t device_wait;   /* EBS: how long NodeStageVolume waits for the device */
	char *ec2_endpoint;   /* EBS: NULL: EC2's own for the region */
	Strmap extra_tags;    /* EBS: tags added to every volume and snapshot */
	bool workers_set;
	usec_t flexvolume_timeout[_FLEX_COMMAND_MAX]; /* 0: the command's default */
	char **flexvolume_env; /* a strv (flex_env_parse()); NULL: volplugd's own */
	enum {
		DAEMON_RUN,
		DAEMON_HELP,
		DAEMON_VERSION
	} action;
} DaemonConfig;

/* Parses volplugd's command line into *ret (which it initialises). On a bad flag returns
 * -EINVAL and writes one line naming it to *ret_error (malloc'ed). */
int daemon_config_parse(int argc, char **argv, DaemonConfig *ret, char **ret_error);
void daemon_config_done(DaemonConfig *c);

/* The --help text. */
extern const char daemon_usage[];
