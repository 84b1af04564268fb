#include "api/convert.h"

#include <unistd.h>

#include <algorithm>
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

namespace sd::api {
namespace {

namespace fs = std::filesystem;

// One opened weight file, whichever its format.
class InputFile {
 public:
  virtual ~InputFile() = default;
  virtual const std::vector<io::TensorInfo>& tensors() const = 0;
  // Copies the tensor's stored bytes (info.size) into dst.
  virtual void read(const io::TensorInfo& info, uint8_t* dst) const = 0;
};

class SafetensorsInput final : public InputFile {
 public:
  explicit SafetensorsInput(const std::string& path) : f_(io::SafetensorsFile::open(path)) {}
  const std::vector<io::TensorInfo>& tensors() const override { return f_.tensors(); }
  void read(const io::TensorInfo& info, uint8_t* dst) const override {
    std::memcpy(dst, f_.data(info), info.size);
  }

 private:
  io::SafetensorsFile f_;
};

class GgufInput final : public InputFile {
 public:
  explicit GgufInput(const std::string& path) : f_(io::GgufFile::open(path)) {}
  const std::vector<io::TensorInfo>& tensors() const override { return f_.tensors(); }
  void read(const io::TensorInfo& info, uint8_t* dst) const override {
    std::memcpy(dst, f_.data(info), info.size);
  }

 private:
  io::GgufFile f_;
};

class TorchInput final : public InputFile {
 public:
  explicit TorchInput(const std::string& path) : f_(io::TorchCheckpoint::open(path)) {}
  const std::vector<io::TensorInfo>& tensors() const override { return f_.tensors(); }
  void read(const io::TensorInfo& info, uint8_t* dst) const override { f_.read(info, dst); }

