#!/usr/bin/env python3
"""Report of bench/soak.sh: reads the raw logs of one run (WORK) and writes
OUT/soak.md and OUT/soak.csv; prints the tables.  Exits 1 on a wrong answer,
an unexpected SQLSTATE, a reference the restarted worker answers differently,
or requests left in the queue after the load.

    soak_report.py WORK OUT

WORK holds run.csv (key,value), roles.csv (role,weight,clients), results.csv
(one row per call, from soak_try()), errors.csv, wrong.csv, role_stats.csv,
memory.csv, pgbench_ROLE.err (pgbench's stderr, each line stamped with the
epoch) and cancels.log.  Standard library only."""

import csv
import os
import re
import sys

# SQLSTATEs expected at any time: a statement timeout or pg_cancel_backend.
ANYTIME = {"57014"}
# Expected only from the SIGKILL until KILL_GRACE seconds after the worker is
# ready again: the postmaster's crash restart ends every session (57P02, or
# the connection closes: 08006), refuses connections while it recovers
# (57P03), and the new worker may not have its model yet (55000).
KILL_WINDOW = {"57P01", "57P02", "57P03", "08006", "55000"}

# pgbench's messages for a client it stopped or could not connect, by SQLSTATE.
PGBENCH_MESSAGES = [
    ("crash of another server process", "57P02"),
    ("terminating connection due to administrator command", "57P01"),
    ("canceling statement due to", "57014"),
    ("in recovery mode", "57P03"),
    ("is starting up", "57P03"),
    ("not yet accepting connections", "57P03"),
    ("is shutting down", "57P03"),
    ("perhaps the backend died", "08006"),
    ("server closed the connection unexpectedly", "08006"),
    ("connection to server was lost", "08006"),
    ("no connection to the server", "08006"),
    ("could not send data to server", "08006"),
    ("could not receive data from server", "08006"),
    ("No such file or directory", "08006"),
    ("Connection refused", "08006"),
]


def read_kv(path):
    """run.csv as a dict of strings."""
    kv = {}
    for row in csv.reader(open(path)):
        if len(row) >= 2:
            kv[row[0]] = row[1]
    return kv


def percentile(values, p):
    """Nearest-rank percentile of a list (None when empty)."""
    if not values:
        return None
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


def fmt(x, digits=1):
    """A number for the tables; '-' for None."""
    return "-" if x is None else f"{x:.{digits}f}"


def pgbench_events(path, role):
    """Clients pgbench stopped (aborted in a command) or could not connect, from its stamped stderr."""
    events = []
    if not os.path.exists(path):
        return events
    lines = open(path, errors="replace").read().splitlines()
    for line in lines:
        ts, _, text = line.partition(" ")
        if "aborted in command" in text:
            kind = "client stopped"
        elif re.search(r"connection to (server|database).*failed", text):
            kind = "connect failed"
        else:
            continue
        msg = text
        state = "other"
        for needle, code in PGBENCH_MESSAGES:
            if needle in msg:
                state = code
                break
        events.append({"ts": float(ts), "role": role, "kind": kind, "sqlstate": state, "message": msg[:300]})
    return events


