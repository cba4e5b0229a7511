// The end of a tournament: summary.json (the contract scripts and the overnight loop read) and the
// final table on stdout (a crosstable when there are more than two engines).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "match/tournament.h"

namespace jiriki::match {

// {"engines", "games", and for one pairing its "wins", "losses", "draws", "score", "elo",
// "elo_95", "los", "penta", "penta_elo", "penta_elo_95", "nelo"; "sprt"; "pairings" (the same
// fields per pairing); "crosstable"; "faults" per engine; "search" per engine ("moves",
// "ms_per_move", "moves_with_nodes", "nodes_per_move", "nodes_per_second"); "runner_us_per_move",
// "runner_cpu_us_per_move", "runner_moves"}. Infinite Elo figures (a score of 0 or 1) are null.
nlohmann::json summary_json(const TournamentConfig& config, const TournamentResult& result);

std::string final_table(const TournamentConfig& config, const TournamentResult& result);

}  // namespace jiriki::match
