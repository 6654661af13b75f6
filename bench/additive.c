/*
 * additive.c - benchmark of fused against unfused additive (Bahdanau)
 * attention in attnc: batch N = 8, projection width H = 64, value width
 * 64, sequence 128 to 2048 (queries = keys), forward alone and forward +
 * backward, each the median of several runs, with the scratch memory
 * each program needs (cg_program_scratch_bytes: the activations, the
 * N x Q x K x H features included when unfused). Both graphs come from
 * one .g text, compiled with and without the fuse_attention pass:
 *
 *   fwd(qp, kp, v, valid) = masked_softmax(squeeze(tanh(unsqueeze(qp, 2)
 *                           + unsqueeze(kp, 1)) @ wv, -1), valid) @ v
 *   loss(w, valid)        = sum(that, with qp, kp, wv, v parameters, * w)
 *
 * and loss_grad (autodiff) gives forward + backward. valid is the full
 * length. A program whose scratch exceeds -m GiB is skipped ("-"): the
 * unfused features alone are N Q K H floats, 8 GiB at 2048.
 *
 *     bench_additive [-r REPS] [-t THREADS] [-s SEQ]... [-m MAX_GIB]
 *
 * The last column is the largest difference between the fused and
 * unfused outputs of one forward run, a sanity check. The run ends with
 * the load average before and after.
 */
#include <stdio.h>

#include "bench_attn.h"

static void source(char *src, size_t cap, const bench_attn_cfg *c)
{
	const int N = BENCH_N, W = c->width, seq = c->seq;
	snprintf(src, cap,
		 "model additive_bench\n"
		 "def score(qp, kp, wv)\n"
		 "  return squeeze(tanh(unsqueeze(qp, 2) + unsqueeze(kp, 1)) @ wv, -1)\n"
		 "export def fwd(qp: f32[%d, %d, %d], kp: f32[%d, %d, %d], "
		 "v: f32[%d, %d, %d], valid: i32[%d])\n"
		 "  param wv : [%d, 1] = normal(0, 1)\n"
		 "  return masked_softmax(score(qp, kp, wv), valid) @ v\n"
		 "export def loss(w: f32[%d, %d, %d], valid: i32[%d])\n"
		 "  param qp, kp, v : [%d, %d, %d] = normal(0, 1)\n"
		 "  param wv : [%d, 1] = normal(0, 1)\n"
		 "  return sum(masked_softmax(score(qp, kp, wv), valid) @ v * w)\n",
		 N, seq, W, N, seq, W, N, seq, W, N, W, N, seq, W, N, N, seq, W,
		 W);
}

int main(int argc, char **argv)
{
	static const int seqs[] = {128, 256, 512, 1024, 2048};
	const bench_attn b = {
		.name = "bench_additive",
		.what = "additive attention",
		.n_note = "",
		.w_name = "H = dv =",
		.file = "additive_bench.g",
		.seqs = seqs,
		.n_seqs = 5,
		.source = source,
	};
	return bench_attn_main(&b, argc, argv);
}
