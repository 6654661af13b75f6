/*
 * nn.c - the kernels with arithmetic beyond one element: batched matmul,
 * reductions, softmax and its masked and log forms, layer norm, dropout,
 * embedding lookup and the two losses.
 *
 * Every float step is rounded to the working precision (R below), so in
 * float32 mode a sum accumulates in float, left to right, as a plain C
 * loop over float would (sum and mean of more than 256 elements: in
 * blocks of 32, whose sums are then combined pairwise); in float64 mode
 * R does nothing. Shapes follow PyTorch; docs/ops.md has the fine
 * points.
 */
#include "interp_impl.h"

#include "rt_rng.h"

/* x rounded to the kernel's output precision. */
static double R(const interp_kernel *k, double x)
{
	return interp_round(k->out->dtype, x);
}

static bool mismatch(const interp_kernel *k, const char *what,
		     const interp_tensor *t)
{
	char st[160], so[160];
	interp_dims_format(t->dims, t->rank, st, sizeof st);
	interp_dims_format(k->out->dims, k->out->rank, so, sizeof so);
	return interp_fail(k, "%s of shape %s does not fit the result %s", what,
			   st, so);
}

/* ---- matmul ------------------------------------------------------------- */

/* Sizes of a matmul operand's matrix: rows x cols after the transpose. */
static void mat_dims(const interp_tensor *t, bool is_t, int64_t *rows,
		     int64_t *cols)
{
	int64_t r = t->dims[t->rank - 2], c = t->dims[t->rank - 1];
	*rows = is_t ? c : r;
	*cols = is_t ? r : c;
}

/* Element (i, j) of the (possibly transposed) matrix at offset off. */
static double mat_at(const interp_tensor *t, bool is_t, int64_t off, int64_t i,
		     int64_t j)
{
	int64_t ld = t->dims[t->rank - 1];
	return interp_ld(t, off + (is_t ? j * ld + i : i * ld + j));
}

/* One (M, N) result matrix: out[m, n] = sum_k a[m, k] * b[k, n]. */
static void matmul_one(const interp_kernel *k, int64_t oa, int64_t ob,
		       int64_t oo, int64_t M, int64_t N, int64_t K)
{
	bool ta = k->node->attr.matmul.ta, tb = k->node->attr.matmul.tb;
	const interp_tensor *a = &k->args[0], *b = &k->args[1];
	for (int64_t m = 0; m < M; m++)
		for (int64_t n = 0; n < N; n++) {
			double acc = 0;
			for (int64_t i = 0; i < K; i++)
				acc = R(k, acc + R(k, mat_at(a, ta, oa, m, i) *
							      mat_at(b, tb, ob,
								     i, n)));
			interp_st(k->out, oo + m * N + n, acc);
		}
}

bool interp_k_matmul(const interp_kernel *k)
{
	const interp_tensor *a = &k->args[0], *b = &k->args[1];
	interp_tensor *out = k->out;
	if (a->rank < 2 || b->rank < 2 || out->rank < 2)
		return interp_fail(k, "operands and result need rank >= 2");
	int64_t M, K, K2, N;
	mat_dims(a, k->node->attr.matmul.ta, &M, &K);
	mat_dims(b, k->node->attr.matmul.tb, &K2, &N);
	int nb = out->rank - 2;
	if (K != K2) {
		char s1[160], s2[160];
		interp_dims_format(a->dims, a->rank, s1, sizeof s1);
		interp_dims_format(b->dims, b->rank, s2, sizeof s2);
		return interp_fail(k, "inner dimensions differ: %s%s @ %s%s",
				   s1, k->node->attr.matmul.ta ? "^T" : "", s2,
				   k->node->attr.matmul.tb ? "^T" : "");
	}
	if (out->dims[nb] != M || out->dims[nb + 1] != N)
		return mismatch(k, "left operand", a);
	int64_t sa[IR_MAX_RANK], sb[IR_MAX_RANK], idx[IR_MAX_RANK] = {0};
	if (!interp_bcast_strides(a->dims, a->rank - 2, out->dims, nb, M * K, sa))
		return mismatch(k, "left operand", a);
	if (!interp_bcast_strides(b->dims, b->rank - 2, out->dims, nb, K * N, sb))
		return mismatch(k, "right operand", b);
	int64_t batches = interp_dims_prod(out->dims, 0, nb);
	for (int64_t i = 0; i < batches; i++) {
		matmul_one(k, interp_index_dot(idx, sa, nb),
			   interp_index_dot(idx, sb, nb), i * M * N, M, N, K);
		interp_index_next(idx, out->dims, nb);
	}
	return true;
}

