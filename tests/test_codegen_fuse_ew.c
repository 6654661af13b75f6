/*
 * test_codegen_fuse_ew.c - elementwise fusion in the generated code
 * (passes/fuse_ew.c, codegen/cg_fuse.c): random chains of elementwise ops
 * with broadcasting (bias rows, per-row scalars, scalars), permutes,
 * compares, selects, casts and dropout, alone and fused into every
 * consumer that can host them (layer_norm, softmax, log_softmax,
 * masked_softmax, sum, mean, max, cross_entropy, cross_entropy_grad,
 * dropout, permute). Each
 * graph runs through the JIT fused and unfused and through the
 * interpreter in float64: the fused float32 error is at most twice the
 * unfused one (plus a floor of 1e-6 of the largest value); pure
 * elementwise results are bit-identical to the unfused ones; dropout
 * masks equal the interpreter's; 1 and 2 threads give the same bits.
 */
#include "cg_program.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAXO 8

typedef struct fx {
	tu_graph g;
	uint64_t rng;
} fx;

static void fx_init(fx *x, uint64_t seed)
{
	tu_graph_init(&x->g, MAXO + 8);
	x->rng = seed * 0x9e3779b97f4a7c15ull + 1;
}

static uint32_t rnd(fx *x, uint32_t n)
{
	x->rng = x->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)((x->rng >> 33) % n);
}

static ir_id op1(fx *x, ir_op op, ir_id a, const ir_attr *attr)
{
	return tu_build(&x->g, op, &a, 1, attr, NULL);
}

static ir_id op2(fx *x, ir_op op, ir_id a, ir_id b)
{
	ir_id args[2] = {a, b};
	return tu_build(&x->g, op, args, 2, NULL, NULL);
}

static ir_id op3(fx *x, ir_op op, ir_id a, ir_id b, ir_id c, const ir_attr *attr)
{
	ir_id args[3] = {a, b, c};
	return tu_build(&x->g, op, args, 3, attr, NULL);
}

static ir_id dropout(fx *x, ir_id a, double p)
{
	ir_attr at = {.dropout = {p, x->g.m->n_dropout_streams++}};
	return op1(x, IR_OP_DROPOUT, a, &at);
}

static ir_id permute(fx *x, ir_id a, uint8_t p0, uint8_t p1, uint8_t p2)
{
	ir_attr at = {.permute = {{p0, p1, p2}}};
	return op1(x, IR_OP_PERMUTE, a, &at);
}

static void ret(fx *x, ir_id id)
{
	x->g.f->output_names[x->g.f->n_outputs] = "out";
	x->g.f->outputs[x->g.f->n_outputs++] = id;
}

/* ---- running ------------------------------------------------------------------- */

/* Inputs: floats in [-2, 2), i32 in [0, 4]. */
static void make_inputs(fx *x, interp_tensor *in)
{
	for (uint32_t i = 0; i < x->g.f->n_inputs; i++) {
		const ir_type *t = &x->g.f->g.nodes[x->g.f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef;
		ck_assert(interp_tensor_alloc(&x->g.ctx, &in[i], t->dtype,
					      t->rank, dims));
		for (int64_t e = 0; e < interp_tensor_numel(&in[i]); e++) {
			if (t->dtype == IR_I32)
				((int32_t *)in[i].data)[e] = (int32_t)rnd(x, 5);
			else
				((float *)in[i].data)[e] =
					-2.0f +
					4.0f * (float)rnd(x, 1000000) / 1e6f;
		}
	}
}

typedef struct jit_out {
	interp_tensor t[MAXO];
	uint32_t n_fused, n_calls, n_kernels;
	size_t scratch;
} jit_out;

static size_t round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* Runs f of p on n_threads into r. */
static void run_once(fx *x, cg_program *p, bool is_training, int n_threads,
		     const interp_tensor *in, jit_out *r)
{
	r->scratch = cg_program_scratch_bytes(p, "f");
	char *sb = aligned_alloc(64, round64(r->scratch));
	memset(sb, 0xff, round64(r->scratch));
	const void *ins[16];
	void *outs[MAXO];
	for (uint32_t i = 0; i < x->g.f->n_inputs; i++)
		ins[i] = in[i].data;
	uint32_t no;
	const attnrt_tensor_info *oi = cg_program_outputs(p, "f", &no);
	for (uint32_t o = 0; o < no; o++) {
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < oi[o].rank; d++)
			dims[d] = oi[o].dims[d];
		ir_dtype t = oi[o].dtype == ATTNRT_I32 ? IR_I32 : IR_F32;
		ck_assert(interp_tensor_alloc(&x->g.ctx, &r->t[o], t,
					      oi[o].rank, dims));
		outs[o] = r->t[o].data;
	}
	attnrt_run run = {11, 3, is_training, n_threads};
	ck_assert_int_eq(cg_program_entry(p, "f")(&run, NULL, sb, ins, outs), 0);
	r->n_fused = cg_program_n_fused(p);
	r->n_calls = cg_program_n_calls(p, "f");
	r->n_kernels = cg_program_n_kernels(p);
	free(sb);
}

/* Compiles f (fused unless no_fuse) once and runs it on 1 thread into
 * r1 and, when r2 is not NULL, on 2 into r2. */
static void jit_run(fx *x, bool no_fuse, bool is_training,
		    const interp_tensor *in, jit_out *r1, jit_out *r2)
{
	cg_program_options po = {.no_fuse = no_fuse};
	cg_program *p = cg_program_create(&x->g.ctx, x->g.m, NULL, &po);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x->g));
	run_once(x, p, is_training, 1, in, r1);
	if (r2)
		run_once(x, p, is_training, 2, in, r2);
	cg_program_destroy(p);
}

