//===- Progress.cpp - progress bar or periodic lines ---------------------------------===//
//
// The bar follows tqdm's default layout, '{desc}: {percentage}%|{bar}| {n}/{total}
// [{elapsed}<{remaining}, {rate}{postfix}]', and its rate: an exponential moving average
// (smoothing 0.3, bias-corrected) of the steps per second between updates.
//
//===----------------------------------------------------------------------------------===//
#include "medrun/Error.h"
#include "medrun/TrainLog.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <sys/ioctl.h>
#include <unistd.h>

namespace medrun {

namespace {

constexpr double kSmoothing = 0.3;

std::string fmt(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

bool utf8Locale() {
  for (const char *var : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char *v = std::getenv(var);
    if (v && *v) {
      std::string s(v);
      std::transform(s.begin(), s.end(), s.begin(), ::tolower);
      return s.find("utf-8") != std::string::npos || s.find("utf8") != std::string::npos;
    }
  }
  return false;
}

int terminalWidth(FILE *out) {
  struct winsize ws {};
  if (::ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
    return ws.ws_col;
  if (const char *c = std::getenv("COLUMNS"))
    if (int w = std::atoi(c); w > 0)
      return w;
  return 80;
}

/// The bar of `cells` cells, `frac` full; the last cell partly filled (tqdm's rendering).
std::string renderBar(double frac, int cells, bool ascii) {
  static const char *const unicode[] = {" ", "▏", "▎", "▍", "▌", "▋", "▊", "▉", "█"};
  static const char *const plain[] = {" ", "1", "2", "3", "4", "5", "6", "7", "8", "9", "#"};
  const char *const *sym = ascii ? plain : unicode;
  int levels = ascii ? 10 : 8;
  // (The epsilon keeps 0.37 * 100 from rounding down to 36.)
  auto units = static_cast<int64_t>(std::clamp(frac, 0.0, 1.0) * cells * levels + 1e-9);
  int64_t full = units / levels, part = units % levels;
  std::string s;
  for (int64_t i = 0; i < full; ++i)
    s += sym[levels];
  if (full < cells) {
    s += sym[part];
    for (int64_t i = full + 1; i < cells; ++i)
      s += sym[0];
  }
  return s;
}

std::string postfixText(const std::vector<std::pair<std::string, double>> &postfix) {
  std::string s;
  for (const auto &[k, v] : postfix)
    s += ", " + k + "=" + fmt("%.4g", v);
  return s;
}

std::string rateText(double rate) {
  if (!(rate > 0))
    return "?it/s";
  return rate >= 1 ? fmt("%.2fit/s", rate) : fmt("%.2fs/it", 1 / rate);
}

double monotonic() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

} // namespace

std::string Progress::formatInterval(double seconds) {
  // Truncated to the second, as tqdm does (the epsilon absorbs rounding of the rate).
  auto t = static_cast<int64_t>(std::max(0.0, seconds) + 1e-6);
  int64_t h = t / 3600, m = t / 60 % 60, s = t % 60;
  char buf[64];
  if (h)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)h, (long long)m, (long long)s);
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", (long long)m, (long long)s);
  return buf;
}

Progress::Progress(FILE *out, Options options) : out_(out), o_(std::move(options)) {
  if (!o_.clock)
    o_.clock = monotonic;
  if (o_.mode == Mode::Auto) {
    const char *term = std::getenv("TERM");
    bar_ = ::isatty(fileno(out_)) && !(term && std::strcmp(term, "dumb") == 0);
  } else {
    bar_ = o_.mode == Mode::Bar;
  }
  ascii_ = o_.ascii ? *o_.ascii : !utf8Locale();
  start_ = lastUpdateTime_ = now_ = o_.clock();
  n_ = lastUpdateN_ = o_.initial;
}

Progress::~Progress() {
  if (bar_ && drawn_ && !finished_) {
    std::fputs("\n", out_);
    std::fflush(out_);
  }
}

std::string Progress::statusText(bool forBar, int width) const {
  const double elapsed = now_ - start_;
  const bool known = o_.total > 0;
  const double frac = known ? static_cast<double>(n_) / static_cast<double>(o_.total) : 0;
  const std::string remaining =
      known && rate_ > 0 ? formatInterval(static_cast<double>(std::max<int64_t>(o_.total - n_, 0)) / rate_)
                         : "?";
  const std::string post = postfixText(postfix_);
  const std::string count = known ? str(n_, "/", o_.total) : str(n_);
  const std::string percent = fmt("%3.0f%%", std::floor(std::min(frac, 1.0) * 100));
  if (!forBar) {
    std::string s = o_.desc + ": step " + count;
    if (known)
      s += " (" + fmt("%.0f%%", std::floor(std::min(frac, 1.0) * 100)) + ")";
    s += ", " + formatInterval(elapsed) + " elapsed";
    if (known)
      s += ", " + remaining + " left";
    return s + ", " + rateText(rate_) + post;
  }
  if (!known) // tqdm without a total: 'desc: n it [elapsed, rate, postfix]'
    return o_.desc + ": " + count + "it [" + formatInterval(elapsed) + ", " + rateText(rate_) +
           post + "]";
  std::string left = o_.desc + ": " + percent + "|";
  std::string right = "| " + count + " [" + formatInterval(elapsed) + "<" + remaining + ", " +
                      rateText(rate_) + post + "]";
  int cells = width - 1 - static_cast<int>(left.size() + right.size());
  if (cells < 5) // no room for a bar: the text alone, cut to the width
    return (o_.desc + ": " + percent + " " + right.substr(2)).substr(0, std::max(width - 1, 1));
  return left + renderBar(frac, cells, ascii_) + right;
}

void Progress::draw() {
  lastDrawTime_ = now_;
  lastPrintedN_ = n_;
  if (bar_) {
    int width = o_.width > 0 ? o_.width : terminalWidth(out_);
    std::string line = "\r" + statusText(true, width) + "\x1b[K";
    std::fputs(line.c_str(), out_);
    drawn_ = true;
  } else {
    std::fputs((statusText(false, 0) + "\n").c_str(), out_);
  }
  std::fflush(out_);
}

void Progress::update(int64_t step, const std::vector<std::pair<std::string, double>> &postfix) {
  if (finished_)
    return;
  now_ = o_.clock();
  n_ = step;
  postfix_ = postfix;
  double dt = now_ - lastUpdateTime_;
  if (n_ > lastUpdateN_ && dt > 0) {
    double inst = static_cast<double>(n_ - lastUpdateN_) / dt;
    rateEma_ = kSmoothing * inst + (1 - kSmoothing) * rateEma_;
    rateWeight_ = kSmoothing + (1 - kSmoothing) * rateWeight_;
    rate_ = rateEma_ / rateWeight_;
    lastUpdateTime_ = now_;
    lastUpdateN_ = n_;
  }
  bool due;
  if (bar_) {
    due = now_ - lastDrawTime_ >= o_.minRedrawSeconds || (o_.total > 0 && n_ >= o_.total);
  } else {
    due = lastPrintedN_ < 0 ||
          (o_.every > 0 && n_ / o_.every != lastPrintedN_ / o_.every) ||
          (o_.everySeconds > 0 && now_ - lastDrawTime_ >= o_.everySeconds);
  }
  if (due)
    draw();
}

void Progress::message(const std::string &text) {
  if (bar_ && drawn_) {
    std::fputs(("\r" + text + "\x1b[K\n").c_str(), out_);
    now_ = o_.clock();
    draw();
  } else {
    std::fputs((text + "\n").c_str(), out_);
    std::fflush(out_);
  }
}

void Progress::finish(const std::vector<std::pair<std::string, double>> &postfix) {
  if (finished_)
    return;
  now_ = o_.clock();
  if (!postfix.empty())
    postfix_ = postfix;
  if (bar_) {
    draw();
    std::fputs("\n", out_);
  }
  finished_ = true;
  const double elapsed = now_ - start_;
  const int64_t done = n_ - o_.initial;
  std::string s = o_.desc + ": done at step " + (o_.total > 0 ? str(n_, "/", o_.total) : str(n_)) +
                  ", " + str(done) + " steps in " + formatInterval(elapsed);
  if (elapsed > 0 && done > 0)
    s += " (" + rateText(static_cast<double>(done) / elapsed) + ")";
  std::fputs((s + postfixText(postfix_) + "\n").c_str(), out_);
  std::fflush(out_);
}

} // namespace medrun
