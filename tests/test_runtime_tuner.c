/*
 * test_runtime_tuner.c - the thread tuner (runtime/rt_tuner.c) against
 * simulated machines: each test says what a call costs at 1 thread and
 * at the team's size, and checks the sequence of counts the tuner asks
 * for.
 */
#include "attnrt.h"
#include "testutil.h"

#include <check.h>
#include <math.h>

/* A machine: the seconds a call takes at 1 thread and at a team. */
typedef struct machine {
	double one, team;
} machine;

/* Runs n calls on m, writing the counts asked for into seq. */
static void run(attnrt_tuner *t, machine m, int n, int32_t *seq)
{
	for (int i = 0; i < n; i++) {
		seq[i] = attnrt_tuner_next(t);
		attnrt_tuner_record(t, seq[i] == 1 ? m.one : m.team);
	}
}

START_TEST(test_one_thread_never_probes)
{
	attnrt_tuner t;
	int32_t seq[20];
	attnrt_tuner_init(&t, 1, 5);
	run(&t, (machine){1.0, 0.1}, 20, seq);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(seq[i], 1);
	attnrt_tuner_init(&t, 0, 5);
	ck_assert_int_eq(attnrt_tuner_next(&t), 1);
}
END_TEST

START_TEST(test_a_quiet_machine_keeps_the_team_after_probing)
{
	attnrt_tuner t;
	int32_t seq[16];
	attnrt_tuner_init(&t, 2, 5);
	run(&t, (machine){1.6, 1.0}, 16, seq);
	static const int32_t want[16] = {1, 2, 1, 2, 1, 2, /* probe */
					 2, 2, 2, 2, 2,    /* 5 calls */
					 1, 2, 1, 2, 1};   /* probe again */
	for (int i = 0; i < 16; i++)
		ck_assert_msg(seq[i] == want[i], "call %d: %d threads, want %d",
			      i, seq[i], want[i]);
	ck_assert_uint_eq(t.n_probes, 1);
}
END_TEST

START_TEST(test_the_same_winner_doubles_the_interval)
{
	attnrt_tuner t;
	int32_t seq[64];
	attnrt_tuner_init(&t, 2, 5);
	/* probe (6), 5 calls, probe (6), then 10 calls before the next */
	run(&t, (machine){1.6, 1.0}, 6 + 5 + 6 + 10, seq);
	ck_assert_uint_eq(t.n_probes, 2);
	for (int i = 17; i < 27; i++)
		ck_assert_int_eq(seq[i], 2);
	ck_assert(attnrt_tuner_is_probing(&t)); /* after the 10th */
	run(&t, (machine){1.6, 1.0}, 1, seq);
	ck_assert_int_eq(seq[0], 1); /* the third probe, one thread first */
	run(&t, (machine){1.6, 1.0}, 1, seq);
	ck_assert_int_eq(seq[0], 2);
}
END_TEST

START_TEST(test_a_stalling_team_is_dropped_after_one_call)
{
	attnrt_tuner t;
	int32_t seq[12];
	attnrt_tuner_init(&t, 2, 100);
	run(&t, (machine){1.0, 50.0}, 12, seq);
	/* one thread, then the team once: 50 > 4 x 1 */
	ck_assert_int_eq(seq[0], 1);
	ck_assert_int_eq(seq[1], 2);
	for (int i = 2; i < 12; i++)
		ck_assert_int_eq(seq[i], 1);
	ck_assert_uint_eq(t.n_probes, 1);
}
END_TEST

START_TEST(test_a_team_that_starts_stalling_is_probed_again)
{
	attnrt_tuner t;
	int32_t seq[16];
	attnrt_tuner_init(&t, 2, 1000);
	run(&t, (machine){1.6, 1.0}, 8, seq); /* probe, then the team */
	ck_assert_int_eq(seq[7], 2);
	run(&t, (machine){1.6, 30.0}, 2, seq); /* two stalls in a row */
	ck_assert_int_eq(t.phase, 0);
	run(&t, (machine){1.6, 30.0}, 6, seq);
	ck_assert_int_eq(seq[0], 1);
	ck_assert_int_eq(seq[1], 2); /* 30 > 4 x 1.6: dropped */
	for (int i = 2; i < 6; i++)
		ck_assert_int_eq(seq[i], 1);
}
END_TEST

