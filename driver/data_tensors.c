/*
 * data_tensors.c - `data = tensors(file = "PATH", valid = F)`: a model's
 * own training data as a safetensors file, every input of the loss entry
 * the tensor of the same name, axis 0 the sample axis (the layout
 * PyTorch's `safetensors.torch.save_file({"tokens": x, ...})` writes),
 * or NumPy's .npz of the same names (np.savez), or an .npy when the loss
 * takes one input (attnrt_tensors_read tells them by their first bytes).
 *
 * The file is read whole (at most DRV_TENSORS_MAX_BYTES; its head is
 * checked first, rt_read_file) and checked before anything compiles: every input has its tensor, every tensor the
 * same number of samples, a dtype that converts to the input's without
 * loss (f32 from F32, or F64 rounded, a finite F64 beyond float32 an
 * error naming its element; i32 from I32, I64, I16, I8, U8 or BOOL, an
 * I64 value outside i32 an error naming its element), and a
 * sample shape the input's type fits (samples.c binds its dims).
 * Tensors the loss does not take are listed and left alone.
 */
#include "driver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DRV_TENSORS_MAX_BYTES (16ULL << 30) /* a data file's size cap */

bool drv_tensors_is_source(const ir_setting *data)
{
	return data && data->value.kind != IR_VAL_NUM &&
	       strcmp(data->value.str, "tensors") == 0;
}

bool drv_tensors_check(ir_ctx *ctx, const ir_setting *data)
{
	const ir_value *v = &data->value;
	for (uint32_t i = 0; v->kind == IR_VAL_CALL && i < v->n_args; i++) {
		const ir_setting *a = &v->args[i];
		if (strcmp(a->key, "file") == 0 && a->value.kind == IR_VAL_STR)
			continue;
		if (strcmp(a->key, "valid") == 0 && a->value.kind == IR_VAL_NUM &&
		    a->value.num >= 0 && a->value.num < 1)
			continue;
		if (strcmp(a->key, "file") && strcmp(a->key, "valid"))
			ir_error(ctx, a->loc,
				 "tensors has no setting '%s' (file, "
				 "valid)",
				 a->key);
		else
			ir_error(ctx, a->loc, "tensors: %s must be %s", a->key,
				 strcmp(a->key, "file") ? "a number in [0, 1)"
							: "a string");
		return false;
	}
	return true;
}

/* ---- conversion -------------------------------------------------------------------- */

/* Element k of t (a dtype that converts to want) into out. */
static bool convert(const attnrt_st_tensor *t, ir_dtype want, size_t k,
		    void *out)
{
	const unsigned char *p = t->data;
	const char *d = t->dtype;
	if (want == IR_F32 && strcmp(d, "F32") == 0) {
		memcpy(out, p + 4 * k, 4);
	} else if (want == IR_F32 && strcmp(d, "F64") == 0) {
		double v;
		memcpy(&v, p + 8 * k, 8);
		*(float *)out = (float)v;
		/* Rounding, not overflow: 1e300 is no float32 (inf and nan
		 * stay what they are). */
		if (isfinite(v) && !isfinite(*(float *)out))
			return false;
	} else if (strcmp(d, "I32") == 0) {
		memcpy(out, p + 4 * k, 4);
	} else if (strcmp(d, "I64") == 0) {
		int64_t v;
		memcpy(&v, p + 8 * k, 8);
		if (v < INT32_MIN || v > INT32_MAX)
			return false;
		*(int32_t *)out = (int32_t)v;
	} else if (strcmp(d, "I16") == 0) {
		int16_t v;
		memcpy(&v, p + 2 * k, 2);
		*(int32_t *)out = v;
	} else {
		*(int32_t *)out = strcmp(d, "I8") == 0 ? (int8_t)p[k] : p[k];
	}
	return true;
}

static bool dtype_fits(const char *d, ir_dtype want)
{
	static const char *const ints[] = {"I32", "I64", "I16",
					   "I8",  "U8",  "BOOL"};
	if (want == IR_F32)
		return strcmp(d, "F32") == 0 || strcmp(d, "F64") == 0;
	for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
		if (strcmp(d, ints[i]) == 0)
			return true;
	return false;
}

