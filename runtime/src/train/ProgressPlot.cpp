//===- ProgressPlot.cpp - progress.png: cairo's paths and text, libpng ---------------===//
#include "medrun/ProgressPlot.h"

#include "medrun/Error.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <tuple>

#ifdef MEDRUN_HAVE_PNG
#include <png.h>
#endif
#ifdef MEDRUN_HAVE_CAIRO
#include <cairo.h>
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

double PlotPanel::x(double step) const { return left + (step - x0) / (x1 - x0) * (right - left); }
double PlotPanel::y(double v) const { return bottom - (v - lo) / (hi - lo) * (bottom - top); }

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

namespace {

// A curve's finite values, lowest to highest with 5% margins ([0, 1] for none).
std::pair<double, double> valueRange(const Curve &c) {
  bool any = false;
  double lo = 0, hi = 0;
  for (const auto &[step, v] : c)
    if (std::isfinite(v)) {
      lo = any ? std::min(lo, v) : v;
      hi = any ? std::max(hi, v) : v;
      any = true;
    }
  if (!any)
    return {0, 1};
  double span = hi - lo;
  if (span <= 0) // one value: 10% of it (a constant learning rate of 1e-3 stays readable)
    span = hi != 0 ? std::fabs(hi) * 0.1 : 0.1;
  return {lo - 0.05 * span, hi + 0.05 * span};
}

} // namespace

PlotLayout plotLayout(const ProgressHistory &h, int width, int height) {
  PlotLayout l;
  double x0 = 0, x1 = 0;
  bool anyStep = false;
  for (const Curve *c : {&h.loss, &h.dice, &h.diceEma, &h.stepTime, &h.lr})
    for (const auto &[step, v] : *c) {
      const double s = static_cast<double>(step);
      x0 = anyStep ? std::min(x0, s) : s;
      x1 = anyStep ? std::max(x1, s) : s;
      anyStep = true;
    }
  if (x1 <= x0)
    x1 = x0 + 1;
  auto panel = [&](int top, int bottom, std::pair<double, double> range) {
    PlotPanel p;
    p.left = 100; // room for tick labels as long as 1.005e-03
    p.right = width - 90;
    p.top = top;
    p.bottom = bottom;
    p.x0 = x0;
    p.x1 = x1;
    std::tie(p.lo, p.hi) = range;
    return p;
  };
  const int lossBottom = 60 + static_cast<int>(std::lround(0.4 * height));
  const int timeTop = lossBottom + 70;
  const int timeBottom = timeTop + static_cast<int>(std::lround(0.18 * height));
  l.loss = panel(60, lossBottom, valueRange(h.loss));
  l.dice = panel(60, lossBottom, {0.0, 1.0});
  l.time = panel(timeTop, timeBottom, valueRange(h.stepTime));
  l.lr = panel(timeBottom + 70, height - 50, valueRange(h.lr));
  return l;
}

std::vector<double> niceTicks(double lo, double hi, int count) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi))
    return ticks;
  const double rough = (hi - lo) / std::max(1, count - 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(rough)));
  double step = magnitude;
  for (double f : {1.0, 2.0, 5.0, 10.0})
    if (f * magnitude >= rough) {
      step = f * magnitude;
      break;
    }
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + 1e-9 * step; k += 1)
    ticks.push_back(std::fabs(k) < 0.5 ? 0.0 : k * step);
  return ticks;
}

std::string tickLabel(double value, double step) {
  char text[48];
  const int k = static_cast<int>(std::floor(std::log10(step) + 1e-9)); // step = m x 10^k
  if (value == 0) {
    std::snprintf(text, sizeof text, "0");
  } else if (k >= -3 && std::fabs(value) < 1e5) {
    std::snprintf(text, sizeof text, "%.*f", std::max(0, -k), value);
  } else { // the digits down to the step's: 1.05e-03 for steps of 5e-5
    const int e = static_cast<int>(std::floor(std::log10(std::fabs(value)) + 1e-9));
    std::snprintf(text, sizeof text, "%.*e", std::max(0, e - k), value);
  }
  return text;
}

