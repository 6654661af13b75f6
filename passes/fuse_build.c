/*
 * fuse_build.c - rebuilding a function's graph in one forward sweep
 * (fz_builder, fuse_attention.h), for the fusion passes that replace
 * nodes by new ones: fuse_attention and fuse_heads.
 *
 * A rewrite that only redirects uses to earlier nodes can edit the graph
 * in place (pass_graph_compact); these passes add nodes whose operands
 * may sit after the node they replace in the old order, so they copy the
 * graph node by node instead, emitting each replacement where the node
 * it stands for was.
 */
#include "passes.h"

#include "fuse_attention.h"

ir_id fz_emit(fz_builder *b, ir_op op, const ir_id *args, uint32_t n,
	      const ir_attr *attr, const ir_type *t, ir_loc loc)
{
	ir_type none = {0};
	ir_id id = b->is_failed ? IR_NONE
				: ir_graph_append(b->m->ctx, &b->g, op, args, n, attr,
						  t ? t : &none, loc);
	if (id == IR_NONE || !ir_infer_type(b->m->ctx, b->m, &b->g, &b->g.nodes[id])) {
		b->is_failed = true;
		return IR_NONE;
	}
	return id;
}

ir_id fz_copy(fz_builder *b, ir_id x)
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
				: ir_graph_append(b->m->ctx, &b->g, n->op, a, n->n_args,
						  &n->attr, &n->type, n->loc);
	ir_free(b->m->ctx, big);
	if (id == IR_NONE)
		b->is_failed = true;
	return id;
}

bool fz_finish(fz_builder *b, const char *pass)
{
	ir_func *f = b->f;
	if (b->is_failed) {
		ir_graph_fini(b->m->ctx, &b->g);
		ir_error(b->m->ctx, f->loc, "%s: cannot rewrite @%s", pass, f->name);
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
