// The loss curve as a PNG, drawn by gnuplot (Debian package gnuplot-nox) from a TSV file written
// next to it. Missing gnuplot is not an error: the caller prints the returned message.
#pragma once
#include <string>
#include <vector>

#include "checkpoint.hpp"

namespace kolo::train {

// Writes <png without extension>.tsv and the PNG. Returns a one-line message saying what was
// written, or why the plot was skipped.
std::string write_loss_plot(const std::string& png_path, const std::vector<LossPoint>& train,
                            const std::vector<LossPoint>& validation);

}  // namespace kolo::train