static void interp(fx *x, bool is_f64, bool is_training,
		   const interp_tensor *in, interp_tensor *out)
{
	interp_opts o = {.is_f64 = is_f64,
			 .is_training = is_training,
			 .seed = 11,
			 .step = 3};
	ck_assert_msg(interp_run(&x->g.ctx, x->g.m, x->g.f, &o, NULL, in, out),
		      "%s", tu_graph_diag(&x->g));
}

static double max_err(const interp_tensor *a, const interp_tensor *ref,
		      double *mag)
{
	double e = 0;
	*mag = 0;
	for (int64_t i = 0; i < interp_tensor_numel(ref); i++) {
		double r = interp_tensor_get(ref, i),
		       d = fabs(interp_tensor_get(a, i) - r);
		e = d > e ? d : e;
		*mag = fabs(r) > *mag ? fabs(r) : *mag;
	}
	return e;
}

static bool same_bits(const interp_tensor *a, const interp_tensor *b)
{
	return memcmp(a->data, b->data, (size_t)interp_tensor_numel(a) * 4) == 0;
}

/* What check() saw, for the tests' own assertions. */
typedef struct seen {
	uint32_t n_fused, n_calls, n_calls_unfused;
	size_t scratch, scratch_unfused;
} seen;

/* Runs f fused (1 and 2 threads), unfused, and in the interpreter in
 * float32 and float64, and checks every output: floats by the error-ratio
 * rule against float64 and close to the float32 interpreter (same
 * dropout masks), bit-identical to the unfused run when is_exact; i32
 * equal to the float32 interpreter's; 1 and 2 threads bit-identical. */
static seen check(fx *x, bool is_training, bool is_exact)
{
	ck_assert_msg(ir_module_verify(x->g.m), "%s", tu_graph_diag(&x->g));
	interp_tensor in[16], r64[MAXO], r32[MAXO];
	jit_out fu = {0}, f2 = {0}, un = {0};
	make_inputs(x, in);
	interp(x, true, is_training, in, r64);
	interp(x, false, is_training, in, r32);
	jit_run(x, false, is_training, in, &fu, &f2);
	jit_run(x, true, is_training, in, &un, NULL);
	for (uint32_t o = 0; o < x->g.f->n_outputs; o++) {
		ck_assert_msg(same_bits(&fu.t[o], &f2.t[o]),
			      "output %u: 1 and 2 "
			      "threads differ",
			      o);
		if (fu.t[o].dtype == IR_I32) {
			ck_assert_msg(same_bits(&fu.t[o], &r32[o]),
				      "output %u: i32 "
				      "differs from the interpreter",
				      o);
			continue;
		}
		double mag, mag32;
		double ef = max_err(&fu.t[o], &r64[o], &mag);
		double eu = max_err(&un.t[o], &r64[o], &mag);
		double e32 = max_err(&fu.t[o], &r32[o], &mag32);
		ck_assert_msg(ef <= 2 * eu + 1e-6 * mag + 1e-30,
			      "output %u: fused "
			      "error %g, unfused %g (largest %g)",
			      o, ef, eu, mag);
		ck_assert_msg(e32 <= 1e-5 * (mag32 + 1),
			      "output %u: fused JIT and "
			      "float32 interpreter differ by %g",
			      o, e32);
		if (is_exact)
			ck_assert_msg(same_bits(&fu.t[o], &un.t[o]),
				      "output %u: "
				      "fused and unfused bits differ",
				      o);
	}
	seen s = {fu.n_fused, fu.n_calls, un.n_calls, fu.scratch, un.scratch};
	ck_assert_uint_eq(un.n_fused, 0);
	for (uint32_t o = 0; o < x->g.f->n_outputs; o++) {
		interp_tensor_fini(&x->g.ctx, &r64[o]);
		interp_tensor_fini(&x->g.ctx, &r32[o]);
		interp_tensor_fini(&x->g.ctx, &fu.t[o]);
		interp_tensor_fini(&x->g.ctx, &f2.t[o]);
		interp_tensor_fini(&x->g.ctx, &un.t[o]);
	}
	for (uint32_t i = 0; i < x->g.f->n_inputs; i++)
		interp_tensor_fini(&x->g.ctx, &in[i]);
	return s;
}

/* ---- random chains ---------------------------------------------------------------- */

/* The operands a chain draws from: values of the full shape (3, 5, 7),
 * each used once (or, with allow_reuse, some twice), and broadcast leaves used any
 * number of times. */
typedef struct chain {
	ir_id full[16];
	int n_full;
	ir_id bcast[4]; /* bias (7), row scalars (3, 5, 1), scalar (), (5, 7) */
	bool has_dropout;
	bool allow_reuse; /* let some values have two readers */
} chain;

static ir_id take(fx *x, chain *c)
{
	ck_assert_int_gt(c->n_full, 0);
	int i = (int)rnd(x, (uint32_t)c->n_full);
	ir_id v = c->full[i];
	c->full[i] = c->full[--c->n_full];
	return v;
}

static void give(chain *c, ir_id v)
{
	c->full[c->n_full++] = v;
}

/* Any operand: a full value or, when another full one remains, a
 * broadcast leaf. */
static ir_id operand(fx *x, chain *c)
{
	if (rnd(x, 3) == 0)
		return c->bcast[rnd(x, 4)];
	return take(x, c);
}

