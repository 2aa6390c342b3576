/* A node's socket address: its configured address (numeric IPv4 or IPv6;
 * a host name is looked up) with one of its ports.  Shared by the tcp and
 * rdma transports, the metrics endpoint and the guard's snapshot server. */
#ifndef APUS_NETADDR_H
#define APUS_NETADDR_H

#include <sys/socket.h>

#include "common/config.h"

/* Fills *SS (and *LEN, when not NULL) for N's address and PORT.
 * Returns 0, or -EINVAL when the address is neither numeric nor a name
 * that resolves. */
int node_sockaddr(const struct node_conf *n, int port, struct sockaddr_storage *ss,
		  socklen_t *len);

#endif
