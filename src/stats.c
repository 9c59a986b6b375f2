/*
 * stats.c
 *		Monitoring: llm_stats() (behind the llm_stats view),
 *		llm_worker_status() and llm_reset_stats().
 *
 * The worker keeps the counters in shared memory (shmem.c); these functions
 * copy them under the lock and format them.  The queue depth is counted
 * from the slots at read time, so it is right even while no worker runs.
 */
#include "postgres.h"

#include "catalog/pg_authid.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_stats);
PG_FUNCTION_INFO_V1(llm_worker_status);
PG_FUNCTION_INFO_V1(llm_reset_stats);

/* The name llm_worker_status() shows for a worker state. */
const char *
LlmWorkerStateName(LlmWorkerState state)
{
	switch (state)
	{
		case LLM_WORKER_STOPPED:
			return "stopped";
		case LLM_WORKER_STARTING:
			return "starting";
		case LLM_WORKER_LOADING:
			return "loading";
		case LLM_WORKER_READY:
			return "ready";
		case LLM_WORKER_NO_MODEL:
			return "no model";
	}
	return "unknown";
}

/* Build the result tuple descriptor of a function returning a record. */
static TupleDesc
LlmResultDesc(FunctionCallInfo fcinfo)
{
	TupleDesc	tupdesc;

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	return BlessTupleDesc(tupdesc);
}

/*
 * The prefix-cache hits (prompt tokens) and answer-cache hits (requests)
 * of the session user's completed requests, when its role has an entry of
 * its own.
 */
static bool
LlmOwnCacheHits(int64 *cached, int64 *answers)
{
	LlmRoleStats *roles = palloc(sizeof(LlmRoleStats) * LLM_ROLE_ENTRIES);
	int			n = LlmRoleStatsSnapshot(roles);
	Oid			me = GetSessionUserId();

	for (int r = 0; r < n; r++)
		if (roles[r].roleid == me)
		{
			*cached = roles[r].c.cached_tokens;
			*answers = roles[r].c.cache_hits;
			return true;
		}
	return false;
}

/* The model workers' gauges (requests running and waiting, KV blocks, answer cache), summed into *g; lock held. */
void
LlmWorkerGauges(LlmWorkerInfo *g)
{
	memset(g, 0, sizeof(*g));
	for (int w = 0; w < LlmState->n_workers; w++)
	{
		const LlmWorkerInfo *wi = &LlmState->workers[w];

		g->engine_waiting += wi->engine_waiting;
		g->engine_running += wi->engine_running;
		g->kv_blocks_used += wi->kv_blocks_used;
		g->kv_blocks_cached += wi->kv_blocks_cached;
		g->kv_blocks_total += wi->kv_blocks_total;
		g->cache_entries += wi->cache_entries;
		g->cache_bytes += wi->cache_bytes;
	}
}

/*
 * llm_stats(): one row of queue, throughput, KV cache and answer cache
 * figures.  Each role has its own prefix cache (unless
 * llm.prefix_cache_shared) and its own answers (unless llm.cache_shared),
 * and sees only its own hits of both unless it may read all statistics
 * (pg_read_all_stats).
 */
Datum
llm_stats(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc = LlmResultDesc(fcinfo);
	LlmCounters c;
	LlmWorkerInfo g;			/* the workers' gauges, summed */
	int			queued = 0;
	Datum		values[22];
	bool		nulls[22] = {0};
	double		busy_s;
	int64		own;
	int64		own_answers = 0;
	bool		all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
	bool		has_own;
	int			i = 0;

	LlmShmemCheck();
	LWLockAcquire(LlmState->lock, LW_SHARED);
	c = LlmState->counters;
	for (int s = 0; s < LlmState->n_slots; s++)
		if (LlmState->slots[s].state == LLM_SLOT_QUEUED)
			queued++;
	LlmWorkerGauges(&g);
	LWLockRelease(LlmState->lock);

	busy_s = c.busy_us / 1e6;
	values[i++] = Int32GetDatum(queued + g.engine_waiting);	/* queued_requests */
	values[i++] = Int32GetDatum(g.engine_running);	/* running_requests */
	values[i++] = Int64GetDatum(c.requests_completed);
	values[i++] = Int64GetDatum(c.requests_failed);
	values[i++] = Int64GetDatum(c.requests_cancelled);
	values[i++] = Int64GetDatum(c.prompt_tokens);
	values[i++] = Int64GetDatum(c.completion_tokens);
	values[i++] = Int64GetDatum(c.steps);
	if (busy_s > 0)
	{
		values[i++] = Float8GetDatum(c.prompt_tokens / busy_s);
		values[i++] = Float8GetDatum(c.completion_tokens / busy_s);
	}
	else
	{
		nulls[i++] = true;
		nulls[i++] = true;
	}
	values[i++] = Int32GetDatum(g.kv_blocks_used);
	values[i++] = Int32GetDatum(g.kv_blocks_cached);
	values[i++] = Int32GetDatum(g.kv_blocks_total);
	/* the prefix cache's hits: all of them, or the caller's role's (of its completed requests) */
	has_own = !all_stats && LlmOwnCacheHits(&own, &own_answers);
	if (all_stats)
		values[i++] = Int64GetDatum(c.prefix_hit_tokens);
	else if (has_own)
		values[i++] = Int64GetDatum(own);
	else
		nulls[i++] = true;
	values[i++] = Int64GetDatum(c.preemptions);
	values[i++] = Int64GetDatum(c.evicted_keys);
	values[i++] = TimestampTzGetDatum(c.reset_at);
	/* 1.4 and later: speculative decoding's (an older definition has 17 columns) */
	values[i++] = Int64GetDatum(c.draft_tokens);
	values[i++] = Int64GetDatum(c.draft_accepted);
	/* 1.5 and later: the answer cache's (an older definition has 17 or 19 columns) */
	if (all_stats)
		values[i++] = Int64GetDatum(c.cache_hits);
	else if (has_own)
		values[i++] = Int64GetDatum(own_answers);
	else
		nulls[i++] = true;
	values[i++] = Int64GetDatum(g.cache_entries);
	values[i++] = Int64GetDatum(g.cache_bytes);
	Assert(i == lengthof(values) && tupdesc->natts <= i);

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/*
 * Whether the current role may see paths under llm.model_dir and the
 * system's error texts in the worker's errors: members of
 * pg_read_all_settings, who may read llm.model_dir itself.  Others see the
 * public version of such an error (llm_worker_status(), and the detail of a
 * request answered "no model is loaded").
 */
bool
LlmMaySeePaths(void)
{
	return has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_SETTINGS);
}

