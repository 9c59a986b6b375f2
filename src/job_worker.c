/*
 * job_worker.c
 *		The background worker that runs one fill job (llm_fill), batch by
 *		batch, each batch a transaction of its own.
 *
 * A batch: take up to batch_rows rows whose column is NULL (and where the
 * job's where_clause holds), locked FOR UPDATE SKIP LOCKED, so that a row
 * another transaction holds is neither overwritten nor waited for; build
 * each row's requests exactly as the function does row by row
 * (LlmBatchCallJobs), queue them all at once through the same queue as
 * every session (LlmQueueRunKept: one continuous batch in the model
 * worker, fair shares by the job's role), write the answers with one
 * UPDATE, add the batch's counts to the job's row, and commit.  A crash
 * loses at most the batch in flight; committed rows are never asked again,
 * as their column is no longer NULL.
 *
 * A continuous job (llm_fill(..., continuous => true)) does not end when
 * no rows are left: it sleeps until the statement trigger that llm_fill
 * put on the table wakes it (llm_job_trigger, at the commit of a
 * transaction that inserted or updated rows), or LLM_JOB_IDLE_WAIT_MS has
 * passed, and looks again; the rows it fills are still those whose column
 * is NULL, so an update that sets the column to NULL has it filled anew.
 *
 * A row whose request fails (or whose prompt is NULL, or whose answer does
 * not fit the column) goes into llm_job_error and is left out of the job's
 * later batches; the job goes on.  Errors that are no row's fault (out of
 * resources, the server shutting down) end the worker with 1, and the
 * postmaster starts it again LLM_JOB_RESTART_S seconds later; any other
 * error fails the job, with its message in llm_job.error.
 *
 * The worker logs in as the job's role: the target's statements run as it,
 * in a restricted security context (SECURITY_RESTRICTED_OPERATION, as
 * maintenance commands run), with its privileges and row-level security;
 * the catalog is written as its owner (LlmJobCatalogBegin).  The job's
 * search_path is the submitter's.
 *
 * Locking: see job.c; the worker holds its job's session lock
 * (LlmJobLockTag) from its start to its exit.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "job.h"

/* How long a job whose remaining rows others hold waits before it looks again. */
#define LLM_JOB_LOCKED_WAIT_MS 1000

/* How long an idle continuous job waits for its trigger before it looks anyway. */
#define LLM_JOB_IDLE_WAIT_MS 10000

/* A running job: what its worker read at its start. */
typedef struct LlmJobRun
{
	int64		id;
	Oid			roleid;
	LlmJobCatalog cat;
	const LlmJobFuncInfo *fi;
	Oid			relid;
	AttrNumber	attnum;
	int			batch_rows;
	bool		continuous;		/* keeps filling rows inserted or updated later */
	NullableDatum *args;		/* the function's arguments, the input (args[0]) set per row */
	int			nargs;
	SPIPlanPtr	select_plan;	/* LlmJobSelectSql, kept */
	SPIPlanPtr	after_plan;		/* the same after a key, when the table has a key of one column; or NULL */
	char	   *last_key;		/* after_plan's $2: the key of the last row taken, or NULL to start over */
	SPIPlanPtr	count_plan;		/* LlmJobCountSql, kept */
	SPIPlanPtr	update_plan;	/* LlmJobUpdateSql, kept */
	List	   *failed_keys;	/* keys of the rows in llm_job_error (char *) */
	LlmJob	   *batch_jobs;		/* the batch's requests, every row's together (LlmJobRunRows) */
	int			n_batch_jobs;
	MemoryContext cxt;			/* lives as long as the worker */
} LlmJobRun;

/* One row of a batch. */
typedef struct LlmJobRow
{
	Oid			rel;
	ItemPointerData tid;
	char	   *key;
	Datum		input;
	bool		input_null;
	LlmJob	   *jobs;			/* its requests, and their answers */
	int			n_jobs;
	Datum		result;
	int			sqlerrcode;		/* 0, or why the row failed */
	char	   *message;
} LlmJobRow;

/* A row the batch's UPDATE wrote: its table, the ctid it had, and whether its column is now set. */
typedef struct LlmJobWritten
{
	Oid			rel;
	ItemPointerData tid;
	bool		set;
} LlmJobWritten;

