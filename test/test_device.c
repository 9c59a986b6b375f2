/*
 * test_device.c
 *		Choosing the device: llm.device = auto computes on the CPU and says
 *		why when the CUDA backend module is missing or is not one, and cuda
 *		fails with that reason; the CPU never needs the module.
 */
#include "test.h"

#include "backend.h"

/* A backend for device with the CUDA module at path; its status, and the backend in *be. */
static LlmStatus
new_backend(LlmDevice device, const char *path, LlmBackend **be, LlmError *err)
{
	LlmBackendOptions opt;

	llm_backend_options_default(&opt);
	opt.cuda_module = path;
	*be = NULL;
	return llm_backend_new(device, &opt, be, err);
}

/* auto with the module at path: the CPU, with a note that contains why. */
static void
check_auto_falls_back(const char *path, const char *why)
{
	LlmBackend *be;
	LlmError	err;

	TEST_CHECK(new_backend(LLM_DEVICE_AUTO, path, &be, &err) == LLM_OK, "auto with %s: %s", path ? path : "no module", err.msg);
	if (be == NULL)
		return;
	TEST_CHECK(strncmp(be->device, "cpu (", 5) == 0, "auto with %s computes on %s", path ? path : "no module", be->device);
	TEST_CHECK(strstr(be->device_note, why) != NULL, "auto with %s: the note \"%s\" says \"%s\"",
			   path ? path : "no module", be->device_note, why);
	llm_backend_free(be);
}

/* cuda with the module at path: refused, saying why. */
static void
check_cuda_refused(const char *path, const char *why)
{
	LlmBackend *be;
	LlmError	err;
	LlmStatus	st = new_backend(LLM_DEVICE_CUDA, path, &be, &err);

	TEST_CHECK(st == LLM_ERR_UNSUPPORTED && be == NULL, "cuda with %s: status %d", path ? path : "no module", (int) st);
	TEST_CHECK(strstr(err.msg, why) != NULL, "cuda with %s: the error \"%s\" says \"%s\"",
			   path ? path : "no module", err.msg, why);
}

int
main(void)
{
	LlmBackend *be;
	LlmError	err;

	/* the CPU: no module asked for, nothing to explain */
	TEST_CHECK(new_backend(LLM_DEVICE_CPU, "/nonexistent/llm_cuda.so", &be, &err) == LLM_OK, "cpu: %s", err.msg);
	if (be != NULL)
	{
		TEST_CHECK(strncmp(be->device, "cpu (", 5) == 0, "cpu computes on %s", be->device);
		TEST_CHECK(be->device_note[0] == '\0', "cpu has a note: %s", be->device_note);
		llm_backend_free(be);
	}

	/* no module given, a missing file, a library that is not the module */
	check_auto_falls_back(NULL, "no CUDA backend module was given");
	check_auto_falls_back("/nonexistent/llm_cuda.so", "could not be loaded: /nonexistent/llm_cuda.so");
	check_auto_falls_back("libm.so.6", "is not the CUDA backend module of llm");
	check_cuda_refused(NULL, "no CUDA backend module was given");
	check_cuda_refused("/nonexistent/llm_cuda.so", "could not be loaded");
	check_cuda_refused("libm.so.6", "no llm_cuda_module_entry");

	/* the same path again after a failure: still refused, never half loaded */
	check_auto_falls_back("/nonexistent/llm_cuda.so", "could not be loaded");

	return test_summary("device");
}
