/*
 * smooth.c
 *		SmoothQuant's scales (see smooth.h).
 */
#include "smooth.h"

#include "awq.h"
#include "engine.h"

#include <math.h>
#include <stdlib.h>

/* s = xmax^alpha / wmax^(1 - alpha) per channel; 1 where either is 0. */
void
llm_smooth_scales(const float *xmax, const float *wmax, int64_t n, double alpha, float *s)
{
	for (int64_t j = 0; j < n; j++)
		s[j] = xmax[j] > 0.0f && wmax[j] > 0.0f ?
			(float) (pow(xmax[j], alpha) / pow(wmax[j], 1.0 - alpha)) : 1.0f;
}

/* Fold the max |f| of each column of f (rows, cols) into wmax. */
void
llm_col_abs_max(const float *f, int64_t rows, int64_t cols, float *wmax)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < cols; j++)
			wmax[j] = fmaxf(wmax[j], fabsf(f[r * cols + j]));
}

/* Quantize layer l with SmoothQuant's scales on the norm-fed inputs (see smooth.h). */
LlmStatus
llm_smooth_quantize_layer(LlmModel *m, int l, LlmQuantScheme q, const LlmCalib *c, double alpha, LlmError *err)
{
	const LlmConfig *cfg = &m->config;
	LlmLayerWeights *lw = &m->weights.layers[l];
	int64_t		dim = cfg->dim;
	float	   *f[LLM_LAYER_MATRICES] = {0};
	float	   *wmax = malloc((size_t) dim * sizeof(float));
	float	   *s = malloc((size_t) dim * sizeof(float));
	LlmStatus	st = LLM_OK;
	bool		ok = wmax && s;

	for (int k = 0; ok && k < LLM_LAYER_MATRICES; k++)
		ok = (f[k] = llm_weight_to_float(llm_layer_matrix(lw, k))) != NULL;
	for (int g = 0; ok && g < 2; g++)
	{
		LlmMatmulInput which = g == 0 ? LLM_INPUT_ATTN : LLM_INPUT_FFN;
		float	   *norm = g == 0 ? lw->attn_norm : lw->ffn_norm;

		for (int64_t j = 0; j < dim; j++)
			wmax[j] = 0.0f;
		for (int k = 0; k < LLM_LAYER_MATRICES; k++)
			if (llm_calib_input_of(k) == which)
				llm_col_abs_max(f[k], llm_layer_matrix(lw, k)->rows, dim, wmax);
		llm_smooth_scales(llm_calib_max_abs(c, l, which), wmax, dim, alpha, s);
		for (int k = 0; k < LLM_LAYER_MATRICES; k++)
			if (llm_calib_input_of(k) == which)
				llm_scale_cols(f[k], llm_layer_matrix(lw, k)->rows, dim, s);
		llm_unscale_norm(norm, dim, s, cfg->norm_add_one);
	}
	for (int k = 0; ok && k < LLM_LAYER_MATRICES && st == LLM_OK; k++)
	{
		LlmWeight  *w = llm_layer_matrix(lw, k);

		if (llm_quant_scheme_fits(q, w->cols))
			st = llm_weight_quantize_from(w, LLM_TYPE_F32, f[k], q, err);
		else
		{
			llm_weight_set_owned(w, LLM_TYPE_F32, f[k]);	/* w takes f[k] */
			f[k] = NULL;
		}
	}
	if (!ok)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for SmoothQuant of layer %d", l);
	for (int k = 0; k < LLM_LAYER_MATRICES; k++)
		free(f[k]);
	free(wmax);
	free(s);
	return st;
}
