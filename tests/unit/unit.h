/* Minimal helpers for C unit tests: one program per behaviour, exit 0 pass,
 * 1 fail, 77 skip (the runner's convention). */
#ifndef APUS_UNIT_H
#define APUS_UNIT_H

#include <stdio.h>
#include <stdlib.h>

#define UNIT_SKIP 77

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, \
				__LINE__, #cond);                              \
			fprintf(stderr, __VA_ARGS__);                          \
			fputc('\n', stderr);                                   \
			exit(1);                                               \
		}                                                              \
	} while (0)

#endif
