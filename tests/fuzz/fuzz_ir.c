/*
 * fuzz_ir.c - libFuzzer target for the reader of printed IR and the
 * verifier: any bytes must give a module that verifies or diagnostics,
 * never a crash, a hang or a leak.
 */
#include "ir.h"

#include <assert.h>
#include <stdio.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ctx.diag_out = fopen("/dev/null", "w");
	if (!ctx.diag_out)
		return 0;
	uint32_t file = ir_ctx_add_source(&ctx, "fuzz.ir", (const char *)data,
					  size);
	ir_module *m = file ? ir_module_read(&ctx, file) : NULL;
	if (m)
		assert(ir_module_verify(m));
	ir_module_destroy(m);
	fclose(ctx.diag_out);
	ir_ctx_fini(&ctx);
	return 0;
}
