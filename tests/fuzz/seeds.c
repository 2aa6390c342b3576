/* Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/)
 * with the real encoders: `make fuzz-seeds` (run from the repository
 * root).  Inputs for the config target are written by hand there. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checker/divergence.h"
#include "coordinator/transport/admission.h"
#include "coordinator/storage/entry.h"
#include "coordinator/transport/transport.h"
#include "guard/checkpoint.h"
#include "guard/snapshot_wire.h"

static void put(const char *target, const char *name, const void *d, size_t n)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "tests/fuzz/corpus/%s/%s", target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(d, 1, n, f) != n || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* A buffer that grows by appending: selector bytes, then a message. */
struct buf {
	uint8_t b[4096];
	size_t n;
};

static void add(struct buf *b, const void *d, size_t n)
{
	memcpy(b->b + b->n, d, n);
	b->n += n;
}

static void entries(void)
{
	static _Alignas(64) uint8_t log[4096];
	char data[300];
	struct iovec iov = { data, sizeof(data) };
	struct entry_meta m = { .idx = 7, .view = 2, .committed = 6, .conn = { 2, 3 },
				.type = ENTRY_RECV, .node = 1 };
	size_t n;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)('a' + i % 26);
	n = entry_write(log, &m, &iov, 1, 0, 100);
	put("entry", "recv", log, entry_size(100));
	put("entry", "recv-short", log, n - 1);
	m.idx = 8, m.type = ENTRY_CLOSE;
	entry_write(log + entry_size(100), &m, NULL, 0, 0, 0);
	put("entry", "recv-close", log, entry_size(100) + entry_size(0));
	memset(log, 0, sizeof(log));
	m = (struct entry_meta){ .idx = 1, .view = 5, .type = ENTRY_NOOP };
	put("entry", "noop", log, entry_write(log, &m, NULL, 0, 0, 0));
	m = (struct entry_meta){ .idx = 9, .view = 5, .type = ENTRY_HASH, .conn = { 5, 2 } };
	n = entry_write(log, &m, &iov, 1, 0, sizeof(data));
	log[sizeof(struct entry_hdr) + 5] ^= 1;	/* a flipped bit: the CRC refuses it */
	put("entry", "hash-flipped", log, n);
}

static void frames(void)
{
	struct buf b = { .n = 0 };
	uint32_t size = 4096;
	struct { uint64_t off; uint32_t len, pad; } f;
	uint64_t word = 42;
	char payload[200] = "payload";

	add(&b, &size, 4);
	f = (typeof(f)){ 64, 8, 0 };	/* an ack word */
	add(&b, &f, sizeof(f)), add(&b, &word, 8);
	f = (typeof(f)){ 1024, sizeof(payload), 0 };
	add(&b, &f, sizeof(f)), add(&b, payload, sizeof(payload));
	f = (typeof(f)){ 4092, 4, 0 };	/* short, flush with the end */
	add(&b, &f, sizeof(f)), add(&b, payload, 4);
	put("tcp_frame", "frames", b.b, b.n);
	f = (typeof(f)){ 4090, 8, 0 };	/* 2 bytes past the end */
	add(&b, &f, sizeof(f)), add(&b, &word, 8);
	put("tcp_frame", "frames-past-end", b.b, b.n);
}

