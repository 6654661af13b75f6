/*
 * ir.c - the IR's context, allocation hook, arena, diagnostics and module
 * tables. Shape rules are in shape_rules.c, text in module_print.c and
 * read.c, checks in verify.c.
 */
#include "ir.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const ir_op_info ir_op_table[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags) \
	[IR_OP_##e] = {name, n_in, attr, fam, flags},
#include "ops.def"
#undef X
};

#define X(e, name, n_in, attr, fam, flags) +1
_Static_assert(0
#include "ops.def"
		       == IR_OP_COUNT,
	       "ops.def and ir_op disagree");
#undef X

ir_op ir_op_differentiated(ir_op op)
{
	switch (op) {
	case IR_OP_LAYER_NORM_GRAD:
		return IR_OP_LAYER_NORM;
	case IR_OP_EMBEDDING_GRAD:
		return IR_OP_EMBEDDING;
	case IR_OP_SORT_GRAD:
		return IR_OP_SORT;
	case IR_OP_CROSS_ENTROPY_GRAD:
	case IR_OP_CROSS_ENTROPY_WITH_GRAD:
		return IR_OP_CROSS_ENTROPY;
	case IR_OP_FUSED_ATTENTION_GRAD:
		return IR_OP_FUSED_ATTENTION;
	case IR_OP_FUSED_ADDITIVE_ATTENTION_GRAD:
		return IR_OP_FUSED_ADDITIVE_ATTENTION;
	default:
		return op;
	}
}

bool ir_op_is_gradient(ir_op op)
{
	return ir_op_differentiated(op) != op;
}

uint32_t *ir_attr_stream(ir_attr_kind kind, ir_attr *a, double *p)
{
	switch (kind) {
	case IR_ATTR_DROPOUT:
		*p = a->dropout.p;
		return &a->dropout.stream;
	case IR_ATTR_ATTENTION:
		*p = a->attention.p;
		return &a->attention.stream;
	case IR_ATTR_NONE:
	case IR_ATTR_INPUT:
	case IR_ATTR_PARAM:
	case IR_ATTR_CONST:
	case IR_ATTR_MATMUL:
	case IR_ATTR_REDUCE:
	case IR_ATTR_FILL:
	case IR_ATTR_EPS:
	case IR_ATTR_PERM:
	case IR_ATTR_SLICE:
	case IR_ATTR_AXIS:
	case IR_ATTR_REPS:
	case IR_ATTR_INTERLEAVE:
	case IR_ATTR_ARANGE:
		break;
	}
	*p = 0;
	return NULL;
}

ir_op ir_op_from_name(const char *name)
{
	for (int i = 0; i < IR_OP_COUNT; i++)
		if (strcmp(ir_op_table[i].name, name) == 0)
			return (ir_op)i;
	return IR_OP_COUNT;
}

const char *ir_dtype_name(ir_dtype t)
{
	switch (t) {
	case IR_F32:
		return "f32";
	case IR_I32:
		return "i32";
	case IR_F64:
		return "f64";
	}
	return "?";
}

size_t ir_dtype_size(ir_dtype t)
{
	switch (t) {
	case IR_F32:
	case IR_I32:
		return 4;
	case IR_F64:
		return 8;
	}
	return 0;
}

bool ir_shape_is(const ir_type *t, int rank, const ir_dim *dims)
{
	if (t->rank != rank)
		return false;
	for (int i = 0; i < rank; i++)
		if (!ir_dim_eq(t->dims[i], dims[i]))
			return false;
	return true;
}

bool ir_shape_eq(const ir_type *a, const ir_type *b)
{
	return ir_shape_is(a, b->rank, b->dims);
}

bool ir_type_eq(const ir_type *a, const ir_type *b)
{
	return a->dtype == b->dtype && ir_shape_eq(a, b);
}

int64_t ir_type_numel_static(const ir_type *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++) {
		if (!ir_dim_is_static(t->dims[i]))
			return -1;
		n *= t->dims[i].coef;
	}
	return n;
}

/* ---- context and allocation ---------------------------------------------- */

static void *default_alloc(void *ud, void *ptr, size_t size)
{
	(void)ud;
	if (size == 0) {
		free(ptr);
		return NULL;
	}
	return realloc(ptr, size);
}

void ir_ctx_init(ir_ctx *ctx)
{
	memset(ctx, 0, sizeof *ctx);
	ctx->alloc = default_alloc;
	ctx->diag_out = stderr;
	ctx->max_errors = 20;
	/* Index 0 means "no file". */
	ir_ctx_add_source(ctx, "", "", 0);
}

