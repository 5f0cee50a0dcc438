#!/usr/bin/env bash
# The teacher's round trip on the command line: `tttlab lessons pack` makes a student pack and the
# course key; `lessons list --dir PACK` reads the pack; two students' progress is exported from it
# (`lessons export`) and aggregated (`lessons progress --csv`); a file edited by hand (a "right" made
# up) is flagged TAMPERED; bad input (not JSON, a huge file, another format) gets a clear message.
#   test_course_pack.sh <tttlab executable> <lessons folder>
set -euo pipefail
exe=$1
lessons=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
count=$(find "$lessons" -maxdepth 1 -name '[0-9][0-9]-*.md' | wc -l)  # the lessons of the course

"$exe" lessons pack --student "$work/pack" --teacher "$work/course.key" --lessons "$lessons" >"$work/out.txt"
grep -q "packed $count lessons" "$work/out.txt" || fail "pack: $(cat "$work/out.txt")"
[[ $(stat -c %a "$work/course.key") == 600 ]] || fail "the course key is not mode 0600"
# The key is never overwritten, and a pack never lands in a folder that holds something.
if "$exe" lessons pack --student "$work/pack2" --teacher "$work/course.key" --lessons "$lessons" 2>"$work/err.txt"; then
  fail "an existing key file was accepted"
fi
grep -q "never overwritten" "$work/err.txt" || fail "no reason given: $(cat "$work/err.txt")"
[[ ! -e "$work/pack2" ]] || fail "a refused pack left a folder"
if "$exe" lessons pack --student "$work/pack" --key "$work/course.key" --lessons "$lessons" 2>"$work/err.txt"; then
  fail "packed into a folder that is not empty"
fi
grep -q "not an empty folder" "$work/err.txt" || fail "no reason given: $(cat "$work/err.txt")"
# Re-packing with --key gives the same course.
"$exe" lessons pack --student "$work/pack-again" --key "$work/course.key" --lessons "$lessons" >"$work/out2.txt"
[[ $(grep -o 'course [0-9a-f]\{32\}' "$work/out.txt") == $(grep -o 'course [0-9a-f]\{32\}' "$work/out2.txt") ]] ||
  fail "re-packing with --key changed the course id"

"$exe" lessons --dir "$work/pack" list >"$work/list.txt" || fail "lessons list cannot read the pack"
grep -q "^$count lessons" "$work/list.txt" || fail "lessons list: $(tail -1 "$work/list.txt")"

# Two students' progress, exported from the pack.
cat >"$work/ada-progress.json" <<'JSON'
{"format": "tttlab-course-progress", "version": 1, "lessons": {"01-one-step-per-token": {"finished": true,
 "predictions": {"gap": {"choice": 0, "value": 0, "revealed": true, "right": false, "measured": 0.1,
   "retries": [{"choice": 1, "value": 0, "right": true, "at": "2026-11-28T10:05:00Z"}]}},
 "exercises": {"rank": {"answer": "32", "right": true, "attempts": 1, "first_right": true}}}}}
JSON
cat >"$work/bo-progress.json" <<'JSON'
{"format": "tttlab-course-progress", "version": 1, "lessons": {"01-one-step-per-token": {"finished": false,
 "predictions": {"gap": {"choice": 1, "value": 0, "revealed": true, "right": true, "measured": 0.1}}}}}
JSON
"$exe" lessons --dir "$work/pack" export --student "Ada" --progress "$work/ada-progress.json" --out "$work/ada.json" >/dev/null
"$exe" lessons --dir "$work/pack" export --student "Bo" --progress "$work/bo-progress.json" --out "$work/bo.json" >/dev/null
"$exe" lessons progress "$work/ada.json" "$work/bo.json" --key "$work/course.key" --csv "$work/class.csv" >/dev/null
head -1 "$work/class.csv" | grep -q '^student,file,status,finished,01-one-step-per-token/gap,01-one-step-per-token/gap retries,01-one-step-per-token/rank,01-one-step-per-token/rank attempts$' ||
  fail "CSV header: $(head -1 "$work/class.csv")"
grep -q "^Ada,[^,]*,ok,1,wrong,1,right,1$" "$work/class.csv" || fail "Ada's row: $(cat "$work/class.csv")"
grep -q "^Bo,[^,]*,ok,0,right,0,,$" "$work/class.csv" || fail "Bo's row: $(cat "$work/class.csv")"

# Ada turns her wrong first answer into a right one by hand.
sed -i '0,/"right": false/s//"right": true/' "$work/ada.json"
"$exe" lessons progress "$work/ada.json" "$work/bo.json" --key "$work/course.key" >"$work/table.txt" 2>"$work/err.txt"
grep -q "^Ada  *TAMPERED" "$work/table.txt" || fail "the edited file is not flagged: $(cat "$work/table.txt")"
grep -q "^Bo  *ok" "$work/table.txt" || fail "Bo's row: $(cat "$work/table.txt")"
grep -q "changed after it was exported" "$work/err.txt" || fail "no reason for TAMPERED: $(cat "$work/err.txt")"

# Exported without a pack: unkeyed. Another course's key: wrong course.
"$exe" lessons --dir "$lessons" export --student "Cy" --progress "$work/bo-progress.json" --out "$work/cy.json" >/dev/null
"$exe" lessons progress "$work/cy.json" --key "$work/course.key" | grep -q "^Cy  *unkeyed" || fail "unkeyed not shown"
"$exe" lessons pack --student "$work/other" --teacher "$work/other.key" --lessons "$lessons" >/dev/null
"$exe" lessons progress "$work/bo.json" --key "$work/other.key" 2>/dev/null | grep -q "^Bo  *wrong course" ||
  fail "wrong course not shown"

# Bad input: named, exit 1, the readable files still counted.
echo "this is not json" >"$work/not.json"
head -c 5000000 /dev/zero | tr '\0' ' ' >"$work/huge.json"
echo '{"format": "tttlab-course-progress", "version": 1}' >"$work/other-format.json"
if "$exe" lessons progress "$work/bo.json" "$work/not.json" "$work/huge.json" "$work/other-format.json" \
     --key "$work/course.key" >"$work/table.txt" 2>"$work/err.txt"; then
  fail "bad files did not fail the command"
fi
grep -q "not.json: not JSON" "$work/err.txt" || fail "not JSON: $(cat "$work/err.txt")"
grep -q "huge.json: .*more than the limit" "$work/err.txt" || fail "huge: $(cat "$work/err.txt")"
grep -q "other-format.json: not a progress export" "$work/err.txt" || fail "format: $(cat "$work/err.txt")"
grep -q "^Bo  *ok" "$work/table.txt" || fail "the good file was not counted: $(cat "$work/table.txt")"
echo "ok: pack, list, export, aggregate, tamper and bad input behave"
