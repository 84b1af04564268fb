// sd-rpc-server's engine against hostile clients: calls with bad sessions, bad sizes, bad
// buffer ids and ranges out of bounds. Each must get an error status that says what is
// wrong, and afterwards the server must still serve a well-behaved client.
#include "backend/rpc/hostile_client_test_util.h"

namespace sd::rpc::hostile {
namespace {

TEST_F(HostileClient, CallsWithoutAKnownSessionAreRefused) {
  RawClient& c = *client_;
  for (const char* id : {"", "not-a-session", "00000000000000000000000000000000"}) {
    c.use_session(id);
    expect_refused(c.alloc(0, 64), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.memory(0), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.free(1), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.clear(1, 0), StatusCode::FAILED_PRECONDITION, "unknown session");
    expect_refused(c.write(range(1, 0, 4), {"abcd"}), StatusCode::FAILED_PRECONDITION,
                   "unknown session");
    std::string out;
    expect_refused(c.read(range(1, 0, 4), &out), StatusCode::FAILED_PRECONDITION,
                   "unknown session");
    expect_refused(c.compute(wire::ComputeRequest()), StatusCode::FAILED_PRECONDITION,
                   "unknown session");
  }
  // A session that ended is as unknown as one that never was.
  RawClient other(address());
  const std::string ended = other.session();
  other.close();
  for (int i = 0; i < 100 && server_->session_count() > 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.use_session(ended);
  expect_refused(c.alloc(0, 64), StatusCode::FAILED_PRECONDITION, "unknown session");
}

TEST_F(HostileClient, AHelloFromAnotherReleaseIsRefusedNamingBothSides) {
  wire::Hello hello;
  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->set_protocol(kProtocolVersion + 7);
  RawClient future(address(), &hello);
  EXPECT_FALSE(future.in_session());
  expect_refused(future.hello_status(), StatusCode::FAILED_PRECONDITION,
                 format("speaks RPC protocol %u, the client speaks %u", kProtocolVersion,
                        kProtocolVersion + 7));

  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->mutable_ops()->SwapElements(1, 2);  // View and Reshape swapped
  RawClient renumbered(address(), &hello);
  EXPECT_FALSE(renumbered.in_session());
  expect_refused(renumbered.hello_status(), StatusCode::FAILED_PRECONDITION, "op sets differ");
  EXPECT_NE(renumbered.hello_status().error_message().find("[none,view,reshape"), std::string::npos)
      << describe(renumbered.hello_status());
  EXPECT_NE(renumbered.hello_status().error_message().find("[none,reshape,view"), std::string::npos)
      << describe(renumbered.hello_status());

  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->mutable_dtypes()->RemoveLast();
  RawClient fewer_dtypes(address(), &hello);
  expect_refused(fewer_dtypes.hello_status(), StatusCode::FAILED_PRECONDITION, "dtype sets differ");

  RawClient empty(address(), &wire::Hello::default_instance());
  expect_refused(empty.hello_status(), StatusCode::FAILED_PRECONDITION, "protocol");
  EXPECT_EQ(server_->session_count(), 1u);  // only the fixture's client
}

TEST_F(HostileClient, AllocationsOfNothingTooMuchOrNowhereAreRefused) {
  RawClient& c = *client_;
  expect_refused(c.alloc(0, 0), StatusCode::INVALID_ARGUMENT, "0 bytes");
  // Sizes no machine has must be refused before anything is reserved.
  for (uint64_t size : {uint64_t{1} << 62, kU64Max, kU64Max - 63, uint64_t{1} << 48}) {
    grpc::Status s = c.alloc(0, size);
    EXPECT_FALSE(s.ok()) << size;
    EXPECT_NE(s.error_message().find("asked for"), std::string::npos) << describe(s);
  }
  expect_refused(c.alloc(1, 64), StatusCode::INVALID_ARGUMENT, "device 1 does not exist");
  expect_refused(c.alloc(UINT32_MAX, 64), StatusCode::INVALID_ARGUMENT, "does not exist");
  expect_refused(c.memory(3), StatusCode::INVALID_ARGUMENT, "device 3 does not exist");
  EXPECT_TRUE(c.memory(0).ok());
}

TEST(HostileClientMemoryLimit, AllocationsPastTheLimitAreRefusedAndFreeingMakesRoom) {
  auto server = start_server(size_t{1} << 20);
  RawClient c(endpoint(*server));
  expect_refused(c.alloc(0, (size_t{1} << 20) + 1), StatusCode::RESOURCE_EXHAUSTED, "limit");
  expect_refused(c.alloc(0, uint64_t{1} << 62), StatusCode::RESOURCE_EXHAUSTED, "limit");
  expect_refused(c.alloc(0, kU64Max), StatusCode::RESOURCE_EXHAUSTED, "limit");
  const uint64_t a = c.alloc_ok(600 << 10);
  // The limit spans sessions: another client cannot take what this one holds.
  RawClient other(endpoint(*server));
  expect_refused(other.alloc(0, 600 << 10), StatusCode::RESOURCE_EXHAUSTED, "limit");
  EXPECT_TRUE(c.free(a).ok());
  EXPECT_TRUE(other.alloc(0, 600 << 10).ok());
  expect_serves_a_well_behaved_client(endpoint(*server));
}

TEST_F(HostileClient, TransfersWithUnknownBuffersOrRangesOutsideThemAreRefused) {
  RawClient& c = *client_;
  const uint64_t id = c.alloc_ok(64);
  const uint64_t freed = c.alloc_ok(64);
  ASSERT_TRUE(c.free(freed).ok());
  std::string out;
  for (uint64_t bad : {uint64_t{0}, freed, id + 100, kU64Max}) {
    expect_refused(c.write(range(bad, 0, 4), {"abcd"}), StatusCode::INVALID_ARGUMENT,
                   "does not exist");
    expect_refused(c.read(range(bad, 0, 4), &out), StatusCode::INVALID_ARGUMENT, "does not exist");
    expect_refused(c.clear(bad, 1), StatusCode::INVALID_ARGUMENT, "does not exist");
    expect_refused(c.free(bad), StatusCode::INVALID_ARGUMENT, "does not exist");
    bool hit = true;
    expect_refused(c.write_cached(range(bad, 0, 4), wire::Hash128(), &hit),
                   StatusCode::INVALID_ARGUMENT, "does not exist");
  }
  // Ranges past the end, including ones whose end wraps around 2^64.
  const std::vector<wire::Range> outside = {
      range(id, 0, 65),      range(id, 60, 8),           range(id, 65, 0),
      range(id, 64, 1),      range(id, kU64Max - 7, 16), range(id, 8, kU64Max),
      range(id, kU64Max, 1), range(id, 1, kU64Max),      range(id, uint64_t{1} << 63, 0)};
  for (const wire::Range& r : outside) {
    const std::string at = r.DebugString();
    expect_refused(c.write(r, {std::string(std::min<uint64_t>(r.size(), 64), 'x')}),
                   StatusCode::INVALID_ARGUMENT, "outside buffer");
    expect_refused(c.read(r, &out), StatusCode::INVALID_ARGUMENT, "outside buffer");
    EXPECT_TRUE(out.empty()) << at;
    bool hit = true;
    expect_refused(c.write_cached(r, wire::Hash128(), &hit), StatusCode::INVALID_ARGUMENT,
                   "outside buffer");
  }
  // An empty range at the very end is in bounds.
  EXPECT_TRUE(c.read(range(id, 64, 0), &out).ok());

  // Writes whose bytes disagree with their header.
  expect_refused(c.write(range(id, 0, 8), {std::string(16, 'x')}), StatusCode::INVALID_ARGUMENT,
                 "more than the 8 bytes");
  expect_refused(c.write(range(id, 0, 8), {"abcd", "efgh", "i"}), StatusCode::INVALID_ARGUMENT,
                 "more than the 8 bytes");
  expect_refused(c.write(range(id, 0, 16), {std::string(8, 'x')}), StatusCode::INVALID_ARGUMENT,
                 "announced 16 bytes but sent 8");
  expect_refused(c.write(range(id, 0, 16), {}), StatusCode::INVALID_ARGUMENT,
                 "announced 16 bytes but sent 0");
  expect_refused(c.write(range(id, 0, 4), {"abcd"}, nullptr, false), StatusCode::INVALID_ARGUMENT,
                 "must start with its range");
  expect_refused(c.write(range(id, 0, 4), {}, nullptr, false), StatusCode::INVALID_ARGUMENT,
                 "must start with its range");
  const std::string bytes(64, 'w');
  wire::Hash128 wrong = to_wire(content_hash(bytes.data(), bytes.size()));
  wrong.set_low(wrong.low() ^ 1);
  expect_refused(c.write(range(id, 0, 64), {bytes}, &wrong), StatusCode::DATA_LOSS, "damaged");

  for (uint32_t value : {256u, 1000u, UINT32_MAX})
    expect_refused(c.clear(id, value), StatusCode::INVALID_ARGUMENT, "not a byte");
  expect_refused(c.free(freed), StatusCode::INVALID_ARGUMENT, "does not exist");

  // The buffer itself still works.
  ASSERT_TRUE(c.write(range(id, 8, 4), {"good"}).ok());
  ASSERT_TRUE(c.read(range(id, 8, 4), &out).ok());
  EXPECT_EQ(out, "good");
}

TEST_F(HostileClient, AWriteThatFailsHalfwayCannotPoisonTheWeightCache) {
  const std::string good(4096, 'g'), bad(4096, 'b');
  const wire::Hash128 hash = to_wire(content_hash(good.data(), good.size()));
  // Variants: more bytes than announced, fewer, and (the control) no failed write at all.
  for (int variant = 0; variant < 3; ++variant) {
    {
      // The buffer holds a verified weight, then a write overwrites it and fails.
      RawClient attacker(address());
      const uint64_t id = attacker.alloc_ok(good.size());
      ASSERT_TRUE(attacker.write(range(id, 0, good.size()), {good}, &hash).ok());
      if (variant < 2) {
        const grpc::Status s =
            variant == 0 ? attacker.write(range(id, 0, good.size()), {bad, "more"})
                         : attacker.write(range(id, 0, good.size()), {bad.substr(0, 2048)});
        EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << describe(s);
      }
      ASSERT_TRUE(attacker.free(id).ok());
    }
    // A later client asking for the good bytes by hash must never get the bad ones.
    const uint64_t id = client_->alloc_ok(good.size());
    bool hit = false;
    ASSERT_TRUE(client_->write_cached(range(id, 0, good.size()), hash, &hit).ok());
    std::string back;
    ASSERT_TRUE(client_->read(range(id, 0, good.size()), &back).ok());
    if (variant == 2) {
      EXPECT_TRUE(hit) << "the control: an intact weight is served from the cache";
    }
    EXPECT_TRUE(!hit || back == good)
        << "variant " << variant << ": the cache served altered bytes";
  }
}

TEST(HostileClientDevices, AGraphCachedForOneDeviceIsNotRunOnAnother) {
  // The same CPU served twice stands for two devices.
  auto server = start_server(0, {&cpu(), &cpu()});
  RawClient c(endpoint(*server));
  MirroredGraph g(small_graph);
  g.upload(c);  // every buffer on device 0
  ASSERT_TRUE(c.compute(g.request(5)).ok());
  wire::ComputeRequest req = g.request(5);
  req.set_device(1);
  expect_refused(c.compute(req), StatusCode::INVALID_ARGUMENT, "this session does not have");
  req.clear_graph();
  grpc::Status s = c.compute(req);
  EXPECT_FALSE(s.ok()) << "a graph over device 0's buffers ran on device 1";
}

// Thousands of random single-field mutations of a valid graph request: each gets an answer,
// OK or an error with a message, and the server keeps computing the valid graph correctly.

}  // namespace
}  // namespace sd::rpc::hostile
