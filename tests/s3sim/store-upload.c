/* SPDX-License-Identifier: Apache-2.0 */
/* Uploads a file as a store snapshot with the store library, as CreateSnapshot with
 * location: store does, for the integration tests of restores:
 *
 *   store-upload ENDPOINT BUCKET PREFIX FILE ID [FILESYSTEM [KEY=VALUE...]]
 *
 * Credentials from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY); region
 * us-east-1, path-style. Prints the upload's counts as JSON. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "aws-credentials.h"
#include "s3.h"
#include "store.h"

int main(int argc, char **argv)
{
	AwsCredentialsProvider *creds = NULL;
	S3Client *s3 = NULL;
	Store *s = NULL;
	Strmap params = {};
	StoreUploadStats st = {};
	char *err = NULL;
	int r;

	if (argc < 6) {
		fprintf(stderr, "usage: %s ENDPOINT BUCKET PREFIX FILE ID [FS [K=V...]]\n",
			argv[0]);
		return 2;
	}
	for (int i = 7; i < argc; i++) {
		char *eq = strchr(argv[i], '=');
		if (!eq)
			return 2;
		*eq = 0;
		strmap_set(&params, argv[i], eq + 1);
	}
	creds = aws_credentials_provider_new(&(AwsCredentialsConfig){});
	r = s3_client_new(&(S3Config){.endpoint = argv[1],
				      .bucket = argv[2],
				      .region = "us-east-1",
				      .path_style = true,
				      .credentials = creds},
			  &s3, &err);
	if (r >= 0)
		r = store_new(&(StoreConfig){.s3 = s3, .prefix = argv[3], .node = "test"}, &s,
			      &err);
	int fd = r >= 0 ? open(argv[4], O_RDONLY | O_CLOEXEC) : -1;
	if (r >= 0 && fd < 0) {
		perror(argv[4]);
		return 1;
	}
	if (r >= 0)
		r = store_upload(s, fd,
				 &(StoreUploadInfo){.id = argv[5],
						    .filesystem = argc > 6 ? argv[6] : "",
						    .parameters = &params},
				 now_usec(CLOCK_MONOTONIC) + 600 * USEC_PER_SEC, &st, &err);
	if (r < 0) {
		fprintf(stderr, "store-upload: %s\n", err ? err : strerror(-r));
		return 1;
	}
	printf("{\"chunks\": %" PRIu64 ", \"sent\": %" PRIu64 ", \"bytes_read\": %" PRIu64 "}\n",
	       st.chunks, st.chunks_sent, st.bytes_read);
	close(fd);
	store_free(s);
	s3_client_free(s3);
	aws_credentials_provider_free(creds);
	strmap_done(&params);
	free(err);
	return 0;
}