static ir_id unary(fx *x, ir_id v)
{
	static const ir_op ops[] = {IR_OP_NEG,  IR_OP_TANH, IR_OP_SIGMOID,
				    IR_OP_RELU, IR_OP_ABS,  IR_OP_SIN};
	switch (rnd(x, 9)) {
	case 0:
		return op1(x, IR_OP_EXP, op1(x, IR_OP_TANH, v, NULL), NULL);
	case 1:
		return op1(x, IR_OP_LOG, op1(x, IR_OP_SIGMOID, v, NULL), NULL);
	case 2:
		return op1(x, IR_OP_SQRT, op1(x, IR_OP_ABS, v, NULL), NULL);
	default:
		return op1(x, ops[rnd(x, 6)], v, NULL);
	}
}

/* A binary step: every node it makes has one use and the full shape
 * (a broadcast leaf only ever as an operand of a full-shape op). */
static ir_id binary(fx *x, chain *c)
{
	static const ir_op ops[] = {IR_OP_ADD, IR_OP_SUB, IR_OP_MUL,
				    IR_OP_MAXIMUM, IR_OP_MINIMUM};
	ir_id a = take(x, c);
	ir_id b = c->n_full ? operand(x, c) : c->bcast[rnd(x, 4)];
	bool b_full = x->g.f->g.nodes[b].type.rank == 3 &&
		      x->g.f->g.nodes[b].type.dims[0].coef == 3 &&
		      x->g.f->g.nodes[b].type.dims[2].coef == 7;
	if (rnd(x, 2)) {
		ir_id t = a;
		a = b;
		b = t;
	}
	uint32_t k = rnd(x, 8);
	if (k == 5 && b_full)
		return op2(x, IR_OP_DIV, a, op1(x, IR_OP_SIGMOID, b, NULL));
	if (k == 6) { /* select(a > b, row scalars, scalar) */
		ir_id gt = op2(x, IR_OP_GT, a, b);
		return op3(x, IR_OP_SELECT, gt, c->bcast[1], c->bcast[2], NULL);
	}
	if (k == 7) { /* a + float(b < bias) */
		ir_id lt = op2(x, IR_OP_LT, b, c->bcast[0]);
		ir_type ft = x->g.f->g.nodes[lt].type;
		ft.dtype = IR_F32;
		return op2(x, IR_OP_ADD, a,
			   tu_build(&x->g, IR_OP_CAST, &lt, 1, NULL, &ft));
	}
	return op2(x, ops[k % 5], a, b);
}

static void chain_init(fx *x, chain *c, int n_inputs, bool with_permute)
{
	memset(c, 0, sizeof *c);
	for (int i = 0; i < n_inputs; i++)
		give(c, tu_input(&x->g, tu_type(IR_F32, 3, 3, 5, 7)));
	if (with_permute) {
		ir_id p = tu_input(&x->g, tu_type(IR_F32, 3, 5, 3, 7));
		give(c, permute(x, p, 1, 0, 2));
		ir_id q = tu_input(&x->g, tu_type(IR_F32, 3, 7, 5, 3));
		give(c, permute(x, op1(x, IR_OP_TANH, q, NULL), 2, 1, 0));
	}
	c->bcast[0] = tu_input(&x->g, tu_type(IR_F32, 1, 7));
	c->bcast[1] = tu_input(&x->g, tu_type(IR_F32, 3, 3, 5, 1));
	c->bcast[2] = tu_input(&x->g, tu_type(IR_F32, 0));
	c->bcast[3] = tu_input(&x->g, tu_type(IR_F32, 2, 5, 7));
}

/* A random chain of n_ops steps over the chain's values, folded into one
 * full value; dropouts among the steps when with_dropout. */
static ir_id random_chain(fx *x, chain *c, int n_ops, bool with_dropout)
{
	for (int i = 0; i < n_ops; i++) {
		uint32_t k = rnd(x, with_dropout ? 4 : 3);
		if (k == 3) {
			give(c, dropout(x, take(x, c), 0.25));
			c->has_dropout = true;
		} else if (k == 0 || c->n_full < 2) {
			ir_id v = unary(x, take(x, c));
			give(c, v);
			if (c->allow_reuse && rnd(x, 3) == 0)
				give(c, v); /* read twice */
		} else {
			give(c, binary(x, c));
		}
	}
	while (c->n_full > 1)
		give(c, op2(x, IR_OP_ADD, take(x, c), take(x, c)));
	return take(x, c);
}

typedef enum consumer {
	C_NONE,
	C_LAYER_NORM,
	C_SOFTMAX,
	C_LOG_SOFTMAX,
	C_MASKED_SOFTMAX,
	C_SUM,
	C_MEAN,
	C_MAX,
	C_CROSS_ENTROPY,
	C_CROSS_ENTROPY_GRAD,
	C_DROPOUT,
	C_PERMUTE,
	C_COUNT
} consumer;

