/*
 * cg_lower_sched.c - an entry point run as a static schedule over a team
 * of threads (cg_sched.h): the kernels' estimated costs, the schedule's
 * own scratch layout, and the code of the threads.
 *
 * Memory: buffers live from their producer's first task to the last task
 * that reads them, in estimated time, and are placed by the same
 * first-fit planner as the in-order layout (pass_memplan_blocks); a
 * kernel whose buffer reuses bytes of an earlier one waits for that one's
 * producer and readers, so reuse is safe whatever the real timing.
 *
 * Run time: the entry point passes a context of cache lines to one
 * GOMP_parallel region: line 0 holds the call's pointers, the status (the
 * lowest code of a failing kernel's, its node's number added,
 * INT32_MAX while none failed) and a flag
 * set when the team came out smaller than planned; line 1 + t holds
 * thread t's count of finished tasks, stored with release order after
 * each task and read with acquire order by waits. A wait spins on the
 * count (with the CPU's pause hint, yielding the core now and then, and
 * giving up when a kernel failed).
 */
#include "cg_lower.h"
#include "cg_entry.h"
#include "passes.h"

#include <llvm-c/TargetMachine.h>

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Kernels split into pieces from this many estimated cycles (~2 µs),
 * each piece costing this much more (its call and the readers' wait). */
#define SPLIT_COST 6000.0
#define PIECE_COST 300.0
/* An entry point is scheduled when its kernels are worth this many
 * cycles and the schedule is estimated this much shorter than them. */
#define MIN_TOTAL 30000.0
#define MIN_GAIN 0.9
/* Cycles per byte of a kernel's result read on another core. */
#define COMM_COST 0.05
/* The windows tried after the schedule without one, as long as its
 * scratch is larger than the in-order one's (cg_sched_plan_make), and
 * how much longer than that schedule's their estimated time may be. */
static const uint32_t windows[] = {16, 8, 4};
#define WINDOW_SLOWER 1.005
/* The estimated cost of a kernel call, in cycles; of a unit of a kernel's
 * work (cg_kernel.work) by op, 0.3 for ops not listed; and of each fused
 * node a kernel computes per unit of work. Fitted to per-kernel cycle
 * counts of the book's Transformer and Bahdanau training steps on an AMD
 * EPYC, at 1 thread and as scheduled tasks on 2 (docs/codegen.md); only
 * the schedule's quality depends on them. */
#define CALL_COST 250.0
#define EW_COST 0.16
#define FUSED_COST 0.06
#define HEAVY_COST 0.55
/* The team's context: line 0 the call's pointers (run, params, scratch,
 * inputs, outputs), the status and the other-team flag; line 1 + t
 * thread t's count of finished tasks. */
#define LINE 64
enum {
	CTX_RUN = 0,
	CTX_PARAMS = 8,
	CTX_SCRATCH = 16,
	CTX_INPUTS = 24,
	CTX_STATUS = 32,
	CTX_OTHER_TEAM = 36,
	CTX_OUTPUTS = 40,
};

static const double per_work[IR_OP_COUNT] = {
	[IR_OP_MATMUL] = 0.35, /* work: multiply-adds / 16 */
	[IR_OP_FUSED_ATTENTION] = 0.8,
	[IR_OP_FUSED_ATTENTION_GRAD] = 0.8,
	[IR_OP_FUSED_ADDITIVE_ATTENTION] = 0.16,
	[IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD] = 0.125,
	[IR_OP_CROSS_ENTROPY] = 0.45,
	[IR_OP_CROSS_ENTROPY_GRAD] = 0.43,
	[IR_OP_CROSS_ENTROPY_WITH_GRAD] = 0.5,
	[IR_OP_LAYER_NORM] = 0.12,
	[IR_OP_LAYER_NORM_GRAD] = 0.16,
	[IR_OP_SUM] = 0.1,
	[IR_OP_MEAN] = 0.35,
	[IR_OP_MAX] = 0.35,
	[IR_OP_EMBEDDING] = 0.09,
	[IR_OP_EMBEDDING_GRAD] = 0.15,
	[IR_OP_SLICE] = 0.12,
	[IR_OP_CONCAT] = 2.0,
};

static bool is_heavy(ir_op op)
{
	return (ir_op_table[op].flags & IR_OPF_COSTLY) != 0;
}

double cg_sched_kernel_cost(const ir_graph *g, ir_id id, const cg_trees *tr,
			    int64_t work)
{
	ir_op op = g->nodes[id].op;
	double f = per_work[op] > 0 ? per_work[op] : 0.3;
	if (ir_op_table[op].flags & IR_OPF_EW)
		f = EW_COST + (is_heavy(op) ? HEAVY_COST : 0);
	for (uint32_t i = 0; i < tr->n_nodes; i++) {
		if (tr->n[i].is_leaf)
			continue;
		ir_op fo = g->nodes[tr->n[i].id].op;
		if (fo == IR_OP_MATMUL || fo == IR_OP_LAYER_NORM_GRAD)
			return CALL_COST +
			       per_work[fo] * (double)(work > 0 ? work : 1);
		f += FUSED_COST;
		if (is_heavy(g->nodes[tr->n[i].id].op))
			f += HEAVY_COST;
	}
	return CALL_COST + f * (double)(work > 0 ? work : 1);
}

/* ---- the plan ------------------------------------------------------------------ */

/* The working arrays of cg_sched_plan_make, per node of the graph (n)
 * or per kernel (nk, numbered in graph order). */
typedef struct plan_state {
	ir_ctx *ctx;
	uint32_t n, nk;
	uint32_t *kid;              /* node -> kernel, UINT32_MAX if none */
	ir_id *node;                /* kernel -> node */
	cg_sched_node *sn;          /* kernel -> its scheduling node */
	uint32_t *deps, n_deps;     /* what each kernel reads */
	uint32_t *rfirst, *readers; /* kernel -> kernels reading it */
	uint32_t *stamp;            /* per kernel, for deduplication */
	double *t0, *t1; /* kernel -> estimated start, end of its buffer */
	pass_mem_block *blocks;
	uint32_t *first2, *count2, *deps2; /* reads and reuses */
	uint32_t window;    /* > 0: kernel k waits for kernel k - window */
	cg_sched_node *ssn; /* the scheduler's view (window_deps) */
	uint32_t *sdeps;
} plan_state;

/* Adds kernel d to kernel k's list (deps[from..]) unless there. */
static void add_dep(plan_state *st, uint32_t *list, uint32_t *n, uint32_t k,
		    uint32_t d)
{
	if (d == UINT32_MAX || d == k || st->stamp[d] == k + 1)
		return;
	st->stamp[d] = k + 1;
	list[(*n)++] = d;
}

static bool read_deps(plan_state *st, const entry_gen *e, const node_call *ks)
{
	const ir_graph *g = &e->fn->g;
	uint32_t cap = 1;
	for (uint32_t k = 0; k < st->nk; k++)
		cap += g->nodes[st->node[k]].n_args + ks[st->node[k]].n_extra;
	st->deps = ir_alloc(st->ctx, cap * sizeof *st->deps);
	if (!st->deps)
		return false;
	for (uint32_t k = 0; k < st->nk; k++) {
		ir_id i = st->node[k];
		const ir_node *nd = &g->nodes[i];
		uint32_t first = st->n_deps;
		for (uint32_t a = 0; a < nd->n_args; a++) {
			ir_id x = ir_arg(g, i, a);
			if (!pass_fuse_ew_is_in(e->plan.into, x, i))
				add_dep(st, st->deps, &st->n_deps, k,
					st->kid[e->plan.root[x]]);
		}
		for (uint32_t x = 0; x < ks[i].n_extra; x++)
			add_dep(st, st->deps, &st->n_deps, k,
				st->kid[e->plan.root[ks[i].extra[x]]]);
		st->sn[k] = (cg_sched_node){
			.cost = ks[i].ref.cost,
			.comm = COMM_COST *
				(double)(cg_lower_numel(e->L, &nd->type) *
					 ir_dtype_size(nd->type.dtype)),
			.extent = ks[i].ref.extent,
			.first_dep = first,
			.n_deps = st->n_deps - first};
	}
	return true;
}

/* The scheduler's view of the kernels (ssn, sdeps): what each reads
 * and, with a window, kernel k - window, so that no thread runs more
 * than that far ahead of program order. The extra edges shape the
 * schedule only: buffers' lifetimes and the waits come from the reads. */
static bool window_deps(plan_state *st)
{
	st->ssn = ir_alloc(st->ctx, (st->nk + 1) * sizeof *st->ssn);
	st->sdeps = ir_alloc(st->ctx,
			     (st->n_deps + st->nk + 1) * sizeof *st->sdeps);
	if (!st->ssn || !st->sdeps)
		return false;
	uint32_t n = 0;
	for (uint32_t k = 0; k < st->nk; k++) {
		st->ssn[k] = st->sn[k];
		st->ssn[k].first_dep = n;
		for (uint32_t d = 0; d < st->sn[k].n_deps; d++)
			st->sdeps[n++] = st->deps[st->sn[k].first_dep + d];
		bool has = false;
		for (uint32_t d = 0; d < st->sn[k].n_deps; d++)
			has |= st->deps[st->sn[k].first_dep + d] + st->window ==
			       k;
		if (st->window && k >= st->window && !has)
			st->sdeps[n++] = k - st->window;
		st->ssn[k].n_deps = n - st->ssn[k].first_dep;
	}
	return true;
}

/* readers: the inverse of deps. */
static bool reader_lists(plan_state *st)
{
	st->rfirst = ir_alloc(st->ctx, (st->nk + 1) * sizeof *st->rfirst);
	st->readers = ir_alloc(st->ctx, (st->n_deps + 1) * sizeof *st->readers);
	uint32_t *fill = ir_alloc(st->ctx, (st->nk + 1) * sizeof *fill);
	bool ok = st->rfirst && st->readers && fill;
	for (uint32_t j = 0; ok && j < st->n_deps; j++)
		st->rfirst[st->deps[j]]++;
	uint32_t at = 0;
	for (uint32_t k = 0; ok && k <= st->nk; k++) {
		uint32_t c = k < st->nk ? st->rfirst[k] : 0;
		st->rfirst[k] = at;
		fill[k] = at;
		at += c;
	}
	for (uint32_t k = 0; ok && k < st->nk; k++)
		for (uint32_t d = 0; d < st->sn[k].n_deps; d++)
			st->readers[fill[st->deps[st->sn[k].first_dep + d]]++] = k;
	ir_free(st->ctx, fill);
	return ok;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The index of v in the sorted times. */
static uint32_t tick(const double *times, uint32_t n, double v)
{
	uint32_t lo = 0, hi = n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (times[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Each buffer's lifetime in estimated time, as ticks of the sorted task
 * times, and its place in the schedule's scratch slab. A buffer lives
 * from its producer's first start until its last reader's end, that end
 * not included (the tick before it: every task takes time, so that is
 * not before the start): a kernel starting as a buffer's last reader
 * ends may take its bytes, and waits for that reader (all_deps). */
static bool place_buffers(plan_state *st, const entry_gen *e, sched_plan *sp)
{
	const cg_sched *s = &sp->s;
	double *times = ir_alloc(st->ctx, (2 * s->n_tasks + 1) * sizeof *times);
	if (!times)
		return false;
	for (uint32_t k = 0; k < st->nk; k++) {
		st->t0[k] = INFINITY;
		st->t1[k] = 0;
	}
	for (uint32_t j = 0; j < s->n_tasks; j++) {
		const cg_sched_task *t = &s->tasks[j];
		times[2 * j] = t->start;
		times[2 * j + 1] = t->end;
		if (t->start < st->t0[t->node])
			st->t0[t->node] = t->start;
		for (uint32_t d = 0; d < st->sn[t->node].n_deps; d++) {
			uint32_t x = st->deps[st->sn[t->node].first_dep + d];
			if (t->end > st->t1[x])
				st->t1[x] = t->end;
		}
		if (t->end > st->t1[t->node])
			st->t1[t->node] = t->end;
	}
	qsort(times, 2 * s->n_tasks, sizeof *times, cmp_double);
	uint32_t n_times = 2 * s->n_tasks;
	for (uint32_t o = 0; o < e->fn->n_outputs; o++) {
		uint32_t k = st->kid[e->plan.root[e->fn->outputs[o]]];
		if (k != UINT32_MAX)
			st->t1[k] = INFINITY;
	}
	for (uint32_t k = 0; k < st->nk; k++) {
		/* A buffer in the caller's outputs takes no bytes of the slab,
		 * and no other buffer reuses its bytes (cg_reuse_index). */
		bool is_direct = e->plan.direct[st->node[k]] != UINT32_MAX;
		st->blocks[k] = (pass_mem_block){
			is_direct ? 0
				  : cg_node_bytes(e->L, &e->fn->g, st->node[k]),
			tick(times, n_times, st->t0[k]),
			st->t1[k] == INFINITY
				? n_times
				: tick(times, n_times, st->t1[k]) - 1,
			0};
	}
	ir_free(st->ctx, times);
	bool ok = true;
	sp->total = pass_memplan_blocks(st->ctx, st->blocks, st->nk,
					ATTNRT_ALIGN, &ok);
	for (uint32_t k = 0; ok && k < st->nk; k++)
		sp->offset[st->node[k]] = st->blocks[k].offset;
	ok = ok && cg_scratch_peak_make(st->ctx, &e->fn->g, st->blocks,
					st->node, st->nk, sp->total, &sp->peak);
	sp->peak.threads = s->n_threads;
	return ok;
}

/* Every kernel's dependencies: what it reads, and for each earlier buffer
 * whose bytes its own reuses, that buffer's producer and readers. */
static bool all_deps(plan_state *st)
{
	uint32_t cap = st->n_deps + st->nk + 1, n = 0;
	st->first2 = ir_alloc(st->ctx, (st->nk + 1) * sizeof *st->first2);
	st->count2 = ir_alloc(st->ctx, (st->nk + 1) * sizeof *st->count2);
	st->deps2 = ir_alloc(st->ctx, cap * sizeof *st->deps2);
	cg_reuse_index ri;
	bool ok = cg_reuse_index_make(st->ctx, st->blocks, st->nk, &ri) &&
		  st->first2 && st->count2 && st->deps2;
	if (ok)
		memset(st->stamp, 0, st->nk * sizeof *st->stamp);
	for (uint32_t y = 0; ok && y < st->nk; y++) {
		st->first2[y] = n;
		cg_reuse_index_find(&ri, y);
		/* At most: its reads, then per earlier buffer 1 + readers. */
		uint32_t most = n + st->sn[y].n_deps;
		for (uint32_t f = 0; f < ri.n_found; f++)
			most += 1 + st->rfirst[ri.found[f] + 1] -
				st->rfirst[ri.found[f]];
		if (most > cap) {
			cap = most * 2;
			uint32_t *d = ir_realloc(st->ctx, st->deps2,
						 cap * sizeof *d);
			ok = d != NULL;
			if (!ok)
				break;
			st->deps2 = d;
		}
		for (uint32_t d = 0; d < st->sn[y].n_deps; d++)
			add_dep(st, st->deps2, &n, y,
				st->deps[st->sn[y].first_dep + d]);
		for (uint32_t f = 0; f < ri.n_found; f++) {
			uint32_t x = ri.found[f];
			add_dep(st, st->deps2, &n, y, x);
			for (uint32_t r = st->rfirst[x]; r < st->rfirst[x + 1];
			     r++)
				add_dep(st, st->deps2, &n, y, st->readers[r]);
		}
		st->count2[y] = n - st->first2[y];
	}
	cg_reuse_index_fini(st->ctx, &ri);
	return ok;
}

static void state_fini(plan_state *st)
{
	ir_free(st->ctx, st->kid);
	ir_free(st->ctx, st->node);
	ir_free(st->ctx, st->sn);
	ir_free(st->ctx, st->deps);
	ir_free(st->ctx, st->rfirst);
	ir_free(st->ctx, st->readers);
	ir_free(st->ctx, st->stamp);
	ir_free(st->ctx, st->t0);
	ir_free(st->ctx, st->t1);
	ir_free(st->ctx, st->blocks);
	ir_free(st->ctx, st->first2);
	ir_free(st->ctx, st->count2);
	ir_free(st->ctx, st->deps2);
	ir_free(st->ctx, st->ssn);
	ir_free(st->ctx, st->sdeps);
}

static bool state_init(plan_state *st, const entry_gen *e, const node_call *ks)
{
	const ir_graph *g = &e->fn->g;
	st->n = g->n_nodes;
	st->kid = ir_alloc(st->ctx, (st->n + 1) * sizeof *st->kid);
	st->node = ir_alloc(st->ctx, (st->n + 1) * sizeof *st->node);
	st->sn = ir_alloc(st->ctx, (st->n + 1) * sizeof *st->sn);
	st->stamp = ir_alloc(st->ctx, (st->n + 1) * sizeof *st->stamp);
	st->t0 = ir_alloc(st->ctx, (st->n + 1) * sizeof *st->t0);
	st->t1 = ir_alloc(st->ctx, (st->n + 1) * sizeof *st->t1);
	st->blocks = ir_alloc(st->ctx, (st->n + 1) * sizeof *st->blocks);
	if (!st->kid || !st->node || !st->sn || !st->stamp || !st->t0 ||
	    !st->t1 || !st->blocks)
		return false;
	for (ir_id i = 0; i < st->n; i++) {
		st->kid[i] = UINT32_MAX;
		if (ks[i].ref.fn) {
			st->kid[i] = st->nk;
			st->node[st->nk++] = i;
		}
	}
	return true;
}

void cg_sched_plan_fini(ir_ctx *ctx, sched_plan *sp)
{
	cg_sched_fini(ctx, &sp->s);
	ir_free(ctx, sp->offset);
	ir_free(ctx, sp->kernel_node);
	cg_scratch_peak_fini(ctx, &sp->peak);
	memset(sp, 0, sizeof *sp);
}

/* The schedule of e's kernels over n_threads in which kernel k waits
 * for kernel k - window too (window 0: no such waits), and its layout. */
static bool plan_try(entry_gen *e, const node_call *ks, uint32_t n_threads,
		     uint32_t window, sched_plan *sp)
{
	memset(sp, 0, sizeof *sp);
	plan_state st = {.ctx = e->L->ctx, .window = window};
	bool ok = state_init(&st, e, ks) && read_deps(&st, e, ks) &&
		  window_deps(&st) &&
		  cg_sched_build(st.ctx, st.ssn, st.sdeps, st.nk, n_threads,
				 SPLIT_COST, PIECE_COST, &sp->s);
	if (ok && sp->s.total >= MIN_TOTAL &&
	    sp->s.makespan <= MIN_GAIN * sp->s.total) {
		sp->offset = ir_alloc(st.ctx, (st.n + 1) * sizeof *sp->offset);
		ok = sp->offset && reader_lists(&st) &&
		     place_buffers(&st, e, sp) && all_deps(&st);
		/* False from cg_sched_sync with memory left: a schedule that
		 * could deadlock, never used (it cannot happen when every
		 * dependency is estimated to end before its reader starts). */
		sp->usable = ok && cg_sched_sync(st.ctx, &sp->s, st.first2,
						 st.count2, st.deps2);
	}
	if (sp->usable) { /* keep the kernel -> node map */
		sp->kernel_node = st.node;
		st.node = NULL;
	} else {
		cg_sched_fini(st.ctx, &sp->s);
		ir_free(st.ctx, sp->offset);
		sp->offset = NULL;
		cg_scratch_peak_fini(st.ctx, &sp->peak);
	}
	state_fini(&st);
	return ok;
}

/* The list scheduler knows nothing of memory: a thread that runs ahead
 * (the next layer's gradients while the other still computes weight
 * gradients) keeps both sides' buffers alive. When the schedule's slab
 * comes out larger than the in-order one, windows that keep it nearer
 * program order are tried, and the one with the smallest slab kept
 * among those estimated at most WINDOW_SLOWER times as long. */
bool cg_sched_plan_make(entry_gen *e, const node_call *ks, uint32_t n_threads,
			sched_plan *sp)
{
	if (!plan_try(e, ks, n_threads, 0, sp))
		return false;
	double most = sp->s.makespan * WINDOW_SLOWER;
	for (size_t w = 0; sp->usable && sp->total > e->plan.total &&
			   w < sizeof windows / sizeof windows[0];
	     w++) {
		sched_plan c;
		if (!plan_try(e, ks, n_threads, windows[w], &c)) {
			cg_sched_plan_fini(e->L->ctx, sp);
			return false;
		}
		bool better = c.usable && c.s.makespan <= most &&
			      c.total < sp->total;
		cg_sched_plan_fini(e->L->ctx, better ? sp : &c);
		if (better)
			*sp = c;
	}
	return true;
}

/* ---- the code ------------------------------------------------------------------ */

static LLVMValueRef ctx_at(cg_fn *f, LLVMValueRef ctx, int64_t off)
{
	LLVMValueRef o = cg_i64(f, off);
	return LLVMBuildInBoundsGEP2(f->b, LLVMInt8TypeInContext(f->ctx), ctx,
				     &o, 1, "");
}

/* Thread t's count of finished tasks in the context. */
static LLVMValueRef count_at(cg_fn *f, LLVMValueRef ctx, uint32_t t)
{
	return ctx_at(f, ctx, LINE * (1 + (int64_t)t));
}

/* i32 attnc.sched.wait(ptr count, i32 n, ptr status): spins until
 * *count >= n (0) or a kernel failed (1). One per module. */
static LLVMValueRef wait_fn(cg_lower *L)
{
	const char *name = "attnc.sched.wait";
	LLVMValueRef fn = LLVMGetNamedFunction(L->mod, name);
	if (fn)
		return fn;
	cg_fn f;
	LLVMContextRef c = LLVMGetModuleContext(L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	LLVMTypeRef i32 = LLVMInt32TypeInContext(c);
	LLVMTypeRef ps[3] = {ptr, i32, ptr};
	cg_fn_begin(&f, L->mod, name, LLVMFunctionType(i32, ps, 3, 0), true);
	cg_fn_attr(&f, "noinline");
	LLVMValueRef count = LLVMGetParam(f.fn, 0), n = LLVMGetParam(f.fn, 1);
	LLVMValueRef status = LLVMGetParam(f.fn, 2);
	LLVMBasicBlockRef entry = LLVMGetInsertBlock(f.b);
	LLVMBasicBlockRef loop = cg_block(&f, "spin"),
			  done = cg_block(&f, "done");
	LLVMBasicBlockRef check = cg_block(&f, "check"),
			  fail = cg_block(&f, "fail");
	LLVMBuildBr(f.b, loop);
	LLVMPositionBuilderAtEnd(f.b, loop);
	LLVMValueRef spins = LLVMBuildPhi(f.b, i32, "spins");
	LLVMValueRef v = cg_atomic_load_i32(&f, count,
					    LLVMAtomicOrderingAcquire);
	LLVMBuildCondBr(f.b, LLVMBuildICmp(f.b, LLVMIntUGE, v, n, ""), done,
			check);
	LLVMPositionBuilderAtEnd(f.b, check);
	LLVMValueRef s = cg_atomic_load_i32(&f, status,
					    LLVMAtomicOrderingMonotonic);
	LLVMBasicBlockRef go = cg_block(&f, "pause");
	LLVMBuildCondBr(f.b,
			LLVMBuildICmp(f.b, LLVMIntNE, s, cg_i32(&f, INT32_MAX),
				      ""),
			fail, go);
	LLVMPositionBuilderAtEnd(f.b, go);
	if (strncmp(LLVMGetTarget(L->mod), "x86_64", 6) == 0)
		cg_intrinsic(&f, "llvm.x86.sse2.pause", NULL, 0, NULL, 0);
	LLVMValueRef next = LLVMBuildAdd(f.b, spins, cg_i32(&f, 1), "");
	/* Every 1024 spins, give the core to whoever else wants it: the
	 * thread waited on may be waiting for this core. */
	LLVMValueRef every = LLVMBuildICmp(f.b, LLVMIntEQ,
					   LLVMBuildAnd(f.b, next,
							cg_i32(&f, 1023), ""),
					   cg_i32(&f, 0), "");
	LLVMBasicBlockRef join = cg_if_begin(&f, every);
	cg_call_extern(&f, "sched_yield", LLVMFunctionType(i32, NULL, 0, 0),
		       NULL, 0);
	cg_if_end(&f, join);
	LLVMBasicBlockRef back = LLVMGetInsertBlock(f.b);
	LLVMBuildBr(f.b, loop);
	LLVMValueRef in_v[2] = {cg_i32(&f, 0), next};
	LLVMBasicBlockRef in_b[2] = {entry, back};
	LLVMAddIncoming(spins, in_v, in_b, 2);
	LLVMPositionBuilderAtEnd(f.b, done);
	LLVMBuildRet(f.b, cg_i32(&f, 0));
	LLVMPositionBuilderAtEnd(f.b, fail);
	LLVMBuildRet(f.b, cg_i32(&f, 1));
	cg_fn_end(&f);
	return f.fn;
}

/* Before a task: waits until thread w->thread has finished w->count
 * tasks, returning from the thread's function if a kernel failed. */
static void emit_wait(cg_fn *f, LLVMValueRef ctx, const cg_sched_wait *w,
		      LLVMValueRef wait, LLVMBasicBlockRef quit)
{
	LLVMValueRef count = count_at(f, ctx, w->thread);
	LLVMValueRef v = cg_atomic_load_i32(f, count, LLVMAtomicOrderingAcquire);
	LLVMValueRef n = cg_i32(f, (int32_t)w->count);
	LLVMBasicBlockRef slow = cg_block(f, "wait"),
			  next = cg_block(f, "ready");
	LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntUGE, v, n, ""), next,
			slow);
	LLVMPositionBuilderAtEnd(f->b, slow);
	LLVMValueRef args[3] = {count, n, ctx_at(f, ctx, CTX_STATUS)};
	LLVMValueRef r = cg_call(f, wait, args, 3);
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntNE, r, cg_i32(f, 0), ""),
			quit, next);
	LLVMPositionBuilderAtEnd(f->b, next);
}

/* One task: its waits, its kernel over its range, then the thread's
 * count of finished tasks; a failing kernel lowers the status to its
 * code made its node's (cg_entry_node_status) and ends the thread. */
static void emit_task(entry_gen *te, const node_call *ks, const cg_sched *s,
		      const ir_id *node_of, uint32_t j, LLVMValueRef ctx,
		      LLVMValueRef wait, LLVMBasicBlockRef quit)
{
	cg_fn *f = &te->f;
	const cg_sched_task *t = &s->tasks[j];
	for (uint32_t w = 0; w < t->n_waits; w++)
		emit_wait(f, ctx, &s->waits[t->first_wait + w], wait, quit);
	ir_id id = node_of[t->node];
	LLVMValueRef args[2 + CG_KERNEL_MAX_IN + 2];
	uint32_t na = cg_entry_kernel_args(te, id, &ks[id], args);
	args[na++] = cg_i64(f, t->lo);
	args[na++] = cg_i64(f, t->hi);
	LLVMValueRef t0 = cg_profile_start(te);
	LLVMValueRef st = cg_call(f, ks[id].ref.fn, args, na);
	LLVMBasicBlockRef bad = cg_block(f, "failed"), ok = cg_block(f, "done");
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntNE, st, cg_i32(f, 0), ""),
			bad, ok);
	LLVMPositionBuilderAtEnd(f->b, bad);
	LLVMBuildAtomicRMW(f->b, LLVMAtomicRMWBinOpMin,
			   ctx_at(f, ctx, CTX_STATUS),
			   cg_entry_node_status(f, st, id),
			   LLVMAtomicOrderingMonotonic, 0);
	LLVMBuildBr(f->b, quit);
	LLVMPositionBuilderAtEnd(f->b, ok);
	cg_profile_add(te, te->prof_site ? te->prof_site[id] : 0, t0,
		       t->lo == 0);
	cg_atomic_store(f, cg_i32(f, (int32_t)t->index + 1),
			count_at(f, ctx, t->thread), LLVMAtomicOrderingRelease);
}

