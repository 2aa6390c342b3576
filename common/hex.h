/* One hex digit's value (either case), or -1: for the cluster key
 * (admission.c) and the sessions' preludes (sessions.c). */
#ifndef APUS_HEX_H
#define APUS_HEX_H

static inline int hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

#endif
