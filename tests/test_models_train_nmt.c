/*
 * test_models_train_nmt.c - the book's translation models trained end to
 * end by the attnc command line, as a user runs them: models/transformer.g
 * and models/bahdanau.g on the built-in corpus for a few epochs, and on
 * the real corpus (../shared/data/fra-eng/fra.txt, beside the source
 * tree; the test says so and passes when it is missing) for 30. Each run writes --metrics; the test reads the epochs' losses (they
 * must fall) and the translations (greedy decoding must give a sentence
 * of the target vocabulary that ends before the step limit, and BLEU
 * when the data has a reference).
 *
 * The attnc binary is the one the build made beside the tests.
 */
#include "attnrt.h"
#include "rt_nmt.h"
#include "testutil.h"

#include <check.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_LINES 64
#define LINE_CAP 1024

/* What one run of attnc left: its status, its stdout and stderr, and the
 * lines of its --metrics file. */
typedef struct run {
	int status;
	char out[1 << 14];
	double loss[MAX_LINES]; /* per epoch */
	int n_epochs;
	char pred[MAX_LINES][LINE_CAP], ref[MAX_LINES][LINE_CAP];
	double bleu[MAX_LINES];
	int n_translations;
	int n_sentences; /* as the decoding summary says */
} run;

static char *read_file(const char *path, char *buf, size_t cap)
{
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	size_t n = fread(buf, 1, cap - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* The JSON string value of key in line (no escapes but \" and \\), or
 * "" when it is null or missing. */
static void json_string(const char *line, const char *key, char *out)
{
	char pat[64];
	snprintf(pat, sizeof pat, "\"%s\": \"", key);
	const char *p = strstr(line, pat);
	size_t n = 0;
	for (p = p ? p + strlen(pat) : ""; *p && *p != '"' && n + 1 < LINE_CAP;
	     p++)
		out[n++] = *p == '\\' ? *++p : *p;
	out[n] = '\0';
}

static void read_metrics(const char *path, run *r)
{
	static char buf[1 << 16];
	read_file(path, buf, sizeof buf);
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		int epoch;
		double loss;
		if (sscanf(line, "{\"epoch\": %d, \"loss\": %lf", &epoch,
			   &loss) == 2) {
			ck_assert_int_eq(epoch, r->n_epochs + 1);
			r->loss[r->n_epochs++] = loss;
			ck_assert_ptr_nonnull(strstr(line, "\"peak_rss_mib\": "));
			continue;
		}
		int n_sent;
		double decode_ms, per_sentence;
		if (sscanf(line,
			   "{\"translated\": %d, \"compile_seconds\": %*f, "
			   "\"decode_ms\": %lf, \"ms_per_sentence\": %lf",
			   &n_sent, &decode_ms, &per_sentence) == 3) {
			r->n_sentences = n_sent;
			ck_assert_double_gt(decode_ms, 0);
			ck_assert_double_eq_tol(per_sentence * n_sent,
						decode_ms, 1e-3 * decode_ms);
			continue;
		}
		ck_assert_ptr_nonnull(strstr(line, "{\"src\": \""));
		int i = r->n_translations++;
		json_string(line, "pred", r->pred[i]);
		json_string(line, "ref", r->ref[i]);
		const char *b = strstr(line, "\"bleu\": ");
		ck_assert_ptr_nonnull(b);
		r->bleu[i] = strncmp(b + 8, "null", 4) == 0 ? -1 : atof(b + 8);
	}
}

/* Runs attnc with args (NULL-terminated, after the binary's name) in the
 * source directory, with is_metrics --metrics into a temporary file. */
static void run_attnc(run *r, const char *const *args, bool is_metrics)
{
	char metrics[] = "/tmp/attnc_nmt_metrics_XXXXXX";
	char out[] = "/tmp/attnc_nmt_out_XXXXXX";
	int mfd = mkstemp(metrics), ofd = mkstemp(out);
	ck_assert_int_ge(mfd, 0);
	ck_assert_int_ge(ofd, 0);
	close(mfd);
	const char *argv[32] = {ATTNC_BINARY_DIR "/attnc"};
	int n = 1;
	for (; args[n - 1]; n++)
		argv[n] = args[n - 1];
	if (is_metrics) {
		argv[n++] = "--metrics";
		argv[n++] = metrics;
	}
	argv[n] = NULL;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(ofd, 1);
		dup2(ofd, 2);
		/* execv takes char *const[] but writes no string. */
		char *cargv[sizeof argv / sizeof argv[0]];
		memcpy(cargv, argv, sizeof cargv);
		if (chdir(ATTNC_SOURCE_DIR) == 0)
			execv(cargv[0], cargv);
		_exit(127);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	close(ofd);
	memset(r, 0, sizeof *r);
	r->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	read_file(out, r->out, sizeof r->out);
	ck_assert_msg(r->status == 0, "attnc failed (%d):\n%s", r->status,
		      r->out);
	read_metrics(metrics, r);
	remove(metrics);
	remove(out);
}

/* Every token of a translation is a word of the target vocabulary (not a
 * reserved one but <unk>), and with is_ended there are fewer than T of
 * them: <eos> ended it before the step limit (a sentence of unknown
 * words need not end). */
static void check_sentence(const rt_nmt_data *d, const char *pred, bool is_ended)
{
	char buf[LINE_CAP];
	int n = 0;
	snprintf(buf, sizeof buf, "%s", pred);
	ck_assert_msg(buf[0] != '\0', "an empty translation");
	for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " "), n++) {
		int32_t id = rt_nmt_vocab_lookup(d, RT_NMT_TGT, tok,
						 strlen(tok));
		ck_assert_msg(id == RT_NMT_UNK ? strcmp(tok, "<unk>") == 0
					       : id > RT_NMT_EOS,
			      "'%s' of '%s' is not a word of the vocabulary",
			      tok, pred);
	}
	ck_assert_int_le(n, rt_nmt_steps(d));
	if (is_ended)
		ck_assert_int_lt(n, rt_nmt_steps(d));
}

