"""fit_check.py - what the fitting scripts (fit_tanh.py, fit_erf.py) share:
compiling and running the C program that measures a fitted float32
function against libm's double one over every float of its range."""
import os
import subprocess
import tempfile


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
