#include "sampling/rng.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "sampling/rng_philox.h"
#include "sampling/rng_std_default.h"
#include "sampling/rng_torch_cpu.h"
#include "tensor/error.h"

namespace sd::sampling {
namespace {

void expect_first_values(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_GE(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << "index " << i;
}

// Known-answer tests of the Philox4x32-10 core from the Random123 distribution
// (counter, key -> output).
TEST(PhiloxRng, CoreMatchesRandom123KnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({~0u, ~0u, ~0u, ~0u}, {~0u, ~0u}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(
      philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
      (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

// torch.manual_seed(s); torch.randn(5, device="cuda").
TEST(PhiloxRng, MatchesTorchCudaRandn) {
  expect_first_values(PhiloxRng(0).randn(5), {-0.9247f, -0.4253f, -2.6438f, 0.1452f, -0.1209f});
  expect_first_values(PhiloxRng(42).randn(5), {0.1940f, 2.1614f, -0.1721f, 0.8491f, -1.9244f});
}

TEST(PhiloxRng, EachCallAdvancesTheOffsetByOneWhateverItsSize) {
  PhiloxRng a(7);
  const std::vector<float> first = a.randn(4);
  const std::vector<float> second = a.randn(4);
  EXPECT_NE(first, second);
  PhiloxRng b(7);
  b.randn(1000);
  EXPECT_EQ(b.randn(4), second);
  // Value i of a call does not depend on how many values the call asks for.
  std::vector<float> longer = PhiloxRng(7).randn(9);
  longer.resize(4);
  EXPECT_EQ(longer, first);
}

// torch.manual_seed(s); torch.randn(n) on the CPU: below 16 values torch uses Box-Muller in
// double, from 16 on a float transform of 16-value blocks.
TEST(TorchCpuRng, MatchesTorchCpuRandn) {
  expect_first_values(TorchCpuRng(0).randn(6),
                      {1.5410f, -0.2934f, -2.1788f, 0.5684f, -1.0845f, -1.3986f});
  expect_first_values(TorchCpuRng(42).randn(6),
                      {0.3367f, 0.1288f, 0.2345f, 0.2303f, -1.1229f, -0.1863f});
  expect_first_values(TorchCpuRng(0).randn(16),
                      {-1.1258f, -1.1524f, -0.2506f, -0.4339f, 0.8487f, 0.6920f, -0.3160f, -2.1152f,
                       0.3223f, -1.2633f, 0.3500f, 0.3081f, 0.1198f, 1.2377f, 1.1168f, -0.2473f});
}

TEST(TorchCpuRng, EngineMatchesMt19937) {
  // torch seeds MT19937 like the standard's init_genrand, so its words are std::mt19937's.
  std::mt19937 reference(5489u);
  TorchCpuRng rng(5489u);
  for (int i = 0; i < 2000; ++i) ASSERT_EQ(rng.next_uint32(), reference()) << "word " << i;
}

TEST(TorchCpuRng, TailBlockIsRedrawnOverTheLastSixteenSlots) {
  // 20 values: block 0..15 from the first 16 uniforms, then slots 4..19 from 16 new ones,
  // so only the first four values equal those of a 16-value draw.
  const std::vector<float> twenty = TorchCpuRng(3).randn(20);
  const std::vector<float> sixteen = TorchCpuRng(3).randn(16);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(twenty[i], sixteen[i]);
  EXPECT_NE(twenty[4], sixteen[4]);
}

TEST(TorchCpuRng, SmallDrawsKeepTheSpareNormalAcrossCalls) {
  TorchCpuRng split(11);
  const float a = split.randn(1)[0];
  const float b = split.randn(1)[0];
  const std::vector<float> together = TorchCpuRng(11).randn(2);
  EXPECT_EQ(a, together[0]);
  EXPECT_EQ(b, together[1]);
}

TEST(StdDefaultRng, FreshDistributionPerCallDropsTheSpareValue) {
  const std::vector<float> together = StdDefaultRng(11).randn(2);
  StdDefaultRng split(11);
  EXPECT_EQ(split.randn(1)[0], together[0]);
  EXPECT_NE(split.randn(1)[0], together[1]);
}

class EveryRng : public ::testing::TestWithParam<RngType> {};

TEST_P(EveryRng, SameSeedSameStreamOtherSeedOtherStream) {
  auto a = make_rng(GetParam(), 42);
  auto b = make_rng(GetParam(), 42);
  auto c = make_rng(GetParam(), 43);
  const std::vector<float> first = a->randn(64);
  EXPECT_EQ(first, b->randn(64));
  EXPECT_NE(first, c->randn(64));
  EXPECT_NE(first, a->randn(64));  // the next call continues the stream
}

TEST_P(EveryRng, DrawsAreStandardNormal) {
  const std::vector<float> v = make_rng(GetParam(), 1234)->randn(100000);
  double mean = 0, square = 0;
  for (float x : v) {
    ASSERT_TRUE(std::isfinite(x));
    mean += x;
    square += double{x} * x;
  }
  mean /= v.size();
  const double variance = square / v.size() - mean * mean;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(variance, 1.0, 0.02);
}

TEST_P(EveryRng, NameRoundTrips) {
  EXPECT_EQ(parse_rng(rng_name(GetParam())), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Rng, EveryRng,
                         ::testing::Values(RngType::StdDefault, RngType::Cuda, RngType::Cpu),
                         [](const auto& info) { return std::string(rng_name(info.param)); });

TEST(Rng, UnknownNameListsTheValidOnes) {
  try {
    parse_rng("gpu");
    FAIL() << "parse_rng accepted 'gpu'";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "unknown rng 'gpu'; valid rngs: std_default, cuda, cpu");
  }
}

}  // namespace
}  // namespace sd::sampling
