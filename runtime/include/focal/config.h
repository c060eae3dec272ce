// Model configuration read from a Hugging Face config.json (LlamaForCausalLM family) plus focalscope's "focal"
// object describing how the model was trained to scale attention. Field meanings: docs/model-format.md.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace focal {

// How attention logits are scaled. Relative to the standard raw score q.k/sqrt(d_head) the multiplier is
//   kStandard 1, kFocal 1/focal_temp, kLearned sqrt(d_head)/tau, kSsmax ssmax_s*ln(n_visible).
enum class AttnMode { kStandard, kFocal, kLearned, kSsmax };

// Which tokens the learned temperature averages X.w_tau over, for the query at position i.
enum class TauMode {
  kSequenceMean,  // all T tokens of the forward call (the paper's Eq. 6 literally; NOT causal)
  kPrefixMean,    // tokens 0..i (causal running mean)
  kPerToken,      // token i alone
};

const char* attn_mode_name(AttnMode m);  // "standard", "focal", "learned", "ssmax"
const char* tau_mode_name(TauMode m);    // "sequence_mean", "prefix_mean", "per_token"
AttnMode parse_attn_mode(const std::string& s, const std::string& where);  // throws Error naming `where`
TauMode parse_tau_mode(const std::string& s, const std::string& where);

struct FocalConfig {
  AttnMode mode = AttnMode::kStandard;   // the attention the model was trained with
  float focal_temp = 1.0f;               // kFocal: constant t
  bool has_tau = false;                  // self_attn.tau_proj.weight [hidden] present in every layer
  bool tau_bias = false;                 // self_attn.tau_proj.bias [1] present
  float tau_min = 0.0f, tau_max = 0.0f;  // clip bounds of tau
  TauMode tau_mode = TauMode::kPrefixMean;
};

struct ModelConfig {
  int vocab_size = 0;
  int hidden = 0;        // hidden_size
  int intermediate = 0;  // intermediate_size
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int d_head = 0;         // head_dim (default hidden / n_heads)
  int max_positions = 0;  // max_position_embeddings
  float rope_theta = 10000.0f;
  float rms_eps = 1e-6f;
  bool tied_embeddings = false;
  bool attention_bias = false;  // q/k/v/o_proj carry biases
  bool qk_norm = false;         // self_attn.q_norm / k_norm present (detected from the weights)
  int bos_id = -1;              // -1: none
  int eos_id = -1;
  bool add_bos = true;  // prepend BOS when tokenizing prompts
  FocalConfig focal;
  std::string source_json;            // config.json text as read
  std::vector<std::string> warnings;  // what parsing or loading assumed (e.g. an ignored out-of-vocabulary id)
};

// Names of config fields in the file they came from, for error messages: config.json key -> source key (a GGUF
// file's metadata keys, e.g. "num_hidden_layers" -> "llama.block_count").
using ConfigFieldNames = std::map<std::string, std::string>;

// Parses config.json text. `path` is used in error messages. Throws Error on malformed JSON, missing or invalid
// fields, or an unsupported architecture.
// Every field is type- and range-checked; an error names `path`, the field (through `aliases` when given), what was
// expected and what was found.
ModelConfig parse_config(const std::string& json_text, const std::string& path,
                         const ConfigFieldNames* aliases = nullptr);

}  // namespace focal
