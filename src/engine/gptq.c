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

/* diag (cols) of H for inputs x / s: xtx's diagonal over s². */
static void
hessian_diag(const double *xtx, const float *s, int64_t cols, double *diag)
{
	for (int64_t j = 0; j < cols; j++)
		diag[j] = xtx[j * cols + j] / (s != NULL ? (double) s[j] * s[j] : 1.0);
}

/*
 * U from H + λI (working order): with J the order reversed, J H J = L Lᵀ
 * gives H⁻¹ = (J L⁻¹ J)ᵀ (J L⁻¹ J), and J L⁻¹ J is upper triangular; so one
 * Cholesky and one triangular inverse make U, with no explicit inverse.
 * Dead inputs (diag 0) get diag 1.  False when not positive definite.
 */
static bool
factor_damped(LlmGptqFactor *f, const double *diag, double lambda, double *scratch)
{
	int64_t		n = f->cols;
	double	   *h = f->u;

	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j <= i; j++)
		{
			int64_t		a = f->perm[n - 1 - i],
						b = f->perm[n - 1 - j];
			double		v = a <= b ? f->xtx[a * n + b] : f->xtx[b * n + a];

			if (f->s != NULL)
				v /= (double) f->s[a] * f->s[b];
			if (i == j)
				v = (diag[a] > 0.0 ? v : 1.0) + lambda;
			h[i * n + j] = v;
		}
	if (!llm_cholesky(h, n))
		return false;
	llm_lower_inverse(h, n, scratch);
	/* U = J L⁻¹ J in place: swap (i, j) with (n-1-i, n-1-j), a point reflection, then clear the lower half */
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < n; j++)
		{
			int64_t		p = i * n + j,
						q = (n - 1 - i) * n + (n - 1 - j);

			if (p < q)
			{
				double		t = h[p];

				h[p] = h[q];
				h[q] = t;
			}
		}
	for (int64_t i = 0; i < n; i++)
		memset(h + i * n, 0, (size_t) i * sizeof(double));
	return true;
}

/* Factor xtx with scales s into f (see gptq.h). */
LlmStatus
llm_gptq_factor(LlmGptqFactor *f, const double *xtx, const float *s, int64_t cols, const LlmGptqOptions *o,
				LlmError *err)
{
	double	   *diag = malloc((size_t) cols * sizeof(double));
	double	   *scratch = malloc((size_t) cols * sizeof(double));
	double		mean = 0.0,
				damp = o->damp;
	bool		ok = false;

	llm_gptq_factor_free(f);
	f->cols = cols;
	f->xtx = xtx;
	f->s = s;
	f->u = malloc((size_t) (cols * cols) * sizeof(double));
	f->perm = malloc((size_t) cols * sizeof(int64_t));
	if (!diag || !scratch || !f->u || !f->perm)
		goto oom;
	hessian_diag(xtx, s, cols, diag);
	for (int64_t j = 0; j < cols; j++)
	{
		mean += diag[j];
		f->perm[j] = j;
	}
	mean = mean > 0.0 ? mean / cols : 1.0;
	if (o->act_order && !act_order_perm(diag, cols, f->perm))
		goto oom;
	for (int try = 0; !ok && try < GPTQ_DAMP_TRIES; try++, damp *= 10.0)
		ok = factor_damped(f, diag, damp * mean, scratch);
	free(diag);
	free(scratch);
	if (!ok)
	{
		llm_gptq_factor_free(f);
		return llm_error_set(err, LLM_ERR_INVALID,
							 "GPTQ: the Hessian of a %lld-column input is not positive definite even with damping %g",
							 (long long) cols, damp / 10.0);
	}
	return LLM_OK;

oom:
	free(diag);
	free(scratch);
	llm_gptq_factor_free(f);
	return llm_error_set(err, LLM_ERR_NOMEM, "out of memory for GPTQ of a %lld-column input", (long long) cols);
}

/* Free a factor; safe on a zeroed one. */
void
llm_gptq_factor_free(LlmGptqFactor *f)
{
	free(f->u);
	free(f->perm);
	memset(f, 0, sizeof(*f));
}

