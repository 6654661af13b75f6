/*
 * testutil.h - helpers shared by the test programs.
 */
#ifndef ATTNC_TESTUTIL_H
#define ATTNC_TESTUTIL_H

#include "ir.h"

#include <check.h>
#include <stddef.h>

/* Debug builds run under ASan and UBSan, where each JIT compile and
 * run costs several times more: the heaviest sweeps take every
 * TU_SWEEP_STRIDE-th case there (each case still in some sweep), all of
 * them in Release. */
#ifdef ATTNC_TESTS_THIN
#define TU_SWEEP_STRIDE 2
#else
#define TU_SWEEP_STRIDE 1
#endif

/* The real corpus, relative to the source tree (never copied into it). */
#define TU_REAL_CORPUS "../shared/data/fra-eng/fra.txt"
/* The exit status ctest counts as skipped (SKIP_RETURN_CODE). */
#define TU_SKIPPED 77

/* Runs every test of s (forking, as Check does by default) and returns
 * main's exit status: EXIT_FAILURE if any failed. Tests that need the
 * real corpus are in a case named "real", which ctest runs on its own
 * (CK_RUN_CASE=real, tests/CMakeLists.txt): without the corpus that run
 * returns TU_SKIPPED without running anything. */
int tu_run_suite(Suite *s);
/* The real corpus's path, or NULL if it is not there. */
const char *tu_real_corpus(void);

/* Path of a file of the source tree, e.g. tu_path("models/nw.g"); the
 * result is a static buffer overwritten by the next call. */
const char *tu_path(const char *rel);
/* Largest |a[i]-b[i]| / (atol + rtol*|b[i]|); <= 1 means within tolerance. */
double tu_max_rel_err(const float *a, const float *b, size_t n, double atol,
		      double rtol);

/* An allocator hook (attnrt_allocator's or ir's alloc function, ud a
 * tu_alloc_hook) that fails allocation number fail_at (from 0) once and
 * serves the others with realloc; live counts the blocks allocated and
 * not yet freed, so a test checks that a failure frees everything. */
typedef struct tu_alloc_hook {
	int n_allocs, fail_at;
	long live;
} tu_alloc_hook;
void *tu_failing_alloc(void *ud, void *ptr, size_t size);

/* A context whose diagnostics go to a memory buffer and, after
 * tu_graph_init, a module "t" with one exported function "f" to build
 * by hand, node by node. */
typedef struct tu_graph {
	ir_ctx ctx;
	ir_module *m; /* NULL after tu_graph_init_ctx */
	ir_func *f;
	char *diag;
	size_t diag_len;
} tu_graph;

/* The context only: m and f stay NULL. */
void tu_graph_init_ctx(tu_graph *g);
/* The context, and the module with f's room for max_io inputs and as many
 * outputs (names included). */
void tu_graph_init(tu_graph *g, uint32_t max_io);
void tu_graph_fini(tu_graph *g);
/* Diagnostics written so far. */
const char *tu_graph_diag(tu_graph *g);

/* A type of static dims: tu_type(IR_F32, 2, 3, 4) is f32[3, 4]. */
ir_type tu_type(ir_dtype dt, int rank, ...);
/* A node of f; fails the test, with the diagnostics, if ir_build does. */
ir_id tu_build(tu_graph *g, ir_op op, const ir_id *args, uint32_t n,
	       const ir_attr *attr, const ir_type *t);
/* The next input of f, named "in". */
ir_id tu_input(tu_graph *g, ir_type t);
/* A constant of type t holding data (t's dtype, row-major). */
ir_id tu_const(tu_graph *g, ir_type t, const void *data);

#endif
