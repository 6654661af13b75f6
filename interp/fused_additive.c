/*
 * fused_additive.c - the reference kernels of the fused additive (Bahdanau)
 * attention ops, the oracle the generated kernels are tested against.
 *
 * fused_additive_attention computes, one query row at a time, exactly
 * what the unfused graph it replaces computes, step for step and rounded
 * the same way: the features t = tanh(qp_q + kp_k) (the add, then the
 * tanh, each rounded), the score sum_h t_h wv_h (summed left to right, as
 * matmul does) times scale, the masked softmax of the row (positions >=
 * valid read as fill), the dropout of the weights, and their product with
 * the values. fused_additive_attention_grad recomputes each row's weights
 * the same way and applies the gradient rules of docs/autodiff.md to the
 * row:
 *
 *   dPd = g v^T, dP = dropout(dPd), D = sum_k P dP,
 *   dS = scale P (dP - D) where k < valid (else 0),
 *   u = dS wv (1 - t t), dqp += u, dkp += u, dwv[n] += dS t,
 *   dv += dropout(P)^T g.
 *
 * Only a row of K weights lives at a time (scratch), never the N x Q x K
 * x H features.
 */
#include "attn_row.h"

#include <math.h>

/* One evaluation of a fused additive attention node. */
typedef struct add_cx {
	const interp_kernel *k;
	const interp_tensor *qp, *kp, *wv, *v, *g; /* g: or NULL */
	int64_t N, Q, K, H, dv;
	interp_attn_row r; /* the lengths (N) or (N, Q), the row */
} add_cx;

static double R(const add_cx *a, double x)
{
	return interp_round(a->k->out->dtype, x);
}

static bool fits(const add_cx *a)
{
	const interp_tensor *q = a->qp, *k = a->kp, *w = a->wv, *v = a->v;
	if (q->rank != 3 || k->rank != 3 || w->rank != 1 || v->rank != 3)
		return false;
	if (k->dims[0] != a->N || v->dims[0] != a->N || v->dims[1] != a->K ||
	    k->dims[2] != a->H || w->dims[0] != a->H)
		return false;
	if (a->g && (a->g->rank != 3 || a->g->dims[0] != a->N ||
		     a->g->dims[1] != a->Q || a->g->dims[2] != a->dv))
		return false;
	return interp_attn_valid_fits(a->r.valid, a->N, a->Q);
}

/* Reads the operands and attributes; n_fixed operands besides valid. */
static bool add_init(add_cx *a, const interp_kernel *k, uint32_t n_fixed)
{
	bool has_valid = k->n_args == n_fixed + 1;
	if (k->n_args != n_fixed && !has_valid)
		return interp_fail(k, "expects %u or %u operands, got %u",
				   n_fixed, n_fixed + 1, k->n_args);
	*a = (add_cx){.k = k,
		      .qp = &k->args[0],
		      .kp = &k->args[1],
		      .wv = &k->args[2],
		      .v = &k->args[3]};
	a->r.valid = has_valid ? &k->args[4] : NULL;
	a->g = n_fixed == 5 ? &k->args[k->n_args - 1] : NULL;
	a->N = a->qp->dims[0];
	a->Q = a->qp->rank == 3 ? a->qp->dims[1] : 0;
	a->H = a->qp->rank == 3 ? a->qp->dims[2] : 0;
	a->K = a->kp->rank == 3 ? a->kp->dims[1] : 0;
	a->dv = a->v->rank == 3 ? a->v->dims[2] : 0;
	if (!fits(a))
		return interp_fail(k, "query and key projections, scoring "
				      "vector, values and valid lengths do not "
				      "fit (N, Q, H), (N, K, H), (H), (N, K, "
				      "dv), (N) or (N, Q)");
	a->r.k = k;
	a->r.B = a->N;
	a->r.Q = a->Q;
	a->r.K = a->K;
	return interp_attn_row_init(&a->r, a->g != NULL);
}

/* The feature tanh(qp[n, i, h] + kp[n, j, h]), rounded as the add and
 * the tanh of the unfused graph round it. */
static double feature(const add_cx *a, int64_t n, int64_t i, int64_t j,
		      int64_t h)
{
	double x = interp_ld(a->qp, (n * a->Q + i) * a->H + h) +
		   interp_ld(a->kp, (n * a->K + j) * a->H + h);
	return R(a, tanh(R(a, x)));
}

/* The score of key j for row (n, i): sum_h t_h wv_h left to right, times
 * scale. */
static double score(const add_cx *a, int64_t n, int64_t i, int64_t j)
{
	double acc = 0;
	for (int64_t h = 0; h < a->H; h++)
		acc = R(a, acc + R(a, feature(a, n, i, j, h) *
					      interp_ld(a->wv, h)));
	return R(a, acc * a->r.scale);
}

/* a->r.prob = masked_softmax(scores, valid) of row (n, i), as the
 * interpreter's masked softmax computes it. */