void ir_ctx_fini(ir_ctx *ctx)
{
	for (uint32_t i = 0; i < ctx->n_files; i++) {
		ir_free(ctx, ctx->files[i].name);
		ir_free(ctx, ctx->files[i].text);
	}
	ir_free(ctx, ctx->files);
	ctx->files = NULL;
	ctx->n_files = ctx->files_cap = 0;
	ir_free(ctx, ctx->calls);
	ctx->calls = NULL;
	ctx->n_calls = ctx->calls_cap = 0;
	for (uint32_t i = 0; i < ctx->n_callees; i++)
		ir_free(ctx, ctx->callees[i]);
	ir_free(ctx, ctx->callees);
	ctx->callees = NULL;
	ctx->n_callees = ctx->callees_cap = 0;
}

/* The index of name in ctx->callees, added if new; false when out of
 * memory. A model has tens of functions: a linear search. */
static bool callee_index(ir_ctx *ctx, const char *name, uint32_t *out)
{
	for (uint32_t i = ctx->n_callees; i-- > 0;)
		if (strcmp(ctx->callees[i], name) == 0) {
			*out = i;
			return true;
		}
	size_t len = strlen(name);
	char *copy = ir_alloc(ctx, len + 1);
	if (!copy || !ir_grow(ctx, (void **)&ctx->callees, &ctx->callees_cap,
			      ctx->n_callees + 1, sizeof *ctx->callees)) {
		ir_free(ctx, copy);
		return false;
	}
	memcpy(copy, name, len);
	*out = ctx->n_callees;
	ctx->callees[ctx->n_callees++] = copy;
	return true;
}

uint32_t ir_ctx_add_call(ir_ctx *ctx, ir_loc loc, const char *callee,
			 bool is_prelude)
{
	uint32_t n = ctx->n_calls ? ctx->n_calls : 1; /* 0 is the dummy */
	uint32_t name;
	if (n == UINT32_MAX || !callee_index(ctx, callee, &name) ||
	    !ir_grow(ctx, (void **)&ctx->calls, &ctx->calls_cap, n + 1,
		     sizeof *ctx->calls))
		return 0;
	ctx->calls[0] = (ir_call){0};
	ctx->calls[n] = (ir_call){loc, name, is_prelude};
	ctx->n_calls = n + 1;
	return n;
}

const ir_call *ir_loc_prelude_call(const ir_ctx *ctx, ir_loc loc)
{
	const ir_call *c = loc.at && loc.at < ctx->n_calls ? &ctx->calls[loc.at]
							   : NULL;
	return c && c->is_prelude && c->loc.at < loc.at ? c : NULL;
}

ir_loc ir_loc_user(const ir_ctx *ctx, ir_loc loc)
{
	for (const ir_call *c; (c = ir_loc_prelude_call(ctx, loc));)
		loc = c->loc;
	return loc;
}

/* After an error reported at the user's line for loc: a note at each
 * prelude line of loc's calls, inward first. */
static void note_prelude_lines(ir_ctx *ctx, ir_loc loc)
{
	for (const ir_call *c; (c = ir_loc_prelude_call(ctx, loc)); loc = c->loc)
		ir_note(ctx, loc, "here, in '%s' (defined in the prelude)",
			ctx->callees[c->callee]);
}

void *ir_realloc(ir_ctx *ctx, void *ptr, size_t size)
{
	void *p = ctx->alloc(ctx->alloc_ud, ptr, size);
	if (!p && size)
		ctx->is_oom = true;
	return p;
}

void *ir_alloc(ir_ctx *ctx, size_t size)
{
	void *p = ir_realloc(ctx, NULL, size ? size : 1);
	if (p)
		memset(p, 0, size ? size : 1);
	return p;
}

void ir_free(ir_ctx *ctx, void *ptr)
{
	if (ptr)
		ctx->alloc(ctx->alloc_ud, ptr, 0);
}

bool ir_grow(ir_ctx *ctx, void **arr, uint32_t *cap, uint32_t need,
	     size_t elem_size)
{
	if (need <= *cap)
		return true;
	uint32_t n = *cap ? *cap : 8;
	while (n < need)
		n *= 2;
	void *p = ir_realloc(ctx, *arr, (size_t)n * elem_size);
	if (!p)
		return false;
	memset((char *)p + (size_t)*cap * elem_size, 0,
	       (size_t)(n - *cap) * elem_size);
	*arr = p;
	*cap = n;
	return true;
}

static char *ctx_strndup(ir_ctx *ctx, const char *s, size_t n)
{
	char *p = ir_alloc(ctx, n + 1);
	if (p)
		memcpy(p, s, n);
	return p;
}

uint32_t ir_ctx_add_source(ir_ctx *ctx, const char *name, const char *text,
			   size_t len)
{
	if (!ir_grow(ctx, (void **)&ctx->files, &ctx->files_cap,
		     ctx->n_files + 1, sizeof *ctx->files))
		return 0;
	ir_source *s = &ctx->files[ctx->n_files];
	s->name = ctx_strndup(ctx, name, strlen(name));
	s->text = ctx_strndup(ctx, text, len);
	s->len = len;
	if (!s->name || !s->text) {
		ir_free(ctx, s->name);
		ir_free(ctx, s->text);
		s->name = s->text = NULL;
		return 0;
	}
	return ctx->n_files++;
}

