/*
 * rowlive.c - the row-liveness analysis (rowlive.h): a sweep forward for
 * the rows that may be nonzero, then one from the last node to the first
 * (operands come before their users), each node's expression complete
 * when its turn comes, passing to each operand the rows that use reads,
 * joined (max) over its uses. The expressions are interned in one array,
 * so the join of equal ones stays one, and a join merges the terms that
 * bound one expression (the lowest step, the widest ANY, the union of
 * two sets of queries' keys), so that they stay short.
 */
#include "rowlive.h"

#include <string.h>

static uint32_t intern(ir_ctx *ctx, pass_rowlive *rl, pass_rowlive_expr x)
{
	for (uint32_t i = 0; i < rl->n_exprs; i++) {
		const pass_rowlive_expr *y = &rl->exprs[i];
		if (y->op == x.op && y->valid == x.valid &&
		    y->is_per_query == x.is_per_query && y->a == x.a &&
		    y->b == x.b && y->node == x.node && y->k == x.k)
			return i;
	}
	if (!ir_grow(ctx, (void **)&rl->exprs, &rl->exprs_cap, rl->n_exprs + 1,
		     sizeof *rl->exprs))
		return PASS_ROWLIVE_IS_ALL; /* ctx->is_oom says so */
	rl->exprs[rl->n_exprs] = x;
	return rl->n_exprs++;
}

static pass_rowlive_expr expr(pass_rowlive_op op, ir_id valid, uint32_t a,
			      uint32_t b)
{
	return (pass_rowlive_expr){op, valid, false, a, b, IR_NONE, 0};
}

/* Adds to terms (*n of them, at most cap) the terms of the max that e
 * is (e itself if it is no max), each once; false if there are more
 * than cap. */
static bool max_terms(const pass_rowlive *rl, uint32_t e, uint32_t *terms,
		      uint32_t *n, uint32_t cap)
{
	if (rl->exprs[e].op == PASS_ROWLIVE_MAX)
		return max_terms(rl, rl->exprs[e].a, terms, n, cap) &&
		       max_terms(rl, rl->exprs[e].b, terms, n, cap);
	for (uint32_t i = 0; i < *n; i++)
		if (terms[i] == e)
			return true;
	if (*n == cap)
		return false;
	terms[(*n)++] = e;
	return true;
}

#define MAX_TERMS 16

static uint32_t join(ir_ctx *ctx, pass_rowlive *rl, uint32_t a, uint32_t b);

/* Whether expression m is min(a, ..) or min(.., a): never above a. */
static bool is_min_of(const pass_rowlive *rl, uint32_t m, uint32_t a)
{
	const pass_rowlive_expr *x = &rl->exprs[m];
	return x->op == PASS_ROWLIVE_MIN && (x->a == a || x->b == a);
}

/* Whether terms x and y are one kind of bound on the same expression,
 * so that their max is one term: STEP(i, a) and STEP(j, a) (the lower
 * step), ANY(i, a) and ANY(j, a) (the higher k), min(a, CONST(i)) and
 * min(a, CONST(j)) (the higher constant); a and min(a, ..) (a), and
 * STEP(i, a) and STEP(i, min(a, ..)) of one node (the first: a step
 * is live where i < a's length, so where i is below the min, it is
 * below a's). The merged term in *out. */
static bool merge_two(ir_ctx *ctx, pass_rowlive *rl, uint32_t x, uint32_t y,
		      uint32_t *out)
{
	pass_rowlive_expr ex = rl->exprs[x], ey = rl->exprs[y];
	if (is_min_of(rl, y, x) || is_min_of(rl, x, y)) {
		*out = is_min_of(rl, y, x) ? x : y;
		return true;
	}
	if (ex.op == PASS_ROWLIVE_STEP && ey.op == PASS_ROWLIVE_STEP &&
	    ex.node == ey.node && ex.k == ey.k &&
	    (is_min_of(rl, ey.a, ex.a) || is_min_of(rl, ex.a, ey.a))) {
		*out = is_min_of(rl, ey.a, ex.a) ? x : y;
		return true;
	}
	if (ex.op == PASS_ROWLIVE_CONST && ey.op == PASS_ROWLIVE_CONST) {
		*out = ex.k > ey.k ? x : y;
		return true;
	}
	/* The keys of two sets of queries: those of their union. */
	if (ex.op == PASS_ROWLIVE_KEYS && ey.op == PASS_ROWLIVE_KEYS &&
	    ex.valid == ey.valid && ex.is_per_query == ey.is_per_query &&
	    ex.node == ey.node) {
		ex.a = join(ctx, rl, ex.a, ey.a);
		*out = intern(ctx, rl, ex);
		return true;
	}
	if (ex.op != ey.op || ex.a != ey.a || ex.node != ey.node)
		return false;
	if (ex.op == PASS_ROWLIVE_STEP || ex.op == PASS_ROWLIVE_ANY) {
		bool lower = ex.op == PASS_ROWLIVE_STEP;
		ex.k = (ex.k < ey.k) == lower ? ex.k : ey.k;
		*out = intern(ctx, rl, ex);
		return true;
	}
	if (ex.op != PASS_ROWLIVE_MIN ||
	    rl->exprs[ex.b].op != PASS_ROWLIVE_CONST ||
	    rl->exprs[ey.b].op != PASS_ROWLIVE_CONST)
		return false;
	*out = rl->exprs[ex.b].k > rl->exprs[ey.b].k ? x : y;
	return true;
}

/* terms (n of them) with each mergeable pair merged; the new count. */
static uint32_t merge_terms(ir_ctx *ctx, pass_rowlive *rl, uint32_t *terms,
			    uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		for (uint32_t j = i + 1; j < n;) {
			uint32_t m;
			if (!merge_two(ctx, rl, terms[i], terms[j], &m)) {
				j++;
				continue;
			}
			terms[i] = m;
			terms[j] = terms[--n];
		}
	return n;
}

/* max(a, b) as the max of their terms, each once, in index order. */
static uint32_t join(ir_ctx *ctx, pass_rowlive *rl, uint32_t a, uint32_t b)
{
	if (a == b || b == PASS_ROWLIVE_IS_NONE || a == PASS_ROWLIVE_IS_ALL)
		return a;
	if (a == PASS_ROWLIVE_IS_NONE || b == PASS_ROWLIVE_IS_ALL)
		return b;
	uint32_t terms[MAX_TERMS], n = 0;
	if (!max_terms(rl, a, terms, &n, MAX_TERMS) ||
	    !max_terms(rl, b, terms, &n, MAX_TERMS))
		return PASS_ROWLIVE_IS_ALL; /* too many to be worth it */
	n = merge_terms(ctx, rl, terms, n);
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && terms[j - 1] > terms[j]; j--) {
			uint32_t t = terms[j];
			terms[j] = terms[j - 1];
			terms[j - 1] = t;
		}
	uint32_t e = terms[0];
	for (uint32_t i = 1; i < n; i++)
		e = intern(ctx, rl,
			   expr(PASS_ROWLIVE_MAX, IR_NONE, e, terms[i]));
	return e;
}

static uint32_t meet(ir_ctx *ctx, pass_rowlive *rl, uint32_t a, uint32_t b)
{
	if (a == b || a == PASS_ROWLIVE_IS_NONE || b == PASS_ROWLIVE_IS_ALL)
		return a;
	if (b == PASS_ROWLIVE_IS_NONE || a == PASS_ROWLIVE_IS_ALL)
		return b;
	if (a > b) {
		uint32_t t = a;
		a = b;
		b = t;
	}
	return intern(ctx, rl, expr(PASS_ROWLIVE_MIN, IR_NONE, a, b));
}

