/*
 * remote.c
 *		Remote inference nodes: the LLM Batch node's dispatch of requests to
 *		other servers running llm (llm.remote_servers), and llm_remote_stats.
 *		Those servers' side, llm_remote_batch(), and the wire format are in
 *		remote_serve.c.
 *
 * A node is a foreign server (CREATE SERVER ... FOREIGN DATA WRAPPER
 * postgres_fdw) with a user mapping for the current user; its options and
 * the mapping's are libpq connection options, as postgres_fdw reads them
 * (options libpq does not know, such as postgres_fdw's fetch_size, are
 * passed over).  Nothing of postgres_fdw runs: this file reads the catalogs
 * and connects with libpq itself.
 *
 * Coordinator.  An LLM Batch node with llm.remote_servers set
 * (LlmRemoteStart) connects to each node at its first window, checks that
 * the node serves the same model (the identity the answer cache uses:
 * the model file's content and the settings that change answers) and reads
 * its free capacity from its llm_stats: llm.max_sequences less its queued
 * and running requests.  A node that cannot be reached, whose llm is too
 * old, or whose model differs gets a WARNING and serves no request of the
 * statement; the next statement tries it again.  Each request of the
 * window goes to the node with the least of its requests in flight per
 * unit of free capacity, the local worker being one more node unless
 * llm.local_inference is off (LlmRemotePick).  A node's requests are sent
 * as one llm_remote_batch() call per connection (up to LLM_REMOTE_CONNS
 * connections per node, so a node gets new requests while its earlier ones
 * run), in one serialized bytea, over async libpq in single-row (or chunked)
 * mode; the answers come back as rows as each finishes.  A node that fails
 * (its connection breaks, its query fails) or sends nothing for
 * llm.remote_timeout has its unanswered requests handed back to the caller
 * (the lost callback) to send elsewhere: answers depend only on the model,
 * the prompt, the parameters and the seed, so a request answered on
 * another node of the same device kind gets the same answer, and each
 * request is answered once, by whichever answer arrives for its current
 * dispatch (a stale one is ignored).  Cancel, a statement timeout or any
 * error on the coordinator sends each busy connection a cancel request
 * (PQcancel) and closes it (LlmRemoteCancel, from the node's memory reset
 * callback): the remote query ends at its next check for interrupts, and
 * its requests are cancelled there as a cancelled query's are.
 *
 * A background fill's batch (job_worker.c, through LlmQueueRunKept) runs
 * the same way, to its end, in LlmRemoteRunJobs().
 */
#include "postgres.h"

#include <inttypes.h>
#include <math.h>

#include "commands/defrem.h"
#include "commands/explain.h"
#if PG_VERSION_NUM >= 180000
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#endif
#include "foreign/foreign.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "libpq/pqformat.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/varlena.h"

#include "libpq-fe.h"

#include "llm.h"

#define LLM_REMOTE_CONNS	4		/* connections per node */

/* One request sent on a connection. */
typedef struct RemoteItem
{
	void	   *row;			/* the caller's tags */
	int			job;
	uint64		id;
	bool		answered;
} RemoteItem;

/* A connection to a node, with at most one llm_remote_batch() call in flight. */
typedef struct RemoteConn
{
	PGconn	   *conn;
	RemoteItem *items;			/* (n_items) the call's requests, NULL when idle */
	int			n_items;
	int			n_answered;
	TimestampTz last_heard;
} RemoteConn;

/* One inference node. */
struct RemoteNode
{
	char	   *name;			/* the foreign server's */
	Oid			serverid;
	char	  **keywords;		/* libpq options, NULL-terminated */
	char	  **values;
	char	   *schema;			/* llm's schema there, quoted */
	bool		tried;			/* connected (or failed to) in this statement */
	bool		alive;
	int			capacity;		/* free sequences at connect, at least 1 */
	int			load;			/* requests sent or pending, not yet answered */
	RemoteConn	conns[LLM_REMOTE_CONNS];
	RemoteItem *pending;		/* (n_pending) picked, not yet sent */
	StringInfoData pending_buf; /* their serialized requests */
	int			n_pending;
	int			max_pending;
	/* for EXPLAIN ANALYZE */
	int64		requests;
	int64		answers;
	int64		prompt_tokens;
	int64		completion_tokens;
	int			failures;
};

struct LlmRemote
{
	MemoryContext cxt;
	MemoryContext answer_cxt;	/* an answer while it is read, reset after each */
	int			n_nodes;
	struct RemoteNode *nodes;
	bool		local;			/* llm.local_inference */
	bool		started;		/* the nodes were tried and the local capacity read (remote_connect_all) */
	int			local_capacity;
	uint64		identity;		/* the local model's, 0 when none is loaded */
	uint64		next_id;
};

typedef struct RemoteNode RemoteNode;

/* ---------- the coordinator's side ---------- */

