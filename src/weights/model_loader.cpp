#include "weights/model_loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "io/diffusers_folder.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"

namespace sd::weights {
namespace {

std::vector<std::string> names_of(const ModelFile& f) {
  std::vector<std::string> names;
  names.reserve(f.tensors().size());
  for (const auto& t : f.tensors()) names.push_back(t.name);
  return names;
}

int64_t rows_of(const Shape& ne) {
  return ne[1] * ne[2] * ne[3];
}

}  // namespace

size_t tensor_bytes(DType type, const Shape& ne) {
  return row_size(type, ne[0]) * static_cast<size_t>(rows_of(ne));
}

void ModelLoader::add(const std::string& path, io::FileRole role) {
  std::error_code ec;
  SD_CHECK(!path.empty(), "no model file given");
  SD_CHECK(std::filesystem::exists(path, ec), "model '%s' not found; check the path", path.c_str());
  paths_.push_back(path);
  if (std::filesystem::is_directory(path, ec)) {
    SD_CHECK(io::is_diffusers_folder(path),
             "'%s' is a folder but not a diffusers pipeline (no model_index.json or unet/); "
             "give a weight file",
             path.c_str());
    const io::DiffusersFolder folder = io::open_diffusers_folder(path);
    for (const io::DiffusersPart& part : folder.parts)
      for (const std::string& file : part.files)
        add_file(open_model_file(file), part.layout, part.prefix);
    if (!folder.tokenizer.empty()) tokenizer_dir_ = folder.tokenizer;
    return;
  }
  std::unique_ptr<ModelFile> file = open_model_file(path);
  const io::SourceLayout layout = io::guess_layout(names_of(*file));
  const std::string_view prefix =
      role == io::FileRole::Model ? std::string_view() : io::file_prefix(role, true);
  add_file(std::move(file), layout, prefix);
}

void ModelLoader::add_file(std::unique_ptr<ModelFile> file, io::SourceLayout layout,
                           std::string_view prefix) {
  SD_CHECK(!file->tensors().empty(), "'%s' holds no tensors", file->path().c_str());
  for (const io::TensorInfo& t : file->tensors()) {
    const io::NameMapping m = io::convert_name(t.name, layout, prefix);
    if (io::is_unused_tensor(m.name)) continue;
    WeightSource s;
    s.file = file.get();
    s.info = t;
    s.transform = m.transform;
    s.n_dims = std::max(1, t.n_dims);
    for (int d = 0; d < io::kMaxTensorDims; ++d) s.ne[d] = t.ne[d];
    s.stored = t.dtype;
    switch (m.transform) {
      case io::Transform::None:
        tensors_[m.name] = s;
        break;
      case io::Transform::Conv1x1:
        // Linear [out, in] is ne [in, out]; the 1x1 conv [out, in, 1, 1] is ne [1, 1, in, out].
        s.ne = {1, 1, t.ne[0], t.ne[1]};
        s.n_dims = 4;
        tensors_[m.name] = s;
        break;
      case io::Transform::Transpose:
        SD_CHECK(t.n_dims == 2, "%s: tensor '%s' should be 2-D to transpose, is %s",
                 file->path().c_str(), t.name.c_str(), io::shape_string(t).c_str());
        s.ne = {t.ne[1], t.ne[0], 1, 1};
        tensors_[m.name] = s;
        break;
      case io::Transform::SplitQkv: {
        auto names = io::qkv_split_names(m.name);
        const int outer = s.n_dims - 1;
        SD_CHECK(names && s.ne[outer] % 3 == 0, "%s: tensor '%s' %s cannot be split into q, k, v",
                 file->path().c_str(), t.name.c_str(), io::shape_string(t).c_str());
        s.ne[outer] /= 3;
        for (int part = 0; part < 3; ++part) {
          s.qkv_part = part;
          tensors_[(*names)[part]] = s;
        }
        break;
      }
    }
  }
  const std::optional<FileStamp> s = stamp(file->path());
  stamps_.push_back(s.value_or(FileStamp{}));
  files_.push_back(std::move(file));
}

std::optional<ModelLoader::FileStamp> ModelLoader::stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileStamp{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                   static_cast<uint64_t>(st.st_size),
                   static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
}

namespace {

// f32 values staged per conversion step (256 KiB): whole rows, cache-sized.
constexpr int64_t kStageValues = int64_t{1} << 16;

bool same_tensors(const ModelFile& a, const ModelFile& b) {
  const auto& x = a.tensors();
  const auto& y = b.tensors();
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].name != y[i].name || x[i].dtype != y[i].dtype || x[i].file_dtype != y[i].file_dtype ||
        x[i].ne != y[i].ne || x[i].offset != y[i].offset || x[i].size != y[i].size)
      return false;
  }
  return true;
}

}  // namespace

void ModelLoader::verify_files() {
  for (size_t i = 0; i < files_.size(); ++i) {
    const std::string path = files_[i]->path();
    const std::optional<FileStamp> now = stamp(path);
    SD_CHECK(now,
             "model file '%s' is gone; weights kept on disk (--params-backend disk) are read "
             "from it for every phase: put it back and generate again",
             path.c_str());
    if (*now == stamps_[i]) continue;
    std::unique_ptr<ModelFile> reopened;
    try {
      reopened = open_model_file(path);
    } catch (const Error& e) {
      sd::fail(
          "model file '%s' changed since the model was opened and cannot be read now (%s); "
          "put the original back and generate again",
          path.c_str(), e.what());
    }
    SD_CHECK(same_tensors(*files_[i], *reopened),
             "model file '%s' changed since the model was opened (its tensors differ); put the "
             "original back, or open the model again to use the new file",
             path.c_str());
    for (auto& [name, source] : tensors_)
      if (source.file == files_[i].get()) source.file = reopened.get();
    retired_.push_back(std::move(files_[i]));
    files_[i] = std::move(reopened);
    stamps_[i] = *now;
  }
}

