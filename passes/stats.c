/*
 * stats.c - the --stats report: one JSON object describing the optimized
 * module, for users who want to see what the passes did and for tests that
 * check it (a fused attention op appears under its own op name).
 *
 * "kernels" counts the nodes that would each be one loop nest: every node
 * that is neither a leaf nor a view. "planned_bytes" is the activation
 * slab the memory planner needs, the largest over the functions (one
 * function runs at a time, so they can share one slab), with every symbol
 * at its fallback value or 1.
 */
#include "passes.h"

#include <string.h>

static void print_op_counts(const ir_module *m, FILE *out)
{
	uint64_t count[IR_OP_COUNT] = {0};
	for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
		const ir_graph *g = &m->funcs[fi]->g;
		for (uint32_t i = 0; i < g->n_nodes; i++)
			count[g->nodes[i].op]++;
	}
	/* Selection by name each time: IR_OP_COUNT is small. */
	bool done[IR_OP_COUNT] = {0};
	const char *sep = "";
	fputs("{", out);
	for (;;) {
		int best = -1;
		for (int op = 0; op < IR_OP_COUNT; op++)
			if (count[op] && !done[op] &&
			    (best < 0 || strcmp(ir_op_table[op].name,
						ir_op_table[best].name) < 0))
				best = op;
		if (best < 0)
			break;
		done[best] = true;
		fprintf(out, "%s\"%s\": %llu", sep, ir_op_table[best].name,
			(unsigned long long)count[best]);
		sep = ", ";
	}
	fputs("}", out);
}

static uint64_t count_kernels(const ir_module *m, uint64_t *n_nodes)
{
	uint64_t n = 0;
	*n_nodes = 0;
	for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
		const ir_graph *g = &m->funcs[fi]->g;
		*n_nodes += g->n_nodes;
		for (uint32_t i = 0; i < g->n_nodes; i++)
			if (!(ir_op_table[g->nodes[i].op].flags &
			      (IR_OPF_LEAF | IR_OPF_VIEW)))
				n++;
	}
	return n;
}

/* The largest slab any function needs; 0 if planning ran out of memory
 * (already reported). */
static uint64_t planned_bytes(const ir_module *m)
{
	uint64_t most = 0;
	for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
		pass_memplan plan;
		if (!pass_memplan_func(m, m->funcs[fi], NULL, &plan))
			return 0;
		if (plan.total_bytes > most)
			most = plan.total_bytes;
		pass_memplan_fini(m->ctx, &plan);
	}
	return most;
}

static uint64_t param_elements(const ir_module *m)
{
	uint64_t n = 0;
	for (uint32_t p = 0; p < m->n_params; p++) {
		const ir_type *t = &m->params[p].type;
		n += pass_type_bytes(m, t, NULL) / ir_dtype_size(t->dtype);
	}
	return n;
}

void pass_stats_print(const ir_module *m, const char *extra, FILE *out)
{
	uint64_t n_nodes;
	fputs("{\"ops\": ", out);
	print_op_counts(m, out);
	fprintf(out, ", \"kernels\": %llu",
		(unsigned long long)count_kernels(m, &n_nodes));
	fprintf(out, ", \"planned_bytes\": %llu",
		(unsigned long long)planned_bytes(m));
	fprintf(out, ", \"nodes\": %llu, \"params\": %u",
		(unsigned long long)n_nodes, m->n_params);
	fprintf(out, ", \"param_elements\": %llu, \"functions\": %u",
		(unsigned long long)param_elements(m), m->n_funcs);
	if (extra && *extra)
		fprintf(out, ", %s", extra);
	fputs("}\n", out);
}
