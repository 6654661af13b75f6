/*
 * remat.c - the "remat" pass: recomputing cheap activations instead of
 * keeping them (rematerialization; the recompute of Chen et al.'s
 * gradient checkpointing, XLA's and TVM's remat passes).
 *
 * A gradient function computes the forward, then the backward, and a
 * result that a backward kernel reads keeps its buffer from the forward
 * to that read: each layer norm's output, which the weight gradients of
 * the products after it multiply, lives through every later layer's
 * forward and backward. When the buffers it is computed from are alive
 * at that read anyway (the residual stream, which the layer norm's own
 * gradient reads later), a copy of its computation placed just before
 * the reader costs one pass over them and frees its buffer over
 * everything in between. The copy is the same tree of the same nodes as
 * the kernel that computed the original (its tree under the elementwise
 * fusion plan), so it computes the same bits. It has no random draws
 * (dropout's mask would be drawn anew) and no costly op (IR_OPF_COSTLY:
 * GELU's erf, whose copies would cost 1.4% of the width-256 GPT step's
 * kernel time).
 *
 * The copy is made for a reader that comes at least REMAT_GAP nodes after
 * the previous reader of the value (or the value itself); readers after
 * it read the copy.
 */
#include "graph.h"
#include "passes.h"

#include <stdlib.h>
#include <string.h>

/* A value is recomputed for a reader this many nodes after its previous
 * read: nearer, its buffer is freed too briefly to pay for a kernel. */
#define REMAT_GAP 32
/* ... and has rows (its last axis) of at least this many elements: in a
 * narrower model the kernel's call costs more than the bytes it frees
 * are worth. */
#define REMAT_MIN_ROW 256

typedef struct remat {
	const ir_graph *g;
	ir_id *into;       /* the elementwise fusion plan */
	pass_graph_uses u; /* users of every node */
	ir_id tree[PASS_FUSE_EW_MAX_NODES + 1]; /* the value's tree */
	uint32_t n_tree;
	ir_id *last;     /* per node: the last node whose kernel reads it */
	uint32_t *stamp; /* per node: the last tree walk that met it */
	uint32_t walk;
	ir_id *copy; /* per node: the copy its later readers read, or IR_NONE */
} remat;

/* Whether a kernel computing op is cheap next to the matmuls that read
 * its result: one pass over its operands (an elementwise tree, a layer
 * norm's rows). */
static bool is_cheap(ir_op op)
{
	return pass_fuse_ew_is_fusible(op) || op == IR_OP_LAYER_NORM;
}

static bool draws_random(const ir_node *n)
{
	ir_attr a = n->attr;
	double p = 0;
	return ir_attr_stream(ir_op_table[n->op].attr, &a, &p) != NULL;
}

/* Collects into r->tree the nodes the kernel of x computes (x and, down
 * its operands, what the plan fuses into it); false if the tree is too
 * big or draws random bits. */
static bool walk_tree(remat *r, ir_id x)
{
	if (r->stamp[x] == r->walk)
		return true;
	const ir_node *n = &r->g->nodes[x];
	if (r->n_tree == PASS_FUSE_EW_MAX_NODES || draws_random(n) ||
	    (ir_op_table[n->op].flags & IR_OPF_COSTLY))
		return false;
	r->stamp[x] = r->walk;
	r->tree[r->n_tree++] = x;
	for (uint32_t a = 0; a < r->g->nodes[x].n_args; a++) {
		ir_id y = ir_arg(r->g, x, a);
		if (pass_fuse_ew_is_in(r->into, y, x) && !walk_tree(r, y))
			return false;
	}
	return true;
}

/* Fills r->last: for each node, the last node whose kernel reads its
 * buffer (a fused reader is computed in its consumers' kernels, a view's
 * readers read its operand's buffer), or itself; an output's is past
 * the end. at is scratch. */
static void find_last_reads(remat *r, ir_id *at)
{
	const ir_graph *g = r->g;
	for (ir_id i = 0; i < g->n_nodes; i++)
		at[i] = r->into[i] == IR_NONE ? i : 0;
	for (ir_id c = g->n_nodes; c-- > 0;)
		for (uint32_t a = 0; a < g->nodes[c].n_args; a++) {
			ir_id x = ir_arg(g, c, a);
			if (pass_fuse_ew_is_in(r->into, x, c) && at[c] > at[x])
				at[x] = at[c];
		}
	for (ir_id i = g->n_nodes; i-- > 0;) {
		r->last[i] = i;
		for (uint32_t k = r->u.start[i]; k < r->u.start[i + 1]; k++) {
			ir_id c = r->u.list[k];
			bool is_view = ir_op_table[g->nodes[c].op].flags &
				       IR_OPF_VIEW;
			ir_id t = is_view ? r->last[c] : at[c];
			if (t > r->last[i])
				r->last[i] = t;
		}
		if (r->u.output[i] >= 0)
			r->last[i] = g->n_nodes;
	}
}

/* Whether node y (an operand of the tree, not in it) is alive at c
 * anyway: a leaf (parameter, input, constant) or a buffer read at or
 * after c. */
