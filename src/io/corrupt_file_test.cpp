// Hand-made corrupt files: each must fail with an sd::Error that starts with the file's
// path and says what is wrong. None may crash, hang or allocate more than the file holds.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include "io/gguf.h"
#include "io/io_test_util.h"
#include "io/safetensors.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::ByteWriter;
using test::GgufBuilder;
using test::TempDir;

struct Case {
  std::string name;
  Bytes bytes;
  std::string expect;  // a substring of the message
};

template <typename Open>
void expect_all_fail(const std::vector<Case>& cases, const std::string& ext, Open open) {
  TempDir dir;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir.file(c.name + ext);
    test::write_file(path, c.bytes);
    try {
      open(path);
      ADD_FAILURE() << "no error for " << c.name;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
      EXPECT_NE(msg.find(c.expect), std::string::npos) << msg << "\n  wanted: " << c.expect;
    }
  }
}

Bytes st(const std::string& header, size_t data_size = 64) {
  return test::safetensors_bytes(header, Bytes(data_size));
}

Bytes st_len(uint64_t header_len, size_t total) {
  ByteWriter w;
  w.put<uint64_t>(header_len);
  w.b.resize(total);
  return w.b;
}

std::string tensor(const std::string& body) {
  return R"({"t":{)" + body + "}}";
}

TEST(CorruptSafetensors, EveryCaseIsAnErrorNamingTheFile) {
  const std::string ok_shape = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  std::vector<Case> cases = {
      {"tiny", {1, 2, 3, 4, 5}, "too short for a safetensors header"},
      {"empty", {}, "0 bytes"},
      {"header_past_eof", st_len(1000, 100), "not a safetensors file"},
      {"header_len_2^63", st_len(uint64_t{1} << 63, 64), "not a safetensors file"},
      {"header_len_max", st_len(~uint64_t{0}, 64), "not a safetensors file"},
      {"header_len_0", st_len(0, 64), "too short for a JSON object"},
      {"bad_json", st(R"({"t":)"), "not valid JSON"},
      {"not_object", st("[1, 2]"), "not a JSON object"},
      {"string_header", st(R"("abc")"), "not a JSON object"},
      {"trailing_garbage", st("{} x"), "not valid JSON"},
      {"nul_in_header", st(std::string("{}\0\0", 4)), "NUL byte"},
      {"bad_utf8", st("{\"\xff\":1}"), "not valid JSON"},
      {"tensor_not_object", st(R"({"t":5})"), "tensor 't' is a number"},
      {"tensor_array", st(R"({"t":[1]})"), "tensor 't' is an array"},
      {"missing_dtype", st(tensor(R"("shape":[2],"data_offsets":[0,8])")), "no \"dtype\""},
      {"missing_shape", st(tensor(R"("dtype":"F32","data_offsets":[0,8])")), "no \"shape\""},
      {"missing_offsets", st(tensor(R"("dtype":"F32","shape":[2])")), "no \"data_offsets\""},
      {"dtype_number", st(tensor(R"("dtype":1,"shape":[2],"data_offsets":[0,8])")),
       "dtype of tensor 't' is a number"},
      {"shape_string", st(tensor(R"("dtype":"F32","shape":"2","data_offsets":[0,8])")),
       "shape of tensor 't' is a string"},
      {"shape_negative", st(tensor(R"("dtype":"F32","shape":[-2],"data_offsets":[0,8])")),
       "negative number -2"},
      {"shape_float", st(tensor(R"("dtype":"F32","shape":[2.5],"data_offsets":[0,8])")),
       "not an integer"},
      {"shape_elem_string", st(tensor(R"("dtype":"F32","shape":["2"],"data_offsets":[0,8])")),
       "not an integer"},
      {"shape_nested", st(tensor(R"("dtype":"F32","shape":[[2]],"data_offsets":[0,8])")),
       "an array"},
      {"six_dims", st(tensor(R"("dtype":"F32","shape":[1,1,1,1,1,2],"data_offsets":[0,8])")),
       "more than 5 dimensions"},
      {"offsets_three", st(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,4,8])")),
       "more than 2 entries"},
      {"offsets_one", st(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[8])")),
       "expected [begin, end]"},
      {"offsets_negative", st(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[-8,0])")),
       "negative number"},
      {"offsets_2^64",
       st(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551616])")),
       "not an integer below 2^64"},
      {"offsets_max",
       st(tensor(
           R"("dtype":"F32","shape":[2],"data_offsets":[18446744073709551607,18446744073709551615])")),
       "past the end of the file"},
      {"begin_after_end", st(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[8,0])")),
       "begin after end"},
      {"end_past_eof", st(tensor(R"("dtype":"F32","shape":[2],"data_offsets":[60,68])")),
       "ends at byte"},
      {"size_mismatch", st(tensor(R"("dtype":"F32","shape":[3],"data_offsets":[0,8])")),
       "needs 12"},
      {"elements_overflow",
       st(tensor(
           R"("dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8])")),
       "overflows 64 bits"},
      {"bytes_overflow",
       st(tensor(R"("dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8])")),
       "byte size overflows"},
      {"dim_over_int64",
       st(tensor(R"("dtype":"U8","shape":[9223372036854775808],"data_offsets":[0,8])")),
       "overflows 64 bits"},
      {"unknown_dtype", st(tensor(R"("dtype":"F17","shape":[2],"data_offsets":[0,8])")),
       "unknown dtype 'F17'"},
      {"lowercase_dtype", st(tensor(R"("dtype":"f32","shape":[2],"data_offsets":[0,8])")),
       "unknown dtype 'f32'"},
      {"newer_dtype", st(tensor(R"("dtype":"F8_E8M0","shape":[8],"data_offsets":[0,8])")),
       "does not read yet"},
      {"overlap",
       st(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
          R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})"),
       "tensors 'a' and 'b' overlap"},
      {"duplicate_name", st(R"({"t":{)" + ok_shape + R"(},"t":{)" + ok_shape + "}}"),
       "tensor 't' appears twice"},
      {"duplicate_field", st(tensor(ok_shape + R"(,"dtype":"F16")")), "field 'dtype' twice"},
      {"metadata_array", st(R"({"__metadata__":[1]})"), "__metadata__ is an array"},
      {"metadata_number", st(R"({"__metadata__":{"k":1}})"), "value of 'k' is a number"},
      {"metadata_object", st(R"({"__metadata__":{"k":{}}})"), "value of 'k' is an object"},
      {"metadata_duplicate", st(R"({"__metadata__":{"k":"a","k":"b"}})"), "'k' appears twice"},
  };
  expect_all_fail(cases, ".safetensors", [](const std::string& p) { SafetensorsFile::open(p); });
}

