#!/usr/bin/env bash
# The [mysql] extra's mysqlclient compiles against MariaDB's (or MySQL's) client headers,
# found through pkg-config. Install Debian's when they are missing and we may; otherwise
# scripts/check_extras.py skips that extra and says why.
set -u
if command -v pkg-config >/dev/null 2>&1 \
    && { pkg-config --exists mariadb || pkg-config --exists mysqlclient; }; then
  exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-mariadb-headers: installing Debian's libmariadb-dev for the [mysql] extra check"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libmariadb-dev pkg-config) \
    >/dev/null 2>&1 \
    || echo "ensure-mariadb-headers: could not install libmariadb-dev; the [mysql] check will skip" >&2
else
  echo "ensure-mariadb-headers: no MariaDB/MySQL client headers; the [mysql] check will skip" >&2
fi
exit 0
