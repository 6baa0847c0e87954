#!/usr/bin/env bash
# The PgBouncer tests (PostgreSQL legs) start Debian's pgbouncer in transaction pooling
# mode. Install it when it is missing and we may (root with apt-get); otherwise say what to
# install. The tests fail, naming the package, if it is still missing: they never skip.
set -u
if command -v pgbouncer >/dev/null 2>&1 || [ -x /usr/sbin/pgbouncer ]; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-pgbouncer: installing Debian's pgbouncer for the PgBouncer tests"
  if ! (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends pgbouncer) >/dev/null 2>&1; then
    echo "ensure-pgbouncer: could not install pgbouncer; the PgBouncer tests will fail until it is installed" >&2
  fi
else
  echo "ensure-pgbouncer: pgbouncer missing; install it (apt-get install pgbouncer) or the PgBouncer tests will fail" >&2
fi
exit 0
