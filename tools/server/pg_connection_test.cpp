#include "server/pg_connection.h"

#include <gtest/gtest.h>

namespace sd::server {
namespace {

TEST(RedactDatabaseUrl, HidesThePasswordInEveryForm) {
  EXPECT_EQ(redact_database_url("postgresql://sd:hunter2@db.example:5432/jobs"),
            "postgresql://sd:***@db.example:5432/jobs");
  EXPECT_EQ(redact_database_url("postgres://sd:p%40ss@10.0.0.5/jobs?sslmode=require"),
            "postgres://sd:***@10.0.0.5/jobs?sslmode=require");
  EXPECT_EQ(redact_database_url("postgresql://sd@db/jobs?password=hunter2&sslmode=verify-full"),
            "postgresql://sd@db/jobs?password=***&sslmode=verify-full");
  EXPECT_EQ(redact_database_url("host=db user=sd password=hunter2 dbname=jobs"),
            "host=db user=sd password=*** dbname=jobs");
  EXPECT_EQ(redact_database_url("postgresql://db/jobs"), "postgresql://db/jobs");
}

TEST(PgConnection, ANonexistentServerIsAConnectionErrorWithoutThePassword) {
  try {
    PgConnection c("postgresql://sd:hunter2@127.0.0.1:1/jobs?connect_timeout=2");
    FAIL() << "connected to nothing";
  } catch (const PgError& e) {
    EXPECT_TRUE(e.connection_lost());
    const std::string message = e.what();
    EXPECT_NE(message.find("cannot connect to the queue database"), std::string::npos) << message;
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

TEST(PgPool, BacksOffAfterAFailedConnect) {
  PgPool pool("postgresql://sd:hunter2@127.0.0.1:1/jobs", 2);
  EXPECT_THROW(pool.borrow(), PgError);
  // Within the backoff the pool answers at once, without trying.
  try {
    pool.borrow();
    FAIL() << "connected to nothing";
  } catch (const PgError& e) {
    EXPECT_TRUE(e.connection_lost());
    EXPECT_NE(std::string(e.what()).find("retrying in the background"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace sd::server
