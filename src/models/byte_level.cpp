#include "models/byte_level.h"

namespace sd::models {
namespace {

bool printable(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
}

ByteLevelAlphabet make_alphabet() {
  ByteLevelAlphabet a;
  a.byte_of.fill(-1);
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : next++;
    append_utf8(a.symbol[b], cp);
    a.byte_of[cp] = static_cast<int16_t>(b);
  }
  size_t at = 0;
  for (bool first_pass : {true, false})
    for (int b = 0; b < 256; ++b)
      if (printable(b) == first_pass) a.vocab_order[at++] = static_cast<uint8_t>(b);
  return a;
}

}  // namespace

const ByteLevelAlphabet& byte_level_alphabet() {
  static const ByteLevelAlphabet kAlphabet = make_alphabet();
  return kAlphabet;
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace sd::models
