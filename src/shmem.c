/*
 * shmem.c
 *		Shared memory of the llm extension: the request slots, the worker's
 *		status, the statistics, and a DSA area for prompts and results.
 *
 * Layout.  One block of the main shared memory segment, set up by the
 * postmaster in shmem_startup_hook: struct LlmShared, its array of
 * llm.max_queued_requests slots, then the first segment of a DSA area
 * created in place.  Prompts and completions of any size live in the DSA
 * area (further segments are created on demand); a slot holds only their
 * dsa_pointers, so the fixed part stays small.
 *
 * Locking protocol.  One LWLock, LlmState->lock (tranche "llm"), protects
 * every field of LlmShared and of every slot, and fair.c's role table (its
 * own header says who writes what there), except each slot's condition
 * variable (which has its own spinlock) and the DSA area (which has its
 * own locks).  It is held only to read or write those fields: never across
 * an engine call, a DSA allocation or free, a wait, or anything that can
 * raise an error.  Lock order: LlmState->lock before the DSA area's locks
 * (DSA chunks are freed after releasing it, so in practice they never nest).
 *
 * Slot states and who may move a slot between them:
 *
 *   FREE -> QUEUED               the submitting backend, once the slot's
 *                                parameters and input chunk are written,
 *                                if its role's share allows (fair.c)
 *   QUEUED -> RUNNING            the worker, when it claims the request
 *                                (fair.c's weighted fair queue says which)
 *   RUNNING -> DONE | ERROR      the worker, once the result (or error) is
 *                                written; then it broadcasts the slot's CV
 *   QUEUED | RUNNING -> CANCELLED   the owning backend, when it gives up
 *                                (query cancel, statement timeout, error,
 *                                exit); then it sets the worker's latch
 *   DONE | ERROR -> FREE         the owning backend, after reading the result
 *   CANCELLED -> FREE            the worker, after dropping the sequence
 *                                from the engine
 *   QUEUED | RUNNING -> ERROR    the worker's exit callback: a worker that
 *                                exits fails every request it has not
 *                                answered, so no backend waits forever
 *
 * So a slot in QUEUED or RUNNING can be changed by two processes (its
 * backend may cancel it while the worker works on it); the worker rechecks
 * the state under the lock before it writes a result, and a result for a
 * cancelled slot is thrown away.  The worker keeps its own map from slot to
 * engine sequence, and is the only process that frees a CANCELLED slot, so
 * that map cannot go stale.
 *
 * Every move to FREE goes through LlmSlotFree (fair.c), which wakes the
 * backends waiting for a slot.
 *
 * Who frees DSA chunks: the input chunk is freed by the worker as soon as
 * it has tokenized the prompt, or by whoever moves the slot to FREE; the
 * result chunk by whoever moves the slot to FREE.  A chunk pointer is
 * cleared in the slot (under the lock) by the process that will free it.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/memutils.h"

#include "llm.h"

/* Size of the DSA area's first segment, inside the main shared memory. */
#define LLM_DSA_INITIAL_SIZE	(1024 * 1024)

LlmShared  *LlmState = NULL;

/* This process's attachment to the DSA area; NULL until first used. */
static dsa_area *LlmDsa = NULL;

/* Bytes of the slot part of the block. */
static Size
LlmShmemSlotsSize(void)
{
	return MAXALIGN(add_size(offsetof(LlmShared, slots),
							 mul_size(llm_max_queued_requests, sizeof(LlmSlot))));
}

/* Bytes of the in-place DSA segment. */
static Size
LlmShmemDsaSize(void)
{
	return MAXALIGN(Max(dsa_minimum_size(), LLM_DSA_INITIAL_SIZE));
}

/* Where the DSA area's first segment lives. */
static void *
LlmShmemDsaPlace(void)
{
	return (char *) LlmState + LlmShmemSlotsSize();
}

/* shmem_request_hook part: reserve the block, the progress array (progress.c), the role table (fair.c) and the LWLock. */
void
LlmShmemRequest(void)
{
	RequestAddinShmemSpace(add_size(LlmShmemSlotsSize(), LlmShmemDsaSize()));
	RequestAddinShmemSpace(LlmProgressShmemSize());
	RequestAddinShmemSpace(LlmFairShmemSize());
	RequestNamedLWLockTranche("llm", 1);
}

