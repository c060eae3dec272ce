// The output-path check every command makes before its long work: the file can be created in its directory, and
// the path is not a directory, device or FIFO (focal::output_target), so that a bad -o fails in a second, not
// after the model ran.
#pragma once

#include <string>
#include <vector>

namespace focal::cli {

class Args;

// Throws focal::Error naming `opt` (-o, --capture, --log) and the path. A missing `path` is a usage error.
void check_output(const std::string& path, const char* opt = "-o");

// Refuses outputs that would replace one of the command's inputs, or each other: -o at the model's
// model.safetensors or .gguf, the --prompt-file, the corpus, a temperature file; calibrate's -o and --log at one path.
// `outputs` are the options that write (e.g. {"--output", "--log"}); every other option value and every positional
// argument is an input where it names an existing file, or a directory (then each file directly in it); the parts of
// a list ("standard,calibrated:T.json") count one by one. `extra_inputs`: inputs the command line does not spell
// (the bundled default model). Throws Error naming the output option and the input.
// Whether two paths name one file, existing or not, however spelled (relative, "./", "..", links in the directories).
bool same_path(const std::string& a, const std::string& b);
void check_outputs_apart(const Args& a, const std::vector<std::string>& outputs,
                         const std::vector<std::string>& extra_inputs = {});

// For a command that writes a model directory (init, export): DIR must be new or an empty directory, unless
// `force` (then the files it writes replace theirs). `opt` names the argument in the message. init into a trained
// model's directory replaced its weights and left a tokenizer of another vocabulary beside them.
void check_new_model_dir(const std::string& dir, bool force, const char* opt);

// `s` as one shell word (single quotes when it holds anything but [A-Za-z0-9_./:=@%+-]), for a command line the
// CLI prints for the user to paste: "apply with --temp 'calibrated:my temps.json'".
std::string shell_word(const std::string& s);

}  // namespace focal::cli
