// sd-rpc-server's engine against hostile graphs: malformed and mutated graph descriptions,
// graphs over freed or foreign buffers, and thousands of random single-field mutations of
// a valid graph. Each must get an answer, and the server must carry on.
#include "backend/rpc/hostile_client_test_util.h"

namespace sd::rpc::hostile {
namespace {

TEST_F(HostileGraphs, AnUnknownHashWithoutItsGraphIsNotFound) {
  wire::ComputeRequest req = base_;
  req.clear_graph();
  req.set_graph_hash(0xdeadbeef);
  expect_refused(client_->compute(req), StatusCode::NOT_FOUND, "unknown graph");
  expect_base_computes(false);
}

TEST_F(HostileGraphs, AGraphOverAFreedBufferIsForgottenNotRunOnFreedMemory) {
  const uint64_t params = graph_->remote(0);
  ASSERT_TRUE(client_->free(params).ok());
  // The graph cached under hash 1 used the freed buffer: it must be gone.
  wire::ComputeRequest req = base_;
  req.clear_graph();
  expect_refused(client_->compute(req), StatusCode::NOT_FOUND, "unknown graph");
  // Sent whole again, it names a buffer the session no longer has.
  expect_refused(client_->compute(base_), StatusCode::INVALID_ARGUMENT,
                 format("names buffer %llu, which this session does not have",
                        static_cast<unsigned long long>(params)));
}

TEST_F(HostileGraphs, ANodeRangeOutsideTheGraphIsRefused) {
  wire::ComputeRequest req = base_;
  const uint32_t nodes = static_cast<uint32_t>(req.graph().tensors_size());
  req.set_first_node(2);
  req.set_end_node(1);
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT, "compute names nodes 2..1");
  req.set_first_node(0);
  req.set_end_node(nodes + 5);
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT, "of a graph of");
  req.set_first_node(0xffffffffu);
  req.set_end_node(0);
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT, "compute names nodes");
  expect_base_computes(false);
}

TEST_F(HostileGraphs, BuffersOfAnotherSessionAreNotReachable) {
  RawClient other(address());
  wire::ComputeRequest req = base_;
  req.set_graph_hash(77);
  expect_refused(other.compute(req), StatusCode::INVALID_ARGUMENT, "this session does not have");
  std::string out;
  expect_refused(other.read(range(graph_->remote(0), 0, 4), &out), StatusCode::INVALID_ARGUMENT,
                 "does not exist");
  req.clear_graph();
  req.set_graph_hash(1);
  expect_refused(other.compute(req), StatusCode::NOT_FOUND, "unknown graph");
}

