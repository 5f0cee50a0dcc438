# shellcheck shell=bash
# scripts/common.sh — helpers sourced by setup.sh and run.sh (not run on its own).

# tttlab_has BIN CMD...: true when the built tttlab BIN has the (sub)command CMD... ("gui",
# "data prepare-brown"). `tttlab X --help` exits 0 even for an unknown X (CLI11 then prints the
# top-level help), so the test reads the help's "Usage: <program> CMD..." line instead.
tttlab_has() {
  local bin=$1 out
  shift
  [[ -x "$bin" ]] || return 1
  out=$("$bin" "$@" --help 2>/dev/null) || return 1
  grep -qE "^Usage: [^ ]+ $*( |\$)" <<<"$out"
}
