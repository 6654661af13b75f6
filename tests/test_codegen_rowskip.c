/*
 * test_codegen_rowskip.c - the forward's products and row-wise kernels
 * (layer norms, elementwise ops, dropouts, the loss's cross-entropy)
 * leaving out the rows no output reads, and the backward's row-wise
 * kernels the rows of their gradients that are 0
 * (cg_program_set_row_skip, docs/codegen.md "Padding rows"): on the
 * book's Transformer, loss_grad gives the same bits, the
 * loss and every gradient, with the rows left out and without (and
 * without the code for it, cg_program_options.no_row_skip) at 1 and 2
 * threads, dropout on, with valid lengths 0, 1 and T among the inputs;
 * with a NaN in <pad>'s target embedding, which only padding rows read,
 * the plain call's loss is NaN and the skipping call's finite: rows are
 * left out, and the caller must check the bounds first
 * (passes/rowbound.h), as the driver does. A small model whose NaN
 * rows reach the loss through a layer norm, relu, an add and a dropout
 * alone (no product) shows those kernels leave them out. The
 * interpreter's oracle (test_passes_rowlive.c) shows that clearing the
 * dead rows of every forward node keeps the bits.
 */
#include "cg_program.h"
#include "row_case.h"
#include "rowbound.h"

#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT 80

/* A book model's (rel: the Transformer's or Bahdanau's, whose loss
 * takes the same inputs) loss_grad, its loss inputs for three padded
 * pairs (row_case_book_inputs) and parameters from seed, <pad>'s target
 * embedding NaN if is_nan_pad. */
static void rs_load_model(row_case *c, const char *rel, uint64_t seed,
			  bool is_nan_pad)
{
	row_case_load_file(c, rel, "loss", true);
	row_case_book_inputs(c);
	row_case_params(c, seed);
	if (is_nan_pad) {
		interp_tensor *t = row_case_param(c, "decoder.embed");
		((float *)t->data)[t->dims[1]] = NAN;
	}
}

/* The Transformer's. */
static void rs_load(row_case *c, uint64_t seed, bool is_nan_pad)
{
	rs_load_model(c, "models/transformer.g", seed, is_nan_pad);
}

static cg_program *rs_compile(row_case *c, const cg_program_options *po)
{
	cg_program *p = cg_program_create(&c->x.ctx, c->x.m, c->syms, po);
	ck_assert_msg(p != NULL, "%s", tu_graph_diag(&c->x));
	ck_assert_msg(cg_program_jit(p), "%s", tu_graph_diag(&c->x));
	return p;
}

/* Output o of p's loss_grad in rs_run's layout (each output padded to
 * 16 floats): its first float, and in *n (if not NULL) its floats; o =
 * the outputs' count gives the total. */
static size_t rs_output_at(cg_program *p, uint32_t o, size_t *n)
{
	uint32_t no;
	const attnrt_tensor_info *oi = cg_program_outputs(p, "loss_grad", &no);
	size_t at = 0, m = 0;
	for (uint32_t i = 0; i <= o && i < no; i++) {
		m = 1;
		for (int d = 0; d < oi[i].rank; d++)
			m *= (size_t)oi[i].dims[d];
		if (i < o)
			at += (m + 15) / 16 * 16;
	}
	if (n)
		*n = o < no ? m : 0;
	return at;
}

/* The valid lengths {2, 0, 5} of x (3, 5, 8) (made up) and labels
 * (3, 5), label i (i * mul) % k; parameters from seed 7. */
static void rs_inputs_xlv(row_case *c, int mul, int k)
{
	int64_t d3[3] = {3, 5, 8}, d2[2] = {3, 5}, d1[1] = {3};
	int32_t labels[15];
	for (int i = 0; i < 15; i++)
		labels[i] = (i * mul) % k;
	static const int32_t valid[3] = {2, 0, 5};
	row_case_input(c, 0, 3, d3, NULL, 1);
	row_case_input(c, 1, 2, d2, labels, 1);
	row_case_input(c, 2, 1, d1, valid, 1);
	row_case_params(c, 7);
}

/* Whether rs_run's calls are training runs (dropout on). */
static int rs_is_training = 1;

