#include "weights/lora.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>

#include "io/tensor_info.h"
#include "tensor/error.h"
#include "tensor/quant/quant.h"
#include "weights/lora_flux_names.h"
#include "weights/lora_names.h"
#include "weights/model_file.h"

namespace sd::weights {
namespace {

// What one tensor of a LoRA file is to its weight.
// clang-format off
enum class Role {
  Up, Down, Mid, Alpha, Scale,   // LoRA, LoCon
  Diff, DiffBias,                // full differences
  W1a, W1b, W2a, W2b, T1, T2,    // LoHa
  K1, K1a, K1b, K2, K2a, K2b,    // LoKr
  Ignored,
};
// clang-format on

struct Suffix {
  std::string_view text;
  Role role;
};

// Every trainer's spelling of the factor names; the key is stem + suffix.
constexpr Suffix kSuffixes[] = {
    {".lora_up.weight", Role::Up},  // kohya, LyCORIS
    {".lora_down.weight", Role::Down},
    {".lora_mid.weight", Role::Mid},  // LoCon Tucker core
    {".lora.up.weight", Role::Up},    // diffusers LoRACompatible layers
    {".lora.down.weight", Role::Down},
    {".lora.mid.weight", Role::Mid},
    {"_lora.up.weight", Role::Up},  // diffusers attention processors (to_q_lora)
    {"_lora.down.weight", Role::Down},
    {".lora_B.weight", Role::Up},  // PEFT
    {".lora_A.weight", Role::Down},
    {".lora_B.default.weight", Role::Up},
    {".lora_A.default.weight", Role::Down},
    {".lora_B", Role::Up},
    {".lora_A", Role::Down},
    {".alpha", Role::Alpha},
    {".scale", Role::Scale},
    {".diff", Role::Diff},        // full difference of the weight
    {".diff_b", Role::DiffBias},  // ... and of its bias
    {".hada_w1_a", Role::W1a},    // LoHa
    {".hada_w1_b", Role::W1b},
    {".hada_w2_a", Role::W2a},
    {".hada_w2_b", Role::W2b},
    {".hada_t1", Role::T1},
    {".hada_t2", Role::T2},
    {".lokr_w1", Role::K1},  // LoKr
    {".lokr_w1_a", Role::K1a},
    {".lokr_w1_b", Role::K1b},
    {".lokr_w2", Role::K2},
    {".lokr_w2_a", Role::K2a},
    {".lokr_w2_b", Role::K2b},
    {".dora_scale", Role::Ignored},  // DoRA's magnitude: not applied (nor by sd.cpp)
};

struct ParsedKey {
  std::string stem;
  Role role;
};

std::optional<ParsedKey> parse_key(std::string_view key) {
  if (key.substr(0, 5) == "lora.") key.remove_prefix(5);
  for (const Suffix& s : kSuffixes) {
    if (!key.ends_with(s.text)) continue;
    std::string stem(key.substr(0, key.size() - s.text.size()));
    // diffusers attention processors sit between the attention and its projection.
    for (std::string_view p : {".processor", "_processor"}) {
      const size_t at = stem.find(p);
      if (at != std::string::npos) stem.erase(at, p.size());
    }
    return ParsedKey{std::move(stem), s.role};
  }
  return std::nullopt;
}

int64_t numel(const Shape& ne) {
  return ne[0] * ne[1] * ne[2] * ne[3];
}

// Rows of a weight: a Linear {in, out} has `out`, a conv {kw, kh, Cin, Cout} has Cout.
int64_t out_dim(const Shape& ne) {
  return ne[2] > 1 || ne[3] > 1 ? ne[3] : ne[1];
}

// PyTorch's first dimension of a stored factor (the rank of a down factor).
int64_t outer_dim(const LoraFactor& f) {
  return f.ne[static_cast<size_t>(std::max(f.n_dims, 1) - 1)];
}

// "[out, in, kh, kw]": PyTorch's order (slowest first), as LoRA tools print shapes.
// n_dims < 0: the dimensions up to the last that is not 1.
std::string torch_shape_text(const Shape& ne, int n_dims = -1) {
  if (n_dims < 0) {
    n_dims = 1;
    for (int i = 0; i < 4; ++i)
      if (ne[i] != 1) n_dims = i + 1;
  }
  std::string s = "[";
  for (int i = std::max(n_dims, 1) - 1; i >= 0; --i) s += std::to_string(ne[i]) + (i ? ", " : "");
  return s + "]";
}

// A tensor's values as f32, whatever its stored dtype.
std::vector<float> read_values(const ModelFile& file, const io::TensorInfo& t) {
  std::vector<uint8_t> raw;
  const uint8_t* bytes = file.mapped(t);
  if (!bytes) {
    raw.resize(t.size);
    file.read(t, raw.data());
    bytes = raw.data();
  }
  const size_t n = static_cast<size_t>(t.n_elements());
  std::vector<float> out(n);
  if (t.needs_conversion()) {
    io::convert_to_f32(t.file_dtype, bytes, out.data(), n);
  } else if (t.dtype == DType::I32) {
    for (size_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, bytes + 4 * i, 4);
      out[i] = static_cast<float>(v);
    }
  } else {
    const int64_t row = t.ne[0];
    const size_t row_bytes = row_size(t.dtype, row);
    for (int64_t r = 0; row > 0 && r < t.n_elements() / row; ++r)
      dequantize_row(t.dtype, bytes + static_cast<size_t>(r) * row_bytes, out.data() + r * row,
                     row);
  }
  return out;
}

void accumulate_product(const float* up, const float* down, int64_t out, int64_t r, int64_t k,
                        float c, float* dst);

// The tensors of one file that change one weight.
struct Group {
  std::map<Role, const io::TensorInfo*> parts;
};

class UpdateBuilder {
 public:
  UpdateBuilder(const ModelFile& file, const std::string& target, const Shape& target_ne,
                const Group& group)
      : file_(file), group_(group) {
    u_.target = target;
    u_.target_ne = target_ne;
  }

