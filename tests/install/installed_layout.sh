#!/usr/bin/env bash
# The installed layout, as `cmake --install` makes it (into a DESTDIR of this test's own):
# the programs in the prefix's bin, the data (tasks with their solutions and held-out
# configurations) in AKAD_INSTALL_DATADIR and nowhere under /usr; an installed akad that takes
# its defaults from the install, finds akabox and akacheck beside itself, and scores an attempt
# whose agent looks everywhere it can for the solution and the held-out configurations.
#
#   installed_layout.sh BUILD_DIR CMAKE INSTALL_DATADIR
set -euo pipefail
build=$1 cmake=$2 datadir=$3
unset AKABOX AKAD_DATA_DIR AKAD_SOCKET

tmp=$(mktemp -d /tmp/akad-install-XXXXXX)
parent=akad-install-$$
daemon=""
cleanup() {
  if [[ -n $daemon ]]; then kill -TERM "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
  rm -rf "$tmp"
  for c in /sys/fs/cgroup/$parent /sys/fs/cgroup/*/$parent; do [[ -d $c ]] && rmdir "$c" 2>/dev/null || true; done
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

DESTDIR=$tmp/root "$cmake" --install "$build" --prefix /usr/local >"$tmp/install.log"
bin=$tmp/root/usr/local/bin
data=$tmp/root$datadir
for p in akad akactl akabox akacheck; do [[ -x $bin/$p ]] || fail "$p is not installed in bin"; done
[[ -f $data/tasks/cpu/reduction/solution/kernel.cpp ]] || fail "the tasks are not installed in $datadir"
[[ -f $data/policies/default.json && -d $data/images/agents ]] || fail "policies or images are not installed"
[[ -f $tmp/root/usr/local/lib/systemd/system/akad.service ]] || fail "the systemd unit is not installed"
# The agent-cli image's profile, never the npm prefix a source tree may hold (800 MB; an
# installed akad gets its own with scripts/install-agent-clis --prefix).
[[ -f $data/images/agent-cli/image.yaml ]] || fail "the agent-cli image is not installed"
[[ ! -e $data/images/agent-cli/prefix ]] || fail "the source tree's agent CLIs were installed with the data"
# Nothing of the tasks under /usr, which every sandbox sees read-only.
[[ -z $(find "$tmp/root/usr" -name task.yaml -o -name solution -o -name 'reference.cpp' | head -1) ]] ||
  fail "task files were installed under /usr"
grep -rqs h-1x4000037 "$tmp/root/usr" && fail "a held-out configuration was installed under /usr"

# An installed akad takes its data from the install, not from the source tree it was built in.
# The help is read whole first: `grep -q` on a pipe stops reading at its match, and akad, still
# writing, would die of SIGPIPE, which pipefail reports as a failure.
help=$("$bin/akad" --help)
grep -q -- "--tasks-dir TEXT=$datadir/tasks" <<<"$help" ||
  fail "the installed akad's default tasks dir is not $datadir/tasks: $(grep -- --tasks-dir <<<"$help")"

# A run on the installed akad (its data from the DESTDIR copy; timing shortened to the fewest
# calls a task may ask for, 5 x 1 after one warm-up: the test looks at no figure).
cp -r "$data/tasks" "$tmp/tasks"
sed -i -E 's/^(  samples:) *[0-9]+/\1 5/; s/^(  rounds:) *[0-9]+/\1 1/; s/^(  warmup:) *[0-9]+/\1 1/' "$tmp"/tasks/*/*/task.yaml
mkdir -m 0700 "$tmp/run"
AKAD_DATA_DIR=$data "$bin/akad" --socket "$tmp/run/akad.sock" --state-dir "$tmp/state" --tasks-dir "$tmp/tasks" \
  --cgroup-parent "$parent" --gpus none 2>"$tmp/akad.log" &
daemon=$!
for _ in $(seq 200); do "$bin/akactl" --socket "$tmp/run/akad.sock" ping >/dev/null 2>&1 && break; sleep 0.05; done
probe='grep -q v-1024x4096 configs.json || exit 2
if grep -rqs h-1x4000037 / --exclude-dir=proc --exclude-dir=sys 2>/dev/null; then exit 3; fi
for d in /solution '"$datadir"' '"$data"'; do test -e "$d" && exit 4; done
test -n "$(find / -xdev -name reference.cpp -o -xdev -path "*/solution/kernel.cpp" 2>/dev/null | head -1)" && exit 5
exit 0'
run=$("$bin/akactl" --socket "$tmp/run/akad.sock" --json submit cpu/reduction --agent-command "$probe" |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["run"]["id"])')
"$bin/akactl" --socket "$tmp/run/akad.sock" watch "$run" --json >/dev/null
"$bin/akactl" --socket "$tmp/run/akad.sock" --json status "$run" >"$tmp/status.json"
python3 - "$tmp/status.json" <<'PY' || { tail -20 "$tmp/akad.log" >&2; exit 1; }
import json, sys
a = json.load(open(sys.argv[1]))["attempts"][0]
assert a["state"] == "scored", a
r = a["result"]
code = r["agent"]["exit_code"]
why = {2: "the probe is broken", 3: "a held-out configuration is readable", 4: "the data dir or /solution is visible",
       5: "a solution or reference file is readable"}
assert code == 0, f"agent exit {code}: {why.get(code, '?')}"
assert r["compiled"] and r["correct"], r.get("failure")
print(f"installed layout: agent found nothing, attempt scored correct, speedup {r['speedup']:.2f}")
PY
kill -TERM "$daemon"; wait "$daemon" || fail "the installed akad did not stop cleanly"
daemon=""
for c in /sys/fs/cgroup/$parent /sys/fs/cgroup/*/$parent; do
  [[ -d $c ]] && [[ -n $(find "$c" -mindepth 1 -type d | head -1) ]] && fail "a sandbox cgroup was left under $c"
done
echo "installed layout: ok"
