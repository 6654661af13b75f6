/*
 * test_passes_rowbound.c - value bounds (passes/rowbound.c): on the
 * book's models and small ones, at made-up inputs and parameters, every
 * forward node's largest |x| in the interpreter's run is within its
 * bound; parameters scaled until the run overflows, a NaN in a padding
 * row, scores near a mask's fill and an op without a rule make the
 * check fail.
 */
#include "row_case.h"
#include "rowbound.h"
#include "rowlive.h"

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rb_case {
	row_case r;
	pass_rowbound rb;
} rb_case;

/* Compiles source text (fused as the pipeline does, or not) and
 * prepares the bounds of its function fname. */
static void rb_load(rb_case *c, const char *src, const char *fname,
		    bool is_fused)
{
	memset(c, 0, sizeof *c);
	row_case_load(&c->r, src, fname, is_fused);
	ck_assert(pass_rowbound_init(&c->r.x.ctx, c->r.x.m, c->r.f, &c->rb));
}

/* The model file rel's fname (is_grad: its gradient function). */
static void rb_load_file(rb_case *c, const char *rel, const char *fname,
			 bool is_grad)
{
	memset(c, 0, sizeof *c);
	row_case_load_file(&c->r, rel, fname, is_grad);
	ck_assert(pass_rowbound_init(&c->r.x.ctx, c->r.x.m, c->r.f, &c->rb));
}

static void rb_fini(rb_case *c)
{
	pass_rowbound_fini(&c->r.x.ctx, &c->rb);
	row_case_fini(&c->r);
}

/* f32 values an input gets: sin(7e + 3i + 1) times in_scale. */
static double in_scale = 1;

static void rb_input(rb_case *c, uint32_t i, int rank, const int64_t *dims,
		     const int32_t *vals)
{
	row_case_input(&c->r, i, rank, dims, vals, in_scale);
}

/* Which nodes a simulated skip clears the dead rows of. */
typedef enum skip_kind {
	SKIP_NONE,
	SKIP_PRODUCTS, /* forward products (A not transposed), layer norms */
	SKIP_ALL,      /* every forward f32 node of rank >= 2 */
} skip_kind;

typedef struct skip_cx {
	const pass_rowlive *rl;
	skip_kind kind;
	const interp_tensor *vals;
} skip_cx;

static const int32_t *skip_values(void *ud, ir_id node)
{
	const skip_cx *s = ud;
	ck_assert_int_eq(s->vals[node].dtype, IR_I32);
	return s->vals[node].data;
}

/* Writes +0 into the rows of node n's value t that row liveness calls
 * dead, as a kernel leaving them out would; returns whether some row
 * was. */
static bool clear_dead_rows(rb_case *c, skip_cx *s, ir_id n, interp_tensor *t)
{
	const ir_node *nd = &c->r.f->g.nodes[n];
	uint32_t e = s->rl->of_node[n];
	bool is_product = nd->op == IR_OP_MATMUL && !nd->attr.matmul.ta &&
			  !nd->attr.matmul.tb;
	if (e == PASS_ROWLIVE_IS_ALL || !c->rb.is_forward[n] ||
	    t->dtype != IR_F32 || t->rank < 2 ||
	    (s->kind == SKIP_PRODUCTS && !is_product &&
	     nd->op != IR_OP_LAYER_NORM))
		return false;
	const interp_tensor *rt = &s->vals[s->rl->row_node[n]];
	int64_t B = rt->dims[0], T = rt->dims[1];
	int64_t per_row = interp_tensor_numel(t) / (B * T);
	int32_t len[64];
	ck_assert(B <= 64);
	pass_rowlive_eval(s->rl, c->r.f, c->r.syms, e, B, T, skip_values, s,
			  len);
	bool any = false;
	for (int64_t b = 0; b < B; b++)
		for (int64_t r = len[b]; r < T; r++) {
			float *row = (float *)t->data + (b * T + r) * per_row;
			memset(row, 0, (size_t)per_row * sizeof *row);
			any = true;
		}
	return any;
}

/* Runs f node by node in training mode (dropout on) into vals,
 * clearing dead rows as s says (NULL: none); returns how many nodes had
 * rows cleared. */
