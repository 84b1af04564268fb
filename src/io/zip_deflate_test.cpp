// PyTorch checkpoints re-zipped with deflate (as `zip -9`, 7-Zip or Python's zipfile with
// ZIP_DEFLATED write them): they must read as the stored original does, and every way a
// deflated entry can lie (CRC, sizes, a cut or garbled stream) must fail with an sd::Error
// naming the file and the entry, without writing past the declared size.
#include <gtest/gtest.h>

#include <cstring>

#include "io/torch_checkpoint.h"
#include "io/torch_test_util.h"
#include "io/zip_archive.h"

namespace sd::io {
namespace {

using test::Bytes;
using test::bytes_of;
using test::deflated_entry;
using test::TorchFileBuilder;
using test::ZipEntrySpec;

// Compressible and incompressible storages, a strided view and a converted dtype.
TorchFileBuilder deflate_sample() {
  std::vector<float> ramp(3000);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i % 17);
  TorchFileBuilder b;
  b.storage("0", "FloatStorage", bytes_of<float>(ramp), 4);
  b.storage("1", "HalfStorage", test::random_bytes(4096, 7), 2);
  b.storage("2", "LongStorage", bytes_of<int64_t>({7, -8, 1ll << 30}), 8);
  b.tensor("ramp", "0", 0, {30, 100})
      .tensor("ramp_t", "0", 0, {100, 30}, {1, 100})
      .tensor("noise", "1", 0, {2048})
      .tensor("ids", "2", 0, {3});
  return b;
}

// Each tensor's bytes as stored (strided views gathered).
std::vector<Bytes> all_bytes(const TorchCheckpoint& c) {
  std::vector<Bytes> out;
  for (const TensorInfo& t : c.tensors()) {
    Bytes raw(static_cast<size_t>(t.size));
    c.read(t, raw.data());
    out.push_back(std::move(raw));
  }
  return out;
}

void expect_same_as_stored(TorchFileBuilder b, bool zip64, bool lightning) {
  b.zip64 = zip64;
  b.lightning = lightning;
  const Bytes stored = b.zip_bytes();
  b.deflate = true;
  const Bytes deflated = b.zip_bytes();
  ASSERT_LT(deflated.size(), stored.size());  // really compressed

  auto want = TorchCheckpoint::parse(MappedFile::from_memory("stored.pt", stored));
  auto got = TorchCheckpoint::parse(MappedFile::from_memory("deflated.pt", deflated));
  ASSERT_EQ(got.tensors().size(), want.tensors().size());
  for (size_t i = 0; i < got.tensors().size(); ++i) {
    EXPECT_EQ(got.tensors()[i].name, want.tensors()[i].name);
    EXPECT_EQ(got.tensors()[i].ne, want.tensors()[i].ne);
    EXPECT_EQ(got.tensors()[i].dtype, want.tensors()[i].dtype);
  }
  EXPECT_EQ(all_bytes(got), all_bytes(want));
  EXPECT_EQ(got.path(), "deflated.pt");  // messages still name the user's file
  const TensorInfo* ramp = got.find("ramp");
  ASSERT_NE(ramp, nullptr);
  float v[18];
  std::memcpy(v, got.data(*ramp), sizeof v);
  EXPECT_EQ(v[16], 16.0f);
  EXPECT_EQ(v[17], 0.0f);
}

TEST(ZipDeflate, CheckpointReadsAsStored) {
  expect_same_as_stored(deflate_sample(), false, false);
}

TEST(ZipDeflate, Zip64LightningReadsAsStored) {
  expect_same_as_stored(deflate_sample(), true, true);
}

TEST(ZipDeflate, StreamedEntriesWithDataDescriptors) {
  TorchFileBuilder b = deflate_sample();
  const Bytes stored = b.zip_bytes();
  const Bytes pkl = b.main_pickle(false);
  std::vector<std::pair<std::string, Bytes>> entries = {{"archive/data.pkl", pkl}};
  for (const auto& s : b.storages) entries.push_back({"archive/data/" + s.key, s.bytes});
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "zip32");
    const Bytes streamed = TorchFileBuilder::zip_deflated(entries, zip64, true);
    auto got = TorchCheckpoint::parse(MappedFile::from_memory("streamed.pt", streamed));
    auto want = TorchCheckpoint::parse(MappedFile::from_memory("stored.pt", stored));
    EXPECT_EQ(all_bytes(got), all_bytes(want));
  }
}

