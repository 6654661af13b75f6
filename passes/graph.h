/*
 * graph.h - the passes' toolkit for looking at and rebuilding a
 * function's graph (graph.c), private to passes/: the users of every
 * node, and a builder that copies a graph in one forward sweep while a
 * pass replaces nodes. The fusion passes (fuse_attention, fuse_heads,
 * fuse_loss, the additive fusion and the elementwise plan) and factor
 * use it.
 *
 * Its symbols carry pass_graph_, the passes' prefix and the one of
 * pass_graph_compact (passes.h), the in-place rewrite these complement.
 */
#ifndef ATTNC_PASSES_GRAPH_H
#define ATTNC_PASSES_GRAPH_H

#include "ir.h"

/* The users of every node of a function, and which nodes are outputs. */
typedef struct pass_graph_uses {
	uint32_t *start; /* n_nodes + 1: users of i at list[start[i] ..
			  * start[i + 1]), one entry per operand slot, in
			  * node order */
	ir_id *list;
	uint32_t *slot;  /* per entry of list: which operand of the user */
	int32_t *output; /* per node: the first output it is, or -1 */
} pass_graph_uses;

/* Fills u with the users of f's nodes. Returns false when out of memory;
 * pass_graph_uses_fini frees u either way. */
bool pass_graph_uses_build(ir_ctx *ctx, const ir_func *f, pass_graph_uses *u);
void pass_graph_uses_fini(ir_ctx *ctx, pass_graph_uses *u);

/* A function's graph rebuilt in one forward sweep, so that new nodes come
 * before their users: each old node is copied (pass_graph_copy) or stands
 * for what the pass emits in its place (pass_graph_emit), map[] saying
 * which new node an old one became. The first failure sets is_failed;
 * every later call then does nothing and returns IR_NONE. */
typedef struct pass_graph_builder {
	ir_module *m;
	ir_func *f; /* the function, its old graph until the finish */
	ir_graph g; /* the new graph */
	ir_id *map; /* old node -> new node (n_nodes of the old graph) */
	bool is_failed;
} pass_graph_builder;

/* Appends a node to the new graph and infers its type (t: the target of
 * a reshape, else NULL). */
ir_id pass_graph_emit(pass_graph_builder *b, ir_op op, const ir_id *args,
		      uint32_t n, const ir_attr *attr, const ir_type *t,
		      ir_loc loc);
/* Appends a copy of old node x, its operands mapped. */
ir_id pass_graph_copy(pass_graph_builder *b, ir_id x);
/* The new graph replaces the old one (inputs and outputs mapped), then
 * is compacted. On a failure reports "<what> @f" (what: say
 * "fuse_heads: cannot rewrite"), frees the new graph and leaves the old
 * one. */
bool pass_graph_finish(pass_graph_builder *b, const char *what);

#endif
