/*
 * fused_attention.c - the reference kernels of the fused attention ops, the
 * oracle the generated FlashAttention-style kernels are tested against.
 *
 * fused_attention computes, one query row at a time, exactly what the
 * unfused graph it replaces computes, step for step and rounded the same
 * way: the scores q·k (summed left to right) times scale, the masked
 * softmax of the row (positions >= valid read as fill), the dropout of the
 * weights, and their product with the values. fused_attention_grad
 * recomputes each row's weights the same way and applies the softmax and
 * matmul gradient rules of docs/autodiff.md to that row:
 *
 *   dPd = g v^T, dP = dropout(dPd), D = sum_k P dP,
 *   dS = P (dP - D) where k < valid (else 0), dq = scale dS k,
 *   dk += scale dS^T q, dv += dropout(P)^T g.
 *
 * Only a row of K scores lives at a time (scratch), never N x Q x K.
 *
 * With h heads (attr heads) the operands are (B, Q, h*d), (B, K, h*d),
 * (B, K, h*dv): attention n = b*h + j reads head j's columns of batch
 * element b's rows (rows h*d apart), and the valid lengths of b. The
 * loops run over n exactly as for h = 1, so the dropout draws (which
 * count in n) are those of the split graph.
 */
#include "attn_row.h"

/* One evaluation of a fused attention node. */
typedef struct attn_cx {
	const interp_kernel *k;
	const interp_tensor *q, *kt, *v, *g; /* g: gradient or NULL */
	int64_t H, B, N, Q, K, d, dv; /* N = B*H attentions; d, dv per head */
	interp_attn_row r;            /* the lengths (B) or (B, Q), the row */
} attn_cx;

static double R(const attn_cx *a, double x)
{
	return interp_round(a->k->out->dtype, x);
}

static bool fits(const attn_cx *a)
{
	const interp_tensor *q = a->q, *k = a->kt, *v = a->v;
	if (q->rank != 3 || k->rank != 3 || v->rank != 3 || a->H < 1 ||
	    q->dims[2] % a->H != 0 || v->dims[2] % a->H != 0)
		return false;
	if (k->dims[0] != a->B || v->dims[0] != a->B || v->dims[1] != a->K ||
	    k->dims[2] != a->H * a->d)
		return false;
	if (a->g && (a->g->rank != 3 || a->g->dims[0] != a->B ||
		     a->g->dims[1] != a->Q || a->g->dims[2] != a->H * a->dv))
		return false;
	return interp_attn_valid_fits(a->r.valid, a->B, a->Q);
}

/* Reads the operands and attributes; n_fixed operands besides valid. */
static bool attn_init(attn_cx *a, const interp_kernel *k, uint32_t n_fixed)
{
	const ir_attr *at = &k->node->attr;
	bool has_valid = k->n_args == n_fixed + 1;
	if (k->n_args != n_fixed && !has_valid)
		return interp_fail(k, "expects %u or %u operands, got %u",
				   n_fixed, n_fixed + 1, k->n_args);
	*a = (attn_cx){.k = k,
		       .q = &k->args[0],
		       .kt = &k->args[1],
		       .v = &k->args[2]};
	a->r.valid = has_valid ? &k->args[3] : NULL;
	a->g = n_fixed == 4 ? &k->args[k->n_args - 1] : NULL;
	a->H = at->attention.heads;
	a->B = a->q->dims[0];
	a->N = a->B * a->H;
	a->Q = a->q->rank == 3 ? a->q->dims[1] : 0;
	a->d = a->q->rank == 3 && a->H > 0 ? a->q->dims[2] / a->H : 0;
	a->K = a->kt->rank == 3 ? a->kt->dims[1] : 0;
	a->dv = a->v->rank == 3 && a->H > 0 ? a->v->dims[2] / a->H : 0;
	if (!fits(a))
		return interp_fail(k,
				   "queries, keys, values and valid lengths "
				   "do not fit (B, Q, h*d), (B, K, h*d), (B, "
				   "K, h*dv), (B) or (B, Q) for %u heads",
				   at->attention.heads);
	a->r.k = k;
	a->r.B = a->B;
	a->r.Q = a->Q;
	a->r.K = a->K;
	return interp_attn_row_init(&a->r, a->g != NULL);
}

/* Where row i (of `rows`) of attention n starts in an operand whose
 * heads are w wide: head n % H of row i of batch element n / H. */
static int64_t at_row(const attn_cx *a, int64_t n, int64_t rows, int64_t i,
		      int64_t w)
{
	return ((n / a->H * rows + i) * a->H + n % a->H) * w;
}