/* loss_grad's outputs, all of them one after the other, of a call on
 * n_threads with row_skip on or off; returns their floats. */
static float *rs_run(row_case *c, cg_program *p, int n_threads, bool skip,
		     size_t *n_floats)
{
	attnrt_entry_fn entry = cg_program_entry(p, "loss_grad");
	ck_assert(entry != NULL);
	uint32_t np, no;
	const attnrt_param_info *pi = cg_program_params(p, &np);
	size_t pbytes = cg_program_params_bytes(p);
	char *pb = aligned_alloc(64, (pbytes + 127) / 64 * 64);
	for (uint32_t i = 0; i < np; i++)
		memcpy(pb + pi[i].offset, c->params[i].data,
		       (size_t)interp_tensor_numel(&c->params[i]) * 4);
	size_t sbytes = cg_program_scratch_bytes(p, "loss_grad");
	char *sb = aligned_alloc(64, (sbytes + 127) / 64 * 64);
	memset(sb, 0xff, (sbytes + 127) / 64 * 64);
	cg_program_outputs(p, "loss_grad", &no);
	ck_assert_uint_le(no, MAX_OUT);
	size_t total = rs_output_at(p, no, NULL);
	float *out = aligned_alloc(64, total * 4 + 64);
	void *outs[MAX_OUT];
	for (uint32_t o = 0; o < no; o++)
		outs[o] = out + rs_output_at(p, o, NULL);
	memset(out, 0, total * 4);
	const void *ins[ROW_CASE_MAX_IN];
	for (uint32_t i = 0; i < c->f->n_inputs; i++)
		ins[i] = c->in[i].data;
	if (skip)
		ck_assert(cg_program_set_row_skip(p, true));
	attnrt_run run = {7, 2, rs_is_training, n_threads};
	ck_assert_int_eq(entry(&run, pb, sb, ins, outs), 0);
	if (skip)
		ck_assert(cg_program_set_row_skip(p, false));
	free(pb);
	free(sb);
	*n_floats = total;
	return out;
}

/* The valid lengths of row_case_book_inputs set to src {T, 1, 0} and
 * tgt {0, 1, T}: a batch element with no live step, one with one, one
 * with all. */
static void rs_edge_lengths(row_case *c)
{
	static const int32_t sv[3] = {10, 1, 0}, tv[3] = {0, 1, 10};
	memcpy(c->in[1].data, sv, sizeof sv);
	memcpy(c->in[4].data, tv, sizeof tv);
}

/* The bits of every output of loss_grad of c (compiled as p, and as q
 * without the switch): p with the rows left out and without, at 1 and 2
 * threads, gives q's. */
static void rs_same_bits(row_case *c, cg_program *p, cg_program *q,
			 const char *what)
{
	size_t n0, n;
	float *ref = rs_run(c, q, 1, false, &n0);
	ck_assert(isfinite(ref[0]));
	for (int threads = 1; threads <= 2; threads++)
		for (int skip = 0; skip < 2; skip++) {
			float *got = rs_run(c, p, threads, skip, &n);
			ck_assert_uint_eq(n, n0);
			ck_assert_msg(memcmp(ref, got, n * 4) == 0,
				      "%s, %d threads, skip %d: an output "
				      "differs from the program's without the "
				      "switch",
				      what, threads, skip);
			free(got);
		}
	free(ref);
}

static void rs_check_bits_of(const char *rel, bool is_edge)
{
	row_case c;
	rs_load_model(&c, rel, 7, false);
	if (is_edge)
		rs_edge_lengths(&c);
	cg_program_options none = {.no_row_skip = true};
	cg_program *p = rs_compile(&c, NULL);
	cg_program *q = rs_compile(&c, &none);
	ck_assert(!cg_program_set_row_skip(q, true));
	rs_same_bits(&c, p, q, is_edge ? "lengths 0, 1 and T" : "the book's");
	cg_program_destroy(p);
	cg_program_destroy(q);
	row_case_fini(&c);
}

START_TEST(test_rowskip_keeps_the_bits_of_every_output)
{
	rs_check_bits_of("models/transformer.g", false);
}
END_TEST

