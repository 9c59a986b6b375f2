/*
 * job.c
 *		Background fill jobs: llm_fill() and llm_job_cancel / pause / resume /
 *		wait, the catalog (llm_job, llm_job_error) and starting job workers.
 *
 * llm_fill() checks everything a job could trip on before it queues it: the
 * target and column, the role's privileges, the function's arguments (by
 * building the jobs of one row exactly as the function does), and the
 * statements the worker will run (prepared and run for no rows, as the
 * caller, so a bad expression or a missing privilege fails here).  It writes
 * the job as a row of llm_job and starts its worker when the transaction
 * commits (an xact callback), never before: a worker started earlier would
 * not see the row, and one of a rolled-back call would have no job.
 *
 * Locking: llm_job is a plain table.  Its rows change under row locks: the
 * job's worker adds its progress in each batch's transaction, these
 * functions change the state; the worker reads the state between batches,
 * so a pause or cancel takes effect after the batch that runs.  One worker
 * per job: a worker holds a session lock on LlmJobLockTag for as long as it
 * runs, and one that cannot take it ends at once.  Only the owner of llm_job
 * writes the catalog (LlmJobCatalogBegin): roles see their jobs through the
 * views llm_jobs and llm_job_errors.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "parser/parser.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/fmgrprotos.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "job.h"

PG_FUNCTION_INFO_V1(llm_fill);
PG_FUNCTION_INFO_V1(llm_job_cancel);
PG_FUNCTION_INFO_V1(llm_job_pause);
PG_FUNCTION_INFO_V1(llm_job_resume);
PG_FUNCTION_INFO_V1(llm_job_wait);
PG_FUNCTION_INFO_V1(llm_job_trigger);

/* The functions a job runs; param_columns are in the order of the function's arguments after the input. */
static const LlmJobFuncInfo LlmJobFuncs[] = {
	{"generate", LLM_BATCH_GENERATE,
	"max_tokens, temperature, top_p, top_k, seed, stop, chat, 'null'::pg_catalog.text, system, json_schema, choices",
	TEXTOID},
	{"classify", LLM_BATCH_CLASSIFY, "labels, instruction, calibrate", TEXTOID},
	{"filter", LLM_BATCH_FILTER, "question, threshold, calibrate", BOOLOID},
	{"probability", LLM_BATCH_PROBABILITY, "question, calibrate", FLOAT8OID},
};

/* The largest batch_rows. */
#define LLM_JOB_MAX_BATCH_ROWS 65536

/* How often llm_job_wait looks at the job. */
#define LLM_JOB_WAIT_MS 100

/* Jobs whose worker starts when this transaction commits: a job id and its role. */
typedef struct LlmJobPending
{
	int64		job_id;
	Oid			roleid;
	int			wake_pid;		/* PendingWakes: the worker to wake */
} LlmJobPending;

static List *PendingLaunches = NIL;	/* of LlmJobPending, in TopTransactionContext */
static List *PendingWakes = NIL;	/* the same, of continuous jobs whose trigger fired */

/* The job function called name, or NULL. */
const LlmJobFuncInfo *
LlmJobFuncByName(const char *name)
{
	for (int i = 0; i < lengthof(LlmJobFuncs); i++)
		if (strcmp(LlmJobFuncs[i].name, name) == 0)
			return &LlmJobFuncs[i];
	return NULL;
}

/*
 * Find the extension's catalog in the current database (SPI connected);
 * false when llm is not installed here or is older than its jobs.
 */
bool
LlmJobCatalogFind(LlmJobCatalog *cat)
{
	HeapTuple	tuple;
	Oid			relid;
	char	   *nspname;

	if (SPI_execute("SELECT extnamespace FROM pg_catalog.pg_extension WHERE extname OPERATOR(pg_catalog.=) 'llm'",
					true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not look up extension llm");
	if (SPI_processed == 0)
		return false;
	cat->nsp = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &(bool) {false}));
	relid = get_relname_relid("llm_job", cat->nsp);
	if (!OidIsValid(relid))
		return false;
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tuple))
		return false;
	cat->owner = ((Form_pg_class) GETSTRUCT(tuple))->relowner;
	ReleaseSysCache(tuple);
	nspname = get_namespace_name(cat->nsp);
	cat->job_rel = psprintf("%s.llm_job", quote_identifier(nspname));
	cat->error_rel = psprintf("%s.llm_job_error", quote_identifier(nspname));
	return true;
}

/* Connect SPI and find the current database's job catalog; errors when it has none. */
static void
LlmJobConnectCatalog(LlmJobCatalog *cat)
{
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (!LlmJobCatalogFind(cat))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("extension llm has no job catalog in this database"),
				 errhint("Run ALTER EXTENSION llm UPDATE.")));
}

