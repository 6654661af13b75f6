/*
 * train_xattn.c - a C program that trains a model compiled ahead of
 * time: the cross-attention classifier of examples/xattn.g, with the
 * gradient function `attnc -c` writes for a model with a train block
 * (xattn_loss_grad) and libattnrt's Adam, on a batch the program makes.
 * A second build of the same model, for another batch size and under
 * another prefix, classifies afterwards with the trained weights: two
 * builds of one model link into one program, sharing one params block.
 *
 *   attnc examples/xattn.g -c --batch 16 -o xattn.o    # xattn_*, B = 16
 *   attnc examples/xattn.g -c -o xattn_eval.o          # xattn_eval_*, B = 4
 *   cc train_xattn.c xattn.o xattn_eval.o \
 *      $(pkg-config --cflags --libs attnrt) -o train_xattn
 *   ./train_xattn [--save weights.safetensors]
 *
 * The batch: 16 rows of random tokens and context vectors (a fixed
 * linear congruential generator), valid lengths 1..5, each row's label
 * its first token mod 3. xattn_loss_grad writes the loss into outputs[0]
 * and the gradient of parameter i into outputs[1 + i], here pointed into
 * a gradient block laid out as the params block, which attnrt_optim_step
 * reads. The program prints the loss as it falls and exits 1 unless the
 * last loss is below half the first.
 */
#include "xattn.h"
#include "xattn_eval.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IN XATTN_LOSS_GRAD_N_INPUTS
#define N_OUT XATTN_LOSS_GRAD_N_OUTPUTS
#define N_EVAL_IN XATTN_EVAL_LOGITS_N_INPUTS
#define STEPS 60
#define N_CLASSES 3

/* One params block serves both builds: the parameters do not depend on
 * the batch size. */
_Static_assert(XATTN_PARAMS_SIZE == XATTN_EVAL_PARAMS_SIZE,
	       "the builds lay out the params block alike");
_Static_assert(N_OUT == 1 + XATTN_N_PARAMS,
	       "the loss, then a gradient per parameter");

static const attnrt_tensor_info *const ins = xattn_loss_grad_inputs;

static size_t numel(const attnrt_tensor_info *t)
{
	size_t n = 1;
	for (int i = 0; i < t->rank; i++)
		n *= (size_t)t->dims[i];
	return n;
}

static uint32_t lcg_next(uint32_t *state)
{
	*state = *state * 1664525u + 1013904223u;
	return *state >> 8;
}

/* The vocabulary the model was compiled for: the rows of the token
 * embedding's table. */
static int64_t vocabulary(void)
{
	for (int i = 0; i < XATTN_N_PARAMS; i++)
		if (strcmp(xattn_params[i].name, "classify.embed.table") == 0)
			return xattn_params[i].dims[0];
	return 0;
}

/* tokens (B, S), context (B, K, D), valid (B), labels (B); false if
 * the model was compiled for other inputs. */
static bool fill_batch(void *in[N_IN])
{
	int64_t v = vocabulary();
	if (N_IN != 4 || v < N_CLASSES || ins[0].dtype != ATTNRT_I32 ||
	    ins[1].dtype != ATTNRT_F32 || ins[2].dtype != ATTNRT_I32 ||
	    ins[3].dtype != ATTNRT_I32 || ins[0].rank != 2 || ins[1].rank != 3)
		return false;
	int64_t b = ins[0].dims[0], s = ins[0].dims[1], k = ins[1].dims[1];
	int32_t *tokens = in[0], *valid = in[2], *labels = in[3];
	float *ctx = in[1];
	uint32_t state = 12345;
	for (size_t i = 0; i < numel(&ins[0]); i++)
		tokens[i] = (int32_t)(lcg_next(&state) % (uint32_t)v);
	for (size_t i = 0; i < numel(&ins[1]); i++)
		ctx[i] = (float)(lcg_next(&state) % 2001) / 1000.0f - 1.0f;
	for (int64_t r = 0; r < b; r++) {
		valid[r] = (int32_t)(1 + r % k);
		labels[r] = tokens[r * s] % N_CLASSES;
	}
	return true;
}

/* Runs the gradient function once; its loss into *loss. */
static bool grad_step(uint64_t step, void *params, void *scratch,
		      void *in[N_IN], void *out[N_OUT], float *loss)
{
	attnrt_run run = {.seed = 0,
			  .step = step,
			  .is_training = 1,
			  .n_threads = XATTN_LOSS_GRAD_SCHED_THREADS};
	int rc = xattn_loss_grad(&run, params, scratch, (const void *const *)in,
				 out);
	if (rc != ATTNRT_OK) {
		fprintf(stderr, "xattn_loss_grad failed: %s (node %d)\n",
			attnrt_strerror(rc), rc >> 8);
		return false;
	}
	*loss = *(const float *)out[0];
	return true;
}

