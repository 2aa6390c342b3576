/* Randomness as an input of the log: the key, the windows' draws, the
 * boot stream and the server's seed function (input_random.h). */
#include "coordinator/input/input_random.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/config.h"
#include "coordinator/input/input_clock.h"
#include "common/logger.h"
#include "coordinator/input/seed_state.h"
#include "common/sys.h"

/* Domains of the second word, apart from every entry index (< 2^63). */
#define DOMAIN_BOOT (1ULL << 63)
#define DOMAIN_SEED ((1ULL << 63) | 1)
#define DOMAIN_KEY ((1ULL << 63) | 2)

static uint64_t key[2];
static int on;
static void (*seed_fn)(unsigned long long);
static uint64_t seed_every = 1;
static uint64_t seeded_block = UINT64_MAX;	/* the block last seeded, process-wide */
static uint64_t boot_drawn;			/* draws of the boot stream so far */

/* Lazy seeding (span found): the generator's state, its bytes right after
 * the last seed, whether a window drew since, and the block to seed first
 * after a restart from a recovery point. */
static unsigned char *span;
static size_t span_len;
static unsigned char pristine[SEED_STATE_MAX];
static int win_dirty;
static uint64_t resume_block = UINT64_MAX;
static int windows_open;	/* threads whose window is open (input_random_window) */

__thread uint64_t input_entry;			/* the entry of the thread's window */
static __thread uint64_t drawn;			/* draws in that window so far */
__thread int input_random_window;		/* lazy seeding: the thread's window is open */

static uint64_t rotl(uint64_t x, int b)
{
	return (x << b) | (x >> (64 - b));
}

#define SIPROUND                                                       \
	do {                                                           \
		v0 += v1; v1 = rotl(v1, 13); v1 ^= v0; v0 = rotl(v0, 32); \
		v2 += v3; v3 = rotl(v3, 16); v3 ^= v2;                 \
		v0 += v3; v3 = rotl(v3, 21); v3 ^= v0;                 \
		v2 += v1; v1 = rotl(v1, 17); v1 ^= v2; v2 = rotl(v2, 32); \
	} while (0)

/* SipHash-2-4 (Aumasson and Bernstein) of a 16-byte message: A then B,
 * little-endian words. */
uint64_t input_random_siphash(const uint64_t k[2], uint64_t a, uint64_t b)
{
	uint64_t v0 = k[0] ^ 0x736f6d6570736575ULL, v1 = k[1] ^ 0x646f72616e646f6dULL;
	uint64_t v2 = k[0] ^ 0x6c7967656e657261ULL, v3 = k[1] ^ 0x7465646279746573ULL;
	const uint64_t last = 16ULL << 56;	/* the length byte; no tail */

	v3 ^= a; SIPROUND; SIPROUND; v0 ^= a;
	v3 ^= b; SIPROUND; SIPROUND; v0 ^= b;
	v3 ^= last; SIPROUND; SIPROUND; v0 ^= last;
	v2 ^= 0xff;
	SIPROUND; SIPROUND; SIPROUND; SIPROUND;
	return v0 ^ v1 ^ v2 ^ v3;
}

/* Folds LEN bytes of P into the key, eight at a time. */
static void key_absorb(const unsigned char *p, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = 0;
		for (size_t j = 0; j < 8 && i + j < len; j++)
			w |= (uint64_t)p[i + j] << (8 * j);
		key[0] = input_random_siphash(key, w, DOMAIN_KEY);
		key[1] = input_random_siphash(key, w, DOMAIN_KEY + 1);
	}
}

/* Lazy seeding needs the generator's state; without it, every block is
 * seeded as it opens. */
static void find_span(const char *name)
{
	char why[128];

	span = seed_state_find(seed_fn, &span_len, why, sizeof(why));
	if (span)
		pr_info("seed_function = %s: its generator's state is %zu bytes; seeded again only "
			"after a window drew from it", name, span_len);
	else
		pr_info("seed_function = %s: its generator's state was not found (%s); seeded "
			"in every block of seed_every entries", name, why);
}

