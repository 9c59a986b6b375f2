/*
 * fair.c
 *		Fair shares of the llm worker among roles: which role may take a
 *		request slot, which queued request the worker puts into the engine
 *		next, and the per-role counters behind the llm_role_stats view.
 *
 * One worker serves every session, so without shares the first role to
 * queue 10,000 requests fills every slot and every engine sequence, and
 * everybody else fails or waits behind it.  Two mechanisms prevent that.
 *
 * Slots (backends, LlmFairTakeSlot).  A role is the session user
 * (GetSessionUserId: SET ROLE does not escape a share).  A role may hold
 * at most its limit of slots: the smaller of llm.max_requests_per_role
 * (-1: the slots less a quarter) and its weighted share, n_slots * w / W,
 * where w is its llm.role_weight and W the sum of the weights of the
 * active roles (those holding a slot or waiting for one, itself
 * included).  A request refused a slot:
 *   - waits for its own earliest request, when its backend has others in
 *     flight (a batch runs through its share as a sliding window);
 *   - else fails at once (53000) when its role holds
 *     llm.max_requests_per_role slots: the shortage is of its own making
 *     ("too many llm requests are queued" when every slot is taken, as
 *     before shares; "... for role" when some are free);
 *   - else waits for a slot, which will come: either its role is at its
 *     weighted share, and its own requests will finish, or every slot is
 *     taken and its role holds less than its share, so another role holds
 *     more than its own.  The waiter registers itself (n_waiting of its
 *     entry), which makes its role active and so lowers every other
 *     role's share at once: the roles over their share are refused new
 *     slots, and the next slot freed stays free for the waiter, which
 *     LlmSlotFree wakes through the slot_freed condition variable.  The
 *     wait ends with the statement (cancel, statement_timeout, lost
 *     client) like any other.  A slot held by a backend that does not
 *     read it (an idle cursor over an LLM Batch node) frees only when
 *     that backend reads or ends, as before shares.
 *
 * Engine sequences (the worker, LlmFairPick).  The worker no longer puts
 * every queued request into the engine: it admits at most as many as the
 * engine runs at once (llm.max_sequences of its loaded engine), so that
 * what waits, waits in the slots, where the worker chooses.  It chooses
 * by weighted fair queueing over roles, in virtual time (start-time fair
 * queueing, Goyal, Vin and Cheng, SIGCOMM 1996): each role has a virtual
 * time vtime, the work admitted for it divided by its weight; the worker
 * admits the head (earliest request_id: FIFO within a role) of the role
 * with the least vtime, adds the request's estimated cost (prompt bytes
 * / 4 + max_tokens) divided by the weight, and corrects the estimate to
 * the tokens actually computed (prompt tokens not taken from the prefix
 * cache + generated tokens) when the request completes.  A role whose
 * queue was empty at the last pick starts at the current virtual time
 * (the start tag of the last admission) if it is behind it, so time
 * without queued requests earns no credit (SFQ's rule for a flow that
 * becomes backlogged).  Finally the engine is configured with
 * LlmFairHeadroom() sequences beyond llm.max_sequences, which only the
 * first request of a role with nothing running may take: a newcomer
 * starts at the next step even while the engine is full of another role's
 * long generations, which would otherwise make it wait for one of them to
 * finish.  The engine's own admission order (cached prefixes first)
 * still applies, among the requests the worker admits together.  Inside
 * the engine each request is in its role's share group with the role's
 * weight (LlmFairRoleWeight): the step's prompt budget goes to the group
 * with the least prompt tokens fed per weight, and a full KV pool is
 * taken back from the group holding the most per weight (engine share.h),
 * so a newcomer's prompt starts within a step or two and is not the one
 * preempted.
 *
 * Roles tracked.  LLM_ROLE_ENTRIES entries in shared memory; entry 0
 * stands for "other roles".  A role gets an entry on its first request;
 * when none is free, the least recently used entry of a role with nothing
 * held or waiting is reused, its counters added to entry 0 first.  When
 * every entry is busy, a new role's requests are scheduled and counted
 * under entry 0, sharing its share.
 *
 * Locking protocol.  Everything here (the entries, n_waiting) is protected
 * by LlmState->lock, as the slots are (see shmem.c), so a slot and its
 * role's counters change together.  Backends write an entry's roleid,
 * weight, last_used and n_waiting (exclusive lock, while taking a slot or
 * waiting for one), and reset the whole entry when they reuse it for
 * another role; the worker writes vtime and the counters (exclusive
 * lock, while admitting or answering); llm_role_stats() and
 * llm_reset_stats() read or zero the counters.  An entry is reused only
 * while no slot refers to it and nobody waits on it.  slot_freed is a
 * condition variable (its own spinlock); LlmSlotFree broadcasts it under
 * the lock, which is safe (it takes only that spinlock and sets latches).
 * The worker's per-slot charges (FairCharged) and clock are its own.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/memutils.h"

#include "llm.h"

/* One role's share state and counters. */
typedef struct LlmRoleEntry
{
	Oid			roleid;			/* InvalidOid: free (entry 0: other roles) */
	int			weight;			/* llm.role_weight of its latest submitting session */
	int			n_waiting;		/* backends waiting for a slot for it */
	TimestampTz last_used;		/* its latest request */
	double		vtime;			/* worker: admitted work / weight */
	LlmRoleCounters c;
} LlmRoleEntry;