static const ir_type *type_of(const ir_func *f, ir_id x)
{
	return &f->g.nodes[x].type;
}

/* Whether x and y have rows and the same ones: rank >= 2 both, equal
 * dims[0] and dims[1]. */
static bool same_rows(const ir_func *f, ir_id x, ir_id y);

/* Whether x and y have the same axis 0 (rank >= 2 both). */
static bool same_batch(const ir_func *f, ir_id x, ir_id y)
{
	const ir_type *a = &f->g.nodes[x].type, *b = &f->g.nodes[y].type;
	return a->rank >= 2 && b->rank >= 2 && ir_dim_eq(a->dims[0], b->dims[0]);
}

static bool same_rows(const ir_func *f, ir_id x, ir_id y)
{
	const ir_type *a = type_of(f, x), *b = type_of(f, y);
	return a->rank >= 2 && b->rank >= 2 &&
	       ir_dim_eq(a->dims[0], b->dims[0]) &&
	       ir_dim_eq(a->dims[1], b->dims[1]);
}

/* Whether x is an i32 vector of valid lengths for the rows of y: i32[N]
 * with N y's dims[0]. */
static bool is_valid_for(const ir_func *f, ir_id x, ir_id y)
{
	const ir_type *v = type_of(f, x);
	return v->dtype == IR_I32 && v->rank == 1 &&
	       ir_dim_eq(v->dims[0], type_of(f, y)->dims[0]);
}

/* Whether x holds 0, 1, ..., T - 1 along its last axis and has T
 * elements in all (a constant of shape [T] or [1, T], or an arange). */
static bool is_steps(const ir_module *m, const ir_func *f, ir_id x, int64_t T)
{
	const ir_node *n = &f->g.nodes[x];
	if (ir_type_numel_static(&n->type) != T || n->type.rank < 1 ||
	    n->type.dims[n->type.rank - 1].coef != T)
		return false;
	if (n->op == IR_OP_ARANGE)
		return n->attr.arange.start == 0 && n->attr.arange.step == 1;
	if (n->op != IR_OP_CONST)
		return false;
	const ir_const *c = &m->consts[n->attr.const_index];
	for (int64_t t = 0; t < T; t++) {
		double v = c->type.dtype == IR_I32   ? ((int32_t *)c->data)[t]
			   : c->type.dtype == IR_F32 ? ((float *)c->data)[t]
						     : ((double *)c->data)[t];
		if (v != (double)t)
			return false;
	}
	return true;
}

/* The valid lengths v when x is the mask t < v[b] of the rows of y (1
 * below, 0 from v[b] on, along y's dims[1]), as the frontend writes
 * d2l's sequence_mask: cast(lt(steps, reshape(v, [N, 1]))), or lt
 * itself, of y's rows or broadcast along their trailing axes; else
 * IR_NONE. */
static ir_id mask_valid(const ir_module *m, const ir_func *f, ir_id x, ir_id y)
{
	const ir_graph *g = &f->g;
	if (!same_rows(f, x, y))
		return IR_NONE;
	if (g->nodes[x].op == IR_OP_CAST)
		x = ir_arg(g, x, 0);
	const ir_node *lt = &g->nodes[x];
	const ir_type *yt = type_of(f, y);
	if (lt->op != IR_OP_LT || !ir_dim_is_static(yt->dims[1]))
		return IR_NONE;
	for (int d = 2; d < lt->type.rank; d++)
		if (lt->type.dims[d].coef != 1)
			return IR_NONE;
	ir_id steps = ir_arg(g, x, 0), col = ir_arg(g, x, 1);
	const ir_type *st = type_of(f, steps), *ct = type_of(f, col);
	/* steps broadcast along axis 0 only: [T] or [1, T] (rank 2 mask). */
	if (lt->type.rank != 2 || st->rank > 2 ||
	    (st->rank == 2 && st->dims[0].coef != 1) ||
	    !is_steps(m, f, steps, yt->dims[1].coef))
		return IR_NONE;
	if (g->nodes[col].op != IR_OP_RESHAPE || ct->rank != 2 ||
	    !ir_dim_eq(ct->dims[0], yt->dims[0]) || ct->dims[1].coef != 1 ||
	    ct->dims[1].sym >= 0)
		return IR_NONE;
	ir_id v = ir_arg(g, col, 0);
	return is_valid_for(f, v, y) ? v : IR_NONE;
}

/* Whether per-query valid lengths v (N, Q) are the causal mask's,
 * v[b, i] = i + 1: a constant row 1..Q broadcast over N. */
static bool is_causal(const ir_module *m, const ir_func *f, ir_id v, int64_t Q)
{
	const ir_node *n = &f->g.nodes[v];
	if (n->op == IR_OP_BROADCAST)
		n = &f->g.nodes[ir_arg(&f->g, v, 0)];
	if (n->op != IR_OP_CONST || ir_type_numel_static(&n->type) != Q)
		return false;
	const ir_const *c = &m->consts[n->attr.const_index];
	if (c->type.dtype != IR_I32)
		return false;
	for (int64_t i = 0; i < Q; i++)
		if (((int32_t *)c->data)[i] != i + 1)
			return false;
	return true;
}

/* KEYS(v, e) simplified: of a max, the max of each term's keys (the
 * union of the queries' prefixes reads the union of their keys); of
 * causal lengths over as many keys as queries, the queries' own rows
 * (query i reads keys 0..i); with lengths per batch element, only
 * whether any query is live counts, and a KEYS of queries is live
 * exactly where its own queries are (it reads at least one key). */
static uint32_t keys(ir_ctx *ctx, const ir_module *m, pass_rowlive *rl,
		     const ir_func *f, pass_rowlive_expr x, ir_id k, uint32_t e)
{
	const pass_rowlive_expr *y = &rl->exprs[e];
	if (e == PASS_ROWLIVE_IS_NONE)
		return e;
	if (y->op == PASS_ROWLIVE_MAX) {
		uint32_t a = y->a, b = y->b;
		return join(ctx, rl, keys(ctx, m, rl, f, x, k, a),
			    keys(ctx, m, rl, f, x, k, b));
	}
	if (x.is_per_query &&
	    ir_dim_eq(type_of(f, x.node)->dims[1], type_of(f, k)->dims[1]) &&
	    ir_dim_is_static(type_of(f, x.node)->dims[1]) &&
	    is_causal(m, f, x.valid, type_of(f, x.node)->dims[1].coef))
		return e;
	if (!x.is_per_query && y->op == PASS_ROWLIVE_KEYS)
		return keys(ctx, m, rl, f, x, k, y->a);
	if (!x.is_per_query)
		x.node = IR_NONE; /* only whether a query is live counts */
	x.a = e;
	return intern(ctx, rl, x);
}

static uint32_t const_len(ir_ctx *ctx, pass_rowlive *rl, int64_t k)
{
	pass_rowlive_expr x = expr(PASS_ROWLIVE_CONST, IR_NONE, 0, 0);
	x.k = k;
	return intern(ctx, rl, x);
}

