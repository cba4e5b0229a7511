// Match statistics as fastchess reports them: the score and logistic Elo difference with its 95%
// interval and the likelihood of superiority, from game results (trinomial) and from colour-swapped
// game pairs (pentanomial); and the SPRT on pentanomial counts with the "normalized Elo" model of
// Michel Van den Bergh ("Comments on Normalized Elo"), the default of fastchess and fishtest.
#pragma once
#include <array>
#include <cstdint>

namespace jiriki::match {

// Counts of game pairs by the first player's points in the pair: 0, 0.5, 1, 1.5, 2
// (LL, LD, DD or WL, WD, WW).
using Penta = std::array<int64_t, 5>;

struct EloEstimate {
  double score = 0.5;                 // mean points per game
  double elo = 0, lo = 0, hi = 0;     // logistic Elo and its 95% interval (infinite at a score of 0 or 1)
  double los = 0.5;                   // likelihood of superiority
  double score_lo = 0, score_hi = 1;  // Wilson 95% interval of the score: finite where the Elo one is
                                      // not (0 of 20 still bounds the score by 0.161)
  double nelo = 0;                    // normalized Elo: (score - 1/2) / sigma in Elo units
};

// Logistic Elo difference of a mean score: -400 log10(1/s - 1).
double elo_from_score(double score);

// From wins, draws and losses of single games (each game independent).
EloEstimate estimate_wdl(int64_t wins, int64_t draws, int64_t losses);
// From game pairs; the variance is that of pair scores, which counts colour and opening effects once.
EloEstimate estimate_penta(const Penta& penta);

struct SprtParams {
  double elo0 = 0, elo1 = 5, alpha = 0.05, beta = 0.05;  // normalized Elo bounds and error rates
  double lower() const;                                  // log(beta / (1 - alpha)): at or below it H0 is accepted
  double upper() const;                                  // log((1 - beta) / alpha): at or above it H1 is accepted
};

enum class SprtResult { NONE, H0, H1 };

// Log-likelihood ratio of H1 (normalized Elo elo1) against H0 (elo0) for the pentanomial counts:
// each hypothesis' maximum-likelihood pair distribution under the constraint on (mu - 1/2) / sigma.
// Empty classes count as 0.001 pairs, as fastchess does, so that one-sided samples stay finite.
double sprt_llr(const Penta& penta, const SprtParams& p);
SprtResult sprt_result(double llr, const SprtParams& p);

}  // namespace jiriki::match
