/*
 * fuzz_frontend.c - libFuzzer target for the front end and the IR text:
 * any byte string given as a .g file must give a module or diagnostics,
 * never a crash, a hang or a leak; a module that comes out must verify,
 * print, and read back from its printed text.
 *
 * Built with clang -fsanitize=fuzzer,address (cmake -DATTNC_FUZZ=ON with
 * CC=clang-19); tests/fuzz/run.sh runs it on the models as seed corpus.
 */
#include "frontend.h"
#include "ir.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

/* Prints m into memory and reads it back; both must succeed. */
static void check_text_round_trip(ir_ctx *ctx, const ir_module *m)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return;
	ir_module_print(m, f);
	fclose(f);
	uint32_t src = ir_ctx_add_source(ctx, "printed.ir", text, len);
	if (src) {
		ir_module *back = ir_module_read(ctx, src);
		assert(back != NULL);
		ir_module_destroy(back);
	}
	free(text);
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	ir_ctx ctx;
	ir_ctx_init(&ctx);
	ctx.diag_out = fopen("/dev/null", "w");
	if (!ctx.diag_out)
		return 0;
	uint32_t file = ir_ctx_add_source(&ctx, "fuzz.g", (const char *)data,
					  size);
	ir_module *m = file ? fe_compile(&ctx, file) : NULL;
	if (m) {
		assert(ir_module_verify(m));
		check_text_round_trip(&ctx, m);
	}
	ir_module_destroy(m);
	fclose(ctx.diag_out);
	ir_ctx_fini(&ctx);
	return 0;
}
