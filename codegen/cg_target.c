/*
 * cg_target.c - the targets --target may name: a target triple of a
 * 64-bit little-endian Linux machine that this LLVM can generate code
 * for (x86_64-linux-gnu, aarch64-linux-gnu, riscv64-linux-gnu, ...).
 *
 * Why those limits: the generated code lays out the runtime's structs
 * (attnrt_run, the parameter and tensor tables) as this compiler, a
 * 64-bit little-endian program, does, and calls libgomp and the C
 * library by their Linux names; an object for another kind of machine
 * would link and compute garbage. Which targets exist is LLVM's build's
 * business (Debian's llvm-19 has them all), so every check asks LLVM.
 */
#include "cg_internal.h"

#include <llvm-c/Target.h>
#include <llvm-c/TargetMachine.h>

#include <stdio.h>
#include <string.h>

void cg_target_init_all(void)
{
	LLVMInitializeAllTargetInfos();
	LLVMInitializeAllTargets();
	LLVMInitializeAllTargetMCs();
	LLVMInitializeAllAsmPrinters();
}

/* Component i (0 = arch, 1 = vendor, 2 = OS) of a normalized triple. */
static void component(const char *triple, int i, char *out, size_t size)
{
	const char *p = triple;
	for (; i > 0 && p; i--) {
		p = strchr(p, '-');
		if (p)
			p++;
	}
	size_t n = 0;
	for (; p && p[n] && p[n] != '-'; n++)
		;
	snprintf(out, size, "%.*s", (int)n, p ? p : "");
}

/* Whether a normalized triple's arch is x86-64's. */
static bool is_x86_64(const char *normalized)
{
	char arch[64];
	component(normalized, 0, arch, sizeof arch);
	return strcmp(arch, "x86_64") == 0;
}

/* Checks that LLVM has the target and that it is 64-bit little-endian:
 * false with the reason in err. */
static bool check_machine(const char *normalized, const char *given, char *err,
			  size_t err_len)
{
	LLVMTargetRef target;
	char *msg = NULL;
	if (LLVMGetTargetFromTriple(normalized, &target, &msg)) {
		LLVMDisposeMessage(msg);
		snprintf(err, err_len,
			 "unknown target '%s': this LLVM cannot generate code for "
			 "it (known: x86_64-linux-gnu, aarch64-linux-gnu, "
			 "riscv64-linux-gnu, ...; `llc-19 --version` lists the "
			 "architectures)",
			 given);
		return false;
	}
	LLVMTargetMachineRef tm = LLVMCreateTargetMachine(target, normalized,
							  "generic", "",
							  LLVMCodeGenLevelDefault,
							  LLVMRelocPIC,
							  LLVMCodeModelDefault);
	if (!tm) {
		snprintf(err, err_len, "cannot make a target machine for '%s'",
			 given);
		return false;
	}
	LLVMTargetDataRef dl = LLVMCreateTargetDataLayout(tm);
	bool ok = LLVMPointerSize(dl) == 8 &&
		  LLVMByteOrder(dl) == LLVMLittleEndian;
	LLVMDisposeTargetData(dl);
	LLVMDisposeTargetMachine(tm);
	if (!ok)
		snprintf(err, err_len,
			 "target '%s' is not a 64-bit little-endian machine, "
			 "whose data layout the runtime assumes",
			 given);
	return ok;
}

bool cg_target_check(const char *triple, char *err, size_t err_len)
{
	cg_target_init_all();
	char *norm = LLVMNormalizeTargetTriple(triple);
	char os[64];
	component(norm, 2, os, sizeof os);
	bool ok = check_machine(norm, triple, err, err_len);
	if (ok && strncmp(os, "linux", 5) != 0) {
		snprintf(err, err_len,
			 "target '%s' is not a Linux one (normalized: %s): the "
			 "code calls libgomp and the C library as on Linux",
			 triple, norm);
		ok = false;
	}
	LLVMDisposeMessage(norm);
	return ok;
}

bool cg_target_is_host(const char *triple)
{
	if (!triple)
		return true;
	char *norm = LLVMNormalizeTargetTriple(triple);
	char *host_raw = LLVMGetDefaultTargetTriple();
	char *host = LLVMNormalizeTargetTriple(host_raw);
	bool same = true;
	for (int i = 0; i < 3; i += 2) { /* arch and OS; any vendor */
		char a[64], b[64];
		component(norm, i, a, sizeof a);
		component(host, i, b, sizeof b);
		same = same && strcmp(a, b) == 0;
	}
	LLVMDisposeMessage(norm);
	LLVMDisposeMessage(host);
	LLVMDisposeMessage(host_raw);
	return same;
}

bool cg_target_is_x86_64(const char *triple)
{
	char *host = triple ? NULL : LLVMGetDefaultTargetTriple();
	char *norm = LLVMNormalizeTargetTriple(triple ? triple : host);
	bool x86 = is_x86_64(norm);
	LLVMDisposeMessage(norm);
	if (host)
		LLVMDisposeMessage(host);
	return x86;
}

const char *cg_target_default_cpu(const char *triple)
{
	return cg_target_is_x86_64(triple) ? "x86-64" : "generic";
}
