/*
 * bench_program.h - what the benchmarks of single kernels share: a .g
 * text compiled (the pass pipeline, then lowered) into a program, and
 * an entry point of it timed over rounds of calls. Needs attnc's
 * codegen, passes and frontend libraries (bench_util.h needs none).
 */
#ifndef ATTNC_BENCH_PROGRAM_H
#define ATTNC_BENCH_PROGRAM_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "cg_program.h"
#include "frontend.h"
#include "passes.h"

/* The program of the text src, .g or, for a name ending in ".ir", IR
 * (an op autodiff makes, such as layer_norm_grad, has no .g spelling),
 * the module in *m (for ir_module_destroy); NULL when it does not
 * compile. */
static inline cg_program *bench_program_of(ir_ctx *ctx, const char *name,
					   const char *src, ir_module **m)
{
	uint32_t file = ir_ctx_add_source(ctx, name, src, strlen(src));
	size_t n = strlen(name);
	*m = n > 3 && strcmp(name + n - 3, ".ir") == 0
		     ? ir_module_read(ctx, file)
		     : fe_compile(ctx, file);
	pass_options po = {0};
	if (!*m || !pass_pipeline_run(*m, &po))
		return NULL;
	return cg_program_create(ctx, *m, NULL, NULL);
}

/* Whether p (from bench_program_of, NULL when it did not compile) is
 * ready to run; if not, says so as `who`, frees p and m, and finishes
 * ctx. */
static inline bool bench_program_jit(ir_ctx *ctx, cg_program *p, ir_module *m,
				     const char *who)
{
	if (p && cg_program_jit(p))
		return true;
	fprintf(stderr, "%s: the program does not compile\n", who);
	cg_program_destroy(p);
	ir_module_destroy(m);
	ir_ctx_fini(ctx);
	return false;
}

/* The options of a benchmark of rows: -R ROWS -C COLS -t THREADS
 * -r ROUNDS (1..64) -n CALLS. */
typedef struct bench_rows_opts {
	int R, C, threads, rounds, calls;
} bench_rows_opts;

/* Parses argv into *o (holding the defaults); false after printing
 * `who`'s usage or its refusal of a bad value. */
static inline bool bench_rows_parse(int argc, char **argv, const char *who,
				    bench_rows_opts *o)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		int *ints[] = {&o->R, &o->C, &o->threads, &o->rounds, &o->calls};
		const char *flags = "RCtrn";
		const char *at = a[0] == '-' && a[1] && !a[2]
					 ? strchr(flags, a[1])
					 : NULL;
		if (!at || !v) {
			fprintf(stderr,
				"usage: %s [-R ROWS] [-C COLS] [-t THREADS] "
				"[-r ROUNDS] [-n CALLS]\n",
				who);
			return false;
		}
		*ints[at - flags] = atoi(v);
		i++;
	}
	if (o->R <= 0 || o->C <= 0 || o->threads <= 0 || o->rounds < 1 ||
	    o->rounds > 64 || o->calls <= 0) {
		fprintf(stderr, "%s: bad sizes or counts\n", who);
		return false;
	}
	return true;
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
