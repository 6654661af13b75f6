/*
 * module_print.c - the textual form of a module (ir_module_print).
 *
 * The text is meant for a compiler engineer reading a dump after a pass,
 * and it is also a file format: ir_module_read (read.c) parses it back to
 * the same module, and printing that again gives the same bytes. So every
 * field of the module appears, numbers are written with the fewest digits
 * that read back to the same bits, and names that are not plain
 * identifiers are quoted. docs/ir.md has the grammar.
 *
 * The printer never trusts the module: a dump after a buggy pass must
 * show the damage rather than crash, so indices are checked and bad ones
 * printed as <bad ...> (which the reader then rejects).
 */
#include "ir.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Column where node locations start, so that they line up. */
#define LOC_COLUMN 60
/* Constant elements per line. */
#define CONST_PER_LINE 8

typedef struct printer {
	const ir_module *m;
	FILE *out;
	uint32_t main_file; /* locations in this file print as loc(l:c) */
	int col;            /* characters on the current line */
} printer;

static void pr(printer *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void pr(printer *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vfprintf(p->out, fmt, ap);
	va_end(ap);
	if (n > 0)
		p->col += n;
}

static void pr_nl(printer *p)
{
	fputc('\n', p->out);
	p->col = 0;
}

/* ---- numbers ------------------------------------------------------------ */

/* NaN: "nan" for the default quiet NaN, else "nan0x<bits>" so that the
 * payload survives; infinities as "inf" and "-inf". */
static bool fmt_special(char *buf, size_t size, double x, uint64_t bits,
			uint64_t quiet)
{
	if (isnan(x)) {
		if (bits == quiet)
			snprintf(buf, size, "nan");
		else
			snprintf(buf, size, "nan0x%llx",
				 (unsigned long long)bits);
		return true;
	}
	if (isinf(x)) {
		snprintf(buf, size, "%sinf", x < 0 ? "-" : "");
		return true;
	}
	return false;
}

/* The shortest %g text of x that strtod reads back to the same bits. */
static void fmt_double(char *buf, size_t size, double x)
{
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	if (fmt_special(buf, size, x, bits, 0x7ff8000000000000ull))
		return;
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(buf, size, "%.*g", prec, x);
		if (strtod(buf, NULL) == x)
			return;
	}
}

/* The shortest %g text of x that strtof reads back to the same bits. */
static void fmt_float(char *buf, size_t size, float x)
{
	uint32_t bits;
	memcpy(&bits, &x, sizeof bits);
	if (fmt_special(buf, size, x, bits, 0x7fc00000u))
		return;
	for (int prec = 1; prec <= 9; prec++) {
		snprintf(buf, size, "%.*g", prec, (double)x);
		if (strtof(buf, NULL) == x)
			return;
	}
}

static void pr_double(printer *p, double x)
{
	char buf[64];
	fmt_double(buf, sizeof buf, x);
	pr(p, "%s", buf);
}

/* ---- names, types, locations ----------------------------------------------- */

