/*
 * elab.h - the elaborator's values, scopes and shared helpers.
 *
 * Elaboration runs a parsed .g file at compile time, as tracing runs a
 * PyTorch model: every expression evaluates to a value (a number, a dim,
 * a tensor node of the function being built, a list, ...), calls of defs
 * are inlined, loops unrolled, and tensor operations append IR nodes whose
 * shapes the op rules check as they are built. The pieces:
 *
 *   elab.c      declarations, exported functions, statements, def calls,
 *               parameters, the train block
 *   expr.c      expressions: names, operators, indexing, conversions
 *   builtins.c  the built-in functions (ops and compile-time helpers)
 *   consts.c    constant tensors: constructors and their random numbers
 *   example.c   `example` inputs, evaluated to constants in C
 *
 * An error is reported once, where it is found; the value becomes FE_V_ERR,
 * which every later use passes on silently, so one mistake gives one
 * message.
 */
#ifndef ATTNC_FE_ELAB_H
#define ATTNC_FE_ELAB_H

#include "syntax.h"

#define FE_MAX_CALL_DEPTH 200
#define FE_MAX_NODES 1000000u /* nodes in one function */
#define FE_MAX_STEPS 5000000u /* statements executed in one compile */
#define FE_MAX_CONST_NUMEL (1 << 24)
#define FE_MAX_NUMEL (1ll << 40)    /* static elements of any tensor */
#define FE_MAX_EVAL_DEPTH 1000      /* expressions being evaluated, nested */
#define FE_MAX_SCRATCH (256u << 20) /* bytes of lists and strings */
#define FE_MAX_BUILTIN_ARGS 6

typedef enum fe_vkind {
	FE_V_ERR,  /* an error was reported; absorbs later errors */
	FE_V_NONE, /* None, and an optional argument not given */
	FE_V_VOID, /* what a def without `return` gives (def says which) */
	FE_V_NUM,
	FE_V_DIM,    /* coef * symbol + dim_off, never static */
	FE_V_TENSOR, /* a node of the function being built */
	FE_V_LIST,
	FE_V_STR,
	FE_V_DTYPE,
	FE_V_BOOL,
	FE_V_DEF,     /* a def, not called */
	FE_V_BUILTIN, /* a built-in function, not called */
} fe_vkind;

typedef struct fe_value fe_value;
typedef struct fe_builtin fe_builtin;

struct fe_value {
	fe_vkind kind;
	union {
		struct {
			bool is_int;
			int64_t i; /* when is_int */
			double r;  /* always (i converted when is_int) */
		} num;
		ir_dim dim;
		ir_id tensor;
		struct {
			fe_value *items;
			uint32_t n;
		} list;
		const char *str;
		ir_dtype dtype;
		bool b;
		const fe_def *def; /* DEF, VOID */
		const fe_builtin *builtin;
	};
	/* FE_V_DIM: a static offset, as in `T + 1` (a bound of arange or
	 * a slice); a dim of a shape has none. */
	int64_t dim_off;
};

typedef struct fe_binding {
	const char *name;
	fe_value v;
	ir_loc loc;
	bool is_prelude;
} fe_binding;

typedef struct fe_scope {
	fe_binding *b;
	uint32_t n, cap;
	ir_names index; /* name -> position in b */
} fe_scope;

/* One inlined call of a def (or the body of an exported function). */
typedef struct fe_frame {
	fe_scope scope;
	const fe_def *def;
	bool has_returned;
	fe_value ret;
	const fe_stmt *ret_stmt; /* the `return` that ran */
} fe_frame;

typedef struct fe_elab {
	ir_ctx *ctx;
	ir_module *m;
	ir_arena *scratch; /* lists and names; lives until elaboration ends */
	fe_scope globals;
	fe_frame *frame; /* NULL at file scope */
	ir_func *f;      /* the function being built; NULL at file scope */
	/* Dotted prefix of parameter names: "encoder.0.attention". */
	char *path;
	uint32_t path_len, path_cap;
	/* The defs being called, outermost first, and where. */
	const fe_def *calls[FE_MAX_CALL_DEPTH];
	ir_loc call_locs[FE_MAX_CALL_DEPTH];
	/* Each call's entry in ctx->calls (its nodes' loc.at), made when it
	 * builds its first node (fe_call_at): 0 until then. */
	uint32_t call_at[FE_MAX_CALL_DEPTH];
	uint32_t depth;
	uint64_t steps;
	uint32_t eval_depth;
	size_t scratch_bytes;
	uint64_t rng_counter; /* seed of the next normal/uniform constant */
	bool is_stopped;      /* a limit was hit: elaborate nothing more */
	/* Per function: node of each parameter / constant, plus one (0 = no
	 * node yet), so a function has one node per parameter. */
	ir_id *param_nodes;
	uint32_t param_nodes_cap;
	ir_id *const_nodes;
	uint32_t const_nodes_cap;
} fe_elab;

