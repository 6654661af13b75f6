/*
 * test_codegen_lower.c - the lowering of whole IR functions to native code
 * (cg_program.h), tested against the reference interpreter: every op on
 * hand-built graphs with odd shapes, broadcasting, size-1 dims and rank 0;
 * run-time errors; dropout's random mask bit for bit; 1 and 2 threads;
 * vectorized hot loops. The book's models are in test_codegen_lower_models.c.
 */
#include "cg_program.h"
#include "interp.h"
#include "testutil.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- a module with one function, built node by node ---------------------- */

/* The module, and the state of the random inputs (make_inputs). */
typedef struct fx {
	tu_graph g;
	uint64_t rng;
} fx;

static void fx_init(fx *x)
{
	tu_graph_init(&x->g, 64);
	x->rng = 0x1234567;
}

static ir_id param(fx *x, const char *name, ir_type t, ir_init_kind init)
{
	int32_t p = ir_module_add_param(x->g.m, name, &t, init, 0, 1,
					(ir_loc){0});
	ir_attr a = {.param_index = (uint32_t)p};
	return tu_build(&x->g, IR_OP_PARAM, NULL, 0, &a, &t);
}

static ir_id op1(fx *x, ir_op op, ir_id a, const ir_attr *attr)
{
	return tu_build(&x->g, op, &a, 1, attr, NULL);
}

static ir_id op2(fx *x, ir_op op, ir_id a, ir_id b, const ir_attr *attr)
{
	ir_id args[2] = {a, b};
	return tu_build(&x->g, op, args, 2, attr, NULL);
}

static ir_id to_type(fx *x, ir_op op, ir_id a, ir_type t)
{
	return tu_build(&x->g, op, &a, 1, NULL, &t);
}

static void ret(fx *x, ir_id id)
{
	x->g.f->output_names[x->g.f->n_outputs] = "out";
	x->g.f->outputs[x->g.f->n_outputs++] = id;
}

/* ---- running both ways ------------------------------------------------------ */

typedef struct run_cfg {
	bool is_training;
	uint64_t seed, step;
	int n_threads;
	double tol;             /* atol and rtol of float outputs */
	int32_t int_lo, int_hi; /* range of random i32 inputs */
	float f_lo, f_hi;       /* range of random f32 inputs */
	int64_t grain;          /* cg_program_options.grain (0: default) */
	unsigned vector_width;  /* cg_program_options.vector_width */
} run_cfg;

static run_cfg cfg_default(void)
{
	return (run_cfg){false, 7, 3, 1, 1e-5, 0, 5, -2.0f, 2.0f, 0, 0};
}

static uint64_t next(fx *x)
{
	x->rng = x->rng * 6364136223846793005ull + 1442695040888963407ull;
	return x->rng >> 33;
}

/* Random inputs for every argument of f (static dims). */
static void make_inputs(fx *x, const run_cfg *c, interp_tensor *in)
{
	for (uint32_t i = 0; i < x->g.f->n_inputs; i++) {
		const ir_type *t = &x->g.f->g.nodes[x->g.f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef;
		ck_assert(interp_tensor_alloc(&x->g.ctx, &in[i], t->dtype,
					      t->rank, dims));
		int64_t n = interp_tensor_numel(&in[i]);
		for (int64_t e = 0; e < n; e++) {
			double u = (double)(next(x) % 1000000) / 1e6;
			if (t->dtype == IR_I32)
				((int32_t *)in[i].data)[e] =
					c->int_lo +
					(int32_t)(next(x) %
						  (uint64_t)(c->int_hi -
							     c->int_lo + 1));
			else
				((float *)in[i].data)[e] = c->f_lo +
							   (float)u * (c->f_hi -
								       c->f_lo);
		}
	}
}

/* The JIT's results: status and one malloc'd buffer per output. */
typedef struct jit_result {
	int status;
	void *out[64];
	int64_t numel[64];
	uint32_t n_kernels, n_parallel;
} jit_result;

static void copy_params(cg_program *p, const interp_tensor *params, char *block)
{
	uint32_t n;
	const attnrt_param_info *pi = cg_program_params(p, &n);
	for (uint32_t i = 0; i < n; i++)
		memcpy(block + pi[i].offset, params[i].data,
		       (size_t)interp_tensor_numel(&params[i]) * 4);
}

static size_t round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* Floats after each output buffer that the call must leave alone. */
#define GUARD 16

static jit_result jit_run(fx *x, const int64_t *syms, const interp_tensor *in,
			  const interp_tensor *params, const run_cfg *c)
{
	jit_result r = {0};
	cg_program_options po = {.grain = c->grain,
				 .vector_width = c->vector_width};
	cg_program *p = cg_program_create(&x->g.ctx, x->g.m, syms, &po);
	ck_assert_msg(p != NULL, "lowering failed: %s", tu_graph_diag(&x->g));
	ck_assert_msg(cg_program_jit(p), "jit failed: %s", tu_graph_diag(&x->g));
	attnrt_entry_fn fn = cg_program_entry(p, "f");
	ck_assert(fn != NULL);
	char *pb = aligned_alloc(64, round64(cg_program_params_bytes(p)));
	char *sb = aligned_alloc(64, round64(cg_program_scratch_bytes(p, "f")));
	memset(sb, 0xff, round64(cg_program_scratch_bytes(p, "f")));
	copy_params(p, params, pb);
	const void *ins[64];
	void *outs[64];
	for (uint32_t i = 0; i < x->g.f->n_inputs; i++)
		ins[i] = in[i].data;
	uint32_t no;
	const attnrt_tensor_info *oi = cg_program_outputs(p, "f", &no);
	ck_assert_uint_eq(no, x->g.f->n_outputs);
	for (uint32_t o = 0; o < no; o++) {
		r.numel[o] = 1;
		for (int d = 0; d < oi[o].rank; d++)
			r.numel[o] *= oi[o].dims[d];
		outs[o] = r.out[o] = calloc((size_t)r.numel[o] + GUARD, 4);
		memset((float *)r.out[o] + r.numel[o], 0xa5, GUARD * 4);
	}
	attnrt_run run = {c->seed, c->step, c->is_training, c->n_threads};
	r.status = fn(&run, pb, sb, ins, outs);
	/* Kernels write outputs in place: not a byte past their end. */
	unsigned char guard[GUARD * 4];
	memset(guard, 0xa5, sizeof guard);
	for (uint32_t o = 0; o < no; o++)
		ck_assert_msg(memcmp((float *)r.out[o] + r.numel[o], guard,
				     sizeof guard) == 0,
			      "output %u: written past its end", o);
	r.n_kernels = cg_program_n_kernels(p);
	r.n_parallel = cg_program_n_parallel(p);
	free(pb);
	free(sb);
	cg_program_destroy(p);
	return r;
}

static void jit_result_fini(jit_result *r, uint32_t n)
{
	for (uint32_t o = 0; o < n; o++)
		free(r->out[o]);
}

static void compare(const interp_tensor *want, const jit_result *r, uint32_t o,
		    double tol)
{
	int64_t n = interp_tensor_numel(want);
	ck_assert_int_eq(n, r->numel[o]);
	if (want->dtype == IR_I32) {
		for (int64_t i = 0; i < n; i++)
			ck_assert_msg(((int32_t *)want->data)[i] ==
					      ((int32_t *)r->out[o])[i],
				      "output %u element %lld: interp %d, jit %d",
				      o, (long long)i,
				      ((int32_t *)want->data)[i],
				      ((int32_t *)r->out[o])[i]);
		return;
	}
	const float *a = r->out[o], *b = want->data;
	for (int64_t i = 0; i < n; i++) {
		if (isnan(a[i]) && isnan(b[i]))
			continue;
		if (tol == 0) {
			ck_assert_msg(a[i] == b[i],
				      "output %u element %lld: "
				      "interp %.9g, jit %.9g",
				      o, (long long)i, b[i], a[i]);
			continue;
		}
		double e = tu_max_rel_err(&a[i], &b[i], 1, tol, tol);
		ck_assert_msg(e <= 1,
			      "output %u element %lld: interp %.9g, jit %.9g",
			      o, (long long)i, b[i], a[i]);
	}
}

typedef struct both {
	interp_tensor in[64], params[64], want[64];
	int64_t syms[8];
	jit_result got;
} both;

/* Runs f in the interpreter (float32) and through the JIT on the same
 * random inputs and parameters. */
static void run_both(fx *x, const run_cfg *c, both *b)
{
	memset(b, 0, sizeof *b);
	ck_assert_msg(ir_module_verify(x->g.m), "%s", tu_graph_diag(&x->g));
	make_inputs(x, c, b->in);
	ck_assert(interp_bind_syms(&x->g.ctx, x->g.m, x->g.f, b->in, b->syms));
	ck_assert(interp_params_init(&x->g.ctx, x->g.m, b->syms, 42, false,
				     b->params));
	interp_opts o = {.is_training = c->is_training,
			 .seed = c->seed,
			 .step = c->step};
	ck_assert_msg(interp_run(&x->g.ctx, x->g.m, x->g.f, &o, b->params,
				 b->in, b->want),
		      "interp: %s", tu_graph_diag(&x->g));
	b->got = jit_run(x, b->syms, b->in, b->params, c);
}

static void both_fini(fx *x, both *b)
{
	for (uint32_t i = 0; i < x->g.f->n_inputs; i++)
		interp_tensor_fini(&x->g.ctx, &b->in[i]);
	for (uint32_t i = 0; i < x->g.m->n_params; i++)
		interp_tensor_fini(&x->g.ctx, &b->params[i]);
	for (uint32_t o = 0; o < x->g.f->n_outputs; o++)
		interp_tensor_fini(&x->g.ctx, &b->want[o]);
	jit_result_fini(&b->got, x->g.f->n_outputs);
}

/* Runs both ways and checks every output agrees. */
static void check_cfg(fx *x, const run_cfg *c)
{
	both b;
	run_both(x, c, &b);
	ck_assert_int_eq(b.got.status, 0);
	for (uint32_t o = 0; o < x->g.f->n_outputs; o++)
		compare(&b.want[o], &b.got, o, c->tol);
	both_fini(x, &b);
}

static void check(fx *x)
{
	run_cfg c = cfg_default();
	check_cfg(x, &c);
}

/* ---- elementwise -------------------------------------------------------------- */

START_TEST(test_add_broadcasts_like_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 3, 1, 5));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 2, 4, 5));
	ret(&x, op2(&x, IR_OP_ADD, a, b, NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_add_of_known_values_gives_their_sum)
{
	fx x;
	fx_init(&x);
	float av[3] = {1, 2, 3}, bv[1] = {10};
	ir_id a = tu_const(&x.g, tu_type(IR_F32, 1, 3), av);
	ir_id b = tu_const(&x.g, tu_type(IR_F32, 0), bv);
	ir_id in = tu_input(&x.g, tu_type(IR_F32, 1, 3));
	ret(&x, op2(&x, IR_OP_ADD, op2(&x, IR_OP_ADD, a, b, NULL), in, NULL));
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x.g));
	float inv[3] = {0.5f, 0.25f, 0.125f}, out[3] = {0};
	const void *ins[1] = {inv};
	void *outs[1] = {out};
	attnrt_run run = {0, 0, 0, 1};
	char *sb = aligned_alloc(64, round64(cg_program_scratch_bytes(p, "f")));
	ck_assert_int_eq(cg_program_entry(p, "f")(&run, NULL, sb, ins, outs), 0);
	ck_assert_float_eq(out[0], 11.5f);
	ck_assert_float_eq(out[1], 12.25f);
	ck_assert_float_eq(out[2], 13.125f);
	free(sb);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_only_lowers_the_functions_asked_for)
{
	fx x;
	fx_init(&x);
	ir_id in = tu_input(&x.g, tu_type(IR_F32, 1, 3));
	ret(&x, op1(&x, IR_OP_EXP, in, NULL));
	const char *none[] = {"g"}, *f[] = {"g", "f"};
	cg_program_options skip = {.only = none, .n_only = 1};
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, &skip);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x.g));
	ck_assert_uint_eq(cg_program_n_entries(p), 0);
	ck_assert(cg_program_entry(p, "f") == NULL);
	cg_program_destroy(p);
	cg_program_options keep = {.only = f, .n_only = 2};
	p = cg_program_create(&x.g.ctx, x.g.m, NULL, &keep);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x.g));
	ck_assert_uint_eq(cg_program_n_entries(p), 1);
	ck_assert(cg_program_entry(p, "f") != NULL);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

/* Every op of the unary family in ops.def, so that a new one cannot go
 * unchecked; log and sqrt on |x|, inside their domain. */
