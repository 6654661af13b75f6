/*
 * cg_sched.c - earliest-task-first list scheduling of an entry point's
 * kernels over a fixed team of threads, and the waits that keep its
 * dependencies (cg_sched.h).
 *
 * Scheduling: a node becomes ready when every task of every node it
 * depends on is placed; among the ready tasks the one that can start
 * soonest on some thread (the later of the thread's end and its inputs'
 * ends) goes there, ties to the longest estimated path from it to the
 * end (its bottom level), then to the earlier node. Threads never run a
 * task in a gap before one already placed, so each thread's list is in
 * order of start.
 *
 * Reused bytes: the buffers sorted by offset under a tree of the highest
 * end of each run of them; the buffers that share bytes with one are
 * those starting below its end (a prefix) that end above its offset,
 * which the tree finds without looking at the others.
 */
#include "cg_sched.h"
#include "passes.h"

#include <stdlib.h>

#include <string.h>

/* The number of pieces node i is cut into. */
static uint32_t pieces_of(const cg_sched_node *nd, uint32_t n_threads,
			  double split_cost)
{
	if (n_threads < 2 || nd->extent < 2 || nd->cost < split_cost)
		return 1;
	return nd->extent < (int64_t)n_threads ? (uint32_t)nd->extent
					       : n_threads;
}

/* The working state of cg_sched_build. */
typedef struct builder {
	const cg_sched_node *nodes;
	const uint32_t *deps;
	uint32_t n, n_threads;
	uint32_t *pieces;   /* per node */
	double *piece_cost; /* per node: the cost of one of its pieces */
	double *level;      /* per node: bottom level */
	uint32_t *succ_first, *succ; /* the readers of each node */
	uint32_t *waiting;           /* per node: deps not yet fully placed */
	uint32_t *left;              /* per node: pieces not yet placed */
	double *done_on;             /* per node and thread: when its last piece
			       * there ends (0: none there) */
	uint32_t *ready, n_ready; /* ready tasks as node * n_threads + piece */
	double *thread_end;
	cg_sched_task *placed; /* in placement order */
	uint32_t n_placed;
} builder;

static bool succ_lists(ir_ctx *ctx, builder *b)
{
	uint32_t n_edges = 0;
	for (uint32_t i = 0; i < b->n; i++)
		n_edges += b->nodes[i].n_deps;
	b->succ_first = ir_alloc(ctx, (b->n + 1) * sizeof *b->succ_first);
	b->succ = ir_alloc(ctx, (n_edges + 1) * sizeof *b->succ);
	if (!b->succ_first || !b->succ)
		return false;
	for (uint32_t i = 0; i < b->n; i++)
		for (uint32_t d = 0; d < b->nodes[i].n_deps; d++)
			b->succ_first[b->deps[b->nodes[i].first_dep + d]]++;
	uint32_t at = 0;
	for (uint32_t i = 0; i <= b->n; i++) {
		uint32_t c = i < b->n ? b->succ_first[i] : 0;
		b->succ_first[i] = at;
		at += c;
	}
	uint32_t *fill = b->waiting; /* scratch: cursor per node */
	for (uint32_t i = 0; i < b->n; i++)
		fill[i] = b->succ_first[i];
	for (uint32_t i = 0; i < b->n; i++)
		for (uint32_t d = 0; d < b->nodes[i].n_deps; d++)
			b->succ[fill[b->deps[b->nodes[i].first_dep + d]]++] = i;
	return true;
}

static void bottom_levels(builder *b)
{
	for (uint32_t i = b->n; i-- > 0;) {
		double most = 0;
		for (uint32_t s = b->succ_first[i]; s < b->succ_first[i + 1];
		     s++)
			if (b->level[b->succ[s]] > most)
				most = b->level[b->succ[s]];
		b->level[i] = b->piece_cost[i] + most;
	}
}

static void make_ready(builder *b, uint32_t i)
{
	for (uint32_t p = 0; p < b->pieces[i]; p++)
		b->ready[b->n_ready++] = i * b->n_threads + p;
}

