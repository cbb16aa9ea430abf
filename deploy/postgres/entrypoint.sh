#!/bin/sh
# Initialises an empty $PGDATA like the official postgres image (POSTGRES_USER, POSTGRES_DB,
# POSTGRES_PASSWORD_FILE; trailing newlines of the password file dropped), then runs the server on all
# addresses. An initialised data directory is used as it is.
set -eu
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    user=${POSTGRES_USER:-postgres}
    db=${POSTGRES_DB:-$user}
    [ -n "${POSTGRES_PASSWORD_FILE:-}" ] || { echo "postgres-entrypoint: set POSTGRES_PASSWORD_FILE" >&2; exit 64; }
    pwfile=$(mktemp)
    printf '%s\n' "$(cat "$POSTGRES_PASSWORD_FILE")" > "$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 --locale=C.UTF-8 -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
    # A socket-only server while the database is created, as the official image does.
    pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
    if [ "$db" != postgres ]; then
        psql -v ON_ERROR_STOP=1 --username "$user" --dbname postgres -q \
            -c "CREATE DATABASE \"$db\" OWNER \"$user\""
    fi
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
    echo "postgres-entrypoint: initialised $PGDATA (user $user, database $db)"
fi
if [ "${1:-}" = postgres ]; then
    exec "$@" -c listen_addresses='*'
fi
exec "$@"
