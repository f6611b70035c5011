/* SPDX-License-Identifier: Apache-2.0 */
/* The conformance check of a Flexvolume driver: the lifecycle Kubernetes would put it through
 * (init, getvolumename, then attach ... detach or mount ... unmount), each answer judged as
 * Kubernetes judges it: a violation is what makes the call fail there (or hang: volplug has
 * deadlines), a warning what Kubernetes accepts though it is probably not what the driver
 * meant (a mount that mounted nothing). The kubelet's side is done as it does it: directories
 * are made before mountdevice and mount, removed after unmount and unmountdevice. The results
 * are plain data, steps with their violations, warnings and notes; showing them is the caller's
 * business. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "call.h"
#include "time-util.h"

typedef struct FlexConformanceStep {
	char *label;	   /* the command, or "isattached (detached)" */
	char **violations; /* a strv (NULL: none): what makes Kubernetes fail this step */
	char **warnings;   /* a strv: what Kubernetes accepts, but is likely a bug */
	char **notes;	   /* a strv: what the host does about an answer, what the driver said */
} FlexConformanceStep;

typedef struct FlexConformanceConfig {
	const char *driver;	    /* its name (vendor/name): the pod volume directory's folder */
	const char *exe;	    /* an absolute path */
	const FlexVolumeSpec *spec; /* the options; no pv_or_volume_name: a random one */
	const FlexCallConfig *call; /* deadlines; NULL: Kubernetes' defaults */
	const char *tmp_dir;	    /* the mounts go in a new directory below it; NULL: /tmp */
	/* Called as a step starts and once it is judged, for progress; either may be NULL. */
	void (*step_begin)(const char *label, void *userdata);
	void (*step_end)(const FlexConformanceStep *step, void *userdata);
	void *userdata;
} FlexConformanceConfig;

typedef struct FlexConformance {
	FlexConformanceStep *steps;
	size_t n_steps;
	char **cleanups; /* a strv: what the driver left that the check had to undo, or could not */
	unsigned checks, violations; /* rules evaluated, rules broken */
	unsigned warnings;	     /* warnings given */
	bool loaded;		     /* init answered Success: Kubernetes would load the driver */
	bool root_skipped;	     /* not root: only init and getvolumename ran */
} FlexConformance;

/* Runs cfg->exe through the lifecycle its init capabilities call for, mounting in a temporary
 * directory that is removed afterwards (without root only init and getvolumename run). Blocks:
 * each command up to its deadline. Returns 0 and *ret whatever the driver did (ret->violations
 * counts what it got wrong), or a negative errno with *ret_error when the check itself could
 * not go on (no temporary directory). */
int flex_conformance_run(const FlexConformanceConfig *cfg, FlexConformance *ret, char **ret_error);
void flex_conformance_done(FlexConformance *c);