/* The shared part: the entries and the backends waiting for a slot. */
typedef struct LlmFairShared
{
	ConditionVariable slot_freed;	/* broadcast by LlmSlotFree while n_waiting > 0 */
	int			n_waiting;		/* all roles */
	LlmRoleEntry roles[LLM_ROLE_ENTRIES];
} LlmFairShared;

static LlmFairShared *LlmFair = NULL;

/* The worker's: each slot's estimated cost charged at admission, and the virtual clock. */
static double *FairCharged = NULL;	/* (n_slots) */
static double FairClock = 0;

/* A queued request the worker may admit. */
typedef struct LlmFairCand
{
	int			role;
	uint64		request_id;
	int			slotno;
} LlmFairCand;

static LlmFairCand *FairCands = NULL;	/* (n_slots) */
static bool FairWasQueued[LLM_ROLE_ENTRIES];	/* the role had queued requests at the last pick */

/* Bytes of the shared part. */
Size
LlmFairShmemSize(void)
{
	return sizeof(LlmFairShared);
}

/* Find or create the shared part (shmem_startup_hook). */
void
LlmFairShmemInit(void)
{
	bool		found;

	LlmFair = ShmemInitStruct("llm roles", LlmFairShmemSize(), &found);
	if (!found)
	{
		memset(LlmFair, 0, LlmFairShmemSize());
		ConditionVariableInit(&LlmFair->slot_freed);
		for (int e = 0; e < LLM_ROLE_ENTRIES; e++)
			LlmFair->roles[e].weight = 1;
	}
}

/* Engine sequences beyond llm.max_sequences kept for roles with none running. */
int
LlmFairHeadroom(int max_sequences)
{
	return Max(1, max_sequences / 8);
}

/* The llm.max_requests_per_role of this session, resolved (-1: the slots less a quarter). */
static int
LlmFairRoleCap(void)
{
	int			n_slots = LlmState->n_slots;

	if (llm_max_requests_per_role < 0)
		return Max(1, n_slots - n_slots / 4);
	return Min(llm_max_requests_per_role, n_slots);
}

/* Add entry e's counters to entry 0's (it is about to be reused). */
static void
LlmFairFold(LlmRoleEntry *e)
{
	LlmRoleCounters *o = &LlmFair->roles[0].c;

	o->completed += e->c.completed;
	o->failed += e->c.failed;
	o->cancelled += e->c.cancelled;
	o->prompt_tokens += e->c.prompt_tokens;
	o->completion_tokens += e->c.completion_tokens;
	o->admitted += e->c.admitted;
	o->queue_us += e->c.queue_us;
}

