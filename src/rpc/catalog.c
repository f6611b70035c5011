/* SPDX-License-Identifier: Apache-2.0 */
#include <stdio.h>
#include <string.h>

#include "admin.pb-c.h"
#include "catalog.h"
#include "csi.pb-c.h"
#include "macro.h"

static const ProtobufCServiceDescriptor *const services[] = {
	&csi__v1__identity__descriptor,		 &csi__v1__controller__descriptor,
	&csi__v1__group_controller__descriptor,	 &csi__v1__node__descriptor,
	&csi__v1__snapshot_metadata__descriptor, &volplug__admin__v1__admin__descriptor,
};

/* protoc-c keeps no mark of a streaming method: the methods whose replies are a stream. */
static const char *const server_streaming[] = {
	"/csi.v1.SnapshotMetadata/GetMetadataAllocated",
	"/csi.v1.SnapshotMetadata/GetMetadataDelta",
};

bool rpc_method_server_streaming(const char *path)
{
	for (size_t i = 0; i < ELEMENTSOF(server_streaming); i++)
		if (strcmp(path, server_streaming[i]) == 0)
			return true;
	return false;
}

static void info_fill(const ProtobufCServiceDescriptor *s, unsigned i, RpcMethodInfo *ret)
{
	const ProtobufCMethodDescriptor *m = &s->methods[i];
	snprintf(ret->path, sizeof(ret->path), "/%s/%s", s->name, m->name);
	ret->method = m;
	ret->request = m->input;
	ret->reply = m->output;
	ret->server_streaming = rpc_method_server_streaming(ret->path);
}

int rpc_catalog_lookup(const char *name, RpcMethodInfo *ret)
{
	for (size_t s = 0; s < ELEMENTSOF(services); s++)
		for (unsigned i = 0; i < services[s]->n_methods; i++) {
			RpcMethodInfo info;
			info_fill(services[s], i, &info);
			const char *service_method = strchr(info.path + 1, '/');
			const char *short_service = strrchr(services[s]->name, '.');
			char qualified[128];
			snprintf(qualified, sizeof(qualified), "%s/%s",
				 short_service ? short_service + 1 : services[s]->name,
				 info.method->name);
			if (strcmp(name, info.method->name) == 0 || strcmp(name, info.path) == 0 ||
			    strcmp(name, qualified) == 0 ||
			    (service_method && strcmp(name, info.path + 1) == 0)) {
				*ret = info;
				return 0;
			}
		}
	return -ENOENT;
}

void rpc_catalog_foreach(void (*fn)(const RpcMethodInfo *info, void *userdata), void *userdata)
{
	for (size_t s = 0; s < ELEMENTSOF(services); s++)
		for (unsigned i = 0; i < services[s]->n_methods; i++) {
			RpcMethodInfo info;
			info_fill(services[s], i, &info);
			fn(&info, userdata);
		}
}
