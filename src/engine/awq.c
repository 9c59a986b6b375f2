/*
 * awq.c
 *		Activation-aware weight quantization (see awq.h).
 *
 * A weight column that meets large activations matters more: scaling it up
 * by s_j before quantization (and the activation down by s_j) gives it more
 * of the quantization grid.  The scale is s_j = a_j^alpha, a_j the mean
 * |activation| of input channel j on calibration text, normalised so that
 * max(s) * min(s) = 1; alpha is searched on a grid with the error
 *   sum over rows i and calibration rows x_t of ((W_i - Q(W_i s) / s) . x_t)^2,
 * the output error on the first LLM_CALIB_SAMPLES calibration tokens.  Alpha 0 is plain
 * quantization, so the search never does worse on this measure.  The 1/s
 * goes where the input comes from, so the model computes the same function
 * in float: the RMSNorm weight before q/k/v and gate/up, v's rows before
 * the output projection (per KV channel, shared by the query heads of a
 * group), up's rows before down.
 *
 * llm_model_load_compressed() (compress.c) puts it together: load the
 * float model, run it over the calibration text (calib.c), quantize every
 * layer with the statistics, rounding to nearest or, with GPTQ, through
 * gptq.c on the scaled matrices.  The result lives in memory (llm-cli
 * --calib, the worker's llm.quantize_calib) or is written to a file by
 * llm-cli quantize --calib.
 */
#include "awq.h"

#include "engine.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AWQ_GRID 11				/* alpha = 0, 0.1, ..., 1 */
#define AWQ_ROWS 256			/* rows of each matrix the error is measured on */

/* A float matrix to be quantized, and its view for the search. */
typedef struct AwqMat
{
	LlmWeight  *w;
	float	   *f;				/* (rows, cols) float, scaled in place before quantization */
} AwqMat;

/* Scales s (cols) = a^alpha, normalised so that max * min = 1. */
static void
awq_scales(const double *a, int64_t cols, double alpha, float *s)
{
	double		lo = INFINITY,
				hi = 0.0;

	for (int64_t j = 0; j < cols; j++)
	{
		double		v = pow(fmax(a[j], 1e-8), alpha);

		s[j] = (float) v;
		lo = fmin(lo, v);
		hi = fmax(hi, v);
	}
	for (int64_t j = 0; j < cols; j++)
		s[j] = (float) (s[j] / sqrt(lo * hi));
}

/*
 * The output error of mats with column scales s on the calibration rows x
 * (n_x, cols): sum over rows i and samples t of ((W_i - Q(W_i s) / s) . x_t)^2.
 */
static double
awq_error(const AwqMat *mats, int n_mats, int64_t cols, const float *s, const float *x, int n_x,
		  LlmQuantScheme q, float *tmp, void *qbuf, float *deq)
{
	double		err = 0.0;

	for (int k = 0; k < n_mats; k++)
	{
		int64_t		rows = mats[k].w->rows;
		int64_t		step = rows > AWQ_ROWS ? rows / AWQ_ROWS : 1;

		for (int64_t r = 0; r < rows; r += step)
		{
			const float *row = mats[k].f + (size_t) r * cols;

			for (int64_t j = 0; j < cols; j++)
				tmp[j] = row[j] * s[j];
			llm_quantize_row_scheme(q, tmp, qbuf, cols);
			llm_dequant_row(llm_quant_scheme_type(q), qbuf, deq, cols);
			for (int64_t j = 0; j < cols; j++)
				tmp[j] = row[j] - deq[j] / s[j];
			for (int t = 0; t < n_x; t++)
			{
				double		dot = 0.0;

				for (int64_t j = 0; j < cols; j++)
					dot += (double) tmp[j] * x[(size_t) t * cols + j];
				err += dot * dot;
			}
		}
	}
	return err;
}

