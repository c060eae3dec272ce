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

// How one architecture differs from LLaMA, as data the one forward pass reads (docs/model-format.md).
enum class NormKind { kRms, kLayerNorm };           // RMSNorm(x) * w, or LayerNorm with weight and bias
enum class QkNormKind { kNone, kPerHead, kWhole };  // RMSNorm of q / k per head (Qwen3) or over the projection (OLMo 2)
enum class MlpActivation { kSilu, kGeluTanh, kGelu };  // values match ops::Act
enum class PositionKind { kRope, kLearned };           // rotary, or a learned absolute table added to the embeddings
enum class RopeType { kDefault, kLinear, kDynamic, kYarn, kLongrope, kLlama3, kFreqFactors };

const char* rope_type_name(RopeType t);  // "default", "linear", "dynamic", "yarn", "longrope", "llama3"
// The type named `name` (rope_type_name's spellings), or false when it names none.
bool rope_type_from_name(const std::string& name, RopeType* type);

// rope_scaling of config.json (transformers 4.47.1 semantics; the formulas are in rope_scaling.cpp).
struct RopeScaling {
  RopeType type = RopeType::kDefault;
  float factor = 1.0f;             // linear / dynamic / yarn / llama3
  float low_freq_factor = 1.0f;    // llama3
  float high_freq_factor = 4.0f;   // llama3
  int original_max_positions = 0;  // llama3: rope_scaling.original_max_position_embeddings; longrope: top-level
  float attention_factor = 0.0f;   // yarn / longrope: multiplies cos and sin (0: the type's default)
  float beta_fast = 32.0f, beta_slow = 1.0f;     // yarn
  std::vector<float> short_factor, long_factor;  // longrope: [d_head / 2] each
  std::vector<float>
      freq_factors;  // kFreqFactors (a GGUF's rope_freqs.weight, llama 3.x): inv_freq / factor, [d_head / 2]
};

struct ArchConfig {
  std::string name = "llama";  // llama, mistral, qwen2, qwen3, gemma2, phi3, olmo2, gpt2
  NormKind norm = NormKind::kRms;
  bool norm_plus_one = false;   // RMSNorm scales by (1 + w) (Gemma): applied to the norm weights at load
  bool pre_attn_norm = true;    // norm of the block input before attention (input_layernorm / ln_1)
  bool post_attn_norm = false;  // norm of the attention output before the residual add (Gemma 2, OLMo 2)
  bool pre_mlp_norm = true;     // norm before the MLP (LLaMA's post_attention_layernorm, Gemma 2's pre_feedforward)
  bool post_mlp_norm = false;   // norm of the MLP output before the residual add (Gemma 2, OLMo 2)
  QkNormKind qk_norm = QkNormKind::kNone;
  MlpActivation act = MlpActivation::kSilu;
  bool gated_mlp = true;  // down(act(gate(x)) * up(x)); false: down(act(up(x))) (GPT-2 c_fc / c_proj)
  bool qkv_bias = false, o_bias = false, mlp_bias = false;
  float query_pre_attn_scalar = 0.0f;  // > 0: logit = q.k / sqrt(query_pre_attn_scalar) (Gemma 2); 0: sqrt(d_head)
  float attn_softcap = 0.0f;           // > 0: attention logits cap * tanh(x / cap) after the temperature
  float final_softcap = 0.0f;          // > 0: final logits cap * tanh(x / cap)
  float embed_scale = 1.0f;            // embeddings * this (Gemma 2: sqrt(hidden), in fp32)
  int sliding_window = 0;              // > 0: layers with a window see the last `sliding_window` keys only
  int window_period = 1;               // layer l has the window when l % window_period == 0 (Gemma 2: 2)
  PositionKind position = PositionKind::kRope;
  RopeScaling rope;
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
  ArchConfig arch;              // what differs from LLaMA (norms, activation, masks, positions, scales)
  int bos_id = -1;              // -1: none
  int eos_id = -1;
  // Every id that ends generation: config.json's eos_token_id (a list: each of them), replaced by the one of
  // generation_config.json beside it (as transformers' generate takes it); eos_id is the first.
  std::vector<int> eos_ids;
  bool add_bos = true;  // prepend BOS when tokenizing prompts
  FocalConfig focal;
  std::string source_json;            // config.json text as read
  std::vector<std::string> warnings;  // what parsing or loading assumed (e.g. an ignored out-of-vocabulary id)
  std::string rope_override;          // LoadOptions::rope_scaling when it replaced config.json's, else empty
};

// Names of config fields in the file they came from, for error messages: config.json key -> source key (a GGUF
// file's metadata keys, e.g. "num_hidden_layers" -> "llama.block_count").
using ConfigFieldNames = std::map<std::string, std::string>;

// The raw attention logit's multiplier: 1/sqrt(query_pre_attn_scalar) or 1/sqrt(d_head) (fp32).
float attn_logit_scale(const ModelConfig& c);
// The sliding window of layer l (0: none).
int layer_window(const ModelConfig& c, int layer);
// True for the plain LLaMA layout the trainer's backward is written for (RMSNorm pre-norms, SwiGLU, RoPE, no
// soft-caps, windows or extra biases).
bool is_llama_layout(const ModelConfig& c);
// The architecture and its attention features as (label, text) lines for `focal info` and the app: architecture,
// norms, MLP, logit scale, soft-caps, sliding window, positions / RoPE scaling.
std::vector<std::pair<std::string, std::string>> arch_summary(const ModelConfig& c);
// Rotary frequencies [d_head / 2] for a forward call whose last position is seq_len - 1, and the factor cos / sin are
// multiplied by (yarn / longrope; 1 otherwise). transformers 4.47.1's formulas, in fp32 where it computes in fp32.
std::vector<float> rope_inv_freq(const ModelConfig& c, int seq_len, float* cs_scale);
// A forward of n_tokens positions against the trained context (max_position_embeddings). Within it: "". Past it, a
// rotary model runs (RoPE extrapolates; dynamic NTK rescales for the call's length) and this returns the one warning
// sentence the front ends show (stderr, the capture's provenance, the app's status line, Python's warnings.warn). A
// model with learned absolute positions (GPT-2) has no row for those positions: throws Error (field "prompt").
std::string context_length_warning(const ModelConfig& c, int n_tokens);
// What a file's provenance records of a run of n_tokens positions (Provenance::warnings, one sentence a line): a
// rope_scaling override the model was loaded with, and context_length_warning; "" when neither.
std::string run_warnings(const ModelConfig& c, int n_tokens);
// A rope_scaling override spelled TYPE:FACTOR (linear:4, dynamic:2, yarn:4) or default: replaces c.arch.rope as
// config.json's {"rope_type": TYPE, "factor": FACTOR} would. Throws Error (field "rope_scaling") naming the override
// for a malformed text or an architecture without rotary positions (GPT-2's learned table).
void apply_rope_override(ModelConfig& c, const std::string& text);

// Parses config.json text. `path` is used in error messages. Throws Error on malformed JSON, missing or invalid
// fields, or an unsupported architecture.
// Every field is type- and range-checked; an error names `path`, the field (through `aliases` when given), what was
// expected and what was found.
ModelConfig parse_config(const std::string& json_text, const std::string& path,
                         const ConfigFieldNames* aliases = nullptr);

}  // namespace focal
