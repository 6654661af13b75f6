/*
 * ir.h - attnc's graph IR: a module of parameters, constants, symbols and
 * exported functions, each function a graph of nodes in SSA form.
 *
 * Nodes live in an array in their graph and refer to each other by 32-bit
 * index (ir_id). Every node has a dtype, a shape whose dimensions are
 * static or a multiple of one run-time symbol (B, 4*B, V, where a symbol
 * may be a product of others: 2*B*T), and the `.g`
 * source location it came from. Analyses keep their results in side
 * arrays indexed by ir_id.
 *
 * Shape letters used in comments across the project:
 *   B batch, T steps, Q queries, K keys, D model width, H heads, V vocabulary.
 *
 * Memory: strings, constant data and other immutable pieces live in the
 * module's arena (ir_arena) and die with the module. Node and operand arrays
 * grow through the context's allocation hook (ir_ctx.alloc).
 */
#ifndef ATTNC_IR_H
#define ATTNC_IR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define IR_MAX_RANK 6
/* The most operands the frontend gives one concat: a wider concat (a
 * stack of 100 layers' caches) is built as a concat of concats of at most
 * this many, the same values, since the code generator's kernels take at
 * most 64 operands. */
#define IR_CONCAT_MAX_ARGS 32
#define IR_NONE UINT32_MAX /* "no node" */

typedef uint32_t ir_id;

/* ---- operations (ops.def) ---------------------------------------------- */

typedef enum ir_attr_kind {
	IR_ATTR_NONE,
	IR_ATTR_INPUT,   /* input: index of the function argument */
	IR_ATTR_PARAM,   /* param: index into module params */
	IR_ATTR_CONST,   /* const: index into module consts */
	IR_ATTR_MATMUL,  /* matmul: transpose flags */
	IR_ATTR_REDUCE,  /* sum/mean/max/argmax: axes bitmask, keepdim */
	IR_ATTR_FILL,    /* masked_softmax: value written at masked places */
	IR_ATTR_EPS,     /* layer_norm: epsilon */
	IR_ATTR_DROPOUT, /* dropout: probability and random stream */
	IR_ATTR_PERM,    /* permute: output axis i reads input axis perm[i] */
	IR_ATTR_SLICE,   /* slice: axis, start, end, step */
	IR_ATTR_AXIS,    /* concat/sort: one axis */
	IR_ATTR_REPS,    /* repeat: repetitions per axis */
	IR_ATTR_INTERLEAVE, /* repeat_interleave: axis and count */
	IR_ATTR_ATTENTION,  /* fused_attention(_grad): scale, fill, dropout */
	IR_ATTR_ARANGE,     /* arange: first value and step */
} ir_attr_kind;

enum {
	IR_OPF_LEAF = 1u << 0,          /* no operands */
	IR_OPF_EW = 1u << 1,            /* elementwise */
	IR_OPF_BCAST = 1u << 2,         /* operands broadcast */
	IR_OPF_NODIFF = 1u << 3,        /* has no gradient */
	IR_OPF_NODIFF_IF_INT = 1u << 4, /* no gradient when input is integer */
	IR_OPF_VIEW = 1u << 5, /* a pure change of layout, no data moves */
	/* Its kernel reads operand 0 by element through the operand's fused
	 * tree, so elementwise fusion (passes/fuse_ew.c) may compute that
	 * operand's producers inside it. */
	IR_OPF_FUSES_ARG0 = 1u << 6,
	/* Elementwise at the cost of a polynomial or a square root per
	 * element (exp, log, tanh, sigmoid, sin, cos, sqrt, erf, pow): fusion
	 * does not compute it again in each reader, and the schedule's cost
	 * model charges it. */
	IR_OPF_COSTLY = 1u << 7,
	/* A masked loss's gradient: a row whose weight g is 0 (a padding
	 * token) is all zeros, so the sgemm of a matmul that reads it leaves
	 * such rows out (codegen/cg_gemm.h, skip_zero_k and skip_zero_m). */
	IR_OPF_ZERO_ROWS = 1u << 8,
	/* Elementwise and defined on i32 operands too (neg, abs, relu, add,
	 * sub, mul, maximum, minimum; comparisons and select take either
	 * dtype anyway); the others are f32 only. */
	IR_OPF_INT = 1u << 9,
	/* An `example` may compute it at compile time (frontend/example.c). */
	IR_OPF_EXAMPLE = 1u << 10,
	/* Identities passes/simplify.c applies: x op 0 = x, x op 1 = x (also
	 * 0 op x, 1 op x when the op commutes), op(op(x)) = x. */
	IR_OPF_UNIT_0 = 1u << 11,
	IR_OPF_UNIT_1 = 1u << 12,
	IR_OPF_COMMUTES = 1u << 13,
	IR_OPF_SELF_INVERSE = 1u << 14,
	/* Piecewise: the op's piece (or its derivative's) changes where a
	 * value crosses 0: operand 0 (relu, abs; sqrt's derivative is
	 * singular there), operand 1 (div's divisor), or the difference of
	 * the two operands (maximum, minimum, the comparisons), for a
	 * reduction of its operand and its result (max). --gradcheck keeps
	 * its finite differences away from those points (docs/training.md). */
	IR_OPF_KINK_ARG0 = 1u << 15,
	IR_OPF_KINK_ARG1 = 1u << 16,
	IR_OPF_KINK_DIFF = 1u << 17,
};