TEST_F(HostileGraphs, MalformedGraphsAreRefusedNamingTheProblem) {
  const int x = index_of("x");
  const int n = base_.graph().tensors_size();
  const int leafs = static_cast<int>(base_.graph().leaf_count());
  const int node = leafs + 2;  // a computed node with sources
  int view = 0;                // the first View node (the slice)
  for (int i = n - 1; i >= leafs; --i)
    if (base_.graph().tensors(i).op() == static_cast<uint32_t>(Op::View)) view = i;
  ASSERT_GT(view, 0);
  struct Case {
    const char* what;
    std::function<void(wire::GraphDesc&)> change;
    const char* words;
  };
  const std::vector<Case> cases = {
      {"no tensors", [](wire::GraphDesc& g) { g.clear_tensors(); }, "unknown graph"},
      {"leaf_count past the end", [&](wire::GraphDesc& g) { g.set_leaf_count(n + 1); },
       "leafs but only"},
      {"leaf_count huge", [](wire::GraphDesc& g) { g.set_leaf_count(UINT32_MAX); },
       "leafs but only"},
      {"leaf_count short", [&](wire::GraphDesc& g) { g.set_leaf_count(leafs - 1); },
       "leafs come first"},
      {"source after the node",
       [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_src(0, node); },
       "not an earlier tensor"},
      {"source past the end",
       [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_src(0, n + 5); },
       "not an earlier tensor"},
      {"negative source", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_src(0, -2); },
       "not an earlier tensor"},
      {"view of a later tensor",
       [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_view_src(n - 1); },
       "not an earlier tensor"},
      {"unknown op", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_op(kOpCount); },
       "has op"},
      {"op past uint8", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_op(256 + 4); },
       "has op"},
      {"unknown dtype",
       [&](wire::GraphDesc& g) {
         g.mutable_tensors(x)->set_type(static_cast<uint32_t>(DType::Count));
       },
       "dtype"},
      {"dtype past uint8", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_type(256); },
       "dtype"},
      {"unknown flags", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_flags(1u << 9); },
       "unknown flags"},
      {"three dims", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->mutable_ne()->RemoveLast(); },
       "must have 4 sizes"},
      {"too many params",
       [&](wire::GraphDesc& g) {
         for (int i = 0; i < 17; ++i) g.mutable_tensors(node)->add_params(0);
       },
       "too many parameters"},
      {"too many sources",
       [&](wire::GraphDesc& g) {
         for (int i = 0; i < 5; ++i) g.mutable_tensors(node)->add_src(-1);
       },
       "too many parameters or sources"},
      {"input shape changed", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_ne(1, 4); },
       "builder"},
      {"node shape changed", [&](wire::GraphDesc& g) { g.mutable_tensors(node)->set_ne(0, 9); },
       "but the builder makes"},
      {"zero dim", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_ne(2, 0); },
       "dims must be 1 to 2^40"},
      {"huge dims",
       [&](wire::GraphDesc& g) {
         g.mutable_tensors(x)->set_ne(1, int64_t{1} << 40);
         g.mutable_tensors(x)->set_ne(2, int64_t{1} << 40);
       },
       "more than 2^40"},
      {"stride below the element", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_nb(1, 2); },
       "below the element size"},
      // Kernels read f32 through float pointers: odd addresses are undefined behaviour.
      {"leaf at an odd offset",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_offset(g.tensors(x).offset() + 1); },
       "misaligns"},
      {"leaf stride off the element grid",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_nb(1, g.tensors(x).nb(1) + 2); },
       "misaligns"},
      {"view at an odd offset",
       [&](wire::GraphDesc& g) {
         g.mutable_tensors(view)->set_view_offset(g.tensors(view).view_offset() + 1);
       },
       "misaligns"},
      {"leaf past its buffer's end",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_offset(graph_->size(1) - 4); },
       "does not fit its buffer"},
      {"leaf offset wraps",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_offset(kU64Max - 7); },
       "does not fit its buffer"},
      {"leaf in no buffer", [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_buffer(0); },
       "names buffer 0"},
      {"leaf in an unknown buffer",
       [&](wire::GraphDesc& g) { g.mutable_tensors(x)->set_buffer(kU64Max); },
       "this session does not have"},
      {"too many tensors",
       [](wire::GraphDesc& g) {
         // Empty descriptions: the count is checked before any of them.
         g.clear_tensors();
         for (int i = 0; i <= kMaxGraphTensors; ++i) g.add_tensors();
       },
       "1 to 262144 tensors"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    grpc::Status s = compute_changed(c.change);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.error_message().find(c.words), std::string::npos) << describe(s);
  }
  expect_base_computes(false);
}

TEST_F(HostileGraphs, AHugeTensorNameStillGetsAnErrorReply) {
  // Error messages quote names: an unbounded one would not fit the reply's metadata, and
  // the client would see its connection dropped instead of the error.
  for (const std::string& name : {std::string(1 << 20, 'n'), [] {
                                    std::string s;
                                    for (int i = 0; i < 4000; ++i)
                                      s += "\u00e9";  // percent-encoded in replies
                                    return s;
                                  }()}) {
    grpc::Status s = compute_changed([&](wire::GraphDesc& g) {
      wire::TensorDesc& x = *g.mutable_tensors(index_of("x"));
      x.set_name(name);
      x.set_type(999);
    });
    expect_refused(s, StatusCode::INVALID_ARGUMENT, "has dtype");
  }
  wire::Hello hello;
  *hello.mutable_manifest() = local_manifest();
  hello.mutable_manifest()->mutable_ops()->Add(std::string(1 << 20, 'o'));
  RawClient verbose(address(), &hello);
  expect_refused(verbose.hello_status(), StatusCode::FAILED_PRECONDITION, "op sets differ");
  expect_base_computes(false);
}