/* ANY(k, e): min(k, T) rows of b where e has any. */
static uint32_t any(ir_ctx *ctx, pass_rowlive *rl, int64_t k, uint32_t e)
{
	const pass_rowlive_expr *y = &rl->exprs[e];
	if (e == PASS_ROWLIVE_IS_NONE)
		return e;
	if (e == PASS_ROWLIVE_IS_ALL)
		return k == INT64_MAX ? e : const_len(ctx, rl, k);
	if (y->op == PASS_ROWLIVE_MAX) {
		uint32_t a = y->a, b = y->b;
		return join(ctx, rl, any(ctx, rl, k, a), any(ctx, rl, k, b));
	}
	if (y->op == PASS_ROWLIVE_ANY)
		return any(ctx, rl, k < y->k ? k : y->k, y->a);
	if (y->op == PASS_ROWLIVE_STEP && k == INT64_MAX)
		return e;
	pass_rowlive_expr x = expr(PASS_ROWLIVE_ANY, IR_NONE, e, 0);
	x.k = k;
	return intern(ctx, rl, x);
}

/* STEP(k, e) over node's steps: all rows where step k of node is. */
static uint32_t step(ir_ctx *ctx, const ir_func *f, pass_rowlive *rl,
		     ir_id node, int64_t k, uint32_t e)
{
	const pass_rowlive_expr *y = &rl->exprs[e];
	/* One node for each count of steps, so that equal steps merge. */
	for (uint32_t i = 0; i < rl->n_exprs; i++)
		if (rl->exprs[i].op == PASS_ROWLIVE_STEP &&
		    ir_dim_eq(f->g.nodes[rl->exprs[i].node].type.dims[1],
			      f->g.nodes[node].type.dims[1])) {
			node = rl->exprs[i].node;
			break;
		}
	if (e == PASS_ROWLIVE_IS_NONE || e == PASS_ROWLIVE_IS_ALL)
		return e; /* k is one of node's steps */
	if (y->op == PASS_ROWLIVE_MAX) {
		uint32_t a = y->a, b = y->b;
		return join(ctx, rl, step(ctx, f, rl, node, k, a),
			    step(ctx, f, rl, node, k, b));
	}
	pass_rowlive_expr x = expr(PASS_ROWLIVE_STEP, IR_NONE, e, 0);
	x.node = node;
	x.k = k;
	return intern(ctx, rl, x);
}

/* Whether a reduction's axes leave axes 0 and 1 where they are. */
static bool reduce_keeps_rows(const ir_node *n)
{
	return (n->attr.reduce.axes & 3u) == 0;
}

/* Whether layout op n keeps its operand's rows as its own. */
static bool layout_keeps_rows(const ir_func *f, ir_id n, ir_id x)
{
	const ir_node *nd = &f->g.nodes[n];
	if (!same_rows(f, x, n))
		return false;
	switch (nd->op) {
	case IR_OP_RESHAPE:
		return true;
	case IR_OP_PERMUTE:
		return nd->attr.permute.perm[0] == 0 &&
		       nd->attr.permute.perm[1] == 1;
	case IR_OP_SLICE:
		return nd->attr.slice.axis >= 2;
	case IR_OP_CONCAT:
		return nd->attr.axis >= 2;
	default:
		return false;
	}
}

/* ---- the state of one analysis ----------------------------------------- */

#define MAX_PARTS 4 /* parts of a packed gradient (the attentions') */

typedef struct rl_state {
	ir_ctx *ctx;
	const ir_module *m;
	const ir_func *f;
	pass_rowlive *rl;
	/* Per node: a view of one part of a packed result (its rows those
	 * of the part): the packed node and which part; IR_NONE if none. */
	ir_id *part_root;
	uint8_t *part;
	/* Per packed node: the rows of each part its views read. */
	uint32_t *part_demand; /* MAX_PARTS per node */
} rl_state;

/* A symbolic count coef · value of sym (sym < 0: coef), or invalid. */
typedef struct rl_count {
	int64_t coef;
	int32_t sym;
	bool is_valid;
} rl_count;

static rl_count count_mul(rl_count a, ir_dim d)
{
	if (!a.is_valid || (a.sym >= 0 && d.sym >= 0))
		return (rl_count){0, -1, false};
	return (rl_count){a.coef * d.coef, a.sym >= 0 ? a.sym : d.sym, true};
}

static rl_count numel_of(const ir_type *t, int from)
{
	rl_count c = {1, -1, true};
	for (int d = from; d < t->rank; d++)
		c = count_mul(c, t->dims[d]);
	return c;
}

static bool count_eq(rl_count a, rl_count b)
{
	return a.is_valid && b.is_valid && a.coef == b.coef &&
	       (a.coef == 0 || a.sym == b.sym);
}

/* Of an attention's gradient node n (its result packed, rank 1): how
 * many parts it packs, the first that many operands' gradients (the
 * additive attention's third, wv's, one per batch element): 3 for
 * fused_attention_grad (q, k, v), 4 for the additive (qp, kp, wv, v);
 * else 0. Its valid lengths follow them, if it has them, and the
 * output's gradient comes last. */
static uint32_t attn_grad_parts(const ir_func *f, ir_id n)
{
	const ir_node *nd = &f->g.nodes[n];
	if (nd->type.rank != 1)
		return 0;
	return nd->op == IR_OP_FUSED_ATTENTION_GRAD            ? 3
	       : nd->op == IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD ? 4
							       : 0;
}

/* Whether operand s of attention gradient n (of n_parts parts) is a
 * keys' or values' operand. */
static bool is_key_operand(uint32_t n_parts, uint32_t s)
{
	return n_parts == 3 ? s == 1 || s == 2 : s == 1 || s == 3;
}

/* The packed parts of node n: how many, and each one's type (the
 * operand whose gradient it is). 0 for nodes that pack nothing. */
static uint32_t packed_parts(const ir_func *f, ir_id n, ir_type *types)
{
	const ir_node *nd = &f->g.nodes[n];
	uint32_t np = attn_grad_parts(f, n);
	if (np) {
		for (uint32_t p = 0; types && p < np; p++)
			types[p] = *type_of(f, ir_arg(&f->g, n, p));
		if (types && np == 4) { /* wv's part: (N, H) */
			types[2].rank = 2;
			types[2].dims[1] = types[2].dims[0];
			types[2].dims[0] = types[0].dims[0];
		}
		return np;
	}
	if (nd->op == IR_OP_CROSS_ENTROPY_WITH_GRAD && nd->type.rank >= 3 &&
	    nd->type.dims[0].coef == 2 && nd->type.dims[0].sym < 0)
		return 2; /* rows of [p] are those of the logits */
	return 0;
}

/* cross_entropy_with_grad's part p seen by view n: a reshape of slices
 * of the packed node along axis 0 ([p, p + 1)) and its last axis, the
 * rows (axes 1, 2) whole; else -1. */
static int ce_part(const ir_func *f, ir_id n, ir_id root)
{
	const ir_graph *g = &f->g;
	const ir_type *rt = type_of(f, root);
	if (g->nodes[n].op != IR_OP_RESHAPE ||
	    !ir_dim_eq(type_of(f, n)->dims[0], rt->dims[1]) ||
	    type_of(f, n)->rank < 2 ||
	    !ir_dim_eq(type_of(f, n)->dims[1], rt->dims[2]))
		return -1;
	int part = -1;
	for (ir_id x = ir_arg(g, n, 0); x != root; x = ir_arg(g, x, 0)) {
		const ir_node *sl = &g->nodes[x];
		if (sl->op != IR_OP_SLICE || sl->type.rank != rt->rank ||
		    sl->attr.slice.step != 1)
			return -1;
		if (sl->attr.slice.axis == 0) {
			if (sl->attr.slice.end != sl->attr.slice.start + 1)
				return -1;
			part = (int)sl->attr.slice.start;
		} else if (sl->attr.slice.axis != rt->rank - 1) {
			return -1;
		}
	}
	return part;
}

