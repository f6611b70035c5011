/* SPDX-License-Identifier: Apache-2.0 */
/* What the EC2 client sends (the form body: lists, filters, tags, URL encoding) and what it
 * makes of EC2's errors (the code table, error replies), without a network. */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "aws-credentials.h"
#include "aws-http.h"
#include "ec2.h"
#include "imds.h"
#include "tap.h"

static void test_encoding(void)
{
	_cleanup_free_ char *plain = ec2_params_encode(NULL, "DescribeRegions", EC2_API_VERSION);
	is_str(plain, "Action=DescribeRegions&Version=2016-11-15",
	       "no parameters: Action, Version");

	Ec2Params p = {};
	const char *ids[] = {"vol-1", "vol-2"};
	const char *states[] = {"available", "in-use"};
	const char *cluster[] = {"owned by me"};
	ec2_params_add_list(&p, "VolumeId", ids, 2);
	ec2_params_add_filter(&p, "status", states, 2);
	ec2_params_add_filter(&p, "tag:kubernetes.io/cluster/c1", cluster, 1);
	ec2_params_addf(&p, "MaxResults", "%d", 500);
	_cleanup_free_ char *body = ec2_params_encode(&p, "DescribeVolumes", EC2_API_VERSION);
	is_str(body,
	       "Action=DescribeVolumes&Version=2016-11-15&VolumeId.1=vol-1&VolumeId.2=vol-2"
	       "&Filter.1.Name=status&Filter.1.Value.1=available&Filter.1.Value.2=in-use"
	       "&Filter.2.Name=tag%3Akubernetes.io%2Fcluster%2Fc1&Filter.2.Value.1=owned+by+me"
	       "&MaxResults=500",
	       "lists X.N, filters Filter.N.Name/Value.M numbered in order, values encoded");
	ec2_params_done(&p);

	Strmap tags = {}, none = {};
	strmap_set(&tags, "CSIVolumeName", "pvc-1");
	strmap_set(&tags, "owner", "team=a&b");
	ec2_params_add(&p, "AvailabilityZone", "us-east-1a");
	ec2_params_add_tag_spec(&p, "volume", &none);
	ec2_params_add_tag_spec(&p, "volume", &tags);
	ec2_params_add_tag_spec(&p, "snapshot", &tags);
	ec2_params_add(&p, "AvailabilityZone", "us-east-1b");
	_cleanup_free_ char *create = ec2_params_encode(&p, "CreateVolume", EC2_API_VERSION);
	is_str(create,
	       "Action=CreateVolume&Version=2016-11-15&AvailabilityZone=us-east-1b"
	       "&TagSpecification.1.ResourceType=volume"
	       "&TagSpecification.1.Tag.1.Key=CSIVolumeName&TagSpecification.1.Tag.1.Value=pvc-1"
	       "&TagSpecification.1.Tag.2.Key=owner&TagSpecification.1.Tag.2.Value=team%3Da%26b"
	       "&TagSpecification.2.ResourceType=snapshot"
	       "&TagSpecification.2.Tag.1.Key=CSIVolumeName&TagSpecification.2.Tag.1.Value=pvc-1"
	       "&TagSpecification.2.Tag.2.Key=owner&TagSpecification.2.Tag.2.Value=team%3Da%26b",
	       "tag specifications numbered per resource type, none for no tags; a key set "
	       "twice keeps its place and its last value");
	ec2_params_done(&p);

	const char *res[] = {"vol-1"};
	ec2_params_add_list(&p, "ResourceId", res, 1);
	ec2_params_add_tags(&p, "Tag", &tags);
	_cleanup_free_ char *ct = ec2_params_encode(&p, "CreateTags", EC2_API_VERSION);
	is_str(ct,
	       "Action=CreateTags&Version=2016-11-15&ResourceId.1=vol-1&Tag.1.Key=CSIVolumeName"
	       "&Tag.1.Value=pvc-1&Tag.2.Key=owner&Tag.2.Value=team%3Da%26b",
	       "CreateTags: Tag.N.Key/Value");
	ec2_params_done(&p);
	strmap_done(&tags);

	_cleanup_free_ char *enc = http_url_encode("aZ09-_.~ +/=&%é\x01");
	is_str(enc, "aZ09-_.~%20%2B%2F%3D%26%25%C3%A9%01",
	       "URL encoding keeps only RFC 3986 unreserved bytes, UTF-8 byte by byte");
	_cleanup_free_ char *form = http_form_encode("aZ09-_.~ +/=&%é\x01");
	is_str(form, "aZ09-_.~+%2B%2F%3D%26%25%C3%A9%01",
	       "form encoding: the same, a space as '+' (what the SDKs send)");
}

