// The cairo plotting helpers of Plot.h.
#include "tools/attnc/Plot.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <string>

namespace attnc::plot {

namespace {

Color rgb(unsigned hex) {
  return {double((hex >> 16) & 255) / 255, double((hex >> 8) & 255) / 255,
          double(hex & 255) / 255};
}

/// Linear interpolation between evenly spaced colours.
Color interpolate(llvm::ArrayRef<unsigned> stops, double t) {
  if (std::isnan(t))
    return {0.8, 0.8, 0.8};
  t = std::clamp(t, 0.0, 1.0) * double(stops.size() - 1);
  size_t i = std::min(size_t(t), stops.size() - 2);
  return mix(rgb(stops[i]), rgb(stops[i + 1]), t - double(i));
}

void setColor(cairo_t *cr, Color c) {
  cairo_set_source_rgba(cr, c.r, c.g, c.b, c.a);
}

} // namespace

Color mix(Color a, Color b, double t) {
  return {a.r + t * (b.r - a.r), a.g + t * (b.g - a.g), a.b + t * (b.b - a.b),
          a.a + t * (b.a - a.a)};
}

Color viridis(double t) {
  static const unsigned stops[] = {0x440154, 0x482475, 0x414487, 0x355f8d,
                                   0x2a788e, 0x21918c, 0x22a884, 0x44bf70,
                                   0x7ad151, 0xbddf26, 0xfde725};
  return interpolate(stops, t);
}

Color blues(double t) {
  static const unsigned stops[] = {0xffffff, 0xc6dbef, 0x6baed6, 0x2171b5,
                                   0x08306b};
  return interpolate(stops, t);
}

Color qualitative(int index) {
  static const unsigned tab10[] = {0x1f77b4, 0xff7f0e, 0x2ca02c, 0xd62728,
                                   0x9467bd, 0x8c564b, 0xe377c2, 0x7f7f7f,
                                   0xbcbd22, 0x17becf};
  return rgb(tab10[unsigned(index) % 10]);
}

Canvas::Canvas(int width, int height) : w(width), h(height) {
  surface = cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height);
  cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
}

Canvas::~Canvas() {
  cairo_destroy(cr);
  cairo_surface_destroy(surface);
}

void Canvas::fill(const Rect &rect, Color color, bool snap) {
  cairo_save(cr);
  setColor(cr, color);
  if (snap) {
    cairo_set_antialias(cr, CAIRO_ANTIALIAS_NONE);
    double x0 = std::round(rect.x), y0 = std::round(rect.y);
    double x1 = std::round(rect.right()), y1 = std::round(rect.bottom());
    cairo_rectangle(cr, x0, y0, x1 - x0, y1 - y0);
  } else {
    cairo_rectangle(cr, rect.x, rect.y, rect.w, rect.h);
  }
  cairo_fill(cr);
  cairo_restore(cr);
}

void Canvas::stroke(const Rect &rect, Color color, double lineWidth) {
  cairo_save(cr);
  setColor(cr, color);
  cairo_set_line_width(cr, lineWidth);
  cairo_rectangle(cr, rect.x, rect.y, rect.w, rect.h);
  cairo_stroke(cr);
  cairo_restore(cr);
}

void Canvas::line(double x0, double y0, double x1, double y1, Color color,
                  double lineWidth, bool dashed) {
  cairo_save(cr);
  setColor(cr, color);
  cairo_set_line_width(cr, lineWidth);
  if (dashed) {
    double dashes[] = {5, 3};
    cairo_set_dash(cr, dashes, 2, 0);
  }
  cairo_move_to(cr, x0, y0);
  cairo_line_to(cr, x1, y1);
  cairo_stroke(cr);
  cairo_restore(cr);
}

