// Hand-made corrupt and hostile PyTorch checkpoints: each must fail with an sd::Error that
// starts with the file's path and says what is wrong, without crashing, hanging or
// allocating more than the file holds.
#include <gtest/gtest.h>

#include "io/pickle.h"
#include "io/torch_checkpoint.h"
#include "io/torch_test_util.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::bytes_of;
using test::PickleWriter;
using test::TorchFileBuilder;

struct Case {
  std::string name;
  Bytes bytes;
  std::vector<std::string> expect;  // substrings of the message
};

void expect_all_fail(const std::vector<Case>& cases) {
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = c.name + ".ckpt";
    try {
      TorchCheckpoint::parse(MappedFile::from_memory(path, c.bytes));
      ADD_FAILURE() << "no error for " << c.name;
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind(path + ": ", 0), 0u) << msg;
      for (const auto& x : c.expect) {
        EXPECT_NE(msg.find(x), std::string::npos) << msg << "\n  wanted: " << x;
      }
    }
  }
}

TorchFileBuilder small() {
  TorchFileBuilder b;
  b.storage("0", "FloatStorage", bytes_of<float>({1, 2, 3, 4}), 4);
  b.tensor("w", "0", 0, {2, 2});
  return b;
}

// A zip checkpoint whose data.pkl is PROTO 2, then `body`, then STOP.
Bytes pkl(const Bytes& body, bool stop = true) {
  PickleWriter w;
  w.proto(2).raw(body);
  if (stop) w.stop();
  return test::zip_with_pickle(w.b);
}

Bytes pkl(const PickleWriter& w) {
  return test::zip_with_pickle(w.b);
}

// Position of the last occurrence of a 4-byte signature.
size_t find_sig(const Bytes& b, uint32_t sig) {
  for (size_t p = b.size() - 4; p-- > 0;) {
    uint32_t v;
    std::memcpy(&v, b.data() + p, 4);
    if (v == sig) return p;
  }
  return 0;
}

template <typename T>
Bytes patched(Bytes b, size_t pos, T v) {
  std::memcpy(b.data() + pos, &v, sizeof(T));
  return b;
}

// One tensor over a 4-float storage, with the given rebuild arguments.
Bytes tensor_pickle(int64_t offset, std::vector<int64_t> size, std::vector<int64_t> stride,
                    const std::string& type = "FloatStorage", int64_t numel = 4) {
  PickleWriter w;
  w.proto(2).ordered_dict().mark().str("t").global("torch._utils", "_rebuild_tensor_v2").mark();
  w.mark().str("storage").global("torch", type).str("0").str("cpu").integer(numel).op('t').op('Q');
  w.integer(offset).tuple(size).tuple(stride).boolean(false).ordered_dict().op('t').op('R');
  w.op('u').stop();
  return test::zip_with_pickle(w.b, {{"archive/data/0", bytes_of<float>({1, 2, 3, 4})}});
}