/* Arguments of a call after binding them to the callee's parameters, in
 * parameter order; FE_V_NONE where an optional one was not given. */
typedef struct fe_args {
	const char *name; /* the callee, for messages */
	ir_loc loc;       /* the call */
	fe_value *v;
	ir_loc *locs; /* where each argument was written (loc if absent) */
	bool *is_t;   /* argument written `x.T` and passed untransposed */
	uint32_t n;
} fe_args;

typedef fe_value (*fe_builtin_fn)(fe_elab *e, const fe_builtin *b,
				  const fe_args *a);

struct fe_builtin {
	const char *name;
	fe_builtin_fn fn;
	ir_op op; /* the op it builds, IR_OP_COUNT if none */
	uint8_t n_required, n_params;
	const char *params[FE_MAX_BUILTIN_ARGS];
};

/* ---- values (expr.c) ------------------------------------------------------------ */

fe_value fe_err(void);
fe_value fe_none(void);
fe_value fe_int(int64_t i);
fe_value fe_real(double r);
fe_value fe_bool(bool b);
fe_value fe_tensor(ir_id id);
/* A dim value: a number when static, else FE_V_DIM. */
fe_value fe_dim(ir_dim d);
/* d + off: a number when d is static, else FE_V_DIM with dim_off. */
fe_value fe_dim_plus(ir_dim d, int64_t off);
/* Scratch memory for lists and strings, counted against
 * FE_MAX_SCRATCH; NULL after reporting. */
void *fe_scratch_alloc(fe_elab *e, size_t size, ir_loc loc);
/* "a number", "a tensor", ... for messages. */
const char *fe_kind_name(fe_value v);
/* Reports "expected WHAT, got <kind of v>" (nothing for FE_V_ERR). */
void fe_expected(fe_elab *e, ir_loc loc, const char *what, fe_value v);
/* True when elaboration must stop (limits, too many errors, OOM). */
bool fe_stopped(fe_elab *e);

/* ---- expressions (expr.c) -------------------------------------------------------- */

/* Evaluates an expression in the current frame (or at file scope). */
fe_value fe_eval(fe_elab *e, const fe_expr *x);
/* Evaluates a call; want_value says whether its value is used. */
fe_value fe_eval_call(fe_elab *e, const fe_expr *x, bool want_value);
/* Looks a name up: locals, file scope, built-ins; reports if unknown. */
fe_value fe_lookup(fe_elab *e, const char *name, ir_loc loc);
/* Applies a binary operator token (FE_T_PLUS, ...) to two values;
 * ta/tb mark matmul operands written `x.T`. */
fe_value fe_binop(fe_elab *e, fe_tok_kind op, fe_value l, fe_value r, bool ta,
		  bool tb, ir_loc loc);
/* x converted to dtype by a cast node (x itself if it has that dtype);
 * IR_NONE after an error. */
ir_id fe_cast(fe_elab *e, ir_id x, ir_dtype dtype, ir_loc loc);
/* Whether an operand (its tensor t, or IR_NONE and the number v) makes an
 * i32 tensor beside it f32, as PyTorch's type promotion: an f32 tensor,
 * or a real number. */
bool fe_is_f32_operand(fe_elab *e, ir_id t, fe_value v);
/* Elementwise binary op on tensors, numbers becoming rank-0 constants of
 * the other operand's dtype. An i32 tensor beside an f32 one or a real
 * number is converted to f32 first, and so is any i32 operand of div
 * (true division), as PyTorch promotes. */
fe_value fe_tensor_binop(fe_elab *e, ir_op op, fe_value l, fe_value r,
			 ir_loc loc);

/* ---- conversions (expr.c) -------------------------------------------------------- */

/* The value as a tensor node (a list of numbers becomes a constant);
 * reports "expected a tensor, got ..." and returns IR_NONE otherwise. */
ir_id fe_to_tensor(fe_elab *e, fe_value v, ir_loc loc);
const ir_type *fe_type_of(const fe_elab *e, ir_id id);
bool fe_to_int(fe_elab *e, fe_value v, ir_loc loc, int64_t *out);
bool fe_to_number(fe_elab *e, fe_value v, ir_loc loc, double *out);
bool fe_to_bool(fe_elab *e, fe_value v, ir_loc loc, bool *out);
/* A dim of a shape: an integer >= 0 (or -1 when allow_infer) or a dim. */
bool fe_to_dim(fe_elab *e, fe_value v, ir_loc loc, bool allow_infer,
	       ir_dim *out);
/* A shape: a list of dims, or one number. At most one -1 when
 * allow_infer. Sets t->rank and t->dims. */
