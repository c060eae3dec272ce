// The provenance lines that `focal inspect` prints for every file kind (cmd_inspect_files.cpp).
#pragma once

#include "focal/provenance.h"

namespace focal::cli {

void print_provenance(const Provenance& p);  // model, tool, created; then print_computed
void print_computed(const Provenance& p);    // device and precision, tokenizer, warnings: the lines present

}  // namespace focal::cli