/*
 * Act as the catalog's owner until LlmJobCatalogEnd (an error's abort also
 * ends it).  The owner is a superuser, and the statements that follow name
 * operators and functions without a schema, so they run with search_path
 * pg_catalog, pg_temp (objects of pg_temp are never found as operators or
 * functions) in a restricted security context: no caller's search_path can
 * put its own "=" under the owner's privileges.
 */
void
LlmJobCatalogBegin(const LlmJobCatalog *cat, LlmJobAs *as)
{
	GetUserIdAndSecContext(&as->user, &as->sec);
	SetUserIdAndSecContext(cat->owner, as->sec | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
	as->guc_level = LlmJobSafeSearchPath();
}

/* Act as before LlmJobCatalogBegin. */
void
LlmJobCatalogEnd(const LlmJobAs *as)
{
	AtEOXact_GUC(true, as->guc_level);
	SetUserIdAndSecContext(as->user, as->sec);
}

/* Set search_path to pg_catalog, pg_temp in a new GUC nest level; that level, for AtEOXact_GUC. */
int
LlmJobSafeSearchPath(void)
{
	int			level = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return level;
}

/*
 * The arguments of job job_id's function (palloc'd in the caller's memory
 * context, *nargs of them), read from its row; the first, the row's input,
 * is left NULL.  SPI connected.
 */
NullableDatum *
LlmJobArgs(const LlmJobCatalog *cat, int64 job_id, const LlmJobFuncInfo *fi, int *nargs)
{
	char	   *sql = psprintf("SELECT %s FROM %s WHERE id OPERATOR(pg_catalog.=) $1",
							   fi->param_columns, cat->job_rel);
	Oid			argtype = INT8OID;
	Datum		arg = Int64GetDatum(job_id);
	LlmJobAs	as;
	NullableDatum *args;
	int			n = LlmBatchFuncNargs(fi->func);
	int			ret;
	MemoryContext cxt = CurrentMemoryContext;

	LlmJobCatalogBegin(cat, &as);
	ret = SPI_execute_with_args(sql, 1, &argtype, &arg, NULL, false, 1);
	LlmJobCatalogEnd(&as);
	MemoryContextSwitchTo(cxt); /* SPI leaves its own */
	if (ret != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "llm job " INT64_FORMAT " has no row", job_id);
	Assert(SPI_tuptable->tupdesc->natts == n - 1);
	args = palloc0(sizeof(NullableDatum) * n);
	args[0].isnull = true;
	for (int a = 1; a < n; a++)
	{
		Form_pg_attribute att = TupleDescAttr(SPI_tuptable->tupdesc, a - 1);
		Datum		v = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, a, &args[a].isnull);

		/* copied out of SPI's memory, into the caller's */
		args[a].value = args[a].isnull ? (Datum) 0 : datumTransfer(v, att->attbyval, att->attlen);
	}
	return args;
}

/* The session lock a job's worker holds: an advisory lock tag of our own kind (field 4 = 3). */
void
LlmJobLockTag(LOCKTAG *tag, Oid dboid, int64 job_id)
{
	SET_LOCKTAG_ADVISORY(*tag, dboid, (uint32) ((uint64) job_id >> 32), (uint32) job_id, 3);
}

/*
 * Describe the worker of job job_id (0: the worker that resumes the jobs of
 * database dboid, as the bootstrap superuser) as roleid.
 */
void
LlmJobWorkerInit(BackgroundWorker *worker, Oid dboid, Oid roleid, int64 job_id)
{
	memset(worker, 0, sizeof(*worker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	/* a job's worker that dies is started again (it ends with 0 when it is done) */
	worker->bgw_restart_time = job_id != 0 ? LLM_JOB_RESTART_S : BGW_NEVER_RESTART;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "llm");
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "LlmJobWorkerMain");
	if (job_id != 0)
		snprintf(worker->bgw_name, BGW_MAXLEN, "llm job " INT64_FORMAT, job_id);
	else
		snprintf(worker->bgw_name, BGW_MAXLEN, "llm job resume");
	snprintf(worker->bgw_type, BGW_MAXLEN, job_id != 0 ? "llm job" : "llm job resume");
	worker->bgw_main_arg = Int64GetDatum(job_id);
	memcpy(worker->bgw_extra, &dboid, sizeof(Oid));
	memcpy(worker->bgw_extra + sizeof(Oid), &roleid, sizeof(Oid));
}

/* Start the worker of job job_id in database dboid as roleid; false when no background worker slot is free. */
bool
LlmJobLaunch(Oid dboid, Oid roleid, int64 job_id)
{
	BackgroundWorker worker;
	BackgroundWorkerHandle *handle;

	LlmJobWorkerInit(&worker, dboid, roleid, job_id);
	return RegisterDynamicBackgroundWorker(&worker, &handle);
}