bool drv_st_convert(ir_ctx *ctx, const char *path, const attnrt_st_tensor *t,
		    ir_dtype want, void *out)
{
	if (!dtype_fits(t->dtype, want)) {
		ir_error(ctx, (ir_loc){0},
			 "%s: tensor '%s' is %s, but the input "
			 "'%s' is %s (%s)",
			 path, t->name, t->dtype, t->name, drv_dtype_name(want),
			 want == IR_F32 ? "F32 or F64"
					: "I32, I64, I16, I8, U8 or BOOL");
		return false;
	}
	size_t n = 1;
	for (int d = 0; d < t->rank; d++)
		n *= (size_t)t->dims[d];
	for (size_t k = 0; k < n; k++)
		if (!convert(t, want, k, (char *)out + 4 * k)) {
			ir_error(ctx, (ir_loc){0},
				 "%s: tensor '%s': element %zu "
				 "holds a value outside %s",
				 path, t->name, k,
				 want == IR_F32 ? "float32" : "i32");
			return false;
		}
	return true;
}

bool drv_st_is_npy(const attnrt_st_file *file)
{
	return attnrt_st_count(file) == 1 && !attnrt_st_at(file, 0)->name[0];
}

bool drv_npy_fits(ir_ctx *ctx, const char *what, const char *path,
		  const attnrt_st_file *file, const ir_func *f)
{
	if (!drv_st_is_npy(file) || f->n_inputs == 1)
		return true;
	ir_error(ctx, (ir_loc){0},
		 "%s: %s: an .npy holds one array, but '%s' "
		 "takes %u inputs: save them by name in an .npz "
		 "(np.savez(path, name=array, ...))",
		 what, path, f->name, f->n_inputs);
	return false;
}

const attnrt_st_tensor *drv_st_input(const attnrt_st_file *file,
				     const char *name, attnrt_st_tensor *one)
{
	if (!drv_st_is_npy(file))
		return attnrt_st_find(file, name);
	*one = *attnrt_st_at(file, 0);
	one->name = name;
	return one;
}

/* Field i of s from tensor t, fed to the input of type ty. */
static bool read_field(ir_ctx *ctx, const char *path, const attnrt_st_tensor *t,
		       const ir_type *ty, drv_samples *s, uint32_t i)
{
	if (t->rank > IR_MAX_RANK) {
		ir_error(ctx, (ir_loc){0},
			 "%s: tensor '%s' has rank %d, more than "
			 "%d",
			 path, t->name, t->rank, IR_MAX_RANK);
		return false;
	}
	if (!drv_samples_alloc_field(s, i, t->name, ty->dtype, t->rank - 1,
				     t->dims + 1)) {
		ir_error(ctx, (ir_loc){0}, "%s: tensor '%s': out of memory",
			 path, t->name);
		return false;
	}
	return drv_st_convert(ctx, path, t, ty->dtype, s->fields[i].data);
}

/* The file has no tensor for input name of f: says which it has. */
static void report_missing(ir_ctx *ctx, const char *path,
			   const attnrt_st_file *file, const char *name,
			   const ir_func *f)
{
	char names[512] = "";
	for (size_t k = 0, at = 0;
	     k < attnrt_st_count(file) && at < sizeof names; k++)
		at += (size_t)snprintf(names + at, sizeof names - at, "%s%s",
				       k ? ", " : "",
				       attnrt_st_at(file, k)->name);
	ir_error(ctx, (ir_loc){0},
		 "%s: no tensor '%s' for the input of '%s' "
		 "(the file has: %s)",
		 path, name, f->name, names[0] ? names : "no tensors");
}

/* The tensor each input of f takes, all with the same samples. */
static bool find_tensors(ir_ctx *ctx, const char *path,
			 const attnrt_st_file *file, const ir_func *f,
			 const attnrt_st_tensor **ts, attnrt_st_tensor *one,
			 char *nb, size_t nb_size)
{
	if (!drv_npy_fits(ctx, "data", path, file, f))
		return false;
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		const char *name = drv_io_name(f->input_names, i, "in", nb,
					       nb_size);
		ts[i] = drv_st_input(file, name, one);
		if (!ts[i]) {
			report_missing(ctx, path, file, name, f);
			return false;
		}
		if (ts[i]->rank < 1) {
			ir_error(ctx, (ir_loc){0},
				 "%s: tensor '%s' is a scalar; its "
				 "axis 0 should count the samples",
				 path, ts[i]->name);
			return false;
		}
		if (ts[i]->dims[0] != ts[0]->dims[0]) {
			ir_error(ctx, (ir_loc){0},
				 "%s: tensor '%s' has %lld samples "
				 "(axis 0), '%s' has %lld: every input needs one "
				 "per sample",
				 path, ts[i]->name, (long long)ts[i]->dims[0],
				 ts[0]->name, (long long)ts[0]->dims[0]);
			return false;
		}
	}
	if (f->n_inputs && ts[0]->dims[0] > 0)
		return true;
	ir_error(ctx, (ir_loc){0}, "%s: no samples (axis 0 of '%s' is 0)", path,
		 f->n_inputs ? ts[0]->name : "?");
	return false;
}

