// PyTorch checkpoints built byte by byte: zip and legacy layouts, every storage type the
// engine loads, views with offsets and strides, Lightning-style nesting.
#include "io/torch_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/torch_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::bytes_of;
using test::TorchFileBuilder;

// f32 [2, 3] "w" and its transpose "wt", f16 [4], bf16 [2, 2], i64 [3], and "tail", a
// 2-element view at offset 4 of w's storage.
TorchFileBuilder sample() {
  TorchFileBuilder b;
  b.storage("0", "FloatStorage", bytes_of<float>({0, 1, 2, 3, 4, 5}), 4);
  b.storage("1", "HalfStorage", bytes_of<uint16_t>({0x3c00, 0x4000, 0x4200, 0xc400}), 2);
  b.storage("2", "BFloat16Storage", bytes_of<uint16_t>({0x3f80, 0x4000, 0x4040, 0x4080}), 2);
  b.storage("3", "LongStorage", bytes_of<int64_t>({7, -8, 1ll << 30}), 8);
  b.tensor("w", "0", 0, {2, 3})
      .tensor("wt", "0", 0, {3, 2}, {1, 3})
      .tensor("h", "1", 0, {4})
      .tensor("bf", "2", 0, {2, 2})
      .tensor("ids", "3", 0, {3})
      .tensor("tail", "0", 4, {2});
  return b;
}

std::vector<float> floats(const TorchCheckpoint& c, const std::string& name) {
  const TensorInfo* t = c.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  std::vector<uint8_t> raw(static_cast<size_t>(t->size));
  c.read(*t, raw.data());
  std::vector<float> out(static_cast<size_t>(t->n_elements()));
  std::memcpy(out.data(), raw.data(), raw.size());
  return out;
}

void check_sample(const TorchCheckpoint& c) {
  ASSERT_EQ(c.tensors().size(), 6u);
  EXPECT_EQ(c.tensors()[0].name, "w");
  const TensorInfo* w = c.find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::F32);
  EXPECT_EQ(w->n_dims, 2);
  EXPECT_EQ(w->ne[0], 3);  // engine order: fastest first
  EXPECT_EQ(w->ne[1], 2);
  EXPECT_TRUE(c.is_contiguous(*w));
  EXPECT_EQ(w->size, 24u);
  float first[6];
  std::memcpy(first, c.data(*w), 24);
  EXPECT_EQ(first[5], 5.0f);

  const TensorInfo* wt = c.find("wt");
  ASSERT_NE(wt, nullptr);
  EXPECT_FALSE(c.is_contiguous(*wt));
  EXPECT_EQ(wt->ne[0], 2);
  EXPECT_EQ(wt->ne[1], 3);
  EXPECT_EQ(c.layout(*wt).stride[0], 3);
  EXPECT_EQ(c.layout(*wt).stride[1], 1);
  EXPECT_EQ(floats(c, "wt"), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  test::expect_error([&] { c.data(*wt); }, {c.path(), "'wt'", "strided view"});

  EXPECT_EQ(floats(c, "tail"), (std::vector<float>{4, 5}));
  EXPECT_TRUE(c.is_contiguous(*c.find("tail")));
  EXPECT_EQ(c.find("tail")->offset, w->offset + 16);

  const TensorInfo* h = c.find("h");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::F16);
  EXPECT_FALSE(h->needs_conversion());
  uint16_t hv[4];
  std::memcpy(hv, c.data(*h), 8);
  EXPECT_EQ(hv[3], 0xc400);

  const TensorInfo* bf = c.find("bf");
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(bf->dtype, DType::BF16);
  EXPECT_EQ(bf->ne[0], 2);

  const TensorInfo* ids = c.find("ids");
  ASSERT_NE(ids, nullptr);
  EXPECT_EQ(ids->dtype, DType::I32);
  EXPECT_EQ(ids->file_dtype, FileDType::I64);
  EXPECT_EQ(ids->size, 24u);
  int32_t iv[3];
  load_tensor_data(*ids, c.data(*ids), iv);
  EXPECT_EQ(iv[0], 7);
  EXPECT_EQ(iv[1], -8);
  EXPECT_EQ(iv[2], 1 << 30);
}

TEST(TorchCheckpoint, ZipFormat) {
  auto c = TorchCheckpoint::parse(MappedFile::from_memory("m.ckpt", sample().zip_bytes()));
  EXPECT_FALSE(c.is_legacy());
  check_sample(c);
  // Stored entries are used in place, 64-byte aligned as torch.save writes them.
  EXPECT_EQ(c.find("w")->offset % 64, 0u);
}

TEST(TorchCheckpoint, ZipFromDisk) {
  test::TempDir dir;
  std::string path = dir.file("m.pt");
  test::write_file(path, sample().zip_bytes());
  auto c = TorchCheckpoint::open(path);
  EXPECT_EQ(c.find("w")->path, path);
  check_sample(c);
}

TEST(TorchCheckpoint, Zip64Records) {
  TorchFileBuilder b = sample();
  b.zip64 = true;
  b.top = "sd-v1-5";  // the top folder is named after the file
  check_sample(TorchCheckpoint::parse(MappedFile::from_memory("m.ckpt", b.zip_bytes())));
}

TEST(TorchCheckpoint, LegacyFormat) {
  auto c = TorchCheckpoint::parse(MappedFile::from_memory("m.pt", sample().legacy_bytes()));
  EXPECT_TRUE(c.is_legacy());
  check_sample(c);
}

