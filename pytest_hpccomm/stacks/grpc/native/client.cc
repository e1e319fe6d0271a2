// The native peer's benchmark client: latency, bandwidth, ps and mimic against one server or
// several (PS), in either mode, timed by bench.h like the Python client.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/client_unary_call.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench.h"
#include "frame.h"
#include "peer.h"
#include "startup.h"
#include "tensor.grpc.pb.h"
#include "wire.h"

namespace peer {

using grpc::ByteBuffer;
using grpc::Status;

namespace {

struct Layout {
  std::string name;
  std::vector<uint64_t> sizes;
  uint64_t total() const {
    uint64_t n = 0;
    for (auto s : sizes) n += s;
    return n;
  }
};

pb::Tensors tensors_of(const Layout& l, uint64_t seq) {
  pb::Tensors t;
  for (size_t i = 0; i < l.sizes.size(); ++i)
    t.add_buffers(bench::buffer_at(i, l.sizes[i]), l.sizes[i]);
  t.set_seq(seq);
  return t;
}

ByteBuffer frame_of(const Layout& l, uint64_t seq) {
  frame::Iov iov;
  for (size_t i = 0; i < l.sizes.size(); ++i)
    iov.emplace_back(bench::buffer_at(i, l.sizes[i]), l.sizes[i]);
  return frame::make(0, seq, iov);
}

// One message in both encodings (only the mode's one is sent) and the payload bytes it moves.
struct Request {
  pb::Tensors t;
  ByteBuffer bb;
  uint64_t total = 0;
};

Request payload_request(const Layout& l) { return {tensors_of(l, 1), frame_of(l, 1), l.total()}; }

Request want_request(const Layout& l) {
  Request r;
  for (auto sz : l.sizes) r.t.add_want(sz);
  r.bb = frame::want(1, l.sizes);
  r.total = l.total();
  return r;
}

// TF places each variable on one PS: buffer i lives on server i % p.
std::vector<Layout> shards(const Layout& l, size_t p) {
  std::vector<Layout> out(p);
  for (size_t i = 0; i < l.sizes.size(); ++i) out[i % p].sizes.push_back(l.sizes[i]);
  return out;
}

std::string status_text(const Status& s) {
  return "grpc status " + std::to_string(s.error_code()) + ": " + s.error_message();
}

// One connection per target; every call of a PS/mimic step goes out before any is awaited.
class Client {
 public:
  Client(const std::vector<std::string>& targets, bool raw) : raw_(raw) {
    for (const auto& t : targets) {
      auto ch = startup::channel_to(t, true);
      if (!startup::connected(ch))
        throw std::runtime_error("cannot connect to " + t);
      stubs_.push_back(pb::TensorTransfer::NewStub(ch));
      generic_.push_back(std::make_unique<grpc::GenericStub>(ch));
      channels_.push_back(ch);
    }
  }

  // p2p latency: blocking Echo, the reply checked when `check` is set.
  bool echo(const pb::Tensors& t, const ByteBuffer& bb, bool check, std::string* err) {
    grpc::ClientContext ctx;
    if (raw_) {
      ByteBuffer resp;
      Status s = grpc::internal::BlockingUnaryCall<ByteBuffer, ByteBuffer>(
          channels_[0].get(), raw_echo_, &ctx, bb, &resp);
      if (!s.ok()) return fail(s, err);
      if (check && frame::flatten(resp) != frame::flatten(bb)) return bad("echo differs", err);
    } else {
      pb::Tensors resp;
      Status s = stubs_[0]->Echo(&ctx, t, &resp);
      if (!s.ok()) return fail(s, err);
      if (check && resp.SerializeAsString() != t.SerializeAsString())
        return bad("echo differs", err);
    }
    return true;
  }

