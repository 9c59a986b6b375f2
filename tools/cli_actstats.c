/*
 * cli_actstats.c
 *		llm-cli actstats -m FLOAT_MODEL.gguf --calib TEXT [--calib-tokens N]
 *		[--alpha 0.5] [--threshold 6] [--threads N]: the activation
 *		statistics behind SmoothQuant and LLM.int8(), measured per layer and
 *		matmul input on calibration text.
 *
 * Per input: the outlier ratio (max over channels of max|x_j| over their
 * median), the channels whose max|x_j| exceeds the threshold (LLM.int8()'s
 * outliers, 6.0 in its paper), and the relative output error
 * ‖W x − W x̂‖² / ‖W x‖² (weights in float, summed over the first
 * LLM_CALIB_SAMPLES calibration tokens) of four int8 activation
 * quantizations x̂:
 *   token   one scale per token (amax / 127), what W8A8 kernels do;
 *   block   one scale per 32 values, as this engine's Q8_0 kernels do;
 *   smooth  per token after SmoothQuant's scales (smooth.h): s ⊙ Q(x / s);
 *   mixed   per token with the outlier channels kept in float (LLM.int8()).
 * A simulation at the matmul, not a perplexity: the engine has no per-token
 * activation path to run these through.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calib.h"
#include "cli.h"
#include "cli_common.h"
#include "cli_options.h"
#include "smooth.h"

#define N_METHODS 4

/* qsort comparator of floats, ascending. */
static int
cmp_float(const void *a, const void *b)
{
	float		x = *(const float *) a,
				y = *(const float *) b;

	return x < y ? -1 : x > y;
}

/* Per-token int8 of x (n) into xq, the channels where keep[j] held in float (keep NULL: none). */
static void
quant_token(const float *x, int64_t n, const bool *keep, float *xq)
{
	float		amax = 0.0f,
				d;

	for (int64_t j = 0; j < n; j++)
		if (keep == NULL || !keep[j])
			amax = fmaxf(amax, fabsf(x[j]));
	d = amax / 127.0f;
	for (int64_t j = 0; j < n; j++)
		xq[j] = keep != NULL && keep[j] ? x[j] : d > 0.0f ? roundf(x[j] / d) * d : 0.0f;
}

/* The four x̂ of the sample x (n) into xq (N_METHODS, n); tmp holds n floats and a Q8_0 row. */
static void
quant_methods(const float *x, int64_t n, const float *s, const bool *outlier, float *xq, float *tmp, void *q8)
{
	quant_token(x, n, NULL, xq);
	llm_quantize_row(LLM_TYPE_Q8_0, x, q8, n);
	llm_dequant_row(LLM_TYPE_Q8_0, q8, xq + n, n);
	for (int64_t j = 0; j < n; j++)
		tmp[j] = x[j] / s[j];
	quant_token(tmp, n, NULL, xq + 2 * n);
	for (int64_t j = 0; j < n; j++)
		xq[2 * n + j] *= s[j];
	quant_token(x, n, outlier, xq + 3 * n);
}

/* Statistics of input which of layer l of m (see the file comment), printed as a table row. */
static bool
input_stats(LlmModel *m, const LlmCalib *c, int l, LlmMatmulInput which, double alpha, double thr,
			double *err_sum)
{
	static const char *names[] = {"attn (q, k, v)", "wo", "ffn (gate, up)", "down"};
	int64_t		n = c->width[which];
	int			n_x = c->n_tokens < LLM_CALIB_SAMPLES ? (int) c->n_tokens : LLM_CALIB_SAMPLES;
	const float *xmax = llm_calib_max_abs(c, l, which);
	const float *xs = llm_calib_samples(c, l, which);
	float	   *sorted = malloc((size_t) n * sizeof(float));
	float	   *wmax = calloc((size_t) n, sizeof(float));
	float	   *s = malloc((size_t) n * sizeof(float));
	bool	   *outlier = malloc((size_t) n * sizeof(bool));
	float	   *xq = malloc((size_t) (N_METHODS * n) * sizeof(float));
	float	   *tmp = malloc((size_t) n * sizeof(float));
	void	   *q8 = malloc(llm_type_row_size(LLM_TYPE_Q8_0, n));
	float	   *mats[LLM_LAYER_MATRICES] = {0};
	double		num[N_METHODS] = {0},
				den = 0.0;
	int			n_out = 0;
	bool		ok = sorted && wmax && s && outlier && xq && tmp && q8;

	for (int k = 0; ok && k < LLM_LAYER_MATRICES; k++)
		if (llm_calib_input_of(k) == which)
		{
			const LlmWeight *w = llm_layer_matrix(&m->weights.layers[l], k);

			ok = (mats[k] = llm_weight_to_float(w)) != NULL;
			if (ok)
				llm_col_abs_max(mats[k], w->rows, n, wmax);
		}
	if (ok)
	{
		memcpy(sorted, xmax, (size_t) n * sizeof(float));
		qsort(sorted, (size_t) n, sizeof(float), cmp_float);
		for (int64_t j = 0; j < n; j++)
			n_out += (outlier[j] = xmax[j] > thr);
		llm_smooth_scales(xmax, wmax, n, alpha, s);
		for (int t = 0; t < n_x; t++)
		{
			const float *x = xs + (size_t) t * n;

			quant_methods(x, n, s, outlier, xq, tmp, q8);
			for (int k = 0; k < LLM_LAYER_MATRICES; k++)
			{
				const LlmWeight *w = llm_layer_matrix(&m->weights.layers[l], k);

				for (int64_t r = 0; mats[k] != NULL && r < w->rows; r++)
				{
					const float *wr = mats[k] + r * n;
					double		y = 0.0,
								e[N_METHODS] = {0};

					for (int64_t j = 0; j < n; j++)
					{
						y += (double) wr[j] * x[j];
						for (int q = 0; q < N_METHODS; q++)
							e[q] += (double) wr[j] * (x[j] - xq[q * n + j]);
					}
					den += y * y;
					for (int q = 0; q < N_METHODS; q++)
						num[q] += e[q] * e[q];
				}
			}
		}
		printf("| %d | %s | %.1f | %.2f | %d |", l, names[which], sorted[n - 1] / fmaxf(sorted[n / 2], 1e-30f),
			   sorted[n - 1], n_out);
		for (int q = 0; q < N_METHODS; q++)
		{
			printf(" %.2e |", num[q] / fmax(den, 1e-300));
			err_sum[q] += num[q] / fmax(den, 1e-300);
		}
		printf("\n");
	}
	for (int k = 0; k < LLM_LAYER_MATRICES; k++)
		free(mats[k]);
	free(sorted);
	free(wmax);
	free(s);
	free(outlier);
	free(xq);
	free(tmp);
	free(q8);
	return ok;
}