#ifdef MEDRUN_HAVE_CAIRO
namespace {

void setColour(cairo_t *cr, Rgb c) { cairo_set_source_rgb(cr, c[0] / 255.0, c[1] / 255.0, c[2] / 255.0); }

// Text at (x, y): `ax`, `ay` the anchor within its extents (0 left/top, 0.5 centre, 1
// right/bottom), turned by `angle` (radians) about the anchor.
void text(cairo_t *cr, const std::string &s, double x, double y, double ax, double ay,
          double angle = 0) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, angle);
  cairo_move_to(cr, -e.x_bearing - ax * e.width, -e.y_bearing - ay * e.height);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

// A 1 px line between pixel centres.
void hairline(cairo_t *cr, double x0, double y0, double x1, double y1) {
  cairo_move_to(cr, x0 + 0.5, y0 + 0.5);
  cairo_line_to(cr, x1 + 0.5, y1 + 0.5);
  cairo_stroke(cr);
}

// The frame, grid, tick numbers and labels of a panel: x ticks (steps) below, y ticks on the
// left, and with `right` a second axis (its own range) on the right.
void axes(cairo_t *cr, const PlotPanel &p, const std::string &yLabel, const PlotPanel *right,
          const std::string &rightLabel) {
  const Rgb grid{225, 225, 225}, ink{0, 0, 0};
  cairo_set_line_width(cr, 1);
  std::vector<double> xt = niceTicks(p.x0, p.x1, 8);
  std::vector<double> xs;
  for (double t : xt) // steps are integers
    if (t == std::floor(t))
      xs.push_back(t);
  const std::vector<double> yt = niceTicks(p.lo, p.hi, 6);
  setColour(cr, grid);
  for (double t : xs)
    hairline(cr, std::lround(p.x(t)), p.top, std::lround(p.x(t)), p.bottom);
  for (double t : yt)
    hairline(cr, p.left, std::lround(p.y(t)), p.right, std::lround(p.y(t)));
  cairo_set_font_size(cr, 13);
  setColour(cr, ink);
  const double xStep = xs.size() > 1 ? xs[1] - xs[0] : 1, yStep = yt.size() > 1 ? yt[1] - yt[0] : 1;
  for (double t : xs) {
    const long x = std::lround(p.x(t));
    hairline(cr, x, p.bottom, x, p.bottom + 5);
    text(cr, tickLabel(t, xStep), x + 0.5, p.bottom + 9, 0.5, 0);
  }
  for (double t : yt) {
    const long y = std::lround(p.y(t));
    hairline(cr, p.left - 5, y, p.left, y);
    text(cr, tickLabel(t, yStep), p.left - 9, y + 0.5, 1, 0.5);
  }
  if (right) {
    const std::vector<double> rt = niceTicks(right->lo, right->hi, 6);
    const double rStep = rt.size() > 1 ? rt[1] - rt[0] : 1;
    for (double t : rt) {
      const long y = std::lround(right->y(t));
      hairline(cr, p.right, y, p.right + 5, y);
      text(cr, tickLabel(t, rStep), p.right + 9, y + 0.5, 0, 0.5);
    }
  }
  cairo_set_font_size(cr, 15);
  text(cr, "step", (p.left + p.right) / 2.0, p.bottom + 28, 0.5, 0);
  text(cr, yLabel, 18, (p.top + p.bottom) / 2.0, 0.5, 0.5, -M_PI / 2);
  if (right)
    text(cr, rightLabel, p.right + 68, (p.top + p.bottom) / 2.0, 0.5, 0.5, M_PI / 2);
  cairo_rectangle(cr, p.left + 0.5, p.top + 0.5, p.right - p.left, p.bottom - p.top);
  cairo_stroke(cr);
}

void polyline(cairo_t *cr, const PlotPanel &p, const Curve &c, Rgb colour, double width) {
  setColour(cr, colour);
  cairo_set_line_width(cr, width);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  bool have = false;
  for (const auto &[step, v] : c) {
    if (!std::isfinite(v))
      continue;
    const double x = p.x(static_cast<double>(step)) + 0.5, y = p.y(v) + 0.5;
    if (have)
      cairo_line_to(cr, x, y);
    else
      cairo_move_to(cr, x, y), cairo_line_to(cr, x, y); // a lone point is a dot
    have = true;
  }
  cairo_stroke(cr);
}

} // namespace
#endif

