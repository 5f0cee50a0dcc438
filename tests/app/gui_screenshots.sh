#!/bin/sh
# The gui_screenshots test (ctest label "gui"): renders every panel offscreen under a virtual X server,
# at 1600 × 1000, and at 1280 × 720 and 1366 × 768 both alone and beside a docked lesson; the light
# theme, a larger UI scale and presenter mode; two more views from state files (a toy TTT-MLP head, and a lesson's view in classroom mode), and
# checks that the PNGs are not blank and all differ; also checks that a broken state file is refused
# with a message instead of a crash, and that the frame-time benchmark runs and reports its p99.
#   usage: gui_screenshots.sh TTTLAB PNG_CHECK OUTDIR
# The environment narrows the per-panel shots (the sanitizer build does): TTTLAB_SCREENSHOT_PANELS,
# TTTLAB_SCREENSHOT_SIZES and TTTLAB_SCREENSHOT_DOCKED_ONLY, described where they are read.
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
shoot() {  # shoot OUT.png FRAMES ARGS…
  png=$1
  frames=$2
  shift 2
  rm -f "$png"
  # Judged by the image written, not by xvfb-run's status (which its own clean-up can fail).
  xvfb-run -a -s "-screen 0 1600x1000x24" "$tttlab" gui --screenshot "$png" --frames "$frames" "$@"
  [ -s "$png" ]
}

all_panels=$("$tttlab" gui --list-panels | awk '{print $1}')
if [ -z "$all_panels" ]; then
  echo "FAIL: tttlab gui --list-panels printed no panels"
  exit 1
fi
# TTTLAB_SCREENSHOT_PANELS narrows the per-panel shots below to the panels it names (default: every
# panel). The sanitizer build names one panel of each kind (tests/app/CMakeLists.txt): there each
# start of the app costs seconds, and every panel's drawing code is already checked under the
# sanitizers by tttlab_app_tests (Headless.EveryPanelDrawsRealSnapshotsAndEmptyOnes), so these shots
# add what only the real app has: its window, OpenGL backend, PNG writer and docked lesson.
panels=${TTTLAB_SCREENSHOT_PANELS:-$all_panels}
for p in $panels; do
  if ! echo "$all_panels" | grep -qx "$p"; then
    echo "FAIL: TTTLAB_SCREENSHOT_PANELS names '$p', which is not a panel (tttlab gui --list-panels: $(echo $all_panels))"
    exit 1
  fi
done
files=""
for p in $panels; do
  shoot "$out/$p.png" 5 --panel "$p" || { echo "FAIL: screenshot of panel $p"; exit 1; }
  files="$files $out/$p.png"
done
# Every panel at the two common projector and laptop sizes, 1280 × 720 (the smallest supported) and
# 1366 × 768, where text is most likely to overlap or be cut off: on its own, and beside a docked
# lesson (lesson 01 with both its predictions locked in, so the view shows instead of the veil). Two
# frames: the layout is what these pictures are for (the engine's results still arrive before the
# capture), and the test stays quick on a small CI machine.
# TTTLAB_SCREENSHOT_SIZES narrows the sweep, and TTTLAB_SCREENSHOT_DOCKED_ONLY=1 leaves out the
# panels alone at those sizes: the sanitizer build sets both, because the layout is the Release
# build's to judge and the memory checks need each drawing path once (the panels alone are drawn at
# 1600 × 1000 above).
sizes=${TTTLAB_SCREENSHOT_SIZES:-1280x720 1366x768}
progress="$out/progress.json"
for size in $sizes; do
  for p in $panels; do
    if [ "${TTTLAB_SCREENSHOT_DOCKED_ONLY:-0}" != 1 ]; then
      shoot "$out/${p}_${size}.png" 2 --panel "$p" --size "$size" || { echo "FAIL: screenshot of panel $p at $size"; exit 1; }
      files="$files $out/${p}_${size}.png"
    fi
    cat > "$progress" <<'JSON'
{ "format": "tttlab-course-progress", "version": 1,
  "lessons": { "01-one-step-per-token": { "predictions": { "rank": { "choice": 2, "value": 0.0 },
                                                           "own-loss": { "choice": 0, "value": 0.0 } } } } }
