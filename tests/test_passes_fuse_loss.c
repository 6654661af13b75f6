/*
 * test_passes_fuse_loss.c - the fuse_loss pass (passes/fuse_loss.c): a
 * cross_entropy and a cross_entropy_grad of the same logits and labels
 * become one cross_entropy_with_grad whose parts give the very values
 * the two nodes gave (the interpreter, float32 and float64, bit for
 * bit); it leaves them apart when logits, labels differ or the gradient
 * depends on the loss; and it fires on both seq2seq models' loss_grad.
 */
#include "attn_cases.h"
#include "testutil.h"

/* f(logits f32[R, V], labels i32[R], g f32[R], other f32[R, V],
 * other_labels i32[R]) -> cross_entropy, cross_entropy_grad, where
 * `how` picks the gradient's operands: 0 the same logits and labels, 1
 * other logits, 2 other labels, 3 g times the loss. */
static void build(tu_graph *x, int64_t R, int64_t V, int how)
{
	tu_graph_init(x, 8);
	ir_id lg = tu_input(x, tu_type(IR_F32, 2, R, V));
	ir_id lb = tu_input(x, tu_type(IR_I32, 1, R));
	ir_id g = tu_input(x, tu_type(IR_F32, 1, R));
	ir_id lg2 = tu_input(x, tu_type(IR_F32, 2, R, V));
	ir_id lb2 = tu_input(x, tu_type(IR_I32, 1, R));
	ir_id ce_args[2] = {lg, lb};
	ir_id ce = tu_build(x, IR_OP_CROSS_ENTROPY, ce_args, 2, NULL, NULL);
	ir_id gg_args[2] = {g, ce};
	ir_id gg = how == 3 ? tu_build(x, IR_OP_MUL, gg_args, 2, NULL, NULL) : g;
	ir_id cg_args[3] = {how == 1 ? lg2 : lg, how == 2 ? lb2 : lb, gg};
	ir_id cg = tu_build(x, IR_OP_CROSS_ENTROPY_GRAD, cg_args, 3, NULL, NULL);
	x->f->output_names[0] = "loss";
	x->f->outputs[0] = ce;
	x->f->output_names[1] = "grad";
	x->f->outputs[1] = cg;
	x->f->n_outputs = 2;
}

/* Runs f on fixed inputs: logits with a wide spread, labels at both
 * ends of [0, V), gradients of both signs and zero (a masked row). */