/* The libpq options of a server and the current user's mapping (postgres_fdw's keys), in cxt. */
static void
remote_conn_options(RemoteNode *node, ForeignServer *server, UserMapping *um)
{
	PQconninfoOption *defs = PQconndefaults();
	List	   *opts = list_concat(list_copy(server->options), um->options);
	ListCell   *lc;
	int			n = 0;

	if (defs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OUT_OF_MEMORY),
				 errmsg("out of memory")));
	node->keywords = palloc0(sizeof(char *) * (list_length(opts) + 4));
	node->values = palloc0(sizeof(char *) * (list_length(opts) + 4));
	foreach(lc, opts)
	{
		DefElem    *d = (DefElem *) lfirst(lc);
		bool		known = false;

		for (PQconninfoOption *o = defs; o->keyword != NULL; o++)
			if (strcmp(o->keyword, d->defname) == 0 && strchr(o->dispchar, 'D') == NULL)
				known = true;
		if (!known || strcmp(d->defname, "client_encoding") == 0 || strcmp(d->defname, "replication") == 0)
			continue;
		node->keywords[n] = pstrdup(d->defname);
		node->values[n++] = pstrdup(defGetString(d));
	}
	PQconninfoFree(defs);
	node->keywords[n] = "fallback_application_name";
	node->values[n++] = "llm remote";
	node->keywords[n] = "connect_timeout";
	node->values[n++] = "10";
	for (int i = 0; i < n - 1; i++)
		if (strcmp(node->keywords[i], "connect_timeout") == 0)
			n--;				/* the server's own connect_timeout wins */
	node->keywords[n] = NULL;
	node->values[n] = NULL;
}

/*
 * The remote nodes of llm.remote_servers for an LLM Batch node, in cxt; NULL
 * when the setting is empty.  Errors out on a server that does not exist or
 * has no user mapping for the current user; connects later.
 */
LlmRemote *
LlmRemoteStart(MemoryContext cxt)
{
	LlmRemote  *r;
	char	   *raw;
	List	   *names;
	ListCell   *lc;
	MemoryContext old;
	int			i = 0;

	if (llm_remote_servers == NULL || llm_remote_servers[0] == '\0')
		return NULL;
	old = MemoryContextSwitchTo(cxt);
	raw = pstrdup(llm_remote_servers);
	if (!SplitIdentifierString(raw, ',', &names))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid list syntax in llm.remote_servers")));
	r = palloc0(sizeof(LlmRemote));
	r->cxt = cxt;
	r->answer_cxt = AllocSetContextCreate(cxt, "LLM remote answer", ALLOCSET_SMALL_SIZES);
	r->nodes = palloc0(sizeof(RemoteNode) * Max(list_length(names), 1));
	r->local = llm_local_inference;
	r->next_id = 1;
	foreach(lc, names)
	{
		ForeignServer *server = GetForeignServerByName((char *) lfirst(lc), false);
		UserMapping *um;
		RemoteNode *node = &r->nodes[i++];
		AclResult	aclresult = LlmForeignServerAclCheck(server->serverid, GetUserId(), ACL_USAGE);

		/* as dblink with a server's name: the user needs USAGE on it, and a mapping */
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, server->servername);
		um = GetUserMapping(GetUserId(), server->serverid);

		node->name = pstrdup(server->servername);
		node->serverid = server->serverid;
		remote_conn_options(node, server, um);
		initStringInfo(&node->pending_buf);
	}
	r->n_nodes = i;
	MemoryContextSwitchTo(old);
	return r;
}

/* Close a connection, first asking the node to cancel its query if one runs (raises nothing). */
static void
remote_conn_close(RemoteConn *c)
{
	if (c->conn == NULL)
		return;
	if (c->items != NULL && PQtransactionStatus(c->conn) == PQTRANS_ACTIVE)
	{
		PGcancel   *cancel = PQgetCancel(c->conn);
		char		errbuf[256];

		if (cancel != NULL)
		{
			(void) PQcancel(cancel, errbuf, sizeof(errbuf));
			PQfreeCancel(cancel);
		}
	}
	PQfinish(c->conn);
	c->conn = NULL;
	if (c->items != NULL)
		pfree(c->items);
	c->items = NULL;
	c->n_items = c->n_answered = 0;
}

/*
 * Wait until conn's socket is readable or timeout_ms passed, checking for
 * interrupts; false on timeout.
 */
static bool
remote_wait_socket(PGconn *conn, long timeout_ms)
{
	int			rc;

	CHECK_FOR_INTERRUPTS();
	rc = WaitLatchOrSocket(MyLatch, WL_LATCH_SET | WL_SOCKET_READABLE | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						   PQsocket(conn), timeout_ms, LLM_WAIT_EVENT_REQUEST);
	if (rc & WL_LATCH_SET)
		ResetLatch(MyLatch);
	CHECK_FOR_INTERRUPTS();
	return (rc & (WL_SOCKET_READABLE | WL_LATCH_SET)) != 0;
}