/* Start the workers of the jobs this transaction queued, once it commits. */
static void
LlmJobXactCallback(XactEvent event, void *arg)
{
	ListCell   *lc;

	if (event == XACT_EVENT_COMMIT)
	{
		foreach(lc, PendingWakes)
		{
			LlmJobPending *p = lfirst(lc);
			PGPROC	   *proc = BackendPidGetProc(p->wake_pid);

			if (proc != NULL)
				SetLatch(&proc->procLatch);
		}
		foreach(lc, PendingLaunches)
		{
			LlmJobPending *p = lfirst(lc);

			if (!LlmJobLaunch(MyDatabaseId, p->roleid, p->job_id))
				ereport(WARNING,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("could not start a background worker for llm job " INT64_FORMAT, p->job_id),
						 errdetail("Every background worker slot is in use."),
						 errhint("Raise max_worker_processes, then call llm_job_resume(" INT64_FORMAT ").",
								 p->job_id)));
		}
	}
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PARALLEL_COMMIT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
	{
		PendingLaunches = NIL;	/* its memory goes with the transaction's */
		PendingWakes = NIL;
	}
}

/* Append to *list, for the end of this transaction, job job_id with roleid (a launch) or pid (a wake). */
static void
LlmJobPendingAdd(List **list, int64 job_id, Oid roleid, int pid)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	LlmJobPending *p = palloc0(sizeof(LlmJobPending));

	p->job_id = job_id;
	p->roleid = roleid;
	p->wake_pid = pid;
	*list = lappend(*list, p);
	MemoryContextSwitchTo(old);
}

/* Start job job_id's worker, as roleid, when this transaction commits. */
static void
LlmJobLaunchAtCommit(int64 job_id, Oid roleid)
{
	LlmJobPendingAdd(&PendingLaunches, job_id, roleid, 0);
}

/* Register the launcher and the commit callback (_PG_init). */
void
LlmJobInit(void)
{
	LlmJobLauncherRegister();
	RegisterXactCallback(LlmJobXactCallback, NULL);
}

/* Error context of LlmJobCheckExpr: a syntax error's position is in the text it parses, not in the query. */
static void
LlmJobCheckExprContext(void *arg)
{
	int			pos = geterrposition();

	if (pos > 0)
	{
		errposition(0);
		internalerrposition(pos);
		internalerrquery((const char *) arg);
	}
}

/*
 * Check that text, llm_fill's argument what ("prompt" or "where_clause"),
 * is one SQL expression and nothing more.  It is written, in parentheses,
 * into the worker's statements; so it must parse alone, or "true) OR
 * (true" would close the parenthesis and change the statement.
 */
static void
LlmJobCheckExpr(const char *text, const char *what)
{
	char	   *sql = psprintf("SELECT\n%s\n", text);
	ErrorContextCallback errcb;
	List	   *stmts;
	SelectStmt *sel = NULL;

	errcb.callback = LlmJobCheckExprContext;
	errcb.arg = sql;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	stmts = raw_parser(sql, RAW_PARSE_DEFAULT);
	error_context_stack = errcb.previous;

	if (list_length(stmts) == 1 && IsA(linitial_node(RawStmt, stmts)->stmt, SelectStmt))
		sel = (SelectStmt *) linitial_node(RawStmt, stmts)->stmt;
	if (sel == NULL || sel->op != SETOP_NONE || list_length(sel->targetList) != 1 ||
		linitial_node(ResTarget, sel->targetList)->name != NULL ||
		sel->fromClause != NIL || sel->whereClause != NULL || sel->groupClause != NIL ||
		sel->havingClause != NULL || sel->windowClause != NIL || sel->sortClause != NIL ||
		sel->limitCount != NULL || sel->limitOffset != NULL || sel->lockingClause != NIL ||
		sel->withClause != NULL || sel->distinctClause != NIL || sel->valuesLists != NIL ||
		sel->intoClause != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("%s must be a single SQL expression", what),
				 errdetail("It is \"%s\".", text)));
}

/*
 * The primary key of relid: its index's pg_index row (to be released), or
 * NULL when it has none.
 */
static HeapTuple
LlmJobPrimaryKey(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	Oid			pk;

	(void) RelationGetIndexList(rel);	/* sets rd_pkindex */
	pk = rel->rd_pkindex;
	table_close(rel, AccessShareLock);
	if (!OidIsValid(pk))
		return NULL;
	return SearchSysCache1(INDEXRELID, ObjectIdGetDatum(pk));
}

/*
 * The text of the row key of relid's rows: its primary key's columns (one
 * as text, several as a row), else the row's ctid.
 */
char *
LlmJobRowKey(Oid relid)
{
	HeapTuple	tuple = LlmJobPrimaryKey(relid);
	StringInfoData key;

	if (!HeapTupleIsValid(tuple))
		return pstrdup("t.ctid::pg_catalog.text");
	initStringInfo(&key);
	{
		Form_pg_index index = (Form_pg_index) GETSTRUCT(tuple);
		int			n = index->indnkeyatts;

		appendStringInfoString(&key, n > 1 ? "ROW(" : "(");
		for (int i = 0; i < n; i++)
			appendStringInfo(&key, "%st.%s", i > 0 ? ", " : "",
							 quote_identifier(get_attname(relid, index->indkey.values[i], false)));
		appendStringInfoString(&key, ")::pg_catalog.text");
	}
	ReleaseSysCache(tuple);
	return key.data;
}

