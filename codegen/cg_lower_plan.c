/*
 * cg_lower_plan.c - a function's memory plan: which nodes elementwise
 * fusion computes inside their readers' kernels (pass_fuse_ew_plan), the
 * buffer each node's data lives in, and where each buffer sits in the
 * entry point's scratch slab.
 *
 * Each computing node that is not fused writes its own dense buffer,
 * placed by pass_memplan_blocks (greedy first fit over lifetimes). A
 * reshape, and a slice that is a run of its operand's elements, owns
 * nothing: it reads its operand's buffer, which stays alive until its
 * last reader. A fused node has no buffer; the buffers it reads stay
 * alive until the kernel that computes it runs. A buffer that is an
 * output of the function is, where it can be, the caller's output buffer
 * itself (find_direct), with no block in the slab. Inputs come from the
 * caller, parameters from the params block, constants from private
 * globals (cg_lower_entry.c places those).
 */
#include "cg_attn.h"
#include "cg_entry.h"
#include "passes.h"

#include <stdlib.h>

/* A function's plan: into[i] the consumer node i is fused into,
 * PASS_FUSE_EW_EVERY or IR_NONE (pass_fuse_ew_plan); root[i] is the node
 * whose buffer holds node i's data (a leaf, itself, or what a view reads)
 * and view[i] the byte where node i starts in it; offset[i] the root's
 * place in the slab for computing roots that are not fused. */

static bool is_leaf(ir_op op)
{
	return (ir_op_table[op].flags & IR_OPF_LEAF) != 0;
}

/* Whether slice i, a kernel of its own, is a run of consecutive elements
 * of a buffer its operand has (one not computed inside its readers'
 * kernels): step 1, in range, and every axis before the sliced one of
 * extent 1. Such a slice reads the operand's buffer from byte *at on,
 * with no kernel and no copy (the gradients of fused ops are sliced so
 * out of one packed result). */
static bool slice_is_view(const cg_lower *L, const ir_graph *g,
			  const ir_id *into, ir_id i, uint64_t *at)
{
	const ir_node *n = &g->nodes[i];
	if (n->op != IR_OP_SLICE || into[i] != IR_NONE)
		return false;
	ir_id x = ir_arg(g, i, 0);
	if (into[x] != IR_NONE || n->attr.slice.step != 1)
		return false;
	int64_t d[IR_MAX_RANK];
	int r = cg_lower_dims(L, &g->nodes[x].type, d);
	int ax = n->attr.slice.axis;
	if (n->attr.slice.end > d[ax])
		return false;
	for (int a = 0; a < ax; a++)
		if (d[a] != 1)
			return false;
	int64_t inner = 1;
	for (int a = ax + 1; a < r; a++)
		inner *= d[a];
	*at = (uint64_t)(n->attr.slice.start * inner) *
	      ir_dtype_size(n->type.dtype);
	return true;
}

static void find_roots(const cg_lower *L, const ir_graph *g, const ir_id *into,
		       ir_id *root, uint64_t *view)
{
	for (ir_id i = 0; i < g->n_nodes; i++) {
		uint64_t at = 0;
		if (g->nodes[i].op == IR_OP_RESHAPE ||
		    slice_is_view(L, g, into, i, &at)) {
			ir_id x = ir_arg(g, i, 0);
			root[i] = root[x];
			view[i] = view[x] + at;
		} else {
			root[i] = i;
			view[i] = 0;
		}
	}
}

/* direct[r]: the output whose caller's buffer root r's kernel writes
 * straight into, UINT32_MAX for none. An output qualifies when its data
 * is a whole computed buffer of its own (not a leaf, not fused, at byte
 * 0 of its root and of its root's size: the node itself or a reshape of
 * it) that no earlier output claimed: the caller's buffer then holds
 * exactly what the slab would, is written by that kernel only and is
 * read by the later readers in the slab's place, so neither a slab block
 * nor a copy at the end is needed. Outputs that share a root, views into
 * a larger buffer (a part of a packed gradient) and leaves are copied. */
