/*
 * cg_lower_math.c - exp, tanh and erf for float32 written out in LLVM IR, so
 * that loops over them vectorize (a call to libm's expf or tanhf keeps a
 * loop scalar, and softmax, cross-entropy, sigmoid and tanh spend most of
 * their time there).
 *
 * exp is Cephes' expf (S. L. Moshier): it splits x
 * into n ln2 + r with |r| <= ln2/2, evaluates a degree-6 polynomial for
 * e^r and scales by 2^n through the exponent bits; exp is within a few
 * float ulps of the correctly rounded result (the interpreter's, which
 * rounds a double result), and results below the normal range flush to 0.
 * tanh is one rational function, x P(x^2) / Q(x^2), a quarter of the
 * work of Cephes' polynomial-or-exp (tanh was a tenth of a Bahdanau
 * training step): within 3.1e-7 relative (5 ulps near 1, 1-2 elsewhere),
 * measured over every float by scripts/fit_tanh.py's check and over a
 * million of them by tests/test_codegen_lower.c.
 * erf is a polynomial below 1 and 1 - 2^L(t) above, 2^L by a
 * polynomial of its own (no general exp: erf needs neither its range
 * checks nor, where erfc is small, its precision), fitted by
 * scripts/fit_erf.py: within 1.71 ulps over every float of [0, 5] (its
 * check) and 2 over the whole float range (tests/test_codegen_lower.c).
 * All take a float or a vector of floats (the fused attention kernels
 * exponentiate a vector of scores at a time).
 */
#include "cg_lower.h"

/* The float constant v shaped like x (a float or a vector of them). */
static LLVMValueRef fc(LLVMValueRef x, float v)
{
	return cg_const_real(LLVMTypeOf(x), v);
}

/* The i32 type with x's shape. */
static LLVMTypeRef int_like(cg_fn *f, LLVMValueRef x)
{
	LLVMTypeRef t = LLVMTypeOf(x);
	if (LLVMGetTypeKind(t) == LLVMVectorTypeKind)
		return LLVMVectorType(cg_t_i32(f), LLVMGetVectorSize(t));
	return cg_t_i32(f);
}

/* A float intrinsic of one or two arguments of x's type. */
static LLVMValueRef call(cg_fn *f, const char *name, LLVMValueRef x,
			 LLVMValueRef y)
{
	LLVMTypeRef t = LLVMTypeOf(x);
	LLVMValueRef args[2] = {x, y};
	return cg_intrinsic(f, name, &t, 1, args, y ? 2 : 1);
}

/* a b + c rounded once (llvm.fma). */
static LLVMValueRef fma3(cg_fn *f, LLVMValueRef a, LLVMValueRef b,
			 LLVMValueRef c)
{
	LLVMTypeRef t = LLVMTypeOf(a);
	LLVMValueRef args[3] = {a, b, c};
	return cg_intrinsic(f, "llvm.fma", &t, 1, args, 3);
}

/* xc - n ln2 as Cody and Waite split it, n ln2_hi + n ln2_lo: ln2_hi =
 * 0.693359375 has 9 significant bits and |n| <= 128 at most 8, so n ln2_hi is
 * exact and xc - n ln2_hi, one fused multiply-add, rounds as the
 * subtraction of the separate product did (the same bits, an
 * instruction fewer); n ln2_lo is rounded before its subtraction. */
static LLVMValueRef reduce_ln2(cg_fn *f, LLVMValueRef xc, LLVMValueRef n)
{
	LLVMBuilderRef b = f->b;
	LLVMValueRef r = fma3(f, LLVMBuildFNeg(b, n, ""), fc(xc, 0.693359375f),
			      xc);
	return LLVMBuildFSub(b, r,
			     LLVMBuildFMul(b, n, fc(xc, -2.12194440e-4f), ""),
			     "");
}

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
	LLVMValueRef p = fc(x, c[n - 1]);
	for (int i = n - 2; i >= 0; i--)
		p = fadd(f, fmul(f, p, x), fc(x, c[i]));
	return p;
}

/* 2^n as a float, for an i32 n in [-126, 127]; like is a float of the
 * result's shape. */
static LLVMValueRef pow2(cg_fn *f, LLVMValueRef n, LLVMValueRef like)
{
	LLVMTypeRef it = LLVMTypeOf(n);
	LLVMValueRef e = LLVMBuildAdd(f->b, n, cg_const_int(it, 127), "");
	return LLVMBuildBitCast(f->b,
				LLVMBuildShl(f->b, e, cg_const_int(it, 23), ""),
				LLVMTypeOf(like), "");
}

