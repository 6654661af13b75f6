/*
 * cg_sched.h - a static schedule of one entry point's kernels over a fixed
 * team of threads.
 *
 * An entry point of a training step is hundreds of kernels, most of them
 * too small (a few microseconds) to split over threads one at a time,
 * but many independent of each other: the two GRU layers of an encoder
 * step, the weight gradients of a backward pass beside the gradients that
 * flow on. cg_sched places the kernels (or pieces of the large ones,
 * ranges of their outer loop) on the threads ahead of time, from costs
 * estimated at compile time: earliest-task-first list scheduling (of the
 * ready tasks, the one that can start soonest, ties to the longest path
 * to the end; a result read on another thread than its producer's costs
 * the time to move it between the cores' caches), the static schedulers
 * of the HEFT family.
 *
 * At run time every thread runs its list in order and publishes how many
 * of its tasks are done; a task whose inputs come from another thread
 * first waits until that thread has done enough (cg_sched_sync computes
 * the waits). Every wait is on a task estimated to end before the waiting
 * one starts, so the waits form no cycle and the team cannot deadlock,
 * whatever the real timing.
 */
#ifndef ATTNC_CG_SCHED_H
#define ATTNC_CG_SCHED_H

#include "ir.h"

#include <stdbool.h>
#include <stdint.h>

/* A kernel to place: nodes are in an order in which every node comes
 * after those it depends on. */
typedef struct cg_sched_node {
	double cost;    /* estimated cycles of the whole kernel, > 0 */
	double comm;    /* cycles more for another thread to read its
			   * result (moving it between cores' caches) */
	int64_t extent; /* its range is [0, extent); >= 2 may be split */
	uint32_t first_dep, n_deps; /* deps[first_dep ..]: earlier nodes */
} cg_sched_node;

/* One piece of a node's range placed on a thread. */
typedef struct cg_sched_task {
	uint32_t node;
	int64_t lo, hi;         /* the piece of [0, extent) it computes */
	uint32_t thread, index; /* index: its place in the thread's list */
	double start, end;      /* estimated, in cycles */
	uint32_t first_wait, n_waits; /* waits[first_wait ..] (cg_sched_sync) */
} cg_sched_task;

/* Before a task: wait until `thread` has finished `count` tasks. */
typedef struct cg_sched_wait {
	uint32_t thread, count;
} cg_sched_wait;

typedef struct cg_sched {
	uint32_t n_threads, n_nodes, n_tasks, n_waits;
	cg_sched_task *tasks;   /* by thread, then index */
	uint32_t *thread_first; /* thread t's tasks: [first[t], first[t+1]) */
	uint32_t *node_first;   /* node i's tasks: node_task[first[i] ..
				  * first[i + 1]) */
	uint32_t *node_task;
	cg_sched_wait *waits;
	double total;    /* the estimated cost of every task, summed */
	double makespan; /* the estimated end of the last task */
} cg_sched;

/* Schedules n nodes over n_threads threads. A node of extent >= 2 whose
 * cost is at least split_cost is cut into min(n_threads, extent) pieces
 * of equal ranges, each costing cost / pieces + piece_cost; piece p goes
 * to thread p where another thread would not start it sooner, and
 * pieces of one node placed one after the other on one thread become
 * one task over their ranges. Returns false (reported in ctx) if memory
 * ran out. */
bool cg_sched_build(ir_ctx *ctx, const cg_sched_node *nodes,
		    const uint32_t *deps, uint32_t n, uint32_t n_threads,
		    double split_cost, double piece_cost, cg_sched *s);

/* Computes the waits of every task from node-level dependencies (those
 * given to cg_sched_build and any others: node i needs every task of
 * deps[first[i] .. first[i] + count[i]) finished before any of its own
 * starts), keeping only the waits its thread's earlier waits do not
 * already imply. Returns false if a dependency is not estimated to end
 * before the task that needs it starts (a schedule that could deadlock:
 * the caller must not use it) or if memory ran out (reported in ctx). */
bool cg_sched_sync(ir_ctx *ctx, cg_sched *s, const uint32_t *first,
		   const uint32_t *count, const uint32_t *deps);

void cg_sched_fini(ir_ctx *ctx, cg_sched *s);

/* ---- reused bytes ------------------------------------------------------ */

typedef struct pass_mem_block pass_mem_block; /* passes.h */

/* The buffers of a schedule's layout (pass_memplan_blocks: lifetimes in
 * ticks, offsets placed) by offset, to find for each buffer y the earlier
 * ones whose bytes it reuses: those of nonzero size, as y is, that end
 * before y starts and share a byte with it. Finding them costs time in
 * proportion to the buffers sharing bytes with y (ever), times log n. */
typedef struct cg_reuse_index {
	const pass_mem_block *blocks;
	struct cg_reuse_item {
		uint64_t offset;
		uint32_t block;
	} * by_offset;      /* blocks of nonzero size, by offset then number */
	uint32_t n, leaves; /* leaves: a power of two, at least n */
	uint64_t *top;      /* tree node -> the highest end below it */
	uint32_t *found, n_found; /* cg_reuse_index_find's answer */
} cg_reuse_index;

/* Indexes blocks[0..n) (kept, not copied). Returns false (reported in
 * ctx) if memory ran out; cg_reuse_index_fini frees it either way. */
bool cg_reuse_index_make(ir_ctx *ctx, const pass_mem_block *blocks, uint32_t n,
			 cg_reuse_index *ri);

/* Puts in ri->found[0 .. ri->n_found), in increasing order, the blocks
 * whose bytes block y reuses. */
void cg_reuse_index_find(cg_reuse_index *ri, uint32_t y);

void cg_reuse_index_fini(ir_ctx *ctx, cg_reuse_index *ri);

#endif