/* Choose the best scales s (cols) for mats sharing an input with mean |x| a and sample rows x (n_x). */
static bool
awq_search(const AwqMat *mats, int n_mats, int64_t cols, const double *a, const float *x, int n_x,
		   LlmQuantScheme q, float *s)
{
	float	   *cand = malloc((size_t) cols * sizeof(float));
	float	   *tmp = malloc((size_t) cols * sizeof(float));
	float	   *deq = malloc((size_t) cols * sizeof(float));
	void	   *qbuf = malloc(llm_type_row_size(LLM_TYPE_Q8_0, cols));
	double		best = INFINITY;
	bool		ok = cand && tmp && deq && qbuf;

	for (int g = 0; ok && g < AWQ_GRID; g++)
	{
		double		e;

		awq_scales(a, cols, g / (double) (AWQ_GRID - 1), cand);
		e = awq_error(mats, n_mats, cols, cand, x, n_x, q, tmp, qbuf, deq);
		if (e < best)
		{
			best = e;
			memcpy(s, cand, (size_t) cols * sizeof(float));
		}
	}
	free(cand);
	free(tmp);
	free(deq);
	free(qbuf);
	return ok;
}

/* Scale the columns of f (rows, cols) by s. */
void
llm_scale_cols(float *f, int64_t rows, int64_t cols, const float *s)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < cols; j++)
			f[(size_t) r * cols + j] *= s[j];
}

/* Divide row r of f (rows, cols) by s[r]. */
static void
unscale_rows(float *f, int64_t rows, int64_t cols, const float *s)
{
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < cols; j++)
			f[(size_t) r * cols + j] /= s[r];
}

/* Divide a norm weight by s (as used: w, or 1 + w when the model adds one). */
void
llm_unscale_norm(float *w, int64_t n, const float *s, bool add_one)
{
	for (int64_t j = 0; j < n; j++)
		w[j] = add_one ? (1.0f + w[j]) / s[j] - 1.0f : w[j] / s[j];
}

/* s (n) = 1. */
static void
unit_scales(float *s, int64_t n)
{
	for (int64_t j = 0; j < n; j++)
		s[j] = 1.0f;
}