uint32_t ir_ctx_load_source(ir_ctx *ctx, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		ir_error(ctx, (ir_loc){0}, "cannot open '%s'", path);
		return 0;
	}
	char *buf = NULL;
	size_t len = 0, cap = 0;
	for (;;) {
		if (len > IR_MAX_SOURCE_BYTES) {
			ir_free(ctx, buf);
			fclose(f);
			ir_error(ctx, (ir_loc){0},
				 "'%s' is larger than %u MiB, "
				 "the most a source file may have",
				 path, IR_MAX_SOURCE_BYTES >> 20);
			return 0;
		}
		if (len + 4096 > cap) {
			cap = cap ? cap * 2 : 65536;
			char *nb = ir_realloc(ctx, buf, cap);
			if (!nb) {
				ir_free(ctx, buf);
				fclose(f);
				ir_error(ctx, (ir_loc){0},
					 "out of memory reading '%s'", path);
				return 0;
			}
			buf = nb;
		}
		size_t got = fread(buf + len, 1, cap - len, f);
		len += got;
		if (got == 0)
			break;
	}
	bool bad = ferror(f);
	fclose(f);
	if (bad) {
		ir_free(ctx, buf);
		ir_error(ctx, (ir_loc){0}, "cannot read '%s'", path);
		return 0;
	}
	uint32_t id = ir_ctx_add_source(ctx, path, buf ? buf : "", len);
	ir_free(ctx, buf);
	return id;
}

/* ---- diagnostics ------------------------------------------------------------ */

/* A diagnostic is put together in one buffer and written with one call:
 * stderr is unbuffered, and a byte at a time made a long line cost one
 * system call per byte. What does not fit is cut (the message ends in
 * "..."); the source line is clipped around the caret first. */
#define DIAG_BUF 4096
#define DIAG_LINE_MAX 160 /* bytes of a source line shown in full */
#define DIAG_CONTEXT 80   /* bytes shown before the caret when clipped */

typedef struct diag_buf {
	char s[DIAG_BUF];
	size_t n;
} diag_buf;

static void buf_putc(diag_buf *b, char c)
{
	if (b->n < DIAG_BUF)
		b->s[b->n++] = c;
}

static void buf_puts(diag_buf *b, const char *s)
{
	while (*s)
		buf_putc(b, *s++);
}

static void buf_vprintf(diag_buf *b, const char *fmt, va_list ap)
{
	size_t room = DIAG_BUF - b->n;
	int w = vsnprintf(b->s + b->n, room, fmt, ap);
	if (w < 0)
		return;
	if ((size_t)w < room) {
		b->n += (size_t)w;
		return;
	}
	b->n = DIAG_BUF - 4;
	buf_puts(b, "...");
}