/*
 * Run a query on a node's fresh connection, waiting with interrupts
 * checked (up to llm.remote_timeout); its result, or NULL with *why set.
 */
static PGresult *
remote_exec(PGconn *conn, const char *sql, char **why)
{
	PGresult   *res = NULL;
	PGresult   *last = NULL;
	TimestampTz start = GetCurrentTimestamp();

	if (!PQsendQueryParams(conn, sql, 0, NULL, NULL, NULL, NULL, 0))
	{
		*why = pstrdup(PQerrorMessage(conn));
		return NULL;
	}
	for (;;)
	{
		while (PQisBusy(conn))
		{
			if (llm_remote_timeout > 0 &&
				TimestampDifferenceExceeds(start, GetCurrentTimestamp(), llm_remote_timeout))
			{
				*why = psprintf("No answer within llm.remote_timeout (%d ms).", llm_remote_timeout);
				PQclear(last);
				return NULL;
			}
			(void) remote_wait_socket(conn, LLM_REMOTE_WAIT_MS);
			if (!PQconsumeInput(conn))
			{
				*why = pstrdup(PQerrorMessage(conn));
				PQclear(last);
				return NULL;
			}
		}
		res = PQgetResult(conn);
		if (res == NULL)
			break;
		PQclear(last);
		last = res;
	}
	if (last == NULL || PQresultStatus(last) != PGRES_TUPLES_OK)
	{
		*why = pstrdup(last ? PQresultErrorMessage(last) : PQerrorMessage(conn));
		PQclear(last);
		return NULL;
	}
	return last;
}

/* Turn a libpq message into a sentence of a detail (no trailing newline). */
static char *
remote_sentence(const char *msg)
{
	char	   *s = pstrdup(msg);
	int			n = strlen(s);

	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' '))
		s[--n] = '\0';
	return s;
}

/*
 * Open a connection to node.  The first one also checks the node: its llm
 * is recent enough and serves the coordinator's model; it reads llm's
 * schema there and the node's free capacity.  NULL with *why set when the
 * node cannot serve.
 */
