#!/usr/bin/env bash
# On the GPU machine: builds jiriki with CUDA and runs (or continues) `jiriki loop` in
# build-device/loop-run, the whole script taking at most SECONDS (the build's time and 60 s to stop
# and pack the results come out of it), then stops it with SIGTERM (the phase in flight is
# interrupted and redone by the next call: a warm machine keeps build-device between calls, so the
# same command continues the run) and copies its config, state, metrics, plots and TensorBoard files
# to $OUT/loop-run.tar.gz, each network's best to $OUT/best.jnn (the main one) and $OUT/best-NAME.jnn
# (the config's other networks), and the whole run a fresh machine needs to continue it (records,
# networks, the phase in flight; xz, in parts of 10 MB) to $OUT/resume.tar.xz.NN: copy those parts
# into .carry/resume/ here and carry .carry/resume, and a machine without the run unpacks them first.
# What travels is kept small: the config's prune_records and window_max_rows bound the records, a
# generation 0 that is its init_model file in the tree (e.g. networks/gpu.jnn) stays behind and is
# copied back (only if that file is unchanged: its sha256 travels), only the networks the run still
# needs go (generation 0 and each network's best), with bf16 weights, and no checkpoint of a finished
# training. A resume over three parts (30 MB) leaves the
# oldest generations' self-play records behind, as many as it must: the next machine's loop plays
# the window's share of them again with the newest network. The script ends by saying how to carry
# the resume: beside the rest (up to RESUME_MB, by default what the next call can carry beside the
# tree and the rest of this script's carry: 64 MiB in all, 2 MB spare), or alone in a staging call
# first, or part by part in a staging call each (STAGE=1, below).
#
# The config: scripts/device/loop.json (one GPU, a 6x64 from networks/cpu.jnn), or CONFIG=FILE, e.g.
# scripts/device/loop_x4.json: a machine of 4 GPUs, the GPU network (10x128) and the CPU network
# (6x64) from the shipped ones, both trained on every generation's window and gated at 800 playouts,
# matched against the shipped networks and gpsshogi.
#
#   run with carry [".carry/include.tar.xz", ".carry/lib", ".carry/bin", ".carry/debs", ".carry/resume"]
#   (scripts/device/prepare.sh fills .carry: Boost headers and libraries for jiriki match, gpsshogi's
#   .debs in .carry/debs for an anchor or teacher engine; prebuild.sh the CUDA jiriki in .carry/bin,
#   which saves the build's minutes; .carry/resume only to continue a run on a fresh machine):
#     CONFIG=scripts/device/loop_x4.json bash scripts/device/loop.sh [SECONDS]   (default 540, under
#     the 10-minute call limit)
#
# DETACH=1: the loop runs in a process session of its own (setsid), which outlives the call on the
# warm machine: the call follows its output until 20 s before SECONDS and brings back loop-run.tar.gz
# and the bests while it goes on, and the next DETACH=1 call (within the machine's 30 s idle release)
# follows it further, without stopping and redoing the phase in flight (a gate or an anchor of
# minutes) or building again. Such a call packs no resume (the loop's networks are in use): the last
# call says STOP=1 too, stops the loop 60 s before SECONDS and packs it as a foreground call does.
# A machine given back while the loop runs loses what it made since the last resume.
#
# A run that goes on (on the warm machine, or from .carry/resume) keeps its own config: NEW_CONFIG=1
# passes CONFIG to the loop, whose settings it then replaces for the generations to come.
# TEACHER="CMD" bootstraps generation 0 from a USI engine (on the first call only).
# FUZZ=NAME: scripts/device/fuzz.sh NAME beside the loop, FUZZ_JOBS processes (default: the cores) at
# nice 19 for as long as the loop runs, so that it takes only the cores the loop leaves idle (carry
# .carry/fuzzpack.tar.xz too); its log comes back as $OUT/fuzz_NAME.log.
set -uo pipefail
source scripts/device/env.sh
SECONDS_LIMIT=${1:-540}
# The most megabytes of resume the next call can carry in: 64 MiB less the tree (the working tree's
# files, without .carry, build outputs and .git) and the rest of what this script is carried with
# (the Boost headers compressed when include.tar.xz is there), 2 MB spare. Only those: a warm machine
# keeps what earlier calls carried (a network of a match), which the next call need not carry. A
# resume over that budget but within STAGE_MB (64 MiB less the tree alone, 2 MB spare) goes to a fresh
# machine in two calls: `STAGE=1 bash scripts/device/loop.sh` carried with .carry/resume alone
# unpacks it on the machine's disk (nothing else), then the usual call without .carry/resume
# continues the run there (a warm machine keeps it). A larger one (up to three parts of 10 MB) is
# staged part by part, a STAGE=1 call carried with each part alone.
carried_bytes() {
  local c total=0
  for c in .carry/include.tar.xz .carry/lib .carry/bin .carry/debs .carry/cudnn-choices.txt \
    ${FUZZ:+.carry/fuzzpack.tar.xz}; do
    [[ -e $c ]] && total=$((total + $(du -sb "$c" | cut -f1)))
  done
  [[ -e .carry/include.tar.xz || ! -e .carry/include ]] || total=$((total + $(du -sb .carry/include | cut -f1)))
  echo $total
}
TREE_BYTES=$(du -sb --exclude=./.carry --exclude='./build*' --exclude=./.git . | cut -f1)
RESUME_MB=${RESUME_MB:-$(((67108864 - TREE_BYTES - $(carried_bytes)) / 1000000 - 2))}
STAGE_MB=$(((67108864 - TREE_BYTES) / 1000000 - 2))
CONFIG=${CONFIG:-scripts/device/loop.json}
RUN=build-device/loop-run
start loop_device.log

