/*
 * cpu_features.c
 *		CPUID detection of the SIMD level, once per process (see
 *		cpu_features.h).
 *
 * GCC's __builtin_cpu_supports reads CPUID and XGETBV (it reports AVX and
 * AVX-512 only when the OS saves their registers).  On other compilers or
 * processors every answer is "scalar", which is always correct.
 */
#include "cpu/cpu_features.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static LlmCpuIsa chosen_isa;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

/* The best level this processor supports (CPUID only, no environment). */
LlmCpuIsa
llm_cpu_isa_detect(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") ||
		!__builtin_cpu_supports("f16c"))
		return LLM_CPU_ISA_SCALAR;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
		return LLM_CPU_ISA_AVX512;
	return LLM_CPU_ISA_AVX2;
#else
	return LLM_CPU_ISA_SCALAR;
#endif
}

/* Whether this processor can run kernels of level isa. */
bool
llm_cpu_isa_supported(LlmCpuIsa isa)
{
	return (int) isa >= 0 && isa <= llm_cpu_isa_detect();
}

/* Whether the processor has AVX-512 BF16 (an optional extra of the AVX-512 level). */
bool
llm_cpu_has_avx512bf16(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
	__builtin_cpu_init();
	return llm_cpu_isa_detect() == LLM_CPU_ISA_AVX512 && __builtin_cpu_supports("avx512bf16");
#else
	return false;
#endif
}

/* Decide the level: the detected one, lowered by LLM_CPU_ISA when set. */
static void
choose_isa(void)
{
	const char *env = getenv("LLM_CPU_ISA");
	LlmCpuIsa	isa = llm_cpu_isa_detect();

	if (env != NULL)
	{
		for (int i = 0; i < LLM_CPU_ISA_COUNT; i++)
			if (strcmp(env, llm_cpu_isa_name((LlmCpuIsa) i)) == 0 && (LlmCpuIsa) i < isa)
				isa = (LlmCpuIsa) i;
	}
	chosen_isa = isa;
}

/* The level chosen for this process: detected, lowered by LLM_CPU_ISA; computed once. */
LlmCpuIsa
llm_cpu_isa(void)
{
	pthread_once(&chosen_once, choose_isa);
	return chosen_isa;
}

/* "scalar", "avx2" or "avx512". */
const char *
llm_cpu_isa_name(LlmCpuIsa isa)
{
	switch (isa)
	{
		case LLM_CPU_ISA_SCALAR:
			return "scalar";
		case LLM_CPU_ISA_AVX2:
			return "avx2";
		case LLM_CPU_ISA_AVX512:
			return "avx512";
	}
	return "unknown";
}
