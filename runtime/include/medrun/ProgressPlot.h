//===- ProgressPlot.h - progress.png: loss and validation curves --------------------===//
//
// The plot nnU-Net draws as progress.png, drawn with cairo (text through fontconfig's
// sans-serif font) and written with libpng: three panels on white, x the steps from the
// first to the last one plotted, each with axes, tick numbers, grid lines and axis labels:
//
//   1. "loss" (left axis, from the lowest to the highest loss with 5% margins):
//        each step's training loss         light blue, 1 px
//        its trailing moving average       blue, 3 px
//      "pseudo Dice" (right axis, 0 to 1):
//        each validation's Dice            green, 1 px, a 5 x 5 dot each
//        its exponential moving average    orange, 3 px (0.9 old + 0.1 new, as nnU-Net)
//      with a legend of these four above the panel;
//   2. "step time [s]" (nnU-Net: epoch duration), blue;
//   3. "learning rate", blue.
//
// Panels 2 and 3 scale their axis as panel 1's loss. Validation computes no loss here (the
// Dice of sliding windows), so there is no validation loss curve.
//
//===----------------------------------------------------------------------------------===//
#ifndef MEDRUN_PROGRESSPLOT_H
#define MEDRUN_PROGRESSPLOT_H

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace medrun {

/// (step, value) points in step order; non-finite values are left out when drawing.
using Curve = std::vector<std::pair<int64_t, double>>;

struct ProgressHistory {
  Curve loss;      ///< training loss per step
  Curve dice;      ///< validation Dice
  Curve diceEma;   ///< its moving average
  Curve stepTime;  ///< seconds per step
  Curve lr;        ///< learning rate per step
};

using Rgb = std::array<uint8_t, 3>;

/// An RGB image, rows top to bottom, 3 bytes a pixel.
struct Raster {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
  Raster(int w, int h, Rgb fill);
  Rgb at(int x, int y) const;
  void set(int x, int y, Rgb c); ///< ignores points outside
  /// A segment `thickness` px wide (a square pen), ends included.
  void line(double x0, double y0, double x1, double y1, Rgb c, int thickness = 1);
  void fillRect(int x0, int y0, int x1, int y1, Rgb c); ///< [x0, x1] x [y0, y1]
};

/// A panel's plot area in pixels and the values it spans: a value's pixel is
/// x = left + (step - x0) / (x1 - x0) * (right - left), y = bottom - (v - lo) / (hi - lo) *
/// (bottom - top) (pixel centres; the frame's lines lie on left, right, top and bottom).
struct PlotPanel {
  int left = 0, top = 0, right = 0, bottom = 0;
  double x0 = 0, x1 = 1, lo = 0, hi = 1;
  double x(double step) const;
  double y(double v) const;
};

/// Where the plot puts values. Every panel spans x from 100 to width - 90; panel 1 (loss,
/// and the Dice on the same area from 0 to 1) y from 60 to 60 + 0.4 height, panel 2 (step
/// time) from there + 70 for 0.18 height, panel 3 (learning rate) from there + 70 to
/// height - 50. Value ranges: the curve's finite values, lowest to highest with 5%
/// margins of the span (of 10% of |v| for a single value v, of 0.1 for 0); x from the
/// first to the last step of any curve (one step: that step to the next).
struct PlotLayout {
  PlotPanel loss, dice, time, lr;
};

namespace plot {
inline constexpr Rgb kLoss{170, 199, 232}, kLossAverage{31, 119, 180}, kDice{44, 160, 44},
    kDiceEma{255, 127, 14}, kTime{31, 119, 180}, kLr{31, 119, 180};
} // namespace plot

/// The trailing moving average of the loss that the plot draws: the mean of the last
/// max(1, n / 20) finite values at each point (n: finite values of the curve).
Curve movingAverage(const Curve &loss);

/// The layout for `history` in an image of width x height.
PlotLayout plotLayout(const ProgressHistory &history, int width, int height);

/// "Nice" tick values within [lo, hi], as a plot library places them: multiples of 1, 2 or
/// 5 x 10^k, about `count` of them (at least two where the range allows).
std::vector<double> niceTicks(double lo, double hi, int count = 6);

/// A tick value as its label: as many decimals as the tick spacing `step` needs ("0.25",
/// "1500", "0"); for steps below 1e-3 or values from 1e5 in scientific notation with the
/// digits down to the step's ("1.05e-03" for steps of 5e-5).
std::string tickLabel(double value, double step);

/// Draws the plot with cairo (layout as plotLayout). Throws Error when medrun was built
/// without cairo (progressPlotSupported).
Raster drawProgress(const ProgressHistory &history, int width = 960, int height = 1000);

/// True if medrun was built with libpng (writePng works).
bool pngSupported();

/// True if medrun was built with libpng and cairo (libcairo2-dev): progress.png is drawn.
bool progressPlotSupported();

/// Writes `image` as an 8-bit RGB PNG (libpng), atomically: a temporary file renamed over
/// `path`. Throws Error naming the file (and, built without libpng, the package to install).
void writePng(const std::string &path, const Raster &image);

/// `image` as the bytes of an 8-bit RGB PNG file (libpng), e.g. for a TensorBoard image
/// summary. Throws Error (built without libpng: naming the package to install).
std::string encodePng(const Raster &image);

} // namespace medrun

#endif // MEDRUN_PROGRESSPLOT_H