/* ---- reductions ------------------------------------------------------------ */

/* For each input axis, the stride of the output element it maps to: 0 on
 * reduced axes. Checks that the output has the kept dims (keepdim or not). */
static bool reduce_map(const interp_kernel *k, int64_t *ostrides, int64_t *count)
{
	const interp_tensor *x = &k->args[0];
	uint32_t axes = k->node->attr.reduce.axes;
	int64_t kept[IR_MAX_RANK];
	int nk = 0;
	*count = 1;
	for (int i = 0; i < x->rank; i++) {
		if (axes & (1u << i))
			*count *= x->dims[i];
		else
			kept[nk++] = x->dims[i];
	}
	if (interp_dims_prod(kept, 0, nk) != interp_tensor_numel(k->out))
		return mismatch(k, "operand", x);
	int64_t s = 1;
	for (int i = x->rank - 1; i >= 0; i--) {
		ostrides[i] = axes & (1u << i) ? 0 : s;
		if (!(axes & (1u << i)))
			s *= x->dims[i];
	}
	return true;
}

/* The order of a float sum (docs/ops.md, "Summation order"), the
 * generated code's too (CG_SUM_PLAIN, CG_SUM_BLOCK): at most SUM_PLAIN
 * elements per output element are summed left to right; more, in blocks
 * of SUM_BLOCK combined pairwise. */
#define SUM_PLAIN 256
#define SUM_BLOCK 32

/* The number of 1 bits of i >= 0: the depth of the tree's stack after
 * i blocks. */
static int ones(int64_t i)
{
	int c = 0;
	for (; i; i &= i - 1)
		c++;
	return c;
}

/* Block i's sum b pushed onto the stack st of pairwise partial sums (the
 * blocks before it: one sum per 1 bit of i, the oldest and largest
 * first), and each pair of equal-sized sums it completes combined,
 * left + right. */
static void tree_push(const interp_kernel *k, double *st, int64_t i, double b)
{
	int p = ones(i);
	st[p] = b;
	for (int64_t m = i + 1; !(m & 1); m >>= 1, p--)
		st[p - 1] = R(k, st[p - 1] + st[p]);
}

/* The total of nb blocks on the stack st: its sums combined from the
 * newest (smallest), s0 + (s1 + (... + s_last)); 0 for no block. */
static double tree_total(const interp_kernel *k, const double *st, int64_t nb)
{
	int d = ones(nb);
	double t = d ? st[d - 1] : 0;
	for (int j = d - 2; j >= 0; j--)
		t = R(k, st[j] + t);
	return t;
}

/* Stack levels for nb blocks: one more than the most 1 bits of a block
 * index below nb. */
static int tree_levels(int64_t nb)
{
	int l = 1;
	for (; nb > 1; nb >>= 1)
		l++;
	return l;
}

/* The float sums of x into out in blocks: each output element's count
 * inputs, in row-major order, are summed left to right in blocks of
 * `block` (SUM_BLOCK for a sum longer than SUM_PLAIN, else all of them
 * in one), from 0, rounding each step, and the block sums are combined
 * pairwise (tree_push, tree_total). */
