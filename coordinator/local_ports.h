/* Local ports for replay connections, chosen here rather than by bind()
 * to port 0.  The kernel's search for a free ephemeral port takes
 * milliseconds once the range is crowded with TIME_WAIT sockets (every
 * replay connection leaves one on our side, which ends it first): a node
 * replaying a log of a few thousand connections spent seconds in bind().
 * An explicit bind with SO_REUSEADDR takes a port whose sockets are all in
 * TIME_WAIT at once; a connect that would reuse such a socket's very
 * addresses fails (EADDRNOTAVAIL) where the kernel may not recycle it, and
 * the caller goes on to the next port. */
#ifndef APUS_LOCAL_PORTS_H
#define APUS_LOCAL_PORTS_H

#include <stdint.h>

struct local_ports {
	uint32_t lo, hi;	/* the system's ephemeral range */
	uint32_t next;
};

/* The range of /proc/sys/net/ipv4/ip_local_port_range (32768-60999 if it
 * cannot be read), starting at a place of its own: a restarted node does
 * not retry the ports its previous process left in TIME_WAIT first. */
void local_ports_init(struct local_ports *p);

/* The next port of the range, round and round. */
uint16_t local_ports_next(struct local_ports *p);

#endif
