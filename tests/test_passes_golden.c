/*
 * test_passes_golden.c - golden tests of single passes, and the pipeline.
 *
 * For every tests/golden/NAME.PASS.out there is an input NAME.ir: the test
 * reads it (ir_module_read), runs pass PASS alone, verifies the result,
 * prints it (ir_module_print) and compares the text with NAME.PASS.out
 * byte for byte. With ATTNC_UPDATE_GOLDEN=1 in the environment the
 * expected files are rewritten instead; to add a golden, write NAME.ir,
 * create an empty NAME.PASS.out and run the test in that mode, then read
 * the result before committing it.
 *
 * The pipeline tests check the order of the table, disabling by name,
 * dumping after a pass or all of them, and the final verification.
 */
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* Reads tests/golden/<name>; NULL after a message. */
static ir_module *read_golden(tu_graph *x, const char *name)
{
	char rel[512];
	snprintf(rel, sizeof rel, "tests/golden/%s", name);
	uint32_t src = ir_ctx_load_source(&x->ctx, tu_path(rel));
	return src ? ir_module_read(&x->ctx, src) : NULL;
}

/* The module as printed, in a malloc'd string. */
static char *print_module(const ir_module *m)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	ir_module_print(m, out);
	fclose(out);
	return buf;
}

/* The whole file, malloc'd, or NULL if it cannot be read. */
static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	int c;
	while ((c = fgetc(f)) != EOF)
		fputc(c, out);
	fclose(out);
	fclose(f);
	return buf;
}

static bool write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "wb");
	if (!f)
		return false;
	fputs(text, f);
	return fclose(f) == 0;
}

/* Splits "NAME.PASS.out" into NAME and PASS; false if it is not one. */
static bool split_golden_name(const char *file, char *name, char *pass,
			      size_t size)
{
	size_t n = strlen(file);
	if (n < 5 || strcmp(file + n - 4, ".out") != 0)
		return false;
	const char *dot = NULL;
	for (const char *p = file; p < file + n - 4; p++)
		if (*p == '.')
			dot = p;
	if (!dot || dot == file || (size_t)(dot - file) >= size ||
	    (size_t)(file + n - 4 - dot) > size)
		return false;
	snprintf(name, size, "%.*s", (int)(dot - file), file);
	snprintf(pass, size, "%.*s", (int)(file + n - 5 - dot), dot + 1);
	return true;
}

/* Runs one golden; returns an empty string if it passes, else why not
 * (malloc'd either way). */
static char *run_golden(const char *name, const char *pass_name,
			const char *out_file)
{
	char *why = NULL, in_file[300];
	size_t len = 0;
	FILE *w = open_memstream(&why, &len);
	tu_graph x;
	tu_graph_init_ctx(&x);
	snprintf(in_file, sizeof in_file, "%s.ir", name);
	const pass_info *p = pass_find(pass_name);
	ir_module *m = p ? read_golden(&x, in_file) : NULL;
	if (!p)
		fprintf(w, "%s: no pass named '%s'\n", out_file, pass_name);
	else if (!m)
		fprintf(w, "%s: does not read:\n%s", in_file, tu_graph_diag(&x));
	else if (!p->run)
		fprintf(w, "%s: pass %s runs at lowering, not on IR\n",
			out_file, pass_name);
	else if (!p->run(m) || !ir_module_verify(m))
		fprintf(w, "%s: pass %s failed:\n%s", in_file, pass_name,
			tu_graph_diag(&x));
	if (m && !len) {
		char rel[512], *got = print_module(m);
		snprintf(rel, sizeof rel, "tests/golden/%s", out_file);
		char *want = slurp(tu_path(rel));
		const char *upd = getenv("ATTNC_UPDATE_GOLDEN");
		if (upd && strcmp(upd, "1") == 0) {
			if (!write_file(tu_path(rel), got))
				fprintf(w, "%s: cannot write\n", out_file);
		} else if (!want || strcmp(want, got) != 0) {
			fprintf(w, "%s differs; got:\n%s", out_file, got);
		}
		free(got);
		free(want);
	}
	ir_module_destroy(m);
	tu_graph_fini(&x);
	fclose(w);
	return why;
}