/* llm-cli actstats: the table of input_stats rows, then the mean relative errors. */
int
cli_actstats(int argc, char **argv)
{
	const char *model = NULL,
			   *calib = NULL;
	long		threads = 1,
				max_tokens = 0;
	double		alpha = 0.5,
				thr = 6.0,
				err_sum[N_METHODS] = {0};
	LlmModel   *m = NULL;
	LlmCalib	c;
	LlmError	err;
	char	   *text;
	size_t		len = 0;
	int			rows = 0;
	bool		ok = true;

	for (int i = 1; i + 1 < argc; i += 2)
	{
		if (strcmp(argv[i], "-m") == 0)
			model = argv[i + 1];
		else if (strcmp(argv[i], "--calib") == 0)
			calib = argv[i + 1];
		else if (strcmp(argv[i], "--threads") == 0)
			ok = cli_parse_int(argv[i], argv[i + 1], 1, 1024, &threads);
		else if (strcmp(argv[i], "--calib-tokens") == 0)
			ok = cli_parse_int(argv[i], argv[i + 1], LLM_CALIB_CHUNK, LLM_CALIB_MAX_TOKENS, &max_tokens);
		else if (strcmp(argv[i], "--alpha") == 0)
			ok = cli_parse_float(argv[i], argv[i + 1], &alpha);
		else if (strcmp(argv[i], "--threshold") == 0)
			ok = cli_parse_float(argv[i], argv[i + 1], &thr);
		else
		{
			fprintf(stderr, "llm-cli actstats: unknown option \"%s\"\n", argv[i]);
			return 2;
		}
		if (!ok)
			return 2;
	}
	if (model == NULL || calib == NULL || argc % 2 == 0)
	{
		fprintf(stderr, "usage: llm-cli actstats -m FLOAT_MODEL.gguf --calib TEXT [--calib-tokens N] [--alpha 0.5] "
				"[--threshold 6] [--threads N]\n");
		return 2;
	}
	if ((text = cli_read_calib(calib, &len)) == NULL)
		return 1;
	memset(&c, 0, sizeof(c));
	if (llm_model_load_quantized(model, LLM_QUANT_NONE, &m, &err) != LLM_OK ||
		llm_calib_init(&c, &m->config, false, &err) != LLM_OK ||
		llm_calib_text(m, text, len, (int) max_tokens, (int) threads, "actstats", &c, &err) != LLM_OK)
	{
		fprintf(stderr, "llm-cli actstats: %s\n", err.msg);
		ok = false;
	}
	free(text);
	if (ok)
	{
		printf("| layer | input | max/median of max|x_j| | max|x| | channels > %.1f | err token | err block32 | "
			   "err smooth (α %.2f) | err mixed |\n|---|---|---|---|---|---|---|---|---|\n", thr, alpha);
		for (int l = 0; ok && l < m->config.n_layers; l++)
			for (int which = 0; ok && which < 4; which++, rows++)
				ok = input_stats(m, &c, l, which, alpha, thr, err_sum);
		if (ok)
			printf("\nmean relative output error over %d inputs: token %.3e, block32 %.3e, smooth %.3e, mixed %.3e\n",
				   rows, err_sum[0] / rows, err_sum[1] / rows, err_sum[2] / rows, err_sum[3] / rows);
		else
			fprintf(stderr, "llm-cli actstats: out of memory\n");
	}
	llm_calib_free(&c);
	llm_model_free(m);
	return ok ? 0 : 1;
}