static bool sum_blocked(const interp_kernel *k, const int64_t *os, int64_t count)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	int64_t no = interp_tensor_numel(out), n = interp_tensor_numel(x);
	int64_t block = count > SUM_PLAIN ? SUM_BLOCK : SUM_PLAIN;
	int64_t nb = (count + block - 1) / block;
	int lv = tree_levels(nb);
	size_t sz = (size_t)(no ? no : 1);
	double *part = interp_scratch(k, sz * sizeof(double) * (size_t)(lv + 1));
	int64_t *cnt = part ? interp_scratch(k, sz * sizeof(int64_t)) : NULL;
	if (!cnt) {
		ir_free(k->ctx, part);
		return false;
	}
	double *st = part + sz;
	int64_t idx[IR_MAX_RANK] = {0};
	for (int64_t i = 0; i < n; i++) {
		int64_t j = interp_index_dot(idx, os, x->rank);
		part[j] = R(k, part[j] + R(k, interp_ld(x, i)));
		if (++cnt[j] % block == 0) {
			tree_push(k, st + j * lv, cnt[j] / block - 1, part[j]);
			part[j] = 0;
		}
		interp_index_next(idx, x->dims, x->rank);
	}
	for (int64_t j = 0; j < no; j++) {
		if (count % block)
			tree_push(k, st + j * lv, nb - 1, part[j]);
		interp_st(out, j, tree_total(k, st + j * lv, nb));
	}
	ir_free(k->ctx, part);
	ir_free(k->ctx, cnt);
	return true;
}

/* sum and mean: int32 sums wrap, in any order; float sums take blocks
 * (sum_blocked). An empty mean is NaN. */
bool interp_k_sum(const interp_kernel *k, bool is_mean)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	int64_t os[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, count;
	if (!reduce_map(k, os, &count))
		return false;
	int64_t n = interp_tensor_numel(x);
	if (out->dtype != IR_I32 && !sum_blocked(k, os, count))
		return false;
	for (int64_t i = 0; out->dtype == IR_I32 && i < n; i++) {
		int64_t j = interp_index_dot(idx, os, x->rank);
		interp_sti(out, j, interp_ldi(out, j) + interp_ldi(x, i));
		interp_index_next(idx, x->dims, x->rank);
	}
	int64_t no = interp_tensor_numel(out);
	for (int64_t j = 0; is_mean && j < no; j++)
		interp_st(out, j,
			  count ? interp_ld(out, j) / (double)count : NAN);
	return true;
}

/* max: NaN wins, as in PyTorch; an empty reduction is an error. */
bool interp_k_max(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	interp_tensor *out = k->out;
	int64_t os[IR_MAX_RANK], idx[IR_MAX_RANK] = {0}, count;
	if (!reduce_map(k, os, &count))
		return false;
	if (count == 0 && interp_tensor_numel(out) > 0)
		return interp_fail(k, "reduction over an empty axis");
	int64_t no = interp_tensor_numel(out), n = interp_tensor_numel(x);
	for (int64_t j = 0; j < no; j++)
		interp_st(out, j, out->dtype == IR_I32 ? INT32_MIN : -INFINITY);
	for (int64_t i = 0; i < n; i++) {
		int64_t j = interp_index_dot(idx, os, x->rank);
		double v = interp_ld(x, i);
		if (isnan(v) || v > interp_ld(out, j))
			interp_copy_elem(out, j, x, i);
		interp_index_next(idx, x->dims, x->rank);
	}
	return true;
}

/* The single reduced axis as outer x len x inner blocks. */
static bool axis_split(const interp_kernel *k, const interp_tensor *x, int ax,
		       int64_t *outer, int64_t *len, int64_t *inner)
{
	if (ax < 0 || ax >= x->rank)
		return interp_fail(k, "axis %d out of range for rank %d", ax,
				   x->rank);
	*outer = interp_dims_prod(x->dims, 0, ax);
	*len = x->dims[ax];
	*inner = interp_dims_prod(x->dims, ax + 1, x->rank);
	return true;
}

/* argmax (argmin): the first index of the maximum (minimum); a NaN
 * counts as both, as PyTorch's. */