/*
 * The column of relid's primary key when it has one of one column (its
 * quoted name, and its type's name in *type), else NULL: a job walks the
 * table in its order, each batch after the last.
 */
char *
LlmJobKeyColumn(Oid relid, char **type)
{
	HeapTuple	tuple = LlmJobPrimaryKey(relid);
	char	   *col = NULL;

	if (!HeapTupleIsValid(tuple))
		return NULL;
	if (((Form_pg_index) GETSTRUCT(tuple))->indnkeyatts == 1)
	{
		AttrNumber	attnum = ((Form_pg_index) GETSTRUCT(tuple))->indkey.values[0];
		Oid			typid;
		int32		typmod;
		Oid			collid;

		col = pstrdup(quote_identifier(get_attname(relid, attnum, false)));
		get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collid);
		*type = format_type_with_typemod(typid, typmod);
	}
	ReleaseSysCache(tuple);
	return col;
}

/*
 * The statement that takes the next rows of a job: each row's table,
 * ctid, key and input, for at most limit rows where the column is NULL,
 * the job's where_clause holds and the key is not in $1 (the rows that
 * failed), locked, skipping rows another transaction has locked.  A table
 * with a primary key of one column is taken in its order; after_key: only
 * rows after $2 (the key of the last row taken, as text), so that a batch
 * does not pass again over the rows filled before it.
 */
char *
LlmJobSelectSql(Oid relid, AttrNumber attnum, const char *prompt, const char *where, int limit, bool after_key)
{
	char	   *rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
	char	   *type = NULL;
	char	   *keycol = LlmJobKeyColumn(relid, &type);

	return psprintf("SELECT t.tableoid, t.ctid, %s, (\n%s\n)::pg_catalog.text FROM %s t "
					"WHERE t.%s IS NULL AND (\n%s\n) AND %s OPERATOR(pg_catalog.<>) ALL ($1)%s "
					"%s LIMIT %d FOR UPDATE OF t SKIP LOCKED",
					LlmJobRowKey(relid), prompt, rel,
					quote_identifier(get_attname(relid, attnum, false)),
					where ? where : "true", LlmJobRowKey(relid),
					keycol && after_key ? psprintf(" AND t.%s > CAST($2 AS %s)", keycol, type) : "",
					keycol ? psprintf("ORDER BY t.%s", keycol) : "", limit);
}

/* The statement that counts the rows a job has left to fill ($1 as for LlmJobSelectSql). */
char *
LlmJobCountSql(Oid relid, AttrNumber attnum, const char *where)
{
	char	   *rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));

	return psprintf("SELECT pg_catalog.count(*) FROM %s t WHERE t.%s IS NULL AND (\n%s\n) AND %s OPERATOR(pg_catalog.<>) ALL ($1)",
					rel, quote_identifier(get_attname(relid, attnum, false)), where ? where : "true",
					LlmJobRowKey(relid));
}

/*
 * The statement that writes a batch's answers: $1 the rows' tables, $2
 * their ctids, $3 the answers (of the function's result type), cast to the
 * column's type; it returns each row written (table, the ctid it had) and
 * whether its column is now set (a trigger may have skipped the row or
 * cleared the column).
 */
char *
LlmJobUpdateSql(Oid relid, AttrNumber attnum, const LlmJobFuncInfo *fi)
{
	char	   *rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
	Oid			typid;
	int32		typmod;
	Oid			collid;

	get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collid);
	return psprintf("UPDATE %s t SET %s = CAST(v.val AS %s) "
					"FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.oid[]), pg_catalog.unnest($2::pg_catalog.tid[]), "
					"pg_catalog.unnest($3::%s[])) AS v(rel, tid, val) "
					"WHERE t.tableoid OPERATOR(pg_catalog.=) v.rel AND t.ctid OPERATOR(pg_catalog.=) v.tid "
					"RETURNING v.rel, v.tid, t.%s IS NOT NULL",
					rel, quote_identifier(get_attname(relid, attnum, false)),
					format_type_with_typemod(typid, typmod), format_type_be_qualified(fi->result_type),
					quote_identifier(get_attname(relid, attnum, false)));
}

/* The parameter types of LlmJobUpdateSql's statement. */
void
LlmJobUpdateTypes(const LlmJobFuncInfo *fi, Oid *types)
{
	types[0] = OIDARRAYOID;
	types[1] = TIDARRAYOID;
	types[2] = get_array_type(fi->result_type);
}

