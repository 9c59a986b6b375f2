# Sourced by scripts that need a temporary PostgreSQL server with llm
# preloaded (tools/demo.sh, bench/sql_bench.sh).  Not executable alone.
#
#   pgtemp_start MODEL.gguf [EXTRA_CONF_LINE]...
#       initdb in a new temporary directory, preload llm with the model,
#       start the server, create the extension, wait for the worker to load
#       the model.  As root, the server runs as $LLM_PG_USER (default
#       llmtest, created if missing).  Sets PGTEMP_DIR and the command array
#       PSQL (psql -X -q ... ON_ERROR_STOP), and stops and removes it all on
#       exit (KEEP=1 keeps the directory).  A benchmark that times the
#       engine passes "llm.cache_mb = 0": the answer cache, on by default,
#       would answer its repeated requests without computing them.
#   pgtemp_stop
#       stop the server now (the exit trap does the rest).
#
# The extension must be built and installed first (make && make install).

pgtemp_bindir=$(pg_config --bindir)
pgtemp_user=${LLM_PG_USER:-llmtest}
pgtemp_run_as=()

# Stop the server if it runs; remove the directory unless KEEP=1.
pgtemp_cleanup() {
    if [ -n "${PGTEMP_DIR:-}" ] && [ -f "$PGTEMP_DIR/data/postmaster.pid" ]; then
        "${pgtemp_run_as[@]}" "$pgtemp_bindir/pg_ctl" -D "$PGTEMP_DIR/data" -m fast -w stop >/dev/null || true
    fi
    if [ -n "${PGTEMP_DIR:-}" ]; then
        if [ "${KEEP:-0}" = 1 ]; then echo "kept $PGTEMP_DIR" >&2; else rm -rf "$PGTEMP_DIR"; fi
    fi
}

# Start a temporary server serving the model file $1; extra arguments are postgresql.conf lines.
pgtemp_start() {
    local model=$1; shift
    [ -f "$model" ] || { echo "pgtemp: model file $model not found" >&2; return 1; }
    PGTEMP_DIR=$(mktemp -d /tmp/llm-pg.XXXXXX)
    trap pgtemp_cleanup EXIT
    if [ "$(id -u)" -eq 0 ]; then
        id "$pgtemp_user" >/dev/null 2>&1 || useradd --system --create-home --shell /bin/bash "$pgtemp_user"
        # env -C /: the checkout may be a directory that user cannot enter
        pgtemp_run_as=(runuser -u "$pgtemp_user" -- env -C /)
    fi
    # the model goes where the server's user can read it
    mkdir -p "$PGTEMP_DIR/models"
    cp "$model" "$PGTEMP_DIR/models/"
    chmod 755 "$PGTEMP_DIR"
    [ "$(id -u)" -eq 0 ] && chown -R "$pgtemp_user" "$PGTEMP_DIR"
    "${pgtemp_run_as[@]}" "$pgtemp_bindir/initdb" -D "$PGTEMP_DIR/data" -A trust -U postgres --no-sync >/dev/null
    {
        echo "shared_preload_libraries = 'llm'"
        echo "llm.model_dir = '$PGTEMP_DIR/models'"
        echo "llm.model = '$(basename "$model")'"
        echo "listen_addresses = ''"
        echo "unix_socket_directories = '$PGTEMP_DIR'"
        for line in "$@"; do echo "$line"; done
    } >> "$PGTEMP_DIR/data/postgresql.conf"
    "${pgtemp_run_as[@]}" "$pgtemp_bindir/pg_ctl" -D "$PGTEMP_DIR/data" -l "$PGTEMP_DIR/server.log" -w start >/dev/null
    PSQL=("${pgtemp_run_as[@]}" "$pgtemp_bindir/psql" -X -q -h "$PGTEMP_DIR" -U postgres -d postgres
          -v ON_ERROR_STOP=1 -P pager=off)
    "${PSQL[@]}" <<'SQL'
CREATE EXTENSION llm;
-- wait for the worker to load the model; fail with its reason if it cannot
DO $$
DECLARE
    s record;
BEGIN
    FOR i IN 1..1200 LOOP
        SELECT * INTO s FROM llm_worker_status();
        EXIT WHEN s.state IN ('ready', 'no model');
        PERFORM pg_sleep(0.1);
    END LOOP;
    IF s.state <> 'ready' THEN
        RAISE EXCEPTION 'the llm worker has no model: %', s.error;
    END IF;
END $$;
SQL
}

# Stop the server now.
pgtemp_stop() {
    "${pgtemp_run_as[@]}" "$pgtemp_bindir/pg_ctl" -D "$PGTEMP_DIR/data" -m fast -w stop >/dev/null
}
