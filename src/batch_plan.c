/*
 * batch_plan.c
 *		Planning the "LLM Batch" node: after the standard planner, every plan
 *		node that calls a batched function (batch_call.c: llm_generate(),
 *		llm_chat(), llm_score(), llm_classify(), llm_filter(),
 *		llm_probability()) per row
 *		of a row source gets an LLM Batch node (batch_scan.c) put over it,
 *		which runs the calls for a window of rows at once.
 *
 * The rewrite.  Take a node P whose target list or filter calls a batched
 * function.  P becomes the child P' of a new CustomScan C:
 *
 *   - P' computes, per row, every value C needs: the arguments of each
 *     batched call, and every other subexpression of P's target list and
 *     of the filter clauses that make a call.  Its other filter
 *     clauses stay in P', so rows are filtered before any request.
 *   - C's scan tuple is P''s columns, then one column per call.  C's
 *     target list is P''s old one with each call replaced by its column
 *     (same positions, names and junk flags, so whatever reads P's output
 *     reads C's unchanged); C's filter is the clauses that call it.
 *
 * An aggregate's arguments are evaluated per input row inside the Agg
 * node, so calls there get a node between the Agg and its input instead,
 * which adds their results to the input's columns (push_below_agg).
 *
 * The set-returning llm_classify_scores() and llm_rank() run per row in two
 * places: a ProjectSet's target list (SELECT llm_rank(q, docs) FROM t) and
 * a function scan that a nested loop rescans for each outer row with the
 * row's columns as parameters (FROM t, LATERAL llm_rank(t.q, t.docs)).
 * Either gets a node below it, between the ProjectSet and its input or
 * over the loop's outer side, whose extra column is the call's jobs'
 * log-probabilities (a float8[]); the call becomes llm_classify_scores_from()
 * or llm_rank_from() of that column, which makes the rows the function
 * makes from the same numbers (push_below_project_set,
 * batch_lateral_functions).
 *
 * A call is batched only where it would be evaluated for every row: not
 * inside CASE, COALESCE, AND/OR, a subplan, an aggregate or any other node
 * that may skip it, and not when its arguments make a batched call
 * themselves.  Such an expression goes to P' whole and runs row by row as
 * before.  Nodes without a row source (a Result with no child, so
 * SELECT llm_generate('x')) and other nodes that return sets are left
 * alone, as are scrollable cursors (C does not scan backward).
 *
 * The plan is rewritten after set_plan_references(), so C's Vars are in
 * executor form already: INDEX_VAR for its scan tuple, and OUTER_VAR in
 * custom_scan_tlist for P''s columns (P' is C's lefttree, which EXPLAIN
 * and the parameter machinery treat like any child).
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/planner.h"

#include "llm.h"

/* The rewrite of one node's expressions. */
typedef struct BatchRewrite
{
	List	   *child_tlist;	/* P''s target list being built */
	List	   *calls;			/* each batched call: the FuncExpr, its args in child columns */
	List	   *call_vars;		/* INDEX_VAR Vars of the calls' results (numbered at the end) */
	List	   *call_args;		/* per call: its twelve arguments, over the child's columns */
} BatchRewrite;

/* What the rewrite of a plan tree needs beyond the node at hand. */
typedef struct BatchContext
{
	PlannedStmt *stmt;			/* its paramExecTypes get the params of the nodes added */
	int			last_node_id;	/* the largest plan_node_id in the tree; new nodes follow it */
} BatchContext;

static planner_hook_type prev_planner_hook = NULL;

/* Whether expression node calls a batched function (batch_call.c) anywhere. */
static bool
calls_batched(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (IsA(node, FuncExpr) && LlmBatchFuncOf(((FuncExpr *) node)->funcid) != LLM_BATCH_NONE)
		return true;
	return expression_tree_walker(node, calls_batched, context);
}

/*
 * Whether node is a call the node can run for a window of rows in place: a
 * batched function, not set-returning, whose arguments make no call.
 */
static bool
is_batchable_call(Node *node)
{
	LlmBatchFunc f;

	if (!IsA(node, FuncExpr) || ((FuncExpr *) node)->funcretset)
		return false;
	f = LlmBatchFuncOf(((FuncExpr *) node)->funcid);
	return f != LLM_BATCH_NONE && list_length(((FuncExpr *) node)->args) == LlmBatchFuncNargs(f) &&
		!calls_batched((Node *) ((FuncExpr *) node)->args, NULL);
}

