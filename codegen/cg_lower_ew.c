/*
 * cg_lower_ew.c - kernels built from strided loop nests: elementwise
 * math with NumPy broadcasting, casts, compares and select, the layout
 * copies (broadcast, permute, slice, concat, repeat, repeat_interleave)
 * and dropout.
 *
 * Every one of them is a nest of loops over the output whose operands are
 * addressed by strides (0 along broadcast axes). Simplifying the nest
 * first (dropping size-1 axes, merging axes every array walks
 * contiguously) makes most kernels one flat loop, which LLVM vectorizes;
 * the outer loop is the range the entry point may split over threads.
 * Float results follow the interpreter op for op; exp, tanh, sigmoid
 * and erf use the vectorizable versions of cg_lower_math.c, the other
 * transcendental functions LLVM's intrinsics (libm's float versions),
 * all within a few ulps of the interpreter's rounded double results.
 */
#include "cg_lower.h"

#include <assert.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

/* The shortest innermost loop of an elementwise nest kept a loop. */
#define CG_LOWER_KEEP_MIN 8

/* ---- nests ------------------------------------------------------------------ */

static bool mergeable(const cg_nest *n, int p, int d)
{
	for (int a = 0; a < n->n_arr; a++)
		if (n->strides[a][p] != n->strides[a][d] * n->dims[d])
			return false;
	return true;
}

void cg_nest_simplify(cg_nest *n)
{
	cg_nest s = *n;
	s.rank = 0;
	for (int d = 0; d < n->rank; d++)
		if (n->dims[d] == 0) {
			s.dims[0] = 0;
			s.rank = 1;
			*n = s;
			return;
		}
	for (int d = 0; d < n->rank; d++) {
		if (n->dims[d] == 1)
			continue;
		int r = s.rank;
		s.dims[r] = n->dims[d];
		for (int a = 0; a < n->n_arr; a++)
			s.strides[a][r] = n->strides[a][d];
		if (r > 0 && mergeable(&s, r - 1, r)) {
			s.dims[r - 1] *= s.dims[r];
			for (int a = 0; a < n->n_arr; a++)
				s.strides[a][r - 1] = s.strides[a][r];
		} else {
			s.rank++;
		}
	}
	if (s.rank == 0) {
		s.rank = 1;
		s.dims[0] = 1;
		for (int a = 0; a < n->n_arr; a++)
			s.strides[a][0] = 0;
	}
	*n = s;
}

void cg_nest_bcast(cg_nest *n, int a, const int64_t *dims, int rank)
{
	int64_t s[IR_MAX_RANK];
	cg_lower_strides(dims, rank, s);
	for (int d = 0; d < n->rank; d++) {
		int i = rank - n->rank + d;
		n->strides[a][d] = i < 0 || dims[i] == 1 ? 0 : s[i];
	}
}

typedef struct nest_walk {
	cg_kernel *k;
	const cg_nest *n;
	LLVMValueRef lo, hi;
	cg_nest_body body;
	void *ud;
} nest_walk;

static void nest_level(const nest_walk *w, int d, LLVMValueRef *offs)
{
	cg_fn *f = &w->k->f;
	if (d == w->n->rank) {
		w->body(w->k, offs, w->ud);
		return;
	}
	cg_loop l;
	LLVMValueRef iv = cg_loop_begin(f, &l, d ? cg_i64(f, 0) : w->lo,
					d ? cg_i64(f, w->n->dims[d]) : w->hi, 1);
	LLVMValueRef inner[CG_NEST_ARRS];
	for (int a = 0; a < w->n->n_arr; a++) {
		int64_t s = w->n->strides[a][d];
		inner[a] = s ? cg_add(f, offs[a], cg_muli(f, iv, s)) : offs[a];
	}
	nest_level(w, d + 1, inner);
	cg_loop_end(f, &l);
	if (d == w->n->rank - 1 && w->n->is_inner_kept)
		cg_loop_no_unroll(f, &l);
}

void cg_nest_emit(cg_kernel *k, const cg_nest *n, LLVMValueRef lo,
		  LLVMValueRef hi, cg_nest_body body, void *ud)
{
	nest_walk w = {k, n, lo, hi, body, ud};
	LLVMValueRef offs[CG_NEST_ARRS];
	for (int a = 0; a < n->n_arr; a++)
		offs[a] = cg_i64(&k->f, n->base[a]);
	nest_level(&w, 0, offs);
}

