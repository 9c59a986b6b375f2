/*
 * job.h
 *		Private header of the background fill jobs (llm_fill): job.c (the SQL
 *		functions and the catalog), job_worker.c (the worker that runs one
 *		job) and job_launcher.c (resuming jobs when the server starts).
 *
 * A job is a row of the extension's table llm_job in one database.  Its
 * worker is a dynamic background worker connected to that database as the
 * job's role; it holds a session lock on the job (LlmJobLockTag) for as long
 * as it runs, so that a second worker started for the same job (a resume, a
 * restart after a crash) gives way at once.  The catalog tables are written
 * only as their owner (LlmJobCatalogBegin), the target only as the role.
 */
#ifndef LLM_JOB_H
#define LLM_JOB_H

#include "llm.h"

#include "executor/spi.h"
#include "postmaster/bgworker.h"
#include "storage/lock.h"

/* Seconds before the postmaster starts a job's worker again after it failed. */
#define LLM_JOB_RESTART_S 5

/* The extension's catalog in the current database. */
typedef struct LlmJobCatalog
{
	Oid			nsp;			/* the extension's schema */
	Oid			owner;			/* llm_job's owner, who writes the catalog */
	char	   *job_rel;		/* "schema".llm_job */
	char	   *error_rel;		/* "schema".llm_job_error */
} LlmJobCatalog;

/* The user and security context saved by LlmJobCatalogBegin. */
typedef struct LlmJobAs
{
	Oid			user;
	int			sec;
	int			guc_level;		/* the GUC nest level that holds the safe search_path */
} LlmJobAs;

/* The functions a job may run: which LlmBatchFunc, its SQL name, and its parameter columns in llm_job. */
typedef struct LlmJobFuncInfo
{
	const char *name;			/* llm_fill's function argument */
	LlmBatchFunc func;
	const char *param_columns;	/* llm_job's columns for the function's arguments after the input */
	Oid			result_type;
} LlmJobFuncInfo;

/* job.c */
extern bool LlmJobCatalogFind(LlmJobCatalog *cat);
extern void LlmJobCatalogBegin(const LlmJobCatalog *cat, LlmJobAs *as);
extern int	LlmJobSafeSearchPath(void);
extern void LlmJobCatalogEnd(const LlmJobAs *as);
extern const LlmJobFuncInfo *LlmJobFuncByName(const char *name);
extern NullableDatum *LlmJobArgs(const LlmJobCatalog *cat, int64 job_id, const LlmJobFuncInfo *fi, int *nargs);
extern void LlmJobLockTag(LOCKTAG *tag, Oid dboid, int64 job_id);
extern void LlmJobWorkerInit(BackgroundWorker *worker, Oid dboid, Oid roleid, int64 job_id);
extern bool LlmJobLaunch(Oid dboid, Oid roleid, int64 job_id);
extern char *LlmJobRowKey(Oid relid);
extern char *LlmJobKeyColumn(Oid relid, char **type);
extern char *LlmJobSelectSql(Oid relid, AttrNumber attnum, const char *prompt, const char *where, int limit,
							 bool after_key);
extern char *LlmJobCountSql(Oid relid, AttrNumber attnum, const char *where);
extern char *LlmJobUpdateSql(Oid relid, AttrNumber attnum, const LlmJobFuncInfo *fi);
extern void LlmJobUpdateTypes(const LlmJobFuncInfo *fi, Oid *types);
extern void LlmJobTrigger(const LlmJobCatalog *cat, int64 job_id, Oid relid, bool create);
extern void LlmJobInit(void);

/* job_worker.c */
extern PGDLLEXPORT void LlmJobWorkerMain(Datum main_arg);

/* job_launcher.c */
extern void LlmJobLauncherRegister(void);
extern PGDLLEXPORT void LlmJobLauncherMain(Datum main_arg);
extern void LlmJobResumeDatabase(void);

#endif							/* LLM_JOB_H */