/* A Var of varno for column resno of a target list entry's type. */
static Var *
column_var(int varno, AttrNumber resno, Expr *expr)
{
	return makeVar(varno, resno, exprType((Node *) expr), exprTypmod((Node *) expr),
				   exprCollation((Node *) expr), 0);
}

/*
 * The scan tuple of a node over a child: the child's columns (OUTER_VAR),
 * then each call's result.
 */
static List *
scan_tlist_for(List *child_tlist, List *calls)
{
	List	   *scan_tlist = NIL;
	ListCell   *lc;

	foreach(lc, child_tlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		scan_tlist = lappend(scan_tlist, makeTargetEntry((Expr *) column_var(OUTER_VAR, tle->resno, tle->expr),
														 list_length(scan_tlist) + 1, NULL, false));
	}
	foreach(lc, calls)
		scan_tlist = lappend(scan_tlist, makeTargetEntry((Expr *) lfirst(lc), list_length(scan_tlist) + 1, NULL, false));
	return scan_tlist;
}

/*
 * Whether node always evaluates all its children, so a call below it runs
 * for every row: the kinds of node a batched call may sit under.
 */
static bool
evaluates_all_children(Node *node)
{
	switch (nodeTag(node))
	{
		case T_FuncExpr:
			return !((FuncExpr *) node)->funcretset;
		case T_OpExpr:
			return !((OpExpr *) node)->opretset;
		case T_DistinctExpr:
		case T_NullIfExpr:
		case T_RelabelType:
		case T_CoerceViaIO:
		case T_ArrayCoerceExpr:
		case T_ConvertRowtypeExpr:
		case T_CollateExpr:
		case T_CoerceToDomain:
		case T_NullTest:
		case T_BooleanTest:
		case T_RowExpr:
		case T_ArrayExpr:
		case T_FieldSelect:
		case T_TargetEntry:
			return true;
		default:
			return false;
	}
}

/* The child column computing expr (added once; equal expressions share it), as an INDEX_VAR Var of C. */
static Var *
child_column(BatchRewrite *rw, Expr *expr)
{
	ListCell   *lc;
	TargetEntry *tle;

	foreach(lc, rw->child_tlist)
	{
		tle = lfirst_node(TargetEntry, lc);
		if (equal(tle->expr, expr))
			return column_var(INDEX_VAR, tle->resno, expr);
	}
	tle = makeTargetEntry(expr, list_length(rw->child_tlist) + 1, NULL, false);
	rw->child_tlist = lappend(rw->child_tlist, tle);
	return column_var(INDEX_VAR, tle->resno, expr);
}

/*
 * Rewrite an expression of C: batched calls become their result columns,
 * everything that is not a call or above one becomes a child column.
 */
static Node *
rewrite_expr(Node *node, BatchRewrite *rw)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Const))
		return node;
	if (IsA(node, List))		/* the arguments of a node being rewritten */
		return expression_tree_mutator(node, rewrite_expr, rw);
	if (is_batchable_call(node))
	{
		FuncExpr   *call = (FuncExpr *) copyObject(node);
		ListCell   *lc;
		Var		   *result;

		foreach(lc, call->args)
		{
			Var		   *col = child_column(rw, (Expr *) lfirst(lc));

			col->varno = OUTER_VAR; /* the node evaluates its arguments over its child's row */
			lfirst(lc) = col;
		}
		rw->calls = lappend(rw->calls, call);
		rw->call_args = lappend(rw->call_args, copyObject(call->args));
		result = makeVar(INDEX_VAR, 0, exprType((Node *) call), -1, exprCollation((Node *) call), 0);
		rw->call_vars = lappend(rw->call_vars, result);
		return (Node *) result;
	}
	if (!calls_batched(node, NULL) || !evaluates_all_children(node))
		return (Node *) child_column(rw, (Expr *) node);
	return expression_tree_mutator(node, rewrite_expr, rw);
}

/*
 * Put an LLM Batch node over plan if it makes batched calls per row;
 * returns the node to use in its place.  bound: at most this many rows are
 * wanted (a LIMIT right above), or 0.
 */
