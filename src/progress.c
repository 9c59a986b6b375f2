/*
 * progress.c
 *		Progress of each backend's work in the llm worker, for the
 *		llm_progress view: rows done (and the total, when known, saying
 *		whether it is a plan's estimate), tokens in and out, since when.
 *
 * Rows count as done when the worker has answered all their requests (an
 * LLM Batch node answers a window of rows long before it returns them),
 * and the completion tokens include those of the requests still running,
 * which the worker writes into their slots after each step.
 *
 * Layout.  One entry per backend slot (MaxBackends, indexed by
 * LlmMyProcNumber(), pg_compat.h) in the main shared memory segment.  An entry is in use
 * while its pid is not 0.
 *
 * Protocol.  Only the backend that owns an entry writes it, so writers
 * take no lock.  Readers (llm_progress()) must not see a half-written
 * entry, so each write is bracketed by changecount increments with write
 * barriers, as PostgreSQL's own backend status is (pgstat_report_*): odd
 * while a write is in progress.  A reader copies the entry and retries
 * until it read the same even changecount before and after.
 *
 * Nesting.  Work starts and ends in nested places (an LLM Batch node in a
 * PL/pgSQL function called by a query whose own node is running), so an
 * entry counts its starts: the first start resets it, the last end clears
 * it, and the rows and tokens in between add up.  An error ends work
 * without its end call, so each start has an end on the error path too: an
 * LLM Batch node's in the reset callback of its memory, which goes at the
 * abort of the (sub)transaction it ran in; LlmQueueRun()'s in its error
 * cleanup.  A transaction that goes on after ROLLBACK TO SAVEPOINT thus
 * shows no row for the failed statement.  LlmProgressReset() (at
 * transaction end) clears whatever is left.
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "llm.h"

PG_FUNCTION_INFO_V1(llm_progress);

/* One backend's progress. */
typedef struct LlmProgressEntry
{
	uint32		changecount;	/* odd while being written */
	int			pid;			/* 0: not in use */
	int			depth;			/* nested starts */
	TimestampTz started_at;
	int64		rows_done;
	int64		rows_total;		/* of the sources that know it (a plan's estimate for a plan node) */
	int			n_estimates;	/* sources whose total is still an estimate */
	int64		prompt_tokens;
	int64		completion_tokens;
} LlmProgressEntry;

static LlmProgressEntry *LlmProgress = NULL;

/* Bytes of the progress array. */
Size
LlmProgressShmemSize(void)
{
	return mul_size(MaxBackends, sizeof(LlmProgressEntry));
}

/* Find or create the progress array in shared memory (shmem_startup_hook). */
void
LlmProgressShmemInit(void)
{
	bool		found;

	LlmProgress = ShmemInitStruct("llm progress", LlmProgressShmemSize(), &found);
	if (!found)
		memset(LlmProgress, 0, LlmProgressShmemSize());
}

/* This backend's entry, or NULL where there is none (no backend id). */
static LlmProgressEntry *
my_entry(void)
{
	int			i = LlmMyProcNumber();

	if (LlmProgress == NULL || i < 0 || i >= MaxBackends)
		return NULL;
	return &LlmProgress[i];
}

/* Begin a write of e. */
static inline void
write_begin(LlmProgressEntry *e)
{
	e->changecount++;
	pg_write_barrier();
}

/* End a write of e. */
static inline void
write_end(LlmProgressEntry *e)
{
	pg_write_barrier();
	e->changecount++;
}

/* Work starts that will do rows_total rows (0: unknown), or about so many when estimated. */
void
LlmProgressStart(int64 rows_total, bool estimated)
{
	LlmProgressEntry *e = my_entry();

	if (e == NULL)
		return;
	write_begin(e);
	if (e->depth++ == 0)
	{
		e->pid = MyProcPid;
		e->started_at = GetCurrentTimestamp();
		e->rows_done = e->rows_total = e->prompt_tokens = e->completion_tokens = 0;
		e->n_estimates = 0;
	}
	e->rows_total += rows_total;
	e->n_estimates += estimated;
	write_end(e);
}

/* Work started with an estimate of rows now knows it does rows_total rows. */
void
LlmProgressTotalKnown(int64 estimate, int64 rows_total)
{
	LlmProgressEntry *e = my_entry();

	if (e == NULL || e->depth == 0)
		return;
	write_begin(e);
	e->rows_total += rows_total - estimate;
	if (e->n_estimates > 0)
		e->n_estimates--;
	write_end(e);
}

