#!/usr/bin/env bash
# On the GPU machine: builds jiriki with CUDA and runs (or continues) `jiriki loop` in
# build-device/loop-run, the whole script taking at most SECONDS (the build's time and 60 s to stop
# and pack the results come out of it), then stops it with SIGTERM (the phase in flight is
# interrupted and redone by the next call: a warm machine keeps build-device between calls, so the
# same command continues the run) and copies its config, state, metrics, plots and TensorBoard files
# to $OUT/loop-run.tar.gz, the best network to $OUT/best.jnn, and the whole run a fresh machine
# needs to continue it (records, every generation's network, the phase in flight; xz, in parts
# of 15 MB) to $OUT/resume.tar.xz.NN: copy those parts into .carry/resume/ here and carry
# .carry/resume, and a machine without the run unpacks them first. The config: scripts/device/loop.json,
# or CONFIG=FILE (scripts/device/loop_teacher.json: from a network trained on teacher games, which
# stay in every generation's training data).
#
#   run with carry [".carry"] (scripts/device/prepare.sh fills it: Boost headers for jiriki match;
#   .carry/resume to continue a run on a fresh machine;
#   .carry/debs for an anchor or teacher engine; loop_teacher.json carries .carry/data and .carry/eval too):
#     bash scripts/device/loop.sh [SECONDS]        (default 540, under the 10-minute call limit)
#
# TEACHER="CMD" bootstraps generation 0 from a USI engine (on the first call only); or set the
# config's init_model / extra_data to a network and games made by scripts/device/teacher.sh.
set -uo pipefail
source scripts/device/env.sh
SECONDS_LIMIT=${1:-540}
CONFIG=${CONFIG:-scripts/device/loop.json}
RUN=build-device/loop-run
start loop_device.log

step "machine"
machine

step "build"
build jiriki
J=$PWD/build-device/jiriki
# gpsshogi and fairy-stockfish in /tmp/gps when the config names an anchor or a teacher (carry .carry/debs).
if [[ -d .carry/debs ]] && grep -qE '"(anchor|teacher)": *"[^"]' "$CONFIG"; then
  source scripts/device/engines.sh
  unpack_engines "$J"
fi

if [[ ! -f "$RUN/state.json" ]] && compgen -G ".carry/resume/resume.tar.xz.*" > /dev/null; then
  step "the run from .carry/resume"
  cat .carry/resume/resume.tar.xz.* | tar xJf - -C "$(dirname "$RUN")" && ls "$RUN"
fi
CARRIED_MODELS=$(ls "$RUN/models" 2>/dev/null)  # already on the machine they came from

LOOP_SECONDS=$((SECONDS_LIMIT - SECONDS - 60))  # (bash's SECONDS: the time since the script started)
step "loop for at most $LOOP_SECONDS s"
ARGS=(--dir "$RUN")
[[ -f "$RUN/state.json" ]] || ARGS+=(--config "$CONFIG")
[[ -n "${TEACHER:-}" && ! -f "$RUN/state.json" ]] && ARGS+=(--teacher "$TEACHER")
# --foreground: the signal goes to the loop alone, which passes it on to the phase as SIGINT (training
# then writes its checkpoint); its phases die with it if it must be killed after 30 s more.
timeout --foreground -s TERM -k 30 "$LOOP_SECONDS" "$J" loop "${ARGS[@]}"
echo "loop exit code $? (0: all generations done, 130 or 124: stopped by the time limit, to be continued)"

step "results"
# The run directory without its records and networks (config, state, metrics, training logs, plots,
# TensorBoard files, phase logs): `jiriki loop report --dir` redraws the plots from it elsewhere.
tar czf "$OUT/loop-run.tar.gz" --exclude='*.hcpe3' --exclude='*.hcpe' --exclude='*.jnn' --exclude='*.bin' --exclude='*.ckpt' \
  -C "$(dirname "$RUN")" "$(basename "$RUN")"
# The best network so far (a few MB), to be matched elsewhere.
BEST=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["best"])' "$RUN/state.json" 2>/dev/null)
[[ -n "$BEST" && -f "$RUN/$BEST" ]] && cp "$RUN/$BEST" "$OUT/best.jnn"
# The run for a fresh machine, or to evaluate its generations elsewhere (`jiriki loop eval`): all but
# the checkpoints of finished generations' training (and the networks carried in, but for the two it needs).
if [[ -f "$RUN/state.json" ]]; then
  GEN=$(python3 -c 'import json, sys; print("gen%04d" % json.load(open(sys.argv[1]))["generation"])' "$RUN/state.json")
  SKIP=()
  for t in "$RUN"/train/gen*; do
    [[ "$(basename "$t")" == "$GEN" ]] || SKIP+=(--exclude="$(basename "$RUN")/train/$(basename "$t")/"{train.ckpt,candidate.jnn})
  done
  # Networks that came in .carry/resume go back only when the run needs them (generation 0, the best):
  # what comes back from a call is limited to 64 MiB in all.
  for m in $CARRIED_MODELS; do
    [[ "$m" == gen0000.jnn || "models/$m" == "$BEST" ]] || SKIP+=(--exclude="$(basename "$RUN")/models/$m")
  done
  XZ_OPT="-1 -T0" tar cJf - "${SKIP[@]}" -C "$(dirname "$RUN")" "$(basename "$RUN")" | split -b 15000000 -d - "$OUT/resume.tar.xz."
  ls -l "$OUT"/resume.tar.xz.*
fi
cat "$RUN/metrics.jsonl" 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    g, e, k = r.get("gate", {}), r.get("eval_first", {}), r.get("eval_anchor", {})
    print("generation %d: positions %d (total %d, window %d), held-out policy %.3f value %.3f, gate %s Elo %.0f %s, vs gen 0 Elo %s %s, vs anchor %s %s %s, promoted %s, seconds %s" % (
        r["generation"], r.get("selfplay", {}).get("positions", 0), r.get("positions_total", 0), r.get("window", 0),
        r.get("train", {}).get("test", {}).get("policy_accuracy", float("nan")),
        r.get("train", {}).get("test", {}).get("value_accuracy", float("nan")),
        g.get("score"), g.get("elo", float("nan")), g.get("elo_95"), e.get("elo"), e.get("elo_95"), k.get("score"), k.get("elo"), k.get("elo_95"), r.get("promoted"),
        {k: round(v) for k, v in r.get("seconds", {}).items()}))'