/* The scales of row r's groups (ng of g values) from its values v (cols, original order, float). */
static void
group_scales(LlmQuantScheme q, const float *v, int64_t cols, int64_t gsize, float *scales)
{
	for (int64_t c0 = 0; c0 < cols; c0 += gsize)
		scales[c0 / gsize] = llm_quant_scheme_scale(q, v + c0, gsize);
}

/* The column sweep shared by GPTQ and SparseGPT (see gptq.h). */
bool
llm_obs_sweep(double *w, int64_t rows, const LlmGptqFactor *fac, LlmObsColumnFn fn, void *ctx)
{
	int64_t		cols = fac->cols;
	const double *u = fac->u;
	double	   *err = malloc((size_t) (rows * LLM_GPTQ_BLOCK) * sizeof(double));	/* (rows, block) */
	double	   *q = malloc((size_t) rows * sizeof(double));

	if (err == NULL || q == NULL)
	{
		free(err);
		free(q);
		return false;
	}
	for (int64_t i1 = 0; i1 < cols; i1 += LLM_GPTQ_BLOCK)
	{
		int64_t		i2 = i1 + LLM_GPTQ_BLOCK < cols ? i1 + LLM_GPTQ_BLOCK : cols;

		for (int64_t i = i1; i < i2; i++)
		{
			const double *ui = u + i * cols;

			fn(ctx, w, rows, i, i1, i2, q);
			for (int64_t r = 0; r < rows; r++)
			{
				double	   *wr = w + r * cols;
				double		e = (wr[i] - q[r]) / ui[i];

				err[r * LLM_GPTQ_BLOCK + (i - i1)] = e;
				for (int64_t j = i + 1; j < i2; j++)
					wr[j] -= e * ui[j];
			}
		}
		/* the lazy update of the columns after the block */
		for (int64_t r = 0; r < rows; r++)
		{
			double	   *wr = w + r * cols;

			for (int64_t k = 0; k < i2 - i1; k++)
			{
				double		e = err[r * LLM_GPTQ_BLOCK + k];
				const double *uk = u + (i1 + k) * cols;

				for (int64_t j = i2; j < cols; j++)
					wr[j] -= e * uk[j];
			}
		}
	}
	free(err);
	free(q);
	return true;
}

/* What GPTQ's column function needs. */
typedef struct GptqSweep
{
	const LlmGptqFactor *fac;
	LlmQuantScheme q;
	bool		static_scales;	/* scales fixed beforehand, else each group's from its updated values */
	float	   *f;				/* (rows, cols) the quantized values, original order */
	float	   *scales;			/* (rows, ng) */
	float	   *buf;			/* (gsize) one group's values */
} GptqSweep;

/*
 * GPTQ's LlmObsColumnFn: round column i to its group's grid (the group's
 * scale first, in the original order, when i starts it), into q and f.
 */
static void
gptq_column(void *ctx, const double *w, int64_t rows, int64_t i, int64_t i1, int64_t i2, double *q)
{
	GptqSweep  *g = ctx;
	int64_t		cols = g->fac->cols;
	int64_t		gsize = llm_quant_scheme_group(g->q, cols);
	int64_t		ng = cols / gsize;
	int64_t		c = g->fac->perm[i];

	/* original order (working column = original): a group's scale from its updated values */
	if (!g->static_scales && c % gsize == 0)
		for (int64_t r = 0; r < rows; r++)
		{
			for (int64_t j = 0; j < gsize; j++)
				g->buf[j] = (float) w[r * cols + i + j];
			g->scales[r * ng + c / gsize] = llm_quant_scheme_scale(g->q, g->buf, gsize);
		}
	for (int64_t r = 0; r < rows; r++)
	{
		float		qv = llm_quant_scheme_round(g->q, (float) w[r * cols + i], g->scales[r * ng + c / gsize]);

		g->f[r * cols + c] = qv;
		q[r] = qv;
	}
}

