/* Randomness as an input (coordinator/input/input_random.h): SipHash-2-4 against
 * its reference vector; a window's draws are a function of its entry alone
 * (the same after other entries, after a fresh key set-up, and when the
 * window is opened again for the same entry); entries and keys differ;
 * outside a window the boot stream starts over with each set-up;
 * randomness = machine turns it off.  A server's own generator (a fake one
 * here, shaped like Redis's genrand64) is seeded lazily: not when nothing
 * drew, again after a window drew, back to the same seed after a timer
 * drew outside every window, and a restarted replica resumes the state its
 * recovery point's mark names. */
#include <string.h>

#include "common/config.h"
#include "coordinator/input/input_clock.h"
#include "coordinator/input/input_random.h"
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

/* The fake server generator: an array regenerated when its index runs
 * out, and an index outside the array that every seed sets alike (as
 * Redis's mt and mti).  Its calls are counted in thread-local storage,
 * which is in no segment the shim diffs. */
#define FAKE_N 64
static uint64_t fake_mt[FAKE_N];
static int fake_i = FAKE_N + 1;
static __thread int fake_seeds;
static __thread uint64_t fake_last;

/* Exported (the test links with -rdynamic): seed_function finds it. */
__attribute__((visibility("default"))) void apus_test_seed(unsigned long long seed)
{
	fake_mt[0] = seed;
	for (int i = 1; i < FAKE_N; i++)
		fake_mt[i] = 6364136223846793005ULL * (fake_mt[i - 1] ^ (fake_mt[i - 1] >> 62)) + i;
	fake_i = FAKE_N;
	fake_seeds++;
	fake_last = seed;
}

static uint64_t fake_draw(void)
{
	if (fake_i >= FAKE_N) {
		for (int i = 0; i < FAKE_N; i++)
			fake_mt[i] = fake_mt[i] * 0x9e3779b97f4a7c15ULL ^ (fake_mt[(i + 1) % FAKE_N] >> 7);
		fake_i = 0;
	}
	return fake_mt[fake_i++];
}

/* A replica's start: the shim's set-up with the fake seed function, then
 * the server's own seeding from its main() (MAIN_SEED: its clock and pid,
 * different on every replica). */
static void lazy_setup(unsigned long long main_seed)
{
	struct apus_config cfg;
	char err[256];

	memset(&cfg, 0, sizeof(cfg));
	snprintf(cfg.cluster, sizeof(cfg.cluster), "alpha");
	cfg.randomness = RANDOMNESS_LOG;
	cfg.seed_every = 1;
	snprintf(cfg.seed_function, sizeof(cfg.seed_function), "apus_test_seed");
	fake_seeds = 0;
	CHECK(input_random_init(&cfg, err, sizeof(err)) == 0, "init: %s", err);
	CHECK(fake_seeds == 3, "the state search seeded %d times", fake_seeds);
	apus_test_seed(main_seed);
	fake_seeds = 0;
	input_entry = 0;
}

/* Entry IDX's window, in which the server draws N numbers: the first. */
static uint64_t fake_window(uint64_t idx, int n)
{
	uint64_t first = 0;

	input_window_enter(1700000000000ULL, idx);
	for (int i = 0; i < n; i++) {
		uint64_t v = fake_draw();
		first = i ? first : v;
	}
	input_window_leave();
	return first;
}

/* One replica's run; TIMER: its timers draw outside the windows.  OUT: the
 * first draws of the windows that drew. */
static void replica(int timer, uint64_t out[4])
{
	lazy_setup(1000 + timer);
	fake_window(1, 0);
	CHECK(fake_seeds == 1, "the first window seeded %d times", fake_seeds);
	uint64_t first = fake_last;
	fake_window(2, 0);
	fake_window(3, 0);
	CHECK(fake_seeds == 1, "seeded again though nothing drew");
	if (timer)
		fake_draw();
	out[0] = fake_window(4, 1);
	CHECK(fake_seeds == 1 + timer && fake_last == first,
	      "after a timer's draw: %d seeds (the last %s the first block's)", fake_seeds,
	      fake_last == first ? "is" : "is not");
	fake_window(5, 0);
	CHECK(fake_seeds == 2 + timer && fake_last != first, "no seed after a window drew");
	out[1] = fake_window(6, 1);
	CHECK(fake_seeds == 2 + timer, "seeded though the last window drew nothing");
	/* Two entries read back to back: the first one's draw is a window's. */
	input_window_enter(1700000000000ULL, 7);
	int seeds = fake_seeds;
	fake_draw();
	input_window_enter(1700000000000ULL, 8);
	CHECK(fake_seeds == seeds + 1, "a draw of a window left open did not count");
	out[2] = fake_draw();
	input_window_leave();
	if (timer)
		fake_draw();
	out[3] = fake_window(9, 1);
}

/* A node's recovery point after entry 13, taken by a running replica, and
 * another one restarted from it: the draws of entry 14 agree.  DRAW: entry
 * 13 draws (the mark is then dirty); TIMER: a timer drew after it. */
static void resume(int draw, int timer)
{
	uint64_t mark, want, seed;

	lazy_setup(7);
	fake_window(10, 1);
	fake_window(11, 0);
	seed = fake_last;
	fake_window(12, 0);
	fake_window(13, draw);
	if (timer)
		fake_draw();
	mark = input_random_mark();
	CHECK(draw ? mark == UINT64_MAX : mark == 11, "mark %llu", (unsigned long long)mark);
	want = fake_window(14, 1);

	lazy_setup(8);
	input_random_resume(mark);
	CHECK(fake_window(14, 1) == want, "restarted at mark %llu: entry 14 drew differently",
	      (unsigned long long)mark);
	CHECK(draw || fake_last == seed, "restarted: not seeded as the point's block");

	/* A draw inside the window the mark is taken in is a window's. */
	input_window_enter(1700000000000ULL, 15);
	fake_draw();
	CHECK(input_random_mark() == UINT64_MAX, "a window's draw left the mark clean");
	input_window_leave();
}

static void lazy(void)
{
	uint64_t a[4], b[4];

	replica(0, a);
	replica(1, b);
	for (int i = 0; i < 4; i++)
		CHECK(a[i] == b[i], "draw %d differs between replicas whose timers differ", i);
	CHECK(a[0] != a[1] && a[1] != a[2] && a[2] != a[3], "windows drew alike");
	resume(0, 0);
	resume(0, 1);
	resume(1, 0);
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

	lazy();
	return 0;
}
