/*
 * fuse_loss.c - the "fuse_loss" pass: a cross_entropy and a
 * cross_entropy_grad of the same logits and labels in one function (a
 * gradient function made by pass_autodiff holds both: the loss value and
 * its gradient) become one cross_entropy_with_grad node, whose kernel
 * makes one pass of exps over each row instead of two (docs/fusion.md).
 *
 * The fused node needs the gradient's g, which the graph computes after
 * the cross_entropy (g is d loss / d cross_entropy: the mask over the
 * count, in the book's models); so g must not depend on the
 * cross_entropy, and the rebuild emits g's operands early, just before
 * the fused node, where the cross_entropy was. Each replaced node
 * becomes its part of the packed f32[2, ..., V] result: the gradient a
 * slice [0] reshaped to the logits' type; the losses a slice of column
 * 0 of the last axis, then of [1], reshaped to the labels' type (two
 * small copies, 3 elements a row; the gradient's slice copies a row of
 * V).
 */
#include "passes.h"

#include "graph.h"

#include <string.h>

/* One cross_entropy (ce) and the cross_entropy_grad (cg) that fuses
 * with it. pair[x] for both nodes of a pair is the pair's index. */
typedef struct fl_pair {
	ir_id ce, cg;
	ir_id packed; /* in the new graph, once emitted; else IR_NONE */
} fl_pair;

typedef struct fl_rebuild {
	pass_graph_builder b;
	fl_pair *pairs;
	uint32_t *pair_of; /* per old node: its pair, or UINT32_MAX */
} fl_rebuild;

static bool is_ce_op(ir_op op)
{
	return op == IR_OP_CROSS_ENTROPY || op == IR_OP_CROSS_ENTROPY_GRAD ||
	       op == IR_OP_CROSS_ENTROPY_WITH_GRAD;
}

/* Marks x and every node it depends on in seen[]; false if one of them
 * is a cross_entropy of any kind (g would then depend on the loss, or
 * the early emission would move another fused pair's node). */
static bool cone_is_free(const ir_graph *g, ir_id x, bool *seen)
{
	if (seen[x])
		return true;
	seen[x] = true;
	if (is_ce_op(g->nodes[x].op))
		return false;
	for (uint32_t a = 0; a < g->nodes[x].n_args; a++)
		if (!cone_is_free(g, ir_arg(g, x, a), seen))
			return false;
	return true;
}

/* The cross_entropy_grad after ce of ce's logits and labels that is in
 * no pair yet, or IR_NONE. */
static ir_id partner(const ir_func *f, ir_id ce, const uint32_t *pair_of)
{
	const ir_graph *g = &f->g;
	for (ir_id x = 0; x < g->n_nodes; x++)
		if (g->nodes[x].op == IR_OP_CROSS_ENTROPY_GRAD &&
		    pair_of[x] == UINT32_MAX &&
		    ir_arg(g, x, 0) == ir_arg(g, ce, 0) &&
		    ir_arg(g, x, 1) == ir_arg(g, ce, 1))
			return x;
	return IR_NONE;
}

/* Whether cross_entropy ce and cross_entropy_grad cg can fuse: g's cone
 * holds no cross_entropy, and the logits leave room for the stack's dim. */
static bool can_fuse(const ir_func *f, ir_id ce, ir_id cg, bool *seen)
{
	const ir_graph *g = &f->g;
	if (g->nodes[ir_arg(g, ce, 0)].type.rank >= IR_MAX_RANK)
		return false;
	memset(seen, 0, g->n_nodes * sizeof *seen);
	return cone_is_free(g, ir_arg(g, cg, 2), seen);
}

/* Finds f's pairs into pairs (room for every node); the count. */
static uint32_t find_pairs(const ir_func *f, fl_pair *pairs, uint32_t *pair_of,
			   bool *seen)
{
	const ir_graph *g = &f->g;
	uint32_t n = 0;
	for (ir_id x = 0; x < g->n_nodes; x++)
		pair_of[x] = UINT32_MAX;
	for (ir_id x = 0; x < g->n_nodes; x++) {
		if (g->nodes[x].op != IR_OP_CROSS_ENTROPY ||
		    pair_of[x] != UINT32_MAX)
			continue;
		ir_id cg = partner(f, x, pair_of);
		if (cg == IR_NONE || !can_fuse(f, x, cg, seen))
			continue;
		pairs[n] = (fl_pair){x, cg, IR_NONE};
		pair_of[x] = pair_of[cg] = n++;
	}
	return n;
}

