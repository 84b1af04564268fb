#include "tensor/base64.h"

#include <gtest/gtest.h>

namespace sd {
namespace {

TEST(Base64, RoundTripsEveryTailLength) {
  const std::string bytes("\x00\xff\x10 image bytes \x89PNG", 21);
  for (size_t n = 0; n <= bytes.size(); ++n) {
    const std::string part = bytes.substr(0, n);
    EXPECT_EQ(base64_decode(base64_encode(part)), part) << n;
  }
  EXPECT_EQ(base64_encode("Man"), "TWFu");
  EXPECT_EQ(base64_encode("Ma"), "TWE=");
}

TEST(Base64, DecodesDataUrlsAndWrappedLines) {
  EXPECT_EQ(base64_decode("data:image/png;base64,TWFu"), "Man");
  EXPECT_EQ(base64_decode("TW\nFu"), "Man");
}

TEST(Base64, RejectsWhatIsNotBase64) {
  EXPECT_FALSE(base64_decode("%%%"));
  EXPECT_FALSE(base64_decode("TWFu=A"));               // data after padding
  EXPECT_FALSE(base64_decode("T"));                    // six bits make no byte
  EXPECT_FALSE(base64_decode("data:image/png,TWFu"));  // not a base64 data URL
}

}  // namespace
}  // namespace sd
