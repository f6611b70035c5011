/* SPDX-License-Identifier: Apache-2.0 */
/* The control requests the unit tests send their HTTP peers (tests/s3sim, the AWS stand-in):
 * one POST or GET to URL/_NAME/WHAT that must answer 200. */
#pragma once

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "aws-http.h"
#include "strmap.h"

/* Sends method to url/_name/what with body (may be NULL); bails out of the test when it does not
 * answer 200. Returns the reply's body (malloc'ed). */
__attribute__((unused)) static char *sim_control(HttpPool *pool, const char *url, const char *name,
						 const char *method, const char *what,
						 const char *body)
{
	char target[128];
	HttpReply reply = {};
	char *error = NULL;

	snprintf(target, sizeof(target), "%s/_%s/%s", url, name, what);
	HttpRequest req = {
		.method = method,
		.url = target,
		.body = body,
		.body_len = body ? strlen(body) : 0,
		.deadline = USEC_INFINITY,
		.attempt_timeout = 10 * USEC_PER_SEC,
		.no_proxy = true,
	};
	if (http_perform(pool, &req, &reply, &error) < 0 || reply.status != 200) {
		printf("Bail out! %s %s: %s\n", name, what, error ? error : reply.body);
		exit(1);
	}
	strmap_done(&reply.headers);
	return reply.body;
}