START_TEST(test_one_slow_call_is_not_a_stall)
{
	attnrt_tuner t;
	int32_t seq[8];
	attnrt_tuner_init(&t, 2, 1000);
	run(&t, (machine){1.6, 1.0}, 6, seq);
	run(&t, (machine){1.6, 30.0}, 1, seq);
	run(&t, (machine){1.6, 1.0}, 1, seq);
	run(&t, (machine){1.6, 30.0}, 1, seq);
	ck_assert_int_eq(t.phase, 1);
	ck_assert_int_eq(attnrt_tuner_next(&t), 2);
}
END_TEST

START_TEST(test_a_slow_single_thread_winner_is_not_probed_early)
{
	attnrt_tuner t;
	int32_t seq[10];
	attnrt_tuner_init(&t, 2, 1000);
	run(&t, (machine){1.0, 1.5}, 6, seq);
	ck_assert_int_eq(attnrt_tuner_next(&t), 1);
	run(&t, (machine){20.0, 1.5}, 10, seq);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(seq[i], 1);
}
END_TEST

START_TEST(test_a_team_call_not_run_counts_as_a_stall)
{
	attnrt_tuner t;
	attnrt_tuner_init(&t, 4, 100);
	ck_assert_int_eq(attnrt_tuner_next(&t), 1);
	attnrt_tuner_record(&t, 1.0);
	ck_assert_int_eq(attnrt_tuner_next(&t), 4);
	attnrt_tuner_record(&t, INFINITY); /* the caller skipped it */
	ck_assert(!attnrt_tuner_is_probing(&t));
	ck_assert_int_eq(attnrt_tuner_next(&t), 1);
}
END_TEST

START_TEST(test_a_skipped_team_is_tried_again_soon)
{
	attnrt_tuner t;
	int32_t seq[40];
	attnrt_tuner_init(&t, 2, 160); /* a skip retries after 160 / 16 */
	attnrt_tuner_record(&t, 1.0);
	ck_assert_int_eq(attnrt_tuner_next(&t), 2);
	attnrt_tuner_record(&t, INFINITY); /* a busy core */
	run(&t, (machine){1.0, 0.5}, 10, seq);
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(seq[i], 1);
	ck_assert(attnrt_tuner_is_probing(&t));
	/* skipped again: the retry doubles to 20 calls */
	attnrt_tuner_record(&t, 1.0);
	attnrt_tuner_record(&t, INFINITY);
	run(&t, (machine){1.0, 0.5}, 20, seq);
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(seq[i], 1);
	/* the core is free: the team is measured, wins and stays */
	run(&t, (machine){1.0, 0.5}, 6 + 30, seq);
	static const int32_t want[6] = {1, 2, 1, 2, 1, 2};
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(seq[i], want[i]);
	for (int i = 6; i < 36; i++)
		ck_assert_int_eq(seq[i], 2);
}
END_TEST

START_TEST(test_a_team_that_lost_after_winning_is_tried_again_soon)
{
	attnrt_tuner t;
	int32_t seq[40];
	attnrt_tuner_init(&t, 2, 160);
	run(&t, (machine){1.6, 1.0}, 6 + 4, seq); /* the team wins */
	ck_assert_int_eq(seq[9], 2);
	/* busy: two stalls, the probe drops the team after one call */
	run(&t, (machine){1.6, 30.0}, 2 + 2, seq);
	ck_assert_int_eq(seq[2], 1);
	ck_assert_int_eq(seq[3], 2);
	ck_assert(!attnrt_tuner_is_probing(&t));
	run(&t, (machine){1.6, 30.0}, 10, seq); /* 160 / 16 calls at 1 */
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(seq[i], 1);
	/* still busy: dropped again, the retry doubles */
	run(&t, (machine){1.6, 30.0}, 2 + 20, seq);
	ck_assert_int_eq(seq[1], 2);
	for (int i = 2; i < 22; i++)
		ck_assert_int_eq(seq[i], 1);
	/* free again: the team is back */
	run(&t, (machine){1.6, 1.0}, 6 + 20, seq);
	for (int i = 6; i < 26; i++)
		ck_assert_int_eq(seq[i], 2);
}
END_TEST

