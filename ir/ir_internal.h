/*
 * ir_internal.h - helpers shared by the files of ir/ only (the shape rules,
 * the verifier, the printer and the reader). Other stages use ir.h.
 */
#ifndef ATTNC_IR_INTERNAL_H
#define ATTNC_IR_INTERNAL_H

#include "ir.h"

/* ir_infer_type without reporting: on failure writes the message
 * ("<op>: <what is wrong>: <shapes>") into msg (size bytes) and returns
 * false. The verifier uses it to report under its own prefix. */
bool ir_infer_type_msg(const ir_module *m, const ir_graph *g, ir_node *node,
		       char *msg, size_t size);

/* True if t is a type a tensor may have: rank <= IR_MAX_RANK, a known
 * dtype, static dims >= 0 and symbolic dims coef >= 1 of a symbol of m. */
bool ir_type_is_valid(const ir_module *m, const ir_type *t);

#endif
