/*
 * cpu_features.c
 *		CPUID detection of the SIMD level, once per process (see
 *		cpu_features.h).
 *
 * GCC's and Clang's __builtin_cpu_supports read CPUID and XGETBV (they
 * report AVX and AVX-512 only when the OS saves their registers); F16C,
 * which has no AVX state of its own, is read from CPUID directly.  On other compilers or
 * processors every answer is "scalar", which is always correct.
 */
#include "cpu/cpu_features.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#include <cpuid.h>
#endif
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

static LlmCpuIsa chosen_isa;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
/* Whether CPUID leaf 1 reports F16C (which Clang's __builtin_cpu_supports cannot name). */
static bool
cpu_has_f16c(void)
{
	unsigned int eax,
				ebx,
				ecx,
				edx;

	return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}
#endif

/* The best level CPUID reports. */
static LlmCpuIsa
cpuid_isa(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma") || !cpu_has_f16c())
		return LLM_CPU_ISA_SCALAR;
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
		__builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
		__builtin_cpu_supports("avx512vnni"))
		return LLM_CPU_ISA_AVX512;
	return LLM_CPU_ISA_AVX2;
#else
	return LLM_CPU_ISA_SCALAR;
#endif
}

static LlmCpuIsa detected_isa;
static pthread_once_t detected_once = PTHREAD_ONCE_INIT;

/* Read the best level this processor supports off CPUID into detected_isa. */
static void
detect_isa(void)
{
	detected_isa = cpuid_isa();
}

/*
 * The best level this processor supports (CPUID only, no environment),
 * read once: every matmul asks, and under a hypervisor each CPUID is a
 * trap of microseconds.
 */
LlmCpuIsa
llm_cpu_isa_detect(void)
{
	pthread_once(&detected_once, detect_isa);
	return detected_isa;
}

/* Whether this processor can run kernels of level isa. */
bool
llm_cpu_isa_supported(LlmCpuIsa isa)
{
	return (int) isa >= 0 && isa <= llm_cpu_isa_detect();
}

static bool has_vbmi2;
static pthread_once_t vbmi2_once = PTHREAD_ONCE_INIT;

/* Read VBMI2 off CPUID into has_vbmi2 (only with the AVX-512 level, whose registers it needs); LLM_CPU_VBMI2=0 hides it. */
static void
detect_vbmi2(void)
{
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
	const char *env = getenv("LLM_CPU_VBMI2");

	__builtin_cpu_init();
	has_vbmi2 = llm_cpu_isa_detect() == LLM_CPU_ISA_AVX512 && __builtin_cpu_supports("avx512vbmi2") &&
		!(env != NULL && strcmp(env, "0") == 0);
#endif
}

/* Whether this processor has AVX-512 VBMI2 (vpexpandb), read once. */
bool
llm_cpu_has_vbmi2(void)
{
	pthread_once(&vbmi2_once, detect_vbmi2);
	return has_vbmi2;
}

static bool has_amx;
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;

#define ARCH_REQ_XCOMP_PERM 0x1023	/* Linux's arch_prctl: ask for an extended state component */
#define XFEATURE_XTILEDATA 18

/* With LLM_CPU_AMX=1, read AMX off CPUID and XCR0 and ask Linux for the tile state into has_amx (AVX-512 level only). */
static void
detect_amx(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
	const char *env = getenv("LLM_CPU_AMX");
	unsigned int eax,
				ebx,
				ecx,
				edx,
				xcr0_lo,
				xcr0_hi;

	/* off unless asked for: its kernels win alone, not yet end to end (matmul.h) */
	if (llm_cpu_isa() != LLM_CPU_ISA_AVX512 || env == NULL || strcmp(env, "1") != 0)
		return;
	/* leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8; leaf 1: ECX bit 27 OSXSAVE (XGETBV usable) */
	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || (edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0)
		return;
	if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || (ecx & (1u << 27)) == 0)
		return;
	__asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	(void) xcr0_hi;
	/* XCR0 bits 17 (TILECFG) and 18 (TILEDATA): the OS saves the tiles */
	if ((xcr0_lo & (3u << 17)) != (3u << 17))
		return;
	has_amx = syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#endif
}

/* Whether the AVX-512 level may use AMX's int8 tiles, decided once. */
bool
llm_cpu_has_amx(void)
{
	pthread_once(&amx_once, detect_amx);
	return has_amx;
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
