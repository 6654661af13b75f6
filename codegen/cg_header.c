/*
 * cg_header.c - the C header that goes with an emitted object (see
 * cg_header.h): the parameter table as static data, the memory each entry
 * point needs as macros, and each entry point's prototype with the shapes
 * of its arguments and results in a comment and in tensor-info arrays.
 *
 * The header is the whole contract a program sees, so it must compile
 * cleanly under strict warnings in C and C++: names that become
 * identifiers are checked, everything else is escaped into string
 * literals or comments, and no array is empty.
 */
#include "cg_header.h"

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* Records a message in err; returns false. */
__attribute__((format(printf, 3, 4))) static bool hdr_fail(char *err,
							   size_t err_size,
							   const char *fmt, ...)
{
	if (err && err_size) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, err_size, fmt, ap);
		va_end(ap);
	}
	return false;
}

static bool is_c_identifier(const char *s)
{
	if (!s || !(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (s++; *s; s++)
		if (!(isalnum((unsigned char)*s) || *s == '_'))
			return false;
	return true;
}

/* s in upper case. */
static void put_upper(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(toupper((unsigned char)*s), out);
}

/* s as a C string literal, or NULL; bytes outside printable ASCII as
 * three-digit octal escapes (which cannot run into a following digit). */
static void put_c_string(FILE *out, const char *s)
{
	if (!s) {
		fputs("NULL", out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20 || c >= 0x7f || c == '?')
			fprintf(out, "\\%03o", c); /* '?': no trigraphs */
		else
			fputc(c, out);
	}
	fputc('"', out);
}

/* s inside a comment: no "*" "/" pair, nothing unprintable. */
static void put_comment_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '*' && s[1] == '/')
			fputs("* ", out);
		else
			fputc(c >= 0x20 && c < 0x7f ? c : '?', out);
	}
}

static void put_dims(FILE *out, const int64_t *dims, int rank, bool is_init)
{
	fputs(is_init ? "{" : "[", out);
	for (int i = 0; i < rank; i++)
		fprintf(out, "%s%lld", i ? ", " : "", (long long)dims[i]);
	if (is_init && rank == 0)
		fputs("0", out);
	fputs(is_init ? "}" : "]", out);
}

static const char *init_name(attnrt_init init)
{
	switch (init) {
	case ATTNRT_INIT_ZEROS:
		return "ATTNRT_INIT_ZEROS";
	case ATTNRT_INIT_ONES:
		return "ATTNRT_INIT_ONES";
	case ATTNRT_INIT_NORMAL:
		return "ATTNRT_INIT_NORMAL";
	case ATTNRT_INIT_UNIFORM:
		return "ATTNRT_INIT_UNIFORM";
	case ATTNRT_INIT_XAVIER_UNIFORM:
		return "ATTNRT_INIT_XAVIER_UNIFORM";
	}
	return NULL;
}

static const char *dtype_name(attnrt_dtype t, bool is_enum)
{
	switch (t) {
	case ATTNRT_F32:
		return is_enum ? "ATTNRT_F32" : "f32";
	case ATTNRT_I32:
		return is_enum ? "ATTNRT_I32" : "i32";
	}
	return NULL;
}

/* ---- checking the description ------------------------------------------- */

static bool check_tensors(const attnrt_tensor_info *t, uint32_t n,
			  const char *entry, const char *what, char *err,
			  size_t err_size)
{
	if (n && !t)
		return hdr_fail(err, err_size, "entry %s: no %s", entry, what);
	for (uint32_t i = 0; i < n; i++) {
		bool ok = t[i].rank >= 0 && t[i].rank <= 6 &&
			  dtype_name(t[i].dtype, true);
		for (int k = 0; ok && k < t[i].rank; k++)
			ok = t[i].dims[k] >= 0;
		if (!ok)
			return hdr_fail(err, err_size,
					"entry %s: %s %u has an "
					"invalid dtype, rank or dims",
					entry, what, i);
	}
	return true;
}

static bool check_params(const cg_header_desc *d, char *err, size_t err_size)
{
	if (d->n_params && !d->params)
		return hdr_fail(err, err_size, "no parameter table");
	for (uint32_t i = 0; i < d->n_params; i++) {
		const attnrt_param_info *p = &d->params[i];
		bool ok = p->name && p->rank >= 0 && p->rank <= 6 &&
			  init_name(p->init) && isfinite(p->a) && isfinite(p->b);
		for (int k = 0; ok && k < p->rank; k++)
			ok = p->dims[k] >= 0;
		if (!ok)
			return hdr_fail(err, err_size,
					"parameter %u: invalid "
					"name, rank, dims, initializer or "
					"argument",
					i);
	}
	return true;
}