/* A nest over the node's output dims, array 0 the dense output, then
 * the arrays of the given operands read with broadcasting (through their
 * trees when fused). */
static void nest_over_output(cg_kernel *k, cg_nest *n, const uint32_t *args,
			     int n_args)
{
	memset(n, 0, sizeof *n);
	n->rank = cg_lower_dims(k->L, &k->node->type, n->dims);
	n->n_arr = 1;
	cg_lower_strides(n->dims, n->rank, n->strides[0]);
	for (int i = 0; i < n_args; i++) {
		int ax[IR_MAX_RANK];
		cg_kernel_ew_axes(k, args[i], ax);
		cg_nest_add_operand(k, n, args[i], ax, -1);
	}
}

/* Whether n's innermost loop is worth vectorizing along: at least
 * CG_LOWER_KEEP_MIN long and every array walks it densely or not at all
 * (x - mean(x) over rows of 32, say, after the nest could not merge its
 * axes because of the broadcast). An element's value does not depend on
 * the loop vectorized, only the speed does. */
static bool inner_is_contiguous(const cg_nest *n)
{
	int in = n->rank - 1;
	if (n->rank < 2 || n->dims[in] < CG_LOWER_KEEP_MIN)
		return false;
	for (int a = 0; a < n->n_arr; a++)
		if (n->strides[a][in] != 0 && n->strides[a][in] != 1)
			return false;
	return true;
}

/* Simplifies n and runs it over the kernel's [lo, hi), recording the
 * outer extent and the work. */
static void run_nest(cg_kernel *k, cg_nest *n, cg_nest_body body, void *ud)
{
	int64_t work = 1;
	cg_nest_simplify(n);
	n->is_inner_kept = inner_is_contiguous(n);
	for (int d = 0; d < n->rank; d++)
		work *= n->dims[d];
	k->extent = n->dims[0];
	k->work = work;
	cg_lower_row_skip_nest(k, n, body, ud);
}

/* ---- elementwise math ------------------------------------------------------- */

static LLVMValueRef load_arg(cg_kernel *k, uint32_t i, LLVMValueRef off)
{
	return cg_lower_load(&k->f, cg_kernel_arg_type(k, i)->dtype, k->in[i],
			     off);
}

static void store_out(cg_kernel *k, LLVMValueRef v, LLVMValueRef off)
{
	cg_lower_store(&k->f, k->node->type.dtype, v, k->out, off);
}

/* float to int32 as the interpreter: truncation, INT32_MIN for NaN and
 * values out of range (never poison). */
static LLVMValueRef f2i(cg_fn *f, LLVMValueRef x)
{
	LLVMValueRef d = LLVMBuildFPExt(f->b, x,
					LLVMDoubleTypeInContext(f->ctx), "");
	LLVMTypeRef dt = LLVMDoubleTypeInContext(f->ctx);
	LLVMValueRef lo = LLVMBuildFCmp(f->b, LLVMRealOGT, d,
					LLVMConstReal(dt, -2147483649.0), "");
	LLVMValueRef hi = LLVMBuildFCmp(f->b, LLVMRealOLT, d,
					LLVMConstReal(dt, 2147483648.0), "");
	LLVMValueRef ok = LLVMBuildAnd(f->b, lo, hi, "");
	LLVMValueRef safe = LLVMBuildSelect(f->b, ok, d, LLVMConstReal(dt, 0),
					    "");
	LLVMValueRef i = LLVMBuildFPToSI(f->b, safe, cg_t_i32(f), "");
	return LLVMBuildSelect(f->b, ok, i, cg_i32(f, INT32_MIN), "");
}

/* ---- the vector form of each elementwise op ---------------------------------- *
 *
 * Tables built from ops.def's X_UNARY, X_BINARY and X_COMPARE rows, each
 * naming a function after its op, so an elementwise op added there does
 * not build until its lowering is written here. Each takes scalars or
 * vectors alike. The i32 forms exist for the ops flagged IR_OPF_INT (and
 * relu, which the interpreter also gives on integers).
 */

typedef LLVMValueRef (*lower_f1)(cg_fn *f, LLVMValueRef x);
typedef LLVMValueRef (*lower_f2)(cg_fn *f, LLVMValueRef a, LLVMValueRef b);

