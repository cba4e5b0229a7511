#!/usr/bin/env bash
# A scripted USI engine for the match tests. Its one argument is a script file whose line k
# (counting from 0) says what to do when asked to move at ply k of the game (the number of moves
# after "moves" in the last position command), whichever side it plays:
#   [sleep=SECONDS] [score=CP | mate=N] [nodes=N] [crash | crash-once | hang] ANSWER
# ANSWER is sent as "bestmove ANSWER" (a move, resign, win, or anything unparsable); score=, mate=
# and nodes= first send an info line; crash exits at once; crash-once exits only the first time (it
# leaves the folder SCRIPT.crashed behind; mkdir is atomic, so of two instances asked at once only
# one crashes); hang never answers and ignores stop. No line: bestmove resign. Its `id author` names
# the CPUs it may run on (Linux), for the test of --cpus-per-game.
script=$1
ply=0
while IFS= read -r line; do
  case "$line" in
    usi) echo "id name fake"; echo "id author cpus $(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status 2>/dev/null)"
      echo "usiok" ;;
    isready) echo "readyok" ;;
    quit) exit 0 ;;
    position*)
      if [[ $line == *" moves "* ]]; then
        read -ra words <<< "${line#* moves }"
        ply=${#words[@]}
      else
        ply=0
      fi ;;
    go*)
      entry=$(sed -n "$((ply + 1))p" "$script")
      answer=resign
      for word in $entry; do
        case "$word" in
          sleep=*) sleep "${word#sleep=}" ;;
          score=*) echo "info depth 1 score cp ${word#score=} pv x" ;;
          mate=*) echo "info depth 1 score mate ${word#mate=}" ;;
          nodes=*) echo "info depth 1 nodes ${word#nodes=} nps 1000" ;;
          crash) exit 1 ;;
          crash-once) if mkdir "$script.crashed" 2>/dev/null; then exit 1; fi ;;
          hang) answer="" ;;
          *) answer=$word ;;
        esac
      done
      [[ -n $answer ]] && echo "bestmove $answer" ;;
  esac
done
