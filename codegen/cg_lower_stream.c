/*
 * cg_lower_stream.c - dropout's random streams as a kernel argument.
 *
 * Every dropout of a model, and every fused attention with dropout, has
 * a random stream of its own (ir_attr's stream). Baked into the kernel
 * as a constant, the stream made the kernels of a model's layers differ
 * only in that number, so a 12-layer model compiled 12 copies of each.
 * Instead a kernel whose node or fused trees have dropout (p > 0) takes
 * one more pointer parameter, after its operands: a constant table of
 * those streams (as i64, in the order cg_kernel_stream_ids lists them),
 * which each call site passes for its own node. Kernels that differ only
 * in their streams are then one kernel (cg_lower_same_attr), and the
 * random bits, drawn from the stream values the table holds, are the
 * same as before.
 *
 * The table also carries, after the streams, the step of a kernel that
 * leaves out the dead rows of one step of an unrolled recurrence
 * (cg_lower_row_step: a GRU step's rows live where k < v[b]), so that
 * the steps of a recurrence share their kernels as the layers do.
 *
 * A kernel that already has CG_KERNEL_MAX_IN pointer operands has no
 * room for the table: it keeps its streams (and its step) as constants
 * and is shared with no other node (cg_kernel_stream_room).
 */
#include "cg_lower.h"

#include <string.h>

/* Appends n's stream to ids (of *count) if it draws random bits. */
static void add_stream(const ir_node *n, uint32_t *ids, uint32_t *count)
{
	ir_attr a = n->attr;
	double p = 0;
	const uint32_t *s = ir_attr_stream(ir_op_table[n->op].attr, &a, &p);
	if (s && p > 0)
		ids[(*count)++] = *s;
}

uint32_t cg_kernel_stream_ids(const ir_graph *g, ir_id id, const cg_trees *tr,
			      uint32_t *ids)
{
	uint32_t n = 0;
	add_stream(&g->nodes[id], ids, &n);
	for (uint32_t i = 0; i < tr->n_nodes; i++)
		if (!tr->n[i].is_leaf)
			add_stream(&g->nodes[tr->n[i].id], ids, &n);
	return n;
}

bool cg_kernel_stream_room(const cg_trees *tr, uint32_t n_streams)
{
	return n_streams == 0 || tr->n_par < CG_KERNEL_MAX_IN;
}

bool cg_lower_same_attr(const ir_node *a, const ir_node *b)
{
	if (a->op != b->op)
		return false;
	ir_attr x, y;
	memcpy(&x, &a->attr, sizeof x);
	memcpy(&y, &b->attr, sizeof y);
	ir_attr_kind kind = ir_op_table[a->op].attr;
	double p;
	uint32_t *sx = ir_attr_stream(kind, &x, &p),
		 *sy = ir_attr_stream(kind, &y, &p);
	if (sx) {
		*sx = 0;
		*sy = 0;
	}
	return memcmp(&x, &y, sizeof x) == 0;
}

LLVMValueRef cg_kernel_stream(cg_kernel *k, uint32_t stream)
{
	cg_fn *f = &k->f;
	uint32_t j = 0;
	while (j < k->n_streams && k->stream_ids[j] != stream)
		j++;
	if (!k->streams || j == k->n_streams) {
		/* No table, or a stream it does not list: a constant, and
		 * the kernel is this node's alone. */
		k->has_own_stream = true;
		return cg_i64(f, stream);
	}
	LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, cg_t_i64(f), k->streams,
						&(LLVMValueRef){cg_i64(f, j)},
						1, "");
	return LLVMBuildLoad2(f->b, cg_t_i64(f), at, "stream");
}

LLVMValueRef cg_kernel_row_step(cg_kernel *k)
{
	cg_fn *f = &k->f;
	if (k->step_arg) /* an outlined body's parameter */
		return k->step_arg;
	if (!k->streams) {
		k->has_own_stream = true;
		return cg_i64(f, k->row_step);
	}
	LLVMValueRef at = LLVMBuildInBoundsGEP2(f->b, cg_t_i64(f), k->streams,
						&(LLVMValueRef){
							cg_i64(f, k->n_streams)},
						1, "");
	return LLVMBuildLoad2(f->b, cg_t_i64(f), at, "step");
}

LLVMValueRef cg_lower_stream_table(cg_lower *L, const uint32_t *ids, uint32_t n)
{
	LLVMContextRef c = LLVMGetModuleContext(L->mod);
	LLVMTypeRef i64 = LLVMInt64TypeInContext(c);
	LLVMValueRef v[CG_TREE_MAX + 2];
	for (uint32_t i = 0; i < n; i++)
		v[i] = LLVMConstInt(i64, ids[i], 0);
	LLVMTypeRef t = LLVMArrayType2(i64, n);
	LLVMValueRef g = LLVMAddGlobal(L->mod, t, "streams");
	LLVMSetInitializer(g, LLVMConstArray2(i64, v, n));
	LLVMSetGlobalConstant(g, 1);
	LLVMSetLinkage(g, LLVMPrivateLinkage);
	LLVMSetUnnamedAddress(g, LLVMGlobalUnnamedAddr);
	return g;
}