START_TEST(test_every_golden_pass_output_matches)
{
	DIR *d = opendir(tu_path("tests/golden"));
	ck_assert_ptr_nonnull(d);
	bool has_golden[64] = {0};
	int n_run = 0, n_failed = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char name[256], pass[256];
		if (!split_golden_name(e->d_name, name, pass, sizeof name))
			continue;
		char *why = run_golden(name, pass, e->d_name);
		n_run++;
		if (why[0]) {
			fprintf(stderr, "%s", why);
			n_failed++;
		}
		free(why);
		const pass_info *p = pass_find(pass);
		if (p)
			has_golden[p - pass_table] = true;
	}
	closedir(d);
	ck_assert_int_gt(n_run, 0);
	ck_assert_msg(n_failed == 0, "%d of %d goldens differ (see above)",
		      n_failed, n_run);
	/* A pass that runs at lowering leaves the IR as it is: its output
	 * is code (fuse_elementwise: test_codegen_fuse_ew.c). */
	for (uint32_t i = 0; i < pass_count; i++)
		ck_assert_msg(has_golden[i] || !pass_table[i].run,
			      "pass %s has no golden test", pass_table[i].name);
}
END_TEST

START_TEST(test_golden_names_split_into_input_and_pass)
{
	char name[64], pass[64];
	ck_assert(split_golden_name("unit_mul.simplify.out", name, pass, 64));
	ck_assert_str_eq(name, "unit_mul");
	ck_assert_str_eq(pass, "simplify");
	ck_assert(!split_golden_name("unit_mul.ir", name, pass, 64));
	ck_assert(!split_golden_name("simplify.out", name, pass, 64));
}
END_TEST

/* ---- the pipeline ------------------------------------------------------------- */

START_TEST(test_pipeline_lists_the_passes_in_order)
{
	static const char *const want[] =
		{"infer",     "fold",           "simplify",
		 "cse",       "fuse_attention", "fuse_heads",
		 "fuse_loss", "fuse_gelu",      "factor",
		 "dce",       "remat",          "fuse_elementwise"};
	ck_assert_uint_eq(pass_count, sizeof want / sizeof want[0]);
	for (uint32_t i = 0; i < pass_count; i++) {
		ck_assert_str_eq(pass_table[i].name, want[i]);
		ck_assert_ptr_eq(pass_find(want[i]), &pass_table[i]);
		ck_assert(pass_table[i].summary && pass_table[i].summary[0]);
	}
	ck_assert_ptr_null(pass_find("fuse_everything"));
	ck_assert_ptr_null(pass_find(""));
}
END_TEST

/* Runs the pipeline on tests/golden/<file> with opts, collecting the dump;
 * returns the dump text (malloc'd) and the module in *out_m. */
static char *run_pipeline(tu_graph *x, const char *file, pass_options *opts,
			  ir_module **out_m, bool *ok)
{
	char *buf = NULL;
	size_t len = 0;
	opts->dump_out = open_memstream(&buf, &len);
	*out_m = read_golden(x, file);
	ck_assert_msg(*out_m != NULL, "%s", tu_graph_diag(x));
	*ok = pass_pipeline_run(*out_m, opts);
	fclose(opts->dump_out);
	return buf;
}

static int count_substr(const char *s, const char *sub)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, sub)); p += strlen(sub))
		n++;
	return n;
}

START_TEST(test_pipeline_dumps_after_every_pass_under_a_header)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	pass_options opts = {.dump = "all", .verify_each = true};
	ir_module *m;
	bool ok;
	char *dump = run_pipeline(&x, "pipeline.ir", &opts, &m, &ok);
	ck_assert_msg(ok, "%s", tu_graph_diag(&x));
	ck_assert_int_eq(count_substr(dump, "# ---- after "), 12);
	const char *at = dump;
	for (uint32_t i = 0; i < pass_count; i++) {
		char header[64];
		snprintf(header, sizeof header, "# ---- after %s ----\n",
			 pass_table[i].name);
		const char *h = strstr(at, header);
		ck_assert_msg(h != NULL, "no '%s' in order", header);
		at = h + 1;
	}
	ck_assert(strncmp(dump, "# ---- after infer ----\n", 24) == 0);
	/* The last dump is the module as the pipeline leaves it: as dce
	 * left it, since fuse_elementwise runs at lowering. */
	char *final = print_module(m);
	ck_assert_str_eq(strstr(dump, "# ---- after fuse_elementwise ----\n") +
				 35,
			 final);
	ck_assert_int_ge(count_substr(dump, final), 2);
	free(final);
	free(dump);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_pipeline_dumps_only_the_named_pass)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	pass_options opts = {.dump = "simplify"};
	ir_module *m;
	bool ok;
	char *dump = run_pipeline(&x, "pipeline.ir", &opts, &m, &ok);
	ck_assert(ok);
	ck_assert_int_eq(count_substr(dump, "# ---- after "), 1);
	ck_assert(strncmp(dump, "# ---- after simplify ----\n", 27) == 0);
	/* The dump, banner and all, is IR text that reads back (the banner
	 * is an IR comment) to the module it shows. */
	uint32_t file = ir_ctx_add_source(&x.ctx, "dump.ir", dump, strlen(dump));
	ir_module *back = ir_module_read(&x.ctx, file);
	ck_assert_msg(back != NULL, "%s", tu_graph_diag(&x));
	char *again = print_module(back);
	ck_assert_str_eq(again, dump + 27);
	free(again);
	ir_module_destroy(back);
	free(dump);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