static rt_nmt_data *load_data(const char *path)
{
	rt_nmt_data *d = NULL;
	char err[256];
	ck_assert_int_eq(rt_nmt_load(NULL, path, 600, 10, &d, err, sizeof err),
			 ATTNRT_OK);
	return d;
}

/* The loss of a few epochs falls epoch after epoch, and by a fifth. */
static void check_loss_falls(const run *r, int epochs)
{
	ck_assert_int_eq(r->n_epochs, epochs);
	for (int e = 1; e < epochs; e++)
		ck_assert_msg(r->loss[e] < r->loss[e - 1],
			      "epoch %d: %g after %g", e + 1, r->loss[e],
			      r->loss[e - 1]);
	ck_assert_double_lt(r->loss[epochs - 1], 0.8 * r->loss[0]);
}

/* A model on the built-in corpus: trains, then translates the sentences
 * given, the first one in the data ("go ." => "va !") with its BLEU. */
static void check_builtin(const char *model)
{
	static run r;
	const char *args[] = {model,         "--train",     "--epochs",
			      "4",           "--translate", "go .",
			      "--translate", "I lost.",     "--translate",
			      "zorglub .",   NULL};
	run_attnc(&r, args, true);
	check_loss_falls(&r, 4);
	ck_assert_ptr_nonnull(strstr(r.out, "data: built-in corpus: "));
	ck_assert_int_eq(r.n_translations, 3);
	ck_assert_int_eq(r.n_sentences, 3);
	rt_nmt_data *d = load_data(NULL);
	for (int i = 0; i < 3; i++)
		check_sentence(d, r.pred[i], i < 2);
	rt_nmt_free(d);
	ck_assert_str_eq(r.ref[0], "va !");
	ck_assert_str_eq(r.ref[1], "j'ai perdu .");
	ck_assert(r.bleu[0] >= 0 && r.bleu[0] <= 1);
	ck_assert_str_eq(r.ref[2], ""); /* no reference: null */
	ck_assert_double_eq(r.bleu[2], -1);
	ck_assert_ptr_nonnull(strstr(r.out, "go . => "));
	ck_assert_ptr_nonnull(strstr(r.out, "zorglub . => "));
	ck_assert_ptr_nonnull(strstr(r.out, "[1 word not in the vocabulary]"));
}

START_TEST(test_transformer_learns_the_builtin_corpus_and_translates)
{
	check_builtin("models/transformer.g");
}
END_TEST

START_TEST(test_bahdanau_learns_the_builtin_corpus_and_translates)
{
	check_builtin("models/bahdanau.g");
}
END_TEST

