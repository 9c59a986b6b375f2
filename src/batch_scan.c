/*
 * batch_scan.c
 *		The "LLM Batch" plan node: runs the batched calls (llm_generate(),
 *		llm_chat(), the scoring functions: batch_call.c) of a window of its
 *		child's rows at once, and returns the rows in the child's order as
 *		their answers arrive.
 *
 * batch_plan.c puts the node over a plan node that makes such calls per
 * row; the child computes each call's arguments as columns.  The node keeps
 * a ring of rows read from the child:
 *
 *   rows[head] ... rows[head + n_rows - 1]     in the child's order
 *
 * Each row holds a copy of the child's columns and of the calls' arguments,
 * and each call's jobs (one for llm_generate(), one per label for
 * llm_classify(), ...), jobs[call_job[c] .. call_job[c + 1]).  The
 * node submits the jobs of up to `window` rows to the queue (queue.c), at
 * most a quarter of the request slots at once (so that idle cursors of a
 * few roles cannot hold every slot while their answers wait to be
 * fetched), so the worker sees them all in one continuous batch, and keeps
 * the window full: while it waits for the head row it collects whatever else has
 * finished, then reads more rows from the child.  Rows answered out of
 * order wait in the ring (at most 2 * window rows), and the head row goes
 * out as soon as all its jobs are answered, each call's result made from
 * its jobs' answers.  So ORDER BY, LIMIT and DISTINCT above the node see
 * the rows they would have seen.
 *
 * Each call's jobs and result are built by LlmBatchCallJobs() and
 * LlmBatchCallResult(), exactly as the function builds them row by row:
 * the same checks and errors, a NULL prompt gives NULL without a request,
 * a NULL seed draws the row's own seed, and on_error => 'null' turns the
 * row's failed request into NULL.  A job that asks exactly what an earlier
 * job in the ring asks (the same prompt, continuation, parameters, stop
 * strings and grammar, and seed unless greedy) makes no request: it takes
 * that job's answer (EXPLAIN ANALYZE counts them).  Nor does a shared job
 * (a content-free calibration job, calibrate.c) whose answer the statement
 * has kept: so a whole table asks each distinct one once.
 *
 * Remote nodes.  With llm.remote_servers set, each job goes to the node
 * LlmRemotePick() chooses (remote.c): the local queue, as above, or a
 * remote server, which gets the jobs given to it at the end of each fill
 * as one batch, and whose answers arrive while the node waits (a job
 * holds remote_node and its dispatch's request_id meanwhile).  A node
 * that fails hands its unanswered jobs back (batch_remote_lost), and the
 * next fill sends them elsewhere before any new row; an answer for a job
 * that no longer awaits it (its row gone after a LIMIT, or sent again) is
 * ignored, so each job is answered once.
 *
 * Giving up.  At the end of the scan (a LIMIT above stops reading early),
 * at a rescan, and when the query's memory goes away on an error, a cancel
 * or a statement timeout (a reset callback on the node's memory context),
 * every job still in a slot is cancelled with LlmQueueCancel(); the worker
 * drops it at its next step.  Waiting sleeps on the head job's condition
 * variable, which checks for interrupts.  The jobs are kept in the node's
 * own memory, not the rows': a memory context's children are gone before
 * its reset callbacks run.
 */
#include "postgres.h"

#include "catalog/objectaccess.h"
#include "commands/explain.h"
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"	/* 18 moved ExplainProperty*() here */
#endif
#include "executor/executor.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/nodeFuncs.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "llm.h"

/* How long to sleep on the head row before looking at the others' answers, while rows could be refilled (ms). */
#define LLM_BATCH_POLL_MS	10

struct BatchRow;

/* A job of a row in the ring; row NULL for none. */
typedef struct BatchRef
{
	struct BatchRow *row;
	int			job;
} BatchRef;

/* One row of the child in the ring. */
typedef struct BatchRow
{
	MemoryContext cxt;			/* the row's tuple, arguments, prompts and answers */
	MinimalTuple tuple;			/* the child's columns */
	int64		ordinal;		/* the row's place in the child's output, from 1 */
	NullableDatum *args;		/* (n_args) the calls' arguments, call c's from arg_first[c] */
	int		   *call_job;		/* (n_calls + 1) call c's jobs are jobs[call_job[c] .. call_job[c + 1]) */
	/* in the node's memory, grown to max_jobs */
	LlmJob	   *jobs;			/* (n_jobs) */
	bool	   *answered;		/* (n_jobs) */
	BatchRef   *next_dup;		/* (n_jobs) the next job waiting for this one's answer */
	int			n_jobs;
	int			max_jobs;
	int			n_submitted;	/* jobs given to the queue (or needing none) */
	int			n_answered;		/* of those, answered */
	bool		busy;			/* counted in n_busy: submitting or waiting for answers */
} BatchRow;