/* GPTQ one matrix with its input's factor (see gptq.h). */
LlmStatus
llm_gptq_matrix(float *f, int64_t rows, int64_t cols, const LlmGptqFactor *fac, LlmQuantScheme q,
				const LlmGptqOptions *o, float *scales, LlmError *err)
{
	int64_t		gsize = llm_quant_scheme_group(q, cols);
	double	   *diag = malloc((size_t) cols * sizeof(double));
	double	   *w = malloc((size_t) (rows * cols) * sizeof(double));
	float	   *buf = malloc((size_t) cols * sizeof(float));
	GptqSweep	g = {fac, q, o->act_order || q == LLM_QUANT_INT8, f, scales, buf};
	LlmStatus	st = LLM_OK;

	bool		ok = diag != NULL && w != NULL && buf != NULL;

	if (ok && (!llm_quant_scheme_fits(q, cols) || fac->cols != cols))
		st = llm_error_set(err, LLM_ERR_INVALID, "GPTQ: rows of %lld values do not fit %s or the factor",
						   (long long) cols, llm_quant_scheme_name(q));
	else if (ok)
	{
		/* dead inputs (never nonzero in calibration) carry no error: their weights go to zero */
		hessian_diag(fac->xtx, fac->s, cols, diag);
		for (int64_t r = 0; r < rows; r++)
			for (int64_t j = 0; j < cols; j++)
				if (diag[j] <= 0.0)
					f[r * cols + j] = 0.0f;
		if (g.static_scales)
			for (int64_t r = 0; r < rows; r++)
				group_scales(q, f + r * cols, cols, gsize, scales + r * (cols / gsize));
		for (int64_t r = 0; r < rows; r++)
			for (int64_t i = 0; i < cols; i++)
				w[r * cols + i] = f[r * cols + fac->perm[i]];
		ok = llm_obs_sweep(w, rows, fac, gptq_column, &g);
	}
	if (!ok)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for GPTQ of a (%lld, %lld) matrix",
						   (long long) rows, (long long) cols);
	free(diag);
	free(w);
	free(buf);
	return st;
}

/* The factor of layer l's matrix k's input with scales s in g->factor, made or kept (see gptq.h). */
LlmStatus
llm_gptq_factor_of(LlmGptq *g, int l, int k, const float *s, int64_t cols, LlmError *err)
{
	const double *xtx = llm_calib_xtx(g->calib, l, llm_calib_input_of(k));

	if (xtx == NULL)
		return llm_error_set(err, LLM_ERR_INVALID, "GPTQ needs calibration statistics with x xᵀ sums");
	if (g->factor.xtx == xtx && g->factor.s == s && g->factor.cols == cols)
		return LLM_OK;
	return llm_gptq_factor(&g->factor, xtx, s, cols, &g->opts, err);
}

/* GPTQ matrix k of layer l and store it in w in scheme's blocks (an LlmMatrixQuantizer; ctx an LlmGptq). */
LlmStatus
llm_gptq_quantizer(void *ctx, LlmWeight *w, float *f, int l, int k, const float *s, LlmQuantScheme q,
				   LlmError *err)
{
	LlmGptq    *gq = ctx;
	int64_t		ng = w->cols / llm_quant_scheme_group(q, w->cols);
	LlmType		type = llm_quant_scheme_type(q);
	size_t		row_bytes = llm_type_row_size(type, w->cols);
	float	   *scales = malloc((size_t) (w->rows * ng) * sizeof(float));
	uint8_t    *dst = malloc(row_bytes * (size_t) w->rows);
	LlmStatus	st = LLM_OK;

	if (scales == NULL || dst == NULL)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for GPTQ of \"%s\"", w->name);
	else
		st = llm_gptq_factor_of(gq, l, k, s, w->cols, err);
	if (st == LLM_OK)
		st = llm_gptq_matrix(f, w->rows, w->cols, &gq->factor, q, &gq->opts, scales, err);
	if (st == LLM_OK)
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
llm_gptq_quantize_layer(LlmModel *m, int l, LlmQuantScheme q, LlmGptq *g, LlmError *err)
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
		st = llm_gptq_quantizer(g, w, f, l, k, NULL, q, err);
		free(f);
	}
	return st;
}
