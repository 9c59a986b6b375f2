/*
 * test_weights.h
 *		Random weights and activations for the kernel tests (test_kernels.c,
 *		test_batch_invariance.c): every GGUF type the engine reads, with
 *		finite scales, and activations whose blocks differ in magnitude.
 */
#ifndef LLM_TEST_WEIGHTS_H
#define LLM_TEST_WEIGHTS_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "quant.h"
#include "quant_blocks.h"
#include "test.h"

/* A pseudo-random float, roughly normal (sum of four uniforms). */
static inline float
rng_normal(void)
{
	return test_rng_uniform(-1, 1) + test_rng_uniform(-1, 1) + test_rng_uniform(-1, 1) + test_rng_uniform(-1, 1);
}

/* 64-byte aligned zeroed memory, or NULL. */
static inline void *
alloc64(size_t n)
{
	void	   *p = aligned_alloc(64, (n + 63) & ~(size_t) 63);

	if (p != NULL)
		memset(p, 0, (n + 63) & ~(size_t) 63);
	return p;
}

/* A small random positive fp16 scale. */
static inline uint16_t
random_scale_fp16(void)
{
	return llm_fp32_to_fp16(test_rng_uniform(0.0005f, 0.005f));
}

/* Fill n_blocks blocks of type with random bytes, then give every block finite fp16 scales. */
static inline void
random_blocks(LlmType type, uint8_t *data, int64_t n_blocks)
{
	const LlmTypeTraits *tr = llm_type_traits(type);

	for (int64_t i = 0; i < n_blocks * tr->type_size; i++)
		data[i] = (uint8_t) test_rng_next();
	for (int64_t b = 0; b < n_blocks; b++)
	{
		uint8_t    *blk = data + b * tr->type_size;

#define SET_D(T) ((T *) blk)->d = random_scale_fp16()
#define SET_D_DMIN(T) (((T *) blk)->d = random_scale_fp16(), ((T *) blk)->dmin = random_scale_fp16())
		switch (type)
		{
			case LLM_TYPE_Q4_0: SET_D(LlmBlockQ4_0); break;
			case LLM_TYPE_Q4_1: SET_D(LlmBlockQ4_1); ((LlmBlockQ4_1 *) blk)->m = random_scale_fp16(); break;
			case LLM_TYPE_Q5_0: SET_D(LlmBlockQ5_0); break;
			case LLM_TYPE_Q5_1: SET_D(LlmBlockQ5_1); ((LlmBlockQ5_1 *) blk)->m = random_scale_fp16(); break;
			case LLM_TYPE_Q8_0: SET_D(LlmBlockQ8_0); break;
			case LLM_TYPE_Q2_K: SET_D_DMIN(LlmBlockQ2_K); break;
			case LLM_TYPE_Q3_K: SET_D(LlmBlockQ3_K); break;
			case LLM_TYPE_Q4_K: SET_D_DMIN(LlmBlockQ4_K); break;
			case LLM_TYPE_Q5_K: SET_D_DMIN(LlmBlockQ5_K); break;
			case LLM_TYPE_Q6_K: SET_D(LlmBlockQ6_K); break;
			default: break;
		}
#undef SET_D
#undef SET_D_DMIN
	}
}

/*
 * A random weight of rows x cols in type; data malloc'd (free w->data).
 * Types llm_quantize_row makes come from Gaussian floats; the K types
 * and the rest from random blocks with finite scales.
 */
static inline bool
make_weight(LlmType type, int64_t rows, int64_t cols, LlmWeight *w)
{
	size_t		rb = llm_type_row_size(type, cols);
	uint8_t    *data = malloc(rb * (size_t) rows);	/* exact size: AddressSanitizer sees any read past it */

	if (data == NULL)
		return false;
	if (llm_type_base(type) != type)
	{
		/* a grouped type: a weight of its base, grouped */
		LlmWeight	b;

		if (!make_weight(llm_type_base(type), rows, cols, &b))
		{
			free(data);
			return false;
		}
		for (int64_t r = 0; r < rows; r++)
			llm_group_row(b.type, b.data + (size_t) r * rb, data + (size_t) r * rb, cols);
		free((void *) b.data);
	}
	else if (!llm_type_can_quantize(type))
		random_blocks(type, data, (int64_t) (rb * (size_t) rows) / llm_type_traits(type)->type_size);
	else
	{
		float	   *f = malloc((size_t) cols * sizeof(float));

		if (f == NULL)
		{
			free(data);
			return false;
		}
		for (int64_t r = 0; r < rows; r++)
		{
			for (int64_t j = 0; j < cols; j++)
				f[j] = rng_normal() * 0.05f;
			llm_quantize_row(type, f, data + (size_t) r * rb, cols);
		}
		free(f);
	}
	w->name = "test";
	w->type = type;
	w->rows = rows;
	w->cols = cols;
	w->row_bytes = rb;
	w->data = data;
	return true;
}

/* Random activations (n, cols), each block of 32 with its own magnitude. */
static inline void
random_acts(float *x, int n, int64_t cols)
{
	for (int i = 0; i < n; i++)
		for (int64_t j = 0; j < cols; j += 32)
		{
			float		mag = powf(10.0f, test_rng_uniform(-1.5f, 1.0f));

			for (int64_t l = j; l < cols && l < j + 32; l++)
				x[(size_t) i * cols + l] = rng_normal() * mag;
		}
}

#endif							/* LLM_TEST_WEIGHTS_H */
