/*
 * gptq.c
 *		GPTQ quantization of weight matrices (see gptq.h).
 *
 * For one output row w and inputs X, the error of rounding is
 * ‖(w − q) X‖², a quadratic form in H = 2 XᵀX.  Optimal Brain Quantization
 * (Frantar et al., 2022) quantizes one column at a time and moves the
 * others to absorb its error: with U the upper Cholesky factor of H⁻¹
 * (H⁻¹ = UᵀU), rounding column i by e = (w_i − q_i) / U_ii and subtracting
 * e · U_i,j from every later column j is exact OBS for all rows at once
 * (GPTQ, Frantar et al., ICLR 2023, Algorithm 1).  The updates of columns
 * beyond the current block of LLM_GPTQ_BLOCK are gathered and applied once
 * per block ("lazy batch updates").  λI (damping) keeps H invertible.
 *
 * Order: the original one, each group's scale computed from the updated
 * weights when its first column is reached; or act-order, the columns of
 * largest diag H first, with every group's scale computed beforehand from
 * the unquantized weights in their original groups ("static groups"), so
 * the Q4_0 layout, whose groups are consecutive columns, still holds.
 *
 * H, its inverse and the weights being updated are double.
 */
#include "gptq.h"

#include "engine.h"
#include "linalg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define GPTQ_DAMP_TRIES 5		/* λ, then 10 λ, ... 10⁴ λ */

/* GPTQ's defaults: damping 0.01, the original column order. */
void
llm_gptq_options_default(LlmGptqOptions *o)
{
	o->damp = 0.01;
	o->act_order = false;
}

/* Working state of one matrix. */
typedef struct GptqWork
{
	int64_t		rows;
	int64_t		cols;
	double	   *h;				/* (cols, cols) H in the working order, then U */
	double	   *tmp;			/* (cols, cols) scratch */
	double	   *w;				/* (rows, cols) weights in the working order, updated */
	double	   *err;			/* (rows, LLM_GPTQ_BLOCK) scaled errors of the current block */
	int64_t    *perm;			/* (cols) original column of working column i */
} GptqWork;

/* Free a GptqWork's buffers. */
static void
gptq_work_free(GptqWork *g)
{
	free(g->h);
	free(g->tmp);
	free(g->w);
	free(g->err);
	free(g->perm);
}

/* A column and its diag H, for act-order's sort. */
typedef struct GptqCol
{
	double		diag;
	int64_t		col;
} GptqCol;

/* qsort comparator: descending diag H, ties by column. */
static int
cmp_diag_desc(const void *a, const void *b)
{
	const GptqCol *x = a,
			   *y = b;

	if (x->diag != y->diag)
		return x->diag > y->diag ? -1 : 1;
	return x->col < y->col ? -1 : x->col > y->col;
}

/* perm (n) = the columns in descending diag. */
static bool
act_order_perm(const double *diag, int64_t n, int64_t *perm)
{
	GptqCol    *cols = malloc((size_t) n * sizeof(GptqCol));

	if (cols == NULL)
		return false;
	for (int64_t j = 0; j < n; j++)
		cols[j] = (GptqCol) {diag[j], j};
	qsort(cols, (size_t) n, sizeof(GptqCol), cmp_diag_desc);
	for (int64_t j = 0; j < n; j++)
		perm[j] = cols[j].col;
	free(cols);
	return true;
}

/*
 * Fill g's H (working order) from xtx and column scales s, zero the
 * weights of dead inputs (diag 0) and give them diag 1, and turn H into
 * U, the upper Cholesky factor of (H + λI)⁻¹; false when even the largest
 * λ leaves it not positive definite.
 */
static bool
gptq_inverse_factor(GptqWork *g, const double *xtx, const float *s, double damp, const double *diag)
{
	int64_t		n = g->cols;
	double		mean = 0.0;

	for (int64_t i = 0; i < n; i++)
		mean += diag[i];
	mean = mean > 0.0 ? mean / n : 1.0;
	for (int try = 0; try < GPTQ_DAMP_TRIES; try++, damp *= 10.0)
	{
		for (int64_t i = 0; i < n; i++)
			for (int64_t j = 0; j < n; j++)
			{
				int64_t		a = g->perm[i],
							b = g->perm[j];
				double		v = a <= b ? xtx[a * n + b] : xtx[b * n + a];

				if (s != NULL)
					v /= (double) s[a] * s[b];
				g->h[i * n + j] = v;
			}
		for (int64_t i = 0; i < n; i++)
			g->h[i * n + i] = (diag[g->perm[i]] > 0.0 ? diag[g->perm[i]] : 1.0) + damp * mean;
		if (!llm_cholesky(g->h, n))
			continue;
		llm_cholesky_inverse(g->h, n, g->tmp);
		if (!llm_cholesky(g->tmp, n))
			continue;
		/* U = Mᵀ for (H + λI)⁻¹ = M Mᵀ, M lower: row i of U is column i of M */
		for (int64_t i = 0; i < n; i++)
			for (int64_t j = 0; j < n; j++)
				g->h[i * n + j] = j >= i ? g->tmp[j * n + i] : 0.0;
		return true;
	}
	return false;
}

