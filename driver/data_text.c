/*
 * data_text.c - `data = text(steps = T, file = "PATH", valid = F,
 * stride = S)`: character-level language modelling on a text (--data
 * FILE, the setting's file, or the built-in stories of
 * data/text-default.txt).
 *
 * The text's distinct characters are the vocabulary (rt_text.h), whose
 * size binds the model's dim V. Its ids are cut into windows of T + 1
 * characters starting every S (T by default: each character once an
 * epoch); a window gives the loss entry's `tokens` (its first T ids) and
 * `targets` (its last T), both i32 (B, T). With valid = F the last F of
 * the text is held out, its windows the validation set. The vocabulary
 * goes into the checkpoint's metadata ("vocab"), so --load alone can
 * encode a prompt and decode what the model generates.
 */
#include "driver.h"

#include "rt_text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DRV_TEXT_MAX_BYTES (1ULL << 30) /* a text file's size cap */

bool drv_text_is_source(const ir_setting *data)
{
	return data && data->value.kind != IR_VAL_NUM &&
	       strcmp(data->value.str, "text") == 0;
}

static bool is_count(const ir_value *v)
{
	return v->kind == IR_VAL_NUM && v->num >= 1 && v->num < 1e9 &&
	       v->num == (double)(int64_t)v->num;
}

bool drv_text_check(ir_ctx *ctx, const ir_setting *data)
{
	const ir_value *v = &data->value;
	for (uint32_t i = 0; v->kind == IR_VAL_CALL && i < v->n_args; i++) {
		const ir_setting *a = &v->args[i];
		const char *k = a->key;
		bool ok = strcmp(k, "file") == 0 ? a->value.kind == IR_VAL_STR
			  : strcmp(k, "valid") == 0
				  ? a->value.kind == IR_VAL_NUM &&
					    a->value.num >= 0 && a->value.num < 1
			  : strcmp(k, "steps") == 0 || strcmp(k, "stride") == 0
				  ? is_count(&a->value)
				  : false;
		if (ok)
			continue;
		if (strcmp(k, "file") && strcmp(k, "valid") &&
		    strcmp(k, "steps") && strcmp(k, "stride"))
			ir_error(ctx, a->loc,
				 "text has no setting '%s' (steps, file, "
				 "valid, stride)",
				 k);
		else
			ir_error(ctx, a->loc, "text: %s must be %s", k,
				 strcmp(k, "file") == 0 ? "a string"
				 : strcmp(k, "valid") == 0
					 ? "a number in [0, 1)"
					 : "a positive integer");
		return false;
	}
	if (ir_setting_arg(data, "steps"))
		return true;
	ir_error(ctx, data->loc,
		 "text(...) needs the window's length: "
		 "text(steps = T)");
	return false;
}

/* ---- reading ---------------------------------------------------------------------- */

/* The whole file at path, NUL-terminated, into *out (malloc'd). A file
 * that cannot be read is reported as --data's, or, at `at`, as the file
 * the train block names. */
static bool read_text(ir_ctx *ctx, const drv_options *o, ir_loc at,
		      const char *path, char **out, size_t *len)
{
	struct stat st;
	/* Not blocking: open() of a FIFO no program writes to would wait
	 * for one forever; it is refused below as not a file. */
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
	if (fd >= 0 && !f) {
		int e = errno;
		close(fd);
		errno = e;
	}
	*out = NULL;
	if (!f || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > DRV_TEXT_MAX_BYTES) {
		int e = errno;
		ir_error(ctx, o->data ? (ir_loc){0} : at, "%s%s: %s",
			 o->data ? "--data: " : "", path,
			 !f ? strerror(e)
			 : !S_ISREG(st.st_mode)
				 ? "not a file"
				 : "larger than the 1 GiB a text may be");
		if (f)
			fclose(f);
		return false;
	}
	*out = malloc((size_t)st.st_size + 1);
	*len = *out ? fread(*out, 1, (size_t)st.st_size, f) : 0;
	fclose(f);
	if (!*out) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	(*out)[*len] = 0;
	return true;
}

/* Reads the text as Python's open(path).read() does, which is what a
 * PyTorch character model trains on: a leading UTF-8 byte order mark
 * dropped, and lines ended by CR LF or a lone CR ended by LF (so a file
 * saved on Windows gives the vocabulary and windows the same file with
 * LF gives). In place; says on stderr what it changed. */
static void normalize_lines(const char *name, char *text, size_t *len)
{
	size_t at = 0, out = 0, n_cr = 0;
	bool has_bom = *len >= 3 && !memcmp(text, "\xEF\xBB\xBF", 3);
	if (has_bom)
		at = 3;
	for (; at < *len; at++) {
		if (text[at] != '\r') {
			text[out++] = text[at];
			continue;
		}
		n_cr++;
		text[out++] = '\n';
		if (at + 1 < *len && text[at + 1] == '\n')
			at++;
	}
	text[out] = 0;
	*len = out;
	if (has_bom)
		fprintf(stderr, "data: %s: byte order mark dropped\n", name);
	if (n_cr)
		fprintf(stderr, "data: %s: %zu line%s ended by CR read as LF\n",
			name, n_cr, n_cr == 1 ? "" : "s");
}

