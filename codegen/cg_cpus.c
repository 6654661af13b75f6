/*
 * cg_cpus.c - the CPUs that --mcpu may name: the x86-64 processors of
 * LLVM 19 (`llc-19 -march=x86-64 -mcpu=help`), each with whether it has
 * AVX-512 (whether llc-19 -mcpu=NAME keeps a <16 x float> add in zmm
 * registers), which sets the kernels' vector width for that CPU. LLVM's
 * C API neither lists its CPUs nor rejects an unknown one (it warns on
 * stderr and compiles for a generic x86-64), so the list lives here;
 * "native" names the host's CPU and features.
 */
#include "cg.h"
#include "cg_gemm.h"

#include "ir.h"

#include <stdio.h>
#include <string.h>

typedef struct cpu_row {
	const char *name;
	bool has_avx512;
} cpu_row;

static const cpu_row cpu_table[] = {
	{"alderlake", false},
	{"amdfam10", false},
	{"arrowlake", false},
	{"arrowlake-s", false},
	{"arrowlake_s", false},
	{"athlon", false},
	{"athlon-4", false},
	{"athlon-fx", false},
	{"athlon-mp", false},
	{"athlon-tbird", false},
	{"athlon-xp", false},
	{"athlon64", false},
	{"athlon64-sse3", false},
	{"atom", false},
	{"atom_sse4_2", false},
	{"atom_sse4_2_movbe", false},
	{"barcelona", false},
	{"bdver1", false},
	{"bdver2", false},
	{"bdver3", false},
	{"bdver4", false},
	{"bonnell", false},
	{"broadwell", false},
	{"btver1", false},
	{"btver2", false},
	{"c3", false},
	{"c3-2", false},
	{"cannonlake", true},
	{"cascadelake", true},
	{"clearwaterforest", false},
	{"cooperlake", true},
	{"core-avx-i", false},
	{"core-avx2", false},
	{"core2", false},
	{"core_2_duo_sse4_1", false},
	{"core_2_duo_ssse3", false},
	{"core_2nd_gen_avx", false},
	{"core_3rd_gen_avx", false},
	{"core_4th_gen_avx", false},
	{"core_4th_gen_avx_tsx", false},
	{"core_5th_gen_avx", false},
	{"core_5th_gen_avx_tsx", false},
	{"core_aes_pclmulqdq", false},
	{"core_i7_sse4_2", false},
	{"corei7", false},
	{"corei7-avx", false},
	{"emeraldrapids", true},
	{"generic", false},
	{"geode", false},
	{"goldmont", false},
	{"goldmont-plus", false},
	{"goldmont_plus", false},
	{"gracemont", false},
	{"grandridge", false},
	{"graniterapids", true},
	{"graniterapids-d", true},
	{"graniterapids_d", true},
	{"haswell", false},
	{"i386", false},
	{"i486", false},
	{"i586", false},
	{"i686", false},
	{"icelake-client", true},
	{"icelake-server", true},
	{"icelake_client", true},
	{"icelake_server", true},
	{"ivybridge", false},
	{"k6", false},
	{"k6-2", false},
	{"k6-3", false},
	{"k8", false},
	{"k8-sse3", false},
	{"knl", true},
	{"knm", true},
	{"lakemont", false},
	{"lunarlake", false},
	{"meteorlake", false},
	{"mic_avx512", true},
	{"nehalem", false},
	{"nocona", false},
	{"opteron", false},
	{"opteron-sse3", false},
	{"pantherlake", false},
	{"penryn", false},
	{"pentium", false},
	{"pentium-m", false},
	{"pentium-mmx", false},
	{"pentium2", false},
	{"pentium3", false},
	{"pentium3m", false},
	{"pentium4", false},
	{"pentium4m", false},
	{"pentium_4", false},
	{"pentium_4_sse3", false},
	{"pentium_ii", false},
	{"pentium_iii", false},
	{"pentium_iii_no_xmm_regs", false},
	{"pentium_m", false},
	{"pentium_mmx", false},
	{"pentium_pro", false},
	{"pentiumpro", false},
	{"prescott", false},
	{"raptorlake", false},
	{"rocketlake", true},
	{"sandybridge", false},
	{"sapphirerapids", true},
	{"sierraforest", false},
	{"silvermont", false},
	{"skx", true},
	{"skylake", false},
	{"skylake-avx512", true},
	{"skylake_avx512", true},
	{"slm", false},
	{"tigerlake", true},
	{"tremont", false},
	{"westmere", false},
	{"winchip-c6", false},
	{"winchip2", false},
	{"x86-64", false},
	{"x86-64-v2", false},
	{"x86-64-v3", false},
	{"x86-64-v4", true},
	{"yonah", false},
	{"znver1", false},
	{"znver2", false},
	{"znver3", false},
	{"znver4", true},
	{"znver5", true},
};

enum { N_CPUS = sizeof cpu_table / sizeof *cpu_table };

static const cpu_row *find_cpu(const char *name)
{
	for (size_t i = 0; i < N_CPUS; i++)
		if (strcmp(cpu_table[i].name, name) == 0)
			return &cpu_table[i];
	return NULL;
}

bool cg_cpu_check(const char *cpu, char *err, size_t err_len)
{
	if (strcmp(cpu, "native") == 0 || find_cpu(cpu))
		return true;
	ir_suggest sg;
	ir_suggest_init(&sg, cpu);
	ir_suggest_offer(&sg, "native");
	for (size_t i = 0; i < N_CPUS; i++)
		ir_suggest_offer(&sg, cpu_table[i].name);
	if (sg.best)
		snprintf(err, err_len, "unknown CPU '%s'; did you mean '%s'?",
			 cpu, sg.best);
	else
		snprintf(err, err_len,
			 "unknown CPU '%s' (x86-64 names of LLVM 19: x86-64, "
			 "x86-64-v2, x86-64-v3, x86-64-v4, native, haswell, "
			 "znver3, ...)",
			 cpu);
	return false;
}

int cg_cpu_vector_width(const char *cpu)
{
	if (!cpu || strcmp(cpu, "native") == 0)
		return cg_gemm_host_vector_width();
	const cpu_row *r = find_cpu(cpu);
	return r && r->has_avx512 ? 16 : 8;
}