if [[ -n "${STAGE:-}" ]]; then
  # The parts carried (all of them, or only some when the whole does not fit beside the tree: carry
  # e.g. .carry/resume/resume.tar.xz.00 in one STAGE=1 call and .01 in the next) gather on the
  # machine's disk; once they make a whole xz stream, the run is unpacked from them.
  step "the run from .carry/resume onto this machine's disk, for the next call"
  [[ ! -f "$RUN/state.json" ]] || { echo "error: this machine has a run already ($RUN); nothing unpacked"; exit 1; }
  compgen -G ".carry/resume/resume.tar.xz.*" > /dev/null || { echo "error: no .carry/resume/resume.tar.xz.*"; exit 1; }
  PARTS=build-device/resume-parts
  mkdir -p "$PARTS" && cp .carry/resume/resume.tar.xz.* "$PARTS/"
  echo "parts on this machine: $(cd "$PARTS" && echo resume.tar.xz.*)"
  if ! cat "$PARTS"/resume.tar.xz.* | xz -t 2> /dev/null; then
    echo "not yet a whole resume: carry the other parts in another STAGE=1 call (within 30 s)"
    exit
  fi
  mkdir -p "$(dirname "$RUN")" && cat "$PARTS"/resume.tar.xz.* | tar xJf - -C "$(dirname "$RUN")" && ls "$RUN" && rm -r "$PARTS"
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1])); print("generation", s["generation"], "best", s["best"])' \
    "$RUN/state.json"
  exit
fi

# The detached loop (DETACH=1): its process ID while it runs, its output, its exit status.
LOOP_PID_FILE=build-device/loop.pid LOOP_OUT=build-device/loop.out LOOP_RC_FILE=build-device/loop.rc
loop_pid() { [[ -f $LOOP_PID_FILE ]] && kill -0 "$(cat "$LOOP_PID_FILE")" 2> /dev/null && cat "$LOOP_PID_FILE"; }

step "machine"
machine
echo "resume budget: $RESUME_MB MB (the tree $((TREE_BYTES / 1000000)) MB, the rest of .carry $(($(carried_bytes) / 1000000)) MB)"

J=$PWD/build-device/jiriki
if [[ -n "$(loop_pid)" ]]; then
  # Its phases start this binary: not rebuilt under it.
  step "the detached loop (process $(loop_pid)) goes on; no build"
else
  step "build"
  build jiriki
fi
use_carried_cudnn_choices
# gpsshogi and fairy-stockfish in /tmp/gps when the config names an anchor or a teacher (carry .carry/debs).
if [[ -d .carry/debs ]] && grep -qE '"(anchor|teacher|engine)": *"[^"]' "$CONFIG"; then
  source scripts/device/engines.sh
  unpack_engines "$J"
fi

if [[ ! -f "$RUN/state.json" ]] && compgen -G ".carry/resume/resume.tar.xz.*" > /dev/null; then
  step "the run from .carry/resume"
  cat .carry/resume/resume.tar.xz.* | tar xJf - -C "$(dirname "$RUN")" && ls "$RUN"
