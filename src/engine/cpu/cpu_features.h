/*
 * cpu_features.h
 *		Which SIMD level the CPU backend's kernels use, decided once.
 *
 * The levels are cumulative: AVX2 means AVX2 + FMA + F16C; AVX-512 means
 * AVX-512 F, BW, VL, DQ and VNNI on top of that (Cascade Lake, Ice Lake,
 * Sapphire Rapids, Zen 4 and later).  The processor is asked through CPUID (which also
 * checks that the operating system saves the wide registers); the
 * environment variable LLM_CPU_ISA=scalar|avx2|avx512 can lower the level,
 * never raise it past what the processor has, so tests and benchmarks can
 * compare the levels on one machine.
 */
#ifndef LLM_CPU_FEATURES_H
#define LLM_CPU_FEATURES_H

#include <stdbool.h>

typedef enum LlmCpuIsa
{
	LLM_CPU_ISA_SCALAR = 0,		/* plain C reference kernels */
	LLM_CPU_ISA_AVX2 = 1,		/* AVX2, FMA, F16C */
	LLM_CPU_ISA_AVX512 = 2		/* AVX-512 F/BW/VL/DQ/VNNI */
} LlmCpuIsa;

#define LLM_CPU_ISA_COUNT 3

/* The best level this processor supports (CPUID only, no environment). */
LlmCpuIsa	llm_cpu_isa_detect(void);

/* Whether this processor can run kernels of level isa. */
bool		llm_cpu_isa_supported(LlmCpuIsa isa);

/* The level chosen for this process: detected, lowered by LLM_CPU_ISA; computed once. */
LlmCpuIsa	llm_cpu_isa(void);

/*
 * Whether this processor has AVX-512 VBMI2 (vpexpandb: Ice Lake, Sapphire
 * Rapids, Zen 4; not Cascade Lake), which the SPARSE24 kernel uses where it
 * can (the same bits without); LLM_CPU_VBMI2=0 hides it, for the tests.
 */
bool		llm_cpu_has_vbmi2(void);

/*
 * Whether the AVX-512 level may use AMX's int8 tiles (Sapphire Rapids and
 * later): asked for by LLM_CPU_AMX=1 (off by default: matmul.h says why),
 * CPUID's AMX-TILE and AMX-INT8, the OS saving the tile state, and (Linux)
 * this process granted it by arch_prctl, asked once here.  Never below the
 * AVX-512 level.
 */
bool		llm_cpu_has_amx(void);

/* "scalar", "avx2" or "avx512". */
const char *llm_cpu_isa_name(LlmCpuIsa isa);

#endif							/* LLM_CPU_FEATURES_H */