  bool has(Role r) const { return group_.parts.count(r) != 0; }

  LoraFactor factor(Role r) {
    const io::TensorInfo& t = *group_.parts.at(r);
    SD_CHECK(t.n_elements() > 0, "LoRA '%s': '%s' is empty; the file is damaged",
             file_.path().c_str(), t.name.c_str());
    u_.keys.push_back(t.name);
    LoraFactor f;
    f.n_dims = t.n_dims;
    for (int i = 0; i < io::kMaxTensorDims; ++i) f.ne[i] = t.ne[i];
    f.values = read_values(file_, t);
    return f;
  }

  std::optional<float> scalar(Role r) {
    if (!has(r)) return std::nullopt;
    const io::TensorInfo& t = *group_.parts.at(r);
    SD_CHECK(t.n_elements() == 1, "LoRA '%s': '%s' should hold one number, it is %s",
             file_.path().c_str(), t.name.c_str(), torch_shape_text(as_shape(t), t.n_dims).c_str());
    u_.keys.push_back(t.name);
    return read_values(file_, t)[0];
  }

  const std::string& key_of(Role r) const { return group_.parts.at(r)->name; }

  [[noreturn]] void misfit(Role r, const LoraFactor& f, const char* why) const {
    sd::fail(
        "LoRA '%s': '%s' is %s, which does not fit '%s' %s (%s); the LoRA was made for "
        "another model",
        file_.path().c_str(), key_of(r).c_str(), torch_shape_text(f.ne, f.n_dims).c_str(),
        u_.target.c_str(), torch_shape_text(u_.target_ne).c_str(), why);
  }

  // Checks up x [mid x] down against the target; returns the rank (down's rows).
  int64_t check_product(Role up_role, const LoraFactor& up, Role down_role, const LoraFactor& down,
                        Role mid_role, const LoraFactor* mid) const {
    const Shape& t = u_.target_ne;
    const int64_t out = out_dim(t), k = numel(t) / out;
    const int64_t r = outer_dim(down);
    if (r <= 0) misfit(down_role, down, "empty factor");
    int64_t up_rank = r;
    if (mid) {
      // mid {kw, kh, r_down, r_up}: the kernel is the target's, down is 1x1 over Cin.
      if (mid->ne[0] != t[0] || mid->ne[1] != t[1] || mid->ne[2] != r)
        misfit(mid_role, *mid, "the Tucker core must be [rank, rank, kh, kw] of the conv");
      up_rank = mid->ne[3];
      if (down.values.size() != static_cast<size_t>(r * t[2]))
        misfit(down_role, down, "down must be [rank, in, 1, 1]");
    } else if (down.values.size() != static_cast<size_t>(r * k)) {
      misfit(down_role, down, "down must be [rank, in(, kh, kw)]");
    }
    if (outer_dim(up) != out || up.values.size() != static_cast<size_t>(out * up_rank))
      misfit(up_role, up, "up must be [out, rank]");
    return r;
  }