JSON
    TTTLAB_PROGRESS="$progress" shoot "$out/${p}_${size}_docked.png" 2 --panel "$p" --size "$size" --lesson 01 ||
      { echo "FAIL: screenshot of panel $p at $size beside a docked lesson"; exit 1; }
    files="$files $out/${p}_${size}_docked.png"
  done
done
# The light theme, a larger UI scale and presenter mode render too (and differently).
shoot "$out/light_1366x768.png" 2 --panel inner_curves --size 1366x768 --theme light ||
  { echo "FAIL: screenshot in the light theme"; exit 1; }
shoot "$out/scaled_1366x768.png" 2 --panel inner_curves --size 1366x768 --ui-scale 1.5 ||
  { echo "FAIL: screenshot at UI scale 1.5"; exit 1; }
shoot "$out/presenter_1366x768.png" 2 --size 1366x768 --lesson 01 --presenter ||
  { echo "FAIL: screenshot in presenter mode"; exit 1; }
files="$files $out/light_1366x768.png $out/scaled_1366x768.png $out/presenter_1366x768.png"

# A saved view reproduces different settings: a toy TTT-MLP head, b = 4, token 9, on the stepper.
cat > "$out/mlp.tttlab" <<'JSON'
{
  "format": "tttlab-state", "version": 1, "active_panel": "inner_stepper",
  "panels": { "inner_stepper": { "cursor": 9, "head": { "source": "toy", "model": "mlp", "d": 8, "mini_batch": 4,
                                                          "text": "abcdabcdabcdabcd", "seed": 3 } } }
}
JSON
shoot "$out/state_mlp.png" 5 --state "$out/mlp.tttlab" || { echo "FAIL: screenshot from a state file"; exit 1; }
files="$files $out/state_mlp.png"

# A lesson's view: its state file, classroom mode included.
lesson=$(dirname "$0")/../../lessons/01-one-step-per-token.tttlab
shoot "$out/lesson1.png" 5 --state "$lesson" || { echo "FAIL: screenshot of lesson 1's view"; exit 1; }
files="$files $out/lesson1.png"
# A lesson docked beside its view (the veil until the first prediction) at both sizes.
for size in $sizes; do
  shoot "$out/lesson_docked_${size}.png" 5 --size "$size" --lesson 01 || { echo "FAIL: screenshot of a docked lesson at $size"; exit 1; }
  files="$files $out/lesson_docked_${size}.png"
done

# A broken state file is refused: exit status 1 and a one-line message naming the field.
cat > "$out/bad.tttlab" <<'JSON'
{ "format": "tttlab-state", "panels": { "inner_stepper": { "head": { "d": 1000 } } } }
JSON
# The app's own exit status is echoed from inside xvfb-run: xvfb-run sometimes fails to clean up its
# temporary folder after the server exits and then reports its own error status instead.
msg=$(xvfb-run -a sh -c '"$0" gui --screenshot "$1" --frames 2 --state "$2" 2>&1; echo "app-exit=$?"' \
      "$tttlab" "$out/bad.png" "$out/bad.tttlab" 2>&1)
rc=$(echo "$msg" | sed -n 's/^app-exit=//p' | tail -n 1)
msg=$(echo "$msg" | grep -v '^app-exit=' | grep -v 'xvfb-run: error: problem while cleaning up')
if [ "${rc:-none}" != 1 ] || ! echo "$msg" | grep -q "panels.inner_stepper.head.d"; then
  echo "FAIL: a bad state file should exit 1 with a message naming the field (got $rc: $msg)"
  exit 1
fi
echo "ok   bad state file refused: $msg"

# The frame-time benchmark runs (briefly, without the training run) and reports a p99.
bench=$(xvfb-run -a "$tttlab" gui --bench-frames 20 --bench-idle 2>&1)
if ! echo "$bench" | grep -q "thread CPU time: p50 .* p99"; then
  echo "FAIL: tttlab gui --bench-frames printed no p99: $bench"
  exit 1
fi
echo "ok   benchmark: $(echo "$bench" | grep "thread CPU time")"

exec "$check" $files