static ir_id consume(fx *x, consumer k, ir_id v)
{
	ir_attr at = {0};
	switch (k) {
	case C_LAYER_NORM: {
		ir_id g = tu_input(&x->g, tu_type(IR_F32, 1, 7));
		ir_id b = tu_input(&x->g, tu_type(IR_F32, 1, 7));
		at.eps = 1e-5;
		return op3(x, IR_OP_LAYER_NORM, v, g, b, &at);
	}
	case C_SOFTMAX:
		return op1(x, IR_OP_SOFTMAX, v, NULL);
	case C_LOG_SOFTMAX:
		return op1(x, IR_OP_LOG_SOFTMAX, v, NULL);
	case C_MASKED_SOFTMAX: {
		ir_id valid = tu_input(&x->g, tu_type(IR_I32, 2, 3, 5));
		ir_id args[2] = {v, valid};
		at.fill = -1e6;
		return tu_build(&x->g, IR_OP_MASKED_SOFTMAX, args, 2, &at, NULL);
	}
	case C_SUM:
		at.reduce.axes = 1u << 1;
		return op1(x, IR_OP_SUM, v, &at);
	case C_MEAN:
		at.reduce.axes = 1u << 0 | 1u << 2;
		at.reduce.keepdim = true;
		return op1(x, IR_OP_MEAN, v, &at);
	case C_MAX:
		at.reduce.axes = 1u << 2;
		return op1(x, IR_OP_MAX, v, &at);
	case C_CROSS_ENTROPY: {
		ir_id labels = tu_input(&x->g, tu_type(IR_I32, 2, 3, 5));
		ir_id args[2] = {v, labels};
		return tu_build(&x->g, IR_OP_CROSS_ENTROPY, args, 2, NULL, NULL);
	}
	case C_CROSS_ENTROPY_GRAD: {
		ir_id labels = tu_input(&x->g, tu_type(IR_I32, 2, 3, 5));
		ir_id g = tu_input(&x->g, tu_type(IR_F32, 2, 3, 5));
		ir_id args[3] = {v, labels, g};
		return tu_build(&x->g, IR_OP_CROSS_ENTROPY_GRAD, args, 3, NULL,
				NULL);
	}
	case C_DROPOUT:
		return dropout(x, v, 0.5);
	case C_PERMUTE:
		return op1(x, IR_OP_EXP, permute(x, v, 2, 0, 1), NULL);
	case C_NONE:
	case C_COUNT:
		break;
	}
	return v;
}

/* ---- tests ---------------------------------------------------------------------------- */

START_TEST(test_random_elementwise_chains_fused_equal_the_unfused_bit_for_bit)
{
	for (uint64_t seed = 1; seed <= 24; seed++) {
		fx x;
		fx_init(&x, seed);
		chain c;
		chain_init(&x, &c, 4, seed % 2 == 0);
		c.allow_reuse = true;
		ret(&x,
		    random_chain(&x, &c, 6 + (int)(seed % 5), seed % 3 == 0));
		seen s = check(&x, seed % 3 == 0, true);
		ck_assert_uint_gt(s.n_fused, 0);
		ck_assert_uint_lt(s.n_calls, s.n_calls_unfused);
		ck_assert_uint_lt(s.scratch, s.scratch_unfused);
		tu_graph_fini(&x.g);
	}
}
END_TEST

START_TEST(test_random_chains_fused_into_every_consumer_kind_pass_the_error_ratio_rule)
{
	consumer k = (consumer)_i;
	for (uint64_t seed = 1; seed <= 6; seed++) {
		bool is_training = seed % 2 == 0;
		fx x;
		fx_init(&x, seed * 100 + (uint64_t)k);
		chain c;
		chain_init(&x, &c, 3, seed % 3 == 0);
		ir_id v = random_chain(&x, &c, 5, is_training);
		ret(&x, consume(&x, k, v));
		seen s = check(&x, is_training,
			       k == C_DROPOUT || k == C_PERMUTE);
		/* the whole chain and the consumer: one kernel, or two when
		 * the permuted inputs take the arrays past the kernel's
		 * bound (PASS_FUSE_EW_MAX_ARRAYS) */
		ck_assert_msg(s.n_calls <= 1u + (seed % 3 == 0),
			      "seed %d: %u "
			      "calls, %u fused",
			      (int)seed, s.n_calls, s.n_fused);
		tu_graph_fini(&x.g);
	}
}
END_TEST

START_TEST(test_bias_relu_and_residual_layer_norm_run_as_one_kernel_each)
{
	fx x;
	fx_init(&x, 5);
	ir_id h = tu_input(&x.g, tu_type(IR_F32, 3, 4, 6, 8));
	ir_id bias = tu_input(&x.g, tu_type(IR_F32, 1, 8));
	ir_id res = tu_input(&x.g, tu_type(IR_F32, 3, 4, 6, 8));
	ir_id y = op1(&x, IR_OP_RELU, op2(&x, IR_OP_ADD, h, bias), NULL);
	ir_id sum = op2(&x, IR_OP_ADD, res, dropout(&x, y, 0.1));
	ir_attr at = {.eps = 1e-5};
	ir_id gam = tu_input(&x.g, tu_type(IR_F32, 1, 8));
	ir_id bet = tu_input(&x.g, tu_type(IR_F32, 1, 8));
	ret(&x, op3(&x, IR_OP_LAYER_NORM, sum, gam, bet, &at));
	seen s = check(&x, true, false);
	ck_assert_uint_eq(s.n_fused, 4);
	ck_assert_uint_eq(s.n_calls, 1);
	ck_assert_uint_eq(s.n_calls_unfused, 5);
	tu_graph_fini(&x.g);
}
END_TEST

/* A pre-LN block's backward: the residual stream's gradient r plus the
 * layer norm's gradient in x, layer_norm_grad(x, gamma, g), read by the
 * add alone, is one kernel (the add's stores the row kernel's, r added
 * to each element), on either side of the add, x and g buffers or
 * computed by kernels of their own; the same bits as the two kernels
 * apart. */
