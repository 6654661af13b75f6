/*
 * cse.c - the "cse" pass: common subexpression elimination.
 *
 * First, constants with identical type and data are merged module-wide,
 * so that two `const` nodes for the same numbers become one. Then, per
 * function, nodes are visited in order and hashed on (op, type, operands
 * after remapping, live attribute variant); a node equal to an earlier one
 * is replaced by it. Attributes are compared field by field on the variant
 * the op carries, never as the whole union, whose unused bytes may hold
 * anything. INPUT nodes are never merged: each is an argument. Two dropout
 * nodes merge only if they read the same value with the same stream, when
 * they draw the same mask anyway.
 */
#include "passes.h"

#include <string.h>

/* FNV-1a over bytes, chained through h. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 1099511628211ull;
	}
	return h;
}

#define HASH_SEED 14695981039346656037ull
#define HASH_FIELD(h, x) hash_bytes((h), &(x), sizeof(x))

static uint64_t hash_type(uint64_t h, const ir_type *t)
{
	h = HASH_FIELD(h, t->dtype);
	h = HASH_FIELD(h, t->rank);
	for (int i = 0; i < t->rank; i++) {
		h = HASH_FIELD(h, t->dims[i].coef);
		if (t->dims[i].coef != 0)
			h = HASH_FIELD(h, t->dims[i].sym);
	}
	return h;
}

/* Hashes the variant of a the op's table row says is live. */
static uint64_t hash_attr(uint64_t h, ir_op op, const ir_attr *a, int rank)
{
	switch (ir_op_table[op].attr) {
	case IR_ATTR_NONE:
		return h;
	case IR_ATTR_INPUT:
		return HASH_FIELD(h, a->input_index);
	case IR_ATTR_PARAM:
		return HASH_FIELD(h, a->param_index);
	case IR_ATTR_CONST:
		return HASH_FIELD(h, a->const_index);
	case IR_ATTR_MATMUL:
		h = HASH_FIELD(h, a->matmul.ta);
		return HASH_FIELD(h, a->matmul.tb);
	case IR_ATTR_REDUCE:
		h = HASH_FIELD(h, a->reduce.axes);
		return HASH_FIELD(h, a->reduce.keepdim);
	case IR_ATTR_FILL:
		return HASH_FIELD(h, a->fill);
	case IR_ATTR_EPS:
		return HASH_FIELD(h, a->eps);
	case IR_ATTR_DROPOUT:
		h = HASH_FIELD(h, a->dropout.p);
		return HASH_FIELD(h, a->dropout.stream);
	case IR_ATTR_PERM:
		return hash_bytes(h, a->permute.perm, (size_t)rank);
	case IR_ATTR_SLICE:
		h = HASH_FIELD(h, a->slice.axis);
		h = HASH_FIELD(h, a->slice.start);
		h = HASH_FIELD(h, a->slice.end);
		return HASH_FIELD(h, a->slice.step);
	case IR_ATTR_AXIS:
		return HASH_FIELD(h, a->axis);
	case IR_ATTR_REPS:
		return hash_bytes(h, a->repeat.reps,
				  (size_t)rank * sizeof(int64_t));
	case IR_ATTR_INTERLEAVE:
		h = HASH_FIELD(h, a->interleave.axis);
		return HASH_FIELD(h, a->interleave.n);
	case IR_ATTR_ATTENTION:
		h = HASH_FIELD(h, a->attention.scale);
		h = HASH_FIELD(h, a->attention.fill);
		h = HASH_FIELD(h, a->attention.p);
		h = HASH_FIELD(h, a->attention.heads);
		return HASH_FIELD(h, a->attention.stream);
	case IR_ATTR_ARANGE:
		h = HASH_FIELD(h, a->arange.start);
		return HASH_FIELD(h, a->arange.step);
	}
	return h;
}

#define SAME(x) (memcmp(&a->x, &b->x, sizeof a->x) == 0)

/* Compares the live variant; floats bitwise, so a NaN fill equals itself
 * and -0.0 stays apart from 0.0. rank is the node's (the permute's, the
 * repeat's), which bounds the live part of the arrays. */
static bool attr_equal(ir_op op, const ir_attr *a, const ir_attr *b, int rank)
{
	switch (ir_op_table[op].attr) {
	case IR_ATTR_NONE:
		return true;
	case IR_ATTR_INPUT:
		return SAME(input_index);
	case IR_ATTR_PARAM:
		return SAME(param_index);
	case IR_ATTR_CONST:
		return SAME(const_index);
	case IR_ATTR_MATMUL:
		return SAME(matmul.ta) && SAME(matmul.tb);
	case IR_ATTR_REDUCE:
		return SAME(reduce.axes) && SAME(reduce.keepdim);
	case IR_ATTR_FILL:
		return SAME(fill);
	case IR_ATTR_EPS:
		return SAME(eps);
	case IR_ATTR_DROPOUT:
		return SAME(dropout.p) && SAME(dropout.stream);
	case IR_ATTR_PERM:
		return memcmp(a->permute.perm, b->permute.perm, (size_t)rank) ==
		       0;
	case IR_ATTR_SLICE:
		return SAME(slice.axis) && SAME(slice.start) &&
		       SAME(slice.end) && SAME(slice.step);
	case IR_ATTR_AXIS:
		return SAME(axis);
	case IR_ATTR_REPS:
		return memcmp(a->repeat.reps, b->repeat.reps,
			      (size_t)rank * sizeof(int64_t)) == 0;
	case IR_ATTR_INTERLEAVE:
		return SAME(interleave.axis) && SAME(interleave.n);
	case IR_ATTR_ATTENTION:
		return SAME(attention.scale) && SAME(attention.fill) &&
		       SAME(attention.p) && SAME(attention.stream) &&
		       SAME(attention.heads);
	case IR_ATTR_ARANGE:
		return SAME(arange.start) && SAME(arange.step);
	}
	return false;
}