/* The kind of rule an op follows. The elementwise families share one
 * shape rule, interpreter kernel and lowering each, and within a family
 * the op picks its scalar function (ir_scalar.h) and vector form. */
typedef enum ir_op_family {
	IR_FAM_LEAF,    /* input, param, const */
	IR_FAM_UNARY,   /* elementwise of one operand, dtype kept */
	IR_FAM_CAST,    /* elementwise, to the node's dtype */
	IR_FAM_BINARY,  /* elementwise arithmetic of two broadcast operands */
	IR_FAM_COMPARE, /* elementwise comparison of two, i32 0/1 */
	IR_FAM_SELECT,  /* select(cond, a, b) */
	IR_FAM_MATMUL,
	IR_FAM_REDUCE, /* sum, mean, max, argmax over axes */
	IR_FAM_NORM,   /* softmaxes, layer_norm, dropout: along the last axis */
	IR_FAM_INDEX,  /* embedding, one_hot, embedding_grad, sort */
	IR_FAM_LAYOUT, /* reshape, broadcast, permute, slice, concat, repeats */
	IR_FAM_LOSS,   /* mse_loss and the cross-entropies */
	IR_FAM_FUSED,  /* the fused attention kernels */
} ir_op_family;

typedef enum ir_op {
#define X(e, name, n_in, attr, fam, flags) IR_OP_##e,
#include "ops.def"
#undef X
	IR_OP_COUNT
} ir_op;

typedef struct ir_op_info {
	const char *name;
	int n_in; /* -1: variadic */
	ir_attr_kind attr;
	ir_op_family family;
	unsigned flags;
} ir_op_info;

extern const ir_op_info ir_op_table[IR_OP_COUNT];

/* Looks an op up by its printed name; returns IR_OP_COUNT if unknown. */
ir_op ir_op_from_name(const char *name);
/* The op a gradient op differentiates (layer_norm_grad: layer_norm,
 * cross_entropy_with_grad: cross_entropy), what a message about it
 * names; op itself for the others. */
ir_op ir_op_differentiated(ir_op op);
/* Whether op is a gradient op (ir_op_differentiated names another). */
bool ir_op_is_gradient(ir_op op);

/* ---- types -------------------------------------------------------------- */

typedef enum ir_dtype {
	IR_F32,
	IR_I32,
	IR_F64, /* only inside the interpreter's float64 mode and constants */
} ir_dtype;

const char *ir_dtype_name(ir_dtype t);

/* One dimension: coef if sym < 0, else coef * value of module symbol sym. */
typedef struct ir_dim {
	int64_t coef;
	int32_t sym;
} ir_dim;

typedef struct ir_type {
	ir_dtype dtype;
	uint8_t rank;
	ir_dim dims[IR_MAX_RANK];
} ir_type;

static inline ir_dim ir_dim_static(int64_t n)
{
	return (ir_dim){n, -1};
}
static inline bool ir_dim_is_static(ir_dim d)
{
	return d.sym < 0;
}
static inline bool ir_dim_eq(ir_dim a, ir_dim b)
{
	return a.coef == b.coef && (a.coef == 0 || a.sym == b.sym);
}
bool ir_type_eq(const ir_type *a, const ir_type *b);
/* The same dims, whatever the dtypes; t's dims are dims[0 .. rank). */
bool ir_shape_eq(const ir_type *a, const ir_type *b);
bool ir_shape_is(const ir_type *t, int rank, const ir_dim *dims);
/* Number of elements if every dim is static, else -1. */
int64_t ir_type_numel_static(const ir_type *t);

