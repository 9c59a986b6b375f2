/*
 * backend.c
 *		Choosing the backend for a device: the CPU's (cpu/), or CUDA's
 *		(cuda/) in a build made with it.
 */
#include "backend.h"

/* Create the backend for device. */
LlmStatus
llm_backend_new(LlmDevice device, int n_threads, LlmBackend **out, LlmError *err)
{
	if (device == LLM_DEVICE_CUDA)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "this build of llm has no CUDA backend (build it where nvcc is found, or with WITH_CUDA=1)");
	return llm_backend_cpu_new(n_threads, out, err);
}