TEST_F(HostileGraphs, RequestsWithBadDevicesWritesOrReadsAreRefused) {
  wire::ComputeRequest req = base_;
  req.set_device(1);
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT, "device 1 does not exist");

  const uint64_t out = graph_->remote(2);
  for (const wire::Range& r : {range(out, graph_->size(2), 1), range(out, kU64Max - 7, 16),
                               range(out, 0, kU64Max), range(kU64Max, 0, 4)}) {
    req = base_;
    *req.add_reads() = r;
    grpc::Status s = client_->compute(req);
    EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << describe(s);
    EXPECT_TRUE(s.error_message().find("outside buffer") != std::string::npos ||
                s.error_message().find("does not exist") != std::string::npos)
        << describe(s);

    req = base_;
    wire::InlineWrite* w = req.add_writes();
    *w->mutable_range() = r;
    w->set_data("abcd");
    s = client_->compute(req);
    EXPECT_EQ(s.error_code(), StatusCode::INVALID_ARGUMENT) << describe(s);
  }
  req = base_;
  wire::InlineWrite* w = req.add_writes();
  *w->mutable_range() = range(out, 0, 8);
  w->set_data("abcd");
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT,
                 "announced 8 bytes but carries 4");

  // Reads past the reply's budget, though each is in range.
  const uint64_t big = client_->alloc_ok(20 << 20);
  req = base_;
  *req.add_reads() = range(big, 0, 20 << 20);
  *req.add_reads() = range(big, 0, 20 << 20);
  expect_refused(client_->compute(req), StatusCode::INVALID_ARGUMENT, "may read back at most");
  expect_base_computes(false);
}

TEST_F(HostileGraphs, RowIdsOutsideTheTableAreAnErrorNotAnOutOfBoundsRead) {
  // The ids are data, not part of the graph: the kernel must check them.
  const int ids = index_of("ids");
  const wire::TensorDesc& d = base_.graph().tensors(ids);
  for (int32_t bad : {6, -1, INT32_MAX, INT32_MIN}) {
    std::string bytes(16, '\0');
    std::memcpy(bytes.data() + 4, &bad, 4);
    ASSERT_TRUE(client_->write(range(d.buffer(), d.offset(), 16), {bytes}).ok());
    wire::ComputeRequest req = base_;
    req.clear_graph();
    grpc::Status s = client_->compute(req);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.error_message().find("get_rows"), std::string::npos) << describe(s);
  }
  std::string good(16, '\0');
  for (int32_t i = 0; i < 4; ++i) {
    const int32_t id = i % 3;
    std::memcpy(good.data() + 4 * i, &id, 4);
  }
  ASSERT_TRUE(client_->write(range(d.buffer(), d.offset(), 16), {good}).ok());
  expect_base_computes(false);
}

TEST_F(HostileGraphs, AWeightBufferSwappedForACachedOneLeavesNoGraphOnFreedMemory) {
  // Another client leaves the same weight bytes in the server's cache.
  const std::string weights = graph_->bytes(0);
  const wire::Hash128 hash = to_wire(content_hash(weights.data(), weights.size()));
  {
    RawClient donor(address());
    const uint64_t id = donor.alloc_ok(weights.size());
    ASSERT_TRUE(donor.write(range(id, 0, weights.size()), {weights}, &hash).ok());
    ASSERT_TRUE(donor.free(id).ok());
  }
  // The cached buffer may take the place of the one the graph under hash 1 was built on.
  bool hit = false;
  grpc::Status s = client_->write_cached(range(graph_->remote(0), 0, weights.size()), hash, &hit);
  ASSERT_TRUE(s.ok()) << describe(s);
  // Whatever became of the old memory, the cached graph must not compute from it.
  wire::ComputeRequest req = base_;
  req.clear_graph();
  s = client_->compute(req);
  EXPECT_TRUE(s.ok() || s.error_code() == StatusCode::NOT_FOUND) << describe(s);
  expect_base_computes();
}