START_TEST(test_skips_back_off_to_the_interval_and_no_further)
{
	attnrt_tuner t;
	attnrt_tuner_init(&t, 2, 64);
	int32_t seq[64];
	uint64_t want[] = {4, 8, 16, 32, 64, 64};
	for (int k = 0; k < 6; k++) {
		attnrt_tuner_record(&t, 1.0);
		attnrt_tuner_record(&t, INFINITY);
		run(&t, (machine){1.0, 0.5}, (int)want[k] - 1, seq);
		ck_assert_msg(!attnrt_tuner_is_probing(&t), "skip %d", k);
		run(&t, (machine){1.0, 0.5}, 1, seq);
		ck_assert_msg(attnrt_tuner_is_probing(&t), "skip %d", k);
	}
}
END_TEST

START_TEST(test_a_team_slower_than_one_thread_is_probed_again)
{
	attnrt_tuner t;
	int32_t seq[8];
	attnrt_tuner_init(&t, 2, 1000);
	run(&t, (machine){1.6, 1.0}, 6, seq);
	ck_assert_int_eq(attnrt_tuner_next(&t), 2);
	/* 2.1 s: under 4x the team's median, over 1.25 x 1.6 */
	run(&t, (machine){1.6, 2.1}, 2, seq);
	ck_assert(attnrt_tuner_is_probing(&t));
	ck_assert_int_eq(attnrt_tuner_next(&t), 1);
}
END_TEST

START_TEST(test_a_slower_team_still_faster_than_one_thread_stays)
{
	attnrt_tuner t;
	int32_t seq[20];
	attnrt_tuner_init(&t, 2, 1000);
	run(&t, (machine){1.6, 1.0}, 6, seq);
	run(&t, (machine){1.6, 1.9}, 20, seq); /* under 1.25 x 1.6 */
	for (int i = 0; i < 20; i++)
		ck_assert_int_eq(seq[i], 2);
	ck_assert_uint_eq(t.n_probes, 1);
}
END_TEST

static Suite *tuner_suite(void)
{
	Suite *s = suite_create("runtime_tuner");
	TCase *tc = tcase_create("tuner");
	tcase_add_test(tc, test_one_thread_never_probes);
	tcase_add_test(tc, test_a_quiet_machine_keeps_the_team_after_probing);
	tcase_add_test(tc, test_the_same_winner_doubles_the_interval);
	tcase_add_test(tc, test_a_stalling_team_is_dropped_after_one_call);
	tcase_add_test(tc, test_a_team_that_starts_stalling_is_probed_again);
	tcase_add_test(tc, test_one_slow_call_is_not_a_stall);
	tcase_add_test(tc, test_a_slow_single_thread_winner_is_not_probed_early);
	tcase_add_test(tc, test_a_team_call_not_run_counts_as_a_stall);
	tcase_add_test(tc, test_a_skipped_team_is_tried_again_soon);
	tcase_add_test(tc, test_skips_back_off_to_the_interval_and_no_further);
	tcase_add_test(tc,
		       test_a_team_that_lost_after_winning_is_tried_again_soon);
	tcase_add_test(tc, test_a_team_slower_than_one_thread_is_probed_again);
	tcase_add_test(tc,
		       test_a_slower_team_still_faster_than_one_thread_stays);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(tuner_suite());
}
