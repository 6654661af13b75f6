/*
 * fuse_gelu.c - the "fuse_gelu" pass: GELU's backward takes 1 + erf(u)
 * from its forward's result instead of computing erf again
 * (docs/fusion.md, "GELU's backward").
 *
 * gelu(x) is built as y = (x 0.5) (1 + erf(x c)), c = sqrt(1/2)
 * (frontend/builtins.c), and autodiff's gradient reads the same
 * 1 + erf(x c) node: g (1 + erf) 0.5 + ... Elementwise fusion computes
 * that node in both kernels, erf (two polynomials and a 2^f) in each.
 * Where y has a buffer of its own anyway (a matmul reads it, as the
 * MLP's second layer and its weight gradient do, or it is returned),
 * the reads of 1 + erf after y become
 *
 *   select(y == x 0.5, 1, y / (x 0.5))
 *
 * one division and a compare where erf took about fifteen vector
 * instructions. x 0.5 is 0 only where |x| <= 2^-149, where 1 + erf(x c)
 * is 1 exactly (0 < c <= 1), and y is 0 too: the select gives 1 there
 * (and where y equals x 0.5 otherwise the quotient is 1 anyway; the
 * compare needs no constant of its own, which keeps the gradient's
 * kernel within the arrays elementwise fusion allows it). Elsewhere
 * y / (x 0.5) is 1 + erf(x c) to within about an ulp (y was rounded
 * once, the division once): this changes the gradient's rounding, not
 * its value. At infinite x the gradient is NaN either way (its other
 * term is (g x 0.5) e^-inf = inf 0).
 */
#include "passes.h"

#include "graph.h"

/* One GELU whose 1 + erf is read again after its result. */
typedef struct fg_match {
	ir_id y, half, one_erf;
} fg_match;

/* Whether node id is a constant whose elements all equal one value,
 * into *v. */
static bool const_value(const ir_module *m, const ir_graph *g, ir_id id,
			double *v)
{
	const ir_node *n = &g->nodes[id];
	if (n->op != IR_OP_CONST || n->attr.const_index >= m->n_consts)
		return false;
	const ir_const *k = &m->consts[n->attr.const_index];
	int64_t count = ir_type_numel_static(&k->type);
	for (int64_t i = 0; i < count; i++) {
		double e = k->type.dtype == IR_F32 ? ((const float *)k->data)[i]
			   : k->type.dtype == IR_I32
				   ? ((const int32_t *)k->data)[i]
				   : ((const double *)k->data)[i];
		if (i == 0)
			*v = e;
		else if (e != *v)
			return false;
	}
	return count > 0;
}

/* If node id is a mul of some x by a constant of value in [lo, hi]
 * (either way round), that x; else IR_NONE. */
static ir_id times_const(const ir_module *m, const ir_graph *g, ir_id id,
			 double lo, double hi)
{
	if (g->nodes[id].op != IR_OP_MUL)
		return IR_NONE;
	for (uint32_t a = 0; a < 2; a++) {
		double v;
		if (const_value(m, g, ir_arg(g, id, a), &v) && v >= lo && v <= hi)
			return ir_arg(g, id, 1 - a);
	}
	return IR_NONE;
}

/* If node id is 1 + erf(x c) (either way round), c in (0, 1], that x;
 * else IR_NONE. */
static ir_id one_plus_erf(const ir_module *m, const ir_graph *g, ir_id id)
{
	if (g->nodes[id].op != IR_OP_ADD)
		return IR_NONE;
	for (uint32_t a = 0; a < 2; a++) {
		double one;
		ir_id e = ir_arg(g, id, 1 - a);
		if (const_value(m, g, ir_arg(g, id, a), &one) && one == 1 &&
		    g->nodes[e].op == IR_OP_ERF)
			return times_const(m, g, ir_arg(g, e, 0), 0x1p-126, 1);
	}
	return IR_NONE;
}

/* Whether y keeps a buffer of its own whatever fusion plans: it is
 * returned or a matmul reads it. */
static bool has_buffer(const ir_graph *g, const pass_graph_uses *u, ir_id y)
{
	if (u->output[y] >= 0)
		return true;
	for (uint32_t k = u->start[y]; k < u->start[y + 1]; k++)
		if (g->nodes[u->list[k]].op == IR_OP_MATMUL)
			return true;
	return false;
}