/* Whether t is x with axes 0 and 1 merged into one, x's rows its
 * (rows b·T + t), x of rank 3 or more with neither axis 1 unless
 * is_unit_ok (a step of a batch: row b). */
static bool is_merged(const ir_type *t, const ir_type *x, bool is_unit_ok)
{
	if (x->rank < 3 || t->rank != x->rank - 1 ||
	    (!is_unit_ok && (ir_dim_eq(x->dims[0], ir_dim_static(1)) ||
			     ir_dim_eq(x->dims[1], ir_dim_static(1)))))
		return false;
	for (int d = 1; d < t->rank; d++)
		if (!ir_dim_eq(t->dims[d], x->dims[d + 1]))
			return false;
	rl_count rows = count_mul(count_mul((rl_count){1, -1, true}, x->dims[0]),
				  x->dims[1]);
	return count_eq(rows, count_mul((rl_count){1, -1, true}, t->dims[0]));
}

/* fused_attention_grad's part p seen by view n (of the part's shape,
 * or with its axes 0 and 1 merged): a reshape, to the
 * part's shape, of a slice along axis 0 of a reshape of the packed
 * node that covers exactly part p's elements; else -1. */
static int flat_part(const ir_func *f, ir_id n, ir_id root,
		     const ir_type *types, uint32_t n_parts)
{
	const ir_graph *g = &f->g;
	if (g->nodes[n].op != IR_OP_RESHAPE)
		return -1;
	ir_id sl = ir_arg(g, n, 0);
	const ir_node *s = &g->nodes[sl];
	if (s->op != IR_OP_SLICE || s->attr.slice.axis != 0 ||
	    s->attr.slice.step != 1 ||
	    g->nodes[ir_arg(g, sl, 0)].op != IR_OP_RESHAPE ||
	    ir_arg(g, ir_arg(g, sl, 0), 0) != root)
		return -1;
	rl_count row = numel_of(type_of(f, ir_arg(g, sl, 0)), 1);
	rl_count at = {row.coef * s->attr.slice.start, row.sym, row.is_valid};
	rl_count off = {0, -1, true};
	for (uint32_t p = 0; p < n_parts; p++) {
		rl_count len = numel_of(&types[p], 0);
		if ((count_eq(at, off) || (at.coef == 0 && off.coef == 0)) &&
		    count_eq(numel_of(type_of(f, n), 0), len) &&
		    (ir_shape_eq(type_of(f, n), &types[p]) ||
		     is_merged(type_of(f, n), &types[p], true)))
			return (int)p;
		if (!len.is_valid || (off.coef && len.sym != off.sym))
			return -1;
		off = (rl_count){off.coef + len.coef, len.sym, true};
	}
	return -1;
}

/* Marks node n as a view of a part of a packed node, when it is one. */
static void find_part(rl_state *st, ir_id n)
{
	const ir_graph *g = &st->f->g;
	st->part_root[n] = IR_NONE;
	if (g->nodes[n].op != IR_OP_RESHAPE)
		return;
	/* The packed node: down the chain of slices and reshapes. */
	ir_id x = ir_arg(g, n, 0);
	while (g->nodes[x].op == IR_OP_SLICE || g->nodes[x].op == IR_OP_RESHAPE)
		x = ir_arg(g, x, 0);
	ir_type types[MAX_PARTS];
	uint32_t n_parts = packed_parts(st->f, x, types);
	if (!n_parts)
		return;
	int p = g->nodes[x].op == IR_OP_CROSS_ENTROPY_WITH_GRAD
			? ce_part(st->f, n, x)
			: flat_part(st->f, n, x, types, n_parts);
	if (p < 0 || (uint32_t)p >= n_parts)
		return;
	st->part_root[n] = x;
	st->part[n] = (uint8_t)p;
	/* A merged view's rows: those of the operand the part belongs to. */
	if (g->nodes[x].op != IR_OP_CROSS_ENTROPY_WITH_GRAD &&
	    !ir_shape_eq(type_of(st->f, n), &types[p]))
		st->rl->row_node[n] = ir_arg(g, x, (uint32_t)p);
}

/* ---- rows that may be nonzero (a sweep forward) ------------------------ */

/* Whether constant node x is all zeros. */
static bool is_zero_const(const rl_state *st, ir_id x)
{
	const ir_node *n = &st->f->g.nodes[x];
	if (n->op == IR_OP_BROADCAST)
		return is_zero_const(st, ir_arg(&st->f->g, x, 0));
	if (n->op != IR_OP_CONST)
		return false;
	const ir_const *c = &st->m->consts[n->attr.const_index];
	int64_t k = ir_type_numel_static(&c->type);
	for (int64_t i = 0; i < k; i++) {
		double v = c->type.dtype == IR_I32   ? ((int32_t *)c->data)[i]
			   : c->type.dtype == IR_F32 ? ((float *)c->data)[i]
						     : ((double *)c->data)[i];
		if (v != 0)
			return false;
	}
	return true;
}

/* What operand x's nonzero rows say of node n's rows: x's own if they
 * are n's rows, else none (x all zero) or all. */
static uint32_t nz_arg(const rl_state *st, ir_id n, ir_id x)
{
	uint32_t z = st->rl->nz_of_node[x];
	if (z == PASS_ROWLIVE_IS_NONE)
		return z;
	if (st->rl->row_node[x] != x || !same_rows(st->f, x, n) ||
	    type_of(st->f, x)->rank != type_of(st->f, n)->rank)
		return PASS_ROWLIVE_IS_ALL;
	return z;
}

static uint32_t keys_of_q(rl_state *st, ir_id q, ir_id k, ir_id v, uint32_t e);

/* Operand x's nonzero rows as rows of y (whose rows x's must be, of
 * whatever rank), or all (none if x is all zero). */
static uint32_t nz_rows(const rl_state *st, ir_id x, ir_id y)
{
	uint32_t z = st->rl->nz_of_node[x];
	if (z == PASS_ROWLIVE_IS_NONE)
		return z;
	if (st->rl->row_node[x] != x || st->rl->row_node[y] != y ||
	    !same_rows(st->f, x, y))
		return PASS_ROWLIVE_IS_ALL;
	return z;
}

/* A concatenation's nonzero rows: its operands' (along the rows'
 * elements), or at rank 2 the rows (b, j) of b where an operand's may
 * be nonzero. */
static uint32_t nz_concat(rl_state *st, ir_id n)
{
	const ir_graph *g = &st->f->g;
	const ir_node *nd = &g->nodes[n];
	bool is_rank2 = nd->type.rank == 2 && nd->attr.axis == 1;
	if (!is_rank2 && nd->attr.axis < 2)
		return PASS_ROWLIVE_IS_ALL;
	uint32_t z = PASS_ROWLIVE_IS_NONE;
	for (uint32_t i = 0; i < nd->n_args; i++) {
		ir_id x = ir_arg(g, n, i);
		if (st->rl->row_node[x] != x || !same_batch(st->f, x, n))
			return PASS_ROWLIVE_IS_ALL;
		z = join(st->ctx, st->rl, z,
			 is_rank2 ? any(st->ctx, st->rl, INT64_MAX,
					st->rl->nz_of_node[x])
				  : nz_arg(st, n, x));
	}
	return z;
}

