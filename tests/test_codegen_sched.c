/*
 * test_codegen_sched.c - the static schedule of kernels over threads
 * (codegen/cg_sched.h) on random dependency graphs, run in a simulation
 * with real durations unlike the estimates, and the scheduled entry
 * points of the book's seq2seq training steps against the same entry
 * points run in order: bit for bit, call after call, with a failing
 * kernel, and called where no team can start; the same steps compiled
 * in parts against one module, and read back from the object cache.
 */
#include "cg_program.h"
#include "cg_sched.h"
#include "frontend.h"
#include "interp.h"
#include "passes.h"
#include "testutil.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the scheduler ------------------------------------------------------------ */

/* A node of cost c, range [0, e), deps[first ..] (n of them), free to
 * read from any thread. */
#define N(c, e, first, n)                      \
	((cg_sched_node){.cost = (c),          \
			 .extent = (e),        \
			 .first_dep = (first), \
			 .n_deps = (n)})

typedef struct dag {
	uint32_t n;
	cg_sched_node nodes[256];
	uint32_t deps[1024];
	uint64_t rng;
} dag;

static uint32_t rnd(dag *d, uint32_t n)
{
	d->rng = d->rng * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(d->rng >> 33) % n;
}

/* n nodes with up to 3 dependencies each on earlier ones, costs from 100
 * to 20000 cycles, extents 1 to 8. */
static void dag_random(dag *d, uint32_t n, uint64_t seed)
{
	memset(d, 0, sizeof *d);
	d->rng = seed;
	d->n = n;
	uint32_t at = 0;
	for (uint32_t i = 0; i < n; i++) {
		cg_sched_node *nd = &d->nodes[i];
		nd->cost = 100 + rnd(d, 20000);
		nd->comm = rnd(d, 3000);
		nd->extent = 1 + rnd(d, 8);
		nd->first_dep = at;
		uint32_t k = i ? rnd(d, 4) : 0;
		for (uint32_t j = 0; j < k; j++) {
			uint32_t x = rnd(d, i);
			bool dup = false;
			for (uint32_t q = nd->first_dep; q < at; q++)
				dup = dup || d->deps[q] == x;
			if (!dup)
				d->deps[at++] = x;
		}
		nd->n_deps = at - nd->first_dep;
	}
}

/* Runs the schedule with task durations drawn anew (1 to 30000 cycles,
 * nothing like the estimates): each thread in its order, each task once
 * its waits are met. Fails on a deadlock; then checks that every task
 * started after every task of each of its dependencies (first/count/deps
 * as given to cg_sched_sync) had finished. */
static void simulate(const cg_sched *s, const uint32_t *first,
		     const uint32_t *count, const uint32_t *deps, uint64_t seed)
{
	dag r = {.rng = seed};
	double *t0 = calloc(s->n_tasks + 1, sizeof *t0);
	double *t1 = calloc(s->n_tasks + 1, sizeof *t1);
	double now[16] = {0};
	uint32_t next[16] = {0}, done = 0;
	ck_assert_uint_le(s->n_threads, 16);
	while (done < s->n_tasks) {
		bool moved = false;
		for (uint32_t t = 0; t < s->n_threads; t++) {
			uint32_t j = s->thread_first[t] + next[t];
			if (j >= s->thread_first[t + 1])
				continue;
			const cg_sched_task *tk = &s->tasks[j];
			double start = now[t];
			bool met = true;
			for (uint32_t w = 0; w < tk->n_waits; w++) {
				const cg_sched_wait
					*wt = &s->waits[tk->first_wait + w];
				ck_assert_uint_ne(wt->thread, t);
				if (next[wt->thread] < wt->count) {
					met = false;
					break;
				}
				uint32_t q = s->thread_first[wt->thread] +
					     wt->count - 1;
				if (t1[q] > start)
					start = t1[q];
			}
			if (!met)
				continue;
			t0[j] = start;
			t1[j] = start + 1 + rnd(&r, 30000);
			now[t] = t1[j];
			next[t]++;
			done++;
			moved = true;
		}
		ck_assert_msg(moved, "the schedule deadlocks");
	}
	for (uint32_t j = 0; j < s->n_tasks; j++) {
		uint32_t i = s->tasks[j].node;
		for (uint32_t d = 0; d < count[i]; d++) {
			uint32_t x = deps[first[i] + d];
			for (uint32_t q = s->node_first[x];
			     q < s->node_first[x + 1]; q++)
				ck_assert_msg(t1[s->node_task[q]] <= t0[j],
					      "node %u started before node %u ended",
					      i, x);
		}
	}
	free(t0);
	free(t1);
}

