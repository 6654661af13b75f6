/*
 * attention.c - benchmark of fused against unfused attention in attnc:
 * batch x heads N = 8, head width 64, sequence 128 to 4096 (queries =
 * keys), forward alone and forward + backward, each the median of
 * several runs, with the scratch memory each program needs
 * (cg_program_scratch_bytes: the activations, weights included when
 * unfused). Both graphs come from one .g text, compiled with and without
 * the fuse_attention pass:
 *
 *   fwd(q, k, v, valid) = masked_softmax(q @ k.T / sqrt(64), valid) @ v
 *   loss(w, valid)      = sum(that, with q, k, v parameters, * w)
 *
 * and loss_grad (autodiff) gives forward + backward. valid is the full
 * length, as a padded batch's longest sentence; the kernels cannot skip
 * anything then. bench/attention_torch.py times the same in PyTorch.
 *
 *     bench_attention [-r REPS] [-t THREADS] [-s SEQ]... [-m MAX_GIB]
 *
 * (options as bench_attn.h says; -m defaults to 8 GiB). The last
 * column is the largest difference between the fused and unfused
 * outputs of one forward run, a sanity check. The run ends with the load
 * average before and after: another busy process on this 2-core machine
 * takes the second thread's core.
 */
#include <stdio.h>

#include "bench_attn.h"

static void source(char *src, size_t cap, int seq)
{
	const int N = BENCH_N, W = BENCH_WIDTH;
	snprintf(src, cap,
		 "model attention_bench\n"
		 "export def fwd(q: f32[%d, %d, %d], k: f32[%d, %d, %d], "
		 "v: f32[%d, %d, %d], valid: i32[%d])\n"
		 "  return masked_softmax(q @ k.T / sqrt(%d), valid) @ v\n"
		 "export def loss(w: f32[%d, %d, %d], valid: i32[%d])\n"
		 "  param q, k, v : [%d, %d, %d] = normal(0, 1)\n"
		 "  return sum(masked_softmax(q @ k.T / sqrt(%d), valid) @ v * w)\n",
		 N, seq, W, N, seq, W, N, seq, W, N, W, N, seq, W, N, N, seq, W,
		 W);
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
	};
	return bench_attn_main(&b, argc, argv);
}