bool fe_to_shape(fe_elab *e, fe_value v, ir_loc loc, bool allow_infer,
		 ir_type *t);
/* Reports a type whose static dims (symbols counted as 1) multiply to
 * more than FE_MAX_NUMEL elements. */
bool fe_check_size(fe_elab *e, const ir_type *t, ir_loc loc);
/* Normalizes an axis (negative counts from the end) for rank; reports
 * if out of range. */
bool fe_to_axis(fe_elab *e, fe_value v, ir_loc loc, int rank, int *out);
/* As fe_to_axis, but as PyTorch a tensor of rank 0 takes axis 0 or -1
 * (its dims wrap as a rank-1 tensor's); *out is then -1: no axis. */
bool fe_to_axis_or_none(fe_elab *e, fe_value v, ir_loc loc, int rank, int *out);

/* ---- building nodes (expr.c) ------------------------------------------------------- */

/* ir_build in the current function, with the node cap; FE_V_ERR when the
 * shape rule (which reports) rejects it. */
fe_value fe_build(fe_elab *e, ir_op op, const ir_id *args, uint32_t n,
		  const ir_attr *attr, const ir_type *type, ir_loc loc);
/* x[lo:hi] along axis ax where hi - lo is a run-time size (T): a
 * gather of arange(lo, hi)'s rows from the static axis, hi <= its size
 * recorded as a module limit checked at binding. lo is a number; an axis
 * of size T sliced [0:T] is x itself. Reports and returns IR_NONE on an
 * error. */
ir_id fe_slice_run_time(fe_elab *e, ir_id x, int ax, fe_value lo, fe_value hi,
			ir_loc loc);
/* A RESHAPE of x to dims (x's dtype). */
fe_value fe_reshape(fe_elab *e, ir_id x, const ir_type *dims, ir_loc loc);
/* A CONST node for a module constant (one node per function). */
fe_value fe_const_node(fe_elab *e, uint32_t index, ir_loc loc);
/* Adds (or reuses, for small ones) a constant with data in dtype t->dtype
 * and returns its node. */
fe_value fe_const_tensor(fe_elab *e, const ir_type *t, const void *data,
			 ir_loc loc);
/* A rank-0 constant of dtype holding v. */
fe_value fe_scalar(fe_elab *e, ir_dtype dtype, fe_value v, ir_loc loc);
/* A constant of type t (f32 or i32, static dims) whose elements are
 * given as doubles; an i32 value outside int32 is an error at loc. */
fe_value fe_const_of_doubles(fe_elab *e, const ir_type *t, const double *vals,
			     ir_loc loc);

/* ---- built-ins (builtins.c, consts.c) ------------------------------------------------- */

const fe_builtin *fe_builtin_find(const char *name);
/* The name of built-in i, or NULL past the last (for "did you mean"). */
const char *fe_builtin_name(size_t i);
fe_value fe_bi_zeros(fe_elab *e, const fe_builtin *b, const fe_args *a);
fe_value fe_bi_full(fe_elab *e, const fe_builtin *b, const fe_args *a);
fe_value fe_bi_arange(fe_elab *e, const fe_builtin *b, const fe_args *a);
fe_value fe_bi_random(fe_elab *e, const fe_builtin *b, const fe_args *a);

/* ---- calls (elab.c) ------------------------------------------------------------------- */

/* Binds positional and keyword arguments of a call to parameter names;
 * reports arity and keyword errors. vals/locs/is_t have n_params
 * entries; unbound optional ones are FE_V_NONE. */
typedef struct fe_raw_arg {
	const char *name; /* keyword or NULL */
	ir_loc name_loc;
	ir_loc loc;
	fe_value v;
	bool is_t;
} fe_raw_arg;
bool fe_bind_args(fe_elab *e, const char *callee, ir_loc loc,
		  const char *const *params, uint32_t n_params,
		  uint32_t n_required, const fe_raw_arg *raw, uint32_t n_raw,
		  fe_args *out);
fe_value fe_call_def(fe_elab *e, const fe_def *d, const fe_expr *call,
		     const fe_raw_arg *raw, uint32_t n_raw, bool want_value);
/* The entry in ctx->calls of the innermost call being elaborated (for
 * ir_loc.at of the nodes it builds), made now if new; 0 outside calls
 * or out of memory. */
uint32_t fe_call_at(fe_elab *e);

/* ---- examples (example.c) ------------------------------------------------------------- */

/* Evaluates `example NAME(args)` into constants and sets f->example. */
void fe_example(fe_elab *e, const fe_decl *d);

/* ---- the whole file (elab.c) ------------------------------------------------------------ */

/* Elaborates the prelude and the user's file into a new module; returns
 * NULL after reporting errors. */
ir_module *fe_elaborate(ir_ctx *ctx, ir_arena *scratch, const fe_file *prelude,
			const fe_file *file);

#endif
