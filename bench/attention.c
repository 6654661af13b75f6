/*
 * attention.c - benchmark of fused against unfused attention in attnc:
 * batch x heads N = 8, head width 64 (-w), sequence 128 to 4096 (queries =
 * keys), every key visible or causal (-c), forward alone and forward +
 * backward, each the median of several runs, with GFLOP/s and their
 * share of the FMA peak (-p) and the scratch memory each program needs
 * (cg_program_scratch_bytes: the activations, weights included when
 * unfused). Both graphs come from one .g text, compiled with and without
 * the fuse_attention pass:
 *
 *   fwd(q, k, v, valid) = masked_softmax(q @ k.T / sqrt(64), valid) @ v
 *   loss(w, valid)      = sum(that, with q, k, v parameters, * w)
 *
 * and loss_grad (autodiff) gives forward + backward. valid is the full
 * length, as a padded batch's longest sentence, so the kernels cannot
 * skip anything; with -c it is t + 1 for query t (valid: i32[8, seq]),
 * a causal decoder's mask. FLOPs are 2 N (d + dv) per visible (query,
 * key) pair forward and twice that backward (attnc --profile's rule,
 * which counts the causal triangle too). bench/attention_torch.py times the same in PyTorch and
 * bench/attention.sh prints both next to the peak.
 *
 *     bench_attention [-r REPS] [-t THREADS] [-s SEQ]... [-m MAX_GIB]
 *                     [-w WIDTH] [-c] [-f] [-C] [-p PEAK]
 *
 * (options as bench_attn.h says; -m defaults to 8 GiB). The last
 * column is the largest difference between the fused and unfused
 * outputs of one forward run, a sanity check. The run ends with the load
 * average before and after: another busy process on this 2-core machine
 * takes the second thread's core.
 */
#include <stdio.h>

#include "bench_attn.h"

static void source(char *src, size_t cap, const bench_attn_cfg *c)
{
	const int N = BENCH_N, W = c->width, seq = c->seq;
	char valid[32];
	if (c->is_causal)
		snprintf(valid, sizeof valid, "i32[%d, %d]", N, seq);
	else
		snprintf(valid, sizeof valid, "i32[%d]", N);
	snprintf(src, cap,
		 "model attention_bench\n"
		 "export def fwd(q: f32[%d, %d, %d], k: f32[%d, %d, %d], "
		 "v: f32[%d, %d, %d], valid: %s)\n"
		 "  return masked_softmax(q @ k.T / sqrt(%d), valid) @ v\n"
		 "export def loss(w: f32[%d, %d, %d], valid: %s)\n"
		 "  param q, k, v : [%d, %d, %d] = normal(0, 1)\n"
		 "  return sum(masked_softmax(q @ k.T / sqrt(%d), valid) @ v * w)\n",
		 N, seq, W, N, seq, W, N, seq, W, valid, W, N, seq, W, valid, N,
		 seq, W, W);
}

/* 2 N (d + dv) FLOPs per (query, visible key) pair: seq^2 pairs, or
 * seq (seq + 1) / 2 causal. */
static double fwd_flops(const bench_attn_cfg *c)
{
	double t = c->seq;
	double pairs = c->is_causal ? t * (t + 1) / 2 : t * t;
	return 2.0 * BENCH_N * pairs * 2.0 * c->width;
}

int main(int argc, char **argv)
{
	static const int seqs[] = {128, 256, 512, 1024, 2048, 4096};
	const bench_attn b = {
		.name = "bench_attention",
		.what = "attention",
		.n_note = " (batch x heads)",
		.w_name = "head width",
		.file = "attention_bench.g",
		.seqs = seqs,
		.n_seqs = 6,
		.source = source,
		.fwd_flops = fwd_flops,
		.has_causal = true,
	};
	return bench_attn_main(&b, argc, argv);
}
