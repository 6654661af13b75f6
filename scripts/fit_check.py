"""fit_check.py - what the fitting scripts (fit_tanh.py, fit_erf.py) share:
compiling and running the C program that measures a fitted float32
function against libm's double one over every float of its range."""
import os
import subprocess
import tempfile

# What every check program starts with: the headers, and Horner's rule
# in float32 with fmaf, as the JIT evaluates the polynomials.
C_PROLOGUE = r"""
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
static float horner(float s, const float *c, int n)
{
	float p = c[n - 1];
	for (int i = n - 2; i >= 0; i--)
		p = fmaf(p, s, c[i]);
	return p;
}
"""


def run_c_check(src):
    """Compiles the C source src with gcc -O2 -mfma and runs it; raises if
    either step fails (the program exits non-zero when the error bound is
    not met)."""
    with tempfile.TemporaryDirectory() as d:
        c_file, exe = os.path.join(d, "check.c"), os.path.join(d, "check")
        with open(c_file, "w") as f:
            f.write(src)
        subprocess.run(["gcc", "-O2", "-mfma", "-o", exe, c_file, "-lm"], check=True)
        subprocess.run([exe], check=True)