fi
# Each network's generation 0 left behind because it is its init_model file (gen0000 NAME FILE lines).
init_models() {
  python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
if c.get("init_model"): print("models/gen0000.jnn", c["init_model"])
for n in c.get("networks", []):
    if n.get("init_model"): print("models/%s/gen0000.jnn" % n["name"], n["init_model"])' "$1"
}
# The file in the tree may have changed since the resume was packed (a network shipped meanwhile): it
# is copied back only if it is still the network the run began from (left_behind.txt: its sha256).
if [[ -f "$RUN/config.json" ]]; then
  while read -r model file; do
    [[ -f "$RUN/$model" || ! -f "$file" ]] && continue
    want=$(awk -v m="$model" '$2 == m { print $1 }' "$RUN/left_behind.txt" 2> /dev/null)
    have=$(sha256sum < "$file" | cut -d' ' -f1)
    if [[ -n "$want" && "$want" != "$have" ]]; then
      echo "warning: the run's $model was left behind as $file, which has changed since (sha256 ${want:0:16}," \
        "now ${have:0:16}): not copied, the run goes on without it (its eval_first matches need it: put that" \
        "network at $RUN/$model)"
      continue
    fi
    [[ -n "$want" ]] || echo "warning: $file copied as the run's $model unchecked (its resume records no checksum)"
    mkdir -p "$(dirname "$RUN/$model")" && cp "$file" "$RUN/$model"
  done < <(init_models "$RUN/config.json")
fi

# DETACH=1: starts the loop in a session of its own unless it runs already, prints its output until
# LOOP_SECONDS have passed or it ends, then under STOP=1 stops it (SIGTERM, passed on to the phase in
# flight as in the foreground; after 30 s more its whole session is killed).
follow_detached() {
  local pid from
  pid=$(loop_pid)
  if [[ -z "$pid" ]]; then
    rm -f "$LOOP_RC_FILE"
    : > "$LOOP_OUT"
    # (A background job of a script ignores SIGINT; the loop sets its own handlers.)
    setsid bash -c '"$@" & echo $! > "'"$LOOP_PID_FILE"'"; wait $!; echo $? > "'"$LOOP_RC_FILE"'"' _ \
      "$J" loop "${ARGS[@]}" > "$LOOP_OUT" 2>&1 < /dev/null &
    for _ in $(seq 50); do pid=$(loop_pid) && break; sleep 0.1; done
    echo "detached loop: process $pid, output in $LOOP_OUT"
    from=1
  else
    [[ -n "${NEW_CONFIG:-}" ]] && echo "warning: NEW_CONFIG=1 has no effect on the loop that runs already"
    from=$(($(stat -c %s "$LOOP_OUT") + 1))
    echo "detached loop: process $pid goes on; its output from here"
  fi
  # Its output from byte `from` on, as it comes (every 2 s), until LOOP_SECONDS have passed or it ends.
  show_new() {
    local size
    size=$(stat -c %s "$LOOP_OUT")
    ((size >= from)) && tail -c "+$from" "$LOOP_OUT" | head -c $((size - from + 1))
    from=$((size + 1))
  }
  local end=$((SECONDS + LOOP_SECONDS))
  while ((SECONDS < end)) && [[ -n "$(loop_pid)" ]]; do
    sleep 2
    show_new
  done
  show_new
  if [[ -z "$(loop_pid)" ]]; then
    echo "loop exit code $(cat "$LOOP_RC_FILE" 2> /dev/null || echo unknown)"
  elif [[ -n "${STOP:-}" ]]; then
    kill -TERM "$pid"
    for _ in $(seq 30); do [[ -z "$(loop_pid)" ]] && break; sleep 1; done
    [[ -z "$(loop_pid)" ]] || { echo "the loop did not stop in 30 s: its session killed"; pkill -KILL -s "$pid"; sleep 1; }
    show_new
    echo "loop stopped (exit code $(cat "$LOOP_RC_FILE" 2> /dev/null || echo unknown)), to be continued"
  else
    echo "the loop goes on on this machine: the next DETACH=1 call (within 30 s) follows it; STOP=1 stops it and packs the resume"
  fi
}

# Detached calls that leave the loop running need only a few seconds at the end (no resume).
[[ -n "${DETACH:-}" && -z "${STOP:-}" ]] && END_SECONDS=20 || END_SECONDS=60
LOOP_SECONDS=$((SECONDS_LIMIT - SECONDS - END_SECONDS))  # (bash's SECONDS: the time since the script started)
step "loop for at most $LOOP_SECONDS s"
ARGS=(--dir "$RUN")
[[ -f "$RUN/state.json" && -z "${NEW_CONFIG:-}" ]] || ARGS+=(--config "$CONFIG")  # NEW_CONFIG=1: the config replaces the run's
# A run that goes on keeps its own config: say which of CONFIG's keys it does not follow.
if [[ -f "$RUN/state.json" && -z "${NEW_CONFIG:-}" ]]; then
  python3 -c '
