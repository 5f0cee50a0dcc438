#!/usr/bin/env bash
# scripts/run.sh — set up TTT Lab (scripts/setup.sh: packages, corpus, build) and start it.
#
#   bash scripts/run.sh [ARGS...]      (as root, from the repository root)
#
# Starts `build/tttlab gui` when the build has the GUI and a display is there (DISPLAY or
# WAYLAND_DISPLAY); otherwise `build/tttlab verify`, the command-line self-check; and, in a build
# that has neither yet, `build/tttlab info`. ARGS go to the command started.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/common.sh

bash scripts/setup.sh

has() { tttlab_has build/tttlab "$@"; }

echo
if has gui; then
  if [[ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
    echo "==> build/tttlab gui $*"
    exec build/tttlab gui "$@"
  fi
  echo "run: no display (DISPLAY is not set), so not starting the GUI; to run it off-screen:"
  echo "run:   xvfb-run -a build/tttlab gui"
fi
if has verify; then
  echo "==> build/tttlab verify $*"
  exec build/tttlab verify "$@"
fi
echo "run: this build has neither 'tttlab gui' nor 'tttlab verify' yet; showing 'tttlab info'"
exec build/tttlab info "$@"