 private:
  io::TorchCheckpoint f_;
};

bool has_suffix(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

// By magic first (files get renamed), then by extension.
std::unique_ptr<InputFile> open_input(const std::string& path) {
  char magic[4] = {};
  {
    std::ifstream f(path, std::ios::binary);
    if (!f) sd::fail("[convert] cannot open '%s': %s", path.c_str(), std::strerror(errno));
    f.read(magic, sizeof magic);
  }
  if (std::memcmp(magic, io::kGgufMagic, 4) == 0) return std::make_unique<GgufInput>(path);
  // A zip archive (torch.save since 1.6) or a raw pickle stream (legacy torch.save).
  if (std::memcmp(magic, "PK\x03\x04", 4) == 0 || static_cast<uint8_t>(magic[0]) == 0x80) {
    return std::make_unique<TorchInput>(path);
  }
  const std::string ext = lower(fs::path(path).extension().string());
  if (ext == ".ckpt" || ext == ".pt" || ext == ".pth" || ext == ".bin") {
    return std::make_unique<TorchInput>(path);
  }
  return std::make_unique<SafetensorsInput>(path);
}

// One tensor of the output: where its bytes come from and what the name mapping asks.
struct Entry {
  const InputFile* file = nullptr;
  io::TensorInfo info;  // as the file states it
  io::Transform transform = io::Transform::None;
  int qkv_part = 0;  // SplitQkv: which third
  std::vector<int64_t> ne;
  DType stored = DType::F32;
  DType out = DType::F32;
};

std::vector<int64_t> dims_of(const io::TensorInfo& t) {
  std::vector<int64_t> ne(t.ne.begin(), t.ne.begin() + std::max(1, t.n_dims));
  return ne;
}

// Adds `file`'s tensors under their canonical names; a later file's tensor replaces an
// earlier one of the same name (so --vae overrides the checkpoint's VAE, as in sd.cpp).
void add_file(const InputFile& file, io::SourceLayout layout, std::string_view prefix,
              std::map<std::string, Entry>& out) {
  for (const io::TensorInfo& t : file.tensors()) {
    io::NameMapping m = io::convert_name(t.name, layout, prefix);
    if (io::is_unused_tensor(m.name)) continue;
    Entry e;
    e.file = &file;
    e.info = t;
    e.transform = m.transform;
    e.ne = dims_of(t);
    e.stored = t.dtype;
    switch (m.transform) {
      case io::Transform::None:
        out[m.name] = std::move(e);
        break;
      case io::Transform::Conv1x1:
        // Linear [out, in] is ne [in, out]; the 1x1 conv [out, in, 1, 1] is ne [1, 1, in, out].
        e.ne = {1, 1, e.ne[0], e.ne.size() > 1 ? e.ne[1] : 1};
        out[m.name] = std::move(e);
        break;
      case io::Transform::Transpose:
        SD_CHECK(t.n_dims == 2, "[convert] %s: tensor '%s' should be 2-D to transpose, is %s",
                 t.path.c_str(), t.name.c_str(), io::shape_string(t).c_str());
        e.ne = {t.ne[1], t.ne[0]};
        out[m.name] = std::move(e);
        break;
      case io::Transform::SplitQkv: {
        auto names = io::qkv_split_names(m.name);
        const int outer = std::max(1, t.n_dims) - 1;
        SD_CHECK(names && e.ne[outer] % 3 == 0,
                 "[convert] %s: tensor '%s' %s cannot be split into q, k, v", t.path.c_str(),
                 t.name.c_str(), io::shape_string(t).c_str());
        e.ne[outer] /= 3;
        for (int part = 0; part < 3; ++part) {
          Entry p = e;
          p.qkv_part = part;
          out[(*names)[part]] = std::move(p);
        }
        break;
      }
    }
  }
}

std::vector<std::string> names_of(const InputFile& f) {
  std::vector<std::string> names;
  names.reserve(f.tensors().size());
  for (const auto& t : f.tensors()) names.push_back(t.name);
  return names;
}

int64_t product(const std::vector<int64_t>& ne) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

// Writes one entry's bytes: the source tensor is read whole (one tensor in memory at a
// time), sliced or transposed as the mapping asks, then converted through f32 unless the
// output type is the stored one.
void write_entry(const Entry& e, io::GgufSink& sink) {
  std::vector<uint8_t> raw(e.info.size);
  e.file->read(e.info, raw.data());
  std::vector<uint8_t> loaded;
  const uint8_t* src = raw.data();
  if (e.info.needs_conversion()) {
    loaded.resize(e.info.loaded_size());
    io::load_tensor_data(e.info, raw.data(), loaded.data());
    src = loaded.data();
  }
  const int64_t n = product(e.ne);
  const int64_t ne0 = e.ne[0];
  const size_t out_bytes = row_size(e.stored, ne0) * static_cast<size_t>(n / ne0);
  if (e.transform == io::Transform::SplitQkv) src += out_bytes * static_cast<size_t>(e.qkv_part);

  if (e.out == e.stored && e.transform != io::Transform::Transpose) {
    sink.write(src, out_bytes);
    return;
  }

  std::vector<float> f32(static_cast<size_t>(n));
  dequantize_row(e.stored, src, f32.data(), n);
  if (e.transform == io::Transform::Transpose) {
    // Source [a, b] (ne order) becomes [b, a].
    const int64_t a = e.info.ne[0], b = e.info.ne[1];
    std::vector<float> t(f32.size());
    for (int64_t j = 0; j < b; ++j) {
      for (int64_t i = 0; i < a; ++i)
        t[static_cast<size_t>(i * b + j)] = f32[static_cast<size_t>(j * a + i)];
    }
    f32.swap(t);
  }
  const int64_t nrows = n / ne0;
  std::vector<uint8_t> out(row_size(e.out, ne0) * static_cast<size_t>(nrows));
  // sd.cpp passes an all-ones importance matrix to ggml's quantizers; reproduce its bytes.
  const std::vector<float> ones(static_cast<size_t>(ne0), 1.0f);
  quantize_rows(e.out, f32.data(), out.data(), nrows, ne0, ones.data());
  sink.write(out.data(), out.size());
}

void check_output_path(const std::string& output) {
  SD_CHECK(!output.empty(), "[convert] no output file given (-o OUT.gguf)");
  fs::path dir = fs::path(output).parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  SD_CHECK(fs::is_directory(dir, ec),
           "[convert] output folder '%s' does not exist; create it first", dir.string().c_str());
  SD_CHECK(::access(dir.c_str(), W_OK) == 0,
           "[convert] output folder '%s' is not writable; choose another -o", dir.string().c_str());
  SD_CHECK(!fs::is_directory(output, ec), "[convert] output '%s' is a folder; give a file name",
           output.c_str());
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
             "[convert] tensor type rule '%s' should be regex=type, e.g. 'attn=q8_0'",
             item.c_str());
    TensorTypeRule r;
    r.pattern = item.substr(0, eq);
    try {
      r.regex = std::regex(r.pattern, std::regex::ECMAScript);
    } catch (const std::regex_error& err) {
      sd::fail("[convert] tensor type rule '%s': invalid regex '%s' (%s)", item.c_str(),
               r.pattern.c_str(), err.what());
    }
    const std::string type = item.substr(eq + 1);
    try {
      r.type = parse_convert_type(type);
    } catch (const Error&) {
      sd::fail("[convert] tensor type rule '%s': unknown type '%s'; valid types: %s", item.c_str(),
               type.c_str(), convert_type_list().c_str());
    }
    result.push_back(std::move(r));
  }
  return result;
}

bool tensor_should_be_converted(std::string_view name, int64_t ne0, DType stored, DType target) {
  if (stored == DType::I32 || target == DType::I32) return false;
  if (is_quantized(target) && ne0 % block_size(target) != 0) return false;
  if (has_suffix(name, ".bias") || has_suffix(name, ".scale") ||
      has_suffix(name, ".weight_scale")) {
    return false;
  }
  static constexpr std::string_view kKept[] = {
      // Flux
      "img_in.", "txt_in.", "time_in.", "vector_in.", "guidance_in.", "final_layer.",
      // MMDiT
      "x_embedder.", "t_embedder.", "y_embedder.", "pos_embed", "context_embedder.",
      // UNet
      "time_embed.", "label_emb.",
      // any embedding table
      "embedding"};
  for (std::string_view k : kKept) {
    if (name.find(k) != std::string_view::npos) return false;
  }
  return true;
}

DType output_type(std::string_view name, int64_t ne0, DType stored, std::optional<DType> type,
                  const std::vector<TensorTypeRule>& rules) {
  std::optional<DType> target = type;
  const std::string n(name);
  for (const TensorTypeRule& r : rules) {
    if (std::regex_search(n, r.regex)) {
      target = r.type;
      break;
    }
  }
  if (target && tensor_should_be_converted(name, ne0, stored, *target)) return *target;
  return stored;
}

ConvertResult convert_model(const ConvertOptions& options) {
  SD_CHECK(!options.input.empty(), "[convert] no input model given (-m FILE)");
  std::error_code ec;
  SD_CHECK(fs::exists(options.input, ec), "[convert] input '%s' not found", options.input.c_str());
  SD_CHECK(options.vae.empty() || fs::exists(options.vae, ec), "[convert] VAE file '%s' not found",
           options.vae.c_str());
  check_output_path(options.output);
  const std::vector<TensorTypeRule> rules = parse_tensor_type_rules(options.tensor_type_rules);
  SD_CHECK(!options.type || std::find(convert_types().begin(), convert_types().end(),
                                      *options.type) != convert_types().end(),
           "[convert] cannot write type %s; valid types: %s",
           std::string(dtype_name(*options.type)).c_str(), convert_type_list().c_str());

  std::vector<std::unique_ptr<InputFile>> files;
  std::map<std::string, Entry> entries;  // sorted by name, the order sd.cpp writes
  if (fs::is_directory(options.input, ec)) {
    SD_CHECK(io::is_diffusers_folder(options.input),
             "[convert] '%s' is a folder but not a diffusers pipeline (no model_index.json or "
             "unet/); give a weight file",
             options.input.c_str());
    const io::DiffusersFolder folder = io::open_diffusers_folder(options.input);
    for (const io::DiffusersPart& part : folder.parts) {
      for (const std::string& path : part.files) {
        files.push_back(open_input(path));
        add_file(*files.back(), part.layout, part.prefix, entries);
      }
    }
  } else {
    files.push_back(open_input(options.input));
    // LDM checkpoints keep their names; a lone diffusers UNet/VAE file gets its root.
    add_file(*files.back(), io::guess_layout(names_of(*files.back())), "", entries);
  }
  if (!options.vae.empty()) {
    files.push_back(open_input(options.vae));
    add_file(*files.back(), io::guess_layout(names_of(*files.back())),
             io::file_prefix(io::FileRole::Vae, true), entries);
  }
  SD_CHECK(!entries.empty(), "[convert] '%s' holds no tensors", options.input.c_str());

  ConvertResult result;
  uint64_t total = 0;
  for (auto& [name, e] : entries) {
    e.out = output_type(name, e.ne[0], e.stored, options.type, rules);
    total += row_size(e.out, e.ne[0]) * static_cast<uint64_t>(product(e.ne) / e.ne[0]);
  }

  io::GgufWriter writer;
  writer.add("general.quantization_version", io::GgufValue::u32(2));
  if (options.type) {
    writer.add("sd.convert.type", io::GgufValue::string(std::string(dtype_name(*options.type))));
  }
  writer.add("sd.convert.source",
             io::GgufValue::string(fs::path(options.input).filename().string()));

  size_t index = 0;
  uint64_t written = 0;
  for (const auto& [name, e] : entries) {
    const std::string* entry_name = &name;
    const Entry* entry = &e;
    writer.add_tensor(name, e.out, e.ne, [&, entry_name, entry](io::GgufSink& sink) {
      write_entry(*entry, sink);
      ++index;
      written += row_size(entry->out, entry->ne[0]) *
                 static_cast<uint64_t>(product(entry->ne) / entry->ne[0]);
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
