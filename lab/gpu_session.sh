#!/usr/bin/env bash
# One device call of a session: the native test suite (parallel), downloads run from the
# served site with the wheel installed, report.py parts, page recordings. Every log goes to
# $OUT/session.tgz (rewritten after each part: at most 8 files come back from a call).
#   bash lab/gpu_session.sh tests site "report:precision host" "report:decode" \
#     "py:benchmarks/gpu_check_gluon.py/200" ...
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
O=/tmp/session-out; mkdir -p $O
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-' | tr -d '/')
nvidia-smi > "$O/smi-$gpu.txt"
start=$SECONDS
for part in "$@"; do
  echo "== $part (at $((SECONDS - start)) s)"
  case "$part" in
    tests)
      # timeout signals pytest's whole process group, xdist workers included; -k follows
      # with SIGKILL for any that ignore SIGTERM.
      # -v: each test's outcome as it ends ("[gw3] FAILED tests/..."), so a run cut by the
      # time limit still names its failures. TESTS_PATHS: files or folders (default tests).
      timeout -k 10 "${TESTS_TIMEOUT:-300}" python3 -m pytest ${TESTS_PATHS:-tests} \
        -n "${WORKERS:-12}" -v \
        -rfE -p no:cacheprovider --ignore=tests/browser --ignore=tests/site ${TESTS_ARGS:-} \
        > "$O/tests-$gpu.log" 2>&1; echo "tests rc=$?"; grep -E "(FAILED|ERROR) " "$O/tests-$gpu.log" \
        | head -20; tail -2 "$O/tests-$gpu.log";;
    site)
      SITE_TEST_REPORT=$O/site-$gpu.json timeout "${SITE_TIMEOUT:-200}" python3 -m pytest \
        tests/site -k "not notebook and not twine" -p no:cacheprovider -v \
        > "$O/site-$gpu.log" 2>&1; echo "site rc=$?"; tail -3 "$O/site-$gpu.log";;
    report:*)
      name=$(echo "${part#report:}" | tr ' ' '-')
      timeout "${REPORT_TIMEOUT:-240}" python3 benchmarks/report.py --only ${part#report:} \
        --save "$O/report-$name-$gpu.json" > "$O/report-$name-$gpu.log" 2>&1
      echo "report $name rc=$?"; tail -2 "$O/report-$name-$gpu.log";;
    record:*)
      timeout "${RECORD_TIMEOUT:-300}" python3 benchmarks/record.py --page ${part#record:} \
        > "$O/record-$gpu.log" 2>&1; echo "record rc=$?"; tail -3 "$O/record-$gpu.log"
      mkdir -p "$O/results"; cp -r triton_guide/_results/*/ "$O/results/" 2>/dev/null;;
    py:*)
      # py:SCRIPT [ARGS]: a check script that takes OUT.json first (benchmarks/gpu_check_*,
      # lab/*); its own time limit after a slash: py:lab/x.py/120
      spec=${part#py:}; limit=${PY_TIMEOUT:-300}
      case "$spec" in */[0-9]*) limit=${spec##*/}; spec=${spec%/*};; esac
      script=${spec%% *}; args=${spec#"$script"}; name=$(basename "$script" .py)
      timeout -k 10 "$limit" python3 $script "$O/$name-$gpu.json" $args \
        > "$O/$name-$gpu.log" 2>&1; echo "$name rc=$?"; tail -4 "$O/$name-$gpu.log";;
    *) echo "unknown part $part";;
  esac
  tar czf "$OUT/session.tgz" -C $O . 2>/dev/null
done
echo "== done at $((SECONDS - start)) s"
