/*
 * cg_llvm.c - small helpers over the LLVM C API so that generators read as
 * the loops they emit: typed constants, float-element addressing, counted
 * loops and if-blocks, intrinsic and external calls, fast-math flags.
 *
 * All index arithmetic is on i64 with nsw/nuw: generated indices are
 * non-negative and far from overflow, and the flags let LLVM's loop
 * passes reason about strides.
 */
#include "cg_internal.h"

#include <llvm-c/DebugInfo.h>

#include <assert.h>
#include <string.h>

/* ---- functions ------------------------------------------------------------ */

static void add_attr(cg_fn *f, unsigned idx, const char *kind)
{
	unsigned k = LLVMGetEnumAttributeKindForName(kind, strlen(kind));
	assert(k != 0);
	LLVMAddAttributeAtIndex(f->fn, idx,
				LLVMCreateEnumAttribute(f->ctx, k, 0));
}

void cg_fn_begin(cg_fn *f, LLVMModuleRef mod, const char *name,
		 LLVMTypeRef fn_type, bool is_internal)
{
	f->mod = mod;
	f->ctx = LLVMGetModuleContext(mod);
	f->fn_type = fn_type;
	f->fn = LLVMAddFunction(mod, name, fn_type);
	if (is_internal)
		LLVMSetLinkage(f->fn, LLVMInternalLinkage);
	add_attr(f, LLVMAttributeFunctionIndex, "nounwind");
	unsigned n = LLVMCountParamTypes(fn_type);
	for (unsigned i = 0; i < n; i++) {
		LLVMValueRef p = LLVMGetParam(f->fn, i);
		if (LLVMGetTypeKind(LLVMTypeOf(p)) != LLVMPointerTypeKind)
			continue;
		add_attr(f, i + 1, "noalias");
		add_attr(f, i + 1, "nocapture");
	}
	f->b = LLVMCreateBuilderInContext(f->ctx);
	LLVMPositionBuilderAtEnd(f->b,
				 LLVMAppendBasicBlockInContext(f->ctx, f->fn,
							       "entry"));
}

void cg_fn_end(cg_fn *f)
{
	LLVMDisposeBuilder(f->b);
	f->b = NULL;
}

void cg_fn_param_readonly(cg_fn *f, unsigned i)
{
	add_attr(f, i + 1, "readonly");
}

void cg_fn_attr(cg_fn *f, const char *kind)
{
	add_attr(f, LLVMAttributeFunctionIndex, kind);
}

void cg_fn_attr_str(cg_fn *f, const char *key, const char *value)
{
	LLVMAddAttributeAtIndex(f->fn, LLVMAttributeFunctionIndex,
				LLVMCreateStringAttribute(f->ctx, key,
							  (unsigned)strlen(key),
							  value,
							  (unsigned)strlen(
								  value)));
}

/* ---- types and constants ---------------------------------------------------- */

LLVMTypeRef cg_t_f32(cg_fn *f)
{
	return LLVMFloatTypeInContext(f->ctx);
}
LLVMTypeRef cg_t_i64(cg_fn *f)
{
	return LLVMInt64TypeInContext(f->ctx);
}
LLVMTypeRef cg_t_i32(cg_fn *f)
{
	return LLVMInt32TypeInContext(f->ctx);
}
LLVMTypeRef cg_t_ptr(cg_fn *f)
{
	return LLVMPointerTypeInContext(f->ctx, 0);
}

LLVMTypeRef cg_t_vec(cg_fn *f, unsigned width)
{
	return LLVMVectorType(cg_t_f32(f), width);
}

LLVMValueRef cg_i64(cg_fn *f, int64_t v)
{
	return LLVMConstInt(cg_t_i64(f), (unsigned long long)v, 1);
}

LLVMValueRef cg_i32(cg_fn *f, int32_t v)
{
	return LLVMConstInt(cg_t_i32(f), (unsigned long long)(int64_t)v, 1);
}

LLVMValueRef cg_f32(cg_fn *f, float v)
{
	return LLVMConstReal(cg_t_f32(f), v);
}

/* The constant c of scalar type t, or c in every lane of vector type t. */
static LLVMValueRef splat_const(LLVMTypeRef t, LLVMValueRef c)
{
	if (LLVMGetTypeKind(t) != LLVMVectorTypeKind)
		return c;
	LLVMValueRef lanes[64];
	unsigned n = LLVMGetVectorSize(t);
	assert(n <= 64);
	for (unsigned i = 0; i < n; i++)
		lanes[i] = c;
	return LLVMConstVector(lanes, n);
}

static LLVMTypeRef elem_type(LLVMTypeRef t)
{
	return LLVMGetTypeKind(t) == LLVMVectorTypeKind ? LLVMGetElementType(t)
							: t;
}

