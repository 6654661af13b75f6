/*
 * cg_lower_math.c - exp and tanh for float32 written out in LLVM IR, so
 * that loops over them vectorize (a call to libm's expf or tanhf keeps a
 * loop scalar, and softmax, cross-entropy, sigmoid and tanh spend most of
 * their time there).
 *
 * The formulas are Cephes' expf and tanhf (S. L. Moshier): exp splits x
 * into n ln2 + r with |r| <= ln2/2, evaluates a degree-6 polynomial for
 * e^r and scales by 2^n through the exponent bits; tanh is a polynomial
 * below |x| = 0.625 and 1 - 2 / (e^2|x| + 1) above. Both are within a few
 * float ulps of the correctly rounded result (the interpreter's, which
 * rounds a double result). Results below the normal range flush to 0.
 */
#include "cg_lower.h"

static LLVMValueRef fmul(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_fast(LLVMBuildFMul(f->b, a, b, ""), false);
}

static LLVMValueRef fadd(cg_fn *f, LLVMValueRef a, LLVMValueRef b)
{
	return cg_fast(LLVMBuildFAdd(f->b, a, b, ""), false);
}

/* c[0] + x (c[1] + x (c[2] + ...)), Horner from the last coefficient. */
static LLVMValueRef horner(cg_fn *f, LLVMValueRef x, const float *c, int n)
{
	LLVMValueRef p = cg_f32(f, c[n - 1]);
	for (int i = n - 2; i >= 0; i--)
		p = fadd(f, fmul(f, p, x), cg_f32(f, c[i]));
	return p;
}

/* 2^n as a float, for an i32 n in [-126, 127]. */
static LLVMValueRef pow2(cg_fn *f, LLVMValueRef n)
{
	LLVMValueRef e = LLVMBuildAdd(f->b, n, cg_i32(f, 127), "");
	return LLVMBuildBitCast(f->b, LLVMBuildShl(f->b, e, cg_i32(f, 23), ""),
				cg_t_f32(f), "");
}

LLVMValueRef cg_lower_exp(cg_fn *f, LLVMValueRef x)
{
	static const float P[6] = {5.0000001201e-1f, 1.6666665459e-1f,
				   4.1665795894e-2f, 8.3334519073e-3f,
				   1.3981999507e-3f, 1.9875691500e-4f};
	LLVMBuilderRef b = f->b;
	/* Clamp so that n stays in [-126, 128]. */
	LLVMValueRef xc = cg_lower_fcall(f, "llvm.minnum", x,
					 cg_f32(f, 88.72283935546875f));
	xc = cg_lower_fcall(f, "llvm.maxnum", xc, cg_f32(f, -87.33654022216797f));
	LLVMValueRef n = cg_lower_fcall(
		f, "llvm.floor", fadd(f, fmul(f, xc, cg_f32(f, 1.44269504088896341f)),
				      cg_f32(f, 0.5f)),
		NULL);
	LLVMValueRef r = LLVMBuildFSub(b, xc, LLVMBuildFMul(b, n, cg_f32(f, 0.693359375f), ""),
				       "");
	r = LLVMBuildFSub(b, r, LLVMBuildFMul(b, n, cg_f32(f, -2.12194440e-4f), ""), "");
	LLVMValueRef r2 = fmul(f, r, r);
	LLVMValueRef y = fadd(f, fadd(f, fmul(f, horner(f, r, P, 6), r2), r),
			      cg_f32(f, 1));
	/* y * 2^n as two exact scalings by 2^(n/2), each a normal float. */
	LLVMValueRef ni = LLVMBuildFPToSI(b, n, cg_t_i32(f), "");
	LLVMValueRef n1 = LLVMBuildAShr(b, ni, cg_i32(f, 1), "");
	LLVMValueRef n2 = LLVMBuildSub(b, ni, n1, "");
	y = LLVMBuildFMul(b, y, pow2(f, n1), "");
	y = LLVMBuildFMul(b, y, pow2(f, n2), "");
	/* Out of range: +inf above, 0 below; NaN stays NaN. */
	LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, x, cg_f32(f, 88.72283935546875f), "");
	LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, x, cg_f32(f, -87.33654022216797f), "");
	y = LLVMBuildSelect(b, big, cg_f32(f, __builtin_inff()), y, "");
	y = LLVMBuildSelect(b, small, cg_f32(f, 0), y, "");
	LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(b, nan, x, y, "");
}

LLVMValueRef cg_lower_tanh(cg_fn *f, LLVMValueRef x)
{
	static const float P[5] = {-3.33332819422e-1f, 1.33314422036e-1f,
				   -5.37397155531e-2f, 2.06390887954e-2f,
				   -5.70498872745e-3f};
	LLVMBuilderRef b = f->b;
	LLVMValueRef ax = cg_lower_fcall(f, "llvm.fabs", x, NULL);
	/* Small: x + x z P(z), z = x^2. */
	LLVMValueRef z = fmul(f, x, x);
	LLVMValueRef small = fadd(f, fmul(f, fmul(f, x, z), horner(f, z, P, 5)), x);
	/* Large: 1 - 2 / (e^{2|x|} + 1), with x's sign. */
	LLVMValueRef e = cg_lower_exp(f, fadd(f, ax, ax));
	LLVMValueRef big = LLVMBuildFSub(
		b, cg_f32(f, 1),
		LLVMBuildFDiv(b, cg_f32(f, 2), fadd(f, e, cg_f32(f, 1)), ""), "");
	big = cg_lower_fcall(f, "llvm.copysign", big, x);
	LLVMValueRef is_small = LLVMBuildFCmp(b, LLVMRealOLT, ax, cg_f32(f, 0.625f), "");
	LLVMValueRef y = LLVMBuildSelect(b, is_small, small, big, "");
	LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(b, nan, x, y, "");
}
