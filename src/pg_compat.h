/*
 * pg_compat.h
 *		The PostgreSQL APIs that differ between the versions llm supports
 *		(15 to 18), behind one name each, so that the rest of src/ is
 *		written once.  Each entry names the release that changed it.
 */
#ifndef LLM_PG_COMPAT_H
#define LLM_PG_COMPAT_H

#include "postgres.h"

#include "miscadmin.h"

#if PG_VERSION_NUM < 150000
#error "llm needs PostgreSQL 15 or later"
#endif

/*
 * 18 replaced the trailing pg_attribute_noreturn() with a leading
 * pg_noreturn; before 18, pg_attribute_noreturn() is a GCC attribute that
 * may lead a declaration too.  Write: pg_noreturn extern void f(void);
 */
#ifndef pg_noreturn
#define pg_noreturn pg_attribute_noreturn()
#endif

/*
 * 16 moved the varlena macros (VARSIZE_ANY_EXHDR ...) out of postgres.h
 * into varatt.h.
 */
#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

/*
 * 17 gave the index of a process's PGPROC a name of its own, MyProcNumber,
 * and dropped PGPROC.pgprocno.  LlmMyProcNumber() is that index, or -1
 * where the process has no PGPROC yet; every backend and background
 * worker has one below MaxBackends.
 */
#if PG_VERSION_NUM >= 170000
#include "storage/procnumber.h"
#define LlmMyProcNumber() (MyProcNumber == INVALID_PROC_NUMBER ? -1 : (int) MyProcNumber)
#else
#include "storage/proc.h"
#define LlmMyProcNumber() (MyProc == NULL ? -1 : MyProc->pgprocno)
#endif

/*
 * 16 replaced the per-object ACL checks (pg_proc_aclcheck,
 * pg_foreign_server_aclcheck ...) with object_aclcheck(class, ...).
 */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_proc.h"
#define LlmProcAclCheck(funcid, roleid, mode) object_aclcheck(ProcedureRelationId, (funcid), (roleid), (mode))
#define LlmForeignServerAclCheck(srvid, roleid, mode) \
	object_aclcheck(ForeignServerRelationId, (srvid), (roleid), (mode))
#else
#define LlmProcAclCheck(funcid, roleid, mode) pg_proc_aclcheck((funcid), (roleid), (mode))
#define LlmForeignServerAclCheck(srvid, roleid, mode) pg_foreign_server_aclcheck((srvid), (roleid), (mode))
#endif

/*
 * 17 let a background worker connect as a role without LOGIN
 * (BGWORKER_BYPASS_ROLELOGINCHECK); before, such a role cannot run a job
 * (llm_fill refuses it).
 */
#include "postmaster/bgworker.h"
#if PG_VERSION_NUM >= 170000
#define LLM_BGWORKER_BYPASS_ROLELOGIN BGWORKER_BYPASS_ROLELOGINCHECK
#else
#define LLM_BGWORKER_BYPASS_ROLELOGIN 0
#endif

#endif							/* LLM_PG_COMPAT_H */