/* The valid length of query row i of attention n (K without a mask):
 * its batch element's. */
static int64_t row_valid(const attn_cx *a, int64_t n, int64_t i)
{
	return interp_attn_row_valid(&a->r, n / a->H, i);
}

/* q_i · k_j summed left to right, as matmul does. */
static double dot(const attn_cx *a, const interp_tensor *x, int64_t xo,
		  const interp_tensor *y, int64_t yo, int64_t len)
{
	double acc = 0;
	for (int64_t c = 0; c < len; c++)
		acc = R(a,
			acc + R(a, interp_ld(x, xo + c) * interp_ld(y, yo + c)));
	return acc;
}

/* a->r.prob = masked_softmax(scale q_i k^T, valid) of row (n, i), as the
 * interpreter's masked softmax computes it. */
static void row_weights(const attn_cx *a, int64_t n, int64_t i, int64_t valid)
{
	int64_t qo = at_row(a, n, a->Q, i, a->d);
	for (int64_t j = 0; j < a->K; j++) {
		double s = a->r.fill;
		if (j < valid)
			s = R(a, dot(a, a->q, qo, a->kt,
				     at_row(a, n, a->K, j, a->d), a->d) *
					 a->r.scale);
		a->r.prob[j] = s;
	}
	interp_attn_row_softmax(&a->r);
}

bool interp_k_fused_attention(const interp_kernel *k)
{
	attn_cx a;
	if (!attn_init(&a, k, 3))
		return false;
	for (int64_t n = 0; n < a.N; n++)
		for (int64_t i = 0; i < a.Q; i++) {
			row_weights(&a, n, i, row_valid(&a, n, i));
			for (int64_t j = 0; j < a.K; j++)
				a.r.prob[j] = interp_attn_dropped(&a.r, n, i, j);
			int64_t oo = at_row(&a, n, a.Q, i, a.dv);
			for (int64_t c = 0; c < a.dv; c++) {
				double acc = 0;
				for (int64_t j = 0; j < a.K; j++) {
					double x = interp_ld(a.v,
							     at_row(&a, n, a.K,
								    j, a.dv) +
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

/* Adds x * row y (len elements at yo) into the output at oo. */
static void axpy(const attn_cx *a, double x, const interp_tensor *y, int64_t yo,
		 int64_t oo, int64_t len)
{
	interp_tensor *out = a->k->out;
	for (int64_t c = 0; c < len; c++)
		interp_st(out, oo + c,
			  R(a, interp_ld(out, oo + c) +
				       R(a, x * interp_ld(y, yo + c))));
}

/* The gradient contributions of query row (n, i); the output holds dq,
 * dk and dv one after the other. */
static void grad_row(const attn_cx *a, int64_t n, int64_t i)
{
	int64_t valid = row_valid(a, n, i);
	int64_t qo = at_row(a, n, a->Q, i, a->d),
		go = at_row(a, n, a->Q, i, a->dv);
	int64_t dk0 = a->N * a->Q * a->d, dv0 = dk0 + a->N * a->K * a->d;
	row_weights(a, n, i, valid);
	for (int64_t j = 0; j < a->K; j++)
		a->r.dp[j] = dot(a, a->g, go, a->v,
				 at_row(a, n, a->K, j, a->dv), a->dv);
	interp_attn_row_ds(&a->r, n, i, valid);
	for (int64_t j = 0; j < a->K; j++) {
		int64_t ko = at_row(a, n, a->K, j, a->d);
		double ds = a->r.dp[j];
		axpy(a, ds, a->kt, ko, qo, a->d);
		axpy(a, ds, a->q, qo, dk0 + ko, a->d);
		axpy(a, interp_attn_dropped(&a->r, n, i, j), a->g, go,
		     dv0 + at_row(a, n, a->K, j, a->dv), a->dv);
	}
}

bool interp_k_fused_attention_grad(const interp_kernel *k)
{
	attn_cx a;
	if (!attn_init(&a, k, 4))
		return false;
	int64_t n_out = a.N * (a.Q * a.d + a.K * a.d + a.K * a.dv);
	if (interp_tensor_numel(k->out) != n_out) {
		interp_attn_row_fini(&a.r);
		return interp_fail(k, "the result has %lld elements, not %lld",
				   (long long)interp_tensor_numel(k->out),
				   (long long)n_out);
	}
	for (int64_t n = 0; n < a.N; n++)
		for (int64_t i = 0; i < a.Q; i++)
			grad_row(&a, n, i);
	interp_attn_row_fini(&a.r);
	return true;
}