void ModelLoader::evict(const std::string& name) const {
  const WeightSource& s = find(name);
  s.file->evict(s.info);
}

const WeightSource& ModelLoader::find(const std::string& name) const {
  auto it = tensors_.find(name);
  SD_CHECK(it != tensors_.end(), "tensor '%s' is missing from %s", name.c_str(), sources().c_str());
  return it->second;
}

std::vector<io::TensorInfo> ModelLoader::canonical_infos() const {
  std::vector<io::TensorInfo> infos;
  infos.reserve(tensors_.size());
  for (const auto& [name, s] : tensors_) {
    io::TensorInfo t = s.info;
    t.name = name;
    t.n_dims = s.n_dims;
    for (int d = 0; d < io::kMaxTensorDims; ++d) t.ne[d] = s.ne[d];
    infos.push_back(std::move(t));
  }
  return infos;
}

std::string ModelLoader::sources() const {
  std::string s;
  for (const std::string& p : paths_) s += (s.empty() ? "'" : ", '") + p + "'";
  return s.empty() ? "no files" : s;
}

const uint8_t* ModelLoader::mapped(const std::string& name, DType type) const {
  const WeightSource& s = find(name);
  if (s.transform != io::Transform::None && s.transform != io::Transform::Conv1x1) return nullptr;
  if (s.info.needs_conversion() || s.stored != type) return nullptr;
  return s.file->mapped(s.info);
}

void ModelLoader::read(const std::string& name, DType type, void* dst) const {
  const WeightSource& s = find(name);
  // Stored bytes, in place when mapped, then converted to the engine dtype they load as.
  std::vector<uint8_t> raw;
  const uint8_t* bytes = s.file->mapped(s.info);
  if (!bytes) {
    raw.resize(s.info.size);
    s.file->read(s.info, raw.data());
    bytes = raw.data();
  }
  std::vector<uint8_t> loaded;
  if (s.info.needs_conversion()) {
    loaded.resize(s.info.loaded_size());
    io::load_tensor_data(s.info, bytes, loaded.data());
    bytes = loaded.data();
  }
  const size_t part_bytes = tensor_bytes(s.stored, s.ne);
  if (s.transform == io::Transform::SplitQkv) bytes += part_bytes * static_cast<size_t>(s.qkv_part);

  if (type == s.stored && s.transform != io::Transform::Transpose) {
    std::memcpy(dst, bytes, part_bytes);
    return;
  }
  // sd.cpp quantizes with an all-ones importance matrix; the same bytes as its convert.
  const std::vector<float> ones(static_cast<size_t>(s.ne[0]), 1.0f);
  const int64_t n = s.ne[0] * rows_of(s.ne);
  const int64_t src_ne0 = s.transform == io::Transform::Transpose ? s.info.ne[0] : s.ne[0];
  const size_t src_row = row_size(s.stored, src_ne0);
  if (s.transform != io::Transform::Transpose) {
    // Chunks of whole rows through a small f32 stage that stays in cache and is reused: a
    // whole-tensor f32 copy would be fresh memory for every weight (zeroed by the kernel,
    // then by the vector), which made converting a model (--type) take seconds longer.
    // Where rows do not matter (converting to a float type), a chunk converts as one run: a
    // 3x3 conv weight's rows are 3 values, and converting those one by one took most of
    // the time to load a model. (The callers read several tensors at once, one per core.)
    const int64_t ne0 = s.ne[0], rows = rows_of(s.ne);
    SD_CHECK(ne0 % block_size(s.stored) == 0,
             "tensor '%s': rows of %lld values do not fill %s blocks", name.c_str(),
             static_cast<long long>(ne0), dtype_name(s.stored).data());
    const bool by_rows = block_size(type) > 1;  // quantizing: each row on its own
    const int64_t chunk = std::max<int64_t>(1, kStageValues / std::max<int64_t>(ne0, 1));
    thread_local std::vector<float> stage;
    stage.resize(static_cast<size_t>(std::min(chunk, rows) * ne0));
    const size_t dst_row = row_size(type, ne0);
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t c = std::min(chunk, rows - r0);
      dequantize_row(s.stored, bytes + r0 * src_row, stage.data(), c * ne0);
      uint8_t* out = static_cast<uint8_t*>(dst) + r0 * dst_row;
      if (by_rows) {
        quantize_rows(type, stage.data(), out, c, ne0, ones.data());
      } else {
        quantize_row(type, stage.data(), out, c * ne0);
      }
    }
    return;
  }
  std::vector<float> f32(static_cast<size_t>(n));
  for (int64_t r = 0; r < n / src_ne0; ++r)
    dequantize_row(s.stored, bytes + r * src_row, f32.data() + r * src_ne0, src_ne0);
  if (s.transform == io::Transform::Transpose) {
    // Source ne [a, b] becomes [b, a].
    const int64_t a = s.info.ne[0], b = s.info.ne[1];
    std::vector<float> t(f32.size());
    for (int64_t j = 0; j < b; ++j)
      for (int64_t i = 0; i < a; ++i)
        t[static_cast<size_t>(i * b + j)] = f32[static_cast<size_t>(j * a + i)];
    f32.swap(t);
  }
  quantize_rows(type, f32.data(), dst, rows_of(s.ne), s.ne[0], ones.data());
}

}  // namespace sd::weights