START_TEST(test_rowskip_keeps_the_bits_with_lengths_0_1_and_t)
{
	rs_check_bits_of("models/transformer.g", true);
}
END_TEST

START_TEST(test_rowskip_leaves_rows_out)
{
	row_case c;
	rs_load(&c, 7, true);
	cg_program *p = rs_compile(&c, NULL);
	size_t n;
	float *plain = rs_run(&c, p, 1, false, &n);
	float *skip = rs_run(&c, p, 1, true, &n);
	ck_assert(isnan(plain[0]));
	ck_assert(isfinite(skip[0]));
	free(plain);
	free(skip);
	cg_program_destroy(p);
	row_case_fini(&c);
}
END_TEST

/* Bahdanau's decoder is a GRU unrolled over the steps: a step's
 * products and row-wise kernels, forward and backward, leave out the
 * batch elements whose target has no such step (cg_lower_row_step),
 * sharing one kernel over the steps. */
START_TEST(test_rowskip_recurrence_steps_keep_the_bits)
{
	rs_check_bits_of("models/bahdanau.g", false);
	rs_check_bits_of("models/bahdanau.g", true);
}
END_TEST

/* With a NaN in <pad>'s target embedding, which only the decoder's dead
 * steps read, the plain call's loss and output layer's gradients are
 * NaN, the skipping call's finite: the steps' rows are left out. (The
 * weight gradients X^T dY keep X's NaN times dY's zero rows, as the
 * sgemm's zero skipping does on purpose: their bits are the plain
 * product's.) */
START_TEST(test_rowskip_recurrence_steps_leave_rows_out)
{
	row_case c;
	rs_load_model(&c, "models/bahdanau.g", 7, true);
	cg_program *p = rs_compile(&c, NULL);
	uint32_t no;
	const attnrt_tensor_info *oi = cg_program_outputs(p, "loss_grad", &no);
	ck_assert_str_eq(oi[no - 2].name, "grad.decoder.linear.W");
	size_t n, at = rs_output_at(p, no - 2, NULL);
	float *plain = rs_run(&c, p, 1, false, &n);
	ck_assert(isnan(plain[0]));
	ck_assert(isnan(plain[n - 1]) || isnan(plain[at]));
	for (int threads = 1; threads <= 2; threads++) {
		float *skip = rs_run(&c, p, threads, true, &n);
		ck_assert(isfinite(skip[0]));
		for (size_t i = at; i < n; i++)
			ck_assert_msg(isfinite(skip[i]), "output float %zu", i);
		free(skip);
	}
	free(plain);
	cg_program_destroy(p);
	row_case_fini(&c);
}
END_TEST

/* A program keeps the switch only where the products and attentions
 * that read it are CG_ROW_SKIP_MIN_SHARE of its multiply-adds: the
 * Transformer's 33 products and 12 attentions are 38%, Bahdanau's
 * output layer and decoder steps about half; small_share_model's one
 * such product (the 4 columns of its logits, 4 / 68 of its
 * multiply-adds: h's rows are all read by its mean) would not pay for
 * the driver's check before each step. */
static const char *small_share_model =
	"model m\n"
	"dim B = 3\n"
	"const T = 8, D = 64\n"
	"export def loss(x: f32[B, T, D], labels: i32[B, T], valid: i32[B])\n"
	"  h = relu(linear(x, D))\n"
	"  return sum(masked_ce(linear(h, 4), labels, valid)) + "
	"sum(mean(h, 1))\n";

START_TEST(test_rowskip_switch_only_where_it_pays)
{
	row_case c;
	row_case_load(&c, small_share_model, "loss", true);
	cg_program *p = rs_compile(&c, NULL);
	ck_assert(!cg_program_set_row_skip(p, true));
	cg_program_destroy(p);
	row_case_fini(&c);
	const char *models[2] = {"models/bahdanau.g", "models/transformer.g"};
	for (int i = 0; i < 2; i++) {
		rs_load_model(&c, models[i], 7, false);
		p = rs_compile(&c, NULL);
		ck_assert(cg_program_set_row_skip(p, true));
		ck_assert(cg_program_set_row_skip(p, false));
		cg_program_destroy(p);
		row_case_fini(&c);
	}
}
END_TEST