TEST(TorchCheckpoint, LightningStateDict) {
  TorchFileBuilder b = sample();
  b.lightning = true;
  for (const Bytes& bytes : {b.zip_bytes(), b.legacy_bytes()}) {
    auto c = TorchCheckpoint::parse(MappedFile::from_memory("m.ckpt", bytes));
    check_sample(c);
    EXPECT_EQ(c.find("epoch"), nullptr);
    EXPECT_EQ(c.find("state_dict.w"), nullptr);
  }
}

TEST(TorchCheckpoint, NestedDictsAreFlattened) {
  test::PickleWriter w;
  w.proto(2).op('}').mark().str("model").op('}').mark().str("w");
  w.global("torch._utils", "_rebuild_tensor_v2").mark();
  w.mark().str("storage").global("torch", "FloatStorage").str("0").str("cpu").integer(2).op('t');
  w.op('Q').integer(0).tuple({2}).tuple({1}).boolean(false).ordered_dict().op('t').op('R');
  w.op('u').str("step").integer(5).str("opt").global("torch.optim", "AdamW").op(')').op('R');
  w.op('u').stop();
  auto c = TorchCheckpoint::parse(MappedFile::from_memory(
      "n.pt", test::zip_with_pickle(w.b, {{"archive/data/0", bytes_of<float>({1, 2})}})));
  ASSERT_EQ(c.tensors().size(), 1u);
  EXPECT_EQ(c.tensors()[0].name, "model.w");
  ASSERT_EQ(c.notes().size(), 1u);
  EXPECT_NE(c.notes()[0].find("torch.optim.AdamW"), std::string::npos) << c.notes()[0];
}

TEST(TorchCheckpoint, ParameterAndScalarAndEmpty) {
  test::PickleWriter v;
  v.proto(2).ordered_dict().mark();
  v.str("p").global("torch._utils", "_rebuild_parameter");
  v.global("torch._utils", "_rebuild_tensor_v2").mark();
  v.mark().str("storage").global("torch", "HalfStorage").str("0").str("cpu").integer(3).op('t');
  v.op('Q').put(0).integer(1).tuple({2}).tuple({1}).boolean(false).ordered_dict().op('t').op('R');
  v.boolean(true).ordered_dict().op(0x87).op('R');
  v.str("scalar").global("torch._utils", "_rebuild_tensor_v2").mark().get(0).integer(2);
  v.tuple({}).tuple({}).boolean(false).ordered_dict().op('t').op('R');
  v.str("empty").global("torch._utils", "_rebuild_tensor_v2").mark().get(0).integer(0);
  v.tuple({0, 4}).tuple({4, 1}).boolean(false).ordered_dict().op('t').op('R');
  v.op('u').stop();
  auto c = TorchCheckpoint::parse(MappedFile::from_memory(
      "p.pt", test::zip_with_pickle(v.b, {{"archive/data/0", bytes_of<uint16_t>({1, 2, 3})}})));
  ASSERT_EQ(c.tensors().size(), 3u);
  const TensorInfo* p = c.find("p");
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->ne[0], 2);
  uint16_t pv[2];
  c.read(*p, pv);
  EXPECT_EQ(pv[0], 2);
  EXPECT_EQ(pv[1], 3);
  EXPECT_EQ(c.find("scalar")->n_dims, 0);
  EXPECT_EQ(c.find("scalar")->size, 2u);
  EXPECT_EQ(c.find("empty")->size, 0u);
  EXPECT_EQ(c.find("empty")->n_elements(), 0);
}

TEST(TorchCheckpoint, RebuildTensorV3TakesTheDtype) {
  test::PickleWriter w;
  w.proto(2).ordered_dict().mark().str("f8");
  w.global("torch._utils", "_rebuild_tensor_v3").mark();
  w.mark().str("storage").global("torch", "UntypedStorage").str("0").str("cpu").integer(4).op('t');
  w.op('Q').integer(0).tuple({4}).tuple({1}).boolean(false).ordered_dict();
  w.global("torch", "float8_e4m3fn").op('t').op('R').op('u').stop();
  auto c = TorchCheckpoint::parse(MappedFile::from_memory(
      "v3.pt", test::zip_with_pickle(w.b, {{"archive/data/0", Bytes{0x38, 0x40, 0, 0xb8}}})));
  const TensorInfo* t = c.find("f8");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->file_dtype, FileDType::F8_E4M3);
  EXPECT_EQ(t->dtype, DType::F16);
  uint16_t out[4];
  load_tensor_data(*t, c.data(*t), out);
  EXPECT_EQ(out[0], 0x3c00);  // 1.0
  EXPECT_EQ(out[3], 0xbc00);  // -1.0
}

TEST(TorchCheckpoint, SelfContainingDictIsWalkedOnce) {
  test::PickleWriter w;
  w.proto(2).op('}').put(0).str("me").get(0).op('s').stop();
  auto c = TorchCheckpoint::parse(MappedFile::from_memory("cyc.pt", test::zip_with_pickle(w.b)));
  EXPECT_TRUE(c.tensors().empty());
}

TEST(TorchCheckpoint, DeeplyNestedDictsStopAtALimit) {
  test::PickleWriter w;
  w.proto(2);
  for (int i = 0; i < 2000; ++i) w.op('}').str("d");
  w.op('N');
  for (int i = 0; i < 2000; ++i) w.op('s');
  w.stop();
  auto c = TorchCheckpoint::parse(MappedFile::from_memory("deep.pt", test::zip_with_pickle(w.b)));
  EXPECT_TRUE(c.tensors().empty());
  ASSERT_EQ(c.notes().size(), 1u);
  EXPECT_NE(c.notes()[0].find("nested too deep"), std::string::npos);
}

}  // namespace
}  // namespace sd::io
