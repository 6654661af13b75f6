/*
 * rt_tuner.c - picks the thread count of a repeatedly called entry point
 * by timing its calls (attnrt.h, attnrt_tuner): 1 thread against all,
 * probed in turn, the median deciding, probed again now and then and at
 * once when the winner starts to stall. A team the caller skipped (a
 * busy core), or one that won before and now loses, is tried again soon:
 * the load that beat it may pass, so it backs off from a short interval.
 */
#include "attnrt.h"

#include <math.h>
#include <stdbool.h>

#define SAMPLES 3      /* probe calls per candidate */
#define STALL 4.0      /* a call this many medians long is a stall */
#define MAX_BACKOFF 64 /* the interval grows to at most 64x */
#define DEFAULT_INTERVAL 200
#define SLOWER 1.25 /* a team call this many 1-thread medians long stalls */
#define RETRY_DIVISOR 16 /* a retry's first interval is this much shorter */

static int32_t candidate(const attnrt_tuner *t, int i)
{
	return i == 0 ? t->max_threads : 1;
}

static double median3(const double *v, int n)
{
	if (n == 1)
		return v[0];
	if (n == 2)
		return (v[0] + v[1]) / 2;
	double a = v[0], b = v[1], c = v[2];
	if ((a <= b && b <= c) || (c <= b && b <= a))
		return b;
	if ((b <= a && a <= c) || (c <= a && a <= b))
		return a;
	return c;
}

static double best(const attnrt_tuner *t, int i)
{
	double b = t->samples[i][0];
	for (int k = 1; k < t->n_samples[i]; k++)
		if (t->samples[i][k] < b)
			b = t->samples[i][k];
	return b;
}

static void start_probe(attnrt_tuner *t)
{
	t->phase = 0;
	t->n_samples[0] = t->n_samples[1] = 0;
	t->current = 1; /* the safe one first: the team is judged against it */
	t->calls = 0;
	t->n_slow = 0;
}

void attnrt_tuner_init(attnrt_tuner *t, int32_t max_threads, uint64_t interval)
{
	*t = (attnrt_tuner){0};
	t->max_threads = max_threads > 1 ? max_threads : 1;
	t->base_interval = interval ? interval : DEFAULT_INTERVAL;
	t->interval = t->base_interval;
	t->winner = -1;
	if (t->max_threads == 1) {
		t->phase = 1;
		t->current = 1;
		return;
	}
	start_probe(t);
}

int32_t attnrt_tuner_next(const attnrt_tuner *t)
{
	return t->current;
}

int attnrt_tuner_is_probing(const attnrt_tuner *t)
{
	return t->phase == 0;
}

/* The interval to the next probe after one the team lost without a fair
 * trial: interval / 16 calls, doubling with each such probe in a row up
 * to the interval. */
static uint64_t next_retry(const attnrt_tuner *t)
{
	uint64_t r = t->retry ? 2 * t->retry : t->base_interval / RETRY_DIVISOR;
	if (r < 1)
		r = 1;
	return r < t->interval ? r : t->interval;
}

/* Ends a probe, its count chosen: calls run on t->current until the
 * next probe. */
static void settled(attnrt_tuner *t)
{
	t->phase = 1;
	t->calls = 0;
	t->n_slow = 0;
	t->n_probes++;
}

/* Ends a probe: the lower median wins (a dropped candidate has none). A
 * team that won before and loses now, or loses while a retry runs, is
 * tried again soon (next_retry): the machine changed, and may change
 * back. */
static void settle(attnrt_tuner *t)
{
	int w;
	if (t->n_samples[0] == 0 || t->n_samples[1] == 0)
		w = t->n_samples[0] ? 0 : 1;
	else
		w = median3(t->samples[1], t->n_samples[1]) <
				    median3(t->samples[0], t->n_samples[0])
			    ? 1
			    : 0;
	bool retrying = w == 1 && (t->winner == 0 || t->retry > 0);
	if (w == t->winner && t->interval < t->base_interval * MAX_BACKOFF)
		t->interval *= 2;
	else if (w != t->winner)
		t->interval = t->base_interval;
	t->winner = w;
	t->median = median3(t->samples[w], t->n_samples[w]);
	t->one_median = t->n_samples[1] ? median3(t->samples[1], t->n_samples[1])
					: 0;
	t->current = candidate(t, w);
	t->retry = retrying ? next_retry(t) : 0;
	settled(t);
}

/* Ends a probe whose team call the caller skipped: one thread until the
 * next retry (a busy core says nothing of the team once it is free); the
 * last measured winner and its interval stay. */
static void settle_skipped(attnrt_tuner *t)
{
	t->retry = next_retry(t);
	t->median = median3(t->samples[1], t->n_samples[1]);
	t->one_median = t->median;
	t->current = 1;
	settled(t);
}

static void record_probe(attnrt_tuner *t, double seconds)
{
	int i = t->current == t->max_threads ? 0 : 1, o = 1 - i;
	if (i == 0 && isinf(seconds) && t->n_samples[1] > 0) {
		settle_skipped(t);
		return;
	}
	t->samples[i][t->n_samples[i]++] = seconds;
	/* far slower than the other's best: no need to see it again */
	if (t->n_samples[o] > 0 && seconds > STALL * best(t, o)) {
		t->n_samples[i] = 0;
		settle(t);
		return;
	}
	if (t->n_samples[0] == SAMPLES && t->n_samples[1] == SAMPLES) {
		settle(t);
		return;
	}
	if (t->n_samples[o] < SAMPLES)
		t->current = candidate(t, o);
}

/* Whether a settled call stalled: only a team can (on a descheduled
 * thread); it did when it took 4x its median, or longer than one thread
 * took by a margin (a core busy enough that one thread is faster). */
static bool is_stall(const attnrt_tuner *t, double seconds)
{
	if (t->current == 1)
		return false;
	return seconds > STALL * t->median ||
	       (t->one_median > 0 && seconds > SLOWER * t->one_median);
}

void attnrt_tuner_record(attnrt_tuner *t, double seconds)
{
	if (t->max_threads == 1)
		return;
	if (t->phase == 0) {
		record_probe(t, seconds);
		return;
	}
	t->calls++;
	t->n_slow = is_stall(t, seconds) ? t->n_slow + 1 : 0;
	if (t->n_slow >= 2 || t->calls >= (t->retry ? t->retry : t->interval))
		start_probe(t);
}