static void admission(void)
{
	struct buf b = { .n = 0 };
	struct admit_key k;
	struct { uint32_t magic; uint16_t version; uint8_t from, to;
		 uint8_t nonce[ADMIT_NONCE_LEN]; uint64_t inc; } h = { 0x41505553u, 2, 1, 0,
		 "0123456789abcdef", 0x1122334455667788ULL };
	uint8_t sel, nodes = 0 | 2 << 3;	/* self 0 of 3 */
	static const char key_text[] =
		"00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF\n";
	uint8_t mac[ADMIT_MAC_LEN], lens[3] = { 15, 4, 16 };	/* alen = 4 << 2 */
	uint32_t from = 1, to = 0;
	struct sockaddr_in s4 = { .sin_family = AF_INET, .sin_port = htons(7110) };
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6, .sin6_port = htons(7110) };

	sel = 0, add(&b, &sel, 1), add(&b, &nodes, 1), add(&b, &h, sizeof(h));
	put("admission", "hello", b.b, b.n);
	b.n = 0, sel = 1, add(&b, &sel, 1), sel = 0, add(&b, &sel, 1);
	add(&b, key_text, sizeof(key_text) - 1);
	put("admission", "key", b.b, b.n);
	b.n = 0, sel = 2, add(&b, &sel, 1);
	for (int i = 0; i < ADMIT_KEY_LEN; i++)
		k.key[i] = (uint8_t)(i * 3);
	add(&b, k.key, sizeof(k.key)), add(&b, lens, 3), add(&b, &from, 4), add(&b, &to, 4);
	add(&b, "apus-tcp-accept", 15), add(&b, "nonce-c-16bytes!", 16), add(&b, "nonce-a-16bytes!", 16);
	admit_mac(&k, "apus-tcp-accept", from, to, "nonce-c-16bytes!", 16, "nonce-a-16bytes!", 16,
		  mac);
	add(&b, mac, sizeof(mac));
	put("admission", "proof", b.b, b.n);
	b.n = 0, sel = 3, add(&b, &sel, 1), add(&b, "10.77.0.2", 10);
	inet_pton(AF_INET, "10.77.0.2", &s4.sin_addr);
	add(&b, &s4, sizeof(s4));
	put("admission", "address-v4", b.b, b.n);
	b.n = 0, sel = 3, add(&b, &sel, 1), add(&b, "10.77.0.2", 10);
	inet_pton(AF_INET6, "::ffff:10.77.0.2", &s6.sin6_addr);
	add(&b, &s6, sizeof(s6));
	put("admission", "address-v4-mapped", b.b, b.n);
}

static void snapshot(void)
{
	struct buf b = { .n = 0 };
	struct hello h = { .magic = "APUSSNAP", .version = 1, .node = 2, .nonce = "0123456789abcdef" };
	struct reply r = { .status = 0, .m = { 1000, 65536, 3, 123456 } };
	uint8_t sel, arg = 0 | 2 << 3;

	sel = 0, add(&b, &sel, 1), add(&b, &arg, 1), add(&b, &h, sizeof(h));
	put("snapshot", "hello", b.b, b.n);
	b.n = 0, sel = 1, arg = 200, add(&b, &sel, 1), add(&b, &arg, 1), add(&b, &r, sizeof(r));
	put("snapshot", "reply", b.b, b.n);
	r = (struct reply){ .status = 1, .msglen = 100000 };
	b.n = 0, add(&b, &sel, 1), add(&b, &arg, 1), add(&b, &r, sizeof(r));
	put("snapshot", "reply-refused", b.b, b.n);
}

static void meta(void)
{
	struct ckpt_info c = { .index = 1234, .view = 3, .log_pos = 99999, .time_ms = 1700000000000ULL,
			       .pid = 4711, .image_bytes = 5 << 20, .data_bytes = 1 << 16,
			       .dump_ms = 250 };
	static const char partial[] = "index = 5\npid = 0\n";

	if (ckpt_meta_write(&c, "tests/fuzz/corpus/ckpt_meta")) {
		perror("meta");
		exit(1);
	}
	put("ckpt_meta", "partial-no-pid", partial, sizeof(partial) - 1);
}

static void divergence(void)
{
	struct buf b = { .n = 0 };
	static const char out[] = "$5\r\nhello\r\n\"quoted\" \x01";
	struct divergence d = { .node = 1, .conn_view = 2, .conn_idx = 17, .offset = 1536,
				.leader_crc = 0xe9c6d914c4b8d9caULL, .replica_crc = 42, .index = 99,
				.time_ms = 1700000000000ULL, .why = "hash", .excerpt = out,
				.excerpt_len = sizeof(out) - 1 };
	char line[1024];
	uint8_t sel = 0;
	uint64_t num[6] = { 1700000000000ULL, 2, 17, 1536, 0xe9c6d914c4b8d9caULL, 42 };
	int n = divergence_format(line, sizeof(line), &d);

	add(&b, &sel, 1), add(&b, line, (size_t)n);
	put("divergence", "line", b.b, b.n);
	b.n = 0, sel = 1, add(&b, &sel, 1), add(&b, num, sizeof(num));
	sel = 1, add(&b, &sel, 1), add(&b, "+OK\r\n", 5);
	put("divergence", "record", b.b, b.n);
}

int main(void)
{
	entries();
	frames();
	admission();
	snapshot();
	meta();
	divergence();
	return 0;
}
