/*
 * test_passes_fuse_ew.c - the plan of elementwise fusion
 * (pass_fuse_ew_plan): what fuses into which consumer, and what must not
 * (two uses of a costly op, an output, a consumer that broadcasts the value, a consumer
 * that cannot host it, a kernel past its bound), on hand-built graphs and
 * on the book's Transformer; the pass's name and switches.
 */
#include "frontend.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

static ir_id op1(tu_graph *g, ir_op op, ir_id a, const ir_attr *attr)
{
	return tu_build(g, op, &a, 1, attr, NULL);
}

static ir_id op2(tu_graph *g, ir_op op, ir_id a, ir_id b)
{
	ir_id args[2] = {a, b};
	return tu_build(g, op, args, 2, NULL, NULL);
}

static void ret(tu_graph *g, ir_id id)
{
	g->f->output_names[g->f->n_outputs] = "out";
	g->f->outputs[g->f->n_outputs++] = id;
}

/* The plan of g's function (freed by the caller). */
static ir_id *plan(tu_graph *g)
{
	ir_id *into = calloc(g->f->g.n_nodes + 1, sizeof *into);
	ck_assert(pass_fuse_ew_plan(g->m, g->f, into));
	return into;
}

START_TEST(test_a_chain_fuses_node_by_node_into_the_kernel_at_its_end)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 2, 4, 8));
	ir_id b = tu_input(&g, tu_type(IR_F32, 1, 8));
	ir_id add = op2(&g, IR_OP_ADD, x, b);
	ir_id relu = op1(&g, IR_OP_RELU, add, NULL);
	ir_attr da = {.dropout = {0.1, g.m->n_dropout_streams++}};
	ir_id drop = op1(&g, IR_OP_DROPOUT, relu, &da);
	ir_attr ra = {.reduce = {1u << 1, false}};
	ir_id sum = op1(&g, IR_OP_SUM, drop, &ra);
	ret(&g, sum);
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[add], relu);
	ck_assert_uint_eq(into[relu], drop);
	ck_assert_uint_eq(into[drop], sum);
	ck_assert_uint_eq(into[sum], IR_NONE);
	ck_assert_uint_eq(into[x], IR_NONE);
	ck_assert_uint_eq(pass_fuse_ew_count(g.f, into), 3);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_two_uses_an_output_or_a_broadcast_reader_keep_a_node_unfused)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 2, 4, 8));
	ir_id v = tu_input(&g, tu_type(IR_F32, 1, 8));
	ir_id twice = op1(&g, IR_OP_EXP, x, NULL);
	ir_id out = op1(&g, IR_OP_TANH, x, NULL);
	ir_id small = op1(&g, IR_OP_SIGMOID, v, NULL); /* (8) read as (4, 8) */
	ir_id a = op2(&g, IR_OP_MUL, twice, twice);
	ir_id c = op2(&g, IR_OP_ADD, a, out);
	ret(&g, op2(&g, IR_OP_ADD, c, small));
	ret(&g, out);
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[twice], IR_NONE);
	ck_assert_uint_eq(into[out], IR_NONE);
	ck_assert_uint_eq(into[small], IR_NONE);
	ck_assert_uint_eq(into[a], c);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_only_hosts_read_in_place_and_only_their_data_operand)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 2, 4, 8));
	ir_id w = tu_input(&g, tu_type(IR_F32, 2, 8, 8));
	ir_id len = tu_input(&g, tu_type(IR_I32, 1, 4));
	ir_id e = op1(&g, IR_OP_EXP, x, NULL);
	ir_attr mm = {.matmul = {false, false}};
	ir_id args[2] = {e, w};
	ir_id prod = tu_build(&g, IR_OP_MATMUL, args, 2, &mm, NULL);
	ir_id t = op1(&g, IR_OP_TANH, prod, NULL); /* a matmul never fuses */
	ir_id one = tu_const(&g, tu_type(IR_I32, 0), &(int32_t){1});
	ir_id valid = op2(&g, IR_OP_ADD, len, one);
	ir_id sargs[2] = {t, valid};
	ir_attr fa = {.fill = -1e6};
	ir_id sm = tu_build(&g, IR_OP_MASKED_SOFTMAX, sargs, 2, &fa, NULL);
	ret(&g, sm);
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[e], IR_NONE);     /* matmul cannot host */
	ck_assert_uint_eq(into[prod], IR_NONE);  /* not elementwise */
	ck_assert_uint_eq(into[t], sm);          /* the softmax's data */
	ck_assert_uint_eq(into[valid], IR_NONE); /* its lengths: per row */
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_a_cheap_node_with_two_readers_is_computed_in_both)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 2, 4, 8));
	ir_id m = tu_input(&g, tu_type(IR_F32, 2, 4, 1));
	ir_id w = tu_input(&g, tu_type(IR_F32, 2, 8, 8));
	ir_id neg = op1(&g, IR_OP_NEG, m, NULL); /* one reader: d */
	ir_id d = op2(&g, IR_OP_SUB, x, neg);    /* read by sq and y */
	ir_id sq = op2(&g, IR_OP_MUL, d, d);
	ir_id y = op1(&g, IR_OP_RELU, d, NULL);
	ir_id s = op2(&g, IR_OP_ADD, sq, y);
	ir_id z = op1(&g, IR_OP_ABS, s, NULL); /* read by w and a matmul */
	ir_attr mm = {.matmul = {false, false}};
	ir_id args[2] = {z, w};
	ir_id prod = tu_build(&g, IR_OP_MATMUL, args, 2, &mm, NULL);
	ret(&g, op2(&g, IR_OP_ADD, prod, z));
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[d], PASS_FUSE_EW_EVERY);
	ck_assert(pass_fuse_ew_is_in(into, d, sq) &&
		  pass_fuse_ew_is_in(into, d, y));
	ck_assert_uint_eq(into[neg], IR_NONE); /* d broadcasts it */
	ck_assert_uint_eq(into[sq], s);
	ck_assert_uint_eq(into[z], IR_NONE); /* a matmul cannot host it */
	free(into);
	tu_graph_fini(&g);
}
END_TEST