static LLVMValueRef f32_NEG(cg_fn *f, LLVMValueRef x)
{
	return LLVMBuildFNeg(f->b, x, "");
}

/* Whether x is -(a a) as just built (autodiff's derivative of erf,
 * 2/sqrt(pi) e^(-a^2)): never positive, NaN or -inf at worst. */
static bool is_neg_square(LLVMValueRef x)
{
	if (!LLVMIsAInstruction(x) || LLVMGetInstructionOpcode(x) != LLVMFNeg)
		return false;
	LLVMValueRef m = LLVMGetOperand(x, 0);
	return LLVMIsAInstruction(m) &&
	       LLVMGetInstructionOpcode(m) == LLVMFMul &&
	       LLVMGetOperand(m, 0) == LLVMGetOperand(m, 1);
}

/* e^x; of an argument known not to be positive, by exp's cheaper half
 * (cg_lower_exp_shifted: the same bits there, fewer instructions). */
static LLVMValueRef f32_EXP(cg_fn *f, LLVMValueRef x)
{
	return is_neg_square(x) ? cg_lower_exp_shifted(f, x)
				: cg_lower_exp(f, x);
}

static LLVMValueRef f32_LOG(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_fcall(f, "llvm.log", x, NULL);
}

static LLVMValueRef f32_TANH(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_tanh(f, x);
}

static LLVMValueRef f32_SIGMOID(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_sigmoid(f, x);
}

/* x > 0 or NaN keeps x (torch.relu), else +0. */
static LLVMValueRef f32_RELU(cg_fn *f, LLVMValueRef x)
{
	LLVMValueRef zero = cg_const_real(LLVMTypeOf(x), 0);
	LLVMValueRef keep = LLVMBuildFCmp(f->b, LLVMRealUGT, x, zero, "");
	return LLVMBuildSelect(f->b, keep, x, zero, "");
}

static LLVMValueRef f32_SIN(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_fcall(f, "llvm.sin", x, NULL);
}

static LLVMValueRef f32_COS(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_fcall(f, "llvm.cos", x, NULL);
}

static LLVMValueRef f32_SQRT(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_fcall(f, "llvm.sqrt", x, NULL);
}

static LLVMValueRef f32_ABS(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_fcall(f, "llvm.fabs", x, NULL);
}

static LLVMValueRef f32_ERF(cg_fn *f, LLVMValueRef x)
{
	return cg_lower_erf(f, x);
}

static const lower_f1 unary_f32[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags)
#define X_UNARY(e, name, flags) [IR_OP_##e] = f32_##e,
#include "ops.def"
#undef X
};

static LLVMValueRef i32_neg(cg_fn *f, LLVMValueRef x)
{
	return LLVMBuildNeg(f->b, x, "");
}

static LLVMValueRef i32_abs(cg_fn *f, LLVMValueRef x)
{
	LLVMTypeRef t = LLVMTypeOf(x);
	LLVMValueRef args[2] = {x, LLVMConstInt(LLVMInt1TypeInContext(f->ctx),
						0, 0)};
	return cg_intrinsic(f, "llvm.abs", &t, 1, args, 2);
}

static LLVMValueRef i32_relu(cg_fn *f, LLVMValueRef x)
{
	LLVMValueRef zero = cg_const_int(LLVMTypeOf(x), 0);
	LLVMValueRef pos = LLVMBuildICmp(f->b, LLVMIntSGT, x, zero, "");
	return LLVMBuildSelect(f->b, pos, x, zero, "");
}

static const lower_f1 unary_i32[IR_OP_COUNT] = {
	[IR_OP_NEG] = i32_neg,
	[IR_OP_ABS] = i32_abs,
	[IR_OP_RELU] = i32_relu,
};

static LLVMValueRef f32_ADD(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFAdd(f->b, a, b, "");
}

static LLVMValueRef f32_SUB(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFSub(f->b, a, b, "");
}

static LLVMValueRef f32_MUL(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFMul(f->b, a, b, "");
}

static LLVMValueRef f32_DIV(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildFDiv(f->b, a, b, "");
}

static LLVMValueRef f32_POW(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_lower_fcall(f, "llvm.pow", a, b);
}

