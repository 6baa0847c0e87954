#!/usr/bin/env bash
# The scale-out grid (benchmarks/scale_out.py, PostgreSQL) on a lent 16-core device
# machine, as one prepared script. That machine has Python 3.12 and nothing of ours, so
# the wheels travel with the checkout, in .whl (ignored by git). Here, once:
#
#   echo /.whl/ >> .git/info/exclude
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
#       --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl Django==5.2.19 asgiref sqlparse psycopg==3.3.9 psycopg-binary==3.3.9 \
#       typing_extensions pgserver
#
# then the device tool's run, carrying .whl (about 24 MB):
#
#   bash benchmarks/device_scale_out.sh                       # the grid, about 8 minutes
#   bash benchmarks/device_scale_out.sh --relays 1,2 --rtts 0 # any scale_out.py options
#
# PostgreSQL comes from the pgserver wheel (its initdb and postgres); initdb refuses to
# run as root, so the server runs as a "postgres" user, created if missing. The tables go
# to $OUT/scale_out.txt where the tool sets OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
site=/tmp/eventferry-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$site" .whl/*.whl
export PYTHONPATH="$site" PYTHONUNBUFFERED=1
if [ "$(id -u)" = 0 ] && ! id postgres >/dev/null 2>&1; then
    useradd --system --no-create-home postgres
fi
pg_bin="$site/pgserver/pginstall/bin"  # only its binaries: pgserver's Python needs more
echo "$(nproc) cores; $(python3 --version); PostgreSQL $("$pg_bin/postgres" --version)"
python3 benchmarks/scale_out.py --vendors postgresql --pg-bin "$pg_bin" "$@" \
    | tee "${OUT:-/tmp}/scale_out.txt"