/* ---- source locations and diagnostics --------------------------------- */

typedef struct ir_loc {
	uint32_t file;      /* index into ctx->files; 0 = no location */
	uint32_t line, col; /* 1-based; 0 = unknown */
	uint32_t at;        /* the call it was elaborated in: ctx->calls[at]
			     * (0 = none), kept wherever the loc is copied */
} ir_loc;

/* A call the front end elaborated a function's body for: where it was
 * called (loc, itself with the call around it) and what. Nodes of a
 * prelude function (linear, embed, ...) keep their loc in prelude.g and
 * reach the user's line through these. */
typedef struct ir_call {
	ir_loc loc;
	uint32_t callee; /* its name: ctx->callees[callee] */
	bool is_prelude; /* the callee is defined in the prelude */
} ir_call;

typedef struct ir_source {
	char *name; /* as given on the command line */
	char *text; /* NUL-terminated contents */
	size_t len;
} ir_source;

/* Allocation hook: realloc semantics (size 0 frees). Tests install a
 * failing one; every allocation of the compiler goes through it. */
typedef void *(*ir_alloc_fn)(void *ud, void *ptr, size_t size);

/* The context every function of the compiler takes first: allocation,
 * the loaded source files (index 0 is a dummy) and the diagnostics. */
typedef struct ir_ctx {
	ir_alloc_fn alloc;
	void *alloc_ud;
	bool is_oom; /* an allocation failed; results are invalid */

	ir_source *files;
	uint32_t n_files, files_cap;
	ir_call *calls; /* index 0 is a dummy (ir_loc.at == 0: none) */
	uint32_t n_calls, calls_cap;
	char **callees; /* the functions' names the calls name, once each */
	uint32_t n_callees, callees_cap;

	FILE *diag_out; /* where diagnostics go (stderr by default) */
	int n_errors, n_warnings;
	int max_errors; /* stop reporting after this many (0 = no limit) */
	/* While the front end runs a prelude def that the user's file
	 * called: that call and the def's name (NULL otherwise). An error
	 * located outside the call's file is then reported at the call,
	 * with a note at the prelude's line: the user's line comes first. */
	ir_loc user_call;
	const char *user_callee;
} ir_ctx;

void ir_ctx_init(ir_ctx *ctx);
void ir_ctx_fini(ir_ctx *ctx);

void *ir_alloc(ir_ctx *ctx, size_t size); /* zeroed; NULL on failure */
void *ir_realloc(ir_ctx *ctx, void *ptr, size_t size);
void ir_free(ir_ctx *ctx, void *ptr);
/* Grows *arr (elements of elem_size) so that it holds at least need;
 * returns false on allocation failure. */
bool ir_grow(ir_ctx *ctx, void **arr, uint32_t *cap, uint32_t need,
	     size_t elem_size);

/* Registers a source file (the text is copied); returns its index. */
uint32_t ir_ctx_add_source(ir_ctx *ctx, const char *name, const char *text,
			   size_t len);
/* The largest source file (.g or .ir) attnc reads: 70 times the largest
 * model's IR, and small enough that compiling any input of that size
 * stays within a few hundred MB (memory is linear in the input). */
#define IR_MAX_SOURCE_BYTES (16u << 20)

/* Reads a file from disk and registers it; returns 0 and reports an error
 * (without location) if it cannot be read or is longer than
 * IR_MAX_SOURCE_BYTES (it stops reading there, so a device file that
 * never ends is refused too). */
uint32_t ir_ctx_load_source(ir_ctx *ctx, const char *path);

/* Registers a call (see ir_call); returns its index for ir_loc.at, or 0
 * when out of memory (the loc then names no call). */
uint32_t ir_ctx_add_call(ir_ctx *ctx, ir_loc loc, const char *callee,
			 bool is_prelude);
/* The call of a prelude function that loc is inside (its body's line),
 * or NULL: loc is the user's own line, or names no call. Each call's loc
 * names an earlier call, so following c->loc ends. */
