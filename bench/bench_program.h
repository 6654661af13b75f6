/*
 * bench_program.h - what the benchmarks of single kernels share: a .g
 * text compiled (the pass pipeline, then lowered) into a program, and
 * an entry point of it timed over rounds of calls. Needs attnc's
 * codegen, passes and frontend libraries (bench_util.h needs none).
 */
#ifndef ATTNC_BENCH_PROGRAM_H
#define ATTNC_BENCH_PROGRAM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cg_program.h"
#include "frontend.h"
#include "passes.h"

/* The program of the .g text src (its file called name), the module in
 * *m (for ir_module_destroy); NULL when it does not compile. */
static inline cg_program *bench_program_of(ir_ctx *ctx, const char *name,
					   const char *src, ir_module **m)
{
	uint32_t file = ir_ctx_add_source(ctx, name, src, strlen(src));
	*m = fe_compile(ctx, file);
	pass_options po = {0};
	if (!*m || !pass_pipeline_run(*m, &po))
		return NULL;
	return cg_program_create(ctx, *m, NULL, NULL);
}

/* Time per call (bench_time_entry: nanoseconds): the median and the
 * fastest of the rounds (the fastest is the least disturbed by other
 * processes on a shared machine). */
typedef struct bench_timing {
	double median, best;
} bench_timing;

/* How to time an entry point: `rounds` (1..64) of `calls` calls each on
 * `threads` threads, in training mode or not, with the params block
 * `params` (NULL for a program without parameters), each round timed on
 * `clock` (bench_now_s); `who` names the benchmark in the message of a
 * failing call. */
typedef struct bench_calls {
	int rounds, calls, threads, is_training;
	void *params;
	clockid_t clock;
	const char *who;
} bench_calls;

/* Times entry point fn of the JIT-compiled p on ins and outs; exits
 * with a message if a call fails. */
static inline bench_timing bench_time_entry(const cg_program *p, const char *fn,
					    const bench_calls *c,
					    const void *const *ins,
					    void *const *outs)
{
	size_t bytes = cg_program_scratch_bytes(p, fn);
	char *scratch = aligned_alloc(64, (bytes + 127) / 64 * 64);
	attnrt_entry_fn entry = cg_program_entry(p, fn);
	double t[64];
	for (int r = 0; r < c->rounds; r++) {
		double t0 = bench_now_s(c->clock);
		for (int k = 0; k < c->calls; k++) {
			attnrt_run run = {1, (uint64_t)k, c->is_training,
					  c->threads};
			if (!scratch ||
			    entry(&run, c->params, scratch, ins, outs) != 0) {
				fprintf(stderr, "%s: %s failed\n", c->who, fn);
				exit(1);
			}
		}
		t[r] = (bench_now_s(c->clock) - t0) / c->calls * 1e9;
	}
	free(scratch);
	bench_sort(t, c->rounds);
	return (bench_timing){t[c->rounds / 2], t[0]};
}

#endif
