/*
 * bench_attn.h - the driver that the attention benchmarks
 * (bench/attention.c, bench/additive.c) share: options, compiling one .g
 * text with and without the fuse_attention pass, timing fwd and
 * loss_grad of each (median of several runs), the scratch each needs,
 * and the table they print.
 *
 * A benchmark gives its .g text as a function of the sequence length:
 * an exported fwd(a, b, v, valid) with three (N, seq, W) f32 inputs and
 * valid i32[N], and loss(w, valid) with w (N, seq, W), whose parameters
 * loss_grad differentiates. Its options:
 *
 *     NAME [-r REPS] [-t THREADS] [-s SEQ]... [-m MAX_GIB]
 *
 * -r: runs per cell (default 5; 3 once a run takes over a second);
 * -t: threads (default 2); -s: sequence lengths (repeatable, default the
 * benchmark's list); -m: skip ("-") a program whose scratch exceeds this
 * many GiB (default 8).
 */
#ifndef ATTNC_BENCH_BENCH_ATTN_H
#define ATTNC_BENCH_BENCH_ATTN_H

#include <stddef.h>

#define BENCH_N 8      /* N, the batch (times the heads) */
#define BENCH_WIDTH 64 /* W, the width of every input's last axis */

typedef struct bench_attn {
	const char *name; /* the program's name, for messages */
	const char *what; /* the first line: "WHAT: N = 8N_NOTE, W_NAME 64" */
	const char *n_note;
	const char *w_name;
	const char *file; /* the .g text's file name, for diagnostics */
	const int *seqs;  /* the default sequence lengths */
	int n_seqs;
	/* Writes the .g text for sequence length seq into src (cap bytes). */
	void (*source)(char *src, size_t cap, int seq);
} bench_attn;

/* Runs benchmark b with the command line argc, argv: prints the table
 * and returns main's exit status (2 for a bad command line). Exits on a
 * failure to compile or run. */
int bench_attn_main(const bench_attn *b, int argc, char **argv);

#endif