TEST_F(HostileGraphs, RandomMutationsOfAValidGraphGetAnAnswerAndBreakNothing) {
  const uint64_t spare = client_->alloc_ok(256);
  const uint64_t freed = client_->alloc_ok(256);
  ASSERT_TRUE(client_->free(freed).ok());
  const std::vector<uint64_t> buffers = {
      graph_->remote(0), graph_->remote(1), graph_->remote(2), spare, freed, 0, kU64Max};
  std::mt19937_64 rng(20240611);
  auto pick = [&](uint64_t n) { return n ? rng() % n : 0; };
  auto chance = [&](int percent) { return static_cast<int>(pick(100)) < percent; };
  auto one_of = [&]<typename T>(std::initializer_list<T> values) {
    return *(values.begin() + pick(values.size()));
  };
  // Edge values near and far from `v`; arithmetic wraps, as a careless client's would.
  auto u64 = [&](uint64_t v) {
    return one_of({uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{4}, uint64_t{8}, uint64_t{64},
                   v - 1, v + 1, v * 2, v + 4, kU64Max, kU64Max - 7, uint64_t{1} << 40,
                   (uint64_t{1} << 40) + 1, rng()});
  };
  auto i64 = [&](int64_t v) {
    return static_cast<int64_t>(one_of(
        {uint64_t{0}, ~uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t(v) - 1,
         uint64_t(v) + 1, uint64_t(v) * 2, uint64_t(v / 2), uint64_t{INT64_MAX}, uint64_t{1} << 63,
         uint64_t{1} << 40, (uint64_t{1} << 40) + 1, uint64_t{1} << 31, rng()}));
  };
  auto i32 = [&](int32_t v) {
    const float f = one_of({0.0f, -1.0f, 1e30f, 1e-30f, std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()});
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return static_cast<int32_t>(
        one_of({0u, ~0u, 1u, 2u, 3u, 4u, 8u, uint32_t(v) - 1, uint32_t(v) + 1, uint32_t(v) * 2,
                uint32_t{INT32_MAX}, 1u << 31, bits, static_cast<uint32_t>(rng())}));
  };
  auto mutate_range = [&](wire::Range& r) {
    switch (pick(3)) {
      case 0:
        r.set_buffer(buffers[pick(buffers.size())]);
        break;
      case 1:
        r.set_offset(u64(r.offset()));
        break;
      default:
        r.set_size(u64(r.size()));
        break;
    }
  };

  // One random change to one field of the request.
  auto mutate = [&](wire::ComputeRequest& req) {
    wire::GraphDesc& g = *req.mutable_graph();
    const int n = g.tensors_size();
    if (n == 0) return;
    wire::TensorDesc& t = *g.mutable_tensors(static_cast<int>(pick(n)));
    // An earlier mutation may have shortened a field list: index only what is there.
    auto any = [&](int size) { return static_cast<int>(pick(size)); };
    auto index = [&](int32_t v) {
      return static_cast<int32_t>(
          one_of({~0u - 1, ~0u, 0u, uint32_t(v) - 1, uint32_t(v) + 1, uint32_t(n) - 1, uint32_t(n),
                  uint32_t{INT32_MAX}, 1u << 31, static_cast<uint32_t>(pick(n))}));
    };
    switch (pick(21)) {
      case 0:
        t.set_type(chance(80) ? pick(static_cast<uint64_t>(DType::Count) + 1)
                              : static_cast<uint32_t>(rng()));
        break;
      case 1:
      case 2:
        if (t.ne_size() > 0) t.set_ne(any(t.ne_size()), i64(t.ne(any(t.ne_size()))));
        break;
      case 3:
      case 4:
        if (t.nb_size() > 0) t.set_nb(any(t.nb_size()), u64(t.nb(any(t.nb_size()))));
        break;
      case 5:
        t.set_op(chance(80) ? pick(kOpCount + 1) : static_cast<uint32_t>(rng()));
        break;
      case 6:
      case 7:
        if (t.params_size() > 0 && chance(85)) {
          const int k = static_cast<int>(pick(t.params_size()));
          t.set_params(k, i32(t.params(k)));
        } else {
          t.add_params(i32(0));
        }
        break;
      case 8:
        if (t.src_size() > 0) {
          const int k = static_cast<int>(pick(t.src_size()));
          t.set_src(k, index(t.src(k)));
        } else {
          t.add_src(index(0));
        }
        break;
      case 9:
        t.set_view_src(index(t.view_src()));
        break;
      case 10:
        t.set_view_offset(u64(t.view_offset()));
        break;
      case 11:
        t.set_buffer(buffers[pick(buffers.size())]);
        break;
      case 12:
        t.set_offset(u64(t.offset()));
        break;
      case 13:
        t.set_flags(chance(70) ? t.flags() ^ (1u << pick(4)) : static_cast<uint32_t>(rng()));
        break;
      case 14:
        g.set_leaf_count(static_cast<uint32_t>(u64(g.leaf_count())));
        break;
      case 15: {  // drop, duplicate or swap tensors
        const int i = static_cast<int>(pick(n)), j = static_cast<int>(pick(n));
        if (chance(40)) {
          g.mutable_tensors()->DeleteSubrange(i, 1);
        } else if (chance(50)) {
          *g.add_tensors() = g.tensors(i);
          if (chance(50)) g.mutable_tensors()->SwapElements(n, i);
        } else {
          g.mutable_tensors()->SwapElements(i, j);
        }
        break;
      }
      case 16:  // a field list of the wrong length
        switch (pick(4)) {
          case 0:
            if (t.ne_size() > 0) t.mutable_ne()->RemoveLast();
            break;
          case 1:
            t.add_nb(8);
            break;
          case 2:
            if (t.src_size() > 0) t.mutable_src()->RemoveLast();
            break;
          default:
            for (int k = 0; k < 4; ++k) t.add_src(-1);
            break;
        }
        break;
      case 20:  // another dtype with strides to match: it passes the leaf checks
        if (t.op() == 0 && t.ne_size() == kMaxDims && t.nb_size() == kMaxDims) {
          const auto type = static_cast<DType>(pick(static_cast<uint64_t>(DType::Count)));
          Shape ne;
          for (int k = 0; k < kMaxDims; ++k) ne[k] = t.ne(k);
          if (ne[0] < 1 || ne[0] % block_size(type) != 0) break;
          const auto nb = contiguous_strides(type, ne);
          t.set_type(static_cast<uint32_t>(type));
          for (int k = 0; k < kMaxDims; ++k) t.set_nb(k, nb[k]);
        }
        break;
      case 17:
        req.set_device(chance(50) ? 1 : static_cast<uint32_t>(rng()));
        break;
      case 18:
        if (req.reads_size() > 0 && chance(80)) {
          mutate_range(*req.mutable_reads(static_cast<int>(pick(req.reads_size()))));
        } else {
          *req.add_reads() = range(buffers[pick(buffers.size())], u64(0), u64(16));
        }
        break;
      default: {
        wire::InlineWrite* w = req.add_writes();
        *w->mutable_range() = range(graph_->remote(1), 0, 4);
        mutate_range(*w->mutable_range());
        w->set_data(std::string(std::min<uint64_t>(w->range().size(), 64), '\0'));
        if (chance(20)) w->set_data("xyz");
        break;
      }
    }
  };

  // Single-field mutations, then a few stacked ones that reach past the first check.
  const int kSingle = 3000, kStacked = 1000, kMutations = kSingle + kStacked;
  std::map<int, int> codes;
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kMutations; ++i) {
    wire::ComputeRequest req = base_;
    req.set_graph_hash(++hash_);
    const int count = i < kSingle ? 1 : 2 + static_cast<int>(pick(3));
    for (int m = 0; m < count; ++m) mutate(req);
    // Some requests name a graph the server may hold (the valid one, or a recent mutation
    // it accepted) instead of sending one.
    if (chance(5)) {
      req.clear_graph();
      req.set_graph_hash(chance(50) ? 1 : hash_ - pick(20));
    }
    const grpc::Status s = client_->compute(req);
    ++codes[s.error_code()];
    ASSERT_TRUE(s.ok() || s.error_code() == StatusCode::INVALID_ARGUMENT ||
                s.error_code() == StatusCode::NOT_FOUND ||
                s.error_code() == StatusCode::RESOURCE_EXHAUSTED)
        << "mutation " << i << ": " << describe(s) << "\n"
        << req.graph().ShortDebugString().substr(0, 2000);
    if (!s.ok()) {
      ASSERT_FALSE(s.error_message().empty()) << "mutation " << i;
    }
    // Accepted mutations and inline writes may have overwritten the leafs: restore them
    // now and then, and check that the valid graph still computes exactly.
    if (i % 100 == 99) graph_->upload(*client_);
    if (i % 500 == 499) expect_base_computes();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary;
  for (auto [code, count] : codes) summary += format(" code %d: %d;", code, count);
  std::printf("[ mutations ] %d in %.2f s:%s\n", kMutations, seconds, summary.c_str());
  // Some mutations are harmless (a flag, an equal value): the mix must not be all errors.
  EXPECT_GT(codes[0], 0);
  EXPECT_GT(codes[static_cast<int>(StatusCode::INVALID_ARGUMENT)], kMutations / 2);
}

}  // namespace
}  // namespace sd::rpc::hostile