void Canvas::selectFont(double size, bool bold, bool mono) {
  cairo_select_font_face(
      cr, mono ? "DejaVu Sans Mono" : "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
      bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double Canvas::textWidth(llvm::StringRef text, double size, bool bold,
                         bool mono) {
  selectFont(size, bold, mono);
  std::string s = text.str();
  cairo_text_extents_t extents;
  cairo_text_extents(cr, s.c_str(), &extents);
  return extents.x_advance;
}

void Canvas::text(double x, double y, llvm::StringRef text, double size,
                  Align align, Color color, bool bold, bool vertical,
                  bool mono) {
  cairo_save(cr);
  std::string s = text.str();
  double width = textWidth(text, size, bold, mono);
  cairo_font_extents_t font;
  cairo_font_extents(cr, &font);
  setColor(cr, color);
  cairo_translate(cr, x, y);
  if (vertical) {
    cairo_rotate(cr, -M_PI / 2);
    align = Align::Center;
  }
  double dx = align == Align::Left     ? 0
              : align == Align::Center ? -width / 2
                                       : -width;
  cairo_move_to(cr, dx, (font.ascent - font.descent) / 2);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

llvm::Error Canvas::writePng(const std::string &path) {
  cairo_surface_flush(surface);
  cairo_status_t status = cairo_surface_write_to_png(surface, path.c_str());
  if (status != CAIRO_STATUS_SUCCESS)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot write '" + path +
                                       "': " + cairo_status_to_string(status));
  return llvm::Error::success();
}

std::vector<double> niceTicks(double lo, double hi, int count, bool integers) {
  std::vector<double> ticks;
  if (!(hi > lo) || !std::isfinite(lo) || !std::isfinite(hi))
    return {lo};
  double raw = (hi - lo) / std::max(count, 1);
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * power >= raw) {
      step = m * power;
      break;
    }
  if (integers)
    step = std::max(1.0, std::round(step));
  double first = std::ceil(lo / step - 1e-9) * step;
  for (double t = first; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}

std::string formatNumber(double value) {
  if (std::isnan(value))
    return "nan";
  if (value == std::round(value) && std::fabs(value) < 1e9)
    return std::to_string(int64_t(value));
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

void drawAxes(Canvas &canvas, const Axes &axes, const AxesText &text) {
  const Rect &box = axes.box;
  double fs = text.fontSize;
  canvas.stroke(box, kBlack, 1);
  // x ticks below the box.
  auto xTick = [&](double x, const std::string &label) {
    double px = axes.px(x);
    canvas.line(px, box.bottom(), px, box.bottom() + 4, kBlack, 1);
    canvas.text(px, box.bottom() + 6 + fs * 0.6, label, fs * 0.9,
                Align::Center);
  };
  auto yTick = [&](double y, const std::string &label) {
    double py = axes.py(y);
    canvas.line(box.x - 4, py, box.x, py, kBlack, 1);
    canvas.text(box.x - 6, py, label, fs * 0.9, Align::Right);
  };
  if (!text.xTickLabels.empty())
    for (auto &[x, label] : text.xTickLabels)
      xTick(x, label);
  else
    for (double x :
         niceTicks(std::min(axes.x0, axes.x1), std::max(axes.x0, axes.x1),
                   text.xTicks, text.integerTicks))
      xTick(x, formatNumber(x));
  double widest = 0;
  auto widen = [&](const std::string &label) {
    widest = std::max(widest, canvas.textWidth(label, fs * 0.9));
  };
  if (!text.yTickLabels.empty())
    for (auto &[y, label] : text.yTickLabels) {
      yTick(y, label);
      widen(label);
    }
  else
    for (double y :
         niceTicks(std::min(axes.y0, axes.y1), std::max(axes.y0, axes.y1),
                   text.yTicks, text.integerTicks)) {
      yTick(y, formatNumber(y));
      widen(formatNumber(y));
    }
  if (!text.xLabel.empty())
    canvas.text(box.x + box.w / 2, box.bottom() + 8 + fs * 1.9, text.xLabel, fs,
                Align::Center);
  if (!text.yLabel.empty())
    canvas.text(box.x - 14 - widest - fs * 0.5, box.y + box.h / 2, text.yLabel,
                fs, Align::Center, kBlack, false,
                /*vertical=*/true);
  if (!text.title.empty())
    canvas.text(box.x + box.w / 2, box.y - fs * 1.1, text.title, fs * 1.1,
                Align::Center, kBlack, /*bold=*/true);
}

void drawCells(Canvas &canvas, const Axes &axes, llvm::ArrayRef<double> values,
               llvm::ArrayRef<double> rowEdges, llvm::ArrayRef<double> colEdges,
               llvm::function_ref<Color(double)> colour) {
  size_t rows = rowEdges.size() - 1, cols = colEdges.size() - 1;
  for (size_t r = 0; r < rows; ++r) {
    double y0 = axes.py(rowEdges[r]), y1 = axes.py(rowEdges[r + 1]);
    for (size_t c = 0; c < cols; ++c) {
      double x0 = axes.px(colEdges[c]), x1 = axes.px(colEdges[c + 1]);
      canvas.fill({std::min(x0, x1), std::min(y0, y1), std::fabs(x1 - x0),
                   std::fabs(y1 - y0)},
                  colour(values[r * cols + c]), /*snap=*/true);
    }
  }
}

void drawColourBar(Canvas &canvas, const Rect &box, double lo, double hi,
                   llvm::function_ref<Color(double)> colour,
                   llvm::StringRef label, double fontSize, double gamma) {
  int steps = std::max(2, int(box.h));
  for (int s = 0; s < steps; ++s) {
    double t = (double(s) + 0.5) / steps;
    canvas.fill({box.x, box.bottom() - box.h * double(s + 1) / steps, box.w,
                 box.h / steps + 0.5},
                colour(t));
  }
  canvas.stroke(box, kBlack, 1);
  double widest = 0;
  auto tick = [&](double v) {
    double y = box.bottom() - std::pow((v - lo) / (hi - lo), gamma) * box.h;
    canvas.line(box.right(), y, box.right() + 4, y, kBlack, 1);
    std::string text = formatNumber(v);
    canvas.text(box.right() + 6, y, text, fontSize * 0.9);
    widest = std::max(widest, canvas.textWidth(text, fontSize * 0.9));
    return y;
  };
  if (hi > lo) {
    // On a compressed scale, the ticks of the bottom tenth too, where
    // they are not too close to others.
    std::vector<double> ticks = niceTicks(lo, hi, 5, false);
    if (gamma < 1)
      for (double v : niceTicks(lo, lo + (hi - lo) * 0.1, 2, false))
        ticks.push_back(v);
    std::sort(ticks.begin(), ticks.end());
    ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
    double lastY = 1e30;
    for (double v : ticks) {
      double y = box.bottom() - std::pow((v - lo) / (hi - lo), gamma) * box.h;
      if (lastY - y < fontSize * 1.2 && v != lo)
        continue;
      lastY = tick(v);
    }
  } else {
    canvas.text(box.right() + 6, box.y + box.h / 2, formatNumber(lo),
                fontSize * 0.9);
    widest = canvas.textWidth(formatNumber(lo), fontSize * 0.9);
  }
  canvas.text(box.right() + 12 + widest + fontSize * 0.5, box.y + box.h / 2,
              label, fontSize, Align::Center, kBlack, false,
              /*vertical=*/true);
}

double drawLegend(Canvas &canvas, double x, double y,
                  llvm::ArrayRef<std::pair<Color, std::string>> entries,
                  double fontSize, bool lines) {
  double step = fontSize * 1.6;
  for (auto &[color, label] : entries) {
    if (lines) {
      canvas.line(x, y, x + 22, y, color, 2.5);
    } else {
      canvas.fill({x, y - fontSize * 0.55, 22, fontSize * 1.1}, color);
      canvas.stroke({x, y - fontSize * 0.55, 22, fontSize * 1.1}, kGrey, 0.5);
    }
    canvas.text(x + 28, y, label, fontSize);
    y += step;
  }
  return y;
}

void drawPolyline(Canvas &canvas, const Axes &axes, llvm::ArrayRef<double> xs,
                  llvm::ArrayRef<double> ys, Color color, double lineWidth,
                  bool dashed) {
  cairo_t *cr = canvas.cairo();
  cairo_save(cr);
  cairo_rectangle(cr, axes.box.x, axes.box.y, axes.box.w, axes.box.h);
  cairo_clip(cr);
  setColor(cr, color);
  cairo_set_line_width(cr, lineWidth);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  if (dashed) {
    double dashes[] = {6, 4};
    cairo_set_dash(cr, dashes, 2, 0);
  }
  bool open = false;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!std::isfinite(xs[i]) || !std::isfinite(ys[i])) {
      open = false;
      continue;
    }
    if (open)
      cairo_line_to(cr, axes.px(xs[i]), axes.py(ys[i]));
    else
      cairo_move_to(cr, axes.px(xs[i]), axes.py(ys[i]));
    open = true;
  }
  cairo_stroke(cr);
  cairo_restore(cr);
}

void drawPoints(Canvas &canvas, const Axes &axes, llvm::ArrayRef<double> xs,
                llvm::ArrayRef<double> ys, Color color, double radius) {
  cairo_t *cr = canvas.cairo();
  cairo_save(cr);
  setColor(cr, color);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!std::isfinite(xs[i]) || !std::isfinite(ys[i]))
      continue;
    cairo_new_sub_path(cr);
    cairo_arc(cr, axes.px(xs[i]), axes.py(ys[i]), radius, 0, 2 * M_PI);
  }
  cairo_fill(cr);
  cairo_restore(cr);
}