/* Whether node y is a GELU of f32 whose 1 + erf is read after it, into
 * *mt. */
static bool match(const ir_module *m, const ir_func *f,
		  const pass_graph_uses *u, ir_id y, fg_match *mt)
{
	const ir_graph *g = &f->g;
	const ir_node *n = &g->nodes[y];
	if (n->op != IR_OP_MUL || n->type.dtype != IR_F32 ||
	    !has_buffer(g, u, y))
		return false;
	for (uint32_t a = 0; a < 2; a++) {
		ir_id half = ir_arg(g, y, a), one_erf = ir_arg(g, y, 1 - a);
		ir_id x = one_plus_erf(m, g, one_erf);
		if (x == IR_NONE || times_const(m, g, half, 0.5, 0.5) != x ||
		    !ir_type_eq(&g->nodes[half].type, &n->type) ||
		    !ir_type_eq(&g->nodes[one_erf].type, &n->type))
			continue;
		bool is_read_after = false;
		if (u->output[one_erf] >= 0)
			return false;
		for (uint32_t k = u->start[one_erf]; k < u->start[one_erf + 1];
		     k++) {
			if (u->list[k] < y)
				return false; /* read before y: left alone */
			is_read_after |= u->list[k] > y;
		}
		if (!is_read_after)
			return false;
		*mt = (fg_match){y, half, one_erf};
		return true;
	}
	return false;
}

/* Emits select(y == half, 1, y / half) of mt's new nodes, the 1 its
 * 1 + erf's, and has the later reads of its 1 + erf read that
 * instead. */
static void emit_quotient(pass_graph_builder *b, const fg_match *mt)
{
	const ir_graph *g = &b->f->g;
	ir_loc loc = g->nodes[mt->y].loc;
	ir_id y = b->map[mt->y], half = b->map[mt->half];
	ir_id one = b->map[ir_arg(g, mt->one_erf, 0)];
	if (g->nodes[ir_arg(g, mt->one_erf, 0)].op != IR_OP_CONST)
		one = b->map[ir_arg(g, mt->one_erf, 1)];
	ir_id pair[2] = {y, half};
	ir_id sel[3] = {pass_graph_emit(b, IR_OP_EQ, pair, 2, NULL, NULL, loc),
			one,
			pass_graph_emit(b, IR_OP_DIV, pair, 2, NULL, NULL, loc)};
	ir_id q = pass_graph_emit(b, IR_OP_SELECT, sel, 3, NULL, NULL, loc);
	if (!b->is_failed)
		b->map[mt->one_erf] = q;
}

static bool fuse_func(ir_module *m, ir_func *f)
{
	uint32_t nn = f->g.n_nodes;
	pass_graph_uses u = {0};
	pass_graph_builder b = {.m = m, .f = f};
	fg_match *at = ir_alloc(m->ctx, (nn + 1) * sizeof *at);
	b.map = ir_alloc(m->ctx, (nn + 1) * sizeof *b.map);
	bool ok = at && b.map && pass_graph_uses_build(m->ctx, f, &u);
	uint32_t n_found = 0;
	for (ir_id x = 0; ok && x < nn; x++) {
		if (match(m, f, &u, x, &at[x]))
			n_found++;
		else
			at[x].y = IR_NONE;
	}
	if (!ok) {
		ir_error(m->ctx, f->loc, "fuse_gelu: out of memory");
	} else if (n_found > 0) {
		for (ir_id x = 0; x < nn; x++)
			b.map[x] = IR_NONE;
		for (ir_id x = 0; x < nn && !b.is_failed; x++) {
			b.map[x] = pass_graph_copy(&b, x);
			if (at[x].y == x)
				emit_quotient(&b, &at[x]);
		}
		ok = pass_graph_finish(&b, "fuse_gelu: cannot rewrite");
	}
	pass_graph_uses_fini(m->ctx, &u);
	ir_free(m->ctx, at);
	ir_free(m->ctx, b.map);
	return ok;
}

bool pass_fuse_gelu(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!fuse_func(m, m->funcs[fi]))
			return false;
	return true;
}
