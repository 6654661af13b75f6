/*
 * test_passes_fuse_gelu.c - the fuse_gelu pass (passes/fuse_gelu.c):
 * GELU's backward takes 1 + erf from the forward's result y (a
 * quotient by x 0.5, 1 where that is 0), so the elementwise plan
 * computes erf in the forward's kernel only; the forward's values keep
 * their bits and the gradient stays within float32 rounding of the
 * float64 gradient (the interpreter, zero, subnormal and large
 * pre-activations included); the pass leaves GELUs alone whose y has
 * no buffer of its own, whose 1 + erf nothing reads again, or of the
 * tanh form; and it fires on models/gpt.g's loss_grad unless disabled.
 */
#include "attn_cases.h"
#include "testutil.h"

#include <math.h>

enum { R = 6, C = 16, K = 5 };

/* How build() makes the graph. */
typedef enum how {
	HOW_MATMUL, /* y read by a matmul: the pass applies */
	HOW_OUTPUT, /* y returned: it applies */
	HOW_EW,     /* y read by an elementwise op only: left alone */
	HOW_NO_BWD, /* no backward reads 1 + erf again: left alone */
	HOW_TANH,   /* the tanh form: left alone */
} how;

static ir_id scalar(tu_graph *x, float v)
{
	return tu_const(x, tu_type(IR_F32, 0), &v);
}

static ir_id op1(tu_graph *x, ir_op op, ir_id a)
{
	return tu_build(x, op, &a, 1, NULL, NULL);
}

static ir_id op2(tu_graph *x, ir_op op, ir_id a, ir_id b)
{
	ir_id args[2] = {a, b};
	return tu_build(x, op, args, 2, NULL, NULL);
}

static void ret(tu_graph *x, const char *name, ir_id id)
{
	x->f->output_names[x->f->n_outputs] = name;
	x->f->outputs[x->f->n_outputs++] = id;
}

/* f(mm f32[R, C], bias f32[C], g f32[R, C], w f32[C, K]): GELU of
 * x = mm + bias node for node as the frontend builds it, a reader of
 * y as `h` says, and autodiff's gradient for g (as
 * test_codegen_fuse_ew.c's gelu_fwd_bwd). */
static void build(tu_graph *x, how h)
{
	tu_graph_init(x, 8);
	ir_id mm = tu_input(x, tu_type(IR_F32, 2, R, C));
	ir_id bias = tu_input(x, tu_type(IR_F32, 1, C));
	ir_id g = tu_input(x, tu_type(IR_F32, 2, R, C));
	ir_id w = tu_input(x, tu_type(IR_F32, 2, C, K));
	ir_id c0 = scalar(x, 0.70710677f), c1 = scalar(x, 0.5f);
	ir_id c2 = scalar(x, 1.0f), c6 = scalar(x, 1.1283792f);
	ir_id v = op2(x, IR_OP_ADD, mm, bias);
	ir_id u = op2(x, IR_OP_MUL, v, c0);
	ir_id half = op2(x, IR_OP_MUL, v, c1);
	ir_id inner = op1(x, h == HOW_TANH ? IR_OP_TANH : IR_OP_ERF, u);
	ir_id one_e = op2(x, IR_OP_ADD, c2, inner);
	ir_id y = op2(x, IR_OP_MUL, half, one_e);
	if (h == HOW_OUTPUT) {
		ret(x, "y", y);
	} else if (h == HOW_EW) {
		ret(x, "y", op2(x, IR_OP_MUL, y, y));
	} else {
		ir_id args[2] = {y, w};
		ir_attr mat = {0};
		ret(x, "y", tu_build(x, IR_OP_MATMUL, args, 2, &mat, NULL));
	}
	if (h == HOW_NO_BWD)
		return;
	ir_id a = op2(x, IR_OP_MUL, op2(x, IR_OP_MUL, g, one_e), c1);
	ir_id sq = op1(x, IR_OP_NEG, op2(x, IR_OP_MUL, u, u));
	ir_id d = op2(x, IR_OP_MUL, op1(x, IR_OP_EXP, sq), c6);
	ir_id b = op2(x, IR_OP_MUL, op2(x, IR_OP_MUL, g, half), d);
	ret(x, "dx", op2(x, IR_OP_ADD, a, op2(x, IR_OP_MUL, b, c0)));
}

