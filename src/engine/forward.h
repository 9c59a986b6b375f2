/*
 * forward.h
 *		One batched forward pass: any number of tokens from any number of
 *		sequences, each at its own position, through every layer at once.
 */
#ifndef LLM_FORWARD_H
#define LLM_FORWARD_H

#include "backend.h"
#include "evict.h"
#include "kv.h"
#include "model.h"

/* The tokens of one step. */
typedef struct LlmBatch
{
	int			n;				/* tokens */
	const int32_t *token;		/* (n) */
	const int32_t *pos;			/* (n) position of each token in its sequence */
	LlmKvSeq *const *seq;		/* (n) each token's block table, reserved up to pos */
	const bool *want_logits;	/* (n) whether to compute logits for the token */
} LlmBatch;

/* The input of a layer's matmuls that an observer is shown (LlmObserver). */
typedef enum LlmMatmulInput
{
	LLM_INPUT_ATTN,				/* (n, dim) into wq, wk, wv */
	LLM_INPUT_WO,				/* (n, n_heads * head_dim) into wo */
	LLM_INPUT_FFN,				/* (n, dim) into w_gate, w_up */
	LLM_INPUT_DOWN				/* (n, ffn_dim) into w_down */
} LlmMatmulInput;

/*
 * A tool that watches the forward pass without the pass knowing it (AWQ's
 * calibration, awq.c): input sees every matmul input x (n rows of width)
 * of every layer as it is computed, step_done each finished batch of n
 * tokens.  CPU backends only (the activations must be host memory).
 */
typedef struct LlmObserver
{
	void	   *ctx;
	void		(*input) (void *ctx, int layer, LlmMatmulInput which, const float *x, int n, int width);
	void		(*step_done) (void *ctx, int n);
} LlmObserver;

/*
 * Activation buffers for up to max_tokens tokens a step (llama2.c's
 * RunState).  llm_run_state_init allocates them in host memory; the first
 * llm_forward on a backend with device_memory moves them into that
 * backend's memory (its alloc op), and llm_run_state_free gives them back
 * there, so the run state must be freed before its backend.
 */
typedef struct LlmRunState
{
	int			max_tokens;
	LlmBackend *be;				/* the backend whose memory holds the buffers; NULL: malloc */
	int			dim;			/* widths the buffers were sized for */
	int			q_dim;			/* n_heads * head_dim */
	int			kv_dim;			/* n_kv_heads * head_dim */
	int			ffn_dim;
	int			n_vocab;
	int32_t    *want_rows;		/* (max_tokens) host: batch rows that want logits, this step */
	float	   *logits;			/* (logits_rows, n_vocab) device backends: logits before to_host */
	int			logits_rows;
	float	   *x;				/* (max_tokens, dim) residual stream */
	float	   *xb;				/* (max_tokens, dim) normed input of a block */
	float	   *xb2;			/* (max_tokens, dim) output of a block */
	float	   *q;				/* (max_tokens, n_heads * head_dim) */
	float	   *k;				/* (max_tokens, kv_dim) */
	float	   *v;				/* (max_tokens, kv_dim) */
	float	   *att;			/* (max_tokens, n_heads * head_dim) attention output */
	float	   *hb;				/* (max_tokens, ffn_dim) gate, then act(gate) * up */
	float	   *hb2;			/* (max_tokens, ffn_dim) up */
	float	   *xo;				/* (max_tokens, dim) rows that want logits */
	const LlmObserver *observer;	/* when set, sees every matmul input (CPU backends) */
} LlmRunState;

LlmStatus	llm_run_state_init(LlmRunState *s, const LlmConfig *c, int max_tokens, LlmError *err);
void		llm_run_state_free(LlmRunState *s);

/*
 * Run batch b through the model, storing its keys and values in kv, and
 * write the logits of the tokens that want them, in batch order, to logits
 * (n_want, n_vocab).  b->n must not exceed the run state's max_tokens.
 */
LlmStatus	llm_forward(const LlmModel *m, LlmBackend *be, LlmKvCache *kv, LlmRunState *s,
						const LlmBatch *b, float *logits, LlmError *err);

/* The chunk runners (chunks.c). */

/* Called with each chunk's tokens (as in the text) and, when asked for, its logits (chunk, n_vocab). */
typedef void (*LlmChunkFn) (void *ctx, int c, const int32_t *tokens, const float *logits);

/*
 * Run n_chunks chunks of chunk tokens each, each as a fresh sequence whose
 * first token is replaced by BOS when the model asks for BOS in front of a
 * text (llama.cpp's perplexity method), on a CPU
 * backend of n_threads with a KV cache of kv_type.  With observer, it sees
 * every matmul input of the runs; with fn, fn sees every chunk (and its
 * logits when want_logits).
 */
LlmStatus	llm_forward_chunks(const LlmModel *m, const int32_t *tokens, int n_chunks, int chunk,
							   int n_threads, LlmKvType kv_type, const LlmObserver *observer, bool want_logits,
							   LlmChunkFn fn, void *ctx, LlmError *err);

/* Called for position j of chunk c (tokens as in the text) with the logits (n_vocab) predicting token j + 1. */
typedef void (*LlmTokenFn) (void *ctx, int c, int j, const int32_t *tokens, const float *logits);

/*
 * Run n_chunks chunks as llm_forward_chunks does, but one position of up to
 * 16 chunks a step, evicting by rule after each step (rule->budget 0: keep
 * everything), so the logits of position j see only the keys the rule kept.
 * fn sees positions 0 .. chunk - 2 of every chunk.
 */
LlmStatus	llm_forward_chunks_evicting(const LlmModel *m, const int32_t *tokens, int n_chunks, int chunk,
										int n_threads, LlmKvType kv_type, const LlmEvictRule *rule,
										LlmTokenFn fn, void *ctx, LlmError *err);

#endif							/* LLM_FORWARD_H */