/*
 * The entry of role roleid, taking a free or idle one when it has none
 * (held: slots held per entry); 0 when every entry is busy.  Lock held
 * exclusively.
 */
static int
LlmFairEntry(Oid roleid, const int *held)
{
	int			free_e = -1;
	int			idle_e = -1;
	LlmRoleEntry *r;

	for (int e = 1; e < LLM_ROLE_ENTRIES; e++)
	{
		r = &LlmFair->roles[e];
		if (r->roleid == roleid)
			return e;
		if (r->roleid == InvalidOid)
		{
			if (free_e < 0)
				free_e = e;
		}
		else if (held[e] == 0 && r->n_waiting == 0 &&
				 (idle_e < 0 || r->last_used < LlmFair->roles[idle_e].last_used))
			idle_e = e;
	}
	if (free_e < 0 && idle_e >= 0)
	{
		LlmFairFold(&LlmFair->roles[idle_e]);
		free_e = idle_e;
	}
	if (free_e < 0)
		return 0;
	r = &LlmFair->roles[free_e];
	memset(r, 0, sizeof(*r));
	r->roleid = roleid;
	r->weight = 1;
	return free_e;
}

/* Register or unregister waiter in role entry e (lock held exclusively). */
static void
LlmFairSetWaiting(LlmFairWaiter *waiter, int e, bool waiting)
{
	if (waiter->waiting == waiting)
		return;
	if (waiting)
		waiter->role = e;
	LlmFair->roles[waiter->role].n_waiting += waiting ? 1 : -1;
	LlmFair->n_waiting += waiting ? 1 : -1;
	waiter->waiting = waiting;
}

/*
 * Find a slot this session's role may take, with the lock held
 * exclusively.  Returns the slot number, or -1 with why->refusal saying
 * why not; why->role is the role's entry either way.  A caller that will
 * wait when told to (waiter not NULL) is registered as waiting on
 * LLM_FAIR_WAIT, and unregistered when it gets a slot.
 */
int
LlmFairTakeSlot(LlmFairRefusal *why, LlmFairWaiter *waiter)
{
	int			n_slots = LlmState->n_slots;
	int			held[LLM_ROLE_ENTRIES] = {0};
	int			free_slot = -1;
	int			me;
	int64		weights = 0;
	LlmRoleEntry *r;

	for (int n = 0; n < n_slots; n++)
	{
		int			i = (LlmState->next_free_hint + n) % n_slots;
		LlmSlot    *slot = &LlmState->slots[i];

		if (slot->state == LLM_SLOT_FREE)
		{
			if (free_slot < 0)
				free_slot = i;
		}
		else
			held[slot->role]++;
	}

	me = LlmFairEntry(GetSessionUserId(), held);
	r = &LlmFair->roles[me];
	r->weight = llm_role_weight;
	r->last_used = GetCurrentTimestamp();

	for (int e = 0; e < LLM_ROLE_ENTRIES; e++)
		if (e == me || held[e] > 0 || LlmFair->roles[e].n_waiting > 0)
			weights += LlmFair->roles[e].weight;

	why->role = me;
	why->held = held[me];
	why->cap = LlmFairRoleCap();
	why->share = Max(1, (int) ((int64) n_slots * r->weight / weights));
	why->limit = Min(why->cap, why->share);

	if (held[me] < why->limit && free_slot >= 0)
	{
		why->refusal = LLM_FAIR_OK;
		if (waiter != NULL)
			LlmFairSetWaiting(waiter, me, false);
		LlmState->next_free_hint = (free_slot + 1) % n_slots;
		return free_slot;
	}
	if (held[me] >= why->cap)
		why->refusal = free_slot >= 0 ? LLM_FAIR_ROLE_LIMIT : LLM_FAIR_QUEUE_FULL;
	else
	{
		why->refusal = LLM_FAIR_WAIT;
		if (waiter != NULL)
			LlmFairSetWaiting(waiter, me, true);
	}
	return -1;
}