/* llvm.maximum/minimum propagate NaN, as torch.maximum/minimum. */
static LLVMValueRef f32_MAXIMUM(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_lower_fcall(f, "llvm.maximum", a, b);
}

static LLVMValueRef f32_MINIMUM(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_lower_fcall(f, "llvm.minimum", a, b);
}

static const lower_f2 binary_f32[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags)
#define X_BINARY(e, name, flags) [IR_OP_##e] = f32_##e,
#include "ops.def"
#undef X
};

static LLVMValueRef i32_add(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildAdd(f->b, a, b, "");
}

static LLVMValueRef i32_sub(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildSub(f->b, a, b, "");
}

static LLVMValueRef i32_mul(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildMul(f->b, a, b, "");
}

static LLVMValueRef i32_max(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef gt = LLVMBuildICmp(f->b, LLVMIntSGT, a, b, "");
	return LLVMBuildSelect(f->b, gt, a, b, "");
}

static LLVMValueRef i32_min(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef gt = LLVMBuildICmp(f->b, LLVMIntSGT, a, b, "");
	return LLVMBuildSelect(f->b, gt, b, a, "");
}

/* div and pow are f32 only (ir/shape_rules.c, IR_OPF_INT). */
static const lower_f2 binary_i32[IR_OP_COUNT] = {
	[IR_OP_ADD] = i32_add,     [IR_OP_SUB] = i32_sub,
	[IR_OP_MUL] = i32_mul,     [IR_OP_MAXIMUM] = i32_max,
	[IR_OP_MINIMUM] = i32_min,
};

/* A comparison's predicates: ordered for floats (NaN compares false)
 * but for ne, which is unordered (NaN != anything), as the interpreter. */
typedef struct cmp_preds {
	LLVMRealPredicate real;
	LLVMIntPredicate i;
} cmp_preds;

static const cmp_preds cmp_LT = {LLVMRealOLT, LLVMIntSLT};
static const cmp_preds cmp_LE = {LLVMRealOLE, LLVMIntSLE};
static const cmp_preds cmp_GT = {LLVMRealOGT, LLVMIntSGT};
static const cmp_preds cmp_GE = {LLVMRealOGE, LLVMIntSGE};
static const cmp_preds cmp_EQ = {LLVMRealOEQ, LLVMIntEQ};
static const cmp_preds cmp_NE = {LLVMRealUNE, LLVMIntNE};

static const cmp_preds *const compare_preds[IR_OP_COUNT] = {
#define X(e, name, n_in, attr, fam, flags)
#define X_COMPARE(e, name, flags) [IR_OP_##e] = &cmp_##e,
#include "ops.def"
#undef X
};

static LLVMValueRef compare(cg_fn *f, ir_op op, ir_dtype t, LLVMValueRef a,
			    LLVMValueRef b)
{
	const cmp_preds *p = compare_preds[op];
	LLVMValueRef c = t == IR_F32 ? LLVMBuildFCmp(f->b, p->real, a, b, "")
				     : LLVMBuildICmp(f->b, p->i, a, b, "");
	return LLVMBuildZExt(f->b, c, cg_t_i32(f), "");
}

static LLVMValueRef cast(cg_fn *f, ir_dtype from, ir_dtype to, LLVMValueRef x)
{
	if (from == to)
		return x;
	if (to == IR_F32)
		return LLVMBuildSIToFP(f->b, x, cg_t_f32(f), "");
	return f2i(f, x);
}

static LLVMValueRef unary(cg_fn *f, ir_op op, ir_dtype t, LLVMValueRef x)
{
	lower_f1 fn = t == IR_I32 ? unary_i32[op] : unary_f32[op];
	assert(fn);
	return fn(f, x);
}

static LLVMValueRef binary(cg_fn *f, ir_op op, ir_dtype t, LLVMValueRef a,
			   LLVMValueRef b)
{
	lower_f2 fn = t == IR_I32 ? binary_i32[op] : binary_f32[op];
	assert(fn);
	return fn(f, a, b);
}

