/*
 * attn_row.c - the row softmax, dropout and softmax gradient rule that
 * the fused attention reference kernels share (attn_row.h).
 */
#include "attn_row.h"

#include "rt_rng.h"

#include <math.h>

static double R(const interp_attn_row *r, double x)
{
	return interp_round(r->k->out->dtype, x);
}

bool interp_attn_valid_fits(const interp_tensor *valid, int64_t B, int64_t Q)
{
	if (!valid)
		return true;
	int vr = valid->rank;
	const int64_t lead[2] = {B, Q};
	if (vr != 1 && vr != 2)
		return false;
	for (int i = 0; i < vr; i++)
		if (valid->dims[i] != 1 && valid->dims[i] != lead[i])
			return false;
	return true;
}

bool interp_attn_row_init(interp_attn_row *r, bool has_grad)
{
	const interp_kernel *k = r->k;
	const ir_attr *at = &k->node->attr;
	r->scale = R(r, at->attention.scale);
	r->fill = R(r, at->attention.fill);
	r->p = at->attention.p;
	if (!(r->p >= 0 && r->p < 1))
		return interp_fail(k, "probability must be in [0, 1), not %g",
				   r->p);
	r->is_dropout = k->opts->is_training && r->p > 0;
	r->keep_scale = R(r, 1.0 / R(r, 1.0 - r->p));
	r->stream = (k->opts->step << 20) ^ (uint64_t)at->attention.stream;
	size_t row = (size_t)(r->K ? r->K : 1) * sizeof(double);
	r->prob = interp_scratch(k, row);
	r->dp = r->prob && has_grad ? interp_scratch(k, row) : NULL;
	if (r->prob && (!has_grad || r->dp))
		return true;
	ir_free(k->ctx, r->prob);
	return false;
}

void interp_attn_row_fini(const interp_attn_row *r)
{
	ir_free(r->k->ctx, r->prob);
	ir_free(r->k->ctx, r->dp);
}

int64_t interp_attn_row_valid(const interp_attn_row *r, int64_t b, int64_t i)
{
	if (!r->valid)
		return r->K;
	const int64_t lead[2] = {r->B, r->Q};
	return interp_valid_at(r->valid, lead, 2, b * r->Q + i);
}

void interp_attn_row_softmax(const interp_attn_row *r)
{
	double mx = -INFINITY, sum = 0;
	for (int64_t j = 0; j < r->K; j++)
		if (r->prob[j] > mx)
			mx = r->prob[j];
	for (int64_t j = 0; j < r->K; j++) {
		r->prob[j] = R(r, exp(R(r, r->prob[j] - mx)));
		sum = R(r, sum + r->prob[j]);
	}
	for (int64_t j = 0; j < r->K; j++)
		r->prob[j] = R(r, r->prob[j] / sum);
}

bool interp_attn_keeps(const interp_attn_row *r, int64_t n, int64_t i, int64_t j)
{
	if (!r->is_dropout)
		return true;
	uint64_t at = (uint64_t)((n * r->Q + i) * r->K + j);
	return rt_rng_uniform(r->k->opts->seed, r->stream, at) >= r->p;
}

double interp_attn_dropped(const interp_attn_row *r, int64_t n, int64_t i,
			   int64_t j)
{
	if (!r->is_dropout)
		return r->prob[j];
	return interp_attn_keeps(r, n, i, j) ? R(r, r->prob[j] * r->keep_scale)
					     : 0.0;
}

void interp_attn_row_ds(const interp_attn_row *r, int64_t n, int64_t i,
			int64_t valid)
{
	double D = 0;
	for (int64_t j = 0; j < r->K; j++) {
		double dpd = r->dp[j], dp = dpd;
		if (r->is_dropout)
			dp = interp_attn_keeps(r, n, i, j)
				     ? R(r, dpd * r->keep_scale)
				     : 0.0;
		r->dp[j] = dp;
		D = R(r, D + R(r, r->prob[j] * dp));
	}
	for (int64_t j = 0; j < r->K; j++) {
		double ds = j < valid ? R(r, r->prob[j] * R(r, r->dp[j] - D))
				      : 0.0;
		r->dp[j] = R(r, ds * r->scale);
	}
}
