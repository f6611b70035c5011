/* SPDX-License-Identifier: Apache-2.0 */
/* A NUL inside any string of a request is found on the wire, with the field's name, at any
 * depth: top level, nested messages, map entries. */
#include <errno.h>
#include <string.h>

#include "alloc.h"
#include "csi.pb-c.h"
#include "tap.h"
#include "wire-check.h"

/* Packs m, then turns the first occurrence of marker in the bytes into a NUL. */
static uint8_t *pack_with_nul(const ProtobufCMessage *m, const char *marker, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(m);
	uint8_t *buf = xmalloc(len);
	protobuf_c_message_pack(m, buf);
	if (marker) {
		uint8_t *at = memmem(buf, len, marker, strlen(marker));
		if (at)
			*at = 0;
	}
	*ret_len = len;
	return buf;
}

static void expect(const ProtobufCMessage *m, const char *marker, int want, const char *field)
{
	_cleanup_free_ char *got = NULL;
	size_t len;
	_cleanup_free_ uint8_t *buf = pack_with_nul(m, marker, &len);

	is_int(wire_strings_check(m->descriptor, buf, len, &got), want, "NUL at %s",
	       marker ? marker : "(none)");
	if (field)
		is_str(got, field, "the field is named");
}

int main(void)
{
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__MountVolume mount =
		CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	Csi__V1__NodePublishVolumeRequest__VolumeContextEntry e =
		CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__VOLUME_CONTEXT_ENTRY__INIT;
	Csi__V1__NodePublishVolumeRequest__VolumeContextEntry *ctx[] = {&e};
	char *flags[] = {"noatime", "nXdev"};

	r.volume_id = "vol-0123456789abcdef";
	r.target_path = "/var/lib/kubelet/pods/P/volumes/T";
	r.staging_target_path = "/var/lib/kubelet/plugins/S";
	mount.fs_type = "eQt4";
	mount.mount_flags = flags;
	mount.n_mount_flags = 2;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mount;
	r.volume_capability = &cap;
	e.key = "fsType";
	e.value = "vW";
	r.volume_context = ctx;
	r.n_volume_context = 1;

	expect(&r.base, NULL, 0, NULL);
	expect(&r.base, "/P/", -EINVAL, "target_path");
	expect(&r.base, "/S", -EINVAL, "staging_target_path");
	expect(&r.base, "Q", -EINVAL, "volume_capability.mount.fs_type");
	expect(&r.base, "X", -EINVAL, "volume_capability.mount.mount_flags");
	expect(&r.base, "W", -EINVAL, "volume_context.value");

	/* Truncated bytes are the decoder's to refuse: no prefix of a clean request is taken
	 * for one with a NUL. */
	size_t len, false_alarms = 0;
	_cleanup_free_ uint8_t *buf = pack_with_nul(&r.base, NULL, &len);
	for (size_t cut = 0; cut < len; cut++) {
		_cleanup_free_ char *field = NULL;
		false_alarms += wire_strings_check(r.base.descriptor, buf, cut, &field) < 0;
	}
	is_int(false_alarms, 0, "no truncation of %zu bytes reports a NUL", len);
	return tap_done();
}