/* The node's execution state. */
typedef struct BatchState
{
	CustomScanState css;
	int			n_calls;
	LlmBatchFunc *funcs;		/* (n_calls) which function each call is */
	int		   *arg_first;		/* (n_calls + 1) call c's arguments are arg_states[arg_first[c] ..] */
	int			n_args;
	ExprState **arg_states;		/* (n_args) each argument, over the child's row */
	int16	   *arg_typlen;		/* (n_args) to copy the arguments into a row */
	bool	   *arg_byval;		/* (n_args) */
	int			n_child;		/* the child's columns, the first of the scan tuple */
	int			window;			/* most rows with requests in flight */
	int64		bound;			/* read no more rows than this (a LIMIT above); 0: no bound */
	int64		n_read;			/* rows read from the child */
	int64		rows_estimate;	/* the plan's, for llm_progress until the child is done */
	int			max_rows;		/* size of the ring */
	BatchRow   *rows;			/* (max_rows) */
	int			head;			/* index of the first row */
	int			n_rows;			/* rows in the ring */
	int			n_busy;			/* of those, rows with requests not yet answered */
	int			n_in_slots;		/* jobs holding a request slot (submitted, answer not taken) */
	bool		child_done;
	bool		returned;		/* the head row went out: free it at the next call */
	bool		in_progress;	/* counted in this backend's llm_progress row */
	TupleTableSlot *tuple_slot; /* deforms a row's child columns */
	char	  **col_names;		/* (the child's columns) a table column's name, else NULL: for errors */
	MemoryContext node_cxt;		/* the node's own memory: the rows' jobs */
	MemoryContext cxt;			/* parent of the rows' contexts */
	MemoryContextCallback cancel_cb;
	LlmRemote  *remote;			/* llm.remote_servers' nodes (remote.c), or NULL */
	BatchRef   *resend;			/* (n_resend) jobs a failed node left unanswered, to send again */
	int			n_resend;
	int			max_resend;
	/* for EXPLAIN ANALYZE */
	int64		n_requests;
	int64		n_local;		/* of those, sent to the local worker (with llm.remote_servers) */
	int64		n_deduplicated;
	int64		n_failed;
	int64		n_retried;		/* requests sent again after a remote node failed */
	int64		prompt_tokens;
	int64		completion_tokens;
	int64		cached_tokens;
	int64		cache_hits;		/* requests answered from the answer cache */
	uint64		draft_group;	/* its requests' (LlmParams.draft_group): this process and instance */
	int64		drafted_tokens; /* llm.speculative's, and of those accepted */
	int64		accepted_tokens;
	int64		run_us;
} BatchState;

static Node *batch_create_state(CustomScan *cscan);
static void batch_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *batch_exec(CustomScanState *node);
static void batch_end(CustomScanState *node);
static void batch_rescan(CustomScanState *node);
static void batch_explain(CustomScanState *node, List *ancestors, ExplainState *es);

static const CustomScanMethods batch_scan_methods = {
	.CustomName = "LLM Batch",
	.CreateCustomScanState = batch_create_state,
};

static const CustomExecMethods batch_exec_methods = {
	.CustomName = "LLM Batch",
	.BeginCustomScan = batch_begin,
	.ExecCustomScan = batch_exec,
	.EndCustomScan = batch_end,
	.ReScanCustomScan = batch_rescan,
	.ExplainCustomScan = batch_explain,
};

/*
 * The LLM Batch plan node over child (batch_plan.c): scan_tlist describes
 * its scan tuple (the child's columns, then one per call), tlist and qual
 * are its own, call_args has each call's arguments, expressions over the
 * child's row (OUTER_VAR).  bound > 0 caps
 * the window (a LIMIT above wants no more rows).
 */
Plan *
LlmBatchScanCreate(Plan *child, List *scan_tlist, List *tlist, List *qual, List *call_args, int64 bound,
				   int plan_node_id)
{
	CustomScan *cscan = makeNode(CustomScan);
	Plan	   *plan = &cscan->scan.plan;

	plan->startup_cost = child->startup_cost;
	plan->total_cost = child->total_cost;
	plan->plan_rows = child->plan_rows;
	plan->plan_width = child->plan_width;
	plan->parallel_aware = false;
	plan->parallel_safe = child->parallel_safe;
	plan->plan_node_id = plan_node_id;
	plan->targetlist = tlist;
	plan->qual = qual;
	plan->lefttree = child;
	plan->extParam = bms_copy(child->extParam);
	plan->allParam = bms_copy(child->allParam);
	cscan->scan.scanrelid = 0;
	cscan->flags = 0;
	cscan->custom_scan_tlist = scan_tlist;
	cscan->custom_private = list_make1(makeInteger((int) Min(bound, PG_INT32_MAX)));
	cscan->custom_exprs = call_args;
	cscan->methods = &batch_scan_methods;
	return plan;
}

/* Allocate the node's state (CreateCustomScanState). */
static Node *
batch_create_state(CustomScan *cscan)
{
	BatchState *bs = palloc0(sizeof(BatchState));

	NodeSetTag(bs, T_CustomScanState);
	bs->css.methods = &batch_exec_methods;
	return (Node *) bs;
}

/* Cancel every job of the ring still in a slot (raises nothing). */
static void
batch_cancel_all(BatchState *bs)
{
	LlmRemoteCancel(bs->remote);
	if (bs->rows == NULL)
		return;
	for (int r = 0; r < bs->max_rows; r++)
		LlmQueueCancel(bs->rows[r].jobs, bs->rows[r].n_jobs);
}

