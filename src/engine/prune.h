/*
 * prune.h
 *		Wanda pruning (Sun et al., ICLR 2024): a weight's importance is
 *		|w_ij| · ‖X_j‖₂, the norm of its input channel over calibration
 *		tokens; in each output row the least important are set to zero,
 *		half the row (unstructured 50%) or 2 of every 4 consecutive inputs
 *		(NVIDIA's 2:4 pattern).  The result stays dense (zeros in the
 *		matrix's type); a 2:4 weight type can take the 2:4 masks later.
 */
#ifndef LLM_PRUNE_H
#define LLM_PRUNE_H

#include <stdbool.h>
#include <stdint.h>

#include "calib.h"
#include "model.h"

/*
 * Zero in each row of f (rows, cols) the weights of least |f_ij| · xnorm_j:
 * with pattern24, the 2 smallest of every 4 consecutive columns (cols a
 * multiple of 4); else the cols / 2 smallest of the row.  Ties go to the
 * lower column.  False when out of memory (f untouched).
 */
bool		llm_prune_wanda(float *f, int64_t rows, int64_t cols, const double *xnorm, bool pattern24);

/*
 * Replace layer l's float matrices by F32 copies pruned by Wanda with the
 * input norms of c (2:4 or 50%), for quantization to follow.
 */
LlmStatus	llm_prune_layer(LlmModel *m, int l, const LlmCalib *c, bool pattern24, LlmError *err);

#endif							/* LLM_PRUNE_H */
