// Models by their Hugging Face name, resolved offline in the local hub cache the way huggingface_hub lays it out:
// HUB/models--ORG--NAME/refs/REVISION holds a commit, HUB/models--ORG--NAME/snapshots/COMMIT/ the files. focalscope
// never downloads; a model must be in the cache already (huggingface-cli download ORG/NAME).
#pragma once

#include <string>
#include <vector>

namespace focal {

// The hub cache: $HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
std::string hf_hub_cache_dir();

// Whether `s` reads as ORG/NAME or ORG/NAME@REVISION (one '/', no leading '/', '.' or '~', no '..').
bool is_hf_model_name(const std::string& s);

// "ORG/NAME" of every model in the hub cache with at least one snapshot, sorted.
std::vector<std::string> hf_cached_models();

// The path a MODEL argument names: an existing file or directory as given (when the hub cache also holds a model of
// that name, *note says that the local path wins — unless the directory holds no config.json, when the cached
// model is used and *note says that); ORG/NAME[@REVISION] as its snapshot directory (REVISION: a branch or tag
// under refs/, or a commit; default main), or the snapshot's one .gguf file when it has no config.json (*note says
// so). Throws Error for a name that is not cached, listing the cached models whose names are close; for a snapshot
// with a link to a missing blob (an incomplete download); for a snapshot of several GGUF files and no config.json,
// listing them. Anything else is returned as given (the loader then reports it missing).
std::string resolve_model_path(const std::string& model, std::string* note = nullptr);

// How a path inside the hub cache names its model for people: .../models--ORG--NAME/snapshots/HASH as "ORG/NAME", a
// GGUF file there as "ORG/NAME/FILE" without .gguf (a GGUF repository holds one file a quantization); "" for a path
// outside the cache's layout.
std::string hf_cache_display_name(const std::string& path);

}  // namespace focal
