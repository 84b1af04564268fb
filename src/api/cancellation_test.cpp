#include "api/cancellation.h"

#include <gtest/gtest.h>

namespace sd::api {
namespace {

TEST(Cancellation, NothingRequestedAtFirst) {
  Cancellation c;
  EXPECT_FALSE(c.stop_now());
  EXPECT_FALSE(c.stop_new_images());
}

TEST(Cancellation, AllStopsNowAndStartsNoMoreImages) {
  Cancellation c;
  c.request(SD_CANCEL_ALL);
  EXPECT_TRUE(c.stop_now());
  EXPECT_TRUE(c.stop_new_images());
}

TEST(Cancellation, NewLatentsLetsTheCurrentImageFinish) {
  Cancellation c;
  c.request(SD_CANCEL_NEW_LATENTS);
  EXPECT_FALSE(c.stop_now());
  EXPECT_TRUE(c.stop_new_images());
}

TEST(Cancellation, ResetWithdrawsAPendingRequest) {
  Cancellation c;
  c.request(SD_CANCEL_ALL);
  c.request(SD_CANCEL_NEW_LATENTS);
  c.request(SD_CANCEL_RESET);
  EXPECT_FALSE(c.stop_now());
  EXPECT_FALSE(c.stop_new_images());
}

TEST(Cancellation, ResetAloneRequestsNothing) {
  Cancellation c;
  c.request(SD_CANCEL_RESET);
  EXPECT_FALSE(c.stop_now());
  EXPECT_FALSE(c.stop_new_images());
}

}  // namespace
}  // namespace sd::api