static Plan *
batch_node(Plan *plan, int64 bound, BatchContext *ctx)
{
	BatchRewrite rw = {0};
	List	   *tlist = NIL;
	List	   *qual = NIL;
	List	   *child_qual = NIL;
	List	   *scan_tlist = NIL;
	ListCell   *lc;
	int			n_child;
	int			k = 0;

	if (IsA(plan, ProjectSet) || IsA(plan, ModifyTable) || IsA(plan, CustomScan) ||
		(IsA(plan, Result) && plan->lefttree == NULL))
		return plan;
	if (!calls_batched((Node *) plan->targetlist, NULL) && !calls_batched((Node *) plan->qual, NULL))
		return plan;

	foreach(lc, plan->targetlist)
	{
		TargetEntry *tle = flatCopyTargetEntry(lfirst_node(TargetEntry, lc));

		tle->expr = (Expr *) rewrite_expr((Node *) tle->expr, &rw);
		tlist = lappend(tlist, tle);
	}
	foreach(lc, plan->qual)
	{
		Node	   *clause = lfirst(lc);

		if (calls_batched(clause, NULL))
			qual = lappend(qual, rewrite_expr(clause, &rw));
		else
			child_qual = lappend(child_qual, clause);
	}
	if (rw.calls == NIL)
		return plan;			/* every call is in a place that may skip it */

	/* number the calls' result columns after the child's, and describe the scan tuple */
	n_child = list_length(rw.child_tlist);
	foreach(lc, rw.call_vars)
		((Var *) lfirst(lc))->varattno = n_child + (++k);
	scan_tlist = scan_tlist_for(rw.child_tlist, rw.calls);

	plan->targetlist = rw.child_tlist;
	plan->qual = child_qual;
	/* a filter above the calls takes rows away after them: then LIMIT bounds nothing here */
	return LlmBatchScanCreate(plan, scan_tlist, tlist, qual, rw.call_args, qual != NIL ? 0 : bound,
							  ++ctx->last_node_id);
}

/* The calls an aggregate's arguments make for every input row, moved into an LLM Batch node below it. */
typedef struct BatchPushDown
{
	int			n_input;		/* columns of the aggregate's input */
	List	   *calls;			/* each call, its arguments over the input */
	List	   *call_args;
} BatchPushDown;

/* Replace the batched calls of an aggregate argument by input columns that the node below computes. */
static Node *
push_down_calls(Node *node, BatchPushDown *pd)
{
	if (node == NULL)
		return NULL;
	if (is_batchable_call(node))
	{
		FuncExpr   *call = (FuncExpr *) copyObject(node);

		pd->calls = lappend(pd->calls, call);
		pd->call_args = lappend(pd->call_args, copyObject(call->args));
		return (Node *) makeVar(OUTER_VAR, pd->n_input + list_length(pd->calls), exprType((Node *) call), -1,
								exprCollation((Node *) call), 0);
	}
	if (IsA(node, List) || (calls_batched(node, NULL) && evaluates_all_children(node)))
		return expression_tree_mutator(node, push_down_calls, pd);
	return node;				/* no call, or only where it may be skipped */
}

/*
 * Rewrite the calls of every aggregate's FILTER (evaluated for every input
 * row) and of the arguments of those without one (a FILTER skips rows) in
 * an Agg's expressions.
 */
static Node *
push_down_aggref_args(Node *node, BatchPushDown *pd)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Aggref))
	{
		Aggref	   *agg = (Aggref *) node;
		Aggref	   *copy;

		if (!calls_batched((Node *) agg->aggfilter, NULL) &&
			(agg->aggfilter != NULL || !calls_batched((Node *) agg->args, NULL)))
			return node;
		copy = makeNode(Aggref);
		memcpy(copy, agg, sizeof(Aggref));
		copy->aggfilter = (Expr *) push_down_calls((Node *) agg->aggfilter, pd);
		if (agg->aggfilter == NULL)
			copy->args = (List *) push_down_calls((Node *) agg->args, pd);
		return (Node *) copy;
	}
	return expression_tree_mutator(node, push_down_aggref_args, pd);
}

/*
 * An LLM Batch node over input that computes pd's calls as columns after
 * input's own, which it passes on unchanged.
 */
static Plan *
batch_node_below(Plan *input, BatchPushDown *pd, BatchContext *ctx)
{
	List	   *scan_tlist = scan_tlist_for(input->targetlist, pd->calls);
	List	   *node_tlist = NIL;
	ListCell   *lc;

	foreach(lc, scan_tlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);

		node_tlist = lappend(node_tlist, makeTargetEntry((Expr *) column_var(INDEX_VAR, tle->resno, tle->expr),
														 tle->resno, NULL, false));
	}
	return LlmBatchScanCreate(input, scan_tlist, node_tlist, NIL, pd->call_args, 0, ++ctx->last_node_id);
}

