/*
 * cg_fuse.c - elementwise fusion at lowering (docs/fusion.md): the trees
 * of fused nodes a kernel evaluates where it would read an operand.
 *
 * pass_fuse_ew_plan says which nodes fuse into which consumer. For each
 * kernel, every operand becomes a tree: a leaf reading a buffer, or the
 * fused node computed from its own operands' trees, down to the buffers
 * the fused nodes read. Each leaf is addressed by its own strides,
 * expressed per axis of the kernel's operand: the consumer's index into
 * the operand maps to an index into every node of the tree through
 * broadcasting (a stretched axis reads index 0), permutes (an axis
 * renamed) and slices (an axis read from its start, by its step), so a
 * leaf's stride along an operand axis is the sum of its dense strides
 * along the axes that take their index from it, times their steps, and
 * its base the sum of its dense strides times the slices' starts. The
 * consumer then walks each leaf as one more array of its loop nest
 * (cg_nest_add_operand), and its loop body computes the tree where it
 * loaded the operand (cg_kernel_operand).
 */
#include "cg_lower.h"

#include <assert.h>
#include <string.h>

/* The state of building one kernel's trees. */
typedef struct tree_build {
	const cg_lower *L;
	const ir_graph *g;
	const ir_id *into;
	cg_trees *t;
	uint32_t start; /* the first tree node of the operand being built */
	bool is_full;
} tree_build;

/* How a node of a tree is indexed from the kernel's operand index i:
 * along its axis j, at off[j] + mul[j] * i[ax[j]] (ax[j] -1: at 0). */
typedef struct axis_map {
	int ax[IR_MAX_RANK];
	int64_t mul[IR_MAX_RANK], off[IR_MAX_RANK];
} axis_map;

/* The axis map of node x's operand c, from x's map. */
static void child_axes(const tree_build *b, ir_id x, ir_id c,
		       const axis_map *from, axis_map *to)
{
	const ir_node *n = &b->g->nodes[x];
	int64_t cd[IR_MAX_RANK];
	int rc = cg_lower_dims(b->L, &b->g->nodes[c].type, cd);
	if (n->op == IR_OP_PERMUTE) {
		for (int i = 0; i < rc; i++) {
			int p = n->attr.permute.perm[i];
			to->ax[p] = from->ax[i];
			to->mul[p] = from->mul[i];
			to->off[p] = from->off[i];
		}
		return;
	}
	int rn = n->type.rank;
	for (int j = 0; j < rc; j++) {
		int i = j + rn - rc;
		bool one = cd[j] == 1;
		to->ax[j] = one ? -1 : from->ax[i];
		to->mul[j] = one ? 0 : from->mul[i];
		to->off[j] = one ? 0 : from->off[i];
	}
	if (n->op == IR_OP_SLICE && cd[n->attr.slice.axis] != 1) {
		int a = n->attr.slice.axis;
		to->off[a] = n->attr.slice.start +
			     n->attr.slice.step * to->off[a];
		to->mul[a] *= n->attr.slice.step;
	}
}

/* Strides, per kernel operand axis, and base of node x's dense elements
 * read through the axis map m. */
static void map_strides(const tree_build *b, ir_id x, const axis_map *m,
			cg_tree_node *tn)
{
	int64_t d[IR_MAX_RANK], s[IR_MAX_RANK];
	int r = cg_lower_dims(b->L, &b->g->nodes[x].type, d);
	cg_lower_strides(d, r, s);
	memset(tn->t, 0, sizeof tn->t);
	tn->base = 0;
	for (int j = 0; j < r; j++) {
		if (d[j] == 1)
			continue;
		if (m->ax[j] >= 0)
			tn->t[m->ax[j]] += m->mul[j] * s[j];
		tn->base += m->off[j] * s[j];
	}
}