TEST(ZipDeflate, MixedStoredAndDeflatedEntries) {
  TorchFileBuilder b = deflate_sample();
  std::vector<ZipEntrySpec> specs = {deflated_entry("archive/data.pkl", b.main_pickle(false))};
  for (const auto& s : b.storages) {
    const std::string name = "archive/data/" + s.key;
    specs.push_back(s.key == "1" ? ZipEntrySpec{name, s.bytes, 0, 0, s.bytes.size(), false}
                                 : deflated_entry(name, s.bytes));
  }
  auto got = TorchCheckpoint::parse(
      MappedFile::from_memory("mixed.pt", TorchFileBuilder::zip_entries(specs)));
  auto want = TorchCheckpoint::parse(MappedFile::from_memory("stored.pt", b.zip_bytes()));
  EXPECT_EQ(all_bytes(got), all_bytes(want));
}

TEST(ZipDeflate, ArchiveInflatesEntriesInPlaceOfStoredOnes) {
  const Bytes a = test::random_bytes(100000, 3), empty;
  Bytes zeros(1 << 20, 0);  // 1 MiB from about 1 KiB: near deflate's largest ratio
  auto file = MappedFile::from_memory(
      "a.zip", TorchFileBuilder::zip_deflated({{"a", a}, {"zeros", zeros}, {"empty", empty}}));
  ZipArchive zip = ZipArchive::parse(file);
  ASSERT_TRUE(zip.has_deflated_entries());
  EXPECT_LT(zip.find("zeros")->compressed_size, 2048u);
  test::expect_error([&] { zip.stored_data(*zip.find("a")); }, {"a.zip: ", "'a'", "method 8"});

  ZipArchive in = zip.inflated();
  EXPECT_FALSE(in.has_deflated_entries());
  EXPECT_EQ(in.file().path(), "a.zip");
  ASSERT_NE(in.find("a"), nullptr);
  EXPECT_EQ(in.find("a")->method, 0);
  EXPECT_EQ(in.find("a")->data_offset % 64, 0u);
  EXPECT_EQ(Bytes(in.stored_data(*in.find("a")), in.stored_data(*in.find("a")) + a.size()), a);
  const uint8_t* z = in.stored_data(*in.find("zeros"));
  EXPECT_EQ(Bytes(z, z + zeros.size()), zeros);
  EXPECT_EQ(in.find("empty")->size, 0u);
}

// A deflate bomb: a few hundred KiB that declare 128 MiB. What nothing refers to is
// never inflated into memory, and a storage is held only to the bytes the pickle gives it;
// the rest of an entry is still inflated to check its CRC-32.
TEST(ZipDeflate, BombsCostOnlyWhatThePickleReads) {
  TorchFileBuilder b = deflate_sample();
  const Bytes pkl = b.main_pickle(false);
  std::vector<ZipEntrySpec> specs = {deflated_entry("archive/data.pkl", pkl)};
  for (const auto& st : b.storages)
    specs.push_back(deflated_entry("archive/data/" + st.key, st.bytes));
  const Bytes zeros(size_t{64} << 20, 0);
  specs.push_back(deflated_entry("archive/padding", zeros));
  // Storage "0" followed by 64 MiB of zeros that the pickle does not read.
  Bytes longer = b.storages[0].bytes;
  longer.insert(longer.end(), zeros.begin(), zeros.end());
  specs[1] = deflated_entry("archive/data/0", longer);
  const Bytes file = TorchFileBuilder::zip_entries(specs);
  ASSERT_LT(file.size(), size_t{1} << 20);

  auto got = TorchCheckpoint::parse(MappedFile::from_memory("bomb.ckpt", file));
  auto want = TorchCheckpoint::parse(MappedFile::from_memory("stored.pt", b.zip_bytes()));
  EXPECT_EQ(all_bytes(got), all_bytes(want));
  EXPECT_LT(got.file().size(), size_t{64} << 10) << "inflated more than the pickle reads";

  // The part that is not held is still checked.
  ZipEntrySpec bad_crc = specs[1];
  bad_crc.crc ^= 1;
  specs[1] = bad_crc;
  test::expect_error(
      [&] {
        TorchCheckpoint::parse(
            MappedFile::from_memory("crc.ckpt", TorchFileBuilder::zip_entries(specs)));
      },
      {"crc.ckpt: ", "'archive/data/0'", "CRC-32"});
}

struct ZipCase {
  std::string name;
  std::vector<ZipEntrySpec> specs;
  std::vector<std::string> expect;  // substrings of the message
};

void expect_all_zips_fail(const std::vector<ZipCase>& cases) {
  for (const ZipCase& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = c.name + ".ckpt";
    test::expect_error(
        [&] {
          TorchCheckpoint::parse(
              MappedFile::from_memory(path, TorchFileBuilder::zip_entries(c.specs)));
        },
        [&] {
          std::vector<std::string> want = {path + ": "};
          want.insert(want.end(), c.expect.begin(), c.expect.end());
          return want;
        }());
  }
}