/* Trains STEPS steps of Adam (lr 0.01); the first and last losses. */
static bool train(void *params, void *grads, void *scratch, void *in[N_IN],
		  float *first, float *last)
{
	attnrt_optim_config cfg = attnrt_optim_defaults(ATTNRT_OPTIM_ADAM, 0.01);
	attnrt_optim *opt = NULL;
	char err[256] = "";
	void *out[N_OUT];
	float loss = 0;
	if (attnrt_optim_create(NULL, &cfg, xattn_params, XATTN_N_PARAMS, &opt,
				err, sizeof err) != ATTNRT_OK) {
		fprintf(stderr, "attnrt_optim_create: %s\n", err);
		return false;
	}
	out[0] = &loss;
	for (int i = 0; i < XATTN_N_PARAMS; i++)
		out[1 + i] = (char *)grads + xattn_params[i].offset;
	bool ok = true;
	for (uint64_t step = 0; ok && step < STEPS; step++) {
		ok = grad_step(step, params, scratch, in, out, &loss) &&
		     isfinite(loss);
		if (step == 0)
			*first = loss;
		if (ok && step % 10 == 0)
			printf("step %2llu  loss %.4f\n",
			       (unsigned long long)step, loss);
		attnrt_optim_step(opt, params, grads);
	}
	*last = loss;
	attnrt_optim_destroy(opt);
	return ok;
}

/* Classifies the first rows of the batch with the other build (B rows
 * of its own); prints how many it gets right. */
static bool evaluate(void *params, void *in[N_IN])
{
	const attnrt_tensor_info *e = xattn_eval_logits_inputs;
	int64_t b = e[0].dims[0];
	void *scratch = attnrt_alloc(NULL, XATTN_EVAL_LOGITS_SCRATCH_SIZE);
	float *scores = attnrt_alloc(NULL, numel(&xattn_eval_logits_outputs[0]) *
						   sizeof *scores);
	const void *eval_in[N_EVAL_IN] = {in[0], in[1], in[2]};
	void *eval_out[1] = {scores};
	attnrt_run run = {.n_threads = XATTN_EVAL_LOGITS_SCHED_THREADS};
	bool ok = scratch && scores && b <= ins[0].dims[0] &&
		  xattn_eval_logits(&run, params, scratch, eval_in, eval_out) ==
			  ATTNRT_OK;
	int right = 0;
	for (int64_t r = 0; ok && r < b; r++) {
		int best = 0;
		for (int c = 1; c < N_CLASSES; c++)
			best = scores[r * N_CLASSES + c] >
					       scores[r * N_CLASSES + best]
				       ? c
				       : best;
		right += best == ((const int32_t *)in[3])[r];
	}
	if (ok)
		printf("xattn_eval_logits: %d of the first %lld rows right\n",
		       right, (long long)b);
	attnrt_free(NULL, scores);
	attnrt_free(NULL, scratch);
	return ok;
}

static bool save(const char *path, const void *params)
{
	char err[512] = "";
	attnrt_meta meta = {"model", "xattn"};
	if (attnrt_checkpoint_save(NULL, path, xattn_params, XATTN_N_PARAMS,
				   params, &meta, 1, err,
				   sizeof err) == ATTNRT_OK)
		return true;
	fprintf(stderr, "saving %s: %s\n", path, err);
	return false;
}

int main(int argc, char **argv)
{
	if (argc != 1 && !(argc == 3 && strcmp(argv[1], "--save") == 0)) {
		fprintf(stderr, "usage: %s [--save FILE]\n", argv[0]);
		return 2;
	}
	void *params = attnrt_alloc(NULL, XATTN_PARAMS_SIZE);
	void *grads = attnrt_alloc(NULL, XATTN_PARAMS_SIZE);
	void *scratch = attnrt_alloc(NULL, XATTN_LOSS_GRAD_SCRATCH_SIZE);
	void *in[N_IN];
	bool ok = params && grads && scratch;
	for (int i = 0; i < N_IN; i++)
		ok &= (in[i] = attnrt_alloc(NULL, numel(&ins[i]) * 4)) != NULL;
	float first = 0, last = 0;
	if (!ok)
		fprintf(stderr, "%s: out of memory\n", argv[0]);
	else if (!(ok = fill_batch(in)))
		fprintf(stderr, "%s: the model was compiled for other inputs\n",
			argv[0]);
	ok = ok &&
	     attnrt_params_init(xattn_params, XATTN_N_PARAMS, params, 0) ==
		     ATTNRT_OK &&
	     train(params, grads, scratch, in, &first, &last) &&
	     evaluate(params, in) && (argc == 1 || save(argv[2], params));
	if (ok && last < 0.5f * first)
		printf("loss fell from %.4f to %.4f in %d steps\n", first, last,
		       STEPS);
	else if (ok)
		fprintf(stderr, "%s: the loss did not fall: %.4f, then %.4f\n",
			argv[0], first, last);
	ok = ok && last < 0.5f * first;
	for (int i = 0; i < N_IN; i++)
		attnrt_free(NULL, in[i]);
	attnrt_free(NULL, scratch);
	attnrt_free(NULL, grads);
	attnrt_free(NULL, params);
	return ok ? 0 : 1;
}