static PGconn *
remote_connect(LlmRemote *r, RemoteNode *node, bool check, char **why)
{
	PGconn	   *conn = PQconnectdbParams((const char *const *) node->keywords,
										 (const char *const *) node->values, false);
	PGresult   *res;
	char	   *sql;

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
	{
		*why = conn ? remote_sentence(PQerrorMessage(conn)) : pstrdup("out of memory");
		PQfinish(conn);
		return NULL;
	}
	/* as postgres_fdw: a role that is not a superuser must have given a password */
	if (!superuser() && !PQconnectionUsedPassword(conn))
	{
		PQfinish(conn);
		ereport(ERROR,
				(errcode(ERRCODE_S_R_E_PROHIBITED_SQL_STATEMENT_ATTEMPTED),
				 errmsg("password is required to use inference node \"%s\"", node->name),
				 errdetail("Non-superusers must give a password in the user mapping.")));
	}
	if (PQsetnonblocking(conn, 1) != 0)
	{
		*why = remote_sentence(PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	if (!check)
		return conn;

	res = remote_exec(conn, "SELECT pg_catalog.quote_ident(n.nspname), e.extversion "
					  "FROM pg_catalog.pg_extension e JOIN pg_catalog.pg_namespace n "
					  "ON n.oid OPERATOR(pg_catalog.=) e.extnamespace "
					  "WHERE e.extname OPERATOR(pg_catalog.=) 'llm'", why);
	if (res == NULL)
		goto fail;
	if (PQntuples(res) != 1)
	{
		*why = pstrdup("The extension llm is not installed in its database.");
		goto fail;
	}
	node->schema = MemoryContextStrdup(r->cxt, PQgetvalue(res, 0, 0));
	{
		int			major = 0;
		int			minor = 0;

		if (sscanf(PQgetvalue(res, 0, 1), "%d.%d", &major, &minor) != 2 || major < 1 || (major == 1 && minor < 6))
		{
			*why = psprintf("Its llm is version %s; remote inference needs 1.6 or later.", PQgetvalue(res, 0, 1));
			goto fail;
		}
	}
	PQclear(res);
	sql = psprintf("SELECT %s.llm_model_identity(), pg_catalog.current_setting('llm.max_sequences')::int, "
				   "s.queued_requests, s.running_requests FROM %s.llm_stats s", node->schema, node->schema);
	res = remote_exec(conn, sql, why);
	pfree(sql);
	if (res == NULL)
		goto fail;
	if (PQntuples(res) != 1 || PQgetisnull(res, 0, 0))
	{
		*why = pstrdup("It has no model loaded.");
		goto fail;
	}
	if (r->identity == 0 || strtou64(PQgetvalue(res, 0, 0), NULL, 16) != r->identity)
	{
		*why = r->identity == 0 ?
			pstrdup("This server has no model loaded to compare with.") :
			psprintf("Its model's identity is %s; this server's is %016" PRIx64 ".",
					 PQgetvalue(res, 0, 0), r->identity);
		goto fail;
	}
	node->capacity = Max(1, atoi(PQgetvalue(res, 0, 1)) - atoi(PQgetvalue(res, 0, 2)) - atoi(PQgetvalue(res, 0, 3)));
	PQclear(res);
	return conn;

fail:
	PQclear(res);
	PQfinish(conn);
	if (*why != NULL)
		*why = remote_sentence(*why);
	return NULL;
}

/* Connect to every node not tried in this statement (its first window), and read the local capacity. */
static void
remote_connect_all(LlmRemote *r)
{
	LlmWorkerInfo g;
	LlmWorkerInfo serving = LlmWorkerServing();
	int			queued = 0;
	int			ready;

	if (r->started)
		return;
	r->started = true;
	r->identity = serving.has_model ? serving.identity : 0;
	LWLockAcquire(LlmState->lock, LW_SHARED);
	LlmWorkerGauges(&g);
	ready = LlmWorkersReady();
	for (int s = 0; s < LlmState->n_slots; s++)
		queued += LlmState->slots[s].state == LLM_SLOT_QUEUED;
	LWLockRelease(LlmState->lock);
	/* every model worker of llm.devices runs llm.max_sequences */
	r->local_capacity = Max(1, llm_max_sequences * Max(ready, 1) - queued - g.engine_waiting - g.engine_running);

	for (int k = 0; k < r->n_nodes; k++)
	{
		RemoteNode *node = &r->nodes[k];
		char	   *why = NULL;

		if (node->tried)
			continue;
		node->tried = true;
		node->conns[0].conn = remote_connect(r, node, true, &why);
		node->alive = node->conns[0].conn != NULL;
		if (!node->alive)
		{
			node->failures++;
			LlmRemoteCountFailure(node->name);
			ereport(WARNING,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("llm inference node \"%s\" is not used", node->name),
					 errdetail_internal("%s", why ? why : "unknown"),
					 errhint("The statement runs on the other nodes; the next one tries this node again.")));
		}
	}
}

/*
 * Where the next request goes: the node with the fewest requests in flight
 * per unit of free capacity, the local worker (-1) being one; raises an
 * error when no node is left.  local_load is the local requests in flight.
 */
int
LlmRemotePick(LlmRemote *r, int local_load)
{
	int			best = -2;
	double		best_score = 0;

	remote_connect_all(r);
	if (r->local)
	{
		best = -1;
		best_score = (double) (local_load + 1) / r->local_capacity;
	}
	for (int k = 0; k < r->n_nodes; k++)
	{
		RemoteNode *node = &r->nodes[k];
		double		score = (double) (node->load + 1) / node->capacity;

		if (node->alive && (best == -2 || score < best_score))
		{
			best = k;
			best_score = score;
		}
	}
	if (best == -2)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("no llm inference node is available"),
				 errdetail("Every server of llm.remote_servers failed, and llm.local_inference is off."),
				 errhint("Check the servers' logs and the warnings above, or set llm.local_inference to on.")));
	return best;
}

/* Give node k the job (of the caller's row and job number), to be sent at the next LlmRemoteFlush. */
void
LlmRemoteAdd(LlmRemote *r, int k, LlmJob *job, void *row, int j)
{
	RemoteNode *node = &r->nodes[k];
	MemoryContext old = MemoryContextSwitchTo(r->cxt);

	if (node->n_pending == node->max_pending)
	{
		node->max_pending = Max(16, 2 * node->max_pending);
		node->pending = node->pending ? repalloc(node->pending, sizeof(RemoteItem) * node->max_pending) :
			palloc(sizeof(RemoteItem) * node->max_pending);
	}
	job->remote_node = k;
	job->request_id = r->next_id++;
	node->pending[node->n_pending++] = (RemoteItem) {row, j, job->request_id, false};
	if (node->pending_buf.len == 0)
	{
		pq_sendint32(&node->pending_buf, LLM_REMOTE_MAGIC);
		pq_sendint32(&node->pending_buf, 0);	/* the count, set when sent */
	}
	LlmRemotePutJob(&node->pending_buf, job, job->request_id);
	node->load++;
	node->requests++;
	MemoryContextSwitchTo(old);
}