static void find_direct(const cg_lower *L, const ir_func *f, const ir_id *into,
			const ir_id *root, const uint64_t *view,
			uint32_t *direct)
{
	const ir_graph *g = &f->g;
	for (ir_id i = 0; i < g->n_nodes; i++)
		direct[i] = UINT32_MAX;
	for (uint32_t o = 0; o < f->n_outputs; o++) {
		ir_id id = f->outputs[o], r = root[id];
		if (is_leaf(g->nodes[r].op) || into[r] != IR_NONE ||
		    view[id] != 0 || direct[r] != UINT32_MAX ||
		    cg_node_bytes(L, g, r) !=
			    cg_lower_bytes(L, &g->nodes[r].type) ||
		    g->nodes[id].type.dtype != g->nodes[r].type.dtype ||
		    cg_lower_bytes(L, &g->nodes[id].type) !=
			    cg_lower_bytes(L, &g->nodes[r].type))
			continue;
		direct[r] = o;
	}
}

/* at[i]: the last step whose kernel computes node i (itself, or the
 * kernels of the readers it is fused into). */
static void find_steps(const ir_graph *g, const ir_id *into, uint32_t *at)
{
	for (ir_id i = 0; i < g->n_nodes; i++)
		at[i] = into[i] == IR_NONE ? i : 0;
	for (ir_id c = g->n_nodes; c-- > 0;)
		for (uint32_t a = 0; a < g->nodes[c].n_args; a++) {
			ir_id x = ir_arg(g, c, a);
			if (pass_fuse_ew_is_in(into, x, c) && at[c] > at[x])
				at[x] = at[c];
		}
}

/* last[r]: the last step that reads root r's buffer; a fused node reads
 * its operands when the kernels computing it run. at is scratch. */
static void find_last_use(const ir_func *f, const ir_id *into,
			  const ir_id *root, uint32_t *at, uint32_t *last)
{
	const ir_graph *g = &f->g;
	find_steps(g, into, at);
	for (ir_id i = 0; i < g->n_nodes; i++)
		last[i] = i;
	for (ir_id i = 0; i < g->n_nodes; i++)
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++) {
			ir_id r = root[ir_arg(g, i, a)];
			if (at[i] > last[r])
				last[r] = at[i];
		}
	for (uint32_t o = 0; o < f->n_outputs; o++)
		last[root[f->outputs[o]]] = g->n_nodes;
}

uint64_t cg_node_bytes(const cg_lower *L, const ir_graph *g, ir_id id)
{
	if (g->nodes[id].op == IR_OP_FUSED_ATTENTION)
		return cg_attn_node_bytes(L, g, id);
	return cg_lower_bytes(L, &g->nodes[id].type);
}

ir_id cg_node_side(const cg_lower *L, const ir_graph *g, ir_id id)
{
	ir_op op = g->nodes[id].op;
	if (op != IR_OP_FUSED_ATTENTION && op != IR_OP_FUSED_ATTENTION_GRAD)
		return IR_NONE;
	ir_id p = cg_attn_cache_pair(L, g, id);
	if (p == IR_NONE)
		return IR_NONE;
	return op == IR_OP_FUSED_ATTENTION ? id : p;
}

/* A buffer with a side part lives until the kernel that reads it. */
static void keep_sides(const cg_lower *L, const ir_graph *g, const ir_id *root,
		       uint32_t *last)
{
	for (ir_id i = 0; i < g->n_nodes; i++) {
		ir_id p = cg_node_side(L, g, i);
		if (p != IR_NONE && p != i && last[root[p]] < i)
			last[root[p]] = i;
	}
}

/* The fusion plan of f, with the matmuls computed in their adds'
 * kernels (cg_lower_epilogue_plan), or none (every into[i] IR_NONE). */
static bool plan_fusion(const cg_lower *L, const ir_func *f, bool no_fuse,
			ir_id *into)
{
	if (!no_fuse)
		return pass_fuse_ew_plan(L->m, f, into) &&
		       cg_lower_epilogue_plan(L, f, into);
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		into[i] = IR_NONE;
	return true;
}

/* Larger buffers first; ties by node, so the order is the same on
 * every run. */
static int cmp_buffers(const void *pa, const void *pb)
{
	const cg_scratch_buffer *x = pa, *y = pb;
	if (x->bytes != y->bytes)
		return x->bytes > y->bytes ? -1 : 1;
	return x->node < y->node ? -1 : x->node > y->node;
}