/* A NaN in x's rows past valid reaches the loss through a dropout of a
 * layer norm of relu(x) + x only (the product beside it gives the
 * program its switch): the plain call's loss is NaN, the skipping
 * call's finite at 1 and 2 threads. */
static const char *ln_model =
	"model m\n"
	"dim B\n"
	"const T = 5, D = 8\n"
	"export def loss(x: f32[B, T, D], labels: i32[B, T], valid: i32[B])\n"
	"  h = dropout(norm(relu(x) + x), 0.1)\n"
	"  return sum(masked_ce(h, labels, valid)) + "
	"sum(masked_ce(linear(x, D), labels, valid))\n";

static float ln_run(row_case *c, cg_program *p, int n_threads, bool skip)
{
	attnrt_entry_fn entry = cg_program_entry(p, "loss");
	ck_assert(entry != NULL);
	uint32_t np;
	const attnrt_param_info *pi = cg_program_params(p, &np);
	char *pb = aligned_alloc(64,
				 (cg_program_params_bytes(p) + 127) / 64 * 64);
	for (uint32_t i = 0; i < np; i++)
		memcpy(pb + pi[i].offset, c->params[i].data,
		       (size_t)interp_tensor_numel(&c->params[i]) * 4);
	size_t sbytes = (cg_program_scratch_bytes(p, "loss") + 127) / 64 * 64;
	char *sb = aligned_alloc(64, sbytes);
	memset(sb, 0xff, sbytes);
	float out[16] = {0};
	void *outs[1] = {out};
	const void *ins[3] = {c->in[0].data, c->in[1].data, c->in[2].data};
	if (skip)
		ck_assert(cg_program_set_row_skip(p, true));
	attnrt_run run = {7, 2, 1, n_threads};
	ck_assert_int_eq(entry(&run, pb, sb, ins, outs), 0);
	if (skip)
		ck_assert(cg_program_set_row_skip(p, false));
	free(pb);
	free(sb);
	return out[0];
}

START_TEST(test_rowskip_row_kernels_leave_rows_out)
{
	row_case c;
	row_case_load(&c, ln_model, "loss", true);
	rs_inputs_xlv(&c, 3, 8);
	float *x = c.in[0].data;
	for (int d = 0; d < 8; d++) { /* rows (0, 3) and (1, 0): dead */
		x[(0 * 5 + 3) * 8 + d] = NAN;
		x[(1 * 5 + 0) * 8 + d] = NAN;
	}
	/* the product through the sgemm, as a book model's */
	cg_program_options po = {.gemm_min = 1};
	cg_program *p = rs_compile(&c, &po);
	for (int threads = 1; threads <= 2; threads++) {
		ck_assert(isnan(ln_run(&c, p, threads, false)));
		ck_assert(isfinite(ln_run(&c, p, threads, true)));
	}
	cg_program_destroy(p);
	row_case_fini(&c);
}
END_TEST

/* A NaN in x's rows past valid reaches an output only through a
 * product that adds its bias in the sgemm's epilogue: h = x W1 + b1,
 * whose dead rows the weight gradient of the next layer, h^T dY, reads
 * (NaN times dY's zero rows, as the sgemm's zero skipping keeps on
 * purpose). The plain call's gradient of W2 is NaN; the skipping call's
 * finite at 1 and 2 threads, and h's live rows keep their bits (the
 * loss's, with x finite, is the plain call's). */
static const char *bias_model =
	"model m\n"
	"dim B\n"
	"const T = 5, D = 8, V = 6\n"
	"export def loss(x: f32[B, T, D], labels: i32[B, T], valid: i32[B])\n"
	"  h = linear(x, D)\n"
	"  return sum(masked_ce(linear(h, V), labels, valid))\n";

/* row_case_load_grad's loss_grad of source src. */
static void rs_load_grad(row_case *c, const char *src)
{
	row_case_load_grad(c, "t.g", src, strlen(src), "loss");
}