/* Stop waiting for a slot (lock not held); for error cleanup too, so it raises nothing. */
void
LlmFairStopWaiting(LlmFairWaiter *waiter)
{
	if (!waiter->waiting)
		return;
	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	LlmFairSetWaiting(waiter, waiter->role, false);
	LWLockRelease(LlmState->lock);
}

/* The condition variable a backend waiting for a slot sleeps on. */
ConditionVariable *
LlmFairSlotFreedCV(void)
{
	return &LlmFair->slot_freed;
}

/* The session user's name, for messages. */
static const char *
LlmFairRoleName(void)
{
	char	   *name = GetUserNameFromId(GetSessionUserId(), true);

	return name ? name : psprintf("%u", GetSessionUserId());
}

/* Raise the error for a request refused a slot, as why says (not LLM_FAIR_WAIT). */
void
LlmFairRefuse(const LlmFairRefusal *why)
{
	if (why->refusal == LLM_FAIR_QUEUE_FULL)
		LlmQueueSlotsFull();
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_RESOURCES),
			 errmsg("too many llm requests are queued for role \"%s\"", LlmFairRoleName()),
			 errdetail("The role holds %d request slots; llm.max_requests_per_role is %d.",
					   why->held, why->cap),
			 errhint("Try again later, or raise llm.max_requests_per_role.")));
}

/* Make a slot FREE (lock held exclusively) and wake the backends waiting for one. */
void
LlmSlotFree(LlmSlot *slot)
{
	slot->state = LLM_SLOT_FREE;
	if (LlmFair->n_waiting > 0)
		ConditionVariableBroadcast(&LlmFair->slot_freed);
}

/*
 * Count a request's outcome (DONE, ERROR or CANCELLED; the worker, lock
 * held exclusively) in llm_stats and in its role's counters; a completed
 * one's cost estimate is corrected to the work it took.
 */
void
LlmCountOutcome(LlmSlot *slot, LlmSlotState outcome)
{
	LlmRoleEntry *r = &LlmFair->roles[slot->role];
	int			slotno = slot - LlmState->slots;

	switch (outcome)
	{
		case LLM_SLOT_DONE:
			LlmState->counters.requests_completed++;
			LlmState->counters.prompt_tokens += slot->prompt_tokens;
			LlmState->counters.completion_tokens += slot->completion_tokens;
			r->c.completed++;
			r->c.prompt_tokens += slot->prompt_tokens;
			r->c.completion_tokens += slot->completion_tokens;
			r->c.cached_tokens += slot->cached_tokens;
			if (slot->cache_hit)
			{
				LlmState->counters.cache_hits++;
				r->c.cache_hits++;
			}
			if (FairCharged != NULL && FairCharged[slotno] > 0)
			{
				/* an answer from the answer cache cost no engine work */
				double		work = slot->cache_hit ? 0 :
					slot->prompt_tokens - slot->cached_tokens + slot->completion_tokens;

				r->vtime += (work - FairCharged[slotno]) / r->weight;
				FairCharged[slotno] = 0;
			}
			break;
		case LLM_SLOT_ERROR:
			LlmState->counters.requests_failed++;
			r->c.failed++;
			break;
		case LLM_SLOT_CANCELLED:
			LlmState->counters.requests_cancelled++;
			r->c.cancelled++;
			break;
		default:
			Assert(false);		/* only those three end a request */
	}
}

/* Set up the worker's side: its arrays, and virtual times from 0 (a new worker). */
void
LlmFairWorkerInit(void)
{
	int			n_slots = LlmState->n_slots;

	FairCharged = MemoryContextAllocZero(TopMemoryContext, sizeof(double) * n_slots);
	FairCands = MemoryContextAlloc(TopMemoryContext, sizeof(LlmFairCand) * n_slots);
	FairClock = 0;
	memset(FairWasQueued, 0, sizeof(FairWasQueued));
	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	for (int e = 0; e < LLM_ROLE_ENTRIES; e++)
		LlmFair->roles[e].vtime = 0;
	LWLockRelease(LlmState->lock);
}