  void finish_scale(int64_t rank) {
    u_.rank = rank;
    u_.alpha = scalar(Role::Alpha).value_or(static_cast<float>(rank));
    const std::optional<float> scale = scalar(Role::Scale);
    u_.scale = scale ? *scale : u_.alpha / static_cast<float>(rank);
  }

  LoraUpdate low_rank() {
    u_.kind = LoraKind::LowRank;
    require_pair(Role::Up, Role::Down);
    u_.up = factor(Role::Up);
    u_.down = factor(Role::Down);
    if (has(Role::Mid)) u_.mid = factor(Role::Mid);
    finish_scale(check_product(Role::Up, u_.up, Role::Down, u_.down, Role::Mid,
                               u_.mid.empty() ? nullptr : &u_.mid));
    return std::move(u_);
  }

  LoraUpdate hadamard() {
    u_.kind = LoraKind::Hadamard;
    require_pair(Role::W1a, Role::W1b);
    require_pair(Role::W2a, Role::W2b);
    require_pair(Role::W2a, Role::W1a);
    u_.up = hada_up(Role::W1a, Role::T1);
    u_.down = factor(Role::W1b);
    u_.up2 = hada_up(Role::W2a, Role::T2);
    u_.down2 = factor(Role::W2b);
    if (has(Role::T1)) u_.mid = factor(Role::T1);
    if (has(Role::T2)) u_.mid2 = factor(Role::T2);
    const int64_t r = check_product(Role::W1a, u_.up, Role::W1b, u_.down, Role::T1,
                                    u_.mid.empty() ? nullptr : &u_.mid);
    check_product(Role::W2a, u_.up2, Role::W2b, u_.down2, Role::T2,
                  u_.mid2.empty() ? nullptr : &u_.mid2);
    finish_scale(r);
    return std::move(u_);
  }

  // LoKr: delta = w1 (x) w2, each factor stored whole or as a low-rank pair; kept here as
  // whole matrices w1 [a, b] (in `up`) and w2 [c, d*kh*kw] (in `up2`).
  LoraUpdate kronecker() {
    u_.kind = LoraKind::Kronecker;
    int64_t rank = 1;
    u_.up = kron_factor(Role::K1, Role::K1a, Role::K1b, rank);
    u_.up2 = kron_factor(Role::K2, Role::K2a, Role::K2b, rank);
    const Shape& t = u_.target_ne;
    const int64_t out = out_dim(t), k = numel(t) / out;
    const int64_t kernel = t[2] > 1 || t[3] > 1 ? t[0] * t[1] : 1, in = k / kernel;
    const int64_t a = u_.up.ne[1], b = u_.up.ne[0], c = u_.up2.ne[1], dk = u_.up2.ne[0];
    const Role w1 = has(Role::K1) ? Role::K1 : Role::K1b, w2 = has(Role::K2) ? Role::K2 : Role::K2b;
    if (out % a != 0 || in % b != 0) misfit(w1, u_.up, "w1 must divide [out, in]");
    if (c != out / a || dk != (in / b) * kernel)
      misfit(w2, u_.up2, "w1 (x) w2 must be [out, in(, kh, kw)]");
    // sd.cpp's rule: a factor stored whole counts as rank 1, which disables alpha.
    u_.rank = rank;
    u_.alpha = scalar(Role::Alpha).value_or(static_cast<float>(rank));
    u_.scale = rank == 1 ? 1.0f : u_.alpha / static_cast<float>(rank);
    return std::move(u_);
  }

  LoraUpdate full(Role role) {
    u_.kind = LoraKind::Full;
    u_.up = factor(role);
    if (u_.up.values.size() != static_cast<size_t>(numel(u_.target_ne)))
      misfit(role, u_.up, "a difference must be shaped like the weight");
    u_.rank = 0;
    u_.alpha = 1;
    u_.scale = 1;
    return std::move(u_);
  }

 private:
  static Shape as_shape(const io::TensorInfo& t) { return {t.ne[0], t.ne[1], t.ne[2], t.ne[3]}; }