/* Every node's pieces cover [0, extent) once; each thread's tasks run in
 * order without overlap; every dependency ends before its reader starts. */
static void check_layout(const dag *d, const cg_sched *s, uint32_t threads)
{
	for (uint32_t i = 0; i < d->n; i++) {
		int64_t covered = 0;
		uint32_t pieces = s->node_first[i + 1] - s->node_first[i];
		ck_assert_uint_ge(pieces, 1);
		ck_assert_uint_le(pieces, threads);
		for (uint32_t q = s->node_first[i]; q < s->node_first[i + 1];
		     q++) {
			const cg_sched_task *t = &s->tasks[s->node_task[q]];
			ck_assert_uint_eq(t->node, i);
			ck_assert_int_lt(t->lo, t->hi);
			covered += t->hi - t->lo;
			for (uint32_t x = 0; x < d->nodes[i].n_deps; x++) {
				uint32_t dep = d->deps[d->nodes[i].first_dep + x];
				for (uint32_t r = s->node_first[dep];
				     r < s->node_first[dep + 1]; r++)
					ck_assert(s->tasks[s->node_task[r]].end <=
						  t->start);
			}
		}
		ck_assert_int_eq(covered, d->nodes[i].extent);
	}
	for (uint32_t t = 0; t < s->n_threads; t++)
		for (uint32_t j = s->thread_first[t];
		     j < s->thread_first[t + 1]; j++) {
			ck_assert_uint_eq(s->tasks[j].thread, t);
			ck_assert_uint_eq(s->tasks[j].index,
					  j - s->thread_first[t]);
			if (j > s->thread_first[t])
				ck_assert(s->tasks[j - 1].end <=
					  s->tasks[j].start);
		}
}

/* The nodes' own dependency lists, as cg_sched_sync takes them. */
static void node_lists(const cg_sched_node *nodes, uint32_t n, uint32_t *first,
		       uint32_t *count)
{
	for (uint32_t i = 0; i < n; i++) {
		first[i] = nodes[i].first_dep;
		count[i] = nodes[i].n_deps;
	}
}

START_TEST(test_random_schedules_keep_every_dependency_under_any_timing)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	for (uint64_t seed = 1; seed <= 40; seed++) {
		dag d;
		uint32_t threads = 2 + (uint32_t)(seed % 3);
		dag_random(&d, 20 + (uint32_t)(seed * 5), seed);
		cg_sched s;
		ck_assert(cg_sched_build(&ctx, d.nodes, d.deps, d.n, threads,
					 5000, 300, &s));
		ck_assert_uint_eq(s.n_threads, threads);
		check_layout(&d, &s, threads);
		ck_assert(s.makespan <= s.total + 1e-9);
		uint32_t first[256], count[256];
		node_lists(d.nodes, d.n, first, count);
		ck_assert(cg_sched_sync(&ctx, &s, first, count, d.deps));
		for (uint64_t run = 0; run < 5; run++)
			simulate(&s, first, count, d.deps, seed * 100 + run);
		cg_sched_fini(&ctx, &s);
	}
	ir_ctx_fini(&ctx);
}
END_TEST

static uint64_t lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* The index finds, for every buffer of a placed layout, exactly the
 * earlier ones whose bytes it reuses, in increasing order, as a look at
 * every pair does. */
START_TEST(test_the_reuse_index_finds_the_pairs_a_look_at_all_finds)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	enum { MAX = 400 };
	pass_mem_block b[MAX];
	uint32_t want[MAX];
	uint64_t seed = 99;
	for (uint32_t round = 0; round < 60; round++) {
		uint32_t n = 1 + (uint32_t)(lcg(&seed) % MAX);
		uint32_t steps = 1 + (uint32_t)(lcg(&seed) % 200);
		for (uint32_t i = 0; i < n; i++) {
			uint32_t s0 = (uint32_t)(lcg(&seed) % steps);
			b[i] = (pass_mem_block){lcg(&seed) % 5 == 0
							? 0
							: lcg(&seed) % 700,
						s0,
						s0 + (uint32_t)(lcg(&seed) % 9),
						0};
		}
		bool ok;
		pass_memplan_blocks(&ctx, b, n, 64, &ok);
		ck_assert(ok);
		cg_reuse_index ri;
		ck_assert(cg_reuse_index_make(&ctx, b, n, &ri));
		for (uint32_t y = 0; y < n; y++) {
			uint32_t n_want = 0;
			for (uint32_t x = 0; x < n; x++)
				if (b[x].end < b[y].start && b[x].size &&
				    b[y].size &&
				    b[x].offset < b[y].offset + b[y].size &&
				    b[y].offset < b[x].offset + b[x].size)
					want[n_want++] = x;
			cg_reuse_index_find(&ri, y);
			ck_assert_uint_eq(ri.n_found, n_want);
			for (uint32_t k = 0; k < n_want; k++)
				ck_assert_uint_eq(ri.found[k], want[k]);
		}
		cg_reuse_index_fini(&ctx, &ri);
	}
	ir_ctx_fini(&ctx);
}
END_TEST