static uint32_t run_nodes_into(rb_case *c, interp_tensor *vals, skip_cx *s)
{
	const ir_graph *g = &c->r.f->g;
	uint32_t n_cleared = 0;
	if (s)
		s->vals = vals;
	for (ir_id i = 0; i < g->n_nodes; i++) {
		row_case_eval_node(&c->r, vals, i);
		if (s && s->kind != SKIP_NONE)
			n_cleared += clear_dead_rows(c, s, i, &vals[i]);
	}
	return n_cleared;
}

/* Runs f node by node in training mode (dropout on) into c->r.ref. */
static void run_nodes(rb_case *c)
{
	run_nodes_into(c, c->r.ref, NULL);
}

/* The largest |x| of a value, NaN if one is NaN. */
static double max_abs(const interp_tensor *t)
{
	double r = 0;
	int64_t n = interp_tensor_numel(t);
	for (int64_t e = 0; e < n; e++) {
		double v = fabs(interp_tensor_get(t, e));
		if (isnan(v))
			return NAN;
		r = v > r ? v : r;
	}
	return r;
}

/* The largest sum of |x| down a column (by_row: along a row) of a
 * rank-2 value, NaN if one is NaN. */
static double max_sum(const interp_tensor *t, bool by_row)
{
	ck_assert_int_eq(t->rank, 2);
	int64_t R = t->dims[0], C = t->dims[1];
	double r = 0;
	for (int64_t a = 0; a < (by_row ? R : C); a++) {
		double s = 0;
		for (int64_t b = 0; b < (by_row ? C : R); b++)
			s += fabs(interp_tensor_get(t, by_row ? a * C + b
							      : b * C + a));
		if (isnan(s))
			return NAN;
		r = s > r ? s : r;
	}
	return r;
}

/* What the runtime gives: the leaves' statistics, scanned. */
static double leaf_max(void *ud, ir_id node, pass_rowbound_stat stat)
{
	rb_case *c = ud;
	const ir_node *nd = &c->r.f->g.nodes[node];
	const interp_tensor *t = nd->op == IR_OP_INPUT
					 ? &c->r.in[nd->attr.input_index]
					 : &c->r.params[nd->attr.param_index];
	if (stat == PASS_ROWBOUND_MAX)
		return max_abs(t);
	return max_sum(t, stat == PASS_ROWBOUND_ROW_SUM);
}

/* Set by a test: the decoder's embedding table's row of <pad> (id 1)
 * gets a NaN. */
static bool is_nan_pad = false;

/* Parameters from seed, each multiplied by scale; then the plain run. */
static void rb_prepare(rb_case *c, uint64_t seed, double scale)
{
	row_case_params(&c->r, seed);
	for (uint32_t p = 0; p < c->r.x.m->n_params; p++) {
		float *x = c->r.params[p].data;
		int64_t n = interp_tensor_numel(&c->r.params[p]);
		/* Layer norms' gamma starts at 1 and beta at 0: vary them. */
		for (int64_t e = 0; e < n; e++)
			x[e] = (float)(scale *
				       (x[e] + 0.25 * sin((double)(e + p))));
	}
	if (is_nan_pad) {
		interp_tensor *t = row_case_param(&c->r, "decoder.embed");
		((float *)t->data)[t->dims[1]] = NAN;
	}
	run_nodes(c);
}

/* Every forward f32 node's largest |x| is within its bound (a relative
 * 1e-5 of room for float32's rounding). Returns the largest bound, and
 * in *n_nonfinite how many forward nodes hold an inf or NaN. */
static double check_bounds(rb_case *c, uint32_t *n_nonfinite)
{
	double worst = pass_rowbound_eval(&c->rb, c->r.f, c->r.syms, leaf_max,
					  c);
	uint32_t n_bad = 0, n_checked = 0;
	for (ir_id n = 0; n < c->r.f->g.n_nodes; n++) {
		if (!c->rb.is_forward[n] || c->r.ref[n].dtype == IR_I32)
			continue;
		double x = max_abs(&c->r.ref[n]);
		double bound = c->rb.of_node[n];
		n_bad += !isfinite(x);
		/* Past float32's range the run may overflow. */
		if (!(bound < FLT_MAX))
			continue;
		ck_assert_msg(x <= bound * (1 + 1e-5),
			      "%%%u (%s): max |x| %g above its bound %g", n,
			      ir_op_table[c->r.f->g.nodes[n].op].name, x, bound);
		n_checked++;
	}
	ck_assert_uint_gt(n_checked, 0);
	if (n_nonfinite)
		*n_nonfinite = n_bad;
	return worst;
}

