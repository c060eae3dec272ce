// The output-path check every command makes before its long work: the file can be created in its directory, and
// the path is not a directory, device or FIFO (focal::output_target), so that a bad -o fails in a second, not
// after the model ran.
#pragma once

#include <string>

namespace focal::cli {

// Throws focal::Error naming `opt` (-o, --capture, --log) and the path. A missing `path` is a usage error.
void check_output(const std::string& path, const char* opt = "-o");

// `s` as one shell word (single quotes when it holds anything but [A-Za-z0-9_./:=@%+-]), for a command line the
// CLI prints for the user to paste: "apply with --temp calibrated:'my temps.json'".
std::string shell_word(const std::string& s);

}  // namespace focal::cli
