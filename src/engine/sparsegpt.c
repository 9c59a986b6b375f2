/*
 * sparsegpt.c
 *		SparseGPT pruning of weight matrices (see sparsegpt.h).
 *
 * For one output row w with inputs X the layer-wise error of removing
 * weight j is, by Optimal Brain Surgeon, w_j² / [H⁻¹]_jj once the other
 * weights are moved by −w_j [H⁻¹]_j,: / [H⁻¹]_jj.  SparseGPT (Frantar &
 * Alistarh, 2023, Algorithm 1) processes the columns left to right as GPTQ
 * does, with U the upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU, gptq.h): the
 * saliency of column j, with the earlier columns already fixed, is
 * w_j² / U_jj², and a pruned weight's error w_j / U_jj is pushed onto the
 * later columns through row j of U, exactly as GPTQ pushes a rounding
 * error; the sweep itself is GPTQ's (llm_obs_sweep, gptq.c).
 *
 * The mask is chosen as the sweep goes ("adaptive mask selection"), from
 * the weights as updated so far: 50% at the start of each block of
 * LLM_GPTQ_BLOCK columns, in each row the block's lowest saliencies up to
 * half the columns reached (so every row ends exactly half pruned); 2:4 at
 * each fourth column, the 2 of lowest saliency of the next 4.  Inputs
 * never seen in calibration (diag H = 0) have saliency 0: they are pruned
 * first, at no cost.  Ties go to the lower column.
 */
#include "sparsegpt.h"

#include "engine.h"
#include "prune.h"

#include <stdlib.h>

/* What SparseGPT's column function needs. */
typedef struct SparseSweep
{
	const LlmGptqFactor *fac;
	bool		pattern24;
	float	   *f;				/* (rows, cols) the result */
	bool	   *drop;			/* (rows, LLM_GPTQ_BLOCK) the mask of the current block */
	int64_t    *n_dropped;		/* (rows) weights pruned so far in each row */
	double	   *score;			/* (LLM_GPTQ_BLOCK) one row's saliencies */
	LlmPruneScore *sort;		/* (LLM_GPTQ_BLOCK) */
} SparseSweep;

/* OBS saliency w² / U_jj² of working column j with value v; 0 for an input never seen. */
static double
saliency(const LlmGptqFactor *fac, int64_t j, double v)
{
	double		ujj = fac->u[j * fac->cols + j];

	return fac->xtx[j * fac->cols + j] > 0.0 ? v * v / (ujj * ujj) : 0.0;
}

/* Choose the mask of columns [i, i + n) of every row: the k of lowest saliency each (k < 0: half up to i + n). */
static void
choose_mask(SparseSweep *sp, const double *w, int64_t rows, int64_t i, int64_t i1, int64_t n, int64_t k)
{
	int64_t		cols = sp->fac->cols;

	for (int64_t r = 0; r < rows; r++)
	{
		int64_t		kr = k >= 0 ? k : (i + n) / 2 - sp->n_dropped[r];

		for (int64_t j = 0; j < n; j++)
			sp->score[j] = saliency(sp->fac, i + j, w[r * cols + i + j]);
		llm_prune_lowest(sp->score, n, kr, sp->drop + r * LLM_GPTQ_BLOCK + (i - i1), sp->sort);
		sp->n_dropped[r] += kr;
	}
}

/*
 * SparseGPT's LlmObsColumnFn: at a block's start (50%) or a group of four's
 * (2:4) choose the mask from the updated weights; column i is then zero
 * where masked and kept as it is elsewhere.
 */
static void
sparse_column(void *ctx, const double *w, int64_t rows, int64_t i, int64_t i1, int64_t i2, double *q)
{
	SparseSweep *sp = ctx;
	int64_t		cols = sp->fac->cols;

	if (sp->pattern24 && (i - i1) % 4 == 0)
		choose_mask(sp, w, rows, i, i1, 4, 2);
	else if (!sp->pattern24 && i == i1)
		choose_mask(sp, w, rows, i, i1, i2 - i1, -1);
	for (int64_t r = 0; r < rows; r++)
	{
		q[r] = sp->drop[r * LLM_GPTQ_BLOCK + (i - i1)] ? 0.0 : w[r * cols + i];
		sp->f[r * cols + i] = (float) q[r];
	}
}

/* Prune f by SparseGPT with its input's factor (see sparsegpt.h). */
LlmStatus
llm_sparsegpt_matrix(float *f, int64_t rows, int64_t cols, const LlmGptqFactor *fac, bool pattern24,
					 LlmError *err)
{
	double	   *w = malloc((size_t) (rows * cols) * sizeof(double));
	SparseSweep sp = {fac, pattern24, f,
		malloc((size_t) (rows * LLM_GPTQ_BLOCK) * sizeof(bool)),
		calloc((size_t) rows, sizeof(int64_t)),
		malloc(LLM_GPTQ_BLOCK * sizeof(double)),
	malloc(LLM_GPTQ_BLOCK * sizeof(LlmPruneScore))};
	bool		ok = w && sp.drop && sp.n_dropped && sp.score && sp.sort;
	bool		in_order = fac->cols == cols && (!pattern24 || cols % 4 == 0);
	LlmStatus	st = LLM_OK;

	for (int64_t j = 0; in_order && j < cols; j++)
		in_order = fac->perm[j] == j;
	if (!in_order)
		st = llm_error_set(err, LLM_ERR_INVALID,
						   "SparseGPT: a (%lld, %lld) matrix does not fit its factor (another width or act-order)%s",
						   (long long) rows, (long long) cols, pattern24 ? " or 2:4" : "");
	else if (ok)
	{
		for (int64_t i = 0; i < rows * cols; i++)
			w[i] = f[i];
		ok = llm_obs_sweep(w, rows, fac, sparse_column, &sp);
	}
	if (st == LLM_OK && !ok)
		st = llm_error_set(err, LLM_ERR_NOMEM, "out of memory for SparseGPT of a (%lld, %lld) matrix",
						   (long long) rows, (long long) cols);
	free(w);
	free(sp.drop);
	free(sp.n_dropped);
	free(sp.score);
	free(sp.sort);
	return st;
}
