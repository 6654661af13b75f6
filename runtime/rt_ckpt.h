/*
 * rt_ckpt.h - what attnc (not a program) asks of a checkpoint besides
 * loading it: the shapes of its tensors, read from the safetensors
 * header alone, so that `attnc -c --load FILE` compiles a model for the
 * sizes its weights have (the vocabularies of a trained translator).
 */
#ifndef ATTNC_RT_CKPT_H
#define ATTNC_RT_CKPT_H

#include "attnrt.h"

/* For each of the n names, the rank and dims of the tensor of that name
 * in the safetensors file at path (ranks[i] = -1 if the file has none,
 * or its rank is above 6). Only the 8-byte length and the JSON header
 * are read and checked (as attnrt_checkpoint_load's stages 1 and 2, and
 * each shape a list of non-negative integers). Returns ATTNRT_OK, or
 * ATTNRT_ERR_IO, _FORMAT or _NOMEM with a message in err (err_size
 * bytes; err may be NULL). */
int rt_ckpt_shapes(const attnrt_allocator *al, const char *path,
		   const char *const *names, size_t n, int *ranks,
		   int64_t (*dims)[6], char *err, size_t err_size);

#endif