/* The scales of row r's groups (ng of g values) from its values v (cols, original order, float). */
static void
group_scales(LlmQuantScheme q, const float *v, int64_t cols, int64_t gsize, float *scales)
{
	for (int64_t c0 = 0; c0 < cols; c0 += gsize)
		scales[c0 / gsize] = llm_quant_scheme_scale(q, v + c0, gsize);
}

/* Quantize g's weights column by column with error feedback into f (original order) and scales. */
static void
gptq_columns(GptqWork *g, LlmQuantScheme q, bool static_scales, float *f, float *scales, float *buf)
{
	int64_t		rows = g->rows,
				cols = g->cols;
	int64_t		gsize = llm_quant_scheme_group(q, cols);
	int64_t		ng = cols / gsize;
	const double *u = g->h;

	for (int64_t i1 = 0; i1 < cols; i1 += LLM_GPTQ_BLOCK)
	{
		int64_t		i2 = i1 + LLM_GPTQ_BLOCK < cols ? i1 + LLM_GPTQ_BLOCK : cols;

		for (int64_t i = i1; i < i2; i++)
		{
			int64_t		c = g->perm[i];
			double		d = u[i * cols + i];

			/* original order: a group's scale from its updated values when its first column comes */
			if (!static_scales && c % gsize == 0)
				for (int64_t r = 0; r < rows; r++)
				{
					for (int64_t j = 0; j < gsize; j++)
						buf[j] = (float) g->w[r * cols + i + j];
					scales[r * ng + c / gsize] = llm_quant_scheme_scale(q, buf, gsize);
				}
			for (int64_t r = 0; r < rows; r++)
			{
				double	   *wr = g->w + r * cols;
				float		qv = llm_quant_scheme_round(q, (float) wr[i], scales[r * ng + c / gsize]);
				double		e = (wr[i] - qv) / d;
				const double *ui = u + i * cols;

				f[r * cols + c] = qv;
				g->err[r * LLM_GPTQ_BLOCK + (i - i1)] = e;
				for (int64_t j = i + 1; j < i2; j++)
					wr[j] -= e * ui[j];
			}
		}
		/* the lazy update of the columns after the block */
		for (int64_t r = 0; r < rows; r++)
		{
			double	   *wr = g->w + r * cols;

			for (int64_t k = 0; k < i2 - i1; k++)
			{
				double		e = g->err[r * LLM_GPTQ_BLOCK + k];
				const double *uk = u + (i1 + k) * cols;

				for (int64_t j = i2; j < cols; j++)
					wr[j] -= e * uk[j];
			}
		}
	}
}