static void buf_printf(diag_buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

/* Adds the source line of loc and a caret under its column. Tabs in the
 * line are kept so that the caret lines up in a terminal; a line longer
 * than DIAG_LINE_MAX shows the part around the caret between "...". */
static void buf_caret(diag_buf *b, const ir_ctx *ctx, ir_loc loc)
{
	const ir_source *s = &ctx->files[loc.file];
	const char *p = s->text, *end = s->text + s->len;
	for (uint32_t l = 1; l < loc.line && p < end; p++)
		if (*p == '\n')
			l++;
	const char *eol = p;
	while (eol < end && *eol != '\n' && *eol != '\r')
		eol++;
	size_t len = (size_t)(eol - p), off = loc.col ? loc.col - 1 : 0;
	size_t from = 0, to = len;
	if (len > DIAG_LINE_MAX) {
		from = off > DIAG_CONTEXT ? off - DIAG_CONTEXT : 0;
		from = from + DIAG_LINE_MAX > len ? len - DIAG_LINE_MAX : from;
		to = from + DIAG_LINE_MAX;
	}
	buf_printf(b, "%5u | %s", loc.line, from ? "..." : "");
	for (size_t i = from; i < to; i++)
		buf_putc(b, (unsigned char)p[i] < 0x20 && p[i] != '\t' ? ' '
								       : p[i]);
	buf_puts(b, to < len ? "...\n      | " : "\n      | ");
	if (from)
		buf_puts(b, "   ");
	for (size_t i = from; i < off && i < to; i++)
		buf_putc(b, p[i] == '\t' ? '\t' : ' ');
	buf_puts(b, "^\n");
}

static void report(ir_ctx *ctx, ir_loc loc, const char *kind, const char *fmt,
		   va_list ap)
{
	diag_buf b;
	bool has_line = loc.file && loc.file < ctx->n_files && loc.line;
	b.n = 0;
	if (has_line)
		buf_printf(&b, "%s:%u:%u: %s: ", ctx->files[loc.file].name,
			   loc.line, loc.col, kind);
	else
		buf_printf(&b, "attnc: %s: ", kind);
	buf_vprintf(&b, fmt, ap);
	if (b.n == DIAG_BUF)
		b.n--;
	buf_putc(&b, '\n');
	if (has_line && ctx->files[loc.file].len) /* a .ir names files only */
		buf_caret(&b, ctx, loc);
	fwrite(b.s, 1, b.n, ctx->diag_out);
}

void ir_verror(ir_ctx *ctx, ir_loc loc, const char *fmt, va_list ap)
{
	ctx->n_errors++;
	if (ctx->max_errors && ctx->n_errors > ctx->max_errors)
		return;
	if (ir_loc_prelude_call(ctx, loc)) {
		report(ctx, ir_loc_user(ctx, loc), "error", fmt, ap);
		note_prelude_lines(ctx, loc);
	} else if (ctx->user_callee && loc.file != ctx->user_call.file) {
		report(ctx, ctx->user_call, "error", fmt, ap);
		if (loc.file && loc.file < ctx->n_files && loc.line)
			ir_note(ctx, loc,
				"here, in '%s' (defined in the prelude)",
				ctx->user_callee);
	} else {
		report(ctx, loc, "error", fmt, ap);
	}
	if (ctx->max_errors && ctx->n_errors == ctx->max_errors)
		fprintf(ctx->diag_out, "attnc: too many errors, stopping\n");
}

void ir_error(ir_ctx *ctx, ir_loc loc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ir_verror(ctx, loc, fmt, ap);
	va_end(ap);
}

void ir_warning(ir_ctx *ctx, ir_loc loc, const char *fmt, ...)
{
	va_list ap;
	ctx->n_warnings++;
	va_start(ap, fmt);
	report(ctx, loc, "warning", fmt, ap);
	va_end(ap);
}

void ir_note(ir_ctx *ctx, ir_loc loc, const char *fmt, ...)
{
	if (ctx->max_errors && ctx->n_errors > ctx->max_errors)
		return;
	va_list ap;
	va_start(ap, fmt);
	report(ctx, loc, "note", fmt, ap);
	va_end(ap);
}

/* ---- arena ---------------------------------------------------------------------- */

struct ir_arena_block {
	ir_arena_block *next;
	size_t used, size;
	_Alignas(16) unsigned char data[];
};

void ir_arena_init(ir_arena *a, ir_ctx *ctx)
{
	a->ctx = ctx;
	a->head = NULL;
}

void ir_arena_fini(ir_arena *a)
{
	while (a->head) {
		ir_arena_block *next = a->head->next;
		ir_free(a->ctx, a->head);
		a->head = next;
	}
}

void *ir_arena_alloc(ir_arena *a, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	if (!a->head || a->head->used + size > a->head->size) {
		size_t bsize = size > 65536 ? size : 65536;
		ir_arena_block *b = ir_realloc(a->ctx, NULL, sizeof *b + bsize);
		if (!b)
			return NULL;
		b->next = a->head;
		b->used = 0;
		b->size = bsize;
		a->head = b;
	}
	void *p = a->head->data + a->head->used;
	a->head->used += size;
	memset(p, 0, size);
	return p;
}

char *ir_arena_strndup(ir_arena *a, const char *s, size_t n)
{
	char *p = ir_arena_alloc(a, n + 1);
	if (p)
		memcpy(p, s, n);
	return p;
}

char *ir_arena_strdup(ir_arena *a, const char *s)
{
	return ir_arena_strndup(a, s, strlen(s));
}

/* ---- name index ------------------------------------------------------------- */

/* FNV-1a: where the probe for a name starts. */
static uint32_t name_hash(const char *s)
{
	uint32_t h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

/* The slot holding name, or the empty one where it would go; the index
 * is never more than half full, so the probe ends. */
static ir_name_slot *names_slot(const ir_names *ix, const char *name)
{
	uint32_t mask = ix->cap - 1;
	for (uint32_t h = name_hash(name) & mask;; h = (h + 1) & mask) {
		ir_name_slot *sl = &ix->slots[h];
		if (!sl->name || strcmp(sl->name, name) == 0)
			return sl;
	}
}

static bool names_grow(ir_ctx *ctx, ir_names *ix)
{
	uint32_t cap = ix->cap ? 2 * ix->cap : 64;
	ir_name_slot *old = ix->slots;
	uint32_t old_cap = ix->cap;
	ix->slots = ir_alloc(ctx, (size_t)cap * sizeof *ix->slots);
	if (!ix->slots) {
		ix->slots = old;
		return false;
	}
	ix->cap = cap;
	for (uint32_t i = 0; i < old_cap; i++)
		if (old[i].name)
			*names_slot(ix, old[i].name) = old[i];
	ir_free(ctx, old);
	return true;
}

bool ir_names_put(ir_ctx *ctx, ir_names *ix, const char *name, uint32_t pos)
{
	if (2 * (ix->n + 1) > ix->cap && !names_grow(ctx, ix))
		return false;
	ir_name_slot *sl = names_slot(ix, name);
	if (!sl->name)
		ix->n++;
	*sl = (ir_name_slot){name, pos};
	return true;
}

int32_t ir_names_get(const ir_names *ix, const char *name)
{
	if (!ix->cap)
		return -1;
	const ir_name_slot *sl = names_slot(ix, name);
	return sl->name ? (int32_t)sl->pos : -1;
}

void ir_names_fini(ir_ctx *ctx, ir_names *ix)
{
	ir_free(ctx, ix->slots);
	memset(ix, 0, sizeof *ix);
}

/* ---- module --------------------------------------------------------------------- */

ir_module *ir_module_create(ir_ctx *ctx, const char *name)
{
	ir_module *m = ir_alloc(ctx, sizeof *m);
	if (!m)
		return NULL;
	m->ctx = ctx;
	ir_arena_init(&m->arena, ctx);
	m->name = ir_arena_strdup(&m->arena, name);
	if (!m->name) {
		ir_free(ctx, m);
		return NULL;
	}
	return m;
}

void ir_graph_fini(ir_ctx *ctx, ir_graph *g)
{
	ir_free(ctx, g->nodes);
	ir_free(ctx, g->args);
	memset(g, 0, sizeof *g);
}

void ir_module_destroy(ir_module *m)
{
	if (!m)
		return;
	ir_ctx *ctx = m->ctx;
	for (uint32_t i = 0; i < m->n_funcs; i++)
		ir_graph_fini(ctx, &m->funcs[i]->g);
	ir_free(ctx, m->funcs);
	ir_free(ctx, m->syms);
	ir_free(ctx, m->limits);
	ir_free(ctx, m->params);
	ir_names_fini(ctx, &m->param_names);
	ir_free(ctx, m->consts);
	ir_free(ctx, m->train);
	ir_arena_fini(&m->arena);
	ir_free(ctx, m);
}

int32_t ir_module_find_sym(const ir_module *m, const char *name)
{
	for (uint32_t i = 0; i < m->n_syms; i++)
		if (strcmp(m->syms[i].name, name) == 0)
			return (int32_t)i;
	return -1;
}

int32_t ir_module_add_sym(ir_module *m, const char *name, ir_loc loc)
{
	int32_t i = ir_module_find_sym(m, name);
	if (i >= 0)
		return i;
	if (!ir_grow(m->ctx, (void **)&m->syms, &m->syms_cap, m->n_syms + 1,
		     sizeof *m->syms))
		return -1;
	const char *s = ir_arena_strdup(&m->arena, name);
	if (!s)
		return -1;
	m->syms[m->n_syms] = (ir_sym){.name = s, .loc = loc};
	return (int32_t)m->n_syms++;
}

bool ir_sym_factors(const ir_module *m, int32_t sym, int32_t *out, uint32_t *n,
		    uint32_t cap)
{
	const ir_sym *s = &m->syms[sym];
	uint32_t k = s->n_factors ? s->n_factors : 1;
	if (*n + k > cap)
		return false;
	for (uint32_t i = 0; i < k; i++)
		out[(*n)++] = s->n_factors ? s->factors[i] : sym;
	return true;
}

/* The base factors of syms[0 .. n), sorted; false past the limit. */
static bool sorted_factors(const ir_module *m, const int32_t *syms, uint32_t n,
			   int32_t *out, uint32_t *n_out)
{
	*n_out = 0;
	for (uint32_t i = 0; i < n; i++)
		if (!ir_sym_factors(m, syms[i], out, n_out, IR_SYM_MAX_FACTORS))
			return false;
	for (uint32_t i = 1; i < *n_out; i++)
		for (uint32_t j = i; j > 0 && out[j - 1] > out[j]; j--) {
			int32_t t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	return true;
}

static int32_t find_factors(const ir_module *m, const int32_t *f, uint32_t n)
{
	if (n == 1)
		return f[0];
	for (uint32_t i = 0; i < m->n_syms; i++)
		if (m->syms[i].n_factors == n &&
		    memcmp(m->syms[i].factors, f, n * sizeof *f) == 0)
			return (int32_t)i;
	return -1;
}

int32_t ir_module_find_product_sym(const ir_module *m, const int32_t *syms,
				   uint32_t n)
{
	int32_t f[IR_SYM_MAX_FACTORS];
	uint32_t nf;
	if (n == 0 || !sorted_factors(m, syms, n, f, &nf))
		return -1;
	return find_factors(m, f, nf);
}

/* "B*T" for the factors f[0 .. n), in the module's arena. */
static const char *product_name(ir_module *m, const int32_t *f, uint32_t n)
{
	size_t len = 0;
	for (uint32_t i = 0; i < n; i++)
		len += strlen(m->syms[f[i]].name) + 1;
	char *s = ir_arena_alloc(&m->arena, len);
	if (!s)
		return NULL;
	for (uint32_t i = 0; i < n; i++) {
		if (i)
			strcat(s, "*");
		strcat(s, m->syms[f[i]].name);
	}
	return s;
}

int32_t ir_module_product_sym(ir_module *m, const int32_t *syms, uint32_t n,
			      ir_loc loc)
{
	int32_t f[IR_SYM_MAX_FACTORS];
	uint32_t nf;
	if (n == 0 || !sorted_factors(m, syms, n, f, &nf))
		return -1;
	int32_t i = find_factors(m, f, nf);
	if (i >= 0)
		return i;
	const char *name = product_name(m, f, nf);
	if (!name || !ir_grow(m->ctx, (void **)&m->syms, &m->syms_cap,
			      m->n_syms + 1, sizeof *m->syms))
		return -1;
	ir_sym *s = &m->syms[m->n_syms];
	*s = (ir_sym){.name = name, .loc = loc, .n_factors = nf};
	memcpy(s->factors, f, nf * sizeof *f);
	return (int32_t)m->n_syms++;
}

void ir_module_derive_syms(const ir_module *m, int64_t *values)
{
	for (uint32_t i = 0; i < m->n_syms; i++) {
		const ir_sym *s = &m->syms[i];
		if (!s->n_factors)
			continue;
		int64_t v = 1;
		for (uint32_t k = 0; k < s->n_factors && v; k++)
			if (__builtin_mul_overflow(v, values[s->factors[k]], &v))
				v = 0;
		values[i] = v;
	}
}

static void mark_sym(const ir_module *m, int32_t sym, bool *used)
{
	if (sym < 0 || (uint32_t)sym >= m->n_syms)
		return;
	used[sym] = true;
	for (uint32_t k = 0; k < m->syms[sym].n_factors; k++)
		used[m->syms[sym].factors[k]] = true;
}

void ir_module_used_syms(const ir_module *m, bool *used)
{
	memset(used, 0, m->n_syms * sizeof *used);
	for (uint32_t f = 0; f < m->n_funcs; f++) {
		const ir_graph *g = &m->funcs[f]->g;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const ir_type *t = &g->nodes[i].type;
			for (uint32_t d = 0; d < t->rank; d++)
				mark_sym(m, t->dims[d].sym, used);
		}
	}
	for (uint32_t i = 0; i < m->n_limits; i++)
		mark_sym(m, m->limits[i].size.sym, used);
}

bool ir_module_add_limit(ir_module *m, ir_dim size, int64_t max, ir_loc loc)
{
	for (uint32_t i = 0; i < m->n_limits; i++) {
		ir_limit *l = &m->limits[i];
		if (ir_dim_eq(l->size, size) && l->max == max)
			return true;
	}
	if (!ir_grow(m->ctx, (void **)&m->limits, &m->limits_cap,
		     m->n_limits + 1, sizeof *m->limits))
		return false;
	m->limits[m->n_limits++] = (ir_limit){size, max, loc};
	return true;
}

/* A symbol's size for numel_fits: 0 or less counts as 1. */
typedef int64_t (*sym_size_fn)(const void *arg, int32_t sym);

/* Whether t has at most IR_MAX_NUMEL elements, each symbol's dim at
 * size(arg, sym), without overflow on the way. */
static bool numel_fits(const ir_type *t, sym_size_fn size, const void *arg)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank && i < IR_MAX_RANK; i++) {
		ir_dim d = t->dims[i];
		int64_t v = d.coef < 0 ? -d.coef : d.coef;
		int64_t s = ir_dim_is_static(d) ? 0 : size(arg, d.sym);
		if (s > 0 && __builtin_mul_overflow(v, s, &v))
			return false;
		if (__builtin_mul_overflow(n, v, &n) || n > IR_MAX_NUMEL)
			return false;
	}
	return true;
}