static bool is_bare_name(const char *s)
{
	if (!(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') ||
	      (s[0] >= 'A' && s[0] <= 'Z')))
		return false;
	for (const char *q = s; *q; q++)
		if (!(*q == '_' || *q == '.' || (*q >= 'a' && *q <= 'z') ||
		      (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9')))
			return false;
	return true;
}

/* A string literal with C escapes for quotes, backslashes and control
 * bytes; other bytes (UTF-8) as they are. */
static void pr_string(printer *p, const char *s)
{
	pr(p, "\"");
	for (const unsigned char *q = (const unsigned char *)s; *q; q++) {
		if (*q == '"' || *q == '\\')
			pr(p, "\\%c", *q);
		else if (*q == '\n')
			pr(p, "\\n");
		else if (*q == '\t')
			pr(p, "\\t");
		else if (*q < 0x20 || *q == 0x7f)
			pr(p, "\\x%02x", *q);
		else
			pr(p, "%c", *q);
	}
	pr(p, "\"");
}

static void pr_name(printer *p, const char *s)
{
	if (!s)
		pr(p, "<null>");
	else if (is_bare_name(s))
		pr(p, "%s", s);
	else
		pr_string(p, s);
}

/* A symbol's name; a derived one as its factors' names: B*T. */
static void pr_sym(printer *p, int32_t sym)
{
	const ir_sym *s = &p->m->syms[sym];
	if (!s->n_factors) {
		pr_name(p, s->name);
		return;
	}
	for (uint32_t i = 0; i < s->n_factors && i < IR_SYM_MAX_FACTORS; i++) {
		if (i)
			pr(p, "*");
		if ((uint32_t)s->factors[i] < p->m->n_syms)
			pr_name(p, p->m->syms[s->factors[i]].name);
		else
			pr(p, "<bad symbol %d>", s->factors[i]);
	}
}

static void pr_dim(printer *p, ir_dim d)
{
	if (ir_dim_is_static(d)) {
		pr(p, "%lld", (long long)d.coef);
		return;
	}
	if (d.coef != 1)
		pr(p, "%lld*", (long long)d.coef);
	if ((uint32_t)d.sym >= p->m->n_syms) {
		pr(p, "<bad symbol %d>", d.sym);
		return;
	}
	pr_sym(p, d.sym);
}

static void pr_type(printer *p, const ir_type *t)
{
	if (t->dtype != IR_F32 && t->dtype != IR_I32 && t->dtype != IR_F64)
		pr(p, "<bad dtype %d>", (int)t->dtype);
	else
		pr(p, "%s", ir_dtype_name(t->dtype));
	pr(p, "[");
	if (t->rank > IR_MAX_RANK)
		pr(p, "<bad rank %u>", t->rank);
	for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++) {
		if (i)
			pr(p, ", ");
		pr_dim(p, t->dims[i]);
	}
	pr(p, "]");
}

/* "l:c" in the main file, ""file":l:c" elsewhere. */
static void pr_place(printer *p, ir_loc loc)
{
	if (loc.file != p->main_file || !loc.file) {
		if (loc.file < p->m->ctx->n_files)
			pr_string(p, p->m->ctx->files[loc.file].name);
		else
			pr(p, "<bad file %u>", loc.file);
		pr(p, ":");
	}
	pr(p, "%u:%u", loc.line, loc.col);
}

/* " loc(l:c)" in the main file, " loc("file":l:c)" elsewhere, nothing for
 * no location; a line in a prelude function is followed by the calls
 * that lead to it, innermost first (" in embed at "m.g":3:10"), so that
 * a module read back reports its errors at the user's line. */
static void pr_loc(printer *p, ir_loc loc)
{
	const ir_ctx *ctx = p->m->ctx;
	if (!loc.file && !loc.line && !loc.col)
		return;
	pr(p, " loc(");
	pr_place(p, loc);
	for (const ir_call *c; (c = ir_loc_prelude_call(ctx, loc));
	     loc = c->loc) {
		pr(p, " in ");
		pr_string(p, ctx->callees[c->callee]);
		pr(p, " at ");
		pr_place(p, c->loc);
	}
	pr(p, ")");
}

/* The file of the first location in print order: most locations of a
 * module come from its main .g file, and they then print short. */
static uint32_t find_main_file(const ir_module *m)
{
	for (uint32_t i = 0; i < m->n_syms; i++)
		if (m->syms[i].loc.file)
			return m->syms[i].loc.file;
	for (uint32_t i = 0; i < m->n_params; i++)
		if (m->params[i].loc.file)
			return m->params[i].loc.file;
	for (uint32_t i = 0; i < m->n_train; i++)
		if (m->train[i].loc.file)
			return m->train[i].loc.file;
	for (uint32_t i = 0; i < m->n_funcs; i++) {
		const ir_func *f = m->funcs[i];
		if (f->loc.file)
			return f->loc.file;
		for (uint32_t k = 0; k < f->g.n_nodes; k++)
			if (f->g.nodes[k].loc.file)
				return f->g.nodes[k].loc.file;
	}
	return 0;
}

/* ---- module header, symbols, parameters, train ---------------------------------- */

static void print_header(printer *p)
{
	pr(p, "module ");
	pr_name(p, p->m->name);
	pr_nl(p);
	if (p->main_file) {
		pr(p, "source ");
		if (p->main_file < p->m->ctx->n_files)
			pr_string(p, p->m->ctx->files[p->main_file].name);
		else
			pr(p, "<bad file %u>", p->main_file);
		pr_nl(p);
	}
	if (p->m->n_dropout_streams) {
		pr(p, "dropout_streams %u", p->m->n_dropout_streams);
		pr_nl(p);
	}
}

static void print_syms(printer *p)
{
	if (p->m->n_syms)
		pr_nl(p);
	for (uint32_t i = 0; i < p->m->n_syms; i++) {
		const ir_sym *s = &p->m->syms[i];
		pr(p, "sym ");
		pr_sym(p, (int32_t)i);
		if (s->fallback)
			pr(p, " = %lld", (long long)s->fallback);
		pr_loc(p, s->loc);
		pr_nl(p);
	}
	for (uint32_t i = 0; i < p->m->n_limits; i++) {
		const ir_limit *l = &p->m->limits[i];
		pr(p, "limit ");
		pr_dim(p, l->size);
		pr(p, " max %lld", (long long)l->max);
		pr_loc(p, l->loc);
		pr_nl(p);
	}
}

static const char *init_name(ir_init_kind k)
{
	switch (k) {
	case IR_INIT_ZEROS:
		return "zeros";
	case IR_INIT_ONES:
		return "ones";
	case IR_INIT_NORMAL:
		return "normal";
	case IR_INIT_UNIFORM:
		return "uniform";
	case IR_INIT_XAVIER_UNIFORM:
		return "xavier_uniform";
	}
	return NULL;
}

/* How many of (a, b) an initializer uses; more print only when set. */
static int init_n_used(ir_init_kind k)
{
	switch (k) {
	case IR_INIT_ZEROS:
	case IR_INIT_ONES:
		return 0;
	case IR_INIT_XAVIER_UNIFORM:
		return 1;
	case IR_INIT_NORMAL:
	case IR_INIT_UNIFORM:
		return 2;
	}
	return 2;
}

static bool is_pos_zero(double x)
{
	uint64_t bits;
	memcpy(&bits, &x, sizeof bits);
	return bits == 0;
}

static void print_param(printer *p, const ir_param *q)
{
	pr(p, "param @");
	pr_name(p, q->name);
	pr(p, " : ");
	pr_type(p, &q->type);
	const char *init = init_name(q->init);
	if (init)
		pr(p, " = %s", init);
	else
		pr(p, " = <bad init %d>", (int)q->init);
	int n = !is_pos_zero(q->b) ? 2 : !is_pos_zero(q->a) ? 1 : 0;
	if (n < init_n_used(q->init))
		n = init_n_used(q->init);
	if (n) {
		pr(p, "(");
		pr_double(p, q->a);
		if (n == 2) {
			pr(p, ", ");
			pr_double(p, q->b);
		}
		pr(p, ")");
	}
	pr_loc(p, q->loc);
	pr_nl(p);
}

static void print_params(printer *p)
{
	if (p->m->n_params)
		pr_nl(p);
	for (uint32_t i = 0; i < p->m->n_params; i++)
		print_param(p, &p->m->params[i]);
}

static void print_setting(printer *p, const ir_setting *s);

/* value = NUMBER | STRING | NAME [ "(" setting { "," setting } ")" ] */
static void print_value(printer *p, const ir_value *v)
{
	switch (v->kind) {
	case IR_VAL_NUM:
		pr_double(p, v->num);
		return;
	case IR_VAL_STR:
		pr_string(p, v->str ? v->str : "");
		return;
	case IR_VAL_CALL:
		pr_name(p, v->str);
		if (v->n_args) {
			pr(p, "(");
			for (uint32_t i = 0; i < v->n_args; i++) {
				if (i)
					pr(p, ", ");
				print_setting(p, &v->args[i]);
			}
			pr(p, ")");
		}
		return;
	}
	pr(p, "<bad value %d>", (int)v->kind);
}

static void print_setting(printer *p, const ir_setting *s)
{
	pr_name(p, s->key);
	pr(p, " = ");
	print_value(p, &s->value);
	pr_loc(p, s->loc);
}

static void print_train(printer *p)
{
	if (!p->m->n_train)
		return;
	pr_nl(p);
	pr(p, "train {");
	pr_nl(p);
	for (uint32_t i = 0; i < p->m->n_train; i++) {
		pr(p, "  ");
		print_setting(p, &p->m->train[i]);
		pr_nl(p);
	}
	pr(p, "}");
	pr_nl(p);
}

/* ---- functions ------------------------------------------------------------------ */

static void pr_list_u32(printer *p, const char *key, const uint32_t *v, int n)
{
	pr(p, "%s=[", key);
	for (int i = 0; i < n; i++)
		pr(p, "%s%u", i ? ", " : "", v[i]);
	pr(p, "]");
}

/* The attributes of a non-leaf node, " {k=v, ...}"; nothing if none. */
static void print_attrs(printer *p, const ir_node *n)
{
	const ir_attr *a = &n->attr;
	int rank = n->type.rank < IR_MAX_RANK ? n->type.rank : IR_MAX_RANK;
	uint32_t v[IR_MAX_RANK];
	int k = 0;
	switch (ir_op_table[n->op].attr) {
	case IR_ATTR_NONE:
	case IR_ATTR_PARAM:
	case IR_ATTR_CONST:
		return;
	case IR_ATTR_INPUT:
		pr(p, " {index=%u}", a->input_index);
		return;
	case IR_ATTR_MATMUL:
		pr(p, " {ta=%d, tb=%d}", a->matmul.ta, a->matmul.tb);
		return;
	case IR_ATTR_REDUCE:
		pr(p, " {axes=[");
		for (int i = 0; i < 32; i++)
			if (a->reduce.axes & (1u << i))
				pr(p, "%s%d", k++ ? ", " : "", i);
		pr(p, "], keepdim=%d}", a->reduce.keepdim);
		return;
	case IR_ATTR_FILL:
		pr(p, " {fill=");
		pr_double(p, a->fill);
		pr(p, "}");
		return;
	case IR_ATTR_EPS:
		pr(p, " {eps=");
		pr_double(p, a->eps);
		pr(p, "}");
		return;
	case IR_ATTR_DROPOUT:
		pr(p, " {p=");
		pr_double(p, a->dropout.p);
		pr(p, ", stream=%u}", a->dropout.stream);
		return;
	case IR_ATTR_PERM:
		for (int i = 0; i < rank; i++)
			v[i] = a->permute.perm[i];
		pr(p, " {");
		pr_list_u32(p, "perm", v, rank);
		pr(p, "}");
		return;
	case IR_ATTR_SLICE:
		pr(p, " {axis=%d, start=%lld, end=%lld, step=%lld}",
		   a->slice.axis, (long long)a->slice.start,
		   (long long)a->slice.end, (long long)a->slice.step);
		return;
	case IR_ATTR_AXIS:
		pr(p, " {axis=%d}", a->axis);
		return;
	case IR_ATTR_REPS:
		pr(p, " {reps=[");
		for (int i = 0; i < rank; i++)
			pr(p, "%s%lld", i ? ", " : "",
			   (long long)a->repeat.reps[i]);
		pr(p, "]}");
		return;
	case IR_ATTR_INTERLEAVE:
		pr(p, " {axis=%d, n=%lld}", a->interleave.axis,
		   (long long)a->interleave.n);
		return;
	case IR_ATTR_ATTENTION:
		pr(p, " {scale=");
		pr_double(p, a->attention.scale);
		pr(p, ", fill=");
		pr_double(p, a->attention.fill);
		pr(p, ", p=");
		pr_double(p, a->attention.p);
		pr(p, ", stream=%u", a->attention.stream);
		if (a->attention.heads != 1)
			pr(p, ", heads=%u", a->attention.heads);
		pr(p, "}");
		return;
	case IR_ATTR_ARANGE:
		pr(p, " {start=");
		pr_double(p, a->arange.start);
		pr(p, ", step=");
		pr_double(p, a->arange.step);
		pr(p, "}");
		return;
	}
}

/* The operands of a node, or the leaf's reference (@param, @cN). */
static void print_operands(printer *p, const ir_graph *g, const ir_node *n)
{
	if (n->op == IR_OP_PARAM) {
		if (n->attr.param_index < p->m->n_params) {
			pr(p, " @");
			pr_name(p, p->m->params[n->attr.param_index].name);
		} else {
			pr(p, " <bad param %u>", n->attr.param_index);
		}
		return;
	}
	if (n->op == IR_OP_CONST) {
		pr(p, " @c%u", n->attr.const_index);
		return;
	}
	if ((uint64_t)n->first_arg + n->n_args > g->n_args) {
		pr(p, " <bad operands %u+%u>", n->first_arg, n->n_args);
		return;
	}
	for (uint32_t i = 0; i < n->n_args; i++)
		pr(p, "%s %%%u", i ? "," : "", g->args[n->first_arg + i]);
}

/* %N = op operands {attrs} : type    loc(l:c) */
static void print_node(printer *p, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	pr(p, "  %%%u = ", id);
	if ((unsigned)n->op >= IR_OP_COUNT) {
		pr(p, "<bad op %d>", (int)n->op);
		pr_nl(p);
		return;
	}
	pr(p, "%s", ir_op_table[n->op].name);
	print_operands(p, g, n);
	print_attrs(p, n);
	pr(p, " : ");
	pr_type(p, &n->type);
	if (n->loc.file || n->loc.line || n->loc.col)
		while (p->col < LOC_COLUMN - 1)
			pr(p, " ");
	pr_loc(p, n->loc);
	pr_nl(p);
}

/* name: type, or the type alone for an unnamed input. */
static void print_input_decl(printer *p, const ir_func *f, uint32_t k)
{
	if (f->input_names && f->input_names[k]) {
		pr_name(p, f->input_names[k]);
		pr(p, ": ");
	}
	if (f->inputs[k] < f->g.n_nodes)
		pr_type(p, &f->g.nodes[f->inputs[k]].type);
	else
		pr(p, "<bad input %%%u>", f->inputs[k]);
}

static void print_func_header(printer *p, const ir_func *f)
{
	pr(p, "%sfunc @", f->is_export ? "export " : "");
	pr_name(p, f->name);
	pr(p, "(");
	for (uint32_t k = 0; k < f->n_inputs; k++) {
		if (k)
			pr(p, ", ");
		print_input_decl(p, f, k);
	}
	pr(p, ")");
	if (f->example) {
		pr(p, " example(");
		for (uint32_t k = 0; k < f->n_inputs; k++)
			pr(p, "%s@c%u", k ? ", " : "", f->example[k]);
		pr(p, ")");
	}
	pr_loc(p, f->loc);
	pr(p, " {");
	pr_nl(p);
}

static void print_func(printer *p, const ir_func *f)
{
	pr_nl(p);
	print_func_header(p, f);
	for (ir_id i = 0; i < f->g.n_nodes; i++)
		print_node(p, &f->g, i);
	pr(p, "  return");
	for (uint32_t k = 0; k < f->n_outputs; k++) {
		pr(p, "%s %%%u", k ? "," : "", f->outputs[k]);
		if (f->output_names && f->output_names[k]) {
			pr(p, " as ");
			pr_name(p, f->output_names[k]);
		}
	}
	pr_nl(p);
	pr(p, "}");
	pr_nl(p);
}

/* ---- constants ------------------------------------------------------------------ */

static void pr_elem(printer *p, const ir_const *c, int64_t i)
{
	char buf[64];
	switch (c->type.dtype) {
	case IR_F32:
		fmt_float(buf, sizeof buf, ((const float *)c->data)[i]);
		break;
	case IR_I32:
		snprintf(buf, sizeof buf, "%d", ((const int32_t *)c->data)[i]);
		break;
	case IR_F64:
		fmt_double(buf, sizeof buf, ((const double *)c->data)[i]);
		break;
	}
	pr(p, "%s", buf);
}

/* Elements of a static shape; -1 if not static, bad or overflowing. */
static int64_t safe_numel(const ir_type *t)
{
	int64_t n = 1;
	if (t->rank > IR_MAX_RANK)
		return -1;
	for (int i = 0; i < t->rank; i++)
		if (!ir_dim_is_static(t->dims[i]) || t->dims[i].coef < 0 ||
		    __builtin_mul_overflow(n, t->dims[i].coef, &n))
			return -1;
	return n;
}

/* const @cN : type = [v, ...], eight values a line when long. */
static void print_const(printer *p, uint32_t idx)
{
	const ir_const *c = &p->m->consts[idx];
	int64_t n = safe_numel(&c->type);
	pr(p, "const @c%u : ", idx);
	pr_type(p, &c->type);
	if (n < 0 || (n > 0 && !c->data) ||
	    (c->type.dtype != IR_F32 && c->type.dtype != IR_I32 &&
	     c->type.dtype != IR_F64)) {
		pr(p, " = <bad data>");
		pr_nl(p);
		return;
	}
	bool is_long = n > CONST_PER_LINE;
	pr(p, " = [");
	for (int64_t i = 0; i < n; i++) {
		if (is_long && i % CONST_PER_LINE == 0) {
			pr(p, "%s", i ? "," : "");
			pr_nl(p);
			pr(p, "  ");
		} else if (i) {
			pr(p, ", ");
		}
		pr_elem(p, c, i);
	}
	if (is_long)
		pr_nl(p);
	pr(p, "]");
	pr_nl(p);
}

void ir_module_print(const ir_module *m, FILE *out)
{
	printer p = {m, out, find_main_file(m), 0};
	print_header(&p);
	print_syms(&p);
	print_params(&p);
	print_train(&p);
	for (uint32_t i = 0; i < m->n_funcs; i++)
		print_func(&p, m->funcs[i]);
	if (m->n_consts)
		pr_nl(&p);
	for (uint32_t i = 0; i < m->n_consts; i++)
		print_const(&p, i);
}
