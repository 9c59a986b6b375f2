/*
 * kernels.h
 *		Private: the CUDA backend's kernel launchers, callable from C.
 *
 * One launcher per kernel family, defined in the .cu file of its family
 * (gemv.cu, convert.cu, elementwise.cu, kv.cu, attention.cu, sampling.cu).
 * Each enqueues its kernels on the given stream and returns the launch's
 * error (cudaGetLastError), or cudaErrorInvalidValue for a shape it cannot
 * handle.  Every pointer argument except the struct arguments' scalars is
 * device memory.
 */
#ifndef LLM_CUDA_KERNELS_H
#define LLM_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C"
{
#endif

/* Launch kernels as programmatic dependents of the one before (sm_90 only; set by the backend). */
void		llm_cuda_set_pdl(bool on);
bool		llm_cuda_pdl_on(void);

/* Launch two kernels as programmatic dependents on st and wait: the error, if the device refuses. */
cudaError_t llm_cuda_pdl_probe(cudaStream_t st);

/* How a weight matrix is laid out in device memory. */
typedef enum CudaLayout
{
	CUDA_LAYOUT_F32,			/* rows of float */
	CUDA_LAYOUT_F16,			/* rows of IEEE half */
	CUDA_LAYOUT_BF16,			/* rows of bfloat16 */
	CUDA_LAYOUT_Q8_0R,			/* Q8_0 split: int8 quants (rows, cols), then fp16 scales (rows, cols / 32) */
	CUDA_LAYOUT_Q4_0R,			/* Q4_0 split: nibbles (rows, cols / 2) as in the block, then fp16 scales */
	CUDA_LAYOUT_GGML			/* ggml blocks as stored (any other quantized type, ggml_type) */
} CudaLayout;

/* A weight matrix on the device: rows of cols values. */
typedef struct CudaMat
{
	int			layout;			/* CudaLayout */
	int			ggml_type;		/* LlmType of CUDA_LAYOUT_GGML blocks */
	int64_t		rows;
	int64_t		cols;
	const uint8_t *data;		/* (rows, row_bytes): values, blocks, or the split layouts' quants */
	size_t		row_bytes;
	const uint16_t *scales;		/* (rows, cols / 32) fp16, split layouts only */
} CudaMat;

/* Tokens a GEMV kernel takes at once (weights read once for all of them); more go to cuBLAS. */
#define CUDA_GEMV_MAX_TOKENS 8

/* Matrices one GEMV launch takes at most (Q, K and V). */
#define CUDA_GEMV_MAX_MATS 3

/*
 * One GEMV launch: y[m] (n, w[m].rows) = x (n, cols) w[m]^T for count
 * matrices of one layout and width sharing x; or, with glu >= 0, a gate
 * and an up matrix of equal shape whose results combine at once:
 * y[0] = act(gate) * up (act: glu 0 SiLU, 1 GELU), y[1] = up.
 */
typedef struct CudaGemvJob
{
	int			count;
	int			glu;			/* -1: none */
	CudaMat		w[CUDA_GEMV_MAX_MATS];
	float	   *y[CUDA_GEMV_MAX_MATS];
	int64_t		unit0[CUDA_GEMV_MAX_MATS + 1];	/* set by llm_cuda_gemv: first warp of each matrix */
} CudaGemvJob;

/* Whether w has a GEMV kernel (every layout; F32/F16/BF16 any width, quantized whole blocks). */
bool		llm_cuda_gemv_supported(const CudaMat *w);

/* Whether a and b can share one GEMV launch (same layout, block type and width). */
bool		llm_cuda_gemv_compatible(const CudaMat *a, const CudaMat *b);

/* Bytes of the int8 activations llm_cuda_quantize_act writes for n tokens of cols values. */
size_t		llm_cuda_act_q8_bytes(int n, int64_t cols);

/* Quantize x (n, cols) to int8 blocks of 32 for the split layouts' GEMV: quants, scales, scaled sums. */
cudaError_t llm_cuda_quantize_act(const float *x, int n, int64_t cols, void *xq, cudaStream_t st);

/* Run job for n <= CUDA_GEMV_MAX_TOKENS tokens of x; xq from llm_cuda_quantize_act for split layouts. */
cudaError_t llm_cuda_gemv(const CudaGemvJob *job, const float *x, const void *xq, int n, cudaStream_t st);

/* out (nrows, cols) bfloat16 = rows [row0, row0 + nrows) of w decoded. */
cudaError_t llm_cuda_dequant_bf16(const CudaMat *w, int64_t row0, int64_t nrows, uint16_t *out, cudaStream_t st);

/* out (nrows, cols) float = rows [row0, row0 + nrows) of w decoded (GPUs without BF16 GEMMs). */
cudaError_t llm_cuda_dequant_f32(const CudaMat *w, int64_t row0, int64_t nrows, float *out, cudaStream_t st);

/* out (n, cols) = rows ids[i] of w decoded, times scale. */
cudaError_t llm_cuda_get_rows(const CudaMat *w, const int32_t *ids, int n, float scale, float *out,
							  cudaStream_t st);

/* out (n) bfloat16 = x (n) rounded to nearest even. */
cudaError_t llm_cuda_to_bf16(const float *x, int64_t n, uint16_t *out, cudaStream_t st);

/* Split rows of ggml Q8_0 or Q4_0 blocks (src, rows x cols) into w's layout at w->data / w->scales, from row row0. */
cudaError_t llm_cuda_split_blocks(const CudaMat *w, const uint8_t *src, int64_t row0, int64_t nrows,
								  cudaStream_t st);

/* Fill w (F16, BF16, F32 or a split layout) with pseudo-random values of about std, from seed. */
cudaError_t llm_cuda_fill_random(const CudaMat *w, uint64_t seed, float std, cudaStream_t st);

/* y (n, dim) = x / rms(x) * w (or * (1 + w)). */
cudaError_t llm_cuda_rmsnorm(const float *x, const float *w, float *y, int n, int dim, float eps, bool add_one,
							 cudaStream_t st);

/*
 * Rotate the first rope_dim values of each head of x (n, n_heads * head_dim)
 * by pos[i], and of x2 (n, n_heads2 * head_dim) alike when n_heads2 > 0 (Q
 * and K in one launch).
 */
cudaError_t llm_cuda_rope(float *x, int n_heads, float *x2, int n_heads2, const int32_t *pos, int n, int head_dim,
						  int rope_dim, const float *inv_freq, bool neox, cudaStream_t st);

/* x (n, dim) += r; y (n, dim) = rmsnorm of the sum (the residual add and the next block's norm in one pass). */
cudaError_t llm_cuda_add_rmsnorm(float *x, const float *r, const float *w, float *y, int n, int dim, float eps,
								 bool add_one, cudaStream_t st);

/* out (n) = act(gate) * up; act 0 = SiLU, 1 = GELU (tanh). */
cudaError_t llm_cuda_glu(const float *gate, const float *up, float *out, int64_t n, int act, cudaStream_t st);

/* x (n) += y (n). */
cudaError_t llm_cuda_add(float *x, const float *y, int64_t n, cudaStream_t st);

/* x (n, width) += b (width) on every row. */
cudaError_t llm_cuda_add_bias(float *x, const float *b, int n, int width, cudaStream_t st);

/* x (n) = cap * tanh(x / cap). */
cudaError_t llm_cuda_softcap(float *x, int64_t n, float cap, cudaStream_t st);

/* out (n, width) = rows idx[i] of x. */
cudaError_t llm_cuda_gather_rows(const float *x, const int32_t *idx, int n, int width, float *out,
								 cudaStream_t st);

/* out (n) = argmax of each row of x (n, width): lowest index on ties, NaN as -inf. */
cudaError_t llm_cuda_argmax(const float *x, int n, int width, int32_t *out, cudaStream_t st);

/* x (n, width) = softmax of each row, in place; NaN and -inf get 0. */
cudaError_t llm_cuda_softmax(float *x, int n, int width, cudaStream_t st);

/* ---- the paged KV cache ---- */

/* The pool's storage on the device: the layout of kv.h. */
typedef struct CudaKv
{
	int			type;			/* LlmKvType: 0 f32, 1 f16, 2 int8 */
	int			n_kv_heads;
	int			head_dim;
	int			kv_dim;
	int			block_size;
	int			n_blocks;
	int			elem_size;
	uint8_t    *k;				/* (n_layers, n_blocks, block_size, kv_dim) */
	uint8_t    *v;
	float	   *k_scale;		/* (n_layers, n_blocks, block_size, n_kv_heads), int8 only */
	float	   *v_scale;
} CudaKv;

/*
 * Per-token facts of a step, uploaded once per step: int32 fields of
 * CUDA_TOK_FIELDS per token, and the sequences' block tables.
 */
#define CUDA_TOK_FIELDS 4
#define CUDA_TOK_POS 0			/* position */
#define CUDA_TOK_SLOT 1			/* its slot: pos - n_evicted (also the last slot it sees) */
#define CUDA_TOK_TABLE 2		/* offset of its sequence's block table in the blocks array */
#define CUDA_TOK_EVICTED 3		/* n_evicted of its sequence */

/* Store k and v (n, kv_dim) of layer in each token's slot (converted to the cache's type). */
cudaError_t llm_cuda_kv_store(const CudaKv *kv, int layer, const int32_t *tok, const int32_t *blocks,
							  const float *k, const float *v, int n, cudaStream_t st);

/* Apply n moves, int32 (layer, head, from_row, to_row) each, rows as llm_kv_row counts them. */
cudaError_t llm_cuda_kv_move(const CudaKv *kv, const int32_t *moves, int n, cudaStream_t st);

/* Everything one layer's attention needs. */
typedef struct CudaAttn
{
	CudaKv		kv;
	int			layer;
	int			n;				/* query tokens */
	const float *q;				/* (n, n_heads * head_dim) */
	float	   *out;			/* (n, n_heads * head_dim) */
	int			n_heads;
	int			n_kv_heads;
	int			head_dim;
	float		scale;
	float		softcap;
	int			window;
	const int32_t *tok;			/* (n, CUDA_TOK_FIELDS) */
	const int32_t *blocks;
	const int32_t *spos_off;	/* (n) offset of the token's slot_pos rows in spos, -1: no window mask; NULL: none */
	const int32_t *spos;		/* (slots, n_kv_heads) positions of the slots of this layer */
	/* the one-query-at-a-time kernel (split-K flash decoding) */
	int			n_dec;
	const int32_t *dec;			/* (n_dec) token indices */
	int			n_splits;		/* key ranges per (token, KV head) */
	float	   *part;			/* (n_dec, n_heads, n_splits, head_dim + 2) partial results when n_splits > 1 */
	/* the tiled kernel for runs of one sequence's tokens (prefill) */
	int			n_tiles;
	const int32_t *tiles;		/* (n_tiles, 2) first token, count */
	/* H2O scores */
	float	   *ml;				/* (n, n_heads, 2) final softmax max and sum, NULL: no scores */
	int			n_runs;
	const int32_t *runs;		/* (n_runs, 4) first token, count, offset of its sums in delta, width (slots) */
	int			max_width;		/* the widest run's slots */
	float	   *delta;			/* per run (n_kv_heads, width): probability summed over its tokens and heads */
} CudaAttn;

/* Tokens per tile of the tiled kernel for a group of query heads per KV head (0: it cannot take the group). */
int			llm_cuda_attn_tile_tokens(int group, int head_dim);

/* Whether the attention kernels take this head width and group. */
bool		llm_cuda_attn_supported(int head_dim, int group);

/* Set the kernels' shared-memory limits (once per device); the first error. */
cudaError_t llm_cuda_attn_init(void);

/* Attention of one layer as a describes (both kernels, the split combine, the H2O sums). */
cudaError_t llm_cuda_attention(const CudaAttn *a, cudaStream_t st);

#ifdef __cplusplus
}
#endif

#endif							/* LLM_CUDA_KERNELS_H */
