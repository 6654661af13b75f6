/*
 * factor.c - the "factor" pass: a sum of matrix products that share an
 * operand becomes one product of a sum.
 *
 *   matmul(A, X1) + ... + matmul(A, Xn) -> matmul(A, X1 + ... + Xn)
 *   matmul(X1, B) + ... + matmul(Xn, B) -> matmul(X1 + ... + Xn, B)
 *
 * Autodiff makes such sums wherever a forward value feeds several
 * products that CSE later merges into one: Bahdanau's keys projection
 * enc @ W_k is one node after CSE, but its gradient function still sums
 * one encᵀ @ dKP_t per decoder step for dW_k, and one dKP_t @ W_kᵀ per
 * step into the encoder output's gradient.
 *
 * A sum is a tree of `add` nodes whose operands both have the add's own
 * type (no broadcasting), every inner add used once, by the tree, and no
 * output; its root is an add that is not itself an inner add of a larger
 * tree. Its leaves are read left to right. A leaf matmul may be factored
 * when it is used once (by the tree) and is no output; two such leaves go
 * together when they share the same left (or right) operand node, have
 * equal ta and tb flags, and their other operands have exactly equal
 * types (dtype and shape, so that X1 + X2 does not broadcast). Groups are
 * formed greedily, the largest first. The root is rebuilt as the sum of
 * the leaves left alone and one product per group, each term added where
 * it becomes ready in node order: a group's other operands are summed at
 * their products' places, its product comes at the last of them, a lone
 * leaf joins at the add that read it. So every summed operand dies about
 * when its product did, and no buffer lives longer than before. Results
 * change only by rounding: the additions happen in another order, and
 * before the product instead of after it.
 *
 * It runs after the fusion passes, which read the backward nodes exactly
 * as autodiff made them; the sums it factors lie outside any fused chain.
 * The graph is rebuilt (pass_graph_builder) since a group's summed operand may
 * sit after the group's first leaf in the old order, and the rewrite
 * repeats until no tree has a group: each round removes at least one
 * matmul.
 */
#include "passes.h"

#include "graph.h"

#include <string.h>

typedef struct fct {
	const ir_func *f;
	pass_graph_uses u;
	ir_id *leaves;      /* the tree being read, leaves left to right */
	ir_id *stack;       /* the walk's pending nodes */
	int32_t *group;     /* per leaf slot: its group's first slot, or -1 */
	uint8_t *slot_side; /* per leaf slot: shared operand, 0 left, 1 right */
	uint32_t n_leaves;
	ir_id *inners; /* the tree's root and inner adds */
	uint32_t n_inners;
	/* Per node, for the planned trees: */
	ir_id *owner; /* the root of the tree it is an add or grouped leaf of */
	ir_id *head;  /* a grouped leaf: its group's first leaf */
	ir_id *last;  /* a group's first leaf: the group's last leaf */
	uint8_t *side; /* a group's first leaf: shared operand, 0 left */
	ir_id *acc;    /* a root: its running total; a group's first leaf:
		       * the running sum of the other operands */
} fct;

static const ir_node *node(const fct *c, ir_id id)
{
	return &c->f->g.nodes[id];
}

static ir_id arg(const fct *c, ir_id id, uint32_t i)
{
	return ir_arg(&c->f->g, id, i);
}

static bool same_type(const fct *c, ir_id a, ir_id b)
{
	return ir_type_eq(&node(c, a)->type, &node(c, b)->type);
}

/* Used by exactly one operand slot and no output. */
static bool is_single_use(const fct *c, ir_id id)
{
	return c->u.start[id + 1] - c->u.start[id] == 1 && c->u.output[id] < 0;
}

/* An add whose operands both have its type. */
static bool is_exact_add(const fct *c, ir_id id)
{
	return node(c, id)->op == IR_OP_ADD && same_type(c, id, arg(c, id, 0)) &&
	       same_type(c, id, arg(c, id, 1));
}

/* An inner node of some tree: an exact add read once, by an exact add. */
static bool is_inner(const fct *c, ir_id id)
{
	return is_exact_add(c, id) && is_single_use(c, id) &&
	       is_exact_add(c, c->u.list[c->u.start[id]]);
}

/* Fills c->leaves with the leaves of the tree rooted at root. */
static void read_tree(fct *c, ir_id root)
{
	uint32_t n_stack = 0;
	c->n_leaves = 0;
	c->n_inners = 0;
	c->stack[n_stack++] = root;
	while (n_stack > 0) {
		ir_id x = c->stack[--n_stack];
		if (x != root && !is_inner(c, x)) {
			c->leaves[c->n_leaves++] = x;
			continue;
		}
		c->inners[c->n_inners++] = x;
		c->stack[n_stack++] = arg(c, x, 1);
		c->stack[n_stack++] = arg(c, x, 0);
	}
}