  void require_pair(Role a, Role b) const {
    if (has(a) == has(b)) return;
    const Role present = has(a) ? a : b;
    sd::fail(
        "LoRA '%s': '%s' has no partner factor (each factor comes with its pair); the "
        "file is incomplete",
        file_.path().c_str(), key_of(present).c_str());
  }

  // A LoKr factor as a whole matrix [rows, cols] (ne {cols, rows}); a low-rank pair's
  // rank (w2's over w1's, as sd.cpp) goes to `rank`.
  LoraFactor kron_factor(Role whole, Role a, Role b, int64_t& rank) {
    if (has(whole)) {
      LoraFactor f = factor(whole);
      const int64_t rows = outer_dim(f);
      f.ne = {static_cast<int64_t>(f.values.size()) / rows, rows, 1, 1};
      f.n_dims = 2;
      return f;
    }
    require_pair(a, b);
    if (!has(a))
      sd::fail("LoRA '%s': the LoKr factors of '%s' are incomplete", file_.path().c_str(),
               u_.target.c_str());
    const LoraFactor fa = factor(a), fb = factor(b);
    const int64_t rows = outer_dim(fa), r = outer_dim(fb);
    const int64_t cols = static_cast<int64_t>(fb.values.size()) / r;
    if (static_cast<int64_t>(fa.values.size()) != rows * r) misfit(a, fa, "must be [rows, rank]");
    LoraFactor f;
    f.ne = {cols, rows, 1, 1};
    f.n_dims = 2;
    f.values.assign(static_cast<size_t>(rows * cols), 0.0f);
    accumulate_product(fa.values.data(), fb.values.data(), rows, r, cols, 1.0f, f.values.data());
    rank = r;
    return f;
  }

  // With a Tucker core, LoHa stores w_a as [rank, out]; turned here to [out, rank].
  LoraFactor hada_up(Role a, Role core) {
    LoraFactor f = factor(a);
    if (!has(core)) return f;
    const int64_t out = f.ne[0],
                  r = f.values.size() / static_cast<size_t>(std::max<int64_t>(out, 1));
    std::vector<float> t(f.values.size());
    for (int64_t i = 0; i < r; ++i)
      for (int64_t o = 0; o < out; ++o)
        t[static_cast<size_t>(o * r + i)] = f.values[static_cast<size_t>(i * out + o)];
    f.values.swap(t);
    f.ne = {r, out, 1, 1};
    f.n_dims = 2;
    return f;
  }

  const ModelFile& file_;
  const Group& group_;
  LoraUpdate u_;
};

// dst[o, k] += c * sum_a up[o, a] * down[a, k]   (up [out, r], down [r, K], row-major)
void accumulate_product(const float* up, const float* down, int64_t out, int64_t r, int64_t k,
                        float c, float* dst) {
  for (int64_t o = 0; o < out; ++o) {
    float* row = dst + o * k;
    for (int64_t a = 0; a < r; ++a) {
      const float w = c * up[o * r + a];
      const float* d = down + a * k;
      for (int64_t i = 0; i < k; ++i) row[i] += w * d[i];
    }
  }
}

// The Tucker core folded into down: M[a, i, s] = sum_b mid[a, b, s] * down[b, i], so that
// delta = up x M. mid {kw, kh, r_down, r_up}, down [r_down, in]; s runs over kh*kw.
std::vector<float> fold_core(const LoraFactor& mid, const LoraFactor& down, int64_t in) {
  const int64_t s_count = mid.ne[0] * mid.ne[1], rd = mid.ne[2], ru = mid.ne[3];
  std::vector<float> m(static_cast<size_t>(ru * in * s_count), 0.0f);
  for (int64_t a = 0; a < ru; ++a)
    for (int64_t b = 0; b < rd; ++b) {
      const float* core = mid.values.data() + (a * rd + b) * s_count;
      for (int64_t i = 0; i < in; ++i) {
        const float d = down.values[static_cast<size_t>(b * in + i)];
        float* dst = m.data() + (a * in + i) * s_count;
        for (int64_t s = 0; s < s_count; ++s) dst[s] += core[s] * d;
      }
    }
  return m;
}

// dst += c * up x [mid x] down, shaped like the target.
void accumulate_factors(const LoraFactor& up, const LoraFactor& down, const LoraFactor& mid,
                        const Shape& target, float c, float* dst) {
  const int64_t out = out_dim(target), k = numel(target) / out;
  if (mid.empty()) {
    accumulate_product(up.values.data(), down.values.data(), out, outer_dim(down), k, c, dst);
    return;
  }
  const std::vector<float> folded = fold_core(mid, down, target[2]);
  accumulate_product(up.values.data(), folded.data(), out, mid.ne[3], k, c, dst);
}

// Rows of a weight or bias: a bias {out} has `out`.
int64_t row_count(const Shape& ne) {
  return ne[1] == 1 && ne[2] == 1 && ne[3] == 1 ? ne[0] : out_dim(ne);
}

// An update read against rows [begin, begin + count) of a fused weight, made an update of
// the whole weight: the other rows change by zero. Low-rank: up [count, r] becomes
// [out, r]. Full: the difference is padded.
void widen_to_rows(LoraUpdate& u, const Shape& full, const RowRun& rows) {
  const int64_t out = row_count(full);
  LoraFactor& f = u.up;
  const int64_t per_row = static_cast<int64_t>(f.values.size()) / rows.count;
  std::vector<float> wide(static_cast<size_t>(out * per_row), 0.0f);
  std::copy(f.values.begin(), f.values.end(), wide.begin() + rows.begin * per_row);
  f.values.swap(wide);
  if (u.kind == LoraKind::Full) {
    f.ne = full;
  } else {
    f.ne = {per_row, out, 1, 1};
    f.n_dims = 2;
  }
  u.target_ne = full;
}

}  // namespace

