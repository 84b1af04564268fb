#include "server/server_options.h"

#include <gtest/gtest.h>

#include "tensor/error.h"

namespace sd::server {
namespace {

TEST(ParseDurationSeconds, ReadsSecondsMinutesHoursAndDays) {
  EXPECT_EQ(parse_duration_seconds("--keep-results", "90"), 90);
  EXPECT_EQ(parse_duration_seconds("--keep-results", "90s"), 90);
  EXPECT_EQ(parse_duration_seconds("--keep-results", "30m"), 1800);
  EXPECT_EQ(parse_duration_seconds("--keep-results", "2h"), 7200);
  EXPECT_EQ(parse_duration_seconds("--keep-results", "7d"), 7 * 86400);
  EXPECT_EQ(parse_duration_seconds("--keep-results", "0"), 0);
}

TEST(ParseDurationSeconds, RefusesWhatItCannotRead) {
  for (const char* bad :
       {"", "h", "5y", "-1h", "1.5h", "2 h", "99999999999999999999", "3651d", "1e3"})
    EXPECT_THROW(parse_duration_seconds("--keep-results", bad), Error) << bad;
}

TEST(ResolveServerOptions, ChecksTheQueueFlags) {
  ServerOptions accept_only;
  accept_only.accept_only = true;
  EXPECT_THROW(resolve(accept_only), Error);
  ServerOptions bad_schema;
  bad_schema.queue_url = "postgresql://db/jobs";
  bad_schema.queue_schema = "Jobs; DROP";
  EXPECT_THROW(resolve(bad_schema), Error);
  ServerOptions ok;
  ok.queue_url = "postgresql://db/jobs";
  ok.keep_results = "2h";
  resolve(ok);
  EXPECT_EQ(ok.keep_results_seconds, 7200);
}

}  // namespace
}  // namespace sd::server
