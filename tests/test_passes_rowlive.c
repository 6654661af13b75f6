/*
 * test_passes_rowlive.c - the row-liveness analysis (passes/rowlive.c):
 * what it finds on small models written for it and on the book's
 * Transformer, and, the oracle, that it is right: every node's rows it
 * calls dead are overwritten with other (finite) values while the
 * interpreter runs the function node by node, and every output keeps
 * its bits; a row it keeps live because some output reads it is shown
 * to change an output when overwritten.
 */
#include "row_case.h"
#include "rowlive.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rl_case {
	row_case r;
	pass_rowlive rl;
	char text[256];
} rl_case;

/* Compiles source text (fused as the pipeline does, or not) and
 * analyzes its function fname. */
static void rl_load(rl_case *c, const char *src, const char *fname,
		    bool is_fused)
{
	memset(c, 0, sizeof *c);
	row_case_load(&c->r, src, fname, is_fused);
	ck_assert(pass_rowlive_analyze(&c->r.x.ctx, c->r.x.m, c->r.f, &c->rl));
}

/* Source text's loss_grad, as --train compiles it. */
static void rl_load_grad(rl_case *c, const char *src)
{
	memset(c, 0, sizeof *c);
	row_case_load_grad(&c->r, "t.g", src, strlen(src), "loss");
	ck_assert(pass_rowlive_analyze(&c->r.x.ctx, c->r.x.m, c->r.f, &c->rl));
}

/* The model file rel's fname (is_grad: its gradient function). */
static void rl_load_file(rl_case *c, const char *rel, const char *fname,
			 bool is_grad)
{
	memset(c, 0, sizeof *c);
	row_case_load_file(&c->r, rel, fname, is_grad);
	ck_assert(pass_rowlive_analyze(&c->r.x.ctx, c->r.x.m, c->r.f, &c->rl));
}

static void rl_fini(rl_case *c)
{
	pass_rowlive_fini(&c->r.x.ctx, &c->rl);
	row_case_fini(&c->r);
}

/* The liveness of node n as text. */
static const char *rl_text(rl_case *c, ir_id n)
{
	FILE *out = fmemopen(c->text, sizeof c->text, "w");
	pass_rowlive_print(&c->rl, c->rl.of_node[n], out);
	fclose(out);
	return c->text;
}

/* The last node of op op in f (IR_NONE if none); skip: how many of the
 * last to pass over. */
static ir_id last_of(const rl_case *c, ir_op op, uint32_t skip)
{
	for (ir_id n = c->r.f->g.n_nodes; n-- > 0;)
		if (c->r.f->g.nodes[n].op == op && skip-- == 0)
			return n;
	return IR_NONE;
}

/* Input i: dims and values (i32, or f32 made up when vals is NULL). */
static void rl_input(rl_case *c, uint32_t i, int rank, const int64_t *dims,
		     const int32_t *vals)
{
	row_case_input(&c->r, i, rank, dims, vals, 1);
}

static const int32_t *ref_values(void *ud, ir_id node)
{
	rl_case *c = ud;
	ck_assert_int_eq(c->r.ref[node].dtype, IR_I32);
	return c->r.ref[node].data;
}

/* What poison() writes into floats: 1.5, or (a test sets it) NaN. */
static float poison_value = 1.5f;

/* Overwrites the rows of value t (node n) that the analysis calls dead
 * (or, with is_live, the first row it calls live, if any: returns
 * whether it did). Floats get poison_value and ids 1. */
static bool poison(rl_case *c, ir_id n, interp_tensor *t, bool is_live)
{
	const interp_tensor *rt = &c->r.ref[c->rl.row_node[n]];
	if (!rt->data) /* the plain run itself: its own rows */
		rt = t;
	int64_t B = rt->dims[0], T = rt->dims[1];
	int64_t per_row = interp_tensor_numel(t) / (B * T);
	int32_t *len = ir_alloc(&c->r.x.ctx, (size_t)B * sizeof *len);
	pass_rowlive_eval(&c->rl, c->r.f, c->r.syms, c->rl.of_node[n], B, T,
			  ref_values, c, len);
	bool done = false;
	for (int64_t b = 0; b < B && !done; b++)
		for (int64_t r = is_live ? 0 : len[b];
		     r < (is_live ? len[b] : T) && !done; r++) {
			for (int64_t e = 0; e < per_row; e++) {
				int64_t at = (b * T + r) * per_row + e;
				if (t->dtype == IR_I32)
					((int32_t *)t->data)[at] = 1;
				else if (t->dtype == IR_F32)
					((float *)t->data)[at] = poison_value;
				else
					((double *)t->data)[at] = poison_value;
			}
			done = is_live;
		}
	ir_free(&c->r.x.ctx, len);
	return done || !is_live;
}

