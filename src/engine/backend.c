/*
 * backend.c
 *		Choosing the backend for a device: the CPU's (cpu/), or CUDA's
 *		(cuda/) in a program linked with it.
 *
 * The CUDA backend's two entry points are weak references here: a program
 * that links libllmcuda.a (whole) defines them, one that does not sees
 * NULL, so libllmengine.a never depends on the CUDA library and each is
 * linked once.
 *
 * CUDA is initialised only here, when a caller asks for it: never at load
 * time, so a process that forks (the postmaster) never holds a context.
 * LLM_DEVICE_AUTO takes CUDA when the build has it and a device is
 * visible, else quietly the CPU; LLM_DEVICE_CUDA without a device is an
 * error.
 */
#include "backend.h"

#pragma weak llm_cuda_device_count
#pragma weak llm_backend_cuda_new

/* Create the backend for device. */
LlmStatus
llm_backend_new(LlmDevice device, int n_threads, LlmBackend **out, LlmError *err)
{
	bool		have_cuda = llm_backend_cuda_new != NULL && llm_cuda_device_count != NULL;

	if (have_cuda && (device == LLM_DEVICE_CUDA || (device == LLM_DEVICE_AUTO && llm_cuda_device_count() > 0)))
		return llm_backend_cuda_new(out, err);
	if (device == LLM_DEVICE_CUDA)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED,
							 "this build of llm has no CUDA backend (build it where nvcc is found, or with WITH_CUDA=1)");
	return llm_backend_cpu_new(n_threads, out, err);
}

/* Free any backend through its destroy op; NULL is allowed. */
void
llm_backend_free(LlmBackend *be)
{
	if (be != NULL)
		be->ops->destroy(be);
}