static bool check_desc(const cg_header_desc *d, char *err, size_t err_size)
{
	if (!is_c_identifier(d->prefix))
		return hdr_fail(err, err_size,
				"prefix '%s' is not a C "
				"identifier",
				d->prefix ? d->prefix : "(null)");
	if (!check_params(d, err, err_size))
		return false;
	if (d->n_entries && !d->entries)
		return hdr_fail(err, err_size, "no entries");
	for (uint32_t i = 0; i < d->n_entries; i++) {
		const cg_header_entry *e = &d->entries[i];
		if (!is_c_identifier(e->name) || !is_c_identifier(e->symbol))
			return hdr_fail(err, err_size,
					"entry %u: name or symbol "
					"is not a C identifier",
					i);
		if (strcmp(e->name, "params") == 0)
			return hdr_fail(err, err_size,
					"entry %u: 'params' would "
					"clash with the parameter table",
					i);
		if (e->is_grad && e->n_outputs != 1 + d->n_params)
			return hdr_fail(err, err_size,
					"entry %s: a gradient "
					"function has the loss and one output "
					"per parameter",
					e->name);
		if (!check_tensors(e->inputs, e->n_inputs, e->name, "input",
				   err, err_size) ||
		    !check_tensors(e->outputs, e->n_outputs, e->name, "output",
				   err, err_size))
			return false;
	}
	return true;
}

/* ---- writing ---------------------------------------------------------------- */

/* The last component of a path. */
static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');
	return slash ? slash + 1 : path;
}

/* PREFIX_NAME_ in upper case, for macro names. */
static void put_macro_prefix(FILE *out, const char *prefix, const char *name)
{
	put_upper(out, prefix);
	fputc('_', out);
	if (name) {
		put_upper(out, name);
		fputc('_', out);
	}
}

/* How a program uses the header, with the first entry point as example. */
static void put_usage(FILE *out, const cg_header_desc *d)
{
	const char *p = d->prefix;
	fputs(" * The caller owns all memory (docs/runtime.md):\n"
	      " *   void *params = attnrt_alloc(NULL, ",
	      out);
	put_macro_prefix(out, p, NULL);
	fprintf(out, "PARAMS_SIZE);\n *   attnrt_params_init(%s_params, ", p);
	put_macro_prefix(out, p, NULL);
	fputs("N_PARAMS, params, seed);\n"
	      " *     (or attnrt_checkpoint_load(NULL, path, ...) with the same "
	      "table)\n",
	      out);
	if (!d->n_entries)
		return;
	const cg_header_entry *e = &d->entries[0];
	fputs(" *   void *scratch = attnrt_alloc(NULL, ", out);
	put_macro_prefix(out, p, e->name);
	fputs("SCRATCH_SIZE);\n", out);
	fprintf(out,
		" *   int rc = %s(&run, params, scratch, inputs, outputs);\n",
		e->symbol);
	fputs(" * inputs and outputs are arrays of pointers to dense row-major "
	      "tensors\n * of the shapes below; no output may overlap an "
	      "input, params or\n * another output. rc is 0, or an "
	      "ATTNRT_ERR_* code in its low 8 bits\n * with the failing node "
	      "above them (ATTNRT_ERR_OVERLAP: the output that\n * overlaps, "
	      "nothing computed).\n",
	      out);
}

static void put_top_comment(FILE *out, const cg_header_desc *d)
{
	fprintf(out, "/*\n * %s.h - generated by attnc", d->prefix);
	if (d->version) {
		fputs(" ", out);
		put_comment_text(out, d->version);
	}
	if (d->source) {
		fputs(" from\n * ", out);
		put_comment_text(out, d->source);
	}
	fputs(". Do not edit.\n *\n * Link a program that includes it with "
	      "the object and the runtime:\n *   cc prog.c ",
	      out);
	put_comment_text(out, base_name(d->object ? d->object : "MODEL.o"));
	fputs(" -lattnrt -lgomp -lm\n"
	      " * or with `pkg-config --cflags --libs attnrt`.\n *\n",
	      out);
	put_usage(out, d);
	for (uint32_t i = 0; i < d->n_bound; i++) {
		fputs(i ? " *   " : " * Compiled for ", out);
		put_comment_text(out, d->bound[i]);
		fputs(i + 1 < d->n_bound ? ",\n" : ".\n", out);
	}
	fputs(" */\n", out);
}

static void put_param_table(FILE *out, const cg_header_desc *d)
{
	const char *p = d->prefix;
	fputs("/* ---- parameters ---- */\n\n#define ", out);
	put_macro_prefix(out, p, NULL);
	fprintf(out, "PARAMS_SIZE %zu\n#define ", d->params_size);
	put_macro_prefix(out, p, NULL);
	fprintf(out, "N_PARAMS %u\n\n", d->n_params);
	fputs("/* The threads the static schedules were built for: a call with\n"
	      " * run->n_threads equal to it runs independent kernels side by side,\n"
	      " * any other count runs them one after another (1: no schedule). */\n"
	      "#define ",
	      out);
	put_macro_prefix(out, p, NULL);
	fprintf(out, "SCHED_THREADS %u\n\n",
		d->sched_threads ? d->sched_threads : 1);
	fprintf(out,
		"/* name, offset, rank, dims, init, a, b */\n"
		"static const attnrt_param_info %s_params[%u] = {\n",
		p, d->n_params ? d->n_params : 1);
	for (uint32_t i = 0; i < d->n_params; i++) {
		const attnrt_param_info *q = &d->params[i];
		fputs("\t{", out);
		put_c_string(out, q->name);
		fprintf(out, ", %zu, %d, ", q->offset, q->rank);
		put_dims(out, q->dims, q->rank, true);
		fprintf(out, ", %s, %.17g, %.17g},\n", init_name(q->init), q->a,
			q->b);
	}
	if (!d->n_params)
		fputs("\t{NULL, 0, 0, {0}, ATTNRT_INIT_ZEROS, 0, 0},\n", out);
	fputs("};\n\n", out);
}