/* Runs f node by node in training mode (dropout on): vals[i] is node
 * i's value; node victim's rows are poisoned (dead ones, or with
 * is_live one live row) right after it is computed. */
static bool run_nodes(rl_case *c, interp_tensor *vals, ir_id victim,
		      bool is_live)
{
	const ir_graph *g = &c->r.f->g;
	bool is_poisoned = false;
	for (ir_id i = 0; i < g->n_nodes; i++) {
		row_case_eval_node(&c->r, vals, i);
		if (i == victim && vals[i].rank >= 2)
			is_poisoned = poison(c, i, &vals[i], is_live);
	}
	return is_poisoned;
}

static void free_vals(rl_case *c, interp_tensor *vals)
{
	for (uint32_t i = 0; i < c->r.f->g.n_nodes; i++)
		interp_tensor_fini(&c->r.x.ctx, &vals[i]);
	ir_free(&c->r.x.ctx, vals);
}

/* Whether f's outputs in vals have the bits of the plain run's. */
static bool outputs_same(const rl_case *c, const interp_tensor *vals)
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

/* Binds, initializes the parameters and runs the plain run (c->r.ref). */
static void rl_prepare(rl_case *c)
{
	row_case_params(&c->r, 7);
	run_nodes(c, c->r.ref, IR_NONE, false);
}

/* The oracle: for every node with rows the analysis calls dead at these
 * inputs, poisoning them keeps every output's bits. Returns how many
 * nodes had dead rows. */
static uint32_t check_dead_rows_are_dead(rl_case *c, uint32_t stride)
{
	uint32_t n_dead = 0, n_seen = 0;
	for (ir_id n = 0; n < c->r.f->g.n_nodes; n++) {
		uint32_t e = c->rl.of_node[n];
		if (e == PASS_ROWLIVE_IS_ALL || c->r.ref[n].rank < 2 ||
		    n_seen++ % stride != 0)
			continue;
		interp_tensor *vals = ir_alloc(&c->r.x.ctx,
					       c->r.f->g.n_nodes * sizeof *vals);
		run_nodes(c, vals, n, false);
		ck_assert_msg(outputs_same(c, vals),
			      "node %%%u (%s, rows %s) has a dead row that "
			      "an output reads",
			      n, ir_op_table[c->r.f->g.nodes[n].op].name,
			      rl_text(c, n));
		free_vals(c, vals);
		n_dead++;
	}
	return n_dead;
}

/* The other half of the oracle: the rows past each node's
 * nz_of_node hold 0 (or -0) in the plain run. Returns how many nodes
 * have such rows. */
static uint32_t check_zero_rows_are_zero(rl_case *c)
{
	uint32_t n_zero = 0;
	for (ir_id n = 0; n < c->r.f->g.n_nodes; n++) {
		uint32_t z = c->rl.nz_of_node[n];
		const interp_tensor *t = &c->r.ref[n];
		if (z == PASS_ROWLIVE_IS_ALL || t->rank < 2 ||
		    t->dtype == IR_I32)
			continue;
		const interp_tensor *rt = &c->r.ref[c->rl.row_node[n]];
		int64_t B = rt->dims[0], T = rt->dims[1];
		int64_t per_row = interp_tensor_numel(t) / (B * T);
		int32_t *len = ir_alloc(&c->r.x.ctx, (size_t)B * sizeof *len);
		pass_rowlive_eval(&c->rl, c->r.f, c->r.syms, z, B, T,
				  ref_values, c, len);
		for (int64_t b = 0; b < B; b++)
			for (int64_t r = len[b]; r < T; r++)
				for (int64_t e = 0; e < per_row; e++)
					ck_assert_msg(
						interp_tensor_get(t,
								  (b * T +
								   r) * per_row +
									  e) == 0,
						"node %%%u (%s) row (%ld, %ld) "
						"is not 0",
						n,
						ir_op_table[c->r.f->g.nodes[n].op]
							.name,
						(long)b, (long)r);
		ir_free(&c->r.x.ctx, len);
		n_zero++;
	}
	return n_zero;
}