/* Dependencies beyond the reads (as reused memory adds): every node also
 * needs some node estimated to end before it starts. */
START_TEST(test_extra_dependencies_that_end_before_are_kept_too)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	for (uint64_t seed = 1; seed <= 20; seed++) {
		dag d;
		dag_random(&d, 120, seed);
		cg_sched s;
		ck_assert(cg_sched_build(&ctx, d.nodes, d.deps, d.n, 2, 5000,
					 300, &s));
		uint32_t first[256], count[256], deps[2048], n = 0;
		for (uint32_t i = 0; i < d.n; i++) {
			first[i] = n;
			for (uint32_t x = 0; x < d.nodes[i].n_deps; x++)
				deps[n++] = d.deps[d.nodes[i].first_dep + x];
			double start = 1e300;
			for (uint32_t q = s.node_first[i];
			     q < s.node_first[i + 1]; q++)
				if (s.tasks[s.node_task[q]].start < start)
					start = s.tasks[s.node_task[q]].start;
			for (uint32_t x = 0; x < d.n && n - first[i] < 12; x++) {
				double end = 0;
				for (uint32_t q = s.node_first[x];
				     q < s.node_first[x + 1]; q++)
					if (s.tasks[s.node_task[q]].end > end)
						end = s.tasks[s.node_task[q]].end;
				if (x != i && end <= start && rnd(&d, 3) == 0)
					deps[n++] = x;
			}
			count[i] = n - first[i];
		}
		ck_assert(cg_sched_sync(&ctx, &s, first, count, deps));
		simulate(&s, first, count, deps, seed);
		cg_sched_fini(&ctx, &s);
	}
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_a_dependency_on_a_later_task_is_refused)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	cg_sched_node nodes[3] = {N(1000, 1, 0, 0), N(1000, 1, 0, 1),
				  N(1000, 1, 1, 1)};
	uint32_t deps[2] = {0, 1}; /* a chain 0 -> 1 -> 2 */
	cg_sched s;
	ck_assert(cg_sched_build(&ctx, nodes, deps, 3, 2, 1e9, 0, &s));
	ck_assert_double_eq(s.makespan, 3000);
	uint32_t first[3] = {0, 0, 1}, count[3] = {1, 1, 1};
	uint32_t back[2] = {2, 0}; /* 0 after 2: could deadlock */
	ck_assert(!cg_sched_sync(&ctx, &s, first, count, back));
	cg_sched_fini(&ctx, &s);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_independent_chains_run_side_by_side)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	/* Two chains of four nodes of 1000 cycles, interleaved. */
	cg_sched_node nodes[8];
	uint32_t deps[8], nd = 0;
	for (uint32_t i = 0; i < 8; i++) {
		nodes[i] = N(1000, 1, nd, i >= 2);
		if (i >= 2)
			deps[nd++] = i - 2;
	}
	cg_sched s;
	ck_assert(cg_sched_build(&ctx, nodes, deps, 8, 2, 1e9, 0, &s));
	ck_assert_double_eq(s.total, 8000);
	ck_assert_double_eq(s.makespan, 4000);
	ck_assert_uint_eq(s.thread_first[1], 4);
	uint32_t first[8], count[8];
	node_lists(nodes, 8, first, count);
	ck_assert(cg_sched_sync(&ctx, &s, first, count, deps));
	/* Each chain stays on its thread: nothing to wait for. */
	ck_assert_uint_eq(s.n_waits, 0);
	cg_sched_fini(&ctx, &s);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_a_large_kernel_is_cut_into_one_piece_per_thread)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	cg_sched_node nodes[3] = {N(100, 1, 0, 0), N(90000, 640, 0, 1),
				  N(100, 1, 1, 1)};
	uint32_t deps[2] = {0, 1};
	cg_sched s;
	ck_assert(cg_sched_build(&ctx, nodes, deps, 3, 3, 5000, 300, &s));
	ck_assert_uint_eq(s.node_first[2] - s.node_first[1], 3);
	bool seen[3] = {false, false, false};
	for (uint32_t p = 0; p < 3; p++) {
		const cg_sched_task *t = &s.tasks[s.node_task[s.node_first[1] + p]];
		/* pieces 640·p/3 .. 640·(p+1)/3 */
		int q = t->lo == 0 ? 0 : t->lo == 213 ? 1 : 2;
		ck_assert_int_eq(t->lo, 640 * q / 3);
		ck_assert_int_eq(t->hi, 640 * (q + 1) / 3);
		ck_assert(!seen[q]);
		seen[q] = true;
		ck_assert_double_eq(t->end - t->start, 30300);
	}
	ck_assert_double_eq(s.makespan, 100 + 30300 + 100);
	cg_sched_fini(&ctx, &s);
	ir_ctx_fini(&ctx);
}
END_TEST