bool cg_scratch_peak_make(ir_ctx *ctx, const ir_graph *g,
			  const pass_mem_block *blocks, const ir_id *node,
			  uint32_t n, uint64_t slab, cg_scratch_peak *out)
{
	*out = (cg_scratch_peak){.slab = slab, .threads = 1};
	uint32_t at = 0;
	if (!pass_memplan_peak(ctx, blocks, n, &out->live, &at))
		return false;
	out->buffers = ir_alloc(ctx, (n + 1) * sizeof *out->buffers);
	if (!out->buffers)
		return false;
	for (uint32_t b = 0; b < n; b++) {
		if (!blocks[b].size || blocks[b].start > at ||
		    blocks[b].end < at)
			continue;
		const ir_node *nd = &g->nodes[node[b]];
		out->buffers[out->n++] =
			(cg_scratch_buffer){node[b], ir_op_table[nd->op].name,
					    nd->loc, blocks[b].size};
	}
	qsort(out->buffers, out->n, sizeof *out->buffers, cmp_buffers);
	return true;
}

void cg_scratch_peak_fini(ir_ctx *ctx, cg_scratch_peak *pk)
{
	ir_free(ctx, pk->buffers);
	*pk = (cg_scratch_peak){0};
}

bool cg_func_plan_make(const cg_lower *L, const ir_func *f, bool no_fuse,
		       func_plan *pl)
{
	const ir_graph *g = &f->g;
	uint32_t n = g->n_nodes;
	pl->into = ir_alloc(L->ctx, (n + 1) * sizeof *pl->into);
	pl->root = ir_alloc(L->ctx, (n + 1) * sizeof *pl->root);
	pl->view = ir_alloc(L->ctx, (n + 1) * sizeof *pl->view);
	pl->offset = ir_alloc(L->ctx, (n + 1) * sizeof *pl->offset);
	pl->direct = ir_alloc(L->ctx, (n + 1) * sizeof *pl->direct);
	uint32_t *last = ir_alloc(L->ctx, (n + 1) * sizeof *last);
	uint32_t *at = ir_alloc(L->ctx, (n + 1) * sizeof *at);
	pass_mem_block *blocks = ir_alloc(L->ctx, (n + 1) * sizeof *blocks);
	ir_id *map = ir_alloc(L->ctx, (n + 1) * sizeof *map);
	bool ok = pl->into && pl->root && pl->view && pl->offset &&
		  pl->direct && last && at && blocks && map &&
		  plan_fusion(L, f, no_fuse, pl->into);
	if (ok) {
		find_roots(L, g, pl->into, pl->root, pl->view);
		find_direct(L, f, pl->into, pl->root, pl->view, pl->direct);
		find_last_use(f, pl->into, pl->root, at, last);
		keep_sides(L, g, pl->root, last);
		uint32_t nb = 0;
		for (ir_id i = 0; i < n; i++) {
			if (pl->root[i] != i || is_leaf(g->nodes[i].op) ||
			    pl->into[i] != IR_NONE ||
			    pl->direct[i] != UINT32_MAX)
				continue;
			blocks[nb] = (pass_mem_block){cg_node_bytes(L, g, i), i,
						      last[i], 0};
			map[nb++] = i;
		}
		pl->total = pass_memplan_blocks(L->ctx, blocks, nb,
						ATTNRT_ALIGN, &ok);
		for (uint32_t b = 0; ok && b < nb; b++)
			pl->offset[map[b]] = blocks[b].offset;
		ok = ok && cg_scratch_peak_make(L->ctx, g, blocks, map, nb,
						pl->total, &pl->peak);
	}
	ir_free(L->ctx, last);
	ir_free(L->ctx, at);
	ir_free(L->ctx, blocks);
	ir_free(L->ctx, map);
	return ok;
}

void cg_func_plan_fini(ir_ctx *ctx, func_plan *pl)
{
	ir_free(ctx, pl->into);
	ir_free(ctx, pl->root);
	ir_free(ctx, pl->view);
	ir_free(ctx, pl->offset);
	ir_free(ctx, pl->direct);
	cg_scratch_peak_fini(ctx, &pl->peak);
}