LLVMValueRef cg_lower_exp(cg_fn *f, LLVMValueRef x)
{
	static const float P[6] = {5.0000001201e-1f, 1.6666665459e-1f,
				   4.1665795894e-2f, 8.3334519073e-3f,
				   1.3981999507e-3f, 1.9875691500e-4f};
	LLVMBuilderRef b = f->b;
	/* Clamp so that n stays in [-126, 128]. */
	LLVMValueRef xc = call(f, "llvm.minnum", x, fc(x, 88.72283935546875f));
	xc = call(f, "llvm.maxnum", xc, fc(x, -87.33654022216797f));
	LLVMValueRef n = call(f, "llvm.floor",
			      fadd(f, fmul(f, xc, fc(x, 1.44269504088896341f)),
				   fc(x, 0.5f)),
			      NULL);
	LLVMValueRef r = reduce_ln2(f, xc, n);
	LLVMValueRef r2 = fmul(f, r, r);
	LLVMValueRef y = fadd(f, fadd(f, fmul(f, horner(f, r, P, 6), r2), r),
			      fc(x, 1));
	/* y * 2^n as two exact scalings by 2^(n/2), each a normal float. */
	LLVMValueRef ni = LLVMBuildFPToSI(b, n, int_like(f, x), "");
	LLVMValueRef n1 = LLVMBuildAShr(b, ni, cg_const_int(int_like(f, x), 1),
					"");
	LLVMValueRef n2 = LLVMBuildSub(b, ni, n1, "");
	y = LLVMBuildFMul(b, y, pow2(f, n1, x), "");
	y = LLVMBuildFMul(b, y, pow2(f, n2, x), "");
	/* Out of range: +inf above, 0 below; NaN stays NaN. */
	LLVMValueRef big = LLVMBuildFCmp(b, LLVMRealOGT, x,
					 fc(x, 88.72283935546875f), "");
	LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, x,
					   fc(x, -87.33654022216797f), "");
	y = LLVMBuildSelect(b, big, fc(x, __builtin_inff()), y, "");
	y = LLVMBuildSelect(b, small, fc(x, 0), y, "");
	LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(b, nan, x, y, "");
}

LLVMValueRef cg_lower_exp_nonpos(cg_fn *f, LLVMValueRef x)
{
	static const float P[6] = {5.0000001201e-1f, 1.6666665459e-1f,
				   4.1665795894e-2f, 8.3334519073e-3f,
				   1.3981999507e-3f, 1.9875691500e-4f};
	LLVMBuilderRef b = f->b;
	/* n in [-126, 0], so 2^n is one normal float. */
	LLVMValueRef xc = call(f, "llvm.maxnum", x, fc(x, -87.33654022216797f));
	LLVMValueRef n = call(f, "llvm.floor",
			      fadd(f, fmul(f, xc, fc(x, 1.44269504088896341f)),
				   fc(x, 0.5f)),
			      NULL);
	LLVMValueRef r = reduce_ln2(f, xc, n);
	LLVMValueRef r2 = fmul(f, r, r);
	LLVMValueRef y = fadd(f, fadd(f, fmul(f, horner(f, r, P, 6), r2), r),
			      fc(x, 1));
	y = LLVMBuildFMul(b, y,
			  pow2(f, LLVMBuildFPToSI(b, n, int_like(f, x), ""), x),
			  "");
	LLVMValueRef small = LLVMBuildFCmp(b, LLVMRealOLT, x,
					   fc(x, -87.33654022216797f), "");
	return LLVMBuildSelect(b, small, fc(x, 0), y, "");
}

LLVMValueRef cg_lower_tanh(cg_fn *f, LLVMValueRef x)
{
	/* tanh x = x P(x^2) / Q(x^2) on |x| <= 9.1, fitted by
	 * scripts/fit_tanh.py (relative error 4.7e-8 in exact arithmetic);
	 * float32 tanh is 1 from 9.02 on, so x is clamped there and the
	 * quotient, which rounds a few ulps either side of 1, to [-1, 1]. */
	static const float P[5] = {1.0f, 1.3378350761265113e-1f,
				   3.4923536382657872e-3f,
				   2.0554517171001407e-5f,
				   1.3278107637241103e-8f};
	static const float Q[5] = {1.0f, 4.6711671413478065e-1f,
				   2.5864813912058413e-2f,
				   3.2802756421989562e-4f,
				   7.7453538894601005e-7f};
	LLVMBuilderRef b = f->b;
	LLVMValueRef xc = call(f, "llvm.maxnum", x, fc(x, -9.1f));
	xc = call(f, "llvm.minnum", xc, fc(x, 9.1f));
	LLVMValueRef s = fmul(f, xc, xc);
	LLVMValueRef y = LLVMBuildFDiv(b, fmul(f, xc, horner(f, s, P, 5)),
				       horner(f, s, Q, 5), "");
	y = call(f, "llvm.maxnum", y, fc(x, -1));
	y = call(f, "llvm.minnum", y, fc(x, 1));
	LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(b, nan, x, y, "");
}

