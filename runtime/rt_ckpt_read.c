/*
 * rt_ckpt_read.c - reading a safetensors checkpoint into a params block.
 *
 * The file is untrusted: it may be truncated, corrupt, from another model
 * or from another tool. rt_st_read.c checks the container (the header's
 * length, its JSON, each entry's form, the data offsets tiling the data,
 * each name once); then, here:
 *   5. the names against the model's table (unknown, missing);
 *   6. each tensor's dtype and shape against its parameter;
 *   7. each value finite: training never leaves a NaN or an infinity in
 *      a parameter (it stops first), so one is a corrupt file, and
 *      loading it would make every result NaN without a word.
 * Only then are bytes copied, so params never holds half a checkpoint.
 */
#include "rt_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* "[32, 16]" from a list of dims, into buf. */
static void dims_format(char *buf, size_t size, const int64_t *dims, size_t rank)
{
	size_t at = (size_t)snprintf(buf, size, "[");
	for (size_t i = 0; i < rank && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%lld",
				       i ? ", " : "", (long long)dims[i]);
	if (at < size)
		snprintf(buf + at, size - at, "]");
}

/* ---- stage 5-6: against the model ------------------------------------------ */

/* Walks the file's tensors (sorted by name) and the table sorted by
 * name, pairing them into match (by table index); fails on a name
 * unknown to the model or missing from the file. */
static int match_names(const attnrt_st_file *f, const char *skip,
		       const attnrt_param_info *table,
		       const attnrt_param_info **sorted, size_t n_params,
		       const attnrt_st_tensor **match, char *err,
		       size_t err_size)
{
	size_t n = attnrt_st_count(f), i = 0, p = 0, n_skipped = 0;
	for (size_t k = 0; skip && k < n; k++)
		n_skipped += strncmp(attnrt_st_at(f, k)->name, skip,
				     strlen(skip)) == 0;
	while (i < n || p < n_params) {
		const attnrt_st_tensor *t = attnrt_st_at(f, i);
		if (i < n && skip && strncmp(t->name, skip, strlen(skip)) == 0) {
			i++; /* not the model's */
			continue;
		}
		int c = i == n          ? 1
			: p == n_params ? -1
					: strcmp(t->name, sorted[p]->name);
		if (c == 0) {
			match[sorted[p] - table] = t;
			i++;
			p++;
			continue;
		}
		if (c > 0) {
			/* the training run's state is not counted as
			 * parameters: it is said apart */
			char state[96] = "";
			if (n_skipped)
				snprintf(state, sizeof state,
					 " besides %zu of a training run's "
					 "state",
					 n_skipped);
			return rt_fail(err, err_size, ATTNRT_ERR_MISMATCH,
				       "%s: the model's parameter is missing "
				       "from the checkpoint (%zu tensors in "
				       "the file%s, %zu parameters in the "
				       "model)",
				       sorted[p]->name, n - n_skipped, state,
				       n_params);
		}
		return rt_fail(err, err_size, ATTNRT_ERR_MISMATCH,
			       "%s: the checkpoint has a tensor the model "
			       "does not",
			       t->name);
	}
	return ATTNRT_OK;
}

/* Stage 7: no NaN or infinity among t's F32 values (read one by one:
 * the data need not be aligned). */
static int check_finite(const attnrt_st_tensor *t, const attnrt_param_info *p,
			char *err, size_t err_size)
{
	const char *data = t->data;
	for (size_t i = 0; i < t->bytes / 4; i++) {
		float v;
		memcpy(&v, data + 4 * i, 4);
		if (!isfinite(v))
			return rt_fail(err, err_size, ATTNRT_ERR_FORMAT,
				       "%s: element %zu is %s; a trained "
				       "parameter is finite, so the file is "
				       "corrupt",
				       p->name, i,
				       isnan(v) ? "nan"
				       : v > 0  ? "inf"
						: "-inf");
	}
	return ATTNRT_OK;
}

/* dtype F32, the parameter's shape and finite values. */
static int check_against_param(const attnrt_st_tensor *t,
			       const attnrt_param_info *p, char *err,
			       size_t err_size)
{
	if (strcmp(t->dtype, "F32") != 0)
		return rt_fail(err, err_size, ATTNRT_ERR_MISMATCH,
			       "%s: dtype %s in file, model wants F32", p->name,
			       t->dtype);
	bool is_same = t->rank == p->rank;
	for (int i = 0; is_same && i < p->rank; i++)
		is_same = t->dims[i] == p->dims[i];
	if (is_same)
		return check_finite(t, p, err, err_size);
	char got[160], exp[160];
	dims_format(got, sizeof got, t->dims, (size_t)t->rank);
	dims_format(exp, sizeof exp, p->dims, (size_t)p->rank);
	return rt_fail(err, err_size, ATTNRT_ERR_MISMATCH,
		       "%s: shape %s in file, model wants %s", p->name, got,
		       exp);
}