bool interp_k_argmax(const interp_kernel *k)
{
	bool is_min = k->node->op == IR_OP_ARGMIN;
	const interp_tensor *x = &k->args[0];
	uint32_t axes = k->node->attr.reduce.axes;
	int ax = axes ? __builtin_ctz(axes) : -1;
	int64_t outer = 0, len = 0, inner = 0;
	if ((axes & (axes - 1)) != 0)
		return interp_fail(k, "needs exactly one axis, got mask 0x%x",
				   axes);
	if (!axis_split(k, x, ax, &outer, &len, &inner))
		return false;
	if (outer * inner != interp_tensor_numel(k->out))
		return mismatch(k, "operand", x);
	if (len == 0 && outer * inner > 0)
		return interp_fail(k, "reduction over an empty axis");
	for (int64_t o = 0; o < outer; o++)
		for (int64_t i = 0; i < inner; i++) {
			int64_t base = o * len * inner + i, best = 0;
			double bv = interp_ld(x, base);
			for (int64_t j = 1; j < len && !isnan(bv); j++) {
				double v = interp_ld(x, base + j * inner);
				if (isnan(v) || (is_min ? v < bv : v > bv)) {
					bv = v;
					best = j;
				}
			}
			interp_sti(k->out, o * inner + i, best);
		}
	return true;
}

/* ---- softmax family --------------------------------------------------------- */

/* Softmax (or log-softmax) of the row of K elements at off, where
 * positions >= valid read as fill instead of x: max-subtracted, exps
 * summed left to right. */
static void softmax_row(const interp_kernel *k, const interp_tensor *x,
			int64_t off, int64_t K, int64_t valid, double fill,
			bool is_log)
{
	interp_tensor *out = k->out;
	double mx = -INFINITY, sum = 0;
	for (int64_t j = 0; j < K; j++) {
		double v = j < valid ? R(k, interp_ld(x, off + j)) : fill;
		interp_st(out, off + j, v);
		if (v > mx)
			mx = v;
	}
	for (int64_t j = 0; j < K; j++) {
		double e = R(k, exp(R(k, interp_ld(out, off + j) - mx)));
		sum = R(k, sum + e);
		if (!is_log)
			interp_st(out, off + j, e);
	}
	double lse = R(k, log(sum));
	for (int64_t j = 0; j < K; j++) {
		double v = interp_ld(out, off + j);
		interp_st(out, off + j, is_log ? R(k, v - mx) - lse : v / sum);
	}
}

bool interp_k_softmax(const interp_kernel *k, bool is_log)
{
	const interp_tensor *x = &k->args[0];
	if (x->rank < 1)
		return interp_fail(k, "operand must have rank >= 1");
	if (interp_tensor_numel(x) != interp_tensor_numel(k->out))
		return mismatch(k, "operand", x);
	int64_t K = x->dims[x->rank - 1];
	int64_t rows = K ? interp_tensor_numel(x) / K : 0;
	for (int64_t r = 0; r < rows; r++)
		softmax_row(k, x, r * K, K, K, 0, is_log);
	return true;
}

int64_t interp_valid_at(const interp_tensor *v, const int64_t *lead, int nl,
			int64_t r)
{
	int64_t idx[IR_MAX_RANK], vs[IR_MAX_RANK], off = 0;
	for (int i = nl - 1; i >= 0; i--) {
		idx[i] = r % lead[i];
		r /= lead[i];
	}
	interp_strides(v->dims, v->rank, vs);
	for (int i = 0; i < v->rank; i++)
		off += (v->dims[i] == 1 ? 0 : idx[i]) * vs[i];
	return interp_ldi(v, off);
}

/* masked_softmax(x, valid): d2l's masked_softmax. valid has rank(x)-1
 * (one length per row) or rank(x)-2 (one per batch, the same for every
 * query row); positions k >= valid get attr.fill before the softmax, so a
 * row with valid <= 0 is uniform. */
