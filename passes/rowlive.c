/*
 * rowlive.c - the row-liveness analysis (rowlive.h): one sweep from the
 * last node to the first (operands come before their users), each node's
 * expression complete when its turn comes, passing to each operand the
 * rows that use reads, joined (max) over its uses. The expressions are
 * interned in one array, so the join of equal ones stays one.
 */
#include "rowlive.h"

#include <string.h>

static uint32_t intern(ir_ctx *ctx, pass_rowlive *rl, pass_rowlive_expr x)
{
	for (uint32_t i = 0; i < rl->n_exprs; i++) {
		const pass_rowlive_expr *y = &rl->exprs[i];
		if (y->op == x.op && y->valid == x.valid &&
		    y->is_per_query == x.is_per_query && y->a == x.a &&
		    y->b == x.b && y->queries == x.queries)
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
	return (pass_rowlive_expr){op, valid, false, a, b, IR_NONE};
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
	    ir_dim_eq(type_of(f, x.queries)->dims[1], type_of(f, k)->dims[1]) &&
	    ir_dim_is_static(type_of(f, x.queries)->dims[1]) &&
	    is_causal(m, f, x.valid, type_of(f, x.queries)->dims[1].coef))
		return e;
	if (!x.is_per_query && y->op == PASS_ROWLIVE_KEYS)
		return keys(ctx, m, rl, f, x, k, y->a);
	if (!x.is_per_query)
		x.queries = IR_NONE; /* only whether a query is live counts */
	x.a = e;
	return intern(ctx, rl, x);
}

/* The rows of attention node n's keys that live queries read (its keys
 * operand k, valid lengths in operand iv if it has them). */
