#!/usr/bin/env bash
# Ctrl-C during `tttlab train` saves a checkpoint and exits 0; `--resume` then continues the same loss
# curve exactly: every step's loss in metrics.jsonl equals that of an uninterrupted run.
#   test_interrupt_resume.sh <tttlab executable>
set -euo pipefail
exe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A small text, so that the test needs no prepared corpus.
for i in $(seq 1 400); do echo "the cat sat on the mat $i times, and the dog ran after it."; done >"$work/text.txt"
args=(train --data "$work/text.txt" --hidden-size 32 --heads 2 --layers 2 --intermediate-size 64 -b 8
      --seq-len 32 --batch 4 --steps 60 --lr 1e-2 --threads 2 --eval-windows 2 --seed 3)

"$exe" "${args[@]}" --out "$work/straight" >/dev/null

# Interrupt once some steps are done (a fixed delay would be flaky on a loaded machine).
"$exe" "${args[@]}" --out "$work/cut" >"$work/cut.log" 2>&1 &
pid=$!
for _ in $(seq 1 400); do
  n=$(grep -c '"loss"' "$work/cut/metrics.jsonl" 2>/dev/null || true)
  [[ "${n:-0}" -ge 5 ]] && break
  sleep 0.05
done
kill -INT "$pid"
rc=0
wait "$pid" || rc=$?
if [[ $rc -ne 0 ]]; then echo "interrupted run exited $rc"; cat "$work/cut.log"; exit 1; fi
grep -q "interrupted at step" "$work/cut.log" || { echo "no interruption message"; cat "$work/cut.log"; exit 1; }
[[ -f "$work/cut/latest" ]] || { echo "no checkpoint after Ctrl-C"; exit 1; }
stopped=$(grep -o 'interrupted at step [0-9]*' "$work/cut.log" | grep -o '[0-9]*$')
if [[ "$stopped" -ge 60 ]]; then echo "the run finished before the interrupt; test inconclusive"; exit 1; fi

"$exe" train --resume "$work/cut" >/dev/null

losses() { grep '"loss"' "$1" | sed -E 's/^\{"step":([0-9]+),"loss":([^,]*),.*/\1 \2/' | sort -n; }
if ! diff <(losses "$work/straight/metrics.jsonl") <(losses "$work/cut/metrics.jsonl"); then
  echo "FAIL: the resumed loss curve differs from the uninterrupted one (stopped at step $stopped)"
  exit 1
fi
echo "ok: interrupted at step $stopped, resumed, and all 60 step losses match the uninterrupted run"