START_TEST(test_every_float_unary_op_matches_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 7, 13));
	ir_id pos = op1(&x, IR_OP_ABS, a, NULL);
	int n_ops = 0;
	for (ir_op op = 0; op < IR_OP_COUNT; op++) {
		if (ir_op_table[op].family != IR_FAM_UNARY)
			continue;
		bool is_pos = op == IR_OP_LOG || op == IR_OP_SQRT;
		ret(&x, op1(&x, op, is_pos ? pos : a, NULL));
		n_ops++;
	}
	ck_assert_int_ge(n_ops, 11);
	ret(&x, to_type(&x, IR_OP_CAST, a, tu_type(IR_I32, 2, 7, 13)));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_exp_tanh_and_sigmoid_hold_over_the_whole_float_range)
{
	fx x;
	fx_init(&x);
	float sp[16] = {-1e30f, -104,  -87.5f,   -87.3f, -10, -1e-3f,
			0,      1e-8f, 0.5f,     0.625f, 10,  88,
			88.7f,  89,    INFINITY, NAN};
	ir_id a = op2(&x, IR_OP_ADD, tu_const(&x.g, tu_type(IR_F32, 1, 16), sp),
		      tu_input(&x.g, tu_type(IR_F32, 2, 40, 16)), NULL);
	ret(&x, op1(&x, IR_OP_EXP, a, NULL));
	ret(&x, op1(&x, IR_OP_TANH, a, NULL));
	ret(&x, op1(&x, IR_OP_SIGMOID, a, NULL));
	run_cfg c = cfg_default();
	c.f_lo = -2;
	c.f_hi = 2;
	both b;
	run_both(&x, &c, &b);
	ck_assert_int_eq(b.got.status, 0);
	for (uint32_t o = 0; o < 3; o++)
		for (int i = 0; i < 640; i++) {
			float g = ((float *)b.got.out[o])[i];
			float w = ((float *)b.want[o].data)[i];
			if ((isnan(g) && isnan(w)) || g == w)
				continue;
			double e = tu_max_rel_err(&g, &w, 1, 1e-37, 1e-6);
			ck_assert_msg(e <= 1,
				      "op %u of %.9g: interp %.9g, jit %.9g", o,
				      (double)((float *)b.in[0].data)[i] +
					      sp[i % 16],
				      w, g);
		}
	both_fini(&x, &b);
	tu_graph_fini(&x.g);
}
END_TEST

/* A unary op of the JIT over 2^20 floats spread evenly by bit pattern
 * over [0, top] (top as float bits), each followed by its negative, the
 * last n_tail pairs replaced by tail[i] and its negative: v the inputs,
 * y the results. */
enum { SWEEP_N = 1 << 20 };

typedef struct sweep {
	fx x;
	interp_tensor in;
	jit_result r;
	const float *v, *y;
} sweep;

static void sweep_run(sweep *s, ir_op op, uint32_t top, const float *tail,
		      uint32_t n_tail)
{
	fx_init(&s->x);
	ret(&s->x, op1(&s->x, op,
		       tu_input(&s->x.g, tu_type(IR_F32, 1, SWEEP_N)), NULL));
	int64_t dims[1] = {SWEEP_N};
	ck_assert(interp_tensor_alloc(&s->x.g.ctx, &s->in, IR_F32, 1, dims));
	float *v = s->in.data;
	for (uint32_t i = 0; i < SWEEP_N / 2; i++) {
		uint32_t bits = (uint32_t)((uint64_t)i * top / (SWEEP_N / 2));
		memcpy(&v[2 * i], &bits, 4);
		v[2 * i + 1] = -v[2 * i];
	}
	for (uint32_t i = 0; i < n_tail; i++) {
		v[SWEEP_N - 2 * n_tail + 2 * i] = tail[i];
		v[SWEEP_N - 2 * n_tail + 2 * i + 1] = -tail[i];
	}
	run_cfg c = cfg_default();
	s->r = jit_run(&s->x, NULL, &s->in, NULL, &c);
	ck_assert_int_eq(s->r.status, 0);
	s->v = v;
	s->y = s->r.out[0];
}

static void sweep_fini(sweep *s)
{
	jit_result_fini(&s->r, 1);
	interp_tensor_fini(&s->x.g.ctx, &s->in);
	tu_graph_fini(&s->x.g);
}

/* The JIT's tanh, a rational function, against tanh in double over
 * [-10, 10]: within 3.2e-7 relative (scripts/fit_tanh.py measures 3.0e-7
 * over every float), never past 1, odd to the bit, and x itself below
 * 2^-12. */
START_TEST(test_tanh_holds_its_error_bound_over_a_million_floats)
{
	sweep s;
	sweep_run(&s, IR_OP_TANH, 0x41200000u, NULL, 0); /* 10.0f */
	const float *v = s.v, *y = s.y;
	double worst = 0;
	for (uint32_t i = 0; i < SWEEP_N; i++) {
		double want = tanh((double)v[i]);
		ck_assert_msg(fabsf(y[i]) <= 1, "tanh(%.9g) = %.9g", v[i], y[i]);
		if (fabsf(v[i]) < 0x1p-12f)
			ck_assert_msg(y[i] == v[i], "tanh(%.9g) = %.9g", v[i],
				      y[i]);
		if (i % 2)
			ck_assert_msg(y[i] == -y[i - 1],
				      "tanh(%.9g) = %.9g, tanh(%.9g) = %.9g",
				      v[i], y[i], v[i - 1], y[i - 1]);
		else if (v[i] > 0)
			worst = fmax(worst, fabs(y[i] - want) / want);
	}
	ck_assert_msg(worst <= 3.2e-7, "worst relative error %.3g", worst);
	ck_assert_msg(worst > 1e-8,
		      "worst relative error %.3g: not a float tanh?", worst);
	sweep_fini(&s);
}
END_TEST

/* The JIT's sigmoid, through e^-|x|, against 1 / (1 + e^-x) in double
 * over [-104, 104]: within 4 float ulps (relative 4.8e-7; 1.9e-7
 * measured) down to the smallest normal float, flushed to 0 below it,
 * and sigmoid(-x) = 1 - sigmoid(x) to 1e-7. */
START_TEST(test_sigmoid_holds_its_error_bound_over_a_million_floats)
{
	sweep s;
	sweep_run(&s, IR_OP_SIGMOID, 0x42d00000u, NULL, 0); /* 104.0f */
	const float *v = s.v, *y = s.y;
	double worst = 0;
	for (uint32_t i = 0; i < SWEEP_N; i++) {
		double want = 1 / (1 + exp(-(double)v[i]));
		if (want < 0x1p-126) {
			ck_assert_msg(y[i] <= 0x1p-126f, "sigmoid(%.9g) = %.9g",
				      v[i], y[i]);
			continue;
		}
		worst = fmax(worst, fabs(y[i] - want) / want);
		if (i % 2)
			ck_assert_msg(fabs((double)y[i] + y[i - 1] - 1) <= 1e-7,
				      "sigmoid(%.9g) = %.9g, sigmoid(%.9g) = %.9g",
				      v[i], y[i], v[i - 1], y[i - 1]);
	}
	ck_assert_msg(worst <= 4.8e-7, "worst relative error %.3g", worst);
	sweep_fini(&s);
}
END_TEST

/* The JIT's erf on a million floats spread evenly by bit pattern over
 * [0, the float of bits hi], each with its negative, then the n_tail
 * floats of tail: within 2 ulps of erf in double wherever that is a
 * float (subnormal results in the subnormals' ulps), odd to the bit,
 * never past 1, 1 exactly from 3.92 on, NaN at NaN. */
static void check_erf_sweep(uint32_t hi, const float *tail, uint32_t n_tail)
{
	sweep s;
	sweep_run(&s, IR_OP_ERF, hi, tail, n_tail);
	const float *v = s.v, *y = s.y;
	double worst = 0;
	float at = 0;
	for (uint32_t i = 0; i < SWEEP_N; i++) {
		if (isnan(v[i])) {
			ck_assert_msg(isnan(y[i]), "erf(nan) = %.9g", y[i]);
			continue;
		}
		ck_assert_msg(fabsf(y[i]) <= 1, "erf(%.9g) = %.9g", v[i], y[i]);
		ck_assert_msg(signbit(y[i]) == signbit(v[i]),
			      "erf(%.9g) = %.9g", v[i], y[i]);
		if (i % 2)
			ck_assert_msg(y[i] == -y[i - 1], "erf(%.9g) = %.9g",
				      v[i], y[i]);
		if (fabsf(v[i]) >= 3.92f)
			ck_assert_msg(fabsf(y[i]) == 1, "erf(%.9g) = %.9g",
				      v[i], y[i]);
		double want = erf((double)v[i]);
		float w = fabsf((float)want);
		double ulp = (double)nextafterf(w, INFINITY) - w;
		double e = fabs(y[i] - want) / ulp;
		if (e > worst) {
			worst = e;
			at = v[i];
		}
	}
	ck_assert_msg(worst <= 2, "worst error %.3g ulps at %.9g", worst,
		      (double)at);
	sweep_fini(&s);
}

/* Over [-5, 5], where erf is not yet 1 (scripts/fit_erf.py measures
 * 1.71 ulps over every float below 1, 1.33 from 1 on). */
START_TEST(test_erf_holds_its_error_bound_over_a_million_floats)
{
	check_erf_sweep(0x40a00000u, NULL, 0); /* 5.0f */
}
END_TEST

/* Over the whole float range, subnormals among them, with the
 * infinities (+-1), NaN, the largest float, the smallest subnormal and
 * +-0 (+-0). */
START_TEST(test_erf_holds_its_error_bound_over_every_float_range)
{
	static const float tail[] = {__builtin_inff(), __builtin_nanf(""),
				     0x1.fffffep127f, 0x1p-149f, 0.0f};
	check_erf_sweep(0x7f7fffffu, tail, 5);
}
END_TEST

/* e^(-(a a)) computed in one kernel takes exp's cheaper half, which
 * rounds as the whole exp does wherever its argument is not positive:
 * the same bits as e^z of the same arguments z = -(a a) read from a
 * buffer, for a over [-15, 15] (down to results that flush to 0),
 * infinities and NaN. */
START_TEST(test_exp_of_a_negated_square_rounds_as_exp)
{
	enum { N = 1 << 16 };
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 1, N));
	ir_id z = tu_input(&x.g, tu_type(IR_F32, 1, N));
	ret(&x, op1(&x, IR_OP_EXP,
		    op1(&x, IR_OP_NEG, op2(&x, IR_OP_MUL, a, a, NULL), NULL),
		    NULL));
	ret(&x, op1(&x, IR_OP_EXP, z, NULL));
	int64_t dims[1] = {N};
	interp_tensor in[2];
	ck_assert(interp_tensor_alloc(&x.g.ctx, &in[0], IR_F32, 1, dims));
	ck_assert(interp_tensor_alloc(&x.g.ctx, &in[1], IR_F32, 1, dims));
	float *av = in[0].data, *zv = in[1].data;
	for (int i = 0; i < N; i++)
		av[i] = -15.0f + 30.0f * (float)i / (float)(N - 4);
	av[N - 3] = __builtin_inff();
	av[N - 2] = -__builtin_inff();
	av[N - 1] = __builtin_nanf("");
	for (int i = 0; i < N; i++)
		zv[i] = -(av[i] * av[i]);
	run_cfg c = cfg_default();
	jit_result r = jit_run(&x, NULL, in, NULL, &c);
	ck_assert_int_eq(r.status, 0);
	const float *fused = r.out[0], *plain = r.out[1];
	for (int i = 0; i < N; i++)
		ck_assert_msg(memcmp(&fused[i], &plain[i], 4) == 0 ||
				      (isnan(fused[i]) && isnan(plain[i])),
			      "e^-(%.9g^2): %a fused, %a from a buffer", av[i],
			      fused[i], plain[i]);
	ck_assert(fused[N / 2] > 0.99f && fused[0] == 0);
	jit_result_fini(&r, 2);
	interp_tensor_fini(&x.g.ctx, &in[0]);
	interp_tensor_fini(&x.g.ctx, &in[1]);
	tu_graph_fini(&x.g);
}
END_TEST