static uint32_t new_node(tree_build *b, ir_id x)
{
	if (b->t->n_nodes == CG_TREE_MAX) {
		b->is_full = true;
		return 0;
	}
	cg_tree_node *n = &b->t->n[b->t->n_nodes];
	memset(n, 0, sizeof *n);
	n->id = x;
	return b->t->n_nodes++;
}

/* The earlier leaf of this operand's tree that reads node x's elements
 * as leaf tn does, or tn's own index me (a node read twice in one tree,
 * as GELU's forward reads x, is one array and one parameter). */
static uint32_t same_leaf(const tree_build *b, ir_id x, const cg_tree_node *tn,
			  uint32_t me)
{
	for (uint32_t i = b->start; i < me; i++) {
		const cg_tree_node *o = &b->t->n[i];
		if (o->is_leaf && o->id == x && o->first == i &&
		    o->base == tn->base && memcmp(o->t, tn->t, sizeof o->t) == 0)
			return i;
	}
	return me;
}

/* The pointer parameter of an earlier leaf of the kernel's trees that
 * reads node x's buffer, whatever its strides and its operand, or
 * UINT32_MAX. One buffer read through two operands' trees (GELU's
 * backward reads x = mm + bias and g in both terms of its add) is then
 * one pointer: where the two leaves also walk it alike, LLVM sees the
 * same address and loads it once, and the values computed from it
 * (x, erf's argument) once. */
static uint32_t same_buffer(const tree_build *b, ir_id x, uint32_t me)
{
	for (uint32_t i = 0; i < me; i++) {
		const cg_tree_node *o = &b->t->n[i];
		if (o->is_leaf && o->id == x)
			return o->param;
	}
	return UINT32_MAX;
}

/* The tree of node x, read by its consumer user through axis map m; a
 * leaf gets pointer param (a new one when param is UINT32_MAX, unless an
 * earlier leaf of the tree reads the same elements). */
static uint32_t build(tree_build *b, ir_id x, ir_id user, const axis_map *m,
		      uint32_t param)
{
	uint32_t me = new_node(b, x);
	if (b->is_full)
		return 0;
	cg_tree_node *tn = &b->t->n[me];
	map_strides(b, x, m, tn);
	if (!b->into || !pass_fuse_ew_is_in(b->into, x, user)) {
		tn->is_leaf = true;
		if (param != UINT32_MAX) {
			tn->first = me;
			tn->param = param;
			return me;
		}
		tn->first = same_leaf(b, x, tn, me);
		tn->param = tn->first != me ? b->t->n[tn->first].param
					    : same_buffer(b, x, me);
		if (tn->param == UINT32_MAX)
			tn->param = b->t->n_par++;
		return me;
	}
	const ir_node *n = &b->g->nodes[x];
	for (uint32_t a = 0; a < n->n_args; a++) {
		axis_map cm;
		ir_id c = ir_arg(b->g, x, a);
		child_axes(b, x, c, m, &cm);
		uint32_t k = build(b, c, x, &cm, UINT32_MAX);
		b->t->n[me].kid[a] = k;
	}
	return me;
}

bool cg_trees_build(const cg_lower *L, const ir_graph *g, ir_id id,
		    const ir_id *into, cg_trees *t)
{
	const ir_node *n = &g->nodes[id];
	tree_build b = {L, g, into, t, 0, false};
	if (n->n_args > CG_KERNEL_MAX_IN) {
		ir_error(L->ctx, n->loc,
			 "codegen: %s: %u operands, at most %d "
			 "are supported",
			 ir_op_table[n->op].name, n->n_args, CG_KERNEL_MAX_IN);
		return false;
	}
	t->n_nodes = 0;
	t->n_par = n->n_args;
	for (uint32_t i = 0; i < n->n_args && !b.is_full; i++) {
		axis_map m;
		for (int j = 0; j < IR_MAX_RANK; j++) {
			m.ax[j] = j;
			m.mul[j] = 1;
			m.off[j] = 0;
		}
		b.start = t->n_nodes;
		t->opnd[i] = build(&b, ir_arg(g, id, i), id, &m, i);
	}
	if (b.is_full || t->n_par > CG_KERNEL_MAX_IN) {
		ir_error(L->ctx, n->loc,
			 "codegen: %s: its fused operands need "
			 "more than %d tree nodes or %d pointers",
			 ir_op_table[n->op].name, CG_TREE_MAX, CG_KERNEL_MAX_IN);
		return false;
	}
	return true;
}