int input_random_init(const struct apus_config *cfg, char *err, size_t errlen)
{
	unsigned char secret[256];
	ssize_t len = -1;
	int fd;

	__atomic_store_n(&on, 0, __ATOMIC_RELEASE);
	if (cfg->randomness != RANDOMNESS_LOG)
		return 0;
	key[0] = key[1] = 0;
	boot_drawn = 0;
	seeded_block = UINT64_MAX;
	seed_fn = NULL;
	span = NULL;
	win_dirty = 0;
	key_absorb((const unsigned char *)cfg->cluster, strlen(cfg->cluster));
	/* Every node reads its own copy of the one cluster-wide secret. */
	fd = cfg->secret_file[0] ? sys.open(cfg->secret_file, O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		len = sys.read(fd, secret, sizeof(secret));
		sys.close(fd);
	}
	if (len > 0) {
		/* The text, without the line's end: one key however it is written. */
		while (len > 0 && (secret[len - 1] == '\n' || secret[len - 1] == '\r'))
			len--;
		key_absorb(secret, (size_t)len);
		memset(secret, 0, sizeof(secret));
	}
	seed_every = cfg->seed_every ? cfg->seed_every : 1;
	if (cfg->seed_function[0]) {
		seed_fn = (void (*)(unsigned long long))dlsym(RTLD_DEFAULT, cfg->seed_function);
		if (!seed_fn) {
			snprintf(err, errlen,
				 "seed_function = %s: the server exports no such function "
				 "(its draws will differ between replicas)",
				 cfg->seed_function);
			__atomic_store_n(&on, 1, __ATOMIC_RELEASE);
			return -1;
		}
		find_span(cfg->seed_function);
	}
	__atomic_store_n(&on, 1, __ATOMIC_RELEASE);
	return 0;
}

int input_random_on(void)
{
	return __atomic_load_n(&on, __ATOMIC_ACQUIRE);
}

static void seed(uint64_t block)
{
	seed_fn(input_random_siphash(key, block, DOMAIN_SEED));
	memcpy(pristine, span, span_len);
	seeded_block = block;
	win_dirty = 0;
}

/* Whether the state is no longer what the last seed left. */
static int moved(void)
{
	return memcmp(span, pristine, span_len) != 0;
}

/* The rule of input_random.h.  A change seen now happened since the last
 * look, at the previous enter or leave: inside a window if that was an
 * enter (entries read back to back), outside (a timer) if a leave. */
static void enter_lazy(uint64_t block)
{
	int outside = 0;

	if (!win_dirty && moved()) {
		win_dirty = input_random_window;
		outside = !input_random_window;
	}
	if (!input_random_window)
		__atomic_add_fetch(&windows_open, 1, __ATOMIC_RELEASE);
	input_random_window = 1;
	if (seeded_block == UINT64_MAX) {
		/* The first window: whatever the server seeded at its start is
		 * no draw of a window. */
		seed(resume_block != UINT64_MAX ? resume_block : block);
		resume_block = UINT64_MAX;
	} else if (win_dirty && block != seeded_block) {
		seed(block);
	} else if (outside) {
		/* Back to f(j): a reseed, not a copy of the span, since the
		 * state may hold more than the span (Redis's index mti, which
		 * every seed sets alike). */
		seed(seeded_block);
	}
}

void input_random_leave(void)
{
	input_random_window = 0;
	if (!win_dirty && moved())
		win_dirty = 1;
	__atomic_sub_fetch(&windows_open, 1, __ATOMIC_RELEASE);
}

uint64_t input_random_mark(void)
{
	if (!span || seeded_block == UINT64_MAX || win_dirty || (input_random_window && moved()))
		return UINT64_MAX;
	return seeded_block;
}

int input_random_windows_open(void)
{
	return span ? __atomic_load_n(&windows_open, __ATOMIC_ACQUIRE) : 0;
}

void input_random_resume(uint64_t mark)
{
	resume_block = mark;
}

void input_random_enter(uint64_t idx)
{
	input_entry = idx;
	drawn = 0;
	if (!seed_fn)
		return;
	uint64_t block = idx / seed_every;
	if (span) {
		enter_lazy(block);
		return;
	}
	/* One server thread executes at a time in the servers this is for
	 * (Redis); the exchange keeps two from seeding one block twice. */
	if (__atomic_exchange_n(&seeded_block, block, __ATOMIC_RELAXED) != block)
		seed_fn(input_random_siphash(key, block, DOMAIN_SEED));
}

uint64_t input_random_next(void)
{
	if (input_clock_ms)
		return input_random_siphash(key, input_entry, drawn++);
	return input_random_siphash(key, DOMAIN_BOOT,
				    __atomic_fetch_add(&boot_drawn, 1, __ATOMIC_RELAXED));
}

void input_random_fill(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		uint64_t v = input_random_next();
		size_t n = len < 8 ? len : 8;

		memcpy(p, &v, n);
		p += n;
		len -= n;
	}
}