/* Quantize layer l with AWQ scales (see awq.h). */
LlmStatus
llm_awq_quantize_layer(LlmModel *m, int l, LlmQuantScheme q, const LlmCalib *c, LlmMatrixQuantizer fn,
					   void *fn_ctx, LlmError *err)
{
	const LlmConfig *cfg = &m->config;
	LlmLayerWeights *lw = &m->weights.layers[l];
	int64_t		dim = cfg->dim;
	int64_t		qd = (int64_t) cfg->n_heads * cfg->head_dim;
	int64_t		kvd = (int64_t) cfg->n_kv_heads * cfg->head_dim;
	int64_t		ffn = cfg->ffn_dim;
	int			group = cfg->n_heads / cfg->n_kv_heads;
	int			n_x = c->n_tokens < LLM_CALIB_SAMPLES ? (int) c->n_tokens : LLM_CALIB_SAMPLES;
	const float *attn_x = llm_calib_samples(c, l, LLM_INPUT_ATTN);
	const float *ffn_x = llm_calib_samples(c, l, LLM_INPUT_FFN);
	AwqMat		mats[LLM_LAYER_MATRICES];
	double	   *a_attn = malloc((size_t) dim * sizeof(double));
	double	   *a_ffn = malloc((size_t) dim * sizeof(double));
	double	   *a_wo = malloc((size_t) qd * sizeof(double));
	double	   *a_down = malloc((size_t) ffn * sizeof(double));
	float	   *s_attn = malloc((size_t) dim * sizeof(float));
	float	   *s_ffn = malloc((size_t) dim * sizeof(float));
	float	   *s_wo = malloc((size_t) qd * sizeof(float));
	float	   *s_kv = malloc((size_t) kvd * sizeof(float));
	float	   *s_down = malloc((size_t) ffn * sizeof(float));
	LlmStatus	st = LLM_OK;
	bool		ok = a_attn && a_ffn && a_wo && a_down && s_attn && s_ffn && s_wo && s_kv && s_down;

	bool		qz[LLM_LAYER_MATRICES];
	const float *col_scale[LLM_LAYER_MATRICES];

	for (int i = 0; i < LLM_LAYER_MATRICES; i++)
		mats[i] = (AwqMat) {llm_layer_matrix(lw, i), NULL};
	/* a matrix whose rows do not divide into the scheme's groups stays float, its group unscaled */
	for (int k = 0; k < LLM_LAYER_MATRICES; k++)
		qz[k] = llm_quant_scheme_fits(q, mats[k].w->cols);

	for (int k = 0; ok && k < LLM_LAYER_MATRICES; k++)
		ok = (mats[k].f = llm_weight_to_float(mats[k].w)) != NULL;
	if (!ok)
	{
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for AWQ of layer %d", l);
		goto done;
	}
	llm_calib_mean_abs(c, l, LLM_INPUT_ATTN, a_attn);
	llm_calib_mean_abs(c, l, LLM_INPUT_FFN, a_ffn);
	llm_calib_mean_abs(c, l, LLM_INPUT_DOWN, a_down);
	llm_calib_mean_abs(c, l, LLM_INPUT_WO, a_wo);
	/* the output projection's input channels, averaged over the query heads of each KV head (in place) */
	for (int64_t j = 0; j < kvd; j++)
	{
		double		sum = 0.0;
		int64_t		kvh = j / cfg->head_dim,
					d = j % cfg->head_dim;

		for (int h = 0; h < group; h++)
			sum += a_wo[(kvh * group + h) * cfg->head_dim + d];
		for (int h = 0; h < group; h++)
			a_wo[(kvh * group + h) * cfg->head_dim + d] = sum / group;
	}

	/* wo and down first: their 1/s goes into v's and up's rows, which the other groups then see */
	if (qz[3] ? !awq_search(&mats[3], 1, qd, a_wo, llm_calib_samples(c, l, LLM_INPUT_WO), n_x, q, s_wo) : (unit_scales(s_wo, qd), false))
		goto oom;
	if (qz[6] ? !awq_search(&mats[6], 1, ffn, a_down, llm_calib_samples(c, l, LLM_INPUT_DOWN), n_x, q, s_down) : (unit_scales(s_down, ffn), false))
		goto oom;
	for (int64_t j = 0; j < kvd; j++)
		s_kv[j] = s_wo[(j / cfg->head_dim) * group * cfg->head_dim + j % cfg->head_dim];
	unscale_rows(mats[2].f, kvd, dim, s_kv);
	unscale_rows(mats[5].f, ffn, dim, s_down);
	if (qz[0] && qz[1] && qz[2] ? !awq_search(&mats[0], 3, dim, a_attn, attn_x, n_x, q, s_attn) : (unit_scales(s_attn, dim), false))
		goto oom;
	if (qz[4] && qz[5] ? !awq_search(&mats[4], 2, dim, a_ffn, ffn_x, n_x, q, s_ffn) : (unit_scales(s_ffn, dim), false))
		goto oom;

	/* scale the columns, fold 1/s into the norms, quantize */
	for (int k = 0; k < 3; k++)
		llm_scale_cols(mats[k].f, mats[k].w->rows, dim, s_attn);
	llm_scale_cols(mats[3].f, dim, qd, s_wo);
	llm_scale_cols(mats[4].f, ffn, dim, s_ffn);
	llm_scale_cols(mats[5].f, ffn, dim, s_ffn);
	llm_scale_cols(mats[6].f, dim, ffn, s_down);
	llm_unscale_norm(lw->attn_norm, dim, s_attn, cfg->norm_add_one);
	col_scale[0] = col_scale[1] = col_scale[2] = s_attn;
	col_scale[3] = s_wo;
	col_scale[4] = col_scale[5] = s_ffn;
	col_scale[6] = s_down;
	llm_unscale_norm(lw->ffn_norm, dim, s_ffn, cfg->norm_add_one);
	for (int k = 0; k < LLM_LAYER_MATRICES && st == LLM_OK; k++)
	{
		if (qz[k] && fn != NULL)
			st = fn(fn_ctx, mats[k].w, mats[k].f, l, k, col_scale[k], q, err);
		else if (qz[k])
			st = llm_weight_quantize_from(mats[k].w, LLM_TYPE_F32, mats[k].f, q, err);
		else
		{
			llm_weight_set_owned(mats[k].w, LLM_TYPE_F32, mats[k].f);	/* w takes f */
			mats[k].f = NULL;
		}
	}
	goto done;

oom:
	st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for AWQ of layer %d", l);
done:
	for (int k = 0; k < LLM_LAYER_MATRICES; k++)
		free(mats[k].f);
	free(a_attn);
	free(a_ffn);
	free(a_wo);
	free(a_down);
	free(s_attn);
	free(s_ffn);
	free(s_wo);
	free(s_kv);
	free(s_down);
	return st;
}
