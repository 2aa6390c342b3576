#include "coordinator/transport/transport.h"

#include <string.h>

static const struct transport_ops *const backends[] = {
	&transport_shm_ops,
	&transport_tcp_ops,
	&transport_rdma_ops,
};

const struct transport_ops *transport_find(const char *name)
{
	for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
		if (!strcmp(backends[i]->name, name))
			return backends[i];
	return NULL;
}
