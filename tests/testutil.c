/*
 * testutil.c - helpers shared by the test programs.
 */
#include "testutil.h"

#include <math.h>
#include <stdio.h>

const char *tu_path(const char *rel)
{
	static char buf[4096];
	snprintf(buf, sizeof buf, "%s/%s", ATTNC_SOURCE_DIR, rel);
	return buf;
}

double tu_max_rel_err(const float *a, const float *b, size_t n, double atol,
		      double rtol)
{
	double worst = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs((double)a[i] - (double)b[i]) /
			   (atol + rtol * fabs((double)b[i]));
		if (isnan(e))
			return INFINITY;
		if (e > worst)
			worst = e;
	}
	return worst;
}