/* The bound sizes: an array by symbol (0: unbound). */
static int64_t bound_size(const void *values, int32_t sym)
{
	return ((const int64_t *)values)[sym];
}

/* A module's symbol fallbacks (a symbol past its table: none). */
static int64_t fallback_size(const void *m, int32_t sym)
{
	const ir_module *mod = m;
	return sym < (int32_t)mod->n_syms ? mod->syms[sym].fallback : 0;
}

/* Writes t's dims at values ("3000000, 3000000, 1") into buf. */
static void format_values(const ir_type *t, const int64_t *values, char *buf,
			  size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < t->rank && i < IR_MAX_RANK && used < size; i++) {
		ir_dim d = t->dims[i];
		int64_t v = d.coef;
		if (!ir_dim_is_static(d) && values[d.sym] > 0 &&
		    __builtin_mul_overflow(d.coef, values[d.sym], &v))
			v = INT64_MAX;
		int w = snprintf(buf + used, size - used, "%s%lld",
				 i ? ", " : "", (long long)v);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}

/* Reports the first node of m whose tensor the sizes in values make
 * larger than IR_MAX_NUMEL elements (what a run-time size such as
 * --sym K=3000000 can do to [K, K, K]; counted past int64, it would
 * wrap in the code that sizes it); true if there is none. */
