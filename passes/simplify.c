/*
 * simplify.c - the "simplify" pass: algebraic identities that remove work
 * or layout changes without changing a single result bit.
 *
 *   permute(permute(x, p), q)  -> permute(x, p∘q); identity permute -> x
 *   reshape(reshape(x))        -> reshape(x); reshape to x's type -> x
 *   x*1, 1*x, x/1, x+0, 0+x, x-0 -> x, when the constant is all exactly 1
 *                                 (or 0) and does not broadcast x
 *   neg(neg(x))                -> x
 *   matmul(permute(a, ..., last two swapped), b) -> matmul(a, b) with ta
 *                                 toggled (and likewise for b and tb)
 *   cast(x) to x's dtype, broadcast(x) to x's type -> x
 *   dropout(x) with p = 0      -> x (it keeps every element, times 1)
 *
 * Nodes are visited in order; a rule either names a replacement that
 * precedes the node (recorded in a remap) or edits the node in place, so
 * chains collapse in one sweep. The sweep repeats until nothing changes,
 * then the graph is compacted and the constants no longer used dropped.
 */
#include "passes.h"

#include <string.h>

typedef struct simp {
	ir_module *m;
	ir_func *f;
	ir_id *repl; /* per node: what stands for it (itself if kept) */
} simp;

static ir_node *node(const simp *s, ir_id id)
{
	return &s->f->g.nodes[id];
}

static ir_id *operands(const simp *s, ir_id id)
{
	return s->f->g.args + s->f->g.nodes[id].first_arg;
}

/* True if node id is a CONST whose every element equals v exactly. */
static bool is_const_all(const simp *s, ir_id id, double v)
{
	const ir_node *n = node(s, id);
	if (n->op != IR_OP_CONST || n->attr.const_index >= s->m->n_consts)
		return false;
	const ir_const *c = &s->m->consts[n->attr.const_index];
	int64_t numel = ir_type_numel_static(&c->type);
	for (int64_t i = 0; i < numel; i++) {
		double x = 0;
		switch (c->type.dtype) {
		case IR_F32:
			x = ((const float *)c->data)[i];
			break;
		case IR_I32:
			x = ((const int32_t *)c->data)[i];
			break;
		case IR_F64:
			x = ((const double *)c->data)[i];
			break;
		}
		if (x != v)
			return false;
	}
	return true;
}

static bool same_type(const simp *s, ir_id a, ir_id b)
{
	return ir_type_eq(&node(s, a)->type, &node(s, b)->type);
}

static bool is_identity_perm(const uint8_t *perm, int rank)
{
	for (int i = 0; i < rank; i++)
		if (perm[i] != i)
			return false;
	return true;
}

/* x op c -> x when c is all `unit` and the result has x's type; for
 * commutative ops also c op x. Returns the replacement or IR_NONE. */
static ir_id unit_operand(const simp *s, ir_id id, double unit,
			  bool is_commutative)
{
	const ir_id *args = operands(s, id);
	if (is_const_all(s, args[1], unit) && same_type(s, id, args[0]))
		return args[0];
	if (is_commutative && is_const_all(s, args[0], unit) &&
	    same_type(s, id, args[1]))
		return args[1];
	return IR_NONE;
}

/* permute(permute(x, p), q): output axis i reads x's axis p[q[i]]. */
static ir_id simplify_permute(const simp *s, ir_id id)
{
	ir_node *n = node(s, id);
	ir_id *arg = operands(s, id);
	const ir_node *inner = node(s, *arg);
	if (inner->op == IR_OP_PERMUTE) {
		uint8_t comp[IR_MAX_RANK];
		for (int i = 0; i < n->type.rank; i++)
			comp[i] = inner->attr.permute
					  .perm[n->attr.permute.perm[i]];
		memcpy(n->attr.permute.perm, comp, n->type.rank);
		*arg = operands(s, *arg)[0];
	}
	if (is_identity_perm(n->attr.permute.perm, n->type.rank) &&
	    same_type(s, id, *arg))
		return *arg;
	return inner->op == IR_OP_PERMUTE ? id : IR_NONE;
}

static ir_id simplify_reshape(const simp *s, ir_id id)
{
	ir_id *arg = operands(s, id);
	bool is_nested = node(s, *arg)->op == IR_OP_RESHAPE;
	if (is_nested)
		*arg = operands(s, *arg)[0];
	if (same_type(s, id, *arg))
		return *arg;
	return is_nested ? id : IR_NONE;
}

static bool is_last_two_swap(const ir_node *n)
{
	int r = n->type.rank;
	if (n->op != IR_OP_PERMUTE || r < 2)
		return false;
	for (int i = 0; i < r - 2; i++)
		if (n->attr.permute.perm[i] != i)
			return false;
	return n->attr.permute.perm[r - 2] == r - 1 &&
	       n->attr.permute.perm[r - 1] == r - 2;
}

/* A transposing permute feeding a matmul becomes the matmul's flag. */
static ir_id simplify_matmul(const simp *s, ir_id id)
{
	ir_node *n = node(s, id);
	ir_id *args = operands(s, id);
	bool changed = false;
	if (is_last_two_swap(node(s, args[0]))) {
		args[0] = operands(s, args[0])[0];
		n->attr.matmul.ta = !n->attr.matmul.ta;
		changed = true;
	}
	if (is_last_two_swap(node(s, args[1]))) {
		args[1] = operands(s, args[1])[0];
		n->attr.matmul.tb = !n->attr.matmul.tb;
		changed = true;
	}
	return changed ? id : IR_NONE;
}