/* When node i's inputs are estimated to be readable on thread t: a
 * result made on another thread costs its comm cycles more. */
static double ready_on(const builder *b, uint32_t i, uint32_t t)
{
	double at = 0;
	const cg_sched_node *nd = &b->nodes[i];
	for (uint32_t d = 0; d < nd->n_deps; d++) {
		uint32_t x = b->deps[nd->first_dep + d];
		const double *on = &b->done_on[(size_t)x * b->n_threads];
		for (uint32_t u = 0; u < b->n_threads; u++) {
			double e = on[u] +
				   (u != t && on[u] > 0 ? b->nodes[x].comm : 0);
			if (e > at)
				at = e;
		}
	}
	return at;
}

/* Whether thread t is the home of a piece of a split node: piece p's is
 * thread p, so that a node cut like the one before it finds on each
 * thread the rows that thread made, in its own core's cache. */
static bool is_home_of(const builder *b, uint32_t task, uint32_t t)
{
	return b->pieces[task / b->n_threads] > 1 && task % b->n_threads == t;
}

/* The ready task to place next and its thread: the earliest start, then
 * the highest bottom level, then a piece on its home thread, then the
 * lowest node and piece. */
static void pick(const builder *b, uint32_t *which, uint32_t *thread,
		 double *start)
{
	bool have = false;
	for (uint32_t r = 0; r < b->n_ready; r++) {
		uint32_t task = b->ready[r], i = task / b->n_threads;
		for (uint32_t t = 0; t < b->n_threads; t++) {
			double in = ready_on(b, i, t);
			double st = b->thread_end[t] > in ? b->thread_end[t]
							  : in;
			uint32_t best = have ? b->ready[*which] : 0;
			uint32_t bi = best / b->n_threads;
			bool is_home = is_home_of(b, task, t),
			     best_home = have && is_home_of(b, best, *thread);
			bool better = !have || st < *start ||
				      (st == *start &&
				       (b->level[i] > b->level[bi] ||
					(b->level[i] == b->level[bi] &&
					 (is_home > best_home ||
					  (is_home == best_home &&
					   task < best)))));
			if (better) {
				have = true;
				*which = r;
				*thread = t;
				*start = st;
			}
		}
	}
}

static void place(builder *b, uint32_t r, uint32_t t, double start)
{
	uint32_t task = b->ready[r], i = task / b->n_threads;
	uint32_t p = task % b->n_threads, k = b->pieces[i];
	int64_t e = b->nodes[i].extent;
	b->ready[r] = b->ready[--b->n_ready];
	double end = start + b->piece_cost[i];
	b->placed[b->n_placed++] = (cg_sched_task){
		.node = i,
		.lo = k == 1 ? 0 : e * p / k,
		.hi = k == 1 ? e : e * (p + 1) / k,
		.thread = t,
		.start = start,
		.end = end,
	};
	b->thread_end[t] = end;
	b->done_on[(size_t)i * b->n_threads + t] = end;
	if (--b->left[i] != 0)
		return;
	for (uint32_t s = b->succ_first[i]; s < b->succ_first[i + 1]; s++)
		if (--b->waiting[b->succ[s]] == 0)
			make_ready(b, b->succ[s]);
}

/* Joins the pieces of a node placed one after the other on one thread
 * (the other threads busy with other work) into one task over both
 * ranges: cut, the thread would pay a second call, and a matmul's second
 * piece would pack again the operand its split does not cut. */
static bool join_pieces(ir_ctx *ctx, builder *b)
{
	/* per thread: 1 + the index of its last task kept, 0 for none */
	uint32_t *last = ir_alloc(ctx, b->n_threads * sizeof *last);
	if (!last)
		return false;
	uint32_t n = 0;
	for (uint32_t j = 0; j < b->n_placed; j++) {
		cg_sched_task tk = b->placed[j];
		uint32_t l = last[tk.thread];
		cg_sched_task *prev = l ? &b->placed[l - 1] : NULL;
		if (prev && prev->node == tk.node &&
		    (prev->hi == tk.lo || tk.hi == prev->lo)) {
			prev->lo = prev->lo < tk.lo ? prev->lo : tk.lo;
			prev->hi = prev->hi > tk.hi ? prev->hi : tk.hi;
			prev->end = tk.end;
			continue;
		}
		b->placed[n++] = tk;
		last[tk.thread] = n;
	}
	ir_free(ctx, last);
	b->n_placed = n;
	return true;
}