const char* lora_kind_name(LoraKind kind) {
  switch (kind) {
    case LoraKind::LowRank:
      return "LoRA";
    case LoraKind::Hadamard:
      return "LoHa";
    case LoraKind::Kronecker:
      return "LoKr";
    case LoraKind::Full:
      return "diff";
  }
  return "?";
}

LoraFile read_lora(const std::string& path, const std::map<std::string, Shape>& model_weights) {
  std::unique_ptr<ModelFile> file;
  try {
    file = open_model_file(path);
  } catch (const Error& e) {
    sd::fail("cannot read LoRA '%s': %s", path.c_str(), e.what());
  }
  LoraFile out;
  out.path = path;
  const LoraNameIndex index(model_weights);
  // By target weight and part (-1: the whole weight; else a run of rows of a fused one).
  std::map<std::pair<std::string, int>, Group> groups;
  for (const io::TensorInfo& t : file->tensors()) {
    const std::optional<ParsedKey> key = parse_key(t.name);
    std::optional<std::string> base;
    int part = -1;
    if (key && key->role != Role::Ignored) {
      base = index.find(key->stem);
      if (!base) {
        if (const auto fused = index.find_part(key->stem)) {
          base = fused->base;
          part = fused->part;
        }
      }
    }
    if (!base) {
      out.unmatched.push_back(t.name);
      continue;
    }
    const std::string target = *base + (key->role == Role::DiffBias ? ".bias" : ".weight");
    if (!model_weights.count(target) || (part >= 0 && !model_weights.count(*base + ".weight"))) {
      out.unmatched.push_back(t.name);
      continue;
    }
    auto [it, inserted] = groups[{target, part}].parts.emplace(key->role, &t);
    SD_CHECK(inserted, "LoRA '%s': '%s' and '%s' both give the same factor of '%s'", path.c_str(),
             it->second->name.c_str(), t.name.c_str(), target.c_str());
  }

  for (const auto& [where, group] : groups) {
    const auto& [target, part] = where;
    const Shape& full = model_weights.at(target);
    // A part is read against its rows' shape, then widened to the whole weight.
    Shape shape = full;
    RowRun rows;
    if (part >= 0) {
      const Shape& weight = model_weights.at(target.substr(0, target.rfind('.')) + ".weight");
      rows = flux_fused_rows(part, weight[0], weight[1]);
      SD_CHECK(rows.count > 0 && rows.begin + rows.count <= row_count(full),
               "LoRA '%s': '%s' names part %d of '%s' %s, which has no such rows; the LoRA was "
               "made for another model",
               path.c_str(), group.parts.begin()->second->name.c_str(), part, target.c_str(),
               torch_shape_text(full).c_str());
      shape[full[1] == 1 && full[2] == 1 ? 0 : 1] = rows.count;
    }
    UpdateBuilder b(*file, target, shape, group);
    // One kind per weight, in sd.cpp's order of preference; the rest is reported.
    std::vector<Role> used;
    if (part >= 0 &&
        !(b.has(Role::Up) || b.has(Role::Down) || b.has(Role::Diff) || b.has(Role::DiffBias))) {
      // Only plain low-rank pairs and differences are spread over a fused weight's rows.
    } else if (b.has(Role::Up) || b.has(Role::Down)) {
      out.updates.push_back(b.low_rank());
      used = {Role::Up, Role::Down, Role::Mid, Role::Alpha, Role::Scale};
    } else if (b.has(Role::Diff) || b.has(Role::DiffBias)) {
      const Role r = b.has(Role::Diff) ? Role::Diff : Role::DiffBias;
      out.updates.push_back(b.full(r));
      used = {r};
    } else if (b.has(Role::K1) || b.has(Role::K1a) || b.has(Role::K1b)) {
      out.updates.push_back(b.kronecker());
      used = {Role::K1, Role::K1a, Role::K1b, Role::K2, Role::K2a, Role::K2b, Role::Alpha};
    } else if (b.has(Role::W1a) || b.has(Role::W1b) || b.has(Role::W2a) || b.has(Role::W2b)) {
      out.updates.push_back(b.hadamard());
      used = {Role::W1a, Role::W1b, Role::W2a,   Role::W2b,
              Role::T1,  Role::T2,  Role::Alpha, Role::Scale};
    }
    if (part >= 0 && !used.empty()) widen_to_rows(out.updates.back(), full, rows);
    for (const auto& [role, info] : group.parts)
      if (std::find(used.begin(), used.end(), role) == used.end())
        out.unmatched.push_back(info->name);
  }
  return out;
}