/* Every op of the binary and compare families in ops.def; pow on |a|. */
START_TEST(test_every_float_binary_op_broadcasts_like_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 4, 2, 1, 3, 5));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 3, 6, 1, 5));
	ir_id s = tu_input(&x.g, tu_type(IR_F32, 0));
	ir_id pos = op1(&x, IR_OP_ABS, a, NULL);
	int n_ops = 0;
	for (ir_op op = 0; op < IR_OP_COUNT; op++) {
		ir_op_family fam = ir_op_table[op].family;
		if (fam != IR_FAM_BINARY && fam != IR_FAM_COMPARE)
			continue;
		bool is_pos = op == IR_OP_POW;
		ret(&x, op2(&x, op, is_pos ? pos : a, b, NULL));
		if (!is_pos)
			ret(&x, op2(&x, op, s, a, NULL));
		n_ops++;
	}
	ck_assert_int_ge(n_ops, 13);
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_integer_ops_wrap_and_truncate_like_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_I32, 2, 5, 7));
	ir_id b = tu_input(&x.g, tu_type(IR_I32, 1, 7));
	/* Every op ops.def says takes integers, and every comparison. */
	for (ir_op op = 0; op < IR_OP_COUNT; op++) {
		const ir_op_info *info = &ir_op_table[op];
		if (info->family == IR_FAM_COMPARE ||
		    (info->family == IR_FAM_BINARY && (info->flags & IR_OPF_INT)))
			ret(&x, op2(&x, op, a, b, NULL));
		else if (info->family == IR_FAM_UNARY &&
			 (info->flags & IR_OPF_INT))
			ret(&x, op1(&x, op, a, NULL));
	}
	ret(&x, to_type(&x, IR_OP_CAST, a, tu_type(IR_F32, 2, 5, 7)));
	run_cfg c = cfg_default();
	c.int_lo = -40000; /* products wrap */
	c.int_hi = 40000;
	check_cfg(&x, &c);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_select_picks_by_a_broadcast_condition)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 4, 6));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 2, 4, 6));
	ir_id c = op2(&x, IR_OP_GT, tu_input(&x.g, tu_type(IR_F32, 1, 6)),
		      tu_input(&x.g, tu_type(IR_F32, 2, 4, 1)), NULL);
	ir_id args[3] = {c, a, b};
	ret(&x, tu_build(&x.g, IR_OP_SELECT, args, 3, NULL, NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

/* ---- matmul ------------------------------------------------------------------- */

static void matmul_case(int ta, int tb, bool big)
{
	fx x;
	fx_init(&x);
	int M = big ? 67 : 5, K = big ? 45 : 3, N = big ? 70 : 7;
	ir_type at = ta ? tu_type(IR_F32, 4, 2, 1, K, M)
			: tu_type(IR_F32, 4, 2, 1, M, K);
	ir_type bt = tb ? tu_type(IR_F32, 3, 4, N, K)
			: tu_type(IR_F32, 3, 4, K, N);
	ir_attr attr = {.matmul = {ta, tb}};
	ret(&x, op2(&x, IR_OP_MATMUL, tu_input(&x.g, at), tu_input(&x.g, bt),
		    &attr));
	run_cfg c = cfg_default();
	c.tol = 1e-4;
	check_cfg(&x, &c);
	tu_graph_fini(&x.g);
}

START_TEST(test_matmul_broadcasts_batch_dims_with_every_transpose)
{
	matmul_case(_i & 1, _i >> 1, false);
}
END_TEST

START_TEST(test_matmul_of_odd_larger_shapes_matches_the_interpreter)
{
	matmul_case(_i & 1, _i >> 1, true);
}
END_TEST

START_TEST(test_matmul_with_a_shared_right_operand_matches_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_attr attr = {.matmul = {_i & 1, _i >> 1}};
	ir_type at = _i & 1 ? tu_type(IR_F32, 3, 3, 40, 50)
			    : tu_type(IR_F32, 3, 3, 50, 40);
	ir_type bt = _i >> 1 ? tu_type(IR_F32, 2, 60, 40)
			     : tu_type(IR_F32, 2, 40, 60);
	ret(&x, op2(&x, IR_OP_MATMUL, tu_input(&x.g, at), tu_input(&x.g, bt),
		    &attr));
	run_cfg c = cfg_default();
	c.tol = 1e-4;
	check_cfg(&x, &c);
	tu_graph_fini(&x.g);
}
END_TEST

/* ---- reductions --------------------------------------------------------------- */

START_TEST(test_reductions_over_any_axes_match_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 4, 3, 5, 2, 7));
	ir_id ai = tu_input(&x.g, tu_type(IR_I32, 3, 3, 5, 7));
	static const uint32_t masks[] = {1, 2, 4, 8, 5, 10, 6, 15, 9};
	for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++)
		for (int keep = 0; keep < 2; keep++) {
			ir_attr r = {.reduce = {masks[i], keep}};
			ret(&x, op1(&x, IR_OP_SUM, a, &r));
			ret(&x, op1(&x, IR_OP_MEAN, a, &r));
			ret(&x, op1(&x, IR_OP_MAX, a, &r));
		}
	ir_attr r1 = {.reduce = {2, false}}, r3 = {.reduce = {7, false}};
	ret(&x, op1(&x, IR_OP_SUM, ai, &r1));
	ret(&x, op1(&x, IR_OP_MAX, ai, &r3));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_argmax_takes_the_first_maximum)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 4, 6, 5));
	ir_id ai = tu_input(&x.g, tu_type(IR_I32, 2, 6, 9));
	for (uint32_t ax = 0; ax < 3; ax++) {
		ir_attr r = {.reduce = {1u << ax, ax == 1}};
		ret(&x, op1(&x, IR_OP_ARGMAX, a, &r));
	}
	ir_attr r = {.reduce = {2, false}};
	ret(&x, op1(&x, IR_OP_ARGMAX, ai, &r)); /* ints 0..5: many ties */
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_argmin_takes_the_first_minimum_as_the_interpreter)
{
	fx x;
	fx_init(&x);
	float v[5] = {1, NAN, 3, -2, 0.5f};
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 4, 6, 5));
	ir_id ai = tu_input(&x.g, tu_type(IR_I32, 2, 6, 9));
	ir_id c = tu_const(&x.g, tu_type(IR_F32, 1, 5), v);
	for (uint32_t ax = 0; ax < 3; ax++) {
		ir_attr r = {.reduce = {1u << ax, ax == 1}};
		ret(&x, op1(&x, IR_OP_ARGMIN, a, &r));
	}
	ir_attr r = {.reduce = {2, false}};
	ret(&x, op1(&x, IR_OP_ARGMIN, ai, &r)); /* ints 0..5: many ties */
	ir_id n = op2(&x, IR_OP_ADD, c,
		      tu_input(&x.g, tu_type(IR_F32, 2, 3, 5)), NULL);
	ret(&x, op1(&x, IR_OP_ARGMIN, n, &r)); /* a NaN in every row */
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_sum_to_rank_zero_and_nan_max_match_the_interpreter)
{
	fx x;
	fx_init(&x);
	float v[5] = {1, NAN, 3, -2, 0.5f};
	ir_id c = tu_const(&x.g, tu_type(IR_F32, 1, 5), v);
	ir_id a = op2(&x, IR_OP_ADD, c,
		      tu_input(&x.g, tu_type(IR_F32, 2, 3, 5)), NULL);
	ir_attr all = {.reduce = {3, false}}, row = {.reduce = {2, false}};
	ret(&x,
	    op1(&x, IR_OP_SUM, tu_input(&x.g, tu_type(IR_F32, 2, 3, 5)), &all));
	ret(&x, op1(&x, IR_OP_MAX, a, &row));
	ir_attr am = {.reduce = {2, false}};
	ret(&x, op1(&x, IR_OP_ARGMAX, a, &am));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

/* ---- softmax family, layer norm, dropout ----------------------------------------- */

START_TEST(test_softmax_and_log_softmax_match_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 2, 5, 11));
	ret(&x, op1(&x, IR_OP_SOFTMAX, a, NULL));
	ret(&x, op1(&x, IR_OP_LOG_SOFTMAX, a, NULL));
	ret(&x,
	    op1(&x, IR_OP_SOFTMAX, tu_input(&x.g, tu_type(IR_F32, 1, 9)), NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_masked_softmax_keeps_rows_of_length_zero_uniform)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 3, 4, 6));
	ir_attr fill = {.fill = -1e6};
	ret(&x, op2(&x, IR_OP_MASKED_SOFTMAX, a,
		    tu_input(&x.g, tu_type(IR_I32, 1, 3)), &fill));
	ret(&x, op2(&x, IR_OP_MASKED_SOFTMAX, a,
		    tu_input(&x.g, tu_type(IR_I32, 2, 3, 4)), &fill));
	ret(&x, op2(&x, IR_OP_MASKED_SOFTMAX, a,
		    tu_input(&x.g, tu_type(IR_I32, 2, 1, 4)), &fill));
	run_cfg c = cfg_default();
	c.int_lo = -1;
	c.int_hi = 7;
	both b;
	run_both(&x, &c, &b);
	ck_assert_int_eq(b.got.status, 0);
	for (uint32_t o = 0; o < x.g.f->n_outputs; o++)
		compare(&b.want[o], &b.got, o, c.tol);
	/* A row with valid length <= 0 is uniform: 1/6 everywhere. */
	const int32_t *valid = b.in[1].data;
	const float *out = b.got.out[0];
	for (int r = 0; r < 3; r++)
		if (valid[r] <= 0)
			for (int j = 0; j < 24; j++)
				ck_assert_float_eq_tol(out[r * 24 + j],
						       1.0f / 6, 1e-7);
	both_fini(&x, &b);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_layer_norm_matches_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 2, 3, 33));
	ir_id args[3] = {a,
			 param(&x, "g", tu_type(IR_F32, 1, 33), IR_INIT_UNIFORM),
			 param(&x, "b", tu_type(IR_F32, 1, 33), IR_INIT_UNIFORM)};
	ir_attr eps = {.eps = 1e-5};
	ret(&x, tu_build(&x.g, IR_OP_LAYER_NORM, args, 3, &eps, NULL));
	run_cfg c = cfg_default();
	c.tol = 1e-4;
	check_cfg(&x, &c);
	tu_graph_fini(&x.g);
}
END_TEST

/* Rows of no columns: layer_norm and layer_norm_grad compile (their row
 * sums have no tile to fill) and give an empty result. */
