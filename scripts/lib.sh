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
# project with the given extras spec, e.g. '.[test]'. pip's own output goes to a log
# (shown in full only when it fails); what reaches the terminal is a line per stage, so
# a first install that takes minutes is seen to move.
ensure_venv() {
  local spec=$1 py
  if [ -x .venv/bin/python ] && ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    echo "  .venv was made by a Python older than 3.12: making it again"
    rm -rf .venv
  fi
  if [ ! -x .venv/bin/python ]; then
    py=$(find_python)
    echo "  creating .venv ($("$py" -c 'import sys; print("Python " + sys.version.split()[0])'))"
    "$py" -m venv .venv
  fi
  echo "  pip install -e '$spec' (a few minutes the first time; the full log only if it fails) ..."
  local log
  log=$(mktemp)
  if ! (set -o pipefail; .venv/bin/python -m pip install --disable-pip-version-check --progress-bar off -e "$spec" 2>&1 |
        pip_progress "$log"); then
    cat "$log" >&2
    rm -f "$log"
    return 1
  fi
  grep "^WARNING:" "$log" | grep -v "^WARNING: Location .* is ignored" || true
  rm -f "$log"
}

# Reads pip's output on stdin, appends it to the log file $1 and prints a line of progress
# now and then: every 10 requirements resolved, the install's start and its end.
pip_progress() {
  local log=$1 line resolved=0 built=0
  while IFS= read -r line; do
    printf '%s\n' "$line" >>"$log"
    case $line in
      "Collecting "* | "Requirement already satisfied: "*)
        resolved=$((resolved + 1))
        ((resolved % 10)) || echo "    requirements resolved: $resolved ..."
        ;;
      "Building wheels for collected packages"* | "Building editable for "*)
        ((built)) || echo "    requirements resolved: $resolved; building the project ..."
        built=1
        ;;
      "Installing collected packages: "*)
        echo "    installing $(($(tr -cd , <<<"$line" | wc -c) + 1)) packages ..."
        ;;
      "Successfully installed "*)
        echo "    installed $(($(wc -w <<<"$line") - 2)) packages"
        ;;
    esac
  done
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
