/*
 * exec.c - one way to run any exported function of the model, whether the
 * run is under the reference interpreter or native code: the pictures and
 * the regression report call the prediction, `truth` and `data` through
 * it and need not know which.
 */
#include "driver.h"

#include <math.h>
#include <string.h>
#include <sys/sysinfo.h>

void drv_dims_format(const int64_t *dims, int rank, char *buf, size_t size)
{
	size_t n = (size_t)snprintf(buf, size, "[");
	for (int d = 0; d < rank && n < size; d++)
		n += (size_t)snprintf(buf + n, size - n, "%s%lld",
				      d ? ", " : "", (long long)dims[d]);
	if (n < size)
		snprintf(buf + n, size - n, "]");
}

/* The inputs must be what the entry point was compiled for. */
static bool check_inputs(ir_ctx *ctx, const ir_func *f,
			 const attnrt_tensor_info *want, const interp_tensor *in)
{
	for (uint32_t i = 0; i < f->n_inputs; i++) {
		bool is_same = in[i].rank == want[i].rank &&
			       (in[i].dtype == IR_I32) ==
				       (want[i].dtype == ATTNRT_I32) &&
			       in[i].dtype != IR_F64;
		for (int d = 0; is_same && d < in[i].rank; d++)
			is_same = in[i].dims[d] == want[i].dims[d];
		if (is_same)
			continue;
		char got[160], was[160];
		drv_dims_format(in[i].dims, in[i].rank, got, sizeof got);
		drv_dims_format(want[i].dims, want[i].rank, was, sizeof was);
		ir_error(ctx, f->loc,
			 "'%s': input '%s' is %s%s, but the function "
			 "was compiled for %s%s",
			 f->name, want[i].name, ir_dtype_name(in[i].dtype), got,
			 want[i].dtype == ATTNRT_I32 ? "i32" : "f32", was);
		return false;
	}
	return true;
}

/* Reports that output i of f, of the given shape, cannot be allocated:
 * at the line that computes it, as the interpreter reports its op. */
static void output_oom(ir_ctx *ctx, const ir_func *f, uint32_t i,
		       const attnrt_tensor_info *info)
{
	char dims[160];
	double gib = 4.0 / (1024.0 * 1024 * 1024);
	for (int d = 0; d < info->rank; d++)
		gib *= (double)info->dims[d];
	drv_dims_format(info->dims, info->rank, dims, sizeof dims);
	ir_loc loc = i < f->n_outputs && f->outputs[i] < f->g.n_nodes
			     ? f->g.nodes[f->outputs[i]].loc
			     : f->loc;
	ir_error(ctx, loc,
		 "'%s': out of memory for output %u (%s), %s%s, %.1f GiB",
		 f->name, i,
		 f->output_names && f->output_names[i] ? f->output_names[i]
						       : info->name,
		 info->dtype == ATTNRT_I32 ? "i32" : "f32", dims, gib);
}

/* The outputs are allocated only if together they fit in the machine's
 * memory and swap: where the system overcommits, a larger malloc could
 * succeed and the run be killed when it writes them. */
static bool alloc_outputs(ir_ctx *ctx, const ir_func *f,
			  const attnrt_tensor_info *info, uint32_t n,
			  interp_tensor *outs, void **ptrs)
{
	struct sysinfo si;
	double have = sysinfo(&si) == 0
			      ? ((double)si.totalram + (double)si.totalswap) *
					si.mem_unit
			      : INFINITY,
	       need = 0;
	for (uint32_t i = 0; i < n; i++) {
		double bytes = 4;
		for (int d = 0; d < info[i].rank; d++)
			bytes *= (double)info[i].dims[d];
		if ((need += bytes) > have) {
			output_oom(ctx, f, i, &info[i]);
			return false;
		}
	}
	for (uint32_t i = 0; i < n; i++) {
		ir_dtype dt = info[i].dtype == ATTNRT_I32 ? IR_I32 : IR_F32;
		if (!interp_tensor_alloc(ctx, &outs[i], dt, info[i].rank,
					 info[i].dims)) {
			output_oom(ctx, f, i, &info[i]);
			return false;
		}
		ptrs[i] = outs[i].data;
	}
	return true;
}

static bool jit_call(const drv_exec *e, const ir_func *f,
		     const interp_tensor *inputs, interp_tensor *outs)
{
	cg_program *p = e->jit->p;
	uint32_t n_in, n_out;
	const attnrt_tensor_info *ins = cg_program_inputs(p, f->name, &n_in);
	const attnrt_tensor_info *os = cg_program_outputs(p, f->name, &n_out);
	attnrt_entry_fn fn = cg_program_entry(p, f->name);
	if (!fn || n_in != f->n_inputs || n_out != f->n_outputs) {
		ir_error(e->ctx, f->loc, "'%s' is not a compiled entry point",
			 f->name);
		return false;
	}
	/* Pointers to the inputs and outputs, as many as the entry has. */
	const void **in_ptrs = ir_alloc(e->ctx, n_in * sizeof *in_ptrs);
	void **out_ptrs = ir_alloc(e->ctx, n_out * sizeof *out_ptrs);
	void *scratch = NULL;
	bool ok = false;
	if (!in_ptrs || !out_ptrs) {
		ir_error(e->ctx, (ir_loc){0}, "out of memory");
		goto out;
	}
	if (!check_inputs(e->ctx, f, ins, inputs) ||
	    !alloc_outputs(e->ctx, f, os, n_out, outs, out_ptrs))
		goto out;
	for (uint32_t i = 0; i < n_in; i++)
		in_ptrs[i] = inputs[i].data;
	size_t scratch_bytes = cg_program_scratch_bytes(p, f->name);
	scratch = attnrt_alloc(NULL, scratch_bytes);
	if (!scratch) {
		ir_error(e->ctx, f->loc,
			 "'%s': out of memory for its scratch, %.1f GiB",
			 f->name,
			 (double)scratch_bytes / (1024.0 * 1024 * 1024));
		goto out;
	}
	attnrt_run run = {.seed = e->o->seed, .n_threads = e->o->threads};
	int rc = fn(&run, e->jit->params, scratch, in_ptrs, out_ptrs);
	ok = rc == ATTNRT_OK;
	if (!ok)
		drv_report_run_error(e->ctx, p, f, rc);
out:
	attnrt_free(NULL, scratch);
	ir_free(e->ctx, in_ptrs);
	ir_free(e->ctx, out_ptrs);
	return ok;
}

bool drv_exec_call(const drv_exec *e, const ir_func *f,
		   const interp_tensor *inputs, interp_tensor *outs)
{
	for (uint32_t i = 0; i < f->n_outputs; i++)
		memset(&outs[i], 0, sizeof outs[i]);
	if (!e->jit) {
		interp_opts opts = {.is_f64 = e->o->f64, .seed = e->o->seed};
		return interp_run(e->ctx, e->m, f, &opts, e->params, inputs,
				  outs);
	}
	if (jit_call(e, f, inputs, outs))
		return true;
	for (uint32_t i = 0; i < f->n_outputs; i++)
		interp_tensor_fini(e->ctx, &outs[i]);
	return false;
}