/*
 * An aggregate over batched calls, as in string_agg(llm_generate(...),
 * ...), evaluates them per input row inside the Agg node: put an LLM Batch
 * node between the Agg and its input that computes them as extra columns,
 * and let the aggregates read those.  The calls in an aggregate's FILTER
 * are computed so too (as in count(*) FILTER (WHERE llm_filter(...))), but
 * an aggregate with a FILTER keeps the calls of its arguments (the filter
 * may skip rows).
 */
static void
push_below_agg(Agg *agg, BatchContext *ctx)
{
	Plan	   *input = agg->plan.lefttree;
	BatchPushDown pd = {0};
	List	   *tlist;
	List	   *qual;

	if (input == NULL)
		return;
	pd.n_input = list_length(input->targetlist);
	tlist = (List *) push_down_aggref_args((Node *) agg->plan.targetlist, &pd);
	qual = (List *) push_down_aggref_args((Node *) agg->plan.qual, &pd);
	if (pd.calls == NIL)
		return;
	agg->plan.targetlist = tlist;
	agg->plan.qual = qual;
	agg->plan.lefttree = batch_node_below(input, &pd, ctx);
}

/*
 * If call is a set-returning batched function (llm_classify_scores(),
 * llm_rank()) whose arguments make no batched call, the function that
 * makes its rows from its result in the LLM Batch node (LlmBatchFromFunc),
 * else InvalidOid.
 */
static Oid
set_call_from_func(Node *call)
{
	FuncExpr   *fe = (FuncExpr *) call;
	LlmBatchFunc f;

	if (!IsA(call, FuncExpr) || !fe->funcretset)
		return InvalidOid;
	f = LlmBatchFuncOf(fe->funcid);
	if (f == LLM_BATCH_NONE || list_length(fe->args) != LlmBatchFuncNargs(f) || calls_batched((Node *) fe->args, NULL))
		return InvalidOid;
	return LlmBatchFromFunc(f, fe->funcid);
}

/*
 * Add set-returning call, its arguments args (over the node's child), to
 * pd's calls, and return the call that makes its rows in its place from the
 * result: from_func(call's second argument, the labels or candidates, as
 * its caller has it, and result, the float8[] of log-probabilities).
 */
static Node *
push_down_set_call(FuncExpr *call, List *args, Oid from_func, Expr *result, BatchPushDown *pd)
{
	FuncExpr   *node_call = copyObject(call);
	FuncExpr   *from;

	/* in the node the call's result is the float8[] that from_func reads */
	node_call->args = args;
	node_call->funcresulttype = FLOAT8ARRAYOID;
	node_call->funcretset = false;
	pd->calls = lappend(pd->calls, node_call);
	pd->call_args = lappend(pd->call_args, copyObject(args));

	from = makeFuncExpr(from_func, call->funcresulttype, list_make2(copyObject(lsecond(call->args)), result),
						InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL);
	from->funcretset = true;
	from->location = call->location;
	return (Node *) from;
}

/*
 * SELECT llm_classify_scores(body, labels) FROM t: the set-returning calls
 * of a ProjectSet's target list, each a whole entry, run per input row.
 * Put an LLM Batch node between the ProjectSet and its input that runs
 * their jobs as extra columns, and let each entry make its rows from those
 * with the _from function.  The other batched calls of the target list
 * (llm_generate() beside them) are computed there too, once per input row.
 */
static void
push_below_project_set(ProjectSet *ps, BatchContext *ctx)
{
	Plan	   *input = ps->plan.lefttree;
	BatchPushDown pd = {0};
	ListCell   *lc;

	if (input == NULL)
		return;
	pd.n_input = list_length(input->targetlist);
	foreach(lc, ps->plan.targetlist)
	{
		TargetEntry *tle = lfirst_node(TargetEntry, lc);
		Oid			from_func = set_call_from_func((Node *) tle->expr);
		Var		   *result;

		tle = flatCopyTargetEntry(tle);
		if (OidIsValid(from_func))
		{
			result = makeVar(OUTER_VAR, pd.n_input + list_length(pd.calls) + 1, FLOAT8ARRAYOID, -1, InvalidOid, 0);
			tle->expr = (Expr *) push_down_set_call((FuncExpr *) tle->expr, ((FuncExpr *) tle->expr)->args,
													from_func, (Expr *) result, &pd);
		}
		else
			tle->expr = (Expr *) push_down_calls((Node *) tle->expr, &pd);
		lfirst(lc) = tle;
	}
	if (pd.calls != NIL)
		ps->plan.lefttree = batch_node_below(input, &pd, ctx);
}

