#!/usr/bin/env python3
"""fit_erf.py - fits the float32 erf of codegen/cg_lower_math.c and
measures it over every float.

    scripts/fit_erf.py [NS NL NE [C]]   # default 6 6 5 1.0
    scripts/fit_erf.py --check          # the coefficients in cg_lower_math.c

erf is odd, so it is fitted at t = |x| >= 0 and given x's sign:

- t < C: erf t = t + t S(t^2), S = s0 + s1 u + ... (NS coefficients; the
  1 of erf's leading 2/sqrt(pi) = 1.128... is kept out of S, so the last
  addition is of t to a small correction and rounds well), fitted for
  the smallest largest relative error;
- t >= C: erf t = 1 - 2^L(t), L = l0 + l1 t + ... (NL coefficients)
  fitted to log2 erfc t on [C, 4] for the smallest largest erfc(t) |L(t)
  - log2 erfc t|: that is erf's absolute error (times ln 2), so the fit
  spends its precision where erfc is large and erf's ulps are fine,
  which a plain fit of L spends uniformly (it took 9 coefficients, this
  6). 2^L is 2^n 2^f, n = L rounded to an integer, f = L - n (exact) in
  [-1/2, 1/2], 2^f = 1 + f E(f) (NE coefficients) fitted for the
  smallest largest relative error, and 2^n added to the exponent bits.
  float32 erf is 1 from 3.92 on, so t is clamped to 4.

The fits are linear least squares with Lawson's weights (converging to
the minimax fit) in 40-digit arithmetic (mpmath, Debian's python3-mpmath).

--check compiles, with gcc, a program that evaluates the coefficients as
the generated code does (float32, Horner with fused multiply-adds, the
exponent added as an integer) for every float in [0, 5] and prints the
largest ulp error against erf in double below C and from C on, and
checks that erf is 1 exactly from 3.92 on. The project's build never runs
this script; tests (tests/test_codegen_lower.c) hold the generated erf
to 2 ulps over a million floats of [-5, 5] and over the whole float
range, infinities and NaN included.
"""
import sys

from fit_check import C_PROLOGUE, run_c_check

S = ["1.2837912277124730e-1", "-3.7612326732051433e-1", "1.1280183118734797e-1",
     "-2.6711379161173766e-2", "4.9176185704363659e-3", "-5.6316642854888746e-4"]
L = ["-3.8543819040185186e-3", "-1.6121232117390748e0", "-9.4422759448777636e-1",
     "-1.2787233880746030e-1", "2.1320408211585045e-2", "-1.6597201034544183e-3"]
E = ["6.9314697758199952e-1", "2.4022242074212860e-1", "5.5507337678717371e-2",
     "9.6715131516412853e-3", "1.3264719796779378e-3"]
SPLIT = "1.0"

CHECK_C = r"""
static const float S[] = {%(s)s}, L[] = {%(l)s}, E[] = {%(e)s};
static float erf32(float x)
{
	float t = fminf(x, 4.0f);
	if (t < %(c)sf)
		return fmaf(t, horner(t * t, S, %(ns)d), t);
	float l = horner(t, L, %(nl)d), n = rintf(l), f = l - n;
	float p = fmaf(f, horner(f, E, %(ne)d), 1.0f);
	uint32_t bits;
	memcpy(&bits, &p, 4);
	bits += (uint32_t)((int32_t)n << 23);
	memcpy(&p, &bits, 4);
	return 1.0f - p;
}
int main(void)
{
	double worst[2] = {0, 0}, at[2] = {0, 0};
	for (uint32_t b = 0x00800000u; b < 0x40a00000u; b++) { /* normal, to 5 */
		float x;
		memcpy(&x, &b, 4);
		float y = erf32(x);
		double want = erf((double)x);
		float w = (float)want;
		double ulp = nextafterf(w, INFINITY) - w, e = fabs(y - want) / ulp;
		int k = x >= %(c)sf;
		if (e > worst[k]) {
			worst[k] = e;
			at[k] = x;
		}
		if (x >= 3.92f && y != 1.0f) {
			printf("erf(%%.9g) = %%.9g, not 1\n", x, y);
			return 1;
		}
	}
	printf("largest error %%.2f ulps below %(c)s (at %%.6g), "
	       "%%.2f from %(c)s on (at %%.6g)\n", worst[0], at[0], worst[1], at[1]);
	return worst[0] > 2 || worst[1] > 2;
}
"""


def lawson(rows, rhs, iters=40):
    import mpmath as mp
    n, m = len(rows), len(rows[0])
    law = [mp.mpf(1)] * n
    for _ in range(iters):
        a, b = mp.matrix(n, m), mp.matrix(n, 1)
        for k in range(n):
            w = mp.sqrt(law[k])
            for i in range(m):
                a[k, i] = w * rows[k][i]
            b[k] = w * rhs[k]
        sol, _ = mp.qr_solve(a, b)
        c = [sol[i] for i in range(m)]
        errs = [sum(c[i] * rows[k][i] for i in range(m)) - rhs[k] for k in range(n)]
        total = sum(law[k] * abs(errs[k]) for k in range(n))
        law = [law[k] * abs(errs[k]) / total * n + mp.mpf("1e-30") for k in range(n)]
    return c, max(abs(e) for e in errs)


def fit(ns, nl, ne, c):
    import mpmath as mp
    mp.mp.dps = 40
    c = mp.mpf(c)

    def cheb(lo, hi, n):
        return [lo + (hi - lo) / 2 * (1 - mp.cos(mp.pi * (k + mp.mpf(0.5)) / n))
                for k in range(n)]
    xs = cheb(mp.mpf("1e-6"), c, 300)
    # (t + t S(t^2)) / erf t - 1 = sum s_i t^(2i+1) / erf t - (1 - t / erf t)
    rows = [[x * (x * x) ** i / mp.erf(x) for i in range(ns)] for x in xs]
    s, e = lawson(rows, [1 - x / mp.erf(x) for x in xs])
    print("small: largest relative error in exact arithmetic", mp.nstr(e, 4))
    print("S", [mp.nstr(v, 17) for v in s])
    ts = cheb(c, mp.mpf(4), 240)
    l, e = lawson([[mp.erfc(t) * t ** i for i in range(nl)] for t in ts],
                  [mp.erfc(t) * mp.log(mp.erfc(t), 2) for t in ts])
    print("large: largest absolute error of erf in exact arithmetic",
          mp.nstr(e * mp.log(2), 4))
    print("L", [mp.nstr(v, 17) for v in l])
    fs = cheb(mp.mpf(-0.5), mp.mpf(0.5), 200)
    # (1 + f E(f)) / 2^f - 1 = sum e_i f^(i+1) / 2^f - (1 - 1 / 2^f)
    ev, e = lawson([[f ** (i + 1) / mp.power(2, f) for i in range(ne)] for f in fs],
                   [1 - 1 / mp.power(2, f) for f in fs])
    print("2^f: largest relative error in exact arithmetic", mp.nstr(e, 4))
    print("E", [mp.nstr(v, 17) for v in ev])


def check():
    src = CHECK_C % {"s": ", ".join(v + "f" for v in S), "l": ", ".join(v + "f" for v in L),
                     "e": ", ".join(v + "f" for v in E), "c": SPLIT,
                     "ns": len(S), "nl": len(L), "ne": len(E)}
    run_c_check(C_PROLOGUE + src)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        check()
    else:
        args = sys.argv[1:] or ["6", "6", "5"]
        fit(int(args[0]), int(args[1]), int(args[2]),
            float(args[3]) if len(args) > 3 else 1.0)
