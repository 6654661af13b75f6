/*
 * infer.c - the "infer" pass: re-derives every node's type with the op
 * shape rules (ir_infer_type) and reports any node whose stored type
 * differs. After the frontend nothing should differ, since it builds every
 * node through the same rules; the pass matters for IR read from text,
 * where a hand-edited type could otherwise reach code generation. It
 * changes nothing.
 */
#include "passes.h"

#include <stdio.h>

static void format_type(const ir_module *m, const ir_type *t, char *buf,
			size_t size)
{
	char dims[256];
	ir_type_format(m, t, dims, sizeof dims);
	snprintf(buf, size, "%s[%s]", ir_dtype_name(t->dtype), dims);
}

/* Checks one node; the shape rule reports its own errors. */
static bool check_node(ir_module *m, const ir_func *f, ir_id id)
{
	const ir_node *n = &f->g.nodes[id];
	ir_node copy = *n;
	if (!ir_infer_type(m->ctx, m, &f->g, &copy))
		return false;
	if (ir_type_eq(&copy.type, &n->type))
		return true;
	char stored[300], derived[300];
	format_type(m, &n->type, stored, sizeof stored);
	format_type(m, &copy.type, derived, sizeof derived);
	ir_error(m->ctx, n->loc,
		 "@%s %%%u (%s): stored type %s, but its operands give %s",
		 f->name, id, ir_op_table[n->op].name, stored, derived);
	return false;
}

bool pass_infer(ir_module *m)
{
	bool ok = true;
	for (uint32_t fi = 0; fi < m->n_funcs; fi++) {
		const ir_func *f = m->funcs[fi];
		for (uint32_t i = 0; i < f->g.n_nodes; i++)
			ok &= check_node(m, f, i);
	}
	return ok;
}