/* Without --translate, training ends with the book's four sentences. */
START_TEST(test_training_translates_the_books_sentences)
{
	static run r;
	const char *args[] = {"models/bahdanau.g", "--train", "--epochs", "1",
			      "--examples",        "100",     NULL};
	run_attnc(&r, args, true);
	ck_assert_int_eq(r.n_epochs, 1);
	ck_assert_int_eq(r.n_translations, 4);
	ck_assert_int_eq(r.n_sentences, 4);
	ck_assert_str_eq(r.ref[0], "va !");
	ck_assert_str_eq(r.ref[3], "je suis chez moi .");
	ck_assert_ptr_nonnull(strstr(r.out, "\nhe's calm . => "));
}
END_TEST

/* The compiled gradient of a translation batch (training mode, dropout
 * on) agrees with the interpreted one in float64, and that with float64
 * central differences of the interpreted loss; the interpreter takes the
 * data's vocabulary sizes too. */
static void check_gradient(const char *model)
{
	static run r;
	const char *args[] = {model,        "--gradcheck", "--batch", "2",
			      "--examples", "30",          NULL};
	run_attnc(&r, args, false);
	ck_assert_ptr_nonnull(strstr(r.out, "ok (below 0.001)"));
	ck_assert_ptr_nonnull(strstr(r.out, "ok (below 1e-05)"));
}

START_TEST(test_transformer_gradient_of_a_translation_batch_is_right)
{
	check_gradient("models/transformer.g");
}
END_TEST

START_TEST(test_bahdanau_gradient_of_a_translation_batch_is_right)
{
	check_gradient("models/bahdanau.g");
}
END_TEST

/* models/bahdanau.g without dropout, in a temporary file (path, of 64
 * bytes). */
static void write_bahdanau_without_dropout(char *path)
{
	static char text[1 << 15];
	char src[512];
	snprintf(src, sizeof src, "%s/models/bahdanau.g", ATTNC_SOURCE_DIR);
	read_file(src, text, sizeof text);
	char *p = strstr(text, "P = 0.1");
	ck_assert_ptr_nonnull(p);
	memcpy(p, "P = 0  ", 7);
	char base[] = "/tmp/attnc_nodrop_XXXXXX";
	int fd = mkstemp(base);
	ck_assert_int_ge(fd, 0);
	close(fd);
	snprintf(path, 64, "%s.g", base); /* the driver reads .g by its name */
	remove(base);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	size_t n = strlen(text);
	ck_assert_int_eq(write(fd, text, n), (ssize_t)n);
	close(fd);
}

/* Shards of a batch add up to the whole batch: without dropout (whose
 * masks are a shard's own) the losses of 1, 2 and 3 shards agree to
 * rounding, over a first batch of 64 rows and a last one of 36 (3 shards
 * of 22 rows: 22 + 14 real rows, and a shard of padding alone). */
START_TEST(test_shards_add_up_to_the_whole_batch)
{
	char model[64];
	write_bahdanau_without_dropout(model);
	static run r[3];
	const char *counts[3] = {"1", "2", "3"};
	for (int i = 0; i < 3; i++) {
		const char *args[] = {model,       "--train",  "--examples",
				      "100",       "--epochs", "2",
				      "--threads", "1",        "--shards",
				      counts[i],   NULL};
		run_attnc(&r[i], args, true);
		ck_assert_int_eq(r[i].n_epochs, 2);
	}
	remove(model);
	ck_assert_ptr_nonnull(strstr(r[2].out, "2 epochs of 2 batches in 3 "
					       "shards of 22 rows"));
	ck_assert_ptr_null(strstr(r[0].out, "shards"));
	for (int i = 1; i < 3; i++)
		for (int e = 0; e < 2; e++)
			ck_assert_double_eq_tol(r[i].loss[e], r[0].loss[e],
						1e-6 * r[0].loss[e]);
	/* The second epoch's loss follows a step: they did train. */
	ck_assert_double_lt(r[0].loss[1], r[0].loss[0]);
}
END_TEST

/* Sharded training gives the same parameters, bit for bit, whether the
 * shards run one after the other (--threads 1) or side by side (the
 * tuner tries 2 threads on the first steps). */