/* The rows of node n that may hold a value other than 0 when every
 * value the graph reads is finite. */
static uint32_t nonzero_rows(rl_state *st, ir_id n)
{
	const ir_func *f = st->f;
	const ir_graph *g = &f->g;
	const ir_node *nd = &g->nodes[n];
	ir_ctx *ctx = st->ctx;
	pass_rowlive *rl = st->rl;
	if (is_zero_const(st, n))
		return PASS_ROWLIVE_IS_NONE;
	ir_id v = mask_valid(st->m, f, n, n);
	if (v != IR_NONE)
		return intern(ctx, rl, expr(PASS_ROWLIVE_PREFIX, v, 0, 0));
	if (st->part_root[n] != IR_NONE) {
		ir_id r = st->part_root[n];
		const ir_node *rn = &g->nodes[r];
		if (rn->op == IR_OP_CROSS_ENTROPY_WITH_GRAD)
			return st->part[n] == 0 ? nz_rows(st, ir_arg(g, r, 2), n)
						: PASS_ROWLIVE_IS_ALL;
		ir_id q = ir_arg(g, r, 0), dO = ir_arg(g, r, rn->n_args - 1);
		uint32_t z = rl->nz_of_node[dO];
		if (rl->row_node[dO] != dO || !same_rows(f, dO, q))
			return PASS_ROWLIVE_IS_ALL;
		uint32_t np = attn_grad_parts(f, r), p = st->part[n];
		if (p == 0)
			return z;
		if (is_key_operand(np, p))
			return keys_of_q(st, q, ir_arg(g, r, p),
					 rn->n_args == np + 2 ? ir_arg(g, r, np)
							      : IR_NONE,
					 z);
		return any(ctx, rl, INT64_MAX, z); /* wv's, per batch element */
	}
	if (rl->row_node[n] != n) /* a reshape that merges the rows */
		return rl->nz_of_node[ir_arg(g, n, 0)];
	if (nd->type.rank < 2)
		return PASS_ROWLIVE_IS_ALL;
	switch (nd->op) {
	case IR_OP_NEG:
	case IR_OP_RELU:
	case IR_OP_ABS:
	case IR_OP_CAST:
	case IR_OP_DROPOUT:
		return nz_arg(st, n, ir_arg(g, n, 0));
	case IR_OP_ADD:
	case IR_OP_SUB:
		return join(ctx, rl, nz_arg(st, n, ir_arg(g, n, 0)),
			    nz_arg(st, n, ir_arg(g, n, 1)));
	case IR_OP_SELECT:
		return join(ctx, rl, nz_arg(st, n, ir_arg(g, n, 1)),
			    nz_arg(st, n, ir_arg(g, n, 2)));
	case IR_OP_MUL:
		return meet(ctx, rl, nz_arg(st, n, ir_arg(g, n, 0)),
			    nz_arg(st, n, ir_arg(g, n, 1)));
	case IR_OP_MATMUL:
		if (!nd->attr.matmul.ta && nd->type.rank == 2 &&
		    same_batch(f, ir_arg(g, n, 0), n) &&
		    rl->row_node[ir_arg(g, n, 0)] == ir_arg(g, n, 0))
			return any(ctx, rl, INT64_MAX,
				   rl->nz_of_node[ir_arg(g, n, 0)]);
		if (nd->attr.matmul.ta || nd->type.rank < 3)
			return PASS_ROWLIVE_IS_ALL;
		return nz_arg(st, n, ir_arg(g, n, 0));
	case IR_OP_LAYER_NORM_GRAD:
		return nz_arg(st, n, ir_arg(g, n, 2));
	case IR_OP_CONCAT:
		return nz_concat(st, n);
	case IR_OP_SUM:
	case IR_OP_MEAN:
		return reduce_keeps_rows(nd) ? nz_arg(st, n, ir_arg(g, n, 0))
					     : PASS_ROWLIVE_IS_ALL;
	case IR_OP_RESHAPE:
	case IR_OP_PERMUTE:
	case IR_OP_SLICE:
		if (layout_keeps_rows(f, n, ir_arg(g, n, 0)))
			return rl->nz_of_node[ir_arg(g, n, 0)];
		/* One step of x's: zero where that step of x is. */
		if (nd->op == IR_OP_SLICE && nd->attr.slice.axis == 1 &&
		    nd->type.rank >= 3 && nd->attr.slice.step == 1 &&
		    nd->attr.slice.end == nd->attr.slice.start + 1 &&
		    same_batch(f, ir_arg(g, n, 0), n) &&
		    rl->row_node[ir_arg(g, n, 0)] == ir_arg(g, n, 0))
			return step(ctx, f, rl, ir_arg(g, n, 0),
				    nd->attr.slice.start,
				    rl->nz_of_node[ir_arg(g, n, 0)]);
		/* Rows of b to rows of b (a reshape, a slice of a rank-2
		 * row): zero where all of b's were. */
		if ((nd->op == IR_OP_RESHAPE ||
		     (nd->op == IR_OP_SLICE && nd->type.rank == 2)) &&
		    same_batch(f, ir_arg(g, n, 0), n) &&
		    rl->row_node[ir_arg(g, n, 0)] == ir_arg(g, n, 0))
			return any(ctx, rl, INT64_MAX,
				   rl->nz_of_node[ir_arg(g, n, 0)]);
		return PASS_ROWLIVE_IS_ALL;
	default:
		return PASS_ROWLIVE_IS_ALL;
	}
}

/* ---- rows that some output reads (a sweep back) ------------------------ */

/* The rows of operand s (node x) that node n reads when its own rows
 * below e are read. */
static uint32_t use_rows(rl_state *st, ir_id n, uint32_t s, uint32_t e);

/* The keys a live query of q (rows below e) reads, with valid lengths
 * v (IR_NONE: none, every key). */
static uint32_t keys_of_q(rl_state *st, ir_id q, ir_id k, ir_id v, uint32_t e)
{
	const ir_func *f = st->f;
	const ir_type *kt = type_of(f, k), *qt = type_of(f, q);
	if (e == PASS_ROWLIVE_IS_NONE)
		return e;
	if (qt->rank != 3 || kt->rank != 3 ||
	    !ir_dim_eq(kt->dims[0], qt->dims[0]) ||
	    !ir_dim_is_static(kt->dims[1]) || kt->dims[1].coef < 1 ||
	    !ir_dim_is_static(qt->dims[1]) || v == IR_NONE ||
	    st->rl->row_node[q] != q)
		return PASS_ROWLIVE_IS_ALL;
	const ir_type *vt = type_of(f, v);
	bool per_query = vt->rank == 2 && ir_dim_eq(vt->dims[1], qt->dims[1]);
	if (vt->dtype != IR_I32 || !ir_dim_eq(vt->dims[0], qt->dims[0]) ||
	    (vt->rank != 1 && !per_query))
		return PASS_ROWLIVE_IS_ALL;
	pass_rowlive_expr x = expr(PASS_ROWLIVE_KEYS, v, 0, 0);
	x.is_per_query = per_query;
	x.node = q;
	return keys(st->ctx, st->m, st->rl, f, x, k, e);
}