LLVMValueRef cg_lower_ew_value(cg_fn *f, const ir_node *n, ir_dtype in,
			       LLVMValueRef *v)
{
	switch (ir_op_table[n->op].family) {
	case IR_FAM_UNARY:
		return unary(f, n->op, n->type.dtype, v[0]);
	case IR_FAM_BINARY:
		return binary(f, n->op, in, v[0], v[1]);
	case IR_FAM_COMPARE:
		return compare(f, n->op, in, v[0], v[1]);
	case IR_FAM_CAST:
		return cast(f, in, n->type.dtype, v[0]);
	case IR_FAM_SELECT: {
		LLVMValueRef is = LLVMBuildICmp(f->b, LLVMIntNE, v[0],
						cg_i32(f, 0), "");
		return LLVMBuildSelect(f->b, is, v[1], v[2], "");
	}
	case IR_FAM_LEAF:
	case IR_FAM_MATMUL:
	case IR_FAM_REDUCE:
	case IR_FAM_NORM:
	case IR_FAM_INDEX:
	case IR_FAM_LAYOUT:
	case IR_FAM_LOSS:
	case IR_FAM_FUSED:
		break;
	}
	assert(!"not an elementwise op");
	return v[0];
}

/* out = the node's op of its operands (their trees when fused). */
static void ew_body(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	(void)ud;
	LLVMValueRef v[3];
	for (uint32_t i = 0; i < k->node->n_args; i++)
		v[i] = cg_kernel_operand(k, i, offs, NULL);
	ir_dtype in = cg_kernel_arg_type(k, k->node->op == IR_OP_SELECT)->dtype;
	store_out(k, cg_lower_ew_value(&k->f, k->node, in, v), offs[0]);
}

static void lower_ew(cg_kernel *k)
{
	cg_nest n;
	uint32_t args[3] = {0, 1, 2};
	nest_over_output(k, &n, args, (int)k->node->n_args);
	run_nest(k, &n, ew_body, NULL);
}

bool cg_lower_elementwise(cg_kernel *k)
{
	lower_ew(k);
	return true;
}

/* ---- layout copies ------------------------------------------------------------ */

/* out[offs[0]] = in[offs[1]] of operand *(uint32_t *)ud. */
static void copy_body(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	uint32_t i = ud ? *(const uint32_t *)ud : 0;
	store_out(k, load_arg(k, i, offs[1]), offs[0]);
}

/* out = operand 0 (its tree when fused). */
static void operand_body(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	(void)ud;
	store_out(k, cg_kernel_operand(k, 0, offs, NULL), offs[0]);
}

bool cg_lower_broadcast(cg_kernel *k)
{
	cg_nest n;
	uint32_t args[1] = {0};
	nest_over_output(k, &n, args, 1);
	run_nest(k, &n, operand_body, NULL);
	return true;
}

/* A nest over the output dims with array 1 the operand's dense strides
 * (to be rearranged by the caller); xs gets them too. */
static void nest_dense_in(const cg_kernel *k, cg_nest *n, int64_t *xdims,
			  int64_t *xs)
{
	memset(n, 0, sizeof *n);
	n->rank = cg_lower_dims(k->L, &k->node->type, n->dims);
	n->n_arr = 2;
	cg_lower_strides(n->dims, n->rank, n->strides[0]);
	int r = cg_lower_dims(k->L, cg_kernel_arg_type(k, 0), xdims);
	cg_lower_strides(xdims, r, xs);
}

/* One vw x vw tile of a transpose: the `rows` x `cols` block of x (row
 * length C) at row r0, column c0, stored transposed at out (row length
 * R): rows loaded as vectors, transposed in registers, stored as rows. */
static void transpose_tile(cg_kernel *k, LLVMValueRef x, int64_t C, int64_t R,
			   LLVMValueRef r0, LLVMValueRef c0, unsigned rows,
			   unsigned cols)
{
	cg_fn *f = &k->f;
	unsigned vw = k->L->vw;
	LLVMValueRef v[16];
	for (unsigned i = 0; i < vw; i++)
		v[i] = i < rows
			       ? cg_vload_part(f, vw,
					       cg_at(f, x,
						     cg_add(f,
							    cg_muli(f,
								    cg_addi(f, r0,
									    i),
								    C),
							    c0)),
					       cols)
			       : LLVMConstNull(cg_t_vec(f, vw));
	cg_transpose(f, v, vw);
	for (unsigned j = 0; j < cols; j++)
		cg_vstore_part(f, v[j],
			       cg_at(f, k->out,
				     cg_add(f, cg_muli(f, cg_addi(f, c0, j), R),
					    r0)),
			       rows);
}