/* The task of node i on thread t (the only one there), or NULL. */
static const cg_sched_task *task_on(const cg_sched *s, uint32_t i, uint32_t t)
{
	const cg_sched_task *found = NULL;
	for (uint32_t q = s->node_first[i]; q < s->node_first[i + 1]; q++) {
		const cg_sched_task *k = &s->tasks[s->node_task[q]];
		if (k->thread == t) {
			ck_assert(found == NULL);
			found = k;
		}
	}
	return found;
}

START_TEST(test_a_cut_kernels_pieces_keep_to_their_threads)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	/* A (on the longest path: D after it) takes thread 0 first, so
	 * thread 1 is free first for X's halves; then D's halves and X's
	 * first are ready when thread 0 is. Each piece p goes to thread p
	 * all the same, so that kernels cut alike find on each thread the
	 * rows that thread made, in its own core's cache. */
	cg_sched_node nodes[3] = {N(3000, 1, 0, 0), N(20000, 640, 0, 0),
				  N(20000, 640, 0, 1)};
	uint32_t deps[1] = {0};
	cg_sched s;
	ck_assert(cg_sched_build(&ctx, nodes, deps, 3, 2, 5000, 300, &s));
	for (uint32_t i = 1; i < 3; i++)
		for (uint32_t t = 0; t < 2; t++) {
			const cg_sched_task *k = task_on(&s, i, t);
			ck_assert(k != NULL);
			ck_assert_int_eq(k->lo, 320 * t);
		}
	ck_assert_double_eq(s.makespan, 3000 + 2 * 10300);
	cg_sched_fini(&ctx, &s);
	ir_ctx_fini(&ctx);
}
END_TEST

START_TEST(test_halves_placed_in_a_row_on_one_thread_are_one_task)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	/* A, a kernel that cannot be cut, holds thread 0 while the
	 * independent B is cut in halves: both go to thread 1, one after
	 * the other, and run as one task over the whole range. */
	cg_sched_node nodes[2] = {N(100000, 1, 0, 0), N(20000, 640, 0, 0)};
	cg_sched s;
	ck_assert(cg_sched_build(&ctx, nodes, NULL, 2, 2, 5000, 300, &s));
	ck_assert_uint_eq(s.n_tasks, 2);
	ck_assert_uint_eq(s.node_first[2] - s.node_first[1], 1);
	const cg_sched_task *b = &s.tasks[s.node_task[s.node_first[1]]];
	ck_assert_uint_eq(b->thread, 1);
	ck_assert_int_eq(b->lo, 0);
	ck_assert_int_eq(b->hi, 640);
	ck_assert_double_eq(b->start, 0);
	ck_assert_double_eq(b->end, 2 * 10300);
	ck_assert_double_eq(s.makespan, 100000);
	cg_sched_fini(&ctx, &s);
	ir_ctx_fini(&ctx);
}
END_TEST

/* ---- scheduled entry points ----------------------------------------------------- */

#define MAXT 256

typedef struct step {
	ir_ctx ctx;
	ir_module *m;
	const ir_func *f;
	int64_t syms[16];
	interp_tensor in[16], params[256];
	cg_program *p;
	char *pb;
	size_t n_out[MAXT];
} step;

static size_t round64(size_t n)
{
	return (n + 63) / 64 * 64 + 64;
}

/* How a step's module becomes machine code (docs/codegen.md, "Compile
 * time"). */
