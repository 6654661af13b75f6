/*
 * io_files.c - --inputs FILE and --outputs FILE: running any entry point
 * (under --interp or --jit) on named tensors of a safetensors file
 * instead of its example, and writing its named outputs back, so that a
 * model can be run on a user's data and its results read by PyTorch
 * (`safetensors.torch.load_file`) or any other tool. --inputs may as
 * well be NumPy's .npz (the same names) or, for an entry of one input,
 * an .npy (attnrt_tensors_read).
 *
 * The inputs must be exactly the entry's: each by name, its rank the
 * input's, its dtype one that converts without loss (drv_st_convert),
 * its dims fitting the input's type (static dims equal, symbols bound
 * from them, consistently across the inputs). Anything else is an
 * error that names the tensor.
 */
#include "driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DRV_INPUTS_MAX_BYTES (16ULL << 30) /* as a data file's */

/* The entry's input names, "a, b, c", into buf. */
static void input_list(const ir_func *f, char *buf, size_t size)
{
	size_t at = 0;
	char nb[32];
	buf[0] = 0;
	for (uint32_t i = 0; i < f->n_inputs && at < size; i++)
		at += (size_t)snprintf(buf + at, size - at, "%s%s",
				       i ? ", " : "",
				       drv_io_name(f->input_names, i, "in", nb,
						   sizeof nb));
}

/* Every tensor of the file is an input of f. */
static bool check_extra(ir_ctx *ctx, const ir_func *f, const char *path,
			const attnrt_st_file *file)
{
	for (size_t k = 0; !drv_st_is_npy(file) && k < attnrt_st_count(file);
	     k++) {
		const char *name = attnrt_st_at(file, k)->name;
		char nb[32];
		uint32_t i = 0;
		while (i < f->n_inputs &&
		       strcmp(drv_io_name(f->input_names, i, "in", nb, sizeof nb),
			      name) != 0)
			i++;
		if (i == f->n_inputs) {
			char names[512];
			input_list(f, names, sizeof names);
			ir_error(ctx, (ir_loc){0},
				 "--inputs: %s: tensor '%s' is "
				 "not an input of '%s' (it takes: %s)",
				 path, name, f->name,
				 f->n_inputs ? names : "nothing");
			return false;
		}
	}
	return true;
}

/* Input i of f from its tensor in the file. */
static bool read_input(ir_ctx *ctx, const ir_func *f, uint32_t i,
		       const char *path, const attnrt_st_file *file,
		       interp_tensor *t)
{
	const ir_type *ty = &f->g.nodes[f->inputs[i]].type;
	char nb[32];
	const char *name = drv_io_name(f->input_names, i, "in", nb, sizeof nb);
	attnrt_st_tensor one;
	const attnrt_st_tensor *st = drv_st_input(file, name, &one);
	if (!st) {
		ir_error(ctx, (ir_loc){0},
			 "--inputs: %s has no tensor '%s' for "
			 "the input of '%s'",
			 path, name, f->name);
		return false;
	}
	if (st->rank != ty->rank) {
		ir_error(ctx, (ir_loc){0},
			 "--inputs: %s: tensor '%s' has rank %d, "
			 "the input of '%s' rank %d",
			 path, st->name, st->rank, f->name, ty->rank);
		return false;
	}
	if (!interp_tensor_alloc(ctx, t, ty->dtype, st->rank, st->dims)) {
		ir_error(ctx, (ir_loc){0},
			 "--inputs: %s: tensor '%s': out of "
			 "memory",
			 path, st->name);
		return false;
	}
	return drv_st_convert(ctx, path, st, ty->dtype, t->data);
}

bool drv_inputs_read(ir_ctx *ctx, const ir_func *f, const char *path,
		     interp_tensor *in)
{
	char err[512];
	attnrt_st_file *file;
	memset(in, 0, f->n_inputs * sizeof *in);
	if (attnrt_tensors_read(NULL, path, DRV_INPUTS_MAX_BYTES, &file, err,
				sizeof err) != ATTNRT_OK) {
		ir_error(ctx, (ir_loc){0}, "--inputs: %s", err);
		return false;
	}
	bool ok = drv_npy_fits(ctx, "--inputs", path, file, f) &&
		  check_extra(ctx, f, path, file);
	for (uint32_t i = 0; ok && i < f->n_inputs; i++)
		ok = read_input(ctx, f, i, path, file, &in[i]);
	attnrt_st_free(file);
	for (uint32_t i = 0; !ok && i < f->n_inputs; i++)
		interp_tensor_fini(ctx, &in[i]);
	return ok;
}

bool drv_inputs_bind(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		     const interp_tensor *in, const drv_options *o,
		     drv_options *out)
{
	*out = *o;
	int64_t *values = ir_alloc(ctx, (m->n_syms + 1) * sizeof *values);
	if (!values)
		return false;
	if (!interp_bind_syms(ctx, m, f, in, values)) {
		ir_note(ctx, (ir_loc){0}, "the shapes are those of --inputs %s",
			o->inputs);
		ir_free(ctx, values);
		return false;
	}
	bool ok = drv_syms_agree(ctx, m, o, "the --inputs", values);
	for (uint32_t s = 0; ok && s < m->n_syms; s++)
		if (values[s] && !m->syms[s].n_factors) /* products follow */
			ok = drv_options_bind(ctx, out, "--inputs",
					      m->syms[s].name, values[s]);
	ir_free(ctx, values);
	return ok;
}

bool drv_outputs_write(ir_ctx *ctx, const ir_module *m, const ir_func *f,
		       const interp_tensor *outs, const char *path)
{
	char err[512];
	attnrt_st_tensor *ts = ir_alloc(ctx, f->n_outputs * sizeof *ts);
	char(*unnamed)[32] = ir_alloc(ctx, f->n_outputs * sizeof *unnamed);
	bool ok = ts && unnamed;
	if (!ok) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		goto out;
	}
	for (uint32_t i = 0; i < f->n_outputs; i++) {
		const interp_tensor *t = &outs[i];
		memset(&ts[i], 0, sizeof ts[i]);
		ts[i].name = drv_io_name(f->output_names, i, "out", unnamed[i],
					 sizeof unnamed[i]);
		ts[i].dtype = t->dtype == IR_I32   ? "I32"
			      : t->dtype == IR_F64 ? "F64"
						   : "F32";
		ts[i].rank = t->rank;
		memcpy(ts[i].dims, t->dims, (size_t)t->rank * sizeof *t->dims);
		ts[i].data = t->data;
		ts[i].bytes = (size_t)interp_tensor_numel(t) *
			      (t->dtype == IR_F64 ? 8 : 4);
	}
	attnrt_meta meta[] = {{"model", m->name}, {"entry", f->name}};
	ok = attnrt_st_write(NULL, path, ts, f->n_outputs, meta, 2, err,
			     sizeof err) == ATTNRT_OK;
	if (!ok)
		ir_error(ctx, (ir_loc){0}, "--outputs: %s", err);
	else
		printf("wrote %u output%s of %s to %s\n", f->n_outputs,
		       f->n_outputs == 1 ? "" : "s", f->name, path);
out:
	ir_free(ctx, ts);
	ir_free(ctx, unnamed);
	return ok;
}