/* Sorts the placed tasks by thread (each thread's already in order of
 * start) into s, and indexes them by node. */
static bool lay_out(ir_ctx *ctx, const builder *b, cg_sched *s)
{
	s->tasks = ir_alloc(ctx, (b->n_placed + 1) * sizeof *s->tasks);
	s->thread_first = ir_alloc(ctx, (b->n_threads + 1) *
						sizeof *s->thread_first);
	s->node_first = ir_alloc(ctx, (b->n + 1) * sizeof *s->node_first);
	s->node_task = ir_alloc(ctx, (b->n_placed + 1) * sizeof *s->node_task);
	if (!s->tasks || !s->thread_first || !s->node_first || !s->node_task)
		return false;
	uint32_t at = 0;
	for (uint32_t t = 0; t < b->n_threads; t++) {
		s->thread_first[t] = at;
		for (uint32_t j = 0; j < b->n_placed; j++)
			if (b->placed[j].thread == t) {
				s->tasks[at] = b->placed[j];
				s->tasks[at].index = at - s->thread_first[t];
				at++;
			}
	}
	s->thread_first[b->n_threads] = at;
	for (uint32_t j = 0; j < at; j++)
		s->node_first[s->tasks[j].node]++;
	uint32_t sum = 0;
	for (uint32_t i = 0; i <= b->n; i++) {
		uint32_t c = i < b->n ? s->node_first[i] : 0;
		s->node_first[i] = sum;
		sum += c;
	}
	uint32_t *fill = b->waiting; /* all 0 now: reused as a cursor */
	for (uint32_t j = 0; j < at; j++) {
		uint32_t i = s->tasks[j].node;
		s->node_task[s->node_first[i] + fill[i]++] = j;
	}
	return true;
}

static void builder_fini(ir_ctx *ctx, builder *b)
{
	ir_free(ctx, b->pieces);
	ir_free(ctx, b->piece_cost);
	ir_free(ctx, b->level);
	ir_free(ctx, b->succ_first);
	ir_free(ctx, b->succ);
	ir_free(ctx, b->waiting);
	ir_free(ctx, b->left);
	ir_free(ctx, b->done_on);
	ir_free(ctx, b->ready);
	ir_free(ctx, b->thread_end);
	ir_free(ctx, b->placed);
}

bool cg_sched_build(ir_ctx *ctx, const cg_sched_node *nodes,
		    const uint32_t *deps, uint32_t n, uint32_t n_threads,
		    double split_cost, double piece_cost, cg_sched *s)
{
	memset(s, 0, sizeof *s);
	s->n_threads = n_threads < 1 ? 1 : n_threads;
	s->n_nodes = n;
	builder b = {.nodes = nodes,
		     .deps = deps,
		     .n = n,
		     .n_threads = s->n_threads};
	size_t nn = n + 1;
	b.pieces = ir_alloc(ctx, nn * sizeof *b.pieces);
	b.piece_cost = ir_alloc(ctx, nn * sizeof *b.piece_cost);
	b.level = ir_alloc(ctx, nn * sizeof *b.level);
	b.waiting = ir_alloc(ctx, nn * sizeof *b.waiting);
	b.left = ir_alloc(ctx, nn * sizeof *b.left);
	b.done_on = ir_alloc(ctx, nn * b.n_threads * sizeof *b.done_on);
	b.ready = ir_alloc(ctx, nn * b.n_threads * sizeof *b.ready);
	b.thread_end = ir_alloc(ctx, b.n_threads * sizeof *b.thread_end);
	b.placed = ir_alloc(ctx, nn * b.n_threads * sizeof *b.placed);
	bool ok = b.pieces && b.piece_cost && b.level && b.waiting && b.left &&
		  b.done_on && b.ready && b.thread_end && b.placed &&
		  succ_lists(ctx, &b);
	for (uint32_t i = 0; ok && i < n; i++) {
		b.pieces[i] = pieces_of(&nodes[i], b.n_threads, split_cost);
		b.piece_cost[i] = nodes[i].cost / b.pieces[i] +
				  (b.pieces[i] > 1 ? piece_cost : 0);
		s->total += b.piece_cost[i] * b.pieces[i];
		b.left[i] = b.pieces[i];
		b.waiting[i] = nodes[i].n_deps;
	}
	if (ok) {
		bottom_levels(&b);
		for (uint32_t i = 0; i < n; i++)
			if (b.waiting[i] == 0)
				make_ready(&b, i);
		while (b.n_ready) {
			uint32_t r = 0, t = 0;
			double start = 0;
			pick(&b, &r, &t, &start);
			place(&b, r, t, start);
		}
		for (uint32_t t = 0; t < b.n_threads; t++)
			if (b.thread_end[t] > s->makespan)
				s->makespan = b.thread_end[t];
		ok = join_pieces(ctx, &b);
		s->n_tasks = b.n_placed;
		ok = ok && lay_out(ctx, &b, s);
	}
	builder_fini(ctx, &b);
	if (!ok)
		cg_sched_fini(ctx, s);
	return ok;
}