/* Whether poisoning node n's first live row changes an output. */
static bool live_row_is_read(rl_case *c, ir_id n)
{
	interp_tensor *vals = ir_alloc(&c->r.x.ctx,
				       c->r.f->g.n_nodes * sizeof *vals);
	bool did = run_nodes(c, vals, n, true);
	bool same = outputs_same(c, vals);
	free_vals(c, vals);
	return did && !same;
}

/* A masked loss over a linear, a layer norm, relu and a linear:
 * everything of rows (b, t) is dead past valid[b]. */
static const char *masked_mlp =
	"model m\n"
	"dim B\n"
	"const T = 5, D = 8, V = 7\n"
	"export def loss(x: f32[B, T, D], labels: i32[B, T], valid: i32[B])\n"
	"  h = relu(linear(norm(x), 16))\n"
	"  return sum(masked_ce(linear(h, V), labels, valid))\n";

static void inputs_mlp(rl_case *c, const int32_t *valid)
{
	int64_t d3[3] = {3, 5, 8}, d2[2] = {3, 5}, d1[1] = {3};
	int32_t labels[15];
	for (int i = 0; i < 15; i++)
		labels[i] = (i * 3) % 7;
	rl_input(c, 0, 3, d3, NULL);
	rl_input(c, 1, 2, d2, labels);
	rl_input(c, 2, 1, d1, valid);
	rl_prepare(c);
}

START_TEST(test_rowlive_masked_loss_kills_rows_past_valid)
{
	rl_case c;
	rl_load(&c, masked_mlp, "loss", false);
	ir_id mm = last_of(&c, IR_OP_MATMUL, 0);
	ck_assert_str_eq(rl_text(&c, mm), "t < %2");
	ck_assert_str_eq(rl_text(&c, last_of(&c, IR_OP_LAYER_NORM, 0)),
			 "t < %2");
	ck_assert_str_eq(rl_text(&c, c.r.f->inputs[0]), "t < %2");
	ck_assert_str_eq(rl_text(&c, c.r.f->inputs[2]), "all");
	static const int32_t valid[3] = {2, 5, 1};
	inputs_mlp(&c, valid);
	ck_assert_uint_ge(check_dead_rows_are_dead(&c, 1), 8);
	/* A live row of the logits is read: the oracle can fail. */
	ck_assert(live_row_is_read(&c, mm));
	rl_fini(&c);
}
END_TEST

/* Valid lengths out of range: 0 (no row live), past T (all). */
START_TEST(test_rowlive_valid_out_of_range_clamps)
{
	rl_case c;
	rl_load(&c, masked_mlp, "loss", true);
	static const int32_t valid[3] = {0, 9, -4};
	inputs_mlp(&c, valid);
	ir_id x = c.r.f->inputs[0];
	int32_t len[3];
	pass_rowlive_eval(&c.rl, c.r.f, c.r.syms, c.rl.of_node[x], 3, 5,
			  ref_values, &c, len);
	ck_assert_int_eq(len[0], 0);
	ck_assert_int_eq(len[1], 5);
	ck_assert_int_eq(len[2], 0);
	check_dead_rows_are_dead(&c, 1);
	rl_fini(&c);
}
END_TEST

/* The same rows also summed whole: no row is dead. */
START_TEST(test_rowlive_a_row_read_unmasked_stays_live)
{
	rl_case c;
	rl_load(&c,
		"model m\n"
		"dim B\n"
		"const T = 5, D = 8, V = 7\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], "
		"valid: i32[B])\n"
		"  h = relu(linear(norm(x), 16))\n"
		"  return sum(masked_ce(linear(h, V), labels, valid)) + "
		"sum(h) * 0.001\n",
		"loss", false);
	ir_id mm = last_of(&c, IR_OP_MATMUL, 0);
	ck_assert_str_eq(rl_text(&c, mm), "t < %2");
	ir_id ln = last_of(&c, IR_OP_LAYER_NORM, 0);
	ck_assert_str_eq(rl_text(&c, ln), "all");
	static const int32_t valid[3] = {2, 5, 1};
	inputs_mlp(&c, valid);
	/* The row past valid that the unmasked sum reads changes the loss. */
	ck_assert(live_row_is_read(&c, ln));
	check_dead_rows_are_dead(&c, 1);
	rl_fini(&c);
}
END_TEST

