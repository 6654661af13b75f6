/*
 * fuse_ew.c - the plan of elementwise fusion (docs/fusion.md, "Elementwise
 * fusion"): which nodes code generation computes inside the kernel of
 * their consumer instead of in a kernel and a buffer of their own.
 *
 * The IR is not changed: the interpreter keeps running the unfused graph,
 * which stays the reference, and the lowering (codegen/cg_lower_plan.c) asks
 * for the plan of each function it compiles. A node fuses into its
 * consumer when
 *   - it is elementwise (IR_OPF_EW: math, compares, select, cast), a
 *     dropout (its random bits are a function of its flat index, so any
 *     kernel that knows the index can draw them), a permute, a broadcast
 *     or a slice (index arithmetic instead of a copy; slices step forward,
 *     so a fused slice's offsets stay sums of non-negative strides);
 *   - it is no output of the function, and has one use, or several when
 *     its op is cheap to compute again (no transcendental function): it
 *     is then computed in each of its readers' kernels;
 *   - the consumer reads each of its elements once, at an index it can
 *     address: an elementwise consumer (or dropout, broadcast) of the same
 *     shape (a consumer that broadcasts the node would recompute it), a
 *     permute or a slice, or the data operand of a reduction (sum, mean, max), a
 *     softmax, log_softmax, masked_softmax, layer_norm, cross_entropy or
 *     cross_entropy_grad (the row kinds read x once a pass over the row);
 *   - the kernel that ends up computing it stays small: at most
 *     PASS_FUSE_EW_MAX_NODES tree nodes and PASS_FUSE_EW_MAX_ARRAYS arrays
 *     read through strides (leaves, and one per fused dropout's index).
 * Consumers are decided before their producers (the graph is walked
 * backwards), so a whole chain collapses into the kernel at its end. A
 * node computed in several readers hosts nothing: its operands are
 * leaves.
 */
#include "passes.h"

#include "graph.h"

/* How a consumer can read an operand in place. */
typedef enum host_kind {
	HOST_NONE,  /* it cannot */
	HOST_SAME,  /* elementwise: when the operand has the consumer's shape */
	HOST_ANY,   /* reads each element once at its own index */
	HOST_FIRST, /* HOST_ANY for operand 0, HOST_NONE for the others */
} host_kind;

static host_kind host_of(ir_op op)
{
	unsigned fl = ir_op_table[op].flags;
	if (fl & IR_OPF_FUSES_ARG0)
		return HOST_FIRST;
	if (op == IR_OP_PERMUTE || op == IR_OP_SLICE)
		return HOST_ANY;
	if ((fl & IR_OPF_EW) || op == IR_OP_DROPOUT || op == IR_OP_BROADCAST)
		return HOST_SAME;
	return HOST_NONE;
}

bool pass_fuse_ew_is_fusible(ir_op op)
{
	return (ir_op_table[op].flags & IR_OPF_EW) || op == IR_OP_DROPOUT ||
	       op == IR_OP_PERMUTE || op == IR_OP_BROADCAST || op == IR_OP_SLICE;
}

/* Whether node c can evaluate its operand a (node p) in place. */
static bool hosts(const ir_graph *g, ir_id c, uint32_t a, ir_id p)
{
	switch (host_of(g->nodes[c].op)) {
	case HOST_NONE:
		return false;
	case HOST_SAME:
		return ir_shape_eq(&g->nodes[p].type, &g->nodes[c].type);
	case HOST_ANY:
		return true;
	case HOST_FIRST:
		return a == 0;
	}
	return false;
}

/* How many operand slots read node p (its users are
 * u->list[u->start[p] ..), in slots u->slot[...]). */
static uint32_t n_uses(const pass_graph_uses *u, ir_id p)
{
	return u->start[p + 1] - u->start[p];
}

/* Size of the kernel rooted at each node: tree nodes and strided arrays. */
typedef struct budget {
	uint32_t *nodes, *arrays;
} budget;

/* Adds node p to the kernel of its use k (sign 1) or takes it out
 * (sign -1); false if adding takes the kernel past its bounds. */
