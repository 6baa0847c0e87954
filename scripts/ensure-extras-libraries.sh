#!/usr/bin/env bash
# Two extras need a library of the system: [mysql]'s mysqlclient compiles against
# MariaDB's (or MySQL's) client headers, found through pkg-config, and [mssql]'s pyodbc
# loads unixODBC (libodbc.so.2). Install Debian's packages for what is missing when we
# may; otherwise scripts/check_extras.py skips that extra and says why.
set -u
missing=()
if ! { command -v pkg-config >/dev/null 2>&1 \
       && { pkg-config --exists mariadb || pkg-config --exists mysqlclient; }; }; then
  missing+=(libmariadb-dev pkg-config)
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libodbc\.so\.2'; then
  missing+=(unixodbc)
fi
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-extras-libraries: installing Debian's ${missing[*]} for the extras check"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") \
    >/dev/null 2>&1 \
    || echo "ensure-extras-libraries: could not install ${missing[*]}; those extras' checks will skip" >&2
else
  echo "ensure-extras-libraries: ${missing[*]} missing; those extras' checks will skip" >&2
fi
exit 0
