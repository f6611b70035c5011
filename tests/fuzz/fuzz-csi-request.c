/* SPDX-License-Identifier: Apache-2.0 */
/* CSI request decoding and validation: the first byte picks a request type, the rest is its
 * wire bytes. Whatever decodes goes through the validators the handlers use and through the
 * JSON codec and back. */
#include "csi-util.h"
#include "fuzz.h"
#include "macro.h"
#include "pbjson.h"
#include "request-check.h"

static const ProtobufCMessageDescriptor *const requests[] = {
	&csi__v1__create_volume_request__descriptor,
	&csi__v1__controller_publish_volume_request__descriptor,
	&csi__v1__controller_expand_volume_request__descriptor,
	&csi__v1__controller_modify_volume_request__descriptor,
	&csi__v1__create_snapshot_request__descriptor,
	&csi__v1__list_volumes_request__descriptor,
	&csi__v1__node_stage_volume_request__descriptor,
	&csi__v1__node_publish_volume_request__descriptor,
	&csi__v1__create_volume_group_snapshot_request__descriptor,
};

static void validate_create(const Csi__V1__CreateVolumeRequest *r)
{
	char *err = NULL;
	uint64_t size = 0;
	VolumeParams p = {};

	for (size_t i = 0; i < r->n_volume_capabilities; i++) {
		BackendAccess a;
		if (capability_check_spec(r->volume_capabilities[i], "cap", &err) < 0)
			FUZZ_ASSERT(err != NULL);
		else /* what every backend's check_access and operations read */
			backend_access_from(r->volume_capabilities[i], &a);
		free(err);
		err = NULL;
	}
	if (capacity_range_size(r->capacity_range, GIB, MIB, &size, &err) == 0)
		FUZZ_ASSERT(size % MIB == 0 && size > 0);
	free(err);
	err = NULL;
	ParamKV *kv = pbmap_to_kv((void *const *)r->parameters, r->n_parameters);
	if (volume_params_parse(kv, r->n_parameters, size ? size : GIB, &p, &err) == 0)
		volume_params_done(&p);
	free(err);
	free(kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	const ProtobufCMessageDescriptor *d = requests[data[0] % ELEMENTSOF(requests)];
	ProtobufCMessage *m = protobuf_c_message_unpack(d, NULL, size - 1, data + 1);
	if (!m)
		return 0;
	char *err = NULL;
	/* what every request meets first: linear, never a crash */
	if (csi_request_check(m, &err) < 0)
		FUZZ_ASSERT(err != NULL);
	free(err);
	err = NULL;
	if (d == &csi__v1__create_volume_request__descriptor)
		validate_create((const Csi__V1__CreateVolumeRequest *)m);

	json_t *j = pbjson_from_message(m);
	ProtobufCMessage *back = NULL;
	/* Every decoded message is representable in JSON and comes back from it. */
	FUZZ_ASSERT(pbjson_to_message(j, d, &back, &err) == 0);
	protobuf_c_message_free_unpacked(back, NULL);
	json_decref(j);
	free(err);
	protobuf_c_message_free_unpacked(m, NULL);
	return 0;
}