LLVMValueRef cg_const_real(LLVMTypeRef t, double v)
{
	return splat_const(t, LLVMConstReal(elem_type(t), v));
}

LLVMValueRef cg_const_int(LLVMTypeRef t, uint64_t v)
{
	return splat_const(t, LLVMConstInt(elem_type(t), v, 0));
}

/* ---- integer arithmetic ---------------------------------------------------- */

LLVMValueRef cg_add(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildNUWAdd(f->b, a, b, "");
}

LLVMValueRef cg_mul(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return LLVMBuildNUWMul(f->b, a, b, "");
}

LLVMValueRef cg_addi(cg_fn *f, LLVMValueRef a, int64_t b)
{
	if (b == 0)
		return a;
	if (b < 0)
		return LLVMBuildNSWSub(f->b, a, cg_i64(f, -b), "");
	return cg_add(f, a, cg_i64(f, b));
}

LLVMValueRef cg_muli(cg_fn *f, LLVMValueRef a, int64_t b)
{
	if (b == 1)
		return a;
	return cg_mul(f, a, cg_i64(f, b));
}

LLVMValueRef cg_min(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	LLVMValueRef lt = LLVMBuildICmp(f->b, LLVMIntSLT, a, b, "");
	return LLVMBuildSelect(f->b, lt, a, b, "");
}

LLVMValueRef cg_muldiv(cg_fn *f, LLVMValueRef a, LLVMValueRef b, LLVMValueRef c)
{
	return LLVMBuildUDiv(f->b, cg_mul(f, a, b), c, "");
}

/* ---- memory ------------------------------------------------------------------ */

LLVMValueRef cg_at(cg_fn *f, LLVMValueRef p, LLVMValueRef idx)
{
	return LLVMBuildInBoundsGEP2(f->b, cg_t_f32(f), p, &idx, 1, "");
}

LLVMValueRef cg_ati(cg_fn *f, LLVMValueRef p, int64_t c)
{
	if (c == 0)
		return p;
	return cg_at(f, p, cg_i64(f, c));
}

LLVMValueRef cg_load(cg_fn *f, LLVMValueRef p)
{
	LLVMValueRef v = LLVMBuildLoad2(f->b, cg_t_f32(f), p, "");
	LLVMSetAlignment(v, 4);
	return v;
}

void cg_store(cg_fn *f, LLVMValueRef v, LLVMValueRef p)
{
	LLVMSetAlignment(LLVMBuildStore(f->b, v, p), 4);
}

LLVMValueRef cg_vload(cg_fn *f, unsigned width, LLVMValueRef p, unsigned align)
{
	LLVMValueRef v = LLVMBuildLoad2(f->b, cg_t_vec(f, width), p, "");
	LLVMSetAlignment(v, align);
	return v;
}

void cg_vstore(cg_fn *f, LLVMValueRef v, LLVMValueRef p, unsigned align)
{
	LLVMSetAlignment(LLVMBuildStore(f->b, v, p), align);
}

LLVMValueRef cg_vload_part(cg_fn *f, unsigned width, LLVMValueRef p,
			   unsigned lanes)
{
	if (lanes >= width)
		return cg_vload(f, width, p, 4);
	LLVMTypeRef tys[2] = {cg_t_vec(f, width), cg_t_ptr(f)};
	LLVMValueRef args[4] = {p, cg_i32(f, 4), cg_mask(f, width, lanes),
				LLVMConstNull(tys[0])};
	return cg_intrinsic(f, "llvm.masked.load", tys, 2, args, 4);
}

void cg_vstore_part(cg_fn *f, LLVMValueRef v, LLVMValueRef p, unsigned lanes)
{
	unsigned width = LLVMGetVectorSize(LLVMTypeOf(v));
	if (lanes >= width) {
		cg_vstore(f, v, p, 4);
		return;
	}
	LLVMTypeRef tys[2] = {cg_t_vec(f, width), cg_t_ptr(f)};
	LLVMValueRef args[4] = {v, p, cg_i32(f, 4), cg_mask(f, width, lanes)};
	cg_intrinsic(f, "llvm.masked.store", tys, 2, args, 4);
}

LLVMValueRef cg_splat(cg_fn *f, unsigned width, LLVMValueRef s)
{
	LLVMTypeRef vt = cg_t_vec(f, width);
	LLVMValueRef v = LLVMBuildInsertElement(f->b, LLVMGetPoison(vt), s,
						cg_i32(f, 0), "");
	LLVMValueRef zeros = LLVMConstNull(LLVMVectorType(cg_t_i32(f), width));
	return LLVMBuildShuffleVector(f->b, v, LLVMGetPoison(vt), zeros, "");
}