/* Dead rows are dead to values, not to NaN: the masked loss multiplies
 * a dead row's loss by 0, so a NaN there makes the loss NaN. A kernel
 * that leaves dead rows out must keep that (docs/passes.md). */
START_TEST(test_rowlive_a_nan_in_a_dead_row_still_reaches_the_loss)
{
	rl_case c;
	rl_load(&c, masked_mlp, "loss", true);
	static const int32_t valid[3] = {2, 5, 1};
	inputs_mlp(&c, valid);
	ir_id ln = last_of(&c, IR_OP_LAYER_NORM, 0);
	poison_value = NAN;
	interp_tensor *vals = ir_alloc(&c.r.x.ctx,
				       c.r.f->g.n_nodes * sizeof *vals);
	run_nodes(&c, vals, ln, false);
	poison_value = 1.5f;
	ck_assert(isnan(((float *)vals[c.r.f->outputs[0]].data)[0]));
	ck_assert(isfinite(((float *)c.r.ref[c.r.f->outputs[0]].data)[0]));
	free_vals(&c, vals);
	rl_fini(&c);
}
END_TEST

/* A mask that is not t < valid (t <= valid) is not taken for one. */
START_TEST(test_rowlive_a_mask_of_another_form_keeps_rows)
{
	rl_case c;
	rl_load(&c,
		"model m\n"
		"dim B\n"
		"const T = 5, D = 8, V = 7\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], "
		"valid: i32[B])\n"
		"  w = cast(reshape(arange(T), [1, T]) <= reshape(valid, [B, "
		"1]), f32)\n"
		"  return sum(cross_entropy(linear(x, V), labels) * w)\n",
		"loss", false);
	ck_assert_str_eq(rl_text(&c, last_of(&c, IR_OP_MATMUL, 0)), "all");
	rl_fini(&c);
}
END_TEST

/* Self-attention masked by valid under a masked loss: queries past
 * valid are dead, and so are keys past valid (no live query reads
 * them); without a mask every key is read. */
static const char *attn_src =
	"model m\n"
	"dim B\n"
	"const T = 6, D = 8, V = 5\n"
	"export def loss(x: f32[B, T, D], labels: i32[B, T], qv: i32[B], "
	"kv: i32[B])\n"
	"  param W_q, W_k, W_v : [D, D]\n"
	"  q = x @ W_q\n"
	"  k = x @ W_k\n"
	"  w = masked_softmax(q @ k.T / 2, kv)\n"
	"  y = norm(w @ (x @ W_v) + x)\n"
	"  return sum(masked_ce(linear(y, V), labels, qv))\n";

static void inputs_attn(rl_case *c, const int32_t *qv, const int32_t *kv)
{
	int64_t d3[3] = {3, 6, 8}, d2[2] = {3, 6}, d1[1] = {3};
	int32_t labels[18];
	for (int i = 0; i < 18; i++)
		labels[i] = (i * 2) % 5;
	rl_input(c, 0, 3, d3, NULL);
	rl_input(c, 1, 2, d2, labels);
	rl_input(c, 2, 1, d1, qv);
	rl_input(c, 3, 1, d1, kv);
	rl_prepare(c);
}

START_TEST(test_rowlive_attention_keys_past_valid_are_dead)
{
	rl_case c;
	rl_load(&c, attn_src, "loss", true);
	ir_id fa = last_of(&c, IR_OP_FUSED_ATTENTION, 0);
	ck_assert_uint_ne(fa, IR_NONE);
	ck_assert_str_eq(rl_text(&c, fa), "t < %2");
	ir_id k = ir_arg(&c.r.f->g, fa, 1);
	ck_assert_str_eq(rl_text(&c, k), "keys(%3 over t < %2)");
	/* x: the residual's rows and the keys'. */
	ck_assert_str_eq(rl_text(&c, c.r.f->inputs[0]),
			 "max(t < %2, keys(%3 over t < %2))");
	/* kv 0: every key read (a uniform softmax); a batch element with
	 * no live query reads none. */
	static const int32_t qv[3] = {2, 6, 0}, kv[3] = {3, 0, 4};
	inputs_attn(&c, qv, kv);
	int32_t len[3];
	pass_rowlive_eval(&c.rl, c.r.f, c.r.syms, c.rl.of_node[k], 3, 6,
			  ref_values, &c, len);
	ck_assert_int_eq(len[0], 3);
	ck_assert_int_eq(len[1], 6);
	ck_assert_int_eq(len[2], 0);
	ck_assert_uint_ge(check_dead_rows_are_dead(&c, 1), 6);
	ck_assert(live_row_is_read(&c, k));
	rl_fini(&c);
}
END_TEST