START_TEST(test_layer_norm_grad_plus_a_residual_is_one_kernel)
{
	for (int c = 0; c < 4; c++) {
		fx x;
		fx_init(&x, 15 + (uint64_t)c);
		ir_type t = tu_type(IR_F32, 3, 4, 5, 32);
		ir_id xs = tu_input(&x.g, t), g = tu_input(&x.g, t);
		ir_id r = tu_input(&x.g, t);
		ir_id gam = tu_input(&x.g, tu_type(IR_F32, 1, 32));
		if (c >= 2) {
			xs = op2(&x, IR_OP_ADD, xs, tu_input(&x.g, t));
			g = op1(&x, IR_OP_RELU, g, NULL);
		}
		ir_attr at = {.eps = 1e-5};
		ir_id d = op3(&x, IR_OP_LAYER_NORM_GRAD, xs, gam, g, &at);
		ret(&x, c % 2 ? op2(&x, IR_OP_ADD, d, r)
			      : op2(&x, IR_OP_ADD, r, d));
		seen s = check(&x, false, true);
		ck_assert_uint_eq(s.n_calls, s.n_calls_unfused - 1);
		if (c < 2)
			ck_assert_uint_eq(s.n_calls, 1);
		ck_assert_uint_lt(s.scratch, s.scratch_unfused);
		tu_graph_fini(&x.g);
	}
}
END_TEST

/* Read by anything else too, it keeps its buffer and its kernel. */
START_TEST(test_layer_norm_grad_read_twice_keeps_its_kernel)
{
	fx x;
	fx_init(&x, 17);
	ir_type t = tu_type(IR_F32, 2, 6, 64);
	ir_id xs = tu_input(&x.g, t), g = tu_input(&x.g, t);
	ir_id r = tu_input(&x.g, t);
	ir_id gam = tu_input(&x.g, tu_type(IR_F32, 1, 64));
	ir_attr at = {.eps = 1e-5};
	ir_id d = op3(&x, IR_OP_LAYER_NORM_GRAD, xs, gam, g, &at);
	ret(&x, op2(&x, IR_OP_ADD, r, d));
	ret(&x, d);
	seen s = check(&x, false, true);
	ck_assert_uint_eq(s.n_calls, 2);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_head_merge_permute_is_index_arithmetic_in_its_reader)
{
	fx x;
	fx_init(&x, 6);
	/* (B, H, T, d) -> (B, T, H, d), scaled, then summed over d */
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 4, 2, 3, 5, 4));
	ir_attr pa = {.permute = {{0, 2, 1, 3}}};
	ir_id p = op1(&x, IR_OP_PERMUTE, op1(&x, IR_OP_TANH, a, NULL), &pa);
	ir_id s = op2(&x, IR_OP_MUL, p, tu_input(&x.g, tu_type(IR_F32, 1, 4)));
	ir_attr ra = {.reduce = {1u << 3, false}};
	ret(&x, op1(&x, IR_OP_SUM, s, &ra));
	seen r = check(&x, false, false);
	ck_assert_uint_eq(r.n_fused, 3);
	ck_assert_uint_eq(r.n_calls, 1);
	tu_graph_fini(&x.g);
}
END_TEST

static ir_id slice(fx *x, ir_id a, int axis, int64_t start, int64_t end,
		   int64_t step)
{
	ir_attr at = {.slice = {axis, start, end, step}};
	return op1(x, IR_OP_SLICE, a, &at);
}

/* A GRU's gates: slices of one (B, 3H) product read where the gate
 * kernels read them; slices stepped and offset, of a slice, under a
 * permute, of a broadcast, and fused into a reduction; exact. */