/* The rows of an operand that an elementwise node n reads. */
static uint32_t ew_use(rl_state *st, ir_id n, uint32_t s, uint32_t e)
{
	const ir_func *f = st->f;
	const ir_graph *g = &f->g;
	const ir_node *nd = &g->nodes[n];
	ir_id x = ir_arg(g, n, s);
	if (!same_rows(f, x, n) || type_of(f, x)->rank != nd->type.rank)
		return PASS_ROWLIVE_IS_ALL;
	/* x · y reads x where y may be nonzero; select(c, a, b) reads a
	 * where c may be true, c where a or b may be nonzero. */
	if (nd->op == IR_OP_MUL)
		return meet(st->ctx, st->rl, e,
			    nz_arg(st, n, ir_arg(g, n, 1 - s)));
	if (nd->op == IR_OP_SELECT && s == 1)
		return meet(st->ctx, st->rl, e, nz_arg(st, n, ir_arg(g, n, 0)));
	if (nd->op == IR_OP_SELECT && s == 0)
		return meet(st->ctx, st->rl, e,
			    join(st->ctx, st->rl, nz_arg(st, n, ir_arg(g, n, 1)),
				 nz_arg(st, n, ir_arg(g, n, 2))));
	return e;
}

/* A product A^T B (ta, not tb) of operands whose rows pair up: each
 * reads the other's rows where those may be nonzero. */
/* Whether x's axis 0 holds one row per batch element: rank 2 with
 * rows (b, j), or merged from a node of one step. */
static bool is_per_batch(const rl_state *st, ir_id x)
{
	ir_id r = st->rl->row_node[x];
	const ir_type *t = type_of(st->f, x);
	if (r == x)
		return t->rank == 2;
	return t->rank == 2 &&
	       ir_dim_eq(type_of(st->f, r)->dims[1], ir_dim_static(1));
}

static uint32_t tmatmul_use(rl_state *st, ir_id n, uint32_t s, uint32_t e)
{
	const ir_graph *g = &st->f->g;
	const ir_node *nd = &g->nodes[n];
	ir_id a = ir_arg(g, n, 0), b = ir_arg(g, n, 1);
	ir_id ra = st->rl->row_node[a], rb = st->rl->row_node[b];
	bool pair = !nd->attr.matmul.tb && same_rows(st->f, ra, rb) &&
		    (ra != a) == (rb != b) &&
		    (ra != a || type_of(st->f, a)->rank >= 3);
	/* Rows of one batch element each (rank 2, or merged from steps of
	 * one): a row of b whole where the other's row of b may be nonzero
	 * anywhere. */
	if (!nd->attr.matmul.tb && is_per_batch(st, a) && is_per_batch(st, b) &&
	    ir_dim_eq(type_of(st->f, ra)->dims[0], type_of(st->f, rb)->dims[0]))
		return any(st->ctx, st->rl, INT64_MAX,
			   st->rl->nz_of_node[s == 0 ? b : a]);
	if (!pair)
		return PASS_ROWLIVE_IS_ALL;
	(void)e;
	return st->rl->nz_of_node[s == 0 ? b : a];
}

static uint32_t fused_grad_use(rl_state *st, ir_id n, uint32_t s)
{
	const ir_graph *g = &st->f->g;
	const ir_node *nd = &g->nodes[n];
	uint32_t np = attn_grad_parts(st->f, n);
	const uint32_t *pd = &st->part_demand[n * MAX_PARTS];
	uint32_t any_part = PASS_ROWLIVE_IS_NONE;
	for (uint32_t p = 0; p < np; p++)
		any_part = join(st->ctx, st->rl, any_part, pd[p]);
	if (any_part == PASS_ROWLIVE_IS_NONE)
		return any_part;
	ir_id q = ir_arg(g, n, 0), dO = ir_arg(g, n, nd->n_args - 1);
	if (st->rl->row_node[dO] != dO || !same_rows(st->f, dO, q) ||
	    type_of(st->f, q)->rank != 3)
		return PASS_ROWLIVE_IS_ALL;
	/* A query whose output's gradient is 0 adds 0 to every part. */
	uint32_t z = st->rl->nz_of_node[dO];
	if (s == 0)
		return z;
	if (is_key_operand(np, s))
		return keys_of_q(st, q, ir_arg(g, n, s),
				 nd->n_args == np + 2 ? ir_arg(g, n, np)
						      : IR_NONE,
				 z);
	return PASS_ROWLIVE_IS_ALL;
}

static uint32_t ce_grad_use(rl_state *st, ir_id n, uint32_t s)
{
	const ir_graph *g = &st->f->g;
	const uint32_t *pd = &st->part_demand[n * MAX_PARTS];
	ir_id lg = ir_arg(g, n, 0), gr = ir_arg(g, n, 2);
	if (st->rl->row_node[lg] != lg || type_of(st->f, lg)->rank < 3 ||
	    !same_rows(st->f, gr, lg))
		return PASS_ROWLIVE_IS_ALL;
	if (s == 2)
		return pd[0];
	/* The gradient's row is the logits' times g: 0 where g is. */
	return join(st->ctx, st->rl,
		    meet(st->ctx, st->rl, pd[0], nz_rows(st, gr, lg)), pd[1]);
}

/* The rows of x that slice n (along axis 1) reads. At rank 2 the rows
 * of b whole. A step [i, i + 1) of x's steps read where step i of a
 * concatenation is (a recurrence's input at step i, its output
 * concatenated): x's rows below min(a, i + 1); other slices the rows
 * below their end where any of theirs is. */
static uint32_t slice_steps(rl_state *st, ir_id n, uint32_t e)
{
	const ir_func *f = st->f;
	const ir_node *nd = &f->g.nodes[n];
	ir_id x = ir_arg(&f->g, n, 0);
	if (!same_batch(f, x, n) || nd->attr.slice.step != 1 ||
	    type_of(f, x)->rank != nd->type.rank)
		return PASS_ROWLIVE_IS_ALL;
	if (nd->type.rank == 2)
		return any(st->ctx, st->rl, INT64_MAX, e);
	const pass_rowlive_expr *y = &st->rl->exprs[e];
	int64_t i = nd->attr.slice.start;
	if (y->op == PASS_ROWLIVE_STEP && y->k == i &&
	    nd->attr.slice.end == i + 1 &&
	    ir_dim_eq(type_of(f, y->node)->dims[1], type_of(f, x)->dims[1])) {
		uint32_t a = y->a;
		return meet(st->ctx, st->rl, a,
			    const_len(st->ctx, st->rl, i + 1));
	}
	return any(st->ctx, st->rl, nd->attr.slice.end, e);
}

/* The rows of operand s that concatenation n (along axis 1) reads: at
 * rank 2 the rows of b whole; of one step k, all where n's step k is. */
static uint32_t concat_steps(rl_state *st, ir_id n, uint32_t s, uint32_t e)
{
	const ir_func *f = st->f;
	const ir_graph *g = &f->g;
	const ir_node *nd = &g->nodes[n];
	ir_id x = ir_arg(g, n, s);
	if (!same_batch(f, x, n) || type_of(f, x)->rank != nd->type.rank)
		return PASS_ROWLIVE_IS_ALL;
	if (nd->type.rank == 2)
		return any(st->ctx, st->rl, INT64_MAX, e);
	int64_t off = 0;
	for (uint32_t i = 0; i < s; i++) {
		ir_dim d = type_of(f, ir_arg(g, n, i))->dims[1];
		if (!ir_dim_is_static(d))
			return PASS_ROWLIVE_IS_ALL;
		off += d.coef;
	}
	if (!ir_dim_eq(type_of(f, x)->dims[1], ir_dim_static(1)))
		return PASS_ROWLIVE_IS_ALL;
	return step(st->ctx, f, st->rl, n, off, e);
}