/* Node k failed: a WARNING, and every request it has not answered back to the caller. */
static void
remote_node_failed(LlmRemote *r, int k, const char *why, LlmRemoteLostCb lost, void *arg)
{
	RemoteNode *node = &r->nodes[k];
	int			n_lost = 0;
	RemoteItem *items = palloc(sizeof(RemoteItem) * Max(node->load, 1));

	node->alive = false;
	node->failures++;
	LlmRemoteCountFailure(node->name);
	for (int c = 0; c < LLM_REMOTE_CONNS; c++)
	{
		RemoteConn *conn = &node->conns[c];

		for (int i = 0; i < conn->n_items; i++)
			if (!conn->items[i].answered && n_lost < node->load)
				items[n_lost++] = conn->items[i];
		remote_conn_close(conn);
	}
	for (int i = 0; i < node->n_pending && n_lost < node->load; i++)
		items[n_lost++] = node->pending[i];
	node->n_pending = 0;
	resetStringInfo(&node->pending_buf);
	node->load = 0;
	ereport(WARNING,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("llm inference node \"%s\" failed", node->name),
			 errdetail_internal("%s", why),
			 errhint("Its %d unanswered requests go to the other nodes.", n_lost)));
	for (int i = 0; i < n_lost; i++)
		lost(arg, items[i].row, items[i].job, items[i].id);
	pfree(items);
}

/* Send each node's pending requests on an idle connection, opening one if need be. */
void
LlmRemoteFlush(LlmRemote *r, LlmRemoteLostCb lost, void *arg)
{
	for (int k = 0; k < r->n_nodes; k++)
	{
		RemoteNode *node = &r->nodes[k];
		RemoteConn *c = NULL;
		const char *values[1];
		int			lengths[1];
		int			formats[1] = {1};
		char	   *sql;
		char	   *why = NULL;
		uint32		n;

		if (!node->alive || node->n_pending == 0)
			continue;
		for (int i = 0; i < LLM_REMOTE_CONNS && c == NULL; i++)
			if (node->conns[i].conn != NULL && node->conns[i].items == NULL)
				c = &node->conns[i];
		for (int i = 0; i < LLM_REMOTE_CONNS && c == NULL; i++)
			if (node->conns[i].conn == NULL)
			{
				node->conns[i].conn = remote_connect(r, node, false, &why);
				if (node->conns[i].conn == NULL)
				{
					remote_node_failed(r, k, why, lost, arg);
					break;
				}
				c = &node->conns[i];
			}
		if (c == NULL)
			continue;			/* every connection busy (or the node failed): later */

		n = pg_hton32((uint32) node->n_pending);
		memcpy(node->pending_buf.data + 4, &n, 4);
		values[0] = node->pending_buf.data;
		lengths[0] = node->pending_buf.len;
		sql = psprintf("SELECT %s.llm_remote_batch($1)", node->schema);
		if (!PQsendQueryParams(c->conn, sql, 1, NULL, values, lengths, formats, 1)
#ifdef LIBPQ_HAS_CHUNK_MODE
			|| !PQsetChunkedRowsMode(c->conn, 64)
#else
			|| !PQsetSingleRowMode(c->conn)
#endif
			)
		{
			c->items = node->pending;
			c->n_items = node->n_pending;
			c->n_answered = 0;
			node->pending = NULL;
			node->n_pending = node->max_pending = 0;
			resetStringInfo(&node->pending_buf);
			remote_node_failed(r, k, remote_sentence(PQerrorMessage(c->conn)), lost, arg);
			pfree(sql);
			continue;
		}
		pfree(sql);
		(void) PQflush(c->conn);
		c->items = node->pending;
		c->n_items = node->n_pending;
		c->n_answered = 0;
		c->last_heard = GetCurrentTimestamp();
		node->pending = NULL;
		node->n_pending = node->max_pending = 0;
		resetStringInfo(&node->pending_buf);
	}
}

/* Whether any request is in flight on a node (sent or pending). */
bool
LlmRemoteBusy(LlmRemote *r)
{
	if (r == NULL)
		return false;
	for (int k = 0; k < r->n_nodes; k++)
		if (r->nodes[k].alive && r->nodes[k].load > 0)
			return true;
	return false;
}