/* Order of candidates: by role, then by request_id (FIFO within a role). */
static int
LlmFairCandOrder(const void *a, const void *b)
{
	const LlmFairCand *x = a;
	const LlmFairCand *y = b;

	if (x->role != y->role)
		return x->role < y->role ? -1 : 1;
	if (x->request_id != y->request_id)
		return x->request_id < y->request_id ? -1 : 1;
	return 0;
}

/* The estimated work of a queued request, in tokens. */
static double
LlmFairCost(const LlmSlot *slot)
{
	double		cost = (slot->system_len + slot->prompt_len + slot->tools_len + slot->continuation_len) / 4.0 + 1;

	if (!slot->params.score)
		cost += slot->params.max_tokens;
	return cost;
}

/*
 * How many more requests this worker may admit now, beside the others of
 * llm.devices: its share of the requests in hand (queued, and running in
 * any worker) among the workers that have a model, less what it runs;
 * so the least loaded worker takes the most, and two idle workers split
 * a batch.  A worker without a model takes none while another has one
 * (else it takes all: its answer is why none is loaded).  Lock held.
 */
static int
LlmFairWorkerQuota(int queued, int mine, int others, bool has_engine)
{
	int			ready = LlmWorkersReady();

	if (!has_engine)
		return ready > 0 ? 0 : queued;
	ready = Max(ready, 1);
	return Max(0, (queued + mine + others + ready - 1) / ready - mine);
}

/*
 * Choose the QUEUED slots the worker admits now, by weighted fair
 * queueing, into picked (room for n_slots); returns how many.  capacity
 * is the engine's llm.max_sequences (n_slots with no engine: every
 * request is answered at once).  With several workers (llm.devices) it
 * admits at most its share (LlmFairWorkerQuota), and counts only the
 * requests it runs itself against its engine's capacity.  Lock held
 * exclusively; charges each admitted request to its role and counts its
 * time in the queue.
 */
