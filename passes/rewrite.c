/*
 * rewrite.c - the one way passes change a graph: replace uses of a node by
 * another, then drop what no output needs and compact the arrays.
 *
 * A pass decides, per node, what should stand in its place (a remap array,
 * repl[i] = i for "keep") and may edit nodes in place as long as the
 * operand order stays topological. pass_graph_compact then substitutes the
 * replacements, marks what the outputs reach, and slides the live nodes and
 * their operands down in one forward sweep; no second array is needed,
 * because a node's new index and operand offset never exceed its old ones.
 */
#include "passes.h"

#include <assert.h>
#include <string.h>

/* Follows repl from id until it reaches a node that stands for itself. */
static ir_id resolve(const ir_id *repl, ir_id id)
{
	if (!repl)
		return id;
	while (repl[id] != id) {
		assert(repl[id] < id);
		id = repl[id];
	}
	return id;
}

static void substitute_uses(ir_func *f, const ir_id *repl)
{
	ir_graph *g = &f->g;
	for (uint32_t a = 0; a < g->n_args; a++)
		g->args[a] = resolve(repl, g->args[a]);
	for (uint32_t o = 0; o < f->n_outputs; o++)
		f->outputs[o] = resolve(repl, f->outputs[o]);
}

/* live[i] = some output needs node i, or it is an argument. Relies on
 * operands preceding their users, so one backward sweep suffices. */
static void mark_live(const ir_func *f, bool *live)
{
	const ir_graph *g = &f->g;
	for (uint32_t o = 0; o < f->n_outputs; o++)
		live[f->outputs[o]] = true;
	for (uint32_t i = 0; i < f->n_inputs; i++)
		live[f->inputs[i]] = true;
	for (uint32_t i = g->n_nodes; i-- > 0;) {
		const ir_node *n = &g->nodes[i];
		if (n->op == IR_OP_INPUT)
			live[i] = true;
		if (!live[i])
			continue;
		const ir_id *args = ir_node_args(g, n);
		for (uint32_t a = 0; a < n->n_args; a++)
			live[args[a]] = true;
	}
}

/* Slides the live nodes down; new_id[i] is node i's new index. */
static void slide_live(ir_graph *g, const bool *live, ir_id *new_id)
{
	uint32_t k = 0, n_args = 0;
	for (uint32_t i = 0; i < g->n_nodes; i++) {
		if (!live[i]) {
			new_id[i] = IR_NONE;
			continue;
		}
		ir_node n = g->nodes[i];
		for (uint32_t a = 0; a < n.n_args; a++) {
			ir_id old = g->args[n.first_arg + a];
			assert(new_id[old] != IR_NONE);
			g->args[n_args + a] = new_id[old];
		}
		n.first_arg = n_args;
		n_args += n.n_args;
		g->nodes[k] = n;
		new_id[i] = k++;
	}
	g->n_nodes = k;
	g->n_args = n_args;
}

bool pass_graph_compact(ir_module *m, ir_func *f, const ir_id *repl)
{
	ir_graph *g = &f->g;
	if (g->n_nodes == 0)
		return true;
	bool *live = ir_alloc(m->ctx, g->n_nodes * sizeof *live);
	ir_id *new_id = ir_alloc(m->ctx, g->n_nodes * sizeof *new_id);
	bool ok = live && new_id;
	if (ok) {
		substitute_uses(f, repl);
		mark_live(f, live);
		slide_live(g, live, new_id);
		for (uint32_t o = 0; o < f->n_outputs; o++)
			f->outputs[o] = new_id[f->outputs[o]];
		for (uint32_t i = 0; i < f->n_inputs; i++)
			f->inputs[i] = new_id[f->inputs[i]];
	} else {
		ir_error(m->ctx, f->loc, "out of memory");
	}
	ir_free(m->ctx, live);
	ir_free(m->ctx, new_id);
	return ok;
}

/* Counts, per constant, the CONST nodes and examples that refer to it. */
static void count_const_uses(const ir_module *m, uint32_t *uses)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
		const ir_func *f = m->funcs[fi];
		for (uint32_t i = 0; i < f->g.n_nodes; i++)
			if (f->g.nodes[i].op == IR_OP_CONST)
				uses[f->g.nodes[i].attr.const_index]++;
		for (uint32_t i = 0; f->example && i < f->n_inputs; i++)
			uses[f->example[i]]++;
	}
}

static void renumber_const_uses(ir_module *m, const uint32_t *new_index)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
		ir_func *f = m->funcs[fi];
		for (uint32_t i = 0; i < f->g.n_nodes; i++) {
			ir_node *n = &f->g.nodes[i];
			if (n->op == IR_OP_CONST)
				n->attr.const_index =
					new_index[n->attr.const_index];
		}
		for (uint32_t i = 0; f->example && i < f->n_inputs; i++)
			f->example[i] = new_index[f->example[i]];
	}
}

bool pass_module_drop_unused_consts(ir_module *m)
{
	if (m->n_consts == 0)
		return true;
	uint32_t *uses = ir_alloc(m->ctx, m->n_consts * sizeof *uses);
	if (!uses) {
		ir_error(m->ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	count_const_uses(m, uses);
	/* uses[] becomes the new index; the data stays in the arena. */
	uint32_t k = 0;
	for (uint32_t c = 0; c < m->n_consts; c++) {
		if (!uses[c]) {
			uses[c] = UINT32_MAX;
			continue;
		}
		m->consts[k] = m->consts[c];
		uses[c] = k++;
	}
	m->n_consts = k;
	renumber_const_uses(m, uses);
	ir_free(m->ctx, uses);
	return true;
}