/* shmem_startup_hook part: the first process through sets the block up. */
void
LlmShmemStartup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	LlmProgressShmemInit();
	LlmFairShmemInit();
	LlmState = ShmemInitStruct("llm",
							   add_size(LlmShmemSlotsSize(), LlmShmemDsaSize()),
							   &found);
	if (!found)
	{
		dsa_area   *area;

		memset(LlmState, 0, LlmShmemSlotsSize());
		LlmState->lock = &(GetNamedLWLockTranche("llm"))->lock;
		LlmState->n_slots = llm_max_queued_requests;
		LlmState->next_request_id = 1;
		LlmState->worker.state = LLM_WORKER_STOPPED;
		LlmState->counters.reset_at = GetCurrentTimestamp();
		for (int i = 0; i < LlmState->n_slots; i++)
		{
			LlmSlot    *slot = &LlmState->slots[i];

			slot->state = LLM_SLOT_FREE;
			slot->input = InvalidDsaPointer;
			slot->result = InvalidDsaPointer;
			ConditionVariableInit(&slot->cv);
		}

		/* The area outlives every attachment: pin it, then let go. */
		LlmState->dsa_tranche = LWLockNewTrancheId();
		area = dsa_create_in_place(LlmShmemDsaPlace(), LlmShmemDsaSize(),
								   LlmState->dsa_tranche, NULL);
		dsa_pin(area);
		dsa_detach(area);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* on_shmem_exit callback: give back this process's reference to the area. */
static void
LlmShmemDsaRelease(int code, Datum arg)
{
	if (LlmDsa != NULL)
	{
		dsa_release_in_place(LlmShmemDsaPlace());
		LlmDsa = NULL;
	}
}

/* This process's attachment to the DSA area, attaching on first use. */
dsa_area *
LlmShmemDsa(void)
{
	if (LlmDsa == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		LlmShmemCheck();
		LWLockRegisterTranche(LlmState->dsa_tranche, "llm_dsa");
		LlmDsa = dsa_attach_in_place(LlmShmemDsaPlace(), NULL);
		dsa_pin_mapping(LlmDsa);
		on_shmem_exit(LlmShmemDsaRelease, 0);
		MemoryContextSwitchTo(old);
	}
	return LlmDsa;
}

/* Error out unless the library was preloaded (and so shared memory exists). */
void
LlmShmemCheck(void)
{
	if (LlmState == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("llm background worker is not running"),
				 errhint("Add \"llm\" to shared_preload_libraries and restart the server.")));
}

/* Set the worker's latch, if a worker is running. */
void
LlmWakeWorker(void)
{
	int			pid;
	int			pgprocno;

	LWLockAcquire(LlmState->lock, LW_SHARED);
	pid = LlmState->worker.pid;
	pgprocno = LlmState->worker.pgprocno;
	LWLockRelease(LlmState->lock);

	if (pid != 0)
		SetLatch(&ProcGlobal->allProcs[pgprocno].procLatch);
}

/*
 * Take the DSA chunks a slot still holds, clearing them in the slot; the
 * caller holds the lock and frees them (LlmFreeChunks) after releasing it.
 * chunks has room for two more entries at *n.
 */
void
LlmSlotTakeChunks(LlmSlot *slot, dsa_pointer *chunks, int *n)
{
	if (DsaPointerIsValid(slot->input))
		chunks[(*n)++] = slot->input;
	if (DsaPointerIsValid(slot->result))
		chunks[(*n)++] = slot->result;
	slot->input = InvalidDsaPointer;
	slot->result = InvalidDsaPointer;
}

/* Free DSA chunks taken out of slots. */
void
LlmFreeChunks(dsa_pointer *chunks, int n)
{
	dsa_area   *area;

	if (n == 0)
		return;
	area = LlmShmemDsa();
	for (int i = 0; i < n; i++)
		dsa_free(area, chunks[i]);
}
