// The trainer's checkpoints: the swap through OUT.tmp and OUT.old, its recovery after a kill, trainer_state.json and
// the lock on OUT (train/checkpoint.h).
#include "train/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "focal/atomic_file.h"
#include "focal/error.h"
#include "focal/model_writer.h"
#include "h5_io.h"
#include "model_internal.h"

namespace focal {

using json = nlohmann::json;

bool path_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// Removes a directory tree of the trainer's own (OUT.tmp, OUT.old, OUT.init). Whatever else stands at that name (a
// user's file, a device) is refused, not deleted.
void remove_own_tree(const std::string& path) {
  require_directory_or_absent(path, "the trainer's working directory");
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  if (ec) throw Error("cannot remove '" + path + "': " + ec.message());
}

void save_checkpoint(const std::string& out_dir, const Model& model, const ModelConfig& cfg,
                     const std::vector<std::vector<float>>& adam_m, const std::vector<std::vector<float>>& adam_v,
                     const std::string& save_dtype, int step, const std::string& train_config_json, const TrainLog& log,
                     const std::string& tokenizer_path) {
  // Write everything into a fresh directory, then swap it in: a crash or a full disk leaves the previous checkpoint.
  const std::string tmp = out_dir + ".tmp";
  const std::string old = out_dir + ".old";
  remove_own_tree(tmp);
  std::vector<NamedTensor> weights, moments;
  for (size_t i = 0; i < model.weights().params.size(); ++i) {
    const ParamRef& p = model.weights().params[i];
    weights.push_back({p.name, p.shape, std::vector<float>(p.data, p.data + p.size)});
    moments.push_back({"m." + p.name, p.shape, adam_m[i]});
    moments.push_back({"v." + p.name, p.shape, adam_v[i]});
  }
  try {
    write_model_dir(tmp, cfg, weights, save_dtype, tokenizer_path);
    write_safetensors(tmp + "/optimizer.safetensors", moments, "F32");
    json st;
    st["step"] = step;
    st["train_config"] = json::parse(train_config_json);
    std::ofstream state(tmp + "/trainer_state.json");
    state << st.dump(2) << "\n";
    state.flush();
    if (!state) {
      const int err = errno;
      const std::string path = tmp + "/trainer_state.json";
      throw Error(h5::is_out_of_space(err) ? h5::no_space_text(err, path)
                                           : "cannot write '" + path + "': " + h5::errno_text(err, path));
    }
    write_train_log(log, tmp + "/train_log.h5");
  } catch (const Error& e) {
    // A full disk: the half-written checkpoint goes, the previous one in out_dir stays for --resume.
    std::error_code ec;
    std::filesystem::remove_all(tmp, ec);
    const bool previous = path_exists(out_dir + "/trainer_state.json");
    throw Error(std::string(e.what()) + " — the checkpoint of step " + std::to_string(step) + " was not saved; " +
                (previous ? "the previous one in '" + out_dir +
                                "' is kept: run the same command with --resume once there is space"
                          : std::string("no checkpoint was saved yet: run the same command again (without "
                                        "--resume) once there is space")));
  }
  require_directory_or_absent(out_dir, "out_dir");
  remove_own_tree(old);  // a crash between the renames below left it
  if (path_exists(out_dir) && std::rename(out_dir.c_str(), old.c_str()) != 0)
    throw Error("cannot move the previous checkpoint '" + out_dir + "' aside: " + std::strerror(errno));
  if (std::rename(tmp.c_str(), out_dir.c_str()) != 0)
    throw Error("cannot move the new checkpoint into '" + out_dir + "': " + std::strerror(errno));
  remove_own_tree(old);
}

std::string recover_interrupted_swap(const std::string& out_dir) {
  const std::string tmp = out_dir + ".tmp", old = out_dir + ".old";
  if (path_exists(out_dir)) return "";
  // The swap renames OUT to OUT.old once OUT.tmp is whole (train_log.h5, written last, by temp name + rename), then
  // OUT.tmp to OUT: between the two (or before the first checkpoint's one rename) OUT is missing.
  if (path_exists(tmp + "/trainer_state.json") && path_exists(tmp + "/train_log.h5")) {
    if (std::rename(tmp.c_str(), out_dir.c_str()) != 0)
      throw Error("cannot complete the interrupted checkpoint swap: moving '" + tmp + "' to '" + out_dir +
                  "': " + std::strerror(errno));
    remove_own_tree(old);
    return "a kill interrupted the last checkpoint's swap: its new checkpoint (in '" + tmp + "') is now '" + out_dir +
           "'";
  }
  if (!path_exists(old + "/trainer_state.json")) return "";
  if (std::rename(old.c_str(), out_dir.c_str()) != 0)
    throw Error("cannot restore the previous checkpoint: moving '" + old + "' back to '" + out_dir +
                "': " + std::strerror(errno));
  return "a kill interrupted the last checkpoint's swap: the previous checkpoint (in '" + old + "') is back in '" +
         out_dir + "'";
}

TrainerState read_trainer_state(const std::string& out_dir) {
  const std::string path = out_dir + "/trainer_state.json";
  std::ifstream f(path);
  if (!f) throw Error("resume", "resume: cannot read '" + path + "': " + std::strerror(errno));
  TrainerState st;
  const json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  const bool ok = j.is_object() && j.contains("step") && j.at("step").is_number_integer() &&
                  j.at("step").get<int64_t>() >= 0 && j.at("step").get<int64_t>() <= INT32_MAX &&
                  (!j.contains("train_config") || j.at("train_config").is_object());
  if (!ok)
    throw Error("resume", "resume: '" + path +
                              "' is not a trainer state (JSON with a \"step\" >= 0 and a \"train_config\" object; "
                              "damaged or edited?): resume from an intact checkpoint, or train into another "
                              "directory");
  st.step = (int)j.at("step").get<int64_t>();
  st.train_config_json = j.contains("train_config") ? j.at("train_config").dump() : "{}";
  return st;
}

OutDirLock::OutDirLock(const std::string& out_dir, const std::string& who, const std::string& field)
    : path_(out_dir + ".lock") {
  // --out may name directories that do not exist yet: the lock beside OUT needs OUT's parent.
  const std::filesystem::path parent = std::filesystem::path(out_dir).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd_ < 0) throw Error(field, "cannot write '" + path_ + "': " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw Error(field, "'" + out_dir + "': another " + who + " is writing there now (it holds '" + path_ +
                             "'): wait for it to finish, or give another path");
    throw Error(field, "cannot lock '" + path_ + "': " + std::strerror(err));
  }
}

OutDirLock::~OutDirLock() {
  if (fd_ < 0) return;
  (void)::unlink(path_.c_str());
  ::close(fd_);
}

}  // namespace focal
