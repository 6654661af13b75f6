/*
 * graph.c - the passes' graph toolkit (graph.h): the users of every node,
 * and rebuilding a function's graph in one forward sweep
 * (pass_graph_builder), for the passes that replace nodes by new ones:
 * fuse_attention (dot-product and additive), fuse_heads, fuse_loss and
 * factor.
 *
 * A rewrite that only redirects uses to earlier nodes can edit the graph
 * in place (pass_graph_compact); these passes add nodes whose operands
 * may sit after the node they replace in the old order, so they copy the
 * graph node by node instead, emitting each replacement where the node
 * it stands for was.
 */
#include "passes.h"

#include "graph.h"

/* ---- uses --------------------------------------------------------------- */

bool pass_graph_uses_build(ir_ctx *ctx, const ir_func *f, pass_graph_uses *u)
{
	const ir_graph *g = &f->g;
	uint32_t n = g->n_nodes;
	u->start = ir_alloc(ctx, (n + 2) * sizeof *u->start);
	u->list = ir_alloc(ctx, (g->n_args + 1) * sizeof *u->list);
	u->slot = ir_alloc(ctx, (g->n_args + 1) * sizeof *u->slot);
	u->output = ir_alloc(ctx, (n + 1) * sizeof *u->output);
	if (!u->start || !u->list || !u->slot || !u->output)
		return false;
	for (uint32_t i = 0; i < g->n_args; i++)
		u->start[g->args[i] + 2]++;
	for (uint32_t i = 0; i < n; i++)
		u->start[i + 2] += u->start[i + 1];
	for (ir_id i = 0; i < n; i++)
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++) {
			uint32_t k = u->start[ir_arg(g, i, a) + 1]++;
			u->list[k] = i;
			u->slot[k] = a;
		}
	for (uint32_t i = 0; i < n; i++)
		u->output[i] = -1;
	for (uint32_t o = f->n_outputs; o-- > 0;)
		u->output[f->outputs[o]] = (int32_t)o;
	return true;
}

void pass_graph_uses_fini(ir_ctx *ctx, pass_graph_uses *u)
{
	ir_free(ctx, u->start);
	ir_free(ctx, u->list);
	ir_free(ctx, u->slot);
	ir_free(ctx, u->output);
}

/* ---- the builder ------------------------------------------------------- */

ir_id pass_graph_emit(pass_graph_builder *b, ir_op op, const ir_id *args,
		      uint32_t n, const ir_attr *attr, const ir_type *t,
		      ir_loc loc)
{
	ir_type none = {0};
	ir_id id = b->is_failed ? IR_NONE
				: ir_graph_append(b->m->ctx, &b->g, op, args, n,
						  attr, t ? t : &none, loc);
	if (id == IR_NONE ||
	    !ir_infer_type(b->m->ctx, b->m, &b->g, &b->g.nodes[id])) {
		b->is_failed = true;
		return IR_NONE;
	}
	return id;
}

ir_id pass_graph_copy(pass_graph_builder *b, ir_id x)
{
	const ir_node *n = &b->f->g.nodes[x];
	ir_id args[64], *big = NULL, *a = args;
	if (n->n_args > 64) {
		big = ir_alloc(b->m->ctx, n->n_args * sizeof *big);
		if (!big) {
			b->is_failed = true;
			return IR_NONE;
		}
		a = big;
	}
	for (uint32_t i = 0; i < n->n_args; i++)
		a[i] = b->map[ir_arg(&b->f->g, x, i)];
	ir_id id = b->is_failed ? IR_NONE
				: ir_graph_append(b->m->ctx, &b->g, n->op, a,
						  n->n_args, &n->attr, &n->type,
						  n->loc);
	ir_free(b->m->ctx, big);
	if (id == IR_NONE)
		b->is_failed = true;
	return id;
}

bool pass_graph_finish(pass_graph_builder *b, const char *what)
{
	ir_func *f = b->f;
	if (b->is_failed) {
		ir_graph_fini(b->m->ctx, &b->g);
		ir_error(b->m->ctx, f->loc, "%s @%s", what, f->name);
		return false;
	}
	for (uint32_t i = 0; i < f->n_inputs; i++)
		f->inputs[i] = b->map[f->inputs[i]];
	for (uint32_t o = 0; o < f->n_outputs; o++)
		f->outputs[o] = b->map[f->outputs[o]];
	ir_graph_fini(b->m->ctx, &f->g);
	f->g = b->g;
	return pass_graph_compact(b->m, f, NULL);
}