/* Output rows [c0, c0 + cols) of a transpose (cols <= vw): every tile
 * of R rows of x, the last with R mod vw. */
static void transpose_rows(cg_kernel *k, LLVMValueRef x, int64_t C, int64_t R,
			   LLVMValueRef c0, unsigned cols)
{
	cg_fn *f = &k->f;
	int64_t vw = k->L->vw, full = R / vw;
	if (full) {
		cg_loop l;
		LLVMValueRef t = cg_loop_begin(f, &l, cg_i64(f, 0),
					       cg_i64(f, full), 1);
		transpose_tile(k, x, C, R, cg_muli(f, t, vw), c0, (unsigned)vw,
			       cols);
		cg_loop_end(f, &l);
	}
	if (R % vw)
		transpose_tile(k, x, C, R, cg_i64(f, full * vw), c0,
			       (unsigned)(R % vw), cols);
}

/* A float matrix transposed (a rank-2 permute of a buffer read as it
 * is, not a fused tree): tiles of vw x vw through registers, where the
 * nest's strided loop wrote a column at a time with scatters (a
 * parameter's W^T for pretranspose). The outer range is the output's
 * groups of vw rows. */
static bool lower_transpose(cg_kernel *k, const int64_t *od)
{
	cg_fn *f = &k->f;
	int64_t C = od[0], R = od[1], vw = k->L->vw;
	int64_t full = C / vw, n_tiles = (C + vw - 1) / vw;
	LLVMValueRef x = k->in[0];
	k->extent = n_tiles;
	k->work = C * R;
	cg_loop l;
	LLVMValueRef hi = cg_min(f, k->hi, cg_i64(f, full));
	LLVMValueRef t = cg_loop_begin(f, &l, k->lo, hi, 1);
	transpose_rows(k, x, C, R, cg_muli(f, t, vw), (unsigned)vw);
	cg_loop_end(f, &l);
	if (full < n_tiles) {
		LLVMBasicBlockRef join =
			cg_if_begin(f, LLVMBuildICmp(f->b, LLVMIntSGT, k->hi,
						     cg_i64(f, full), ""));
		transpose_rows(k, x, C, R, cg_i64(f, full * vw),
			       (unsigned)(C % vw));
		cg_if_end(f, join);
	}
	return true;
}

/* Whether the permute is a float matrix's transpose of a buffer read in
 * place (its operand's tree one leaf at the buffer's start). */
static bool is_plain_transpose(const cg_kernel *k, int r)
{
	const cg_tree_node *t = &k->tr.n[k->tr.opnd[0]];
	return r == 2 && k->node->type.rank == 2 &&
	       k->node->attr.permute.perm[0] == 1 &&
	       k->node->attr.permute.perm[1] == 0 &&
	       k->node->type.dtype == IR_F32 && t->is_leaf && t->param == 0 &&
	       t->base == 0;
}

/* Output axis i reads operand axis perm[i]. */
bool cg_lower_permute(cg_kernel *k)
{
	cg_nest n;
	int ax[IR_MAX_RANK];
	memset(&n, 0, sizeof n);
	n.rank = cg_lower_dims(k->L, &k->node->type, n.dims);
	if (is_plain_transpose(k, n.rank))
		return lower_transpose(k, n.dims);
	n.n_arr = 1;
	cg_lower_strides(n.dims, n.rank, n.strides[0]);
	for (int i = 0; i < n.rank; i++)
		ax[i] = k->node->attr.permute.perm[i];
	cg_nest_add_operand(k, &n, 0, ax, -1);
	run_nest(k, &n, operand_body, NULL);
	return true;
}

bool cg_lower_slice_fits(const cg_lower *L, const ir_graph *g, ir_id id)
{
	const ir_node *n = &g->nodes[id];
	int64_t xd[IR_MAX_RANK];
	cg_lower_dims(L, &g->nodes[ir_arg(g, id, 0)].type, xd);
	int ax = n->attr.slice.axis;
	if (n->attr.slice.end <= xd[ax])
		return true;
	ir_error(L->ctx, n->loc,
		 "codegen: slice: range %lld:%lld does not fit "
		 "axis %d of size %lld",
		 (long long)n->attr.slice.start, (long long)n->attr.slice.end,
		 ax, (long long)xd[ax]);
	return false;
}

