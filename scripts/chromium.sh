# Sourced by scripts/test.sh and scripts/test-browser.sh: the browser tests (test/browser) drive
# Debian's Chromium through playwright-core, which downloads no browser of its own (nothing
# may be downloaded but packages here). kiln_ensure_chromium installs it with apt-get when
# missing; CHROMIUM_PATH names another binary instead.
kiln_ensure_chromium() {
  local bin=${CHROMIUM_PATH:-/usr/bin/chromium}
  [ -x "$bin" ] && return 0
  [ -n "${CHROMIUM_PATH:-}" ] && kiln_die "CHROMIUM_PATH=$bin is not an executable"
  command -v apt-get >/dev/null || kiln_die "the browser tests need Chromium: install it, or set CHROMIUM_PATH"
  local sudo=
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  kiln_log "installing Chromium for the browser tests (apt-get install chromium, a few minutes once)"
  mkdir -p .kiln
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium; } >.kiln/chromium-install.log 2>&1; then
    kiln_die "apt-get install chromium failed; .kiln/chromium-install.log says why"
  fi
  [ -x "$bin" ] || kiln_die "apt-get installed chromium but $bin is missing"
}

# Whether jest's arguments select the browser project: all projects (no file named, no
# --selectProjects), a file under test/browser, or the browser project by name.
kiln_runs_browser_tests() {
  local arg files=0
  for arg in "$@"; do
    case $arg in *browser*) return 0 ;; esac
  done
  for arg in "$@"; do
    case $arg in
      --selectProjects | --selectProjects=*) return 1 ;;
      -*) ;;
      *) files=1 ;;
    esac
  done
  [ "$files" -eq 0 ]
}