static bool same_tree_node(const cg_lower *L, const ir_graph *ga,
			   const cg_tree_node *a, const ir_graph *gb,
			   const cg_tree_node *b)
{
	const ir_node *na = &ga->nodes[a->id], *nb = &gb->nodes[b->id];
	if (a->is_leaf != b->is_leaf || memcmp(a->t, b->t, sizeof a->t) != 0 ||
	    a->base != b->base || !cg_lower_same_type(L, &na->type, &nb->type))
		return false;
	if (a->is_leaf)
		return a->param == b->param;
	return na->op == nb->op && na->n_args == nb->n_args &&
	       cg_lower_same_attr(na, nb) &&
	       memcmp(a->kid, b->kid, sizeof a->kid) == 0;
}

bool cg_trees_eq(const cg_lower *L, const ir_graph *ga, const cg_trees *a,
		 const ir_graph *gb, const cg_trees *b)
{
	if (a->n_nodes != b->n_nodes || a->n_par != b->n_par)
		return false;
	for (uint32_t i = 0; i < a->n_nodes; i++)
		if (!same_tree_node(L, ga, &a->n[i], gb, &b->n[i]))
			return false;
	return true;
}

static bool is_fused_dropout(const cg_kernel *k, const cg_tree_node *tn)
{
	return !tn->is_leaf && k->g->nodes[tn->id].op == IR_OP_DROPOUT;
}

void cg_kernel_trees_begin(cg_kernel *k)
{
	for (uint32_t i = 0; i < k->tr.n_nodes; i++) {
		const cg_tree_node *tn = &k->tr.n[i];
		if (!is_fused_dropout(k, tn) ||
		    k->g->nodes[tn->id].attr.dropout.p <= 0)
			continue;
		if (!k->is_train)
			k->is_train = cg_kernel_is_training(k);
		k->key[i] = cg_lower_dropout_key(
			k, k->g->nodes[tn->id].attr.dropout.stream);
	}
}

static void add_arrays(cg_kernel *k, cg_nest *n, uint32_t x, const int *ax,
		       int inner_ax)
{
	cg_tree_node *tn = &k->tr.n[x];
	if (tn->is_leaf && tn->first != x) {
		tn->arr = k->tr.n[tn->first].arr;
		tn->inner = k->tr.n[tn->first].inner;
		return;
	}
	if (tn->is_leaf || is_fused_dropout(k, tn)) {
		int a = n->n_arr++;
		for (int d = 0; d < n->rank; d++)
			n->strides[a][d] = ax[d] >= 0 ? tn->t[ax[d]] : 0;
		n->base[a] = tn->base;
		tn->arr = a;
		tn->inner = inner_ax >= 0 ? tn->t[inner_ax] : 0;
	}
	if (tn->is_leaf)
		return;
	for (uint32_t c = 0; c < k->g->nodes[tn->id].n_args; c++)
		add_arrays(k, n, tn->kid[c], ax, inner_ax);
}

void cg_nest_add_operand(cg_kernel *k, cg_nest *n, uint32_t i, const int *ax,
			 int inner_ax)
{
	cg_nest_add_tree(k, n, k->tr.opnd[i], ax, inner_ax);
}

void cg_nest_add_tree(cg_kernel *k, cg_nest *n, uint32_t x, const int *ax,
		      int inner_ax)
{
	add_arrays(k, n, x, ax, inner_ax);
	assert(n->n_arr <= CG_NEST_ARRS);
}

