/*
 * ops_ref.c
 *		The CPU backend's scalar reference kernels: plain C, the fallback on
 *		any processor and the oracle every fast kernel is tested against.
 *
 * Work is split over the thread pool: matmuls by chunks of output rows,
 * element-wise ops by ranges; attention is in cpu/attention.c.
 */
#include "cpu/activation.h"
#include "cpu/attention.h"
#include "cpu/backend_cpu.h"
#include "cpu/matmul.h"
#include "cpu/norm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MATMUL_ROWS_PER_TASK 16
#define ELEMS_PER_TASK 16384

typedef struct MatmulTask
{
	const LlmWeight *w;
	const float *x;				/* (n, cols) */
	float	   *y;				/* (n, rows) */
	int			n;
} MatmulTask;

/* One chunk of output rows for every token. */
static void
matmul_task(void *arg, int chunk)
{
	const MatmulTask *t = arg;
	const LlmWeight *w = t->w;
	int64_t		r0 = (int64_t) chunk * MATMUL_ROWS_PER_TASK;
	int64_t		r1 = r0 + MATMUL_ROWS_PER_TASK < w->rows ? r0 + MATMUL_ROWS_PER_TASK : w->rows;

	for (int64_t r = r0; r < r1; r++)
	{
		const uint8_t *row = w->data + (size_t) r * w->row_bytes;

		for (int i = 0; i < t->n; i++)
			t->y[(size_t) i * w->rows + r] = llm_dot_row_ref(w->type, row, t->x + (size_t) i * w->cols, w->cols);
	}
}

/* y (n, rows) = x (n, cols) times w transposed, w in any type. */
void
llm_cpu_matmul_ref(LlmBackend *be, const LlmWeight *w, const float *x, float *y, int n)
{
	MatmulTask	t = {w, x, y, n};

	llm_pool_run(be->pool, (int) ((w->rows + MATMUL_ROWS_PER_TASK - 1) / MATMUL_ROWS_PER_TASK), matmul_task, &t);
}

/* out (n, cols) = rows ids of w as floats, times scale. */
static void
ref_get_rows(LlmBackend *be, const LlmWeight *w, const int32_t *ids, int n, float scale, float *out)
{
	for (int i = 0; i < n; i++)
	{
		float	   *o = out + (size_t) i * w->cols;

		llm_dequant_row(w->type, w->data + (size_t) ids[i] * w->row_bytes, o, w->cols);
		if (scale != 1.0f)
			for (int64_t j = 0; j < w->cols; j++)
				o[j] *= scale;
	}
}

#define NORM_ROWS 8				/* rows whose sums of squares run side by side */
#define NORM_ROWS_PER_TASK 32

/* Row i's output from its sum of squares ss. */
static void
rmsnorm_scale_row(const LlmNormArgs *t, int i, float ss)
{
	const float *xi = t->x + (size_t) i * t->dim;
	float	   *yi = t->y + (size_t) i * t->dim;
	float		inv = 1.0f / sqrtf(ss / t->dim + t->eps);

	for (int j = 0; j < t->dim; j++)
		yi[j] = xi[j] * inv * (t->add_one ? 1.0f + t->w[j] : t->w[j]);
}

/* ss[r] += the squares of row r of x (rows, dim), in order of j; the rows side by side. */
static inline __attribute__((always_inline)) void
sum_squares(const float *x, int dim, const int rows, float *ss)
{
	for (int j = 0; j < dim; j++)
		for (int r = 0; r < rows; r++)
		{
			float		v = x[(size_t) r * dim + j];

			ss[r] += v * v;
		}
}

/*
 * Rows [r0, r1) of the rmsnorm, the reference.  Each row's sum of squares
 * adds its squares in order of j, whatever the rows around it; NORM_ROWS
 * rows' sums run side by side, independent chains where one alone would
 * wait on every add's latency.
 */
void
llm_norm_rows_ref(const LlmNormArgs *t, int r0, int r1)
{
	int			dim = t->dim;

	for (int i = r0; i < r1; i += NORM_ROWS)
	{
		float	   *xi = t->x + (size_t) i * dim;
		int			m = r1 - i < NORM_ROWS ? r1 - i : NORM_ROWS;
		float		ss[NORM_ROWS] = {0};

		if (t->r != NULL)
		{
			const float *ri = t->r + (size_t) i * dim;

			for (size_t j = 0; j < (size_t) m * dim; j++)
				xi[j] += ri[j];
		}
		if (m == NORM_ROWS)
			sum_squares(xi, dim, NORM_ROWS, ss);
		else
			for (int r = 0; r < m; r++)
				sum_squares(xi + (size_t) r * dim, dim, 1, &ss[r]);
		for (int r = 0; r < m; r++)
			rmsnorm_scale_row(t, i + r, ss[r]);
	}
}

