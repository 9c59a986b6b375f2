/*
 * worker_list.c
 *		llm_workers(): a row per model worker of llm.devices, with its
 *		process, state, device, what it runs now and what it has answered.
 *
 * Each worker writes its own entry of LlmState->workers (worker.c); this
 * copies them under the lock and formats them.
 */
#include "postgres.h"

#include "funcapi.h"
#include "utils/builtins.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_workers);

/* llm_workers(): one row per model worker. */
Datum
llm_workers(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmWorkerInfo *workers = palloc(sizeof(LlmWorkerInfo) * LLM_MAX_WORKERS);
	int			n;

	LlmShmemCheck();
	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(LlmState->lock, LW_SHARED);
	n = LlmState->n_workers;
	memcpy(workers, LlmState->workers, sizeof(LlmWorkerInfo) * n);
	LWLockRelease(LlmState->lock);

	for (int k = 0; k < n; k++)
	{
		LlmWorkerInfo *w = &workers[k];
		Datum		values[10];
		bool		nulls[10] = {0};
		int			i = 0;

		values[i++] = Int32GetDatum(k);
		if (w->pid != 0)
			values[i++] = Int32GetDatum(w->pid);
		else
			nulls[i++] = true;
		values[i++] = CStringGetTextDatum(LlmWorkerStateName(w->state));
		if (w->has_model)
		{
			values[i++] = CStringGetTextDatum(w->device);
			values[i++] = Int32GetDatum(w->n_threads);
		}
		else
		{
			nulls[i++] = true;
			nulls[i++] = true;
		}
		values[i++] = Int32GetDatum(w->engine_running);
		values[i++] = Int32GetDatum(w->engine_waiting);
		values[i++] = Int64GetDatum(w->requests);
		values[i++] = Int64GetDatum(w->prompt_tokens);
		values[i++] = Int64GetDatum(w->completion_tokens);
		Assert(i == lengthof(values));
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