#undef SAME

static uint64_t hash_node(const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	uint64_t h = HASH_FIELD(HASH_SEED, n->op);
	h = hash_type(h, &n->type);
	h = hash_attr(h, n->op, &n->attr, n->type.rank);
	return hash_bytes(h, ir_node_args(g, n), n->n_args * sizeof(ir_id));
}

static bool node_equal(const ir_graph *g, ir_id x, ir_id y)
{
	const ir_node *a = &g->nodes[x], *b = &g->nodes[y];
	return a->op == b->op && a->n_args == b->n_args &&
	       ir_type_eq(&a->type, &b->type) &&
	       attr_equal(a->op, &a->attr, &b->attr, a->type.rank) &&
	       memcmp(ir_node_args(g, a), ir_node_args(g, b),
		      a->n_args * sizeof(ir_id)) == 0;
}

/* An open-addressing table of node ids keyed by hash_node. */
typedef struct node_table {
	ir_id *slots; /* IR_NONE = empty */
	uint32_t mask;
} node_table;

static bool table_init(ir_ctx *ctx, node_table *t, uint32_t n)
{
	uint32_t cap = 16;
	while (cap < 2 * n)
		cap *= 2;
	t->slots = ir_alloc(ctx, cap * sizeof *t->slots);
	t->mask = cap - 1;
	if (t->slots)
		memset(t->slots, 0xff, cap * sizeof *t->slots);
	return t->slots != NULL;
}

/* Returns the earlier node equal to id, or id after inserting it. */
static ir_id table_intern(node_table *t, const ir_graph *g, ir_id id)
{
	for (uint64_t i = hash_node(g, id);; i++) {
		ir_id *slot = &t->slots[i & t->mask];
		if (*slot == IR_NONE) {
			*slot = id;
			return id;
		}
		if (node_equal(g, *slot, id))
			return *slot;
	}
}

static bool cse_func(ir_module *m, ir_func *f)
{
	ir_graph *g = &f->g;
	node_table t;
	ir_id *repl = ir_alloc(m->ctx, (g->n_nodes + 1) * sizeof *repl);
	bool ok = repl && table_init(m->ctx, &t, g->n_nodes);
	if (!ok) {
		ir_free(m->ctx, repl);
		ir_error(m->ctx, f->loc, "out of memory");
		return false;
	}
	for (ir_id i = 0; i < g->n_nodes; i++) {
		ir_node *n = &g->nodes[i];
		ir_id *args = g->args + n->first_arg;
		for (uint32_t a = 0; a < n->n_args; a++)
			args[a] = repl[args[a]];
		repl[i] = n->op == IR_OP_INPUT ? i : table_intern(&t, g, i);
	}
	ok = pass_graph_compact(m, f, repl);
	ir_free(m->ctx, t.slots);
	ir_free(m->ctx, repl);
	return ok;
}

/* ---- constants ------------------------------------------------------------- */

static size_t const_bytes(const ir_const *c)
{
	return (size_t)ir_type_numel_static(&c->type) *
	       ir_dtype_size(c->type.dtype);
}

static uint64_t hash_const(const ir_const *c)
{
	return hash_bytes(hash_type(HASH_SEED, &c->type), c->data,
			  const_bytes(c));
}

static bool const_equal(const ir_const *a, const ir_const *b)
{
	return ir_type_eq(&a->type, &b->type) &&
	       memcmp(a->data, b->data, const_bytes(a)) == 0;
}

/* canon[c] = the first constant equal to c. */
static void find_const_twins(const ir_module *m, node_table *t, uint32_t *canon)
{
	for (uint32_t c = 0; c < m->n_consts; c++) {
		uint64_t i = hash_const(&m->consts[c]);
		for (;; i++) {
			ir_id *slot = &t->slots[i & t->mask];
			if (*slot == IR_NONE) {
				*slot = canon[c] = c;
				break;
			}
			if (const_equal(&m->consts[*slot], &m->consts[c])) {
				canon[c] = *slot;
				break;
			}
		}
	}
}

static void use_canonical_consts(ir_module *m, const uint32_t *canon)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
		ir_func *f = m->funcs[fi];
		for (uint32_t i = 0; i < f->g.n_nodes; i++) {
			ir_node *n = &f->g.nodes[i];
			if (n->op == IR_OP_CONST)
				n->attr.const_index = canon[n->attr.const_index];
		}
		for (uint32_t i = 0; f->example && i < f->n_inputs; i++)
			f->example[i] = canon[f->example[i]];
	}
}

/* Points every use of a constant at the first identical one; the others
 * become unused and are dropped. */
static bool merge_consts(ir_module *m)
{
	node_table t;
	uint32_t *canon = ir_alloc(m->ctx, (m->n_consts + 1) * sizeof *canon);
	if (!canon || !table_init(m->ctx, &t, m->n_consts)) {
		ir_free(m->ctx, canon);
		ir_error(m->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	find_const_twins(m, &t, canon);
	use_canonical_consts(m, canon);
	ir_free(m->ctx, t.slots);
	ir_free(m->ctx, canon);
	return pass_module_drop_unused_consts(m);
}

bool pass_cse(ir_module *m)
{
	if (!merge_consts(m))
		return false;
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!cse_func(m, m->funcs[fi]))
			return false;
	return true;
}