def main():
    work, out = sys.argv[1], sys.argv[2]
    run = read_kv(os.path.join(work, "run.csv"))
    t0 = float(run["t0"])
    duration = float(run["duration"])
    t_done = float(run.get("t_done", t0 + duration))
    roles = [r for r in csv.reader(open(os.path.join(work, "roles.csv")))]
    weight = {r[0]: int(r[1]) for r in roles}
    clients = {r[0]: int(r[2]) for r in roles}
    t_kill = float(run["t_kill"]) if "t_kill" in run else None
    t_ready = float(run["t_ready"]) if "t_ready" in run else None
    grace = float(run.get("kill_grace", 10))

    def in_window(ts):
        return t_kill is not None and t_kill - 0.5 <= ts <= t_ready + grace

    def expected(state, ts):
        return state in ANYTIME or (state in KILL_WINDOW and in_window(ts))

    results = list(csv.DictReader(open(os.path.join(work, "results.csv"))))
    for r in results:
        r["ts"] = float(r["ts"])
        r["latency_ms"] = float(r["latency_ms"])
        r["n"] = int(r["n"])
        r["n_wrong"] = int(r["n_wrong"])
    events = []
    for role in weight:
        events += pgbench_events(os.path.join(work, f"pgbench_{role}.err"), role)
    errors = list(csv.DictReader(open(os.path.join(work, "errors.csv"))))
    wrong = list(csv.DictReader(open(os.path.join(work, "wrong.csv"))))

    # per role
    table = []
    for role in list(weight) + ["all"]:
        rs = [r for r in results if role == "all" or r["role"] == role]
        ev = [e for e in events if e["kind"] == "client stopped" and (role == "all" or e["role"] == role)]
        ok_single = [r["latency_ms"] for r in rs if r["sqlstate"] == "ok" and r["kind"] == "single"]
        ok_batch = [r["latency_ms"] for r in rs if r["sqlstate"] == "ok" and r["kind"] == "batch"]
        table.append({
            "role": role,
            "weight": weight.get(role, ""),
            "clients": clients.get(role, sum(clients.values())),
            "requests": len(rs),
            "ok": sum(r["sqlstate"] == "ok" for r in rs),
            "cancelled_57014": sum(r["sqlstate"] == "57014" for r in rs),
            "other_errors": sum(r["sqlstate"] not in ("ok", "57014") for r in rs),
            "clients_stopped": len(ev),
            "wrong": sum(r["n_wrong"] for r in rs),
            "answers_checked": sum(r["n"] for r in rs if r["sqlstate"] == "ok"),
            "ok_per_s": sum(r["sqlstate"] == "ok" for r in rs) / max(1.0, t_done - t0),
            "p50_ms": percentile(ok_single, 50),
            "p99_ms": percentile(ok_single, 99),
            "batch_p50_ms": percentile(ok_batch, 50),
            "batch_p99_ms": percentile(ok_batch, 99),
        })

    # errors by SQLSTATE, where and whether expected
    by_state = {}
    for r in results:
        if r["sqlstate"] != "ok":
            key = (r["sqlstate"], "in the call (soak_try)")
            e = by_state.setdefault(key, [0, 0])
            e[0 if expected(r["sqlstate"], r["ts"]) else 1] += 1
    for ev in events:
        key = (ev["sqlstate"], "pgbench: " + ev["kind"])
        e = by_state.setdefault(key, [0, 0])
        e[0 if expected(ev["sqlstate"], ev["ts"]) else 1] += 1
    unexpected = sum(v[1] for v in by_state.values())

    # the kill
    kill = {}
    if t_kill is not None:
        after = [r["ts"] for r in results if r["sqlstate"] == "ok" and r["ts"] > t_kill]
        kill = {
            "at_s": t_kill - t0,
            "killed_pid": run.get("killed_pid"),
            "new_pid": run.get("new_pid"),
            "ready_after_s": t_ready - t_kill,
            "first_ok_after_s": (min(after) - t_kill) if after else None,
            "lost": sum(1 for e in events if in_window(e["ts"])),
        }

    # memory, per worker process
    mem = list(csv.DictReader(open(os.path.join(work, "memory.csv"))))
    incarnations = {}
    for m in mem:
        incarnations.setdefault(m["worker_pid"], []).append(m)

    def kb(m, col):
        return int(m[col] or 0)

    mem_rows = []
    for pid, ms in incarnations.items():
        half = ms[len(ms) // 2]
        mem_rows.append({
            "pid": pid, "from_s": float(ms[0]["t_s"]), "to_s": float(ms[-1]["t_s"]), "samples": len(ms),
            "rss_first": kb(ms[0], "vm_rss_kb"), "rss_max": max(kb(m, "vm_rss_kb") for m in ms),
            "rss_last": kb(ms[-1], "vm_rss_kb"),
            "anon_first": kb(ms[0], "rss_anon_kb"), "anon_mid": kb(half, "rss_anon_kb"),
            "anon_last": kb(ms[-1], "rss_anon_kb"),
            "hwm": max(kb(m, "vm_hwm_kb") for m in ms),
            "shm_max": max(kb(m, "shm_mapped_kb") for m in ms),
            "backends_anon_max": max(kb(m, "backends_anon_kb") for m in ms),
        })
    max_rss = max((r["rss_max"] for r in mem_rows), default=0)

    cancels = 0
    cpath = os.path.join(work, "cancels.log")
    if os.path.exists(cpath):
        cancels = sum(int(x) for x in open(cpath).read().split() if x.isdigit())
    role_stats = list(csv.DictReader(open(os.path.join(work, "role_stats.csv"))))
    recheck_changed = int(run.get("recheck_changed", -1))
    idle_left = int(run.get("idle_queued") or 0) + int(run.get("idle_running") or 0)

    failures = []
    if table[-1]["wrong"]:
        failures.append(f"{table[-1]['wrong']} wrong answers")
    if unexpected:
        failures.append(f"{unexpected} unexpected errors")
    if recheck_changed != 0:
        failures.append(f"recheck: {recheck_changed} references changed after the load")
    if idle_left:
        failures.append(f"{idle_left} requests left in the queue after the load")
    if not table[-1]["ok"]:
        failures.append("no request succeeded")

    # the report
    L = []
    L.append(f"# Soak: {sum(clients.values())} clients of {len(weight)} roles, {duration:.0f} s")
    L.append("")
    L.append(f"stories260K (`bench/soak.sh`), llm.threads = {run.get('threads')}; "
             f"{table[-1]['requests']} calls ({table[-1]['answers_checked']} answers checked against "
             f"their single-session reference), {cancels} pg_cancel_backend() sent"
             + (f", SIGKILL of the worker at {kill['at_s']:.0f} s" if kill else "") + ".")
    L.append("")
    L.append("| role | weight | clients | calls | ok | 57014 | other errors | clients stopped | wrong "
             "| ok/s | p50 ms | p99 ms | batch p50 ms | batch p99 ms |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in table:
        L.append(f"| {t['role']} | {t['weight']} | {t['clients']} | {t['requests']} | {t['ok']} "
                 f"| {t['cancelled_57014']} | {t['other_errors']} | {t['clients_stopped']} | {t['wrong']} "
                 f"| {t['ok_per_s']:.1f} | {fmt(t['p50_ms'])} | {fmt(t['p99_ms'])} "
                 f"| {fmt(t['batch_p50_ms'])} | {fmt(t['batch_p99_ms'])} |")
    L.append("")
    L.append("Latency of successful calls (llm_generate; batch: llm_generate_batch of 4 prompts), "
             "measured in soak_try() around the call.")
    L.append("")
    L.append("| SQLSTATE | where | expected | unexpected |")
    L.append("|---|---|---:|---:|")
    for (state, where), (ok, bad) in sorted(by_state.items()):
        L.append(f"| {state} | {where} | {ok} | {bad} |")
    if not by_state:
        L.append("| - | - | 0 | 0 |")
    L.append("")
    L.append("Expected: 57014 at any time (statement timeouts, pg_cancel_backend()); 57P01, 57P02, 57P03, "
             "08006 and 55000 from the SIGKILL until "
             f"{grace:.0f} s after the restarted worker is ready. Anything else fails the soak.")
    if kill:
        L.append("")
        L.append(f"SIGKILL of the worker (pid {kill['killed_pid']}) at {kill['at_s']:.1f} s: the postmaster "
                 f"restarted the cluster; new worker (pid {kill['new_pid']}) ready after "
                 f"{kill['ready_after_s']:.2f} s, first correct answer {fmt(kill['first_ok_after_s'], 2)} s "
                 f"after the kill; {kill['lost']} pgbench clients lost or refused in the window.")
    L.append("")
    L.append("| worker pid | from s | to s | samples | VmRSS first / max / last MiB | RssAnon first / middle / last MiB "
             "| VmHWM MiB | /dev/shm mapped max MiB | backends RssAnon max MiB |")
    L.append("|---|---:|---:|---:|---|---|---:|---:|---:|")
    for m in mem_rows:
        L.append(f"| {m['pid']} | {m['from_s']:.0f} | {m['to_s']:.0f} | {m['samples']} "
                 f"| {m['rss_first'] / 1024:.1f} / {m['rss_max'] / 1024:.1f} / {m['rss_last'] / 1024:.1f} "
                 f"| {m['anon_first'] / 1024:.1f} / {m['anon_mid'] / 1024:.1f} / {m['anon_last'] / 1024:.1f} "
                 f"| {m['hwm'] / 1024:.1f} | {m['shm_max'] / 1024:.1f} | {m['backends_anon_max'] / 1024:.1f} |")
    L.append("")
    L.append(f"Max worker RSS: {max_rss / 1024:.1f} MiB. Memory plot: `bench/results/soak_memory.png` "
             "(samples in `bench/results/soak_memory.csv`).")
    L.append("")
    L.append(f"After the load: {recheck_changed} of the references changed when asked again of the restarted "
             f"worker; queue {run.get('idle_queued')} queued, {run.get('idle_running')} running; KV blocks "
             f"{run.get('idle_kv_used')} used ({run.get('idle_kv_cached')} cached) of {run.get('idle_kv_total')}.")
    if role_stats:
        L.append("")
        L.append("llm_role_stats since the restart:")
        L.append("")
        L.append("| role | weight | completed | failed | cancelled | prompt tokens | completion tokens | mean queue ms |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for s in role_stats:
            L.append(f"| {s['role']} | {s['weight']} | {s['completed_requests']} | {s['failed_requests']} "
                     f"| {s['cancelled_requests']} | {s['prompt_tokens']} | {s['completion_tokens']} "
                     f"| {s['mean_queue_time']} |")
    if errors:
        L.append("")
        L.append("Errors other than 57014 caught in soak_try() (first 10):")
        L.append("")
        for e in errors[:10]:
            L.append(f"- {float(e['ts']) - t0:.1f} s, {e['role']}, {e['kind']} param {e['param_id']} "
                     f"prompt {e['prompt_id']}: {e['sqlstate']} {e['message']}")
    odd = [e for e in events if not expected(e["sqlstate"], e["ts"])]
    if odd:
        L.append("")
        L.append("Unexpected pgbench failures (first 10):")
        L.append("")
        for e in odd[:10]:
            L.append(f"- {e['ts'] - t0:.1f} s, {e['role']}: {e['message']}")
    if wrong:
        L.append("")
        L.append("Wrong answers (first 5):")
        L.append("")
        for w in wrong[:5]:
            L.append(f"- {float(w['ts']) - t0:.1f} s, {w['role']}, {w['kind']} param {w['param_id']} "
                     f"prompt {w['prompt_id']}: got {w['got']!r}, expected {w['expected']!r}")
    L.append("")
    L.append("Result: " + ("PASS" if not failures else "FAIL: " + "; ".join(failures)))
    text = "\n".join(L) + "\n"
    print(text)
    with open(os.path.join(out, "soak.md"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "soak.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(table[0].keys()) + ["max_worker_rss_kb"])
        w.writeheader()
        for t in table:
            w.writerow({**t, "max_worker_rss_kb": max_rss,
                        **{k: (round(v, 3) if isinstance(v, float) else v) for k, v in t.items()}})
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