/* Windows of ids[0..n): every stride, T + 1 ids a window. */
static drv_samples *windows(const int32_t *ids, size_t n, size_t T,
			    size_t stride)
{
	size_t count = n > T ? (n - T - 1) / stride + 1 : 0;
	int64_t dims[1] = {(int64_t)T};
	drv_samples *s = drv_samples_create(2, count);
	if (!s || !drv_samples_alloc_field(s, 0, "tokens", IR_I32, 1, dims) ||
	    !drv_samples_alloc_field(s, 1, "targets", IR_I32, 1, dims)) {
		drv_samples_destroy(s);
		return NULL;
	}
	s->items_per_sample = (double)T;
	int32_t *tok = (int32_t *)s->fields[0].data;
	int32_t *tgt = (int32_t *)s->fields[1].data;
	for (size_t w = 0; w < count; w++) {
		memcpy(tok + w * T, ids + w * stride, T * sizeof *ids);
		memcpy(tgt + w * T, ids + w * stride + 1, T * sizeof *ids);
	}
	return s;
}

/* The ids of the text, cut into the training and validation windows. */
static bool cut(ir_ctx *ctx, const ir_setting *data, const int32_t *ids,
		size_t n, drv_data *d)
{
	size_t T = (size_t)ir_setting_arg(data, "steps")->num;
	const ir_value *st = ir_setting_arg(data, "stride"),
		       *va = ir_setting_arg(data, "valid");
	size_t stride = st ? (size_t)st->num : T;
	size_t n_valid = va ? (size_t)(va->num * (double)n) : 0;
	d->train = windows(ids, n - n_valid, T, stride);
	d->valid = n_valid ? windows(ids + n - n_valid, n_valid, T, stride)
			   : NULL;
	if (!d->train || (n_valid && !d->valid)) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	if (!d->train->n || (n_valid && !d->valid->n)) {
		ir_error(ctx, data->loc,
			 "text: %zu characters%s hold no window of "
			 "steps + 1 = %zu",
			 !d->train->n ? n - n_valid : n_valid,
			 !d->train->n ? "" : " held out for validation", T + 1);
		return false;
	}
	return true;
}

static bool encode(ir_ctx *ctx, const char *name, const char *text, size_t len,
		   const ir_setting *data, drv_data *d)
{
	char err[256];
	int32_t *ids = malloc((len + 1) * sizeof *ids);
	size_t n = 0;
	if (!ids) {
		ir_error(ctx, (ir_loc){0}, "out of memory");
		return false;
	}
	bool ok = rt_text_vocab_build(NULL, text, len, &d->vocab, err,
				      sizeof err) == ATTNRT_OK &&
		  rt_text_encode(d->vocab, text, len, ids, &n, err,
				 sizeof err) == ATTNRT_OK;
	if (!ok)
		ir_error(ctx, (ir_loc){0}, "%s: %s", name, err);
	ok = ok && cut(ctx, data, ids, n, d);
	free(ids);
	if (ok)
		fprintf(stderr,
			"data: %zu characters of %s, %d distinct; %zu windows of "
			"%zu to train on%s",
			n, name, rt_text_vocab_size(d->vocab), d->train->n,
			(size_t)ir_setting_arg(data, "steps")->num + 1,
			d->valid ? "" : "\n");
	if (ok && d->valid)
		fprintf(stderr, ", %zu held out (the last %zu characters)\n",
			d->valid->n,
			(size_t)(ir_setting_arg(data, "valid")->num * (double)n));
	return ok;
}

bool drv_text_load(ir_ctx *ctx, const ir_module *m, const drv_options *o,
		   const ir_setting *data, drv_data *d)
{
	const ir_value *file = ir_setting_arg(data, "file");
	char buf[4096], *owned = NULL;
	const char *path = o->data, *name = o->data, *text;
	size_t len;
	if (!path && file)
		path = name = drv_model_path(o->model, file->str, buf,
					     sizeof buf);
	if (path && !read_text(ctx, o, data->loc, path, &owned, &len))
		return false;
	if (path)
		normalize_lines(name, owned, &len);
	text = path ? owned : rt_text_default(&len);
	if (!path)
		name = "the built-in text";
	bool ok = encode(ctx, name, text, len, data, d);
	free(owned);
	if (!ok)
		return false;
	if (ir_module_find_sym(m, "V") < 0) {
		ir_error(ctx, data->loc,
			 "text(...) binds the vocabulary's size to "
			 "the dim V, which model %s does not have (dim V)",
			 m->name);
		return false;
	}
	return drv_options_bind(ctx, &d->o, "data", "V",
				rt_text_vocab_size(d->vocab));
}