START_TEST(test_rowskip_biased_products_leave_rows_out)
{
	row_case c;
	rs_load_grad(&c, bias_model);
	rs_inputs_xlv(&c, 5, 6);
	/* the products through the sgemm, as a book model's */
	cg_program_options po = {.gemm_min = 1};
	cg_program *p = rs_compile(&c, &po);
	uint32_t no;
	const attnrt_tensor_info *oi = cg_program_outputs(p, "loss_grad", &no);
	size_t at = 0, len = 0; /* the second W's gradient: rs_run's layout */
	for (uint32_t o = 0; o < no && !len; o++)
		if (oi[o].rank == 2 && oi[o].dims[1] == 6)
			at = rs_output_at(p, o, &len);
	ck_assert_uint_eq(len, 8 * 6);
	size_t n;
	float *plain = rs_run(&c, p, 1, false, &n);
	float *skip = rs_run(&c, p, 1, true, &n);
	ck_assert(memcmp(plain, skip, n * sizeof *plain) == 0);
	free(plain);
	free(skip);
	float *x = c.in[0].data;
	for (int d = 0; d < 8; d++) { /* rows (0, 3) and (1, 0): dead */
		x[(0 * 5 + 3) * 8 + d] = NAN;
		x[(1 * 5 + 0) * 8 + d] = NAN;
	}
	plain = rs_run(&c, p, 1, false, &n);
	ck_assert(isnan(plain[at]));
	for (int threads = 1; threads <= 2; threads++) {
		float *s2 = rs_run(&c, p, threads, true, &n);
		ck_assert(isfinite(s2[0]));
		for (size_t i = at; i < at + len; i++)
			ck_assert_msg(isfinite(s2[i]), "grad W2 float %zu",
				      i - at);
		free(s2);
	}
	free(plain);
	cg_program_destroy(p);
	row_case_fini(&c);
}
END_TEST

/* The attentions leave their dead query rows out (the encoder's past
 * src_valid where the target has a step, the decoder's past tgt_valid,
 * the causal self-attention's among them): the bits of the loss and of
 * every gradient stay, with valid lengths 0, 1 and T (a batch element
 * with src_valid 0 has every encoder row live, one with tgt_valid 0
 * none), dropout on and off. */
START_TEST(test_rowskip_attention_lengths_keep_the_bits)
{
	static const int32_t sv[4][3] = {{0, 1, 10},
					 {10, 10, 10},
					 {1, 10, 0},
					 {3, 4, 0}};
	static const int32_t tv[4][3] = {{10, 0, 1},
					 {10, 10, 10},
					 {1, 10, 0},
					 {3, 5, 2}};
	row_case c;
	rs_load(&c, 11, false);
	cg_program_options none = {.no_row_skip = true};
	cg_program *p = rs_compile(&c, NULL);
	cg_program *q = rs_compile(&c, &none);
	for (int i = 0; i < 4; i++)
		for (int tr = 0; tr < 2; tr++) {
			memcpy(c.in[1].data, sv[i], sizeof sv[i]);
			memcpy(c.in[4].data, tv[i], sizeof tv[i]);
			rs_is_training = tr;
			char what[64];
			snprintf(what, sizeof what, "lengths %d, training %d",
				 i, tr);
			rs_same_bits(&c, p, q, what);
		}
	rs_is_training = 1;
	cg_program_destroy(p);
	cg_program_destroy(q);
	row_case_fini(&c);
}
END_TEST

/* A fused attention whose queries are an input, read by a masked loss:
 * queries past qv are dead. T (%d) steps: 6 takes the small kernels,
 * 20 the blocked ones. */
static const char *rs_attn_src =
	"model m\n"
	"dim B\n"
	"const T = %d, D = 8\n"
	"export def loss(q: f32[B, T, D], x: f32[B, T, D], labels: i32[B, "
	"T], qv: i32[B], kv: i32[B])\n"
	"  param W_k, W_v : [D, D]\n"
	"  w = masked_softmax(q @ (x @ W_k).T / 2, kv)\n"
	"  return sum(masked_ce(w @ (x @ W_v), labels, qv))\n";

/* Additive attention queried by q's rows themselves (its projected
 * queries: no product leaves their dead rows out), read by a masked
 * loss: queries past qv are dead. rs_additive_src as one attention over
 * T (%d) queries; rs_additive_steps_src unrolled over the T steps, step
 * t's one query q[:, t], as Bahdanau's decoder queries its attention
 * (its rows live where t < qv[b]: rowlive's STEP). */
static const char *rs_additive_src =
	"model m\n"
	"dim B\n"
	"const T = %d, D = 8\n"
	"export def loss(q: f32[B, T, D], x: f32[B, T, D], labels: i32[B, "
	"T], qv: i32[B], kv: i32[B])\n"
	"  param W_k : [D, D]\n"
	"  param w_v : [D, 1]\n"
	"  f = tanh(unsqueeze(q, 2) + unsqueeze(x @ W_k, 1))\n"
	"  w = masked_softmax(squeeze(f @ w_v, -1), kv)\n"
	"  return sum(masked_ce(w @ x, labels, qv))\n";
static const char *rs_additive_steps_src =
	"model m\n"
	"dim B\n"
	"const T = %d, D = 8\n"
	"def attend(q, x, kv)\n"
	"  param W_k : [D, D]\n"
	"  param w_v : [D, 1]\n"
	"  f = tanh(unsqueeze(q, 2) + unsqueeze(x @ W_k, 1))\n"
	"  return masked_softmax(squeeze(f @ w_v, -1), kv) @ x\n"
	"export def loss(q: f32[B, T, D], x: f32[B, T, D], labels: i32[B, "
	"T], qv: i32[B], kv: i32[B])\n"
	"  outs = []\n"
	"  for t in 0..T\n"
	"    outs = outs + [squeeze(attend(unsqueeze(q[:, t], 1), x, kv), "
	"1)]\n"
	"  return sum(masked_ce(linear(stack(outs, 1), 8), labels, qv))\n";

/* The model of rs_load_attn and rs_check_attn (rs_attn_src, or another
 * of the same inputs) and the fused op it must have. */
static const char *rs_src = NULL;
static ir_op rs_src_op = IR_OP_FUSED_ATTENTION;
/* How many of the plain call's outputs must be NaN (rs_check_attn). */
static uint32_t rs_min_nan = 100;

/* rs_attn_src's loss_grad for T steps, as --train compiles it, with
 * inputs for three batch elements: qv, kv, and q NaN in its dead rows if
 * is_nan. */
static void rs_load_attn(row_case *c, int T, const int32_t *qv,
			 const int32_t *kv, bool is_nan)
{
	static char src[1024];
	snprintf(src, sizeof src, rs_src ? rs_src : rs_attn_src, T);
	rs_load_grad(c, src);
	bool has_fa = false;
	for (ir_id n = 0; n < c->f->g.n_nodes; n++)
		has_fa |= c->f->g.nodes[n].op == rs_src_op;
	ck_assert(has_fa);
	int64_t d3[3] = {3, T, 8}, d2[2] = {3, T}, d1[1] = {3};
	int32_t labels[60];
	for (int i = 0; i < 3 * T; i++)
		labels[i] = (i * 3) % 8;
	row_case_input(c, 0, 3, d3, NULL, 1);
	row_case_input(c, 1, 3, d3, NULL, 1);
	row_case_input(c, 2, 2, d2, labels, 1);
	row_case_input(c, 3, 1, d1, qv, 1);
	row_case_input(c, 4, 1, d1, kv, 1);
	for (int b = 0; is_nan && b < 3; b++)
		for (int t = qv[b] < 0 ? 0 : qv[b]; t < T; t++)
			for (int e = 0; e < 8; e++)
				((float *)c->in[0].data)[(b * T + t) * 8 + e] = NAN;
	row_case_params(c, 5);
}

/* rs_attn_src at T steps leaves its queries past qv out: with NaN in
 * them (lengths qv, kv) the plain call's loss is NaN, the skipping
 * call's finite, and where is_grad_skipped every output of it (the
 * plain call's gradients of W_k and W_v NaN); with finite ones (lengths
 * qv, kv, then qv2, kv2) the bits of the loss and every gradient stay. */
static void rs_check_attn(int T, const int32_t *qv, const int32_t *kv,
			  const int32_t *qv2, const int32_t *kv2,
			  bool is_grad_skipped)
{
	row_case c;
	rs_load_attn(&c, T, qv, kv, true);
	cg_program *p = rs_compile(&c, NULL);
	size_t n;
	float *plain = rs_run(&c, p, 1, false, &n);
	float *skip = rs_run(&c, p, 2, true, &n);
	ck_assert(isnan(plain[0]));
	ck_assert(isfinite(skip[0]));
	uint32_t n_nan = 0;
	for (size_t i = 0; is_grad_skipped && i < n; i++) {
		ck_assert_msg(isfinite(skip[i]), "output float %zu", i);
		n_nan += isnan(plain[i]);
	}
	ck_assert_msg(!is_grad_skipped || n_nan > rs_min_nan, "%u NaN", n_nan);
	free(plain);
	free(skip);
	cg_program_destroy(p);
	row_case_fini(&c);
	cg_program_options none = {.no_row_skip = true};
	for (int i = 0; i < 2; i++) {
		rs_load_attn(&c, T, i ? qv2 : qv, i ? kv2 : kv, false);
		p = rs_compile(&c, NULL);
		cg_program *q = rs_compile(&c, &none);
		rs_same_bits(&c, p, q, i ? "the second lengths" : "the first");
		cg_program_destroy(p);
		cg_program_destroy(q);
		row_case_fini(&c);
	}
}

/* The small kernels (6 keys), forward and backward. */
START_TEST(test_rowskip_attention_leaves_queries_out)
{
	static const int32_t qv[3] = {2, 0, 6}, kv[3] = {3, 6, 1};
	static const int32_t qv2[3] = {1, 6, 0}, kv2[3] = {0, 6, 2};
	rs_check_attn(6, qv, kv, qv2, kv2, true);
}
END_TEST

/* The blocked forward (20 keys; its gradient computes every row). */
START_TEST(test_rowskip_blocked_attention_leaves_queries_out)
{
	static const int32_t qv[3] = {17, 0, 20}, kv[3] = {3, 20, 1};
	static const int32_t qv2[3] = {1, 20, 0}, kv2[3] = {0, 20, 19};
	rs_check_attn(20, qv, kv, qv2, kv2, false);
}
END_TEST

/* Fused additive attention (and its gradient) leaves its dead query
 * rows out: past qv, as one attention of 6 queries, whose NaN rows
 * would make the gradients of W_k and w_v NaN (the gradient's dkp and
 * dwv), and as 6 steps of one query each that share their kernels (the
 * step read from the call's table). */
START_TEST(test_rowskip_additive_attention_leaves_queries_out)
{
	static const int32_t qv[3] = {2, 0, 6}, kv[3] = {3, 6, 1};
	static const int32_t qv2[3] = {1, 6, 0}, kv2[3] = {0, 6, 2};
	rs_src_op = IR_OP_FUSED_ADDITIVE_ATTENTION;
	rs_min_nan = 64; /* W_k's and w_v's 72 floats */
	rs_src = rs_additive_src;
	rs_check_attn(6, qv, kv, qv2, kv2, true);
	rs_src = rs_additive_steps_src;
	rs_check_attn(6, qv, kv, qv2, kv2, true);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("codegen_rowskip");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, test_rowskip_keeps_the_bits_of_every_output);
	tcase_add_test(tc, test_rowskip_leaves_rows_out);
	tcase_add_test(tc, test_rowskip_switch_only_where_it_pays);
	tcase_add_test(tc, test_rowskip_keeps_the_bits_with_lengths_0_1_and_t);
	tcase_add_test(tc, test_rowskip_row_kernels_leave_rows_out);
	tcase_add_test(tc, test_rowskip_biased_products_leave_rows_out);
	tcase_add_test(tc, test_rowskip_recurrence_steps_keep_the_bits);
	tcase_add_test(tc, test_rowskip_recurrence_steps_leave_rows_out);
	tcase_add_test(tc, test_rowskip_attention_lengths_keep_the_bits);
	tcase_add_test(tc, test_rowskip_attention_leaves_queries_out);
	tcase_add_test(tc, test_rowskip_blocked_attention_leaves_queries_out);
	tcase_add_test(tc, test_rowskip_additive_attention_leaves_queries_out);
	suite_add_tcase(s, tc);
	return tu_run_suite(s);
}
