#!/bin/sh
# On an empty data folder, what the official postgres image does first: a cluster whose superuser is POSTGRES_USER
# with the password in POSTGRES_PASSWORD or the file POSTGRES_PASSWORD_FILE names, a database POSTGRES_DB, and
# password logins from any address. Then the command (postgres).
set -eu
if [ "${1:-}" = postgres ] && [ ! -s "$PGDATA/PG_VERSION" ]; then
    user="${POSTGRES_USER:-postgres}"
    password="${POSTGRES_PASSWORD:-}"
    if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
        password="$(cat "$POSTGRES_PASSWORD_FILE")"
    fi
    if [ -z "$password" ]; then
        echo "postgres: set POSTGRES_PASSWORD or POSTGRES_PASSWORD_FILE" >&2
        exit 1
    fi
    pwfile="$(mktemp)"
    printf '%s\n' "$password" >"$pwfile"
    initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
        --encoding=UTF8 -D "$PGDATA" >/dev/null
    rm -f "$pwfile"
    echo "host all all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
    echo "listen_addresses = '*'" >>"$PGDATA/postgresql.conf"
    database="${POSTGRES_DB:-$user}"
    if [ "$database" != postgres ]; then
        echo "CREATE DATABASE \"$database\" OWNER \"$user\"" | postgres --single -D "$PGDATA" postgres >/dev/null
    fi
    echo "postgres: created the cluster, user $user, database $database"
fi
exec "$@"
