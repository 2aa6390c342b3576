#include "common/netaddr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int node_sockaddr(const struct node_conf *n, int port, struct sockaddr_storage *ss,
		  socklen_t *len)
{
	struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV }, *ai;
	socklen_t l;
	char p[8];

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, n->address, &a4->sin_addr) == 1) {
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		l = sizeof(*a4);
	} else if (inet_pton(AF_INET6, n->address, &a6->sin6_addr) == 1) {
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		l = sizeof(*a6);
	} else {
		snprintf(p, sizeof(p), "%d", port);
		if (getaddrinfo(n->address, p, &hints, &ai))
			return -EINVAL;
		l = ai->ai_addrlen <= sizeof(*ss) ? ai->ai_addrlen : sizeof(*ss);
		memcpy(ss, ai->ai_addr, l);
		freeaddrinfo(ai);
	}
	if (len)
		*len = l;
	return 0;
}