START_TEST(test_slices_are_read_in_place_by_their_readers)
{
	fx x;
	fx_init(&x, 8);
	ir_id gx = tu_input(&x.g, tu_type(IR_F32, 2, 5, 12));
	ir_id gh = tu_input(&x.g, tu_type(IR_F32, 2, 5, 12));
	ir_id r = op1(&x, IR_OP_SIGMOID,
		      op2(&x, IR_OP_ADD, slice(&x, gx, 1, 0, 4, 1),
			  slice(&x, gh, 1, 0, 4, 1)),
		      NULL);
	ir_id n = op2(&x, IR_OP_MUL, r, slice(&x, gh, 1, 8, 12, 1));
	ret(&x, op2(&x, IR_OP_ADD, n, slice(&x, gx, 1, 8, 12, 1)));
	/* every other row of the odd columns, transposed */
	ir_id t = tu_input(&x.g, tu_type(IR_F32, 3, 6, 7, 9));
	ir_id st = slice(&x, slice(&x, t, 0, 1, 6, 2), 2, 1, 9, 3);
	ret(&x, op1(&x, IR_OP_NEG, permute(&x, st, 2, 1, 0), NULL));
	/* a slice of a broadcast bias, and a row sum of a slice */
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 1, 12));
	ir_type bt = tu_type(IR_F32, 2, 5, 12);
	ir_id bb = tu_build(&x.g, IR_OP_BROADCAST, &b, 1, NULL, &bt);
	ret(&x, op2(&x, IR_OP_MUL, slice(&x, bb, 1, 4, 8, 1),
		    slice(&x, gx, 1, 4, 8, 1)));
	ir_attr ra = {.reduce = {1u << 1, false}};
	ret(&x, op1(&x, IR_OP_SUM, slice(&x, gh, 1, 2, 11, 3), &ra));
	/* a returned slice computes its operand where it reads it */
	ret(&x, slice(&x, op1(&x, IR_OP_TANH, t, NULL), 1, 2, 7, 2));
	seen s = check(&x, false, true);
	/* Five kernels, the roots; fused: 8 slices, the permute, the
	 * broadcast, sigmoid, two adds, a mul and the tanh. */
	ck_assert_uint_eq(s.n_calls, 5);
	ck_assert_uint_eq(s.n_fused, 15);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_i32_compares_selects_and_casts_fuse_exactly)
{
	fx x;
	fx_init(&x, 7);
	ir_id a = tu_input(&x.g, tu_type(IR_I32, 2, 6, 9));
	ir_id b = tu_input(&x.g, tu_type(IR_I32, 1, 9));
	ir_id f = tu_input(&x.g, tu_type(IR_F32, 2, 6, 9));
	ir_id s = op2(&x, IR_OP_MUL, op2(&x, IR_OP_SUB, a, b), a);
	ir_id ge = op2(&x, IR_OP_GE, s, b);
	ir_id sel = op3(&x, IR_OP_SELECT, ge, s, op1(&x, IR_OP_NEG, b, NULL),
			NULL);
	ir_type it = tu_type(IR_I32, 2, 6, 9);
	ir_id fi = tu_build(&x.g, IR_OP_CAST, &f, 1, NULL, &it);
	ret(&x, op2(&x, IR_OP_MAXIMUM, sel, op1(&x, IR_OP_ABS, fi, NULL)));
	seen r = check(&x, false, true);
	/* s has two readers, both in the maximum's kernel: s and the sub
	 * under it are computed there twice; neg of b (9) is broadcast by
	 * select and keeps its kernel */
	ck_assert_uint_eq(r.n_calls, 2);
	ck_assert_uint_eq(r.n_fused, 6);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_same_root_op_with_different_trees_gets_different_kernels)
{
	fx x;
	fx_init(&x, 8);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id a2 = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id b2 = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id a3 = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id b3 = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ret(&x, op2(&x, IR_OP_ADD, op1(&x, IR_OP_EXP, a, NULL), b));
	ret(&x, op2(&x, IR_OP_ADD, op1(&x, IR_OP_TANH, a2, NULL), b2));
	ret(&x, op2(&x, IR_OP_ADD, op1(&x, IR_OP_EXP, a3, NULL), b3));
	check(&x, false, true);
	jit_out r = {0};
	interp_tensor in[6];
	make_inputs(&x, in);
	jit_run(&x, false, false, in, &r, NULL);
	ck_assert_uint_eq(r.n_calls, 3);
	ck_assert_uint_eq(r.n_kernels, 2); /* exp+add twice shares one */
	for (uint32_t i = 0; i < 6; i++)
		interp_tensor_fini(&x.g.ctx, &in[i]);
	for (uint32_t o = 0; o < 3; o++)
		interp_tensor_fini(&x.g.ctx, &r.t[o]);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_a_cheap_value_read_twice_is_computed_in_both_readers)
{
	fx x;
	fx_init(&x, 10);
	/* layer norm's backward: d = x - mean, read by d * d and d * g */
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 3, 4, 8));
	ir_id g = tu_input(&x.g, tu_type(IR_F32, 3, 3, 4, 8));
	ir_attr ra = {.reduce = {1u << 2, true}};
	ir_id mean = op1(&x, IR_OP_MEAN, a, &ra);
	ir_id d = op2(&x, IR_OP_SUB, a, mean);
	ir_attr sa = {.reduce = {1u << 2, true}};
	ir_id var = op1(&x, IR_OP_MEAN, op2(&x, IR_OP_MUL, d, d), &sa);
	ir_id dg = op2(&x, IR_OP_MUL, d, g);
	ret(&x, op2(&x, IR_OP_DIV, dg, op1(&x, IR_OP_SQRT, var, NULL)));
	seen s = check(&x, false, false);
	/* d in both readers; d * d into the second mean; d * g into the div */
	ck_assert_uint_eq(s.n_fused, 3);
	ck_assert_uint_eq(s.n_calls, 4);
	ck_assert_uint_eq(s.n_calls_unfused, 7);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_a_value_read_twice_or_returned_keeps_its_buffer)
{
	fx x;
	fx_init(&x, 9);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id e = op1(&x, IR_OP_EXP, a, NULL);  /* two readers */
	ir_id t = op1(&x, IR_OP_TANH, a, NULL); /* an output and a reader */
	ret(&x, op2(&x, IR_OP_MUL, e, op2(&x, IR_OP_ADD, e, t)));
	ret(&x, t);
	seen s = check(&x, false, true);
	ck_assert_uint_eq(s.n_fused, 1); /* only the add, into the mul */
	ck_assert_uint_eq(s.n_calls, 3);
	tu_graph_fini(&x.g);
}
END_TEST

static ir_id scalar(fx *x, float v)
{
	return tu_const(&x->g, tu_type(IR_F32, 0), &v);
}

/* GELU's forward y = 0.5 x (1 + erf(x sqrt(1/2))) of x = mm + bias and
 * its backward for the gradient g, node for node as the frontend's gelu
 * and autodiff build them (models/gpt.g's loss_grad). */
