/*
 * fuse_ew.c - the plan of elementwise fusion (docs/fusion.md, "Elementwise
 * fusion"): which nodes code generation computes inside the kernel of
 * their consumer instead of in a kernel and a buffer of their own.
 *
 * The IR is not changed: the interpreter keeps running the unfused graph,
 * which stays the reference, and the lowering (codegen/cg_lower.c) asks
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

#include <string.h>

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
	       op == IR_OP_PERMUTE || op == IR_OP_BROADCAST ||
	       op == IR_OP_SLICE;
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

/* Every node's uses: n[x] operand slots read it (its users are
 * user[first[x] .. first[x] + n[x]), in slot slot[...]), is_out[x] if it
 * is an output. */
typedef struct uses {
	uint32_t *n, *first;
	ir_id *user;
	uint32_t *slot;
	bool *is_out;
} uses;

static void find_uses(const ir_func *f, uses *u)
{
	const ir_graph *g = &f->g;
	uint32_t at = 0;
	memset(u->n, 0, g->n_nodes * sizeof *u->n);
	memset(u->is_out, 0, g->n_nodes * sizeof *u->is_out);
	for (ir_id i = 0; i < g->n_nodes; i++)
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++)
			u->n[ir_arg(g, i, a)]++;
	for (ir_id i = 0; i < g->n_nodes; i++) {
		u->first[i] = at;
		at += u->n[i];
		u->n[i] = 0;
	}
	for (ir_id i = 0; i < g->n_nodes; i++)
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++) {
			ir_id x = ir_arg(g, i, a);
			uint32_t k = u->first[x] + u->n[x]++;
			u->user[k] = i;
			u->slot[k] = a;
		}
	for (uint32_t o = 0; o < f->n_outputs; o++)
		u->is_out[f->outputs[o]] = true;
}

/* Size of the kernel rooted at each node: tree nodes and strided arrays. */
typedef struct budget {
	uint32_t *nodes, *arrays;
} budget;

/* Adds node p to the kernel of its use k (sign 1) or takes it out
 * (sign -1); false if adding takes the kernel past its bounds. */
static bool charge(const ir_graph *g, const uses *u, ir_id p, uint32_t k,
		   const ir_id *root, budget *b, int sign)
{
	const ir_node *n = &g->nodes[p];
	ir_id r = root[u->user[u->first[p] + k]];
	int64_t arrays = (int64_t)n->n_args - 1 + (n->op == IR_OP_DROPOUT);
	b->nodes[r] += (uint32_t)((int64_t)sign * n->n_args);
	b->arrays[r] += (uint32_t)(sign * arrays);
	return b->nodes[r] <= PASS_FUSE_EW_MAX_NODES &&
	       b->arrays[r] <= PASS_FUSE_EW_MAX_ARRAYS;
}

/* Whether every use of p can read it in place: the reader hosts it and
 * is no node computed in each of its own readers (whose operands stay
 * leaves, so that their kernels' bounds hold). */
static bool all_hosted(const ir_graph *g, const uses *u, ir_id p,
		       const ir_id *into)
{
	for (uint32_t k = 0; k < u->n[p]; k++) {
		ir_id c = u->user[u->first[p] + k];
		if (into[c] == PASS_FUSE_EW_EVERY ||
		    !hosts(g, c, u->slot[u->first[p] + k], p))
			return false;
	}
	return u->n[p] > 0;
}

/* Charges p to the kernels of all its uses, or to none. */
static bool charge_all(const ir_graph *g, const uses *u, ir_id p,
		       const ir_id *root, budget *b)
{
	for (uint32_t k = 0; k < u->n[p]; k++)
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
static void decide(const ir_graph *g, const uses *u, ir_id p, ir_id *into,
		   ir_id *root, budget *b)
{
	const ir_node *n = &g->nodes[p];
	into[p] = IR_NONE;
	root[p] = p;
	b->nodes[p] = 1 + n->n_args;
	b->arrays[p] = n->n_args;
	if (u->is_out[p] || !pass_fuse_ew_is_fusible(n->op) ||
	    !all_hosted(g, u, p, into) ||
	    (u->n[p] > 1 && (ir_op_table[n->op].flags & IR_OPF_COSTLY)) || !charge_all(g, u, p, root, b))
		return;
	ir_id c = u->user[u->first[p]];
	into[p] = u->n[p] == 1 ? c : PASS_FUSE_EW_EVERY;
	root[p] = u->n[p] == 1 ? root[c] : IR_NONE;
}

bool pass_fuse_ew_plan(const ir_module *m, const ir_func *f, ir_id *into)
{
	const ir_graph *g = &f->g;
	uint32_t n = g->n_nodes + 1, n_args = g->n_args + 1;
	ir_ctx *ctx = m->ctx;
	uses u = {ir_alloc(ctx, n * sizeof *u.n), ir_alloc(ctx, n * sizeof *u.first),
		  ir_alloc(ctx, n_args * sizeof *u.user),
		  ir_alloc(ctx, n_args * sizeof *u.slot),
		  ir_alloc(ctx, n * sizeof *u.is_out)};
	budget b = {ir_alloc(ctx, n * sizeof *b.nodes),
		    ir_alloc(ctx, n * sizeof *b.arrays)};
	ir_id *root = ir_alloc(ctx, n * sizeof *root);
	bool ok = u.n && u.first && u.user && u.slot && u.is_out && b.nodes &&
		  b.arrays && root;
	if (ok) {
		find_uses(f, &u);
		for (ir_id i = g->n_nodes; i-- > 0;)
			decide(g, &u, i, into, root, &b);
	} else {
		ir_error(ctx, f->loc, "out of memory");
	}
	ir_free(ctx, u.n);
	ir_free(ctx, u.first);
	ir_free(ctx, u.user);
	ir_free(ctx, u.slot);
	ir_free(ctx, u.is_out);
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
