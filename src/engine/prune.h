/*
 * prune.h
 *		Wanda pruning (Sun et al., ICLR 2024): a weight's importance is
 *		|w_ij| · ‖X_j‖₂, the norm of its input channel over calibration
 *		tokens; in each output row the least important are set to zero,
 *		half the row (unstructured 50%) or 2 of every 4 consecutive inputs
 *		(NVIDIA's 2:4 pattern).  The result stays dense (zeros in the
 *		matrix's type); a 2:4 weight type can take the 2:4 masks later.
 *		SparseGPT, the same patterns chosen with the Hessian and the
 *		kept weights updated, is in sparsegpt.h.
 */
#ifndef LLM_PRUNE_H
#define LLM_PRUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "calib.h"
#include "gptq.h"
#include "model.h"

/* A score and its index, for sorting. */
typedef struct LlmPruneScore
{
	double		score;
	int64_t		col;
} LlmPruneScore;

/*
 * Set drop[j] (n) for the k entries of least score[j] (n), false for the
 * others; ties go to the lower index.  s holds n scores' scratch.
 */
void		llm_prune_lowest(const double *score, int64_t n, int64_t k, bool *drop, LlmPruneScore *s);

/*
 * Zero in each row of f (rows, cols) the weights of least |f_ij| · xnorm_j:
 * with pattern24, the 2 smallest of every 4 consecutive columns (cols a
 * multiple of 4); else the cols / 2 smallest of the row.  Ties go to the
 * lower column.  False when out of memory (f untouched).
 */
bool		llm_prune_wanda(float *f, int64_t rows, int64_t cols, const double *xnorm, bool pattern24);

/*
 * Replace layer l's float matrices by F32 copies pruned (2:4 or 50%), for
 * quantization to follow: by SparseGPT with g's factors (sparsegpt.h) when
 * g is not NULL, else by Wanda with the input norms of c.  A matrix whose
 * rows do not divide into fours stays dense under 2:4.
 */
LlmStatus	llm_prune_layer(LlmModel *m, int l, const LlmCalib *c, LlmGptq *g, bool pattern24, LlmError *err);

#endif							/* LLM_PRUNE_H */
