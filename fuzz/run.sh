#!/usr/bin/env bash
# fuzz/run.sh — build the libFuzzer targets of fuzz/ and run each of them, under AddressSanitizer and
# UBSan, on its seed corpus (fuzz/corpus/<target>/) plus what earlier runs found (build-fuzz/corpus/).
#
#   bash fuzz/run.sh                       every target for 20 s (what scripts/test.sh runs in CI)
#   bash fuzz/run.sh --long [SECONDS]      every target for SECONDS (default 3600): the long run
#   bash fuzz/run.sh --time 60 fuzz_lesson one target, 60 s
#   bash fuzz/run.sh --no-build --build-dir build-asan
#                                          the fuzzers the `asan` preset built beside the tests (CI)
#   options: --runs N (stop each target after N inputs, or at its time limit, whichever comes first),
#            --jobs N (targets at a time, default 1), --no-build (use the fuzzers already built),
#            --build-dir DIR (where they are, default build-fuzz/; findings and corpora go there too)
#
# Each target runs with a per-input time limit (-timeout=10 s: slower is a hang) and a memory limit
# (-rss_limit_mb=2048, also the limit of any single allocation): both count as findings, like a crash
# or a sanitizer report. A finding is written to build-fuzz/findings/<target>/ (crash-*, timeout-*,
# oom-*, leak-*); replay it with `build-fuzz/<target> FILE`. To keep it as a regression, fix the cause,
# copy the file into fuzz/corpus/<target>/ and add a test that feeds it to the same entry point.
#
# The closing table gives per target: the result, the inputs executed (libFuzzer's
# stat::number_of_executed_units), the seconds, the executions per second and the findings. The exit
# status is 0 only when every target ran its time with no finding; a missing clang or libFuzzer is a
# failure with a message saying what to install.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1

TARGETS_ALL=(fuzz_safetensors fuzz_model_config fuzz_train_config fuzz_train_state fuzz_state_file
  fuzz_lesson fuzz_text_file fuzz_run_dir fuzz_lesson_pack)
seconds=20
parallel=1
runs=-1
build=1
build_dir=build-fuzz
targets=()
while (($#)); do
  case $1 in
    --long)
      seconds=3600
      if [[ ${2:-} =~ ^[0-9]+$ ]]; then seconds=$2; shift; fi ;;
    --time) seconds=${2:?--time needs seconds}; shift ;;
    --jobs) parallel=${2:?--jobs needs a number}; shift ;;
    --runs) runs=${2:?--runs needs a number}; shift ;;
    --no-build) build=0 ;;
    --build-dir) build_dir=${2:?--build-dir needs a folder}; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    fuzz_*) targets+=("$1") ;;
    *) echo "fuzz/run.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