bool interp_k_masked_softmax(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0], *v = &k->args[1];
	if (x->rank < 2 || (v->rank != x->rank - 1 && v->rank != x->rank - 2))
		return interp_fail(k,
				   "valid lengths of rank %d do not fit "
				   "scores of rank %d",
				   v->rank, x->rank);
	for (int i = 0; i < v->rank; i++)
		if (v->dims[i] != 1 && v->dims[i] != x->dims[i])
			return mismatch(k, "valid lengths", v);
	if (interp_tensor_numel(x) != interp_tensor_numel(k->out))
		return mismatch(k, "scores", x);
	int64_t K = x->dims[x->rank - 1];
	int64_t rows = interp_dims_prod(x->dims, 0, x->rank - 1);
	double fill = R(k, k->node->attr.fill);
	for (int64_t r = 0; r < rows && K > 0; r++)
		softmax_row(k, x, r * K, K,
			    interp_valid_at(v, x->dims, x->rank - 1, r), fill,
			    false);
	return true;
}

/* ---- layer norm ----------------------------------------------------------------- */

/* (x - mean) r * gamma + beta over the last axis, r = 1 / sqrt(var +
 * eps), with the biased variance. */
bool interp_k_layer_norm(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0], *g = &k->args[1], *b = &k->args[2];
	if (x->rank < 1)
		return interp_fail(k, "operand must have rank >= 1");
	int64_t D = x->dims[x->rank - 1];
	if (interp_tensor_numel(g) != D || interp_tensor_numel(b) != D)
		return interp_fail(k, "scale and shift need %lld elements",
				   (long long)D);
	if (interp_tensor_numel(x) != interp_tensor_numel(k->out))
		return mismatch(k, "operand", x);
	int64_t rows = D ? interp_tensor_numel(x) / D : 0;
	double eps = R(k, k->node->attr.eps);
	for (int64_t r = 0; r < rows; r++) {
		int64_t off = r * D;
		double sum = 0, sq = 0;
		for (int64_t j = 0; j < D; j++)
			sum = R(k, sum + R(k, interp_ld(x, off + j)));
		double mean = R(k, sum / (double)D);
		for (int64_t j = 0; j < D; j++) {
			double d = R(k, R(k, interp_ld(x, off + j)) - mean);
			sq = R(k, sq + R(k, d * d));
		}
		double sd = R(k, sqrt(R(k, R(k, sq / (double)D) + eps)));
		double rs = R(k, 1 / sd);
		for (int64_t j = 0; j < D; j++) {
			double d = R(k, R(k, interp_ld(x, off + j)) - mean);
			double y = R(k, R(k, d * rs) * R(k, interp_ld(g, j)));
			interp_st(k->out, off + j, y + R(k, interp_ld(b, j)));
		}
	}
	return true;
}

/* layer_norm_grad(x, gamma, g): per row, from d = x - mean, dxh = g gamma
 * and r = 1 / sqrt(mean(d^2) + eps), (dxh - mean(dxh) - d r m2) r with
 * m2 = sum(dxh d) r / D, which is mean(dxh xhat): the row's
 * sums taken in two passes, d^2, dxh and dxh d in the second, as the
 * generated kernel does. */
