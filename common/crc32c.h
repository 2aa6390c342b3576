/* CRC-32C (Castagnoli, reflected, poly 0x82F63B78): guards log entries
 * against torn or flipped bytes.  crc32c("123456789") == 0xE3069283. */
#ifndef APUS_CRC32C_H
#define APUS_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues CRC over BUF; start with crc = 0. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif
