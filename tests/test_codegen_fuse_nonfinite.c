/*
 * test_codegen_fuse_nonfinite.c - the generated dot-product attention
 * kernels (fused_attention and fused_attention_grad, the small kernels
 * of at most 16 keys and the blocked ones) on operands that hold a NaN,
 * +inf or -inf, or finite values whose products overflow: their NaNs and
 * infinities are where the interpreter's fused kernels (which compute
 * what the unfused graph computes, and PyTorch's softmax) have them, the
 * finite rest close, at 1 and 2 threads bit for bit. docs/fusion.md,
 * "Values that are not finite", says what the kernels guarantee.
 */
#include "attn_jit.h"
#include "testutil.h"

#include <check.h>

/* A node alone, its operands inputs: q (B, Q, H*d), k (B, K, H*d),
 * v (B, K, H*dv), valid (B) or (B, Q), and for the gradient g
 * (B, Q, H*dv). */
typedef struct nf_graph {
	tu_graph x;
	interp_tensor in[5];
	int n_in;
	int64_t B, Q, K, d, dv, H;
	bool is_per_query; /* valid (B, Q), else (B) */
} nf_graph;

/* The shapes: the small kernels (K <= 16), one head and two read in
 * place; the blocked ones, K = 70 over two or three key blocks (causal
 * masks with heads of 8 take blocks of 32 keys), the backward keeping
 * pass 1 in its cache. (Without it, from 16384 keys, pass 2 computes
 * the exponentials as pass 1 does, cg_attn_exp: too slow a test.) */
typedef struct nf_shape {
	int64_t B, Q, K, d, dv, H;
} nf_shape;

static const nf_shape nf_shapes[] = {
	{3, 5, 6, 8, 5, 1},
	{3, 3, 6, 4, 3, 2},
	{3, 5, 70, 8, 5, 1},
};

static void nf_fill(nf_graph *z, int i, uint64_t *r)
{
	interp_tensor *t = &z->in[i];
	for (int64_t e = 0; e < interp_tensor_numel(t); e++) {
		*r = *r * 6364136223846793005ull + 1442695040888963407ull;
		uint32_t u = (uint32_t)(*r >> 40);
		if (t->dtype == IR_F32)
			((float *)t->data)[e] = (float)u / 8388608.0f - 1.0f;
		else
			((int32_t *)t->data)[e] = (int32_t)z->K;
	}
}