/* Reads the samples of f's inputs from the file at path. */
static drv_samples *read_samples(ir_ctx *ctx, ir_loc at, const char *path,
				 const ir_func *f)
{
	char err[512];
	attnrt_st_file *file;
	if (attnrt_tensors_read(NULL, path, DRV_TENSORS_MAX_BYTES, &file, err,
				sizeof err) != ATTNRT_OK) {
		ir_error(ctx, at, "%s", err);
		return NULL;
	}
	const attnrt_st_tensor *ts[DRV_MAX_FIELDS];
	attnrt_st_tensor one;
	char nb[32];
	drv_samples *s = NULL;
	bool ok = drv_check_inputs(ctx, f, "--train", false) &&
		  find_tensors(ctx, path, file, f, ts, &one, nb, sizeof nb);
	if (ok &&
	    !(s = drv_samples_create(f->n_inputs, (size_t)ts[0]->dims[0]))) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		ok = false;
	}
	for (uint32_t i = 0; ok && i < f->n_inputs; i++)
		ok = read_field(ctx, path, ts[i],
				&f->g.nodes[f->inputs[i]].type, s, i);
	attnrt_st_free(file);
	if (ok)
		return s;
	drv_samples_destroy(s);
	return NULL;
}

/* ---- what was read ------------------------------------------------------------------ */

static void print_fields(const char *what, const char *path,
			 const drv_samples *s)
{
	fprintf(stderr, "%s: %zu samples from %s, each", what, s->n, path);
	for (uint32_t i = 0; i < s->n_fields; i++) {
		char dims[160];
		const drv_field *fd = &s->fields[i];
		drv_dims_format(fd->dims, fd->rank, dims, sizeof dims);
		fprintf(stderr, "%s %s %s%s", i ? "," : "", fd->name,
			drv_dtype_name(fd->dtype), dims);
	}
	fprintf(stderr, "\n");
}

/* The validation set: --valid-data, or the last share of the samples. */
static bool read_valid(ir_ctx *ctx, const ir_setting *data, const ir_func *f,
		       const drv_options *o, drv_samples *train,
		       drv_samples **valid)
{
	const ir_value *share = ir_setting_arg(data, "valid");
	*valid = NULL;
	if (o->valid_data) {
		*valid = read_samples(ctx, (ir_loc){0}, o->valid_data, f);
		if (*valid)
			print_fields("valid", o->valid_data, *valid);
		return *valid != NULL;
	}
	if (!share || share->num <= 0)
		return true;
	size_t n = (size_t)floor(share->num * (double)train->n + 0.5);
	if (n == 0 || n >= train->n) {
		ir_error(ctx, data->loc,
			 "tensors: valid = %g of %zu samples holds "
			 "%zu; both sets need one at least",
			 share->num, train->n, n);
		return false;
	}
	*valid = drv_samples_split(train, n);
	if (!*valid) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	fprintf(stderr,
		"valid: the last %zu samples (valid = %g), %zu left to train on\n",
		n, share->num, train->n);
	return true;
}

bool drv_tensors_load(ir_ctx *ctx, const ir_module *m,
		      const drv_train_config *tc, const drv_options *o,
		      drv_samples **train, drv_samples **valid)
{
	const ir_setting *data = tc->data;
	const ir_value *file = ir_setting_arg(data, "file");
	const ir_func *f = ir_module_find_func(m, tc->entry);
	char buf[4096];
	*train = *valid = NULL;
	if (!o->data && !file) {
		ir_error(ctx, data->loc,
			 "data = tensors() reads a safetensors "
			 "or NumPy .npz/.npy file: tensors(file = "
			 "\"train.safetensors\"), or --data FILE");
		return false;
	}
	const char *path = o->data ? o->data
				   : drv_model_path(o->model, file->str, buf,
						    sizeof buf);
	/* a file the train block names is reported at its data line */
	*train = read_samples(ctx, o->data ? (ir_loc){0} : data->loc, path, f);
	if (!*train)
		return false;
	print_fields("data", path, *train);
	return read_valid(ctx, data, f, o, *train, valid);
}