/*
 * llm_worker_status(): the worker's process, state, model and device.  The
 * SQL of version 1.0 (not yet updated) declares 13 columns, without the
 * device's two.
 */
Datum
llm_worker_status(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc = LlmResultDesc(fcinfo);
	LlmWorkerInfo w;
	Datum		values[15];
	bool		nulls[15] = {0};
	int			i = 0;
	char	   *file;

	if (tupdesc->natts != 13 && tupdesc->natts != lengthof(values))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("llm_worker_status() is declared with %d columns, which this llm library does not know",
						tupdesc->natts),
				 errhint("Run ALTER EXTENSION llm UPDATE.")));

	LlmShmemCheck();
	w = LlmWorkerServing();

	/* the model's file, as SHOW llm.model tells everyone: names are not unique */
	file = strrchr(w.model_path, '/');
	file = pstrdup(file != NULL ? file + 1 : w.model_path);

	/* paths and system error texts are for those who may read every setting */
	if (!LlmMaySeePaths())
	{
		w.model_path[0] = '\0';
		strlcpy(w.error, w.error_public, sizeof(w.error));
	}

	if (w.pid != 0)
		values[i++] = Int32GetDatum(w.pid);
	else
		nulls[i++] = true;
	values[i++] = CStringGetTextDatum(LlmWorkerStateName(w.state));
	if (w.has_model)
	{
		values[i++] = CStringGetTextDatum(file[0] == '\0' ? w.model.name :
										  w.model.name[0] == '\0' ? file :
										  psprintf("%s (%s)", w.model.name, file));
		if (w.model_path[0] != '\0')
			values[i++] = CStringGetTextDatum(w.model_path);
		else
			nulls[i++] = true;
		values[i++] = CStringGetTextDatum(w.model.arch);
		values[i++] = Int64GetDatum(w.model.n_params);
		values[i++] = Int32GetDatum(w.model.n_layers);
		values[i++] = Int32GetDatum(w.n_ctx);
		values[i++] = CStringGetTextDatum(w.model.weight_types);
		values[i++] = Int32GetDatum(w.n_threads);
	}
	else
	{
		nulls[i++] = true;		/* model */
		if (w.model_path[0] != '\0')
			values[i++] = CStringGetTextDatum(w.model_path);
		else
			nulls[i++] = true;
		for (int k = 0; k < 6; k++)
			nulls[i++] = true;
	}
	if (w.started_at != 0 && w.pid != 0)
		values[i++] = TimestampTzGetDatum(w.started_at);
	else
		nulls[i++] = true;
	if (w.has_model)
		values[i++] = TimestampTzGetDatum(w.loaded_at);
	else
		nulls[i++] = true;
	if (w.error[0] != '\0')	/* also beside a model that still serves after a failed reload */
		values[i++] = CStringGetTextDatum(w.error);
	else
		nulls[i++] = true;
	if (w.has_model)
	{
		values[i++] = CStringGetTextDatum(w.device);
		if (w.device_note[0] != '\0')
			values[i++] = CStringGetTextDatum(w.device_note);
		else
			nulls[i++] = true;
	}
	else
	{
		nulls[i++] = true;
		nulls[i++] = true;
	}
	Assert(i == lengthof(values));

	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(tupdesc, values, nulls)));
}

/* llm_reset_stats(): zero the cumulative counters, llm_role_stats' too. */
Datum
llm_reset_stats(PG_FUNCTION_ARGS)
{
	LlmShmemCheck();
	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmState->counters.requests_completed = 0;
	LlmState->counters.requests_failed = 0;
	LlmState->counters.requests_cancelled = 0;
	LlmState->counters.prompt_tokens = 0;
	LlmState->counters.completion_tokens = 0;
	LlmState->counters.steps = 0;
	LlmState->counters.busy_us = 0;
	LlmState->counters.preemptions = 0;
	LlmState->counters.prefix_hit_tokens = 0;
	LlmState->counters.evicted_keys = 0;
	LlmState->counters.draft_tokens = 0;
	LlmState->counters.draft_accepted = 0;
	LlmState->counters.cache_hits = 0;
	LlmState->counters.reset_at = GetCurrentTimestamp();
	for (int w = 0; w < LlmState->n_workers; w++)
	{
		LlmState->workers[w].requests = 0;
		LlmState->workers[w].prompt_tokens = 0;
		LlmState->workers[w].completion_tokens = 0;
	}
	LlmRoleStatsReset();
	LWLockRelease(LlmState->lock);
	PG_RETURN_VOID();
}