/* Output axis i reads operand axis i; the slice's axis from its start by
 * its step. The operand's tree, when fused, is read the same way: every
 * array of it moves along that axis by the step, from the start. */
bool cg_lower_slice(cg_kernel *k)
{
	cg_nest n;
	int ax[IR_MAX_RANK];
	int s = k->node->attr.slice.axis;
	memset(&n, 0, sizeof n);
	n.rank = cg_lower_dims(k->L, &k->node->type, n.dims);
	n.n_arr = 1;
	cg_lower_strides(n.dims, n.rank, n.strides[0]);
	for (int i = 0; i < n.rank; i++)
		ax[i] = i;
	cg_nest_add_operand(k, &n, 0, ax, -1);
	for (int a = 1; a < n.n_arr; a++) {
		n.base[a] += k->node->attr.slice.start * n.strides[a][s];
		n.strides[a][s] *= k->node->attr.slice.step;
	}
	run_nest(k, &n, operand_body, NULL);
	return true;
}

/* Output axis i of size reps * x_i becomes the axes (reps, x_i): the
 * first walks the output only, the second both. */
bool cg_lower_repeat(cg_kernel *k)
{
	cg_nest n, m;
	int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK];
	nest_dense_in(k, &n, xd, xs);
	memset(&m, 0, sizeof m);
	m.n_arr = 2;
	for (int i = 0; i < n.rank; i++) {
		int64_t r = k->node->attr.repeat.reps[i];
		m.dims[2 * i] = r;
		m.dims[2 * i + 1] = xd[i];
		m.strides[0][2 * i] = xd[i] * n.strides[0][i];
		m.strides[0][2 * i + 1] = n.strides[0][i];
		m.strides[1][2 * i] = 0;
		m.strides[1][2 * i + 1] = xs[i];
	}
	m.rank = 2 * n.rank;
	run_nest(k, &m, copy_body, NULL);
	return true;
}

/* The interleaved axis of size len * reps becomes (len, reps). */
bool cg_lower_repeat_interleave(cg_kernel *k)
{
	cg_nest n, m;
	int64_t xd[IR_MAX_RANK], xs[IR_MAX_RANK];
	int ax = k->node->attr.interleave.axis, r = 0;
	nest_dense_in(k, &n, xd, xs);
	memset(&m, 0, sizeof m);
	m.n_arr = 2;
	for (int i = 0; i < n.rank; i++, r++) {
		m.dims[r] = xd[i];
		m.strides[1][r] = xs[i];
		if (i != ax) {
			m.strides[0][r] = n.strides[0][i];
			continue;
		}
		m.strides[0][r] = k->node->attr.interleave.n * n.strides[0][i];
		r++;
		m.dims[r] = k->node->attr.interleave.n;
		m.strides[0][r] = n.strides[0][i];
		m.strides[1][r] = 0;
	}
	m.rank = r;
	run_nest(k, &m, copy_body, NULL);
	return true;
}

/* Each operand copied into its block of the output, one nest each; the
 * kernel runs whole (extent 1). */
bool cg_lower_concat(cg_kernel *k)
{
	int ax = k->node->attr.axis;
	int64_t od[IR_MAX_RANK], os[IR_MAX_RANK], at = 0, work = 0;
	int rank = cg_lower_dims(k->L, &k->node->type, od);
	cg_lower_strides(od, rank, os);
	for (uint32_t i = 0; i < k->n_in; i++) {
		cg_nest n;
		memset(&n, 0, sizeof n);
		n.n_arr = 2;
		n.rank = cg_lower_dims(k->L, cg_kernel_arg_type(k, i), n.dims);
		cg_lower_strides(n.dims, n.rank, n.strides[1]);
		memcpy(n.strides[0], os, sizeof os);
		n.base[0] = at * os[ax];
		at += n.dims[ax];
		cg_nest_simplify(&n);
		work += n.dims[0];
		cg_nest_emit(k, &n, cg_i64(&k->f, 0), cg_i64(&k->f, n.dims[0]),
			     copy_body, &i);
	}
	k->extent = 1;
	k->work = work;
	return true;
}

/* ---- dropout ---------------------------------------------------------------------- */