/* Error out unless the current role may fill column attnum of relid. */
static void
LlmJobCheckTarget(Oid relid, AttrNumber attnum, const char *colname)
{
	char		relkind = get_rel_relkind(relid);

	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", get_rel_name(relid)),
				 errdetail("llm_fill fills a column of a table or of a partitioned table.")));
	if (attnum <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of relation \"%s\" does not exist", colname, get_rel_name(relid))));
	if (get_attgenerated(relid, attnum) != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("cannot fill generated column \"%s\"", colname)));
	if (pg_class_aclcheck(relid, GetUserId(), ACL_UPDATE) != ACLCHECK_OK &&
		pg_attribute_aclcheck(relid, attnum, GetUserId(), ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to fill column \"%s\" of table \"%s\"", colname, get_rel_name(relid)),
				 errdetail("Filling a column needs the UPDATE privilege on it.")));
#if PG_VERSION_NUM < 170000
	{
		HeapTuple	tuple = SearchSysCache1(AUTHOID, ObjectIdGetDatum(GetUserId()));
		bool		canlogin = HeapTupleIsValid(tuple) && ((Form_pg_authid) GETSTRUCT(tuple))->rolcanlogin;

		if (HeapTupleIsValid(tuple))
			ReleaseSysCache(tuple);
		if (!canlogin)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("role \"%s\" cannot run a background job", GetUserNameFromId(GetUserId(), false)),
					 errdetail("A job runs in a background worker that logs in as its role, and the role has no LOGIN."),
					 errhint("PostgreSQL 17 and later need no LOGIN.")));
	}
#endif
}

/*
 * Create (create) or drop the statement trigger of continuous job job_id
 * on relid, as the catalog's owner (llm_fill has checked the caller's
 * TRIGGER privilege).  SPI connected.
 */
void
LlmJobTrigger(const LlmJobCatalog *cat, int64 job_id, Oid relid, bool create)
{
	char	   *rel;
	LlmJobAs	as;
	int			ret;

	if (get_rel_name(relid) == NULL)
		return;					/* the table is gone, and its triggers with it */
	rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), get_rel_name(relid));
	LlmJobCatalogBegin(cat, &as);
	if (create)
		ret = SPI_execute(psprintf("CREATE TRIGGER llm_fill_" INT64_FORMAT " AFTER INSERT OR UPDATE ON %s "
								   "FOR EACH STATEMENT EXECUTE FUNCTION %s.llm_job_trigger('" INT64_FORMAT "')",
								   job_id, rel, quote_identifier(get_namespace_name(cat->nsp)), job_id),
						  false, 0);
	else
		ret = SPI_execute(psprintf("DROP TRIGGER IF EXISTS llm_fill_" INT64_FORMAT " ON %s", job_id, rel),
						  false, 0);
	LlmJobCatalogEnd(&as);
	if (ret != SPI_OK_UTILITY)
		elog(ERROR, "could not %s the trigger of llm job " INT64_FORMAT, create ? "create" : "drop", job_id);
}

/* Wake the worker of job job_id, whose pid is pid, when this transaction commits. */
static void
LlmJobWakeAtCommit(int64 job_id, int pid)
{
	LlmJobPendingAdd(&PendingWakes, job_id, InvalidOid, pid);
}

/*
 * llm_job_trigger()
 *		The statement trigger of a continuous job (its argument: the job
 *		id): its worker looks for rows to fill once the transaction
 *		commits.
 */
Datum
llm_job_trigger(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	LlmJobCatalog cat;
	LlmJobAs	as;
	Oid			argtype = INT8OID;
	Datum		arg;
	int64		job_id;
	int			ret;

	if (!CALLED_AS_TRIGGER(fcinfo) || trigdata->tg_trigger->tgnargs != 1)
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("llm_job_trigger() must be called as a trigger with a job id")));
	job_id = pg_strtoint64(trigdata->tg_trigger->tgargs[0]);
	arg = Int64GetDatum(job_id);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	if (LlmJobCatalogFind(&cat))
	{
		LlmJobCatalogBegin(&cat, &as);
		ret = SPI_execute_with_args(psprintf("SELECT worker_pid FROM %s WHERE id OPERATOR(pg_catalog.=) $1 "
											 "AND state OPERATOR(pg_catalog.=) 'running'", cat.job_rel),
									1, &argtype, &arg, NULL, true, 1);
		LlmJobCatalogEnd(&as);
		if (ret == SPI_OK_SELECT && SPI_processed == 1)
		{
			bool		isnull;
			Datum		pid = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);

			if (!isnull)
				LlmJobWakeAtCommit(job_id, DatumGetInt32(pid));
		}
	}
	SPI_finish();
	return PointerGetDatum(NULL);
}

/* llm_fill's arguments, by position. */
enum
{
	FILL_TARGET, FILL_COLUMN, FILL_PROMPT, FILL_FUNCTION, FILL_MAX_TOKENS, FILL_TEMPERATURE, FILL_TOP_P,
	FILL_TOP_K, FILL_SEED, FILL_STOP, FILL_CHAT, FILL_SYSTEM, FILL_JSON_SCHEMA, FILL_CHOICES, FILL_LABELS,
	FILL_INSTRUCTION, FILL_QUESTION, FILL_THRESHOLD, FILL_CALIBRATE, FILL_WHERE, FILL_BATCH_ROWS, FILL_CONTINUOUS,
	FILL_NARGS
};