/* The waits of task j given what its thread has already waited for
 * (seen, per thread); false if a dependency could deadlock. */
static bool task_waits(cg_sched *s, uint32_t j, const uint32_t *first,
		       const uint32_t *count, const uint32_t *deps,
		       uint32_t *seen, uint32_t *need, uint32_t *cap)
{
	cg_sched_task *tk = &s->tasks[j];
	memset(need, 0, s->n_threads * sizeof *need);
	for (uint32_t d = 0; d < count[tk->node]; d++) {
		uint32_t i = deps[first[tk->node] + d];
		for (uint32_t q = s->node_first[i]; q < s->node_first[i + 1];
		     q++) {
			const cg_sched_task *dt = &s->tasks[s->node_task[q]];
			if (dt->end > tk->start)
				return false;
			if (dt->thread == tk->thread) {
				if (dt->index >= tk->index)
					return false;
			} else if (dt->index + 1 > need[dt->thread]) {
				need[dt->thread] = dt->index + 1;
			}
		}
	}
	tk->first_wait = s->n_waits;
	for (uint32_t u = 0; u < s->n_threads; u++) {
		if (need[u] <= seen[u])
			continue;
		if (s->n_waits == *cap)
			return false;
		s->waits[s->n_waits++] = (cg_sched_wait){u, need[u]};
		seen[u] = need[u];
	}
	tk->n_waits = s->n_waits - tk->first_wait;
	return true;
}

bool cg_sched_sync(ir_ctx *ctx, cg_sched *s, const uint32_t *first,
		   const uint32_t *count, const uint32_t *deps)
{
	/* A task waits at most once per other thread. */
	uint32_t cap = s->n_tasks * (s->n_threads - 1) + 1;
	uint32_t *seen = ir_alloc(ctx, s->n_threads * sizeof *seen);
	uint32_t *need = ir_alloc(ctx, s->n_threads * sizeof *need);
	ir_free(ctx, s->waits);
	s->waits = ir_alloc(ctx, cap * sizeof *s->waits);
	s->n_waits = 0;
	bool ok = seen && need && s->waits;
	for (uint32_t t = 0; ok && t < s->n_threads; t++) {
		memset(seen, 0, s->n_threads * sizeof *seen);
		for (uint32_t j = s->thread_first[t];
		     ok && j < s->thread_first[t + 1]; j++)
			ok = task_waits(s, j, first, count, deps, seen, need,
					&cap);
	}
	ir_free(ctx, seen);
	ir_free(ctx, need);
	return ok;
}

void cg_sched_fini(ir_ctx *ctx, cg_sched *s)
{
	ir_free(ctx, s->tasks);
	ir_free(ctx, s->thread_first);
	ir_free(ctx, s->node_first);
	ir_free(ctx, s->node_task);
	ir_free(ctx, s->waits);
	memset(s, 0, sizeof *s);
}