LLVMValueRef cg_lower_mix64(cg_fn *f, LLVMValueRef z)
{
	LLVMBuilderRef b = f->b;
	LLVMTypeRef t = LLVMTypeOf(z);
	z = LLVMBuildAdd(b, z, cg_const_int(t, 0x9e3779b97f4a7c15ull), "");
	z = LLVMBuildXor(b, z, LLVMBuildLShr(b, z, cg_const_int(t, 30), ""), "");
	z = LLVMBuildMul(b, z, cg_const_int(t, 0xbf58476d1ce4e5b9ull), "");
	z = LLVMBuildXor(b, z, LLVMBuildLShr(b, z, cg_const_int(t, 27), ""), "");
	z = LLVMBuildMul(b, z, cg_const_int(t, 0x94d049bb133111ebull), "");
	return LLVMBuildXor(b, z, LLVMBuildLShr(b, z, cg_const_int(t, 31), ""),
			    "");
}

LLVMValueRef cg_lower_dropout_key(cg_kernel *k, uint32_t stream)
{
	cg_fn *f = &k->f;
	LLVMValueRef seed = cg_kernel_run_field(k, cg_t_i64(f),
						offsetof(attnrt_run, seed));
	LLVMValueRef step = cg_kernel_run_field(k, cg_t_i64(f),
						offsetof(attnrt_run, step));
	LLVMValueRef s = LLVMBuildXor(f->b,
				      LLVMBuildShl(f->b, step, cg_i64(f, 20), ""),
				      cg_kernel_stream(k, stream), "");
	return cg_lower_mix64(f, LLVMBuildXor(f->b, seed, cg_lower_mix64(f, s),
					      ""));
}

LLVMValueRef cg_lower_dropout_value(cg_fn *f, double p, LLVMValueRef key,
				    LLVMValueRef is_train, LLVMValueRef idx,
				    LLVMValueRef x)
{
	int64_t threshold = (int64_t)ceil(p * 16777216.0);
	float scale = (float)(1.0 / (double)(float)(1.0 - p));
	LLVMValueRef bits = cg_lower_mix64(f, LLVMBuildAdd(f->b, key, idx, ""));
	LLVMValueRef top = LLVMBuildLShr(f->b, bits, cg_i64(f, 40), "");
	LLVMValueRef keep = LLVMBuildICmp(f->b, LLVMIntUGE, top,
					  cg_i64(f, threshold), "");
	LLVMValueRef y = LLVMBuildFMul(f->b, x, cg_f32(f, scale), "");
	y = LLVMBuildSelect(f->b, keep, y, cg_f32(f, 0), "");
	return is_train ? LLVMBuildSelect(f->b, is_train, y, x, "") : y;
}

typedef struct dropout_cx {
	LLVMValueRef key; /* mix(seed ^ mix(stream)) */
	double p;
} dropout_cx;

/* Element i is kept iff rt_rng_uniform(seed, stream, i) >= p, that is
 * iff its top 24 random bits are >= ceil(p * 2^24); kept ones are scaled
 * by 1 / (1 - p). i is the output's flat index. */
static void dropout_body(cg_kernel *k, LLVMValueRef *offs, void *ud)
{
	const dropout_cx *d = ud;
	LLVMValueRef x = cg_kernel_operand(k, 0, offs, NULL);
	store_out(k,
		  cg_lower_dropout_value(&k->f, d->p, d->key, NULL, offs[0], x),
		  offs[0]);
}

bool cg_lower_dropout(cg_kernel *k)
{
	cg_fn *f = &k->f;
	double p = k->node->attr.dropout.p;
	cg_nest n;
	uint32_t args[1] = {0};
	nest_over_output(k, &n, args, 1);
	if (p <= 0) {
		run_nest(k, &n, operand_body, NULL);
		return true;
	}
	dropout_cx d = {NULL, p};
	LLVMBasicBlockRef train = cg_block(f, "train"),
			  eval = cg_block(f, "eval");
	LLVMBasicBlockRef done = cg_block(f, "done");
	LLVMBuildCondBr(f->b, cg_kernel_is_training(k), train, eval);
	LLVMPositionBuilderAtEnd(f->b, eval);
	run_nest(k, &n, operand_body, NULL);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, train);
	d.key = cg_lower_dropout_key(k, k->node->attr.dropout.stream);
	cg_lower_row_skip_nest(k, &n, dropout_body, &d);
	LLVMBuildBr(f->b, done);
	LLVMPositionBuilderAtEnd(f->b, done);
	return true;
}