START_TEST(test_layer_norm_of_empty_rows_compiles)
{
	fx x;
	fx_init(&x);
	ir_type t = tu_type(IR_F32, 2, 5, 0);
	ir_id a = tu_input(&x.g, t);
	ir_id g = param(&x, "g", tu_type(IR_F32, 1, 0), IR_INIT_UNIFORM);
	ir_id ln[3] = {a, g,
		       param(&x, "b", tu_type(IR_F32, 1, 0), IR_INIT_UNIFORM)};
	ir_attr eps = {.eps = 1e-5};
	ret(&x, tu_build(&x.g, IR_OP_LAYER_NORM, ln, 3, &eps, NULL));
	ir_id lng[3] = {a, g, tu_input(&x.g, t)};
	ret(&x, tu_build(&x.g, IR_OP_LAYER_NORM_GRAD, lng, 3, &eps, NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

/* layer_norm's gradient in x as one row kernel (rows of 33: a vector
 * remainder; of 300: longer than a vector loop's unrolled body), against
 * the interpreter. */
START_TEST(test_layer_norm_grad_matches_the_interpreter)
{
	for (int r = 0; r < 2; r++) {
		int64_t K = r ? 300 : 33;
		fx x;
		fx_init(&x);
		ir_type t = tu_type(IR_F32, 3, 2, 3, K);
		ir_id args[3] = {tu_input(&x.g, t),
				 param(&x, "g", tu_type(IR_F32, 1, K),
				       IR_INIT_UNIFORM),
				 tu_input(&x.g, t)};
		ir_attr eps = {.eps = 1e-5};
		ret(&x,
		    tu_build(&x.g, IR_OP_LAYER_NORM_GRAD, args, 3, &eps, NULL));
		run_cfg c = cfg_default();
		c.tol = 1e-4;
		check_cfg(&x, &c);
		c.n_threads = 2;
		c.grain = 1; /* the rows split over the threads */
		check_cfg(&x, &c);
		tu_graph_fini(&x.g);
	}
}
END_TEST

/* The rows of layer_norm_grad's input: g of row r zero (signs mixed)
 * but for every fourth row; x's row 5 with a NaN, row 6 with an inf,
 * row 7 alternating +-1e20 (its variance overflows), row 9 constant (a
 * variance of 0: with eps 0, sd is 0); gamma with -0 and +0, and with
 * an inf at column 4 when has_inf. */
static void ln_grad_rows(both *b, int64_t R, int64_t K, bool has_inf)
{
	float *xs = b->in[0].data, *gam = b->params[0].data, *dy = b->in[1].data;
	gam[0] = -0.0f;
	gam[1] = 0.0f;
	if (has_inf)
		gam[4] = INFINITY;
	for (int64_t r = 0; r < R; r++) {
		for (int64_t j = 0; j < K && r % 4; j++)
			dy[r * K + j] = (j + r) % 3 ? 0.0f : -0.0f;
		for (int64_t j = 0; j < K && (r == 7 || r == 9); j++)
			xs[r * K + j] = r == 9 ? 0.5f : j % 2 ? 1e20f : -1e20f;
	}
	xs[5 * K + 2] = NAN;
	xs[6 * K + 3] = INFINITY;
}

/* A row of layer_norm_grad whose g gamma is all zero (a masked loss's
 * padding row) skips the divisions: the interpreter's bits, zeros' signs
 * included; rows with a NaN or inf in x or gamma, or a variance that
 * overflows or is 0 with eps 0, are the full pass's (NaN, or zeros from
 * x / inf). */
START_TEST(test_layer_norm_grad_rows_of_zero_gradient_keep_the_bits)
{
	const int64_t R = 12, K = 33;
	for (int v = 0; v < 6; v++) {
		fx x;
		fx_init(&x);
		ir_type t = tu_type(IR_F32, 2, R, K);
		ir_id args[3] = {tu_input(&x.g, t),
				 param(&x, "g", tu_type(IR_F32, 1, K),
				       IR_INIT_UNIFORM),
				 tu_input(&x.g, t)};
		ir_attr eps = {.eps = v >= 4 ? 0 : 1e-5};
		ret(&x,
		    tu_build(&x.g, IR_OP_LAYER_NORM_GRAD, args, 3, &eps, NULL));
		run_cfg c = cfg_default();
		c.n_threads = 1 + v % 2;
		c.grain = 1;
		both b;
		memset(&b, 0, sizeof b);
		make_inputs(&x, &c, b.in);
		ck_assert(interp_bind_syms(&x.g.ctx, x.g.m, x.g.f, b.in, b.syms));
		ck_assert(interp_params_init(&x.g.ctx, x.g.m, b.syms, 42, false,
					     b.params));
		ln_grad_rows(&b, R, K, v == 2 || v == 3);
		interp_opts o = {0};
		ck_assert(interp_run(&x.g.ctx, x.g.m, x.g.f, &o, b.params, b.in,
				     b.want));
		b.got = jit_run(&x, b.syms, b.in, b.params, &c);
		ck_assert_int_eq(b.got.status, 0);
		const float *want = b.want[0].data, *got = b.got.out[0];
		int n_nan = 0, n_neg0 = 0;
		for (int64_t i = 0; i < R * K; i++) {
			if (i / K % 4 == 0) { /* g not zero: to a tolerance */
				ck_assert(want[i] == got[i] ||
					  (isnan(want[i]) && isnan(got[i])) ||
					  tu_max_rel_err(&got[i], &want[i], 1,
							 1e-4, 1e-4) <= 1);
				continue;
			}
			n_nan += isnan(got[i]);
			n_neg0 += got[i] == 0 && signbit(got[i]);
			if (isnan(want[i]) && isnan(got[i]))
				continue;
			ck_assert_msg(memcmp(&want[i], &got[i], 4) == 0,
				      "row %lld column %lld: interp %g, jit %g",
				      (long long)(i / K), (long long)(i % K),
				      want[i], got[i]);
		}
		/* rows 5 and 6 at least, and 9 with eps 0 (0 / 0); with
		 * gamma's inf (0 inf is NaN, and so is then each zero row's
		 * mean of g gamma) all nine */
		bool is_inf = v == 2 || v == 3;
		ck_assert_int_ge(n_nan, is_inf   ? 9 * K
					: v >= 4 ? 3 * K
						 : 2 * K);
		ck_assert_int_gt(n_neg0, is_inf ? -1 : 0);
		both_fini(&x, &b);
		tu_graph_fini(&x.g);
	}
}
END_TEST

START_TEST(test_dropout_in_training_masks_bit_for_bit_like_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 37, 41));
	ir_attr d1 = {.dropout = {0.1, 3}}, d2 = {.dropout = {0.5, 4}};
	x.g.m->n_dropout_streams = 5;
	ret(&x, op1(&x, IR_OP_DROPOUT, a, &d1));
	ret(&x, op1(&x, IR_OP_DROPOUT, a, &d2));
	run_cfg c = cfg_default();
	c.is_training = true;
	c.seed = 0xdeadbeef;
	c.step = 12345;
	c.tol = 0;
	both b;
	run_both(&x, &c, &b);
	ck_assert_int_eq(b.got.status, 0);
	for (uint32_t o = 0; o < 2; o++) {
		ck_assert_mem_eq(b.want[o].data, b.got.out[o], 37 * 41 * 4);
		int zeros = 0;
		for (int i = 0; i < 37 * 41; i++)
			zeros += ((float *)b.got.out[o])[i] == 0;
		/* About p of the elements dropped. */
		double p = o ? 0.5 : 0.1;
		ck_assert(fabs(zeros / (37.0 * 41) - p) < 0.05);
	}
	both_fini(&x, &b);
	c.is_training = false;
	check_cfg(&x, &c); /* evaluation: the identity */
	tu_graph_fini(&x.g);
}
END_TEST

/* Dropouts that differ only in their random stream share one kernel,
 * which takes the streams as an argument (cg_lower_stream.c): two plain
 * ones and two fused into an add make two kernels, not four, and each
 * still draws its own mask, bit for bit like the interpreter, through a
 * direct call and through the parallel body. */
START_TEST(test_dropouts_differing_in_stream_share_a_kernel)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 37, 41));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 2, 37, 41));
	x.g.m->n_dropout_streams = 8;
	for (uint32_t s = 1; s <= 2; s++)
		ret(&x,
		    op1(&x, IR_OP_DROPOUT, a, &(ir_attr){.dropout = {0.3, s}}));
	for (uint32_t s = 5; s <= 6; s++)
		ret(&x, op2(&x, IR_OP_ADD,
			    op1(&x, IR_OP_DROPOUT, a,
				&(ir_attr){.dropout = {0.3, s}}),
			    b, NULL));
	run_cfg c = cfg_default();
	c.is_training = true;
	c.seed = 0x5eed;
	c.step = 77;
	c.tol = 0;
	for (int threads = 1; threads <= 2; threads++) {
		c.n_threads = threads;
		c.grain = threads == 2 ? 1 : 0;
		both r;
		run_both(&x, &c, &r);
		ck_assert_int_eq(r.got.status, 0);
		ck_assert_uint_eq(r.got.n_kernels, 2);
		for (uint32_t o = 0; o < 4; o++)
			ck_assert_mem_eq(r.want[o].data, r.got.out[o],
					 37 * 41 * 4);
		ck_assert(memcmp(r.got.out[0], r.got.out[1], 37 * 41 * 4) != 0);
		ck_assert(memcmp(r.got.out[2], r.got.out[3], 37 * 41 * 4) != 0);
		both_fini(&x, &r);
	}
	tu_graph_fini(&x.g);
}
END_TEST

/* ---- indexing and losses ------------------------------------------------------------ */

START_TEST(test_embedding_gathers_rows_of_the_table)
{
	fx x;
	fx_init(&x);
	ir_id ids = tu_input(&x.g, tu_type(IR_I32, 2, 3, 4));
	ir_id tab = param(&x, "E", tu_type(IR_F32, 2, 6, 5), IR_INIT_UNIFORM);
	ret(&x, op2(&x, IR_OP_EMBEDDING, ids, tab, NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_one_hot_and_embedding_grad_match_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id ids = tu_input(&x.g, tu_type(IR_I32, 2, 7, 5));
	ir_id g = tu_input(&x.g, tu_type(IR_F32, 3, 7, 5, 9));
	ret(&x, to_type(&x, IR_OP_ONE_HOT, ids, tu_type(IR_F32, 3, 7, 5, 6)));
	ir_id args[2] = {ids, g};
	ret(&x, tu_build(&x.g, IR_OP_EMBEDDING_GRAD, args, 2, NULL,
			 &(ir_type){.dtype = IR_F32,
				    .rank = 2,
				    .dims = {{6, -1}, {9, -1}}}));
	run_cfg c = cfg_default();
	c.int_hi = 5; /* ids 0..5 of 6 rows: repeats, and a row never used */
	check_cfg(&x, &c);
	c.n_threads = 2;
	c.grain = 1; /* every kernel parallel: rows split over the threads */
	check_cfg(&x, &c);
	tu_graph_fini(&x.g);
}
END_TEST

/* Four rows of 19 logits: finite; with a NaN at 3; with +inf at 5;
 * nothing but -inf. */
static void non_finite_rows(float *v)
{
	for (int i = 0; i < 4 * 19; i++)
		v[i] = (float)((i * 7) % 19) * 0.25f - 2;
	v[19 + 3] = NAN;
	v[2 * 19 + 5] = INFINITY;
	for (int i = 0; i < 19; i++)
		v[3 * 19 + i] = -INFINITY;
}

/* v as (4, 19) logits, and labels 4, 3, 5, 0 in *lb. */
static ir_id non_finite_consts(fx *x, const float *v, ir_id *lb)
{
	static const int32_t lab[4] = {4, 3, 5, 0};
	*lb = tu_const(&x->g, tu_type(IR_I32, 1, 4), lab);
	return tu_const(&x->g, tu_type(IR_F32, 2, 4, 19), v);
}

/* Rows with a NaN, an infinity or nothing but -inf give what the
 * interpreter gives (NaN rows), also where the row's max is vectorized. */
START_TEST(test_softmax_and_cross_entropy_of_non_finite_rows_match_the_interpreter)
{
	fx x;
	fx_init(&x);
	float v[4 * 19];
	non_finite_rows(v);
	v[19 + 17] = NAN;
	ir_id lb, lg = non_finite_consts(&x, v, &lb);
	ret(&x, op1(&x, IR_OP_SOFTMAX, lg, NULL));
	ret(&x, op1(&x, IR_OP_LOG_SOFTMAX, lg, NULL));
	ret(&x, op2(&x, IR_OP_CROSS_ENTROPY, lg, lb, NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_index_out_of_range_returns_the_error_code_of_its_node)
{
	fx x;
	fx_init(&x);
	ir_id ids = tu_input(&x.g, tu_type(IR_I32, 1, 3));
	ir_id tab = param(&x, "E", tu_type(IR_F32, 2, 4, 2), IR_INIT_ZEROS);
	ir_id e = op2(&x, IR_OP_EMBEDDING, ids, tab, NULL);
	ir_id lg = tu_input(&x.g, tu_type(IR_F32, 2, 3, 5));
	ir_id ce = op2(&x, IR_OP_CROSS_ENTROPY, lg, ids, NULL);
	ret(&x, e);
	ret(&x, ce);
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x.g));
	char *pb = aligned_alloc(64, round64(cg_program_params_bytes(p)));
	char *sb = aligned_alloc(64, round64(cg_program_scratch_bytes(p, "f")));
	memset(pb, 0, round64(cg_program_params_bytes(p)));
	int32_t idv[3] = {0, 3, 1};
	float lgv[15] = {0}, o1[6], o2[3];
	const void *ins[2] = {idv, lgv};
	void *outs[2] = {o1, o2};
	attnrt_run run = {0, 0, 0, 1};
	attnrt_entry_fn fn = cg_program_entry(p, "f");
	ck_assert_int_eq(fn(&run, pb, sb, ins, outs), 0);
	ck_assert_float_eq_tol(o2[0], logf(5), 1e-6);
	idv[1] = 4;
	ck_assert_int_eq(fn(&run, pb, sb, ins, outs),
			 ATTNRT_ERR_INDEX | (int)(e << 8));
	idv[1] = -1;
	ck_assert_int_eq(fn(&run, pb, sb, ins, outs),
			 ATTNRT_ERR_INDEX | (int)(e << 8));
	free(pb);
	free(sb);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

/* Occurrences of what in s. */
static int count_of(const char *s, const char *what)
{
	int n = 0;
	for (const char *at = s; (at = strstr(at, what)); at++)
		n++;
	return n;
}

/* Two lookups of the same shape share a parallel kernel; in order, both
 * go through its one launcher (one GOMP_parallel of its body in the
 * whole module, not one a call), which passes a failing piece's status
 * back from the team, and runs the kernel itself at one thread. */
START_TEST(test_a_parallel_kernel_called_twice_in_order_fails_through_its_launcher)
{
	fx x;
	fx_init(&x);
	ir_id ids = tu_input(&x.g, tu_type(IR_I32, 1, 4096));
	ir_id ids2 = tu_input(&x.g, tu_type(IR_I32, 1, 4096));
	ir_id tab = param(&x, "E", tu_type(IR_F32, 2, 4, 16), IR_INIT_ZEROS);
	ir_id e = op2(&x, IR_OP_EMBEDDING, ids, tab, NULL);
	ir_id e2 = op2(&x, IR_OP_EMBEDDING, ids2, tab, NULL);
	ret(&x, e);
	ret(&x, e2);
	cg_program_options o = {.grain = 1024, .sched_threads = 1};
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, &o);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	char *ir;
	size_t len;
	ck_assert(cg_program_emit_buffer(p, CG_EMIT_LLVM, &ir, &len));
	ck_assert_int_eq(count_of(ir, "embedding.launch("), 3); /* 1 + 2 */
	ck_assert_int_eq(count_of(ir, "@GOMP_parallel(ptr @"), 1);
	free(ir);
	ck_assert_msg(cg_program_jit(p), "%s", tu_graph_diag(&x.g));
	size_t pbytes = round64(cg_program_params_bytes(p));
	char *pb = aligned_alloc(64, pbytes);
	char *sb = aligned_alloc(64, round64(cg_program_scratch_bytes(p, "f")));
	memset(pb, 0, pbytes);
	int32_t *idv = calloc(2 * 4096, sizeof *idv);
	float *o1 = malloc(2 * 4096 * 16 * sizeof *o1);
	const void *ins[2] = {idv, idv + 4096};
	void *outs[2] = {o1, o1 + 4096 * 16};
	attnrt_entry_fn fn = cg_program_entry(p, "f");
	for (int32_t t = 1; t <= 2; t++) {
		attnrt_run run = {0, 0, 0, t};
		idv[4096 + 4000] = 0;
		ck_assert_int_eq(fn(&run, pb, sb, ins, outs), 0);
		idv[4096 + 4000] = 4;
		ck_assert_int_eq(fn(&run, pb, sb, ins, outs),
				 ATTNRT_ERR_INDEX | (int)(e2 << 8));
	}
	free(idv);
	free(o1);
	free(pb);
	free(sb);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_label_out_of_range_fails_cross_entropy)
{
	fx x;
	fx_init(&x);
	ir_id lg = tu_input(&x.g, tu_type(IR_F32, 2, 2, 3));
	ir_id ce = op2(&x, IR_OP_CROSS_ENTROPY, lg,
		       tu_input(&x.g, tu_type(IR_I32, 1, 2)), NULL);
	ret(&x, ce);
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x.g));
	char *sb = aligned_alloc(64, round64(cg_program_scratch_bytes(p, "f")));
	float lgv[6] = {0};
	int32_t lb[2] = {2, 3};
	float out[2];
	const void *ins[2] = {lgv, lb};
	void *outs[1] = {out};
	attnrt_run run = {0, 0, 0, 1};
	ck_assert_int_eq(cg_program_entry(p, "f")(&run, NULL, sb, ins, outs),
			 ATTNRT_ERR_INDEX | (int)(ce << 8));
	free(sb);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

static ir_id ce_grad(fx *x, ir_id lg, ir_id lb, ir_id g)
{
	ir_id args[3] = {lg, lb, g};
	return tu_build(&x->g, IR_OP_CROSS_ENTROPY_GRAD, args, 3, NULL, NULL);
}

/* Vocabularies of 1 (every result 0), a few, one vector's width and
 * more, and the NMT models' 201, with rank 1, 2 and 3 logits; one and two
 * threads, rows split one by one. */
START_TEST(test_cross_entropy_grad_matches_the_interpreter)
{
	static const int64_t vs[] = {1, 2, 7, 16, 201};
	for (int i = 0; i < 5; i++) {
		int64_t V = vs[i];
		fx x;
		fx_init(&x);
		ir_id l1 = tu_input(&x.g, tu_type(IR_F32, 1, V));
		ir_id l2 = tu_input(&x.g, tu_type(IR_F32, 2, 5, V));
		ir_id l3 = tu_input(&x.g, tu_type(IR_F32, 3, 3, 4, V));
		ir_id b1 = tu_input(&x.g, tu_type(IR_I32, 0));
		ir_id b2 = tu_input(&x.g, tu_type(IR_I32, 1, 5));
		ir_id b3 = tu_input(&x.g, tu_type(IR_I32, 2, 3, 4));
		ret(&x, ce_grad(&x, l1, b1, tu_input(&x.g, tu_type(IR_F32, 0))));
		ret(&x,
		    ce_grad(&x, l2, b2, tu_input(&x.g, tu_type(IR_F32, 1, 5))));
		ret(&x, ce_grad(&x, l3, b3,
				tu_input(&x.g, tu_type(IR_F32, 2, 3, 4))));
		run_cfg c = cfg_default();
		c.int_hi = (int32_t)V - 1;
		check_cfg(&x, &c);
		c.n_threads = 2;
		c.grain = 1;
		check_cfg(&x, &c);
		tu_graph_fini(&x.g);
	}
}
END_TEST

/* One graph with cross_entropy, cross_entropy_grad and
 * cross_entropy_with_grad of R rows of V logits (a fused tanh + bias,
 * as the models' linear layer feeds them): the fused op matches the
 * interpreter, its parts are the unfused kernels' results bit for bit,
 * and 2 threads give 1 thread's bits. */
static void check_with_grad(int64_t R, int64_t V)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, R, V));
	ir_id bias = tu_input(&x.g, tu_type(IR_F32, 1, V));
	ir_id lg = op2(&x, IR_OP_ADD, op1(&x, IR_OP_TANH, a, NULL), bias, NULL);
	ir_id lb = tu_input(&x.g, tu_type(IR_I32, 1, R));
	ir_id g = tu_input(&x.g, tu_type(IR_F32, 1, R));
	ir_id args[3] = {lg, lb, g};
	ret(&x, op2(&x, IR_OP_CROSS_ENTROPY, lg, lb, NULL));
	ret(&x, ce_grad(&x, lg, lb, g));
	ret(&x,
	    tu_build(&x.g, IR_OP_CROSS_ENTROPY_WITH_GRAD, args, 3, NULL, NULL));
	run_cfg c = cfg_default();
	c.int_hi = (int32_t)V - 1;
	c.f_lo = -8.0f;
	c.f_hi = 8.0f;
	both b1, b2;
	x.rng = 0x1234567;
	run_both(&x, &c, &b1);
	ck_assert_int_eq(b1.got.status, 0);
	for (uint32_t o = 0; o < 3; o++)
		compare(&b1.want[o], &b1.got, o, c.tol);
	const float *loss = b1.got.out[0], *grad = b1.got.out[1],
		    *w = b1.got.out[2];
	ck_assert_msg(memcmp(w, grad, (size_t)(R * V) * 4) == 0,
		      "the gradient part is not cross_entropy_grad's");
	for (int64_t i = 0; i < R; i++)
		ck_assert_msg(memcmp(&w[(R + i) * V], &loss[i], 4) == 0,
			      "row %lld: loss %.9g, fused %.9g", (long long)i,
			      loss[i], w[(R + i) * V]);
	c.n_threads = 2;
	c.grain = 1;
	x.rng = 0x1234567; /* the same inputs */
	run_both(&x, &c, &b2);
	ck_assert_int_eq(b2.got.status, 0);
	ck_assert(memcmp(b1.got.out[2], b2.got.out[2],
			 (size_t)(2 * R * V) * 4) == 0);
	both_fini(&x, &b1);
	both_fini(&x, &b2);
	tu_graph_fini(&x.g);
}