static void test_errno_table(void)
{
	static const struct {
		const char *code;
		int status, err;
		bool retry;
	} rows[] = {
		{"InvalidVolume.NotFound", 400, -ENOENT, false},
		{"InvalidInstanceID.NotFound", 400, -ENOENT, false},
		{"InvalidSnapshot.NotFound", 400, -ENOENT, false},
		{"InvalidAttachment.NotFound", 400, -ENOENT, false},
		{"InvalidZone.NotFound", 400, -EINVAL, false},
		{"InvalidVolumeID.Malformed", 400, -EINVAL, false},
		{"VolumeInUse", 400, -ENOTEMPTY, false},
		{"IncorrectState", 400, -EBUSY, false},
		{"IncorrectModificationState", 400, -EBUSY, false},
		{"IdempotentParameterMismatch", 400, -EEXIST, false},
		{"AttachmentLimitExceeded", 400, -EMLINK, false},
		{"VolumeLimitExceeded", 400, -ENOSPC, false},
		{"InvalidParameterValue", 400, -EINVAL, false},
		{"InvalidParameterCombination", 400, -EINVAL, false},
		{"MissingParameter", 400, -EINVAL, false},
		{"InvalidAction", 400, -EOPNOTSUPP, false},
		{"AuthFailure", 401, -EACCES, false},
		{"ExpiredToken", 400, -EACCES, false},
		{"UnauthorizedOperation", 403, -EPERM, false},
		{"VolumeModificationRateExceeded", 400, -EAGAIN, false},
		{"RequestLimitExceeded", 503, -EAGAIN, true},
		{"RequestLimitExceeded", 400, -EAGAIN, true},
		{"Throttling", 400, -EAGAIN, true},
		{"InternalError", 500, -EAGAIN, true},
		{"Unavailable", 503, -EAGAIN, true},
		{"SomethingNew", 400, -EINVAL, false},
		{"SomethingNew", 503, -EAGAIN, true},
		{NULL, 500, -EAGAIN, true},
		{NULL, 403, -EACCES, false},
		{NULL, 404, -ENOENT, false},
		{NULL, 302, -EPROTO, false},
	};

	for (size_t i = 0; i < ELEMENTSOF(rows); i++) {
		const char *c = rows[i].code ? rows[i].code : "(none)";
		is_int(ec2_code_to_errno(rows[i].code, rows[i].status), rows[i].err,
		       "%s with HTTP %d -> %s", c, rows[i].status, strerror(-rows[i].err));
		is_int(ec2_error_retryable(rows[i].code, rows[i].status), rows[i].retry,
		       "%s with HTTP %d %s retried", c, rows[i].status,
		       rows[i].retry ? "is" : "is not");
	}
	ok(ec2_code_is_throttle("RequestLimitExceeded") && !ec2_code_is_throttle("InternalError"),
	   "throttling is told apart from other transient errors (for metrics)");
}