const ir_call *ir_loc_prelude_call(const ir_ctx *ctx, ir_loc loc);
/* The line of the user's model that loc stands for: loc itself, or for
 * a loc inside a prelude function, the user's call of it. */
ir_loc ir_loc_user(const ir_ctx *ctx, ir_loc loc);

/* Reports "file:line:col: error: msg", then the source line and a caret.
 * With loc.file == 0 prints "attnc: error: msg". A loc inside a prelude
 * def is reported at the user's line that called it (ir_loc_user, or
 * ctx->user_call while the front end runs the def), then a note at the
 * prelude's line: "here, in 'embed' (defined in the prelude)". */
void ir_error(ir_ctx *ctx, ir_loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ir_verror(ir_ctx *ctx, ir_loc loc, const char *fmt, va_list ap);
void ir_warning(ir_ctx *ctx, ir_loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A "note:" attached to the previous diagnostic. */
void ir_note(ir_ctx *ctx, ir_loc loc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ---- arena --------------------------------------------------------------- */

typedef struct ir_arena_block ir_arena_block;
typedef struct ir_arena {
	ir_ctx *ctx;
	ir_arena_block *head;
} ir_arena;

void ir_arena_init(ir_arena *a, ir_ctx *ctx);
void ir_arena_fini(ir_arena *a);                /* frees everything at once */
void *ir_arena_alloc(ir_arena *a, size_t size); /* zeroed, 16-aligned */
char *ir_arena_strdup(ir_arena *a, const char *s);
char *ir_arena_strndup(ir_arena *a, const char *s, size_t n);

/* ---- attributes ------------------------------------------------------------ */

/* Which variant is live is given by ir_op_table[op].attr. */
typedef union ir_attr {
	uint32_t input_index; /* IR_ATTR_INPUT */
	uint32_t param_index; /* IR_ATTR_PARAM */
	uint32_t const_index; /* IR_ATTR_CONST */
	struct {
		bool ta, tb;
	} matmul; /* IR_ATTR_MATMUL */
	struct {
		uint32_t axes;
		bool keepdim;
	} reduce;    /* IR_ATTR_REDUCE */
	double fill; /* IR_ATTR_FILL */
	double eps;  /* IR_ATTR_EPS */
	struct {
		double p;
		uint32_t stream;
	} dropout; /* IR_ATTR_DROPOUT */
	struct {
		uint8_t perm[IR_MAX_RANK];
	} permute; /* IR_ATTR_PERM */
	struct {
		int32_t axis;
		int64_t start, end, step;
	} slice;      /* IR_ATTR_SLICE */
	int32_t axis; /* IR_ATTR_AXIS */
	struct {
		int64_t reps[IR_MAX_RANK];
	} repeat; /* IR_ATTR_REPS */
	struct {
		int32_t axis;
		int64_t n;
	} interleave; /* IR_ATTR_INTERLEAVE */
	/* IR_ATTR_ATTENTION: scores scaled by scale, positions >= valid set
	 * to fill, dropout p (0 = none) with its random stream; heads >= 1
	 * heads side by side in the operands' last axis (docs/ops.md). */
	struct {
		double scale, fill, p;
		uint32_t stream, heads;
	} attention;
	struct {
		double start, step;
	} arange; /* IR_ATTR_ARANGE */
} ir_attr;

/* The random stream of attributes a of kind kind (the op's
 * ir_op_table[].attr), and its dropout probability in *p; NULL (and
 * *p = 0) for kinds that draw no random bits. */
uint32_t *ir_attr_stream(ir_attr_kind kind, ir_attr *a, double *p);

/* ---- nodes and graphs ------------------------------------------------------- */

typedef struct ir_node {
	ir_op op;
	ir_type type;
	uint32_t first_arg; /* operands: graph->args[first_arg .. +n_args] */
	uint32_t n_args;
	ir_attr attr;
	ir_loc loc;
} ir_node;

typedef struct ir_graph {
	ir_node *nodes;
	uint32_t n_nodes, nodes_cap;
	ir_id *args; /* operand pool */
	uint32_t n_args, args_cap;
} ir_graph;

static inline const ir_id *ir_node_args(const ir_graph *g, const ir_node *n)
{
	return g->args + n->first_arg;
}
static inline ir_id ir_arg(const ir_graph *g, ir_id node, uint32_t i)
{
	return g->args[g->nodes[node].first_arg + i];
}

/* ---- module ------------------------------------------------------------------ */

#define IR_SYM_MAX_FACTORS 4

/* A run-time size. A base symbol (n_factors 0) is bound from the inputs,
 * the command line or its fallback; a derived one is the product of
 * n_factors >= 2 base symbols (factors sorted by index, repeats allowed),
 * its value computed from theirs (ir_module_derive_syms) and its name
 * their names joined by '*' ("B*T"), so that B*T and T*B are one symbol
 * and a dim holds B*T as one symbol times a coefficient. */
typedef struct ir_sym {
	const char *name; /* B, V_src, B*T, ... */
	int64_t fallback; /* value when nothing binds it (`dim V = 184`); 0 = none */
	ir_loc loc;
	uint32_t n_factors;
	int32_t factors[IR_SYM_MAX_FACTORS];
} ir_sym;

/* A bound a run-time size must keep: size (coef * symbol) <= max, as a
 * slice of a static axis with a run-time length needs; checked whenever
 * symbols are bound (ir_module_check_limits), reported at loc. */
typedef struct ir_limit {
	ir_dim size;
	int64_t max;
	ir_loc loc;
} ir_limit;

typedef enum ir_init_kind {
	IR_INIT_ZEROS,
	IR_INIT_ONES,
	IR_INIT_NORMAL,         /* a = mean, b = std */
	IR_INIT_UNIFORM,        /* a = low, b = high */
	IR_INIT_XAVIER_UNIFORM, /* fans from the last two dims; a = gain */
} ir_init_kind;

typedef struct ir_param {
	const char *name; /* dotted path: encoder.0.attention.W_q */
	ir_type type;
	ir_init_kind init;
	double a, b;
	ir_loc loc;
} ir_param;

/* A compile-time tensor. data holds numel elements of dtype (f32, i32 or
 * f64), row-major; every dim of type is static. */
typedef struct ir_const {
	ir_type type;
	void *data;
} ir_const;

typedef struct ir_func {
	const char *name;
	bool is_export;
	ir_graph g;
	ir_id *inputs; /* INPUT nodes in argument order */
	const char **input_names;
	uint32_t n_inputs;
	ir_id *outputs; /* returned values */
	const char **output_names;
	uint32_t n_outputs;
	uint32_t *example; /* n_inputs const indices, or NULL if no example */
	ir_loc loc;
} ir_func;

/* One setting of the train block: key = number | string | name(k = v, ...). */
typedef struct ir_setting ir_setting;
typedef enum ir_value_kind {
	IR_VAL_NUM,
	IR_VAL_STR,
	IR_VAL_CALL
} ir_value_kind;
typedef struct ir_value {
	ir_value_kind kind;
	double num;       /* IR_VAL_NUM */
	const char *str;  /* IR_VAL_STR: the string; IR_VAL_CALL: the name */
	ir_setting *args; /* IR_VAL_CALL: keyword arguments */
	uint32_t n_args;
} ir_value;
struct ir_setting {
	const char *key;
	ir_value value;
	ir_loc loc;
};

/* A hash index from names to positions in an array its user keeps, so
 * that lookups stay O(1) with 10^5 names. The names are not copied:
 * they must outlive the index. Zero-initialized is empty. */
typedef struct ir_name_slot {
	const char *name; /* NULL: empty */
	uint32_t pos;
} ir_name_slot;

typedef struct ir_names {
	ir_name_slot *slots;
	uint32_t n, cap; /* cap: a power of two, or 0 */
} ir_names;

/* Enters name at pos, replacing the position of an equal name; false
 * (and ctx->is_oom) when out of memory. */
bool ir_names_put(ir_ctx *ctx, ir_names *ix, const char *name, uint32_t pos);
/* The position of name, or -1. */
int32_t ir_names_get(const ir_names *ix, const char *name);
void ir_names_fini(ir_ctx *ctx, ir_names *ix);

typedef struct ir_module {
	ir_ctx *ctx;
	ir_arena arena;
	const char *name;

	ir_sym *syms;
	uint32_t n_syms, syms_cap;
	ir_limit *limits;
	uint32_t n_limits, limits_cap;
	ir_param *params;
	uint32_t n_params, params_cap;
	ir_names param_names; /* kept by ir_module_add_param */
	ir_const *consts;
	uint32_t n_consts, consts_cap;
	ir_func **funcs;
	uint32_t n_funcs, funcs_cap;
	ir_setting *train; /* the train block, in file order */
	uint32_t n_train, train_cap;
	uint32_t n_dropout_streams; /* next free dropout stream id */
} ir_module;

ir_module *ir_module_create(ir_ctx *ctx, const char *name);
void ir_module_destroy(ir_module *m);

/* Returns the symbol's index, adding it if new. */
int32_t ir_module_add_sym(ir_module *m, const char *name, ir_loc loc);
int32_t ir_module_find_sym(const ir_module *m, const char *name);
/* The symbol that is the product of syms[0 .. n) (each base or derived):
 * one of them when n == 1, else the derived symbol of their base factors,
 * added (at loc) if new. Returns -1 on OOM or if it would have more than
 * IR_SYM_MAX_FACTORS factors. ir_module_find_product_sym only looks it up
 * (-1 if absent). */
int32_t ir_module_product_sym(ir_module *m, const int32_t *syms, uint32_t n,
			      ir_loc loc);
int32_t ir_module_find_product_sym(const ir_module *m, const int32_t *syms,
				   uint32_t n);
/* Appends sym's base factors (itself if base) to out[*n ..); false if
 * that would pass cap. */
bool ir_sym_factors(const ir_module *m, int32_t sym, int32_t *out, uint32_t *n,
		    uint32_t cap);
/* Sets each derived symbol's value in values (m->n_syms entries) to the
 * product of its factors' values: 0 (unbound) when a factor is 0 or the
 * product overflows. Call after binding the base symbols. */
void ir_module_derive_syms(const ir_module *m, int64_t *values);
/* Sets used[s] (m->n_syms entries) for every symbol some value's type,
 * or a limit, depends on: itself or, for a derived one, its factors. A
 * `dim` nothing uses needs no value. */
void ir_module_used_syms(const ir_module *m, bool *used);
/* Adds a limit (size <= max, reported at loc); false on OOM. */
bool ir_module_add_limit(ir_module *m, ir_dim size, int64_t max, ir_loc loc);
/* Reports every limit that values break, at the limit's location (an
 * unbound symbol, value 0, breaks none), and the first tensor of a
 * function that values make more than IR_MAX_NUMEL elements, at its
 * node's location; true if none is broken. */
bool ir_module_check_limits(ir_ctx *ctx, const ir_module *m,
			    const int64_t *values);
/* What is wrong with initializer init's arguments a and b, the first
 * found in this order, or IR_INIT_ARGS_OK: each must lie within f32's
 * range, normal's std be >= 0, uniform's low <= high with high - low
 * within f32's range, xavier_uniform's gain >= 0 (an argument an
 * initializer does not take is 0). The one rule for the front end, which
 * says it at the argument, and the verifier, for IR read from text. */
typedef enum ir_init_problem {
	IR_INIT_ARGS_OK,
	IR_INIT_A_NOT_F32,
	IR_INIT_B_NOT_F32,
	IR_INIT_STD_NEGATIVE,
	IR_INIT_LOW_ABOVE_HIGH,
	IR_INIT_WIDTH_NOT_F32,
	IR_INIT_GAIN_NEGATIVE,
} ir_init_problem;
ir_init_problem ir_init_args_check(ir_init_kind init, double a, double b);
/* Adds a parameter (name copied); returns its index or -1 on OOM. */
int32_t ir_module_add_param(ir_module *m, const char *name, const ir_type *t,
			    ir_init_kind init, double a, double b, ir_loc loc);
int32_t ir_module_find_param(const ir_module *m, const char *name);
/* Adds a constant; copies data (numel * dtype size bytes). -1 on OOM. */
int32_t ir_module_add_const(ir_module *m, const ir_type *t, const void *data);
ir_func *ir_module_add_func(ir_module *m, const char *name, ir_loc loc);
ir_func *ir_module_find_func(const ir_module *m, const char *name);
/* The entry point --jit/--interp run: the first export with an example,
 * else the first export; NULL if none. */
ir_func *ir_module_default_func(const ir_module *m);
const ir_setting *ir_module_find_setting(const ir_module *m, const char *key);
/* The value of keyword argument key of a setting name(key = v, ...), or
 * NULL (no such argument, not a call, or s NULL). */
const ir_value *ir_setting_arg(const ir_setting *s, const char *key);

size_t ir_dtype_size(ir_dtype t);

/* ---- building graphs ------------------------------------------------------------ */

/* Appends a node with the given operands and attributes; its type is
 * inferred by the op's shape rule (ir_infer_type). On a shape or type
 * error, reports it at loc naming the op and returns IR_NONE. For leaves,
 * RESHAPE and BROADCAST, *type gives the result type (NULL otherwise). */
ir_id ir_build(ir_module *m, ir_func *f, ir_op op, const ir_id *args,
	       uint32_t n_args, const ir_attr *attr, const ir_type *type,
	       ir_loc loc);

/* Appends a node without inference (the reader and passes, which know the
 * type). Returns IR_NONE on OOM. */
ir_id ir_graph_append(ir_ctx *ctx, ir_graph *g, ir_op op, const ir_id *args,
		      uint32_t n_args, const ir_attr *attr, const ir_type *type,
		      ir_loc loc);
void ir_graph_fini(ir_ctx *ctx, ir_graph *g);

/* The shape rule of every op: computes node->type from its operands'
 * types and attributes. Returns false and reports an error at the node's
 * location if the operands do not fit. For RESHAPE and BROADCAST the
 * node's type must already hold the target (checked, -1 dims resolved);
 * for leaves the type is kept as is. */
bool ir_infer_type(ir_ctx *ctx, const ir_module *m, const ir_graph *g,
		   ir_node *node);

/* The number of elements of t as one dim, if it is one: false when two
 * or more of its dims are run-time sizes whose product is not a symbol of
 * m (m NULL: no products), as [B, T, 4] without a B*T. */
bool ir_type_numel_dim(const ir_module *m, const ir_type *t, ir_dim *out);
/* The length of fused_attention_grad's packed result for operands of
 * types q, k, v: numel(q) + numel(k) + numel(v) as one dim. False if the
 * sum is not one (it would involve two run-time sizes that are not one
 * product symbol of m, or a run-time size and a static remainder). */
bool ir_attention_grad_size(const ir_module *m, const ir_type *q,
			    const ir_type *k, const ir_type *v, ir_dim *out);
/* The length of fused_additive_attention_grad's packed result for
 * operands of types qp (N, Q, H), kp (N, K, H) and v (N, K, dv):
 * numel(qp) + numel(kp) + N*H + numel(v) as one dim (dwv's N per-batch
 * parts sit between dkp and dv). False if the sum is not one, as for
 * ir_attention_grad_size. */
bool ir_additive_grad_size(const ir_module *m, const ir_type *qp,
			   const ir_type *kp, const ir_type *v, ir_dim *out);

/* "Did you mean": the candidate closest to word in edit distance, kept
 * while candidates are offered one by one, among those near enough to
 * be a typo (none for a word of 1 or 2 letters, at most 1 edit for 3 or
 * 4 letters, 2 for 5 to 8, 3 for more). */
typedef struct ir_suggest {
	const char *word;
	const char *best; /* NULL: none near enough yet */
	size_t dist;
} ir_suggest;

void ir_suggest_init(ir_suggest *s, const char *word);
void ir_suggest_offer(ir_suggest *s, const char *candidate);

/* The most elements a tensor may have; more cannot be sized in bytes
 * without overflow on the way (the frontend's own bound is the same). */
#define IR_MAX_NUMEL (INT64_C(1) << 40)

/* True if t has at most IR_MAX_NUMEL elements, its symbols at their
 * fallbacks (1 for a symbol without one). */
bool ir_type_numel_fits(const ir_module *m, const ir_type *t);

/* Writes a dims list like "B, 10, 32" (4*B for coef*sym) into buf. */
void ir_type_format(const ir_module *m, const ir_type *t, char *buf,
		    size_t size);

/* ---- printing, reading, verifying --------------------------------------------- */

/* Prints the module as text that ir_module_read parses back to the same
 * module (docs/ir.md describes the format). */
void ir_module_print(const ir_module *m, FILE *out);
/* Parses the printed form; source_file is a ctx source index for errors.
 * Returns NULL after reporting errors. */
ir_module *ir_module_read(ir_ctx *ctx, uint32_t source_file);

/* Checks every invariant of the IR (operand order, counts, attributes,
 * types equal to what the shape rules give, outputs, indices in range).
 * Reports each violation; returns true if the module is well formed. */
bool ir_module_verify(const ir_module *m);

#endif
