#!/usr/bin/env python3
"""fit_erf.py - fits the float32 erf of codegen/cg_lower_math.c and
measures it over every float.

    scripts/fit_erf.py [NS NL [C]]   # default 6 9 1.0
    scripts/fit_erf.py --check       # the coefficients in cg_lower_math.c

erf is odd, so it is fitted at t = |x| >= 0 and given x's sign:

- t < C: erf t = t + t S(t^2), S = s0 + s1 u + ... (NS coefficients; the
  1 of erf's leading 2/sqrt(pi) = 1.128... is kept out of S, so the last
  addition is of t to a small correction and rounds well), fitted for
  the smallest largest relative error;
- t >= C: erf t = 1 - e^L(t), L = l0 + l1 t + ... (NL coefficients)
  fitted to log erfc t on [C, 4] for the smallest largest absolute error,
  which is erfc's relative error; float32 erf is 1 from 3.92 on, so t is
  clamped to 4.

Both fits are linear least squares with Lawson's weights (converging to
the minimax fit) in 40-digit arithmetic (mpmath, Debian's python3-mpmath).

--check compiles, with gcc, a program that evaluates the coefficients as
the generated code does (float32, Horner with fused multiply-adds, libm's
expf in place of the generated exp) for every float in [0, 5] and prints
the largest ulp error against erf in double. The project's build never
runs this script; a test (tests/test_codegen_lower.c) holds the generated
erf to 2 ulps over a million floats.
"""
import sys

from fit_check import C_PROLOGUE, run_c_check

S = ["1.2837912277124730e-1", "-3.7612326732051433e-1", "1.1280183118734797e-1",
     "-2.6711379161173766e-2", "4.9176185704363659e-3", "-5.6316642854888746e-4"]
L = ["2.9102933324745222e-4", "-1.1301197304572000e0", "-6.3201341926009053e-1",
     "-1.0990974869490348e-1", "2.6327533791995477e-2", "-4.7276919441012589e-3",
     "5.9020398092641646e-4", "-4.5298182585250019e-5", "1.5998235217160017e-6"]
SPLIT = "1.0"

CHECK_C = r"""
static const float S[] = {%(s)s}, L[] = {%(l)s};
int main(void)
{
	double worst = 0, at = 0;
	for (uint32_t b = 0x00800000u; b < 0x40a00000u; b++) { /* normal, to 5 */
		float x;
		memcpy(&x, &b, 4);
		float t = fminf(x, 4.0f), y;
		if (t < %(c)sf)
			y = fmaf(t, horner(t * t, S, %(ns)d), t);
		else
			y = 1.0f - expf(horner(t, L, %(nl)d));
		double want = erf((double)x);
		float w = (float)want;
		double ulp = nextafterf(w, INFINITY) - w;
		if (fabs(y - want) / ulp > worst) {
			worst = fabs(y - want) / ulp;
			at = x;
		}
	}
	printf("largest error %%.2f ulps (at %%.6g)\n", worst, at);
	return 0;
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


def fit(ns, nl, c):
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
    ts = cheb(c, mp.mpf(4), 300)
    l, e = lawson([[t ** i for i in range(nl)] for t in ts],
                  [mp.log(mp.erfc(t)) for t in ts])
    print("large: largest error of log erfc in exact arithmetic", mp.nstr(e, 4))
    print("L", [mp.nstr(v, 17) for v in l])


def check():
    src = CHECK_C % {"s": ", ".join(v + "f" for v in S), "l": ", ".join(v + "f" for v in L),
                     "c": SPLIT, "ns": len(S), "nl": len(L)}
    run_c_check(C_PROLOGUE + src)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        check()
    else:
        args = sys.argv[1:] or ["6", "9"]
        fit(int(args[0]), int(args[1]), float(args[2]) if len(args) > 2 else 1.0)
