/*
 * additive_cases.h - the random additive attention cases that
 * test_passes_fuse_additive.c (the interpreter) and
 * test_codegen_fuse_additive.c (the JIT) both run: a model with one
 * additive attention over parameters qp, kp, wv, v, as models/bahdanau.g
 * writes it, its loss weighted by an input w, compiled fused and
 * unfused. The random numbers and the error-ratio rule are
 * attn_cases.h's.
 *
 * Header-only (static inline) so that each test program takes what it
 * uses.
 */
#ifndef ATTNC_TESTS_ADDITIVE_CASES_H
#define ATTNC_TESTS_ADDITIVE_CASES_H

#include "attn_cases.h"

typedef struct add_case {
	int N, Q, K, H, dv;
	ac_valid valid;
	double p;         /* dropout of the weights (0: none) */
	bool is_training; /* dropout active */
	uint64_t seed;
} add_case;

/* The dot-product case of the same sizes, whose inputs (valid lengths
 * and w) ac_inputs makes. */
static inline ac_case add_as_ac(const add_case *c)
{
	ac_case a = {c->N,     c->Q, c->K,           c->H,    c->dv,
		     c->valid, c->p, c->is_training, c->seed, 0};
	return a;
}

/* loss = sum((dropout(masked_softmax(squeeze(tanh(unsqueeze(qp, 2) +
 * unsqueeze(kp, 1)) @ wv, -1), valid)) v) * w). */
static inline void add_source(const add_case *c, char *buf, size_t size)
{
	char valid[64] = "", sm[64] = "softmax(s)";
	if (c->valid == AC_BATCH)
		snprintf(valid, sizeof valid, "valid: i32[%d], ", c->N);
	else if (c->valid == AC_QUERY)
		snprintf(valid, sizeof valid, "valid: i32[%d, %d], ", c->N,
			 c->Q);
	if (c->valid != AC_NONE)
		snprintf(sm, sizeof sm, "masked_softmax(s, valid)");
	snprintf(buf, size,
		 "model fa\n"
		 "export def loss(%sw: f32[%d, %d, %d])\n"
		 "  param qp : [%d, %d, %d] = normal(0, 1)\n"
		 "  param kp : [%d, %d, %d] = normal(0, 1)\n"
		 "  param wv : [%d, 1] = normal(0, 1)\n"
		 "  param v : [%d, %d, %d] = normal(0, 1)\n"
		 "  f = tanh(unsqueeze(qp, 2) + unsqueeze(kp, 1))\n"
		 "  s = squeeze(f @ wv, -1)\n"
		 "  return sum(dropout(%s, %g) @ v * w)\n",
		 valid, c->N, c->Q, c->dv, c->N, c->Q, c->H, c->N, c->K, c->H,
		 c->H, c->N, c->K, c->dv, sm, c->p);
}

/* How many fused additive attentions (and gradients) a way gives. */
static inline void add_expect(const ir_module *m, ac_way way)
{
	uint32_t want = way == AC_UNFUSED ? 0 : 1;
	ck_assert_uint_eq(ac_count(m, "loss_grad",
				   IR_OP_FUSED_ADDITIVE_ATTENTION),
			  want);
	ck_assert_uint_eq(ac_count(m, "loss_grad",
				   IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD),
			  want);
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_FUSED_ADDITIVE_ATTENTION),
			  want);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_TANH),
			  way == AC_UNFUSED);
}

/* The case's module with loss_grad, compiled the given way. */
static inline ir_module *add_compile(ir_ctx *ctx, const add_case *c, ac_way way)
{
	char src[1024];
	add_source(c, src, sizeof src);
	uint32_t file = ir_ctx_add_source(ctx, "case.g", src, strlen(src));
	ir_module *m = fe_compile(ctx, file);
	ck_assert_msg(m != NULL, "the case does not compile:\n%s", src);
	pass_options fuse = {.verify_each = true};
	pass_options plain = {.verify_each = true, .no_fuse = true};
	const pass_options *po = way == AC_UNFUSED ? &plain : &fuse;
	if (way == AC_FUSED_FIRST)
		ck_assert(pass_pipeline_run(m, &fuse));
	else
		ck_assert(pass_pipeline_forward(m, po));
	ck_assert(pass_autodiff(m, "loss"));
	ck_assert(pass_pipeline_run(m, po));
	add_expect(m, way);
	return m;
}

#endif