/* The outer-row parameters of a nested loop, and whether an expression used one. */
typedef struct NestParamMap
{
	List	   *nest_params;	/* the NestLoop's NestLoopParams */
	bool		used;			/* a parameter was replaced */
	bool		failed;			/* the expression has a parameter not among them */
} NestParamMap;

/* expr with each of the loop's parameters replaced by the outer column it is set from. */
static Node *
outer_columns_for_params(Node *node, NestParamMap *map)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Param))
	{
		Param	   *p = (Param *) node;
		ListCell   *lc;

		if (p->paramkind == PARAM_EXEC)
			foreach(lc, map->nest_params)
			{
				NestLoopParam *nlp = lfirst_node(NestLoopParam, lc);

				if (nlp->paramno == p->paramid && IsA(nlp->paramval, Var))
				{
					map->used = true;
					return (Node *) copyObject(nlp->paramval);
				}
			}
		map->failed = true;
		return node;
	}
	if (IsA(node, SubPlan) || IsA(node, AlternativeSubPlan))
		map->failed = true;
	return expression_tree_mutator(node, outer_columns_for_params, map);
}

/*
 * SELECT * FROM t, LATERAL llm_classify_scores(t.body, labels): a nested
 * loop that rescans a function scan of a set-returning batched function
 * for each outer row, with the outer row's columns as parameters.  Put an
 * LLM Batch node over the outer side that runs the call's jobs for a
 * window of outer rows, with its arguments over the outer columns the
 * parameters come from; pass its result to the inner side as a new
 * parameter of the loop, and have the function scan make its rows from
 * that with the _from function.  Only calls whose arguments use the loop's
 * parameters and nothing volatile are rewritten (others are computed once
 * or may differ between two evaluations).
 */
static void
batch_lateral_functions(NestLoop *nl, BatchContext *ctx)
{
	Plan	   *outer = nl->join.plan.lefttree;
	Plan	   *inner = nl->join.plan.righttree;
	BatchPushDown pd = {0};
	ListCell   *lc;

	if (outer == NULL || inner == NULL || !IsA(inner, FunctionScan))
		return;
	pd.n_input = list_length(outer->targetlist);
	foreach(lc, ((FunctionScan *) inner)->functions)
	{
		RangeTblFunction *rtfunc = lfirst_node(RangeTblFunction, lc);
		Oid			from_func = set_call_from_func(rtfunc->funcexpr);
		NestParamMap map = {nl->nestParams, false, false};
		List	   *args;
		NestLoopParam *nlp;
		Param	   *param;

		if (!OidIsValid(from_func))
			continue;
		args = (List *) outer_columns_for_params((Node *) ((FuncExpr *) rtfunc->funcexpr)->args, &map);
		if (map.failed || !map.used || contain_volatile_functions((Node *) args))
			continue;

		/* a new parameter, set from the node's result column for each outer row */
		nlp = makeNode(NestLoopParam);
		nlp->paramno = list_length(ctx->stmt->paramExecTypes);
		nlp->paramval = makeVar(OUTER_VAR, pd.n_input + list_length(pd.calls) + 1, FLOAT8ARRAYOID, -1, InvalidOid, 0);
		ctx->stmt->paramExecTypes = lappend_oid(ctx->stmt->paramExecTypes, FLOAT8ARRAYOID);
		nl->nestParams = lappend(nl->nestParams, nlp);
		param = makeNode(Param);
		param->paramkind = PARAM_EXEC;
		param->paramid = nlp->paramno;
		param->paramtype = FLOAT8ARRAYOID;
		param->paramtypmod = -1;
		param->paramcollid = InvalidOid;
		param->location = -1;

		rtfunc->funcexpr = push_down_set_call((FuncExpr *) rtfunc->funcexpr, args, from_func, (Expr *) param, &pd);
		rtfunc->funcparams = bms_add_member(rtfunc->funcparams, nlp->paramno);
		inner->extParam = bms_add_member(inner->extParam, nlp->paramno);
		inner->allParam = bms_add_member(inner->allParam, nlp->paramno);
	}
	if (pd.calls != NIL)
		nl->join.plan.lefttree = batch_node_below(outer, &pd, ctx);
}