typedef enum step_build {
	STEP_PARTS,             /* optimized and compiled in parts */
	STEP_WHOLE,             /* optimized and compiled as one module */
	STEP_OPTIMIZED_PARTS,   /* optimized as one module, compiled in parts */
	STEP_IN_ORDER,          /* in parts, for one thread */
	STEP_IN_ORDER_NO_REMAT, /* in parts, one thread, no remat pass */
} step_build;

/* model's loss_grad at batch 64 (its training step), compiled for a
 * schedule over 2 threads, as `how` says (with the object cache in
 * cache_dir, if not NULL); inputs: ids and lengths from 0 to 4. */
static void step_init_with(step *s, const char *rel, step_build how,
			   const char *cache_dir)
{
	memset(s, 0, sizeof *s);
	ir_ctx_init(&s->ctx);
	uint32_t file = ir_ctx_load_source(&s->ctx, tu_path(rel));
	ck_assert_uint_ne(file, 0);
	s->m = fe_compile(&s->ctx, file);
	ck_assert(s->m != NULL);
	const char *const off[1] = {"remat"};
	pass_options po = {.disabled = off,
			   .n_disabled = how == STEP_IN_ORDER_NO_REMAT};
	ck_assert(pass_pipeline_forward(s->m, &po));
	ck_assert(pass_autodiff(s->m, "loss"));
	ck_assert(pass_pipeline_run(s->m, &po));
	s->f = ir_module_find_func(s->m, "loss_grad");
	ck_assert(s->f != NULL);
	for (uint32_t i = 0; i < s->m->n_syms; i++)
		s->syms[i] = s->m->syms[i].fallback ? s->m->syms[i].fallback
						    : 64;
	uint64_t rng = 7;
	for (uint32_t i = 0; i < s->f->n_inputs; i++) {
		const ir_type *t = &s->f->g.nodes[s->f->inputs[i]].type;
		int64_t dims[IR_MAX_RANK];
		for (int d = 0; d < t->rank; d++)
			dims[d] = t->dims[d].coef *
				  (t->dims[d].sym < 0 ? 1
						      : s->syms[t->dims[d].sym]);
		ck_assert(interp_tensor_alloc(&s->ctx, &s->in[i], t->dtype,
					      t->rank, dims));
		for (int64_t e = 0; e < interp_tensor_numel(&s->in[i]); e++) {
			rng = rng * 6364136223846793005ull +
			      1442695040888963407ull;
			if (t->dtype == IR_I32)
				((int32_t *)s->in[i].data)[e] = (int32_t)((rng >>
									   33) %
									  5);
			else
				((float *)s->in[i].data)[e] = 1.0f;
		}
	}
	ck_assert(interp_params_init(&s->ctx, s->m, s->syms, 5, false,
				     s->params));
	const char *only[1] = {"loss_grad"};
	cg_program_options o =
		{.only = only,
		 .n_only = 1,
		 .sched_threads = how == STEP_IN_ORDER ||
						  how == STEP_IN_ORDER_NO_REMAT
					  ? 1
					  : 2,
		 .no_split = how == STEP_WHOLE,
		 .cache_dir = cache_dir};
	s->p = cg_program_create(&s->ctx, s->m, s->syms, &o);
	ck_assert(s->p != NULL);
	if (how == STEP_OPTIMIZED_PARTS) { /* emitting optimizes it whole */
		char *text = NULL;
		size_t len = 0;
		ck_assert(cg_program_emit_buffer(s->p, CG_EMIT_LLVM, &text,
						 &len));
		free(text);
	}
	ck_assert(cg_program_jit(s->p));
	s->pb = aligned_alloc(64, round64(cg_program_params_bytes(s->p)));
	uint32_t n;
	const attnrt_param_info *pi = cg_program_params(s->p, &n);
	for (uint32_t i = 0; i < n; i++)
		memcpy(s->pb + pi[i].offset, s->params[i].data,
		       (size_t)interp_tensor_numel(&s->params[i]) * 4);
	const attnrt_tensor_info *oi = cg_program_outputs(s->p, "loss_grad", &n);
	for (uint32_t k = 0; k < n; k++) {
		s->n_out[k] = 1;
		for (int d = 0; d < oi[k].rank; d++)
			s->n_out[k] *= (size_t)oi[k].dims[d];
	}
}

static void step_init(step *s, const char *rel)
{
	step_init_with(s, rel, STEP_PARTS, NULL);
}