static bool check_numel(ir_ctx *ctx, const ir_module *m, const int64_t *values)
{
	for (uint32_t f = 0; f < m->n_funcs; f++) {
		const ir_graph *g = &m->funcs[f]->g;
		for (uint32_t i = 0; i < g->n_nodes; i++) {
			const ir_node *n = &g->nodes[i];
			if (numel_fits(&n->type, bound_size, values))
				continue;
			char s[256], v[256];
			ir_type_format(m, &n->type, s, sizeof s);
			format_values(&n->type, values, v, sizeof v);
			ir_error(ctx, n->loc,
				 "%s: a tensor of [%s] = [%s] is more than "
				 "2^40 elements",
				 ir_op_table[n->op].name, s, v);
			return false;
		}
	}
	return true;
}

bool ir_module_check_limits(ir_ctx *ctx, const ir_module *m,
			    const int64_t *values)
{
	bool ok = check_numel(ctx, m, values);
	for (uint32_t i = 0; i < m->n_limits; i++) {
		const ir_limit *l = &m->limits[i];
		int64_t n;
		if (values[l->size.sym] <= 0)
			continue; /* unbound: checked when it is bound */
		if (__builtin_mul_overflow(values[l->size.sym], l->size.coef, &n))
			n = INT64_MAX;
		if (n > l->max) {
			char s[64];
			ir_type t = {.rank = 1, .dims = {l->size}};
			ir_type_format(m, &t, s, sizeof s);
			ir_error(ctx, l->loc,
				 "%s = %lld is more than %lld, the "
				 "most this slice allows",
				 s, (long long)n, (long long)l->max);
			ok = false;
		}
	}
	return ok;
}

