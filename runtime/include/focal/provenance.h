// Provenance recorded at the root of every focalscope file (captures, sweeps, evaluations; training logs keep the
// tool and model fields): which tool wrote it, when, and from which model. One reader and one writer (h5_io.cpp).
#pragma once

#include <cstdint>
#include <string>

namespace focal {

struct Provenance {
  std::string tool_version;
  std::string created_utc;        // ISO 8601; set by the writer when empty
  std::string model_path;         // the model directory or .gguf file, as given
  std::string model_config_json;  // the model's config.json
  uint64_t weights_checksum = 0;  // FNV-1a 64 over the weight files
  // Where and how the forward ran: "cpu" / "cuda" and "exact" / "fast" (focal/device.h Precision); empty in files
  // written before they were recorded.
  std::string device, precision;
  // The tokenizer the tokens came from (Tokenizer::source): "tokenizer.json (byte-level BPE)"; empty for files
  // written before it was recorded, and for a model without a tokenizer.
  std::string tokenizer;
  // What the run went on despite, one sentence a line: a prompt past the model's trained context
  // (context_length_warning), a rope_scaling override; empty when nothing.
  std::string warnings;
};

// The time now as the files record it: ISO 8601 in UTC to the second, "2026-12-06T17:30:00Z".
std::string utc_timestamp_now();
// The root "format" attribute of a focalscope HDF5 file ("focalscope-capture", "focalscope-sweep", ...), for a reader
// that takes several kinds (focal inspect); "" when the file is HDF5 without one. Throws Error naming the file when
// it is missing, not HDF5, empty, truncated or damaged (the checks every reader makes).
std::string read_file_format(const std::string& path);

// Whether s is such a timestamp (the fields in their ranges); a caller that fixes created_utc checks it.
bool is_utc_timestamp(const std::string& s);

}  // namespace focal