START_TEST(test_sharded_training_does_not_depend_on_threads)
{
	char ckpt[2][32] = {"/tmp/attnc_shards_XXXXXX",
			    "/tmp/attnc_shards_XXXXXX"};
	const char *threads[2] = {"1", "2"};
	static run r[2];
	static char bytes[2][1 << 20];
	size_t n[2];
	for (int i = 0; i < 2; i++) {
		int fd = mkstemp(ckpt[i]);
		ck_assert_int_ge(fd, 0);
		close(fd);
		const char *args[] =
			{"models/bahdanau.g", "--train",  "--examples", "300",
			 "--epochs",          "2",        "--shards",   "2",
			 "--threads",         threads[i], "--save",     ckpt[i],
			 "--translate",       "go .",     NULL};
		run_attnc(&r[i], args, true);
		FILE *f = fopen(ckpt[i], "rb");
		ck_assert_ptr_nonnull(f);
		n[i] = fread(bytes[i], 1, sizeof bytes[i], f);
		fclose(f);
		remove(ckpt[i]);
	}
	ck_assert_uint_gt(n[0], 1000);
	ck_assert_uint_lt(n[0], sizeof bytes[0]);
	ck_assert_uint_eq(n[0], n[1]);
	ck_assert(memcmp(bytes[0], bytes[1], n[0]) == 0);
	for (int e = 0; e < 2; e++)
		ck_assert(r[0].loss[e] == r[1].loss[e]);
}
END_TEST

/* 30 epochs of a model on the real corpus (skipped, saying so, when it
 * is missing): the loss ends below bound and below half the first
 * epoch's, and the book's four sentences decode to words of the
 * vocabulary that end before the step limit. */
static void check_real_corpus(const char *model, double bound)
{
	char path[512];
	snprintf(path, sizeof path, "%s/%s", ATTNC_SOURCE_DIR, TU_REAL_CORPUS);
	if (access(path, R_OK) != 0) {
		printf("%s on the real corpus: skipped, %s is missing\n", model,
		       path);
		return;
	}
	static run r;
	const char *args[] = {model,      "--train", "--data", path,
			      "--epochs", "30",      NULL};
	run_attnc(&r, args, true);
	ck_assert_int_eq(r.n_epochs, 30);
	ck_assert_double_lt(r.loss[29], bound);
	ck_assert_double_lt(r.loss[29], 0.5 * r.loss[0]);
	ck_assert_ptr_nonnull(strstr(r.out, "data: vocabulary: 188 source, "
					    "202 target tokens"));
	ck_assert_int_eq(r.n_translations, 4);
	ck_assert_int_eq(r.n_sentences, 4);
	rt_nmt_data *d = load_data(path);
	for (int i = 0; i < 4; i++)
		check_sentence(d, r.pred[i], true);
	rt_nmt_free(d);
	ck_assert_str_eq(r.ref[1], "j'ai perdu .");
}

/* The losses were measured at seed 0 with 2 shards: 0.0968 (Transformer)
 * and 0.0961 (Bahdanau, also with --no-fuse); the bounds leave room for
 * other kernels' rounding. */
START_TEST(test_transformer_learns_the_real_corpus)
{
	check_real_corpus("models/transformer.g", 0.12);
}
END_TEST

START_TEST(test_bahdanau_learns_the_real_corpus)
{
	check_real_corpus("models/bahdanau.g", 0.12);
}
END_TEST

static Suite *nmt_suite(void)
{
	Suite *s = suite_create("models_train_nmt");
	TCase *tc = tcase_create("builtin");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc,
		       test_transformer_learns_the_builtin_corpus_and_translates);
	tcase_add_test(tc,
		       test_bahdanau_learns_the_builtin_corpus_and_translates);
	tcase_add_test(tc, test_training_translates_the_books_sentences);
	tcase_add_test(tc,
		       test_transformer_gradient_of_a_translation_batch_is_right);
	tcase_add_test(tc,
		       test_bahdanau_gradient_of_a_translation_batch_is_right);
	tcase_add_test(tc, test_shards_add_up_to_the_whole_batch);
	tcase_add_test(tc, test_sharded_training_does_not_depend_on_threads);
	suite_add_tcase(s, tc);
	TCase *real = tcase_create("real");
	tcase_set_timeout(real, 600);
	tcase_add_test(real, test_transformer_learns_the_real_corpus);
	tcase_add_test(real, test_bahdanau_learns_the_real_corpus);
	suite_add_tcase(s, real);
	return s;
}

int main(void)
{
	return tu_run_suite(nmt_suite());
}
