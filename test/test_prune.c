/*
 * test_prune.c
 *		Tests of Wanda pruning (prune.h): in 2:4 every 4 consecutive weights
 *		of a row keep exactly their 2 of largest |w| · ‖X_j‖ and lose the
 *		other 2; at 50% each row keeps the half of largest score.
 */
#include "prune.h"
#include "test.h"

#include <math.h>

#define ROWS 8
#define COLS 64

int
main(void)
{
	float		w[ROWS * COLS],
				p[ROWS * COLS];
	double		xnorm[COLS];

	for (int i = 0; i < ROWS * COLS; i++)
		w[i] = test_rng_uniform(-1, 1);
	for (int j = 0; j < COLS; j++)
		xnorm[j] = test_rng_uniform(0.1f, 3.0f);

	/* 2:4: in each group of four, the two kept have the two largest scores */
	memcpy(p, w, sizeof(w));
	TEST_CHECK(llm_prune_wanda(p, ROWS, COLS, xnorm, true), "2:4 failed");
	for (int r = 0; r < ROWS; r++)
		for (int j0 = 0; j0 < COLS; j0 += 4)
		{
			int			zeros = 0;

			for (int k = 0; k < 4; k++)
			{
				int			i = r * COLS + j0 + k,
							larger = 0;

				zeros += p[i] == 0.0f;
				for (int m = 0; m < 4; m++)
					larger += fabs(w[r * COLS + j0 + m]) * xnorm[j0 + m] > fabs(w[i]) * xnorm[j0 + k];
				TEST_CHECK((p[i] == 0.0f) == (larger >= 2), "row %d col %d: kept %d with %d larger", r, j0 + k,
						   p[i] != 0.0f, larger);
				TEST_CHECK(p[i] == 0.0f || p[i] == w[i], "row %d col %d changed", r, j0 + k);
			}
			TEST_CHECK(zeros == 2, "row %d group %d: %d zeros", r, j0 / 4, zeros);
		}

	/* 50%: half of each row zeroed, every kept score at least every dropped one */
	memcpy(p, w, sizeof(w));
	TEST_CHECK(llm_prune_wanda(p, ROWS, COLS, xnorm, false), "50%% failed");
	for (int r = 0; r < ROWS; r++)
	{
		int			zeros = 0;
		double		max_dropped = 0.0,
					min_kept = INFINITY;

		for (int j = 0; j < COLS; j++)
		{
			double		s = fabs(w[r * COLS + j]) * xnorm[j];

			if (p[r * COLS + j] == 0.0f)
			{
				zeros++;
				max_dropped = fmax(max_dropped, s);
			}
			else
				min_kept = fmin(min_kept, s);
		}
		TEST_CHECK(zeros == COLS / 2, "row %d: %d zeros", r, zeros);
		TEST_CHECK(min_kept >= max_dropped, "row %d: kept %g below dropped %g", r, min_kept, max_dropped);
	}
	return test_summary("test_prune");
}
