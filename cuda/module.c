/*
 * module.c
 *		The CUDA backend's entry table: the one symbol of llm_cuda.so, which
 *		the engine loads at run time (src/engine/cuda_module.c), and what
 *		programs linked with the backend hand to llm_cuda_module_use().
 */
#include "cuda_api.h"

const LlmCudaModule llm_cuda_module_entry = {
	.abi = LLM_CUDA_MODULE_ABI,
	.sizes = LLM_CUDA_MODULE_SIZES,
	.device_count = llm_cuda_device_count,
	.backend_new = llm_backend_cuda_new,
	.device_name = llm_cuda_device_name,
};
