#!/bin/sh
# The gui_screenshots test (ctest label "gui"): renders every panel offscreen under a virtual X server,
# one more view from a state file, and checks that the PNGs are not blank and all differ; also checks
# that a broken state file is refused with a message instead of a crash.
#   usage: gui_screenshots.sh TTTLAB PNG_CHECK OUTDIR
# Exit 77 (ctest: skipped) with a visible message when xvfb-run is not installed.
set -u
tttlab=$1
check=$2
out=$3

if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "SKIPPED: xvfb-run not found; install the xvfb package to run the GUI screenshot test"
  exit 77
fi
mkdir -p "$out" || exit 1
shoot() {  # shoot OUT.png ARGS…
  png=$1
  shift
  rm -f "$png"
  xvfb-run -a -s "-screen 0 1600x1000x24" "$tttlab" gui --screenshot "$png" --frames 5 "$@"
}

panels=$("$tttlab" gui --list-panels | awk '{print $1}')
if [ -z "$panels" ]; then
  echo "FAIL: tttlab gui --list-panels printed no panels"
  exit 1
fi
files=""
for p in $panels; do
  shoot "$out/$p.png" --panel "$p" || { echo "FAIL: screenshot of panel $p"; exit 1; }
  files="$files $out/$p.png"
done

# A saved view reproduces different settings: TTT-MLP, b = 4, token 9, on the stepper.
cat > "$out/mlp.tttlab" <<'JSON'
{
  "format": "tttlab-state", "version": 1, "active_panel": "inner_stepper",
  "panels": { "inner_stepper": { "cursor": 9, "head": { "model": "mlp", "d": 8, "mini_batch": 4,
                                                          "text": "abcdabcdabcdabcd", "seed": 3 } } }
}
JSON
shoot "$out/state_mlp.png" --state "$out/mlp.tttlab" || { echo "FAIL: screenshot from a state file"; exit 1; }
files="$files $out/state_mlp.png"

# A broken state file is refused: exit status 1 and a one-line message naming the field.
cat > "$out/bad.tttlab" <<'JSON'
{ "format": "tttlab-state", "panels": { "inner_stepper": { "head": { "d": 1000 } } } }
JSON
msg=$(xvfb-run -a "$tttlab" gui --screenshot "$out/bad.png" --frames 2 --state "$out/bad.tttlab" 2>&1)
rc=$?
if [ $rc -ne 1 ] || ! echo "$msg" | grep -q "panels.inner_stepper.head.d"; then
  echo "FAIL: a bad state file should exit 1 with a message naming the field (got $rc: $msg)"
  exit 1
fi
echo "ok   bad state file refused: $msg"

exec "$check" $files