/*
 * Reset callback of the node's memory context: the query is over, or
 * failed.  A failed query never calls batch_end(), but its memory goes at
 * the abort of the (sub)transaction it ran in, so its llm_progress row
 * ends here, not at the end of a transaction that goes on after ROLLBACK TO
 * SAVEPOINT.
 */
static void
batch_cancel_callback(void *arg)
{
	BatchState *bs = (BatchState *) arg;

	batch_cancel_all(bs);
	if (bs->in_progress)
		LlmProgressEnd();
	bs->in_progress = false;
}

/* The window: llm.batch_rows (-1: twice llm.max_sequences), within the request slots and the plan's bound. */
static int
batch_window(int64 bound)
{
	int			w = llm_batch_rows < 0 ? 2 * llm_max_sequences : llm_batch_rows;

	w = Min(w, llm_max_queued_requests);
	if (bound > 0 && bound < w)
		w = (int) bound;
	return Max(w, 1);
}

/*
 * The names of the child's columns that are a table's columns (a scan's
 * Vars), NULL for the others (the calls' arguments, a join's columns):
 * what the CONTEXT of a row's error shows.
 */
static char **
batch_column_names(Plan *child, EState *estate)
{
	char	  **names = palloc0(sizeof(char *) * Max(list_length(child->targetlist), 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, child->targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Var		   *var = (Var *) tle->expr;

		if (IsA(var, Var) && !IS_SPECIAL_VARNO(var->varno) && var->varattno > 0 &&
			var->varno <= list_length(estate->es_range_table))
		{
			RangeTblEntry *rte = exec_rt_fetch(var->varno, estate);

			if (rte->rtekind == RTE_RELATION)
				names[i] = get_attname(rte->relid, var->varattno, true);
		}
		i++;
	}
	return names;
}

/* Start the node: its child, the window and the ring (BeginCustomScan). */
static void
batch_begin(CustomScanState *node, EState *estate, int eflags)
{
	BatchState *bs = (BatchState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *call_args = cscan->custom_exprs;
	ListCell   *lc;
	int			c = 0;

	outerPlanState(bs) = ExecInitNode(outerPlan(cscan), estate, eflags);
	bs->bound = intVal(linitial(cscan->custom_private));
	bs->window = batch_window(bs->bound);
	bs->draft_group = LlmQueueDraftGroup();

	/* the calls (the scan tuple's last columns) are not evaluated as expressions: check what that would */
	bs->n_calls = list_length(call_args);
	bs->n_child = list_length(cscan->custom_scan_tlist) - bs->n_calls;
	bs->funcs = palloc(sizeof(LlmBatchFunc) * Max(bs->n_calls, 1));
	bs->arg_first = palloc(sizeof(int) * (bs->n_calls + 1));
	for (int i = bs->n_child; i < list_length(cscan->custom_scan_tlist); i++)
	{
		FuncExpr   *call = (FuncExpr *) list_nth_node(TargetEntry, cscan->custom_scan_tlist, i)->expr;
		AclResult	aclresult = LlmProcAclCheck(call->funcid, GetUserId(), ACL_EXECUTE);

		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FUNCTION, get_func_name(call->funcid));
		InvokeFunctionExecuteHook(call->funcid);
		bs->funcs[i - bs->n_child] = LlmBatchFuncOf(call->funcid);
		if (bs->funcs[i - bs->n_child] == LLM_BATCH_NONE)
			elog(ERROR, "function %u is not batched", call->funcid);
	}
	bs->arg_first[0] = 0;
	for (c = 0; c < bs->n_calls; c++)
		bs->arg_first[c + 1] = bs->arg_first[c] + LlmBatchFuncNargs(bs->funcs[c]);
	bs->n_args = bs->arg_first[bs->n_calls];
	bs->arg_states = palloc(sizeof(ExprState *) * Max(bs->n_args, 1));
	bs->arg_typlen = palloc(sizeof(int16) * Max(bs->n_args, 1));
	bs->arg_byval = palloc(sizeof(bool) * Max(bs->n_args, 1));
	c = 0;
	foreach(lc, call_args)
	{
		ListCell   *la;
		int			a = bs->arg_first[c];

		Assert(list_length((List *) lfirst(lc)) == bs->arg_first[c + 1] - a);
		foreach(la, (List *) lfirst(lc))
		{
			bs->arg_states[a] = ExecInitExpr((Expr *) lfirst(la), &node->ss.ps);
			get_typlenbyval(exprType((Node *) lfirst(la)), &bs->arg_typlen[a], &bs->arg_byval[a]);
			a++;
		}
		c++;
	}
	bs->tuple_slot = ExecInitExtraTupleSlot(estate, ExecGetResultType(outerPlanState(bs)),
											&TTSOpsMinimalTuple);
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	bs->col_names = batch_column_names(outerPlan(&cscan->scan.plan), estate);

	LlmQueueAttach();
	bs->node_cxt = CurrentMemoryContext;
	bs->max_rows = 2 * bs->window;
	bs->rows = palloc0(sizeof(BatchRow) * bs->max_rows);
	for (int r = 0; r < bs->max_rows; r++)
		bs->rows[r].call_job = palloc0(sizeof(int) * (bs->n_calls + 1));
	bs->cxt = AllocSetContextCreate(CurrentMemoryContext, "LLM Batch rows", ALLOCSET_DEFAULT_SIZES);
	bs->rows_estimate = (int64) cscan->scan.plan.plan_rows;
	LlmProgressStart(bs->rows_estimate, true);
	bs->in_progress = true;
	bs->remote = LlmRemoteStart(bs->node_cxt);
	bs->cancel_cb.func = batch_cancel_callback;
	bs->cancel_cb.arg = bs;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &bs->cancel_cb);
}

