// --device auto|cpu|cuda, shared by every command that loads a model: add kDeviceOption to the command's options,
// print kDeviceHelp in its --help, and load through load_model.
#pragma once

#include <memory>
#include <string>

#include "args.h"
#include "focal/model.h"

namespace focal::cli {

extern const char* const kDeviceOption;       // "--device"
extern const char* const kDeviceHelp;         // the help line(s) of --device and --allow-nonfinite-weights
extern const char* const kLoadFlag;           // "--allow-nonfinite-weights": add to the flags of commands that load
extern const char* const kWeightsOption;      // "--weights native|fp32": add to the options of commands that load
extern const char* const kMmapFlag;           // "--mmap": add to the flags of commands that load
extern const char* const kPrecisionOption;    // "--precision auto|exact|fast": add to the options of commands that load
extern const char* const kRopeScalingOption;  // "--rope-scaling TYPE:FACTOR": add to the commands that run a model
extern const char* const kRopeScalingHelp;    // its help line

// -v / --verbose anywhere after the command (main strips it): informational notes such as the device auto chose.
extern bool g_verbose;

// The device of --device (default auto), resolved: a malformed value is a UsageError naming --device; cuda without
// a usable device is an Error saying why. Where auto ended up (and why, e.g. the CPU fallback of a CUDA build
// without a device) is one line on stderr, printed once per process and only with --device given or -v.
Device device_arg(const Args& a);

// Model::load(dir) on the device of --device, honouring --allow-nonfinite-weights, --weights, --precision, --mmap
// and --rope-scaling; prints the load's warnings, and progress with an ETA on stderr while a big file is read into
// memory.
std::unique_ptr<Model> load_model(const Args& a, const std::string& dir);
// The same with a rope_scaling override (LoadOptions::rope_scaling, TYPE:FACTOR): `focal eval --positions` runs.
std::unique_ptr<Model> load_model(const Args& a, const std::string& dir, const std::string& rope_scaling);
// The same on a device the command fixes (calibrate: the CPU, whatever auto would pick).
std::unique_ptr<Model> load_model(const Args& a, const std::string& dir, const std::string& rope_scaling,
                                  Device device);

}  // namespace focal::cli