TEST(CorruptSafetensors, TextFileIsNamedAsSuchWithoutEchoingIt) {
  TempDir dir;
  const std::string path = dir.file("readme.safetensors");
  const std::string readme = "# Model card\nsecret \x1b[2J words of a text file, not weights\n";
  test::write_file(path, Bytes(readme.begin(), readme.end()));
  uint64_t as_length = 0;
  std::memcpy(&as_length, readme.data(), 8);
  try {
    SafetensorsFile::open(path);
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("not a safetensors file"), std::string::npos) << what;
    EXPECT_EQ(what.find(std::to_string(as_length)), std::string::npos) << what;
    EXPECT_EQ(what.find("secret"), std::string::npos) << what;
  }
  // A header that starts well but breaks: the parse error is not followed by the file's bytes.
  const std::string broken = dir.file("broken.safetensors");
  test::write_file(broken, st(R"({"t": secret_word})"));
  try {
    SafetensorsFile::open(broken);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).find("secret"), std::string::npos) << e.what();
  }
}

TEST(CorruptSafetensors, HugeHeaderIsRefusedBeforeParsing) {
  TempDir dir;
  const std::string path = dir.file("huge.safetensors");
  test::write_file(path, st_len(150ull << 20, 8));
  // A sparse 200 MiB file: the header length fits the file but not the cap.
  int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 200 << 20), 0);
  ::close(fd);
  test::expect_error([&] { SafetensorsFile::open(path); }, {path, "larger than the 100 MiB limit"});
}

TEST(CorruptSafetensors, DeepNestingInUnknownFieldsIsHarmless) {
  std::string deep(100000, '[');
  deep += std::string(100000, ']');
  std::string h = R"({"t":{"x":)" + deep + R"(,"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  auto f = SafetensorsFile::parse(MappedFile::from_memory("deep.safetensors", st(h)));
  EXPECT_EQ(f.tensors().size(), 1u);
}

