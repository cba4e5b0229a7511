// The end of a tournament: summary.json (the contract scripts and the overnight loop read) and the
// final table on stdout (a crosstable when there are more than two engines); and the same for the
// games of games.jsonl files read back.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "match/tournament.h"

namespace jiriki::match {

// {"engines", "games", and for one pairing its "wins", "losses", "draws", "score", "elo",
// "elo_95", "los", "penta", "penta_elo", "penta_elo_95", "nelo"; "sprt"; "pairings" (the same
// fields per pairing); "crosstable"; "faults" per engine; "search" per engine ("moves",
// "ms_per_move", "moves_with_nodes", "nodes_per_move", "nodes_per_second", "nodes_per_second_median" (of
// the moves' rates; 0 without any), and
// "instances_nodes_per_second": each game thread's instance of it); "runner_us_per_move",
// "runner_cpu_us_per_move", "runner_moves"}. Infinite Elo figures (a score of 0 or 1) are null.
nlohmann::json summary_json(const TournamentConfig& config, const TournamentResult& result);

std::string final_table(const TournamentConfig& config, const TournamentResult& result);

// The games of games.jsonl files counted as the runner counts them: several runs together (a bar
// measured over several calls), or the finished games of a run that was stopped. Engines are
// numbered by first appearance (each file's games in their numbered order, so a file's first
// --engine comes first); a pair is the games of one file with the same pair number. `config`
// gets the engines' names (for final_table and summary_json). With `sprt` (one pairing only), the
// test goes on over the runs as one sequential test: the files in the order given, each file's
// games in the order they were written (as they ended), the LLR after each completed pair; the
// first crossing of a bound is the decision (later games are counted in the score, not in it).
struct GameFilesSummary {
  TournamentConfig config;
  TournamentResult result;
  int64_t estimated_games = 0;         // lines without the answered-move counts (written before they were
                                       // added): their moves are the plies each side played after the opening
  std::vector<std::string> cut_lines;  // "FILE:LINE" of each file's last line left out, cut short by a
                                       // run killed while writing it
  int64_t sprt_decided_games = 0;      // with sprt: the games counted when a bound was first crossed (0: never)
};
// Throws std::runtime_error naming the file (and line) it cannot read or understand; a last line
// without its newline that cannot be read is a killed run's, left out and named in cut_lines.
GameFilesSummary summarize_game_files(const std::vector<std::string>& paths,
                                      const std::optional<SprtParams>& sprt = std::nullopt);

}  // namespace jiriki::match
