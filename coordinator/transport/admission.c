/* Peer admission: the cluster key file and HMAC-SHA256 proofs (admission.h). */
#define LOG_PREFIX "admission: "
#include "coordinator/transport/admission.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/hex.h"
#include "common/logger.h"
#include "common/sys.h"

int admit_key_load(const char *path, struct admit_key *k, char *err, size_t errlen)
{
	char text[2 * ADMIT_KEY_LEN + 8];
	struct stat st;
	ssize_t n;
	int fd = sys.open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0) {
		rc = -errno;
		snprintf(err, errlen, "secret file %s: %s", path, strerror(errno));
		return rc;
	}
	if (fstat(fd, &st) < 0 || (st.st_mode & 077)) {
		rc = -EPERM;
		snprintf(err, errlen, "secret file %s: mode %04o lets others read it (chmod 600)",
			 path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	/* 64 hex digits, an optional newline, nothing else. */
	n = sys.read(fd, text, sizeof(text));
	if (n == 2 * ADMIT_KEY_LEN + 1 && text[n - 1] == '\n')
		n--;
	rc = n == 2 * ADMIT_KEY_LEN ? 0 : -EINVAL;
	for (int i = 0; !rc && i < ADMIT_KEY_LEN; i++) {
		int hi = hex_digit(text[2 * i]), lo = hex_digit(text[2 * i + 1]);
		/* Not a digit: -1, and -1 << 4 is undefined (found by fuzzing). */
		if (hi < 0 || lo < 0)
			rc = -EINVAL;
		else
			k->key[i] = (uint8_t)(hi << 4 | lo);
	}
	if (rc)
		snprintf(err, errlen, "secret file %s: expected 64 hex digits", path);
out:
	OPENSSL_cleanse(text, sizeof(text));
	sys.close(fd);
	return rc;
}

int admit_key_generate(const char *path)
{
	uint8_t key[ADMIT_KEY_LEN];
	char text[2 * ADMIT_KEY_LEN + 1];
	int fd, rc = 1;

	fd = sys.open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? 0 : -errno;
	if (sys_random_bytes(key, sizeof(key))) {
		rc = -EIO;
		goto fail;
	}
	for (int i = 0; i < ADMIT_KEY_LEN; i++)
		snprintf(text + 2 * i, 3, "%02x", key[i]);
	text[2 * ADMIT_KEY_LEN] = '\n';
	if (sys.write(fd, text, sizeof(text)) != (ssize_t)sizeof(text) || fsync(fd) < 0) {
		rc = errno ? -errno : -EIO;
		goto fail;
	}
	OPENSSL_cleanse(key, sizeof(key));
	sys.close(fd);
	return rc;
fail:
	OPENSSL_cleanse(key, sizeof(key));
	sys.close(fd);
	unlink(path);
	return rc;
}

int admit_nonce(uint8_t *n)
{
	return sys_random_bytes(n, ADMIT_NONCE_LEN) ? -EIO : 0;
}

void admit_mac(const struct admit_key *k, const char *label, uint32_t from, uint32_t to,
	       const void *a, size_t alen, const void *b, size_t blen, uint8_t mac[ADMIT_MAC_LEN])
{
	uint8_t msg[512];
	size_t llen = strlen(label) + 1, n = 0;
	unsigned int len = ADMIT_MAC_LEN;

	/* label with its NUL, fixed-width ids, then A and B: no two inputs
	 * encode alike.  Callers pass nonces and short records only. */
	if (llen + 8 + alen + blen > sizeof(msg)) {
		pr_err("admission message too long (%zu bytes)", llen + 8 + alen + blen);
		goto fail;
	}
	memcpy(msg, label, llen);
	n = llen;
	for (int i = 0; i < 4; i++) {
		msg[n + i] = (uint8_t)(from >> (8 * i));
		msg[n + 4 + i] = (uint8_t)(to >> (8 * i));
	}
	n += 8;
	if (alen)
		memcpy(msg + n, a, alen);
	n += alen;
	if (blen)
		memcpy(msg + n, b, blen);
	n += blen;
	if (HMAC(EVP_sha256(), k->key, ADMIT_KEY_LEN, msg, n, mac, &len))
		return;
	pr_err("HMAC-SHA256 failed");
fail:
	/* A random MAC matches nothing. */
	if (sys_random_bytes(mac, ADMIT_MAC_LEN))
		memset(mac, 0xa5, ADMIT_MAC_LEN);
}

int admit_verify(const struct admit_key *k, const char *label, uint32_t from, uint32_t to,
		 const void *a, size_t alen, const void *b, size_t blen,
		 const uint8_t mac[ADMIT_MAC_LEN])
{
	uint8_t want[ADMIT_MAC_LEN];

	admit_mac(k, label, from, to, a, alen, b, blen, want);
	return CRYPTO_memcmp(want, mac, ADMIT_MAC_LEN) ? -EACCES : 0;
}

int admit_address_ok(const struct apus_config *cfg, int peer, const struct sockaddr *sa)
{
	const char *want = cfg->nodes[peer].address;
	struct in6_addr a6;
	struct in_addr a4;

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		return inet_pton(AF_INET, want, &a4) == 1 && a4.s_addr == s4->sin_addr.s_addr;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		if (inet_pton(AF_INET6, want, &a6) == 1)
			return !memcmp(&a6, &s6->sin6_addr, sizeof(a6));
		/* An IPv4 peer seen through a dual-stack socket. */
		return IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) && inet_pton(AF_INET, want, &a4) == 1 &&
		       !memcmp(&s6->sin6_addr.s6_addr[12], &a4, 4);
	}
	return 0;
}

const char *admit_addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(s4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(s6->sin6_port));
	} else {
		snprintf(buf, len, "(family %d)", sa->sa_family);
	}
	return buf;
}
