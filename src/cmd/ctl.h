/* SPDX-License-Identifier: Apache-2.0 */
/* Shared by volplugctl's subcommands. */
#pragma once

#include <jansson.h>
#include <stdbool.h>

#include "catalog.h"
#include "client.h"
#include "time-util.h"

typedef struct Ctl {
	const char *endpoint;
	bool json;	/* -o json */
	usec_t timeout; /* per call */
	RpcClient *client;
} Ctl;

/* Exit codes: 0 success, 1 the RPC or the operation failed, 2 bad usage. */
#define CTL_EXIT_FAILED 1
#define CTL_EXIT_USAGE 2

/* Connects ctl->client on first use. Returns 0 or an exit code. */
int ctl_connect(Ctl *ctl);

/* Calls a method by name with a JSON request. On success *ret_reply holds the JSON reply;
 * on failure prints "volplugctl: METHOD: CODE: message" and returns CTL_EXIT_FAILED. */
int ctl_call(Ctl *ctl, const char *method, json_t *request, json_t **ret_reply);

/* Takes one reply of a stream; a non-zero return (an exit code) cancels the call. */
typedef int (*CtlStreamFunc)(const ProtobufCMessage *reply, void *userdata);

/* Calls a method whose replies are a stream (RpcMethodInfo.server_streaming) with a JSON
 * request; fn gets each reply as it comes. Returns 0, fn's exit code, or CTL_EXIT_FAILED
 * after printing "volplugctl: METHOD: CODE: message" (replies before the error were given to
 * fn). */
int ctl_stream(Ctl *ctl, const char *method, json_t *request, CtlStreamFunc fn, void *userdata);

/* Prints a JSON reply as JSON (-o json) or as indented "key: value" lines. */
void ctl_print(const Ctl *ctl, json_t *reply);

/* Prints "volplugctl: ..." to stderr and returns code. */
int ctl_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int ctl_bench(Ctl *ctl, int argc, char **argv);
int ctl_pool(Ctl *ctl, int argc, char **argv);
int ctl_ownership(Ctl *ctl, int argc, char **argv);
/* argv[0] volume|snapshot|group|node|capacity|controller: one CSI RPC. Returns the exit code. */
int ctl_csi(Ctl *ctl, int argc, char **argv);
/* argv[0] flex: list|install|remove|call|test Flexvolume drivers. Returns the exit code. */
int ctl_flex(Ctl *ctl, int argc, char **argv);
/* argv[0] status: the daemon's Admin.GetStatus, for a person or as JSON. */
int ctl_status(Ctl *ctl, int argc, char **argv);
