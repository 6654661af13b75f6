/*
 * dce.c - the "dce" pass: dead code elimination.
 *
 * Keeps the nodes some function output needs, and every INPUT node (an
 * argument stays an argument even if unused), and compacts each graph
 * preserving order. Parameters are all kept, used or not: a checkpoint
 * holds them all. Constants no node or example refers to are dropped.
 * The other rewriting passes already leave no dead nodes behind them;
 * this pass cleans IR that arrives with some (hand-written, or read back).
 */
#include "passes.h"

bool pass_dce(ir_module *m)
{
	for (uint32_t fi = 0; fi < m->n_funcs; fi++)
		if (!pass_graph_compact(m, m->funcs[fi], NULL))
			return false;
	return pass_module_drop_unused_consts(m);
}
