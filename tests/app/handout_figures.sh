#!/bin/sh
# The handout_figures test (ctest label "gui"): `tttlab lessons handout --figures` on a one-lesson course
# whose own view a prediction asks about and whose second view none does. Under a virtual X server:
# the student's copy has the picture of the open view only, and says the other one is in the app after
# the prediction; the teacher's copy has both; the pictures are real PNGs of the app's window (not
# blank, not alike). Without a display the command refuses with a message naming xvfb-run and writes
# nothing.
#   usage: handout_figures.sh TTTLAB PNG_CHECK SOURCE_DIR OUTDIR
# Exit 77 (ctest: skipped) with a visible message when xvfb-run is not installed.
set -u
tttlab=$1
check=$2
src=$3
out=$4

if ! command -v xvfb-run >/dev/null 2>&1; then
  echo "SKIPPED: xvfb-run not found; install the xvfb package to run the handout figures test"
  exit 77
fi
fail() {
  echo "FAIL: $*"
  exit 1
}
rm -rf "$out"
mkdir -p "$out/course" || exit 1
cp "$src/lessons/01-one-step-per-token.tttlab" "$src/lessons/01-one-step-per-token-b16.tttlab" "$out/course/" || exit 1
cat > "$out/course/01-figures.md" <<'LESSON'
---
title: Figures
goal: Two views, one of them sealed by a prediction.
duration: 5
scene: 01-one-step-per-token.tttlab
---
# 1. Figures

The first view.

```predict
id: rank
ask: How many directions does the change use?
measure: final_rank
choice: Few. | < 16
choice: Many. | >= 16
```

The second view, which no prediction asks about.

```experiment
id: wide
scene: 01-one-step-per-token-b16.tttlab
```

After the second view.

```check
claim: The change uses at least one direction.
measure: final_rank
expect: >= 1
```
LESSON

handout() {  # handout OUTDIR [--with-answers]: judged by what it writes (xvfb-run's own status can fail)
  dir=$1
  shift
  xvfb-run -a -s "-screen 0 1280x800x24" "$tttlab" lessons --dir "$out/course" handout 01 --out "$dir" --figures "$@"
}
# The width and height a PNG's header states.
png_size() {
  od -An -tu1 -j16 -N8 "$1" | awk '{ printf "%dx%d", (($1*256+$2)*256+$3)*256+$4, (($5*256+$6)*256+$7)*256+$8 }'
}

handout "$out/student"
page="$out/student/01-figures.html"
[ -s "$page" ] || fail "the student's page was not written"
[ "$(ls "$out/student/figures")" = "01-one-step-per-token-b16.png" ] ||
  fail "the student's figures are not just the open view: $(ls "$out/student/figures" | tr '\n' ' ')"
grep -q '<img src="figures/01-one-step-per-token-b16.png"' "$page" || fail "the student's page does not show the open view"
grep -q 'Figure in the app after your prediction: the lesson' "$page" || fail "the student's page does not say where the sealed view is"
grep -q 'figures/01-one-step-per-token.png' "$page" && fail "the student's page shows the sealed view"
ls -a "$out/student" | grep -q '^\.figures' && fail "the student's folder keeps the renderer's scratch folder"

handout "$out/teacher" --with-answers
page="$out/teacher/01-figures-answers.html"
[ -s "$page" ] || fail "the teacher's page was not written"
for f in 01-one-step-per-token 01-one-step-per-token-b16; do
  grep -q "<img src=\"figures/$f.png\"" "$page" || fail "the teacher's page does not show $f"
  png="$out/teacher/figures/$f.png"
  [ "$(png_size "$png")" = "1280x720" ] || fail "$png is not a 1280x720 PNG: $(png_size "$png")"
done
"$check" "$out/teacher/figures/01-one-step-per-token.png" "$out/teacher/figures/01-one-step-per-token-b16.png" ||
  fail "the figures are blank or alike"

# No display: refused before anything is written, with the way out in the message.
env -u DISPLAY -u WAYLAND_DISPLAY -u TTTLAB_GL "$tttlab" lessons --dir "$out/course" handout 01 --out "$out/none" \
  --figures --with-answers 2> "$out/none.err"
rc=$?
[ "$rc" -eq 1 ] || fail "without a display the command exited $rc, not 1"
grep -q 'xvfb-run' "$out/none.err" || fail "without a display the message does not name xvfb-run: $(cat "$out/none.err")"
[ -e "$out/none" ] && fail "without a display the command still wrote $out/none"
echo "handout figures: ok"
exit 0