((${#targets[@]})) || targets=("${TARGETS_ALL[@]}")
[[ $seconds =~ ^[1-9][0-9]*$ ]] || { echo "fuzz/run.sh: seconds must be a positive integer" >&2; exit 2; }

BUILD=${build_dir%/}
((build == 0)) || [[ $BUILD == build-fuzz ]] ||
  { echo "fuzz/run.sh: --build-dir takes the fuzzers another preset built: use it with --no-build" >&2; exit 2; }
fail() {
  printf 'fuzz: FAILED: %s\n' "$*" >&2
  exit 1
}

# ---- the tools: clang with libFuzzer's runtime (Debian: clang, libclang-rt-dev) ----------------------
if ((build)); then
  command -v clang++ >/dev/null 2>&1 ||
    fail "clang++ not found: the fuzzers need clang with libFuzzer (Debian: apt-get install clang libclang-rt-dev; scripts/setup.sh installs both)"
  probe_dir=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$probe_dir/probe.cpp"
  if ! clang++ -fsanitize=fuzzer,address,undefined "$probe_dir/probe.cpp" -o "$probe_dir/probe" \
    >"$probe_dir/log" 2>&1; then
    cat "$probe_dir/log" >&2
    rm -rf "$probe_dir"
    fail "clang++ cannot link a libFuzzer target: libFuzzer's runtime is missing (Debian: apt-get install libclang-rt-dev, the runtime of the default clang)"
  fi
  rm -rf "$probe_dir"

  printf '==> building the fuzzers (cmake --preset fuzz, %s/)\n' "$BUILD"
  t0=$SECONDS
  mkdir -p "$BUILD"
  cmake --preset fuzz >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; fail "cmake --preset fuzz failed"; }
  cmake --build --preset fuzz || fail "building the fuzzers failed"
  printf '==> built in %ds\n' $((SECONDS - t0))
fi
for t in "${targets[@]}"; do
  [[ -x $BUILD/$t ]] ||
    fail "$BUILD/$t is not built (unknown target, run without --no-build, or a build without TTTLAB_BUILD_FUZZERS)"
done

# Sanitizers: stop at the first report; leaks count. libFuzzer turns each into a finding.
export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"

mkdir -p "$BUILD/fuzz-logs"
# run_target NAME: one fuzzing session; its log is $BUILD/fuzz-logs/NAME.log.
run_target() {
  local t=$1 work="$BUILD/corpus/$1" found="$BUILD/findings/$1/" dict=()
  mkdir -p "$work" "$found"
  [[ -f fuzz/dict/$t.dict ]] && dict=(-dict="fuzz/dict/$t.dict")
  # The first corpus folder receives what this run finds; the seeds (second) are only read.
  "$BUILD/$t" -max_total_time="$seconds" -runs="$runs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$found" "${dict[@]}" "$work" "fuzz/corpus/$t" >"$BUILD/fuzz-logs/$t.log" 2>&1
  echo $? >"$BUILD/fuzz-logs/$t.rc"
}

printf '==> fuzzing %d target(s), %ds each, %d at a time (logs: %s/fuzz-logs/)\n' \
  "${#targets[@]}" "$seconds" "$parallel" "$BUILD"
for t in "${targets[@]}"; do
  rm -f "$BUILD/findings/$t/"* "$BUILD/fuzz-logs/$t.rc" 2>/dev/null
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n; done
  printf '    %s ...\n' "$t"
  run_target "$t" &
done
wait

# ---- the table ---------------------------------------------------------------------------------------
failures=0
total_execs=0
printf '\n  %-18s %-7s %12s %7s %9s  %s\n' target result executions seconds "exec/s" findings
for t in "${targets[@]}"; do
  log="$BUILD/fuzz-logs/$t.log"
  rc=$(cat "$BUILD/fuzz-logs/$t.rc" 2>/dev/null || echo 1)
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
  secs=$(sed -n 's/.*Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log" | tail -n1)
  mapfile -t artifacts < <(find "$BUILD/findings/$t" -type f 2>/dev/null | sort)
  if [[ $rc == 0 && ${#artifacts[@]} == 0 ]]; then
    result=ok
    findings=0
  else
    result=FAIL
    failures=$((failures + 1))
    findings="${#artifacts[@]}: ${artifacts[*]:-none written; see $log}"
    # The sanitizer's or libFuzzer's own words: the first lines of the report.
    grep -m3 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error:|fuzz invariant broken|uncaught exception|terminate called' \
      "$log" | sed "s/^/      $t: /" >&2
  fi
  total_execs=$((total_execs + ${execs:-0}))
  rate=-
  [[ -n ${secs:-} && ${secs:-0} -gt 0 && -n ${execs:-} ]] && rate=$((execs / secs))
  printf '  %-18s %-7s %12s %7s %9s  %s\n' "$t" "$result" "${execs:-?}" "${secs:-?}" "$rate" "$findings"
done
printf '  total: %d executions, %d target(s) with findings\n' "$total_execs" "$failures"
((failures == 0))
