/*
 * exp_sum.c
 *		The scalar reference of exp_sum.h, and the choice of the function
 *		for the process's SIMD level.
 */
#include "cpu/exp_sum.h"

#include <math.h>
#include <stddef.h>

#include "cpu/cpu_features.h"

/* Sum of exp(x[i] - max) in index order, in double (see exp_sum.h). */
double
llm_exp_sum_ref(const float *x, int n, float max)
{
	double		sum = 0.0;

	for (int i = 0; i < n; i++)
		if (!isnan(x[i]))
			sum += exp((double) x[i] - max);
	return sum;
}

/* The AVX-512 function when it is compiled in and the level allows it, else the reference. */
LlmExpSum
llm_exp_sum_kernel(void)
{
	if (llm_exp_sum_avx512 != NULL && llm_cpu_isa() >= LLM_CPU_ISA_AVX512)
		return llm_exp_sum_avx512;
	return llm_exp_sum_ref;
}