/* Stages 5-6 on a parsed file, then the copy into params. */
static int load_into(const attnrt_allocator *al, const attnrt_st_file *f,
		     const char *skip, const attnrt_param_info *table,
		     size_t n_params, void *params, char *err, size_t err_size)
{
	const attnrt_param_info **sorted;
	const attnrt_st_tensor **match = rt_mem_alloc(al,
						      n_params * sizeof *match);
	if (!match)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	int code = rt_params_sort(al, table, n_params, &sorted, err, err_size);
	if (code == ATTNRT_OK)
		code = match_names(f, skip, table, sorted, n_params, match, err,
				   err_size);
	rt_mem_free(al, sorted);
	for (size_t p = 0; code == ATTNRT_OK && p < n_params; p++)
		code = check_against_param(match[p], &table[p], err, err_size);
	for (size_t p = 0; code == ATTNRT_OK && p < n_params; p++)
		memcpy((char *)params + table[p].offset, match[p]->data,
		       match[p]->bytes);
	rt_mem_free(al, match);
	return code;
}

/* ---- the public face ---------------------------------------------------------- */

/* The caller's table, before anything is read: valid entries, unique
 * names. */
static int check_table(const attnrt_allocator *al,
		       const attnrt_param_info *table, size_t n_params,
		       char *err, size_t err_size)
{
	int code = rt_params_check(table, n_params, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	const attnrt_param_info **sorted;
	code = rt_params_sort(al, table, n_params, &sorted, err, err_size);
	rt_mem_free(al, sorted);
	return code;
}

int attnrt_checkpoint_parse(const attnrt_allocator *al, const void *data,
			    size_t len, const attnrt_param_info *table,
			    size_t n_params, void *params, char *err,
			    size_t err_size)
{
	if ((len && !data) || (n_params && !params))
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "no data or no params block");
	int code = check_table(al, table, n_params, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	attnrt_st_file *f;
	code = attnrt_st_parse(al, data, len, &f, err, err_size);
	if (code == ATTNRT_OK)
		code = load_into(al, f, ATTNRT_STATE_PREFIX, table, n_params,
				 params, err, err_size);
	attnrt_st_free(f);
	return code;
}

/* The largest file a checkpoint of the table can be: the header, and
 * every tensor as if it were F64. */
static uint64_t max_file_bytes(const attnrt_param_info *table, size_t n_params)
{
	uint64_t max_data = 0;
	for (size_t p = 0; p < n_params; p++) {
		uint64_t bytes;
		if (__builtin_mul_overflow((uint64_t)rt_param_numel(&table[p]),
					   8u, &bytes) ||
		    __builtin_add_overflow(max_data, bytes, &max_data) ||
		    max_data > UINT64_MAX / 4)
			max_data = UINT64_MAX / 4;
	}
	return 8 + ATTNRT_ST_MAX_HEADER + max_data;
}

int attnrt_checkpoint_load(const attnrt_allocator *al, const char *path,
			   const attnrt_param_info *table, size_t n_params,
			   void *params, char *err, size_t err_size)
{
	if (!path)
		return rt_fail(err, err_size, ATTNRT_ERR_ARG, "no path");
	int code = check_table(al, table, n_params, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	attnrt_st_file *f;
	code = attnrt_st_read(al, path, max_file_bytes(table, n_params), &f,
			      err, err_size);
	if (code == ATTNRT_OK) {
		code = load_into(al, f, ATTNRT_STATE_PREFIX, table, n_params,
				 params, err, err_size);
		if (code != ATTNRT_OK && code != ATTNRT_ERR_NOMEM)
			rt_prefix_path(path, err, err_size);
	}
	attnrt_st_free(f);
	return code;
}

int attnrt_checkpoint_take(const attnrt_allocator *al, const attnrt_st_file *f,
			   const char *skip, const attnrt_param_info *table,
			   size_t n_params, void *params, char *err,
			   size_t err_size)
{
	if (!f || (n_params && !params))
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "no file or no params block");
	int code = check_table(al, table, n_params, err, err_size);
	if (code != ATTNRT_OK)
		return code;
	return load_into(al, f, skip, table, n_params, params, err, err_size);
}
