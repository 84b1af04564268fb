// Test-only mutation fuzzing shared by the readers' fuzz tests: mutate a valid file a few
// thousand times (fixed seeds) and require that each variant either parses or fails with
// an sd::Error naming the file. SD_IO_FUZZ_ITERATIONS runs longer campaigns by hand
// (e.g. under -DSD_SANITIZE=ON).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "io/mapped_file.h"
#include "tensor/error.h"

namespace sd::io::test {

// How each mutation picks its bytes: little-endian field values worth trying (sizes,
// counts, offsets at their limits) and bytes of the format's own syntax.
struct MutationAlphabet {
  std::vector<uint64_t> interesting;
  std::vector<uint8_t> syntax;
  bool insert_syntax = false;  // insertions take a syntax byte instead of a random one
};

inline int fuzz_iterations(int default_count) {
  const char* env = std::getenv("SD_IO_FUZZ_ITERATIONS");
  return env ? std::max(1, std::atoi(env)) : default_count;
}

// One to four mutations: bit flips, random bytes, interesting values, syntax bytes,
// insertions, deletions and truncation.
inline std::vector<uint8_t> mutate(const std::vector<uint8_t>& base, std::mt19937& rng,
                                   const MutationAlphabet& a) {
  std::vector<uint8_t> b = base;
  const int n_mut = 1 + static_cast<int>(rng() % 4);
  for (int m = 0; m < n_mut && !b.empty(); ++m) {
    const size_t pos = rng() % b.size();
    switch (rng() % 7) {
      case 0:
        b[pos] ^= static_cast<uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        b[pos] = static_cast<uint8_t>(rng());
        break;
      case 2: {  // of width 1, 2, 4 or 8
        const uint64_t v = a.interesting[rng() % a.interesting.size()];
        const size_t width = size_t{1} << (rng() % 4);
        for (size_t i = 0; i < width && pos + i < b.size(); ++i) b[pos + i] = (v >> (8 * i)) & 0xff;
        break;
      }
      case 3:
        b[pos] = a.syntax[rng() % a.syntax.size()];
        break;
      case 4: {
        const uint8_t v =
            a.insert_syntax ? a.syntax[rng() % a.syntax.size()] : static_cast<uint8_t>(rng());
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(pos), v);
        break;
      }
      case 5:
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(pos));
        break;
      case 6:
        b.resize(pos);
        break;
    }
  }
  return b;
}

struct FuzzCounts {
  int parsed = 0;
  int refused = 0;
};

// Runs `iterations` mutations of `base`; `parse` opens a variant (named `file_name`) and
// checks what it read. Errors must start with "<file_name>: ".
inline FuzzCounts run_fuzz(const std::vector<uint8_t>& base, uint32_t seed, int iterations,
                           const MutationAlphabet& alphabet, const std::string& file_name,
                           const std::function<void(std::shared_ptr<const MappedFile>)>& parse) {
  std::mt19937 rng(seed);
  FuzzCounts counts;
  for (int it = 0; it < iterations; ++it) {
    try {
      parse(MappedFile::from_memory(file_name, mutate(base, rng, alphabet)));
      ++counts.parsed;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(file_name + ": ", 0), 0u)
          << "iteration " << it << ": " << e.what();
      ++counts.refused;
    }
    if (::testing::Test::HasFailure()) break;
  }
  std::printf("[ fuzz     ] %d parsed, %d refused\n", counts.parsed, counts.refused);
  return counts;
}

}  // namespace sd::io::test
