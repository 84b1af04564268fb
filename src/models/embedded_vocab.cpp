#include "models/embedded_vocab.h"

#include <zlib.h>

#include <cstdint>

#include "tensor/error.h"

// From embedded_vocab.S: each file's bytes between a start and an end symbol.
extern "C" {
extern const unsigned char sd_embedded_clip_merges_gz[];
extern const unsigned char sd_embedded_clip_merges_gz_end[];
extern const unsigned char sd_embedded_qwen_tokenizer_gz[];
extern const unsigned char sd_embedded_qwen_tokenizer_gz_end[];
}

namespace sd::models {
namespace {

std::string gunzip(const unsigned char* begin, const unsigned char* end, const char* what) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) fail("[%s] could not start zlib", what);
  zs.next_in = const_cast<Bytef*>(begin);
  zs.avail_in = static_cast<uInt>(end - begin);
  std::string out;
  char buf[1 << 16];
  int status = Z_OK;
  while (status == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    status = inflate(&zs, Z_NO_FLUSH);
    out.append(buf, sizeof(buf) - zs.avail_out);
  }
  inflateEnd(&zs);
  SD_CHECK(status == Z_STREAM_END, "[%s] the built-in copy does not inflate (zlib %d)", what,
           status);
  return out;
}

}  // namespace

std::string embedded_clip_merges() {
  return gunzip(sd_embedded_clip_merges_gz, sd_embedded_clip_merges_gz_end, "CLIP vocabulary");
}

std::string embedded_qwen_tokenizer_json() {
  return gunzip(sd_embedded_qwen_tokenizer_gz, sd_embedded_qwen_tokenizer_gz_end, "Qwen tokenizer");
}

}  // namespace sd::models
