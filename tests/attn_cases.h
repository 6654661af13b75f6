/*
 * attn_cases.h - the random attention cases that test_passes_fuse.c (the
 * interpreter) and test_codegen_fuse.c (the JIT) both run: a model with
 * one attention over parameters q, k, v, its loss weighted by an input w,
 * compiled fused and unfused; and the error-ratio rule that judges the
 * fused float32 results against a float64 reference. A case with H > 0
 * is multi-head attention: q, k, v hold H heads side by side and are
 * split (split_heads), the valid lengths repeated for each head, the
 * result merged (merge_heads): fuse_heads then makes the fused nodes read
 * them in place.
 *
 * Header-only (static inline) so that each test program takes what it
 * uses.
 */
#ifndef ATTNC_TESTS_ATTN_CASES_H
#define ATTNC_TESTS_ATTN_CASES_H

#include "frontend.h"
#include "interp.h"
#include "ir.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* valid lengths: none (plain softmax), one per batch, one per query
 * (random), one per query t = t + 1 (a causal mask). */
typedef enum ac_valid { AC_NONE, AC_BATCH, AC_QUERY, AC_CAUSAL } ac_valid;

typedef struct ac_case {
	int N, Q, K, d, dv; /* N: the batch (times H for the attentions) */
	ac_valid valid;
	double p;         /* dropout of the weights (0: none) */
	bool is_training; /* dropout active */
	uint64_t seed;
	int H; /* heads split and merged (0: no split at all) */
} ac_case;

/* How a module is compiled: without fusion; fused after autodiff (the
 * pipeline recognizes the backward nodes); fused before autodiff (the
 * gradient rule of fused_attention); fused after autodiff without
 * fuse_heads (the split and merge stay copies, heads = 1). */
typedef enum ac_way {
	AC_UNFUSED,
	AC_FUSED,
	AC_FUSED_FIRST,
	AC_FUSED_SPLIT
} ac_way;

/* The width of w and of the loss's attention result. */
static inline int ac_width(const ac_case *c)
{
	return c->H > 0 ? c->H * c->dv : c->dv;
}

/* loss = sum((dropout(masked_softmax(q k^T / sqrt(d), valid)) v) * w),
 * with heads split and merged around the attention when H > 0. */
static inline void ac_source(const ac_case *c, char *buf, size_t size)
{
	char valid[64] = "", sm[320], qkv[3][48], vl[64] = "valid";
	int h = c->H > 0 ? c->H : 1;
	const char *names = "qkv";
	for (int i = 0; i < 3; i++)
		snprintf(qkv[i], sizeof qkv[i],
			 c->H > 0 ? "split_heads(%c, %d)" : "%c", names[i],
			 c->H);
	if (c->H > 0)
		snprintf(vl, sizeof vl, "repeat_interleave(valid, %d, 0)", c->H);
	if (c->valid == AC_BATCH)
		snprintf(valid, sizeof valid, "valid: i32[%d], ", c->N);
	else if (c->valid == AC_QUERY || c->valid == AC_CAUSAL)
		snprintf(valid, sizeof valid, "valid: i32[%d, %d], ", c->N,
			 c->Q);
	if (c->valid == AC_NONE)
		snprintf(sm, sizeof sm, "softmax(%s @ %s.T / sqrt(%d))", qkv[0],
			 qkv[1], c->d);
	else
		snprintf(sm, sizeof sm,
			 "masked_softmax(%s @ %s.T / sqrt(%d), %s)", qkv[0],
			 qkv[1], c->d, vl);
	char att[512];
	snprintf(att, sizeof att,
		 c->H > 0 ? "merge_heads(dropout(%s, %g) @ %s, %d)"
			  : "dropout(%s, %g) @ %s",
		 sm, c->p, qkv[2], c->H);
	snprintf(buf, size,
		 "model fz\n"
		 "export def loss(%sw: f32[%d, %d, %d])\n"
		 "  param q : [%d, %d, %d] = normal(0, 1)\n"
		 "  param k : [%d, %d, %d] = normal(0, 1)\n"
		 "  param v : [%d, %d, %d] = normal(0, 1)\n"
		 "  return sum(%s * w)\n",
		 valid, c->N, c->Q, ac_width(c), c->N, c->Q, h * c->d, c->N,
		 c->K, h * c->d, c->N, c->K, h * c->dv, att);
}

