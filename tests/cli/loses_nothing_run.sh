#!/bin/bash
# Run-directory promises of docs/SECURITY.md through the built tttlab, one case per call:
#   loses_nothing_run.sh TTTLAB WORKDIR CASE
# Each case makes its hostile folder, runs the command, and checks the exit status, the one-line
# message and that the user's files are unchanged. Exit 0: the promise holds.
set -u
EXE=$1 WORK=$2 CASE=$3
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
fail() { echo "FAIL $CASE: $*"; exit 1; }

# A small text to train on (no corpus needed): 40 KB of words, fixed.
corpus() { python3 -c 'import random; r = random.Random(5); w = "the cat sat on a mat and then ran off to see what it found".split(); print(" ".join(r.choice(w) for _ in range(8000)))' >"$1"; }
# train_args THREADS BATCH
train_args() { echo "--preset tiny --data $WORK/text.txt --steps 2 --batch $2 --seq-len 16 --threads $1 --eval-windows 1"; }

case $CASE in
  F01_train_into_your_folder)
    corpus "$WORK/text.txt"
    mkdir -p "$WORK/mine/step-00-notes" "$WORK/mine/step-by-step"
    echo "my notes" >"$WORK/mine/step-00-notes/a.txt"
    echo "my metrics" >"$WORK/mine/metrics.jsonl"
    # shellcheck disable=SC2046
    "$EXE" train $(train_args 1 2) --out "$WORK/mine" >"$WORK/out" 2>"$WORK/err"
    rc=$?
    [ $rc = 1 ] || fail "exit status $rc, expected 1 (a folder of the user's was accepted)"
    grep -q "not empty and holds no TTT Lab run" "$WORK/err" || fail "message: $(head -c 300 "$WORK/err")"
    [ "$(cat "$WORK/mine/metrics.jsonl")" = "my metrics" ] || fail "metrics.jsonl was changed"
    [ "$(cat "$WORK/mine/step-00-notes/a.txt")" = "my notes" ] || fail "step-00-notes was changed"
    [ -d "$WORK/mine/step-by-step" ] || fail "step-by-step was removed"
    [ "$(ls -A "$WORK/mine" | wc -l)" = 3 ] || fail "files were added: $(ls -A "$WORK/mine")"
    ;;
  F07_train_without_threads | F07_bench_without_threads)
    corpus "$WORK/text.txt"
    # An address space with room for the program and a few thread stacks (8 MiB each), not 64.
    if [ "$CASE" = F07_train_without_threads ]; then
      # shellcheck disable=SC2046
      cmd=("$EXE" train $(train_args 64 64) --out "$WORK/run")
    else
      cmd=("$EXE" bench --presets tiny --threads 64 --training-only)
    fi
    (ulimit -v 600000 && exec "${cmd[@]}") >"$WORK/out" 2>"$WORK/err"
    rc=$?
    grep -q "terminate called" "$WORK/err" && fail "the program aborted: $(head -c 300 "$WORK/err")"
    [ $rc = 1 ] || fail "exit status $rc, expected 1: $(head -c 300 "$WORK/err")"
    # Which comes first under the limit, a thread that cannot start, a started one that cannot
    # allocate, or the main thread's own allocation once the threads hold the room, depends on
    # timing: each is refused with its own plain message.
    grep -Eq "cannot start worker thread [0-9]+ of 64|worker thread [0-9]+ of 64 ran out of memory|error: out of memory \(the process is at its limit of memory" "$WORK/err" ||
      fail "message: $(head -c 300 "$WORK/err")"
    ;;
  *) fail "unknown case" ;;
esac
echo "ok $CASE: $(head -c 200 "$WORK/err" | head -1)"
