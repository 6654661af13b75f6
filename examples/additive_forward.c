/*
 * additive_forward.c - a C program that embeds a model compiled ahead of
 * time: the additive attention of d2l 10.3.2 (models/additive_attention.g),
 * run on the book's example inputs.
 *
 *   attnc models/additive_attention.g -c -o additive_attention.o
 *   cc additive_forward.c additive_attention.o \
 *      $(pkg-config --cflags --libs attnrt) -o additive_forward
 *   ./additive_forward --save weights.safetensors   # initialize, save, run
 *   ./additive_forward --load weights.safetensors   # load, run
 *
 * Every key is the same, so the attention weights are uniform over the
 * valid keys whatever the weights are, and the result is the mean of the
 * first 2 (and 6) values: [[2, 3, 4, 5]] and [[10, 11, 12, 13]], as in
 * the book. The program owns all memory: one params block, one scratch
 * block, the inputs and the outputs; libattnrt allocates, initializes,
 * saves and loads; the object file computes.
 */
#include "additive_attention.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_IN ADDITIVE_ATTENTION_FORWARD_N_INPUTS
#define N_OUT ADDITIVE_ATTENTION_FORWARD_N_OUTPUTS

static const attnrt_tensor_info *const ins = additive_attention_forward_inputs;
static const attnrt_tensor_info *const outs = additive_attention_forward_outputs;

static size_t numel(const attnrt_tensor_info *t)
{
	size_t n = 1;
	for (int i = 0; i < t->rank; i++)
		n *= (size_t)t->dims[i];
	return n;
}

/* The book's inputs: queries (any values; here a smooth pattern), keys
 * all ones (B, 10, 2), values arange(40) as (10, 4) for each batch, and
 * valid lengths [2, 6]. Returns false if the model was compiled for
 * other shapes. */
static bool fill_inputs(void *in[N_IN])
{
	static const int64_t want[4][3] = {{2, 1, 20},
					   {2, 10, 2},
					   {2, 10, 4},
					   {2}};
	if (N_IN != 4)
		return false;
	for (int i = 0; i < N_IN; i++)
		if (memcmp(ins[i].dims, want[i],
			   sizeof(int64_t) * (size_t)ins[i].rank) != 0)
			return false;
	float *queries = in[0], *keys = in[1], *values = in[2];
	int32_t *valid = in[3];
	for (size_t i = 0; i < numel(&ins[0]); i++)
		queries[i] = (float)sin(0.7 * (double)i);
	for (size_t i = 0; i < numel(&ins[1]); i++)
		keys[i] = 1;
	for (size_t i = 0; i < numel(&ins[2]); i++)
		values[i] = (float)(i % 40);
	valid[0] = 2;
	valid[1] = 6;
	return true;
}

/* Prints an f32 tensor one row (of its last dim) a line. */
static void print_tensor(const attnrt_tensor_info *t, const float *data)
{
	int64_t cols = t->rank ? t->dims[t->rank - 1] : 1;
	printf("%s f32[", t->name ? t->name : "output");
	for (int i = 0; i < t->rank; i++)
		printf("%s%lld", i ? ", " : "", (long long)t->dims[i]);
	printf("]\n");
	for (size_t i = 0; i < numel(t); i++)
		printf(" %8.4f%s", data[i], (i + 1) % (size_t)cols ? "" : "\n");
}

/* Initializes (and saves) or loads the parameters, as the flags say. */
static bool prepare_params(int argc, char **argv, void *params)
{
	char err[512] = "";
	int rc = ATTNRT_OK;
	if (argc == 3 && strcmp(argv[1], "--load") == 0) {
		rc = attnrt_checkpoint_load(NULL, argv[2],
					    additive_attention_params,
					    ADDITIVE_ATTENTION_N_PARAMS, params,
					    err, sizeof err);
	} else if (argc == 1 || (argc == 3 && !strcmp(argv[1], "--save"))) {
		rc = attnrt_params_init(additive_attention_params,
					ADDITIVE_ATTENTION_N_PARAMS, params, 0);
		attnrt_meta meta = {"format", "pt"};
		if (rc == ATTNRT_OK && argc == 3)
			rc = attnrt_checkpoint_save(NULL, argv[2],
						    additive_attention_params,
						    ADDITIVE_ATTENTION_N_PARAMS,
						    params, &meta, 1, err,
						    sizeof err);
	} else {
		fprintf(stderr, "usage: %s [--save FILE | --load FILE]\n",
			argv[0]);
		return false;
	}
	if (rc != ATTNRT_OK)
		fprintf(stderr, "%s: %s\n", argv[0],
			*err ? err : attnrt_strerror(rc));
	return rc == ATTNRT_OK;
}

/* Runs forward once; prints the outputs. */
static bool run_forward(const char *prog, void *params, void *scratch,
			void *in[N_IN], void *out[N_OUT])
{
	attnrt_run run = {.seed = 0, .step = 0, .is_training = 0, .n_threads = 0};
	int rc = additive_attention_forward(&run, params, scratch,
					    (const void *const *)in, out);
	if (rc != ATTNRT_OK) {
		fprintf(stderr, "%s: forward failed: %s (node %d)\n", prog,
			attnrt_strerror(rc), rc >> 8);
		return false;
	}
	for (int i = 0; i < N_OUT; i++)
		if (outs[i].dtype == ATTNRT_F32)
			print_tensor(&outs[i], out[i]);
	return true;
}

int main(int argc, char **argv)
{
	void *params = attnrt_alloc(NULL, ADDITIVE_ATTENTION_PARAMS_SIZE);
	void *scratch = attnrt_alloc(NULL,
				     ADDITIVE_ATTENTION_FORWARD_SCRATCH_SIZE);
	void *in[N_IN], *out[N_OUT];
	bool ok = params && scratch;
	for (int i = 0; i < N_IN; i++)
		ok &= (in[i] = attnrt_alloc(NULL, numel(&ins[i]) * 4)) != NULL;
	for (int i = 0; i < N_OUT; i++)
		ok &= (out[i] = attnrt_alloc(NULL, numel(&outs[i]) * 4)) != NULL;
	if (!ok)
		fprintf(stderr, "%s: out of memory\n", argv[0]);
	else if (!(ok = fill_inputs(in)))
		fprintf(stderr, "%s: the model was compiled for other shapes\n",
			argv[0]);
	ok = ok && prepare_params(argc, argv, params) &&
	     run_forward(argv[0], params, scratch, in, out);
	for (int i = 0; i < N_IN; i++)
		attnrt_free(NULL, in[i]);
	for (int i = 0; i < N_OUT; i++)
		attnrt_free(NULL, out[i]);
	attnrt_free(NULL, scratch);
	attnrt_free(NULL, params);
	return ok ? 0 : 1;
}