/* Valid lengths per query (an input, not the causal mask): the keys
 * read are those below the longest of the live queries' lengths. */
START_TEST(test_rowlive_attention_with_lengths_per_query)
{
	rl_case c;
	rl_load(&c,
		"model m\n"
		"dim B\n"
		"const T = 6, D = 8, V = 5\n"
		"export def loss(x: f32[B, T, D], labels: i32[B, T], qv: i32[B], "
		"kv: i32[B, T])\n"
		"  param W_q, W_k, W_v : [D, D]\n"
		"  w = masked_softmax((x @ W_q) @ (x @ W_k).T / 2, kv)\n"
		"  y = norm(w @ (x @ W_v) + x)\n"
		"  return sum(masked_ce(linear(y, V), labels, qv))\n",
		"loss", true);
	ir_id fa = last_of(&c, IR_OP_FUSED_ATTENTION, 0);
	ir_id k = ir_arg(&c.r.f->g, fa, 1);
	ck_assert_str_eq(rl_text(&c, k), "keys(%3 per query over t < %2)");
	static const int32_t qv[3] = {2, 6, 3};
	static const int32_t kv[18] = {1, 4, 6, 6, 6, 6,  /* b 0: 4 */
				       0, 1, 1, 1, 1, 1,  /* b 1: all */
				       2, 1, 1, 5, 5, 5}; /* b 2: 2 */
	int64_t d3[3] = {3, 6, 8}, d2[2] = {3, 6}, d1[1] = {3};
	int32_t labels[18];
	for (int i = 0; i < 18; i++)
		labels[i] = (i * 2) % 5;
	rl_input(&c, 0, 3, d3, NULL);
	rl_input(&c, 1, 2, d2, labels);
	rl_input(&c, 2, 1, d1, qv);
	rl_input(&c, 3, 2, d2, kv);
	rl_prepare(&c);
	int32_t len[3];
	pass_rowlive_eval(&c.rl, c.r.f, c.r.syms, c.rl.of_node[k], 3, 6,
			  ref_values, &c, len);
	ck_assert_int_eq(len[0], 4);
	ck_assert_int_eq(len[1], 6);
	ck_assert_int_eq(len[2], 2);
	ck_assert_uint_ge(check_dead_rows_are_dead(&c, 1), 6);
	rl_fini(&c);
}
END_TEST

/* The same unfused: the scores' product reads k transposed, so every
 * key is kept (the analysis knows fused attention's keys only). */
START_TEST(test_rowlive_unfused_attention_keeps_its_keys)
{
	rl_case c;
	rl_load(&c, attn_src, "loss", false);
	ck_assert_uint_eq(last_of(&c, IR_OP_FUSED_ATTENTION, 0), IR_NONE);
	ck_assert_str_eq(rl_text(&c, c.r.f->inputs[0]), "all");
	static const int32_t qv[3] = {2, 6, 1}, kv[3] = {3, 2, 4};
	inputs_attn(&c, qv, kv);
	check_dead_rows_are_dead(&c, 1);
	rl_fini(&c);
}
END_TEST

/* The book models' loss inputs (src, src_valid, tgt_in, tgt, tgt_valid)
 * for three padded pairs, the last with src_valid 0, and rl_prepare. */
static void book_inputs(rl_case *c)
{
	row_case_book_inputs(&c->r);
	rl_prepare(c);
}

/* The book's Transformer: the decoder's rows past tgt_valid and the
 * encoder's past src_valid are dead, every product of activations has
 * dead rows, and poisoning them keeps the loss's bits. */
