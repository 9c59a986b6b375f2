/*
 * job_launcher.c
 *		Resuming the fill jobs when the server starts: the "llm job
 *		launcher" background worker.
 *
 * A job's worker is a dynamic background worker: the postmaster starts it
 * again after it crashes (the server's crash and restart included), but a
 * stopped server forgets it.  So a static worker, the launcher, starts with
 * the server (and again after each crash), lists the databases that allow
 * connections (it is connected to none: it reads the shared catalog
 * pg_database), and in each starts a short-lived worker that connects to
 * it, finds the extension's jobs that are queued or running, and starts
 * their workers (LlmJobResumeDatabase).  One database at a time, so that it
 * takes a single worker slot.  A job that already has a worker (after a
 * crash, the postmaster started it too) keeps it: the second gives way
 * (job.c's session lock).  The launcher then sleeps until the server stops.
 *
 * It owns no shared state.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"

#include "job.h"

/* Register the launcher (_PG_init). */
void
LlmJobLauncherRegister(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "llm");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "LlmJobLauncherMain");
	snprintf(worker.bgw_name, BGW_MAXLEN, "llm job launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "llm job launcher");
	RegisterBackgroundWorker(&worker);
}

/* The databases that allow connections and are no templates. */
static List *
LlmJobDatabases(void)
{
	List	   *dbs = NIL;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tup;
	MemoryContext cxt = CurrentMemoryContext;

	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tup = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database db = (Form_pg_database) GETSTRUCT(tup);

		if (db->datallowconn && !db->datistemplate)
		{
			MemoryContext old = MemoryContextSwitchTo(cxt);

			dbs = lappend_oid(dbs, db->oid);
			MemoryContextSwitchTo(old);
		}
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
	return dbs;
}

/* Main of the launcher: resume every database's jobs, then wait for the end. */
void
LlmJobLauncherMain(Datum main_arg)
{
	ListCell   *lc;
	List	   *dbs;

	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);

	dbs = LlmJobDatabases();
	foreach(lc, dbs)
	{
		BackgroundWorker worker;
		BackgroundWorkerHandle *handle;
		pid_t		pid;

		LlmJobWorkerInit(&worker, lfirst_oid(lc), InvalidOid, 0);
		worker.bgw_notify_pid = MyProcPid;
		if (!RegisterDynamicBackgroundWorker(&worker, &handle))
		{
			ereport(WARNING,
					(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
					 errmsg("could not start a background worker to resume the llm jobs of database %u",
							lfirst_oid(lc)),
					 errhint("Raise max_worker_processes, then call llm_job_resume() for each job.")));
			continue;
		}
		if (WaitForBackgroundWorkerStartup(handle, &pid) == BGWH_STARTED)
			(void) WaitForBackgroundWorkerShutdown(handle);
	}

	for (;;)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

/* Start the workers of the current database's queued and running jobs (in the resume worker). */
void
LlmJobResumeDatabase(void)
{
	LlmJobCatalog cat;

	StartTransactionCommand();
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	PushActiveSnapshot(GetTransactionSnapshot());
	/* as the bootstrap superuser: not under the database's search_path (the commit resets it) */
	(void) LlmJobSafeSearchPath();
	if (LlmJobCatalogFind(&cat))
	{
		if (SPI_execute(psprintf("SELECT id, role FROM %s WHERE state IN ('queued', 'running') ORDER BY id",
								 cat.job_rel), true, 0) != SPI_OK_SELECT)
			elog(ERROR, "could not read the llm jobs");
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			int64		id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
			Oid			role = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2,
															  &isnull));

			if (!LlmJobLaunch(MyDatabaseId, role, id))
				ereport(WARNING,
						(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
						 errmsg("could not start a background worker for llm job " INT64_FORMAT, id),
						 errhint("Raise max_worker_processes, then call llm_job_resume(" INT64_FORMAT ").", id)));
			else
				ereport(LOG,
						(errmsg("llm job " INT64_FORMAT " resumes", id)));
		}
	}
	PopActiveSnapshot();
	SPI_finish();
	CommitTransactionCommand();
}