/* The rows of operand s that fused attention n reads: the queries
 * (operand 0) its result's rows; the keys (1) and values (at v) those
 * some live query does not mask out, by the valid lengths at operand
 * valid if n has them; any other operand whole. */
static uint32_t attention_use(rl_state *st, ir_id n, uint32_t s, uint32_t e,
			      uint32_t v, uint32_t valid)
{
	const ir_func *f = st->f;
	const ir_graph *g = &f->g;
	ir_id q = ir_arg(g, n, 0);
	if (s == 0)
		return same_rows(f, q, n) ? e : PASS_ROWLIVE_IS_ALL;
	if ((s != 1 && s != v) || !same_rows(f, q, n))
		return PASS_ROWLIVE_IS_ALL;
	return keys_of_q(st, q, ir_arg(g, n, s),
			 g->nodes[n].n_args > valid ? ir_arg(g, n, valid)
						    : IR_NONE,
			 e);
}

static uint32_t use_rows(rl_state *st, ir_id n, uint32_t s, uint32_t e)
{
	const ir_func *f = st->f;
	const ir_graph *g = &f->g;
	const ir_node *nd = &g->nodes[n];
	ir_id x = ir_arg(g, n, s);
	if (nd->op == IR_OP_CROSS_ENTROPY_WITH_GRAD && packed_parts(f, n, NULL))
		return ce_grad_use(st, n, s);
	if (attn_grad_parts(f, n))
		return fused_grad_use(st, n, s);
	if (e == PASS_ROWLIVE_IS_NONE)
		return e;
	if (nd->op == IR_OP_MATMUL && nd->attr.matmul.ta)
		return tmatmul_use(st, n, s, e);
	/* A reshape that merges x's rows passes on its demand, which is
	 * in x's rows; other uses of such a node read all of it. */
	if (st->rl->row_node[x] != x)
		return PASS_ROWLIVE_IS_ALL;
	if (st->rl->row_node[n] != n)
		return e;
	if (ir_op_table[nd->op].flags & IR_OPF_EW)
		return ew_use(st, n, s, e);
	bool rows = same_rows(f, x, n);
	int rank = nd->type.rank;
	/* A use that reads x's rows of b whole when any of its own rows of
	 * b is read (a product, a layer norm of rows (b, j) of rank 2). */
	uint32_t whole = same_batch(f, x, n) ? any(st->ctx, st->rl, INT64_MAX, e)
					     : PASS_ROWLIVE_IS_ALL;
	switch (nd->op) {
	case IR_OP_DROPOUT:
		return e;
	case IR_OP_LAYER_NORM:
	case IR_OP_SOFTMAX:
	case IR_OP_LOG_SOFTMAX:
	case IR_OP_MASKED_SOFTMAX:
		/* Along the last axis, which must not be axis 1. */
		if (s == 0 && rank == 2)
			return whole;
		return s == 0 && rows && rank >= 3 ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_LAYER_NORM_GRAD:
		/* (x, gamma, g): a row is 0 where g's is. */
		if (s == 1 || !rows || rank < 3)
			return PASS_ROWLIVE_IS_ALL;
		return s == 2 ? e
			      : meet(st->ctx, st->rl, e,
				     nz_arg(st, n, ir_arg(g, n, 2)));
	case IR_OP_EMBEDDING_GRAD:
		/* (ids, g): ids where g's rows may be nonzero. */
		if (s == 0 && same_rows(f, x, ir_arg(g, n, 1)))
			return nz_rows(st, ir_arg(g, n, 1), x);
		return PASS_ROWLIVE_IS_ALL;
	case IR_OP_MATMUL:
		if (s == 0 && rank == 2 && type_of(f, x)->rank == 2)
			return whole;
		return s == 0 && rows && rank >= 3 && type_of(f, x)->rank == rank
			       ? e
			       : PASS_ROWLIVE_IS_ALL;
	case IR_OP_SUM:
	case IR_OP_MEAN:
	case IR_OP_MAX:
	case IR_OP_ARGMAX:
	case IR_OP_ARGMIN:
		return rows && reduce_keeps_rows(nd) ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_RESHAPE:
		return layout_keeps_rows(f, n, x) ? e : whole;
	case IR_OP_PERMUTE:
		return layout_keeps_rows(f, n, x) ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_SLICE:
		if (layout_keeps_rows(f, n, x))
			return e;
		return nd->attr.slice.axis == 1 ? slice_steps(st, n, e)
						: PASS_ROWLIVE_IS_ALL;
	case IR_OP_CONCAT:
		if (layout_keeps_rows(f, n, x))
			return e;
		return nd->attr.axis == 1 ? concat_steps(st, n, s, e)
					  : PASS_ROWLIVE_IS_ALL;
	case IR_OP_EMBEDDING:
	case IR_OP_ONE_HOT:
		return s == 0 && rows ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_CROSS_ENTROPY:
		return rows && type_of(f, ir_arg(g, n, 0))->rank >= 3
			       ? e
			       : PASS_ROWLIVE_IS_ALL;
	case IR_OP_FUSED_ATTENTION: /* (q, k, v[, valid]) */
		return attention_use(st, n, s, e, 2, 3);
	case IR_OP_FUSED_ADDITIVE_ATTENTION: /* (qp, kp, wv, v[, valid]) */
		return attention_use(st, n, s, e, 3, 4);
	default:
		return PASS_ROWLIVE_IS_ALL;
	}
}

/* Whether node n is a reshape that merges its operand's rows (b, t)
 * into its axis 0 (row b·T + t), its other axes the rows' elements. */
static bool merges_rows(const ir_func *f, ir_id n)
{
	const ir_node *nd = &f->g.nodes[n];
	return nd->op == IR_OP_RESHAPE &&
	       is_merged(&nd->type, type_of(f, ir_arg(&f->g, n, 0)), false);
}

static bool state_init(rl_state *st, ir_ctx *ctx, const ir_module *m,
		       const ir_func *f, pass_rowlive *rl)
{
	uint32_t n = f->g.n_nodes + 1;
	*st = (rl_state){ctx, m, f, rl, NULL, NULL, NULL};
	st->part_root = ir_alloc(ctx, n * sizeof *st->part_root);
	st->part = ir_alloc(ctx, n * sizeof *st->part);
	st->part_demand = ir_alloc(ctx, n * MAX_PARTS * sizeof *st->part_demand);
	rl->of_node = ir_alloc(ctx, n * sizeof *rl->of_node);
	rl->nz_of_node = ir_alloc(ctx, n * sizeof *rl->nz_of_node);
	rl->row_node = ir_alloc(ctx, n * sizeof *rl->row_node);
	return st->part_root && st->part && st->part_demand && rl->of_node &&
	       rl->nz_of_node && rl->row_node;
}

static void state_fini(rl_state *st)
{
	ir_free(st->ctx, st->part_root);
	ir_free(st->ctx, st->part);
	ir_free(st->ctx, st->part_demand);
}