static void row_weights(const add_cx *a, int64_t n, int64_t i, int64_t valid)
{
	for (int64_t j = 0; j < a->K; j++)
		a->r.prob[j] = j < valid ? score(a, n, i, j) : a->r.fill;
	interp_attn_row_softmax(&a->r);
}

bool interp_k_fused_additive_attention(const interp_kernel *k)
{
	add_cx a;
	if (!add_init(&a, k, 4))
		return false;
	for (int64_t n = 0; n < a.N; n++)
		for (int64_t i = 0; i < a.Q; i++) {
			int64_t valid = interp_attn_row_valid(&a.r, n, i);
			row_weights(&a, n, i, valid);
			for (int64_t j = 0; j < a.K; j++)
				a.r.prob[j] = interp_attn_dropped(&a.r, n, i, j);
			int64_t oo = (n * a.Q + i) * a.dv;
			for (int64_t c = 0; c < a.dv; c++) {
				double acc = 0;
				for (int64_t j = 0; j < a.K; j++) {
					double x = interp_ld(a.v, (n * a.K +
								   j) * a.dv +
									  c);
					acc = R(&a,
						acc + R(&a, a.r.prob[j] * x));
				}
				interp_st(k->out, oo + c, acc);
			}
		}
	interp_attn_row_fini(&a.r);
	return true;
}

/* Adds x to element at of the output. */
static void add_at(const add_cx *a, int64_t at, double x)
{
	interp_tensor *out = a->k->out;
	interp_st(out, at, R(a, interp_ld(out, at) + x));
}

/* The offsets of the packed parts: dqp, dkp, dwv (N rows of H), dv. */
typedef struct add_parts {
	int64_t dq, dk, dw, dv;
} add_parts;

static add_parts parts(const add_cx *a)
{
	add_parts p = {0, a->N * a->Q * a->H, 0, 0};
	p.dw = p.dk + a->N * a->K * a->H;
	p.dv = p.dw + a->N * a->H;
	return p;
}

/* dS of key j flowing into the features of (n, i, j): dqp, dkp, dwv. */
static void feature_grads(const add_cx *a, int64_t n, int64_t i, int64_t j,
			  double ds)
{
	add_parts p = parts(a);
	for (int64_t h = 0; h < a->H; h++) {
		double t = feature(a, n, i, j, h);
		double dt = R(a, ds * interp_ld(a->wv, h));
		double u = R(a, dt * R(a, 1.0 - R(a, t * t)));
		add_at(a, p.dq + (n * a->Q + i) * a->H + h, u);
		add_at(a, p.dk + (n * a->K + j) * a->H + h, u);
		add_at(a, p.dw + n * a->H + h, R(a, ds * t));
	}
}

/* The gradient contributions of query row (n, i). */
static void grad_row(const add_cx *a, int64_t n, int64_t i)
{
	int64_t valid = interp_attn_row_valid(&a->r, n, i);
	int64_t go = (n * a->Q + i) * a->dv;
	add_parts p = parts(a);
	row_weights(a, n, i, valid);
	for (int64_t j = 0; j < a->K; j++) {
		double dpd = 0;
		for (int64_t c = 0; c < a->dv; c++)
			dpd = R(a,
				dpd + R(a, interp_ld(a->g, go + c) *
						   interp_ld(a->v, (n * a->K +
								    j) * a->dv +
									   c)));
		a->r.dp[j] = dpd;
	}
	interp_attn_row_ds(&a->r, n, i, valid);
	for (int64_t j = 0; j < a->K; j++) {
		/* every valid key, even at dS = 0: 0 wv is NaN where wv is
		 * not finite, as in the unfused graph's product */
		if (j < valid)
			feature_grads(a, n, i, j, a->r.dp[j]);
		double pd = interp_attn_dropped(&a->r, n, i, j);
		for (int64_t c = 0; c < a->dv; c++)
			add_at(a, p.dv + (n * a->K + j) * a->dv + c,
			       R(a, pd * interp_ld(a->g, go + c)));
	}
}

bool interp_k_fused_additive_attention_grad(const interp_kernel *k)
{
	add_cx a;
	if (!add_init(&a, k, 5))
		return false;
	add_parts p = parts(&a);
	int64_t n_out = p.dv + a.N * a.K * a.dv;
	if (interp_tensor_numel(k->out) != n_out) {
		interp_attn_row_fini(&a.r);
		return interp_fail(k, "the result has %lld elements, not %lld",
				   (long long)interp_tensor_numel(k->out),
				   (long long)n_out);
	}
	for (int64_t i = 0; i < n_out; i++)
		interp_st(k->out, i, 0);
	for (int64_t n = 0; n < a.N; n++)
		for (int64_t i = 0; i < a.Q; i++)
			grad_row(&a, n, i);
	interp_attn_row_fini(&a.r);
	return true;
}