START_TEST(test_cross_entropy_with_grad_is_both_unfused_kernels_bit_for_bit)
{
	static const int64_t rv[][2] = {{1, 1},    {1, 300},   {2, 2},
					{5, 7},    {9, 8},     {64, 16},
					{33, 201}, {640, 201}, {700, 300},
					{3, 17}};
	for (size_t i = 0; i < sizeof rv / sizeof rv[0]; i++)
		check_with_grad(rv[i][0], rv[i][1]);
}
END_TEST

/* The sum of a row's exps e[0 .. V) in the order the kernels add them
 * (cg_lower_nn.c, row_sums and exp_sum): vector q of the row (its last
 * one padded with +0) into accumulator q % accs (4 from 64 columns),
 * the accumulators added 0 + 2, 1 + 3, then 0 + 1, and the lanes by
 * halves. */
static float ref_exp_sum(const float *e, int64_t V)
{
	int64_t accs = V >= 64 ? 4 : 1, nq = (V + 15) / 16;
	float acc[4][16] = {{0}}, t[16];
	for (int64_t q = 0; q < nq; q++)
		for (int l = 0; l < 16; l++) {
			int64_t j = 16 * q + l;
			float v = j < V ? e[j] : 0.0f;
			acc[q % accs][l] = q < accs ? v : acc[q % accs][l] + v;
		}
	for (int l = 0; l < 16; l++) {
		t[l] = acc[0][l];
		if (accs == 4)
			t[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
	}
	for (int n = 8; n >= 1; n /= 2)
		for (int l = 0; l < n; l++)
			t[l] = t[l] + t[l + n];
	return t[0];
}

/* Rows whose exps are 1 (column 1, the max), 0 (column 0, -inf) and
 * about 1e-7 (the rest, logits near -16): added to 1 each such exp is
 * lost or rounds up, so the row's sum depends on the order of its
 * additions. Each gradient element of cross_entropy_with_grad (g = 1)
 * is e / s, less 1 at the label, with s the sum of the exps it leaves
 * in its second part added in the kernels' fixed order (ref_exp_sum):
 * rows of every width the sum's loops split differently (a partial
 * vector alone, whole vectors of one accumulator, of four with none,
 * some or a partial one left over, longer than a tile of 1024). */
START_TEST(test_cross_entropy_sums_its_exps_in_the_fixed_order)
{
	static const int64_t widths[] = {5, 16, 37, 64, 79, 90, 202, 300, 1100};
	const int64_t R = 3;
	for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
		int64_t V = widths[w];
		fx x;
		fx_init(&x);
		ir_id lg = tu_input(&x.g, tu_type(IR_F32, 2, R, V));
		ir_id lb = tu_input(&x.g, tu_type(IR_I32, 1, R));
		ir_id g = tu_input(&x.g, tu_type(IR_F32, 1, R));
		ir_id args[3] = {lg, lb, g};
		ret(&x, tu_build(&x.g, IR_OP_CROSS_ENTROPY_WITH_GRAD, args, 3,
				 NULL, NULL));
		run_cfg c = cfg_default();
		interp_tensor in[3], params[1];
		int64_t syms[8] = {0};
		make_inputs(&x, &c, in);
		float *xs = in[0].data, *gs = in[2].data;
		int32_t *ys = in[1].data;
		uint64_t seed = 0x9e3779b97f4a7c15u;
		for (int64_t r = 0; r < R; r++) {
			for (int64_t j = 0; j < V; j++) {
				seed = seed * 6364136223846793005u +
				       1442695040888963407u;
				double u = (double)(seed >> 40) / 16777216.0;
				xs[r * V + j] = j == 0   ? -INFINITY
						: j == 1 ? 0.0f
							 : (float)(-16.5 + u);
			}
			ys[r] = (int32_t)((r * 7 + 2) % V);
			gs[r] = 1.0f;
		}
		jit_result res = jit_run(&x, syms, in, params, &c);
		ck_assert_int_eq(res.status, 0);
		const float *out = res.out[0];
		float *e = malloc((size_t)V * sizeof *e);
		ck_assert(e != NULL);
		int n_lost = 0; /* rows where the order changes the sum */
		for (int64_t r = 0; r < R; r++) {
			e[0] = 0.0f;
			for (int64_t j = 1; j < V; j++)
				e[j] = out[(R + r) * V + j];
			ck_assert(e[1] == 1.0f);
			float s = ref_exp_sum(e, V), plain = 0.0f;
			for (int64_t j = 0; j < V; j++)
				plain += e[j];
			n_lost += plain != s;
			for (int64_t j = 0; j < V; j++) {
				float want = e[j] / s;
				if (j == ys[r])
					want = (want - 1.0f) * 1.0f;
				float got = out[r * V + j];
				ck_assert_msg(memcmp(&got, &want, 4) == 0,
					      "V %lld row %lld col %lld: %a, "
					      "want %a",
					      (long long)V, (long long)r,
					      (long long)j, (double)got,
					      (double)want);
			}
		}
		/* the inputs tell the orders apart where the row has lanes
		 * of more than one vector beside the 1's */
		if (V > 32)
			ck_assert_int_gt(n_lost, 0);
		free(e);
		jit_result_fini(&res, 1);
		for (int i = 0; i < 3; i++)
			interp_tensor_fini(&x.g.ctx, &in[i]);
		tu_graph_fini(&x.g);
	}
}
END_TEST

/* A label outside [0, V) fails the fused kernel as it fails
 * cross_entropy's. */
START_TEST(test_label_out_of_range_fails_cross_entropy_with_grad)
{
	for (int hi = 0; hi < 2; hi++) {
		fx x;
		fx_init(&x);
		ir_id lg = tu_input(&x.g, tu_type(IR_F32, 2, 4, 3));
		ir_id lb = tu_input(&x.g, tu_type(IR_I32, 1, 4));
		ir_id g = tu_input(&x.g, tu_type(IR_F32, 1, 4));
		ir_id args[3] = {lg, lb, g};
		ret(&x, tu_build(&x.g, IR_OP_CROSS_ENTROPY_WITH_GRAD, args, 3,
				 NULL, NULL));
		run_cfg c = cfg_default();
		c.int_lo = hi ? 3 : -1;
		c.int_hi = hi ? 3 : -1;
		interp_tensor in[3], params[1];
		int64_t syms[8] = {0};
		make_inputs(&x, &c, in);
		jit_result r = jit_run(&x, syms, in, params, &c);
		ck_assert_int_eq(r.status & 0xff, ATTNRT_ERR_INDEX);
		jit_result_fini(&r, 1);
		for (int i = 0; i < 3; i++)
			interp_tensor_fini(&x.g.ctx, &in[i]);
		tu_graph_fini(&x.g);
	}
}
END_TEST

/* Logits computed in the kernel (a fused elementwise tree, also read by
 * cross_entropy) give the interpreter's values. */
START_TEST(test_cross_entropy_grad_of_fused_logits_matches_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 6, 201));
	ir_id bias = tu_input(&x.g, tu_type(IR_F32, 2, 6, 201));
	ir_id lg = op2(&x, IR_OP_ADD, op1(&x, IR_OP_TANH, a, NULL), bias, NULL);
	ir_id lb = tu_input(&x.g, tu_type(IR_I32, 1, 6));
	ret(&x, op2(&x, IR_OP_CROSS_ENTROPY, lg, lb, NULL));
	ret(&x, ce_grad(&x, lg, lb, tu_input(&x.g, tu_type(IR_F32, 1, 6))));
	run_cfg c = cfg_default();
	c.int_hi = 200;
	check_cfg(&x, &c);
	tu_graph_fini(&x.g);
}
END_TEST

/* Rows with a NaN, an infinity or nothing but -inf are NaN rows, as the
 * unfused (softmax - one_hot) * g gives them, in the JIT as in the
 * interpreter; the finite row matches both. */
