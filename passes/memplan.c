/*
 * memplan.c - static memory planning: where in one activation slab each
 * intermediate result lives.
 *
 * Each result is a block with a size and a lifetime (the step that makes
 * it to the last step that reads it). Blocks whose lifetimes overlap must
 * not share bytes; the others may. The placement is the greedy one of
 * TVM's and Glow's static planners: take blocks from the largest down, and
 * put each at the lowest offset where it fits between the blocks already
 * placed that are alive at the same time (first fit). Views (reshape,
 * permute) own no bytes: they read their root's buffer, which therefore
 * stays alive until the view's last reader.
 */
#include "passes.h"

#include <stdlib.h>
#include <string.h>

static uint64_t round_up(uint64_t x, uint64_t align)
{
	return (x + align - 1) & ~(align - 1);
}

/* A block seen by the sort: its key fields and its index. */
typedef struct sort_item {
	uint64_t key; /* size */
	uint32_t start, index;
} sort_item;

/* Larger blocks first; ties by earlier start, then by index, so the
 * placement does not depend on qsort's whims. */
static int cmp_by_size(const void *pa, const void *pb)
{
	const sort_item *x = pa, *y = pb;
	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* ---- first fit ------------------------------------------------------------
 *
 * The first fit walks the placed blocks alive with the new one from the
 * lowest offset up, keeping `at`, the highest aligned end seen so far,
 * and stops at the first block that starts size bytes or more above
 * `at`: the new block goes to `at` (to the last `at` if none stops it).
 * That is the lowest offset c where each of those blocks ends at or
 * below c or starts at or above c + size, so the order of blocks of
 * equal offsets does not matter.
 *
 * The placed blocks sit in a treap ordered by offset, each subtree
 * knowing the range of its blocks' starts and ends, the highest aligned
 * end and a bound of the gaps between them. The walk skips subtrees
 * alive at other times, and passes a subtree whose blocks are all alive
 * with the new one in one step when none of them can stop it: the
 * blocks of a deep model, stacked one above the other, no longer cost a
 * step each for each block placed after them. */

#define FIT_NONE UINT32_MAX

/* A placed block, and what its subtree holds. */
typedef struct fit_node {
	uint32_t left, right, prio; /* children (FIT_NONE if none) */
	uint32_t start, end;        /* the block's lifetime */
	uint64_t offset, top;       /* its offset, its end aligned up */
	uint32_t min_start, max_start, min_end, max_end; /* of the subtree */
	uint64_t lowest, highest; /* offsets of its first and last block */
	uint64_t max_top;         /* the highest aligned end */
	uint64_t max_gap;         /* at least how far any block but the first
			   * starts above the aligned ends before it */
} fit_node;

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t gap_above(uint64_t offset, uint64_t top)
{
	return offset > top ? offset - top : 0;
}

/* A well-mixed priority from a block's number (a fixed treap shape). */
static uint32_t fit_prio(uint32_t k)
{
	uint32_t x = k * 0x9e3779b9u + 0x7f4a7c15u;
	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	return x ^ (x >> 16);
}

static void fit_span(fit_node *x, const fit_node *c)
{
	if (c->min_start < x->min_start)
		x->min_start = c->min_start;
	if (c->max_start > x->max_start)
		x->max_start = c->max_start;
	if (c->min_end < x->min_end)
		x->min_end = c->min_end;
	if (c->max_end > x->max_end)
		x->max_end = c->max_end;
	x->max_gap = max_u64(x->max_gap, c->max_gap);
}

/* Recomputes node t's summary from its own block and its children's. */
static void fit_pull(fit_node *nodes, uint32_t t)
{
	fit_node *x = &nodes[t];
	x->min_start = x->max_start = x->start;
	x->min_end = x->max_end = x->end;
	x->lowest = x->highest = x->offset;
	x->max_top = x->top;
	x->max_gap = 0;
	if (x->left != FIT_NONE) {
		const fit_node *l = &nodes[x->left];
		fit_span(x, l);
		x->lowest = l->lowest;
		x->max_gap = max_u64(x->max_gap,
				     gap_above(x->offset, l->max_top));
		x->max_top = max_u64(l->max_top, x->top);
	}
	if (x->right != FIT_NONE) {
		const fit_node *r = &nodes[x->right];
		fit_span(x, r);
		x->highest = r->highest;
		x->max_gap = max_u64(x->max_gap,
				     gap_above(r->lowest, x->max_top));
		x->max_top = max_u64(x->max_top, r->max_top);
	}
}

/* Splits subtree t into the blocks at offsets up to offset (*lo) and
 * above it (*hi). */
static void fit_split(fit_node *nodes, uint32_t t, uint64_t offset,
		      uint32_t *lo, uint32_t *hi)
{
	if (t == FIT_NONE) {
		*lo = *hi = FIT_NONE;
	} else if (nodes[t].offset <= offset) {
		fit_split(nodes, nodes[t].right, offset, &nodes[t].right, hi);
		*lo = t;
		fit_pull(nodes, t);
	} else {
		fit_split(nodes, nodes[t].left, offset, lo, &nodes[t].left);
		*hi = t;
		fit_pull(nodes, t);
	}
}

/* Adds node t to subtree root, after the blocks of its offset; returns
 * the new root. */
static uint32_t fit_insert(fit_node *nodes, uint32_t root, uint32_t t)
{
	if (root == FIT_NONE || nodes[t].prio > nodes[root].prio) {
		fit_split(nodes, root, nodes[t].offset, &nodes[t].left,
			  &nodes[t].right);
		fit_pull(nodes, t);
		return t;
	}
	if (nodes[t].offset < nodes[root].offset)
		nodes[root].left = fit_insert(nodes, nodes[root].left, t);
	else
		nodes[root].right = fit_insert(nodes, nodes[root].right, t);
	fit_pull(nodes, root);
	return root;
}

/* The first fit's walk over subtree t for block b: true when a block
 * stops it (b goes to *at), false when *at is the highest aligned end
 * of the subtree's blocks alive with b (or *at's value before). */
static bool fit_walk(const fit_node *nodes, uint32_t t, const pass_mem_block *b,
		     uint64_t *at)
{
	if (t == FIT_NONE)
		return false;
	const fit_node *x = &nodes[t];
	if (x->min_start > b->end || x->max_end < b->start)
		return false; /* none alive with b */
	if (x->max_start <= b->end && x->min_end >= b->start) {
		/* All alive with b: the first stops the walk, or none does
		 * when all start below at + size, or no block but the first
		 * starts size bytes above the ends before it. */
		if (x->lowest >= *at + b->size)
			return true;
		if (x->highest < *at + b->size || x->max_gap < b->size) {
			*at = max_u64(*at, x->max_top);
			return false;
		}
	}
	if (fit_walk(nodes, x->left, b, at))
		return true;
	if (x->start <= b->end && b->start <= x->end) {
		if (x->offset >= *at + b->size)
			return true;
		*at = max_u64(*at, x->top);
	}
	return fit_walk(nodes, x->right, b, at);
}

uint64_t pass_memplan_blocks(ir_ctx *ctx, pass_mem_block *blocks, uint32_t n,
			     uint64_t align, bool *ok)
{
	sort_item *order = ir_alloc(ctx, (n + 1) * sizeof *order);
	fit_node *nodes = ir_alloc(ctx, (n + 1) * sizeof *nodes);
	*ok = order && nodes;
	uint64_t total = 0;
	if (*ok) {
		for (uint32_t i = 0; i < n; i++)
			order[i] = (sort_item){blocks[i].size, blocks[i].start,
					       i};
		qsort(order, n, sizeof *order, cmp_by_size);
	}
	uint32_t root = FIT_NONE;
	for (uint32_t k = 0; *ok && k < n; k++) {
		pass_mem_block *b = &blocks[order[k].index];
		uint64_t at = 0;
		fit_walk(nodes, root, b, &at);
		b->offset = at;
		nodes[k] = (fit_node){.left = FIT_NONE,
				      .right = FIT_NONE,
				      .prio = fit_prio(k),
				      .start = b->start,
				      .end = b->end,
				      .offset = at,
				      .top = round_up(at + b->size, align)};
		root = fit_insert(nodes, root, k);
		total = max_u64(total, nodes[k].top);
	}
	if (!*ok)
		ir_error(ctx, (ir_loc){0}, "out of memory");
	ir_free(ctx, order);
	ir_free(ctx, nodes);
	return total;
}

/* A change of the live bytes: +size at a block's start, -size after its
 * end. */
typedef struct live_event {
	uint64_t step; /* end + 1 may pass UINT32_MAX */
	uint64_t size;
	bool is_start;
} live_event;

/* By step; at one step the ends (of blocks that died the step before)
 * before the starts. */
static int cmp_events(const void *pa, const void *pb)
{
	const live_event *x = pa, *y = pb;
	if (x->step != y->step)
		return x->step < y->step ? -1 : 1;
	return (int)x->is_start - (int)y->is_start;
}

bool pass_memplan_peak(ir_ctx *ctx, const pass_mem_block *blocks, uint32_t n,
		       uint64_t *peak, uint32_t *at)
{
	live_event *ev = ir_alloc(ctx, (2 * (size_t)n + 1) * sizeof *ev);
	*peak = 0;
	*at = 0;
	if (!ev) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	for (uint32_t i = 0; i < n; i++) {
		ev[2 * i] = (live_event){blocks[i].start, blocks[i].size, true};
		ev[2 * i + 1] = (live_event){(uint64_t)blocks[i].end + 1,
					     blocks[i].size, false};
	}
	qsort(ev, 2 * (size_t)n, sizeof *ev, cmp_events);
	uint64_t live = 0;
	for (size_t k = 0; k < 2 * (size_t)n; k++) {
		live = ev[k].is_start ? live + ev[k].size : live - ev[k].size;
		if (live > *peak) {
			*peak = live;
			*at = (uint32_t)ev[k].step;
		}
	}
	ir_free(ctx, ev);
	return true;
}

/* ---- planning a function -------------------------------------------------- */

/* A symbol's value: bound, else its fallback, else 1; a derived one
 * (B*T) is its factors' product. */
static int64_t sym_value(const ir_module *m, int32_t sym,
			 const int64_t *sym_values)
{
	const ir_sym *s = &m->syms[sym];
	if (sym_values)
		return sym_values[sym];
	if (!s->n_factors)
		return s->fallback ? s->fallback : 1;
	int64_t v = 1;
	for (uint32_t k = 0; k < s->n_factors; k++)
		v *= sym_value(m, s->factors[k], NULL);
	return v;
}

uint64_t pass_type_bytes(const ir_module *m, const ir_type *t,
			 const int64_t *sym_values)
{
	uint64_t n = ir_dtype_size(t->dtype);
	for (int i = 0; i < t->rank; i++) {
		ir_dim d = t->dims[i];
		int64_t v = 1;
		if (!ir_dim_is_static(d))
			v = sym_value(m, d.sym, sym_values);
		n *= (uint64_t)(d.coef * v);
	}
	return n;
}

/* storage[i]: the node whose buffer holds node i's data. */
static void find_storage(const ir_graph *g, ir_id *storage)
{
	for (ir_id i = 0; i < g->n_nodes; i++) {
		const ir_node *n = &g->nodes[i];
		unsigned flags = ir_op_table[n->op].flags;
		if (flags & IR_OPF_LEAF)
			storage[i] = IR_NONE;
		else if (flags & IR_OPF_VIEW)
			storage[i] = storage[ir_arg(g, i, 0)];
		else
			storage[i] = i;
	}
}

/* last[r]: the last step that reads root r's buffer, through any view. */
static void find_last_use(const ir_func *f, const ir_id *storage, uint32_t *last)
{
	const ir_graph *g = &f->g;
	for (ir_id i = 0; i < g->n_nodes; i++)
		last[i] = i;
	for (ir_id i = 0; i < g->n_nodes; i++) {
		const ir_id *args = ir_node_args(g, &g->nodes[i]);
		for (uint32_t a = 0; a < g->nodes[i].n_args; a++)
			if (storage[args[a]] != IR_NONE)
				last[storage[args[a]]] = i;
	}
	for (uint32_t o = 0; o < f->n_outputs; o++)
		if (storage[f->outputs[o]] != IR_NONE)
			last[storage[f->outputs[o]]] = g->n_nodes;
}

static bool plan_alloc(ir_ctx *ctx, pass_memplan *plan, uint32_t n)
{
	memset(plan, 0, sizeof *plan);
	plan->n_nodes = n;
	plan->offset = ir_alloc(ctx, (n + 1) * sizeof *plan->offset);
	plan->storage = ir_alloc(ctx, (n + 1) * sizeof *plan->storage);
	return plan->offset && plan->storage;
}

/* Makes one block per buffer-owning node; map[k] is block k's node. */
static uint32_t make_blocks(const ir_module *m, const ir_func *f,
			    const int64_t *sym_values, const ir_id *storage,
			    const uint32_t *last, pass_mem_block *blocks,
			    ir_id *map)
{
	uint32_t k = 0;
	for (ir_id i = 0; i < f->g.n_nodes; i++) {
		if (storage[i] != i)
			continue;
		blocks[k] = (pass_mem_block){pass_type_bytes(m,
							     &f->g.nodes[i].type,
							     sym_values),
					     i, last[i], 0};
		map[k++] = i;
	}
	return k;
}

static bool place(const ir_module *m, const ir_func *f,
		  const int64_t *sym_values, pass_memplan *plan, uint32_t *last)
{
	uint32_t n = f->g.n_nodes;
	pass_mem_block *blocks = ir_alloc(m->ctx, (n + 1) * sizeof *blocks);
	ir_id *map = ir_alloc(m->ctx, (n + 1) * sizeof *map);
	bool ok = blocks && map;
	if (ok) {
		uint32_t nb = make_blocks(m, f, sym_values, plan->storage, last,
					  blocks, map);
		plan->total_bytes = pass_memplan_blocks(m->ctx, blocks, nb,
							PASS_MEMPLAN_ALIGN, &ok);
		for (ir_id i = 0; i < n; i++)
			plan->offset[i] = PASS_MEMPLAN_NONE;
		for (uint32_t k = 0; ok && k < nb; k++)
			plan->offset[map[k]] = blocks[k].offset;
		for (ir_id i = 0; ok && i < n; i++)
			if (plan->storage[i] != IR_NONE)
				plan->offset[i] = plan->offset[plan->storage[i]];
	} else {
		ir_error(m->ctx, f->loc, "out of memory");
	}
	ir_free(m->ctx, blocks);
	ir_free(m->ctx, map);
	return ok;
}

bool pass_memplan_func(const ir_module *m, const ir_func *f,
		       const int64_t *sym_values, pass_memplan *plan)
{
	uint32_t n = f->g.n_nodes;
	uint32_t *last = ir_alloc(m->ctx, (n + 1) * sizeof *last);
	bool ok = plan_alloc(m->ctx, plan, n) && last;
	if (ok) {
		find_storage(&f->g, plan->storage);
		find_last_use(f, plan->storage, last);
		ok = place(m, f, sym_values, plan, last);
	} else {
		ir_error(m->ctx, f->loc, "out of memory");
	}
	ir_free(m->ctx, last);
	if (!ok)
		pass_memplan_fini(m->ctx, plan);
	return ok;
}

void pass_memplan_fini(ir_ctx *ctx, pass_memplan *plan)
{
	ir_free(ctx, plan->offset);
	ir_free(ctx, plan->storage);
	memset(plan, 0, sizeof *plan);
}
