/*
 * test_models_causal_cli.c - the attnc command line on the causal
 * language model with a run-time T (tests/models/causal_lm.g), whose
 * `loss` takes inputs, has an example and names no `data`: --gradcheck
 * checks the compiled gradient at the example, and --train trains on the
 * example until its loss falls; a train block whose batch differs from
 * the example's is an error, not a run on the wrong shapes.
 */
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MODEL "tests/models/causal_lm.g"

typedef struct run {
	int status;
	char out[1 << 16];
} run;

/* Runs attnc with args (NULL-terminated) in the source directory;
 * r->out gets stdout and stderr. */
static void run_attnc(run *r, const char *const *args)
{
	char out[] = "/tmp/attnc_causal_out_XXXXXX";
	int fd = mkstemp(out);
	ck_assert_int_ge(fd, 0);
	const char *argv[16] = {ATTNC_BINARY_DIR "/attnc"};
	int n = 1;
	for (; args[n - 1] && n < 15; n++)
		argv[n] = args[n - 1];
	argv[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(fd, 1);
		dup2(fd, 2);
		/* execv takes char *const[] but writes no string. */
		char *cargv[sizeof argv / sizeof argv[0]];
		memcpy(cargv, argv, sizeof cargv);
		if (chdir(ATTNC_SOURCE_DIR) == 0)
			execv(cargv[0], cargv);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	close(fd);
	FILE *f = fopen(out, "r");
	ck_assert_ptr_nonnull(f);
	size_t len = fread(r->out, 1, sizeof r->out - 1, f);
	r->out[len] = '\0';
	fclose(f);
	unlink(out);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(test_gradcheck_checks_the_gradient_at_the_example)
{
	static run r;
	const char *args[] = {MODEL, "--gradcheck", "--threads", "1", NULL};
	run_attnc(&r, args);
	ck_assert_msg(r.status == 0, "%s", r.out);
	ck_assert_msg(strstr(r.out,
			     "  logits.wpe                        [8, 16]"),
		      "%s", r.out);
	/* gradcheck's two verdicts (driver/gradcheck.c) */
	ck_assert_msg(strstr(r.out, "float32 against float64: worst "), "%s",
		      r.out);
	ck_assert_msg(strstr(r.out, ", ok (below 0.001)\nfloat64 against "
				    "differences: worst "),
		      "%s", r.out);
	ck_assert_msg(strstr(r.out, ", ok (below 1e-05)\n"), "%s", r.out);
}
END_TEST

START_TEST(test_training_on_the_example_makes_its_loss_fall)
{
	static run r;
	const char *args[] = {MODEL,       "--train", "--epochs", "40",
			      "--threads", "1",       NULL};
	run_attnc(&r, args);
	ck_assert_msg(r.status == 0, "%s", r.out);
	const char *s = strstr(r.out, "trained causal_lm: loss ");
	ck_assert_msg(s != NULL, "%s", r.out);
	double first, last;
	ck_assert_int_eq(sscanf(s, "trained causal_lm: loss %lf -> %lf", &first,
				&last),
			 2);
	ck_assert_double_gt(first, 2); /* about log(11) at the start */
	ck_assert_double_lt(last, first / 10);
}
END_TEST

START_TEST(test_a_batch_other_than_the_examples_is_an_error)
{
	static run r;
	const char *args[] = {MODEL, "--train", "--batch", "3", NULL};
	run_attnc(&r, args);
	ck_assert_int_eq(r.status, 1);
	ck_assert_msg(strstr(r.out, "error: 'loss' trains on its example, but "
				    "input 'tokens' of the example has another "
				    "shape"),
		      "%s", r.out);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("models_causal_cli");
	TCase *t = tcase_create("cli");
	tcase_set_timeout(t, 300);
	tcase_add_test(t, test_gradcheck_checks_the_gradient_at_the_example);
	tcase_add_test(t, test_training_on_the_example_makes_its_loss_fall);
	tcase_add_test(t, test_a_batch_other_than_the_examples_is_an_error);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
