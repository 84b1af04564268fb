#include "api/convert.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <utility>

#include "io/diffusers_folder.h"
#include "io/gguf.h"
#include "io/gguf_writer.h"
#include "io/name_conversion.h"
#include "io/safetensors.h"
#include "io/tensor_info.h"
#include "io/torch_checkpoint.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"
#include "weights/model_loader.h"
#include "weights/weight_type.h"

namespace sd::api {
namespace {

namespace fs = std::filesystem;

int64_t product(const std::vector<int64_t>& ne) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

// One tensor of the output: its canonical shape and the type it is written as.
struct Entry {
  std::vector<int64_t> ne;
  DType stored = DType::F32;
  DType out = DType::F32;

  bool empty() const { return product(ne) == 0; }
  // Rows of ne[0] elements in `out`; a tensor with a zero dimension has no bytes.
  uint64_t bytes() const {
    if (empty()) return 0;
    return row_size(out, ne[0]) * static_cast<uint64_t>(product(ne) / ne[0]);
  }
};

void check_output_path(const std::string& output) {
  SD_CHECK(!output.empty(), "[convert] no output file given (-o OUT.gguf)");
  fs::path dir = fs::path(output).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  SD_CHECK(fs::is_directory(dir, ec),
           "[convert] output folder '%s' does not exist; create it first", dir.string().c_str());
  SD_CHECK(!fs::is_directory(output, ec), "[convert] output '%s' is a folder; give a file name",
           output.c_str());
  // Permission bits do not tell (root, read-only mounts, /proc): create a file there.
  std::string probe = (dir / ".sd-convert-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  SD_CHECK(fd >= 0, "[convert] cannot write in the output folder '%s': %s; choose another -o",
           dir.string().c_str(), std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

}  // namespace

const std::vector<DType>& convert_types() {
  static const std::vector<DType> types = {
      DType::F32,  DType::F16,  DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
      DType::Q8_0, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K};
  return types;
}

std::string convert_type_list() {
  std::string s;
  for (DType t : convert_types()) {
    if (!s.empty()) s += ", ";
    s += dtype_name(t);
  }
  return s;
}

DType parse_convert_type(std::string_view name) {
  std::optional<DType> t = dtype_from_name(name);
  if (t && std::find(convert_types().begin(), convert_types().end(), *t) != convert_types().end()) {
    return *t;
  }
  sd::fail("[convert] unknown type '%.*s'; valid types: %s", static_cast<int>(name.size()),
           name.data(), convert_type_list().c_str());
}

std::vector<TensorTypeRule> parse_tensor_type_rules(std::string_view rules) {
  std::vector<TensorTypeRule> result;
  size_t start = 0;
  while (start <= rules.size()) {
    size_t end = rules.find(',', start);
    if (end == std::string_view::npos) end = rules.size();
    const std::string item(rules.substr(start, end - start));
    start = end + 1;
    if (item.empty()) continue;
    // The last '=' splits, so a regex may contain '=' itself.
    const size_t eq = item.rfind('=');
    SD_CHECK(eq != std::string::npos && eq > 0,
             "--tensor-type-rules: '%s' should be regex=type, e.g. 'attn=q8_0'", item.c_str());
    TensorTypeRule r;
    r.pattern = item.substr(0, eq);
    try {
      r.regex = std::regex(r.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& err) {
      sd::fail("--tensor-type-rules: '%s': invalid regex '%s' (%s)", item.c_str(),
               r.pattern.c_str(), err.what());
    }
    const std::string type = item.substr(eq + 1);
    try {
      r.type = parse_convert_type(type);
    } catch (const Error&) {
      sd::fail("--tensor-type-rules: '%s': unknown type '%s'; valid types: %s", item.c_str(),
               type.c_str(), convert_type_list().c_str());
    }
    result.push_back(std::move(r));
  }
  return result;
}

ConvertResult convert_model(const ConvertOptions& options, const ConvertParts& part_files) {
  const std::pair<const std::string*, io::FileRole> parts[] = {
      {&part_files.diffusion_model, io::FileRole::DiffusionModel},
      {&part_files.clip_l, io::FileRole::ClipL},
      {&part_files.clip_g, io::FileRole::ClipG},
      {&part_files.t5xxl, io::FileRole::T5xxl},
      {&part_files.llm, io::FileRole::Llm},
  };
  bool any_part = false;
  for (const auto& [path, role] : parts) any_part |= !path->empty();
  SD_CHECK(!options.input.empty() || any_part,
           "[convert] no input model given (-m FILE, or --diffusion-model / --t5xxl / --clip_l "
           "/ --clip_g / --llm FILE)");
  std::error_code ec;
  SD_CHECK(options.input.empty() || fs::exists(options.input, ec), "[convert] input '%s' not found",
           options.input.c_str());
  for (const auto& [path, role] : parts)
    SD_CHECK(path->empty() || fs::exists(*path, ec), "[convert] input '%s' not found",
             path->c_str());
  SD_CHECK(options.vae.empty() || fs::exists(options.vae, ec), "[convert] VAE file '%s' not found",
           options.vae.c_str());
  check_output_path(options.output);
  const std::vector<TensorTypeRule> rules = parse_tensor_type_rules(options.tensor_type_rules);
  SD_CHECK(!options.type || std::find(convert_types().begin(), convert_types().end(),
                                      *options.type) != convert_types().end(),
           "[convert] cannot write type %s; valid types: %s",
           std::string(dtype_name(*options.type)).c_str(), convert_type_list().c_str());

  weights::ModelLoader loader;
  if (!options.input.empty()) loader.add(options.input);
  if (!options.vae.empty()) loader.add(options.vae, io::FileRole::Vae);
  for (const auto& [path, role] : parts)
    if (!path->empty()) loader.add(*path, role);
  std::string first_input = options.input;
  for (const auto& [path, role] : parts)
    if (first_input.empty()) first_input = *path;
  std::map<std::string, Entry> entries;  // sorted by name, the order sd.cpp writes
  for (const auto& [name, source] : loader.tensors()) {
    Entry e;
    e.ne.assign(source.ne.begin(), source.ne.begin() + source.n_dims);
    if (e.ne.empty()) e.ne.push_back(1);  // a scalar is written as one element
    e.stored = source.stored;
    entries[name] = std::move(e);
  }
  SD_CHECK(!entries.empty(), "[convert] '%s' holds no tensors", first_input.c_str());

  ConvertResult result;
  uint64_t total = 0;
  for (auto& [name, e] : entries) {
    // A tensor with a zero dimension is legal and kept as it is: there is nothing to convert.
    e.out = e.empty() ? e.stored
                      : weights::target_weight_type(name, e.ne[0], e.stored, options.type, rules);
    total += e.bytes();
  }

  io::GgufWriter writer;
  writer.add("general.quantization_version", io::GgufValue::u32(2));
  if (options.type) {
    writer.add("sd.convert.type", io::GgufValue::string(std::string(dtype_name(*options.type))));
  }
  writer.add("sd.convert.source", io::GgufValue::string(fs::path(first_input).filename().string()));

  size_t index = 0;
  uint64_t written = 0;
  for (const auto& [name, e] : entries) {
    const std::string* entry_name = &name;
    const Entry* entry = &e;
    writer.add_tensor(name, e.out, e.ne, [&, entry_name, entry](io::GgufSink& sink) {
      // One tensor in memory at a time: read, convert, write.
      std::vector<uint8_t> bytes(static_cast<size_t>(entry->bytes()));
      if (!bytes.empty()) {
        loader.read(*entry_name, entry->out, bytes.data());
        sink.write(bytes.data(), bytes.size());
      }
      ++index;
      written += bytes.size();
      if (options.progress) {
        options.progress({index, entries.size(), *entry_name, entry->out, written, total});
      }
    });
    ++result.type_counts[e.out];
  }
  writer.write(options.output);
  result.tensors = entries.size();
  result.bytes = written;
  return result;
}

}  // namespace sd::api