static uint32_t keys_of(ir_ctx *ctx, const ir_module *m, pass_rowlive *rl,
			const ir_func *f, ir_id n, ir_id q, ir_id k,
			uint32_t iv, uint32_t e)
{
	const ir_node *nd = &f->g.nodes[n];
	const ir_type *kt = type_of(f, k);
	if (e == PASS_ROWLIVE_IS_NONE || !same_rows(f, q, n) || kt->rank != 3 ||
	    !ir_dim_eq(kt->dims[0], nd->type.dims[0]) ||
	    !ir_dim_is_static(kt->dims[1]) || kt->dims[1].coef < 1 ||
	    !ir_dim_is_static(nd->type.dims[1]) || nd->n_args <= iv)
		return e == PASS_ROWLIVE_IS_NONE ? e : PASS_ROWLIVE_IS_ALL;
	ir_id v = ir_arg(&f->g, n, iv);
	const ir_type *vt = type_of(f, v);
	bool per_query = vt->rank == 2 &&
			 ir_dim_eq(vt->dims[1], nd->type.dims[1]);
	if (vt->dtype != IR_I32 || !ir_dim_eq(vt->dims[0], nd->type.dims[0]) ||
	    (vt->rank != 1 && !per_query))
		return PASS_ROWLIVE_IS_ALL;
	pass_rowlive_expr x = expr(PASS_ROWLIVE_KEYS, v, 0, 0);
	x.is_per_query = per_query;
	x.queries = q;
	return keys(ctx, m, rl, f, x, k, e);
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

/* The rows of operand s (node x) that node n reads when its own rows
 * below e are read. */
static uint32_t use_rows(ir_ctx *ctx, const ir_module *m, pass_rowlive *rl,
			 const ir_func *f, ir_id n, uint32_t s, uint32_t e)
{
	const ir_graph *g = &f->g;
	const ir_node *nd = &g->nodes[n];
	ir_id x = ir_arg(g, n, s);
	if (e == PASS_ROWLIVE_IS_NONE)
		return e;
	unsigned flags = ir_op_table[nd->op].flags;
	if (flags & IR_OPF_EW) {
		if (!same_rows(f, x, n) || type_of(f, x)->rank != nd->type.rank)
			return PASS_ROWLIVE_IS_ALL;
		ir_id other = nd->n_args == 2 ? ir_arg(g, n, 1 - s) : IR_NONE;
		ir_id v = nd->op == IR_OP_MUL ? mask_valid(m, f, other, n)
			  : nd->op == IR_OP_SELECT && s == 1
				  ? mask_valid(m, f, ir_arg(g, n, 0), n)
				  : IR_NONE;
		if (v == IR_NONE)
			return e;
		return meet(ctx, rl, e,
			    intern(ctx, rl, expr(PASS_ROWLIVE_PREFIX, v, 0, 0)));
	}
	bool rows = same_rows(f, x, n);
	int rank = nd->type.rank;
	switch (nd->op) {
	case IR_OP_DROPOUT:
		return e;
	case IR_OP_LAYER_NORM:
	case IR_OP_SOFTMAX:
	case IR_OP_LOG_SOFTMAX:
	case IR_OP_MASKED_SOFTMAX:
		/* Along the last axis, which must not be axis 1. */
		return s == 0 && rows && rank >= 3 ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_MATMUL:
		return s == 0 && rows && rank >= 3 && !nd->attr.matmul.ta &&
				       type_of(f, x)->rank == rank
			       ? e
			       : PASS_ROWLIVE_IS_ALL;
	case IR_OP_SUM:
	case IR_OP_MEAN:
	case IR_OP_MAX:
	case IR_OP_ARGMAX:
		return rows && reduce_keeps_rows(nd) ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_RESHAPE:
	case IR_OP_PERMUTE:
	case IR_OP_SLICE:
	case IR_OP_CONCAT:
		return layout_keeps_rows(f, n, x) ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_EMBEDDING:
	case IR_OP_ONE_HOT:
		return s == 0 && rows ? e : PASS_ROWLIVE_IS_ALL;
	case IR_OP_CROSS_ENTROPY:
		return rows && type_of(f, ir_arg(g, n, 0))->rank >= 3
			       ? e
			       : PASS_ROWLIVE_IS_ALL;
	case IR_OP_FUSED_ATTENTION:
		/* (q, k, v[, valid]) */
		if (s == 0)
			return rows ? e : PASS_ROWLIVE_IS_ALL;
		if (s == 1 || s == 2)
			return keys_of(ctx, m, rl, f, n, ir_arg(g, n, 0),
				       ir_arg(g, n, 1), 3, e);
		return PASS_ROWLIVE_IS_ALL;
	case IR_OP_FUSED_ADDITIVE_ATTENTION:
		/* (qp, kp, wv, v[, valid]) */
		if (s == 0)
			return rows ? e : PASS_ROWLIVE_IS_ALL;
		if (s == 1 || s == 3)
			return keys_of(ctx, m, rl, f, n, ir_arg(g, n, 0),
				       ir_arg(g, n, 1), 4, e);
		return PASS_ROWLIVE_IS_ALL;
	default:
		return PASS_ROWLIVE_IS_ALL;
	}
}

bool pass_rowlive_analyze(ir_ctx *ctx, const ir_module *m, const ir_func *f,
			  pass_rowlive *rl)
{
	memset(rl, 0, sizeof *rl);
	const ir_graph *g = &f->g;
	rl->n_nodes = g->n_nodes;
	rl->of_node = ir_alloc(ctx, (g->n_nodes + 1) * sizeof *rl->of_node);
	if (!rl->of_node)
		return false;
	intern(ctx, rl, expr(PASS_ROWLIVE_NONE, IR_NONE, 0, 0));
	intern(ctx, rl, expr(PASS_ROWLIVE_ALL, IR_NONE, 0, 0));
	for (uint32_t o = 0; o < f->n_outputs; o++)
		rl->of_node[f->outputs[o]] = PASS_ROWLIVE_IS_ALL;
	for (ir_id n = g->n_nodes; n-- > 0;) {
		if (type_of(f, n)->rank < 2 &&
		    rl->of_node[n] != PASS_ROWLIVE_IS_NONE)
			rl->of_node[n] = PASS_ROWLIVE_IS_ALL;
		uint32_t e = rl->of_node[n];
		for (uint32_t s = 0; s < g->nodes[n].n_args; s++) {
			ir_id x = ir_arg(g, n, s);
			uint32_t u = use_rows(ctx, m, rl, f, n, s, e);
			rl->of_node[x] = join(ctx, rl, rl->of_node[x], u);
		}
	}
	return !ctx->is_oom;
}

void pass_rowlive_fini(ir_ctx *ctx, pass_rowlive *rl)
{
	ir_free(ctx, rl->of_node);
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
				    ? dim_value(type_of(f, x->queries)->dims[1],
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
