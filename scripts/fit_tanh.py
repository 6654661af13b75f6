#!/usr/bin/env python3
"""fit_tanh.py - fits the rational tanh of codegen/cg_lower_math.c and
measures it over every float.

    scripts/fit_tanh.py [NP NQ [C]]   # default 4 4 9.1
    scripts/fit_tanh.py --check       # the coefficients in cg_lower_math.c

tanh x ~ x P(x^2) / Q(x^2), P = 1 + p1 s + ... + pNP s^NP, Q = 1 + q1 s +
... + qNQ s^NQ, s = x^2, on [0, C]: the odd numerator and even
denominator keep tanh odd, and P(0) = Q(0) = 1 keeps tanh x = x for small
x. The fit minimizes the largest relative error by Loeb's iteration
(linear least squares of x P - t Q weighted by 1 / (t Q_previous)) with
Lawson's weights, in 40-digit arithmetic (mpmath, Debian's python3-mpmath).

--check compiles, with gcc, a program that evaluates the coefficients as
the generated code does (float32, Horner with fused multiply-adds, the
clamps) for every float in [0, 20] and prints the largest relative error
and ulp error against tanh in double. The project's build never runs this
script; a test (tests/test_codegen_lower.c) holds the generated tanh to
3.2e-7 over a million floats.
"""
import sys

from fit_check import C_PROLOGUE, run_c_check

P = ["1.0", "1.3378350761265113e-1", "3.4923536382657872e-3",
     "2.0554517171001407e-5", "1.3278107637241103e-8"]
Q = ["1.0", "4.6711671413478065e-1", "2.5864813912058413e-2",
     "3.2802756421989562e-4", "7.7453538894601005e-7"]
CLAMP = "9.1"

CHECK_C = r"""
static const float P[] = {%(p)s}, Q[] = {%(q)s};
int main(void)
{
	double worst_rel = 0, worst_ulp = 0, at = 0;
	for (uint32_t b = 0; b < 0x41a00000u; b++) { /* [0, 20] */
		float x;
		memcpy(&x, &b, 4);
		float xc = fminf(fmaxf(x, -%(c)sf), %(c)sf), s = xc * xc;
		float y = xc * horner(s, P, %(np)d) / horner(s, Q, %(nq)d);
		y = fminf(fmaxf(y, -1.0f), 1.0f);
		double want = tanh((double)x);
		float w = (float)want;
		double ulp = nextafterf(w, INFINITY) - w;
		if (x > 0 && fabs(y - want) / want > worst_rel)
			worst_rel = fabs(y - want) / want;
		if (w != 0 && fabs(y - want) / ulp > worst_ulp) {
			worst_ulp = fabs(y - want) / ulp;
			at = x;
		}
	}
	printf("largest relative error %%.3g, %%.2f ulps (at %%.6g)\n",
	       worst_rel, worst_ulp, at);
	return 0;
}
"""


def fit(np_, nq, c):
    import mpmath as mp
    mp.mp.dps = 40
    n = 400
    xs = [c / 2 * (1 - mp.cos(mp.pi * (k + mp.mpf(0.5)) / n)) for k in range(n)]
    ts = [mp.tanh(x) for x in xs]
    qprev = [mp.mpf(1)] * n
    law = [mp.mpf(1)] * n
    for _ in range(60):
        a = mp.matrix(n, np_ + nq)
        rhs = mp.matrix(n, 1)
        for k, (x, t) in enumerate(zip(xs, ts)):
            s, w = x * x, law[k] / (t * qprev[k])
            for i in range(np_):
                a[k, i] = w * x * s ** (i + 1)
            for j in range(nq):
                a[k, np_ + j] = -w * t * s ** (j + 1)
            rhs[k] = w * (t - x)
        sol, _ = mp.qr_solve(a, rhs)
        p = [mp.mpf(1)] + [sol[i] for i in range(np_)]
        q = [mp.mpf(1)] + [sol[np_ + j] for j in range(nq)]
        errs = []
        for k, (x, t) in enumerate(zip(xs, ts)):
            s = x * x
            qprev[k] = sum(cf * s ** i for i, cf in enumerate(q))
            errs.append(x * sum(cf * s ** i for i, cf in enumerate(p)) / qprev[k] / t - 1)
        total = sum(law[k] * abs(errs[k]) for k in range(n))
        law = [law[k] * abs(errs[k]) / total * n + mp.mpf("1e-30") for k in range(n)]
    print("largest relative error in exact arithmetic", mp.nstr(max(abs(e) for e in errs), 5))
    print("P", [mp.nstr(cf, 17) for cf in p])
    print("Q", [mp.nstr(cf, 17) for cf in q])


def check():
    src = CHECK_C % {"p": ", ".join(v + "f" for v in P), "q": ", ".join(v + "f" for v in Q),
                     "c": CLAMP, "np": len(P), "nq": len(Q)}
    run_c_check(C_PROLOGUE + src)


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        check()
    else:
        args = sys.argv[1:] or ["4", "4"]
        fit(int(args[0]), int(args[1]), float(args[2]) if len(args) > 2 else 9.1)
