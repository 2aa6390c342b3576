/* Peer admission (tcp transport + admission.c) on arbitrary bytes; the
 * first byte picks what the rest is:
 *   0  a hello, checked by tcp_hello_check for node SELF of NNODES (the
 *      next byte); accepted only if magic, version, a nonzero incarnation
 *      and from < nnodes, from != self, to == self all hold;
 *   1  a key file (mode 0600, or 0644 when the next byte is odd) loaded by
 *      admit_key_load: accepted only at mode 0600 and 64 hex digits (and a
 *      newline), and then the key is their value;
 *   2  a proof: key, label length, A and B lengths, then the bytes and a
 *      MAC; admit_verify accepts exactly admit_mac's MAC for the same
 *      inputs, and always accepts that one;
 *   3  an address (NUL-ended) and a peer's sockaddr for admit_address_ok
 *      and admit_addr_str: a v4 peer matches exactly its inet_pton. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coordinator/transport/admission.h"
#include "coordinator/transport/transport.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	/* admit_mac's "message too long" is expected here, not news. */
	setenv("APUS_LOG_FILE", "/dev/null", 1);
	return 0;
}

static void hello(const uint8_t *d, size_t n)
{
	int self, nnodes;
	uint32_t magic;
	uint16_t version;
	uint64_t inc;

	if (n < 1)
		return;
	self = d[0] & 7;
	nnodes = 1 + (d[0] >> 3 & 7);
	d++, n--;
	if (tcp_hello_check(d, n, self, nnodes))
		return;
	FUZZ_CHECK(n == TCP_HELLO_LEN);
	memcpy(&magic, d, 4);
	memcpy(&version, d + 4, 2);
	memcpy(&inc, d + 8 + ADMIT_NONCE_LEN, 8);
	FUZZ_CHECK(magic == 0x41505553u && version == 2 && inc);
	FUZZ_CHECK(d[6] < nnodes && d[6] != self && d[7] == self);
}

static int hexval(int c)
{
	return isdigit(c) ? c - '0' : isxdigit(c) ? (tolower(c) - 'a' + 10) : -1;
}

static void key_file(const uint8_t *d, size_t n)
{
	struct admit_key k;
	char err[256];
	int rc, strict;

	if (n < 1)
		return;
	strict = !(d[0] & 1);
	err[0] = '\0';
	rc = admit_key_load(fuzz_file("key", d + 1, n - 1, strict ? 0600 : 0644), &k, err,
			    sizeof(err));
	d++, n--;
	FUZZ_CHECK(memchr(err, '\0', sizeof(err)));
	if (rc) {
		FUZZ_CHECK(rc < 0 && err[0]);
		return;
	}
	FUZZ_CHECK(strict);
	FUZZ_CHECK(n == 64 || (n == 65 && d[64] == '\n'));
	for (int i = 0; i < ADMIT_KEY_LEN; i++)
		FUZZ_CHECK(hexval(d[2 * i]) >= 0 && hexval(d[2 * i + 1]) >= 0 &&
			   k.key[i] == (hexval(d[2 * i]) << 4 | hexval(d[2 * i + 1])));
}

static void proof(const uint8_t *d, size_t n)
{
	struct admit_key k;
	uint8_t want[ADMIT_MAC_LEN];
	char label[256];
	size_t llen, alen, blen;
	uint32_t from, to;

	if (n < ADMIT_KEY_LEN + 11)
		return;
	memcpy(k.key, d, ADMIT_KEY_LEN);
	d += ADMIT_KEY_LEN, n -= ADMIT_KEY_LEN;
	llen = d[0];
	alen = (size_t)d[1] << 2;	/* up to 1020: past the 512-byte message too */
	blen = d[2];
	memcpy(&from, d + 3, 4);
	memcpy(&to, d + 7, 4);
	d += 11, n -= 11;
	if (n < llen + alen + blen + ADMIT_MAC_LEN)
		return;
	memcpy(label, d, llen);
	label[llen] = '\0';
	const uint8_t *a = d + llen, *b = a + alen, *mac = b + blen;
	int rc = admit_verify(&k, label, from, to, alen ? a : NULL, alen, blen ? b : NULL, blen,
			      mac);
	int fits = strlen(label) + 1 + 8 + alen + blen <= 512;

	FUZZ_CHECK(rc == 0 || rc == -EACCES);
	if (!fits) {
		/* Too long to sign: nothing is accepted. */
		FUZZ_CHECK(rc == -EACCES);
		return;
	}
	admit_mac(&k, label, from, to, alen ? a : NULL, alen, blen ? b : NULL, blen, want);
	FUZZ_CHECK(!rc == !memcmp(want, mac, ADMIT_MAC_LEN));
	FUZZ_CHECK(!admit_verify(&k, label, from, to, alen ? a : NULL, alen, blen ? b : NULL,
				 blen, want));
}

static void address(const uint8_t *d, size_t n)
{
	static struct apus_config cfg;
	struct sockaddr_storage ss;
	const uint8_t *nul = memchr(d, '\0', n);
	char buf[INET6_ADDRSTRLEN + 16];
	struct in_addr a4;
	size_t l;

	if (!nul || (size_t)(nul - d) >= sizeof(cfg.nodes[0].address))
		return;
	l = (size_t)(nul - d) + 1;
	memcpy(cfg.nodes[0].address, d, l);
	cfg.nnodes = 1;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, d + l, n - l < sizeof(ss) ? n - l : sizeof(ss));
	int ok = admit_address_ok(&cfg, 0, (struct sockaddr *)&ss);
	FUZZ_CHECK(ok == 0 || ok == 1);
	if (ss.ss_family == AF_INET)
		FUZZ_CHECK(ok == (inet_pton(AF_INET, cfg.nodes[0].address, &a4) == 1 &&
				  a4.s_addr == ((struct sockaddr_in *)&ss)->sin_addr.s_addr));
	else if (ss.ss_family != AF_INET6)
		FUZZ_CHECK(!ok);
	admit_addr_str((struct sockaddr *)&ss, buf, sizeof(buf));
	FUZZ_CHECK(memchr(buf, '\0', sizeof(buf)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] & 3) {
	case 0: hello(data + 1, size - 1); break;
	case 1: key_file(data + 1, size - 1); break;
	case 2: proof(data + 1, size - 1); break;
	case 3: address(data + 1, size - 1); break;
	}
	return 0;
}