void cg_kernel_ew_axes(const cg_kernel *k, uint32_t i, int *ax)
{
	int64_t od[IR_MAX_RANK], xd[IR_MAX_RANK];
	int R = cg_lower_dims(k->L, &k->node->type, od);
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, i), xd);
	for (int d = 0; d < R; d++) {
		int j = d - (R - r);
		ax[d] = j >= 0 && xd[j] != 1 ? j : -1;
	}
}

/* Offset of a leaf or fused dropout at the nest point, inner index j. */
static LLVMValueRef offset_of(cg_kernel *k, const cg_tree_node *tn,
			      LLVMValueRef *offs, LLVMValueRef j)
{
	LLVMValueRef at = offs[tn->arr];
	if (j && tn->inner)
		at = cg_add(&k->f, at,
			    tn->inner == 1 ? j : cg_muli(&k->f, j, tn->inner));
	return at;
}

/* The values of one operand's tree computed so far at one point of the
 * loop body, so that a node occurring twice there is computed once. */
typedef struct tree_eval {
	cg_kernel *k;
	LLVMValueRef *offs, j;
	uint32_t start; /* the operand's first tree node */
	LLVMValueRef val[CG_TREE_MAX];
} tree_eval;

/* Whether tree nodes a and b compute the same IR node at the same
 * elements (so the same values, a dropout the same bits). */
static bool same_place(const cg_tree_node *a, const cg_tree_node *b)
{
	return a->id == b->id && a->is_leaf == b->is_leaf &&
	       a->base == b->base && memcmp(a->t, b->t, sizeof a->t) == 0;
}

static LLVMValueRef compute(tree_eval *e, uint32_t x);

static LLVMValueRef eval(tree_eval *e, uint32_t x)
{
	const cg_tree_node *tn = &e->k->tr.n[x];
	for (uint32_t i = e->start; i < x; i++)
		if (e->val[i] && same_place(&e->k->tr.n[i], tn))
			return e->val[x] = e->val[i];
	return e->val[x] = compute(e, x);
}

static LLVMValueRef compute(tree_eval *e, uint32_t x)
{
	cg_kernel *k = e->k;
	const cg_tree_node *tn = &k->tr.n[x];
	const ir_node *n = &k->g->nodes[tn->id];
	if (tn->is_leaf)
		return cg_lower_load(&k->f, n->type.dtype, k->in[tn->param],
				     offset_of(k, tn, e->offs, e->j));
	LLVMValueRef v[3];
	for (uint32_t a = 0; a < n->n_args; a++)
		v[a] = eval(e, tn->kid[a]);
	if (n->op == IR_OP_PERMUTE || n->op == IR_OP_BROADCAST ||
	    n->op == IR_OP_SLICE)
		return v[0];
	if (n->op == IR_OP_DROPOUT)
		return n->attr.dropout.p <= 0
			       ? v[0]
			       : cg_lower_dropout_value(&k->f, n->attr.dropout.p,
							k->key[x], k->is_train,
							offset_of(k, tn,
								  e->offs, e->j),
							v[0]);
	ir_dtype in = k->g->nodes[k->tr.n[tn->kid[n->op == IR_OP_SELECT]].id]
			      .type.dtype;
	return cg_lower_ew_value(&k->f, n, in, v);
}

LLVMValueRef cg_kernel_operand(cg_kernel *k, uint32_t i, LLVMValueRef *offs,
			       LLVMValueRef j)
{
	return cg_kernel_tree(k, k->tr.opnd[i], offs, j);
}

LLVMValueRef cg_kernel_tree(cg_kernel *k, uint32_t x, LLVMValueRef *offs,
			    LLVMValueRef j)
{
	tree_eval e;
	e.k = k;
	e.offs = offs;
	e.j = j;
	e.start = x;
	for (uint32_t y = e.start; y < k->tr.n_nodes; y++)
		e.val[y] = NULL;
	return eval(&e, e.start);
}