TEST(CorruptTorch, ZipStructure) {
  const Bytes good = small().zip_bytes();
  const size_t eocd = find_sig(good, 0x06054b50);
  const size_t cd = find_sig(good, 0x02014b50);  // the last entry's
  Bytes no_pkl = TorchFileBuilder::zip_stored({{"archive/other.pkl", Bytes{0x80, 2, 'N', '.'}}});
  TorchFileBuilder z64 = small();
  z64.zip64 = true;
  const Bytes good64 = z64.zip_bytes();
  const size_t loc = find_sig(good64, 0x07064b50);
  const size_t e64 = find_sig(good64, 0x06064b50);
  const size_t cd64 = find_sig(good64, 0x02014b50);

  std::vector<Case> cases = {
      {"empty", {}, {"not a PyTorch checkpoint"}},
      {"garbage", Bytes(100, 'x'), {"not a PyTorch checkpoint"}},
      {"zip_no_eocd",
       Bytes(good.begin(), good.begin() + static_cast<long>(eocd)),
       {"no zip end-of-central-directory"}},
      {"tiny_zip", Bytes{'P', 'K', 3, 4, 0}, {"too short for a zip"}},
      {"multi_disk", patched<uint16_t>(good, eocd + 4, 1), {"several disks"}},
      {"cd_past_eof", patched<uint32_t>(good, eocd + 16, 0x7fffffff), {"central directory"}},
      {"cd_count_lies", patched<uint16_t>(good, eocd + 10, 60000), {"claims 60000 entries"}},
      {"cd_size_short", patched<uint32_t>(good, eocd + 12, 10), {"claims"}},
      {"entry_header_past_eof", patched<uint32_t>(good, cd + 42, 0x7ffffff0), {"no local header"}},
      {"entry_size_past_eof",
       patched<uint32_t>(good, cd + 20, 0x7ffffff0),
       {"runs past the end of the file"}},
      {"bad_cd_sig", patched<uint32_t>(good, cd, 0x12345678), {"missing or damaged"}},
      {"name_len_overflow",
       patched<uint16_t>(good, cd + 28, 0xffff),
       {"past the end of the directory"}},
      {"no_data_pkl", no_pkl, {"no '<name>/data.pkl'"}},
      {"bzip2_pkl",  // deflate is inflated (zip_deflate_test.cpp); other methods are not
       TorchFileBuilder::zip_stored({{"archive/data.pkl", Bytes{0x80, 2, 'N', '.'}}}, false, 12),
       {"compressed (method 12)", "zip -0"}},
      {"missing_storage",
       test::zip_with_pickle(small().main_pickle(false)),
       {"storage '0'", "missing from the archive"}},
      {"zip64_saturated_without_record",
       patched<uint32_t>(good64, loc, 0),
       {"zip64 record that is missing"}},
      {"zip64_eocd_offset_huge",
       patched<uint64_t>(good64, loc + 8, ~uint64_t{0} - 8),
       {"zip64 end-of-central-directory record at byte"}},
      {"zip64_eocd_bad_sig", patched<uint32_t>(good64, e64, 0), {"no zip64 end-of-central"}},
      {"zip64_cd_offset_overflow",
       patched<uint64_t>(good64, e64 + 48, ~uint64_t{0} - 4),
       {"central directory"}},
      {"zip64_count_huge",
       patched<uint64_t>(good64, e64 + 32, uint64_t{1} << 60),
       {"entries but holds only"}},
      {"zip64_entry_size_2^64",
       patched<uint64_t>(good64, cd64 + 46 + 15 + 4 + 8, ~uint64_t{0}),
       {"runs past the end of the file"}},
      {"zip64_extra_missing",
       patched<uint16_t>(good64, cd64 + 46 + 15, 0x9999),
       {"lacks the zip64 field"}},
  };
  expect_all_fail(cases);
}