/* Copies old node x and, first, whatever it needs that is not copied
 * yet (g's cone, emitted early: no pair node is in it). */
static ir_id copy_cone(fl_rebuild *r, ir_id x)
{
	const ir_graph *g = &r->b.f->g;
	if (r->b.map[x] != IR_NONE || r->b.is_failed)
		return r->b.map[x];
	for (uint32_t a = 0; a < g->nodes[x].n_args; a++)
		copy_cone(r, ir_arg(g, x, a));
	r->b.map[x] = pass_graph_copy(&r->b, x);
	return r->b.map[x];
}

static ir_id slice(fl_rebuild *r, ir_id x, int axis, int64_t start, ir_loc loc)
{
	ir_attr a;
	memset(&a, 0, sizeof a);
	a.slice.axis = axis;
	a.slice.start = start;
	a.slice.end = start + 1;
	a.slice.step = 1;
	return pass_graph_emit(&r->b, IR_OP_SLICE, &x, 1, &a, NULL, loc);
}

/* The part of pair p's packed result that stands for old node x (its ce
 * or its cg), emitting the packed node first if needed. */
static ir_id emit_part(fl_rebuild *r, fl_pair *p, ir_id x)
{
	const ir_graph *g = &r->b.f->g;
	ir_loc loc = g->nodes[x].loc;
	if (p->packed == IR_NONE) {
		ir_id args[3];
		for (uint32_t a = 0; a < 3; a++)
			args[a] = copy_cone(r, ir_arg(g, p->cg, a));
		p->packed = pass_graph_emit(&r->b,
					    IR_OP_CROSS_ENTROPY_WITH_GRAD, args,
					    3, NULL, NULL, g->nodes[p->cg].loc);
		if (r->b.is_failed)
			return IR_NONE;
	}
	ir_id part;
	if (x == p->cg) {
		part = slice(r, p->packed, 0, 0, loc);
	} else {
		int last = r->b.g.nodes[p->packed].type.rank - 1;
		part = slice(r, slice(r, p->packed, last, 0, loc), 0, 1, loc);
	}
	return pass_graph_emit(&r->b, IR_OP_RESHAPE, &part, 1, NULL,
			       &g->nodes[x].type, loc);
}

/* The new graph, node by node; then it replaces the old one. */
static bool rebuild(fl_rebuild *r)
{
	ir_func *f = r->b.f;
	for (ir_id x = 0; x < f->g.n_nodes; x++)
		r->b.map[x] = IR_NONE;
	for (ir_id x = 0; x < f->g.n_nodes && !r->b.is_failed; x++) {
		if (r->b.map[x] != IR_NONE)
			continue; /* emitted early, in a g's cone */
		if (r->pair_of[x] == UINT32_MAX)
			r->b.map[x] = pass_graph_copy(&r->b, x);
		else
			r->b.map[x] = emit_part(r, &r->pairs[r->pair_of[x]], x);
	}
	return pass_graph_finish(&r->b, "fuse_loss: cannot rewrite");
}

static bool fuse_func(ir_module *m, ir_func *f)
{
	uint32_t nn = f->g.n_nodes;
	fl_rebuild r = {.b = {.m = m, .f = f}};
	r.pairs = ir_alloc(m->ctx, (nn + 1) * sizeof *r.pairs);
	r.pair_of = ir_alloc(m->ctx, (nn + 1) * sizeof *r.pair_of);
	r.b.map = ir_alloc(m->ctx, (nn + 1) * sizeof *r.b.map);
	bool *seen = ir_alloc(m->ctx, (nn + 1) * sizeof *seen);
	bool ok = r.pairs && r.pair_of && r.b.map && seen;
	if (!ok)
		ir_error(m->ctx, f->loc, "fuse_loss: out of memory");
	else if (find_pairs(f, r.pairs, r.pair_of, seen) > 0)
		ok = rebuild(&r);
	ir_free(m->ctx, r.pairs);
	ir_free(m->ctx, r.pair_of);
	ir_free(m->ctx, r.b.map);
	ir_free(m->ctx, seen);
	return ok;
}

bool pass_fuse_loss(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!fuse_func(m, m->funcs[fi]))
			return false;
	return true;
}