int32_t ir_module_find_param(const ir_module *m, const char *name)
{
	return ir_names_get(&m->param_names, name);
}

ir_init_problem ir_init_args_check(ir_init_kind init, double a, double b)
{
	if (!(fabs(a) <= FLT_MAX))
		return IR_INIT_A_NOT_F32;
	if (!(fabs(b) <= FLT_MAX))
		return IR_INIT_B_NOT_F32;
	if (init == IR_INIT_NORMAL && b < 0)
		return IR_INIT_STD_NEGATIVE;
	if (init == IR_INIT_UNIFORM && a > b)
		return IR_INIT_LOW_ABOVE_HIGH;
	if (init == IR_INIT_UNIFORM && !(b - a <= FLT_MAX))
		return IR_INIT_WIDTH_NOT_F32;
	if (init == IR_INIT_XAVIER_UNIFORM && a < 0)
		return IR_INIT_GAIN_NEGATIVE;
	return IR_INIT_ARGS_OK;
}

int32_t ir_module_add_param(ir_module *m, const char *name, const ir_type *t,
			    ir_init_kind init, double a, double b, ir_loc loc)
{
	if (!ir_grow(m->ctx, (void **)&m->params, &m->params_cap,
		     m->n_params + 1, sizeof *m->params))
		return -1;
	const char *s = ir_arena_strdup(&m->arena, name);
	if (!s)
		return -1;
	/* A duplicate (which the verifier reports) keeps finding the first. */
	if (ir_names_get(&m->param_names, s) < 0 &&
	    !ir_names_put(m->ctx, &m->param_names, s, m->n_params))
		return -1;
	m->params[m->n_params] = (ir_param){s, *t, init, a, b, loc};
	return (int32_t)m->n_params++;
}

int32_t ir_module_add_const(ir_module *m, const ir_type *t, const void *data)
{
	int64_t n = ir_type_numel_static(t);
	assert(n >= 0);
	if (!ir_grow(m->ctx, (void **)&m->consts, &m->consts_cap,
		     m->n_consts + 1, sizeof *m->consts))
		return -1;
	size_t bytes = (size_t)n * ir_dtype_size(t->dtype);
	void *p = ir_arena_alloc(&m->arena, bytes ? bytes : 1);
	if (!p)
		return -1;
	if (bytes)
		memcpy(p, data, bytes);
	m->consts[m->n_consts] = (ir_const){*t, p};
	return (int32_t)m->n_consts++;
}

ir_func *ir_module_add_func(ir_module *m, const char *name, ir_loc loc)
{
	if (!ir_grow(m->ctx, (void **)&m->funcs, &m->funcs_cap, m->n_funcs + 1,
		     sizeof *m->funcs))
		return NULL;
	ir_func *f = ir_arena_alloc(&m->arena, sizeof *f);
	if (!f)
		return NULL;
	f->name = ir_arena_strdup(&m->arena, name);
	if (!f->name)
		return NULL;
	f->loc = loc;
	m->funcs[m->n_funcs++] = f;
	return f;
}

ir_func *ir_module_find_func(const ir_module *m, const char *name)
{
	for (uint32_t i = 0; i < m->n_funcs; i++)
		if (strcmp(m->funcs[i]->name, name) == 0)
			return m->funcs[i];
	return NULL;
}