LLVMValueRef cg_lower_sigmoid(cg_fn *f, LLVMValueRef x)
{
	/* e = e^-|x| <= 1 needs exp's cheaper half (no overflow, one
	 * scaling): 1 / (1 + e) for x >= 0, e / (1 + e) below, which keeps
	 * e's relative precision down to the smallest normal result. */
	LLVMBuilderRef b = f->b;
	LLVMValueRef ax = call(f, "llvm.fabs", x, NULL);
	LLVMValueRef e = cg_lower_exp_nonpos(f, LLVMBuildFNeg(b, ax, ""));
	LLVMValueRef r = LLVMBuildFDiv(b, fc(x, 1),
				       LLVMBuildFAdd(b, fc(x, 1), e, ""), "");
	LLVMValueRef is_neg = LLVMBuildFCmp(b, LLVMRealOLT, x, fc(x, 0), "");
	LLVMValueRef y = LLVMBuildSelect(b, is_neg, LLVMBuildFMul(b, e, r, ""),
					 r, "");
	LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(b, nan, x, y, "");
}

LLVMValueRef cg_lower_exp_shifted(cg_fn *f, LLVMValueRef d)
{
	/* For d <= 0 cg_lower_exp's scaling by 2^n in two halves is exact in
	 * the first, so one scaling rounds the same: the same bits. */
	LLVMValueRef y = cg_lower_exp_nonpos(f, d);
	LLVMValueRef nan = LLVMBuildFCmp(f->b, LLVMRealUNO, d, d, "");
	return LLVMBuildSelect(f->b, nan, d, y, "");
}

LLVMValueRef cg_lower_erf(cg_fn *f, LLVMValueRef x)
{
	/* erf is odd: computed at t = |x| and given x's sign. Below 1, t +
	 * t S(t^2) (S has no constant 1, which keeps the rounding small);
	 * from 1 on, 1 - 2^L(t) with L fitted to log2 erfc t on [1, 4]
	 * for the smallest largest error of erfc t L(t) (erf's absolute
	 * error: erfc's relative error matters less as erfc shrinks), and
	 * 2^L as 2^n 2^f, n = L rounded, f = L - n (exact) in [-1/2, 1/2],
	 * 2^f = 1 + f E(f) fitted for the smallest largest relative error
	 * and scaled by adding n to its exponent bits (scripts/fit_erf.py:
	 * 1.6e-8 and 9.1e-8 in exact arithmetic, 1.33 ulps over every
	 * float from 1 on, 1.71 below). float32 erf is 1 from 3.92 on, so t
	 * is clamped to 4; L(t) is in [-26, -0.003] for t in [0, 4] (NaN
	 * clamps to 4 too, and is put back at the end), so f = L - n is
	 * exact and 2^L a normal float, with no clamp. Both halves are
	 * computed for every element (a vector's lanes take either). */
	static const float S[6] = {1.2837912277124730e-1f,
				   -3.7612326732051433e-1f,
				   1.1280183118734797e-1f,
				   -2.6711379161173766e-2f,
				   4.9176185704363659e-3f,
				   -5.6316642854888746e-4f};
	static const float L[6] = {-3.8543819040185186e-3f,
				   -1.6121232117390748e0f,
				   -9.4422759448777636e-1f,
				   -1.2787233880746030e-1f,
				   2.1320408211585045e-2f,
				   -1.6597201034544183e-3f};
	static const float E[5] = {6.9314697758199952e-1f,
				   2.4022242074212860e-1f,
				   5.5507337678717371e-2f,
				   9.6715131516412853e-3f,
				   1.3264719796779378e-3f};
	LLVMBuilderRef b = f->b;
	LLVMValueRef ax = call(f, "llvm.fabs", x, NULL);
	LLVMValueRef t = call(f, "llvm.minnum", ax, fc(x, 4));
	LLVMValueRef small = fadd(f, fmul(f, t, horner(f, fmul(f, t, t), S, 6)),
				  t);
	LLVMValueRef l = horner(f, t, L, 6);
	LLVMValueRef n = call(f, "llvm.rint", l, NULL);
	LLVMValueRef fr = LLVMBuildFSub(b, l, n, "");
	LLVMValueRef p = fadd(f, fmul(f, fr, horner(f, fr, E, 5)), fc(x, 1));
	LLVMTypeRef it = int_like(f, x);
	LLVMValueRef bits = LLVMBuildAdd(b, LLVMBuildBitCast(b, p, it, ""),
					 LLVMBuildShl(b,
						      LLVMBuildFPToSI(b, n, it,
								      ""),
						      cg_const_int(it, 23), ""),
					 "");
	LLVMValueRef e = LLVMBuildBitCast(b, bits, LLVMTypeOf(x), "");
	LLVMValueRef large = LLVMBuildFSub(b, fc(x, 1), e, "");
	LLVMValueRef is_small = LLVMBuildFCmp(b, LLVMRealOLT, t, fc(x, 1), "");
	LLVMValueRef y = LLVMBuildSelect(b, is_small, small, large, "");
	y = call(f, "llvm.copysign", y, x);
	LLVMValueRef nan = LLVMBuildFCmp(b, LLVMRealUNO, x, x, "");
	return LLVMBuildSelect(b, nan, x, y, "");
}
