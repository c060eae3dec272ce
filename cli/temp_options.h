// The temperature options shared by capture, sweep, generate and eval (--mode --temp --layer-temp --head-temp
// --tau-scale --ssmax-s, and --compare's settings): their help text and their parsing into a TempSpec.
#pragma once

#include <set>
#include <string>

#include "args.h"
#include "focal/calibrate.h"
#include "focal/config.h"
#include "focal/temp_spec.h"

namespace focal::cli {

extern const char* const kTempHelp;            // the help section listing the options
extern const std::set<std::string> kTempOpts;  // the option names, for Args

// The spec the options ask for, starting from the model's native setting; validated against cfg. Throws
// UsageError for a malformed value, Error (naming the TempSpec field) for a value the model cannot take.
TempSpec temp_spec_from(const Args& a, const ModelConfig& cfg);

// A setting in the spec grammar (TempSpec::parse) given to option `opt` (--compare, --runs), validated against cfg.
TempSpec compare_spec(const std::string& v, const std::string& opt, const ModelConfig& cfg);

// A temperature file's t on stdout, as calibrate and inspect print it: one value (model), a column (layer, tau-proj:
// each layer's mean) or a layer x head table with its header row.
void print_temp_table(const TempFile& f);

}  // namespace focal::cli
