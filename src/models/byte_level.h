// GPT-2's byte-level alphabet (Radford et al. 2019), shared by CLIP's tokenizer and the
// byte-level BPE tokenizers (Qwen, Mistral's tekken): every byte stands for one printable
// character, the printable Latin-1 bytes ('!'..'~', 0xA1..0xAC, 0xAE..0xFF) for themselves
// and the others (controls, space, soft hyphen, ...) for U+0100 upwards in byte order.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace sd::models {

struct ByteLevelAlphabet {
  std::array<std::string, 256> symbol;  // the UTF-8 of the character each byte stands for
  std::array<int16_t, 0x144> byte_of;   // code point -> byte, -1 for none
  // The printable bytes, then the others: the order of the first 256 ids of CLIP's and
  // GPT-2's vocabularies.
  std::array<uint8_t, 256> vocab_order;
};
const ByteLevelAlphabet& byte_level_alphabet();

// Appends code point `cp` (below U+10000) as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

}  // namespace sd::models
