// The figure kinds (one file each) and the page helpers they share.
#pragma once

#include <string>
#include <vector>

#include "canvas.h"
#include "focal_figures/figures.h"

namespace focal::figures {

std::string render_distribution(const std::vector<Source>& src, const FigureOptions& opt, Format fmt);
std::string render_heatmap(const std::vector<Source>& src, const FigureOptions& opt, Format fmt);
std::string render_grid(const std::vector<Source>& src, const FigureOptions& opt, Format fmt);
std::string render_entropy(const std::vector<Source>& src, const FigureOptions& opt, Format fmt);
std::string render_sweep(const std::vector<Source>& src, const FigureOptions& opt, Format fmt);

// Page width in points from --width (checked).
double page_width(const FigureOptions& opt);
// Page height in points: --height when given, else the kind's natural height.
double page_height(const FigureOptions& opt, double natural_pt);
// Height the title line takes at the top of the page (0 without a title), margin included.
double title_space(const FigureOptions& opt);
// The title to draw: --title, or the automatic one.
std::string title_text(const FigureOptions& opt, const std::string& automatic);
// Draws the title centred on the page, shortened with … if wider than the page.
void draw_title(Canvas& c, const FigureOptions& opt, const std::string& automatic);
// s shortened with … to fit max_w at `size`.
std::string fit_text(const Canvas& c, const std::string& s, double size, double max_w, bool bold = false);
// s shortened in its middle with … to fit max_w at `size`: legend labels, whose ends tell them apart (two paths cut
// at their end read the same).
std::string fit_text_middle(const Canvas& c, const std::string& s, double size, double max_w, bool bold = false);
// s broken at spaces into lines no wider than max_w at `size` (a word wider than max_w alone is shortened with …).
std::vector<std::string> wrap_text(const Canvas& c, const std::string& s, double size, double max_w, bool bold = false);
// Checks the options that every kind shares (--width, --height, --dpi, --log-floor).
void check_page_options(const FigureOptions& opt);
// Throws if an option that `kind` does not use was set, naming it.
void reject_option(bool set, const std::string& option, const std::string& kind);

// Quoted token text for titles: “void”.
std::string quoted(const std::string& s);
// The last component of a model path, for titles and legends ("out/train/standard/" -> "standard").
std::string base_name(std::string p);

}  // namespace focal::figures