  // Sends reqs[j] to target j, all at once; every ack must count the bytes sent.
  bool send_all(const std::vector<const Request*>& reqs, std::string* err) {
    return all(reqs.size(), [&](size_t j, grpc::ClientContext* ctx, grpc::CompletionQueue* cq,
                                Pending* p) {
      if (raw_) {
        p->raw = generic_[j]->PrepareUnaryCall(ctx, wire::kRawSend, reqs[j]->bb, cq);
        p->raw->StartCall();
        p->raw->Finish(&p->raw_resp, &p->status, reinterpret_cast<void*>(j));
      } else {
        p->ack_call = stubs_[j]->PrepareAsyncSend(ctx, reqs[j]->t, cq);
        p->ack_call->StartCall();
        p->ack_call->Finish(&p->ack, &p->status, reinterpret_cast<void*>(j));
      }
    }, [&](size_t j, Pending* p) -> std::string {
      uint64_t got;
      if (raw_) {
        std::string a = frame::flatten(p->raw_resp);
        if (a.size() != wire::kAckSize) return "raw ack of wrong size";
        got = frame::get_le(a.data(), 8);
      } else {
        got = p->ack.bytes();
      }
      return got == reqs[j]->total ? "" : "ack counts " + std::to_string(got) +
                                              " bytes, sent " + std::to_string(reqs[j]->total);
    }, err);
  }

  // RecvTensor: target j sends the buffers wants[j] asks for, all targets at once.
  bool pull_all(const std::vector<const Request*>& wants, std::string* err) {
    return all(wants.size(), [&](size_t j, grpc::ClientContext* ctx, grpc::CompletionQueue* cq,
                                 Pending* p) {
      if (raw_) {
        p->raw = generic_[j]->PrepareUnaryCall(ctx, wire::kRawPull, wants[j]->bb, cq);
        p->raw->StartCall();
        p->raw->Finish(&p->raw_resp, &p->status, reinterpret_cast<void*>(j));
      } else {
        p->pull_call = stubs_[j]->PrepareAsyncPull(ctx, wants[j]->t, cq);
        p->pull_call->StartCall();
        p->pull_call->Finish(&p->tensors, &p->status, reinterpret_cast<void*>(j));
      }
    }, [&](size_t j, Pending* p) -> std::string {
      uint64_t got = 0;
      if (raw_) {
        frame::Header h;
        std::string e;
        if (!frame::parse(p->raw_resp, &h, &e)) return e;
        got = h.payload();
      } else {
        got = payload(p->tensors);
      }
      return got == wants[j]->total ? "" : "pulled " + std::to_string(got) +
                                               " bytes, wanted " + std::to_string(wants[j]->total);
    }, err);
  }

  size_t size() const { return stubs_.size(); }

 private:
  struct Pending {
    grpc::ClientContext ctx;
    Status status;
    std::unique_ptr<grpc::ClientAsyncResponseReader<ByteBuffer>> raw;
    ByteBuffer raw_resp;
    std::unique_ptr<grpc::ClientAsyncResponseReader<pb::Ack>> ack_call;
    pb::Ack ack;
    std::unique_ptr<grpc::ClientAsyncResponseReader<pb::Tensors>> pull_call;
    pb::Tensors tensors;
  };

  template <class Start, class Check>
  bool all(size_t n, Start start, Check check, std::string* err) {
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<Pending>> pending;
    for (size_t j = 0; j < n; ++j) {
      pending.push_back(std::make_unique<Pending>());
      start(j, &pending[j]->ctx, &cq, pending[j].get());
    }
    bool ok_all = true;
    for (size_t k = 0; k < n; ++k) {
      void* tag;
      bool ok;
      if (!cq.Next(&tag, &ok)) return bad("completion queue shut down", err);
      size_t j = reinterpret_cast<size_t>(tag);
      Pending* p = pending[j].get();
      if (!p->status.ok()) {
        ok_all = fail(p->status, err);
      } else if (auto e = check(j, p); !e.empty()) {
        ok_all = bad(e, err);
      }
    }
    cq.Shutdown();
    void* tag;
    bool ok;
    while (cq.Next(&tag, &ok)) {
    }
    return ok_all;
  }

  static bool fail(const Status& s, std::string* err) {
    *err = status_text(s);
    return false;
  }
  static bool bad(const std::string& what, std::string* err) {
    *err = what;
    return false;
  }

