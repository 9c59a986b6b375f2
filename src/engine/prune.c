/*
 * prune.c
 *		Wanda pruning to 50% or 2:4, and the layer loop that SparseGPT
 *		shares (see prune.h).
 */
#include "prune.h"

#include "engine.h"
#include "sparsegpt.h"

#include <math.h>
#include <stdlib.h>

/* qsort comparator: ascending score, ties by column. */
static int
cmp_score(const void *a, const void *b)
{
	const LlmPruneScore *x = a,
			   *y = b;

	if (x->score != y->score)
		return x->score < y->score ? -1 : 1;
	return x->col < y->col ? -1 : x->col > y->col;
}

/* Mark the k entries of least score (see prune.h). */
void
llm_prune_lowest(const double *score, int64_t n, int64_t k, bool *drop, LlmPruneScore *s)
{
	for (int64_t j = 0; j < n; j++)
	{
		s[j] = (LlmPruneScore) {score[j], j};
		drop[j] = false;
	}
	qsort(s, (size_t) n, sizeof(LlmPruneScore), cmp_score);
	for (int64_t j = 0; j < k; j++)
		drop[s[j].col] = true;
}

/* Zero the least important weights of each row of f (see prune.h). */
bool
llm_prune_wanda(float *f, int64_t rows, int64_t cols, const double *xnorm, bool pattern24)
{
	double	   *score = malloc((size_t) cols * sizeof(double));
	bool	   *drop = malloc((size_t) cols * sizeof(bool));
	LlmPruneScore *s = malloc((size_t) cols * sizeof(LlmPruneScore));
	int64_t		span = pattern24 ? 4 : cols;	/* columns compared together */

	if (score == NULL || drop == NULL || s == NULL)
	{
		free(score);
		free(drop);
		free(s);
		return false;
	}
	for (int64_t r = 0; r < rows; r++)
	{
		float	   *w = f + r * cols;

		for (int64_t j = 0; j < cols; j++)
			score[j] = fabs((double) w[j]) * xnorm[j];
		for (int64_t j0 = 0; j0 + span <= cols; j0 += span)
		{
			llm_prune_lowest(score + j0, span, span / 2, drop, s);
			for (int64_t k = 0; k < span; k++)
				if (drop[k])
					w[j0 + k] = 0.0f;
		}
	}
	free(score);
	free(drop);
	free(s);
	return true;
}

/* Prune f (w->rows, w->cols), the float values of layer l's matrix k, by SparseGPT (g) or Wanda (c's norms). */
static LlmStatus
prune_matrix(float *f, const LlmWeight *w, int l, int k, const LlmCalib *c, LlmGptq *g, bool pattern24,
			 LlmError *err)
{
	double	   *xnorm;
	LlmStatus	st;

	if (g != NULL)
	{
		if ((st = llm_gptq_factor_of(g, l, k, NULL, w->cols, err)))
			return st;
		return llm_sparsegpt_matrix(f, w->rows, w->cols, &g->factor, pattern24, err);
	}
	if ((xnorm = malloc((size_t) w->cols * sizeof(double))) == NULL)
		return llm_error_set(err, LLM_ERR_NOMEM, "out of memory pruning layer %d", l);
	llm_calib_norm(c, l, llm_calib_input_of(k), xnorm);
	st = llm_prune_wanda(f, w->rows, w->cols, xnorm, pattern24) ? LLM_OK :
		llm_error_set(err, LLM_ERR_NOMEM, "out of memory pruning layer %d", l);
	free(xnorm);
	return st;
}

/* Prune layer l's float matrices into owned F32 copies (see prune.h). */
LlmStatus
llm_prune_layer(LlmModel *m, int l, const LlmCalib *c, LlmGptq *g, bool pattern24, LlmError *err)
{
	LlmLayerWeights *lw = &m->weights.layers[l];

	for (int k = 0; k < LLM_LAYER_MATRICES; k++)
	{
		LlmWeight  *w = llm_layer_matrix(lw, k);
		float	   *f;
		LlmStatus	st;

		if (pattern24 && w->cols % 4 != 0)
			continue;			/* a row that does not divide into fours stays dense */
		if ((f = llm_weight_to_float(w)) == NULL)
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory pruning layer %d", l);
		if ((st = prune_matrix(f, w, l, k, c, g, pattern24, err)))
		{
			free(f);
			return st;
		}
		llm_weight_set_owned(w, LLM_TYPE_F32, f);	/* w takes f */
	}
	return LLM_OK;
}
