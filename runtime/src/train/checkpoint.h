// The trainer's checkpoints (runtime-internal): OUT is a Hugging Face model directory with optimizer.safetensors,
// trainer_state.json and train_log.h5, written whole into OUT.tmp and swapped in through OUT.old, so that a kill or
// a full disk leaves one whole checkpoint; the lock that keeps a second trainer out of OUT while one runs.
#pragma once

#include <string>
#include <vector>

#include "focal/model.h"
#include "focal/trainer.h"

namespace focal {

// Whether something (a file, a directory, a device) stands at `path`: the training files' one test of it.
bool path_exists(const std::string& path);

// Removes a directory tree of the trainer's own (OUT.tmp, OUT.old, OUT.init). Whatever else stands at that name (a
// user's file, a device) is refused, not deleted.
void remove_own_tree(const std::string& path);

// Writes the checkpoint of `step` into out_dir: the weights in save_dtype, the AdamW moments adam_m / adam_v
// [params][size] in fp32, trainer_state.json {"step", "train_config": train_config_json} and the log.
void save_checkpoint(const std::string& out_dir, const Model& model, const ModelConfig& cfg,
                     const std::vector<std::vector<float>>& adam_m, const std::vector<std::vector<float>>& adam_v,
                     const std::string& save_dtype, int step, const std::string& train_config_json, const TrainLog& log,
                     const std::string& tokenizer_path);

// A kill between the swap's two renames leaves no out_dir, the previous checkpoint in OUT.old and the new one whole
// in OUT.tmp: the swap is completed (or, with OUT.tmp not whole, the previous checkpoint put back) before anything
// else looks at out_dir. Returns what was done, for a note; empty when nothing was left so.
std::string recover_interrupted_swap(const std::string& out_dir);

// trainer_state.json of the checkpoint in out_dir: its step and train_config; an unreadable file is an error naming
// it and what would fix it.
struct TrainerState {
  int step = 0;
  std::string train_config_json;  // "{}" when the file has none
};
TrainerState read_trainer_state(const std::string& out_dir);

// An exclusive lock on an output for the whole run (flock on OUT.lock, removed at the end): a second trainer given
// the same out_dir (or calibration given the same -o) is refused instead of writing its checkpoints over the first
// one's. who: "focal train"; field: the Error field that names the option ("out_dir": --out).
class OutDirLock {
 public:
  explicit OutDirLock(const std::string& out_dir, const std::string& who = "focal train",
                      const std::string& field = "out_dir");
  ~OutDirLock();
  OutDirLock(const OutDirLock&) = delete;
  OutDirLock& operator=(const OutDirLock&) = delete;

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace focal
