/* SPDX-License-Identifier: Apache-2.0 */
/* AWS credentials and region, found where the AWS SDKs look for them.
 *
 * The credential chain, first source that is configured wins:
 *
 *   1. environment: AWS_ACCESS_KEY_ID + AWS_SECRET_ACCESS_KEY (+ AWS_SESSION_TOKEN);
 *   2. web identity: AWS_WEB_IDENTITY_TOKEN_FILE + AWS_ROLE_ARN (+ AWS_ROLE_SESSION_NAME), the
 *      token exchanged by an unsigned STS AssumeRoleWithWebIdentity (how EKS gives a pod a
 *      role); STS at AWS_STS_ENDPOINT, else https://sts.<region>.amazonaws.com/;
 *   3. shared credentials file: AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials, profile
 *      AWS_PROFILE, else "default" (aws_access_key_id, aws_secret_access_key,
 *      aws_session_token);
 *   4. instance profile: IMDSv2 iam/security-credentials/<role>, the service at
 *      AWS_EC2_METADATA_SERVICE_ENDPOINT (AWS_EC2_METADATA_DISABLED=true skips it).
 *
 * Web identity comes before the file, as in the AWS SDKs: the variables EKS sets on a pod say
 * which role it should have, whatever file its image carries. A source that is configured but
 * broken (a token file that cannot be read, STS refusing, a profile named in AWS_PROFILE that
 * the file lacks, half a key pair) is an error, not a reason to try the next one: falling
 * through would run the driver under another identity than the one its operator gave it.
 *
 * Credentials that expire (web identity, instance profile) are fetched again when less than
 * refresh_before (5 min) is left. Should that fail while they are still valid, they keep
 * being used, and the next try waits 10 s. Thread-safe: one thread fetches while the others
 * wait for it (or use the still valid ones). Nothing is read before the first
 * aws_credentials_get(): a process that never calls it (node mode) never touches a
 * credential. */
#pragma once

#include "imds.h"
#include "macro.h"
#include "time-util.h"

typedef struct AwsCredentialsProvider AwsCredentialsProvider;

typedef struct AwsCredentials {
	char *access_key_id;
	char *secret_access_key;
	char *session_token; /* NULL: none */
	usec_t expiration;   /* CLOCK_REALTIME; 0: does not expire */
	const char *source;  /* "environment", "web-identity", "shared-file", "instance-profile" */
} AwsCredentials;

void aws_credentials_done(AwsCredentials *c);

typedef struct AwsCredentialsConfig {
	char *const *environment;  /* NULL: the process's (read in aws_credentials_provider_new) */
	const char *region;	   /* STS's region; NULL: AWS_REGION, AWS_DEFAULT_REGION */
	const char *sts_endpoint;  /* NULL: AWS_STS_ENDPOINT, else by region */
	const char *imds_endpoint; /* NULL: AWS_EC2_METADATA_SERVICE_ENDPOINT, else the default */
	usec_t refresh_before;	   /* 0: 5 min */
	usec_t imds_attempt_timeout; /* 0: imds.h's default */
} AwsCredentialsConfig;

/* A provider; copies the variables it needs from the environment, does no I/O. */
AwsCredentialsProvider *aws_credentials_provider_new(const AwsCredentialsConfig *config);
/* No call may be running. NULL is a no-op. */
void aws_credentials_provider_free(AwsCredentialsProvider *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(AwsCredentialsProvider *, aws_credentials_provider_free);

/* A copy of the current credentials in *ret, fetched first when there are none or they are
 * due for refresh. Blocks until the deadline (CLOCK_MONOTONIC) at most. Returns 0, or
 * -ENOKEY when no source is configured, -ETIMEDOUT, or the failing source's errno (-EACCES
 * for STS refusing the token, ...), with *ret_error (may be NULL) naming the source. */
int aws_credentials_get(AwsCredentialsProvider *p, usec_t deadline, AwsCredentials *ret,
			char **ret_error);

/* Forgets the current credentials (refused as expired): the next get walks the chain again. */
void aws_credentials_invalidate(AwsCredentialsProvider *p);

/* How many times the chain was walked (credentials fetched or refreshed). */
unsigned aws_credentials_fetches(AwsCredentialsProvider *p);

/* The region as the SDKs find it: AWS_REGION, AWS_DEFAULT_REGION in environment (NULL: the
 * process's), else from the instance metadata service (imds may be NULL: none). Returns 0 with
 * *ret a new string, -ENOENT when no source has one, or imds_region()'s error. */
int aws_region_discover(char *const *environment, Imds *imds, usec_t deadline, char **ret,
			char **ret_error);

/* The realtime microseconds of an ISO 8601 UTC time as AWS writes expirations
 * ("2024-05-01T12:34:56Z", fractions and "+00:00" too). Returns 0 or -EINVAL. */
int aws_parse_time(const char *s, usec_t *ret);
