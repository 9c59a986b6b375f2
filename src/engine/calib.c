/*
 * calib.c
 *		Calibration statistics of a float model's matmul inputs (see calib.h).
 *
 * The x xᵀ sums cost width² / 2 multiply-adds per token and input, the
 * bulk of a GPTQ calibration; they are accumulated in double, a tile of
 * 8 rows by 256 columns of the sum at a time, so the tile stays in the L1
 * cache while the call's token rows stream past it.
 */
#include "calib.h"

#include "engine.h"
#include "tokenizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define XTX_TILE_ROWS 8			/* rows of the x xᵀ tile updated together */
#define XTX_TILE_COLS 256		/* its columns */

/* Allocate zeroed statistics for the model's shape, with the x xᵀ sums when hessians. */
LlmStatus
llm_calib_init(LlmCalib *c, const LlmConfig *cfg, bool hessians, LlmError *err)
{
	size_t		L = (size_t) cfg->n_layers;
	bool		ok = true;

	memset(c, 0, sizeof(*c));
	c->width[LLM_INPUT_ATTN] = cfg->dim;
	c->width[LLM_INPUT_WO] = cfg->n_heads * cfg->head_dim;
	c->width[LLM_INPUT_FFN] = cfg->dim;
	c->width[LLM_INPUT_DOWN] = cfg->ffn_dim;
	for (int i = 0; i < 4; i++)
	{
		size_t		w = (size_t) c->width[i];

		ok &= (c->abs_sum[i] = calloc(L * w, sizeof(double))) != NULL;
		ok &= (c->abs_max[i] = calloc(L * w, sizeof(float))) != NULL;
		ok &= (c->sq_sum[i] = calloc(L * w, sizeof(double))) != NULL;
		ok &= (c->samples[i] = calloc(L * LLM_CALIB_SAMPLES * w, sizeof(float))) != NULL;
		if (hessians)
			ok &= (c->xtx[i] = calloc(L * w * w, sizeof(double))) != NULL;
	}
	if (!ok)
	{
		llm_calib_free(c);
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for calibration statistics");
	}
	return LLM_OK;
}

/* Free the statistics; safe on a zeroed struct. */
void
llm_calib_free(LlmCalib *c)
{
	for (int i = 0; i < 4; i++)
	{
		free(c->abs_sum[i]);
		free(c->abs_max[i]);
		free(c->sq_sum[i]);
		free(c->samples[i]);
		free(c->xtx[i]);
	}
	free(c->scratch);
	memset(c, 0, sizeof(*c));
}

/* Add x xᵀ of the n rows xd (n, w; double) into the upper triangle of h (w, w), a tile at a time. */
static void
xtx_add(double *h, const double *xd, int n, int w)
{
	for (int i0 = 0; i0 < w; i0 += XTX_TILE_ROWS)
	{
		int			i1 = i0 + XTX_TILE_ROWS < w ? i0 + XTX_TILE_ROWS : w;

		/* columns from i0: the tile on the diagonal also fills a few lower entries, never read */
		for (int j0 = i0; j0 < w; j0 += XTX_TILE_COLS)
		{
			int			j1 = j0 + XTX_TILE_COLS < w ? j0 + XTX_TILE_COLS : w;

			for (int t = 0; t < n; t++)
			{
				const double *x = xd + (size_t) t * w;

				for (int i = i0; i < i1; i++)
				{
					double		a = x[i];
					double	   *row = h + (size_t) i * w;

					for (int j = j0; j < j1; j++)
						row[j] += a * x[j];
				}
			}
		}
	}
}

/*
 * Observer input (ctx an LlmCalib): add |x| of n rows of width w into the
 * sums, maxima and squares of input which of layer, keep the rows among the first
 * LLM_CALIB_SAMPLES calibration tokens, and add x xᵀ when asked for.
 */
static void
calib_input(void *ctx, int layer, LlmMatmulInput which, const float *x, int n, int w)
{
	LlmCalib   *c = ctx;
	double	   *sums = c->abs_sum[which] + (size_t) layer * w;
	float	   *maxs = c->abs_max[which] + (size_t) layer * w;
	double	   *sq = c->sq_sum[which] + (size_t) layer * w;
	float	   *samples = c->samples[which] + (size_t) layer * LLM_CALIB_SAMPLES * w;

	for (int i = 0; i < n; i++)
	{
		for (int j = 0; j < w; j++)
		{
			float		a = fabsf(x[(size_t) i * w + j]);

			sums[j] += a;
			sq[j] += (double) a * a;
			maxs[j] = fmaxf(maxs[j], a);
		}
		if (c->n_tokens + i < LLM_CALIB_SAMPLES)
			memcpy(samples + (size_t) (c->n_tokens + i) * w, x + (size_t) i * w, (size_t) w * sizeof(float));
	}
	if (c->xtx[which] == NULL || c->failed)
		return;
	if (c->scratch_len < (size_t) n * w)
	{
		free(c->scratch);
		c->scratch_len = (size_t) n * w;
		if ((c->scratch = malloc(c->scratch_len * sizeof(double))) == NULL)
		{
			c->scratch_len = 0;
			c->failed = true;
			return;
		}
	}
	for (size_t i = 0; i < (size_t) n * w; i++)
		c->scratch[i] = x[i];
	xtx_add(c->xtx[which] + (size_t) layer * w * w, c->scratch, n, w);
}

