/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>

#include "csi.pb-c.h"
#include "pbjson.h"
#include "tap.h"

static ProtobufCMessage *parse(const char *text, const ProtobufCMessageDescriptor *d, char **error)
{
	ProtobufCMessage *m = NULL;
	json_t *j = json_loads(text, 0, NULL);
	*error = NULL;
	if (pbjson_to_message(j, d, &m, error) < 0)
		m = NULL;
	json_decref(j);
	return m;
}

int main(void)
{
	char *error;
	ProtobufCMessage *m =
		parse("{\"name\":\"v1\",\"capacity_range\":{\"required_bytes\":1073741824},"
		      "\"volume_capabilities\":[{\"mount\":{\"fs_type\":\"xfs\",\"mount_flags\":["
		      "\"noatime\"]},"
		      "\"access_mode\":{\"mode\":\"SINGLE_NODE_WRITER\"}}],"
		      "\"parameters\":{\"type\":\"gp3\",\"iops\":\"4000\"}}",
		      &csi__v1__create_volume_request__descriptor, &error);
	ok(m != NULL, "CreateVolumeRequest from JSON");
	if (!m)
		return tap_done();
	Csi__V1__CreateVolumeRequest *r = (Csi__V1__CreateVolumeRequest *)m;
	is_str(r->name, "v1", "name");
	is_int(r->capacity_range->required_bytes, 1073741824, "required_bytes (int64)");
	is_int(r->n_volume_capabilities, 1, "one capability");
	is_int(r->volume_capabilities[0]->access_type_case,
	       CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT, "oneof case set");
	is_str(r->volume_capabilities[0]->mount->fs_type, "xfs", "nested string");
	is_int(r->volume_capabilities[0]->access_mode->mode,
	       CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER, "enum by name");
	is_int(r->n_parameters, 2, "map entries");

	/* Round trip through the wire format and back to JSON. */
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = malloc(len);
	protobuf_c_message_pack(m, buf);
	ProtobufCMessage *back = protobuf_c_message_unpack(
		&csi__v1__create_volume_request__descriptor, NULL, len, buf);
	json_t *j = pbjson_from_message(back);
	is_str(json_string_value(json_object_get(json_object_get(j, "parameters"), "iops")), "4000",
	       "map back to an object");
	is_str(json_string_value(json_object_get(
		       json_object_get(json_array_get(json_object_get(j, "volume_capabilities"), 0),
				       "access_mode"),
		       "mode")),
	       "SINGLE_NODE_WRITER", "enum back to its name");
	ok(json_object_get(j, "secrets") == NULL, "empty map left out");
	json_decref(j);
	free(buf);
	protobuf_c_message_free_unpacked(back, NULL);
	protobuf_c_message_free_unpacked(m, NULL);

	ok(parse("{\"nmae\":\"x\"}", &csi__v1__create_volume_request__descriptor, &error) == NULL,
	   "unknown field rejected");
	is_str(error, "nmae: no such field", "error names the field");
	free(error);
	ok(parse("{\"volume_capabilities\":[{\"access_mode\":{\"mode\":\"BOGUS\"}}]}",
		 &csi__v1__create_volume_request__descriptor, &error) == NULL,
	   "bad enum rejected");
	is_str(error, "volume_capabilities[0].access_mode.mode: not a value of this enum",
	       "error has the path");
	free(error);
	ok(parse("{\"name\":5}", &csi__v1__create_volume_request__descriptor, &error) == NULL,
	   "wrong type rejected");
	free(error);
	return tap_done();
}