TEST(CorruptTorch, Pickles) {
  PickleWriter underflow;
  underflow.proto(2).op('}').op('s').stop();
  PickleWriter mark_fence;  // SETITEM may not pop below the MARK
  mark_fence.proto(2).op('}').str("k").mark().op('s').stop();
  PickleWriter memo;
  memo.proto(2).op('N').put(3).get(4).stop();
  PickleWriter deep_marks;
  deep_marks.proto(2);
  for (int i = 0; i < 70000; ++i) deep_marks.mark();
  deep_marks.stop();
  PickleWriter huge_str;
  huge_str.proto(2).op('X').le<uint32_t>(0xfffffff0).raw({'a', 'b'});
  PickleWriter huge_str8;
  huge_str8.proto(2).op(0x8d).le<uint64_t>(~uint64_t{0}).raw({'a', 'b'});
  PickleWriter huge_long;
  huge_long.proto(2).op(0x8b).le<int32_t>(0x7fffffff).raw({1});
  PickleWriter stack_global;
  stack_global.proto(2).str("os").str("system").op(0x93).stop();
  PickleWriter reduce_int;
  reduce_int.proto(2).integer(1).op(')').op('R').stop();
  PickleWriter no_stop;
  no_stop.proto(2).op('N');
  PickleWriter odd_dict;
  odd_dict.proto(2).mark().str("k").op('d').stop();
  PickleWriter append_to_int;
  append_to_int.proto(2).integer(1).op('N').op('a').stop();
  PickleWriter long_name;
  long_name.proto(2).str(std::string(300, 'm')).str("x").op(0x93).stop();
  PickleWriter not_dict;
  not_dict.proto(2).global("__torch__", "MyModel").op(')').op(0x81).stop();
  PickleWriter long_key;  // a state-dict key longer than any tensor name
  long_key.proto(2).op('}').str(std::string(2000, 'k')).op('N').op('s').stop();
  PickleWriter long_storage_key;
  long_storage_key.proto(2).mark().str("storage").global("torch", "FloatStorage");
  long_storage_key.str(std::string(2000, 'k')).str("cpu").integer(1).op('t').op('Q').stop();
  PickleWriter proto9;
  proto9.proto(9).op('N').stop();

  std::vector<Case> cases = {
      {"unknown_opcode", pkl({0xff}), {"unsupported opcode 0xff", "at byte"}},
      {"inst",
       pkl({'i', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n'}),
       {"unsupported opcode 0x69 (INST)"}},
      {"obj", pkl({'(', 'o'}), {"(OBJ)"}},
      {"ext1", pkl({0x82, 1}), {"(EXT1)"}},
      {"text_int", pkl({'I', '1', '\n'}), {"(INT)"}},
      {"os_system", pkl(PickleWriter().global("os", "system").b), {"refused global 'os.system'"}},
      {"posix_system",
       pkl(PickleWriter().global("posix", "system").b),
       {"refused global 'posix.system'"}},
      {"builtins_eval",
       pkl(PickleWriter().global("builtins", "eval").b),
       {"refused global 'builtins.eval'"}},
      {"builtins_exec",
       pkl(PickleWriter().global("__builtin__", "exec").b),
       {"refused global '__builtin__.exec'"}},
      {"subprocess",
       pkl(PickleWriter().global("subprocess", "Popen").b),
       {"refused global 'subprocess.Popen'"}},
      {"stack_global_os", pkl(stack_global), {"refused global 'os.system'"}},
      {"stack_underflow", pkl(underflow), {"pops an empty stack"}},
      {"mark_fence", pkl(mark_fence), {"pops an empty stack"}},
      {"pop_empty", pkl({'0'}), {"POP pops an empty stack"}},
      {"stop_empty", pkl(Bytes{}), {"STOP needs a value"}},
      {"tuple_without_mark", pkl({'t'}), {"without a preceding MARK"}},
      {"memo_out_of_range", pkl(memo), {"memo index 4 was never stored"}},
      {"deep_marks", pkl(deep_marks), {"MARKs nest deeper than"}},
      {"huge_binunicode", pkl(huge_str), {"BINUNICODE of 4294967280 bytes runs past the end"}},
      {"huge_binunicode8", pkl(huge_str8), {"BINUNICODE8 of 18446744073709551615 bytes"}},
      {"huge_long4", pkl(huge_long), {"LONG4 of 2147483647 bytes"}},
      {"no_stop", pkl(no_stop), {"ends without a STOP"}},
      {"truncated_arg", pkl({'J', 1}, false), {"runs past the end of the pickle"}},
      {"reduce_int", pkl(reduce_int), {"calls a int, which is not callable"}},
      {"odd_dict", pkl(odd_dict), {"odd number"}},
      {"append_to_int", pkl(append_to_int), {"APPEND on a int"}},
      {"long_global", pkl(long_name), {"global name longer than 256"}},
      {"global_no_newline", pkl({'c', 'o', 's'}, false), {"GLOBAL name is not"}},
      {"proto9", pkl(proto9), {"protocol 9"}},
      {"long_key", pkl(long_key), {"2000 bytes long, beyond the 1024-byte limit"}},
      {"long_storage_key", pkl(long_storage_key), {"key longer than 1024 bytes"}},
      {"torchscript", pkl(not_dict), {"opaque object '__torch__.MyModel", "TorchScript"}},
      {"list_root", pkl({']'}), {"holds a list, not a dict of tensors"}},
  };
  expect_all_fail(cases);
}

TEST(CorruptTorch, Tensors) {
  PickleWriter bad_pid;
  bad_pid.proto(2).op(']').op('Q').stop();
  std::vector<Case> cases = {
      {"five_dims",
       tensor_pickle(0, {1, 1, 1, 2, 2}, {4, 4, 4, 2, 1}),
       {"tensor 't' has 5 dimensions"}},
      {"past_storage", tensor_pickle(1, {2, 2}, {2, 1}), {"tensor 't'", "reaches past the end"}},
      {"stride_past_storage", tensor_pickle(0, {2, 2}, {3, 1}), {"reaches past the end"}},
      {"numel_past_entry",
       tensor_pickle(0, {2}, {1}, "FloatStorage", 5),
       {"claims 5 elements of FloatStorage"}},
      {"overflowing_shape", tensor_pickle(0, {1ll << 40, 1ll << 40}, {0, 0}), {"overflow 64 bits"}},
      {"expanded_view", tensor_pickle(0, {1000}, {0}), {"overlap", "expanded"}},
      {"negative_stride", tensor_pickle(0, {2}, {-1}), {"non-negative int"}},
      {"unsupported_type",
       tensor_pickle(0, {2}, {1}, "ComplexFloatStorage", 2),
       {"tensor 't' has type torch.ComplexFloatStorage"}},
      {"bad_pid", pkl(bad_pid), {"persistent id at byte", "not a storage tuple"}},
  };
  expect_all_fail(cases);
}

TEST(CorruptTorch, Legacy) {
  const Bytes good = small().legacy_bytes();
  Bytes bad_magic = good;
  bad_magic[5] ^= 1;
  Bytes bad_count = good;
  uint64_t huge = uint64_t{1} << 62;
  std::memcpy(bad_count.data() + good.size() - 16 - 8, &huge, 8);
  std::vector<Case> cases = {
      {"bad_magic", bad_magic, {"not PyTorch's magic number"}},
      {"plain_pickle", Bytes{0x80, 2, 'K', 1, '.'}, {"not PyTorch's magic number"}},
      {"storage_count_huge", bad_count, {"storage '0' of 4611686018427387904 elements"}},
  };
  expect_all_fail(cases);
}

void expect_every_truncation_fails(const Bytes& full) {
  for (size_t len = 0; len < full.size(); ++len) {
    Bytes cut(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(len));
    try {
      TorchCheckpoint::parse(MappedFile::from_memory("cut.pt", std::move(cut)));
      ADD_FAILURE() << "truncated to " << len << " bytes and still parsed";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("cut.pt: ", 0), 0u) << e.what();
    }
  }
}

TEST(CorruptTorch, EveryTruncationFails) {
  TorchFileBuilder b = small();
  b.lightning = true;
  expect_every_truncation_fails(b.zip_bytes());
  expect_every_truncation_fails(b.legacy_bytes());
  b.zip64 = true;
  expect_every_truncation_fails(b.zip_bytes());
}

TEST(CorruptTorch, DangerousGlobalList) {
  EXPECT_TRUE(pickle_global_is_dangerous("os", "system"));
  EXPECT_TRUE(pickle_global_is_dangerous("os.path", "join"));
  EXPECT_TRUE(pickle_global_is_dangerous("builtins", "getattr"));
  EXPECT_FALSE(pickle_global_is_dangerous("builtins", "set"));
  EXPECT_FALSE(pickle_global_is_dangerous("torch._utils", "_rebuild_tensor_v2"));
  EXPECT_FALSE(pickle_global_is_dangerous("ossify", "x"));
}

}  // namespace
}  // namespace sd::io