/* Observer step_done: n more calibration tokens seen. */
static void
calib_step_done(void *ctx, int n)
{
	((LlmCalib *) ctx)->n_tokens += n;
}

/* Run the model over n tokens in chunks (at least one, at most n tokens long), gathering c. */
LlmStatus
llm_calib_run(const LlmModel *m, const int32_t *tokens, int n, int chunk, int n_threads,
			  LlmCalib *c, LlmError *err)
{
	LlmObserver obs = {c, calib_input, calib_step_done};
	LlmStatus	st;

	if (chunk > n)
		chunk = n;
	if (chunk < 1)
		return llm_error_set(err, LLM_ERR_INVALID, "the calibration text has no tokens");
	st = llm_forward_chunks(m, tokens, n / chunk, chunk, n_threads, LLM_KV_F32, &obs, false, NULL, NULL, err);
	if (st == LLM_OK && c->failed)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for calibration statistics");
	return st;
}

/* Tokenize text and run m over its first max_tokens tokens, gathering c (see calib.h). */
LlmStatus
llm_calib_text(const LlmModel *m, const char *text, size_t len, int max_tokens, int n_threads,
			   const char *what, LlmCalib *c, LlmError *err)
{
	int32_t    *ids = NULL;
	int			n_ids = 0;
	LlmStatus	st;

	if (max_tokens <= 0 || max_tokens > LLM_CALIB_MAX_TOKENS)
		max_tokens = LLM_CALIB_MAX_TOKENS;
	if (text == NULL || len == 0)
		return llm_error_set(err, LLM_ERR_INVALID, "the calibration text is empty");
	if ((st = llm_tokenize(m->tokenizer, text, len, true, false, &ids, &n_ids, err)))
		return st;
	if (n_ids < LLM_CALIB_CHUNK)
		st = llm_error_set(err, LLM_ERR_INVALID,
						   "the calibration text has %d tokens, BOS included; %s needs at least %d (one chunk)",
						   n_ids, what, LLM_CALIB_CHUNK);
	else
		st = llm_calib_run(m, ids, n_ids < max_tokens ? n_ids : max_tokens, LLM_CALIB_CHUNK,
						   n_threads > 0 ? n_threads : 1, c, err);
	free(ids);
	return st;
}

/* The mean |x| per channel of input which of layer l. */
void
llm_calib_mean_abs(const LlmCalib *c, int l, LlmMatmulInput which, double *out)
{
	int			w = c->width[which];
	double		nt = c->n_tokens > 0 ? (double) c->n_tokens : 1.0;

	for (int j = 0; j < w; j++)
		out[j] = c->abs_sum[which][(size_t) l * w + j] / nt;
}

/* ‖X_j‖₂ per channel of input which of layer l. */
void
llm_calib_norm(const LlmCalib *c, int l, LlmMatmulInput which, double *out)
{
	int			w = c->width[which];

	for (int j = 0; j < w; j++)
		out[j] = sqrt(c->sq_sum[which][(size_t) l * w + j]);
}

/* The max |x| per channel of input which of layer l. */
const float *
llm_calib_max_abs(const LlmCalib *c, int l, LlmMatmulInput which)
{
	return c->abs_max[which] + (size_t) l * c->width[which];
}

/* The x xᵀ sums of input which of layer l, or NULL. */
const double *
llm_calib_xtx(const LlmCalib *c, int l, LlmMatmulInput which)
{
	size_t		w = (size_t) c->width[which];

	return c->xtx[which] != NULL ? c->xtx[which] + (size_t) l * w * w : NULL;
}

/* The first token rows of input which of layer l. */
const float *
llm_calib_samples(const LlmCalib *c, int l, LlmMatmulInput which)
{
	return c->samples[which] + (size_t) l * LLM_CALIB_SAMPLES * c->width[which];
}

/* The input that layer matrix k multiplies: q, k, v the attention input; o; gate, up the FFN input; down. */
LlmMatmulInput
llm_calib_input_of(int k)
{
	static const LlmMatmulInput in[LLM_LAYER_MATRICES] = {
		LLM_INPUT_ATTN, LLM_INPUT_ATTN, LLM_INPUT_ATTN, LLM_INPUT_WO, LLM_INPUT_FFN, LLM_INPUT_FFN, LLM_INPUT_DOWN
	};

	return in[k];
}

/* A float copy (rows, cols) of a weight matrix; NULL when out of memory. */
float *
llm_weight_to_float(const LlmWeight *w)
{
	float	   *f = malloc((size_t) w->rows * w->cols * sizeof(float));

	if (f != NULL)
		for (int64_t r = 0; r < w->rows; r++)
			llm_dequant_row(w->type, w->data + (size_t) r * w->row_bytes, f + (size_t) r * w->cols, w->cols);
	return f;
}