/* The identities ops.def gives an elementwise op: op(op(x)) -> x for a
 * self-inverse unary op (neg); x op u -> x for a unit u (0 for add and
 * sub, 1 for mul and div), also u op x for a commutative op. */
static ir_id simplify_elementwise(const simp *s, ir_id id)
{
	ir_op op = node(s, id)->op;
	unsigned flags = ir_op_table[op].flags;
	bool is_commutative = flags & IR_OPF_COMMUTES;
	if (flags & IR_OPF_SELF_INVERSE) {
		ir_id x = operands(s, id)[0];
		return node(s, x)->op == op ? operands(s, x)[0] : IR_NONE;
	}
	if (flags & IR_OPF_UNIT_0)
		return unit_operand(s, id, 0.0, is_commutative);
	if (flags & IR_OPF_UNIT_1)
		return unit_operand(s, id, 1.0, is_commutative);
	return IR_NONE;
}

/* Returns the node that replaces id, id itself if it was edited in place,
 * or IR_NONE if no rule applies. */
static ir_id simplify_node(const simp *s, ir_id id)
{
	switch (node(s, id)->op) {
	case IR_OP_PERMUTE:
		return simplify_permute(s, id);
	case IR_OP_RESHAPE:
		return simplify_reshape(s, id);
	case IR_OP_MATMUL:
		return simplify_matmul(s, id);
#include "ops_ew.def"
		return simplify_elementwise(s, id);
	case IR_OP_CAST:
	case IR_OP_BROADCAST:
		if (same_type(s, id, operands(s, id)[0]))
			return operands(s, id)[0];
		return IR_NONE;
	case IR_OP_DROPOUT:
		/* keeps every element, scaled by 1 / (1 - 0) */
		return node(s, id)->attr.dropout.p <= 0 ? operands(s, id)[0]
							: IR_NONE;
	case IR_OP_INPUT:
	case IR_OP_PARAM:
	case IR_OP_CONST:
	case IR_OP_ARANGE:
	case IR_OP_SELECT:
	case IR_OP_SUM:
	case IR_OP_MEAN:
	case IR_OP_MAX:
	case IR_OP_ARGMAX:
	case IR_OP_ARGMIN:
	case IR_OP_SOFTMAX:
	case IR_OP_LOG_SOFTMAX:
	case IR_OP_MASKED_SOFTMAX:
	case IR_OP_LAYER_NORM:
	case IR_OP_LAYER_NORM_GRAD:
	case IR_OP_EMBEDDING:
	case IR_OP_ONE_HOT:
	case IR_OP_EMBEDDING_GRAD:
	case IR_OP_SLICE:
	case IR_OP_CONCAT:
	case IR_OP_REPEAT:
	case IR_OP_REPEAT_INTERLEAVE:
	case IR_OP_SORT:
	case IR_OP_SORT_GRAD:
	case IR_OP_MSE_LOSS:
	case IR_OP_CROSS_ENTROPY:
	case IR_OP_CROSS_ENTROPY_GRAD:
	case IR_OP_CROSS_ENTROPY_WITH_GRAD:
	case IR_OP_FUSED_ATTENTION:
	case IR_OP_FUSED_ATTENTION_GRAD:
	case IR_OP_FUSED_ADDITIVE_ATTENTION:
	case IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD:
	case IR_OP_COUNT:
		return IR_NONE;
	}
	return IR_NONE;
}

/* One forward sweep; operands are first redirected to their stand-ins so
 * the rules see the graph as already simplified. */
static bool sweep(simp *s)
{
	ir_graph *g = &s->f->g;
	bool changed = false;
	for (ir_id i = 0; i < g->n_nodes; i++) {
		ir_id *args = operands(s, i);
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++)
			args[a] = s->repl[args[a]];
		if (s->repl[i] != i)
			continue;
		ir_id r = simplify_node(s, i);
		if (r == IR_NONE)
			continue;
		s->repl[i] = r;
		changed = true;
	}
	for (uint32_t o = 0; o < s->f->n_outputs; o++)
		s->f->outputs[o] = s->repl[s->f->outputs[o]];
	return changed;
}

static bool simplify_func(ir_module *m, ir_func *f)
{
	simp s = {m, f, ir_alloc(m->ctx, (f->g.n_nodes + 1) * sizeof *s.repl)};
	if (!s.repl) {
		ir_error(m->ctx, f->loc, "out of memory");
		return false;
	}
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		s.repl[i] = i;
	/* Each change removes a node from use or an operand edge, so the
	 * sweeps end; the bound only guards against a rule that oscillates. */
	for (uint32_t round = 0; round < f->g.n_nodes + 1 && sweep(&s); round++)
		;
	bool ok = pass_graph_compact(m, f, s.repl);
	ir_free(m->ctx, s.repl);
	return ok;
}

bool pass_simplify(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!simplify_func(m, m->funcs[fi]))
			return false;
	return pass_module_drop_unused_consts(m);
}
