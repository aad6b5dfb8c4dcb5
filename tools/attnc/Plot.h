// Small plotting helpers on cairo for attnc explain: a canvas written as a
// PNG, axes with ticks, matrices of cells (heatmaps) with colour bars,
// lines, legends and boxes of text.
#ifndef ATTNC_TOOLS_ATTNC_PLOT_H
#define ATTNC_TOOLS_ATTNC_PLOT_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <utility>
#include <vector>

typedef struct _cairo cairo_t;
typedef struct _cairo_surface cairo_surface_t;

namespace attnc::plot {

struct Color {
  double r = 0, g = 0, b = 0, a = 1;
};
inline constexpr Color kBlack{0, 0, 0}, kWhite{1, 1, 1},
    kGrey{0.55, 0.55, 0.55}, kLightGrey{0.88, 0.88, 0.88};

/// The viridis colour map at t in [0, 1] (clamped; NaN: a light grey).
Color viridis(double t);
/// White (0) to a dark blue (1): shares, such as the visible one of a cell.
Color blues(double t);
/// The ten colours of matplotlib's tab10, cycled.
Color qualitative(int index);
/// a + t (b - a), component by component.
Color mix(Color a, Color b, double t);

struct Rect {
  double x = 0, y = 0, w = 0, h = 0;
  double right() const { return x + w; }
  double bottom() const { return y + h; }
};

enum class Align { Left, Center, Right };

/// A white ARGB picture of `width` x `height` pixels.
class Canvas {
public:
  Canvas(int width, int height);
  ~Canvas();
  Canvas(const Canvas &) = delete;
  Canvas &operator=(const Canvas &) = delete;

  int width() const { return w; }
  int height() const { return h; }
  cairo_t *cairo() { return cr; }

  /// Fills `rect`; `snap` rounds its edges to whole pixels and draws
  /// without antialiasing, so that adjacent cells meet without seams.
  void fill(const Rect &rect, Color color, bool snap = false);
  void stroke(const Rect &rect, Color color, double lineWidth = 1);
  void line(double x0, double y0, double x1, double y1, Color color,
            double lineWidth = 1, bool dashed = false);
  /// `text` at x (by `align`), vertically centred on y; `vertical` turns
  /// it to read upwards, centred at (x, y) (an axis label on the left).
  void text(double x, double y, llvm::StringRef text, double size,
            Align align = Align::Left, Color color = kBlack, bool bold = false,
            bool vertical = false, bool mono = false);
  double textWidth(llvm::StringRef text, double size, bool bold = false,
                   bool mono = false);

  /// Writes the picture as a PNG file.
  llvm::Error writePng(const std::string &path);

private:
  void selectFont(double size, bool bold, bool mono);

  int w, h;
  cairo_surface_t *surface;
  cairo_t *cr;
};

/// Data coordinates [x0, x1] x [y0, y1] on a box of pixels: x to the
/// right, y downwards (matrix rows: row 0 at the top) when `yDown`, else
/// upwards.
struct Axes {
  Rect box;
  double x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  bool yDown = true;
  double px(double x) const { return box.x + (x - x0) / (x1 - x0) * box.w; }
  double py(double y) const {
    double t = (y - y0) / (y1 - y0);
    return yDown ? box.y + t * box.h : box.bottom() - t * box.h;
  }
};

/// About `count` ticks at multiples of 1, 2 or 5 x 10^k within [lo, hi]
/// (of integers only when `integers`).
std::vector<double> niceTicks(double lo, double hi, int count, bool integers);
/// A tick's label: an integer, else 3 significant digits.
std::string formatNumber(double value);

struct AxesText {
  std::string title, xLabel, yLabel;
  bool integerTicks = true;
  int xTicks = 6, yTicks = 6;
  double fontSize = 12;
  /// Tick labels of x at given positions instead of nice ticks (heads).
  std::vector<std::pair<double, std::string>> xTickLabels, yTickLabels;
};
/// The frame of `axes`, its ticks and their labels, the axis labels and
/// the title above the box.
void drawAxes(Canvas &canvas, const Axes &axes, const AxesText &text);

/// A matrix of cells: cell (r, c), values[r * cols + c], covers keys
/// [colEdges[c], colEdges[c + 1]) and rows [rowEdges[r], rowEdges[r + 1])
/// of `axes`' data coordinates.
void drawCells(Canvas &canvas, const Axes &axes, llvm::ArrayRef<double> values,
               llvm::ArrayRef<double> rowEdges, llvm::ArrayRef<double> colEdges,
               llvm::function_ref<Color(double)> colour);

/// A vertical colour bar in `box`, from lo (bottom) to hi (top), with
/// ticks on its right and `label` beside them, reading upwards. The value
/// v sits at t = ((v - lo) / (hi - lo))^gamma of the bar and has the colour
/// colour(t) (gamma 0.5: a square-root scale, for small values).
void drawColourBar(Canvas &canvas, const Rect &box, double lo, double hi,
                   llvm::function_ref<Color(double)> colour,
                   llvm::StringRef label, double fontSize = 12,
                   double gamma = 1);

/// One swatch (or line) and label per entry, from (x, y) downwards;
/// returns the y below the legend.
double drawLegend(Canvas &canvas, double x, double y,
                  llvm::ArrayRef<std::pair<Color, std::string>> entries,
                  double fontSize = 12, bool lines = false);

/// A polyline through (xs[i], ys[i]) in `axes`; a NaN breaks it.
void drawPolyline(Canvas &canvas, const Axes &axes, llvm::ArrayRef<double> xs,
                  llvm::ArrayRef<double> ys, Color color,
                  double lineWidth = 1.5, bool dashed = false);

/// A dot of `radius` pixels at each finite (xs[i], ys[i]) in `axes`.
void drawPoints(Canvas &canvas, const Axes &axes, llvm::ArrayRef<double> xs,
                llvm::ArrayRef<double> ys, Color color, double radius = 3);

/// A box of text: a bold title line over lines of monospace text.
struct TextBox {
  std::string title;
  std::vector<std::string> lines;
  Color fill{0.95, 0.97, 1.0}, border{0.3, 0.4, 0.6};
  double fontSize = 12;
};
/// The size `box` takes (padding included).
Rect measureTextBox(Canvas &canvas, const TextBox &box);
/// Draws `box` with its top left corner at (x, y); returns its rectangle.
Rect drawTextBox(Canvas &canvas, double x, double y, const TextBox &box);
/// An arrow from (x0, y0) to (x1, y1).
void drawArrow(Canvas &canvas, double x0, double y0, double x1, double y1,
               Color color = kGrey);

} // namespace attnc::plot

#endif // ATTNC_TOOLS_ATTNC_PLOT_H