int
LlmFairPick(int *picked, int capacity, bool has_engine)
{
	int			n_slots = LlmState->n_slots;
	int			headroom = LlmFairHeadroom(capacity);
	int			running[LLM_ROLE_ENTRIES] = {0};
	bool		queued[LLM_ROLE_ENTRIES] = {0};
	int			next[LLM_ROLE_ENTRIES];
	int			end[LLM_ROLE_ENTRIES];
	int			active[LLM_ROLE_ENTRIES];
	int			n_active = 0;
	int			in_engine = 0;
	int			in_others = 0;	/* running in the other workers */
	int			n_cands = 0;
	int			n_picked = 0;
	int			quota;
	TimestampTz now;

	for (int i = 0; i < n_slots; i++)
	{
		LlmSlot    *slot = &LlmState->slots[i];

		if (slot->state == LLM_SLOT_RUNNING && slot->worker != LlmMyWorker)
			in_others++;
		else if (slot->state == LLM_SLOT_RUNNING)
		{
			running[slot->role]++;
			in_engine++;
		}
		else if (slot->state == LLM_SLOT_QUEUED)
		{
			FairCands[n_cands].role = slot->role;
			FairCands[n_cands].request_id = slot->request_id;
			FairCands[n_cands].slotno = i;
			n_cands++;
			queued[slot->role] = true;
		}
	}

	/* a role whose queue was empty starts at the clock: idle time earns no credit */
	for (int e = 0; e < LLM_ROLE_ENTRIES; e++)
	{
		if (queued[e] && !FairWasQueued[e] && LlmFair->roles[e].vtime < FairClock)
			LlmFair->roles[e].vtime = FairClock;
		FairWasQueued[e] = queued[e];
	}
	quota = LlmFairWorkerQuota(n_cands, in_engine, in_others, has_engine);
	if (n_cands == 0 || in_engine >= capacity + headroom || quota == 0)
		return 0;

	/* each role's queue, in order */
	qsort(FairCands, n_cands, sizeof(LlmFairCand), LlmFairCandOrder);
	for (int i = 0; i < n_cands; i++)
	{
		int			e = FairCands[i].role;

		if (i == 0 || FairCands[i - 1].role != e)
		{
			active[n_active++] = e;
			next[e] = i;
		}
		end[e] = i + 1;
	}

	now = GetCurrentTimestamp();
	for (;;)
	{
		int			best = -1;
		LlmRoleEntry *r;
		LlmSlot    *slot;

		for (int a = 0; a < n_active; a++)
		{
			int			e = active[a];

			if (next[e] == end[e])
				continue;
			if (in_engine >= capacity && !(running[e] == 0 && in_engine < capacity + headroom))
				continue;
			if (best < 0 || LlmFair->roles[e].vtime < LlmFair->roles[best].vtime ||
				(LlmFair->roles[e].vtime == LlmFair->roles[best].vtime &&
				 FairCands[next[e]].request_id < FairCands[next[best]].request_id))
				best = e;
		}
		if (best < 0)
			break;

		r = &LlmFair->roles[best];
		slot = &LlmState->slots[FairCands[next[best]].slotno];
		picked[n_picked++] = FairCands[next[best]].slotno;
		next[best]++;
		running[best]++;
		in_engine++;

		FairClock = r->vtime;
		FairCharged[slot - LlmState->slots] = LlmFairCost(slot);
		r->vtime += FairCharged[slot - LlmState->slots] / r->weight;
		r->c.admitted++;
		r->c.queue_us += Max(0, now - slot->queued_at);
		if (n_picked == quota)
			break;
	}
	return n_picked;
}

/* The weight of role entry e (lock held), for the engine's share groups. */
int
LlmFairRoleWeight(int e)
{
	return LlmFair->roles[e].weight;
}

/*
 * Copy every tracked role's counters, weight and slots queued and running
 * now into out (room for LLM_ROLE_ENTRIES); returns how many.  Entry 0
 * (other roles, roleid InvalidOid) only when it has anything to show.
 */
int
LlmRoleStatsSnapshot(LlmRoleStats *out)
{
	int			queued[LLM_ROLE_ENTRIES] = {0};
	int			running[LLM_ROLE_ENTRIES] = {0};
	int			n = 0;

	LlmShmemCheck();
	LWLockAcquire(LlmState->lock, LW_SHARED);
	for (int i = 0; i < LlmState->n_slots; i++)
	{
		LlmSlot    *slot = &LlmState->slots[i];

		if (slot->state == LLM_SLOT_QUEUED)
			queued[slot->role]++;
		else if (slot->state == LLM_SLOT_RUNNING)
			running[slot->role]++;
	}
	for (int e = 0; e < LLM_ROLE_ENTRIES; e++)
	{
		LlmRoleEntry *r = &LlmFair->roles[e];

		if (e > 0 && r->roleid == InvalidOid)
			continue;
		if (e == 0 && queued[0] + running[0] == 0 && r->c.admitted == 0 &&
			r->c.completed + r->c.failed + r->c.cancelled == 0)
			continue;
		out[n].roleid = r->roleid;
		out[n].weight = r->weight;
		out[n].queued = queued[e];
		out[n].running = running[e];
		out[n].c = r->c;
		n++;
	}
	LWLockRelease(LlmState->lock);
	return n;
}

/* Zero every role's counters (llm_reset_stats; lock held exclusively). */
void
LlmRoleStatsReset(void)
{
	for (int e = 0; e < LLM_ROLE_ENTRIES; e++)
		memset(&LlmFair->roles[e].c, 0, sizeof(LlmRoleCounters));
}