/* GPTQ one matrix (see gptq.h). */
LlmStatus
llm_gptq_matrix(float *f, int64_t rows, int64_t cols, const double *xtx, const float *s,
				LlmQuantScheme q, const LlmGptqOptions *o, float *scales, LlmError *err)
{
	GptqWork	g = {.rows = rows, .cols = cols};
	int64_t		gsize = llm_quant_scheme_group(q, cols);
	double	   *diag = malloc((size_t) cols * sizeof(double));
	float	   *buf = malloc((size_t) cols * sizeof(float));
	bool		static_scales = o->act_order || q == LLM_QUANT_INT8;
	LlmStatus	st = LLM_OK;

	g.h = malloc((size_t) (cols * cols) * sizeof(double));
	g.tmp = malloc((size_t) (cols * cols) * sizeof(double));
	g.w = malloc((size_t) (rows * cols) * sizeof(double));
	g.err = malloc((size_t) (rows * LLM_GPTQ_BLOCK) * sizeof(double));
	g.perm = malloc((size_t) cols * sizeof(int64_t));
	if (!g.h || !g.tmp || !g.w || !g.err || !g.perm || !diag || !buf)
	{
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for GPTQ of a (%lld, %lld) matrix",
						   (long long) rows, (long long) cols);
		goto done;
	}
	if (!llm_quant_scheme_fits(q, cols))
	{
		st = llm_error_set(err, LLM_ERR_INVALID, "GPTQ: rows of %lld values do not fit %s",
						   (long long) cols, llm_quant_scheme_name(q));
		goto done;
	}
	for (int64_t j = 0; j < cols; j++)
	{
		diag[j] = xtx[j * cols + j] / (s != NULL ? (double) s[j] * s[j] : 1.0);
		g.perm[j] = j;
	}
	if (o->act_order && !act_order_perm(diag, cols, g.perm))
	{
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for GPTQ's column order");
		goto done;
	}
	/* dead inputs (never nonzero in calibration) carry no error: their weights go to zero */
	for (int64_t r = 0; r < rows; r++)
		for (int64_t j = 0; j < cols; j++)
		{
			if (diag[j] <= 0.0)
				f[r * cols + j] = 0.0f;
		}
	if (static_scales)
		for (int64_t r = 0; r < rows; r++)
			group_scales(q, f + r * cols, cols, gsize, scales + r * (cols / gsize));
	for (int64_t r = 0; r < rows; r++)
		for (int64_t i = 0; i < cols; i++)
			g.w[r * cols + i] = f[r * cols + g.perm[i]];
	if (!gptq_inverse_factor(&g, xtx, s, o->damp, diag))
	{
		st = llm_error_set(err, LLM_ERR_INVALID,
						   "GPTQ: the Hessian of a (%lld, %lld) matrix is not positive definite even with damping %g",
						   (long long) rows, (long long) cols, o->damp * pow(10.0, GPTQ_DAMP_TRIES - 1));
		goto done;
	}
	gptq_columns(&g, q, static_scales, f, scales, buf);
done:
	gptq_work_free(&g);
	free(diag);
	free(buf);
	return st;
}

/* GPTQ matrix k of layer l and store it in w in scheme's blocks (an LlmMatrixQuantizer; ctx an LlmGptq). */
LlmStatus
llm_gptq_quantizer(void *ctx, LlmWeight *w, float *f, int l, int k, const float *s, LlmQuantScheme q,
				   LlmError *err)
{
	const LlmGptq *gq = ctx;
	const double *xtx = llm_calib_xtx(gq->calib, l, llm_calib_input_of(k));
	int64_t		ng = w->cols / llm_quant_scheme_group(q, w->cols);
	LlmType		type = llm_quant_scheme_type(q);
	size_t		row_bytes = llm_type_row_size(type, w->cols);
	float	   *scales = malloc((size_t) (w->rows * ng) * sizeof(float));
	uint8_t    *dst = malloc(row_bytes * (size_t) w->rows);
	LlmStatus	st;

	if (xtx == NULL)
		st = llm_error_set(err, LLM_ERR_INVALID, "GPTQ needs calibration statistics with x xᵀ sums");
	else if (scales == NULL || dst == NULL)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for GPTQ of \"%s\"", w->name);
	else if ((st = llm_gptq_matrix(f, w->rows, w->cols, xtx, s, q, &gq->opts, scales, err)) == LLM_OK)
	{
		for (int64_t r = 0; r < w->rows; r++)
			llm_quantize_row_scheme_scaled(q, f + r * w->cols, scales + r * ng, dst + r * row_bytes, w->cols);
		llm_weight_set_owned(w, type, dst);	/* w takes dst */
		dst = NULL;
	}
	free(scales);
	free(dst);
	return st;
}

/* GPTQ every float matrix of layer l whose rows fit scheme. */
LlmStatus
llm_gptq_quantize_layer(LlmModel *m, int l, LlmQuantScheme q, const LlmGptq *g, LlmError *err)
{
	LlmLayerWeights *lw = &m->weights.layers[l];
	LlmStatus	st = LLM_OK;

	for (int k = 0; k < LLM_LAYER_MATRICES && st == LLM_OK; k++)
	{
		LlmWeight  *w = llm_layer_matrix(lw, k);
		float	   *f;

		if (!llm_quant_scheme_fits(q, w->cols))
			continue;
		if ((f = llm_weight_to_float(w)) == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for GPTQ of layer %d", l);
		st = llm_gptq_quantizer((void *) g, w, f, l, k, NULL, q, err);
		free(f);
	}
	return st;
}