static void test_error_replies(void)
{
	static const char ec2[] =
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<Response><Errors><Error><Code>InvalidVolume.NotFound</Code><Message>The volume "
		"'vol-1' does not exist.</Message></Error></Errors>"
		"<RequestID>0f4c7c7e-1111-2222-3333-444455556666</RequestID></Response>";
	static const char sts[] =
		"<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
		"  <Error>\n    <Type>Sender</Type>\n    <Code>InvalidIdentityToken</Code>\n"
		"    <Message>Couldn't retrieve verification key from your identity provider"
		"</Message>\n  </Error>\n  <RequestId>sts-42</RequestId>\n</ErrorResponse>\n";
	static const char html[] = "<html>\n<head><title>500 Internal Server Error</title></head>"
				   "\n<body>oops</body></html>";
	Ec2Error e;

	ec2_error_from_reply(400, ec2, strlen(ec2), &e);
	is_str(e.code, "InvalidVolume.NotFound", "EC2 error: the code is kept");
	is_str(e.message, "InvalidVolume.NotFound: The volume 'vol-1' does not exist.",
	       "EC2 error: the message says code and EC2's message");
	is_str(e.request_id, "0f4c7c7e-1111-2222-3333-444455556666", "EC2 error: request ID");
	is_int(e.http_status, 400, "EC2 error: HTTP status");
	ec2_error_done(&e);

	ec2_error_from_reply(400, sts, strlen(sts), &e);
	is_str(e.message,
	       "InvalidIdentityToken: Couldn't retrieve verification key from your identity "
	       "provider",
	       "STS error (another namespace and shape): code and message");
	is_str(e.request_id, "sts-42", "STS error: request ID");
	ec2_error_done(&e);

	ec2_error_from_reply(500, html, strlen(html), &e);
	ok(!e.code, "a reply that is no AWS error has no code");
	is_str(e.message,
	       "HTTP 500: <html> <head><title>500 Internal Server Error</title></head> "
	       "<body>oops</body></html>",
	       "...and the message shows its start, on one line");
	ec2_error_done(&e);

	ec2_error_from_reply(503, "", 0, &e);
	is_str(e.message, "HTTP 503", "an empty error reply says its status");
	ec2_error_done(&e);
}

static void test_times_and_zones(void)
{
	usec_t t = 0;

	ok(aws_parse_time("2024-05-01T12:34:56Z", &t) == 0 && t == 1714566896 * USEC_PER_SEC,
	   "expiration 2024-05-01T12:34:56Z");
	ok(aws_parse_time("2024-05-01T12:34:56.250Z", &t) == 0 &&
		   t == 1714566896 * USEC_PER_SEC + 250 * USEC_PER_MSEC,
	   "expiration with fractional seconds");
	ok(aws_parse_time("2024-05-01T12:34:56+00:00", &t) == 0 && t == 1714566896 * USEC_PER_SEC,
	   "expiration with +00:00");
	is_int(aws_parse_time("2024-05-01 12:34:56", &t), -EINVAL, "no T: refused");
	is_int(aws_parse_time("2024-05-01T12:34:56+02:00", &t), -EINVAL, "not UTC: refused");

	_cleanup_free_ char *r1 = imds_zone_to_region("us-east-1a");
	_cleanup_free_ char *r2 = imds_zone_to_region("eu-central-1c");
	_cleanup_free_ char *r3 = imds_zone_to_region("us-east-1");
	is_str(r1, "us-east-1", "zone us-east-1a is in us-east-1");
	is_str(r2, "eu-central-1", "zone eu-central-1c is in eu-central-1");
	ok(!r3, "a name ending in a digit is no zone");
}

static void test_client_config(void)
{
	Ec2Client *c = NULL;
	char *error = NULL;

	is_int(ec2_client_new(&(Ec2Config){.region = NULL}, &c, &error), -EINVAL,
	       "a client needs a region");
	is_str(error, "EC2: no region", "...and says so");
	free(error);
	error = NULL;
	is_int(ec2_client_new(&(Ec2Config){.region = "us-east-1", .endpoint = "ftp://x/"}, &c,
			      &error),
	       -EINVAL, "an endpoint must be http(s)");
	free(error);
	ok(ec2_client_new(&(Ec2Config){.region = "eu-west-1"}, &c, NULL) == 0 &&
		   strcmp(ec2_client_endpoint(c), "https://ec2.eu-west-1.amazonaws.com/") == 0,
	   "default endpoint https://ec2.<region>.amazonaws.com/");
	ec2_client_free(c);
	ok(ec2_client_new(&(Ec2Config){.region = "cn-north-1"}, &c, NULL) == 0 &&
		   strcmp(ec2_client_endpoint(c), "https://ec2.cn-north-1.amazonaws.com.cn/") == 0,
	   "China: https://ec2.<region>.amazonaws.com.cn/");
	ec2_client_free(c);
}

int main(void)
{
	test_encoding();
	test_errno_table();
	test_error_replies();
	test_times_and_zones();
	test_client_config();
	return tap_done();
}
