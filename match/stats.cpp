// Elo estimates and the pentanomial SPRT.
#include "match/stats.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace jiriki::match {

namespace {

constexpr double Z95 = 1.959963984540054;         // two-sided 95% quantile of the normal law
const double NELO_UNIT = 800.0 / std::log(10.0);  // normalized Elo per unit of (mu - 1/2) / sigma

struct Moments {
  double mean = 0, var = 0;
};

template <size_t N>
Moments moments(const std::array<double, N>& x, const std::array<double, N>& p) {
  Moments m;
  for (size_t i = 0; i < N; ++i) m.mean += p[i] * x[i];
  for (size_t i = 0; i < N; ++i) m.var += p[i] * (x[i] - m.mean) * (x[i] - m.mean);
  return m;
}

// Mean and variance of one outcome (a game, or a pair scored per game), the interval of the mean
// over `n` outcomes, and the Elo figures from them. `pair_factor` is 2 for pairs: a pair holds two
// games, so the normalized Elo divides by the standard deviation of two games' total.
template <size_t N>
EloEstimate estimate(const std::array<double, N>& scores, const std::array<int64_t, N>& counts, double pair_factor) {
  EloEstimate e;
  double n = 0;
  for (auto c : counts) n += double(c);
  if (n == 0) return e;
  std::array<double, N> p;
  for (size_t i = 0; i < N; ++i) p[i] = double(counts[i]) / n;
  Moments m = moments(scores, p);
  e.score = m.mean;
  double se = std::sqrt(m.var / n);
  e.elo = elo_from_score(m.mean);
  e.lo = elo_from_score(m.mean - Z95 * se);
  e.hi = elo_from_score(m.mean + Z95 * se);
  // Wilson's interval treats the score as a proportion of n outcomes; unlike the normal one above it
  // keeps a width when every outcome is alike.
  const double z2n = Z95 * Z95 / n, centre = (m.mean + z2n / 2) / (1 + z2n);
  const double half = Z95 / (1 + z2n) * std::sqrt(m.mean * (1 - m.mean) / n + z2n / (4 * n));
  e.score_lo = std::max(0.0, centre - half);
  e.score_hi = std::min(1.0, centre + half);
  e.los = se > 0 ? 0.5 * (1 + std::erf((m.mean - 0.5) / (std::sqrt(2.0) * se)))
                 : (m.mean > 0.5   ? 1.0
                    : m.mean < 0.5 ? 0.0
                                   : 0.5);
  const double inf = std::numeric_limits<double>::infinity();
  if (m.var > 0) e.nelo = (m.mean - 0.5) / std::sqrt(pair_factor * m.var) * NELO_UNIT;
  else e.nelo = m.mean > 0.5 ? inf : m.mean < 0.5 ? -inf : 0.0;  // every outcome alike
  return e;
}

// The distribution closest (in likelihood) to the empirical `phat` whose normalized score
// (mu - 1/2) / sigma equals t (Van den Bergh, section 4.1): a fixed-point iteration, each step
// solving for the Lagrange multiplier theta by bisection.
template <size_t N>
std::array<double, N> constrained_mle(const std::array<double, N>& a, const std::array<double, N>& phat, double t) {
  std::array<double, N> p;
  p.fill(1.0 / N);
  for (int iter = 0; iter < 1000; ++iter) {
    Moments m = moments(a, p);
    double sigma = std::sqrt(m.var);
    std::array<double, N> phi;
    for (size_t i = 0; i < N; ++i) {
      double z = (a[i] - m.mean) / sigma;
      phi[i] = a[i] - 0.5 - 0.5 * t * sigma * (1 + z * z);
    }
    double u = *std::min_element(phi.begin(), phi.end()), v = *std::max_element(phi.begin(), phi.end());
    // sum phat_i phi_i / (1 + theta phi_i) falls from +inf at -1/v to -inf at -1/u.
    double lo = -1 / v, hi = -1 / u;
    for (int k = 0; k < 200 && hi - lo > 1e-15 * std::max(1.0, std::abs(lo)); ++k) {
      double mid = 0.5 * (lo + hi), f = 0;
      for (size_t i = 0; i < N; ++i) f += phat[i] * phi[i] / (1 + mid * phi[i]);
      (f > 0 ? lo : hi) = mid;
    }
    double theta = 0.5 * (lo + hi), change = 0;
    for (size_t i = 0; i < N; ++i) {
      double next = phat[i] / (1 + theta * phi[i]);
      change = std::max(change, std::abs(next - p[i]));
      p[i] = next;
    }
    if (change < 1e-10) break;
  }
  return p;
}

}  // namespace

double elo_from_score(double score) {
  if (score <= 0) return -std::numeric_limits<double>::infinity();
  if (score >= 1) return std::numeric_limits<double>::infinity();
  return -400.0 * std::log10(1.0 / score - 1.0);
}

EloEstimate estimate_wdl(int64_t wins, int64_t draws, int64_t losses) {
  return estimate<3>({0.0, 0.5, 1.0}, {losses, draws, wins}, 1.0);
}

EloEstimate estimate_penta(const Penta& penta) { return estimate<5>({0.0, 0.25, 0.5, 0.75, 1.0}, penta, 2.0); }

double SprtParams::lower() const { return std::log(beta / (1 - alpha)); }
double SprtParams::upper() const { return std::log((1 - beta) / alpha); }

double sprt_llr(const Penta& penta, const SprtParams& params) {
  const std::array<double, 5> a{0.0, 0.25, 0.5, 0.75, 1.0};
  std::array<double, 5> count, phat;
  double n = 0;
  for (size_t i = 0; i < 5; ++i) n += count[i] = penta[i] ? double(penta[i]) : 1e-3;
  for (size_t i = 0; i < 5; ++i) phat[i] = count[i] / n;
  // t is measured on pair scores: for independent games a pair's standard deviation per game is a
  // game's over sqrt(2), so a pair's t is sqrt(2) times a game's.
  double t0 = std::sqrt(2.0) * params.elo0 / NELO_UNIT, t1 = std::sqrt(2.0) * params.elo1 / NELO_UNIT;
  auto p0 = constrained_mle(a, phat, t0), p1 = constrained_mle(a, phat, t1);
  double llr = 0;
  for (size_t i = 0; i < 5; ++i) llr += count[i] * (std::log(p1[i]) - std::log(p0[i]));
  return llr;
}

SprtResult sprt_result(double llr, const SprtParams& p) {
  if (llr >= p.upper()) return SprtResult::H1;
  if (llr <= p.lower()) return SprtResult::H0;
  return SprtResult::NONE;
}

}  // namespace jiriki::match