/* The book models' loss inputs (src, src_valid, tgt_in, tgt, tgt_valid)
 * for three padded pairs. */
static void book_inputs(rb_case *c, uint64_t seed, double scale)
{
	row_case_book_inputs(&c->r);
	rb_prepare(c, seed, scale);
}

/* Frees the run, its inputs and parameters, for another rb_prepare. */
static void free_run(rb_case *c)
{
	row_case_free_run(&c->r);
}

/* The book's models, as --train compiles loss_grad: at several seeds
 * and scales of the parameters every bound holds, and at the book's
 * scale the check passes (the skip is on). */
static void book_model(const char *rel)
{
	static const double scales[] = {1, 0.3, 3};
	for (uint32_t s = 0; s < 3; s++) {
		rb_case c;
		rb_load_file(&c, rel, "loss", true);
		book_inputs(&c, 7 + s, scales[s]);
		uint32_t n_bad;
		double worst = check_bounds(&c, &n_bad);
		ck_assert_uint_eq(n_bad, 0);
		if (s == 0)
			ck_assert_msg(pass_rowbound_is_safe(worst),
				      "%s: largest bound %g", rel, worst);
		/* The products by a weight take its column sums, most of
		 * them tighter than K·max|x|·max|W|. */
		uint32_t n_tight = 0;
		for (ir_id n = 0; n < c.r.f->g.n_nodes; n++) {
			const ir_node *nd = &c.r.f->g.nodes[n];
			ir_id w = nd->op == IR_OP_MATMUL
					  ? ir_arg(&c.r.f->g, n, 1)
					  : IR_NONE;
			if (w == IR_NONE || !c.rb.is_forward[n] ||
			    c.r.f->g.nodes[w].op != IR_OP_PARAM)
				continue;
			const ir_type *ta =
				&c.r.f->g.nodes[ir_arg(&c.r.f->g, n, 0)].type;
			double K = (double)ta->dims[ta->rank - 1].coef;
			double a = c.rb.of_node[ir_arg(&c.r.f->g, n, 0)];
			ck_assert(c.rb.of_node[n] <= K * a * c.rb.of_node[w]);
			n_tight += c.rb.of_node[n] <
				   0.5 * K * a * c.rb.of_node[w];
		}
		ck_assert_uint_ge(n_tight, 4);
		rb_fini(&c);
	}
}

START_TEST(test_rowbound_transformer_bounds_hold)
{
	book_model("models/transformer.g");
}
END_TEST

START_TEST(test_rowbound_bahdanau_bounds_hold)
{
	book_model("models/bahdanau.g");
}
END_TEST

/* leaf_max, counting how often each leaf's statistic is asked. */
typedef struct count_cx {
	rb_case *c;
	uint32_t *asked; /* 3 a node */
} count_cx;

static double leaf_counted(void *ud, ir_id node, pass_rowbound_stat stat)
{
	count_cx *x = ud;
	x->asked[3 * node + stat]++;
	return leaf_max(x->c, node, stat);
}

/* Bahdanau's unrolled steps read each GRU weight in many products: a
 * call asks the runtime for a leaf's statistic once however many read
 * it, and the next call asks again (the parameters change between
 * steps), with the same bounds as the first. */
START_TEST(test_rowbound_asks_each_leaf_once_a_call)
{
	rb_case c;
	rb_load_file(&c, "models/bahdanau.g", "loss", true);
	book_inputs(&c, 7, 1);
	uint32_t n = c.r.f->g.n_nodes;
	count_cx x = {&c, calloc(3 * (size_t)n, sizeof *x.asked)};
	ck_assert(x.asked != NULL);
	double first = pass_rowbound_eval(&c.rb, c.r.f, c.r.syms, leaf_counted,
					  &x);
	uint32_t n_sums = 0;
	for (uint32_t i = 0; i < 3 * n; i++) {
		ck_assert_uint_le(x.asked[i], 1);
		n_sums += i % 3 != PASS_ROWBOUND_MAX && x.asked[i];
	}
	ck_assert_uint_ge(n_sums, 8); /* the GRUs' weights, and more */
	double again = pass_rowbound_eval(&c.rb, c.r.f, c.r.syms, leaf_counted,
					  &x);
	ck_assert(again == first);
	for (uint32_t i = 0; i < 3 * n; i++) /* once in each call, or never */
		ck_assert(x.asked[i] == 0 || x.asked[i] == 2);
	free(x.asked);
	rb_fini(&c);
}
END_TEST