START_TEST(test_cross_entropy_grad_of_non_finite_rows_matches_the_unfused_path)
{
	fx x;
	fx_init(&x);
	float v[4 * 19];
	non_finite_rows(v);
	float gv[4] = {0.5f, 1, -2, 1};
	ir_id lb, lg = non_finite_consts(&x, v, &lb);
	ir_id g = tu_const(&x.g, tu_type(IR_F32, 1, 4), gv);
	ir_id oh = to_type(&x, IR_OP_ONE_HOT, lb, tu_type(IR_F32, 2, 4, 19));
	ir_id gk = to_type(&x, IR_OP_RESHAPE, g, tu_type(IR_F32, 2, 4, 1));
	ir_id ref = op2(&x, IR_OP_MUL,
			op2(&x, IR_OP_SUB, op1(&x, IR_OP_SOFTMAX, lg, NULL), oh,
			    NULL),
			gk, NULL);
	ret(&x, ref);
	ret(&x, ce_grad(&x, lg, lb, g));
	both b;
	run_cfg c = cfg_default();
	run_both(&x, &c, &b);
	ck_assert_int_eq(b.got.status, 0);
	for (uint32_t o = 0; o < 2; o++)
		compare(&b.want[o], &b.got, o, 1e-5);
	const float *u = b.got.out[0], *f = b.got.out[1];
	for (int i = 0; i < 4 * 19; i++) {
		ck_assert(isnan(f[i]) == (i >= 19));
		ck_assert(isnan(u[i]) == (i >= 19));
		if (i < 19)
			ck_assert_float_eq_tol(f[i], u[i], 1e-6);
	}
	both_fini(&x, &b);
	tu_graph_fini(&x.g);
}
END_TEST

/* A zero g (a masked token) takes the kernels' short way: a finite row
 * is zeros of g's sign but at the label, where (p - 1) g has the
 * other sign; a row with a NaN, an infinity or only -inf stays NaN. Both
 * kernels give the unfused (softmax - one_hot) * g bit for bit. */
START_TEST(test_cross_entropy_grad_of_zero_g_rows_is_signed_zeros)
{
	fx x;
	fx_init(&x);
	float v[5 * 19];
	non_finite_rows(v);
	memcpy(&v[4 * 19], v, 19 * sizeof *v);
	static const int32_t lab[5] = {4, 3, 5, 0, 7};
	ir_id lb = tu_const(&x.g, tu_type(IR_I32, 1, 5), lab);
	ir_id lg = tu_const(&x.g, tu_type(IR_F32, 2, 5, 19), v);
	float gv[5] = {0.0f, -0.0f, 0.0f, -0.0f, -0.0f};
	ir_id g = tu_const(&x.g, tu_type(IR_F32, 1, 5), gv);
	ir_id oh = to_type(&x, IR_OP_ONE_HOT, lb, tu_type(IR_F32, 2, 5, 19));
	ir_id gk = to_type(&x, IR_OP_RESHAPE, g, tu_type(IR_F32, 2, 5, 1));
	ret(&x,
	    op2(&x, IR_OP_MUL,
		op2(&x, IR_OP_SUB, op1(&x, IR_OP_SOFTMAX, lg, NULL), oh, NULL),
		gk, NULL));
	ret(&x, ce_grad(&x, lg, lb, g));
	ir_id args[3] = {lg, lb, g};
	ret(&x,
	    tu_build(&x.g, IR_OP_CROSS_ENTROPY_WITH_GRAD, args, 3, NULL, NULL));
	both b;
	run_cfg c = cfg_default();
	run_both(&x, &c, &b);
	ck_assert_int_eq(b.got.status, 0);
	const float *u = b.got.out[0], *f = b.got.out[1], *w = b.got.out[2];
	for (int i = 0; i < 5 * 19; i++) {
		int r = i / 19, j = i % 19;
		bool is_nan = r >= 1 && r <= 3;
		ck_assert_msg(isnan(f[i]) == is_nan && isnan(w[i]) == is_nan,
			      "row %d col %d: %g %g", r, j, (double)f[i],
			      (double)w[i]);
		if (is_nan)
			continue;
		ck_assert_msg(f[i] == 0 && !!signbit(f[i]) == (!!signbit(gv[r]) !=
							       (j == lab[r])),
			      "row %d col %d: %g", r, j, (double)f[i]);
		ck_assert(memcmp(&f[i], &u[i], 4) == 0 &&
			  memcmp(&w[i], &f[i], 4) == 0);
	}
	both_fini(&x, &b);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_label_out_of_range_fails_cross_entropy_grad)
{
	fx x;
	fx_init(&x);
	ir_id lg = tu_input(&x.g, tu_type(IR_F32, 2, 2, 3));
	ir_id lb = tu_input(&x.g, tu_type(IR_I32, 1, 2));
	ir_id ceg = ce_grad(&x, lg, lb, tu_input(&x.g, tu_type(IR_F32, 1, 2)));
	ret(&x, ceg);
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p && cg_program_jit(p), "%s", tu_graph_diag(&x.g));
	char *sb = aligned_alloc(64, round64(cg_program_scratch_bytes(p, "f")));
	float lgv[6] = {0}, gv[2] = {1, 1}, out[6];
	int32_t lbv[2] = {2, 0};
	const void *ins[3] = {lgv, lbv, gv};
	void *outs[1] = {out};
	attnrt_run run = {0, 0, 0, 1};
	attnrt_entry_fn fn = cg_program_entry(p, "f");
	ck_assert_int_eq(fn(&run, NULL, sb, ins, outs), 0);
	ck_assert_float_eq_tol(out[2], -2.0f / 3, 1e-6);
	ck_assert_float_eq_tol(out[3], -2.0f / 3, 1e-6);
	lbv[1] = 3;
	ck_assert_int_eq(fn(&run, NULL, sb, ins, outs),
			 ATTNRT_ERR_INDEX | (int)(ceg << 8));
	lbv[1] = -1;
	ck_assert_int_eq(fn(&run, NULL, sb, ins, outs),
			 ATTNRT_ERR_INDEX | (int)(ceg << 8));
	free(sb);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_losses_match_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id lg = tu_input(&x.g, tu_type(IR_F32, 3, 2, 3, 7));
	ret(&x, op2(&x, IR_OP_CROSS_ENTROPY, lg,
		    tu_input(&x.g, tu_type(IR_I32, 2, 2, 3)), NULL));
	ret(&x, op2(&x, IR_OP_MSE_LOSS, lg,
		    tu_input(&x.g, tu_type(IR_F32, 3, 2, 3, 7)), NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

/* ---- layout ------------------------------------------------------------------------- */

START_TEST(test_layout_ops_move_elements_like_the_interpreter)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 2, 3, 4));
	ir_attr perm = {.permute = {{2, 0, 1}}};
	ret(&x, op1(&x, IR_OP_PERMUTE, a, &perm));
	ir_attr sl = {.slice = {2, 1, 4, 2}};
	ret(&x, op1(&x, IR_OP_SLICE, a, &sl));
	ir_attr rep = {.repeat = {{2, 1, 3}}};
	ret(&x, op1(&x, IR_OP_REPEAT, a, &rep));
	ir_attr ri = {.interleave = {1, 3}};
	ret(&x, op1(&x, IR_OP_REPEAT_INTERLEAVE, a, &ri));
	ret(&x, to_type(&x, IR_OP_BROADCAST,
			tu_input(&x.g, tu_type(IR_F32, 2, 3, 1)),
			tu_type(IR_F32, 3, 2, 3, 5)));
	ir_id r = to_type(&x, IR_OP_RESHAPE, a, tu_type(IR_F32, 2, 6, 4));
	ret(&x, r);
	ir_id parts[3] = {r, tu_input(&x.g, tu_type(IR_F32, 2, 6, 1)),
			  tu_input(&x.g, tu_type(IR_F32, 2, 6, 2))};
	ir_attr ax = {.axis = 1};
	ret(&x, tu_build(&x.g, IR_OP_CONCAT, parts, 3, &ax, NULL));
	ir_id p0[2] = {a, a};
	ir_attr ax0 = {.axis = 0};
	ret(&x, tu_build(&x.g, IR_OP_CONCAT, p0, 2, &ax0, NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

/* A matrix's transpose goes through registers a tile of vw x vw at a
 * time: sides shorter than a tile, not a multiple of it, one of them 1;
 * 8 and 16 floats a vector, the tiles split over 1 and 2 threads. */
START_TEST(test_transposes_move_elements_like_the_interpreter)
{
	static const int64_t shapes[][2] = {{37, 21}, {16, 32}, {96, 32},
					    {1, 5},   {5, 1},   {32, 202},
					    {3, 40},  {17, 17}};
	for (int v = 0; v < 4; v++) {
		fx x;
		fx_init(&x);
		ir_attr perm = {.permute = {{1, 0}}};
		for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
			ret(&x,
			    op1(&x, IR_OP_PERMUTE,
				tu_input(&x.g, tu_type(IR_F32, 2, shapes[s][0],
						       shapes[s][1])),
				&perm));
		run_cfg c = cfg_default();
		c.tol = 0;
		c.n_threads = 1 + v % 2;
		c.grain = 1;
		c.vector_width = v < 2 ? 8 : 16;
		check_cfg(&x, &c);
		tu_graph_fini(&x.g);
	}
}
END_TEST

START_TEST(test_sort_orders_lines_with_nan_last)
{
	fx x;
	fx_init(&x);
	float v[6] = {3, NAN, -1, 2, NAN, 0};
	ir_id c = tu_const(&x.g, tu_type(IR_F32, 1, 6), v);
	ir_id a = op2(&x, IR_OP_MUL, c,
		      tu_input(&x.g, tu_type(IR_F32, 2, 4, 6)), NULL);
	ir_attr ax1 = {.axis = 1}, ax0 = {.axis = 0};
	ret(&x, op1(&x, IR_OP_SORT, a, &ax1));
	ret(&x, op1(&x, IR_OP_SORT, a, &ax0));
	ret(&x, op1(&x, IR_OP_SORT, tu_input(&x.g, tu_type(IR_I32, 2, 3, 17)),
		    &ax1));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

/* Ascending, NaN last, -0 before +0: the test's own order. */
static int sort_ref_cmp(const void *pa, const void *pb)
{
	float a = *(const float *)pa, b = *(const float *)pb;
	if (isnan(a) || isnan(b))
		return (isnan(a) != 0) - (isnan(b) != 0);
	if (a == b)
		return (signbit(b) != 0) - (signbit(a) != 0);
	return (a > b) - (a < b);
}

/* Lines of every kind of length (the sort is a heapsort: odd and even
 * heaps, a lone child, long lines that an O(n^2) sort would take
 * seconds over), strided (axis 0 of [n, 3]) and not, with repeats, both
 * zeros and NaNs: the JIT's result and the interpreter's, bit for bit,
 * are the test's qsort of each line. sort_grad of the same lines (its
 * indices on the stack, and past 8192 on the heap) gives the
 * interpreter's bits. */
START_TEST(test_sort_of_long_and_odd_lines_matches_a_reference_bitwise)
{
	static const int64_t lens[] = {1, 2,  3,  4,  5,   6,    7,   8,
				       9, 16, 17, 31, 100, 3001, 9000};
	for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
		int64_t n = lens[li];
		float *v = malloc((size_t)n * 3 * sizeof *v);
		float *want = malloc((size_t)n * 3 * sizeof *want);
		uint32_t r = 12345u + (uint32_t)n;
		for (int64_t i = 0; i < n * 3; i++) {
			r = r * 1664525u + 1013904223u;
			uint32_t kind = (r >> 24) % 8;
			v[i] = kind == 0   ? 0.0f
			       : kind == 1 ? -0.0f
			       : kind == 2 ? NAN
			       : kind == 3 ? (float)(n * 3 - i)
					   : (float)((int)((r >> 8) % 64) - 32);
		}
		/* column c of [n, 3] is the line sorted along axis 0 */
		for (int c = 0; c < 3; c++) {
			for (int64_t i = 0; i < n; i++)
				want[c * n + i] = v[i * 3 + c];
			qsort(want + c * n, (size_t)n, sizeof *want,
			      sort_ref_cmp);
		}
		fx x;
		fx_init(&x);
		ir_attr ax0 = {.axis = 0};
		ir_id a = tu_const(&x.g, tu_type(IR_F32, 2, n, 3), v);
		ret(&x, op1(&x, IR_OP_SORT, a, &ax0));
		ret(&x, op2(&x, IR_OP_SORT_GRAD, a,
			    tu_input(&x.g, tu_type(IR_F32, 2, n, 3)), &ax0));
		both b;
		run_cfg cfg = cfg_default();
		run_both(&x, &cfg, &b);
		ck_assert_int_eq(b.got.status, 0);
		const float *got = b.got.out[0], *ip = b.want[0].data;
		for (int64_t i = 0; i < n; i++)
			for (int c = 0; c < 3; c++) {
				uint32_t gw, gg, gi;
				memcpy(&gw, &want[c * n + i], 4);
				memcpy(&gg, &got[i * 3 + c], 4);
				memcpy(&gi, &ip[i * 3 + c], 4);
				ck_assert_msg(gg == gw && gi == gw,
					      "len %lld line %d element %lld: "
					      "want %08x, jit %08x, interp %08x",
					      (long long)n, c, (long long)i, gw,
					      gg, gi);
			}
		ck_assert(memcmp(b.got.out[1], b.want[1].data,
				 (size_t)n * 3 * sizeof(float)) == 0);
		both_fini(&x, &b);
		tu_graph_fini(&x.g);
		free(v);
		free(want);
	}
}
END_TEST

/* ---- the program ---------------------------------------------------------------------- */

START_TEST(test_symbolic_dims_take_the_given_values)
{
	fx x;
	fx_init(&x);
	int32_t B = ir_module_add_sym(x.g.m, "B", (ir_loc){0});
	ir_type t = tu_type(IR_F32, 2, 1, 3);
	t.dims[0] = (ir_dim){2, B};
	ir_id a = tu_input(&x.g, t);
	ret(&x, op1(&x, IR_OP_EXP, a, NULL));
	int64_t syms[1] = {5};
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, syms, NULL);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	uint32_t n;
	const attnrt_tensor_info *in = cg_program_inputs(p, "f", &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(in[0].dims[0], 10);
	ck_assert_int_eq(in[0].dims[1], 3);
	const attnrt_tensor_info *out = cg_program_outputs(p, "f", &n);
	ck_assert_uint_eq(n, 1);
	ck_assert_int_eq(out[0].dims[0], 10);
	/* exp writes the caller's output buffer: no scratch */
	ck_assert_uint_eq(cg_program_scratch_bytes(p, "f"), 0);
	ck_assert_str_eq(cg_program_symbol(p, "f"), "t_f");
	ck_assert_ptr_null(cg_program_symbol(p, "g"));
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_unbound_symbol_is_an_error_naming_it)
{
	fx x;
	fx_init(&x);
	int32_t B = ir_module_add_sym(x.g.m, "Batch", (ir_loc){0});
	ir_type t = tu_type(IR_F32, 1, 1);
	t.dims[0] = (ir_dim){1, B};
	ret(&x, op1(&x, IR_OP_EXP, tu_input(&x.g, t), NULL));
	ck_assert_ptr_null(cg_program_create(&x.g.ctx, x.g.m, NULL, NULL));
	ck_assert_ptr_nonnull(
		strstr(tu_graph_diag(&x.g), "symbol 'Batch' has no value"));
	tu_graph_fini(&x.g);
}
END_TEST

/* f64 tensors (of f64 constants, which an IR file may hold) cannot be
 * compiled, and are refused at their own node: also one that elementwise
 * fusion would compute deep inside an f32 kernel, where it would
 * otherwise be read as f32. */
START_TEST(test_f64_nodes_are_refused_fused_or_not)
{
	for (int fused = 0; fused < 2; fused++) {
		fx x;
		fx_init(&x);
		static const double v[8] = {0, 1, 2, 3, 4, 5, 6, 7};
		ir_type t = tu_type(IR_F32, 1, 8);
		ir_id a = tu_const(&x.g, tu_type(IR_F64, 1, 8), v);
		ir_id c = tu_build(&x.g, IR_OP_CAST, &a, 1, NULL, &t);
		/* cast alone, or fused into add(cast(a), b) */
		ret(&x,
		    fused ? op2(&x, IR_OP_ADD, c, tu_input(&x.g, t), NULL) : c);
		ck_assert_ptr_null(
			cg_program_create(&x.g.ctx, x.g.m, NULL, NULL));
		ck_assert_ptr_nonnull(strstr(tu_graph_diag(&x.g),
					     "cast: f64 tensors "
					     "cannot be compiled"));
		tu_graph_fini(&x.g);
	}
}
END_TEST

/* A static slice of a symbolic axis is checked once the symbol has its
 * value, fused into its reader or not: never a read past the buffer. */
START_TEST(test_a_slice_past_a_bound_symbol_is_an_error_fused_or_not)
{
	for (int fused = 0; fused < 2; fused++) {
		fx x;
		fx_init(&x);
		int32_t V = ir_module_add_sym(x.g.m, "V", (ir_loc){0});
		ir_type t = tu_type(IR_F32, 2, 4, 1);
		t.dims[1] = (ir_dim){1, V};
		ir_attr at = {.slice = {1, 2, 6, 1}};
		ir_id s = op1(&x, IR_OP_SLICE, tu_input(&x.g, t), &at);
		ret(&x, fused ? op1(&x, IR_OP_EXP, s, NULL) : s);
		int64_t ok[1] = {6}, short_v[1] = {5};
		cg_program *p = cg_program_create(&x.g.ctx, x.g.m, ok, NULL);
		ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
		ck_assert_uint_eq(cg_program_n_fused(p), (uint32_t)fused);
		cg_program_destroy(p);
		ck_assert_ptr_null(
			cg_program_create(&x.g.ctx, x.g.m, short_v, NULL));
		ck_assert_ptr_nonnull(strstr(tu_graph_diag(&x.g),
					     "range 2:6 does "
					     "not fit axis 1 of size 5"));
		tu_graph_fini(&x.g);
	}
}
END_TEST

START_TEST(test_params_are_laid_out_at_aligned_offsets)
{
	fx x;
	fx_init(&x);
	ir_id w = param(&x, "w", tu_type(IR_F32, 2, 3, 5),
			IR_INIT_XAVIER_UNIFORM);
	ir_id b = param(&x, "b", tu_type(IR_F32, 1, 5), IR_INIT_ZEROS);
	ret(&x, op2(&x, IR_OP_ADD,
		    op2(&x, IR_OP_MATMUL,
			tu_input(&x.g, tu_type(IR_F32, 2, 4, 3)), w, NULL),
		    b, NULL));
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	uint32_t n;
	const attnrt_param_info *pi = cg_program_params(p, &n);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(pi[0].name, "w");
	ck_assert_uint_eq(pi[0].offset, 0);
	ck_assert_int_eq(pi[0].init, ATTNRT_INIT_XAVIER_UNIFORM);
	ck_assert_int_eq(pi[1].init, ATTNRT_INIT_ZEROS);
	ck_assert_uint_eq(pi[1].offset, 64);
	ck_assert_int_eq(pi[1].dims[0], 5);
	ck_assert_uint_eq(cg_program_params_bytes(p), 128);
	cg_program_destroy(p);
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_leaves_and_views_are_copied_out_as_outputs)
{
	fx x;
	fx_init(&x);
	float cv[4] = {1, 2, 3, 4};
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 2, 3));
	ret(&x, a);
	ret(&x, param(&x, "p", tu_type(IR_F32, 1, 5), IR_INIT_UNIFORM));
	ret(&x, tu_const(&x.g, tu_type(IR_F32, 2, 2, 2), cv));
	ret(&x, to_type(&x, IR_OP_RESHAPE, a, tu_type(IR_F32, 1, 6)));
	ret(&x, to_type(&x, IR_OP_RESHAPE, op1(&x, IR_OP_NEG, a, NULL),
			tu_type(IR_F32, 2, 3, 2)));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

/* An output computed by a kernel of its own is written straight into
 * the caller's buffer (cg_lower_plan.c, find_direct): later kernels
 * read it there, an output of the same buffer (itself again, a reshape,
 * a slice that views it) is copied from there, and the slab keeps none
 * of them. */
START_TEST(test_outputs_written_in_place_are_read_by_later_kernels)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 7, 9));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 2, 9, 6));
	ir_id m = op2(&x, IR_OP_MATMUL, a, b, &(ir_attr){.matmul = {0, 0}});
	ret(&x, m);
	ir_attr rows = {.reduce = {2, false}};
	ret(&x, op1(&x, IR_OP_SUM, m, &rows));
	ret(&x, to_type(&x, IR_OP_RESHAPE, m, tu_type(IR_F32, 1, 42)));
	ret(&x, m);
	ir_attr sl = {.slice = {0, 2, 5, 1}};
	ret(&x, op1(&x, IR_OP_SLICE, m, &sl));
	ir_id e = op1(&x, IR_OP_EXP, m, NULL);
	ret(&x, op2(&x, IR_OP_MATMUL, e, b, &(ir_attr){.matmul = {0, 1}}));
	run_cfg c = cfg_default();
	c.tol = 1e-4;
	for (c.n_threads = 1; c.n_threads <= 2; c.n_threads++)
		check_cfg(&x, &c);
	/* Every result is an output but exp's: the slab holds that alone. */
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	ck_assert_uint_eq(cg_program_scratch_bytes(p, "f"), 7 * 6 * 4 + 24);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