static uint32_t count_op(const ir_module *m, ir_op op)
{
	uint32_t n = 0;
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		for (uint32_t i = 0; i < m->funcs[fi]->g.n_nodes; i++)
			n += m->funcs[fi]->g.nodes[i].op == op;
	return n;
}

/* pipeline.ir has two identical tanh nodes: cse merges them unless
 * disabled, and a disabled pass is not dumped either. */
START_TEST(test_pipeline_skips_disabled_passes)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	const char *off[] = {"cse"};
	pass_options opts = {.disabled = off, .n_disabled = 1, .dump = "cse"};
	ir_module *m;
	bool ok;
	char *dump = run_pipeline(&x, "pipeline.ir", &opts, &m, &ok);
	ck_assert(ok);
	ck_assert_str_eq(dump, "");
	ck_assert_uint_eq(count_op(m, IR_OP_TANH), 2);
	free(dump);
	ir_module_destroy(m);

	pass_options on = {0};
	dump = run_pipeline(&x, "pipeline.ir", &on, &m, &ok);
	ck_assert(ok);
	ck_assert_uint_eq(count_op(m, IR_OP_TANH), 1);
	free(dump);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

/* With infer disabled a wrong stored type reaches the end, where the
 * verifier always runs. */
START_TEST(test_pipeline_verifies_at_the_end)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	const char *off[] = {"infer", "fold", "simplify", "cse", "dce"};
	pass_options opts = {.disabled = off, .n_disabled = 5};
	ir_module *m = read_golden(&x, "pipeline.ir");
	ck_assert_ptr_nonnull(m);
	ir_func *f = m->funcs[0];
	f->g.nodes[f->outputs[0]].type.dims[0].coef += 1;
	ck_assert(!pass_pipeline_run(m, &opts));
	ck_assert_ptr_nonnull(strstr(tu_graph_diag(&x), "verifier:"));
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

START_TEST(test_pipeline_stops_at_a_failing_pass)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	pass_options opts = {.dump = "all"};
	ir_module *m = read_golden(&x, "pipeline.ir");
	ck_assert_ptr_nonnull(m);
	ir_func *f = m->funcs[0];
	f->g.nodes[f->outputs[0]].type.dims[0].coef += 1;
	char *buf = NULL;
	size_t len = 0;
	opts.dump_out = open_memstream(&buf, &len);
	ck_assert(!pass_pipeline_run(m, &opts));
	fclose(opts.dump_out);
	ck_assert_str_eq(buf, ""); /* infer failed: nothing after it ran */
	ck_assert_ptr_nonnull(strstr(tu_graph_diag(&x), "its operands give"));
	free(buf);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}
END_TEST

static Suite *golden_suite(void)
{
	Suite *s = suite_create("passes_golden");
	TCase *g = tcase_create("golden");
	tcase_set_timeout(g, 60);
	tcase_add_test(g, test_golden_names_split_into_input_and_pass);
	tcase_add_test(g, test_every_golden_pass_output_matches);
	suite_add_tcase(s, g);
	TCase *p = tcase_create("pipeline");
	tcase_add_test(p, test_pipeline_lists_the_passes_in_order);
	tcase_add_test(p, test_pipeline_dumps_after_every_pass_under_a_header);
	tcase_add_test(p, test_pipeline_dumps_only_the_named_pass);
	tcase_add_test(p, test_pipeline_skips_disabled_passes);
	tcase_add_test(p, test_pipeline_verifies_at_the_end);
	tcase_add_test(p, test_pipeline_stops_at_a_failing_pass);
	suite_add_tcase(s, p);
	return s;
}

int main(void)
{
	return tu_run_suite(golden_suite());
}