/* Read what conn c of node k has received: each answer to the caller; false when the node failed. */
static bool
remote_read(LlmRemote *r, int k, RemoteConn *c, LlmRemoteAnswerCb answer, LlmRemoteLostCb lost, void *arg)
{
	RemoteNode *node = &r->nodes[k];

	if (!PQconsumeInput(c->conn))
	{
		remote_node_failed(r, k, remote_sentence(PQerrorMessage(c->conn)), lost, arg);
		return false;
	}
	while (!PQisBusy(c->conn))
	{
		PGresult   *res = PQgetResult(c->conn);
		ExecStatusType st;

		if (res == NULL)
		{
			/* the call ended: every request must have had its answer */
			if (c->n_answered < c->n_items)
			{
				remote_node_failed(r, k, "Its batch ended without every answer.", lost, arg);
				return false;
			}
			pfree(c->items);
			c->items = NULL;
			c->n_items = c->n_answered = 0;
			return true;
		}
		st = PQresultStatus(res);
		c->last_heard = GetCurrentTimestamp();
		if (st == PGRES_SINGLE_TUPLE || st == PGRES_TUPLES_OK
#ifdef LIBPQ_HAS_CHUNK_MODE
			|| st == PGRES_TUPLES_CHUNK
#endif
			)
		{
			for (int t = 0; t < PQntuples(res); t++)
			{
				StringInfoData buf;
				LlmJob		ans;
				uint64		tag;
				int			i;
				MemoryContext old;

				buf.data = PQgetvalue(res, t, 0);
				buf.len = PQgetlength(res, t, 0);
				buf.maxlen = buf.len;
				buf.cursor = 0;
				MemoryContextReset(r->answer_cxt);
				old = MemoryContextSwitchTo(r->answer_cxt);
				if (PQnfields(res) != 1 || PQgetisnull(res, t, 0) || !LlmRemoteGetAnswer(&buf, &ans, &tag))
				{
					MemoryContextSwitchTo(old);
					PQclear(res);
					remote_node_failed(r, k, "It sent a malformed answer.", lost, arg);
					return false;
				}
				/* the request it answers: the items of the call are in tag order */
				for (i = 0; i < c->n_items && c->items[i].id != tag; i++)
					;
				MemoryContextSwitchTo(old);
				if (i == c->n_items || c->items[i].answered)
				{
					PQclear(res);
					remote_node_failed(r, k, "It sent an answer to no request of its batch.", lost, arg);
					return false;
				}
				c->items[i].answered = true;
				c->n_answered++;
				node->load--;
				node->answers++;
				node->prompt_tokens += ans.prompt_tokens;
				node->completion_tokens += ans.completion_tokens;
				LlmRemoteCountAnswer(node->name, ans.prompt_tokens, ans.completion_tokens);
				answer(arg, c->items[i].row, c->items[i].job, tag, &ans);
			}
			PQclear(res);
			continue;
		}
		{
			char	   *why = remote_sentence(PQresultErrorMessage(res));

			PQclear(res);
			/* the rest of the call's results, then the connection is gone with the node */
			remote_node_failed(r, k, why, lost, arg);
			return false;
		}
	}
	return true;
}

/*
 * Take every answer the nodes have sent, first waiting up to wait_ms for
 * one (0: just look): each to answer(); the requests of a node that failed
 * or has been silent for llm.remote_timeout to lost().
 */