bool interp_k_layer_norm_grad(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0], *ga = &k->args[1],
			    *g = &k->args[2];
	if (x->rank < 1)
		return interp_fail(k, "operand must have rank >= 1");
	int64_t D = x->dims[x->rank - 1];
	if (interp_tensor_numel(ga) != D)
		return interp_fail(k, "scale needs %lld elements", (long long)D);
	if (interp_tensor_numel(x) != interp_tensor_numel(k->out) ||
	    interp_tensor_numel(g) != interp_tensor_numel(k->out))
		return mismatch(k, "operand", x);
	int64_t rows = D ? interp_tensor_numel(x) / D : 0;
	double eps = R(k, k->node->attr.eps);
	for (int64_t r = 0; r < rows; r++) {
		int64_t off = r * D;
		double sum = 0, sq = 0, s1 = 0, s3 = 0;
		for (int64_t j = 0; j < D; j++)
			sum = R(k, sum + R(k, interp_ld(x, off + j)));
		double mean = R(k, sum / (double)D);
		for (int64_t j = 0; j < D; j++) {
			double d = R(k, R(k, interp_ld(x, off + j)) - mean);
			double h = R(k, R(k, interp_ld(g, off + j)) *
						R(k, interp_ld(ga, j)));
			sq = R(k, sq + R(k, d * d));
			s1 = R(k, s1 + h);
			s3 = R(k, s3 + R(k, h * d));
		}
		double sd = R(k, sqrt(R(k, R(k, sq / (double)D) + eps)));
		double m1 = R(k, s1 / (double)D);
		double rs = R(k, 1 / sd);
		double m2 = R(k, R(k, s3 * rs) / (double)D);
		for (int64_t j = 0; j < D; j++) {
			double d = R(k, R(k, interp_ld(x, off + j)) - mean);
			double h = R(k, R(k, interp_ld(g, off + j)) *
						R(k, interp_ld(ga, j)));
			double t = R(k, R(k, h - m1) - R(k, R(k, d * rs) * m2));
			interp_st(k->out, off + j, R(k, t * rs));
		}
	}
	return true;
}

/* ---- dropout -------------------------------------------------------------------- */

/* The random stream of a dropout node at a training step (docs/ops.md). */
static uint64_t dropout_stream(const interp_kernel *k)
{
	return (k->opts->step << 20) ^ (uint64_t)k->node->attr.dropout.stream;
}

/* Inverted dropout: in training, element i is kept iff
 * rt_rng_uniform(seed, stream, i) >= p and then scaled by 1 / (1 - p);
 * otherwise (and in evaluation) the identity. */
bool interp_k_dropout(const interp_kernel *k)
{
	const interp_tensor *x = &k->args[0];
	double p = k->node->attr.dropout.p;
	if (interp_tensor_numel(x) != interp_tensor_numel(k->out))
		return mismatch(k, "operand", x);
	if (!(p >= 0 && p < 1))
		return interp_fail(k, "probability must be in [0, 1), not %g",
				   p);
	bool is_active = k->opts->is_training && p > 0;
	double scale = R(k, 1.0 / R(k, 1.0 - p));
	uint64_t stream = dropout_stream(k);
	int64_t n = interp_tensor_numel(x);
	for (int64_t i = 0; i < n; i++) {
		double v = R(k, interp_ld(x, i));
		if (is_active)
			v = rt_rng_uniform(k->opts->seed, stream,
					   (uint64_t)i) >= p
				    ? v * scale
				    : 0.0;
		interp_st(k->out, i, v);
	}
	return true;
}

/* ---- embedding -------------------------------------------------------------------- */

/* embedding(ids, table[V, D]): out[..., :] = table[ids[...], :]; an id
 * outside [0, V) is a run-time error. */
bool interp_k_embedding(const interp_kernel *k)
{
	const interp_tensor *ids = &k->args[0], *tab = &k->args[1];
	if (tab->rank != 2)
		return interp_fail(k, "table must have rank 2, not %d",
				   tab->rank);
	int64_t V = tab->dims[0], D = tab->dims[1], n = interp_tensor_numel(ids);
	if (n * D != interp_tensor_numel(k->out))
		return mismatch(k, "indices", ids);
	for (int64_t i = 0; i < n; i++) {
		int64_t id = interp_ldi(ids, i);
		if (id < 0 || id >= V)
			return interp_fail(k,
					   "index %lld out of range [0, %lld)",
					   (long long)id, (long long)V);
		for (int64_t j = 0; j < D; j++)
			interp_copy_elem(k->out, i * D + j, tab, id * D + j);
	}
	return true;
}

/* arange -> [n]: start + i * step at i (i32 results truncated). */
bool interp_k_arange(const interp_kernel *k)
{
	double start = k->node->attr.arange.start;
	double step = k->node->attr.arange.step;
	int64_t n = interp_tensor_numel(k->out);
	for (int64_t i = 0; i < n; i++)
		interp_st(k->out, i, start + (double)i * step);
	return true;
}