/* The parameters scaled until the run overflows: the check fails
 * first, at a scale where every value is still finite, and again where
 * the forward holds infinities. */
START_TEST(test_rowbound_huge_weights_fail_the_check)
{
	rb_case c;
	rb_load_file(&c, "models/transformer.g", "loss", true);
	static const double scales[] = {1e9, 1e20};
	for (uint32_t s = 0; s < 2; s++) {
		book_inputs(&c, 7, scales[s]);
		uint32_t n_bad;
		double worst = check_bounds(&c, &n_bad);
		ck_assert(!pass_rowbound_is_safe(worst));
		if (s == 1)
			ck_assert_uint_gt(n_bad, 0);
		free_run(&c);
	}
	rb_fini(&c);
}
END_TEST

static const char *masked_mlp =
	"model m\n"
	"dim B\n"
	"const T = 5, D = 8, V = 7\n"
	"export def loss(x: f32[B, T, D], labels: i32[B, T], valid: i32[B])\n"
	"  h = relu(linear(norm(x), 16))\n"
	"  return sum(masked_ce(linear(h, V), labels, valid))\n";

static void inputs_mlp(rb_case *c, uint64_t seed, double scale)
{
	int64_t d3[3] = {3, 5, 8}, d2[2] = {3, 5}, d1[1] = {3};
	static const int32_t valid[3] = {2, 5, 1};
	int32_t labels[15];
	for (int i = 0; i < 15; i++)
		labels[i] = (i * 3) % 7;
	rb_input(c, 0, 3, d3, NULL);
	rb_input(c, 1, 2, d2, labels);
	rb_input(c, 2, 1, d1, valid);
	rb_prepare(c, seed, scale);
}

/* Small models, fused and not, at inputs and parameters of several
 * scales: every bound holds. */
START_TEST(test_rowbound_small_models_bounds_hold)
{
	static const char *srcs[] = {
		"model m\n"
		"dim B\n"
		"const T = 5, D = 8, V = 7\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], "
		"valid: i32[B])\n"
		"  h = relu(linear(norm(x), 16))\n"
		"  return sum(masked_ce(linear(h, V), labels, valid))\n",
		"model m\n"
		"dim B\n"
		"const T = 5, D = 8, V = 7\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], "
		"valid: i32[B])\n"
		"  param W_q, W_k, W_v : [D, D]\n"
		"  q = x @ W_q\n"
		"  w = masked_softmax(q @ (x @ W_k).T / 2, valid)\n"
		"  y = norm(dropout(w @ (x @ W_v), 0.2) + x)\n"
		"  return sum(masked_ce(linear(y, V), labels, valid))\n",
		"model m\n"
		"dim B\n"
		"const T = 5, D = 8, V = 7\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], "
		"valid: i32[B])\n"
		"  h = tanh(linear(x, 16)) * sigmoid(linear(x, 16))\n"
		"  z = concat([h, exp(x / 4)], 2)\n"
		"  return mean(softmax(linear(z, V))) + "
		"sum(masked_ce(linear(z, V), labels, valid))\n",
	};
	static const double scales[] = {1, 0.1, 4};
	for (uint32_t k = 0; k < 3; k++)
		for (uint32_t fused = 0; fused < 2; fused++)
			for (uint32_t s = 0; s < 3; s++) {
				rb_case c;
				rb_load(&c, srcs[k], "loss", fused);
				in_scale = scales[s];
				inputs_mlp(&c, 3 + s, scales[2 - s]);
				in_scale = 1;
				uint32_t n_bad;
				double worst = check_bounds(&c, &n_bad);
				ck_assert_uint_eq(n_bad, 0);
				ck_assert_msg(pass_rowbound_is_safe(worst),
					      "model %u: %g", k, worst);
				rb_fini(&c);
			}
}
END_TEST