/* A row is done, with the tokens of its requests. */
void
LlmProgressRow(int64 prompt_tokens, int64 completion_tokens)
{
	LlmProgressEntry *e = my_entry();

	if (e == NULL || e->depth == 0)
		return;
	write_begin(e);
	e->rows_done++;
	e->prompt_tokens += prompt_tokens;
	e->completion_tokens += completion_tokens;
	write_end(e);
}

/* Work that LlmProgressStart() began is over. */
void
LlmProgressEnd(void)
{
	LlmProgressEntry *e = my_entry();

	if (e == NULL || e->depth == 0)
		return;
	write_begin(e);
	if (--e->depth == 0)
		e->pid = 0;
	write_end(e);
}

/* Clear this backend's entry, whatever its depth (at transaction end, after an error too). */
void
LlmProgressReset(void)
{
	LlmProgressEntry *e = my_entry();

	if (e == NULL || e->pid == 0)
		return;
	write_begin(e);
	e->depth = 0;
	e->pid = 0;
	write_end(e);
}

/* A consistent copy of entry i; false when it is not in use. */
static bool
read_entry(int i, LlmProgressEntry *out)
{
	volatile LlmProgressEntry *e = &LlmProgress[i];

	for (;;)
	{
		uint32		before = e->changecount;

		pg_read_barrier();
		memcpy(out, (const void *) e, sizeof(*out));
		pg_read_barrier();
		if (before == e->changecount && (before & 1) == 0)
			break;
		CHECK_FOR_INTERRUPTS();
	}
	return out->pid != 0;
}

/* Completion tokens so far of the requests of backend pid that the worker is running. */
static int64
running_tokens(int pid)
{
	int64		n = 0;

	LWLockAcquire(LlmState->lock, LW_SHARED);
	for (int s = 0; s < LlmState->n_slots; s++)
		if (LlmState->slots[s].owner_pid == pid && LlmState->slots[s].state == LLM_SLOT_RUNNING)
			n += LlmState->slots[s].completion_tokens;
	LWLockRelease(LlmState->lock);
	return n;
}

/*
 * llm_progress()
 *		One row per backend with work in the llm worker: pid, rows done and
 *		the total (NULL when unknown), tokens in and out, completion tokens
 *		per second, elapsed time, and the time left at the rate so far.
 */
Datum
llm_progress(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	TimestampTz now = GetCurrentTimestamp();
	int			natts;

	InitMaterializedSRF(fcinfo, 0);
	/* 1.0 declares 8 columns, 1.1 adds total_is_estimate */
	natts = rsinfo->setDesc->natts;
	if (natts != 8 && natts != 9)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("llm_progress() is declared with %d columns, which this llm library does not know", natts),
				 errhint("Run ALTER EXTENSION llm UPDATE.")));
	LlmShmemCheck();
	for (int i = 0; i < MaxBackends; i++)
	{
		LlmProgressEntry e;
		Datum		values[9];
		bool		nulls[9] = {0};
		double		secs;

		if (!read_entry(i, &e))
			continue;
		e.completion_tokens += running_tokens(e.pid);
		secs = (now - e.started_at) / 1e6;
		values[0] = Int32GetDatum(e.pid);
		values[1] = Int64GetDatum(e.rows_done);
		values[2] = Int64GetDatum(e.rows_total);
		nulls[2] = e.rows_total <= 0;
		values[3] = Int64GetDatum(e.prompt_tokens);
		values[4] = Int64GetDatum(e.completion_tokens);
		values[5] = Float8GetDatum(secs > 0 ? e.completion_tokens / secs : 0);
		values[6] = IntervalPGetDatum(DatumGetIntervalP(DirectFunctionCall2(timestamp_mi,
																		   TimestampTzGetDatum(now),
																		   TimestampTzGetDatum(e.started_at))));
		if (e.rows_total > 0 && e.rows_done > 0 && e.rows_done <= e.rows_total)
		{
			Interval   *eta = palloc0(sizeof(Interval));

			eta->time = (int64) ((now - e.started_at) * ((double) (e.rows_total - e.rows_done) / e.rows_done));
			values[7] = IntervalPGetDatum(eta);
		}
		else
			nulls[7] = true;
		values[8] = BoolGetDatum(e.n_estimates > 0);
		nulls[8] = e.rows_total <= 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}
