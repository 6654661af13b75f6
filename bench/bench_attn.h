/*
 * bench_attn.h - the driver that the attention benchmarks
 * (bench/attention.c, bench/additive.c) share: options, compiling one .g
 * text with and without the fuse_attention pass, timing fwd and
 * loss_grad of each (median of several runs), the scratch each needs,
 * and the table they print.
 *
 * A benchmark gives its .g text as a function of the sequence length
 * and width (bench_attn_cfg): an exported fwd(a, b, v, valid) with three
 * (N, seq, W) f32 inputs and valid i32[N] (i32[N, seq] when causal), and
 * loss(w, valid) with w (N, seq, W), whose parameters loss_grad
 * differentiates. Its options:
 *
 *     NAME [-r REPS] [-t THREADS] [-s SEQ]... [-m MAX_GIB] [-w WIDTH]
 *          [-c] [-f] [-C] [-p PEAK]
 *
 * -r: runs per cell (default 5; 3 once a run takes over a second);
 * -t: threads (default 2); -s: sequence lengths (repeatable, default the
 * benchmark's list); -m: skip ("-") a program whose scratch exceeds this
 * many GiB (default 8); -w: the width W (default BENCH_WIDTH); -c:
 * causal, query t sees keys 0 .. t (per-query valid lengths t + 1; only
 * where the benchmark has a causal form); -f: the fused programs only
 * (the unfused columns "-"); -C: time by the process's CPU clock, not
 * the wall clock (with -t 1 on a busy machine: the waits for the core
 * left out; the sum over threads otherwise); -p: the FMA peak in GFLOP/s
 * (bench_fma_peak's, for the threads used) that the fused GFLOP/s are
 * shown as a share of.
 */
#ifndef ATTNC_BENCH_BENCH_ATTN_H
#define ATTNC_BENCH_BENCH_ATTN_H

#include <stdbool.h>
#include <stddef.h>

#define BENCH_N 8      /* N, the batch (times the heads) */
#define BENCH_WIDTH 64 /* W, the width of every input's last axis */

/* One table row's shape. */
typedef struct bench_attn_cfg {
	int seq;        /* queries = keys */
	int width;      /* W */
	bool is_causal; /* per-query valid lengths t + 1 */
} bench_attn_cfg;

typedef struct bench_attn {
	const char *name; /* the program's name, for messages */
	const char *what; /* the first line: "WHAT: N = 8N_NOTE, W_NAME 64" */
	const char *n_note;
	const char *w_name;
	const char *file; /* the .g text's file name, for diagnostics */
	const int *seqs;  /* the default sequence lengths */
	int n_seqs;
	/* Writes the .g text for shape c into src (cap bytes). */
	void (*source)(char *src, size_t cap, const bench_attn_cfg *c);
	/* The forward FLOPs of shape c (the gradient counts twice them, as
	 * attnc --profile does), or NULL: no GFLOP/s columns. */
	double (*fwd_flops)(const bench_attn_cfg *c);
	bool has_causal; /* whether source has the causal form (-c) */
} bench_attn;

/* Runs benchmark b with the command line argc, argv: prints the table
 * and returns main's exit status (2 for a bad command line). Exits on a
 * failure to compile or run. */
int bench_attn_main(const bench_attn *b, int argc, char **argv);

#endif