LLVMValueRef cg_mask(cg_fn *f, unsigned width, unsigned n)
{
	LLVMValueRef lanes[64];
	LLVMTypeRef i1 = LLVMInt1TypeInContext(f->ctx);
	assert(width <= 64);
	for (unsigned i = 0; i < width; i++)
		lanes[i] = LLVMConstInt(i1, i < n, 0);
	return LLVMConstVector(lanes, width);
}

/* ---- calls ---------------------------------------------------------------------- */

LLVMValueRef cg_intrinsic(cg_fn *f, const char *name, LLVMTypeRef *tys,
			  unsigned n_tys, LLVMValueRef *args, unsigned n_args)
{
	unsigned id = LLVMLookupIntrinsicID(name, strlen(name));
	assert(id != 0);
	LLVMValueRef decl = LLVMGetIntrinsicDeclaration(f->mod, id, tys, n_tys);
	LLVMTypeRef ty = LLVMIntrinsicGetType(f->ctx, id, tys, n_tys);
	return LLVMBuildCall2(f->b, ty, decl, args, n_args, "");
}

void cg_prefetch(cg_fn *f, LLVMValueRef addr, bool is_write)
{
	LLVMTypeRef pt = cg_t_ptr(f);
	LLVMValueRef args[4] = {addr, cg_i32(f, is_write), cg_i32(f, 3),
				cg_i32(f, 1)};
	cg_intrinsic(f, "llvm.prefetch", &pt, 1, args, 4);
}

LLVMValueRef cg_call_extern(cg_fn *f, const char *name, LLVMTypeRef fn_type,
			    LLVMValueRef *args, unsigned n_args)
{
	LLVMValueRef callee = LLVMGetNamedFunction(f->mod, name);
	if (!callee)
		callee = LLVMAddFunction(f->mod, name, fn_type);
	return LLVMBuildCall2(f->b, fn_type, callee, args, n_args, "");
}

LLVMValueRef cg_call(cg_fn *f, LLVMValueRef callee, LLVMValueRef *args,
		     unsigned n_args)
{
	return LLVMBuildCall2(f->b, LLVMGlobalGetValueType(callee), callee,
			      args, n_args, "");
}

LLVMValueRef cg_fast(LLVMValueRef v, bool is_reduction)
{
	LLVMFastMathFlags fl = LLVMFastMathAllowContract;
	if (is_reduction)
		fl |= LLVMFastMathAllowReassoc | LLVMFastMathNoSignedZeros;
	LLVMSetFastMathFlags(v, fl);
	return v;
}

/* ---- control flow ------------------------------------------------------------------ */

LLVMBasicBlockRef cg_block(cg_fn *f, const char *name)
{
	return LLVMAppendBasicBlockInContext(f->ctx, f->fn, name);
}

LLVMValueRef cg_loop_begin(cg_fn *f, cg_loop *l, LLVMValueRef start,
			   LLVMValueRef end, int64_t step)
{
	LLVMBasicBlockRef pre = LLVMGetInsertBlock(f->b);
	LLVMBasicBlockRef body;

	l->header = cg_block(f, "loop");
	body = cg_block(f, "body");
	l->exit = cg_block(f, "exit");
	l->step = step;
	LLVMBuildBr(f->b, l->header);
	LLVMPositionBuilderAtEnd(f->b, l->header);
	l->iv = LLVMBuildPhi(f->b, cg_t_i64(f), "i");
	LLVMAddIncoming(l->iv, &start, &pre, 1);
	LLVMBuildCondBr(f->b, LLVMBuildICmp(f->b, LLVMIntSLT, l->iv, end, ""),
			body, l->exit);
	LLVMPositionBuilderAtEnd(f->b, body);
	return l->iv;
}

void cg_loop_end(cg_fn *f, cg_loop *l)
{
	LLVMBasicBlockRef latch = LLVMGetInsertBlock(f->b);
	LLVMValueRef next = LLVMBuildNSWAdd(f->b, l->iv, cg_i64(f, l->step), "");
	LLVMBuildBr(f->b, l->header);
	LLVMAddIncoming(l->iv, &next, &latch, 1);
	LLVMPositionBuilderAtEnd(f->b, l->exit);
}