typedef struct NormTask
{
	const LlmNormArgs *a;
	LlmNormRows rows;
} NormTask;

/* One task of the rmsnorm: NORM_ROWS_PER_TASK rows. */
static void
rmsnorm_task(void *arg, int chunk)
{
	const NormTask *t = arg;
	int			r0 = chunk * NORM_ROWS_PER_TASK;

	t->rows(t->a, r0, r0 + NORM_ROWS_PER_TASK < t->a->n ? r0 + NORM_ROWS_PER_TASK : t->a->n);
}

/* The rows of a by kernel rows: on the pool when there are many, else on the caller. */
void
llm_cpu_rmsnorm(LlmBackend *be, const LlmNormArgs *a, LlmNormRows rows)
{
	NormTask	t = {a, rows};

	if (a->n > NORM_ROWS_PER_TASK)
		llm_pool_run(be->pool, (a->n + NORM_ROWS_PER_TASK - 1) / NORM_ROWS_PER_TASK, rmsnorm_task, &t);
	else
		rows(a, 0, a->n);
}

/* y (n, dim) = x / rms(x) * w (or * (1 + w)); many rows on the pool. */
static void
ref_rmsnorm(LlmBackend *be, const float *x, const float *w, float *y, int n, int dim, float eps, bool add_one)
{
	LlmNormArgs a = {(float *) x, NULL, w, y, n, dim, eps, add_one};

	llm_cpu_rmsnorm(be, &a, llm_norm_rows_ref);
}

/* x (n, dim) += r; y = rmsnorm(x): each row's add, then its norm, in one pass (the same bits as add, then rmsnorm). */
static void
ref_add_rmsnorm(LlmBackend *be, float *x, const float *r, const float *w, float *y, int n, int dim, float eps,
				bool add_one)
{
	LlmNormArgs a = {x, r, w, y, n, dim, eps, add_one};

	llm_cpu_rmsnorm(be, &a, llm_norm_rows_ref);
}

#define ROPE_TOKENS_PER_TASK 8

typedef struct RopeTask
{
	float	   *x[2];			/* (n, heads[u] * head_dim): q, and k or NULL */
	int			heads[2];
	const int32_t *pos;			/* (n) */
	int			n;
	int			head_dim;
	int			rope_dim;
	const float *inv_freq;		/* (rope_dim / 2) */
	LlmRopeMode mode;
} RopeTask;

/* Rotate tokens [i0, i1) of each of t's tensors: each angle's cosine and sine once, for all of their heads. */
static void
rope_tokens(const RopeTask *t, int i0, int i1)
{
	int			half = t->rope_dim / 2;

	for (int i = i0; i < i1; i++)
		for (int k = 0; k < half; k++)
		{
			float		angle = (float) t->pos[i] * t->inv_freq[k];
			float		c = cosf(angle);
			float		s = sinf(angle);
			int			a = t->mode == LLM_ROPE_ADJACENT ? 2 * k : k;
			int			b = t->mode == LLM_ROPE_ADJACENT ? 2 * k + 1 : k + half;

			for (int u = 0; u < 2 && t->x[u] != NULL; u++)
				for (int h = 0; h < t->heads[u]; h++)
				{
					float	   *v = t->x[u] + ((size_t) i * t->heads[u] + h) * t->head_dim;
					float		x0 = v[a];
					float		x1 = v[b];

					v[a] = x0 * c - x1 * s;
					v[b] = x0 * s + x1 * c;
				}
		}
}

/* One task of the rope: ROPE_TOKENS_PER_TASK tokens. */
static void
rope_task(void *arg, int chunk)
{
	const RopeTask *t = arg;
	int			i0 = chunk * ROPE_TOKENS_PER_TASK;

	rope_tokens(t, i0, i0 + ROPE_TOKENS_PER_TASK < t->n ? i0 + ROPE_TOKENS_PER_TASK : t->n);
}

/* Run t: many tokens on the pool, a few on the caller. */
static void
rope_run(LlmBackend *be, const RopeTask *t)
{
	if (t->n > ROPE_TOKENS_PER_TASK)
		llm_pool_run(be->pool, (t->n + ROPE_TOKENS_PER_TASK - 1) / ROPE_TOKENS_PER_TASK, rope_task, (void *) t);
	else
		rope_tokens(t, 0, t->n);
}