static void step_fini(step *s)
{
	free(s->pb);
	cg_program_destroy(s->p);
	for (uint32_t i = 0; i < s->f->n_inputs; i++)
		interp_tensor_fini(&s->ctx, &s->in[i]);
	for (uint32_t i = 0; i < s->m->n_params; i++)
		interp_tensor_fini(&s->ctx, &s->params[i]);
	ir_module_destroy(s->m);
	ir_ctx_fini(&s->ctx);
}

/* One training step on n_threads; returns its status, outs malloc'd. */
static int step_run(step *s, int n_threads, float **outs)
{
	char *sb = aligned_alloc(64,
				 round64(cg_program_scratch_bytes(s->p,
								  "loss_grad")));
	const void *ins[MAXT];
	void *o[MAXT];
	for (uint32_t i = 0; i < s->f->n_inputs; i++)
		ins[i] = s->in[i].data;
	for (uint32_t k = 0; k < s->f->n_outputs; k++)
		o[k] = outs[k] = calloc(s->n_out[k] + 1, 4);
	attnrt_run run = {.seed = 3,
			  .step = 9,
			  .is_training = 1,
			  .n_threads = n_threads};
	int st = cg_program_entry(s->p, "loss_grad")(&run, s->pb, sb, ins, o);
	free(sb);
	return st;
}

static void outs_free(const step *s, float **outs)
{
	for (uint32_t k = 0; k < s->f->n_outputs; k++)
		free(outs[k]);
}

static void assert_same(const step *s, float **a, float **b, const char *what)
{
	for (uint32_t k = 0; k < s->f->n_outputs; k++)
		ck_assert_msg(memcmp(a[k], b[k], s->n_out[k] * 4) == 0,
			      "%s: output %u differs", what, k);
}

static const char *const seq2seq[] = {"models/transformer.g",
				      "models/bahdanau.g"};

START_TEST(test_scheduled_training_steps_equal_the_in_order_run_bit_for_bit)
{
	step s;
	step_init(&s, seq2seq[_i]);
	cg_program_sched sc = cg_program_sched_of(s.p, "loss_grad");
	ck_assert_uint_eq(sc.threads, 2);
	ck_assert_uint_gt(sc.tasks, cg_program_n_calls(s.p, "loss_grad") / 2);
	ck_assert(sc.makespan < sc.cycles);
	float *one[MAXT], *two[MAXT];
	ck_assert_int_eq(step_run(&s, 1, one), 0);
	for (int call = 0; call < 12; call++) { /* races show as differences */
		ck_assert_int_eq(step_run(&s, 2, two), 0);
		assert_same(&s, one, two, seq2seq[_i]);
		outs_free(&s, two);
	}
	outs_free(&s, one);
	step_fini(&s);
}
END_TEST

/* The JIT optimizes and compiles the module in parts (the entry points
 * at CodeGen level None, the kernels in two parts on two threads, each
 * optimized on its own after the whole-module passes, linked in one
 * JITDylib: docs/codegen.md, "Compile time"); the kernels lose no bit
 * to it: the step gives what the module optimized and compiled as one
 * gives, and what it gives optimized as one and compiled in parts. */
START_TEST(test_training_steps_compiled_in_parts_equal_one_module_bit_for_bit)
{
	step parts, whole, opt;
	step_init_with(&parts, seq2seq[_i], STEP_PARTS, NULL);
	step_init_with(&whole, seq2seq[_i], STEP_WHOLE, NULL);
	step_init_with(&opt, seq2seq[_i], STEP_OPTIMIZED_PARTS, NULL);
	cg_module_stats st = cg_program_stats(parts.p);
	ck_assert(st.opt_ms > 0 && st.codegen_ms > 0);
	for (int nt = 1; nt <= 2; nt++) {
		float *a[MAXT], *b[MAXT], *c[MAXT];
		ck_assert_int_eq(step_run(&parts, nt, a), 0);
		ck_assert_int_eq(step_run(&whole, nt, b), 0);
		ck_assert_int_eq(step_run(&opt, nt, c), 0);
		assert_same(&parts, a, b, seq2seq[_i]);
		assert_same(&parts, a, c, seq2seq[_i]);
		outs_free(&parts, a);
		outs_free(&whole, b);
		outs_free(&opt, c);
	}
	step_fini(&opt);
	step_fini(&whole);
	step_fini(&parts);
}
END_TEST

/* Removes the programs' entries of the cache in dir (KEY.o), keeping
 * the units' (KEY.part.o). */
