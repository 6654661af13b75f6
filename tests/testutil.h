/*
 * testutil.h - helpers shared by the test programs.
 */
#ifndef ATTNC_TESTUTIL_H
#define ATTNC_TESTUTIL_H

#include <stddef.h>

/* Path of a file of the source tree, e.g. tu_path("models/nw.g"); the
 * result is a static buffer overwritten by the next call. */
const char *tu_path(const char *rel);
/* Largest |a[i]-b[i]| / (atol + rtol*|b[i]|); <= 1 means within tolerance. */
double tu_max_rel_err(const float *a, const float *b, size_t n, double atol,
		      double rtol);

#endif