TEST(ZipDeflate, CorruptEntriesFail) {
  TorchFileBuilder b = deflate_sample();
  const Bytes pkl = b.main_pickle(false);
  const Bytes data = b.storages[0].bytes;  // 12000 bytes, compressible
  // data.pkl intact; storage "0" as `bad` makes it; the others deflated.
  auto with = [&](const ZipEntrySpec& bad) {
    std::vector<ZipEntrySpec> specs = {deflated_entry("archive/data.pkl", pkl), bad};
    for (size_t i = 1; i < b.storages.size(); ++i) {
      specs.push_back(deflated_entry("archive/data/" + b.storages[i].key, b.storages[i].bytes));
    }
    return specs;
  };
  const ZipEntrySpec good = deflated_entry("archive/data/0", data);
  auto edit = [&](auto change) {
    ZipEntrySpec e = good;
    change(e);
    return with(e);
  };
  ASSERT_NO_THROW(TorchCheckpoint::parse(
      MappedFile::from_memory("good.ckpt", TorchFileBuilder::zip_entries(with(good)))));

  const std::string entry = "zip entry 'archive/data/0'";
  std::vector<ZipCase> cases = {
      {"bad_crc", edit([](ZipEntrySpec& e) { e.crc ^= 0x10; }), {entry, "CRC-32"}},
      {"flipped_byte",
       edit([](ZipEntrySpec& e) { e.payload[e.payload.size() / 2] ^= 0x40; }),
       {entry}},
      {"truncated_stream",
       edit([](ZipEntrySpec& e) { e.payload.resize(e.payload.size() / 2); }),
       {entry, "ends early", "of 12000 bytes"}},
      {"empty_stream",
       edit([](ZipEntrySpec& e) { e.payload.clear(); }),
       {entry, "more than deflate can produce"}},
      {"size_too_small",
       edit([](ZipEntrySpec& e) { e.size -= 1; }),
       {entry, "more than the 11999 bytes"}},
      {"size_zero", edit([](ZipEntrySpec& e) { e.size = 0; }), {entry, "more than the 0 bytes"}},
      {"size_too_large",
       edit([](ZipEntrySpec& e) { e.size += 1; }),
       {entry, "inflates to 12000 bytes", "declares 12001"}},
      {"size_beyond_deflate",
       edit([](ZipEntrySpec& e) { e.size = 0xfffffff0; }),
       {entry, "more than deflate can produce"}},
      {"trailing_bytes",
       edit([](ZipEntrySpec& e) {
         e.payload.insert(e.payload.end(), {1, 2, 3});
       }),
       {entry, "declares 12000 from"}},
      {"garbage_stream",
       edit([](ZipEntrySpec& e) { e.payload.assign(e.payload.size(), 0xff); }),
       {entry, "corrupt deflate stream"}},
      {"unknown_method",
       edit([](ZipEntrySpec& e) { e.method = 12; }),
       {entry, "method 12", "zip -0"}},
  };
  expect_all_zips_fail(cases);

  // The pickle itself deflated with a lie is caught before it runs.
  ZipEntrySpec pkl_bad = deflated_entry("archive/data.pkl", pkl);
  pkl_bad.crc ^= 1;
  expect_all_zips_fail({{"pickle_bad_crc", {pkl_bad}, {"'archive/data.pkl'", "CRC-32"}}});
}

TEST(ZipDeflate, EncryptedDeflatedEntryIsRefused) {
  TorchFileBuilder b = deflate_sample();
  b.deflate = true;
  Bytes bytes = b.zip_bytes();
  // Set bit 0 (encrypted) in the first central-directory entry's flags (data.pkl).
  for (size_t i = 0; i + 4 <= bytes.size(); ++i) {
    if (bytes[i] == 0x50 && bytes[i + 1] == 0x4b && bytes[i + 2] == 1 && bytes[i + 3] == 2) {
      bytes[i + 8] |= 1;
      break;
    }
  }
  test::expect_error([&] { TorchCheckpoint::parse(MappedFile::from_memory("enc.pt", bytes)); },
                     {"enc.pt: ", "'archive/data.pkl'", "encrypted"});
}

TEST(ZipDeflate, EveryTruncationFails) {
  TorchFileBuilder b = deflate_sample();
  b.deflate = true;
  const Bytes full = b.zip_bytes();
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

}  // namespace
}  // namespace sd::io
