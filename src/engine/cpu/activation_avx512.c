/*
 * activation_avx512.c
 *		The GLU's activations for AVX-512 (see cpu/activation.h), 16 floats
 *		a step, the tail masked, so every element takes the same operations.
 *
 * Both activations are x times a sigmoid: SiLU is g sigmoid(g), and GELU's
 * tanh approximation 0.5 g (1 + tanh(u)) is g sigmoid(2u) exactly, with
 * u = sqrt(2 / pi) (g + 0.044715 g^3).  So each is g / (1 + exp(-z)), z = g
 * or 2u, with the vector exp of exp_avx512.h; relative error a few 1e-7,
 * where libm's 1 + tanhf(u) loses all its digits for g below about -4.
 * exp(-z) overflowing to infinity gives g / infinity = 0 with g's sign,
 * as the reference's 0.5 g (1 + -1) does.
 */
#include "cpu/activation.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx512f,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,fma")
#endif

#include <immintrin.h>

#include "cpu/exp_avx512.h"

/* act(g) for 16 lanes: g / (1 + exp(-z)). */
static inline __attribute__((always_inline)) __m512
act16(__m512 g, LlmActivation act)
{
	__m512		z = g;

	if (act != LLM_ACT_SILU)
	{
		/* 2u = 2 sqrt(2 / pi) (g + 0.044715 g^3) = g (c1 + c3 g^2) */
		const __m512 c1 = _mm512_set1_ps(1.5957691216057308f);
		const __m512 c3 = _mm512_set1_ps(1.5957691216057308f * 0.044715f);

		z = _mm512_mul_ps(g, _mm512_fmadd_ps(c3, _mm512_mul_ps(g, g), c1));
	}
	return _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), llm_exp16(_mm512_sub_ps(_mm512_setzero_ps(), z))));
}

/* out[i] = act(gate[i]) * up[i] for i < n, 16 at a time. */
static void
glu_range_avx512(const float *gate, const float *up, float *out, int64_t n, LlmActivation act)
{
	for (int64_t i = 0; i < n; i += 16)
	{
		__mmask16	m = n - i >= 16 ? (__mmask16) 0xffff : (__mmask16) ((1u << (n - i)) - 1);
		__m512		g = _mm512_maskz_loadu_ps(m, gate + i);
		__m512		a = act == LLM_ACT_SILU ? act16(g, LLM_ACT_SILU) : act16(g, LLM_ACT_GELU_TANH);

		_mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m, up + i)));
	}
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const LlmGluRange llm_glu_range_avx512 = glu_range_avx512;

#else

const LlmGluRange llm_glu_range_avx512 = NULL;

#endif