/* The row bound a Limit node puts on its child: offset + count when both are constants, else 0. */
static int64
limit_bound(Limit *limit)
{
	Const	   *count = (Const *) limit->limitCount;
	Const	   *offset = (Const *) limit->limitOffset;
	int64		bound;

	if (count == NULL || !IsA(count, Const) || count->constisnull || limit->limitOption != LIMIT_OPTION_COUNT)
		return 0;
	bound = DatumGetInt64(count->constvalue);
	if (offset != NULL)
	{
		if (!IsA(offset, Const))
			return 0;
		if (!offset->constisnull)
			bound += DatumGetInt64(offset->constvalue);
	}
	return bound > 0 ? bound : 0;
}

/*
 * Call fn on each child plan of p (the plans of Append, SubqueryScan and
 * the like too; those of SubPlan expressions are in PlannedStmt.subplans).
 */
static void
for_each_child(Plan *p, void (*fn) (Plan **plan, int64 bound, BatchContext *ctx), BatchContext *ctx)
{
	List	   *children = NIL;
	ListCell   *lc;

	fn(&p->lefttree, IsA(p, Limit) ? limit_bound((Limit *) p) : 0, ctx);
	fn(&p->righttree, 0, ctx);
	switch (nodeTag(p))
	{
		case T_Append:
			children = ((Append *) p)->appendplans;
			break;
		case T_MergeAppend:
			children = ((MergeAppend *) p)->mergeplans;
			break;
		case T_BitmapAnd:
			children = ((BitmapAnd *) p)->bitmapplans;
			break;
		case T_BitmapOr:
			children = ((BitmapOr *) p)->bitmapplans;
			break;
		case T_SubqueryScan:
			fn(&((SubqueryScan *) p)->subplan, 0, ctx);
			break;
		case T_CustomScan:
			children = ((CustomScan *) p)->custom_plans;
			break;
		default:
			break;
	}
	foreach(lc, children)
	{
		Plan	   *child = (Plan *) lfirst(lc);

		fn(&child, 0, ctx);
		lfirst(lc) = child;
	}
}

/* Raise ctx->last_node_id to the largest plan_node_id in the tree below *plan. */
static void
max_node_id(Plan **plan, int64 bound, BatchContext *ctx)
{
	if (*plan == NULL)
		return;
	check_stack_depth();
	ctx->last_node_id = Max(ctx->last_node_id, (*plan)->plan_node_id);
	for_each_child(*plan, max_node_id, ctx);
}

/* Put LLM Batch nodes everywhere they apply in the tree below *plan (children first). */
static void
batch_tree(Plan **plan, int64 bound, BatchContext *ctx)
{
	if (*plan == NULL)
		return;
	check_stack_depth();
	for_each_child(*plan, batch_tree, ctx);
	if (IsA(*plan, Agg))
		push_below_agg((Agg *) *plan, ctx);
	else if (IsA(*plan, ProjectSet))
		push_below_project_set((ProjectSet *) *plan, ctx);
	else if (IsA(*plan, NestLoop))
		batch_lateral_functions((NestLoop *) *plan, ctx);
	*plan = batch_node(*plan, bound, ctx);
}

/* planner_hook: the standard planner, then LLM Batch nodes where they apply. */
static PlannedStmt *
llm_planner(Query *parse, const char *query_string, int cursorOptions, ParamListInfo boundParams)
{
	PlannedStmt *stmt;
	ListCell   *lc;
	BatchContext ctx = {0};

	if (prev_planner_hook)
		stmt = prev_planner_hook(parse, query_string, cursorOptions, boundParams);
	else
		stmt = standard_planner(parse, query_string, cursorOptions, boundParams);

	if (llm_batch_rows == 0 || llm_batch_rows == 1 || (cursorOptions & CURSOR_OPT_SCROLL) ||
		stmt->commandType == CMD_UTILITY)
		return stmt;

	ctx.stmt = stmt;
	max_node_id(&stmt->planTree, 0, &ctx);
	foreach(lc, stmt->subplans)
		max_node_id((Plan **) &lfirst(lc), 0, &ctx);
	batch_tree(&stmt->planTree, 0, &ctx);
	foreach(lc, stmt->subplans)
		batch_tree((Plan **) &lfirst(lc), 0, &ctx);
	return stmt;
}

/* Install the planner hook (from _PG_init). */
void
LlmBatchPlanInit(void)
{
	prev_planner_hook = planner_hook;
	planner_hook = llm_planner;
}