static void remove_program_entries(const char *dir)
{
	char cmd[160];
	snprintf(cmd, sizeof cmd, "rm -f '%s'/*[0-9a-f].o", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* With the object cache the JIT compiles the step in units, each kept
 * in an entry of its own, and the program's objects in one more entry:
 * a second compilation reads the program's back, a third (without the
 * program's entry) every unit's; all run the bits of the step compiled
 * in parts without the cache. */
START_TEST(test_the_cache_gives_back_every_part_of_a_step)
{
	char dir[] = "/tmp/attnc-parts-XXXXXX";
	ck_assert(mkdtemp(dir) != NULL);
	step ref, cold, warm, units;
	step_init_with(&ref, seq2seq[_i], STEP_PARTS, NULL);
	step_init_with(&cold, seq2seq[_i], STEP_PARTS, dir);
	cg_module_stats st = cg_program_stats(cold.p);
	ck_assert_int_eq(st.cache, CG_CACHE_MISS);
	ck_assert_uint_gt(st.n_units, 2);
	ck_assert_uint_eq(st.n_units_hit, 0);
	step_init_with(&warm, seq2seq[_i], STEP_PARTS, dir);
	ck_assert_int_eq(cg_program_stats(warm.p).cache, CG_CACHE_HIT);
	remove_program_entries(dir);
	step_init_with(&units, seq2seq[_i], STEP_PARTS, dir);
	st = cg_program_stats(units.p);
	ck_assert_int_eq(st.cache, CG_CACHE_MISS);
	ck_assert_uint_eq(st.n_units_hit, st.n_units);
	step *all[4] = {&ref, &cold, &warm, &units};
	for (int nt = 1; nt <= 2; nt++) {
		float *a[4][MAXT];
		for (int k = 0; k < 4; k++)
			ck_assert_int_eq(step_run(all[k], nt, a[k]), 0);
		for (int k = 1; k < 4; k++)
			assert_same(&ref, a[0], a[k], seq2seq[_i]);
		for (int k = 0; k < 4; k++)
			outs_free(all[k], a[k]);
	}
	for (int k = 3; k >= 0; k--)
		step_fini(all[k]);
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(test_a_failing_kernel_ends_the_scheduled_step_with_its_code)
{
	step s;
	step_init(&s, "models/transformer.g");
	/* Input 0 is src: a token past the source vocabulary. */
	((int32_t *)s.in[0].data)[17] = 100000;
	float *one[MAXT], *two[MAXT];
	int want = step_run(&s, 1, one);
	ck_assert_int_ne(want, 0);
	ck_assert_int_eq(step_run(&s, 2, two), want);
	outs_free(&s, one);
	outs_free(&s, two);
	step_fini(&s);
}
END_TEST

/* The remat pass recomputes each block's layer norm just before the
 * weight gradient that reads it (GELU's output, with its erf, it
 * keeps): the step gives the same bits with it as without, in order and
 * scheduled on 2 threads. */
START_TEST(test_recomputed_activations_give_the_same_bits_in_less_scratch)
{
	step with, without, two;
	step_init_with(&with, "tests/models/remat_mlp.g", STEP_IN_ORDER, NULL);
	step_init_with(&without, "tests/models/remat_mlp.g",
		       STEP_IN_ORDER_NO_REMAT, NULL);
	step_init_with(&two, "tests/models/remat_mlp.g", STEP_PARTS, NULL);
	float *a[MAXT], *b[MAXT], *c[MAXT], *d[MAXT];
	ck_assert_int_eq(step_run(&with, 1, a), 0);
	ck_assert_int_eq(step_run(&without, 1, b), 0);
	ck_assert_int_eq(step_run(&two, 1, c), 0);
	ck_assert_int_eq(step_run(&two, 2, d), 0);
	assert_same(&with, a, b, "remat");
	assert_same(&with, a, c, "remat, scheduled, 1 thread");
	assert_same(&with, a, d, "remat, scheduled, 2 threads");
	outs_free(&with, a);
	outs_free(&without, b);
	outs_free(&two, c);
	outs_free(&two, d);
	/* In order, the slab is fullest as the backward starts, at the
	 * last block's weight gradient: the three blocks' first products
	 * (h, which GELU's gradient reads) and GELU outputs, and the
	 * gradient at the last GELU output (R x F each); the residual
	 * stream after blocks 1 and 2, and the loss's gradient (R x D
	 * each). The outputs (the loss, that weight gradient (F x D) and
	 * its bias's (D), and every gradient after them) are written
	 * straight into the caller's buffers: none in the slab. GELU's
	 * backward reads 1 + erf from its output (fuse_gelu), so the last
	 * block's GELU gradient (R x F) is computed before that weight
	 * gradient and is live there too. Without remat, the three layer
	 * norms' outputs (R x D) too. */
	const uint64_t R = 512, D = 256, F = 512;
	const uint64_t h = R * F * 4, x = R * D * 4;
	const uint64_t want = 8 * h + 3 * x;
	const cg_scratch_peak *pw = cg_program_scratch_peak(with.p, "loss_grad");
	const cg_scratch_peak *po = cg_program_scratch_peak(without.p,
							    "loss_grad");
	ck_assert_uint_eq(pw->threads, 1);
	ck_assert_uint_eq(pw->live, want);
	ck_assert_uint_eq(po->live, want + 3 * x);
	ck_assert_uint_le(pw->live, pw->slab);
	ck_assert_uint_eq(pw->slab,
			  cg_program_scratch_bytes(with.p, "loss_grad"));
	uint64_t sum = 0;
	for (uint32_t i = 0; i < pw->n; i++) {
		sum += pw->buffers[i].bytes;
		if (i)
			ck_assert_uint_le(pw->buffers[i].bytes,
					  pw->buffers[i - 1].bytes);
	}
	ck_assert_uint_eq(sum, pw->live);
	step_fini(&two);
	step_fini(&without);
	step_fini(&with);
}
END_TEST

/* libgomp's entry point (gcc's ABI), to call from inside a region. */
void GOMP_parallel(void (*fn)(void *), void *data, unsigned num_threads,
		   unsigned flags);

int omp_get_thread_num(void);

typedef struct nested {
	step *s;
	float *outs[2][MAXT];
	int st[2];
} nested;

static void nested_body(void *data)
{
	nested *n = data;
	int t = omp_get_thread_num();
	n->st[t] = step_run(n->s, 2, n->outs[t]);
}

/* Inside a parallel region a call's region gets a team of one: the
 * schedule for 2 cannot run, and the step runs in order instead. */
START_TEST(test_a_step_called_where_no_team_starts_runs_in_order)
{
	step s;
	step_init(&s, "models/bahdanau.g");
	float *one[MAXT];
	ck_assert_int_eq(step_run(&s, 1, one), 0);
	nested n = {.s = &s};
	GOMP_parallel(nested_body, &n, 2, 0);
	for (int t = 0; t < 2; t++) {
		ck_assert_int_eq(n.st[t], 0);
		assert_same(&s, one, n.outs[t], "nested");
		outs_free(&s, n.outs[t]);
	}
	outs_free(&s, one);
	step_fini(&s);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("codegen_sched");
	TCase *t = tcase_create("scheduler");
	tcase_add_test(
		t, test_random_schedules_keep_every_dependency_under_any_timing);
	tcase_add_test(t, test_extra_dependencies_that_end_before_are_kept_too);
	tcase_add_test(t,
		       test_the_reuse_index_finds_the_pairs_a_look_at_all_finds);
	tcase_add_test(t, test_a_dependency_on_a_later_task_is_refused);
	tcase_add_test(t, test_independent_chains_run_side_by_side);
	tcase_add_test(t, test_a_large_kernel_is_cut_into_one_piece_per_thread);
	tcase_add_test(t, test_a_cut_kernels_pieces_keep_to_their_threads);
	tcase_add_test(t,
		       test_halves_placed_in_a_row_on_one_thread_are_one_task);
	suite_add_tcase(s, t);
	TCase *e = tcase_create("entry points");
	tcase_set_timeout(e, 600);
	tcase_add_loop_test(
		e,
		test_scheduled_training_steps_equal_the_in_order_run_bit_for_bit,
		0, 2);
	tcase_add_test(e,
		       test_a_failing_kernel_ends_the_scheduled_step_with_its_code);
	tcase_add_test(
		e,
		test_recomputed_activations_give_the_same_bits_in_less_scratch);
	tcase_add_test(e, test_a_step_called_where_no_team_starts_runs_in_order);
	tcase_add_loop_test(
		e,
		test_training_steps_compiled_in_parts_equal_one_module_bit_for_bit,
		0, 2);
	tcase_add_loop_test(e, test_the_cache_gives_back_every_part_of_a_step,
			    0, 2);
	suite_add_tcase(s, e);
	return s;
}

int main(void)
{
	return tu_run_suite(suite());
}