static bool is_factorable(const fct *c, ir_id x)
{
	return node(c, x)->op == IR_OP_MATMUL && is_single_use(c, x);
}

/* Whether leaf slots i and j may share operand side s (0 left, 1 right). */
static bool goes_with(const fct *c, uint32_t i, uint32_t j, uint8_t s)
{
	ir_id a = c->leaves[i], b = c->leaves[j];
	const ir_node *na = node(c, a), *nb = node(c, b);
	return is_factorable(c, b) && arg(c, a, s) == arg(c, b, s) &&
	       na->attr.matmul.ta == nb->attr.matmul.ta &&
	       na->attr.matmul.tb == nb->attr.matmul.tb &&
	       same_type(c, arg(c, a, 1 - s), arg(c, b, 1 - s));
}

static uint32_t count_partners(const fct *c, uint32_t i, uint8_t s)
{
	uint32_t n = 0;
	for (uint32_t j = i + 1; j < c->n_leaves; j++)
		n += c->group[j] < 0 && goes_with(c, i, j, s);
	return n;
}

/* Forms the largest group of ungrouped leaves still possible; false if
 * no two leaves go together. */
static bool form_group(fct *c)
{
	uint32_t best = 0, best_i = 0;
	uint8_t best_s = 0;
	for (uint32_t i = 0; i < c->n_leaves; i++) {
		if (c->group[i] >= 0 || !is_factorable(c, c->leaves[i]))
			continue;
		for (uint8_t s = 0; s < 2; s++) {
			uint32_t n = count_partners(c, i, s);
			if (n > best) {
				best = n;
				best_i = i;
				best_s = s;
			}
		}
	}
	if (best == 0)
		return false;
	c->group[best_i] = (int32_t)best_i;
	c->slot_side[best_i] = best_s;
	for (uint32_t j = best_i + 1; j < c->n_leaves; j++)
		if (c->group[j] < 0 && goes_with(c, best_i, j, best_s)) {
			c->group[j] = (int32_t)best_i;
			c->slot_side[j] = best_s;
		}
	return true;
}

/* Reads the tree at root and groups its leaves; true if any group. */
static bool plan_tree(fct *c, ir_id root)
{
	read_tree(c, root);
	for (uint32_t i = 0; i < c->n_leaves; i++)
		c->group[i] = -1;
	bool any = false;
	while (form_group(c))
		any = true;
	return any;
}

/* Records the planned tree at root in the per-node arrays. */
static void record_tree(fct *c, ir_id root)
{
	for (uint32_t k = 0; k < c->n_inners; k++)
		c->owner[c->inners[k]] = root;
	for (uint32_t i = 0; i < c->n_leaves; i++) {
		if (c->group[i] < 0)
			continue;
		ir_id leaf = c->leaves[i], first = c->leaves[c->group[i]];
		c->owner[leaf] = root;
		c->head[leaf] = first;
		/* The rebuild meets the members in node order, not in leaf
		 * order: the product comes at the last of them. */
		if (c->last[first] == IR_NONE || c->last[first] < leaf)
			c->last[first] = leaf;
		c->side[first] = c->slot_side[i];
	}
}

/* Plans every tree of f that has a group; false if none has. */
static bool plan_func(fct *c)
{
	bool any = false;
	for (ir_id i = 0; i < c->f->g.n_nodes; i++) {
		if (!is_exact_add(c, i) || is_inner(c, i) || !plan_tree(c, i))
			continue;
		record_tree(c, i);
		any = true;
	}
	return any;
}

/* acc[x] = acc[x] + t, or t if acc[x] is empty. */
static void accumulate(fct *c, pass_graph_builder *b, ir_id x, ir_id t,
		       ir_loc loc)
{
	ir_id ops[2] = {c->acc[x], t};
	c->acc[x] = c->acc[x] == IR_NONE ? t
					 : pass_graph_emit(b, IR_OP_ADD, ops, 2,
							   NULL, NULL, loc);
}

/* A grouped leaf: its other operand joins the group's sum (in node
 * order); the last one emits the product and adds it to the tree's
 * total. */