/* Free a ring row: cancel what it still has in flight, drop its memory, clear its counts. */
static void
batch_free_row(BatchState *bs, BatchRow *row)
{
	for (int j = 0; j < row->n_jobs; j++)
		bs->n_in_slots -= row->jobs[j].slot >= 0;
	LlmQueueCancel(row->jobs, row->n_jobs);
	if (row->cxt != NULL)
		MemoryContextDelete(row->cxt);
	row->cxt = NULL;
	row->tuple = NULL;
	row->args = NULL;
	row->n_jobs = row->n_submitted = row->n_answered = 0;
	row->busy = false;
}

/* Room for n jobs in row, in the node's memory. */
static void
batch_reserve_jobs(BatchState *bs, BatchRow *row, int n)
{
	int			m = Max(Max(n, 2 * row->max_jobs), 4);

	if (n <= row->max_jobs)
		return;
	if (row->jobs == NULL)
	{
		row->jobs = MemoryContextAlloc(bs->node_cxt, sizeof(LlmJob) * m);
		row->answered = MemoryContextAlloc(bs->node_cxt, sizeof(bool) * m);
		row->next_dup = MemoryContextAlloc(bs->node_cxt, sizeof(BatchRef) * m);
	}
	else
	{
		row->jobs = repalloc(row->jobs, sizeof(LlmJob) * m);
		row->answered = repalloc(row->answered, sizeof(bool) * m);
		row->next_dup = repalloc(row->next_dup, sizeof(BatchRef) * m);
	}
	row->max_jobs = m;
}

/* The i-th row of the ring, counting from the head. */
static inline BatchRow *
batch_row(BatchState *bs, int i)
{
	return &bs->rows[(bs->head + i) % bs->max_rows];
}

/* A row's requests are all answered: count it done, with their tokens, in llm_progress. */
static void
batch_row_done(BatchRow *row)
{
	int64		prompt_tokens = 0;
	int64		completion_tokens = 0;

	for (int j = 0; j < row->n_jobs; j++)
	{
		prompt_tokens += row->jobs[j].prompt_tokens;
		completion_tokens += row->jobs[j].completion_tokens;
	}
	LlmProgressRow(prompt_tokens, completion_tokens);
}

/* An error in a row's calls: which row, for the error's CONTEXT line. */
typedef struct BatchRowError
{
	BatchState *bs;
	BatchRow   *row;
	ErrorContextCallback callback;
} BatchRowError;

/* CONTEXT of an error in a row's calls: its place in the child's rows, and its first columns' values. */
static void
batch_row_context(void *arg)
{
	BatchRowError *e = (BatchRowError *) arg;
	TupleTableSlot *slot = e->bs->tuple_slot;
	TupleDesc	desc = slot->tts_tupleDescriptor;
	StringInfoData cols;
	int			shown = 0;

	initStringInfo(&cols);
	ExecStoreMinimalTuple(e->row->tuple, slot, false);
	slot_getallattrs(slot);
	for (int i = 0; i < desc->natts && shown < 4; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Oid			out;
		bool		varlena;
		char	   *value;

		if (att->attisdropped || e->bs->col_names == NULL || e->bs->col_names[i] == NULL)
			continue;
		appendStringInfo(&cols, "%s%s = ", shown++ > 0 ? ", " : "", e->bs->col_names[i]);
		if (slot->tts_isnull[i])
		{
			appendStringInfoString(&cols, "NULL");
			continue;
		}
		getTypeOutputInfo(att->atttypid, &out, &varlena);
		value = OidOutputFunctionCall(out, slot->tts_values[i]);
		/* 40 characters of a long value are enough to find the row */
		appendBinaryStringInfo(&cols, value, pg_mbcharcliplen(value, strlen(value), 40));
		if (pg_mbstrlen(value) > 40)
			appendStringInfoString(&cols, "...");
	}
	if (shown > 0)
		errcontext("row " INT64_FORMAT " of the LLM Batch node: %s", e->row->ordinal, cols.data);
	else
		errcontext("row " INT64_FORMAT " of the LLM Batch node", e->row->ordinal);
}

/* Name row in the CONTEXT of errors until batch_row_error_pop(). */
static void
batch_row_error_push(BatchRowError *e, BatchState *bs, BatchRow *row)
{
	e->bs = bs;
	e->row = row;
	e->callback.callback = batch_row_context;
	e->callback.arg = e;
	e->callback.previous = error_context_stack;
	error_context_stack = &e->callback;
}

/* Stop naming the row pushed with e. */
static void
batch_row_error_pop(BatchRowError *e)
{
	error_context_stack = e->callback.previous;
}