static void LlmJobCheckWritten(LlmJobRow *rows, int n_rows, int from);

/* What a batch found. */
typedef enum LlmJobStep
{
	LLM_JOB_MORE,				/* rows were filled: go on */
	LLM_JOB_WAIT,				/* the rows left are locked by others: look again later */
	LLM_JOB_IDLE,				/* continuous, and no rows left: wait for the trigger */
	LLM_JOB_END					/* the job is done, paused, cancelled or gone */
} LlmJobStep;

/* Run SQL as the job's role, in a restricted security context; SPI's result code. */
static int
LlmJobExecAsRole(LlmJobRun *run, SPIPlanPtr plan, Datum *values, const char *nulls, long count)
{
	Oid			user;
	int			sec;
	int			ret;

	GetUserIdAndSecContext(&user, &sec);
	SetUserIdAndSecContext(run->roleid, sec | SECURITY_RESTRICTED_OPERATION);
	ret = SPI_execute_plan(plan, values, nulls, false, count);
	SetUserIdAndSecContext(user, sec);
	return ret;
}

/* Run SQL with job id as $1 on the catalog, as its owner; SPI's result code. */
static int
LlmJobExecCatalog(LlmJobRun *run, const char *sql, int nargs, Oid *types, Datum *values, const char *nulls)
{
	LlmJobAs	as;
	int			ret;

	LlmJobCatalogBegin(&run->cat, &as);
	ret = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	LlmJobCatalogEnd(&as);
	return ret;
}

