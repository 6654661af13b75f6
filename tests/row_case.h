/*
 * row_case.h - a function of a small model or a book model, its inputs,
 * parameters and the interpreter's run node by node, shared by the
 * tests of the analyses of padding rows: test_passes_rowlive.c (row
 * liveness), test_passes_rowbound.c (value bounds) and
 * test_codegen_rowskip.c (the products that leave the rows out).
 *
 * Header-only (static inline), like attn_jit.h.
 */
#ifndef ATTNC_TESTS_ROW_CASE_H
#define ATTNC_TESTS_ROW_CASE_H

#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define ROW_CASE_MAX_IN 8

typedef struct row_case {
	tu_graph x;
	const ir_func *f;
	interp_tensor in[ROW_CASE_MAX_IN];
	int64_t *syms;
	interp_tensor *params;
	interp_tensor *ref; /* per node: its value in the plain run */
} row_case;

/* Compiles source text (fused as the pipeline does, or not); c->f is
 * its function fname. */
static inline void row_case_load(row_case *c, const char *src,
				 const char *fname, bool is_fused)
{
	memset(c, 0, sizeof *c);
	tu_graph_init_ctx(&c->x);
	uint32_t file = ir_ctx_add_source(&c->x.ctx, "t.g", src, strlen(src));
	c->x.m = fe_compile(&c->x.ctx, file);
	ck_assert_msg(c->x.m != NULL, "%s", tu_graph_diag(&c->x));
	pass_options po = {.verify_each = true, .no_fuse = !is_fused};
	ck_assert_msg(pass_pipeline_run(c->x.m, &po), "%s",
		      tu_graph_diag(&c->x));
	c->f = ir_module_find_func(c->x.m, fname);
	ck_assert(c->f != NULL);
}

/* Source text src (n bytes, named name) compiled as --train compiles
 * it: c->f is fname's gradient function (fname_grad), fused. */
static inline void row_case_load_grad(row_case *c, const char *name,
				      const char *src, size_t n,
				      const char *fname)
{
	memset(c, 0, sizeof *c);
	tu_graph_init_ctx(&c->x);
	uint32_t file = ir_ctx_add_source(&c->x.ctx, name, src, n);
	c->x.m = fe_compile(&c->x.ctx, file);
	ck_assert_msg(c->x.m != NULL, "%s", tu_graph_diag(&c->x));
	pass_options po = {.verify_each = true};
	ck_assert(pass_pipeline_forward(c->x.m, &po));
	ck_assert(pass_autodiff(c->x.m, fname));
	ck_assert_msg(pass_pipeline_run(c->x.m, &po), "%s",
		      tu_graph_diag(&c->x));
	char gname[64];
	snprintf(gname, sizeof gname, "%s_grad", fname);
	c->f = ir_module_find_func(c->x.m, gname);
	ck_assert(c->f != NULL);
}

/* The model file rel (from the source tree), fused; with is_grad c->f is
 * fname's gradient function as --train compiles it (fname_grad). */
static inline void row_case_load_file(row_case *c, const char *rel,
				      const char *fname, bool is_grad)
{
	FILE *fp = fopen(tu_path(rel), "r");
	ck_assert(fp != NULL);
	static char buf[1 << 16];
	size_t n = fread(buf, 1, sizeof buf - 1, fp);
	fclose(fp);
	buf[n] = 0;
	if (is_grad)
		row_case_load_grad(c, rel, buf, n, fname);
	else
		row_case_load(c, buf, fname, true);
}

/* Frees the inputs, the parameters and the plain run, so that another
 * set can be made for the same function. */
static inline void row_case_free_run(row_case *c)
{
	ir_ctx *ctx = &c->x.ctx;
	for (uint32_t i = 0; i < ROW_CASE_MAX_IN; i++)
		interp_tensor_fini(ctx, &c->in[i]);
	memset(c->in, 0, sizeof c->in);
	if (c->params) {
		for (uint32_t i = 0; i < c->x.m->n_params; i++)
			interp_tensor_fini(ctx, &c->params[i]);
		memset(c->params, 0, c->x.m->n_params * sizeof *c->params);
	}
	if (c->ref) {
		for (uint32_t i = 0; i < c->f->g.n_nodes; i++)
			interp_tensor_fini(ctx, &c->ref[i]);
		memset(c->ref, 0, c->f->g.n_nodes * sizeof *c->ref);
	}
}

static inline void row_case_fini(row_case *c)
{
	row_case_free_run(c);
	ir_ctx *ctx = &c->x.ctx;
	ir_free(ctx, c->params);
	ir_free(ctx, c->ref);
	ir_free(ctx, c->syms);
	tu_graph_fini(&c->x);
}

/* Input i: dims and values, i32 from vals or, for an f32 input, made
 * up: sin(7e + 3i + 1) times scale. */
static inline void row_case_input(row_case *c, uint32_t i, int rank,
				  const int64_t *dims, const int32_t *vals,
				  double scale)
{
	ck_assert_uint_lt(i, ROW_CASE_MAX_IN);
	const ir_type *t = &c->f->g.nodes[c->f->inputs[i]].type;
	ck_assert(interp_tensor_alloc(&c->x.ctx, &c->in[i], t->dtype, rank,
				      dims));
	int64_t n = interp_tensor_numel(&c->in[i]);
	for (int64_t e = 0; e < n; e++)
		if (t->dtype == IR_I32)
			((int32_t *)c->in[i].data)[e] = vals[e];
		else
			((float *)c->in[i].data)[e] =
				(float)(scale * sin((double)(e * 7 + i * 3 + 1)));
}

