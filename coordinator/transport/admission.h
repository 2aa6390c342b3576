/* Peer admission for the network transports (tcp, rdma): only nodes named
 * in the config, connecting from their configured address, and proving they
 * know the cluster's secret may write into our region.
 *
 * The secret is a key file (64 hex digits, mode 0600) that `apus start`
 * generates when it is missing; every replica holds a copy.  Proofs are
 * HMAC-SHA256 (OpenSSL libcrypto) over a label, both node ids and fresh
 * nonces of both sides, so a recorded proof is useless in another
 * handshake and neither side reveals the key.  Comparisons are constant
 * time. */
#ifndef APUS_ADMISSION_H
#define APUS_ADMISSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/config.h"

#define ADMIT_KEY_LEN 32
#define ADMIT_NONCE_LEN 16
#define ADMIT_MAC_LEN 32

struct admit_key {
	uint8_t key[ADMIT_KEY_LEN];
};

/* Loads the key file PATH.  Refuses a file that others may read (mode must
 * not grant group/other access) or that does not hold exactly 64 hex
 * digits.  Returns 0, or -errno with a one-line reason in ERR. */
int admit_key_load(const char *path, struct admit_key *k, char *err, size_t errlen);

/* Creates PATH with a fresh random key, mode 0600, if it does not exist.
 * Returns 1 if it created one, 0 if a file was there, -errno on failure. */
int admit_key_generate(const char *path);

/* Fills N with ADMIT_NONCE_LEN random bytes (CSPRNG).  0 or -EIO. */
int admit_nonce(uint8_t *n);

/* MAC = HMAC-SHA256(key, label || from || to || a || b), where A and B are
 * byte strings of the given lengths (either may be NULL/0). */
void admit_mac(const struct admit_key *k, const char *label, uint32_t from, uint32_t to,
	       const void *a, size_t alen, const void *b, size_t blen, uint8_t mac[ADMIT_MAC_LEN]);

/* Constant-time check of MAC against the expected one for the same
 * inputs.  0 if it matches, -EACCES if not. */
int admit_verify(const struct admit_key *k, const char *label, uint32_t from, uint32_t to,
		 const void *a, size_t alen, const void *b, size_t blen,
		 const uint8_t mac[ADMIT_MAC_LEN]);

/* Whether SA's IP address is the configured address of node PEER. */
int admit_address_ok(const struct apus_config *cfg, int peer, const struct sockaddr *sa);

/* "a.b.c.d:port" (or "[v6]:port") of SA, for log lines. */
const char *admit_addr_str(const struct sockaddr *sa, char *buf, size_t len);

#endif