/* A NaN in a padding row of an input, or in a weight: the check
 * fails. */
START_TEST(test_rowbound_a_nan_in_a_padding_row_fails_the_check)
{
	rb_case c;
	rb_load(&c, masked_mlp, "loss", true);
	inputs_mlp(&c, 3, 1);
	ck_assert(pass_rowbound_is_safe(check_bounds(&c, NULL)));
	/* Row (0, 4): past valid[0] = 2. */
	((float *)c.r.in[0].data)[(0 * 5 + 4) * 8 + 3] = NAN;
	ck_assert(!pass_rowbound_is_safe(
		pass_rowbound_eval(&c.rb, c.r.f, c.r.syms, leaf_max, &c)));
	((float *)c.r.in[0].data)[(0 * 5 + 4) * 8 + 3] = INFINITY;
	ck_assert(!pass_rowbound_is_safe(
		pass_rowbound_eval(&c.rb, c.r.f, c.r.syms, leaf_max, &c)));
	((float *)c.r.in[0].data)[(0 * 5 + 4) * 8 + 3] = 0;
	ck_assert(pass_rowbound_is_safe(
		pass_rowbound_eval(&c.rb, c.r.f, c.r.syms, leaf_max, &c)));
	for (uint32_t p = 0; p < c.r.x.m->n_params; p++)
		if (c.r.params[p].rank == 2)
			((float *)c.r.params[p].data)[1] = NAN;
	ck_assert(!pass_rowbound_is_safe(
		pass_rowbound_eval(&c.rb, c.r.f, c.r.syms, leaf_max, &c)));
	rb_fini(&c);
}
END_TEST

/* An op without a rule in the forward (log): its bound and the check's
 * are infinite, so no row is left out. */
START_TEST(test_rowbound_an_op_without_a_rule_fails_the_check)
{
	rb_case c;
	rb_load(&c,
		"model m\n"
		"dim B\n"
		"const T = 5, D = 8, V = 7\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], "
		"valid: i32[B])\n"
		"  h = log(abs(linear(x, 16)) + 1)\n"
		"  return sum(masked_ce(linear(h, V), labels, valid))\n",
		"loss", true);
	inputs_mlp(&c, 3, 1);
	double worst = check_bounds(&c, NULL);
	ck_assert(!pass_rowbound_is_safe(worst));
	ck_assert(isinf(worst));
	rb_fini(&c);
}
END_TEST

/* Scores that may come near a mask's fill (-1e6): a masked key could
 * weigh more than 0, so the check fails though every value is finite. */
START_TEST(test_rowbound_scores_near_the_fill_fail_the_check)
{
	rb_case c;
	rb_load(&c,
		"model m\n"
		"dim B\n"
		"const T = 5, D = 8, V = 7\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], "
		"valid: i32[B])\n"
		"  param W_q, W_k, W_v : [D, D]\n"
		"  w = masked_softmax((x @ W_q) @ (x @ W_k).T, valid)\n"
		"  y = norm(w @ (x @ W_v) + x)\n"
		"  return sum(masked_ce(linear(y, V), labels, valid))\n",
		"loss", true);
	inputs_mlp(&c, 3, 1);
	ck_assert(pass_rowbound_is_safe(check_bounds(&c, NULL)));
	free_run(&c);
	inputs_mlp(&c, 3, 300);
	uint32_t n_bad;
	ck_assert(!pass_rowbound_is_safe(check_bounds(&c, &n_bad)));
	ck_assert_uint_eq(n_bad, 0);
	rb_fini(&c);
}
END_TEST

/* Whether f's outputs in vals have the bits of the plain run's. */
static bool outputs_same(const rb_case *c, const interp_tensor *vals)
{
	for (uint32_t o = 0; o < c->r.f->n_outputs; o++) {
		const interp_tensor *a = &c->r.ref[c->r.f->outputs[o]];
		const interp_tensor *b = &vals[c->r.f->outputs[o]];
		size_t n = (size_t)interp_tensor_numel(a) *
			   (a->dtype == IR_F64 ? 8 : 4);
		if (memcmp(a->data, b->data, n) != 0)
			return false;
	}
	return true;
}

