/*
 * sparsegpt.h
 *		SparseGPT (Frantar & Alistarh, ICML 2023): pruning a weight matrix to
 *		50% per row or to 2:4 by Optimal Brain Surgeon, column by column
 *		with the inverse Hessian of the layer-wise squared error that GPTQ
 *		uses (gptq.h), each pruned weight's error pushed onto the columns
 *		not yet processed, so the kept weights move to make up for it.
 *
 * Offline only (llm-cli quantize --prune sparsegpt|sparsegpt24, through
 * prune.h and compress.h); the result is dense F32 with zeros, rounded
 * afterwards like Wanda's.
 */
#ifndef LLM_SPARSEGPT_H
#define LLM_SPARSEGPT_H

#include <stdbool.h>
#include <stdint.h>

#include "gptq.h"

/*
 * Prune f (rows, cols) in place with the factor fac of its input (made in
 * the original column order: no act-order): in each row, half the weights
 * (cols / 2) set to zero, or with pattern24 2 of every 4 consecutive
 * columns (cols a multiple of 4), and the others updated.  LLM_ERR_INVALID
 * for a factor of another width or order; LLM_ERR_NOMEM.
 */
LlmStatus	llm_sparsegpt_matrix(float *f, int64_t rows, int64_t cols, const LlmGptqFactor *fac, bool pattern24,
								 LlmError *err);

#endif							/* LLM_SPARSEGPT_H */