// A valid base to corrupt one field at a time.
GgufBuilder base_gguf() {
  GgufBuilder g;
  g.kv_string("general.architecture", "sd1");
  g.tensor("w", {32, 2}, 0, Bytes(256));
  return g;
}

Bytes kv_file(const std::string& key, uint32_t type, const Bytes& payload) {
  GgufBuilder g;
  g.kv(key, type, payload);
  return g.bytes();
}

Bytes tensor_file(std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data = 256) {
  GgufBuilder g;
  g.tensors.push_back({"w", std::move(dims), type, offset});
  g.data = Bytes(data);
  return g.bytes();
}

Bytes array_payload(uint32_t elem, uint64_t count, const Bytes& items = {}) {
  ByteWriter w;
  w.put<uint32_t>(elem).put<uint64_t>(count).raw(items.data(), items.size());
  return w.b;
}

Bytes nested_arrays(int depth) {
  ByteWriter w;
  for (int i = 0; i < depth; ++i) w.put<uint32_t>(9).put<uint64_t>(1);
  w.put<uint32_t>(0).put<uint64_t>(0);
  return w.b;
}

TEST(CorruptGguf, EveryCaseIsAnErrorNamingTheFile) {
  auto with = [](auto edit) {
    GgufBuilder g = base_gguf();
    edit(g);
    return g.bytes();
  };
  ByteWriter str_past_eof;
  str_past_eof.put<uint64_t>(1000).raw("abc", 3);
  ByteWriter key_past_eof;
  key_past_eof.raw("GGUF", 4).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(1);
  key_past_eof.put<uint64_t>(~uint64_t{0}).raw("k", 1).put<uint64_t>(0).put<uint64_t>(0);
  Bytes ggml = {'l', 'm', 'g', 'g', 0, 0, 0, 0};
  Bytes truncated_header = {'G', 'G', 'U', 'F', 3, 0, 0, 0, 0, 0};

  std::vector<Case> cases = {
      {"empty", {}, "GGUF magic at byte 0"},
      {"bad_magic", {'G', 'G', 'U', 'G', 3, 0, 0, 0}, "bad magic 'GGUG'"},
      {"ggml", ggml, "pre-GGUF"},
      {"v1", with([](GgufBuilder& g) { g.version = 1; }), "version 1 is not supported"},
      {"v0", with([](GgufBuilder& g) { g.version = 0; }), "unsupported GGUF version 0"},
      {"big_endian", with([](GgufBuilder& g) { g.version = 0x03000000; }), "big-endian"},
      {"truncated_header", truncated_header, "tensor count"},
      {"n_tensors_2^63", with([](GgufBuilder& g) { g.n_tensors = uint64_t{1} << 63; }),
       "claims 9223372036854775808 tensors"},
      {"n_tensors_max", with([](GgufBuilder& g) { g.n_tensors = ~uint64_t{0}; }), "tensors"},
      {"n_tensors_one_more", with([](GgufBuilder& g) { g.n_tensors = 2; }), "tensor"},
      {"n_kv_2^63", with([](GgufBuilder& g) { g.n_kv = uint64_t{1} << 63; }), "metadata entries"},
      {"n_kv_one_more", with([](GgufBuilder& g) { g.n_kv = 2; }), "past the end"},
      {"key_past_eof", key_past_eof.b, "key of metadata entry 0 at byte"},
      {"string_past_eof", kv_file("k", 8, str_past_eof.b), "metadata 'k' at byte"},
      {"unknown_kv_type", kv_file("k", 13, {0, 0, 0, 0}), "unknown value type id 13"},
      {"kv_type_max", kv_file("k", 0xffffffff, {0}), "unknown value type id 4294967295"},
      {"array_count_huge", kv_file("k", 9, array_payload(4, uint64_t{1} << 62)), "claims"},
      {"string_array_count_huge", kv_file("k", 9, array_payload(8, 1000000)), "claims"},
      {"array_elem_unknown", kv_file("k", 9, array_payload(77, 1)), "unknown element type id 77"},
      {"arrays_too_deep", kv_file("k", 9, nested_arrays(20)), "nests arrays more than 8"},
      {"bool_2", kv_file("k", 7, {2}), "bool value 2"},
      {"bool_array_5", kv_file("k", 9, array_payload(7, 2, {1, 5})), "bool value 5"},
      {"duplicate_key", with([](GgufBuilder& g) { g.kv_string("general.architecture", "again"); }),
       "'general.architecture' appears twice"},
      {"alignment_33",
       with([](GgufBuilder& g) { g.kv_scalar<uint32_t>("general.alignment", 4, 33); }),
       "not a positive power of two"},
      {"alignment_0",
       with([](GgufBuilder& g) { g.kv_scalar<uint32_t>("general.alignment", 4, 0); }),
       "not a positive power of two"},
      {"alignment_negative",
       with([](GgufBuilder& g) { g.kv_scalar<int32_t>("general.alignment", 5, -32); }),
       "not a positive power of two"},
      {"alignment_2^40",
       with([](GgufBuilder& g) { g.kv_scalar<uint64_t>("general.alignment", 10, 1ull << 40); }),
       "not a positive power of two"},
      {"alignment_string", with([](GgufBuilder& g) { g.kv_string("general.alignment", "32"); }),
       "not an integer"},
      {"five_dims", tensor_file({32, 1, 1, 1, 2}, 0, 0), "5 dimensions"},
      // 2^32 f32 elements in a 300-byte file: sizes are checked against the file.
      {"dims_2^32", tensor_file({1ull << 32}, 0, 0), "past the end of the file"},
      {"dim_over_int64", tensor_file({1ull << 63}, 0, 0), "larger than 2^63"},
      {"elements_overflow", tensor_file({1ull << 32, 1ull << 32}, 0, 0), "overflows 64 bits"},
      {"bytes_overflow", tensor_file({1ull << 62}, 0, 0), "byte size that overflows"},
      {"unknown_type", tensor_file({32}, 99, 0), "unknown type id 99"},
      {"iq_type", tensor_file({256}, 19, 0), "iq1_s"},
      {"block_mismatch", tensor_file({16}, 2, 0), "not a multiple of q4_0's block size 32"},
      {"offset_unaligned", tensor_file({8}, 0, 4), "not a multiple of the 32-byte alignment"},
      {"offset_past_end", tensor_file({8}, 0, 1024), "past the end of the file"},
      {"offset_near_2^64", tensor_file({32}, 0, ~uint64_t{31}), "beyond 2^64"},
      {"data_truncated", tensor_file({64}, 0, 0, 255), "past the end of the file"},
      {"overlap", with([](GgufBuilder& g) {
         g.tensors.push_back({"v", {32}, 0, 0});
       }),
       "tensors 'w' and 'v' overlap"},
      {"duplicate_tensor", with([](GgufBuilder& g) { g.tensor("w", {8}, 0, Bytes(32)); }),
       "tensor 'w' appears twice"},
      {"name_past_eof",
       [] {
         Bytes b = tensor_file({8}, 0, 0);
         // The name length field of the only tensor sits right after the counts.
         uint64_t huge = 1ull << 40;
         std::memcpy(b.data() + 24, &huge, 8);
         return b;
       }(),
       "name of tensor 0"},
  };
  expect_all_fail(cases, ".gguf", [](const std::string& p) { GgufFile::open(p); });
}