void cg_loop_no_unroll(cg_fn *f, const cg_loop *l)
{
	LLVMMetadataRef tmp = LLVMTemporaryMDNode(f->ctx, NULL, 0);
	const char *key = "llvm.loop.unroll.disable";
	LLVMMetadataRef ops[2] =
		{tmp,
		 LLVMMDNodeInContext2(f->ctx,
				      (LLVMMetadataRef[]){LLVMMDStringInContext2(
					      f->ctx, key, strlen(key))},
				      1)};
	LLVMMetadataRef id = LLVMMDNodeInContext2(f->ctx, ops, 2);
	LLVMMetadataReplaceAllUsesWith(tmp, id); /* the loop id names itself */
	LLVMBasicBlockRef latch = LLVMGetIncomingBlock(l->iv, 1);
	unsigned kind = LLVMGetMDKindIDInContext(f->ctx, "llvm.loop", 9);
	LLVMSetMetadata(LLVMGetBasicBlockTerminator(latch), kind,
			LLVMMetadataAsValue(f->ctx, id));
}

LLVMBasicBlockRef cg_if_begin(cg_fn *f, LLVMValueRef cond)
{
	LLVMBasicBlockRef then = cg_block(f, "then");
	LLVMBasicBlockRef join = cg_block(f, "join");
	LLVMBuildCondBr(f->b, cond, then, join);
	LLVMPositionBuilderAtEnd(f->b, then);
	return join;
}

void cg_if_end(cg_fn *f, LLVMBasicBlockRef join)
{
	LLVMBuildBr(f->b, join);
	LLVMPositionBuilderAtEnd(f->b, join);
}

void cg_transpose(cg_fn *f, LLVMValueRef *r, unsigned n)
{
	LLVMValueRef lo[64], hi[64];
	for (unsigned h = n / 2; h >= 1; h /= 2) {
		for (unsigned l = 0; l < n; l++) {
			bool is_a = (l & h) == 0;
			lo[l] = cg_i32(f, (int32_t)(is_a ? l : n + l - h));
			hi[l] = cg_i32(f, (int32_t)(is_a ? l + h : n + l));
		}
		LLVMValueRef mlo = LLVMConstVector(lo, n),
			     mhi = LLVMConstVector(hi, n);
		for (unsigned i = 0; i < n; i++) {
			if (i & h)
				continue;
			LLVMValueRef x = r[i], y = r[i + h];
			r[i] = LLVMBuildShuffleVector(f->b, x, y, mlo, "");
			r[i + h] = LLVMBuildShuffleVector(f->b, x, y, mhi, "");
		}
	}
}

LLVMValueRef cg_entry_alloca(cg_fn *f, LLVMTypeRef t, unsigned align)
{
	LLVMBasicBlockRef entry = LLVMGetEntryBasicBlock(f->fn);
	LLVMBuilderRef b = LLVMCreateBuilderInContext(f->ctx);
	LLVMValueRef first = LLVMGetFirstInstruction(entry);
	if (first)
		LLVMPositionBuilderBefore(b, first);
	else
		LLVMPositionBuilderAtEnd(b, entry);
	LLVMValueRef a = LLVMBuildAlloca(b, t, "");
	if (align)
		LLVMSetAlignment(a, align);
	LLVMDisposeBuilder(b);
	return a;
}

LLVMValueRef cg_var(cg_fn *f, LLVMTypeRef t, LLVMValueRef init)
{
	LLVMValueRef a = cg_entry_alloca(f, t, 0);
	LLVMBuildStore(f->b, init, a);
	return a;
}

LLVMValueRef cg_omp_i32(cg_fn *f, const char *name)
{
	LLVMTypeRef t = LLVMFunctionType(cg_t_i32(f), NULL, 0, 0);
	return cg_call_extern(f, name, t, NULL, 0);
}

void cg_gomp_parallel(cg_fn *f, LLVMValueRef body, LLVMValueRef data,
		      LLVMValueRef n_threads)
{
	LLVMTypeRef ptr = cg_t_ptr(f), i32 = cg_t_i32(f);
	LLVMTypeRef ps[4] = {ptr, ptr, i32, i32};
	LLVMValueRef args[4] = {body, data, n_threads, cg_i32(f, 0)};
	cg_call_extern(f, "GOMP_parallel",
		       LLVMFunctionType(LLVMVoidTypeInContext(f->ctx), ps, 4, 0),
		       args, 4);
}

LLVMValueRef cg_atomic_load_i32(cg_fn *f, LLVMValueRef p,
				LLVMAtomicOrdering order)
{
	LLVMValueRef v = LLVMBuildLoad2(f->b, cg_t_i32(f), p, "");
	LLVMSetOrdering(v, order);
	LLVMSetAlignment(v, 4);
	return v;
}

void cg_atomic_store(cg_fn *f, LLVMValueRef v, LLVMValueRef p,
		     LLVMAtomicOrdering order)
{
	LLVMValueRef s = LLVMBuildStore(f->b, v, p);
	LLVMSetOrdering(s, order);
	LLVMSetAlignment(s, 4);
}
