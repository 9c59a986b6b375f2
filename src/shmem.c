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
 * dsa_pointers, so the fixed part stays small.  A text is a chain of
 * pieces of at most 8 kB (LlmDsaTextPut), the largest objects the area's
 * pools serve: when a segment's pieces are all freed the area gives the
 * segment back to the system, which it never does for a segment freed of
 * larger objects (runs of pages); so after a batch of huge prompts the
 * memory goes back.
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
		LlmState->n_workers = LlmDeviceCount();
		for (int w = 0; w < LLM_MAX_WORKERS; w++)
			LlmState->workers[w].state = LLM_WORKER_STOPPED;
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
		/* a small object that lives as long as the area, in its first segment: see LlmShmemDsaForget */
		LlmState->dsa_anchor = dsa_allocate(area, sizeof(uint64));
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

/*
 * Let go of this process's mappings of the area's segments that other
 * processes have freed, so that the system takes them back: a process
 * notices a freed segment only when it next uses the area, and an idle one
 * kept it mapped (and the memory in /dev/shm) indefinitely.  Looking up any
 * live object does that check; the anchor is one.
 */
void
LlmShmemDsaForget(void)
{
	if (LlmDsa != NULL)
		(void) dsa_get_address(LlmDsa, LlmState->dsa_anchor);
}

/*
 * Give the area's wholly free segments back to the system (dsa_trim: the
 * empty pieces' blocks, the last of which free a segment), and let go of
 * those others freed: at the end of a batch, when the worker has freed
 * every prompt of it, and when the worker goes idle.
 */
void
LlmShmemDsaTrim(void)
{
	dsa_trim(LlmShmemDsa());
	LlmShmemDsaForget();
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

/* Set the latch of every running model worker. */
void
LlmWakeWorker(void)
{
	int			pgprocnos[LLM_MAX_WORKERS];
	int			n = 0;

	LWLockAcquire(LlmState->lock, LW_SHARED);
	for (int w = 0; w < LlmState->n_workers; w++)
		if (LlmState->workers[w].pid != 0)
			pgprocnos[n++] = LlmState->workers[w].pgprocno;
	LWLockRelease(LlmState->lock);

	for (int i = 0; i < n; i++)
		SetLatch(&ProcGlobal->allProcs[pgprocnos[i]].procLatch);
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

/* Free DSA texts taken out of slots, then let go of segments others freed (LlmShmemDsaForget). */
void
LlmFreeChunks(dsa_pointer *chunks, int n)
{
	dsa_area   *area = LlmShmemDsa();

	for (int i = 0; i < n; i++)
		LlmDsaTextFree(area, chunks[i]);
	LlmShmemDsaForget();
}

/* One piece of a text in the DSA area: the next piece, then up to LLM_DSA_PIECE_DATA bytes. */
typedef struct LlmDsaPiece
{
	dsa_pointer next;
	char		data[FLEXIBLE_ARRAY_MEMBER];
} LlmDsaPiece;

#define LLM_DSA_PIECE_SIZE 8192	/* the largest size class of dsa.c's pools */
#define LLM_DSA_PIECE_DATA (LLM_DSA_PIECE_SIZE - offsetof(LlmDsaPiece, data))

/*
 * Copy len bytes of text into area as a chain of pieces (at least one);
 * InvalidDsaPointer when out of memory and flags has DSA_ALLOC_NO_OOM (any
 * piece already made is freed), else an error.
 */
dsa_pointer
LlmDsaTextPut(dsa_area *area, const char *text, Size len, int flags)
{
	dsa_pointer head = InvalidDsaPointer;
	LlmDsaPiece *last = NULL;
	Size		done = 0;

	do
	{
		Size		n = Min(len - done, LLM_DSA_PIECE_DATA);
		dsa_pointer dp = dsa_allocate_extended(area, offsetof(LlmDsaPiece, data) + Max(n, 1),
											   flags | DSA_ALLOC_NO_OOM);
		LlmDsaPiece *piece;

		if (!DsaPointerIsValid(dp))
		{
			/* no piece left behind, then the error unless the caller takes none */
			LlmDsaTextFree(area, head);
			if ((flags & DSA_ALLOC_NO_OOM) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_OUT_OF_MEMORY),
						 errmsg("out of memory"),
						 errdetail("Failed on request for %zu bytes of shared memory.", len)));
			return InvalidDsaPointer;
		}
		piece = dsa_get_address(area, dp);
		piece->next = InvalidDsaPointer;
		memcpy(piece->data, text + done, n);
		if (last != NULL)
			last->next = dp;
		else
			head = dp;
		last = piece;
		done += n;
	} while (done < len);
	return head;
}

/* Copy the first len bytes of the text at dp (LlmDsaTextPut) into out. */
void
LlmDsaTextGet(dsa_area *area, dsa_pointer dp, char *out, Size len)
{
	Size		done = 0;

	while (done < len && DsaPointerIsValid(dp))
	{
		LlmDsaPiece *piece = dsa_get_address(area, dp);
		Size		n = Min(len - done, LLM_DSA_PIECE_DATA);

		memcpy(out + done, piece->data, n);
		done += n;
		dp = piece->next;
	}
}

/* The first len bytes of the text at dp, as a palloc'd NUL-terminated copy. */
char *
LlmDsaTextCopy(dsa_area *area, dsa_pointer dp, Size len)
{
	char	   *s = palloc(len + 1);

	LlmDsaTextGet(area, dp, s, len);
	s[len] = '\0';
	return s;
}

/* Free every piece of the text at dp (InvalidDsaPointer: nothing). */
void
LlmDsaTextFree(dsa_area *area, dsa_pointer dp)
{
	while (DsaPointerIsValid(dp))
	{
		dsa_pointer next = ((LlmDsaPiece *) dsa_get_address(area, dp))->next;

		dsa_free(area, dp);
		dp = next;
	}
}
