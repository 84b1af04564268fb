#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

#include "io/io_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::expect_error;
using test::SafetensorsBuilder;
using test::TempDir;

struct DtypeCase {
  const char* name;
  size_t elem_size;
  DType dtype;
  FileDType file_dtype;
};

const DtypeCase kAllDtypes[] = {
    {"F32", 4, DType::F32, FileDType::None},        {"F16", 2, DType::F16, FileDType::None},
    {"BF16", 2, DType::BF16, FileDType::None},      {"I32", 4, DType::I32, FileDType::None},
    {"F64", 8, DType::F32, FileDType::F64},         {"I64", 8, DType::I32, FileDType::I64},
    {"U64", 8, DType::I32, FileDType::U64},         {"U32", 4, DType::I32, FileDType::U32},
    {"I16", 2, DType::I32, FileDType::I16},         {"U16", 2, DType::I32, FileDType::U16},
    {"I8", 1, DType::I32, FileDType::I8},           {"U8", 1, DType::I32, FileDType::U8},
    {"BOOL", 1, DType::I32, FileDType::Bool},       {"F8_E4M3", 1, DType::F16, FileDType::F8_E4M3},
    {"F8_E5M2", 1, DType::F16, FileDType::F8_E5M2},
};

TEST(Safetensors, EveryDtypeRoundTrips) {
  TempDir dir;
  SafetensorsBuilder b;
  std::vector<Bytes> data;
  uint32_t seed = 1;
  for (const auto& c : kAllDtypes) {
    data.push_back(test::random_bytes(2 * 3 * 5 * c.elem_size, seed++));
    b.add(std::string("t.") + c.name, c.name, {2, 3, 5}, data.back());
  }
  b.metadata("format", "pt").metadata("note", "caf\xc3\xa9");
  test::write_file(dir.file("all.safetensors"), b.bytes());

  for (MapMode mode : {MapMode::Mmap, MapMode::Read}) {
    auto st = SafetensorsFile::open(dir.file("all.safetensors"), mode);
    ASSERT_EQ(st.tensors().size(), std::size(kAllDtypes));
    EXPECT_EQ(st.metadata().at("format"), "pt");
    EXPECT_EQ(st.metadata().at("note"), "caf\xc3\xa9");
    EXPECT_EQ(st.data_offset(), 8 + b.header().size());
    for (size_t i = 0; i < std::size(kAllDtypes); ++i) {
      const auto& c = kAllDtypes[i];
      const TensorInfo& t = st.tensors()[i];  // header order is kept
      SCOPED_TRACE(c.name);
      EXPECT_EQ(t.name, std::string("t.") + c.name);
      EXPECT_EQ(st.find(t.name), &t);
      EXPECT_EQ(t.dtype, c.dtype);
      EXPECT_EQ(t.file_dtype, c.file_dtype);
      EXPECT_EQ(t.n_dims, 3);
      // safetensors [2, 3, 5] is ne = {5, 3, 2}: ne[0] is the fastest dimension.
      EXPECT_EQ(t.ne, (std::array<int64_t, 4>{5, 3, 2, 1}));
      EXPECT_EQ(t.size, data[i].size());
      EXPECT_EQ(t.path, dir.file("all.safetensors"));
      ASSERT_EQ(std::memcmp(st.data(t), data[i].data(), data[i].size()), 0);
    }
  }
  EXPECT_EQ(SafetensorsFile::open(dir.file("all.safetensors")).find("missing"), nullptr);
}

TEST(Safetensors, ConvertedTensorsLoadAsEngineDtypes) {
  int64_t ids[4] = {0, 1, 2, 76};
  Bytes id_bytes(reinterpret_cast<uint8_t*>(ids), reinterpret_cast<uint8_t*>(ids) + 32);
  Bytes f8 = {0x38, 0xB8, 0x7E, 0x00};  // 1, -1, 448, 0 in E4M3
  double d[2] = {0.5, -2.25};
  Bytes f64(reinterpret_cast<uint8_t*>(d), reinterpret_cast<uint8_t*>(d) + 16);
  SafetensorsBuilder b;
  b.add("position_ids", "I64", {1, 4}, id_bytes)
      .add("w", "F8_E4M3", {4}, f8)
      .add("d", "F64", {2}, f64);
  auto st = SafetensorsFile::parse(MappedFile::from_memory("m.safetensors", b.bytes()));

  const TensorInfo& ids_info = *st.find("position_ids");
  EXPECT_EQ(ids_info.loaded_size(), 16u);
  EXPECT_EQ(dtype_string(ids_info), "I64 (loads as i32)");
  int32_t got_ids[4];
  load_tensor_data(ids_info, st.data(ids_info), got_ids);
  EXPECT_EQ(got_ids[3], 76);

  const TensorInfo& w = *st.find("w");
  uint16_t h[4];
  load_tensor_data(w, st.data(w), h);
  EXPECT_EQ(h[0], 0x3C00);  // 1.0 in f16
  EXPECT_EQ(h[1], 0xBC00);
  EXPECT_EQ(h[2], 0x5F00);  // 448
  EXPECT_EQ(h[3], 0x0000);

  const TensorInfo& di = *st.find("d");
  float f[2];
  load_tensor_data(di, st.data(di), f);
  EXPECT_EQ(f[0], 0.5f);
  EXPECT_EQ(f[1], -2.25f);
}