void
LlmRemoteCollect(LlmRemote *r, long wait_ms, LlmRemoteAnswerCb answer, LlmRemoteLostCb lost, void *arg)
{
	if (wait_ms != 0)
	{
		WaitEventSet *set;
		WaitEvent	ev;
		int			n = 0;

		for (int k = 0; k < r->n_nodes; k++)
			for (int i = 0; i < LLM_REMOTE_CONNS; i++)
				n += r->nodes[k].conns[i].items != NULL;
		if (n > 0)
		{
#if PG_VERSION_NUM >= 170000
			set = CreateWaitEventSet(CurrentResourceOwner, n + 2);
#else
			set = CreateWaitEventSet(CurrentMemoryContext, n + 2);
#endif
			AddWaitEventToSet(set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
			AddWaitEventToSet(set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
			for (int k = 0; k < r->n_nodes; k++)
				for (int i = 0; i < LLM_REMOTE_CONNS; i++)
					if (r->nodes[k].conns[i].items != NULL)
						AddWaitEventToSet(set, WL_SOCKET_READABLE, PQsocket(r->nodes[k].conns[i].conn), NULL, NULL);
			if (WaitEventSetWait(set, wait_ms < 0 ? LLM_REMOTE_WAIT_MS : wait_ms, &ev, 1,
								 LLM_WAIT_EVENT_REQUEST) > 0 && (ev.events & WL_LATCH_SET))
				ResetLatch(MyLatch);
			FreeWaitEventSet(set);
			CHECK_FOR_INTERRUPTS();
		}
	}
	for (int k = 0; k < r->n_nodes; k++)
	{
		RemoteNode *node = &r->nodes[k];

		for (int i = 0; i < LLM_REMOTE_CONNS && node->alive; i++)
		{
			RemoteConn *c = &node->conns[i];

			if (c->items == NULL)
				continue;
			if (!remote_read(r, k, c, answer, lost, arg))
				break;
			if (c->items != NULL && llm_remote_timeout > 0 &&
				TimestampDifferenceExceeds(c->last_heard, GetCurrentTimestamp(), llm_remote_timeout))
			{
				remote_node_failed(r, k, psprintf("It sent no answer for llm.remote_timeout (%d ms).",
												  llm_remote_timeout), lost, arg);
				break;
			}
		}
	}
}

/*
 * Cancel every node's requests in flight and close the connections;
 * the next window connects again (raises nothing: runs in error cleanup).
 */
void
LlmRemoteCancel(LlmRemote *r)
{
	if (r == NULL)
		return;
	for (int k = 0; k < r->n_nodes; k++)
	{
		RemoteNode *node = &r->nodes[k];

		for (int i = 0; i < LLM_REMOTE_CONNS; i++)
			remote_conn_close(&node->conns[i]);
		node->n_pending = 0;
		resetStringInfo(&node->pending_buf);
		node->load = 0;
		node->tried = false;
		node->alive = false;
	}
	r->started = false;
}

/* EXPLAIN ANALYZE: the requests and tokens of each node, the local worker first. */
void
LlmRemoteExplain(LlmRemote *r, ExplainState *es)
{
	if (r == NULL)
		return;
	for (int k = 0; k < r->n_nodes; k++)
	{
		RemoteNode *node = &r->nodes[k];
		char	   *label = psprintf("Node %s", node->name);

		ExplainPropertyText(label, psprintf("requests=" INT64_FORMAT " answers=" INT64_FORMAT
											" prompt_tokens=" INT64_FORMAT " completion_tokens=" INT64_FORMAT
											" failures=%d",
											node->requests, node->answers, node->prompt_tokens,
											node->completion_tokens, node->failures), es);
	}
}

/* ---------- llm_remote_stats ---------- */

/* The counters entry of server, made if missing (NULL when the table is full); the lock held exclusively. */
static LlmRemoteCounters *
remote_counters(const char *server)
{
	for (int i = 0; i < LLM_REMOTE_STATS; i++)
	{
		LlmRemoteCounters *e = &LlmState->remote[i];

		if (strcmp(e->server, server) == 0)
			return e;
		if (e->server[0] == '\0')
		{
			strlcpy(e->server, server, sizeof(e->server));
			return e;
		}
	}
	return NULL;
}

/* Count an answer of node server, with its tokens. */
void
LlmRemoteCountAnswer(const char *server, int64 prompt_tokens, int64 completion_tokens)
{
	LlmRemoteCounters *e;

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	if ((e = remote_counters(server)) != NULL)
	{
		e->answers++;
		e->prompt_tokens += prompt_tokens;
		e->completion_tokens += completion_tokens;
	}
	LWLockRelease(LlmState->lock);
}

/* Count a failure (or refusal) of node server. */
void
LlmRemoteCountFailure(const char *server)
{
	LlmRemoteCounters *e;

	LWLockAcquire(LlmState->lock, LW_EXCLUSIVE);
	if ((e = remote_counters(server)) != NULL)
		e->failures++;
	LWLockRelease(LlmState->lock);
}

PG_FUNCTION_INFO_V1(llm_remote_stats);

/*
 * llm_remote_stats() RETURNS TABLE (server name, answered_requests bigint,
 *		prompt_tokens bigint, completion_tokens bigint, failures bigint)
 *		What each remote node (by foreign server name) answered to this
 *		server's LLM Batch nodes since the server started.
 */
Datum
llm_remote_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	LlmRemoteCounters *rows = palloc(sizeof(LlmRemoteCounters) * LLM_REMOTE_STATS);

	LlmShmemCheck();
	InitMaterializedSRF(fcinfo, 0);
	LWLockAcquire(LlmState->lock, LW_SHARED);
	memcpy(rows, LlmState->remote, sizeof(LlmRemoteCounters) * LLM_REMOTE_STATS);
	LWLockRelease(LlmState->lock);
	for (int r = 0; r < LLM_REMOTE_STATS && rows[r].server[0] != '\0'; r++)
	{
		Datum		values[5];
		bool		nulls[5] = {0};
		NameData   *n = palloc(sizeof(NameData));

		namestrcpy(n, rows[r].server);
		values[0] = NameGetDatum(n);
		values[1] = Int64GetDatum(rows[r].answers);
		values[2] = Int64GetDatum(rows[r].prompt_tokens);
		values[3] = Int64GetDatum(rows[r].completion_tokens);
		values[4] = Int64GetDatum(rows[r].failures);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * Give job a node's answer, its texts copied into cxt; raise the node's
 * error for a failed request unless the job takes errors as NULL.
 */
void
LlmRemoteTakeAnswer(LlmJob *job, const LlmJob *ans, MemoryContext cxt)
{
	job->remote_node = -1;
	if (ans->failed && !job->error_as_null)
		ereport(ERROR,
				(errcode(ans->sqlerrcode ? ans->sqlerrcode : ERRCODE_INTERNAL_ERROR),
				 errmsg_internal("%s", ans->error)));
	job->failed = ans->failed;
	job->sqlerrcode = ans->sqlerrcode;
	job->error = ans->error ? MemoryContextStrdup(cxt, ans->error) : NULL;
	job->completion = ans->completion ? MemoryContextStrdup(cxt, ans->completion) : NULL;
	job->prompt_tokens = ans->prompt_tokens;
	job->completion_tokens = ans->completion_tokens;
	job->cached_tokens = ans->cached_tokens;
	job->drafted_tokens = ans->drafted_tokens;
	job->accepted_tokens = ans->accepted_tokens;
	job->logprob = ans->logprob;
	job->cache_hit = ans->cache_hit;
	job->n_scored = ans->n_scored;
	job->run_us = ans->run_us;
	job->finish_reason = ans->finish_reason;
}

/* ---------- a batch of jobs run to the end (background fills) ---------- */

/* LlmRemoteRunJobs()'s state, for its callbacks. */
typedef struct RemoteRun
{
	LlmJob	   *jobs;
	int			n_jobs;
	bool	   *answered;
	int			n_answered;
	int		   *todo;			/* (n_todo) jobs to send (again) */
	int			n_todo;
	MemoryContext result_cxt;	/* the caller's: the answers' texts */
} RemoteRun;

/* The job an answer or a failure is about, or NULL when it no longer awaits one. */
static LlmJob *
remote_run_job(RemoteRun *run, int j, uint64 id)
{
	if (j < 0 || j >= run->n_jobs || run->answered[j] || run->jobs[j].remote_node < 0 ||
		run->jobs[j].request_id != id)
		return NULL;
	return &run->jobs[j];
}

/* A node's answer to a job of the run (LlmRemoteAnswerCb). */
static void
remote_run_answer(void *arg, void *row, int j, uint64 id, LlmJob *ans)
{
	RemoteRun  *run = (RemoteRun *) arg;
	LlmJob	   *job = remote_run_job(run, j, id);

	if (job == NULL)
		return;
	LlmRemoteTakeAnswer(job, ans, run->result_cxt);
	run->answered[j] = true;
	run->n_answered++;
}

/* A failed node left a job of the run unanswered: send it again (LlmRemoteLostCb). */
static void
remote_run_lost(void *arg, void *row, int j, uint64 id)
{
	RemoteRun  *run = (RemoteRun *) arg;
	LlmJob	   *job = remote_run_job(run, j, id);

	if (job == NULL)
		return;
	job->remote_node = -1;
	run->todo[run->n_todo++] = j;
}

/*
 * Run jobs over llm.remote_servers' nodes and the local worker (unless
 * llm.local_inference is off), as LlmQueueRun() runs them locally: every
 * job answered (or failed, with error_as_null) on return, a failed node's
 * jobs sent to the others; on error every node's requests are cancelled.
 * What a background fill (job_worker.c, through LlmQueueRunKept) uses
 * when llm.remote_servers is set.
 */
void
LlmRemoteRunJobs(LlmJob *jobs, int n_jobs)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "LLM remote run", ALLOCSET_DEFAULT_SIZES);
	LlmRemote  *volatile r = NULL;
	RemoteRun	run;

	LlmQueueAttach();
	run.jobs = jobs;
	run.n_jobs = n_jobs;
	run.answered = MemoryContextAllocZero(cxt, sizeof(bool) * Max(n_jobs, 1));
	run.n_answered = 0;
	run.todo = MemoryContextAlloc(cxt, sizeof(int) * Max(n_jobs, 1));
	run.n_todo = 0;
	run.result_cxt = CurrentMemoryContext;
	for (int j = n_jobs - 1; j >= 0; j--)
	{
		jobs[j].slot = -1;
		jobs[j].remote_node = -1;
		run.todo[run.n_todo++] = j;
	}
	PG_TRY();
	{
		int			n_local = 0;	/* jobs in a local slot */

		r = LlmRemoteStart(cxt);
		while (run.n_answered < n_jobs)
		{
			/* send what is left, the earliest first */
			while (run.n_todo > 0)
			{
				int			j = run.todo[run.n_todo - 1];
				int			k = r != NULL ? LlmRemotePick(r, n_local) : -1;

				if (k >= 0)
					LlmRemoteAdd(r, k, &jobs[j], NULL, j);
				else if (LlmQueueSubmit(&jobs[j], n_local > 0 || LlmRemoteBusy(r)))
					n_local++;
				else
					break;
				run.n_todo--;
			}
			if (r != NULL)
			{
				LlmRemoteFlush(r, remote_run_lost, &run);
				if (LlmRemoteBusy(r))
					LlmRemoteCollect(r, n_local > 0 ? 0 : -1, remote_run_answer, remote_run_lost, &run);
			}
			/* the local answers: wait briefly on the first while remote ones may come */
			for (int j = 0, waited = 0; j < n_jobs && n_local > 0; j++)
			{
				if (jobs[j].slot < 0)
					continue;
				if (LlmQueuePoll(&jobs[j], waited++ == 0 ? (LlmRemoteBusy(r) ? 10 : LLM_REMOTE_WAIT_MS) : 0))
				{
					LlmQueueWait(&jobs[j]);
					run.answered[j] = true;
					run.n_answered++;
					n_local--;
				}
			}
			CHECK_FOR_INTERRUPTS();
		}
	}
	PG_CATCH();
	{
		LlmRemoteCancel(r);
		LlmQueueCancel(jobs, n_jobs);
		PG_RE_THROW();
	}
	PG_END_TRY();
	LlmRemoteCancel(r);
	MemoryContextDelete(cxt);
	LlmShmemDsaTrim();
}