/* void SYM.t<thread>(ptr ctx): the thread's list of tasks. */
static LLVMValueRef thread_fn(const entry_gen *e, const node_call *ks,
			      const sched_plan *sp, uint32_t thread,
			      const char *symbol, LLVMValueRef wait)
{
	entry_gen te = *e;
	LLVMContextRef c = LLVMGetModuleContext(e->L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	char name[300];
	snprintf(name, sizeof name, "%s.t%u", symbol, thread);
	cg_fn_begin(&te.f, e->L->mod, name,
		    LLVMFunctionType(LLVMVoidTypeInContext(c), &ptr, 1, 0),
		    true);
	cg_fn_attr(&te.f, "noinline");
	cg_fn_attr(&te.f, "optnone");
	cg_fn *f = &te.f;
	LLVMValueRef ctx = LLVMGetParam(f->fn, 0);
	te.run = LLVMBuildLoad2(f->b, ptr, ctx_at(f, ctx, CTX_RUN), "run");
	te.params = LLVMBuildLoad2(f->b, ptr, ctx_at(f, ctx, CTX_PARAMS),
				   "params");
	te.scratch = LLVMBuildLoad2(f->b, ptr, ctx_at(f, ctx, CTX_SCRATCH),
				    "scratch");
	LLVMValueRef inputs = LLVMBuildLoad2(f->b, ptr,
					     ctx_at(f, ctx, CTX_INPUTS), "");
	LLVMValueRef outputs = LLVMBuildLoad2(f->b, ptr,
					      ctx_at(f, ctx, CTX_OUTPUTS), "");
	te.inputs = ir_alloc(e->L->ctx,
			     (e->fn->n_inputs + 1) * sizeof *te.inputs);
	te.outputs = ir_alloc(e->L->ctx,
			      (e->fn->n_outputs + 1) * sizeof *te.outputs);
	te.offset = sp->offset;
	bool ok = te.inputs && te.outputs; /* else reported: the module fails */
	if (ok) {
		cg_entry_load_inputs(&te, inputs);
		cg_entry_load_outputs(&te, outputs);
	}
	LLVMBasicBlockRef quit = cg_block(f, "quit");
	for (uint32_t j = sp->s.thread_first[thread];
	     ok && j < sp->s.thread_first[thread + 1]; j++)
		emit_task(&te, ks, &sp->s, sp->kernel_node, j, ctx, wait, quit);
	LLVMBuildRetVoid(f->b);
	LLVMPositionBuilderAtEnd(f->b, quit);
	LLVMBuildRetVoid(f->b);
	cg_fn_end(f);
	ir_free(e->L->ctx, te.inputs);
	ir_free(e->L->ctx, te.outputs);
	return f->fn;
}

/* void SYM.team(ptr ctx): the parallel region's body; a team of another
 * size than planned runs nothing and says so. */
static LLVMValueRef team_fn(const entry_gen *e, const LLVMValueRef *threads,
			    uint32_t n, const char *symbol)
{
	cg_fn f;
	LLVMContextRef c = LLVMGetModuleContext(e->L->mod);
	LLVMTypeRef ptr = LLVMPointerTypeInContext(c, 0);
	char name[300];
	snprintf(name, sizeof name, "%s.team", symbol);
	cg_fn_begin(&f, e->L->mod, name,
		    LLVMFunctionType(LLVMVoidTypeInContext(c), &ptr, 1, 0),
		    true);
	LLVMValueRef ctx = LLVMGetParam(f.fn, 0);
	LLVMValueRef tid = cg_omp_i32(&f, "omp_get_thread_num");
	LLVMValueRef nth = cg_omp_i32(&f, "omp_get_num_threads");
	LLVMBasicBlockRef odd = cg_block(&f, "other_team"),
			  run = cg_block(&f, "run");
	LLVMBuildCondBr(f.b,
			LLVMBuildICmp(f.b, LLVMIntEQ, nth,
				      cg_i32(&f, (int32_t)n), ""),
			run, odd);
	LLVMPositionBuilderAtEnd(f.b, odd);
	cg_atomic_store(&f, cg_i32(&f, 1), ctx_at(&f, ctx, CTX_OTHER_TEAM),
			LLVMAtomicOrderingMonotonic);
	LLVMBuildRetVoid(f.b);
	LLVMPositionBuilderAtEnd(f.b, run);
	LLVMBasicBlockRef end = cg_block(&f, "end");
	LLVMValueRef sw = LLVMBuildSwitch(f.b, tid, end, n);
	for (uint32_t t = 0; t < n; t++) {
		LLVMBasicBlockRef bb = cg_block(&f, "thread");
		LLVMAddCase(sw, cg_i32(&f, (int32_t)t), bb);
		LLVMPositionBuilderAtEnd(f.b, bb);
		LLVMValueRef arg = ctx;
		cg_call(&f, threads[t], &arg, 1);
		LLVMBuildBr(f.b, end);
	}
	LLVMPositionBuilderAtEnd(f.b, end);
	LLVMBuildRetVoid(f.b);
	cg_fn_end(&f);
	return f.fn;
}

void cg_sched_emit(entry_gen *e, const node_call *ks, const sched_plan *sp,
		   LLVMValueRef outputs, LLVMBasicBlockRef in_order)
{
	cg_fn *f = &e->f;
	uint32_t n = sp->s.n_threads;
	const char *symbol = LLVMGetValueName2(f->fn, &(size_t){0});
	LLVMValueRef wait = wait_fn(e->L);
	LLVMValueRef *threads = ir_alloc(e->L->ctx, n * sizeof *threads);
	if (!threads) { /* reported; the in-order path still works */
		LLVMBuildBr(f->b, in_order);
		return;
	}
	for (uint32_t t = 0; t < n; t++)
		threads[t] = thread_fn(e, ks, sp, t, symbol, wait);
	LLVMValueRef team = team_fn(e, threads, n, symbol);
	ir_free(e->L->ctx, threads);

	/* The team this call asks for: attnrt_run.n_threads, or OpenMP's. */
	LLVMValueRef nt = cg_run_field(f, e->run, cg_t_i32(f),
				       offsetof(attnrt_run, n_threads));
	LLVMValueRef dflt = cg_omp_i32(f, "omp_get_max_threads");
	nt = LLVMBuildSelect(f->b,
			     LLVMBuildICmp(f->b, LLVMIntSGT, nt, cg_i32(f, 0),
					   ""),
			     nt, dflt, "");
	LLVMValueRef ctx = LLVMBuildAlloca(f->b,
					   LLVMArrayType2(LLVMInt8TypeInContext(
								  f->ctx),
							  LINE * (1 +
								  (uint64_t)n)),
					   "team");
	LLVMSetAlignment(ctx, LINE);
	LLVMBasicBlockRef go = cg_block(f, "scheduled");
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntEQ, nt,
				      cg_i32(f, (int32_t)n), ""),
			go, in_order);
	LLVMPositionBuilderAtEnd(f->b, go);
	LLVMBuildMemSet(f->b, ctx,
			LLVMConstInt(LLVMInt8TypeInContext(f->ctx), 0, 0),
			cg_i64(f, LINE * (1 + (int64_t)n)), LINE);
	LLVMValueRef inputs = LLVMGetParam(f->fn, 3);
	LLVMBuildStore(f->b, e->run, ctx_at(f, ctx, CTX_RUN));
	LLVMBuildStore(f->b, e->params, ctx_at(f, ctx, CTX_PARAMS));
	LLVMBuildStore(f->b, e->scratch, ctx_at(f, ctx, CTX_SCRATCH));
	LLVMBuildStore(f->b, inputs, ctx_at(f, ctx, CTX_INPUTS));
	LLVMBuildStore(f->b, outputs, ctx_at(f, ctx, CTX_OUTPUTS));
	LLVMBuildStore(f->b, cg_i32(f, INT32_MAX), ctx_at(f, ctx, CTX_STATUS));
	cg_gomp_parallel(f, team, ctx, cg_i32(f, (int32_t)n));
	LLVMValueRef odd = LLVMBuildLoad2(f->b, cg_t_i32(f),
					  ctx_at(f, ctx, CTX_OTHER_TEAM), "");
	LLVMBasicBlockRef ran = cg_block(f, "ran");
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntNE, odd, cg_i32(f, 0), ""),
			in_order, ran);
	LLVMPositionBuilderAtEnd(f->b, ran);
	LLVMValueRef st = LLVMBuildLoad2(f->b, cg_t_i32(f),
					 ctx_at(f, ctx, CTX_STATUS), "");
	LLVMBasicBlockRef failed = cg_block(f, "team_failed");
	LLVMBasicBlockRef done = cg_block(f, "team_done");
	LLVMBuildCondBr(f->b,
			LLVMBuildICmp(f->b, LLVMIntNE, st, cg_i32(f, INT32_MAX),
				      ""),
			failed, done);
	LLVMPositionBuilderAtEnd(f->b, failed);
	LLVMBuildRet(f->b, st);
	LLVMPositionBuilderAtEnd(f->b, done);
	const uint64_t *saved = e->offset;
	e->offset = sp->offset;
	cg_entry_copy_outputs(e);
	e->offset = saved;
	cg_profile_add(e, 0, e->prof_t0, true);
	LLVMBuildRet(f->b, cg_i32(f, 0));
}
