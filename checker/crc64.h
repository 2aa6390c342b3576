/* CRC-64/Jones, the variant Redis uses (reflected, polynomial
 * 0xad93d23594c935a9, initial value 0, no final xor):
 * crc64(0, "123456789", 9) == 0xe9c6d914c4b8d9ca. */
#ifndef APUS_CRC64_H
#define APUS_CRC64_H

#include <stddef.h>
#include <stdint.h>

/* Continues CRC over BUF; start with crc = 0. */
uint64_t crc64(uint64_t crc, const void *buf, size_t len);

#endif
