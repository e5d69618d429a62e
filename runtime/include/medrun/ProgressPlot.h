//===- ProgressPlot.h - progress.png: loss and validation curves --------------------===//
//
// The plot nnU-Net draws as progress.png, in one panel (RGB, white background):
//
//   training loss of each step          light blue, 1 px     left axis: from the lowest to
//   its trailing moving average         blue, 3 px           the highest loss, 5% margin
//   validation Dice at each validation  green, 1 px, dots    right axis: 0 (bottom) to 1
//   exponential moving average of it    orange, 3 px         (0.9 old + 0.1 new, as nnU-Net)
//
// x: the steps, from the first to the last one plotted. Grey grid lines at quarters of each
// axis, a black frame, ticks on both sides; the legend is four swatches of the colours, top
// left inside the frame, in the order above. No text.
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

/// Where the plot puts values: pixel x = left + (step - x0) / (x1 - x0) * (right - left),
/// y = bottom - (v - lo) / (hi - lo) * (bottom - top) for the loss (lo, hi) and with 0 and
/// 1 for the Dice.
struct PlotLayout {
  int left = 0, top = 0, right = 0, bottom = 0;
  double x0 = 0, x1 = 1, lo = 0, hi = 1;
  double x(double step) const;
  double yLoss(double v) const;
  double yDice(double v) const;
};

namespace plot {
inline constexpr Rgb kLoss{170, 199, 232}, kLossAverage{31, 119, 180}, kDice{44, 160, 44},
    kDiceEma{255, 127, 14};
} // namespace plot

/// The trailing moving average of the loss that the plot draws: the mean of the last
/// max(1, n / 20) finite values at each point (n: finite values of the curve).
Curve movingAverage(const Curve &loss);

/// The layout for `history` in an image of width x height.
PlotLayout plotLayout(const ProgressHistory &history, int width, int height);

/// Draws the plot (layout as plotLayout).
Raster drawProgress(const ProgressHistory &history, int width = 960, int height = 480);

/// True if medrun was built with libpng (writePng works).
bool pngSupported();

/// Writes `image` as an 8-bit RGB PNG (libpng), atomically: a temporary file renamed over
/// `path`. Throws Error naming the file (and, built without libpng, the package to install).
void writePng(const std::string &path, const Raster &image);

/// `image` as the bytes of an 8-bit RGB PNG file (libpng), e.g. for a TensorBoard image
/// summary. Throws Error (built without libpng: naming the package to install).
std::string encodePng(const Raster &image);

} // namespace medrun

#endif // MEDRUN_PROGRESSPLOT_H
