/*
 * launch.cu
 *		What every kernel launch of the CUDA backend shares: whether kernels
 *		go out as programmatic dependents of the kernel before them
 *		(common.cuh's llm_launch and pdl_wait).  The backend turns it on for
 *		sm_90 and newer unless its options say not to (LlmBackendOptions.pdl);
 *		it is one switch for the process, set by the backend created last.
 */
#include "common.cuh"

static bool pdl;

/* Launch kernels as programmatic dependents (sm_90) or not. */
void
llm_cuda_set_pdl(bool on)
{
	pdl = on;
}

/* Whether kernels go out as programmatic dependents. */
bool
llm_cuda_pdl_on(void)
{
	return pdl;
}

/* A kernel that does nothing but take part in programmatic dependent launch. */
__global__ void
pdl_probe_kernel(int *flag)
{
	pdl_wait();
	pdl_launch_next();
	if (threadIdx.x == 0 && flag != nullptr)
		*flag = 1;
}

/* Whether kernels launch as programmatic dependents here: two probe launches, run to completion. */
cudaError_t
llm_cuda_pdl_probe(cudaStream_t st)
{
	cudaError_t e;

	LLM_LAUNCH(pdl_probe_kernel, 1, 32, 0, st, (int *) nullptr);
	LLM_LAUNCH(pdl_probe_kernel, 1, 32, 0, st, (int *) nullptr);
	if ((e = cudaGetLastError()) != cudaSuccess)
		return e;
	return cudaStreamSynchronize(st);
}