/* The shapes, one tensor a line, in the entry's comment. */
static void put_shapes(FILE *out, const char *label,
		       const attnrt_tensor_info *t, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		fprintf(out, " *   %-8s ", i ? "" : label);
		if (t[i].name)
			put_comment_text(out, t[i].name);
		else
			fprintf(out, "#%u", i);
		fprintf(out, ": %s", dtype_name(t[i].dtype, false));
		put_dims(out, t[i].dims, t[i].rank, false);
		fputs("\n", out);
	}
	if (!n)
		fprintf(out, " *   %-8s (none)\n", label);
}

static void put_tensor_array(FILE *out, const cg_header_desc *d,
			     const cg_header_entry *e, const char *what,
			     const attnrt_tensor_info *t, uint32_t n)
{
	fprintf(out, "static const attnrt_tensor_info %s_%s_%s[%u] = {\n",
		d->prefix, e->name, what, n ? n : 1);
	for (uint32_t i = 0; i < n; i++) {
		fputs("\t{", out);
		put_c_string(out, t[i].name);
		fprintf(out, ", %s, %d, ", dtype_name(t[i].dtype, true),
			t[i].rank);
		put_dims(out, t[i].dims, t[i].rank, true);
		fputs("},\n", out);
	}
	if (!n)
		fputs("\t{NULL, ATTNRT_F32, 0, {0}},\n", out);
	fputs("};\n", out);
}

static void put_entry_macro(FILE *out, const cg_header_desc *d,
			    const cg_header_entry *e, const char *what,
			    size_t value)
{
	fputs("#define ", out);
	put_macro_prefix(out, d->prefix, e->name);
	fprintf(out, "%s %zu\n", what, value);
}

static void put_entry(FILE *out, const cg_header_desc *d,
		      const cg_header_entry *e)
{
	fprintf(out,
		"/* ---- %s ----\n *\n * %s: the exported function %s "
		"of the model.\n",
		e->name, e->symbol, e->name);
	put_shapes(out, "inputs", e->inputs, e->n_inputs);
	put_shapes(out, "outputs", e->outputs, e->n_outputs);
	fprintf(out, " *   scratch  %zu bytes\n", e->scratch_size);
	if (e->is_grad)
		fprintf(out,
			" * The gradient function: outputs[0] is the loss, "
			"outputs[1 + i] the\n * gradient of %s_params[i], of its "
			"shape. Pointed at grads +\n * %s_params[i].offset, they "
			"fill a gradient block laid out as the\n * params block, "
			"which attnrt_optim_step reads.\n",
			d->prefix, d->prefix);
	fputs(" */\n", out);
	put_entry_macro(out, d, e, "SCRATCH_SIZE", e->scratch_size);
	put_entry_macro(out, d, e, "N_INPUTS", e->n_inputs);
	put_entry_macro(out, d, e, "N_OUTPUTS", e->n_outputs);
	put_entry_macro(out, d, e, "SCHED_THREADS",
			e->sched_threads ? e->sched_threads : 1);
	fputs("\n", out);
	put_tensor_array(out, d, e, "inputs", e->inputs, e->n_inputs);
	put_tensor_array(out, d, e, "outputs", e->outputs, e->n_outputs);
	fprintf(out,
		"\nint %s(const attnrt_run *run, void *params,\n\tvoid "
		"*scratch, const void *const *inputs, void *const *outputs);"
		"\n\n",
		e->symbol);
}

bool cg_header_write(FILE *out, const cg_header_desc *d, char *err,
		     size_t err_size)
{
	if (!check_desc(d, err, err_size))
		return false;
	put_top_comment(out, d);
	fputs("#ifndef ", out);
	put_upper(out, d->prefix);
	fputs("_H\n#define ", out);
	put_upper(out, d->prefix);
	fputs("_H\n\n#include <attnrt.h>\n\n", out);
	fprintf(out,
		"#if ATTNRT_ABI_VERSION != %d\n#error \"%s.h was generated "
		"for version %d of attnrt.h\"\n#endif\n\n",
		ATTNRT_ABI_VERSION, d->prefix, ATTNRT_ABI_VERSION);
	fputs("#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n", out);
	put_param_table(out, d);
	for (uint32_t i = 0; i < d->n_entries; i++)
		put_entry(out, d, &d->entries[i]);
	fputs("#ifdef __cplusplus\n}\n#endif\n\n#endif\n", out);
	if (fflush(out) != 0 || ferror(out))
		return hdr_fail(err, err_size, "cannot write the header");
	return true;
}