/* A chain of residual adds, each read by a kernel of its own and by the
 * next add: a node of several readers under another is computed in at
 * most PASS_FUSE_EW_MAX_NESTED kernels, so every other add keeps its
 * buffer instead of the chain growing into every later kernel. */
START_TEST(test_a_chain_of_several_reader_nodes_is_cut_every_other_node)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_type t = tu_type(IR_F32, 2, 4, 8);
	ir_id x = tu_input(&g, t);
	ir_id a[5] = {x};
	for (int i = 1; i <= 4; i++) {
		a[i] = op2(&g, IR_OP_ADD, a[i - 1], tu_input(&g, t));
		if (i < 4)
			ret(&g, op2(&g, IR_OP_MUL, a[i], x));
	}
	ret(&g, a[4]);
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[a[4]], IR_NONE);            /* an output */
	ck_assert_uint_eq(into[a[3]], PASS_FUSE_EW_EVERY); /* 2 kernels */
	ck_assert_uint_eq(into[a[2]], IR_NONE);            /* would be in 3 */
	ck_assert_uint_eq(into[a[1]], PASS_FUSE_EW_EVERY);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_a_costly_node_is_computed_once_in_at_most_two_kernels)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 2, 4, 8));
	ir_id w = tu_input(&g, tu_type(IR_F32, 2, 8, 8));
	ir_id e2 = op1(&g, IR_OP_ERF, x, NULL);
	ir_id c2 = op2(&g, IR_OP_ADD, e2, x); /* in two kernels */
	ret(&g, op2(&g, IR_OP_MUL, c2, x));
	ret(&g, op2(&g, IR_OP_SUB, c2, x));
	ir_id e3 = op1(&g, IR_OP_TANH, x, NULL);
	ir_id c3 = op2(&g, IR_OP_ADD, e3, x); /* in three */
	ret(&g, op2(&g, IR_OP_MUL, c3, x));
	ret(&g, op2(&g, IR_OP_SUB, c3, x));
	ret(&g, op2(&g, IR_OP_DIV, c3, x));
	ir_id e1 = op1(&g, IR_OP_EXP, x, NULL);
	ir_id c1 = op2(&g, IR_OP_ADD, e1, x); /* twice in one kernel */
	ir_id d1 = op2(&g, IR_OP_MUL, c1, c1);
	ir_attr mm = {.matmul = {false, false}};
	ir_id args[2] = {d1, w};
	ret(&g, tu_build(&g, IR_OP_MATMUL, args, 2, &mm, NULL));
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[c2], PASS_FUSE_EW_EVERY);
	ck_assert_uint_eq(into[e2], c2);
	ck_assert_uint_eq(into[c3], PASS_FUSE_EW_EVERY);
	ck_assert_uint_eq(into[e3], IR_NONE);
	ck_assert_uint_eq(into[c1], PASS_FUSE_EW_EVERY);
	ck_assert_uint_eq(into[e1], IR_NONE);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_a_node_read_by_nodes_in_several_kernels_fuses_into_all)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 2, 4, 8));
	ir_id b = tu_input(&g, tu_type(IR_F32, 1, 8));
	ir_id v = op2(&g, IR_OP_ADD, x, b);    /* read by u and h */
	ir_id u = op2(&g, IR_OP_MUL, v, v);    /* read by both outputs */
	ir_id h = op1(&g, IR_OP_NEG, v, NULL); /* read by both outputs */
	ret(&g, op2(&g, IR_OP_ADD, u, h));
	ret(&g, op2(&g, IR_OP_SUB, u, h));
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[u], PASS_FUSE_EW_EVERY);
	ck_assert_uint_eq(into[h], PASS_FUSE_EW_EVERY);
	ck_assert_uint_eq(into[v], PASS_FUSE_EW_EVERY);
	ck_assert_uint_eq(pass_fuse_ew_count(g.f, into), 3);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_a_buffer_read_twice_in_a_tree_counts_one_array)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 1, 16));
	ir_id acc = x;
	for (int i = 0; i < 2 * PASS_FUSE_EW_MAX_ARRAYS; i++)
		acc = op2(&g, IR_OP_ADD, acc, x);
	ret(&g, acc);
	ir_id *into = plan(&g);
	ck_assert_uint_eq(pass_fuse_ew_count(g.f, into),
			  2 * PASS_FUSE_EW_MAX_ARRAYS - 1);
	/* the same leaf under a permute is read at other indices: one
	 * array each */
	tu_graph h;
	tu_graph_init(&h, 8);
	ir_id y = tu_input(&h, tu_type(IR_F32, 2, 4, 4));
	ir_attr pa = {.permute = {{1, 0}}};
	acc = y;
	for (int i = 0; i < 16; i++) /* 49 tree nodes, 17 arrays */
		acc = op2(&h, IR_OP_ADD, acc, op1(&h, IR_OP_PERMUTE, y, &pa));
	ret(&h, acc);
	ir_id *hinto = plan(&h);
	uint32_t kernels = 0;
	for (ir_id i = 0; i < h.f->g.n_nodes; i++)
		kernels += h.f->g.nodes[i].op == IR_OP_ADD &&
			   hinto[i] == IR_NONE;
	ck_assert_uint_eq(kernels, 2);
	free(hinto);
	tu_graph_fini(&h);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_a_permute_fuses_into_an_elementwise_reader_and_hosts_its_producer)
{
	tu_graph g;
	tu_graph_init(&g, 8);
	ir_id x = tu_input(&g, tu_type(IR_F32, 3, 2, 4, 8));
	ir_id y = tu_input(&g, tu_type(IR_F32, 3, 4, 2, 8));
	ir_id t = op1(&g, IR_OP_TANH, x, NULL);
	ir_attr pa = {.permute = {{1, 0, 2}}};
	ir_id p = op1(&g, IR_OP_PERMUTE, t, &pa);
	ir_id s = op2(&g, IR_OP_SUB, p, y);
	ret(&g, s);
	ir_id *into = plan(&g);
	ck_assert_uint_eq(into[t], p);
	ck_assert_uint_eq(into[p], s);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_a_kernel_reads_at_most_the_bounded_number_of_arrays)
{
	tu_graph g;
	tu_graph_init(&g, 40);
	ir_id acc = tu_input(&g, tu_type(IR_F32, 1, 16));
	for (int i = 0; i < 30; i++)
		acc = op2(&g, IR_OP_ADD, acc,
			  tu_input(&g, tu_type(IR_F32, 1, 16)));
	ret(&g, acc);
	ir_id *into = plan(&g);
	/* Each kernel's tree: r adds reading r + 1 inputs; r + 1 <= bound */
	uint32_t fused = pass_fuse_ew_count(g.f, into);
	uint32_t kernels = 30 - fused;
	ck_assert_uint_eq(kernels, (30 + PASS_FUSE_EW_MAX_ARRAYS - 2) /
					   (PASS_FUSE_EW_MAX_ARRAYS - 1));
	ck_assert_uint_eq(into[acc], IR_NONE);
	free(into);
	tu_graph_fini(&g);
}
END_TEST

