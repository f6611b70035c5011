/* SPDX-License-Identifier: Apache-2.0 */
/* One Flexvolume driver call, made exactly as Kubernetes makes it: `<exe> <command> <args...>`,
 * no shell, no stdin, the options as one JSON argv string; the answer is a JSON object. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "exec.h"
#include "time-util.h"

typedef enum FlexCommand {
	FLEX_INIT,
	FLEX_GETVOLUMENAME,
	FLEX_ATTACH,
	FLEX_ISATTACHED,
	FLEX_DETACH,
	FLEX_WAITFORATTACH,
	FLEX_MOUNTDEVICE,
	FLEX_UNMOUNTDEVICE,
	FLEX_MOUNT,
	FLEX_UNMOUNT,
	FLEX_EXPANDVOLUME,
	FLEX_EXPANDFS,
	_FLEX_COMMAND_MAX,
} FlexCommand;

/* "init", "mount", ...; NULL for an out-of-range value. */
const char *flex_command_to_string(FlexCommand c);
/* The command named s (exact, lower case), or -EINVAL. */
int flex_command_from_string(const char *s);

/* Deadlines, limits and environment of driver calls. Zero fields take the defaults. */
typedef struct FlexCallConfig {
	usec_t timeout[_FLEX_COMMAND_MAX]; /* USEC_INFINITY: none */
	usec_t kill_grace;		   /* SIGTERM -> SIGKILL; 0: 10 s like Kubernetes */
	size_t output_cap;		   /* bytes kept per stream; 0: 64 KiB */
	char *const *env; /* the drivers' environment; NULL: this process's, as the kubelet */
} FlexCallConfig;

/* The environment drivers run with, from a --flexvolume-env value: "inherit" (*ret_env NULL:
 * this process's whole environment, as the kubelet passes its own), "clean" (exec's: a fixed
 * PATH and LC_ALL=C), or a comma-separated list of variable names, each passed on from this
 * process's environment when set, over the clean one. Returns 0 and *ret_env (a strv), or
 * -EINVAL with *ret_error naming what is wrong. */
int flex_env_parse(const char *value, char ***ret_env, char **ret_error);

/* The deadline for cmd: cfg's value, else the default (waitforattach 10 min like Kubernetes,
 * mountdevice/expandvolume/expandfs 5 min (mkfs, resize), init 30 s, others 2 min). cfg may
 * be NULL. */
usec_t flex_call_timeout(const FlexCallConfig *cfg, FlexCommand cmd);

typedef struct FlexOption {
	const char *key, *value;
} FlexOption;

/* What the options JSON says about the volume (every command that takes <json>). */
typedef struct FlexVolumeSpec {
	const char *fs_type; /* NULL or "": unset, sent as "" */
	bool read_only;
	const char *pv_or_volume_name;
	const FlexOption *options; /* the user's; they win over the kubernetes.io keys */
	size_t n_options;
} FlexVolumeSpec;

/* What mount adds. */
typedef struct FlexPodInfo {
	const char *name, *namespace, *uid, *service_account; /* NULL sent as "" */
	const FlexOption
		*secrets; /* raw values; sent base64-encoded as kubernetes.io/secret/<key> */
	size_t n_secrets;
	int64_t fs_group; /* < 0: none, no kubernetes.io/mounterArgs.FsGroup key */
} FlexPodInfo;

/* Inputs of one call; each command reads only the fields its argv has (see FLEXVOLUME.md). */
typedef struct FlexCallArgs {
	const FlexVolumeSpec *spec;    /* <json>: all but init, detach, unmount, unmountdevice */
	const FlexPodInfo *pod;	       /* mount only; NULL: no pod keys */
	const char *node_name;	       /* attach, isattached, detach */
	const char *volume_name;       /* detach */
	const char *device;	       /* waitforattach, mountdevice, expandfs (devicePath) */
	const char *device_mount_path; /* mountdevice, unmountdevice, expandvolume, expandfs */
	const char *pod_volume_dir;    /* mount, unmount */
	uint64_t new_size, old_size;   /* expandvolume, expandfs: bytes */
} FlexCallArgs;

typedef struct FlexCapabilities {
	bool attach, selinux_relabel, supports_metrics, fs_group, requires_fs_resize;
} FlexCapabilities;

#define FLEX_CAPABILITIES_DEFAULT                      \
	((FlexCapabilities){.attach = true,            \
			    .selinux_relabel = true,   \
			    .supports_metrics = false, \
			    .fs_group = true,          \
			    .requires_fs_resize = true})

typedef enum FlexStatus {
	FLEX_STATUS_SUCCESS,
	FLEX_STATUS_FAILURE, /* "Failure", or any other status, or none */
	FLEX_STATUS_NOT_SUPPORTED,
} FlexStatus;

/* A parsed answer. Strings are NULL when absent. */
typedef struct FlexReply {
	FlexStatus status;
	char *status_text; /* the driver's word, as sent */
	char *message, *device, *volume_name;
	bool has_attached, attached;
	bool has_capabilities;	       /* a "capabilities" object was sent */
	FlexCapabilities capabilities; /* defaults for absent keys, null, or no object */
} FlexReply;

void flex_reply_done(FlexReply *r);