static void gelu_fwd_bwd(fx *x, ir_id mm, ir_id bias, ir_id g)
{
	ir_id c0 = scalar(x, 0.70710677f), c1 = scalar(x, 0.5f);
	ir_id c2 = scalar(x, 1.0f), c6 = scalar(x, 1.1283792f);
	ir_id v = op2(x, IR_OP_ADD, mm, bias);
	ir_id u = op2(x, IR_OP_MUL, v, c0);
	ir_id half = op2(x, IR_OP_MUL, v, c1);
	ir_id one_e = op2(x, IR_OP_ADD, c2, op1(x, IR_OP_ERF, u, NULL));
	ret(x, op2(x, IR_OP_MUL, half, one_e));
	ir_id a = op2(x, IR_OP_MUL, op2(x, IR_OP_MUL, g, one_e), c1);
	ir_id sq = op1(x, IR_OP_NEG, op2(x, IR_OP_MUL, u, u), NULL);
	ir_id d = op2(x, IR_OP_MUL, op1(x, IR_OP_EXP, sq, NULL), c6);
	ir_id b = op2(x, IR_OP_MUL, op2(x, IR_OP_MUL, g, half), d);
	ret(x, op2(x, IR_OP_ADD, a, op2(x, IR_OP_MUL, b, c0)));
}

START_TEST(test_gelu_forward_and_backward_run_as_one_kernel_each)
{
	fx x;
	fx_init(&x, 12);
	ir_id mm = tu_input(&x.g, tu_type(IR_F32, 3, 3, 5, 7));
	ir_id bias = tu_input(&x.g, tu_type(IR_F32, 1, 7));
	ir_id g = tu_input(&x.g, tu_type(IR_F32, 3, 3, 5, 7));
	gelu_fwd_bwd(&x, mm, bias, g);
	seen s = check(&x, false, true);
	/* x = mm + bias, x sqrt(1/2), 0.5 x and 1 + erf are computed in
	 * both kernels, erf once in each: no buffer between them */
	ck_assert_uint_eq(s.n_calls, 2);
	ck_assert_uint_eq(s.n_calls_unfused, 16);
	ck_assert_uint_lt(s.scratch, s.scratch_unfused);
	tu_graph_fini(&x.g);
}
END_TEST

/* The definition line of the first function of the LLVM text whose
 * name has `name` in it, and the count of pointer parameters on it. */
static int ptr_params(const char *ir, const char *name)
{
	const char *at = strstr(ir, name);
	ck_assert_ptr_nonnull(at);
	const char *def = at;
	while (def > ir && def[-1] != '\n')
		def--;
	ck_assert_msg(strncmp(def, "define", 6) == 0, "%.80s", def);
	int n = 0;
	for (const char *c = def; *c && *c != '\n'; c++)
		n += strncmp(c, "ptr ", 4) == 0;
	return n;
}

/* GELU's backward reads x = mm + bias and g in both terms of its add:
 * each buffer is one pointer of the kernel, whichever operand's tree
 * reads it, so LLVM loads each element once (and the forward, which
 * reads x in both operands of its mul, the same). */
START_TEST(test_gelu_kernels_take_each_buffer_once)
{
	fx x;
	fx_init(&x, 14);
	ir_id mm = tu_input(&x.g, tu_type(IR_F32, 3, 2, 16, 64));
	ir_id bias = tu_input(&x.g, tu_type(IR_F32, 1, 64));
	ir_id g = tu_input(&x.g, tu_type(IR_F32, 3, 2, 16, 64));
	gelu_fwd_bwd(&x, mm, bias, g);
	check(&x, false, true);
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	char *ir;
	size_t len;
	ck_assert(cg_program_emit_buffer(p, CG_EMIT_LLVM, &ir, &len));
	if (getenv("CG_DUMP"))
		fputs(ir, stderr);
	/* out, mm, bias and g (the null pointers of the fused operands
	 * are dropped by LLVM): 4, not 7 as when each operand's tree had
	 * its own; the forward's out, mm and bias: 3, not 5 */
	ck_assert_int_eq(ptr_params(ir, ".add"), 4);
	ck_assert_int_eq(ptr_params(ir, ".mul"), 3);
	free(ir);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

/* The fuse_gelu pass (passes/fuse_gelu.c) on GELU's forward, read by a
 * matmul as in an MLP, and its backward: the backward's kernel takes
 * 1 + erf from the forward's result y (one more pointer, y) and computes
 * no erf; fused and unfused the same bits, 1 and 2 threads too, and the
 * interpreter's values. */
START_TEST(test_gelu_backward_reads_the_forward_result_after_fuse_gelu)
{
	for (int is_on = 0; is_on < 2; is_on++) {
		fx x;
		fx_init(&x, 15);
		ir_id mm = tu_input(&x.g, tu_type(IR_F32, 2, 48, 64));
		ir_id bias = tu_input(&x.g, tu_type(IR_F32, 1, 64));
		ir_id g = tu_input(&x.g, tu_type(IR_F32, 2, 48, 64));
		ir_id w = tu_input(&x.g, tu_type(IR_F32, 2, 64, 8));
		gelu_fwd_bwd(&x, mm, bias, g);
		ir_id args[2] = {x.g.f->outputs[0], w};
		ir_attr mat = {0};
		x.g.f->outputs[0] = tu_build(&x.g, IR_OP_MATMUL, args, 2, &mat,
					     NULL);
		if (is_on) {
			ck_assert(pass_fuse_gelu(x.g.m));
			ck_assert(pass_dce(x.g.m));
		}
		seen s = check(&x, false, true);
		ck_assert_uint_eq(s.n_calls, 3); /* y, its matmul, dx */
		cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
		ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
		char *ir;
		size_t len;
		ck_assert(cg_program_emit_buffer(p, CG_EMIT_LLVM, &ir, &len));
		if (getenv("CG_DUMP"))
			fputs(ir, stderr);
		/* dx's kernel: out, mm, bias, g and, with the pass, y */
		ck_assert_int_eq(ptr_params(ir, ".add"), 4 + is_on);
		free(ir);
		cg_program_destroy(p);
		tu_graph_fini(&x.g);
	}
}
END_TEST

START_TEST(test_a_buffer_read_many_times_in_one_tree_is_one_array)
{
	fx x;
	fx_init(&x, 13);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 3, 5, 7));
	ir_id acc = a;
	for (int i = 0; i < 20; i++) /* 21 reads of a, one array */
		acc = op2(&x, IR_OP_ADD, op1(&x, IR_OP_SIN, acc, NULL), a);
	ret(&x, acc);
	seen s = check(&x, false, true);
	ck_assert_uint_eq(s.n_calls, 1);
	ck_assert_uint_eq(s.n_fused, 39);
	tu_graph_fini(&x.g);
}
END_TEST