TEST(Safetensors, OutOfRangeIntegerNamesTensorOnLoad) {
  int64_t big = int64_t{1} << 40;
  Bytes bytes(reinterpret_cast<uint8_t*>(&big), reinterpret_cast<uint8_t*>(&big) + 8);
  SafetensorsBuilder b;
  b.add("steps", "I64", {1}, bytes);
  auto st = SafetensorsFile::parse(MappedFile::from_memory("big.safetensors", b.bytes()));
  int32_t out;
  expect_error([&] { load_tensor_data(st.tensors()[0], st.data(st.tensors()[0]), &out); },
               {"big.safetensors", "'steps'", "i32"});
}

// A 3-d convolution's kernel [out, in, t, h, w] reads as [out * in, t, h, w], its bytes as
// they are (the Wan VAE's files).
TEST(Safetensors, FiveDimensionalKernelsFoldTheirChannels) {
  SafetensorsBuilder b;
  b.add("conv.weight", "F32", {4, 2, 3, 3, 3}, test::random_bytes(4 * 2 * 27 * 4, 3));
  auto st = SafetensorsFile::parse(MappedFile::from_memory("k.safetensors", b.bytes()));
  const TensorInfo& k = *st.find("conv.weight");
  EXPECT_EQ(k.n_dims, 4);
  EXPECT_EQ(k.ne, (std::array<int64_t, 4>{3, 3, 3, 8}));
}

TEST(Safetensors, ScalarsEmptyTensorsAndEmptyFiles) {
  SafetensorsBuilder b;
  b.add("scalar", "F32", {}, test::random_bytes(4, 1)).add("empty", "F16", {0, 8}, {});
  auto st = SafetensorsFile::parse(MappedFile::from_memory("s.safetensors", b.bytes()));
  const TensorInfo& s = *st.find("scalar");
  EXPECT_EQ(s.n_dims, 0);
  EXPECT_EQ(s.n_elements(), 1);
  EXPECT_EQ(shape_string(s), "[]");
  const TensorInfo& e = *st.find("empty");
  EXPECT_EQ(e.n_elements(), 0);
  EXPECT_EQ(e.size, 0u);
  EXPECT_EQ(shape_string(e), "[8, 0]");

  auto none = SafetensorsFile::parse(
      MappedFile::from_memory("none.safetensors", test::safetensors_bytes("{}", {})));
  EXPECT_TRUE(none.tensors().empty());
  EXPECT_TRUE(none.metadata().empty());
}

TEST(Safetensors, UnknownFieldsAndNullMetadataAreIgnored) {
  std::string h = R"({"__metadata__":null,"a":{"extra":{"x":[1,[2,{"y":null}]]},"dtype":"F32",)"
                  R"("shape":[1],"data_offsets":[0,4],"more":"s"}})";
  auto st = SafetensorsFile::parse(
      MappedFile::from_memory("x.safetensors", test::safetensors_bytes(h, Bytes(4))));
  ASSERT_EQ(st.tensors().size(), 1u);
  EXPECT_EQ(st.tensors()[0].size, 4u);
}

TEST(Safetensors, ErrorsNameFileTensorAndCause) {
  TempDir dir;
  Bytes data(16);
  // The message from the design brief, checked field by field.
  std::string h = R"({"x":{"dtype":"F32","shape":[8],"data_offsets":[0,32]}})";
  test::write_file(dir.file("model.safetensors"), test::safetensors_bytes(h, data));
  auto expected_end = std::to_string(8 + h.size() + 32);
  auto file_size = std::to_string(8 + h.size() + 16);
  expect_error([&] { SafetensorsFile::open(dir.file("model.safetensors")); },
               {dir.file("model.safetensors") + ": tensor 'x' ends at byte " + expected_end +
                " past the end of the file (" + file_size + " bytes; truncated download?)"});
}

TEST(Safetensors, OtherFormatsAreRecognisedInTheHint) {
  Bytes gguf = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0, 0, 0};
  expect_error([&] { SafetensorsFile::parse(MappedFile::from_memory("m.bin", gguf)); },
               {"m.bin", "GGUF"});
  Bytes zip = {'P', 'K', 3, 4, 0, 0, 0, 0, 0, 0, 0, 0};
  expect_error([&] { SafetensorsFile::parse(MappedFile::from_memory("m.ckpt", zip)); },
               {"m.ckpt", "PyTorch"});
}

}  // namespace
}  // namespace sd::io
