/*
 * fold.c - the "fold" pass: evaluates at compile time every node whose
 * operands are all constants, and puts a constant in its place.
 *
 * Evaluation goes through the reference interpreter (interp_eval_node) in
 * float32, so a folded value is bit for bit what a run would compute.
 * Nodes are visited in order and turned into CONST nodes in place, so a
 * chain of constant arithmetic folds in one sweep. Not folded: DROPOUT
 * (random at run time), nodes whose type has a run-time symbol, and results
 * of more than PASS_FOLD_MAX_ELEMENTS elements (a broadcast of a scalar to
 * a huge shape would otherwise bloat the module). Afterwards the operands
 * no longer needed are dropped, and so are the constants nothing uses.
 */
#include "passes.h"

#include "interp.h"

#include <string.h>

#define PASS_FOLD_MAX_ELEMENTS (1 << 20)

static bool is_foldable(const ir_module *m, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	if (ir_op_table[n->op].flags & IR_OPF_LEAF || n->op == IR_OP_DROPOUT)
		return false;
	int64_t numel = ir_type_numel_static(&n->type);
	if (numel < 0 || numel > PASS_FOLD_MAX_ELEMENTS)
		return false;
	const ir_id *args = ir_node_args(g, n);
	for (uint32_t a = 0; a < n->n_args; a++) {
		const ir_node *arg = &g->nodes[args[a]];
		if (arg->op != IR_OP_CONST)
			return false;
		if (arg->attr.const_index >= m->n_consts)
			return false;
	}
	return true;
}

/* Views the constant operands of a node as interpreter tensors (borrowed
 * data: never finalized). */
static void const_operands(const ir_module *m, const ir_graph *g,
			   const ir_node *n, interp_tensor *vals)
{
	const ir_id *args = ir_node_args(g, n);
	for (uint32_t a = 0; a < n->n_args; a++) {
		const ir_const *c = &m->consts[g->nodes[args[a]].attr.const_index];
		interp_tensor *t = &vals[a];
		memset(t, 0, sizeof *t);
		t->dtype = c->type.dtype;
		t->rank = c->type.rank;
		for (int d = 0; d < t->rank; d++)
			t->dims[d] = c->type.dims[d].coef;
		t->data = c->data;
	}
}

/* Stores v (numel elements) in a new constant of type t, converting each
 * element if the interpreter's dtype differs from the node's. Returns the
 * constant's index or -1 after reporting an error. */
static int32_t add_result_const(ir_module *m, const ir_node *n,
				const interp_tensor *v)
{
	const ir_type *t = &n->type;
	int64_t numel = ir_type_numel_static(t);
	if (interp_tensor_numel(v) != numel) {
		ir_error(m->ctx, n->loc,
			 "%s: folding gave %lld elements, not %lld",
			 ir_op_table[n->op].name,
			 (long long)interp_tensor_numel(v), (long long)numel);
		return -1;
	}
	if (v->dtype == t->dtype)
		return ir_module_add_const(m, t, v->data);
	void *buf = ir_alloc(m->ctx, (size_t)numel * ir_dtype_size(t->dtype));
	if (!buf)
		return -1;
	for (int64_t i = 0; i < numel; i++) {
		double x = interp_tensor_get(v, i);
		switch (t->dtype) {
		case IR_F32:
			((float *)buf)[i] = (float)x;
			break;
		case IR_I32:
			((int32_t *)buf)[i] = (int32_t)x;
			break;
		case IR_F64:
			((double *)buf)[i] = x;
			break;
		}
	}
	int32_t k = ir_module_add_const(m, t, buf);
	ir_free(m->ctx, buf);
	return k;
}

/* Evaluates node id and turns it into a CONST node in place. */
static bool fold_node(ir_module *m, ir_func *f, ir_id id,
		      const int64_t *sym_values)
{
	ir_graph *g = &f->g;
	interp_tensor out = {0};
	interp_tensor *args = ir_alloc(m->ctx,
				       g->nodes[id].n_args * sizeof *args);
	if (!args) {
		ir_error(m->ctx, g->nodes[id].loc, "out of memory");
		return false;
	}
	const_operands(m, g, &g->nodes[id], args);
	interp_opts opts = {0};
	bool ok = interp_eval_node(m->ctx, m, g, id, &opts, sym_values, args,
				   &out);
	int32_t k = ok ? add_result_const(m, &g->nodes[id], &out) : -1;
	if (ok && k < 0 && m->ctx->is_oom)
		ir_error(m->ctx, g->nodes[id].loc, "out of memory");
	interp_tensor_fini(m->ctx, &out);
	ir_free(m->ctx, args);
	if (k < 0)
		return false;
	ir_node *n = &g->nodes[id];
	n->op = IR_OP_CONST;
	n->n_args = 0;
	memset(&n->attr, 0, sizeof n->attr);
	n->attr.const_index = (uint32_t)k;
	return true;
}

static bool fold_func(ir_module *m, ir_func *f, const int64_t *sym_values)
{
	bool changed = false;
	for (uint32_t i = 0; i < f->g.n_nodes; i++) {
		if (!is_foldable(m, &f->g, i))
			continue;
		if (!fold_node(m, f, i, sym_values))
			return false;
		changed = true;
	}
	return !changed || pass_graph_compact(m, f, NULL);
}

bool pass_fold(ir_module *m)
{
	/* Folded nodes have static types; symbols are never read. */
	int64_t *sym_values = ir_alloc(m->ctx, (m->n_syms ? m->n_syms : 1) *
						       sizeof *sym_values);
	if (!sym_values) {
		ir_error(m->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	bool ok = true;
	for (uint32_t fi = 0; ok && fi < m->n_funcs; fi++)
		ok = fold_func(m, m->funcs[fi], sym_values);
	ir_free(m->ctx, sym_values);
	return ok && pass_module_drop_unused_consts(m);
}