/* Rotate the first rope_dim values of each head of x (n, n_heads * head_dim) by pos. */
static void
ref_rope(LlmBackend *be, float *x, const int32_t *pos, int n, int n_heads, int head_dim,
		 int rope_dim, const float *inv_freq, LlmRopeMode mode)
{
	RopeTask	t = {{x, NULL}, {n_heads, 0}, pos, n, head_dim, rope_dim, inv_freq, mode};

	rope_run(be, &t);
}

/* ref_rope of q and of k at the same positions in one pass. */
static void
ref_rope_qk(LlmBackend *be, float *q, int n_heads, float *k, int n_kv_heads, const int32_t *pos, int n,
			int head_dim, int rope_dim, const float *inv_freq, LlmRopeMode mode)
{
	RopeTask	t = {{q, k}, {n_heads, n_kv_heads}, pos, n, head_dim, rope_dim, inv_freq, mode};

	rope_run(be, &t);
}

/* Fused attention over the paged cache of layer, with the scalar kernels. */
static void
ref_attention(LlmBackend *be, const LlmKvCache *kv, int layer, const LlmAttnArgs *a)
{
	llm_cpu_attention(be, kv, layer, a, &llm_attn_kernels_ref);
}

/* GELU, tanh approximation, as in Gemma. */
static inline float
gelu_tanh(float x)
{
	return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

/* out[i] = act(gate[i]) * up[i] for i < n, by libm. */
void
llm_glu_range_ref(const float *gate, const float *up, float *out, int64_t n, LlmActivation act)
{
	for (int64_t i = 0; i < n; i++)
	{
		float		g = gate[i];
		float		a = act == LLM_ACT_SILU ? g / (1.0f + expf(-g)) : gelu_tanh(g);

		out[i] = a * up[i];
	}
}

typedef struct GluTask
{
	const float *gate;
	const float *up;
	float	   *out;
	int64_t		n;
	LlmActivation act;
	LlmGluRange range;
} GluTask;

/* One range of act(gate) * up. */
static void
glu_task(void *arg, int chunk)
{
	const GluTask *t = arg;
	int64_t		i0 = (int64_t) chunk * ELEMS_PER_TASK;
	int64_t		i1 = i0 + ELEMS_PER_TASK < t->n ? i0 + ELEMS_PER_TASK : t->n;

	t->range(t->gate + i0, t->up + i0, t->out + i0, i1 - i0, t->act);
}

/* out (n) = act(gate) * up by range, ELEMS_PER_TASK elements a task. */
void
llm_cpu_glu(LlmBackend *be, const float *gate, const float *up, float *out, int64_t n, LlmActivation act,
			LlmGluRange range)
{
	GluTask		t = {gate, up, out, n, act, range};

	llm_pool_run(be->pool, (int) ((n + ELEMS_PER_TASK - 1) / ELEMS_PER_TASK), glu_task, &t);
}

/* out (n) = act(gate) * up, the reference's. */
static void
ref_glu(LlmBackend *be, const float *gate, const float *up, float *out, int64_t n, LlmActivation act)
{
	llm_cpu_glu(be, gate, up, out, n, act, llm_glu_range_ref);
}

/* x (n) += y (n). */
static void
ref_add(LlmBackend *be, float *x, const float *y, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		x[i] += y[i];
}

/* x (n, width) += b (width) on every row: one add per element, so each token's bits are its own. */
static void
ref_add_bias(LlmBackend *be, float *x, const float *b, int n, int width)
{
	for (int i = 0; i < n; i++)
	{
		float	   *xi = x + (size_t) i * width;

		for (int j = 0; j < width; j++)
			xi[j] += b[j];
	}
}

const LlmBackendOps llm_cpu_ref_ops = {
	.name = "cpu-ref",
	.matmul = llm_cpu_matmul_ref,
	.get_rows = ref_get_rows,
	.rmsnorm = ref_rmsnorm,
	.rope = ref_rope,
	.rope_qk = ref_rope_qk,
	.add_rmsnorm = ref_add_rmsnorm,
	.kv_store = llm_cpu_kv_store,
	.kv_move = llm_cpu_kv_move,
	.attention = ref_attention,
	.glu = ref_glu,
	.add = ref_add,
	.add_bias = ref_add_bias,
	.destroy = llm_cpu_destroy,
	.alloc = llm_cpu_alloc,
	.free = llm_cpu_free,
	.to_host = llm_cpu_copy,
	.to_device = llm_cpu_copy,
	.gather_rows = llm_cpu_gather_rows,
	.softcap = llm_cpu_softcap,
	.argmax = llm_cpu_argmax,
	.softmax = llm_cpu_softmax,
	.sync = llm_cpu_sync,
};