Raster drawProgress(const ProgressHistory &h, int width, int height) {
#ifdef MEDRUN_HAVE_CAIRO
  const PlotLayout l = plotLayout(h, width, height);
  cairo_surface_t *surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  cairo_t *cr = cairo_create(surface);
  if (cairo_status(cr) != CAIRO_STATUS_SUCCESS) {
    std::string why = cairo_status_to_string(cairo_status(cr));
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
    throw Error(str("cannot draw progress.png (cairo: ", why, ")"));
  }
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);

  // Panel 1: the losses and the Dice; the legend above it.
  axes(cr, l.loss, "loss", &l.dice, "pseudo Dice");
  cairo_save(cr);
  cairo_rectangle(cr, l.loss.left, l.loss.top, l.loss.right - l.loss.left + 1,
                  l.loss.bottom - l.loss.top + 1);
  cairo_clip(cr);
  polyline(cr, l.loss, h.loss, plot::kLoss, 1);
  polyline(cr, l.loss, movingAverage(h.loss), plot::kLossAverage, 3);
  polyline(cr, l.dice, h.diceEma, plot::kDiceEma, 3);
  polyline(cr, l.dice, h.dice, plot::kDice, 1);
  setColour(cr, plot::kDice);
  for (const auto &[step, v] : h.dice)
    if (std::isfinite(v)) {
      const long x = std::lround(l.dice.x(static_cast<double>(step)));
      const long y = std::lround(l.dice.y(v));
      cairo_rectangle(cr, x - 2, y - 2, 5, 5);
    }
  cairo_fill(cr);
  cairo_restore(cr);
  struct Entry {
    const char *label;
    Rgb colour;
    double width;
  };
  const Entry legend[] = {{"loss (train)", plot::kLoss, 2},
                          {"loss (moving average)", plot::kLossAverage, 3},
                          {"pseudo Dice (validation)", plot::kDice, 2},
                          {"pseudo Dice (moving average)", plot::kDiceEma, 3}};
  cairo_set_font_size(cr, 13);
  double x = l.loss.left;
  const double y = l.loss.top - 30;
  for (const Entry &e : legend) {
    setColour(cr, e.colour);
    cairo_set_line_width(cr, e.width);
    cairo_move_to(cr, x, y + 0.5);
    cairo_line_to(cr, x + 24, y + 0.5);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_text_extents_t ext;
    cairo_text_extents(cr, e.label, &ext);
    text(cr, e.label, x + 30, y + 0.5, 0, 0.5);
    x += 30 + ext.x_advance + 24;
  }

  // Panels 2 and 3: the step time and the learning rate.
  for (auto [panel, curve, label, colour] :
       {std::tuple{&l.time, &h.stepTime, "step time [s]", plot::kTime},
        std::tuple{&l.lr, &h.lr, "learning rate", plot::kLr}}) {
    axes(cr, *panel, label, nullptr, "");
    cairo_save(cr);
    cairo_rectangle(cr, panel->left, panel->top, panel->right - panel->left + 1,
                    panel->bottom - panel->top + 1);
    cairo_clip(cr);
    polyline(cr, *panel, *curve, colour, 2);
    cairo_restore(cr);
  }

  cairo_surface_flush(surface);
  Raster r(width, height, Rgb{255, 255, 255});
  const unsigned char *data = cairo_image_surface_get_data(surface);
  const int stride = cairo_image_surface_get_stride(surface);
  for (int row = 0; row < height; ++row)
    for (int col = 0; col < width; ++col) {
      uint32_t px; // CAIRO_FORMAT_RGB24: 0x00RRGGBB in native byte order
      std::memcpy(&px, data + static_cast<size_t>(row) * stride + 4 * col, 4);
      r.set(col, row, Rgb{static_cast<uint8_t>(px >> 16), static_cast<uint8_t>(px >> 8),
                          static_cast<uint8_t>(px)});
    }
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
  return r;
#else
  (void)h, (void)width, (void)height;
  throw Error("medrun was built without cairo (install libcairo2-dev and rebuild): no "
              "progress.png");
#endif
}

bool progressPlotSupported() {
#ifdef MEDRUN_HAVE_CAIRO
  return pngSupported();
#else
  return false;
#endif
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