static bool charge(const ir_graph *g, const pass_graph_uses *u, ir_id p,
		   uint32_t k, const ir_id *root, budget *b, int sign)
{
	const ir_node *n = &g->nodes[p];
	ir_id r = root[u->list[u->start[p] + k]];
	int64_t arrays = (int64_t)n->n_args - 1 + (n->op == IR_OP_DROPOUT);
	b->nodes[r] += (uint32_t)((int64_t)sign * n->n_args);
	b->arrays[r] += (uint32_t)(sign * arrays);
	return b->nodes[r] <= PASS_FUSE_EW_MAX_NODES &&
	       b->arrays[r] <= PASS_FUSE_EW_MAX_ARRAYS;
}

/* Whether every use of p can read it in place: the reader hosts it and
 * is no node computed in each of its own readers (whose operands stay
 * leaves, so that their kernels' bounds hold). */
static bool all_hosted(const ir_graph *g, const pass_graph_uses *u, ir_id p,
		       const ir_id *into)
{
	for (uint32_t k = 0; k < n_uses(u, p); k++) {
		ir_id c = u->list[u->start[p] + k];
		if (into[c] == PASS_FUSE_EW_EVERY ||
		    !hosts(g, c, u->slot[u->start[p] + k], p))
			return false;
	}
	return n_uses(u, p) > 0;
}

/* Charges p to the kernels of all its uses, or to none. */
static bool charge_all(const ir_graph *g, const pass_graph_uses *u, ir_id p,
		       const ir_id *root, budget *b)
{
	for (uint32_t k = 0; k < n_uses(u, p); k++)
		if (!charge(g, u, p, k, root, b, 1)) {
			for (uint32_t j = 0; j <= k; j++)
				charge(g, u, p, j, root, b, -1);
			return false;
		}
	return true;
}

/* Decides node p, whose readers are all decided; into[r] of a kernel's
 * root r is IR_NONE and its budget counts every tree fused into it. A
 * node with one reader fuses into it (root: that reader's kernel); a
 * cheap one with several is computed in each (no single root). */
static void decide(const ir_graph *g, const pass_graph_uses *u, ir_id p,
		   ir_id *into, ir_id *root, budget *b)
{
	const ir_node *n = &g->nodes[p];
	into[p] = IR_NONE;
	root[p] = p;
	b->nodes[p] = 1 + n->n_args;
	b->arrays[p] = n->n_args;
	if (u->output[p] >= 0 || !pass_fuse_ew_is_fusible(n->op) ||
	    !all_hosted(g, u, p, into) ||
	    (n_uses(u, p) > 1 && (ir_op_table[n->op].flags & IR_OPF_COSTLY)) ||
	    !charge_all(g, u, p, root, b))
		return;
	ir_id c = u->list[u->start[p]];
	into[p] = n_uses(u, p) == 1 ? c : PASS_FUSE_EW_EVERY;
	root[p] = n_uses(u, p) == 1 ? root[c] : IR_NONE;
}

bool pass_fuse_ew_plan(const ir_module *m, const ir_func *f, ir_id *into)
{
	const ir_graph *g = &f->g;
	uint32_t n = g->n_nodes + 1;
	ir_ctx *ctx = m->ctx;
	pass_graph_uses u = {0};
	budget b = {ir_alloc(ctx, n * sizeof *b.nodes),
		    ir_alloc(ctx, n * sizeof *b.arrays)};
	ir_id *root = ir_alloc(ctx, n * sizeof *root);
	bool ok = pass_graph_uses_build(ctx, f, &u) && b.nodes && b.arrays &&
		  root;
	if (ok) {
		for (ir_id i = g->n_nodes; i-- > 0;)
			decide(g, &u, i, into, root, &b);
	} else {
		ir_error(ctx, f->loc, "out of memory");
	}
	pass_graph_uses_fini(ctx, &u);
	ir_free(ctx, b.nodes);
	ir_free(ctx, b.arrays);
	ir_free(ctx, root);
	return ok;
}

uint32_t pass_fuse_ew_count(const ir_func *f, const ir_id *into)
{
	uint32_t n = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		n += into[i] != IR_NONE;
	return n;
}
