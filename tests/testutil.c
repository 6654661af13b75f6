/*
 * testutil.c - helpers shared by the test programs.
 */
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Check's per-case timeouts are wall-clock limits, which a loaded
 * machine breaks (the gemm sweep passed its 120 s under ASan only on an
 * idle one): before main, and so before any tcase_create or
 * tcase_set_timeout, a multiplier of 0 turns every one of them off.
 * ctest's TIMEOUT (tests/CMakeLists.txt) is the guard against a hang. */
__attribute__((constructor)) static void tu_no_check_timeouts(void)
{
	setenv("CK_TIMEOUT_MULTIPLIER", "0", 1);
}

const char *tu_path(const char *rel)
{
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s/%s", ATTNC_SOURCE_DIR, rel);
	return buf;
}

double tu_max_rel_err(const float *a, const float *b, size_t n, double atol,
		      double rtol)
{
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - (double)b[i]) /
			   (atol + rtol * fabs((double)b[i]));
		if (isnan(e))
			return INFINITY;
		if (e > worst)
			worst = e;
	}
	return worst;
}

void tu_graph_init_ctx(tu_graph *g)
{
	memset(g, 0, sizeof *g);
	ir_ctx_init(&g->ctx);
	g->ctx.diag_out = open_memstream(&g->diag, &g->diag_len);
}

void tu_graph_init(tu_graph *g, uint32_t max_io)
{
	tu_graph_init_ctx(g);
	g->m = ir_module_create(&g->ctx, "t");
	g->f = ir_module_add_func(g->m, "f", (ir_loc){0});
	g->f->is_export = true;
	g->f->inputs = ir_arena_alloc(&g->m->arena, max_io * sizeof(ir_id));
	g->f->input_names = ir_arena_alloc(&g->m->arena,
					   max_io * sizeof(char *));
	g->f->outputs = ir_arena_alloc(&g->m->arena, max_io * sizeof(ir_id));
	g->f->output_names = ir_arena_alloc(&g->m->arena,
					    max_io * sizeof(char *));
}

void tu_graph_fini(tu_graph *g)
{
	if (g->m)
		ir_module_destroy(g->m);
	fclose(g->ctx.diag_out);
	free(g->diag);
	ir_ctx_fini(&g->ctx);
}

const char *tu_graph_diag(tu_graph *g)
{
	fflush(g->ctx.diag_out);
	return g->diag ? g->diag : "";
}

ir_type tu_type(ir_dtype dt, int rank, ...)
{
	ir_type t = {.dtype = dt, .rank = (uint8_t)rank};
	va_list ap;
	va_start(ap, rank);
	for (int i = 0; i < rank; i++)
		t.dims[i] = ir_dim_static(va_arg(ap, int));
	va_end(ap);
	return t;
}

ir_id tu_build(tu_graph *g, ir_op op, const ir_id *args, uint32_t n,
	       const ir_attr *attr, const ir_type *t)
{
	ir_id id = ir_build(g->m, g->f, op, args, n, attr, t, (ir_loc){0});
	ck_assert_msg(id != IR_NONE, "building %s: %s", ir_op_table[op].name,
		      tu_graph_diag(g));
	return id;
}

ir_id tu_input(tu_graph *g, ir_type t)
{
	ir_attr a = {.input_index = g->f->n_inputs};
	ir_id id = tu_build(g, IR_OP_INPUT, NULL, 0, &a, &t);
	g->f->input_names[g->f->n_inputs] = "in";
	g->f->inputs[g->f->n_inputs++] = id;
	return id;
}

ir_id tu_const(tu_graph *g, ir_type t, const void *data)
{
	int32_t c = ir_module_add_const(g->m, &t, data);
	ir_attr a = {.const_index = (uint32_t)c};
	return tu_build(g, IR_OP_CONST, NULL, 0, &a, &t);
}

const char *tu_real_corpus(void)
{
	const char *path = tu_path(TU_REAL_CORPUS);
	return access(path, R_OK) == 0 ? path : NULL;
}

int tu_run_suite(Suite *s)
{
	const char *only = getenv("CK_RUN_CASE");
	SRunner *r = srunner_create(s);
	if (only && strcmp(only, "real") == 0 && !tu_real_corpus()) {
		printf("skipped: %s is missing\n", tu_path(TU_REAL_CORPUS));
		srunner_free(r);
		return TU_SKIPPED;
	}
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

void *tu_failing_alloc(void *ud, void *ptr, size_t size)
{
	tu_alloc_hook *h = ud;
	if (size == 0) {
		h->live -= ptr != NULL;
		free(ptr);
		return NULL;
	}
	if (h->n_allocs++ == h->fail_at)
		return NULL;
	void *p = realloc(ptr, size);
	h->live += ptr == NULL && p != NULL;
	return p;
}