import json, sys
mine, run = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in sorted(k for k in mine if run.get(k) != mine[k]):
    print("warning: the run keeps its own %s (%s has %s); NEW_CONFIG=1 replaces the run config" % (k, sys.argv[1], json.dumps(mine[k])[:200]))' \
    "$CONFIG" "$RUN/config.json"
fi
[[ -n "${TEACHER:-}" && ! -f "$RUN/state.json" ]] && ARGS+=(--teacher "$TEACHER")
# --foreground: the signal goes to the loop alone, which passes it on to the phase as SIGINT (training
# then writes its checkpoint); its phases die with it if it must be killed after 30 s more.
if [[ -n "${FUZZ:-}" ]]; then
  bash scripts/device/fuzz.sh "$FUZZ" "$LOOP_SECONDS" "${FUZZ_JOBS:-$(nproc)}" > /dev/null 2>&1 &
  BESIDE=$!
fi
if [[ -n "${DETACH:-}" ]]; then
  follow_detached
else
  timeout --foreground -s TERM -k 30 "$LOOP_SECONDS" "$J" loop "${ARGS[@]}"
  echo "loop exit code $? (0: all generations done, 130 or 124: stopped by the time limit, to be continued)"
fi
# Only that job: a bare `wait` would also wait for start's tee, which outlives the script's output.
[[ -n "${BESIDE:-}" ]] && wait "$BESIDE" && tail -1 "$OUT/fuzz_$FUZZ.log"

step "results"
# The run directory without its records and networks (config, state, metrics, training logs, plots,
# TensorBoard files, phase logs): `jiriki loop report --dir` redraws the plots from it elsewhere.
tar czf "$OUT/loop-run.tar.gz" --warning=no-file-changed --ignore-failed-read --exclude='*.hcpe3' --exclude='*.hcpe' --exclude='*.jnn' --exclude='*.bin' --exclude='*.ckpt' \
  -C "$(dirname "$RUN")" "$(basename "$RUN")"
# The best networks so far (a few MB each), to be matched elsewhere.
BESTS=$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))
print("main", s["best"])
for name, n in s.get("networks", {}).items(): print(name, n["best"])' "$RUN/state.json" 2>/dev/null)
while read -r name best; do
  [[ -n "$best" && -f "$RUN/$best" ]] && cp "$RUN/$best" "$OUT/$([[ $name == main ]] && echo best || echo "best-$name").jnn"
done <<< "$BESTS"
# The run for a fresh machine, or to evaluate its generations elsewhere (`jiriki loop eval`): all but
# the checkpoints of finished trainings and the candidates of finished generations (and the networks
# carried in, but for those it needs).
if [[ -n "$(loop_pid)" ]]; then
  echo "resume: none while the loop runs (STOP=1 packs it)"
