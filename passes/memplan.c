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

static bool lifetimes_overlap(const pass_mem_block *a, const pass_mem_block *b)
{
	return a->start <= b->end && b->start <= a->end;
}

/* A block seen by the sort: its key fields and its index. */
typedef struct sort_item {
	uint64_t key; /* size (placement order) or offset (gap search) */
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

static int cmp_by_offset(const void *pa, const void *pb)
{
	const sort_item *x = pa, *y = pb;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* The lowest aligned offset where size bytes fit among the n_live placed
 * blocks live[] (sorted by offset) that overlap the new one in time. */
static uint64_t first_fit(const pass_mem_block *blocks, const sort_item *live,
			  uint32_t n_live, uint64_t size, uint64_t align)
{
	uint64_t at = 0;
	for (uint32_t i = 0; i < n_live; i++) {
		const pass_mem_block *o = &blocks[live[i].index];
		if (o->offset >= at + size)
			return at;
		uint64_t end = round_up(o->offset + o->size, align);
		if (end > at)
			at = end;
	}
	return at;
}

/* Places block order[k].index given the blocks order[0..k) placed. */
static uint64_t place_one(pass_mem_block *blocks, const sort_item *order,
			  uint32_t k, sort_item *live, uint64_t align)
{
	pass_mem_block *blk = &blocks[order[k].index];
	uint32_t n_live = 0;
	for (uint32_t j = 0; j < k; j++) {
		const pass_mem_block *o = &blocks[order[j].index];
		if (lifetimes_overlap(o, blk))
			live[n_live++] = (sort_item){o->offset, o->start,
						     order[j].index};
	}
	qsort(live, n_live, sizeof *live, cmp_by_offset);
	blk->offset = first_fit(blocks, live, n_live, blk->size, align);
	return round_up(blk->offset + blk->size, align);
}

uint64_t pass_memplan_blocks(ir_ctx *ctx, pass_mem_block *blocks, uint32_t n,
			     uint64_t align, bool *ok)
{
	sort_item *order = ir_alloc(ctx, (n + 1) * sizeof *order);
	sort_item *live = ir_alloc(ctx, (n + 1) * sizeof *live);
	*ok = order && live;
	uint64_t total = 0;
	if (*ok) {
		for (uint32_t i = 0; i < n; i++)
			order[i] = (sort_item){blocks[i].size, blocks[i].start,
					       i};
		qsort(order, n, sizeof *order, cmp_by_size);
	}
	for (uint32_t k = 0; *ok && k < n; k++) {
		uint64_t end = place_one(blocks, order, k, live, align);
		if (end > total)
			total = end;
	}
	if (!*ok)
		ir_error(ctx, (ir_loc){0}, "out of memory");
	ir_free(ctx, order);
	ir_free(ctx, live);
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