bool pass_rowlive_analyze(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			  pass_rowlive *rl)
{
	memset(rl, 0, sizeof *rl);
	const ir_graph *g = &f->g;
	rl->n_nodes = g->n_nodes;
	rl_state st;
	if (!state_init(&st, ctx, m, f, rl)) {
		state_fini(&st);
		return false;
	}
	intern(ctx, rl, expr(PASS_ROWLIVE_NONE, IR_NONE, 0, 0));
	intern(ctx, rl, expr(PASS_ROWLIVE_ALL, IR_NONE, 0, 0));
	for (ir_id n = 0; n < g->n_nodes; n++) {
		rl->row_node[n] = n;
		if (merges_rows(f, n) &&
		    rl->row_node[ir_arg(g, n, 0)] == ir_arg(g, n, 0))
			rl->row_node[n] = ir_arg(g, n, 0);
		find_part(&st, n);
		rl->nz_of_node[n] = nonzero_rows(&st, n);
	}
	for (uint32_t o = 0; o < f->n_outputs; o++)
		rl->of_node[f->outputs[o]] = PASS_ROWLIVE_IS_ALL;
	for (ir_id n = g->n_nodes; n-- > 0;) {
		if (type_of(f, n)->rank < 2 &&
		    rl->of_node[n] != PASS_ROWLIVE_IS_NONE &&
		    !packed_parts(f, n, NULL))
			rl->of_node[n] = PASS_ROWLIVE_IS_ALL;
		uint32_t e = rl->of_node[n];
		if (st.part_root[n] != IR_NONE) {
			/* A view of a part: its rows are the part's. */
			uint32_t *pd = &st.part_demand[st.part_root[n] * MAX_PARTS +
						       st.part[n]];
			*pd = join(ctx, rl, *pd, e);
			continue;
		}
		if (packed_parts(f, n, NULL) && e != PASS_ROWLIVE_IS_NONE)
			for (uint32_t p = 0; p < MAX_PARTS; p++)
				st.part_demand[n * MAX_PARTS + p] =
					PASS_ROWLIVE_IS_ALL;
		for (uint32_t s = 0; s < g->nodes[n].n_args; s++) {
			ir_id x = ir_arg(g, n, s);
			uint32_t u = use_rows(&st, n, s, e);
			rl->of_node[x] = join(ctx, rl, rl->of_node[x], u);
		}
	}
	/* The views' chains and the packed nodes are read whole, as far
	 * as their own rows say (their parts' rows are the views'). */
	for (ir_id n = 0; n < g->n_nodes; n++) {
		ir_id r = st.part_root[n];
		if (r == IR_NONE || rl->of_node[n] == PASS_ROWLIVE_IS_NONE)
			continue;
		for (ir_id x = ir_arg(g, n, 0); x != r; x = ir_arg(g, x, 0))
			rl->of_node[x] = PASS_ROWLIVE_IS_ALL;
		rl->of_node[r] = PASS_ROWLIVE_IS_ALL;
	}
	state_fini(&st);
	return !ctx->is_oom;
}

void pass_rowlive_fini(ir_ctx *ctx, pass_rowlive *rl)
{
	ir_free(ctx, rl->of_node);
	ir_free(ctx, rl->nz_of_node);
	ir_free(ctx, rl->row_node);
	ir_free(ctx, rl->exprs);
	memset(rl, 0, sizeof *rl);
}

static int64_t dim_value(ir_dim d, const int64_t *sym_values)
{
	return d.sym < 0 ? d.coef
			 : d.coef * (sym_values ? sym_values[d.sym] : 0);
}

static int32_t clamp_len(int64_t v, int64_t n)
{
	return (int32_t)(v < 0 ? 0 : v > n ? n : v);
}

/* Expression e's length for batch element b of a node of n_rows rows
 * a batch element. */
static int32_t eval_at(const pass_rowlive *rl, const ir_func *f,
		       const int64_t *sym_values, uint32_t e, int64_t b,
		       int64_t n_rows, pass_rowlive_values values, void *ud)
{
	const pass_rowlive_expr *x = &rl->exprs[e];
	int32_t l, r;
	switch (x->op) {
	case PASS_ROWLIVE_NONE:
		return 0;
	case PASS_ROWLIVE_ALL:
		return clamp_len(n_rows, n_rows);
	case PASS_ROWLIVE_PREFIX:
		return clamp_len(values(ud, x->valid)[b], n_rows);
	case PASS_ROWLIVE_KEYS: {
		int64_t Q = x->is_per_query
				    ? dim_value(type_of(f, x->node)->dims[1],
						sym_values)
				    : 1; /* whether any query is live */
		int32_t lq = eval_at(rl, f, sym_values, x->a, b, Q, values, ud);
		const int32_t *v = values(ud, x->valid);
		int32_t most = 0;
		for (int64_t i = 0; i < lq; i++) {
			int64_t w = x->is_per_query ? v[b * Q + i] : v[b];
			int32_t k = clamp_len(w <= 0 ? n_rows : w, n_rows);
			most = k > most ? k : most;
		}
		return most;
	}
	case PASS_ROWLIVE_MAX:
	case PASS_ROWLIVE_MIN:
		l = eval_at(rl, f, sym_values, x->a, b, n_rows, values, ud);
		r = eval_at(rl, f, sym_values, x->b, b, n_rows, values, ud);
		return (x->op == PASS_ROWLIVE_MAX) == (l > r) ? l : r;
	case PASS_ROWLIVE_CONST:
		return clamp_len(x->k, n_rows);
	case PASS_ROWLIVE_STEP:
		l = eval_at(rl, f, sym_values, x->a, b,
			    dim_value(type_of(f, x->node)->dims[1], sym_values),
			    values, ud);
		return x->k < l ? clamp_len(n_rows, n_rows) : 0;
	case PASS_ROWLIVE_ANY:
		l = eval_at(rl, f, sym_values, x->a, b, n_rows, values, ud);
		return l > 0 ? clamp_len(x->k, n_rows) : 0;
	}
	return clamp_len(n_rows, n_rows);
}

void pass_rowlive_eval(const pass_rowlive *rl, const ir_func *f,
		       const int64_t *sym_values, uint32_t e, int64_t n_batch,
		       int64_t n_rows, pass_rowlive_values values, void *ud,
		       int32_t *len)
{
	for (int64_t b = 0; b < n_batch; b++)
		len[b] = eval_at(rl, f, sym_values, e, b, n_rows, values, ud);
}

void pass_rowlive_print(const pass_rowlive *rl, uint32_t e, FILE *out)
{
	const pass_rowlive_expr *x = &rl->exprs[e];
	switch (x->op) {
	case PASS_ROWLIVE_NONE:
		fputs("none", out);
		return;
	case PASS_ROWLIVE_ALL:
		fputs("all", out);
		return;
	case PASS_ROWLIVE_PREFIX:
		fprintf(out, "t < %%%u", x->valid);
		return;
	case PASS_ROWLIVE_KEYS:
		fprintf(out, "keys(%%%u%s over ", x->valid,
			x->is_per_query ? " per query" : "");
		pass_rowlive_print(rl, x->a, out);
		fputc(')', out);
		return;
	case PASS_ROWLIVE_CONST:
		fprintf(out, "%lld", (long long)x->k);
		return;
	case PASS_ROWLIVE_STEP:
	case PASS_ROWLIVE_ANY:
		if (x->op == PASS_ROWLIVE_STEP)
			fprintf(out, "step(%lld of %%%u over ", (long long)x->k,
				x->node);
		else if (x->k == INT64_MAX)
			fputs("any(", out);
		else
			fprintf(out, "any(%lld over ", (long long)x->k);
		pass_rowlive_print(rl, x->a, out);
		fputc(')', out);
		return;
	case PASS_ROWLIVE_MAX:
	case PASS_ROWLIVE_MIN:
		fputs(x->op == PASS_ROWLIVE_MAX ? "max(" : "min(", out);
		pass_rowlive_print(rl, x->a, out);
		fputs(", ", out);
		pass_rowlive_print(rl, x->b, out);
		fputc(')', out);
		return;
	}
}