/* one_hot(ids) -> [..., n]: 1 at each id, 0 elsewhere and for ids outside
 * [0, n). */
bool interp_k_one_hot(const interp_kernel *k)
{
	const interp_tensor *ids = &k->args[0];
	int64_t n = k->out->dims[k->out->rank - 1], m = interp_tensor_numel(ids);
	if (m * n != interp_tensor_numel(k->out))
		return mismatch(k, "indices", ids);
	for (int64_t i = 0; i < m; i++) {
		int64_t id = interp_ldi(ids, i);
		for (int64_t j = 0; j < n; j++)
			interp_st(k->out, i * n + j, j == id ? 1.0 : 0.0);
	}
	return true;
}

/* embedding_grad(ids, g) -> [V, D]: row v sums the rows of g at id v, in
 * order of position; an id outside [0, V) is a run-time error. */
bool interp_k_embedding_grad(const interp_kernel *k)
{
	const interp_tensor *ids = &k->args[0], *g = &k->args[1];
	int64_t V = k->out->dims[0], D = k->out->dims[1];
	int64_t n = interp_tensor_numel(ids);
	if (n * D != interp_tensor_numel(g))
		return mismatch(k, "gradient", g);
	for (int64_t i = 0; i < V * D; i++)
		interp_st(k->out, i, 0);
	for (int64_t i = 0; i < n; i++) {
		int64_t id = interp_ldi(ids, i);
		if (id < 0 || id >= V)
			return interp_fail(k,
					   "index %lld out of range [0, %lld)",
					   (long long)id, (long long)V);
		for (int64_t j = 0; j < D; j++) {
			double s = R(k, interp_ld(k->out, id * D + j) +
						R(k, interp_ld(g, i * D + j)));
			interp_st(k->out, id * D + j, s);
		}
	}
	return true;
}

/* ---- losses ----------------------------------------------------------------------- */

/* mean((pred - target)^2) over every element; NaN when there are none. */
bool interp_k_mse_loss(const interp_kernel *k)
{
	const interp_tensor *p = &k->args[0], *t = &k->args[1];
	int64_t n = interp_tensor_numel(p);
	if (interp_tensor_numel(t) != n || interp_tensor_numel(k->out) != 1)
		return mismatch(k, "target", t);
	double sum = 0;
	for (int64_t i = 0; i < n; i++) {
		double d = R(k, R(k, interp_ld(p, i)) - R(k, interp_ld(t, i)));
		sum = R(k, sum + R(k, d * d));
	}
	interp_st(k->out, 0, n ? sum / (double)n : NAN);
	return true;
}

/* The label of row i, or a run-time error outside [0, V). */
static bool row_label(const interp_kernel *k, const interp_tensor *lb,
		      int64_t i, int64_t V, int64_t *y)
{
	*y = interp_ldi(lb, i);
	if (*y >= 0 && *y < V)
		return true;
	return interp_fail(k, "label %lld out of range [0, %lld)",
			   (long long)*y, (long long)V);
}

/* The largest of row i's V logits. */
static double row_max(const interp_kernel *k, const interp_tensor *lg,
		      int64_t i, int64_t V)
{
	double mx = -INFINITY;
	for (int64_t j = 0; j < V; j++) {
		double v = R(k, interp_ld(lg, i * V + j));
		if (v > mx)
			mx = v;
	}
	return mx;
}

/* -log_softmax(row i of the logits)[y]: the max, the exps summed left to
 * right, then (x_y - max) - log(sum). */
static double ce_loss_row(const interp_kernel *k, const interp_tensor *lg,
			  int64_t i, int64_t V, int64_t y)
{
	double mx = row_max(k, lg, i, V), sum = 0;
	for (int64_t j = 0; j < V; j++)
		sum = R(k, sum + R(k, exp(R(k, R(k, interp_ld(lg, i * V + j)) -
						       mx))));
	double ls = R(k, R(k, R(k, interp_ld(lg, i * V + y)) - mx) -
				 R(k, log(sum)));
	return -ls;
}

