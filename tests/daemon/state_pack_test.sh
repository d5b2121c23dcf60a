#!/usr/bin/env bash
# scripts/akad-state-pack with a real akad: refused while the daemon holds its state dir; after
# its stop, the database, snapshots, task definitions and held-out choices go into the pack and
# the trusted builds do not; unpacking refuses an existing dir, and an akad started on the unpacked one has the
# run submitted to the first. (That such a run is scored to its end there, as after a restart,
# was checked by hand on the CPU suite: docs/operations.md.)
# Touches only its own temp dir, cgroup parent and daemons (by pid).
set -euo pipefail
akad=$1 akactl=$2 pack=$3
tmp=$(mktemp -d /tmp/akad-state-pack-test.XXXXXX)
parent=akad-statepack-$$
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do while kill -0 "$p" 2>/dev/null; do sleep 0.1; done; done
  rm -rf "$tmp"
  for d in /sys/fs/cgroup/$parent /sys/fs/cgroup/*/$parent; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
  true
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
start() {  # state dir, socket
  "$akad" --socket "$2" --state-dir "$1" --cgroup-parent "$parent" --workers 1 >"$1.log" 2>&1 </dev/null &
  pids+=($!)
  for _ in $(seq 100); do "$akactl" --socket "$2" ping >/dev/null 2>&1 && return 0; sleep 0.1; done
  cat "$1.log" >&2
  fail "akad did not answer on $2"
}

start "$tmp/state" "$tmp/a.sock"
run=$("$akactl" --socket "$tmp/a.sock" --json submit cpu/softmax --agent noop | python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["id"])')
# What a scored task version leaves: its definition and its trusted build.
mkdir -p "$tmp/state/tasks/feedface/def" "$tmp/state/tasks/feedface/trusted"
echo def >"$tmp/state/tasks/feedface/def/task.yaml"
echo built >"$tmp/state/tasks/feedface/trusted/runner"
echo '{"kept": ["held-out-0"]}' >"$tmp/state/tasks/feedface/aka-held-out-kept.json"  # an AKA task's choice
# The attempt's snapshot made (its scoring under way or done) before the stop.
stage() {
  "$akactl" --socket "$tmp/a.sock" --json status "$run" |
    python3 -c 'import json,sys; a=json.load(sys.stdin)["attempts"][0]; print(a["state"] if a["state"] != "running" else a.get("stage") or "")'
}
for _ in $(seq 600); do
  case $(stage) in score* | scored) break ;; esac
  sleep 0.1
done
case $(stage) in score* | scored) ;; *) "$akactl" --socket "$tmp/a.sock" --json status "$run" >&2; fail "the attempt made no snapshot within 60 s (stage $(stage))" ;; esac
if bash "$pack" pack "$tmp/state" "$tmp/p.tar.xz" 2>"$tmp/err"; then fail "packed a state dir an akad was using"; fi
grep -q 'still using' "$tmp/err" || fail "no reason given: $(cat "$tmp/err")"
kill -TERM "${pids[0]}"
while kill -0 "${pids[0]}" 2>/dev/null; do sleep 0.1; done

bash "$pack" pack "$tmp/state" "$tmp/p.tar.xz" >/dev/null
list=$(tar tJf "$tmp/p.tar.xz")
grep -qx 'akad.db' <<<"$list" || fail "no akad.db in the pack"
grep -qx 'audit.log' <<<"$list" || fail "no audit.log in the pack"
grep -q '^snapshots/sha256/.*\.tar\.zst$' <<<"$list" || fail "the attempt's snapshot is not in the pack"
grep -qx 'tasks/feedface/def/task.yaml' <<<"$list" || fail "no task definition in the pack"
grep -qx 'tasks/feedface/aka-held-out-kept.json' <<<"$list" || fail "the held-out choice is not in the pack"
if grep -q 'trusted' <<<"$list"; then fail "a trusted build went into the pack"; fi

if bash "$pack" unpack "$tmp/p.tar.xz" "$tmp/state" 2>/dev/null; then fail "unpacked over an existing state dir"; fi
bash "$pack" unpack "$tmp/p.tar.xz" "$tmp/moved" >/dev/null
[[ $(stat -c %a "$tmp/moved") == 700 ]] || fail "the unpacked state dir is not akad's alone"
[[ -f $tmp/moved/tasks/feedface/def/task.yaml ]] || fail "the task definition was not unpacked"
start "$tmp/moved" "$tmp/b.sock"
attempts=$("$akactl" --socket "$tmp/b.sock" --json status "$run" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["attempts"]))') ||
  fail "the moved daemon does not know run $run"
[[ $attempts == 1 ]] || fail "run $run has $attempts attempts after the move"
echo "ok"
