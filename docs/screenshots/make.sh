#!/bin/sh
# Regenerates the README's screenshots, one per panel, from the state files in states/.
#
#   sh docs/screenshots/make.sh [TTTLAB]          run from the repository root; TTTLAB defaults to build/tttlab
#   ONLY=lessons sh docs/screenshots/make.sh      only the lessons' screenshots
#
# Needs xvfb-run (package xvfb) and the Brown corpus in data/brown (scripts/setup.sh prepares it).
# The Training and Evaluation views show two short runs (TTT-Linear and linear attention, 400 steps of
# the tiny preset) that the script first trains with `tttlab train` into build/docs-runs/: about four
# minutes on two cores, skipped when the runs are already there. Every panel screenshot is 1600 × 1000.
#
# Then one screenshot per lesson of lessons/, docked beside its view at 1280 × 720 (the smallest size
# the course is written for), into lessons/NN.png. Each is taken with a throw-away progress file in
# which the lesson's first prediction has been made, so that the view is revealed.
set -eu
tttlab=${1:-build/tttlab}
here=docs/screenshots
runs=build/docs-runs
if [ ! -x "$tttlab" ]; then
  echo "make.sh: $tttlab not found; build first (cmake --preset default && cmake --build --preset default)" >&2
  exit 2
fi
if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "make.sh: xvfb-run not found; install the xvfb package" >&2
  exit 2
fi

if [ "${ONLY:-}" != lessons ]; then
train() {  # NAME LAYER
  if [ -f "$runs/$1/latest" ]; then
    echo "run $runs/$1 exists: kept"
    return
  fi
  echo "training $runs/$1 ($2) ..."
  "$tttlab" train --preset tiny --layer "$2" --backbone m --steps 400 --batch 8 --seq-len 128 \
    --eval-every 25 --eval-windows 16 --threads 2 --out "$runs/$1" > "$runs/$1.log" 2>&1
}
mkdir -p "$runs"
train ttt-linear ttt-linear
train linear-attention linear-attention

for state in "$here"/states/*.tttlab; do
  name=$(basename "$state" .tttlab)
  xvfb-run -a -s "-screen 0 1600x1000x24" "$tttlab" gui --screenshot "$here/$name.png" --frames 8 \
    --state "$state" --size 1600x1000
done
fi

mkdir -p "$here/lessons"
progress=$(mktemp)
trap 'rm -f "$progress"' EXIT
for lesson in lessons/[0-9][0-9]-*.md; do
  name=$(basename "$lesson" .md)
  number=${name%%-*}
  # Every prediction of the lesson made ("predict-N" for one without an id), so that its view is
  # revealed: a prediction veils the view it asks about until it is locked in.
  preds=$(awk '/^```predict/{p=1;n++;id="predict-" n;next}
               p&&/^id:/{sub(/^id: */,"");id=$0;next}
               p&&/^```/{printf "%s\"%s\": {\"choice\": 0, \"value\": 0, \"committed_at\": \"2026-01-01T00:00:00Z\"}", (k++?", ":""), id; p=0}' "$lesson")
  printf '{"format": "tttlab-course-progress", "version": 1, "lessons": {"%s": {"finished": false, "predictions": {%s}}}}\n' \
    "$name" "$preds" > "$progress"
  TTTLAB_PROGRESS="$progress" xvfb-run -a -s "-screen 0 1280x720x24" "$tttlab" gui --screenshot "$here/lessons/$number.png" \
    --frames 8 --size 1280x720 --lesson "$number"
done
