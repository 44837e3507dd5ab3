#!/usr/bin/env bash
# .ci/postgres.sh: a PostgreSQL server for boxbroker's postgres store tests.
#
#   eval "$(.ci/postgres.sh)"    # start it (if need be) and set BOXBROKER_TEST_POSTGRES
#   .ci/postgres.sh stop         # stop it
#
# Idempotent. It installs PostgreSQL from Debian if no initdb is found,
# creates a cluster in $BOXBROKER_PG_DIR (default /tmp/boxbroker-ci-pg) if
# there is none, starts it on 127.0.0.1:$BOXBROKER_PG_PORT (default 55432)
# if it is not running, creates the database boxbroker_test if missing, and
# prints `export BOXBROKER_TEST_POSTGRES=<dsn>` on stdout; everything else
# goes to stderr. Run as root, the cluster runs as the postgres user (initdb
# refuses root). It trusts every local connection and listens on loopback
# only: it is for tests, never for production.
set -euo pipefail

dir=${BOXBROKER_PG_DIR:-/tmp/boxbroker-ci-pg}
port=${BOXBROKER_PG_PORT:-55432}
db=boxbroker_test
user=boxbroker

log() { echo "postgres.sh: $*" >&2; }

find_bin() {
	local d
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
		if [[ -x $d/initdb && -x $d/pg_ctl ]]; then
			echo "$d"
			return 0
		fi
	done
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
		dirname "$(command -v initdb)"
		return 0
	fi
	return 1
}

bin=$(find_bin || true)
if [[ -z $bin ]]; then
	if [[ ${1:-} == stop ]]; then
		log "no PostgreSQL installed: nothing to stop"
		exit 0
	fi
	log "installing postgresql from Debian"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq >&2
	apt-get install -y -qq postgresql >&2
	bin=$(find_bin) || { log "postgresql installed but initdb not found"; exit 1; }
fi

# as runs a PostgreSQL program as the cluster's owner.
as() {
	if [[ $(id -u) == 0 ]]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

if [[ ${1:-} == stop ]]; then
	if [[ -f $dir/data/PG_VERSION ]] && as "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
		as "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >&2
	else
		log "not running"
	fi
	exit 0
fi

mkdir -p "$dir"
if [[ $(id -u) == 0 ]]; then
	chown postgres:postgres "$dir"
fi
chmod 700 "$dir"

if [[ ! -f $dir/data/PG_VERSION ]]; then
	log "creating a cluster in $dir/data"
	as "$bin/initdb" -D "$dir/data" -U "$user" -A trust -E UTF8 --no-locale >&2
fi

if ! as "$bin/pg_ctl" -D "$dir/data" status >/dev/null 2>&1; then
	log "starting it on 127.0.0.1:$port"
	as "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
		-o "-h 127.0.0.1 -p $port -k $dir" start >&2 || {
		log "pg_ctl start failed; its log:"
		tail -n 20 "$dir/log" >&2 || true
		exit 1
	}
fi

psql=("$bin/psql" -h 127.0.0.1 -p "$port" -U "$user" -d postgres -v ON_ERROR_STOP=1 -qtA)
if [[ $("${psql[@]}" -c "SELECT 1 FROM pg_database WHERE datname = '$db'") != 1 ]]; then
	log "creating database $db"
	"${psql[@]}" -c "CREATE DATABASE $db" >&2
fi

echo "export BOXBROKER_TEST_POSTGRES='postgres://$user@127.0.0.1:$port/$db?sslmode=disable'"
