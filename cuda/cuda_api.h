/*
 * cuda_api.h
 *		What the CUDA backend offers: its module's entry table, and beyond
 *		the op table, what its test and benchmark programs use
 *		(cuda/test_cuda.c, cuda/bench_cuda.c).
 */
#ifndef LLM_CUDA_API_H
#define LLM_CUDA_API_H

#include <stdint.h>

#include "backend.h"

/* The backend's entry table: llm_cuda.so's one symbol, and what llm_cuda_module_use() takes (module.c). */
extern const LlmCudaModule llm_cuda_module_entry;

/* The number of CUDA devices this process sees; 0 when none or no driver, and then why (why may be NULL). */
int			llm_cuda_device_count(char *why, size_t why_len);

/* Create the CUDA backend on device 0 with options opt. */
LlmStatus	llm_backend_cuda_new(const LlmBackendOptions *opt, LlmBackend **out, LlmError *err);

/* Whether be is the CUDA backend. */
bool		llm_cuda_is_backend(const LlmBackend *be);

/* The device's name and multiprocessor count. */
const char *llm_cuda_device_name(const LlmBackend *be);

/*
 * Give weight w (its shape and type; w->data is only the key, never read)
 * pseudo-random device contents of deviation std from seed, made on the
 * device: BF16, F16, F32, Q8_0 and Q4_0.  prepare then skips it.
 */
LlmStatus	llm_cuda_weight_random(LlmBackend *be, const LlmWeight *w, uint64_t seed, float std, LlmError *err);

/* Device bytes held for weights. */
size_t		llm_cuda_weight_bytes(const LlmBackend *be);

/* Copy the device KV storage of kv's layer rows into host buffers shaped like a host pool's k / v / scales (tests). */
LlmStatus	llm_cuda_kv_download(LlmBackend *be, const LlmKvCache *kv, void *k, void *v, float *k_scale,
								 float *v_scale, LlmError *err);

#endif							/* LLM_CUDA_API_H */
