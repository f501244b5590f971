# Shared by scripts/demo and scripts/test: make sure .venv exists and has benchaudit installed.
# Sourced, not executed. Re-installs only when pyproject.toml changed since the last install.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "[benchaudit] creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
STAMP="$VENV/.benchaudit-install-stamp"
WANT="$( (cat "$ROOT/pyproject.toml"; echo "${BENCHAUDIT_EXTRAS:-blind,dev}") | sha256sum | cut -d' ' -f1)"
if [ ! -f "$STAMP" ] || [ "$(cat "$STAMP")" != "$WANT" ]; then
  echo "[benchaudit] installing benchaudit[${BENCHAUDIT_EXTRAS:-blind,dev}] into $VENV (torch pinned to 2.13.0)" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip >&2
  # torch first and pinned: an unpinned torch would pull a multi-GB CUDA build.
  "$VENV/bin/python" -m pip install --quiet "torch==2.13.0" >&2
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[${BENCHAUDIT_EXTRAS:-blind,dev}]" "torch==2.13.0" >&2
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
