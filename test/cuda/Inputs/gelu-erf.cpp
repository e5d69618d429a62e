// prelude.cuh's geluErf (compiled with emu.h, or by NVRTC on the GPU in scripts/gpu) against
// erfc and exp in long double: Phi(v) = erfc(-v / sqrt 2) / 2, phi(v) = exp(-v^2 / 2) / sqrt(2 pi),
// on every 2^-12 step of [-12, 12] and on the values that must come out exactly (0, the
// infinities, NaN). Prints the largest errors and "ok" or "WRONG" per bound; exit 1 on WRONG.
#include <cmath>
#include <cstdio>

int main() {
  const long double rsqrt2 = 0.70710678118654752440L, rsqrt2pi = 0.39894228040143267794L;
  double cdfErr = 0, pdfRel = 0, gradErr = 0, geluErr = 0;
  for (long i = -12L * 4096; i <= 12L * 4096; ++i) {
    const float v = (float)i / 4096.0f;
    const GeluErf g = geluErf(v);
    const long double cdf = 0.5L * erfcl(-(long double)v * rsqrt2);
    const long double pdf = rsqrt2pi * expl(-0.5L * (long double)v * v);
    cdfErr = fmax(cdfErr, (double)fabsl(g.cdf - cdf));
    // phi's relative error is exp's of its rounded argument (-v^2 log2(e) / 2, at most 26 in size
    // here, two roundings: 3.1e-6, and ex2.approx's 2^-22);
    // beyond |v| = 6, phi < 1e-8 and v phi's error is bounded by gradErr.
    if (fabsf(v) <= 6.0f)
      pdfRel = fmax(pdfRel, (double)(fabsl(g.pdf - pdf) / pdf));
    gradErr = fmax(gradErr, (double)fabsl(geluGradFactor(v) - (cdf + v * pdf)));
    // GELU relative to max(|v|, 1): v Phi(v) carries Phi's error times |v|.
    geluErr = fmax(geluErr, (double)(fabsl(gelu(v) - v * cdf) / fmaxl(fabsl(v), 1.0L)));
  }
  // Exact values: GELU(0) = 0, Phi(0) = 1/2, GELU(inf) = inf, NaN stays NaN; GELU(-inf) and
  // the derivative at inf are NaN as on the CPU (-inf * 0, 1 + inf * 0).
  const bool exact = gelu(0.0f) == 0.0f && geluErf(0.0f).cdf == 0.5f &&
                     gelu(INFINITY) == INFINITY && std::isnan(gelu(-INFINITY)) &&
                     std::isnan(gelu(NAN)) && std::isnan(geluGradFactor(NAN)) &&
                     std::isnan(geluGradFactor(INFINITY)) && geluErf(-20.0f).cdf == 0.0f;
  bool ok = true;
  auto row = [&](const char *what, double err, double bound) {
    const bool good = err <= bound;
    ok = ok && good;
    std::printf("%s %.3g (bound %.2g): %s\n", what, err, bound, good ? "ok" : "WRONG");
  };
  row("Phi abs", cdfErr, 3e-7);
  row("phi rel, |v| <= 6", pdfRel, 5e-6);
  row("Phi + v phi abs", gradErr, 5e-7);
  row("gelu abs / max(|v|, 1)", geluErr, 3e-7);
  std::printf("exact values: %s\n", exact ? "ok" : "WRONG");
  return ok && exact ? 0 : 1;
}