static bool alive_at(const remat *r, ir_id y, ir_id c)
{
	return (ir_op_table[r->g->nodes[y].op].flags & IR_OPF_LEAF) ||
	       r->last[y] >= c;
}

/* The length of t's last axis (a row of a (B, T, D) activation: D),
 * 0 when it is a run-time size. */
static int64_t row_elems(const ir_type *t)
{
	if (!t->rank || !ir_dim_is_static(t->dims[t->rank - 1]))
		return 0;
	return t->dims[t->rank - 1].coef;
}

/* The latest node before c that reads x, or x. */
static ir_id previous_read(const remat *r, ir_id x, ir_id c)
{
	ir_id prev = x;
	for (uint32_t k = r->u.start[x]; k < r->u.start[x + 1]; k++)
		if (r->u.list[k] < c && r->u.list[k] > prev)
			prev = r->u.list[k];
	return prev;
}

static int cmp_ids(const void *pa, const void *pb)
{
	ir_id x = *(const ir_id *)pa, y = *(const ir_id *)pb;
	return x < y ? -1 : x > y;
}

/* Whether c's read of x pays for a copy of x's tree (left in r->tree, in
 * node order). */
static bool pays(remat *r, ir_id x, ir_id c)
{
	const ir_node *n = &r->g->nodes[x];
	if (r->into[x] != IR_NONE || r->u.output[x] >= 0 || !is_cheap(n->op) ||
	    row_elems(&n->type) < REMAT_MIN_ROW ||
	    c - previous_read(r, x, c) < REMAT_GAP)
		return false;
	r->walk++;
	r->n_tree = 0;
	if (!walk_tree(r, x))
		return false;
	for (uint32_t t = 0; t < r->n_tree; t++)
		for (uint32_t a = 0; a < r->g->nodes[r->tree[t]].n_args; a++) {
			ir_id y = ir_arg(r->g, r->tree[t], a);
			if (r->stamp[y] != r->walk && !alive_at(r, y, c))
				return false;
		}
	qsort(r->tree, r->n_tree, sizeof *r->tree, cmp_ids);
	return true;
}

/* Emits a copy of r->tree into b, the tree's operands mapped as b maps
 * them; returns the copy of its root (the last node). */
static ir_id emit_copy(remat *r, pass_graph_builder *b)
{
	ir_id saved[PASS_FUSE_EW_MAX_NODES], root = IR_NONE;
	for (uint32_t t = 0; t < r->n_tree; t++) {
		saved[t] = b->map[r->tree[t]];
		root = pass_graph_copy(b, r->tree[t]);
		b->map[r->tree[t]] = root;
	}
	for (uint32_t t = 0; t < r->n_tree; t++)
		b->map[r->tree[t]] = saved[t];
	return root;
}

/* Copies node c into b, first copying the trees of the operands it
 * should read recomputed; the nodes after it read the copy too. */
static void visit(remat *r, pass_graph_builder *b, ir_id c)
{
	for (uint32_t a = 0; a < r->g->nodes[c].n_args; a++) {
		ir_id x = ir_arg(r->g, c, a);
		if (r->copy[x] == IR_NONE && pays(r, x, c)) {
			r->copy[x] = emit_copy(r, b);
			b->map[x] = r->copy[x];
		}
	}
	b->map[c] = pass_graph_copy(b, c);
}

static bool remat_func(ir_module *m, ir_func *f)
{
	uint32_t n = f->g.n_nodes;
	remat r = {.g = &f->g};
	r.into = ir_alloc(m->ctx, (n + 1) * sizeof *r.into);
	r.stamp = ir_alloc(m->ctx, (n + 1) * sizeof *r.stamp);
	r.copy = ir_alloc(m->ctx, (n + 1) * sizeof *r.copy);
	r.last = ir_alloc(m->ctx, (n + 1) * sizeof *r.last);
	pass_graph_builder b = {.m = m,
				.f = f,
				.map = ir_alloc(m->ctx, (n + 1) * sizeof *b.map)};
	bool ok = r.into && r.stamp && r.copy && r.last && b.map &&
		  pass_graph_uses_build(m->ctx, f, &r.u);
	if (!ok)
		ir_error(m->ctx, f->loc, "out of memory");
	ok = ok && pass_fuse_ew_plan(m, f, r.into);
	if (ok) {
		/* b.map serves as the scratch of the steps before the sweep */
		find_last_reads(&r, b.map);
		memset(r.stamp, 0, (n + 1) * sizeof *r.stamp);
		for (ir_id i = 0; i < n; i++)
			r.copy[i] = IR_NONE;
		for (ir_id i = 0; i < n && !b.is_failed; i++)
			visit(&r, &b, i);
		ok = pass_graph_finish(&b, "remat: cannot rewrite");
	}
	pass_graph_uses_fini(m->ctx, &r.u);
	ir_free(m->ctx, r.into);
	ir_free(m->ctx, r.stamp);
	ir_free(m->ctx, r.copy);
	ir_free(m->ctx, r.last);
	ir_free(m->ctx, b.map);
	return ok;
}

bool pass_remat(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!remat_func(m, m->funcs[fi]))
			return false;
	return true;
}
