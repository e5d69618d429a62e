//===- ProgressPlot.cpp - progress.png: a small rasterizer and libpng ---------------===//
#include "medrun/ProgressPlot.h"

#include "medrun/Error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#ifdef MEDRUN_HAVE_PNG
#include <png.h>
#endif

namespace medrun {

Raster::Raster(int w, int h, Rgb fill) : width(w), height(h), pixels(size_t(w) * h * 3) {
  for (size_t i = 0; i < pixels.size(); i += 3)
    std::copy(fill.begin(), fill.end(), pixels.begin() + i);
}

Rgb Raster::at(int x, int y) const {
  const uint8_t *p = &pixels[(size_t(y) * width + x) * 3];
  return {p[0], p[1], p[2]};
}

void Raster::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width || y >= height)
    return;
  std::copy(c.begin(), c.end(), pixels.begin() + (size_t(y) * width + x) * 3);
}

void Raster::fillRect(int x0, int y0, int x1, int y1, Rgb c) {
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x)
      set(x, y, c);
}

void Raster::line(double x0, double y0, double x1, double y1, Rgb c, int thickness) {
  // Samples every half pixel, each stamped with the pen: simple, and no gaps.
  const int lo = -(thickness - 1) / 2, hi = thickness / 2;
  const int n = static_cast<int>(std::ceil(std::max(std::fabs(x1 - x0), std::fabs(y1 - y0)) * 2));
  for (int i = 0; i <= n; ++i) {
    const double t = n ? static_cast<double>(i) / n : 0;
    const int x = static_cast<int>(std::lround(x0 + (x1 - x0) * t));
    const int y = static_cast<int>(std::lround(y0 + (y1 - y0) * t));
    fillRect(x + lo, y + lo, x + hi, y + hi, c);
  }
}

double PlotLayout::x(double step) const { return left + (step - x0) / (x1 - x0) * (right - left); }
double PlotLayout::yLoss(double v) const { return bottom - (v - lo) / (hi - lo) * (bottom - top); }
double PlotLayout::yDice(double v) const { return bottom - v * (bottom - top); }

Curve movingAverage(const Curve &loss) {
  Curve finite;
  for (const auto &p : loss)
    if (std::isfinite(p.second))
      finite.push_back(p);
  const size_t w = std::max<size_t>(1, finite.size() / 20);
  Curve out;
  double sum = 0;
  for (size_t i = 0; i < finite.size(); ++i) {
    sum += finite[i].second;
    if (i >= w)
      sum -= finite[i - w].second;
    out.push_back({finite[i].first, sum / static_cast<double>(std::min(i + 1, w))});
  }
  return out;
}

PlotLayout plotLayout(const ProgressHistory &h, int width, int height) {
  PlotLayout l;
  l.left = 50;
  l.right = width - 50;
  l.top = 20;
  l.bottom = height - 30;
  bool anyStep = false, anyLoss = false;
  double lo = 0, hi = 0;
  for (const Curve *c : {&h.loss, &h.dice, &h.diceEma})
    for (const auto &[step, v] : *c) {
      const double s = static_cast<double>(step);
      l.x0 = anyStep ? std::min(l.x0, s) : s;
      l.x1 = anyStep ? std::max(l.x1, s) : s;
      anyStep = true;
      if (c == &h.loss && std::isfinite(v)) {
        lo = anyLoss ? std::min(lo, v) : v;
        hi = anyLoss ? std::max(hi, v) : v;
        anyLoss = true;
      }
    }
  if (!anyStep)
    l.x0 = 0;
  if (l.x1 <= l.x0)
    l.x1 = l.x0 + 1;
  if (!anyLoss)
    lo = 0, hi = 1;
  double span = hi - lo;
  if (span <= 0)
    span = std::max(std::fabs(hi), 1.0) * 0.1;
  l.lo = lo - 0.05 * span;
  l.hi = hi + 0.05 * span;
  return l;
}

