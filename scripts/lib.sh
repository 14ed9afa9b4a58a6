# Shared by scripts/test and scripts/start. Sourced, not run.

# A Python >= 3.12 (Django 6 needs it; runtime/ alone runs on 3.11). Machines of this
# kind have 3.11 as python3 and 3.12 under pyenv.
find_python() {
  # 3.12 first: the version the project is developed and tested on.
  local candidates=("${PYTHON:-}" python3.12 /root/.pyenv/versions/3.12*/bin/python3.12 python3.13
                    /root/.pyenv/versions/3.13*/bin/python3.13 python3)
  local py
  for py in "${candidates[@]}"; do
    [ -n "$py" ] || continue
    command -v "$py" >/dev/null 2>&1 || [ -x "$py" ] || continue
    if "$py" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$py"
      return 0
    fi
  done
  echo "error: no Python 3.12 or newer found; set PYTHON=/path/to/python3.12" >&2
  return 1
}

# Create .venv (recreating it if it was made by a too-old Python) and install the
# project with the given extras spec, e.g. '.[test]'.
ensure_venv() {
  local spec=$1
  if [ -x .venv/bin/python ] && ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    rm -rf .venv
  fi
  if [ ! -x .venv/bin/python ]; then
    "$(find_python)" -m venv .venv
  fi
  local log
  log=$(mktemp)
  if ! .venv/bin/python -m pip install --quiet --disable-pip-version-check -e "$spec" >"$log" 2>&1; then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  grep -v "^WARNING: Location .* is ignored" "$log" || true
  rm -f "$log"
}

# The system packages the tests use, installed from Debian's archive where missing (fast
# when present): Postgres and Redis for the services harness, Chromium for the browser.
ensure_system_packages() {
  local missing=()
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
  command -v redis-server >/dev/null || missing+=(redis-server)
  command -v chromium >/dev/null || missing+=(chromium)
  [ ${#missing[@]} -gt 0 ] || return 0
  echo "installing ${missing[*]} (apt)" >&2
  local sudo=()
  [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