  bool raw_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<pb::TensorTransfer::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::GenericStub>> generic_;
  grpc::internal::RpcMethod raw_echo_{wire::kRawEcho, grpc::internal::RpcMethod::NORMAL_RPC};
};

bench::Result run_one(Client* c, const std::string& benchmark, const Layout& l,
                      const bench::Settings& s, int segment) {
  bench::Result r;
  r.benchmark = benchmark;
  r.name = l.name;
  r.layout = l.sizes;
  Request full = payload_request(l);
  size_t p = c->size();
  std::vector<const Request*> every(p, &full);
  std::vector<Request> pushes, pulls;  // mimic: one shard per server
  for (const auto& shard : shards(l, p)) {
    pushes.push_back(payload_request(shard));
    pulls.push_back(want_request(shard));
  }
  std::vector<const Request*> push_to, pull_from;
  for (size_t j = 0; j < p; ++j) {
    push_to.push_back(&pushes[j]);
    pull_from.push_back(&pulls[j]);
  }
  double mb = static_cast<double>(l.total()) / 1e6;
  std::string err;
  bool ok = true;
  if (benchmark == "latency") {
    ok = c->echo(full.t, full.bb, true, &err);  // validated outside the timing, before and after
    ok = ok && bench::run_batches(
        [&](long long n) {
          for (long long i = 0; i < n; ++i)
            if (!c->echo(full.t, full.bb, false, &err)) return false;
          return true;
        },
        [](double sec, long long n) { return sec / n * 1e6; }, s, &r);
    ok = ok && c->echo(full.t, full.bb, true, &err);
  } else if (benchmark == "bandwidth") {
    std::vector<const Request*> one{&full};
    ok = bench::run_batches(
        [&](long long n) {
          for (long long i = 0; i < n; ++i)
            if (!c->send_all(one, &err)) return false;
          return true;
        },
        [mb](double sec, long long n) { return mb * n / sec; }, s, &r);
  } else if (benchmark == "ps") {
    // every worker calls every server; a step is one Send to each of them, all in flight
    ok = bench::run_synced([&] { return c->send_all(every, &err); },
                           [p](double sec, long long n) { return p * n / sec; }, s, &r,
                           segment);
  } else if (benchmark == "mimic") {
    // a training step: pull the variables from the PS holding them, then push the gradients
    ok = bench::run_synced(
        [&] { return c->pull_all(pull_from, &err) && c->send_all(push_to, &err); },
        [](double sec, long long n) { return sec / n * 1e3; }, s, &r, segment);
  } else {
    return r;  // empty: the caller reports the unknown name
  }
  if (!ok) r.errors.push_back(l.name + ": " + err);
  return r;
}

}  // namespace

int client(const bench::Args& a) {
  std::string benchmark = a.get("benchmark", "latency");
  bool raw = a.get("mode", wire::kModeSerialized) == wire::kModeRaw;
  std::vector<std::string> targets = bench::split(a.get("targets", a.get("target")), ',');
  bench::Settings s = a.settings();
  std::vector<Layout> layouts;
  for (const auto& spec : a.all("layout")) {
    auto p = bench::parse_layout(spec);
    for (auto sz : p.second) {
      if (sz > wire::kPool) {
        std::fprintf(stderr, "hpcc_grpc_peer: buffer of %llu bytes > pool\n",
                     static_cast<unsigned long long>(sz));
        return 2;
      }
    }
    layouts.push_back({p.first, p.second});
  }
  std::unique_ptr<Client> c;
  try {
    c = std::make_unique<Client>(targets, raw);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hpcc_grpc_peer: %s\n", e.what());
    return 3;
  }
  std::vector<bench::Result> results;
  int segment = 0;
  for (const auto& bm : bench::split(benchmark, ',')) {
    for (const auto& l : layouts) {
      results.push_back(run_one(c.get(), bm, l, s, segment++));
      if (results.back().samples.empty() && results.back().errors.empty()) {
        std::fprintf(stderr, "hpcc_grpc_peer: unknown benchmark %s\n", bm.c_str());
        return 2;
      }
    }
  }
  std::map<std::string, std::string> fields{
      {"peer", "\"native\""},
      {"benchmark", bench::quote(benchmark)},
      {"mode", bench::quote(raw ? wire::kModeRaw : wire::kModeSerialized)},
      {"grpc_version", bench::quote(grpc::Version())},
      {"targets", std::to_string(targets.size())},
      {"slowdown", std::to_string(s.slowdown)}};
  bench::print_doc(fields, results);
  return 0;
}

}  // namespace peer
