# Sourced by the scripts in scripts/device/ that play against gpsshogi or fairy-stockfish on the GPU
# machine: unpacks the Debian .debs carried in .carry/debs (scripts/device/prepare.sh fetches them)
# with dpkg -x into $GPS, and writes two launchers for `jiriki match`'s cmd=:
#   $GPS/gpsusi            gpsshogi with a private OSL_HOME for each process (it writes every
#                          setoption there);
#                          env.GPS_NODES=N caps its nodes a move (none when unset), env.GPS_THREADS
#                          its threads (1)
#   $GPS/fairy-stockfish   fairy-stockfish (shogi is its default variant)
# and /tmp/joseki.db, gpsshogi's opening book in YaneuraOu's format (`jiriki book import`), with
# the jiriki given as the argument of unpack_engines.
GPS=${GPS:-/tmp/gps}

unpack_engines() {
  local jiriki=$1
  mkdir -p "$GPS/home"
  for d in .carry/debs/*.deb; do dpkg -x "$d" "$GPS"; done
  ln -sfn "$GPS/usr/share/gpsshogi-data/data" "$GPS/home/data"
  cat > "$GPS/gpsusi" <<EOS
#!/bin/sh
home=\$(mktemp -d /tmp/gps-home.XXXXXX) && ln -s $GPS/usr/share/gpsshogi-data/data "\$home/data" || exit 1
export LD_LIBRARY_PATH=$GPS/usr/lib/x86_64-linux-gnu OSL_HOME=\$home
exec $GPS/usr/games/gpsusi \${GPS_NODES:+--node-count-hard-limit \$GPS_NODES} -N \${GPS_THREADS:-1} "\$@"
EOS
  ln -sfn "$GPS/usr/games/fairy-stockfish" "$GPS/fairy-stockfish"
  chmod +x "$GPS/gpsusi"
  LD_LIBRARY_PATH=$GPS/usr/lib/x86_64-linux-gnu OSL_HOME=$GPS/home $GPS/usr/games/gpsusi --health-check 2>&1 | tail -2
  "$jiriki" book import "$GPS/usr/share/gpsshogi-data/data/joseki.dat" -o /tmp/joseki.db
}
