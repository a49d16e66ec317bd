#!/usr/bin/env bash
# Makes sure the PostgreSQL and Redis the tests use are up on this machine: starts them when installed
# but stopped, installs them from Debian's packages when missing; and that Debian's Chromium is there for
# the browser tests. Idempotent; safe to run every time.
set -euo pipefail

pg_up() { (echo > /dev/tcp/127.0.0.1/5432) 2>/dev/null; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
apt_updated=
apt_install() {
  [ -n "$apt_updated" ] || { as_root apt-get update -qq; apt_updated=1; }
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "$@" >/dev/null
}
wait_for() { for _ in $(seq 1 60); do "$1" && return 0; sleep 0.5; done; echo "$2 did not come up" >&2; return 1; }

if ! pg_up; then
  if ! ls /etc/postgresql/*/main >/dev/null 2>&1; then
    echo "installing PostgreSQL"
    apt_install postgresql
  fi
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  echo "starting PostgreSQL $version"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  wait_for pg_up PostgreSQL
fi
# Tests connect as postgres over TCP without a password (trust), as this machine kind is set up.
if ! psql -h 127.0.0.1 -U postgres -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  hba=/etc/postgresql/$version/main/pg_hba.conf
  echo "allowing trust auth for local test connections in $hba"
  as_root sed -i -E 's/^(host\s+all\s+all\s+(127\.0\.0\.1\/32|::1\/128)\s+)\S+/\1trust/' "$hba"
  as_root pg_ctlcluster --skip-systemctl-redirect "$version" main reload
fi
psql -h 127.0.0.1 -U postgres -d postgres -Atqc "select 1 from pg_database where datname='test'" | grep -q 1 ||
  psql -h 127.0.0.1 -U postgres -d postgres -qc 'create database test'

if ! redis_up; then
  if ! command -v redis-server >/dev/null; then
    echo "installing Redis"
    apt_install redis-server
  fi
  echo "starting Redis"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no --dir /tmp
  wait_for redis_up Redis
fi
echo "PostgreSQL and Redis are up"

# The web console's tests drive Debian's Chromium with playwright-core (no browser download works here).
if [ ! -x /usr/bin/chromium ]; then
  echo "installing Chromium for the browser tests"
  apt_install chromium
fi