/* The options JSON of spec (and pod, for mount): a compact object of strings with sorted keys,
 * byte for byte what Kubernetes' json.Marshal produces. Never fails. */
char *flex_options_json(const FlexVolumeSpec *spec, const FlexPodInfo *pod);

/* A copy of an options JSON fit for logs: every kubernetes.io/secret/<key> value replaced by
 * "(redacted)". Text that is not a JSON object is replaced whole. Never fails. */
char *flex_options_redact(const char *json);

/* The argv of cmd after the executable: a NULL-terminated array of strings (free each, then the
 * array). Returns -EINVAL when args lacks a field the command needs. */
int flex_call_argv(FlexCommand cmd, const FlexCallArgs *args, char ***ret_argv);

/* Finds the answer in a driver's output: stdout as one JSON object, else stderr (Kubernetes
 * reads both together), else the last JSON object printed on stdout, then on stderr. Keys
 * match case-insensitively; unknown keys are ignored. Returns -EBADMSG when no JSON object is
 * found, -EPROTO when a known key has the wrong type; *ret written on success. */
int flex_reply_parse(const char *out, size_t out_len, const char *err, size_t err_len,
		     FlexReply *ret);

/* The judgement of one run of a driver, as Kubernetes would take it. At most one applies: they
 * are listed in the order a run is looked at. */
typedef enum FlexVerdict {
	FLEX_VERDICT_SUCCESS,	     /* "Success" and exit status 0 */
	FLEX_VERDICT_CANNOT_RUN,     /* the executable could not be started */
	FLEX_VERDICT_TIMEOUT,	     /* no answer within the deadline */
	FLEX_VERDICT_NOT_JSON,	     /* no JSON object in the output */
	FLEX_VERDICT_BAD_TYPE,	     /* a known key of the wrong type */
	FLEX_VERDICT_NO_STATUS,	     /* an answer without "status": a failure */
	FLEX_VERDICT_UNKNOWN_STATUS, /* a status other than the three: a failure */
	FLEX_VERDICT_FAILURE,	     /* "Failure" */
	FLEX_VERDICT_NOT_SUPPORTED,  /* "Not supported", whatever the exit status */
	FLEX_VERDICT_BAD_EXIT,	     /* "Success", but a non-zero exit */
} FlexVerdict;

/* One run of a driver with everything it did, for callers that show more than the verdict. */
typedef struct FlexRun {
	char **argv; /* exe, command, args: NULL-terminated */
	FlexVerdict verdict;
	int exec_error;	  /* CANNOT_RUN: exec_run()'s error, res is empty; else 0 */
	ExecResult res;	  /* how it ended and its raw output (secrets and all) */
	bool parsed;	  /* reply holds the answer: every verdict from NO_STATUS on, and SUCCESS */
	FlexReply reply;  /* its message with secrets removed */
	char *type_error; /* BAD_TYPE: which key, e.g. "\"attached\" is a string, not a bool" */
	char *problem;	  /* NULL on SUCCESS, else flex_call()'s error message */
} FlexRun;

/* Runs driver exe (an absolute path; driver is its name, for messages) for cmd with the
 * deadline of cfg (may be NULL), SIGTERM then SIGKILL, parses the answer and judges it. Blocks.
 * Returns 0 whenever the run was made, whatever the driver did (see ret->verdict), or -EINVAL
 * for an unknown command or args lacking a field cmd needs (nothing ran). */
int flex_run(const char *driver, const char *exe, const FlexCallConfig *cfg, FlexCommand cmd,
	     const FlexCallArgs *args, FlexRun *ret);
void flex_run_done(FlexRun *run);

/* Whether Kubernetes would find this run's answer: it reads stdout and stderr together as one
 * JSON document, so one stream must hold exactly one JSON object and the other nothing but
 * white space (volplug reads stdout alone first and copes with more). False for a run that
 * could not start or timed out. */
bool flex_run_kubelet_parses(const FlexRun *run);

/* What flex_call() returns for a verdict: 0 for SUCCESS, else a negative errno (see there). */
int flex_verdict_to_errno(const FlexRun *run);

/* Runs driver exe (an absolute path; driver is its name, for messages) for cmd with a deadline,
 * SIGTERM then SIGKILL, and parses the answer: flex_run() reduced to its verdict. Blocks.
 * Returns 0 and *ret on "Success" with a zero exit; otherwise a negative errno and *ret_error,
 * a message naming the driver, the command, the exit status and an excerpt of the output, with
 * secrets removed:
 *   -EOPNOTSUPP "Not supported";  -EIO "Failure", another status or none;
 *   -ETIMEDOUT  deadline passed;  -EPROTO no JSON object, a badly typed key, or a non-zero exit
 *               with "Success";   -EINVAL missing args;  -ENOENT/-EACCES/-ENOEXEC not runnable.
 * ret, ret_error and cfg may be NULL. */
int flex_call(const char *driver, const char *exe, const FlexCallConfig *cfg, FlexCommand cmd,
	      const FlexCallArgs *args, FlexReply *ret, char **ret_error);

/* Runs init and returns the capabilities (defaults filled in). Same errors as flex_call. */
int flex_call_init(const char *driver, const char *exe, const FlexCallConfig *cfg,
		   FlexCapabilities *ret, char **ret_error);
