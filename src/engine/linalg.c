/*
 * linalg.c
 *		Cholesky factorisation and inverse in double precision (see linalg.h).
 *
 * Plain textbook loops (Golub & Van Loan, Algorithm 4.2.1, row-oriented):
 * the matrices are GPTQ Hessians of at most a few thousand rows, factored
 * once per layer input offline, so clarity wins over blocking.
 */
#include "linalg.h"

#include <math.h>
#include <string.h>

/* sum of a[k] b[k] over n, in four running sums (independent additions keep the pipeline full). */
static double
dot(const double *a, const double *b, int64_t n)
{
	double		s0 = 0.0,
				s1 = 0.0,
				s2 = 0.0,
				s3 = 0.0;
	int64_t		k = 0;

	for (; k + 4 <= n; k += 4)
	{
		s0 += a[k] * b[k];
		s1 += a[k + 1] * b[k + 1];
		s2 += a[k + 2] * b[k + 2];
		s3 += a[k + 3] * b[k + 3];
	}
	for (; k < n; k++)
		s0 += a[k] * b[k];
	return (s0 + s1) + (s2 + s3);
}

/* Factor a (n, n) as L Lᵀ in place; false when a is not positive definite. */
bool
llm_cholesky(double *a, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
	{
		double	   *ri = a + i * n;

		for (int64_t j = 0; j <= i; j++)
		{
			const double *rj = a + j * n;
			double		sum = ri[j] - dot(ri, rj, j);
			if (i == j)
			{
				if (!(sum > 0.0) || !isfinite(sum))
					return false;
				ri[i] = sqrt(sum);
			}
			else
				ri[j] = sum / rj[j];
		}
		memset(ri + i + 1, 0, (size_t) (n - i - 1) * sizeof(double));
	}
	return true;
}

/* Invert the lower triangular l (n, n) in place; scratch holds n doubles. */
void
llm_lower_inverse(double *l, int64_t n, double *scratch)
{
	/* L⁻¹ row by row in place: lower triangular, (L⁻¹)_ii = 1 / L_ii */
	for (int64_t i = 0; i < n; i++)
	{
		double	   *ri = l + i * n;
		double		d = 1.0 / ri[i];

		/* row i of M = L⁻¹ from L M = I: M_ij = -(1 / L_ii) sum_{k=j..i-1} L_ik M_kj, rows k above already M */
		memset(scratch, 0, (size_t) i * sizeof(double));
		for (int64_t k = 0; k < i; k++)
		{
			const double *mk = l + k * n;
			double		a = ri[k];

			for (int64_t j = 0; j <= k; j++)
				scratch[j] += a * mk[j];
		}
		for (int64_t j = 0; j < i; j++)
			scratch[j] *= -d;
		memcpy(ri, scratch, (size_t) i * sizeof(double));
		ri[i] = d;
	}
}

/* inv (n, n) = (L Lᵀ)⁻¹ from the lower factor l, which becomes L⁻¹. */
void
llm_cholesky_inverse(double *l, int64_t n, double *inv)
{
	llm_lower_inverse(l, n, inv);
	/* A⁻¹ = L⁻ᵀ L⁻¹ = sum over rows k of M = L⁻¹ of m_kᵀ m_k (row-contiguous), lower half then mirrored */
	memset(inv, 0, (size_t) (n * n) * sizeof(double));
	for (int64_t k = 0; k < n; k++)
	{
		const double *mk = l + k * n;

		for (int64_t i = 0; i <= k; i++)
		{
			double		a = mk[i];
			double	   *row = inv + i * n;

			for (int64_t j = 0; j <= i; j++)
				row[j] += a * mk[j];
		}
	}
	for (int64_t i = 0; i < n; i++)
		for (int64_t j = 0; j < i; j++)
			inv[j * n + i] = inv[i * n + j];
}