/* Inputs: x = mm + bias over [-9, 9] and, in column 0 (bias 0), 0,
 * -0, subnormals and the smallest normal; g of both signs. */
static void make_inputs(tu_graph *x, interp_tensor *in)
{
	for (uint32_t i = 0; i < 4; i++) {
		const ir_type *t = &x->f->g.nodes[x->f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef;
		ck_assert(interp_tensor_alloc(&x->ctx, &in[i], t->dtype,
					      t->rank, dims));
		float *p = in[i].data;
		for (int64_t e = 0; e < interp_tensor_numel(&in[i]); e++)
			p[e] = i == 0   ? (float)(9.0 * sin((double)e * 0.37))
			       : i == 1 ? (float)(0.5 * cos((double)e))
			       : i == 2 ? (float)(1.5 * sin((double)e * 1.7))
					: (float)(0.25 * cos((double)e * 0.3));
	}
	static const float col0[R] = {0.0f,       -0.0f,  0x1p-149f,
				      -0x1p-149f, 3e-39f, 0x1p-126f};
	((float *)in[1].data)[0] = 0;
	for (int r = 0; r < R; r++)
		((float *)in[0].data)[r * C] = col0[r];
}

static void run(tu_graph *x, bool is_f64, const interp_tensor *in,
		interp_tensor *out)
{
	interp_opts o = {.is_f64 = is_f64};
	ck_assert_msg(interp_run(&x->ctx, x->m, x->f, &o, NULL, in, out), "%s",
		      tu_graph_diag(x));
}

static uint32_t n_of(const tu_graph *x, ir_op op)
{
	uint32_t n = 0;
	for (ir_id i = 0; i < x->f->g.n_nodes; i++)
		n += x->f->g.nodes[i].op == op;
	return n;
}

/* The one node of op in f, and the one node reading it. */
static ir_id only(const ir_func *f, ir_op op)
{
	ir_id at = IR_NONE;
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		if (f->g.nodes[i].op == op) {
			ck_assert_uint_eq(at, IR_NONE);
			at = i;
		}
	ck_assert_uint_ne(at, IR_NONE);
	return at;
}

static uint32_t n_readers(const ir_func *f, ir_id id, ir_id *reader)
{
	uint32_t n = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		for (uint32_t a = 0; a < f->g.nodes[i].n_args; a++)
			if (ir_arg(&f->g, i, a) == id) {
				*reader = i;
				n++;
			}
	return n;
}

/* Whether the elementwise plan computes 1 + erf in one kernel only:
 * its reader y's (the forward's); it does in both kernels without the
 * pass. */
static bool erf_in_one_kernel(tu_graph *x)
{
	ir_id erf = only(x->f, IR_OP_ERF), one_e = IR_NONE, y = IR_NONE;
	ck_assert_uint_eq(n_readers(x->f, erf, &one_e), 1);
	uint32_t n = n_readers(x->f, one_e, &y);
	ir_id *into = malloc((x->f->g.n_nodes + 1) * sizeof *into);
	ck_assert(pass_fuse_ew_plan(x->m, x->f, into));
	bool is_one = n == 1 && into[one_e] == y && into[erf] == one_e;
	ck_assert(n == 1 || into[one_e] == PASS_FUSE_EW_EVERY);
	free(into);
	return is_one;
}

START_TEST(test_the_backward_reads_y_and_the_forward_keeps_its_bits)
{
	for (how h = HOW_MATMUL; h <= HOW_OUTPUT; h++) {
		tu_graph x;
		build(&x, h);
		interp_tensor in[4], r64[2], before[2], after[2];
		make_inputs(&x, in);
		run(&x, true, in, r64);
		run(&x, false, in, before);
		ck_assert(!erf_in_one_kernel(&x));
		ck_assert(pass_fuse_gelu(x.m));
		ck_assert(pass_dce(x.m));
		ck_assert_msg(ir_module_verify(x.m), "%s", tu_graph_diag(&x));
		ck_assert_uint_eq(n_of(&x, IR_OP_DIV), 1);
		ck_assert_uint_eq(n_of(&x, IR_OP_SELECT), 1);
		ck_assert(erf_in_one_kernel(&x));
		run(&x, false, in, after);
		/* the forward: the same nodes, the same bits */
		int64_t n0 = interp_tensor_numel(&before[0]);
		ck_assert(memcmp(before[0].data, after[0].data,
				 (size_t)n0 * 4) == 0);
		/* the gradient: within float32 rounding of float64's, as
		 * close as before the pass, and finite at x = 0 */
		double eb = 0, ea = 0, mag = 0;
		for (int64_t e = 0; e < interp_tensor_numel(&r64[1]); e++) {
			double r = interp_tensor_get(&r64[1], e);
			double b = interp_tensor_get(&before[1], e);
			double a = interp_tensor_get(&after[1], e);
			ck_assert_msg(isfinite(a), "dx[%ld] = %g", (long)e, a);
			eb = fmax(eb, fabs(b - r));
			ea = fmax(ea, fabs(a - r));
			mag = fmax(mag, fabs(r));
		}
		ck_assert_msg(ea <= 2 * eb + 2e-7 * mag, "error %g, before %g",
			      ea, eb);
		/* at x = 0 (rows 0 and 1 of column 0) the gradient is g / 2
		 * exactly, as before */
		for (int r = 0; r < 2; r++)
			ck_assert_float_eq(((float *)after[1].data)[r * C],
					   ((float *)in[2].data)[r * C] * 0.5f);
		for (int o = 0; o < 2; o++) {
			interp_tensor_fini(&x.ctx, &r64[o]);
			interp_tensor_fini(&x.ctx, &before[o]);
			interp_tensor_fini(&x.ctx, &after[o]);
		}
		for (int i = 0; i < 4; i++)
			interp_tensor_fini(&x.ctx, &in[i]);
		tu_graph_fini(&x);
	}
}
END_TEST

START_TEST(test_a_gelu_without_its_own_buffer_or_a_second_read_is_left_alone)
{
	for (how h = HOW_EW; h <= HOW_TANH; h++) {
		tu_graph x;
		build(&x, h);
		uint32_t n_before = x.f->g.n_nodes;
		ck_assert(pass_fuse_gelu(x.m));
		ck_assert_uint_eq(x.f->g.n_nodes, n_before);
		ck_assert_uint_eq(n_of(&x, IR_OP_DIV), 0);
		ck_assert_uint_eq(n_of(&x, IR_OP_SELECT), 0);
		tu_graph_fini(&x);
	}
}
END_TEST

/* models/gpt.g's loss_grad after the pipeline, the pass on or off: its
 * divisions and selects into n_div, n_sel. */
static void count_model(bool is_on, uint32_t *n_div, uint32_t *n_sel)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, "models/gpt.g");
	const char *off[] = {"fuse_gelu"};
	pass_options o = {.disabled = off, .n_disabled = is_on ? 0 : 1};
	ac_differentiate(m, &o);
	ac_run_pipeline(m, &o);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_ERF), 2);
	*n_div = ac_count(m, "loss_grad", IR_OP_DIV);
	*n_sel = ac_count(m, "loss_grad", IR_OP_SELECT);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}

START_TEST(test_the_gpt_training_graph_reads_y_unless_disabled)
{
	uint32_t div_on, sel_on, div_off, sel_off;
	count_model(true, &div_on, &sel_on);
	count_model(false, &div_off, &sel_off);
	/* one quotient a layer (gpt.g: L = 2) */
	ck_assert_uint_eq(div_on, div_off + 2);
	ck_assert_uint_eq(sel_on, sel_off + 2);
}
END_TEST

Suite *passes_fuse_gelu_suite(void);
Suite *passes_fuse_gelu_suite(void)
{
	Suite *s = suite_create("passes_fuse_gelu");
	TCase *tc = tcase_create("fuse_gelu");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc,
		       test_the_backward_reads_y_and_the_forward_keeps_its_bits);
	tcase_add_test(
		tc,
		test_a_gelu_without_its_own_buffer_or_a_second_read_is_left_alone);
	tcase_add_test(tc, test_the_gpt_training_graph_reads_y_unless_disabled);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(passes_fuse_gelu_suite());
}