template <typename Parse>
void expect_every_truncation_fails(const Bytes& full, uint64_t valid_from, Parse parse) {
  for (size_t len = 0; len < full.size(); ++len) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    try {
      parse(MappedFile::from_memory("cut.bin", std::move(cut)));
      EXPECT_GE(len, valid_from) << "truncated to " << len << " bytes and still parsed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cut.bin: ", 0), 0u) << e.what();
    }
  }
}

TEST(CorruptSafetensors, EveryTruncationFails) {
  test::SafetensorsBuilder b;
  b.metadata("format", "pt");
  b.add("a", "F16", {3, 5}, test::random_bytes(30, 1))
      .add("b", "I64", {2}, test::random_bytes(16, 2));
  Bytes full = b.bytes();
  expect_every_truncation_fails(full, full.size(), [](auto f) { SafetensorsFile::parse(f); });
}

TEST(CorruptGguf, EveryTruncationFails) {
  GgufBuilder g = base_gguf();
  ByteWriter arr;
  arr.put<uint32_t>(8).put<uint64_t>(2).str("x").str("yz");
  g.kv("tokens", 9, arr.b).kv_scalar<double>("f", 12, 2.0);
  g.tensor("q", {64}, 2, test::random_bytes(36, 1));
  Bytes full = g.bytes();
  expect_every_truncation_fails(full, full.size(), [](auto f) { GgufFile::parse(f); });
}

}  // namespace
}  // namespace sd::io
