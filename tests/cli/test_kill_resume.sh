#!/usr/bin/env bash
# SIGKILL at random moments of a short training run that saves a checkpoint after every step, 24
# times, each followed by `--resume` (the first kills land while the run starts and writes its first
# checkpoint; a kill before its first checkpoint leaves a run that resumes from step 0). Every kill must leave a run that resumes, and the finished run must equal an
# uninterrupted one bit for bit: the final model.safetensors and every step's loss.
#   test_kill_resume.sh <tttlab executable>
# The kill delays come from a printed seed (TTTLAB_TEST_SEED=N to repeat one).
set -euo pipefail
exe=$1
seed=${TTTLAB_TEST_SEED:-20261125}
RANDOM=$seed
echo "kill delays from seed $seed (TTTLAB_TEST_SEED=$seed to repeat)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for i in $(seq 1 300); do echo "the cat sat on the mat $i times, and the dog ran after it."; done >"$work/text.txt"
steps=200
args=(--data "$work/text.txt" --hidden-size 16 --heads 2 --layers 1 --intermediate-size 32 -b 4
      --seq-len 16 --batch 2 --steps $steps --lr 1e-2 --threads 2 --eval-windows 1 --checkpoint-every 1 --seed 3)

start_ms=$(date +%s%3N)
"$exe" train "${args[@]}" --out "$work/straight" >/dev/null
straight_ms=$(($(date +%s%3N) - start_ms))
# Each kill lands within a twentieth of a whole run's time after the (re)start, so that the kills
# fall at start-up, inside steps and inside saves, and 24 of them leave the run unfinished.
max_ms=$((straight_ms / 20))
((max_ms < 20)) && max_ms=20
((max_ms > 999)) && max_ms=999
echo "uninterrupted run: ${straight_ms} ms for $steps steps; kills within ${max_ms} ms of each start"

kills=0
restarts=0
final=step-$(printf '%07d' $steps)
while ((kills < 24)); do
  delay_ms=$((RANDOM % max_ms))
  ((kills < 3)) && delay_ms=$((RANDOM % 30))  # the first kills: at start-up and in the first save
  # A kill before anything was written leaves no run to resume: start it afresh then.
  if [[ -f "$work/cut/train_config.json" ]]; then
    "$exe" train --resume "$work/cut" >"$work/log" 2>&1 &
  else
    "$exe" train "${args[@]}" --out "$work/cut" >"$work/log" 2>&1 &
  fi
  pid=$!
  sleep "$(printf '0.%03d' "$delay_ms")"
  kill -KILL "$pid" 2>/dev/null || true
  rc=0
  wait "$pid" 2>/dev/null || rc=$?
  if ((rc == 137)); then
    kills=$((kills + 1))
  elif ((rc != 0)); then
    echo "FAIL: after $kills kills, the run exited $rc instead of resuming:"
    cat "$work/log"
    exit 1
  elif [[ -f "$work/cut/latest" && "$(cat "$work/cut/latest")" == "$final" ]]; then
    # The uninterrupted run's time sets the kill window, and on a busy machine (ctest -j) it can be
    # slower than the restarts that follow, which then finish the run before 24 kills. Every kill so
    # far resumed; start a new run with half the window, at most 3 times, rather than fail on timing.
    if ((restarts == 3 || max_ms == 20)); then
      echo "FAIL (inconclusive): the run finished after only $kills kills, $restarts times with ever shorter windows"
      exit 1
    fi
    restarts=$((restarts + 1))
    max_ms=$((max_ms / 2))
    ((max_ms < 20)) && max_ms=20
    echo "the run finished after $kills kills (each resumed): run $((restarts + 1)) kills within ${max_ms} ms"
    rm -rf "$work/cut"
    kills=0
  fi
done
last=$(cat "$work/cut/latest" 2>/dev/null || echo "none")
echo "$kills kills; the run's latest checkpoint after them: $last"

# Finish the run.
if [[ -f "$work/cut/train_config.json" ]]; then
  "$exe" train --resume "$work/cut" >"$work/log" 2>&1 || { echo "FAIL: the last resume failed:"; cat "$work/log"; exit 1; }
else
  "$exe" train "${args[@]}" --out "$work/cut" >"$work/log" 2>&1
fi

if ! cmp -s "$work/straight/$final/model.safetensors" "$work/cut/$final/model.safetensors"; then
  echo "FAIL: after $kills kills and resumes, the final model differs from the uninterrupted run's"
  exit 1
fi
losses() { grep '"loss"' "$1" | grep -v '"skipped":true' | sed -E 's/^\{"step":([0-9]+),"loss":([^,]*),.*/\1 \2/'; }
if ! diff <(losses "$work/straight/metrics.jsonl") <(losses "$work/cut/metrics.jsonl"); then
  echo "FAIL: the step records differ from the uninterrupted run's (each step once, same loss)"
  exit 1
fi
echo "ok: $kills SIGKILLs, each followed by a resume; the final model and all $steps step losses equal the uninterrupted run's"
