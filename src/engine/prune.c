/*
 * prune.c
 *		Wanda pruning to 50% or 2:4 (see prune.h).
 */
#include "prune.h"

#include "engine.h"

#include <math.h>
#include <stdlib.h>

/* A weight's score and column, for sorting a row. */
typedef struct PruneScore
{
	double		score;
	int64_t		col;
} PruneScore;

/* qsort comparator: ascending score, ties by column. */
static int
cmp_score(const void *a, const void *b)
{
	const PruneScore *x = a,
			   *y = b;

	if (x->score != y->score)
		return x->score < y->score ? -1 : 1;
	return x->col < y->col ? -1 : x->col > y->col;
}

/* Zero the 2 least important of every 4 consecutive weights of row w (cols). */
static void
prune_row_24(float *w, int64_t cols, const double *xnorm)
{
	for (int64_t j0 = 0; j0 + 4 <= cols; j0 += 4)
	{
		PruneScore	s[4];

		for (int k = 0; k < 4; k++)
			s[k] = (PruneScore) {fabs((double) w[j0 + k]) * xnorm[j0 + k], j0 + k};
		qsort(s, 4, sizeof(PruneScore), cmp_score);
		w[s[0].col] = 0.0f;
		w[s[1].col] = 0.0f;
	}
}

/* Zero the least important half of row w (cols), scores in s (cols). */
static void
prune_row_half(float *w, int64_t cols, const double *xnorm, PruneScore *s)
{
	for (int64_t j = 0; j < cols; j++)
		s[j] = (PruneScore) {fabs((double) w[j]) * xnorm[j], j};
	qsort(s, (size_t) cols, sizeof(PruneScore), cmp_score);
	for (int64_t j = 0; j < cols / 2; j++)
		w[s[j].col] = 0.0f;
}

/* Zero the least important weights of each row of f (see prune.h). */
bool
llm_prune_wanda(float *f, int64_t rows, int64_t cols, const double *xnorm, bool pattern24)
{
	PruneScore *s = pattern24 ? NULL : malloc((size_t) cols * sizeof(PruneScore));

	if (!pattern24 && s == NULL)
		return false;
	for (int64_t r = 0; r < rows; r++)
	{
		if (pattern24)
			prune_row_24(f + r * cols, cols, xnorm);
		else
			prune_row_half(f + r * cols, cols, xnorm, s);
	}
	free(s);
	return true;
}

/* Prune layer l's float matrices with Wanda into owned F32 copies (see prune.h). */
LlmStatus
llm_prune_layer(LlmModel *m, int l, const LlmCalib *c, bool pattern24, LlmError *err)
{
	LlmLayerWeights *lw = &m->weights.layers[l];

	for (int k = 0; k < LLM_LAYER_MATRICES; k++)
	{
		LlmWeight  *w = llm_layer_matrix(lw, k);
		double	   *xnorm = malloc((size_t) w->cols * sizeof(double));
		float	   *f = llm_weight_to_float(w);

		if (xnorm == NULL || f == NULL || (pattern24 && w->cols % 4 != 0))
		{
			free(xnorm);
			free(f);
			if (xnorm != NULL && f != NULL)
				continue;		/* a row that does not divide into fours stays dense */
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory pruning layer %d", l);
		}
		llm_calib_norm(c, l, llm_calib_input_of(k), xnorm);
		if (!llm_prune_wanda(f, w->rows, w->cols, xnorm, pattern24))
		{
			free(xnorm);
			free(f);
			return llm_error_set(err, LLM_ERR_NOMEM, "out of memory pruning layer %d", l);
		}
		llm_weight_set_owned(w, LLM_TYPE_F32, f);	/* w takes f */
		free(xnorm);
	}
	return LLM_OK;
}
