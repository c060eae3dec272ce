// The architecture and attention options shared by `focal init` and `focal train` (--hidden ... --context,
// --qk-norm, --attn, --temp, --tau-mode, --tau-min, --tau-max), parsed into a ModelConfig in one place.
#pragma once

#include <set>
#include <string>

#include "args.h"
#include "focal/config.h"

namespace focal::cli {

struct ArchDefaults {
  int hidden, layers, heads, kv_heads, intermediate, context;
};

extern const std::set<std::string> kModelOptions;  // options taking a value
extern const std::set<std::string> kModelFlags;    // flags

// Tied embeddings, d_head = hidden / heads. Learned attention defaults to tau in the paper's [5, 10] at
// d_head = 128, scaled by sqrt(d_head / 128), with a bias. Throws UsageError / Error naming the option.
ModelConfig model_config_from(const Args& a, const ArchDefaults& d);

}  // namespace focal::cli