/* Row i of cross_entropy_grad into the output at i * V: softmax_row's
 * very arithmetic, minus 1 at the label, times gi. */
static void ce_grad_row(const interp_kernel *k, const interp_tensor *lg,
			int64_t i, int64_t V, int64_t y, double gi)
{
	softmax_row(k, lg, i * V, V, V, 0, false);
	for (int64_t j = 0; j < V; j++) {
		double d = R(k, interp_ld(k->out, i * V + j) -
					(j == y ? 1.0 : 0.0));
		interp_st(k->out, i * V + j, R(k, d * gi));
	}
}

/* Checks the shapes of cross_entropy's family: n rows of V logits, n
 * labels, n gradients (when has_g), an output of one element per row
 * (out_rows 0) or out_rows rows of V. */
static bool ce_shapes(const interp_kernel *k, bool has_g, int64_t out_rows,
		      int64_t *n, int64_t *V)
{
	const interp_tensor *lg = &k->args[0];
	if (lg->rank < 1)
		return interp_fail(k, "logits must have rank >= 1");
	*V = lg->dims[lg->rank - 1];
	*n = interp_tensor_numel(&k->args[1]);
	if (*n * *V != interp_tensor_numel(lg) ||
	    *n * (out_rows ? out_rows * *V : 1) != interp_tensor_numel(k->out))
		return mismatch(k, "logits", lg);
	if (has_g && interp_tensor_numel(&k->args[2]) != *n)
		return mismatch(k, "gradient", &k->args[2]);
	return true;
}

/* -log_softmax(logits)[label] at each position. */
bool interp_k_cross_entropy(const interp_kernel *k)
{
	int64_t n, V, y;
	if (!ce_shapes(k, false, 0, &n, &V))
		return false;
	for (int64_t i = 0; i < n; i++) {
		if (!row_label(k, &k->args[1], i, V, &y))
			return false;
		interp_st(k->out, i, ce_loss_row(k, &k->args[0], i, V, y));
	}
	return true;
}

/* cross_entropy_grad(logits, labels, g): each row is softmax(logits row)
 * (softmax_row's very arithmetic), minus 1 at the label, times the row's
 * g; a label outside [0, V) is a run-time error, as in cross_entropy. */
bool interp_k_cross_entropy_grad(const interp_kernel *k)
{
	int64_t n, V, y;
	if (!ce_shapes(k, true, 1, &n, &V))
		return false;
	for (int64_t i = 0; i < n; i++) {
		if (!row_label(k, &k->args[1], i, V, &y))
			return false;
		ce_grad_row(k, &k->args[0], i, V, y,
			    R(k, interp_ld(&k->args[2], i)));
	}
	return true;
}

/* cross_entropy_with_grad(logits, labels, g) -> [2, ..., V]: [0] exactly
 * cross_entropy_grad's rows, [1] per row cross_entropy's value at column
 * 0 and exp(x - max) at columns 1..V-1, each as those kernels compute it. */
bool interp_k_cross_entropy_with_grad(const interp_kernel *k)
{
	int64_t n, V, y;
	if (!ce_shapes(k, true, 2, &n, &V))
		return false;
	const interp_tensor *lg = &k->args[0];
	for (int64_t i = 0; i < n; i++) {
		if (!row_label(k, &k->args[1], i, V, &y))
			return false;
		ce_grad_row(k, lg, i, V, y, R(k, interp_ld(&k->args[2], i)));
		double mx = row_max(k, lg, i, V);
		int64_t at = (n + i) * V;
		for (int64_t j = 1; j < V; j++)
			interp_st(k->out, at + j,
				  R(k, exp(R(k, R(k, interp_ld(lg, i * V + j)) -
							mx))));
		interp_st(k->out, at, ce_loss_row(k, lg, i, V, y));
	}
	return true;
}
