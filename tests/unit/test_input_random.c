/* Randomness as an input (coordinator/input_random.h): SipHash-2-4 against
 * its reference vector; a window's draws are a function of its entry alone
 * (the same after other entries, after a fresh key set-up, and when the
 * window is opened again for the same entry); entries and keys differ;
 * outside a window the boot stream starts over with each set-up;
 * randomness = machine turns it off. */
#include <string.h>

#include "coordinator/config.h"
#include "coordinator/input_clock.h"
#include "coordinator/input_random.h"
#include "tests/unit/unit.h"

static void setup(struct apus_config *cfg, const char *cluster)
{
	char err[256];

	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->cluster, sizeof(cfg->cluster), "%s", cluster);
	cfg->randomness = RANDOMNESS_LOG;
	cfg->seed_every = 1;
	CHECK(input_random_init(cfg, err, sizeof(err)) == 0, "init: %s", err);
}

/* The first three draws of entry IDX's window, opened afresh. */
static void window(uint64_t idx, uint64_t out[3])
{
	input_window_enter(1700000000000ULL, idx);
	for (int i = 0; i < 3; i++)
		out[i] = input_random_next();
	input_window_leave();
	input_entry = 0;	/* the next enter of IDX is a new window */
}

int main(void)
{
	const uint64_t k[2] = { 0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL };
	struct apus_config cfg;
	uint64_t a[3], b[3], c[3], boot1[2], boot2[2];
	unsigned char bytes[13], again[13];

	/* Aumasson and Bernstein's vector: key 00..0f, message 00..0f. */
	CHECK(input_random_siphash(k, 0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL) ==
		      0x3f2acc7f57c29bdbULL,
	      "siphash = %016llx", (unsigned long long)input_random_siphash(
					  k, 0x0706050403020100ULL, 0x0f0e0d0c0b0a0908ULL));

	setup(&cfg, "alpha");
	CHECK(input_random_on(), "on after init");
	boot1[0] = input_random_next();
	boot1[1] = input_random_next();
	window(42, a);
	window(43, b);
	CHECK(memcmp(a, b, sizeof(a)), "entries 42 and 43 drew alike");
	CHECK(a[0] != a[1] && a[1] != a[2], "one window repeats itself");
	window(42, c);
	CHECK(!memcmp(a, c, sizeof(a)), "entry 42 drew differently the second time");

	/* Opened again for the same entry (its bytes read in two parts): the
	 * draws go on. */
	input_window_enter(1700000000000ULL, 77);
	uint64_t first = input_random_next();
	input_window_leave();
	input_window_enter(1700000000000ULL, 77);
	uint64_t second = input_random_next();
	input_window_leave();
	input_entry = 0;
	window(77, c);
	CHECK(first == c[0] && second == c[1], "a window reopened for its entry started over");

	input_window_enter(1700000000000ULL, 9);
	input_random_fill(bytes, sizeof(bytes));
	input_window_leave();
	input_entry = 0;
	input_window_enter(1700000000000ULL, 9);
	input_random_fill(again, sizeof(again));
	input_window_leave();
	input_entry = 0;
	CHECK(!memcmp(bytes, again, sizeof(bytes)), "fill differs for one entry");

	/* A restarted replica: a fresh set-up, the same draws for the same
	 * entries, and the boot stream from its start. */
	setup(&cfg, "alpha");
	boot2[0] = input_random_next();
	boot2[1] = input_random_next();
	CHECK(boot1[0] == boot2[0] && boot1[1] == boot2[1], "boot stream differs after a restart");
	CHECK(boot1[0] != boot1[1], "boot stream repeats");
	window(42, c);
	CHECK(!memcmp(a, c, sizeof(a)), "entry 42 differs after a restart");

	/* Another cluster, another key. */
	setup(&cfg, "beta");
	window(42, c);
	CHECK(memcmp(a, c, sizeof(a)), "two clusters drew alike");

	memset(&cfg, 0, sizeof(cfg));
	cfg.randomness = RANDOMNESS_MACHINE;
	char err[256];
	CHECK(input_random_init(&cfg, err, sizeof(err)) == 0, "init: %s", err);
	CHECK(!input_random_on(), "randomness = machine is on");
	return 0;
}