ir_func *ir_module_default_func(const ir_module *m)
{
	for (uint32_t i = 0; i < m->n_funcs; i++)
		if (m->funcs[i]->is_export && m->funcs[i]->example)
			return m->funcs[i];
	for (uint32_t i = 0; i < m->n_funcs; i++)
		if (m->funcs[i]->is_export)
			return m->funcs[i];
	return NULL;
}

const ir_setting *ir_module_find_setting(const ir_module *m, const char *key)
{
	for (uint32_t i = 0; i < m->n_train; i++)
		if (strcmp(m->train[i].key, key) == 0)
			return &m->train[i];
	return NULL;
}

const ir_value *ir_setting_arg(const ir_setting *s, const char *key)
{
	const ir_value *v = s ? &s->value : NULL;
	for (uint32_t i = 0; v && v->kind == IR_VAL_CALL && i < v->n_args; i++)
		if (strcmp(v->args[i].key, key) == 0)
			return &v->args[i].value;
	return NULL;
}

/* ---- graphs ------------------------------------------------------------------------ */

ir_id ir_graph_append(ir_ctx *ctx, ir_graph *g, ir_op op, const ir_id *args,
		      uint32_t n_args, const ir_attr *attr, const ir_type *type,
		      ir_loc loc)
{
	if (!ir_grow(ctx, (void **)&g->nodes, &g->nodes_cap, g->n_nodes + 1,
		     sizeof *g->nodes) ||
	    !ir_grow(ctx, (void **)&g->args, &g->args_cap, g->n_args + n_args,
		     sizeof *g->args))
		return IR_NONE;
	ir_node *n = &g->nodes[g->n_nodes];
	memset(n, 0, sizeof *n);
	n->op = op;
	n->first_arg = g->n_args;
	n->n_args = n_args;
	if (n_args)
		memcpy(g->args + g->n_args, args, n_args * sizeof *args);
	g->n_args += n_args;
	if (attr)
		n->attr = *attr;
	if (type)
		n->type = *type;
	n->loc = loc;
	return g->n_nodes++;
}

ir_id ir_build(ir_module *m, ir_func *f, ir_op op, const ir_id *args,
	       uint32_t n_args, const ir_attr *attr, const ir_type *type,
	       ir_loc loc)
{
	ir_graph *g = &f->g;
	ir_id id = ir_graph_append(m->ctx, g, op, args, n_args, attr, type, loc);
	if (id == IR_NONE) {
		ir_error(m->ctx, loc, "out of memory");
		return IR_NONE;
	}
	if (!ir_infer_type(m->ctx, m, g, &g->nodes[id])) {
		/* Drop the node so the graph stays well formed. */
		g->n_args -= n_args;
		g->n_nodes--;
		return IR_NONE;
	}
	return id;
}

/* ---- suggestions ------------------------------------------------------------ */

#define SUGGEST_MAX_LEN 64

/* Levenshtein distance of a and b (each at most SUGGEST_MAX_LEN). */
static size_t edit_distance(const char *a, size_t na, const char *b, size_t nb)
{
	size_t row[SUGGEST_MAX_LEN + 1];
	for (size_t j = 0; j <= nb; j++)
		row[j] = j;
	for (size_t i = 1; i <= na; i++) {
		size_t diag = row[0];
		row[0] = i;
		for (size_t j = 1; j <= nb; j++) {
			size_t up = row[j];
			size_t best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[nb];
}

void ir_suggest_init(ir_suggest *s, const char *word)
{
	size_t n = strlen(word);
	s->word = word;
	s->best = NULL;
	s->dist = n < 3   ? 0
		  : n < 5 ? 2
		  : n < 9 ? 3
			  : 4; /* one over the allowed */
}

void ir_suggest_offer(ir_suggest *s, const char *candidate)
{
	size_t na = strlen(s->word), nb = strlen(candidate);
	if (na > SUGGEST_MAX_LEN || nb > SUGGEST_MAX_LEN ||
	    strcmp(s->word, candidate) == 0)
		return;
	size_t gap = na > nb ? na - nb : nb - na;
	if (gap >= s->dist)
		return;
	size_t d = edit_distance(s->word, na, candidate, nb);
	if (d < s->dist) {
		s->dist = d;
		s->best = candidate;
	}
}

bool ir_type_numel_fits(const ir_module *m, const ir_type *t)
{
	return numel_fits(t, fallback_size, m);
}

void ir_type_format(const ir_module *m, const ir_type *t, char *buf, size_t size)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; i < t->rank && used < size; i++) {
		ir_dim d = t->dims[i];
		const char *sep = i ? ", " : "";
		int w;
		if (ir_dim_is_static(d))
			w = snprintf(buf + used, size - used, "%s%lld", sep,
				     (long long)d.coef);
		else if (d.coef == 1)
			w = snprintf(buf + used, size - used, "%s%s", sep,
				     m->syms[d.sym].name);
		else
			w = snprintf(buf + used, size - used, "%s%lld*%s", sep,
				     (long long)d.coef, m->syms[d.sym].name);
		if (w < 0)
			break;
		used += (size_t)w;
	}
}