/* llm_job's columns for llm_fill's arguments from FILL_MAX_TOKENS on, and their types. */
static const char *const FillColumns[] = {
	"max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "chat", "system", "json_schema",
	"choices", "labels", "instruction", "question", "threshold", "calibrate", "where_clause", "batch_rows",
	"continuous"
};
static const Oid FillTypes[] = {
	INT4OID, FLOAT8OID, FLOAT8OID, INT4OID, INT8OID, TEXTARRAYOID, BOOLOID, TEXTOID, JSONBOID,
	TEXTARRAYOID, TEXTARRAYOID, TEXTOID, TEXTOID, FLOAT8OID, BOOLOID, TEXTOID, INT4OID, BOOLOID
};

/*
 * llm_fill(target, column_name, prompt, function, max_tokens, temperature, top_p, top_k, seed, stop, chat,
 *			system, json_schema, choices, labels, instruction, question, threshold, calibrate,
 *			where_clause, batch_rows, continuous)
 *		Queue a job that fills column_name of target's rows where it is
 *		NULL (continuous: and keeps filling them); its id.
 */
Datum
llm_fill(PG_FUNCTION_ARGS)
{
	static const int required[] = {FILL_TARGET, FILL_COLUMN, FILL_PROMPT, FILL_FUNCTION, FILL_MAX_TOKENS,
	FILL_TEMPERATURE, FILL_TOP_P, FILL_TOP_K, FILL_CALIBRATE, FILL_BATCH_ROWS, FILL_CONTINUOUS};
	static const char *const required_names[] = {"target", "column_name", "prompt", "function", "max_tokens",
	"temperature", "top_p", "top_k", "calibrate", "batch_rows", "continuous"};
	Oid			relid;
	char	   *colname;
	AttrNumber	attnum;
	char	   *prompt;
	char	   *where;
	const LlmJobFuncInfo *fi;
	int32		batch_rows;
	LlmJobCatalog cat;
	LlmJobAs	as;
	StringInfoData sql;
	Oid			types[5 + lengthof(FillColumns)];
	Datum		values[5 + lengthof(FillColumns)];
	char		nulls[5 + lengthof(FillColumns)];
	int			n = 0;
	int64		job_id;
	NullableDatum *args;
	int			nargs;
	int			n_jobs;
	int			ret;

	StaticAssertStmt(lengthof(FillColumns) == FILL_NARGS - FILL_MAX_TOKENS, "a column per argument");
	StaticAssertStmt(lengthof(FillTypes) == lengthof(FillColumns), "a type per column");
	LlmShmemCheck();
	for (int i = 0; i < lengthof(required); i++)
		if (PG_ARGISNULL(required[i]))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not be null", required_names[i])));

	relid = PG_GETARG_OID(FILL_TARGET);
	colname = NameStr(*PG_GETARG_NAME(FILL_COLUMN));
	prompt = text_to_cstring(PG_GETARG_TEXT_PP(FILL_PROMPT));
	where = PG_ARGISNULL(FILL_WHERE) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(FILL_WHERE));
	batch_rows = PG_GETARG_INT32(FILL_BATCH_ROWS);

	fi = LlmJobFuncByName(text_to_cstring(PG_GETARG_TEXT_PP(FILL_FUNCTION)));
	if (fi == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("unknown fill function \"%s\"", text_to_cstring(PG_GETARG_TEXT_PP(FILL_FUNCTION))),
				 errhint("The function is one of generate, classify, filter and probability.")));
	if ((fi->func == LLM_BATCH_CLASSIFY && PG_ARGISNULL(FILL_LABELS)) ||
		((fi->func == LLM_BATCH_FILTER || fi->func == LLM_BATCH_PROBABILITY) && PG_ARGISNULL(FILL_QUESTION)))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be null", fi->func == LLM_BATCH_CLASSIFY ? "labels" : "question"),
				 errdetail("function => '%s' needs it.", fi->name)));
	if (batch_rows < 1 || batch_rows > LLM_JOB_MAX_BATCH_ROWS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch_rows must be between 1 and %d", LLM_JOB_MAX_BATCH_ROWS)));
	attnum = get_attnum(relid, colname);
	if (get_rel_name(relid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	LlmJobCheckTarget(relid, attnum, colname);
	if (PG_GETARG_BOOL(FILL_CONTINUOUS) && pg_class_aclcheck(relid, GetUserId(), ACL_TRIGGER) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to keep column \"%s\" of table \"%s\" filled", colname, get_rel_name(relid)),
				 errdetail("A continuous job puts a trigger on the table, which needs the TRIGGER privilege on it.")));
	LlmJobCheckExpr(prompt, "prompt");
	if (where != NULL)
		LlmJobCheckExpr(where, "where_clause");

	LlmJobConnectCatalog(&cat);

	/* the job's row */
	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (role, target, column_name, function, prompt", cat.job_rel);
	for (int i = 0; i < lengthof(FillColumns); i++)
		appendStringInfo(&sql, ", %s", FillColumns[i]);
	appendStringInfoString(&sql, ", search_path) VALUES ($1, $2, $3, $4, $5");
	types[n] = OIDOID, values[n] = ObjectIdGetDatum(GetUserId()), nulls[n++] = ' ';
	types[n] = OIDOID, values[n] = ObjectIdGetDatum(relid), nulls[n++] = ' ';
	types[n] = NAMEOID, values[n] = PG_GETARG_DATUM(FILL_COLUMN), nulls[n++] = ' ';
	types[n] = TEXTOID, values[n] = CStringGetTextDatum(fi->name), nulls[n++] = ' ';
	types[n] = TEXTOID, values[n] = PG_GETARG_DATUM(FILL_PROMPT), nulls[n++] = ' ';
	for (int i = 0; i < lengthof(FillColumns); i++)
	{
		int			a = FILL_MAX_TOKENS + i;

		appendStringInfo(&sql, ", $%d", n + 1);
		types[n] = FillTypes[i];
		values[n] = PG_ARGISNULL(a) ? (Datum) 0 : PG_GETARG_DATUM(a);
		nulls[n++] = PG_ARGISNULL(a) ? 'n' : ' ';
	}
	appendStringInfo(&sql, ", %s) RETURNING id",
					 quote_literal_cstr(GetConfigOption("search_path", false, false)));
	LlmJobCatalogBegin(&cat, &as);
	ret = SPI_execute_with_args(sql.data, n, types, values, nulls, false, 0);
	LlmJobCatalogEnd(&as);
	if (ret != SPI_OK_INSERT_RETURNING || SPI_processed != 1)
		elog(ERROR, "could not insert the llm job");
	job_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &(bool) {false}));

	/* the function's arguments fail here as they would for a row */
	args = LlmJobArgs(&cat, job_id, fi, &nargs);
	args[0].value = CStringGetTextDatum("x");
	args[0].isnull = false;
	(void) LlmBatchCallJobs(fi->func, args, &n_jobs);

	/* the worker's statements, run for no rows as this role: expressions, types and privileges */
	{
		Oid			argtype = TEXTARRAYOID;
		Datum		none = PointerGetDatum(construct_empty_array(TEXTOID));
		Oid			update_types[3];
		char	   *select = LlmJobSelectSql(relid, attnum, prompt, where, 1, false);
		SPIPlanPtr	plan = SPI_prepare(psprintf("SELECT * FROM (%s) s LIMIT 0", select), 1, &argtype);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		ret = SPI_execute_plan(plan, &none, NULL, false, 0);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "could not check the job's statement: %s", SPI_result_code_string(ret));
		LlmJobUpdateTypes(fi, update_types);
		if (SPI_prepare(LlmJobUpdateSql(relid, attnum, fi), 3, update_types) == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	}
	if (PG_GETARG_BOOL(FILL_CONTINUOUS))
		LlmJobTrigger(&cat, job_id, relid, true);
	SPI_finish();

	LlmJobLaunchAtCommit(job_id, GetUserId());
	PG_RETURN_INT64(job_id);
}