Raster drawProgress(const ProgressHistory &h, int width, int height) {
  const Rgb white{255, 255, 255}, grid{225, 225, 225}, black{0, 0, 0};
  Raster r(width, height, white);
  const PlotLayout l = plotLayout(h, width, height);
  for (int i = 1; i < 4; ++i) {
    const double gy = l.top + (l.bottom - l.top) * i / 4.0, gx = l.left + (l.right - l.left) * i / 4.0;
    r.line(l.left, gy, l.right, gy, grid);
    r.line(gx, l.top, gx, l.bottom, grid);
  }
  auto polyline = [&](const Curve &c, bool dice, Rgb colour, int thickness) {
    bool have = false;
    double px = 0, py = 0;
    for (const auto &[step, v] : c) {
      if (!std::isfinite(v))
        continue;
      const double x = l.x(static_cast<double>(step)), y = dice ? l.yDice(v) : l.yLoss(v);
      if (have)
        r.line(px, py, x, y, colour, thickness);
      else
        r.line(x, y, x, y, colour, thickness);
      px = x, py = y, have = true;
    }
  };
  polyline(h.loss, false, plot::kLoss, 1);
  polyline(movingAverage(h.loss), false, plot::kLossAverage, 3);
  polyline(h.diceEma, true, plot::kDiceEma, 3);
  polyline(h.dice, true, plot::kDice, 1);
  for (const auto &[step, v] : h.dice)
    if (std::isfinite(v)) {
      const int x = static_cast<int>(std::lround(l.x(static_cast<double>(step))));
      const int y = static_cast<int>(std::lround(l.yDice(v)));
      r.fillRect(x - 2, y - 2, x + 2, y + 2, plot::kDice);
    }
  // Frame and ticks (quarters of each axis) over the curves.
  r.line(l.left, l.top, l.right, l.top, black);
  r.line(l.left, l.bottom, l.right, l.bottom, black);
  r.line(l.left, l.top, l.left, l.bottom, black);
  r.line(l.right, l.top, l.right, l.bottom, black);
  for (int i = 0; i <= 4; ++i) {
    const double ty = l.top + (l.bottom - l.top) * i / 4.0, tx = l.left + (l.right - l.left) * i / 4.0;
    r.line(l.left - 5, ty, l.left, ty, black);
    r.line(l.right, ty, l.right + 5, ty, black);
    r.line(tx, l.bottom, tx, l.bottom + 5, black);
  }
  const Rgb legend[] = {plot::kLoss, plot::kLossAverage, plot::kDice, plot::kDiceEma};
  for (int i = 0; i < 4; ++i) {
    const int x = l.left + 8 + 22 * i, y = l.top + 8;
    r.fillRect(x - 1, y - 1, x + 14, y + 8, black);
    r.fillRect(x, y, x + 13, y + 7, legend[i]);
  }
  return r;
}

bool pngSupported() {
#ifdef MEDRUN_HAVE_PNG
  return true;
#else
  return false;
#endif
}

std::string encodePng(const Raster &image) {
#ifdef MEDRUN_HAVE_PNG
  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  // First the size, then the bytes.
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), 0, nullptr)) {
    std::string why = png.message;
    png_image_free(&png);
    throw Error(str("cannot encode a PNG (libpng: ", why, ")"));
  }
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&png, bytes.data(), &size, 0, image.pixels.data(), 0, nullptr)) {
    std::string why = png.message;
    png_image_free(&png);
    throw Error(str("cannot encode a PNG (libpng: ", why, ")"));
  }
  bytes.resize(size);
  return bytes;
#else
  throw Error("medrun was built without libpng (install libpng-dev and rebuild): no PNG images");
#endif
}

void writePng(const std::string &path, const Raster &image) {
#ifdef MEDRUN_HAVE_PNG
  std::string bytes;
  try {
    bytes = encodePng(image);
  } catch (const Error &e) {
    throw Error(str(path, ": ", e.what()));
  }
  // Written beside it, then renamed: a reader never sees half a picture.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush()) {
      std::remove(tmp.c_str());
      throw Error(str(path, ": cannot write the PNG"));
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(str(path, ": cannot replace it: ", ec.message()));
  }
#else
  throw Error(str(path, ": medrun was built without libpng (install libpng-dev and rebuild)"));
#endif
}

} // namespace medrun