/* ---- reused bytes ------------------------------------------------------ */

static bool reuses(const pass_mem_block *a, const pass_mem_block *b)
{
	return a->end < b->start && a->size && b->size &&
	       a->offset < b->offset + b->size &&
	       b->offset < a->offset + a->size;
}

static int cmp_reuse_item(const void *pa, const void *pb)
{
	const struct cg_reuse_item *x = pa, *y = pb;
	if (x->offset != y->offset)
		return x->offset < y->offset ? -1 : 1;
	return x->block < y->block ? -1 : x->block > y->block;
}

static int cmp_u32(const void *pa, const void *pb)
{
	uint32_t x = *(const uint32_t *)pa, y = *(const uint32_t *)pb;
	return x < y ? -1 : x > y;
}

bool cg_reuse_index_make(ir_ctx *ctx, const pass_mem_block *blocks, uint32_t n,
			 cg_reuse_index *ri)
{
	memset(ri, 0, sizeof *ri);
	ri->blocks = blocks;
	ri->by_offset = ir_alloc(ctx, (n + 1) * sizeof *ri->by_offset);
	ri->found = ir_alloc(ctx, (n + 1) * sizeof *ri->found);
	ri->leaves = 1;
	while (ri->leaves < n)
		ri->leaves *= 2;
	ri->top = ir_alloc(ctx, 2 * (size_t)ri->leaves * sizeof *ri->top);
	if (!ri->by_offset || !ri->found || !ri->top) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	for (uint32_t k = 0; k < n; k++)
		if (blocks[k].size)
			ri->by_offset[ri->n++] =
				(struct cg_reuse_item){blocks[k].offset, k};
	qsort(ri->by_offset, ri->n, sizeof *ri->by_offset, cmp_reuse_item);
	for (uint32_t i = 0; i < ri->n; i++) {
		const pass_mem_block *b = &blocks[ri->by_offset[i].block];
		ri->top[ri->leaves + i] = b->offset + b->size;
	}
	for (uint32_t v = ri->leaves - 1; v >= 1; v--)
		ri->top[v] = ri->top[2 * v] > ri->top[2 * v + 1]
				     ? ri->top[2 * v]
				     : ri->top[2 * v + 1];
	return true;
}

/* Adds to found the blocks of tree node v (over by_offset[lo..hi)) that
 * come before by_offset[n_below], end above byte `above`, and whose
 * bytes block y reuses. */
static void reuse_visit(cg_reuse_index *ri, uint32_t v, uint32_t lo, uint32_t hi,
			uint32_t n_below, uint64_t above, uint32_t y)
{
	if (lo >= n_below || ri->top[v] <= above)
		return;
	if (hi - lo == 1) {
		uint32_t x = ri->by_offset[lo].block;
		if (reuses(&ri->blocks[x], &ri->blocks[y]))
			ri->found[ri->n_found++] = x;
		return;
	}
	uint32_t mid = lo + (hi - lo) / 2;
	reuse_visit(ri, 2 * v, lo, mid, n_below, above, y);
	reuse_visit(ri, 2 * v + 1, mid, hi, n_below, above, y);
}

void cg_reuse_index_find(cg_reuse_index *ri, uint32_t y)
{
	const pass_mem_block *b = &ri->blocks[y];
	ri->n_found = 0;
	if (!b->size)
		return;
	uint32_t lo = 0, hi = ri->n; /* the blocks starting below b's end */
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (ri->by_offset[mid].offset < b->offset + b->size)
			lo = mid + 1;
		else
			hi = mid;
	}
	reuse_visit(ri, 1, 0, ri->leaves, lo, b->offset, y);
	qsort(ri->found, ri->n_found, sizeof *ri->found, cmp_u32);
}

void cg_reuse_index_fini(ir_ctx *ctx, cg_reuse_index *ri)
{
	ir_free(ctx, ri->by_offset);
	ir_free(ctx, ri->found);
	ir_free(ctx, ri->top);
	memset(ri, 0, sizeof *ri);
}
