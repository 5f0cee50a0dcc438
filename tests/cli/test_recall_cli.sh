#!/usr/bin/env bash
# `tttlab recall` as a researcher runs it: the CSV has a row per member and P with the accuracy's mean
# and sd over the seeds and the state size; --json gives the same numbers; --seed is one seed; bad
# widths, pairs and member ids are refused with exit status 2 and a line naming the accepted values.
#   test_recall_cli.sh <tttlab executable>
set -euo pipefail
exe=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

"$exe" recall --width 16 --pairs 4,32 --sequences 3 --seeds 0,1 >"$work/t.csv" 2>"$work/err.log" ||
  { echo "FAIL: recall exited $?"; cat "$work/err.log"; exit 1; }
head -1 "$work/t.csv" | grep -q '^member,width,pairs,seeds,sequences,accuracy_mean,accuracy_sd,state_size,weight_size$' ||
  { echo "FAIL: CSV header"; head -2 "$work/t.csv"; exit 1; }
rows=$(($(wc -l <"$work/t.csv") - 1))
[[ $rows -eq 18 ]] || { echo "FAIL: expected 9 members x 2 P = 18 rows, got $rows"; cat "$work/t.csv"; exit 1; }
for id in ttt_linear ttt_mlp linear_attention softmax_attention mamba2 deltanet gated_deltanet titans lact; do
  grep -q "^$id,16,4,2,3," "$work/t.csv" || { echo "FAIL: no row for $id"; cat "$work/t.csv"; exit 1; }
done
# Softmax attention recalls 4 pairs in every episode; its state is 2Pd; TTT-Linear's is d².
grep -q '^softmax_attention,16,4,2,3,1.000000,0.000000,128,128$' "$work/t.csv" ||
  { echo "FAIL: softmax attention's row"; grep softmax "$work/t.csv"; exit 1; }
grep -q '^ttt_linear,16,32,2,3,[0-9.]*,[0-9.]*,256,256$' "$work/t.csv" || { echo "FAIL: TTT-Linear's state"; exit 1; }
# Titans: 8d² weights, as much momentum, and the mini-batch's start.
grep -q '^titans,16,32,2,3,[0-9.]*,[0-9.]*,6144,2048$' "$work/t.csv" || { echo "FAIL: Titans' state"; grep titans "$work/t.csv"; exit 1; }

"$exe" recall --width 16 --pairs 4,32 --sequences 3 --seeds 0,1 --members deltanet,lact --json >"$work/t.json" 2>/dev/null ||
  { echo "FAIL: recall --json exited $?"; exit 1; }
python3 - "$work/t.json" "$work/t.csv" <<'PY'
import json, sys, csv
j = json.load(open(sys.argv[1]))
assert [m["id"] for m in j["members"]] == ["deltanet", "lact"], j["members"]
rows = {(r["member"], int(r["pairs"])): r for r in csv.DictReader(open(sys.argv[2]))}
for m in j["members"]:
    for k, P in enumerate(j["pairs"]):
        r = rows[(m["id"], P)]
        assert abs(m["accuracy_mean"][k] - float(r["accuracy_mean"])) < 1e-6, (m["id"], P)
        assert m["state_size"][k] == int(r["state_size"])
        assert len(m["accuracy_per_seed"][k]) == 2
PY

"$exe" recall --width 16 --pairs 8 --sequences 2 --seed 5 --members mamba2 >"$work/one.csv" 2>/dev/null
grep -q '^mamba2,16,8,1,2,[0-9.]*,0.000000,256,256$' "$work/one.csv" || { echo "FAIL: --seed"; cat "$work/one.csv"; exit 1; }

refuse() {
  local want=$1; shift
  local rc=0
  "$exe" recall "$@" >/dev/null 2>"$work/bad.log" || rc=$?
  [[ $rc -eq 2 ]] || { echo "FAIL: recall $* exited $rc, not 2"; cat "$work/bad.log"; exit 1; }
  grep -q -- "$want" "$work/bad.log" || { echo "FAIL: recall $*: no '$want' in"; cat "$work/bad.log"; exit 1; }
}
refuse "unknown member 'lstm' (expected ttt_linear,ttt_mlp,linear_attention,softmax_attention,mamba2,deltanet,gated_deltanet,titans,lact)" --members lstm
refuse "width must be in \[4, 128\]" --width 2
refuse "must increase" --pairs 8,4
refuse "in \[1, 160\]" --pairs 200
echo "recall CLI: ok"