static void run(tu_graph *x, bool is_f64, interp_tensor *out)
{
	interp_tensor in[5];
	memset(in, 0, sizeof in);
	for (uint32_t i = 0; i < 5; i++) {
		const ir_type *t = &x->f->g.nodes[x->f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef;
		ck_assert(interp_tensor_alloc(&x->ctx, &in[i], t->dtype,
					      t->rank, dims));
		int64_t n = interp_tensor_numel(&in[i]);
		int64_t V = x->f->g.nodes[x->f->inputs[0]].type.dims[1].coef;
		for (int64_t e = 0; e < n; e++) {
			if (t->dtype == IR_I32)
				((int32_t *)in[i].data)[e] =
					(int32_t)(e % 2 ? V - 1 : (e * 7) % V);
			else
				((float *)in[i].data)[e] =
					(float)(sin((double)(e * 13 + i)) *
						(i == 2 ? 1.5 : 9.0)) *
					(i == 2 && e % 3 == 0 ? 0.0f : 1.0f);
		}
	}
	interp_opts o = {.is_f64 = is_f64};
	ck_assert_msg(interp_run(&x->ctx, x->m, x->f, &o, NULL, in, out), "%s",
		      tu_graph_diag(x));
	for (uint32_t i = 0; i < 5; i++)
		interp_tensor_fini(&x->ctx, &in[i]);
}

static void expect_same_bits(const interp_tensor *a, const interp_tensor *b)
{
	int64_t n = interp_tensor_numel(a);
	ck_assert_int_eq(n, interp_tensor_numel(b));
	size_t es = a->dtype == IR_F64 ? 8 : 4;
	ck_assert_int_eq(a->dtype, b->dtype);
	ck_assert_msg(memcmp(a->data, b->data, (size_t)n * es) == 0,
		      "results differ after fusion");
}

static void check_fuses(int64_t R, int64_t V)
{
	for (int f64 = 0; f64 < 2; f64++) {
		tu_graph x;
		build(&x, R, V, 0);
		interp_tensor before[2], after[2];
		run(&x, f64, before);
		ck_assert(pass_fuse_loss(x.m));
		ck_assert(ir_module_verify(x.m));
		ck_assert_uint_eq(ac_count(x.m, "f",
					   IR_OP_CROSS_ENTROPY_WITH_GRAD),
				  1);
		ck_assert_uint_eq(ac_count(x.m, "f", IR_OP_CROSS_ENTROPY), 0);
		ck_assert_uint_eq(ac_count(x.m, "f", IR_OP_CROSS_ENTROPY_GRAD),
				  0);
		run(&x, f64, after);
		for (int o = 0; o < 2; o++) {
			expect_same_bits(&before[o], &after[o]);
			interp_tensor_fini(&x.ctx, &before[o]);
			interp_tensor_fini(&x.ctx, &after[o]);
		}
		tu_graph_fini(&x);
	}
}

START_TEST(test_a_loss_and_its_gradient_fuse_into_one_node_with_the_same_values)
{
	check_fuses(1, 1);
	check_fuses(6, 2);
	check_fuses(7, 201);
	check_fuses(3, 300);
}
END_TEST

START_TEST(test_other_logits_other_labels_or_a_gradient_of_the_loss_keep_them_apart)
{
	for (int how = 1; how <= 3; how++) {
		tu_graph x;
		build(&x, 4, 5, how);
		ck_assert(pass_fuse_loss(x.m));
		ck_assert_uint_eq(ac_count(x.m, "f",
					   IR_OP_CROSS_ENTROPY_WITH_GRAD),
				  0);
		ck_assert_uint_eq(ac_count(x.m, "f", IR_OP_CROSS_ENTROPY), 1);
		ck_assert_uint_eq(ac_count(x.m, "f", IR_OP_CROSS_ENTROPY_GRAD),
				  1);
		tu_graph_fini(&x);
	}
}
END_TEST

static void check_model(const char *rel, bool is_fused)
{
	tu_graph x;
	tu_graph_init_ctx(&x);
	ir_module *m = ac_load_model(&x, rel);
	const char *off[] = {"fuse_loss"};
	pass_options o = {.disabled = off, .n_disabled = is_fused ? 0 : 1};
	ac_differentiate(m, &o);
	ac_run_pipeline(m, &o);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_CROSS_ENTROPY_WITH_GRAD),
			  is_fused);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_CROSS_ENTROPY),
			  !is_fused);
	ck_assert_uint_eq(ac_count(m, "loss_grad", IR_OP_CROSS_ENTROPY_GRAD),
			  !is_fused);
	/* The forward loss has no gradient to fuse with. */
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_CROSS_ENTROPY), 1);
	ck_assert_uint_eq(ac_count(m, "loss", IR_OP_CROSS_ENTROPY_WITH_GRAD), 0);
	ir_module_destroy(m);
	tu_graph_fini(&x);
}

START_TEST(test_both_seq2seq_training_graphs_fuse_their_loss_unless_disabled)
{
	check_model("models/transformer.g", true);
	check_model("models/bahdanau.g", true);
	check_model("models/transformer.g", false);
	check_model("models/bahdanau.g", false);
}
END_TEST

Suite *passes_fuse_loss_suite(void);
Suite *passes_fuse_loss_suite(void)
{
	Suite *s = suite_create("passes_fuse_loss");
	TCase *tc = tcase_create("fuse_loss");
	tcase_set_timeout(tc, 60);
	tcase_add_test(
		tc,
		test_a_loss_and_its_gradient_fuse_into_one_node_with_the_same_values);
	tcase_add_test(
		tc,
		test_other_logits_other_labels_or_a_gradient_of_the_loss_keep_them_apart);
	tcase_add_test(
		tc,
		test_both_seq2seq_training_graphs_fuse_their_loss_unless_disabled);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(passes_fuse_loss_suite());
}
