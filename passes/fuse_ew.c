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
 *   - it is no output of the function; with one use it is computed in
 *     its reader's kernel, with several in each of its readers' kernels
 *     (a reader may itself be computed in several kernels: GELU's
 *     x sqrt(1/2) in the forward's kernel and in the backward's);
 *   - a costly op (a transcendental function, IR_OPF_COSTLY) is then
 *     computed once in each kernel that computes it, in at most
 *     PASS_FUSE_EW_MAX_COSTLY kernels (GELU's erf in its forward kernel
 *     and again in its backward's, instead of a buffer written and read
 *     back);
 *   - the consumer reads each of its elements once, at an index it can
 *     address: an elementwise consumer (or dropout, broadcast) of the same
 *     shape (a consumer that broadcasts the node would recompute it), a
 *     permute or a slice, or the data operand of a reduction (sum, mean, max), a
 *     softmax, log_softmax, masked_softmax, layer_norm, cross_entropy or
 *     cross_entropy_grad (the row kinds read x once a pass over the row);
 *   - every kernel that ends up computing it stays small: at most
 *     PASS_FUSE_EW_MAX_NODES tree nodes and PASS_FUSE_EW_MAX_ARRAYS arrays
 *     read through strides (one per buffer an operand's tree reads, a
 *     buffer read twice there counting once unless a layout op is on the
 *     way to it, and one per fused dropout's index), and it is computed
 *     in at most PASS_FUSE_EW_MAX_ROOTS kernels.
 * Consumers are decided before their producers (the graph is walked
 * backwards), so a whole chain collapses into the kernel at its end; a
 * candidate is tried by measuring again the kernels it would join.
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

/* The state of one function's plan. mark[x] == stamp when buffer x is
 * already counted in the operand tree being measured. */
typedef struct planner {
	const ir_graph *g;
	const pass_graph_uses *u;
	ir_id *into;
	uint32_t *mark, stamp;
	ir_id roots[PASS_FUSE_EW_MAX_ROOTS + 1];
	uint32_t n_roots, n_paths;
	bool is_nested; /* a path to a root passes a PASS_FUSE_EW_EVERY node */
} planner;

/* How many operand slots read node p (its users are
 * u->list[u->start[p] ..), in slots u->slot[...]). */
static uint32_t n_uses(const pass_graph_uses *u, ir_id p)
{
	return u->start[p + 1] - u->start[p];
}

/* Whether every use of p can read it in place. */
static bool all_hosted(const ir_graph *g, const pass_graph_uses *u, ir_id p)
{
	for (uint32_t k = 0; k < n_uses(u, p); k++)
		if (!hosts(g, u->list[u->start[p] + k],
			   u->slot[u->start[p] + k], p))
			return false;
	return n_uses(u, p) > 0;
}

/* Collects the kernels whose trees compute fused node p, following its
 * readers up to the roots (nodes with a kernel of their own); false past
 * PASS_FUSE_EW_MAX_ROOTS roots or a bounded number of paths. */
static bool find_roots(planner *pl, ir_id p)
{
	const pass_graph_uses *u = pl->u;
	for (uint32_t k = 0; k < n_uses(u, p); k++) {
		ir_id c = u->list[u->start[p] + k];
		if (++pl->n_paths > 4 * PASS_FUSE_EW_MAX_NODES)
			return false;
		if (pl->into[c] != IR_NONE) {
			pl->is_nested |= pl->into[c] == PASS_FUSE_EW_EVERY;
			if (!find_roots(pl, c))
				return false;
			continue;
		}
		uint32_t r = 0;
		while (r < pl->n_roots && pl->roots[r] != c)
			r++;
		if (r == pl->n_roots && pl->n_roots++ == PASS_FUSE_EW_MAX_ROOTS)
			return false;
		pl->roots[r] = c;
	}
	return true;
}

/* The size of one kernel: tree nodes, arrays, and how often node p's
 * tree occurs in it. */
typedef struct kernel_size {
	uint32_t nodes, arrays, n_p;
} kernel_size;

static bool is_layout(ir_op op)
{
	return op == IR_OP_PERMUTE || op == IR_OP_SLICE || op == IR_OP_BROADCAST;
}

/* Adds node x, read by user in place of one of its operands, and its
 * fused operands to s; is_moved when a layout op is above x. */
static void measure(planner *pl, ir_id x, ir_id user, ir_id p, bool is_moved,
		    kernel_size *s)
{
	const ir_node *n = &pl->g->nodes[x];
	if (++s->nodes > PASS_FUSE_EW_MAX_NODES)
		return;
	if (!pass_fuse_ew_is_in(pl->into, x, user)) {
		if (is_moved || pl->mark[x] != pl->stamp)
			s->arrays++;
		pl->mark[x] = pl->stamp;
		return;
	}
	s->n_p += x == p;
	s->arrays += n->op == IR_OP_DROPOUT;
	for (uint32_t a = 0; a < n->n_args; a++)
		measure(pl, ir_arg(pl->g, x, a), x, p,
			is_moved || is_layout(n->op), s);
}

/* Whether kernel r stays within its bounds; *n_p: how often p's tree
 * occurs in it. */
static bool fits(planner *pl, ir_id r, ir_id p, uint32_t *n_p)
{
	kernel_size s = {1, 0, 0};
	const ir_node *n = &pl->g->nodes[r];
	for (uint32_t a = 0; a < n->n_args; a++) {
		pl->stamp++;
		measure(pl, ir_arg(pl->g, r, a), r, p, false, &s);
	}
	*n_p = s.n_p;
	return s.nodes <= PASS_FUSE_EW_MAX_NODES &&
	       s.arrays <= PASS_FUSE_EW_MAX_ARRAYS;
}

/* Whether fusing p (into[p] already set so) keeps every kernel that
 * would compute it within bounds, a costly p once in each of at most
 * PASS_FUSE_EW_MAX_COSTLY kernels, and a p of several readers under
 * another such node in at most PASS_FUSE_EW_MAX_NESTED kernels. */
static bool kernels_fit(planner *pl, ir_id p)
{
	bool is_costly = ir_op_table[pl->g->nodes[p].op].flags & IR_OPF_COSTLY;
	bool is_every = pl->into[p] == PASS_FUSE_EW_EVERY;
	pl->n_roots = pl->n_paths = 0;
	pl->is_nested = false;
	if (!find_roots(pl, p) ||
	    (is_costly && pl->n_roots > PASS_FUSE_EW_MAX_COSTLY) ||
	    (is_every && pl->is_nested && pl->n_roots > PASS_FUSE_EW_MAX_NESTED))
		return false;
	for (uint32_t r = 0; r < pl->n_roots; r++) {
		uint32_t n_p;
		if (!fits(pl, pl->roots[r], p, &n_p) || (is_costly && n_p > 1))
			return false;
	}
	return true;
}

/* Decides node p, whose readers are all decided: fused into its one
 * reader, into each of several (PASS_FUSE_EW_EVERY), or a kernel of its
 * own (IR_NONE). */
static void decide(planner *pl, ir_id p)
{
	const pass_graph_uses *u = pl->u;
	const ir_node *n = &pl->g->nodes[p];
	pl->into[p] = IR_NONE;
	if (u->output[p] >= 0 || !pass_fuse_ew_is_fusible(n->op) ||
	    !all_hosted(pl->g, u, p))
		return;
	pl->into[p] = n_uses(u, p) == 1 ? u->list[u->start[p]]
					: PASS_FUSE_EW_EVERY;
	if (!kernels_fit(pl, p))
		pl->into[p] = IR_NONE;
}

bool pass_fuse_ew_plan(const ir_module *m, const ir_func *f, ir_id *into)
{
	const ir_graph *g = &f->g;
	uint32_t n = g->n_nodes + 1;
	ir_ctx *ctx = m->ctx;
	pass_graph_uses u = {0};
	planner pl = {g, &u, into, ir_alloc(ctx, n * sizeof *pl.mark), 0, {0},
		      0, 0,  false};
	bool ok = pass_graph_uses_build(ctx, f, &u) && pl.mark;
	if (ok) {
		for (ir_id i = 0; i < n; i++)
			pl.mark[i] = 0;
		for (ir_id i = g->n_nodes; i-- > 0;)
			decide(&pl, i);
	} else {
		ir_error(ctx, f->loc, "out of memory");
	}
	pass_graph_uses_fini(ctx, &u);
	ir_free(ctx, pl.mark);
	return ok;
}

uint32_t pass_fuse_ew_count(const ir_func *f, const ir_id *into)
{
	uint32_t n = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		n += into[i] != IR_NONE;
	return n;
}