static ir_id reshape(fx *x, ir_id a, ir_type t)
{
	return tu_build(&x->g, IR_OP_RESHAPE, &a, 1, NULL, &t);
}

/* A slice of consecutive elements of a buffer (the axes before the sliced
 * one all 1) is a view at an offset, with no kernel: of a kernel's result,
 * of an input, through a reshape, of another such view, as an output or
 * read by a matmul. A strided slice keeps its kernel. */
START_TEST(test_a_contiguous_slice_is_a_view_without_a_kernel)
{
	fx x;
	fx_init(&x, 12);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 2, 6, 4));
	ir_id w = tu_input(&x.g, tu_type(IR_F32, 2, 4, 3));
	ir_id y = op1(&x, IR_OP_EXP, a, NULL);
	ret(&x, slice(&x, y, 0, 1, 2, 1));  /* of y at byte 96 */
	ir_id s = slice(&x, y, 0, 0, 1, 1); /* of y at byte 0 */
	ret(&x,
	    op2(&x, IR_OP_MATMUL, reshape(&x, s, tu_type(IR_F32, 2, 6, 4)), w));
	ret(&x, slice(&x, s, 1, 1, 4, 1)); /* of the view s: byte 16 */
	ret(&x, slice(&x, a, 0, 1, 2, 1)); /* of the input */
	ret(&x,
	    slice(&x, reshape(&x, y, tu_type(IR_F32, 2, 12, 4)), 0, 3, 9, 1));
	ret(&x, slice(&x, y, 1, 2, 5, 1)); /* strided: a kernel */
	seen s1 = check(&x, false, true);
	ck_assert_uint_eq(s1.n_calls, 3); /* exp, the matmul, the strided slice */
	ck_assert_uint_eq(s1.n_calls_unfused, 3);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_a_concat_of_64_operands_compiles_and_65_are_refused)
{
	fx x;
	fx_init(&x, 11);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 1, 2));
	ir_id args[65];
	for (int i = 0; i < 65; i++)
		args[i] = op1(&x, IR_OP_NEG, a, NULL);
	ir_attr at = {.axis = 0};
	ret(&x, tu_build(&x.g, IR_OP_CONCAT, args, 64, &at, NULL));
	seen s = check(&x, false, true);
	ck_assert_uint_eq(s.n_fused, 0);
	ck_assert_uint_eq(s.n_calls, 66); /* 65 negs (one unread), the concat */
	x.g.f->outputs[0] = tu_build(&x.g, IR_OP_CONCAT, args, 65, &at, NULL);
	ck_assert_ptr_null(cg_program_create(&x.g.ctx, x.g.m, NULL, NULL));
	ck_assert_ptr_nonnull(
		strstr(tu_graph_diag(&x.g), "65 operands, at most 64"));
	tu_graph_fini(&x.g);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_fuse_ew");
	TCase *tc = tcase_create("fuse_ew");
	tcase_set_timeout(tc, 300);
	tcase_add_test(
		tc,
		test_random_elementwise_chains_fused_equal_the_unfused_bit_for_bit);
	tcase_add_loop_test(
		tc,
		test_random_chains_fused_into_every_consumer_kind_pass_the_error_ratio_rule,
		C_LAYER_NORM, C_COUNT);
	tcase_add_test(
		tc,
		test_bias_relu_and_residual_layer_norm_run_as_one_kernel_each);
	tcase_add_test(tc, test_layer_norm_grad_plus_a_residual_is_one_kernel);
	tcase_add_test(tc, test_layer_norm_grad_read_twice_keeps_its_kernel);
	tcase_add_test(tc,
		       test_head_merge_permute_is_index_arithmetic_in_its_reader);
	tcase_add_test(tc, test_slices_are_read_in_place_by_their_readers);
	tcase_add_test(tc, test_i32_compares_selects_and_casts_fuse_exactly);
	tcase_add_test(
		tc,
		test_same_root_op_with_different_trees_gets_different_kernels);
	tcase_add_test(tc,
		       test_a_cheap_value_read_twice_is_computed_in_both_readers);
	tcase_add_test(tc, test_a_value_read_twice_or_returned_keeps_its_buffer);
	tcase_add_test(tc,
		       test_gelu_forward_and_backward_run_as_one_kernel_each);
	tcase_add_test(tc, test_gelu_kernels_take_each_buffer_once);
	tcase_add_test(tc,
		       test_gelu_backward_reads_the_forward_result_after_fuse_gelu);
	tcase_add_test(tc,
		       test_a_buffer_read_many_times_in_one_tree_is_one_array);
	tcase_add_test(tc, test_a_contiguous_slice_is_a_view_without_a_kernel);
	tcase_add_test(tc,
		       test_a_concat_of_64_operands_compiles_and_65_are_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