/* Calls f of p with a at in[0], b at in[1], params pb, the outputs at
 * o0 and o1 (4 x 8 floats each) on n threads; returns the status. */
static int call_ab(attnrt_entry_fn fn, cg_program *p, int n, const float *a,
		   const float *b, void *pb, float *o0, float *o1)
{
	size_t sz = cg_program_scratch_bytes(p, "f") + 64;
	void *sb = aligned_alloc(64, (sz + 63) / 64 * 64);
	const void *ins[2] = {a, b};
	void *outs[2] = {o0, o1};
	attnrt_run run = {1, 0, 0, n};
	int st = fn(&run, pb, sb, ins, outs);
	free(sb);
	return st;
}

START_TEST(test_outputs_that_overlap_inputs_params_or_outputs_are_refused)
{
	/* m = a @ W and s = exp(m) + b, each 4 x 8 floats (128 bytes). */
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 2, 4, 8));
	ir_id w = param(&x, "W", tu_type(IR_F32, 2, 8, 8), IR_INIT_ZEROS);
	ir_id m = op2(&x, IR_OP_MATMUL, a, w, &(ir_attr){.matmul = {0, 0}});
	ret(&x, m);
	ret(&x, op2(&x, IR_OP_ADD, op1(&x, IR_OP_EXP, m, NULL), b, NULL));
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	ck_assert(cg_program_jit(p));
	attnrt_entry_fn fn = cg_program_entry(p, "f");
	ck_assert(fn != NULL);
	ck_assert_uint_eq(cg_program_params_bytes(p), 8 * 8 * 4);
	float *pb = aligned_alloc(64, 64 * 4), keep[64];
	for (int i = 0; i < 64; i++)
		pb[i] = keep[i] = (float)((i * 7) % 11) / 16.0f - 0.25f;
	/* The values of a call with every buffer apart. */
	float va[32], vb[32], want0[32], want1[32];
	for (int i = 0; i < 32; i++) {
		va[i] = (float)((i * 5) % 9) / 8.0f - 0.5f;
		vb[i] = (float)(i % 4) - 1.5f;
	}
	for (int n = 1; n <= 2; n++) {
		ck_assert_int_eq(call_ab(fn, p, n, va, vb, pb, want0, want1), 0);
		/* One arena: 8 blocks of 32 floats. */
		float *ar = aligned_alloc(64, 8 * 32 * 4);
#define RESET()                                  \
	do {                                     \
		for (int i = 0; i < 8 * 32; i++) \
			ar[i] = 1234.5f;         \
		memcpy(ar, va, sizeof va);       \
		memcpy(ar + 32, vb, sizeof vb);  \
	} while (0)
		/* Outputs end to end after the inputs, touching: allowed. */
		RESET();
		ck_assert_int_eq(call_ab(fn, p, n, ar, ar + 32, pb, ar + 64,
					 ar + 96),
				 0);
		ck_assert_mem_eq(ar + 64, want0, sizeof want0);
		ck_assert_mem_eq(ar + 96, want1, sizeof want1);
		/* Outputs apart but in descending order, and inputs on
		 * both sides of them (b moved to the last block): allowed,
		 * after comparing every pair. */
		RESET();
		memcpy(ar + 7 * 32, vb, sizeof vb);
		ck_assert_int_eq(call_ab(fn, p, n, ar, ar + 7 * 32, pb, ar + 96,
					 ar + 64),
				 0);
		ck_assert_mem_eq(ar + 96, want0, sizeof want0);
		ck_assert_mem_eq(ar + 64, want1, sizeof want1);
		/* Inputs may share memory: a and b both at a copy of va. */
		RESET();
		float wa0[32], wa1[32];
		ck_assert_int_eq(call_ab(fn, p, n, va, va, pb, wa0, wa1), 0);
		ck_assert_int_eq(call_ab(fn, p, n, ar, ar, pb, ar + 64, ar + 96),
				 0);
		ck_assert_mem_eq(ar + 64, wa0, sizeof wa0);
		ck_assert_mem_eq(ar + 96, wa1, sizeof wa1);
		/* Refused, naming the lower output of the pair, and nothing
		 * written: output 0 on input a; output 1 sharing a's last
		 * float; output 0 sharing output 1's first float; output 1
		 * inside params. */
		struct {
			int in_b, o0, o1; /* offsets into ar; -1: into params */
			int want;
		} cases[] = {
			{32, 0, 96, 0},
			{32, 64, 31, 1},
			{32, 65, 96, 0},
			{32, 64, -1, 1},
		};
		for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
			RESET();
			float before[8 * 32];
			memcpy(before, ar, sizeof before);
			float *o1 = cases[k].o1 < 0 ? pb + 8 : ar + cases[k].o1;
			int st = call_ab(fn, p, n, ar, ar + cases[k].in_b, pb,
					 ar + cases[k].o0, o1);
			ck_assert_int_eq(st, ATTNRT_ERR_OVERLAP |
						     (cases[k].want << 8));
			ck_assert_mem_eq(ar, before, sizeof before);
			ck_assert_mem_eq(pb, keep, sizeof keep);
		}