/*
 * Set job job_id's state to new_state when it is one of from (a
 * comma-separated list of quoted states), as a role with the privileges
 * of the job's role; whether it was.  Cancelling a continuous job drops
 * its trigger.  Errors when there is no such job
 * the current role may see.  *roleid gets the job's role.
 */
static bool
LlmJobSetState(int64 job_id, const char *from, const char *new_state, Oid *roleid)
{
	LlmJobCatalog cat;
	LlmJobAs	as;
	Oid			argtype = INT8OID;
	Datum		arg = Int64GetDatum(job_id);
	bool		isnull;
	bool		changed;
	Oid			relid;
	bool		continuous;
	int			ret;

	LlmJobConnectCatalog(&cat);
	LlmJobCatalogBegin(&cat, &as);
	ret = SPI_execute_with_args(psprintf("SELECT role, state IN (%s), target, continuous FROM %s "
										 "WHERE id OPERATOR(pg_catalog.=) $1 FOR UPDATE",
										 from, cat.job_rel), 1, &argtype, &arg, NULL, false, 1);
	LlmJobCatalogEnd(&as);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not read llm job " INT64_FORMAT, job_id);
	if (SPI_processed == 0 ||
		!has_privs_of_role(GetUserId(),
						   *roleid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
																	 1, &isnull))))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("llm job " INT64_FORMAT " does not exist", job_id),
				 errhint("llm_jobs lists the jobs of the roles whose privileges you have.")));
	changed = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	relid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
	continuous = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	if (changed)
	{
		LlmJobCatalogBegin(&cat, &as);
		ret = SPI_execute_with_args(psprintf("UPDATE %s SET state = '%s', finished_at = %s WHERE id OPERATOR(pg_catalog.=) $1",
											 cat.job_rel, new_state,
											 strcmp(new_state, "cancelled") == 0 ? "pg_catalog.now()" : "NULL"),
									1, &argtype, &arg, NULL, false, 0);
		LlmJobCatalogEnd(&as);
		if (ret != SPI_OK_UPDATE)
			elog(ERROR, "could not update llm job " INT64_FORMAT, job_id);
		if (strcmp(new_state, "cancelled") == 0 && continuous)
			LlmJobTrigger(&cat, job_id, relid, false);
	}
	SPI_finish();
	return changed;
}