static inline uint32_t ac_count(const ir_module *m, const char *fn, ir_op op)
{
	const ir_func *f = ir_module_find_func(m, fn);
	uint32_t n = 0;
	for (uint32_t i = 0; f && i < f->g.n_nodes; i++)
		n += f->g.nodes[i].op == op;
	return n;
}

/* Every fused node of function fn has `heads` heads. */
static inline void ac_expect_heads(const ir_module *m, const char *fn,
				   uint32_t heads)
{
	const ir_func *f = ir_module_find_func(m, fn);
	for (uint32_t i = 0; i < f->g.n_nodes; i++) {
		const ir_node *n = &f->g.nodes[i];
		if (n->op == IR_OP_FUSED_ATTENTION ||
		    n->op == IR_OP_FUSED_ATTENTION_GRAD)
			ck_assert_uint_eq(n->attr.attention.heads, heads);
	}
}

/* The case's module with loss_grad, compiled the given way. A fused
 * multi-head case has its heads read in place (no permute left) unless
 * fuse_heads is off. */
static inline ir_module *ac_compile(ir_ctx *ctx, const ac_case *c, ac_way way)
{
	char src[1024];
	ac_source(c, src, sizeof src);
	uint32_t file = ir_ctx_add_source(ctx, "case.g", src, strlen(src));
	ir_module *m = fe_compile(ctx, file);
	ck_assert_msg(m != NULL, "the case does not compile:\n%s", src);
	static const char *no_heads[] = {"fuse_heads"};
	pass_options fuse = {.verify_each = true};
	pass_options plain = {.verify_each = true, .no_fuse = true};
	pass_options split = {.verify_each = true,
			      .disabled = no_heads,
			      .n_disabled = 1};
	const pass_options *po = way == AC_UNFUSED       ? &plain
				 : way == AC_FUSED_SPLIT ? &split
							 : &fuse;
	if (way == AC_FUSED_FIRST)
		ck_assert(pass_pipeline_run(m, &fuse));
	else
		ck_assert(pass_pipeline_forward(m, po));
	ck_assert(pass_autodiff(m, "loss"));
	ck_assert(pass_pipeline_run(m, po));
	uint32_t want = way == AC_UNFUSED ? 0 : 1;
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_FUSED_ATTENTION), want);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_FUSED_ATTENTION_GRAD),
			  want);
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_FUSED_ATTENTION), want);
	bool is_in_place = c->H > 1 &&
			   (way == AC_FUSED || way == AC_FUSED_FIRST);
	ac_expect_heads(m, "loss", is_in_place ? (uint32_t)c->H : 1);
	ac_expect_heads(m, "loss_grad", is_in_place ? (uint32_t)c->H : 1);
	if (is_in_place) {
		ck_assert_uint_eq(ac_count(m, "loss", IR_OP_PERMUTE), 0);
		ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_PERMUTE), 0);
	}
	return m;
}

/* SplitMix64: the cases' random numbers. */
static inline uint64_t ac_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A valid length: 0, past K, K, or in between, each sometimes. */
static inline int32_t ac_length(uint64_t *s, int K)
{
	uint64_t r = ac_next(s) % 8;
	return r == 0   ? 0
	       : r == 1 ? K + 2
	       : r == 2 ? K
			: (int32_t)(ac_next(s) % (uint64_t)(K + 1));
}

