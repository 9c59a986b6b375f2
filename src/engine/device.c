/*
 * device.c
 *		Choosing the backend for a device: the CPU's (cpu/), or CUDA's
 *		(cuda/, a module loaded at run time: cuda_module.c).  The two are
 *		peers; this file is the one place that knows both.
 *
 * CUDA is initialised only here, when a caller asks for it: never at load
 * time, so a process that forks (the postmaster) never holds a context.
 * LLM_DEVICE_AUTO takes CUDA when its module loads and sees a device, else
 * the CPU, noting why in the backend's device_note; LLM_DEVICE_CUDA
 * without them is an error that says why.
 */
#include "backend.h"
#include "cpu/backend_cpu.h"

#include <stdio.h>

/* The CUDA backend for opt, when its module loads and sees a device; else NULL and why. */
static const LlmCudaModule *
cuda_with_device(const LlmBackendOptions *opt, char *why, size_t why_len)
{
	const LlmCudaModule *cuda = llm_cuda_module_get(opt->cuda_module, why, why_len);

	if (cuda != NULL && cuda->device_count(why, why_len) <= 0)
		return NULL;
	return cuda;
}

/* Create the backend for device with options opt (NULL: the defaults). */
LlmStatus
llm_backend_new(LlmDevice device, const LlmBackendOptions *opt, LlmBackend **out, LlmError *err)
{
	LlmBackendOptions def;
	const LlmCudaModule *cuda = NULL;
	char		why[256] = "";
	LlmStatus	st;

	if (opt == NULL)
	{
		llm_backend_options_default(&def);
		opt = &def;
	}
	if (device != LLM_DEVICE_CPU)
		cuda = cuda_with_device(opt, why, sizeof(why));
	if (cuda != NULL)
	{
		if ((st = cuda->backend_new(opt, out, err)) == LLM_OK)
			snprintf((*out)->device, sizeof((*out)->device), "cuda: %s", cuda->device_name(*out));
		return st;
	}
	if (device == LLM_DEVICE_CUDA)
		return llm_error_set(err, LLM_ERR_UNSUPPORTED, "%s", why);
	if ((st = llm_backend_cpu_new(opt->n_threads, out, err)) != LLM_OK)
		return st;
	(*out)->deterministic = opt->deterministic;
	snprintf((*out)->device, sizeof((*out)->device), "cpu (%s)", llm_cpu_isa_name(llm_cpu_isa()));
	if (device == LLM_DEVICE_AUTO)
		snprintf((*out)->device_note, sizeof((*out)->device_note), "%s", why);
	return LLM_OK;
}
