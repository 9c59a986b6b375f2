/*
 * norm_avx512.c
 *		RMSNorm rows for AVX-512 (see cpu/norm.h): sixteen rows at a time,
 *		each row's sum of squares in its own lane.
 *
 * A row's squares must be added in order of the columns (the reference's
 * order), so the vectors cannot run along a row.  Instead a 16 x 16 tile
 * of sixteen rows is transposed in registers, so vector j holds column j
 * of every row, and lane r adds row r's squares one column after the
 * other: sixteen independent chains where the reference keeps eight in
 * memory.  Missing rows and columns past dim are loaded as zeros, whose
 * squares add exactly nothing.  The scale pass runs along the rows, the
 * same two multiplies per element as the reference.
 */
#include "cpu/norm.h"

#if defined(__x86_64__) && defined(__GNUC__)

#if defined(__clang__)
#pragma clang attribute push (__attribute__((target("avx512f"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f")
#endif

#include <immintrin.h>

#define KERN static inline __attribute__((always_inline))

/* Transpose the 16 x 16 tile v in place: v[j] lane r becomes v[r] lane j. */
KERN void
transpose16(__m512 *v)
{
	__m512		a[16],
				c[16];

	/* within 128-bit lane q: [R2k[4q], R2k+1[4q], R2k[4q+1], R2k+1[4q+1]] and the next two columns */
	for (int k = 0; k < 8; k++)
	{
		a[2 * k] = _mm512_unpacklo_ps(v[2 * k], v[2 * k + 1]);
		a[2 * k + 1] = _mm512_unpackhi_ps(v[2 * k], v[2 * k + 1]);
	}
	/* c[4g + m], lane q: column 4q + m of rows 4g .. 4g + 3 */
	for (int g = 0; g < 4; g++)
	{
		__m512d		lo0 = _mm512_castps_pd(a[4 * g]),
					lo1 = _mm512_castps_pd(a[4 * g + 2]),
					hi0 = _mm512_castps_pd(a[4 * g + 1]),
					hi1 = _mm512_castps_pd(a[4 * g + 3]);

		c[4 * g] = _mm512_castpd_ps(_mm512_unpacklo_pd(lo0, lo1));
		c[4 * g + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(lo0, lo1));
		c[4 * g + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(hi0, hi1));
		c[4 * g + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(hi0, hi1));
	}
	/* column 4q + m: lane q of c[m], c[4 + m], c[8 + m], c[12 + m] */
	for (int m = 0; m < 4; m++)
	{
		__m512		s01 = _mm512_shuffle_f32x4(c[m], c[4 + m], _MM_SHUFFLE(1, 0, 1, 0));
		__m512		s23 = _mm512_shuffle_f32x4(c[8 + m], c[12 + m], _MM_SHUFFLE(1, 0, 1, 0));
		__m512		t01 = _mm512_shuffle_f32x4(c[m], c[4 + m], _MM_SHUFFLE(3, 2, 3, 2));
		__m512		t23 = _mm512_shuffle_f32x4(c[8 + m], c[12 + m], _MM_SHUFFLE(3, 2, 3, 2));

		v[m] = _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(2, 0, 2, 0));
		v[4 + m] = _mm512_shuffle_f32x4(s01, s23, _MM_SHUFFLE(3, 1, 3, 1));
		v[8 + m] = _mm512_shuffle_f32x4(t01, t23, _MM_SHUFFLE(2, 0, 2, 0));
		v[12 + m] = _mm512_shuffle_f32x4(t01, t23, _MM_SHUFFLE(3, 1, 3, 1));
	}
}

/* Rows [i, i + m) (m <= 16): x += r where r is set, then each row's 1 / rms in lane r of the result. */
KERN __m512
inv_rms16(const LlmNormArgs *a, int i, int m)
{
	__m512		ss = _mm512_setzero_ps();

	for (int j0 = 0; j0 < a->dim; j0 += 16)
	{
		int			nc = a->dim - j0 < 16 ? a->dim - j0 : 16;
		__mmask16	cm = (__mmask16) ((1u << nc) - 1);
		__m512		v[16];

		for (int r = 0; r < 16; r++)
		{
			float	   *xr = a->x + (size_t) (i + r) * a->dim + j0;

			if (r >= m)
			{
				v[r] = _mm512_setzero_ps();
				continue;
			}
			v[r] = _mm512_maskz_loadu_ps(cm, xr);
			if (a->r != NULL)
			{
				v[r] = _mm512_add_ps(v[r], _mm512_maskz_loadu_ps(cm, a->r + (size_t) (i + r) * a->dim + j0));
				_mm512_mask_storeu_ps(xr, cm, v[r]);
			}
		}
		transpose16(v);
		for (int j = 0; j < nc; j++)
			ss = _mm512_add_ps(ss, _mm512_mul_ps(v[j], v[j]));
	}
	return _mm512_div_ps(_mm512_set1_ps(1.0f),
						 _mm512_sqrt_ps(_mm512_add_ps(_mm512_div_ps(ss, _mm512_set1_ps((float) a->dim)),
													  _mm512_set1_ps(a->eps))));
}

/* Rows [r0, r1) of a: sixteen at a time. */
static void
norm_rows_avx512(const LlmNormArgs *a, int r0, int r1)
{
	for (int i = r0; i < r1; i += 16)
	{
		int			m = r1 - i < 16 ? r1 - i : 16;
		float		inv[16];

		_mm512_storeu_ps(inv, inv_rms16(a, i, m));
		for (int r = 0; r < m; r++)
		{
			const float *xr = a->x + (size_t) (i + r) * a->dim;
			float	   *yr = a->y + (size_t) (i + r) * a->dim;
			__m512		vinv = _mm512_set1_ps(inv[r]);

			for (int j = 0; j < a->dim; j += 16)
			{
				int			nc = a->dim - j < 16 ? a->dim - j : 16;
				__mmask16	cm = (__mmask16) ((1u << nc) - 1);
				__m512		w = _mm512_maskz_loadu_ps(cm, a->w + j);

				if (a->add_one)
					w = _mm512_add_ps(_mm512_set1_ps(1.0f), w);
				_mm512_mask_storeu_ps(yr + j, cm, _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(cm, xr + j), vinv), w));
			}
		}
	}
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

const LlmNormRows llm_norm_rows_avx512 = norm_rows_avx512;

#else

const LlmNormRows llm_norm_rows_avx512 = NULL;

#endif
