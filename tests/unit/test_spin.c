/* The adaptive spin window (common/spin.h): it grows to cover a
 * steady stream's gaps, never past its maximum, and shrinks back to its
 * minimum once work comes rarely. */
#include "common/spin.h"
#include "tests/unit/unit.h"

int main(void)
{
	struct spin_window w;

	spin_window_init(&w, 5000, 200000);
	CHECK(w.ns == 5000, "starts at the minimum: %llu", (unsigned long long)w.ns);
	/* One client's requests, 40 µs apart: spin through the gap. */
	spin_window_learn(&w, 40000);
	CHECK(w.ns == 80000, "twice a 40 µs gap: %llu", (unsigned long long)w.ns);
	/* Back-to-back work (gap 0) does not shrink it. */
	spin_window_learn(&w, 0);
	CHECK(w.ns == 80000, "a zero gap keeps it: %llu", (unsigned long long)w.ns);
	/* Capped at the maximum. */
	spin_window_learn(&w, 150000);
	CHECK(w.ns == 200000, "capped at 200 µs: %llu", (unsigned long long)w.ns);
	/* Rare work (gaps past the maximum) halves it, down to the minimum. */
	for (int i = 0; i < 3; i++)
		spin_window_learn(&w, 1000000);
	CHECK(w.ns == 25000, "halved three times: %llu", (unsigned long long)w.ns);
	for (int i = 0; i < 20; i++)
		spin_window_learn(&w, 1000000);
	CHECK(w.ns == 5000, "never below the minimum: %llu", (unsigned long long)w.ns);
	/* A maximum below the minimum means no growth at all. */
	spin_window_init(&w, 5000, 0);
	spin_window_learn(&w, 3000);
	CHECK(w.ns == 5000, "max below min: %llu", (unsigned long long)w.ns);
	return 0;
}