START_TEST(test_rowlive_transformer_loss)
{
	rl_case c;
	rl_load_file(&c, "models/transformer.g", "loss", false);
	ir_id logits = last_of(&c, IR_OP_MATMUL, 0);
	ck_assert_str_eq(rl_text(&c, logits), "t < %4");
	/* The decoder's rows live below tgt_valid (%4); the encoder's
	 * below src_valid (%1), where the batch element has a live target
	 * step (the encoder-decoder attention's keys). */
	uint32_t n_dec = 0, n_enc = 0;
	for (ir_id n = 0; n < c.r.f->g.n_nodes; n++) {
		const char *t = rl_text(&c, n);
		bool is_mm = c.r.f->g.nodes[n].op == IR_OP_MATMUL;
		if (strcmp(t, "t < %4") == 0)
			n_dec += is_mm;
		else if (strcmp(t, "keys(%1 over t < %4)") == 0)
			n_enc += is_mm;
		else
			ck_assert_msg(strcmp(t, "all") == 0 && !is_mm,
				      "%%%u: %s", n, t);
	}
	/* Per decoder layer 4 + 2 + 2 (self-attention, the cross
	 * attention's queries and output, FFN), and the logits; per encoder
	 * layer 6, and the cross attentions' keys and values. */
	ck_assert_uint_eq(n_dec, 2 * 8 + 1);
	ck_assert_uint_eq(n_enc, 2 * 6 + 2 * 2);
	book_inputs(&c);
	ck_assert_uint_ge(check_dead_rows_are_dead(&c, 1), 60);
	ck_assert(live_row_is_read(&c, logits));
	rl_fini(&c);
}
END_TEST

/* The Transformer's loss_grad, as --train compiles it: the forward's
 * rows are as in loss, where the backward reads them only through
 * gradients that are 0 on dead rows (the weights' gradients X^T dY,
 * layer_norm_grad, the fused attention's gradient, the recomputed
 * layer norms times the gradient); poisoning them keeps the loss and
 * every gradient to the bit. */
START_TEST(test_rowlive_transformer_loss_grad)
{
	rl_case c;
	rl_load_file(&c, "models/transformer.g", "loss", true);
	/* Every product that is not a weight's gradient, and every layer
	 * norm (the forward's and those remat recomputes for the
	 * backward), has dead rows. */
	uint32_t n_mm = 0, n_ln = 0;
	for (ir_id n = 0; n < c.r.f->g.n_nodes; n++) {
		const ir_node *nd = &c.r.f->g.nodes[n];
		const char *t = rl_text(&c, n);
		bool is_dead = strcmp(t, "t < %4") == 0 ||
			       strcmp(t, "keys(%1 over t < %4)") == 0;
		if (nd->op == IR_OP_MATMUL && !nd->attr.matmul.ta &&
		    !nd->attr.matmul.tb)
			n_mm += is_dead;
		if (nd->op == IR_OP_LAYER_NORM) {
			ck_assert_msg(is_dead, "%%%u: %s", n, t);
			n_ln++;
		}
	}
	ck_assert_uint_eq(n_mm, 2 * 8 + 1 + 2 * 6 + 2 * 2);
	ck_assert_uint_eq(n_ln, 2 * (2 * 3 + 2 * 2));
	book_inputs(&c);
	ck_assert_uint_ge(check_zero_rows_are_zero(&c), 100);
	ck_assert_uint_ge(check_dead_rows_are_dead(&c, 1), 100);
	ck_assert(live_row_is_read(&c, last_of(&c, IR_OP_LAYER_NORM, 0)));
	rl_fini(&c);
}
END_TEST

/* An additive attention queried step by step, its steps stacked
 * straight into a masked loss: the loss reads stack's rows below valid,
 * the mask's product the same rows clamped to T; a step's rows are
 * step(k over t < valid) (a step over min(a, T) adds nothing to the
 * step over a), so that its kernels can leave them out. */
static const char *steps_into_loss =
	"model m\n"
	"dim B\n"
	"const T = 6, D = 8\n"
	"def attend(q, x, kv)\n"
	"  param W_k : [D, D]\n"
	"  param w_v : [D, 1]\n"
	"  f = tanh(unsqueeze(q, 2) + unsqueeze(x @ W_k, 1))\n"
	"  return masked_softmax(squeeze(f @ w_v, -1), kv) @ x\n"
	"export def loss(q: f32[B, T, D], x: f32[B, T, D], labels: i32[B, "
	"T], valid: i32[B], kv: i32[B])\n"
	"  outs = []\n"
	"  for t in 0..T\n"
	"    outs = outs + [squeeze(attend(unsqueeze(q[:, t], 1), x, kv), "
	"1)]\n"
	"  return sum(masked_ce(stack(outs, 1), labels, valid))\n";

