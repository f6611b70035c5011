/* SPDX-License-Identifier: Apache-2.0 */
/* A client of the EC2 Query API (and of any AWS Query API: STS speaks the same protocol).
 *
 * A call is a form-encoded POST of Action, Version and the action's parameters, signed with
 * AWS Signature Version 4 by libcurl ("aws:amz:<region>:ec2"; a session token travels in
 * X-Amz-Security-Token), to https://ec2.<region>.amazonaws.com/ or an endpoint given (a VPC
 * endpoint, a test peer). The reply is an XML tree (aws-xml.h), whichever namespace it is in.
 *
 *     Ec2Params p = {};
 *     ec2_params_add_list(&p, "VolumeId", ids, n);            VolumeId.1=... VolumeId.2=...
 *     ec2_params_add_filter(&p, "status", states, 2); Filter.1.Name=status&Filter.1.Value.1=... r =
 * ec2_call(client, "DescribeVolumes", &p, deadline, &reply, &error); XML_FOREACH(vol, reply,
 * "volumeSet/item") ...
 *
 * Errors come back as a negative errno (ec2_code_to_errno()) and an Ec2Error that keeps EC2's
 * code and message ("InvalidVolume.NotFound: The volume 'vol-1' does not exist."). Throttling
 * (RequestLimitExceeded, HTTP 503), 5xx replies and transient transport failures are retried
 * with exponential backoff and full jitter, never sleeping past the caller's deadline:
 * -ETIMEDOUT once it is spent. An ExpiredToken reply makes the client drop its credentials
 * and try once more with fresh ones.
 *
 * A client is thread-safe: any number of threads may call at once; connections are pooled. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "aws-request.h"
#include "aws-xml.h"
#include "strmap.h"
#include "time-util.h"

#define EC2_API_VERSION "2016-11-15"

typedef struct Ec2Client Ec2Client;

/* ---- request parameters ---- */

/* An action's parameters in the order added (a key added twice keeps its last value), with
 * the counters of the numbered groups. Start from {}; ec2_params_done() frees. */
typedef struct Ec2Params {
	Strmap kv;
	unsigned n_filters;   /* Filter.N added so far */
	unsigned n_tag_specs; /* TagSpecification.N added so far */
} Ec2Params;

void ec2_params_add(Ec2Params *p, const char *key, const char *value);
/* key = the formatted value. */
void ec2_params_addf(Ec2Params *p, const char *key, const char *fmt, ...) _printf_(3, 4);
/* name.1 = values[0], name.2 = values[1], ... */
void ec2_params_add_list(Ec2Params *p, const char *name, const char *const *values, size_t n);
/* The next Filter.N: Filter.N.Name = name, Filter.N.Value.M = values[M-1]. */
void ec2_params_add_filter(Ec2Params *p, const char *name, const char *const *values, size_t n);
/* The next TagSpecification.N for resource_type ("volume", "snapshot"), with Tag.M.Key and
 * Tag.M.Value for each tag; nothing when tags is empty. */
void ec2_params_add_tag_spec(Ec2Params *p, const char *resource_type, const Strmap *tags);
/* prefix.M.Key and prefix.M.Value for each tag (CreateTags: prefix "Tag"). */
void ec2_params_add_tags(Ec2Params *p, const char *prefix, const Strmap *tags);
/* The form body: Action, Version, then each parameter, URL-encoded; a new string. */
char *ec2_params_encode(const Ec2Params *p, const char *action, const char *version);
void ec2_params_done(Ec2Params *p);

/* ---- errors ---- */

/* An EC2 error: the shared AWS error (code, message, request ID, retries). */
typedef AwsError Ec2Error;

void ec2_error_done(Ec2Error *e);

/* The errno an EC2 error code stands for (the HTTP status decides when code is NULL or not in
 * the table): *.NotFound -ENOENT, *.Malformed and parameter errors -EINVAL, VolumeInUse
 * -ENOTEMPTY, IncorrectState -EBUSY, IdempotentParameterMismatch -EEXIST,
 * AttachmentLimitExceeded -EMLINK, quota and capacity errors -ENOSPC, AuthFailure -EACCES,
 * UnauthorizedOperation -EPERM, throttling, 5xx and VolumeModificationRateExceeded -EAGAIN. */
int ec2_code_to_errno(const char *code, int http_status);
/* True for the codes that mean "too many requests, slow down". */
bool ec2_code_is_throttle(const char *code);
/* True when the same request may succeed if sent again a little later (throttling, 5xx). */
bool ec2_error_retryable(const char *code, int http_status);

/* Reads an AWS error reply (EC2's <Response><Errors><Error>, STS's <ErrorResponse><Error>, or
 * anything else) into *ret. */
void ec2_error_from_reply(int http_status, const char *body, size_t len, Ec2Error *ret);

/* ---- the client ---- */

typedef struct Ec2Config {
	const char *region;		     /* required */
	const char *endpoint;		     /* NULL: https://ec2.<region>.amazonaws.com/ */
	const char *service;		     /* SigV4 service name; NULL: "ec2" */
	const char *api_version;	     /* NULL: EC2_API_VERSION */
	AwsCredentialsProvider *credentials; /* borrowed; NULL: requests go unsigned */
	usec_t retry_base;		     /* first backoff bound; 0: 100 ms */
	usec_t retry_cap;		     /* backoff bound cap; 0: 20 s */
	unsigned max_retries;		     /* 0: until the deadline (10 without one) */
	usec_t attempt_timeout;		     /* one exchange at most; 0: 60 s */
} Ec2Config;

/* A new client. The credentials provider must outlive it. Returns 0, or -EINVAL (no region,
 * an endpoint that is not http(s)://) with *ret_error (may be NULL) saying which. No I/O. */
int ec2_client_new(const Ec2Config *config, Ec2Client **ret, char **ret_error);
/* No call may be running. NULL is a no-op. */
void ec2_client_free(Ec2Client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Ec2Client *, ec2_client_free);

/* The endpoint the client calls. */
const char *ec2_client_endpoint(const Ec2Client *c);

/* Calls action with params (NULL: none) and blocks until it succeeds, fails for good, or the
 * deadline (CLOCK_MONOTONIC; USEC_INFINITY: none) passes. Returns 0 with *ret_reply the reply's
 * root element (caller frees with xml_free()), or a negative errno with *ret_error (may be
 * NULL; caller calls ec2_error_done()) filled: the code table's errno for an EC2 error,
 * -ETIMEDOUT when the deadline ran out first, -EAGAIN when max_retries ran out, -EPROTO for a
 * reply that is no XML, a transport errno (http_perform()) or the credentials' error. */
int ec2_call(Ec2Client *c, const char *action, const Ec2Params *params, usec_t deadline,
	     XmlNode **ret_reply, Ec2Error *ret_error);

/* Counters since the client was made (for metrics). */
typedef struct Ec2Stats {
	uint64_t calls;	    /* ec2_call()s */
	uint64_t attempts;  /* HTTP exchanges tried */
	uint64_t retries;   /* attempts after backing off */
	uint64_t throttled; /* replies that said to slow down */
	uint64_t failed;    /* calls that returned an error */
} Ec2Stats;

void ec2_client_stats(Ec2Client *c, Ec2Stats *ret);