static void visit_member(fct *c, pass_graph_builder *b, ir_id x)
{
	ir_id first = c->head[x];
	uint8_t s = c->side[first];
	const ir_node *n = node(c, x);
	accumulate(c, b, first, b->map[arg(c, x, 1 - s)], n->loc);
	if (c->last[first] != x)
		return;
	ir_id ops[2];
	ops[s] = b->map[arg(c, x, s)];
	ops[1 - s] = c->acc[first];
	const ir_node *f = node(c, first);
	ir_id p = pass_graph_emit(b, IR_OP_MATMUL, ops, 2, &f->attr, NULL,
				  f->loc);
	accumulate(c, b, c->owner[x], p, node(c, c->owner[x])->loc);
}

/* An add of a planned tree: its operands that are neither inner adds
 * nor grouped leaves join the tree's total. */
static void visit_add(fct *c, pass_graph_builder *b, ir_id x)
{
	ir_id root = c->owner[x];
	for (uint32_t a = 0; a < 2; a++) {
		ir_id y = arg(c, x, a);
		if (c->owner[y] != root)
			accumulate(c, b, root, b->map[y], node(c, root)->loc);
	}
}

/* Rebuilds f with every planned tree's sum emitted as its terms become
 * ready, so that each summed operand dies early; the old nodes are
 * copied too and left for the compaction to drop. */
static bool rebuild_func(ir_module *m, ir_func *f, fct *c)
{
	uint32_t n = f->g.n_nodes;
	pass_graph_builder b = {.m = m,
				.f = f,
				.map = ir_alloc(m->ctx, (n + 1) * sizeof *b.map)};
	if (!b.map) {
		ir_error(m->ctx, f->loc, "out of memory");
		return false;
	}
	for (ir_id i = 0; i < n && !b.is_failed; i++) {
		b.map[i] = pass_graph_copy(&b, i);
		if (c->owner[i] == IR_NONE)
			continue;
		if (c->head[i] != IR_NONE)
			visit_member(c, &b, i);
		else
			visit_add(c, &b, i);
		if (c->owner[i] == i)
			b.map[i] = c->acc[i];
	}
	bool ok = pass_graph_finish(&b, "factor: cannot rewrite");
	ir_free(m->ctx, b.map);
	return ok;
}

static void fct_fini(ir_ctx *ctx, fct *c)
{
	pass_graph_uses_fini(ctx, &c->u);
	ir_id *ids[] = {c->leaves, c->stack, c->inners, c->owner,
			c->head,   c->last,  c->acc};
	for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
		ir_free(ctx, ids[i]);
	ir_free(ctx, c->group);
	ir_free(ctx, c->slot_side);
	ir_free(ctx, c->side);
	memset(c, 0, sizeof *c);
}

static ir_id *alloc_ids(ir_ctx *ctx, size_t n, bool *ok)
{
	ir_id *a = ir_alloc(ctx, n * sizeof *a);
	for (size_t i = 0; a && i < n; i++)
		a[i] = IR_NONE;
	*ok = *ok && a;
	return a;
}

/* Scratch sized for f's current graph (a tree has fewer leaves and
 * inner adds than f has nodes, and the walk holds fewer than that). */
static bool fct_init(ir_ctx *ctx, const ir_func *f, fct *c)
{
	size_t n = f->g.n_nodes + 2;
	bool ok = pass_graph_uses_build(ctx, f, &c->u);
	c->f = f;
	c->leaves = alloc_ids(ctx, n, &ok);
	c->stack = alloc_ids(ctx, n, &ok);
	c->inners = alloc_ids(ctx, n, &ok);
	c->owner = alloc_ids(ctx, n, &ok);
	c->head = alloc_ids(ctx, n, &ok);
	c->last = alloc_ids(ctx, n, &ok);
	c->acc = alloc_ids(ctx, n, &ok);
	c->group = ir_alloc(ctx, n * sizeof *c->group);
	c->slot_side = ir_alloc(ctx, n * sizeof *c->slot_side);
	c->side = ir_alloc(ctx, n * sizeof *c->side);
	return ok && c->group && c->slot_side && c->side;
}

/* One round: plans f's trees and rebuilds f if any has a group. */
static bool factor_round(ir_module *m, ir_func *f, bool *changed)
{
	fct c = {0};
	bool ok = fct_init(m->ctx, f, &c);
	*changed = false;
	if (!ok)
		ir_error(m->ctx, f->loc, "out of memory");
	else if (plan_func(&c)) {
		*changed = true;
		ok = rebuild_func(m, f, &c);
	}
	fct_fini(m->ctx, &c);
	return ok;
}

static bool factor_func(ir_module *m, ir_func *f)
{
	/* Each round that changes f removes a matmul, so this ends. */
	bool changed = true;
	while (changed)
		if (!factor_round(m, f, &changed))
			return false;
	return true;
}

bool pass_factor(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!factor_func(m, m->funcs[fi]))
			return false;
	return true;
}