elif [[ -f "$RUN/state.json" ]]; then
  GEN=$(python3 -c 'import json, sys; print("gen%04d" % json.load(open(sys.argv[1]))["generation"])' "$RUN/state.json")
  SKIP=()
  R=$(basename "$RUN")
  while read -r t; do
    t=${t#"$RUN"/}
    if [[ "$(basename "$t")" != "$GEN"* ]]; then SKIP+=(--exclude="$R/$t/"{train.ckpt,candidate.jnn})
    elif [[ -f "$RUN/$t/candidate.jnn" ]]; then SKIP+=(--exclude="$R/$t/train.ckpt"); fi  # its training is done
  done < <(find "$RUN/train" -mindepth 1 -maxdepth 2 -type d -name 'gen*' 2>/dev/null)
  # Of the run's networks only those it needs travel (each network's generation 0 and best): what
  # comes in is limited to 64 MiB with the tree.
  while read -r m; do
    [[ "$(basename "$m")" == gen0000.jnn ]] || grep -q " models/$m\$" <<< "$BESTS" || SKIP+=(--exclude="$R/models/$m")
  done < <(cd "$RUN/models" 2>/dev/null && find . -name '*.jnn' | sed 's|^\./||')
  # A generation 0 that is its init_model file travels in the tree instead, with its checksum, so
  # that a changed file in the next machine's tree is not taken for it.
  rm -f "$RUN/left_behind.txt"
  while read -r model file; do
    if cmp -s "$RUN/$model" "$file"; then
      SKIP+=(--exclude="$R/$model")
      echo "$(sha256sum < "$file" | cut -d' ' -f1) $model $file" >> "$RUN/left_behind.txt"
    fi
  done < <(init_models "$RUN/config.json")
  # Networks travel with bf16 weights (half the size; as the shipped ones are kept): the run's
  # networks and the generation in flight's candidates, rewritten in place (the run goes on with them).
  while read -r f; do
    "$J" nn convert "$f" -o "$f.bf16" --weights bf16 > /dev/null && mv "$f.bf16" "$f" || rm -f "$f.bf16"
  done < <(find "$RUN/models" -name '*.jnn'; find "$RUN/train" -path "*/$GEN*/candidate.jnn" 2>/dev/null)
  pack() {
    rm -f "$OUT"/resume.tar.xz.*
    XZ_OPT="-1 -T0" tar cJf - "${SKIP[@]}" "$@" -C "$(dirname "$RUN")" "$R" | split -b 10000000 -d - "$OUT/resume.tar.xz."
    MB=$(($(cat "$OUT"/resume.tar.xz.* | wc -c) / 1000000))
  }
  pack
  # Too much to carry in, even alone (a staging call costs a minute of the machine; playing records
  # again, minutes): the oldest generations' self-play records stay behind, one generation after
  # another, until the rest fits; the next machine's loop counts those left behind as pruned and plays
  # the window's share of them again with the newest network.
  # (Up to three parts of 10 MB: over what fits beside the tree, each part is staged in a call of its
  # own; with the run's other files, three are what a call can bring back.)
  LIMIT=$((RESUME_MB > 30 ? RESUME_MB : 30))
  LEFT=()
  for g in $(cd "$RUN/selfplay" 2>/dev/null && ls -d gen* 2>/dev/null | sort); do
    ((MB > LIMIT)) || break
    LEFT+=(--exclude="$R/selfplay/$g")
    echo "resume: $MB MB, over $LIMIT: packed again without selfplay/$g"
    pack "${LEFT[@]}"
  done
  if ((MB > LIMIT)); then
    echo "resume: $MB MB, over $LIMIT: packed again without any self-play records"
    pack --exclude="$R/selfplay"
  fi
  ls -l "$OUT"/resume.tar.xz.*
  echo "resume: $MB MB"
  if ((MB <= RESUME_MB)); then
    echo "resume: a fresh machine continues the run with .carry/resume carried beside the rest"
  elif ((MB <= STAGE_MB)); then
    echo "resume: over the $RESUME_MB MB that fit beside the rest of the carry: on a fresh machine, first" \
      "STAGE=1 bash scripts/device/loop.sh carried with .carry/resume alone, then the usual call without it"
  elif ((STAGE_MB >= 10)); then
    echo "resume: over the $STAGE_MB MB that fit beside the tree: on a fresh machine, STAGE=1 bash" \
      "scripts/device/loop.sh once for each part, carried with that part alone (.carry/resume/resume.tar.xz.00," \
      "then .01, ..., each call within 30 s of the last), then the usual call without them"
  else
    echo "warning: not even one part of 10 MB fits beside the tree ($STAGE_MB MB): carry less"
  fi
fi
cat "$RUN/metrics.jsonl" 2>/dev/null | python3 -c '
import json, sys
def m(x):
    return "%s (%s, Elo %s %s)" % (x.get("score"), "+%d -%d =%d" % (x.get("wins", 0), x.get("losses", 0), x.get("draws", 0)), x.get("elo"), x.get("elo_95"))
for line in sys.stdin:
    r = json.loads(line)
    out = ["generation %d: positions %d (total %d, window %d)" % (r["generation"], r.get("selfplay", {}).get("positions", 0), r.get("positions_total", 0), r.get("window", 0))]
    out.append("main %s candidate: gate %s, promoted %s" % (r.get("train_kind"), m(r["gate"]) if "gate" in r else "none", r.get("promoted")))
    for name, n in r.get("networks", {}).items():
        out.append("%s %s candidate: gate %s, promoted %s" % (name, n.get("train_kind"), m(n["gate"]) if "gate" in n else "none", n.get("promoted")))
    for key, x in [("generation 0", r.get("eval_first")), ("anchor", r.get("eval_anchor"))] + sorted(r.get("anchors", {}).items()):
        if x: out.append("vs %s %s" % (key, m(x)))
    out.append("seconds %s" % {k: round(v) for k, v in r.get("seconds", {}).items()})
    print("; ".join(out))'