START_TEST(test_fuse_elementwise_is_a_fusion_pass_that_runs_at_lowering)
{
	const pass_info *p = pass_find("fuse_elementwise");
	ck_assert_ptr_nonnull(p);
	ck_assert(p->is_fusion);
	ck_assert(p->run == NULL);
	const char *off[] = {"fuse_elementwise"};
	pass_options on = {0}, no_fuse = {.no_fuse = true};
	pass_options disabled = {.disabled = off, .n_disabled = 1};
	ck_assert(pass_is_enabled(&on, "fuse_elementwise"));
	ck_assert(!pass_is_enabled(&no_fuse, "fuse_elementwise"));
	ck_assert(!pass_is_enabled(&disabled, "fuse_elementwise"));
	ck_assert(pass_is_enabled(&disabled, "fuse_attention"));
	ck_assert(!pass_is_enabled(&on, "no_such_pass"));
}
END_TEST

START_TEST(test_the_transformer_training_step_fuses_its_chains)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	uint32_t file = ir_ctx_load_source(&ctx,
					   tu_path("models/transformer.g"));
	ir_module *m = fe_compile(&ctx, file);
	ck_assert_ptr_nonnull(m);
	pass_options po = {0};
	ck_assert(pass_pipeline_forward(m, &po));
	ck_assert(pass_autodiff(m, "loss"));
	ck_assert(pass_pipeline_run(m, &po));
	const ir_func *f = ir_module_find_func(m, "loss_grad");
	ir_id *into = calloc(f->g.n_nodes + 1, sizeof *into);
	ck_assert(pass_fuse_ew_plan(m, f, into));
	uint32_t n_ew = 0, n_fused_ew = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		ir_op op = f->g.nodes[i].op;
		if (into[i] != IR_NONE) {
			ck_assert(pass_fuse_ew_is_fusible(op));
			ir_id c = into[i];
			ck_assert(c == PASS_FUSE_EW_EVERY || c > i);
			for (uint32_t o = 0; o < f->n_outputs; o++)
				ck_assert_uint_ne(f->outputs[o], i);
		}
		if (ir_op_table[op].flags & IR_OPF_EW) {
			n_ew++;
			n_fused_ew += into[i] != IR_NONE;
		}
	}
	/* most elementwise nodes of the training step run inside another
	 * kernel (the rest have two readers, or are broadcast by theirs) */
	ck_assert_uint_gt(n_fused_ew * 2, n_ew);
	free(into);
	ir_module_destroy(m);
	ir_ctx_fini(&ctx);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("passes_fuse_ew");
	TCase *tc = tcase_create("plan");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc,
		       test_a_costly_node_is_computed_once_in_at_most_two_kernels);
	tcase_add_test(tc,
		       test_a_chain_of_several_reader_nodes_is_cut_every_other_node);
	tcase_add_test(tc,
		       test_a_node_read_by_nodes_in_several_kernels_fuses_into_all);
	tcase_add_test(tc, test_a_buffer_read_twice_in_a_tree_counts_one_array);
	tcase_add_test(tc,
		       test_a_chain_fuses_node_by_node_into_the_kernel_at_its_end);
	tcase_add_test(
		tc,
		test_two_uses_an_output_or_a_broadcast_reader_keep_a_node_unfused);
	tcase_add_test(tc,
		       test_only_hosts_read_in_place_and_only_their_data_operand);
	tcase_add_test(tc,
		       test_a_cheap_node_with_two_readers_is_computed_in_both);
	tcase_add_test(
		tc,
		test_a_permute_fuses_into_an_elementwise_reader_and_hosts_its_producer);
	tcase_add_test(tc,
		       test_a_kernel_reads_at_most_the_bounded_number_of_arrays);
	tcase_add_test(tc,
		       test_fuse_elementwise_is_a_fusion_pass_that_runs_at_lowering);
	tcase_add_test(tc, test_the_transformer_training_step_fuses_its_chains);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