/* llm_job_cancel(id): cancel a job that has not ended (its worker stops after its batch). */
Datum
llm_job_cancel(PG_FUNCTION_ARGS)
{
	Oid			roleid;

	PG_RETURN_BOOL(LlmJobSetState(PG_GETARG_INT64(0), "'queued', 'running', 'paused'", "cancelled", &roleid));
}

/* llm_job_pause(id): pause a queued or running job (its worker stops after its batch). */
Datum
llm_job_pause(PG_FUNCTION_ARGS)
{
	Oid			roleid;

	PG_RETURN_BOOL(LlmJobSetState(PG_GETARG_INT64(0), "'queued', 'running'", "paused", &roleid));
}

/*
 * llm_job_resume(id): queue a paused job again and start its worker at
 * commit; a queued or running one gets a worker too (which gives way if one
 * runs it already).
 */
Datum
llm_job_resume(PG_FUNCTION_ARGS)
{
	int64		job_id = PG_GETARG_INT64(0);
	Oid			roleid;
	bool		resumed = LlmJobSetState(job_id, "'paused', 'queued', 'running'", "queued", &roleid);

	if (resumed)
		LlmJobLaunchAtCommit(job_id, roleid);
	PG_RETURN_BOOL(resumed);
}

/*
 * llm_job_wait(id, timeout): wait until the job is no longer queued or
 * running, or until timeout (NULL: no limit) has passed; its state.
 */
Datum
llm_job_wait(PG_FUNCTION_ARGS)
{
	int64		job_id;
	TimestampTz deadline = 0;
	char	   *state = NULL;
	MemoryContext cxt = CurrentMemoryContext;
	ListCell   *lc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("id must not be null")));
	job_id = PG_GETARG_INT64(0);
	if (!PG_ARGISNULL(1))
	{
		Interval   *timeout = PG_GETARG_INTERVAL_P(1);
		int64		us = timeout->time + (timeout->day + (int64) timeout->month * DAYS_PER_MONTH) * USECS_PER_DAY;

		if (us < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("timeout must not be negative")));
		deadline = GetCurrentTimestamp() + us;
	}
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
				 errmsg("llm_job_wait needs the READ COMMITTED isolation level"),
				 errdetail("A transaction's snapshot would never see the job end.")));
	foreach(lc, PendingLaunches)
		if (((LlmJobPending *) lfirst(lc))->job_id == job_id)
			ereport(ERROR,
					(errcode(ERRCODE_ACTIVE_SQL_TRANSACTION),
					 errmsg("llm_job_wait cannot wait for llm job " INT64_FORMAT " in the transaction that started it", job_id),
					 errdetail("The job's worker starts when this transaction commits."),
					 errhint("Commit first, then call llm_job_wait.")));

	for (;;)
	{
		LlmJobCatalog cat;
		LlmJobAs	as;
		Oid			argtype = INT8OID;
		Datum		arg = Int64GetDatum(job_id);
		bool		isnull;
		Oid			roleid;
		int			ret;

		LlmJobConnectCatalog(&cat);
		LlmJobCatalogBegin(&cat, &as);
		ret = SPI_execute_with_args(psprintf("SELECT role, state FROM %s WHERE id OPERATOR(pg_catalog.=) $1", cat.job_rel),
									1, &argtype, &arg, NULL, false, 1);
		LlmJobCatalogEnd(&as);
		if (ret != SPI_OK_SELECT)
			elog(ERROR, "could not read llm job " INT64_FORMAT, job_id);
		if (SPI_processed == 0 ||
			!has_privs_of_role(GetUserId(),
							   roleid = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
																	   1, &isnull))))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("llm job " INT64_FORMAT " does not exist", job_id),
					 errhint("llm_jobs lists the jobs of the roles whose privileges you have.")));
		if (state != NULL)
			pfree(state);
		state = MemoryContextStrdup(cxt, SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2));
		SPI_finish();
		if (strcmp(state, "queued") != 0 && strcmp(state, "running") != 0)
			break;
		if (deadline != 0 && GetCurrentTimestamp() >= deadline)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, LLM_JOB_WAIT_MS,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	PG_RETURN_TEXT_P(cstring_to_text(state));
}
