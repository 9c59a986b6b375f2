/*
 * linalg.h
 *		Dense symmetric linear algebra in double precision for the offline
 *		compression methods (GPTQ's inverse Hessian, gptq.c): Cholesky
 *		factorisation and the inverse it gives.  Row-major n x n matrices.
 */
#ifndef LLM_LINALG_H
#define LLM_LINALG_H

#include <stdbool.h>
#include <stdint.h>

/*
 * Factor the symmetric positive-definite a (n, n) as L Lᵀ in place: L in the
 * lower triangle, the strict upper triangle zeroed.  False (a partly
 * overwritten) when a is not positive definite.
 */
bool		llm_cholesky(double *a, int64_t n);

/* Invert the lower triangular l (n, n) in place; scratch holds n doubles. */
void		llm_lower_inverse(double *l, int64_t n, double *scratch);

/*
 * Given the Cholesky factor l (n, n) of A (llm_cholesky's output), write
 * A⁻¹ = L⁻ᵀ L⁻¹ (n, n, symmetric) into inv; l is overwritten with L⁻¹.
 */
void		llm_cholesky_inverse(double *l, int64_t n, double *inv);

#endif							/* LLM_LINALG_H */