Rect measureTextBox(Canvas &canvas, const TextBox &box) {
  double fs = box.fontSize;
  double width = canvas.textWidth(box.title, fs * 1.05, /*bold=*/true);
  for (const std::string &line : box.lines)
    width = std::max(width, canvas.textWidth(line, fs, false, /*mono=*/true));
  double height = fs * 1.6 + double(box.lines.size()) * fs * 1.35 + fs * 0.6;
  return {0, 0, width + 2 * fs, height};
}

Rect drawTextBox(Canvas &canvas, double x, double y, const TextBox &box) {
  Rect size = measureTextBox(canvas, box);
  Rect rect{x, y, size.w, size.h};
  double fs = box.fontSize;
  canvas.fill(rect, box.fill);
  canvas.stroke(rect, box.border, 1.5);
  canvas.text(x + fs, y + fs * 0.95, box.title, fs * 1.05, Align::Left, kBlack,
              /*bold=*/true);
  double ly = y + fs * 1.6 + fs * 0.7;
  for (const std::string &line : box.lines) {
    canvas.text(x + fs, ly, line, fs, Align::Left, {0.1, 0.1, 0.1}, false,
                false, /*mono=*/true);
    ly += fs * 1.35;
  }
  return rect;
}

void drawArrow(Canvas &canvas, double x0, double y0, double x1, double y1,
               Color color) {
  canvas.line(x0, y0, x1, y1, color, 1.5);
  double angle = std::atan2(y1 - y0, x1 - x0), size = 8;
  cairo_t *cr = canvas.cairo();
  cairo_save(cr);
  setColor(cr, color);
  cairo_move_to(cr, x1, y1);
  cairo_line_to(cr, x1 - size * std::cos(angle - 0.4),
                y1 - size * std::sin(angle - 0.4));
  cairo_line_to(cr, x1 - size * std::cos(angle + 0.4),
                y1 - size * std::sin(angle + 0.4));
  cairo_close_path(cr);
  cairo_fill(cr);
  cairo_restore(cr);
}

} // namespace attnc::plot