std::vector<float> lora_delta(const LoraUpdate& u) {
  std::vector<float> d(static_cast<size_t>(numel(u.target_ne)), 0.0f);
  switch (u.kind) {
    case LoraKind::LowRank:
      accumulate_factors(u.up, u.down, u.mid, u.target_ne, u.scale, d.data());
      break;
    case LoraKind::Hadamard: {
      std::vector<float> d2(d.size(), 0.0f);
      accumulate_factors(u.up, u.down, u.mid, u.target_ne, u.scale, d.data());
      accumulate_factors(u.up2, u.down2, u.mid2, u.target_ne, 1.0f, d2.data());
      for (size_t i = 0; i < d.size(); ++i) d[i] *= d2[i];
      break;
    }
    case LoraKind::Kronecker: {
      // delta[i1*c + i2][(j1*d + j2)*S + s] = w1[i1][j1] * w2[i2][j2*S + s]
      const int64_t a = u.up.ne[1], b = u.up.ne[0], c = u.up2.ne[1], dk = u.up2.ne[0];
      const int64_t k = b * dk;
      for (int64_t i1 = 0; i1 < a; ++i1)
        for (int64_t j1 = 0; j1 < b; ++j1) {
          const float w1 = u.scale * u.up.values[static_cast<size_t>(i1 * b + j1)];
          for (int64_t i2 = 0; i2 < c; ++i2) {
            const float* w2 = u.up2.values.data() + i2 * dk;
            float* dst = d.data() + (i1 * c + i2) * k + j1 * dk;
            for (int64_t j = 0; j < dk; ++j) dst[j] = w1 * w2[j];
          }
        }
      break;
    }
    case LoraKind::Full:
      for (size_t i = 0; i < d.size(); ++i) d[i] = u.scale * u.up.values[i];
      break;
  }
  return d;
}

void add_lora_delta(const LoraUpdate& u, float multiplier, const Shape& ne, float* weight) {
  SD_CHECK(ne == u.target_ne, "[lora] '%s' is %s, the LoRA update was read for %s",
           u.target.c_str(), torch_shape_text(ne).c_str(), torch_shape_text(u.target_ne).c_str());
  if (u.kind == LoraKind::LowRank) {
    // Straight into the weight: no delta-sized temporary for the common case.
    accumulate_factors(u.up, u.down, u.mid, ne, multiplier * u.scale, weight);
    return;
  }
  const std::vector<float> d = lora_delta(u);
  for (size_t i = 0; i < d.size(); ++i) weight[i] += multiplier * d[i];
}

}  // namespace sd::weights
