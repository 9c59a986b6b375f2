/*
 * role_stats.c
 *		llm_role_stats(), behind the llm_role_stats view: per role, the
 *		requests queued and running now and the cumulative counters.
 *
 * fair.c keeps the counters in shared memory and copies them under the
 * lock (LlmRoleStatsSnapshot); this formats them.  A role beyond the
 * table's LLM_ROLE_ENTRIES entries is counted in a row whose roleid and
 * role are NULL.  The 1.0 to 1.4 definitions have 12 columns, 1.5's
 * a 13th, cache_hits: the row gets the columns its definition declares.
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_role_stats);

/* llm_role_stats(): one row per role tracked. */
Datum
llm_role_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmRoleStats *rows = palloc(sizeof(LlmRoleStats) * LLM_ROLE_ENTRIES);
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	n = LlmRoleStatsSnapshot(rows);
	for (int r = 0; r < n; r++)
	{
		LlmRoleStats *s = &rows[r];
		Datum		values[13];
		bool		nulls[13] = {0};
		char	   *name = OidIsValid(s->roleid) ? GetUserNameFromId(s->roleid, true) : NULL;
		int			i = 0;

		if (OidIsValid(s->roleid))
			values[i++] = ObjectIdGetDatum(s->roleid);
		else
			nulls[i++] = true;
		if (name != NULL)
		{
			NameData   *n = palloc(sizeof(NameData));

			namestrcpy(n, name);
			values[i++] = NameGetDatum(n);
		}
		else
			nulls[i++] = true;	/* other roles, or a dropped one */
		values[i++] = Int32GetDatum(s->weight);
		values[i++] = Int32GetDatum(s->queued);
		values[i++] = Int32GetDatum(s->running);
		values[i++] = Int64GetDatum(s->c.completed);
		values[i++] = Int64GetDatum(s->c.failed);
		values[i++] = Int64GetDatum(s->c.cancelled);
		values[i++] = Int64GetDatum(s->c.prompt_tokens);
		values[i++] = Int64GetDatum(s->c.completion_tokens);
		values[i++] = Float8GetDatum(s->c.queue_us / 1000.0);
		if (s->c.admitted > 0)
			values[i++] = Float8GetDatum(s->c.queue_us / 1000.0 / s->c.admitted);
		else
			nulls[i++] = true;
		values[i++] = Int64GetDatum(s->c.cache_hits);	/* 1.5 */
		Assert(i == lengthof(values) && rsinfo->setDesc->natts <= i);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
