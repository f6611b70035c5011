/* SPDX-License-Identifier: Apache-2.0 */
/* The EC2 instance metadata service, version 2 only (IMDSv2): a session token from
 * PUT /latest/api/token (header X-aws-ec2-metadata-token-ttl-seconds), then GETs under
 * /latest/meta-data/ carrying it (header X-aws-ec2-metadata-token). The token is kept until a
 * minute before its TTL ends, or until the service answers 401.
 *
 * The service is link-local (169.254.169.254) and answers within milliseconds on an instance;
 * elsewhere nothing answers at all, so each attempt is short (1 s by default) and a call tries
 * at most 3 times: off EC2 a lookup fails within seconds, never hangs. Proxies are bypassed.
 * Thread-safe. */
#pragma once

#include "macro.h"
#include "time-util.h"

#define IMDS_ENDPOINT_DEFAULT "http://169.254.169.254"

typedef struct Imds Imds;

typedef struct ImdsConfig {
	const char *endpoint;	/* scheme://host[:port]; NULL: IMDS_ENDPOINT_DEFAULT */
	usec_t attempt_timeout; /* 0: 1 s */
	unsigned token_ttl;	/* seconds, 1-21600; 0: 21600 */
} ImdsConfig;

/* A client; no I/O until the first call. */
Imds *imds_new(const ImdsConfig *config);
void imds_free(Imds *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Imds *, imds_free);

/* The endpoint the client asks. */
const char *imds_endpoint(const Imds *m);

/* GETs /latest/meta-data/<path>; blocks until the deadline (CLOCK_MONOTONIC) at most. Returns
 * 0 with *ret the body (without trailing whitespace), -ENOENT when the service has no such
 * item (404), -EACCES when it refuses the token or the service is disabled (401, 403),
 * -EAGAIN for its 5xx, or http_perform()'s errno (-ETIMEDOUT, -ECONNREFUSED, ...), with
 * *ret_error (may be NULL) naming the path. */
int imds_get(Imds *m, const char *path, usec_t deadline, char **ret, char **ret_error);

/* What the node side of a driver needs to know about its instance. */
typedef struct ImdsIdentity {
	char *instance_id;	 /* i-0123456789abcdef0 */
	char *availability_zone; /* us-east-1a */
	char *instance_type;	 /* m5.large */
} ImdsIdentity;

void imds_identity_done(ImdsIdentity *id);

/* The instance's ID, zone and type (three GETs). Returns 0 or imds_get()'s error. */
int imds_identity(Imds *m, usec_t deadline, ImdsIdentity *ret, char **ret_error);

/* The instance's region: placement/region, or where the service lacks it, the availability
 * zone without its letter ("us-east-1a" -> "us-east-1"). Returns 0 or imds_get()'s error. */
int imds_region(Imds *m, usec_t deadline, char **ret, char **ret_error);

/* The region of an availability zone name ("us-east-1a" -> "us-east-1"); a new string, or
 * NULL when zone ends in no letter. */
char *imds_zone_to_region(const char *zone);