/* c's forward attentions are each a step (6 of them), and the oracle
 * holds: the dead rows of every node changed, the outputs keep their
 * bits. */
static void check_attention_steps(rl_case *c)
{
	uint32_t n_step = 0;
	for (ir_id n = 0; n < c->r.f->g.n_nodes; n++) {
		if (c->r.f->g.nodes[n].op != IR_OP_FUSED_ADDITIVE_ATTENTION)
			continue;
		const pass_rowlive_expr *x = &c->rl.exprs[c->rl.of_node[n]];
		ck_assert_msg(x->op == PASS_ROWLIVE_STEP, "%%%u: %s", n,
			      rl_text(c, n));
		n_step++;
	}
	ck_assert_uint_eq(n_step, 6);
	int64_t d3[3] = {3, 6, 8}, d2[2] = {3, 6}, d1[1] = {3};
	int32_t labels[18];
	for (int i = 0; i < 18; i++)
		labels[i] = (i * 5) % 8;
	static const int32_t valid[3] = {2, 6, 0}, kv[3] = {6, 3, 1};
	rl_input(c, 0, 3, d3, NULL);
	rl_input(c, 1, 3, d3, NULL);
	rl_input(c, 2, 2, d2, labels);
	rl_input(c, 3, 1, d1, valid);
	rl_input(c, 4, 1, d1, kv);
	rl_prepare(c);
	ck_assert_uint_ge(check_dead_rows_are_dead(c, 1), 6);
}

START_TEST(test_rowlive_steps_into_a_masked_loss)
{
	rl_case c;
	rl_load_grad(&c, steps_into_loss);
	check_attention_steps(&c);
	rl_fini(&c);
	rl_load(&c, steps_into_loss, "loss", true);
	check_attention_steps(&c);
	rl_fini(&c);
}
END_TEST

/* Bahdanau's loss_grad: the GRUs run step by step (slices along the
 * steps), so only what follows the decoder's last step has dead rows;
 * the oracle holds there too. */
START_TEST(test_rowlive_bahdanau_loss_grad)
{
	rl_case c;
	rl_load_file(&c, "models/bahdanau.g", "loss", true);
	/* The decoder's steps: each node of step k is live where k <
	 * tgt_valid (%4), the embedding's rows below tgt_valid. */
	uint32_t n_step = 0, n_live = 0;
	for (ir_id n = 0; n < c.r.f->g.n_nodes; n++) {
		const pass_rowlive_expr *x = &c.rl.exprs[c.rl.of_node[n]];
		n_step += x->op == PASS_ROWLIVE_STEP;
		n_live += x->op != PASS_ROWLIVE_NONE &&
			  x->op != PASS_ROWLIVE_ALL;
	}
	ck_assert_uint_ge(n_step, 10 * 45);
	ck_assert_str_eq(rl_text(&c, last_of(&c, IR_OP_EMBEDDING, 0)),
			 "min(t < %4, 10)");
	book_inputs(&c);
	ck_assert_uint_ge(check_zero_rows_are_zero(&c), 500);
	/* Every 13th node with dead rows: 2,600 nodes run again for each. */
	ck_assert_uint_ge(check_dead_rows_are_dead(&c, 13), n_live / 13);
	rl_fini(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("passes_rowlive");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_rowlive_masked_loss_kills_rows_past_valid);
	tcase_add_test(tc, test_rowlive_valid_out_of_range_clamps);
	tcase_add_test(tc, test_rowlive_a_row_read_unmasked_stays_live);
	tcase_add_test(tc, test_rowlive_a_mask_of_another_form_keeps_rows);
	tcase_add_test(tc,
		       test_rowlive_a_nan_in_a_dead_row_still_reaches_the_loss);
	tcase_add_test(tc, test_rowlive_attention_with_lengths_per_query);
	tcase_add_test(tc, test_rowlive_attention_keys_past_valid_are_dead);
	tcase_add_test(tc, test_rowlive_unfused_attention_keeps_its_keys);
	tcase_add_test(tc, test_rowlive_transformer_loss);
	tcase_add_test(tc, test_rowlive_transformer_loss_grad);
	tcase_add_test(tc, test_rowlive_bahdanau_loss_grad);
	tcase_add_test(tc, test_rowlive_steps_into_a_masked_loss);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