/* The keys of the rows that failed, as a text[] Datum ($1 of the select and count statements). */
static Datum
LlmJobFailedKeys(LlmJobRun *run)
{
	int			n = list_length(run->failed_keys);
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));
	int			i = 0;
	ListCell   *lc;

	foreach(lc, run->failed_keys)
		d[i++] = CStringGetTextDatum(lfirst(lc));
	return PointerGetDatum(construct_array(d, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* Begin a transaction with SPI connected and a snapshot. */
static void
LlmJobBeginXact(const char *activity)
{
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, activity);
}

/* Commit the transaction of LlmJobBeginXact. */
static void
LlmJobCommitXact(void)
{
	SPI_finish();
	PopActiveSnapshot();
	CommitTransactionCommand();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/* Prepare and keep sql, with nargs parameters of types. */
static SPIPlanPtr
LlmJobKeepPlan(const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "SPI_keepplan failed");
	return plan;
}

/*
 * Read job run->id, and mark it running, with the rows it has left; false
 * when there is nothing to run (no such job, or it is paused or has
 * ended).  Errors when its target or column has gone.
 */
static bool
LlmJobSetup(LlmJobRun *run)
{
	Oid			argtype = INT8OID;
	Datum		arg = Int64GetDatum(run->id);
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	char	   *state;
	char	   *colname;
	char	   *prompt;
	char	   *where;
	Datum		keys;
	int64		left;
	MemoryContext old;
	Oid			keys_type = TEXTARRAYOID;
	Oid			update_types[3];
	char	   *type;

	LlmJobBeginXact("llm job: starting");
	if (!LlmJobCatalogFind(&run->cat))
	{
		LlmJobCommitXact();
		return false;
	}
	old = MemoryContextSwitchTo(run->cxt);
	run->cat.job_rel = pstrdup(run->cat.job_rel);
	run->cat.error_rel = pstrdup(run->cat.error_rel);
	MemoryContextSwitchTo(old);

	if (LlmJobExecCatalog(run, psprintf("SELECT state, target, column_name, function, prompt, where_clause, "
										"search_path, batch_rows, continuous FROM %s WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
										run->cat.job_rel), 1, &argtype, &arg, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read llm job " INT64_FORMAT, run->id);
	if (SPI_processed == 0)
	{
		LlmJobCommitXact();
		return false;
	}
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	state = SPI_getvalue(tup, desc, 1);
	if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)
	{
		LlmJobCommitXact();
		return false;
	}
	run->relid = DatumGetObjectId(SPI_getbinval(tup, desc, 2, &isnull));
	colname = SPI_getvalue(tup, desc, 3);
	run->fi = LlmJobFuncByName(SPI_getvalue(tup, desc, 4));
	prompt = SPI_getvalue(tup, desc, 5);
	where = SPI_getvalue(tup, desc, 6);
	(void) set_config_option("search_path", SPI_getvalue(tup, desc, 7), PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SET, true, 0, false);
	run->batch_rows = DatumGetInt32(SPI_getbinval(tup, desc, 8, &isnull));
	run->continuous = DatumGetBool(SPI_getbinval(tup, desc, 9, &isnull));
	if (run->fi == NULL)
		elog(ERROR, "llm job " INT64_FORMAT " has an unknown function", run->id);
	if (get_rel_name(run->relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the table of llm job " INT64_FORMAT " no longer exists", run->id)));
	run->attnum = get_attnum(run->relid, colname);
	if (run->attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", colname, get_rel_name(run->relid))));

	old = MemoryContextSwitchTo(run->cxt);
	run->args = LlmJobArgs(&run->cat, run->id, run->fi, &run->nargs);
	run->nargs = LlmBatchFuncNargs(run->fi->func);
	MemoryContextSwitchTo(old);
	run->select_plan = LlmJobKeepPlan(LlmJobSelectSql(run->relid, run->attnum, prompt, where, run->batch_rows,
													  false), 1, &keys_type);
	if (LlmJobKeyColumn(run->relid, &type) != NULL)
	{
		Oid			after_types[2] = {TEXTARRAYOID, TEXTOID};

		run->after_plan = LlmJobKeepPlan(LlmJobSelectSql(run->relid, run->attnum, prompt, where, run->batch_rows,
														 true), 2, after_types);
	}
	run->count_plan = LlmJobKeepPlan(LlmJobCountSql(run->relid, run->attnum, where), 1, &keys_type);
	LlmJobUpdateTypes(run->fi, update_types);
	run->update_plan = LlmJobKeepPlan(LlmJobUpdateSql(run->relid, run->attnum, run->fi), 3, update_types);

	/* the rows that failed before */
	if (LlmJobExecCatalog(run, psprintf("SELECT row_key FROM %s WHERE job_id OPERATOR(pg_catalog.=) $1",
										run->cat.error_rel), 1, &argtype, &arg, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read the errors of llm job " INT64_FORMAT, run->id);
	old = MemoryContextSwitchTo(run->cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
		run->failed_keys = lappend(run->failed_keys,
								   SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	MemoryContextSwitchTo(old);

	/* the rows left, as the role sees them */
	keys = LlmJobFailedKeys(run);
	if (LlmJobExecAsRole(run, run->count_plan, &keys, NULL, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not count the rows of llm job " INT64_FORMAT, run->id);
	left = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	{
		Oid			types[3] = {INT8OID, INT8OID, INT4OID};
		Datum		values[3] = {Int64GetDatum(run->id), Int64GetDatum(left), Int32GetDatum(MyProcPid)};

		if (LlmJobExecCatalog(run, psprintf("UPDATE %s SET state = 'running', worker_pid = $3, started_at = "
											"COALESCE(started_at, pg_catalog.now()), "
											"rows_total = rows_done OPERATOR(pg_catalog.+) $2 "
											"WHERE id OPERATOR(pg_catalog.=) $1", run->cat.job_rel),
							  3, types, values, NULL) != SPI_OK_UPDATE)
			elog(ERROR, "could not update llm job " INT64_FORMAT, run->id);
	}
	LlmJobCommitXact();
	return true;
}

/* Whether sqlerrcode is no row's fault: the worker stops and is started again later. */
static bool
LlmJobTransient(int sqlerrcode)
{
	int			class = ERRCODE_TO_CATEGORY(sqlerrcode);

	return class == ERRCODE_TO_CATEGORY(ERRCODE_INSUFFICIENT_RESOURCES) ||
		class == ERRCODE_TO_CATEGORY(ERRCODE_TRANSACTION_ROLLBACK) ||	/* a deadlock, a serialization failure */
		class == ERRCODE_TO_CATEGORY(ERRCODE_OPERATOR_INTERVENTION) ||
		class == ERRCODE_TO_CATEGORY(ERRCODE_SYSTEM_ERROR) ||
		class == ERRCODE_TO_CATEGORY(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
}

/* Run body(run, rows, i) in a subtransaction; the error it raised (copied), or NULL. */
static ErrorData *
LlmJobTry(void (*body) (LlmJobRun *, LlmJobRow *, int), LlmJobRun *run, LlmJobRow *rows, int i)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		body(run, rows, i);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return edata;
}

/* Run body for row i as LlmJobTry does, marking the row failed with its error, unless that is no row's fault. */
static void
LlmJobTryRow(void (*body) (LlmJobRun *, LlmJobRow *, int), LlmJobRun *run, LlmJobRow *rows, int i)
{
	ErrorData  *edata = LlmJobTry(body, run, rows, i);

	if (edata == NULL)
		return;
	if (LlmJobTransient(edata->sqlerrcode))
		ReThrowError(edata);
	rows[i].sqlerrcode = edata->sqlerrcode;
	rows[i].message = edata->message ? edata->message : "unknown error";
}

/* Build row i's requests (LlmJobTry's body). */
static void
LlmJobBuildRow(LlmJobRun *run, LlmJobRow *rows, int i)
{
	LlmJobRow  *row = &rows[i];
	NullableDatum *args = palloc(sizeof(NullableDatum) * run->nargs);

	memcpy(args, run->args, sizeof(NullableDatum) * run->nargs);
	args[0].value = row->input;
	args[0].isnull = row->input_null;
	row->jobs = LlmBatchCallJobs(run->fi->func, args, &row->n_jobs);
	for (int j = 0; j < row->n_jobs; j++)
	{
		row->jobs[j].error_as_null = true;
		row->jobs[j].slot = -1;
	}
	if (row->n_jobs == 0)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("the prompt is null")));
}

/* Run row i's requests (LlmJobTry's body; i < 0: the requests of every row that has some, together). */
static void
LlmJobRunRows(LlmJobRun *run, LlmJobRow *rows, int i)
{
	if (i >= 0)
	{
		LlmQueueRunKept(rows[i].jobs, rows[i].n_jobs);
		return;
	}
	LlmQueueRunKept(run->batch_jobs, run->n_batch_jobs);
}

/* Write row i's answer (LlmJobTry's body), when the batch's single UPDATE failed. */
static void
LlmJobUpdateRow(LlmJobRun *run, LlmJobRow *rows, int i)
{
	Datum		values[3];
	Oid			typid = run->fi->result_type;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	get_typlenbyvalalign(typid, &typlen, &typbyval, &typalign);
	values[0] = PointerGetDatum(construct_array(&(Datum) {ObjectIdGetDatum(rows[i].rel)}, 1, OIDOID,
												sizeof(Oid), true, TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(&(Datum) {PointerGetDatum(&rows[i].tid)}, 1, TIDOID,
												sizeof(ItemPointerData), false, TYPALIGN_SHORT));
	values[2] = PointerGetDatum(construct_array(&rows[i].result, 1, typid, typlen, typbyval, typalign));
	if (LlmJobExecAsRole(run, run->update_plan, values, NULL, 0) != SPI_OK_UPDATE_RETURNING)
		elog(ERROR, "could not write the answer of a row");
	LlmJobCheckWritten(rows, i + 1, i);
	if (rows[i].sqlerrcode != 0)
		ereport(ERROR, (errcode(rows[i].sqlerrcode), errmsg("%s", rows[i].message)));
}

/* Order of LlmJobWritten entries: by table, then ctid. */
static int
LlmJobWrittenCmp(const void *a, const void *b)
{
	const LlmJobWritten *x = a;
	const LlmJobWritten *y = b;

	if (x->rel != y->rel)
		return x->rel < y->rel ? -1 : 1;
	return ItemPointerCompare((ItemPointer) &x->tid, (ItemPointer) &y->tid);
}

/*
 * Mark failed each of rows[from .. n_rows) with an answer that the UPDATE
 * just run (SPI_tuptable: its RETURNING) did not write, or wrote with the
 * column still NULL: a trigger or rule of the table skipped it or cleared
 * the column.  Such a row would otherwise be counted done and taken again
 * by every later batch.
 */
static void
LlmJobCheckWritten(LlmJobRow *rows, int n_rows, int from)
{
	uint64		n = SPI_processed;
	LlmJobWritten *w = palloc(sizeof(LlmJobWritten) * Max(n, 1));

	for (uint64 k = 0; k < n; k++)
	{
		HeapTuple	tup = SPI_tuptable->vals[k];
		bool		isnull;

		w[k].rel = DatumGetObjectId(SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull));
		w[k].tid = *(ItemPointer) DatumGetPointer(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		w[k].set = DatumGetBool(SPI_getbinval(tup, SPI_tuptable->tupdesc, 3, &isnull)) && !isnull;
	}
	qsort(w, n, sizeof(LlmJobWritten), LlmJobWrittenCmp);
	for (int i = from; i < n_rows; i++)
	{
		LlmJobWritten key = {rows[i].rel, rows[i].tid, false};
		LlmJobWritten *hit;

		if (rows[i].sqlerrcode != 0)
			continue;
		hit = bsearch(&key, w, n, sizeof(LlmJobWritten), LlmJobWrittenCmp);
		if (hit == NULL || !hit->set)
		{
			rows[i].sqlerrcode = ERRCODE_TRIGGERED_ACTION_EXCEPTION;
			rows[i].message = hit == NULL ?
				"the answer was not written: a trigger or rule of the table skipped the row" :
				"the answer was not kept: a trigger of the table set the column to NULL";
		}
	}
	pfree(w);
}

/* Write the answers of the rows that have one, in one statement; false when it failed (nothing written). */
static bool
LlmJobUpdateAll(LlmJobRun *run, LlmJobRow *rows, int n_rows)
{
	Datum	   *rels = palloc(sizeof(Datum) * n_rows);
	Datum	   *tids = palloc(sizeof(Datum) * n_rows);
	Datum	   *vals = palloc(sizeof(Datum) * n_rows);
	Datum		values[3];
	Oid			typid = run->fi->result_type;
	int16		typlen;
	bool		typbyval;
	char		typalign;
	int			n = 0;
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	for (int i = 0; i < n_rows; i++)
		if (rows[i].sqlerrcode == 0)
		{
			rels[n] = ObjectIdGetDatum(rows[i].rel);
			tids[n] = PointerGetDatum(&rows[i].tid);
			vals[n++] = rows[i].result;
		}
	if (n == 0)
		return true;
	get_typlenbyvalalign(typid, &typlen, &typbyval, &typalign);
	values[0] = PointerGetDatum(construct_array(rels, n, OIDOID, sizeof(Oid), true, TYPALIGN_INT));
	values[1] = PointerGetDatum(construct_array(tids, n, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT));
	values[2] = PointerGetDatum(construct_array(vals, n, typid, typlen, typbyval, typalign));

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		if (LlmJobExecAsRole(run, run->update_plan, values, NULL, 0) != SPI_OK_UPDATE_RETURNING)
			elog(ERROR, "could not write the answers of a batch");
		LlmJobCheckWritten(rows, n_rows, 0);
		ReleaseCurrentSubTransaction();
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	return ok;
}

/* Fill one batch of rows of the job, in a transaction of its own. */
static LlmJobStep
LlmJobBatch(LlmJobRun *run)
{
	Oid			argtype = INT8OID;
	Datum		arg = Int64GetDatum(run->id);
	Datum		keys;
	LlmJobRow  *rows;
	int			n_rows;
	LlmJob	   *all;
	int			n_all = 0;
	int			n_failed = 0;
	int64		n_requests = 0;
	int64		completion_tokens = 0;
	TimestampTz start = GetCurrentTimestamp();
	char	   *state;
	List	   *new_keys = NIL;
	ErrorData  *edata;

	LlmJobBeginXact(psprintf("llm job " INT64_FORMAT ": batch", run->id));

	/* paused, cancelled (or deleted) since the last batch? */
	if (LlmJobExecCatalog(run, psprintf("SELECT state FROM %s WHERE id OPERATOR(pg_catalog.=) $1",
										run->cat.job_rel), 1, &argtype, &arg, NULL) != SPI_OK_SELECT)
		elog(ERROR, "could not read llm job " INT64_FORMAT, run->id);
	state = SPI_processed == 1 ? SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) : "gone";
	if (strcmp(state, "running") != 0 && strcmp(state, "queued") != 0)
	{
		LlmJobCommitXact();
		return LLM_JOB_END;
	}

	/* the batch's rows, locked: after the last batch's, else from the start */
	keys = LlmJobFailedKeys(run);
	if (run->last_key != NULL)
	{
		Datum		values[2] = {keys, CStringGetTextDatum(run->last_key)};

		if (LlmJobExecAsRole(run, run->after_plan, values, NULL, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read the rows of llm job " INT64_FORMAT, run->id);
		if (SPI_processed == 0)
		{
			/* the end of the table: start over, for the rows passed over (others held them) */
			pfree(run->last_key);
			run->last_key = NULL;
			LlmJobCommitXact();
			return LLM_JOB_MORE;
		}
	}
	else if (LlmJobExecAsRole(run, run->select_plan, &keys, NULL, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the rows of llm job " INT64_FORMAT, run->id);
	n_rows = (int) SPI_processed;
	if (n_rows > 0 && run->after_plan != NULL)
	{
		char	   *last = SPI_getvalue(SPI_tuptable->vals[n_rows - 1], SPI_tuptable->tupdesc, 3);

		if (run->last_key != NULL)
			pfree(run->last_key);
		run->last_key = MemoryContextStrdup(run->cxt, last);
	}
	if (n_rows == 0)
	{
		bool		isnull;
		int64		left;

		/* none to take: done, unless others hold some */
		if (LlmJobExecAsRole(run, run->count_plan, &keys, NULL, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not count the rows of llm job " INT64_FORMAT, run->id);
		left = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		if (left > 0)
		{
			LlmJobCommitXact();
			return LLM_JOB_WAIT;
		}
		if (run->continuous)
		{
			if (LlmJobExecCatalog(run, psprintf("UPDATE %s SET rows_total = rows_done WHERE id OPERATOR(pg_catalog.=) $1",
												run->cat.job_rel), 1, &argtype, &arg, NULL) != SPI_OK_UPDATE)
				elog(ERROR, "could not update llm job " INT64_FORMAT, run->id);
			LlmJobCommitXact();
			return LLM_JOB_IDLE;
		}
		if (LlmJobExecCatalog(run, psprintf("UPDATE %s SET state = 'done', finished_at = pg_catalog.now(), "
											"rows_total = rows_done WHERE id OPERATOR(pg_catalog.=) $1",
											run->cat.job_rel), 1, &argtype, &arg, NULL) != SPI_OK_UPDATE)
			elog(ERROR, "could not update llm job " INT64_FORMAT, run->id);
		LlmJobCommitXact();
		return LLM_JOB_END;
	}
	rows = palloc0(sizeof(LlmJobRow) * n_rows);
	for (int i = 0; i < n_rows; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		v;

		rows[i].rel = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
		rows[i].tid = *(ItemPointer) DatumGetPointer(SPI_getbinval(tup, desc, 2, &isnull));
		rows[i].key = SPI_getvalue(tup, desc, 3);
		v = SPI_getbinval(tup, desc, 4, &rows[i].input_null);
		rows[i].input = rows[i].input_null ? (Datum) 0 : datumCopy(v, false, -1);
	}

	/* each row's requests, then all of them at once */
	for (int i = 0; i < n_rows; i++)
		LlmJobTryRow(LlmJobBuildRow, run, rows, i);
	for (int i = 0; i < n_rows; i++)
		n_all += rows[i].sqlerrcode == 0 ? rows[i].n_jobs : 0;
	all = palloc(sizeof(LlmJob) * Max(n_all, 1));
	n_all = 0;
	for (int i = 0; i < n_rows; i++)
		if (rows[i].sqlerrcode == 0)
		{
			memcpy(&all[n_all], rows[i].jobs, sizeof(LlmJob) * rows[i].n_jobs);
			n_all += rows[i].n_jobs;
		}
	run->batch_jobs = all;
	run->n_batch_jobs = n_all;
	edata = LlmJobTry(LlmJobRunRows, run, rows, -1);
	if (edata == NULL)
	{
		n_all = 0;
		for (int i = 0; i < n_rows; i++)
			if (rows[i].sqlerrcode == 0)
			{
				memcpy(rows[i].jobs, &all[n_all], sizeof(LlmJob) * rows[i].n_jobs);
				n_all += rows[i].n_jobs;
			}
	}
	else
	{
		/* a request refused before any answer: each row alone finds whose */
		if (LlmJobTransient(edata->sqlerrcode))
			ReThrowError(edata);
		for (int i = 0; i < n_rows; i++)
			if (rows[i].sqlerrcode == 0)
				LlmJobTryRow(LlmJobRunRows, run, rows, i);
	}

	/* each row's answer, or why it has none */
	for (int i = 0; i < n_rows; i++)
	{
		LlmJobRow  *row = &rows[i];
		bool		isnull = false;
		NullableDatum *args;

		if (row->sqlerrcode != 0)
			continue;
		for (int j = 0; j < row->n_jobs; j++)
		{
			n_requests += !row->jobs[j].shared;
			completion_tokens += row->jobs[j].completion_tokens;
			if (row->jobs[j].failed && row->sqlerrcode == 0)
			{
				if (LlmJobTransient(row->jobs[j].sqlerrcode))
					ereport(ERROR,
							(errcode(row->jobs[j].sqlerrcode),
							 errmsg("llm job " INT64_FORMAT " stops: %s", run->id, row->jobs[j].error)));
				row->sqlerrcode = row->jobs[j].sqlerrcode;
				row->message = row->jobs[j].error;
			}
		}
		if (row->sqlerrcode != 0)
			continue;
		args = palloc(sizeof(NullableDatum) * run->nargs);
		memcpy(args, run->args, sizeof(NullableDatum) * run->nargs);
		args[0].value = row->input;
		args[0].isnull = row->input_null;
		row->result = LlmBatchCallResult(run->fi->func, args, row->jobs, row->n_jobs, &isnull);
		if (isnull)
		{
			row->sqlerrcode = ERRCODE_NULL_VALUE_NOT_ALLOWED;
			row->message = "the answer is null";
		}
	}

	/* the answers, in one statement, else row by row */
	if (!LlmJobUpdateAll(run, rows, n_rows))
		for (int i = 0; i < n_rows; i++)
			if (rows[i].sqlerrcode == 0)
				LlmJobTryRow(LlmJobUpdateRow, run, rows, i);

	/* the rows that failed, and the job's counts */
	for (int i = 0; i < n_rows; i++)
	{
		Oid			types[4] = {INT8OID, TEXTOID, TEXTOID, TEXTOID};
		Datum		values[4];

		if (rows[i].sqlerrcode == 0)
			continue;
		n_failed++;
		values[0] = arg;
		values[1] = CStringGetTextDatum(rows[i].key);
		values[2] = CStringGetTextDatum(unpack_sql_state(rows[i].sqlerrcode));
		values[3] = CStringGetTextDatum(rows[i].message);
		if (LlmJobExecCatalog(run, psprintf("INSERT INTO %s (job_id, row_key, sqlstate, message) VALUES ($1, $2, $3, $4) "
											"ON CONFLICT (job_id, row_key) DO UPDATE SET sqlstate = EXCLUDED.sqlstate, "
											"message = EXCLUDED.message, failed_at = EXCLUDED.failed_at",
											run->cat.error_rel), 4, types, values, NULL) != SPI_OK_INSERT)
			elog(ERROR, "could not record a failed row of llm job " INT64_FORMAT, run->id);
		new_keys = lappend(new_keys, rows[i].key);
	}
	{
		Oid			types[5] = {INT8OID, INT8OID, INT8OID, INT8OID, FLOAT8OID};
		Datum		values[5];

		values[0] = arg;
		values[1] = Int64GetDatum(n_rows - n_failed);
		values[2] = Int64GetDatum(n_requests);
		values[3] = Int64GetDatum(completion_tokens);
		values[4] = Float8GetDatum((GetCurrentTimestamp() - start) / 1e6);
		if (LlmJobExecCatalog(run, psprintf("UPDATE %s SET state = CASE state WHEN 'queued' THEN 'running' ELSE state END, rows_done = rows_done OPERATOR(pg_catalog.+) $2, "
											"requests = requests OPERATOR(pg_catalog.+) $3, "
											"completion_tokens = completion_tokens OPERATOR(pg_catalog.+) $4, "
											"run_seconds = run_seconds OPERATOR(pg_catalog.+) $5, "
											"errors = (SELECT pg_catalog.count(*) FROM %s e "
											"WHERE e.job_id OPERATOR(pg_catalog.=) $1) "
											"WHERE id OPERATOR(pg_catalog.=) $1",
											run->cat.job_rel, run->cat.error_rel), 5, types, values, NULL) != SPI_OK_UPDATE)
			elog(ERROR, "could not update llm job " INT64_FORMAT, run->id);
	}
	{
		MemoryContext old = MemoryContextSwitchTo(run->cxt);
		ListCell   *lc;

		foreach(lc, new_keys)
			run->failed_keys = lappend(run->failed_keys, pstrdup(lfirst(lc)));
		MemoryContextSwitchTo(old);
	}
	LlmJobCommitXact();
	return LLM_JOB_MORE;
}

/* Mark job run->id failed with message (in a transaction of its own). */
static void
LlmJobFail(LlmJobRun *run, const char *message)
{
	Oid			types[2] = {INT8OID, TEXTOID};
	Datum		values[2] = {Int64GetDatum(run->id), CStringGetTextDatum(message ? message : "unknown error")};

	LlmJobBeginXact("llm job: failing");
	if (run->continuous && run->cat.job_rel != NULL)
		LlmJobTrigger(&run->cat, run->id, run->relid, false);
	if (run->cat.job_rel != NULL || LlmJobCatalogFind(&run->cat))
		(void) LlmJobExecCatalog(run, psprintf("UPDATE %s SET state = 'failed', error = $2, finished_at = pg_catalog.now() "
											   "WHERE id OPERATOR(pg_catalog.=) $1 AND state IN ('queued', 'running')",
											   run->cat.job_rel), 2, types, values, NULL);
	LlmJobCommitXact();
}

/*
 * Main of a job's worker: main_arg is the job's id (0: resume the jobs of
 * the database instead), bgw_extra its database and role.
 */
void
LlmJobWorkerMain(Datum main_arg)
{
	LlmJobRun	run;
	Oid			dboid;
	LOCKTAG		tag;

	memset(&run, 0, sizeof(run));
	run.id = DatumGetInt64(main_arg);
	memcpy(&dboid, MyBgworkerEntry->bgw_extra, sizeof(Oid));
	memcpy(&run.roleid, MyBgworkerEntry->bgw_extra + sizeof(Oid), sizeof(Oid));
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (run.id == 0)
	{
		BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
		LlmJobResumeDatabase();
		proc_exit(0);
	}
	BackgroundWorkerInitializeConnectionByOid(dboid, run.roleid, LLM_BGWORKER_BYPASS_ROLELOGIN);
	pgstat_report_appname(MyBgworkerEntry->bgw_name);

	/* one worker per job */
	LlmJobLockTag(&tag, dboid, run.id);
	StartTransactionCommand();
	if (LockAcquire(&tag, ExclusiveLock, true, true) == LOCKACQUIRE_NOT_AVAIL)
	{
		CommitTransactionCommand();
		proc_exit(0);
	}
	CommitTransactionCommand();

	run.cxt = AllocSetContextCreate(TopMemoryContext, "llm job", ALLOCSET_DEFAULT_SIZES);
	PG_TRY();
	{
		if (LlmJobSetup(&run))
			for (;;)
			{
				LlmJobStep step;

				CHECK_FOR_INTERRUPTS();
				step = LlmJobBatch(&run);
				if (step == LLM_JOB_END)
					break;
				if (step == LLM_JOB_WAIT || step == LLM_JOB_IDLE)
				{
					(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
									 step == LLM_JOB_WAIT ? LLM_JOB_LOCKED_WAIT_MS : LLM_JOB_IDLE_WAIT_MS,
									 PG_WAIT_EXTENSION);
					ResetLatch(MyLatch);
				}
			}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(run.cxt);
		edata = CopyErrorData();
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
		if (LlmJobTransient(edata->sqlerrcode))
			proc_exit(1);		/* started again in LLM_JOB_RESTART_S */
		LlmJobFail(&run, edata->message);
	}
	PG_END_TRY();
	proc_exit(0);
}
