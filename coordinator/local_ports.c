/* Local ports for replay connections (local_ports.h). */
#include "local_ports.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

void local_ports_init(struct local_ports *p)
{
	unsigned lo = 32768, hi = 60999;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
	struct timespec ts;

	if (f) {
		unsigned a, b;
		if (fscanf(f, "%u %u", &a, &b) == 2 && a > 0 && a <= b && b <= 65535) {
			lo = a;
			hi = b;
		}
		fclose(f);
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	p->lo = lo;
	p->hi = hi;
	p->next = lo + (uint32_t)(((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() * 2654435761u) %
				  (hi - lo + 1));
}

uint16_t local_ports_next(struct local_ports *p)
{
	uint32_t port = p->next;

	p->next = port >= p->hi ? p->lo : port + 1;
	return (uint16_t)port;
}
