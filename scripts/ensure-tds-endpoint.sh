#!/usr/bin/env bash
# Print the EVENTFERRY_MSSQL_URL the SQL Server leg of the suite runs against.
#
# - EVENTFERRY_MSSQL_URL set: a real SQL Server (or anything else you point it at); printed
#   back unchanged, nothing is started.
# - otherwise, the local T-SQL endpoint (Babelfish, NOT SQL Server) from the shared
#   tds-engine setup: started if it does not answer yet, and its databases created.
#   The setup is found at $EVENTFERRY_TDS_SETUP, else ../shared/tds-engine/setup beside this
#   checkout, else beside the main checkout of a git worktree.
# Exit 3 (and print nothing) when neither is available, so callers can skip the leg.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}

if [[ -n ${EVENTFERRY_MSSQL_URL:-} ]]; then
  echo "$EVENTFERRY_MSSQL_URL"
  exit 0
fi

find_setup() {
  local candidates=("${EVENTFERRY_TDS_SETUP:-}" "$ROOT/../shared/tds-engine/setup")
  local common
  # a worktree's checkout is elsewhere; ../shared sits beside the main checkout
  if common=$(git -C "$ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null); then
    candidates+=("$(dirname "$common")/../shared/tds-engine/setup")
  fi
  for c in "${candidates[@]}"; do
    [[ -n $c && -f $c ]] && { readlink -f "$c"; return 0; }
  done
  return 1
}

SETUP=$(find_setup) || { echo "ensure-tds-endpoint: no EVENTFERRY_MSSQL_URL and no tds-engine setup" >&2; exit 3; }
# Login and databases as the setup creates them (see its README)
PASSWORD=${TDS_SA_PASSWORD:-Passw0rd!}
PORT=${TDS_PORT:-1433}
URL="mssql://sa:${PASSWORD//!/%21}@127.0.0.1:$PORT/eventferry?driver=ODBC+Driver+18+for+SQL+Server&Encrypt=no"

# Fast path: the endpoint answers and both databases exist (a second or less).
ready() {
  "$PY" - "$PASSWORD" "$PORT" 2>/dev/null <<'PY'
import sys
import pyodbc
pw, port = sys.argv[1:]
c = pyodbc.connect("DRIVER={ODBC Driver 18 for SQL Server};SERVER=127.0.0.1,%s;UID=sa;PWD=%s;"
                   "Encrypt=no;LoginTimeout=3" % (port, pw), autocommit=True)
n = c.execute("SELECT COUNT(*) FROM sys.databases WHERE name IN ('eventferry', 'eventferry_test')")
sys.exit(0 if n.fetchone()[0] == 2 else 1)
PY
}

if ! ready; then
  echo "ensure-tds-endpoint: starting the T-SQL endpoint with $SETUP" >&2
  # The prebuilt engine's .so files carry RUNPATH /opt/tds/pg/lib, so it only loads
  # from /opt/tds; the setup's own default (/opt/tds-engine) cannot start it.
  TDS_HOME=${TDS_HOME:-/opt/tds} bash "$SETUP" >&2
  ready || { echo "ensure-tds-endpoint: the endpoint did not come up" >&2; exit 1; }
fi
echo "$URL"