/* What the check is for: where it passes, a step that leaves every
 * dead row of the forward out (zeros there: of the products and layer
 * norms, or of every forward node at once) gives the loss and every
 * gradient to the bit, signs of zeros included; where a padding row
 * holds a NaN (the check fails), the loss is NaN in the plain step and
 * a skipping one would have lost it. */
static void skip_keeps_bits(const char *rel)
{
	for (uint32_t seed = 0; seed < 2; seed++) {
		rb_case c;
		rb_load_file(&c, rel, "loss", true);
		book_inputs(&c, 7 + seed, seed ? 0.5 : 1);
		ck_assert(pass_rowbound_is_safe(check_bounds(&c, NULL)));
		pass_rowlive rl;
		ck_assert(pass_rowlive_analyze(&c.r.x.ctx, c.r.x.m, c.r.f, &rl));
		for (skip_kind k = SKIP_PRODUCTS; k <= SKIP_ALL; k++) {
			interp_tensor *vals = ir_alloc(&c.r.x.ctx,
						       c.r.f->g.n_nodes *
							       sizeof *vals);
			skip_cx s = {&rl, k, NULL};
			uint32_t n = run_nodes_into(&c, vals, &s);
			ck_assert_uint_ge(n, k == SKIP_ALL ? 60 : 20);
			ck_assert_msg(outputs_same(&c, vals),
				      "%s: skipping (%d) changed an output",
				      rel, (int)k);
			for (ir_id i = 0; i < c.r.f->g.n_nodes; i++)
				interp_tensor_fini(&c.r.x.ctx, &vals[i]);
			ir_free(&c.r.x.ctx, vals);
		}
		pass_rowlive_fini(&c.r.x.ctx, &rl);
		rb_fini(&c);
	}
	/* A NaN in <pad>'s target embedding: only the decoder's padding rows
	 * read it (every target has a live step), and the
	 * plain step's loss is NaN; the check fails, and a step that left
	 * the dead rows out would have given a finite loss. */
	rb_case c;
	rb_load_file(&c, rel, "loss", true);
	is_nan_pad = true;
	book_inputs(&c, 7, 1);
	is_nan_pad = false;
	ck_assert(!pass_rowbound_is_safe(
		pass_rowbound_eval(&c.rb, c.r.f, c.r.syms, leaf_max, &c)));
	float loss = ((float *)c.r.ref[c.r.f->outputs[0]].data)[0];
	ck_assert(isnan(loss));
	pass_rowlive rl;
	ck_assert(pass_rowlive_analyze(&c.r.x.ctx, c.r.x.m, c.r.f, &rl));
	interp_tensor *vals = ir_alloc(&c.r.x.ctx,
				       c.r.f->g.n_nodes * sizeof *vals);
	skip_cx s = {&rl, SKIP_ALL, NULL};
	run_nodes_into(&c, vals, &s);
	ck_assert(isfinite(((float *)vals[c.r.f->outputs[0]].data)[0]));
	for (ir_id i = 0; i < c.r.f->g.n_nodes; i++)
		interp_tensor_fini(&c.r.x.ctx, &vals[i]);
	ir_free(&c.r.x.ctx, vals);
	pass_rowlive_fini(&c.r.x.ctx, &rl);
	rb_fini(&c);
}

START_TEST(test_rowbound_transformer_skip_keeps_bits)
{
	skip_keeps_bits("models/transformer.g");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("passes_rowbound");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_rowbound_small_models_bounds_hold);
	tcase_add_test(tc, test_rowbound_a_nan_in_a_padding_row_fails_the_check);
	tcase_add_test(tc, test_rowbound_an_op_without_a_rule_fails_the_check);
	tcase_add_test(tc, test_rowbound_scores_near_the_fill_fail_the_check);
	tcase_add_test(tc, test_rowbound_transformer_bounds_hold);
	tcase_add_test(tc, test_rowbound_bahdanau_bounds_hold);
	tcase_add_test(tc, test_rowbound_asks_each_leaf_once_a_call);
	tcase_add_test(tc, test_rowbound_huge_weights_fail_the_check);
	tcase_add_test(tc, test_rowbound_transformer_skip_keeps_bits);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
