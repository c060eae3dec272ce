// focalscope.Model, Generation and load(): a loaded model, its tokenizer, and its runs (py_runs.h).
#include "focal/byte_size.h"
#include "focal/device.h"
#include "focal/error.h"
#include "focal/hf_cache.h"
#include "py_bindings.h"
#include "py_convert.h"
#include "py_runs.h"

namespace focalscope::py {

using namespace nb::literals;

void bind_model(nb::module_& mod) {
  nb::class_<PyGeneration>(mod, "Generation", "The result of Model.generate.")
      .def_prop_ro(
          "prompt_ids", [](const PyGeneration& g) { return g.prompt_ids; }, "The prompt's token ids.")
      .def_prop_ro(
          "ids", [](const PyGeneration& g) { return g.ids; }, "The generated token ids.")
      .def_prop_ro(
          "text",
          [](const PyGeneration& g) -> std::optional<nb::str> {
            if (!g.text) return std::nullopt;
            return text_of(*g.text);
          },
          "The generated text (without the prompt); bytes that end inside a character read as U+FFFD. None for a "
          "model without a tokenizer (its ids are in .ids).")
      .def_prop_ro(
          "capture", [](const PyGeneration& g) { return g.capture; },
          "The capture of prompt + generated tokens (generate(capture=True)), else None.")
      .def("__repr__",
           [](const PyGeneration& g) { return "<focalscope.Generation " + std::to_string(g.ids.size()) + " tokens>"; });

  nb::class_<PyModel>(mod, "Model",
                      "A loaded model (a Hugging Face directory or name, or a .gguf file) on the CPU or a CUDA device. "
                      "Made by load(). Runs release the GIL; Ctrl-C cancels a run between layers (KeyboardInterrupt).")
      .def("__repr__",
           [](const PyModel& m) {
             return "<focalscope.Model " + m.model->path() + ": " + std::to_string(m.cfg().n_layers) + " layers x " +
                    std::to_string(m.cfg().n_heads) + " heads, " + focal::device_name(m.model->device()) + ">";
           })
      .def_prop_ro("path", [](const PyModel& m) { return m.model->path(); })
      .def_prop_ro(
          "device", [](const PyModel& m) { return std::string(focal::device_name(m.model->device())); },
          "'cpu' or 'cuda': where the weights live and the forward runs.")
      .def_prop_ro(
          "precision", [](const PyModel& m) { return std::string(focal::precision_name(m.model->precision())); },
          "'exact' (fp32 everywhere; always on the CPU) or 'fast' (GPU: 16-bit GEMMs and attention on tensor "
          "cores, softmax and metrics in fp32), as resolved at load.")
      .def_prop_ro("n_layers", [](const PyModel& m) { return m.cfg().n_layers; })
      .def_prop_ro(
          "n_heads", [](const PyModel& m) { return m.cfg().n_heads; }, "Query heads.")
      .def_prop_ro("n_kv_heads", [](const PyModel& m) { return m.cfg().n_kv_heads; })
      .def_prop_ro("d_head", [](const PyModel& m) { return m.cfg().d_head; })
      .def_prop_ro("hidden", [](const PyModel& m) { return m.cfg().hidden; })
      .def_prop_ro("vocab_size", [](const PyModel& m) { return m.cfg().vocab_size; })
      .def_prop_ro(
          "max_positions", [](const PyModel& m) { return m.cfg().max_positions; }, "The context length.")
      .def_prop_ro("n_params", [](const PyModel& m) { return m.model->n_params(); })
      .def_prop_ro("weights_checksum", [](const PyModel& m) { return m.model->weights_checksum(); })
      .def_prop_ro(
          "config_json", [](const PyModel& m) { return m.cfg().source_json; }, "config.json as read.")
      .def_prop_ro(
          "native_temp", [](const PyModel& m) { return focal::TempSpec::native(m.cfg()); },
          "The attention setting the model was trained with (config.json 'focal'); temp=None uses it.")
      .def(
          "tokenize",
          [](const PyModel& m, const std::string& text, std::optional<bool> add_bos) {
            std::vector<int32_t> ids = m.tok().encode(text, add_bos.value_or(m.cfg().add_bos));
            const size_t n = ids.size();
            return owned(std::move(ids), {n});
          },
          "text"_a, "add_bos"_a = nb::none(),
          nb::sig("def tokenize(self, text: str, add_bos: bool | None = None) -> numpy.typing.NDArray[numpy.int32]"),
          "Token ids (int32 [n]) as `focal capture --prompt` makes them (with BOS when the model adds one).")
      .def(
          "detokenize",
          [](const PyModel& m, nb::handle ids) { return text_of(m.tok().decode(m.ids_of(ids, "ids", false))); },
          "ids"_a,
          nb::sig(
              "def detokenize(self, ids: collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32]) -> str"),
          "The text of token ids (bytes that end inside a character read as U+FFFD).")
      .def(
          "pieces",
          [](const PyModel& m, nb::handle ids) {
            std::vector<std::string> v;
            // a model without a tokenizer shows ids as text, as its captures' pieces do (it raised here)
            const focal::Tokenizer* t = m.model->tokenizer();
            for (int32_t id : m.ids_of(ids, "ids", false)) v.push_back(t ? t->display(id) : std::to_string(id));
            return v;
          },
          "ids"_a,
          nb::sig(
              "def pieces(self, ids: collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32]) -> list[str]"),
          "Each token as a person should read it (what captures store).")
      .def("run", &model_run, "prompt"_a, "temp"_a = nb::none(), nb::kw_only(), "layers"_a = nb::none(),
           "heads"_a = nb::none(), "queries"_a = nb::none(), "compare"_a = nb::none(), "name"_a = nb::none(),
           "probs"_a = kDefaultProbs, "scores"_a = kDefaultScores, "fp16"_a = kDefaultFp16, "topk"_a = kDefaultTopk,
           "topk_mass"_a = kDefaultTopkMass, "relevant"_a = nb::none(), "budget"_a = nb::none(),
           "progress"_a = nb::none(),
           nb::sig("def run(self, prompt: str | collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32], "
                   "temp: str | float | TempSpec | None = None, *, layers: int | collections.abc.Sequence[int] | None "
                   "= None, "
                   "heads: int | collections.abc.Sequence[int] | None = None, "
                   "queries: int | collections.abc.Sequence[int] | None = None, "
                   "compare: str | float | TempSpec | None = None, name: str | None = None, probs: bool = True, "
                   "scores: bool = True, fp16: bool = False, topk: int = 10, topk_mass: int = 5, "
                   "relevant: collections.abc.Sequence[int] | None = None, budget: int | str | None = None, "
                   "progress: collections.abc.Callable[[str, int, int], object] | None = None) -> Capture"),
           "Runs a prompt and captures what attention did: `focal capture` from Python, the same Capture (and, with "
           "save(), the same file) for the same arguments.\n\n"
           "prompt: text (tokenized as the CLI does), or token ids (a list, or a 1-D C-contiguous int32 array).\n"
           "temp: 'native' (None, the default: the model's own setting), 'standard', 'focal:0.4' (or 0.4), "
           "'learned', 'learned:X', 'ssmax:S', or a TempSpec.\n"
           "layers / heads / queries: rows whose probabilities and scores are stored (None: all); metrics are kept "
           "for every layer, head and row.\n"
           "compare: a second setting run over the same tokens, with per-row KL / JS of the stored rows (kl_js()); "
           "with probs=False they are computed as the second run's rows arrive and no probabilities are kept.\n"
           "probs / scores: store them; fp16: save probabilities as float16; topk: next tokens kept per position; "
           "topk_mass: k of the topk_mass metric; relevant: key positions for relevant_mass; budget: memory limit "
           "checked before running (bytes or '512M', default '2G').\n"
           "progress(run_name, layers_done, n_layers) is called between layers; an exception from it cancels the "
           "run and is raised. The GIL is released during the forward; Ctrl-C cancels between layers.")
      .def("sweep", &model_sweep, "prompt"_a, "temps"_a, "temp"_a = nb::none(), nb::kw_only(),
           "relevant"_a = nb::none(), "topk_mass"_a = kDefaultTopkMass, "progress"_a = nb::none(),
           nb::sig("def sweep(self, prompt: str | collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32], "
                   "temps: collections.abc.Sequence[float], temp: str | float | TempSpec | None = None, *, "
                   "relevant: collections.abc.Sequence[int] | None = None, topk_mass: int = 5, "
                   "progress: collections.abc.Callable[[float, int, int], object] | None = None) -> Sweep"),
           "`focal sweep`: one forward per focal t in temps (mode set to focal; temp's per-layer / per-head "
           "overrides kept), metrics per head averaged over rows 1..T-1. progress(t, done, total) after each t; "
           "Ctrl-C cancels between layers.")
      .def(
          "generate", &model_generate, "prompt"_a, "n"_a = 32, "temp"_a = nb::none(), nb::kw_only(),
          "sample_temp"_a = 0.0, "top_k"_a = 0, "seed"_a = nb::none(), "stop_at_eos"_a = true,
          "on_token"_a = nb::none(), "capture"_a = false, "compare"_a = nb::none(), "layers"_a = nb::none(),
          "heads"_a = nb::none(), "probs"_a = kDefaultProbs, "scores"_a = kDefaultScores, "fp16"_a = kDefaultFp16,
          "queries"_a = nb::none(), "name"_a = nb::none(), "topk"_a = kDefaultTopk, "topk_mass"_a = kDefaultTopkMass,
          "relevant"_a = nb::none(), "budget"_a = nb::none(),
          nb::sig("def generate(self, prompt: str | collections.abc.Sequence[int] | numpy.typing.NDArray[numpy.int32], "
                  "n: int = 32, temp: str | float | TempSpec | None = None, *, sample_temp: float = 0.0, "
                  "top_k: int = 0, seed: int | None = None, stop_at_eos: bool = True, "
                  "on_token: collections.abc.Callable[[int, str | None], object] | None = None, capture: bool = False, "
                  "compare: str | float | TempSpec | None = None, layers: int | collections.abc.Sequence[int] | None = "
                  "None, "
                  "heads: int | collections.abc.Sequence[int] | None = None, probs: bool = True, "
                  "scores: bool = True, fp16: bool = False, queries: int | collections.abc.Sequence[int] | None = "
                  "None, name: str | None = None, topk: int = 10, topk_mass: int = 5, "
                  "relevant: collections.abc.Sequence[int] | None = None, budget: int | str | None = None) -> "
                  "Generation"),
          "`focal generate`: up to n new tokens with a KV cache under temp (greedy, or sampled with "
          "sample_temp / top_k / seed; seed defaults to 1, and top_k / seed are refused under greedy decoding). "
          "on_token(id, text) is called for each new token with its text (None without a tokenizer); returning "
          "False stops, an exception stops and is raised. capture=True also captures prompt + generated tokens "
          "(as `focal generate --capture`) into Generation.capture; compare (with capture=True) adds a second "
          "setting run over exactly those tokens, with per-row KL / JS (`focal generate --compare SPEC`); "
          "queries / name / topk / topk_mass / relevant / budget describe the capture as in Model.run (`focal "
          "generate --queries ...`), positions counted over prompt + generated tokens.");

  mod.def(
      "load",
      [](const fs::path& p, const std::string& device, const std::string& precision,
         const std::optional<std::string>& rope_scaling, const std::string& weights, bool mmap,
         bool allow_nonfinite_weights) {
        const std::string path = path_str(p);
        if (!fs::exists(p) && !focal::is_hf_model_name(path))
          raise(PyExc_FileNotFoundError,
                "load: no such model: '" + path +
                    "' (give a Hugging Face model directory with config.json, a .gguf file, or a name ORG/NAME "
                    "cached by huggingface_hub)");
        focal::Device d;
        try {
          d = focal::parse_device(device);
        } catch (const focal::Error& e) { raise(PyExc_ValueError, std::string("device: ") + e.what()); }
        focal::LoadOptions opt;
        try {
          opt.precision = focal::parse_precision(precision);
        } catch (const focal::Error& e) { raise(PyExc_ValueError, std::string("precision: ") + e.what()); }
        if (rope_scaling) {  // its spelling is checked here (a ValueError); whether the model takes it, by load
          focal::ModelConfig rotary;
          rotary.arch.position = focal::PositionKind::kRope;
          try {
            focal::apply_rope_override(rotary, *rope_scaling);
          } catch (const focal::Error& e) { raise(PyExc_ValueError, std::string("rope_scaling: ") + e.what()); }
          opt.rope_scaling = *rope_scaling;
        }
        try {
          opt.weights = focal::parse_weights_mode(weights);
        } catch (const focal::Error& e) { raise(PyExc_ValueError, std::string("weights: ") + e.what()); }
        opt.map_weights = mmap;
        opt.allow_nonfinite_weights = allow_nonfinite_weights;
        // as the CLI: the weights must fit the machine's memory, refused before anything is allocated
        opt.budget_bytes = focal::machine_memory_bytes();
        opt.budget_is_machine = true;
        auto m = std::make_unique<PyModel>();
        {
          nb::gil_scoped_release rel;
          m->model = focal::Model::load(path, focal::resolve_device(d), opt);
        }
        // What loading assumed or chose, as the CLI's "warning:" lines (a local path beside a cached name of the
        // same spelling, a tied lm_head that differs, a rope_scaling override, ...): one UserWarning each.
        for (const std::string& w : m->model->config().warnings)
          if (PyErr_WarnEx(PyExc_UserWarning, ("load: " + w).c_str(), 1) != 0) throw nb::python_error();
        return m;
      },
      "path"_a, "device"_a = "auto", "precision"_a = "auto", "rope_scaling"_a = nb::none(), "weights"_a = "native",
      "mmap"_a = false, "allow_nonfinite_weights"_a = false,
      "Loads a model: a Hugging Face model directory (config.json, safetensors, tokenizer), a .gguf file, or "
      "a name 'ORG/NAME' or 'ORG/NAME@REVISION' resolved offline in the Hugging Face cache (never downloaded). device: "
      "'auto' (CUDA when usable, else the CPU), 'cpu' or 'cuda'. precision: "
      "'auto' (fast on the GPU for 16-bit and quantized weights, else exact), 'exact' or 'fast' (as focal "
      "--precision). rope_scaling: 'TYPE:FACTOR' (linear, dynamic, yarn) or 'default' replaces config.json's "
      "rope_scaling of a rotary model (as focal --rope-scaling); captures record it in their warnings. weights: "
      "'native' (quantized and 16-bit weights kept as stored) or 'fp32' (widened at load), as focal --weights. mmap: "
      "a GGUF file's weights read from the page cache's map instead of copied into memory (focal --mmap). "
      "allow_nonfinite_weights: load a checkpoint whose weights hold NaN or Inf (focal --allow-nonfinite-weights).");
}

}  // namespace focalscope::py
