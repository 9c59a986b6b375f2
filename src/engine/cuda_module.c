/*
 * cuda_module.c
 *		The CUDA backend as a module loaded at run time (llm_cuda.so), so
 *		that nothing linking the engine depends on CUDA's libraries: a
 *		server whose machine lacks cuBLAS or a driver still loads llm.so
 *		and computes on the CPU.
 *
 * A program names the module's path (LlmBackendOptions.cuda_module).  The
 * first backend that wants CUDA loads it with dlopen() and keeps it for
 * the life of the process: CUDA's libraries are never unloaded.  The module
 * gives one symbol, llm_cuda_module_entry (cuda/module.c), a table of its
 * entry points and the sizes of the structures it shares with the engine;
 * a module of another build is refused rather than misread.  Programs
 * linked with the CUDA objects themselves hand their table over with
 * llm_cuda_module_use() instead.
 *
 * Nothing here touches CUDA; a module that loads may still find no driver
 * or no device, which llm_backend_new() asks it.  The lock makes loading
 * safe from any thread; the worker creates its backends from one.
 */
#include "backend.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static pthread_mutex_t module_lock = PTHREAD_MUTEX_INITIALIZER;
static const LlmCudaModule *module_used;	/* llm_cuda_module_use() */
static const LlmCudaModule *module_loaded;	/* from module_path */
static char module_path[4096];

/* Whether m was built from the same structures as this engine; else why not. */
static bool
module_matches(const LlmCudaModule *m, const char *path, char *why, size_t why_len)
{
	const size_t sizes[] = LLM_CUDA_MODULE_SIZES;

	if (m->abi != LLM_CUDA_MODULE_ABI || memcmp(m->sizes, sizes, sizeof(sizes)) != 0)
	{
		snprintf(why, why_len, "the CUDA backend module %s is from another build of llm (interface %d, this build %d)",
				 path, m->abi, LLM_CUDA_MODULE_ABI);
		return false;
	}
	return true;
}

/* Load the module at path: its table, or NULL and why. */
static const LlmCudaModule *
module_load(const char *path, char *why, size_t why_len)
{
	void	   *handle;
	const LlmCudaModule *m;

	/* RTLD_LOCAL: its own copies of engine code stay its own */
	handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (handle == NULL)
	{
		snprintf(why, why_len, "the CUDA backend module could not be loaded: %s", dlerror());
		return NULL;
	}
	m = (const LlmCudaModule *) dlsym(handle, "llm_cuda_module_entry");
	if (m == NULL)
	{
		snprintf(why, why_len, "%s is not the CUDA backend module of llm (no llm_cuda_module_entry)", path);
		dlclose(handle);
		return NULL;
	}
	if (!module_matches(m, path, why, why_len))
	{
		dlclose(handle);
		return NULL;
	}
	return m;
}

/* The CUDA backend for path, loaded once; NULL and why when there is none. */
const LlmCudaModule *
llm_cuda_module_get(const char *path, char *why, size_t why_len)
{
	const LlmCudaModule *m;

	pthread_mutex_lock(&module_lock);
	if (module_used != NULL)
		m = module_used;
	else if (path == NULL || path[0] == '\0')
	{
		snprintf(why, why_len, "no CUDA backend module was given");
		m = NULL;
	}
	else if (module_loaded != NULL && strcmp(path, module_path) == 0)
		m = module_loaded;
	else if (strlen(path) >= sizeof(module_path))
	{
		snprintf(why, why_len, "the CUDA backend module's path is too long");
		m = NULL;
	}
	else if ((m = module_load(path, why, why_len)) != NULL)
	{
		/* a module stays loaded: a later path loads beside it */
		module_loaded = m;
		strcpy(module_path, path);
	}
	pthread_mutex_unlock(&module_lock);
	return m;
}

/* Use m, linked into this program, for every later CUDA backend (NULL: load again). */
void
llm_cuda_module_use(const LlmCudaModule *m)
{
	pthread_mutex_lock(&module_lock);
	module_used = m;
	pthread_mutex_unlock(&module_lock);
}
