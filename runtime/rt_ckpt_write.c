/*
 * rt_ckpt_write.c - writing a params block as a safetensors checkpoint:
 * one F32 tensor per parameter of the table, in table order (the params
 * block's alignment gaps are not written), through the atomic writer of
 * rt_st_write.c.
 */
#include "rt_internal.h"

#include <string.h>

int attnrt_checkpoint_save(const attnrt_allocator *al, const char *path,
			   const attnrt_param_info *table, size_t n_params,
			   const void *params, const attnrt_meta *meta,
			   size_t n_meta, char *err, size_t err_size)
{
	if (!path || (n_params && !params) || (n_meta && !meta))
		return rt_fail(err, err_size, ATTNRT_ERR_ARG,
			       "no path, params or metadata");
	const attnrt_param_info **sorted = NULL;
	int code = rt_params_check(table, n_params, err, err_size);
	if (code == ATTNRT_OK) /* names each once, said as a table's fault */
		code = rt_params_sort(al, table, n_params, &sorted, err,
				      err_size);
	rt_mem_free(al, sorted);
	if (code != ATTNRT_OK)
		return code;
	attnrt_st_tensor *ts = rt_mem_alloc(al, n_params * sizeof *ts);
	if (!ts)
		return rt_fail(err, err_size, ATTNRT_ERR_NOMEM, "out of memory");
	for (size_t p = 0; p < n_params; p++) {
		memset(&ts[p], 0, sizeof ts[p]);
		ts[p].name = table[p].name;
		ts[p].dtype = "F32";
		ts[p].rank = table[p].rank;
		memcpy(ts[p].dims, table[p].dims, sizeof table[p].dims);
		ts[p].data = (const char *)params + table[p].offset;
		ts[p].bytes = (size_t)rt_param_numel(&table[p]) * 4;
	}
	code = attnrt_st_write(al, path, ts, n_params, meta, n_meta, err,
			       err_size);
	rt_mem_free(al, ts);
	return code;
}