/* The book models' loss inputs (src, src_valid, tgt_in, tgt, tgt_valid,
 * the same for the Transformer and Bahdanau) for three padded pairs of
 * 10 steps, the third with src_valid 0. */
static inline void row_case_book_inputs(row_case *c)
{
	static const int32_t src[30] = {9,  4,  3, 1, 1, 1, 1, 1, 1, 1,
					12, 20, 4, 3, 1, 1, 1, 1, 1, 1,
					5,  6,  7, 8, 9, 3, 1, 1, 1, 1};
	static const int32_t tin[30] = {2, 15, 5,  3, 1, 1, 1, 1, 1, 1,
					2, 30, 41, 7, 5, 3, 1, 1, 1, 1,
					2, 8,  3,  1, 1, 1, 1, 1, 1, 1};
	static const int32_t tgt[30] = {15, 5,  3, 1, 1, 1, 1, 1, 1, 1,
					30, 41, 7, 5, 3, 1, 1, 1, 1, 1,
					8,  3,  1, 1, 1, 1, 1, 1, 1, 1};
	static const int32_t sv[3] = {3, 4, 0}, tv[3] = {3, 5, 2};
	int64_t d2[2] = {3, 10}, d1[1] = {3};
	row_case_input(c, 0, 2, d2, src, 1);
	row_case_input(c, 1, 1, d1, sv, 1);
	row_case_input(c, 2, 2, d2, tin, 1);
	row_case_input(c, 3, 2, d2, tgt, 1);
	row_case_input(c, 4, 1, d1, tv, 1);
}

/* Binds the symbols from the inputs and draws the parameters from seed
 * (c->ref allocated, empty); the arrays are kept across
 * row_case_free_run. */
static inline void row_case_params(row_case *c, uint64_t seed)
{
	ir_ctx *ctx = &c->x.ctx;
	if (!c->syms) {
		c->syms = ir_alloc(ctx, (c->x.m->n_syms + 1) * sizeof *c->syms);
		c->params = ir_alloc(ctx, (c->x.m->n_params + 1) *
						  sizeof *c->params);
		c->ref = ir_alloc(ctx, c->f->g.n_nodes * sizeof *c->ref);
		ck_assert(c->syms && c->params && c->ref);
		memset(c->params, 0, (c->x.m->n_params + 1) * sizeof *c->params);
		memset(c->ref, 0, c->f->g.n_nodes * sizeof *c->ref);
	}
	ck_assert_msg(interp_bind_syms(ctx, c->x.m, c->f, c->in, c->syms), "%s",
		      tu_graph_diag(&c->x));
	ck_assert(interp_params_init(ctx, c->x.m, c->syms, seed, false,
				     c->params));
}

/* Computes node i of c->f into vals[i] from the values of its operands
 * in vals, as the interpreter does in training mode (dropout on, seed
 * 3, step 1): an input's or parameter's value copied from c's, a
 * constant's from the module. */
static inline void row_case_eval_node(row_case *c, interp_tensor *vals, ir_id i)
{
	ir_ctx *ctx = &c->x.ctx;
	const ir_module *m = c->x.m;
	const ir_graph *g = &c->f->g;
	const ir_node *nd = &g->nodes[i];
	interp_opts o = {.is_training = true, .seed = 3, .step = 1};
	if (nd->op == IR_OP_INPUT) {
		ck_assert(interp_tensor_copy(ctx, &vals[i],
					     &c->in[nd->attr.input_index]));
	} else if (nd->op == IR_OP_PARAM) {
		ck_assert(interp_tensor_copy(ctx, &vals[i],
					     &c->params[nd->attr.param_index]));
	} else if (nd->op == IR_OP_CONST) {
		const ir_const *k = &m->consts[nd->attr.const_index];
		interp_tensor src = {k->type.dtype, k->type.rank, {0}, k->data};
		for (int d = 0; d < k->type.rank; d++)
			src.dims[d] = k->type.dims[d].coef;
		ck_assert(interp_tensor_copy(ctx, &vals[i], &src));
	} else {
		interp_tensor args[16];
		ck_assert(nd->n_args <= 16);
		for (uint32_t a = 0; a < nd->n_args; a++)
			args[a] = vals[ir_arg(g, i, a)];
		ck_assert_msg(interp_eval_node(ctx, m, g, i, &o, c->syms, args,
					       &vals[i]),
			      "%s", tu_graph_diag(&c->x));
	}
}

/* The parameter whose name holds part and whose rank is 2: the
 * decoder's embedding table ("decoder.embed"), whose row 1 is <pad>'s. */
static inline interp_tensor *row_case_param(row_case *c, const char *part)
{
	for (uint32_t p = 0; p < c->x.m->n_params; p++)
		if (strstr(c->x.m->params[p].name, part) &&
		    c->params[p].rank == 2)
			return &c->params[p];
	ck_abort_msg("no rank-2 parameter named *%s*", part);
	return NULL;
}

#endif