/* Read the next child row into the ring and build its jobs; false at the child's end. */
static bool
batch_read_row(BatchState *bs)
{
	TupleTableSlot *child = ExecProcNode(outerPlanState(bs));
	ExprContext *econtext = bs->css.ss.ps.ps_ExprContext;
	BatchRow   *row;
	MemoryContext old;
	BatchRowError rowerr;

	if (TupIsNull(child))
		return false;
	row = batch_row(bs, bs->n_rows);
	Assert(row->cxt == NULL);
	row->cxt = AllocSetContextCreate(bs->cxt, "LLM Batch row", ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(row->cxt);
	row->tuple = ExecCopySlotMinimalTuple(child);
	row->ordinal = bs->n_read + 1;
	econtext->ecxt_outertuple = child;
	batch_row_error_push(&rowerr, bs, row);

	/* the arguments, copied into the row: the jobs point into them, and the results read them */
	row->args = palloc(sizeof(NullableDatum) * Max(bs->n_args, 1));
	for (int a = 0; a < bs->n_args; a++)
	{
		Datum		v = ExecEvalExprSwitchContext(bs->arg_states[a], econtext, &row->args[a].isnull);

		row->args[a].value = row->args[a].isnull ? (Datum) 0 : datumCopy(v, bs->arg_byval[a], bs->arg_typlen[a]);
	}
	ResetExprContext(econtext);

	/* each call's jobs, after those of the calls before it */
	row->n_jobs = 0;
	for (int c = 0; c < bs->n_calls; c++)
	{
		int			n;
		LlmJob	   *jobs = LlmBatchCallJobs(bs->funcs[c], &row->args[bs->arg_first[c]], &n);

		row->call_job[c] = row->n_jobs;
		batch_reserve_jobs(bs, row, row->n_jobs + n);
		for (int j = 0; j < n; j++)
		{
			LlmJob	   *job = &row->jobs[row->n_jobs++];

			*job = jobs[j];
			job->slot = -1;
			job->remote_node = -1;
			job->params.draft_group = bs->draft_group;
			if (job->system != NULL)	/* it may be llm.system_prompt, which a SET could free */
				job->system = pnstrdup(job->system, job->system_len);
		}
	}
	row->call_job[bs->n_calls] = row->n_jobs;
	batch_row_error_pop(&rowerr);
	if (row->n_jobs > 0)
	{
		memset(row->answered, 0, sizeof(bool) * row->n_jobs);
		memset(row->next_dup, 0, sizeof(BatchRef) * row->n_jobs);
	}
	MemoryContextSwitchTo(old);
	if (row->n_jobs == 0)
		batch_row_done(row);
	bs->n_rows++;
	bs->n_read++;
	return true;
}

/* Count job j of row answered; a row with every job answered is done, and no longer busy. */
static void
batch_answered(BatchState *bs, BatchRow *row, int j)
{
	row->answered[j] = true;
	if (++row->n_answered < row->n_jobs)
		return;
	batch_row_done(row);
	if (row->busy)
	{
		row->busy = false;
		bs->n_busy--;
	}
}

/*
 * Whether a and b are the same request, so one answer serves both: the same
 * prompt (or conversation and tools), continuation to score, parameters,
 * stop strings and grammar (json_schema or choices), and the same seed
 * unless greedy.
 */
static bool
same_request(const LlmJob *a, const LlmJob *b)
{
	const LlmParams *p = &a->params;
	const LlmParams *q = &b->params;

	return a->prompt != NULL && b->prompt != NULL && a->prompt_len == b->prompt_len &&
		p->max_tokens == q->max_tokens && p->temperature == q->temperature && p->top_p == q->top_p &&
		p->top_k == q->top_k && p->chat == q->chat && (p->temperature == 0 || p->seed == q->seed) &&
		p->messages == q->messages && p->enable_thinking == q->enable_thinking &&
		(a->tools == NULL) == (b->tools == NULL) && a->tools_len == b->tools_len &&
		(a->tools_len == 0 || memcmp(a->tools, b->tools, a->tools_len) == 0) &&
		a->error_as_null == b->error_as_null && a->n_stop == b->n_stop && a->stops_len == b->stops_len &&
		memcmp(a->prompt, b->prompt, a->prompt_len) == 0 &&
		(a->system == NULL) == (b->system == NULL) && a->system_len == b->system_len &&
		(a->system_len == 0 || memcmp(a->system, b->system, a->system_len) == 0) &&
		(a->stops_len == 0 || memcmp(a->stops, b->stops, a->stops_len) == 0) &&
		p->grammar == q->grammar && p->grammar_len == q->grammar_len &&
		(p->grammar_len == 0 || memcmp(a->grammar, b->grammar, p->grammar_len) == 0) &&
		p->score == q->score && a->continuation_len == b->continuation_len &&
		(a->continuation_len == 0 || memcmp(a->continuation, b->continuation, a->continuation_len) == 0);
}

/* Give job j of row the answer of the job it duplicates. */
static void
batch_copy_answer(BatchState *bs, const LlmJob *from, BatchRow *row, int j)
{
	LlmJob	   *job = &row->jobs[j];

	job->failed = from->failed;
	job->finish_reason = from->finish_reason;
	job->logprob = from->logprob;
	job->n_scored = from->n_scored;
	job->completion = from->completion ? MemoryContextStrdup(row->cxt, from->completion) : NULL;
	batch_answered(bs, row, j);
}

/*
 * Whether an earlier job in the ring (of rows before index i, and before j
 * in row i) asks what job j of row i asks: then it takes that job's
 * answer, now or when it comes, and makes no request.
 */
static bool
batch_dedup(BatchState *bs, int i, int j)
{
	BatchRow   *row = batch_row(bs, i);

	for (int k = 0; k <= i; k++)
	{
		BatchRow   *o = batch_row(bs, k);

		for (int oj = 0; oj < (k < i ? o->n_jobs : j); oj++)
		{
			if (!same_request(&o->jobs[oj], &row->jobs[j]))
				continue;
			bs->n_deduplicated++;
			if (o->answered[oj])
				batch_copy_answer(bs, &o->jobs[oj], row, j);
			else
			{
				row->next_dup[j] = o->next_dup[oj];
				o->next_dup[oj] = (BatchRef) {row, j};
			}
			return true;
		}
	}
	return false;
}

/*
 * Send job j of row to a node: with llm.remote_servers, the one
 * LlmRemotePick() chooses (a remote one sends it at the next
 * LlmRemoteFlush), else the local queue; false when the local queue takes
 * no more now (in_flight as for LlmQueueSubmit).
 */
static bool
batch_dispatch(BatchState *bs, BatchRow *row, int j, bool in_flight)
{
	LlmJob	   *job = &row->jobs[j];

	if (bs->remote != NULL)
	{
		int			node = LlmRemotePick(bs->remote, bs->n_in_slots);

		if (node >= 0)
		{
			LlmRemoteAdd(bs->remote, node, job, row, j);
			return true;
		}
	}
	/* at most a quarter of the slots: wait for the answers in flight */
	if (bs->n_in_slots > 0 && bs->n_in_slots >= Max(1, llm_max_queued_requests / 4))
		return false;
	if (!LlmQueueSubmit(job, in_flight))
		return false;
	bs->n_in_slots++;
	bs->n_local++;
	return true;
}

/* The remote job of row (tagged id) that an answer or a failure is about, or NULL when it is not awaited. */
static LlmJob *
batch_remote_job(BatchRow *row, int j, uint64 id)
{
	if (j >= row->n_jobs || row->answered[j] || row->jobs[j].remote_node < 0 || row->jobs[j].request_id != id)
		return NULL;
	return &row->jobs[j];
}

/* A failed remote node left job j of row unanswered: send it again (LlmRemoteLostCb). */
static void
batch_remote_lost(void *arg, void *rowp, int j, uint64 id)
{
	BatchState *bs = (BatchState *) arg;
	LlmJob	   *job = batch_remote_job((BatchRow *) rowp, j, id);

	if (job == NULL)
		return;
	job->remote_node = -1;
	if (bs->n_resend == bs->max_resend)
	{
		bs->max_resend = Max(16, 2 * bs->max_resend);
		bs->resend = bs->resend ? repalloc(bs->resend, sizeof(BatchRef) * bs->max_resend) :
			MemoryContextAlloc(bs->node_cxt, sizeof(BatchRef) * bs->max_resend);
	}
	bs->resend[bs->n_resend++] = (BatchRef) {(BatchRow *) rowp, j};
	bs->n_retried++;
}

/*
 * Submit what the window allows: the remaining jobs of rows already read,
 * then new rows from the child.  Stops early when every request slot is
 * taken (if none of ours is in flight, that is an error).
 */
static void
batch_fill_window(BatchState *bs)
{
	int			i = 0;

	for (;;)
	{
		BatchRow   *row;

		/* the first row with jobs not yet submitted, or a new row */
		while (i < bs->n_rows && batch_row(bs, i)->n_submitted == batch_row(bs, i)->n_jobs)
			i++;
		if (i == bs->n_rows)
		{
			if (bs->child_done || bs->n_rows == bs->max_rows || bs->n_busy >= bs->window ||
				(bs->bound > 0 && bs->n_read >= bs->bound))
				return;
			if (!batch_read_row(bs))
			{
				bs->child_done = true;
				/* llm_progress: the rows are counted, no longer the plan's estimate */
				LlmProgressTotalKnown(bs->rows_estimate, bs->n_read);
				return;
			}
			continue;			/* a row whose calls all make no request is passed over */
		}
		row = batch_row(bs, i);
		if (!row->busy)
		{
			if (bs->n_busy >= bs->window)
				return;
			row->busy = true;
			bs->n_busy++;
		}
		while (row->n_submitted < row->n_jobs)
		{
			int			j = row->n_submitted;
			LlmJob	   *job = &row->jobs[j];

			if (job->shared && LlmKeptAnswer(job))
			{
				bs->n_deduplicated++;
				row->n_submitted++;
				batch_answered(bs, row, j);
				continue;
			}
			if (batch_dedup(bs, i, j))
			{
				row->n_submitted++;
				continue;
			}
			if (!batch_dispatch(bs, row, j, bs->n_busy > 1 || row->n_submitted > row->n_answered))
				return;			/* wait for the answers in flight */
			bs->n_requests++;
			row->n_submitted++;
		}
	}
}

/*
 * Keep the window full: first the jobs a failed remote node left
 * unanswered, then the rows' jobs not yet submitted; then send the remote
 * nodes what was given to them.
 */
static void
batch_fill(BatchState *bs)
{
	while (bs->n_resend > 0)
	{
		BatchRef	ref = bs->resend[bs->n_resend - 1];

		if (!batch_dispatch(bs, ref.row, ref.job, bs->n_in_slots > 0 || LlmRemoteBusy(bs->remote)))
			break;
		bs->n_resend--;
	}
	if (bs->n_resend == 0)
		batch_fill_window(bs);
	if (bs->remote != NULL)
		LlmRemoteFlush(bs->remote, batch_remote_lost, bs);
}

static void batch_job_done(BatchState *bs, BatchRow *row, int j);

/* Read the answer of job j of row (finished) into row's memory, and into the jobs waiting for it. */
static void
batch_take_answer(BatchState *bs, BatchRow *row, int j)
{
	LlmJob	   *job = &row->jobs[j];
	MemoryContext old = MemoryContextSwitchTo(row->cxt);
	BatchRowError rowerr;

	batch_row_error_push(&rowerr, bs, row);
	bs->n_in_slots--;			/* LlmQueueWait frees the slot, or raises */
	LlmQueueWait(job);
	batch_row_error_pop(&rowerr);
	MemoryContextSwitchTo(old);
	batch_job_done(bs, row, j);
}

/* A remote node's answer to job j of row (tagged id): the job's, unless it is no longer awaited (LlmRemoteAnswerCb). */
static void
batch_remote_answer(void *arg, void *rowp, int j, uint64 id, LlmJob *ans)
{
	BatchState *bs = (BatchState *) arg;
	BatchRow   *row = (BatchRow *) rowp;
	LlmJob	   *job = batch_remote_job(row, j, id);
	BatchRowError rowerr;

	if (job == NULL)
		return;
	batch_row_error_push(&rowerr, bs, row);
	LlmRemoteTakeAnswer(job, ans, row->cxt);	/* raises the node's error for a failed request */
	batch_row_error_pop(&rowerr);
	batch_job_done(bs, row, j);
}

/* Job j of row has its answer: count it, keep it, and give it to the jobs waiting for it. */
static void
batch_job_done(BatchState *bs, BatchRow *row, int j)
{
	LlmJob	   *job = &row->jobs[j];

	bs->prompt_tokens += job->prompt_tokens;
	bs->completion_tokens += job->completion_tokens;
	bs->cached_tokens += job->cached_tokens;
	bs->cache_hits += job->cache_hit;
	bs->drafted_tokens += job->drafted_tokens;
	bs->accepted_tokens += job->accepted_tokens;
	bs->run_us += job->run_us;
	bs->n_failed += job->failed;
	if (job->shared)
		LlmKeepAnswer(job);
	batch_answered(bs, row, j);
	for (BatchRef d = row->next_dup[j]; d.row != NULL; d = d.row->next_dup[d.job])
		batch_copy_answer(bs, job, d.row, d.job);
}

/* Take every answer that has arrived; with wait_ms, first sleep up to that long (-1: until it comes) on the head row's. */
static void
batch_collect(BatchState *bs, long wait_ms)
{
	/* the remote nodes' answers; sleep on the local head row only briefly while they may come */
	if (LlmRemoteBusy(bs->remote))
	{
		LlmRemoteCollect(bs->remote, bs->n_in_slots > 0 ? 0 : wait_ms, batch_remote_answer, batch_remote_lost, bs);
		wait_ms = bs->n_in_slots == 0 ? 0 : (wait_ms < 0 ? LLM_BATCH_POLL_MS : Min(wait_ms, LLM_BATCH_POLL_MS));
	}
	for (int i = 0; i < bs->n_rows; i++)
	{
		BatchRow   *row = batch_row(bs, i);

		for (int j = 0; j < row->n_submitted; j++)
		{
			LlmJob	   *job = &row->jobs[j];

			if (job->slot >= 0 && LlmQueuePoll(job, wait_ms))
				batch_take_answer(bs, row, j);
			if (job->slot >= 0)
				wait_ms = 0;	/* only the first unanswered job is slept on */
		}
	}
}

/* Put the head row, answered, into the scan slot. */
static TupleTableSlot *
batch_store_head(BatchState *bs)
{
	BatchRow   *row = batch_row(bs, 0);
	TupleTableSlot *scan = bs->css.ss.ss_ScanTupleSlot;
	MemoryContext old;

	ExecClearTuple(scan);
	ExecStoreMinimalTuple(row->tuple, bs->tuple_slot, false);
	slot_getallattrs(bs->tuple_slot);
	memcpy(scan->tts_values, bs->tuple_slot->tts_values, sizeof(Datum) * bs->n_child);
	memcpy(scan->tts_isnull, bs->tuple_slot->tts_isnull, sizeof(bool) * bs->n_child);
	old = MemoryContextSwitchTo(row->cxt);
	for (int c = 0; c < bs->n_calls; c++)
		scan->tts_values[bs->n_child + c] =
			LlmBatchCallResult(bs->funcs[c], &row->args[bs->arg_first[c]], &row->jobs[row->call_job[c]],
							   row->call_job[c + 1] - row->call_job[c], &scan->tts_isnull[bs->n_child + c]);
	MemoryContextSwitchTo(old);
	return ExecStoreVirtualTuple(scan);
}

/* The next row, in the child's order, with its answers (ExecCustomScan). */
static TupleTableSlot *
batch_exec(CustomScanState *node)
{
	BatchState *bs = (BatchState *) node;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;

	for (;;)
	{
		TupleTableSlot *scan;

		if (bs->returned)
		{
			ExecClearTuple(node->ss.ss_ScanTupleSlot);
			ExecClearTuple(bs->tuple_slot);
			batch_free_row(bs, batch_row(bs, 0));
			bs->head = (bs->head + 1) % bs->max_rows;
			bs->n_rows--;
			bs->returned = false;
		}

		/* keep the window full, and wait for the head row's answers */
		batch_fill(bs);
		if (bs->n_rows == 0)
			return NULL;
		while (batch_row(bs, 0)->n_answered < batch_row(bs, 0)->n_jobs)
		{
			CHECK_FOR_INTERRUPTS();
			/* another row's answer frees room in the window only while there are rows to read */
			batch_collect(bs, bs->child_done || bs->n_rows == bs->max_rows ? -1 : LLM_BATCH_POLL_MS);
			batch_fill(bs);
		}

		scan = batch_store_head(bs);
		bs->returned = true;
		ResetExprContext(econtext);
		econtext->ecxt_scantuple = scan;
		if (node->ss.ps.qual == NULL || ExecQual(node->ss.ps.qual, econtext))
			return node->ss.ps.ps_ProjInfo ? ExecProject(node->ss.ps.ps_ProjInfo) : scan;
		InstrCountFiltered1(node, 1);
	}
}

/* Forget every row, cancelling what is in flight. */
static void
batch_clear(BatchState *bs)
{
	LlmRemoteCancel(bs->remote);
	bs->n_resend = 0;
	if (bs->rows == NULL)
		return;
	for (int r = 0; r < bs->max_rows; r++)
		batch_free_row(bs, &bs->rows[r]);
	bs->head = bs->n_rows = bs->n_busy = 0;
	bs->n_read = 0;
	bs->child_done = bs->returned = false;
}

/* End the node: cancel what a LIMIT above left unread, end the child (EndCustomScan). */
static void
batch_end(CustomScanState *node)
{
	BatchState *bs = (BatchState *) node;

	batch_clear(bs);
	if (bs->in_progress)
		LlmProgressEnd();
	bs->in_progress = false;
	LlmShmemDsaTrim();
	ExecEndNode(outerPlanState(bs));
}

/* Start over (ReScanCustomScan). */
static void
batch_rescan(CustomScanState *node)
{
	BatchState *bs = (BatchState *) node;
	PlanState  *child = outerPlanState(bs);

	batch_clear(bs);
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
	if (child->chgParam == NULL)
		ExecReScan(child);
}

/* EXPLAIN: the window; with ANALYZE, the requests, tokens and the worker's time (ExplainCustomScan). */
static void
batch_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	BatchState *bs = (BatchState *) node;

	ExplainPropertyInteger("Window", "rows", bs->window, es);
	if (!es->analyze)
		return;
	ExplainPropertyInteger("Requests", NULL, bs->n_requests, es);
	if (bs->n_deduplicated > 0 || es->format != EXPLAIN_FORMAT_TEXT)
		ExplainPropertyInteger("Deduplicated Calls", NULL, bs->n_deduplicated, es);
	if (bs->n_failed > 0 || es->format != EXPLAIN_FORMAT_TEXT)
		ExplainPropertyInteger("Failed Requests", NULL, bs->n_failed, es);
	ExplainPropertyInteger("Prompt Tokens", NULL, bs->prompt_tokens, es);
	ExplainPropertyInteger("Cached Prompt Tokens", NULL, bs->cached_tokens, es);
	if (bs->cache_hits > 0 || es->format != EXPLAIN_FORMAT_TEXT)
		ExplainPropertyInteger("Answer Cache Hits", NULL, bs->cache_hits, es);
	ExplainPropertyInteger("Completion Tokens", NULL, bs->completion_tokens, es);
	if (bs->drafted_tokens > 0 || es->format != EXPLAIN_FORMAT_TEXT)
	{
		ExplainPropertyInteger("Drafted Tokens", NULL, bs->drafted_tokens, es);
		ExplainPropertyInteger("Accepted Draft Tokens", NULL, bs->accepted_tokens, es);
	}
	if (es->timing)
		ExplainPropertyFloat("Summed Request Time", "ms", bs->run_us / 1000.0, 3, es);
	if (bs->remote != NULL)
	{
		ExplainPropertyInteger("Local Requests", NULL, bs->n_local, es);
		ExplainPropertyInteger("Resent Requests", NULL, bs->n_retried, es);
		LlmRemoteExplain(bs->remote, es);
	}
}

/* Register the node's methods, so that parallel workers can read its plans (from _PG_init). */
void
LlmBatchScanInit(void)
{
	RegisterCustomScanMethods(&batch_scan_methods);
}