static void nf_init(nf_graph *z, const nf_shape *s, double p, bool is_fwd,
		    bool is_per_query)
{
	*z = (nf_graph){.B = s->B,
			.Q = s->Q,
			.K = s->K,
			.d = s->d,
			.dv = s->dv,
			.H = s->H,
			.is_per_query = is_per_query};
	z->n_in = is_fwd ? 4 : 5;
	tu_graph_init(&z->x, 8);
	int64_t B = s->B, Q = s->Q, K = s->K, H = s->H;
	ir_id a[5] = {tu_input(&z->x, tu_type(IR_F32, 3, B, Q, H * s->d)),
		      tu_input(&z->x, tu_type(IR_F32, 3, B, K, H * s->d)),
		      tu_input(&z->x, tu_type(IR_F32, 3, B, K, H * s->dv)),
		      is_per_query ? tu_input(&z->x, tu_type(IR_I32, 2, B, Q))
				   : tu_input(&z->x, tu_type(IR_I32, 1, B)),
		      0};
	if (!is_fwd)
		a[4] = tu_input(&z->x, tu_type(IR_F32, 3, B, Q, H * s->dv));
	ir_attr at = {.attention = {0.5, -1e6, p, 5, (uint32_t)H}};
	z->x.f->output_names[0] = is_fwd ? "out" : "grads";
	z->x.f->outputs[z->x.f->n_outputs++] = tu_build(
		&z->x,
		is_fwd ? IR_OP_FUSED_ATTENTION : IR_OP_FUSED_ATTENTION_GRAD, a,
		(uint32_t)z->n_in, &at, NULL);
	uint64_t r = 91;
	for (int i = 0; i < z->n_in; i++) {
		const ir_type *t = &z->x.f->g.nodes[a[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int j = 0; j < t->rank; j++)
			dims[j] = t->dims[j].coef;
		ck_assert(interp_tensor_alloc(&z->x.ctx, &z->in[i], t->dtype,
					      t->rank, dims));
		nf_fill(z, i, &r);
	}
}

static void nf_fini(nf_graph *z)
{
	for (int i = 0; i < z->n_in; i++)
		interp_tensor_fini(&z->x.ctx, &z->in[i]);
	tu_graph_fini(&z->x);
}

/* Runs the node, compiled into p, through the JIT at 1 and 2 threads
 * (the same bits) into out, and through the float32 interpreter into
 * ref (attn_jit.h), at seed 13. */
static void nf_run(nf_graph *z, cg_program *p, bool is_training,
		   interp_tensor *out, interp_tensor *ref)
{
	aj_run_f_against_interp(&z->x, p, z->in, z->n_in, 13, is_training, out,
				ref);
}

/* Where a case puts its values: an operand (NF_Q, NF_K, NF_V, NF_G:
 * the gradient's only; 0: none), a row (n = batch element, i = query or
 * key row) and a column of its last head, with a second place for the
 * cases that need two. Key 2 of batch 1 is valid in every mask but the causal one
 * (whose row 0 sees key 0 only), key K - 1 masked in all masks but the
 * full one. */
enum { NF_Q = 1, NF_K, NF_V, NF_G = 5 }; /* operand + 1 */

typedef struct nf_place {
	int op;
	int64_t b, row, c; /* row -1: K - 1 */
	float x;
} nf_place;

typedef struct nf_case {
	const char *name;
	nf_place at[2];
} nf_case;

static const nf_case nf_cases[] = {
	{"finite", {{0}}},
	{"q nan", {{NF_Q, 1, 0, 1, NAN}}},
	{"q inf", {{NF_Q, 1, 0, 1, INFINITY}}},
	{"q -inf", {{NF_Q, 1, 0, 1, -INFINITY}}},
	{"k nan", {{NF_K, 1, 2, 1, NAN}}},
	{"k inf", {{NF_K, 1, 2, 1, INFINITY}}},
	{"k -inf", {{NF_K, 1, 2, 1, -INFINITY}}},
	{"k nan, last key", {{NF_K, 1, -1, 1, NAN}}},
	{"k -inf, last key", {{NF_K, 1, -1, 1, -INFINITY}}},
	{"v nan", {{NF_V, 1, 2, 0, NAN}}},
	{"v inf", {{NF_V, 1, 2, 0, INFINITY}}},
	{"v -inf", {{NF_V, 1, 2, 0, -INFINITY}}},
	{"v nan, last key", {{NF_V, 1, -1, 0, NAN}}},
	{"v inf, last keys",
	 {{NF_V, 1, -1, 0, INFINITY}, {NF_V, 2, -1, 1, -INFINITY}}},
	{"g nan", {{NF_G, 1, 0, 1, NAN}}},
	{"g inf", {{NF_G, 1, 0, 1, INFINITY}}},
	{"g -inf, last row", {{NF_G, 2, -1, 0, -INFINITY}}},
	/* inf - inf inside the score of row (1, 0) and key (1, 2) */
	{"q inf and -inf",
	 {{NF_Q, 1, 0, 1, INFINITY}, {NF_Q, 1, 0, 2, -INFINITY}}},
	/* finite operands whose products overflow: a score, a dP (the
	 * other products of their rows stay far from overflowing, where
	 * the order of the sums decides) */
	{"q 1e20, k 1e20", {{NF_Q, 1, 0, 1, 1e20f}, {NF_K, 1, 2, 1, 1e20f}}},
	{"g 1e20, v 1e20", {{NF_G, 1, 0, 1, 1e20f}, {NF_V, 1, 2, 1, 1e20f}}},
};

/* The element of place pl in operand pl->op. */
static int64_t nf_at(const nf_graph *z, const nf_place *pl)
{
	bool is_key = pl->op == NF_K || pl->op == NF_V;
	int64_t rows = is_key ? z->K : z->Q;
	int64_t w = pl->op == NF_V || pl->op == NF_G ? z->dv : z->d;
	int64_t row = pl->row < 0 ? rows - 1 : pl->row;
	return ((pl->b * rows + row) * z->H + z->H - 1) * w + pl->c;
}

/* The valid lengths of mask m: 0 every key; 1 per batch element K + 1,
 * 3, 0 (a row with no valid key, which averages all the values); 2
 * per batch element 1, 3, -1; 3 (per query only) causal, query i sees
 * keys 0 .. i; 4 (per query only) lengths from -1 to K + 1. */
static void nf_mask(nf_graph *z, int m)
{
	int32_t *vl = z->in[3].data;
	int64_t per = z->is_per_query ? z->Q : 1;
	static const int32_t m1[3] = {0, 3, 0}, m2[3] = {1, 3, -1};
	for (int64_t b = 0; b < z->B; b++)
		for (int64_t i = 0; i < per; i++) {
			int32_t x = (int32_t)z->K;
			if (m == 1)
				x = b == 0 ? (int32_t)z->K + 1 : m1[b % 3];
			else if (m == 2)
				x = m2[b % 3];
			else if (m == 3)
				x = (int32_t)i + 1;
			else if (m == 4)
				x = (int32_t)((b * 7 + i * 3) % (z->K + 3)) - 1;
			vl[b * per + i] = x;
		}
}

static const char *const nf_mask_names[] = {"all valid", "per batch",
					    "per batch, -1", "causal", "mixed"};

/* One compiled node (shape, forward or gradient, dropout p, valid per
 * batch or per query) against every case and mask. Returns the number of
 * elements not finite in the interpreter's results. */
static int64_t nf_check(const nf_shape *s, bool is_fwd, double p,
			bool is_per_query)
{
	const int n_cases = (int)(sizeof nf_cases / sizeof nf_cases[0]);
	nf_graph z;
	nf_init(&z, s, p, is_fwd, is_per_query);
	cg_program *prog = cg_program_create(&z.x.ctx, z.x.m, NULL, NULL);
	ck_assert_msg(prog && cg_program_jit(prog), "%s", tu_graph_diag(&z.x));
	int64_t n_bad = 0;
	for (int c = 0; c < n_cases; c++) {
		const nf_case *nc = &nf_cases[c];
		if (is_fwd && (nc->at[0].op == NF_G || nc->at[1].op == NF_G))
			continue;
		for (int m = 0; m < (is_per_query ? 5 : 3); m++) {
			if (is_per_query && (m == 1 || m == 2))
				continue;
			nf_mask(&z, m);
			float keep[2] = {0, 0};
			int64_t at[2] = {0, 0};
			for (int i = 0; i < 2; i++) {
				const nf_place *pl = &nc->at[i];
				if (!pl->op)
					continue;
				float *x = z.in[pl->op - 1].data;
				at[i] = nf_at(&z, pl);
				keep[i] = x[at[i]];
				x[at[i]] = pl->x;
			}
			for (int t = 0; t < (p > 0 ? 2 : 1); t++) {
				interp_tensor out, ref;
				nf_run(&z, prog, t == 1, &out, &ref);
				char what[160];
				snprintf(what, sizeof what,
					 "%s (B %lld Q %lld K %lld H %lld)%s, "
					 "%s, %s",
					 is_fwd ? "forward" : "gradient",
					 (long long)s->B, (long long)s->Q,
					 (long long)s->K, (long long)s->H,
					 t ? " with dropout" : "", nc->name,
					 nf_mask_names[m]);
				n_bad += aj_compare_nonfinite(&out, &ref, what);
				interp_tensor_fini(&z.x.ctx, &out);
				interp_tensor_fini(&z.x.ctx, &ref);
			}
			for (int i = 1; i >= 0; i--)
				if (nc->at[i].op)
					((float *)z.in[nc->at[i].op - 1]
						 .data)[at[i]] = keep[i];
		}
	}
	cg_program_destroy(prog);
	nf_fini(&z);
	return n_bad;
}

/* The forward and gradient kernels, small and blocked, dropout off and
 * on (p = 0.5 and a p that empties rows, in training and not), valid lengths per batch element and
 * per query (full, partial, past K, 0 and -1, causal), with a NaN, +inf
 * or -inf in q, k, v or g (in valid and masked keys), inf - inf inside a
 * score, and finite operands whose scores or dP overflow: every NaN and
 * infinity (with its sign) of the interpreter's results is in the
 * JIT's, at 1 and 2 threads, and no other. */
START_TEST(test_fused_attention_kernels_propagate_nonfinite_values)
{
	const nf_shape *s = &nf_shapes[_i / 2];
	bool is_fwd = _i % 2 == 0;
	int64_t n_bad = 0;
	/* p high enough that dropout drops every key of some rows of NaN
	 * weights, whose output is sum_k 0 v_k */
	const double ps[3] = {0, 0.5, s->K <= 16 ? 0.8 : 0.999};
	for (int v = 0; v < 2; v++)
		for (int d = 0; d < 3; d++)
			n_bad += nf_check(s, is_fwd, ps[d], v == 1);
	ck_assert_msg(n_bad > 0, "no value that is not finite");
}
END_TEST

static Suite *fuse_nonfinite_suite(void)
{
	Suite *s = suite_create("codegen_fuse_nonfinite");
	TCase *tc = tcase_create("kernels");
	tcase_add_loop_test(tc,
			    test_fused_attention_kernels_propagate_nonfinite_values,
			    0,
			    (int)(2 * sizeof nf_shapes / sizeof nf_shapes[0]));
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return tu_run_suite(fuse_nonfinite_suite());
}