/* The inputs of loss/loss_grad: valid (if any), then w. */
static inline uint32_t ac_inputs(ir_ctx *ctx, const ac_case *c,
				 interp_tensor *in)
{
	uint64_t s = c->seed * 7919 + 1;
	uint32_t n = 0;
	if (c->valid != AC_NONE) {
		int64_t dims[2] = {c->N, c->Q};
		int rank = c->valid == AC_BATCH ? 1 : 2;
		ck_assert(interp_tensor_alloc(ctx, &in[n], IR_I32, rank, dims));
		int32_t *v = in[n].data;
		for (int64_t i = 0; i < interp_tensor_numel(&in[n]); i++)
			v[i] = c->valid == AC_CAUSAL ? (int32_t)(i % c->Q) + 1
						     : ac_length(&s, c->K);
		n++;
	}
	int64_t wd[3] = {c->N, c->Q, ac_width(c)};
	ck_assert(interp_tensor_alloc(ctx, &in[n], IR_F32, 3, wd));
	float *w = in[n].data;
	for (int64_t i = 0; i < interp_tensor_numel(&in[n]); i++)
		w[i] = (float)((double)(ac_next(&s) >> 11) /
				       9007199254740992.0 * 2 -
			       1);
	return n + 1;
}

/* Largest |x - ref| and |ref| over two tensors of any float dtype. */
static inline void ac_errors(const interp_tensor *x, const interp_tensor *ref,
			     double *err, double *mag)
{
	int64_t n = interp_tensor_numel(ref);
	ck_assert_int_eq(interp_tensor_numel(x), n);
	*err = *mag = 0;
	for (int64_t i = 0; i < n; i++) {
		double r = interp_tensor_get(ref, i),
		       d = fabs(interp_tensor_get(x, i) - r);
		if (!(d <= *err))
			*err = d;
		if (fabs(r) > *mag)
			*mag = fabs(r);
	}
}

/* The error-ratio rule: the fused float32 result is no further from the
 * float64 reference than twice the unfused float32 result, plus a floor
 * of a few float32 roundings of the largest value. */
static inline void ac_check_ratio(const interp_tensor *fused,
				  const interp_tensor *unfused,
				  const interp_tensor *ref, const char *what)
{
	double ef, eu, mag;
	ac_errors(unfused, ref, &eu, &mag);
	ac_errors(fused, ref, &ef, &mag);
	double bound = 2 * eu + 1e-6 * mag + 1e-7;
	ck_assert_msg(ef <= bound,
		      "%s: fused error %.3g > 2 x unfused error "
		      "%.3g + floor (largest %.3g)",
		      what, ef, eu, mag);
}

/* ---- compiling and explaining ----------------------------------------------- */

/* The module of the .g file at rel (from the source tree). */
static inline ir_module *ac_load_model(tu_graph *x, const char *rel)
{
	uint32_t file = ir_ctx_load_source(&x->ctx, tu_path(rel));
	ck_assert_uint_ne(file, 0);
	ir_module *m = fe_compile(&x->ctx, file);
	ck_assert_msg(m != NULL, "%s: %s", rel, tu_graph_diag(x));
	return m;
}

/* The module of .g source text src. */
static inline ir_module *ac_load_text(tu_graph *x, const char *src)
{
	uint32_t file = ir_ctx_add_source(&x->ctx, "t.g", src, strlen(src));
	ir_module *m = fe_compile(&x->ctx, file);
	ck_assert_msg(m != NULL, "%s", tu_graph_diag(x));
	return m;
}

/* The pipeline with options o (NULL: the defaults), verifying after
 * every pass. */
static inline void ac_run_pipeline(ir_module *m, const pass_options *o)
{
	pass_options po = o ? *o : (pass_options){0};
	po.verify_each = true;
	ck_assert(pass_pipeline_run(m, &po));
}

/* What the driver does before the pipeline when it trains: the forward
 * passes with options o (NULL: the defaults), then loss_grad by
 * autodiff. */
static inline void ac_differentiate(ir_module *m, const pass_options *o)
{
	pass_options po = o ? *o : (pass_options){0};
	po.verify_each = true;
	ck_assert(pass_pipeline_forward(m, &po));
	ck_assert(pass_autodiff(m, "loss"));
}

/* pass_explain_fusion's text for m (the caller frees it). */
static inline char *ac_explain(const ir_module *m)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	pass_explain_fusion(m, out);
	fclose(out);
	return text;
}

#endif