#undef RESET
		free(ar);
	}
	free(pb);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

START_TEST(test_empty_tensors_flow_through_without_work)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 0, 3));
	ir_attr r = {.reduce = {1, false}};
	ret(&x, op1(&x, IR_OP_EXP, a, NULL));
	ret(&x, op1(&x, IR_OP_SUM, a, &r));
	ret(&x, op1(&x, IR_OP_SOFTMAX, a, NULL));
	check(&x);
	tu_graph_fini(&x.g);
}
END_TEST

static bool bytes_contain(const char *buf, size_t len, const char *s)
{
	size_t n = strlen(s);
	for (size_t i = 0; i + n <= len; i++)
		if (memcmp(buf + i, s, n) == 0)
			return true;
	return false;
}

START_TEST(test_program_emits_an_object_defining_its_entry_point)
{
	fx x;
	fx_init(&x);
	ret(&x,
	    op1(&x, IR_OP_TANH, tu_input(&x.g, tu_type(IR_F32, 1, 100)), NULL));
	cg_program_options o = {.prefix = "mymodel"};
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, &o);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	char *obj;
	size_t len;
	ck_assert(cg_program_emit_buffer(p, CG_EMIT_OBJ, &obj, &len));
	ck_assert_uint_gt(len, 64);
	ck_assert_mem_eq(obj,
			 "\x7f"
			 "ELF",
			 4);
	ck_assert(bytes_contain(obj, len, "mymodel_f"));
	free(obj);
	ck_assert_str_eq(cg_program_symbol(p, "f"), "mymodel_f");
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

/* A chain big enough that its kernels run in parallel. */
static void build_big_chain(fx *x)
{
	ir_id a = tu_input(&x->g, tu_type(IR_F32, 3, 16, 64, 96));
	ir_id w = tu_input(&x->g, tu_type(IR_F32, 2, 96, 80));
	ir_id h = op1(x, IR_OP_TANH, op2(x, IR_OP_MATMUL, a, w, NULL), NULL);
	ir_attr r = {.reduce = {4, true}};
	ir_id s = op2(x, IR_OP_SUB, h, op1(x, IR_OP_MAX, h, &r), NULL);
	ret(x, op1(x, IR_OP_SOFTMAX, s, NULL));
	ir_attr sum = {.reduce = {1, false}};
	ret(x, op1(x, IR_OP_SUM, h, &sum));
	ir_attr d = {.dropout = {0.3, 1}};
	x->g.m->n_dropout_streams = 2;
	ret(x, op1(x, IR_OP_DROPOUT, h, &d));
}

START_TEST(test_results_do_not_depend_on_the_thread_count)
{
	fx x;
	fx_init(&x);
	build_big_chain(&x);
	run_cfg c = cfg_default();
	c.is_training = true;
	c.tol = 1e-4;
	both b1, b2;
	c.n_threads = 1;
	run_both(&x, &c, &b1);
	c.n_threads = 2;
	x.rng = 0x1234567;
	run_both(&x, &c, &b2);
	ck_assert_uint_gt(b1.got.n_parallel, 2);
	for (uint32_t o = 0; o < x.g.f->n_outputs; o++) {
		compare(&b1.want[o], &b1.got, o, c.tol);
		ck_assert_mem_eq(b1.got.out[o], b2.got.out[o],
				 (size_t)b1.got.numel[o] * 4);
	}
	both_fini(&x, &b1);
	both_fini(&x, &b2);
	tu_graph_fini(&x.g);
}
END_TEST

/* True if the function text from fn to the next "define" has the
 * instruction `op` on <8 x float> or <16 x float>. */
static bool has_vector_op(const char *fn, const char *op)
{
	const char *end = strstr(fn + 1, "\ndefine");
	char w8[64], w16[64];
	snprintf(w8, sizeof w8, "%s<8 x float>", op);
	snprintf(w16, sizeof w16, "%s<16 x float>", op);
	const char *a = strstr(fn, w8), *b = strstr(fn, w16);
	return (a && (!end || a < end)) || (b && (!end || b < end));
}

START_TEST(test_hot_loops_come_out_vectorized)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 2, 256, 256));
	ir_id b = tu_input(&x.g, tu_type(IR_F32, 2, 256, 256));
	ret(&x, op2(&x, IR_OP_MUL, a, b, NULL));
	ir_attr r = {.reduce = {2, false}};
	ret(&x, op1(&x, IR_OP_SUM, a, &r));
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	char *ir;
	size_t len;
	ck_assert_msg(cg_program_emit_buffer(p, CG_EMIT_LLVM, &ir, &len), "%s",
		      tu_graph_diag(&x.g));
	if (getenv("CG_DUMP"))
		fputs(ir, stderr);
	char *mul = strstr(ir, "k2.mul");
	char *sum = strstr(ir, "k3.sum");
	ck_assert_ptr_nonnull(mul);
	ck_assert_ptr_nonnull(sum);
	/* Each kernel's body (up to the next "define") has vector ops of
	 * 8 floats (AVX2) or more (16 where the host has AVX-512); the sum's
	 * rows are in the lanes, each added in order (no reassoc). */
	ck_assert_msg(has_vector_op(mul, "fmul "), "mul not vectorized");
	ck_assert_msg(has_vector_op(sum, "fadd "), "sum not vectorized");
	free(ir);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

/* The function text from "define ... @<name>" to the next "define". */
static char *fn_text(char *ir, const char *name)
{
	char *at = strstr(ir, name);
	ck_assert_ptr_nonnull(at);
	return at;
}

static bool fn_has(const char *fn, const char *what)
{
	const char *end = strstr(fn + 1, "\ndefine");
	const char *a = strstr(fn, what);
	return a && (!end || a < end);
}

/* x - mean(x) over rows of 32: the nest cannot merge the row axis (the
 * mean's stride is 0 along it), and unrolled it would leave LLVM to
 * vectorize across rows, gathering every element. */
START_TEST(test_a_row_broadcast_is_vectorized_along_the_row_exactly)
{
	fx x;
	fx_init(&x);
	ir_id a = tu_input(&x.g, tu_type(IR_F32, 3, 64, 10, 32));
	ir_id m = tu_input(&x.g, tu_type(IR_F32, 3, 64, 10, 1));
	ret(&x, op2(&x, IR_OP_SUB, a, m, NULL));
	run_cfg c = cfg_default();
	c.tol = 0;
	check_cfg(&x, &c);
	cg_program *p = cg_program_create(&x.g.ctx, x.g.m, NULL, NULL);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&x.g));
	char *ir;
	size_t len;
	ck_assert(cg_program_emit_buffer(p, CG_EMIT_LLVM, &ir, &len));
	char *sub = fn_text(ir, "k2.sub");
	ck_assert_msg(has_vector_op(sub, "fsub "), "sub not vectorized");
	ck_assert_msg(!fn_has(sub, "masked.gather") &&
			      !fn_has(sub, "masked.scatter"),
		      "sub gathers or scatters");
	free(ir);
	cg_program_destroy(p);
	tu_graph_fini(&x.g);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_lower");
	TCase *t = tcase_create("ops");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, test_add_broadcasts_like_the_interpreter);
	tcase_add_test(t, test_add_of_known_values_gives_their_sum);
	tcase_add_test(t, test_only_lowers_the_functions_asked_for);
	tcase_add_test(t, test_every_float_unary_op_matches_the_interpreter);
	tcase_add_test(t,
		       test_exp_tanh_and_sigmoid_hold_over_the_whole_float_range);
	tcase_add_test(t, test_tanh_holds_its_error_bound_over_a_million_floats);
	tcase_add_test(t, test_erf_holds_its_error_bound_over_a_million_floats);
	tcase_add_test(t, test_erf_holds_its_error_bound_over_every_float_range);
	tcase_add_test(t, test_exp_of_a_negated_square_rounds_as_exp);
	tcase_add_test(t,
		       test_sigmoid_holds_its_error_bound_over_a_million_floats);
	tcase_add_test(t,
		       test_every_float_binary_op_broadcasts_like_the_interpreter);
	tcase_add_test(t,
		       test_integer_ops_wrap_and_truncate_like_the_interpreter);
	tcase_add_test(t, test_select_picks_by_a_broadcast_condition);
	tcase_add_loop_test(t,
			    test_matmul_broadcasts_batch_dims_with_every_transpose,
			    0, 4);
	tcase_add_loop_test(t,
			    test_matmul_of_odd_larger_shapes_matches_the_interpreter,
			    0, 4);
	tcase_add_loop_test(
		t,
		test_matmul_with_a_shared_right_operand_matches_the_interpreter,
		0, 4);
	tcase_add_test(t, test_reductions_over_any_axes_match_the_interpreter);
	tcase_add_test(t, test_argmax_takes_the_first_maximum);
	tcase_add_test(t,
		       test_argmin_takes_the_first_minimum_as_the_interpreter);
	tcase_add_test(t,
		       test_sum_to_rank_zero_and_nan_max_match_the_interpreter);
	tcase_add_test(t, test_softmax_and_log_softmax_match_the_interpreter);
	tcase_add_test(t, test_masked_softmax_keeps_rows_of_length_zero_uniform);
	tcase_add_test(t, test_layer_norm_matches_the_interpreter);
	tcase_add_test(t, test_layer_norm_of_empty_rows_compiles);
	tcase_add_test(t, test_layer_norm_grad_matches_the_interpreter);
	tcase_add_test(t,
		       test_layer_norm_grad_rows_of_zero_gradient_keep_the_bits);
	tcase_add_test(
		t,
		test_dropout_in_training_masks_bit_for_bit_like_the_interpreter);
	tcase_add_test(t, test_dropouts_differing_in_stream_share_a_kernel);
	tcase_add_test(t, test_embedding_gathers_rows_of_the_table);
	tcase_add_test(t, test_one_hot_and_embedding_grad_match_the_interpreter);
	tcase_add_test(
		t,
		test_softmax_and_cross_entropy_of_non_finite_rows_match_the_interpreter);
	tcase_add_test(t,
		       test_index_out_of_range_returns_the_error_code_of_its_node);
	tcase_add_test(
		t,
		test_a_parallel_kernel_called_twice_in_order_fails_through_its_launcher);
	tcase_add_test(t, test_label_out_of_range_fails_cross_entropy);
	tcase_add_test(t, test_cross_entropy_grad_matches_the_interpreter);
	tcase_add_test(t,
		       test_cross_entropy_grad_of_zero_g_rows_is_signed_zeros);
	tcase_add_test(
		t,
		test_cross_entropy_grad_of_fused_logits_matches_the_interpreter);
	tcase_add_test(
		t,
		test_cross_entropy_grad_of_non_finite_rows_matches_the_unfused_path);
	tcase_add_test(t, test_label_out_of_range_fails_cross_entropy_grad);
	tcase_add_test(
		t,
		test_cross_entropy_with_grad_is_both_unfused_kernels_bit_for_bit);
	tcase_add_test(t, test_label_out_of_range_fails_cross_entropy_with_grad);
	tcase_add_test(t, test_cross_entropy_sums_its_exps_in_the_fixed_order);
	tcase_add_test(t, test_losses_match_the_interpreter);
	tcase_add_test(t, test_layout_ops_move_elements_like_the_interpreter);
	tcase_add_test(t, test_transposes_move_elements_like_the_interpreter);
	tcase_add_test(t, test_sort_orders_lines_with_nan_last);
	tcase_add_test(t,
		       test_sort_of_long_and_odd_lines_matches_a_reference_bitwise);
	tcase_add_test(t, test_symbolic_dims_take_the_given_values);
	tcase_add_test(t, test_unbound_symbol_is_an_error_naming_it);
	tcase_add_test(t,
		       test_a_slice_past_a_bound_symbol_is_an_error_fused_or_not);
	tcase_add_test(t, test_f64_nodes_are_refused_fused_or_not);
	tcase_add_test(t, test_params_are_laid_out_at_aligned_offsets);
	tcase_add_test(t, test_leaves_and_views_are_copied_out_as_outputs);
	tcase_add_test(t,
		       test_outputs_written_in_place_are_read_by_later_kernels);
	tcase_add_test(
		t,
		test_outputs_that_overlap_inputs_params_or_outputs_are_refused);
	tcase_add_test(t, test_empty_tensors_flow_through_without_work);
	tcase_add_test(t, test_program_emits_an_object_defining_its_entry_point);
	tcase_add_test(t, test_results_do_not_depend_on_the_thread_count);
	tcase_add_test(t, test_hot_loops_come_out_vectorized);
	tcase_add_test(t,
		       test_a_row_broadcast_is_vectorized_along_the_row_exactly);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
