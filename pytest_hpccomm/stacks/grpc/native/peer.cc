// Native gRPC peer: the tensor-transfer server and the benchmark client, in C++ against the gRPC
// installation the project was built with. Runs alone:
//   hpcc_grpc_peer server --bind 127.0.0.1:0 [--tls-bind ADDR --tls-cert F --tls-key F]
//   hpcc_grpc_peer client --target HOST:PORT --benchmark latency --mode raw --layout a=10,10
// Python's per-RPC cost (~500 us here) hides the transport; this peer is what latency verdicts
// should use. The server answers both modes: TensorTransfer (protobuf, generated code) and
// RawTensorTransfer (raw frames, ByteBuffer in and out, no protobuf).
#include <grpcpp/grpcpp.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench.h"
#include "frame.h"
#include "tensor.grpc.pb.h"

namespace pb = hpccomm::grpcbench;
using grpc::ByteBuffer;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

namespace {

#define RAW_SERVICE "/hpccomm.grpcbench.RawTensorTransfer/"
constexpr const char* kRawEcho = RAW_SERVICE "Echo";
constexpr const char* kRawSend = RAW_SERVICE "Send";
constexpr const char* kRawPull = RAW_SERVICE "Pull";
constexpr const char* kRawStream = RAW_SERVICE "EchoStream";
constexpr char kMetaPrefix[] = "x-hpcc-";

struct Shared {
  std::atomic<uint64_t> rpcs{0}, bytes{0}, cancelled{0};
  bool drop_last = false;  // planted bug (tests only): the echo loses its last buffer
};

// Metadata round trip: x-hpcc-* comes back as trailing metadata; x-hpcc-compress: gzip asks
// for a compressed response (the compression property).
void reflect(ServerContext* ctx) {
  for (const auto& kv : ctx->client_metadata()) {
    std::string key(kv.first.data(), kv.first.size());
    if (key.rfind(kMetaPrefix, 0) != 0) continue;
    std::string value(kv.second.data(), kv.second.size());
    if (key == "x-hpcc-compress" && value == "gzip")
      ctx->set_compression_algorithm(GRPC_COMPRESS_GZIP);
    ctx->AddTrailingMetadata(key, value);
  }
}

uint64_t payload(const pb::Tensors& t) {
  uint64_t n = 0;
  for (const auto& b : t.buffers()) n += b.size();
  return n;
}

class TensorService final : public pb::TensorTransfer::Service {
 public:
  explicit TensorService(Shared* s) : s_(s) {}

  Status Echo(ServerContext* ctx, const pb::Tensors* req, pb::Tensors* resp) override {
    count(*req);
    reflect(ctx);
    *resp = *req;
    if (s_->drop_last && resp->buffers_size() > 0) resp->mutable_buffers()->RemoveLast();
    return Status::OK;
  }

  Status Send(ServerContext* ctx, const pb::Tensors* req, pb::Ack* ack) override {
    count(*req);
    reflect(ctx);
    ack->set_bytes(payload(*req));
    ack->set_buffers(req->buffers_size());
    ack->set_seq(req->seq());
    return Status::OK;
  }

  Status Pull(ServerContext* ctx, const pb::Tensors* req, pb::Tensors* resp) override {
    s_->rpcs++;
    reflect(ctx);
    for (int i = 0; i < req->want_size(); ++i) {
      uint64_t n = req->want(i);
      if (n > bench::kPool) return Status(StatusCode::INVALID_ARGUMENT, "buffer too large");
      resp->add_buffers(bench::buffer_at(i, n), n);
    }
    resp->set_seq(req->seq());
    return Status::OK;
  }

  Status EchoStream(ServerContext* ctx,
                    grpc::ServerReaderWriter<pb::Tensors, pb::Tensors>* stream) override {
    reflect(ctx);
    pb::Tensors msg;
    while (stream->Read(&msg)) {
      count(msg);
      if (s_->drop_last && msg.buffers_size() > 0) msg.mutable_buffers()->RemoveLast();
      if (!stream->Write(msg)) break;
    }
    return Status::OK;
  }

  Status Delay(ServerContext* ctx, const pb::Tensors* req, pb::Ack* ack) override {
    s_->rpcs++;
    auto until = bench::Clock::now() + std::chrono::milliseconds(req->delay_ms());
    while (bench::Clock::now() < until) {
      if (ctx->IsCancelled()) {  // deadline passed or the client cancelled
        s_->cancelled++;
        return Status(StatusCode::CANCELLED, "cancelled while delaying");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ack->set_seq(req->seq());
    return Status::OK;
  }

  Status GetStats(ServerContext*, const pb::StatsRequest*, pb::Stats* st) override {
    st->set_rpcs(s_->rpcs);
    st->set_bytes(s_->bytes);
    st->set_cancelled(s_->cancelled);
    st->set_peer("native");
    st->set_grpc_version(grpc::Version());
    return Status::OK;
  }

 private:
  void count(const pb::Tensors& t) {
    s_->rpcs++;
    s_->bytes += payload(t);
  }
  Shared* s_;
};

// The non-serialized service. The sync API has no generic service, so the methods are
// registered the way generated code registers them, with ByteBuffer as the message type.
class RawService final : public grpc::Service {
 public:
  explicit RawService(Shared* s) : s_(s) {
    using grpc::internal::RpcMethod;
    using grpc::internal::RpcServiceMethod;
    using Unary = grpc::internal::RpcMethodHandler<RawService, ByteBuffer, ByteBuffer>;
    using Bidi = grpc::internal::BidiStreamingHandler<RawService, ByteBuffer, ByteBuffer>;
    using Fn = Status (RawService::*)(ServerContext*, const ByteBuffer*, ByteBuffer*);
    // string literals: RpcServiceMethod keeps the name's pointer
    for (auto [name, fn] : {std::pair<const char*, Fn>{kRawEcho, &RawService::Echo},
                            {kRawSend, &RawService::Send}, {kRawPull, &RawService::Pull}}) {
      AddMethod(new RpcServiceMethod(
          name, RpcMethod::NORMAL_RPC,
          new Unary([fn](RawService* self, ServerContext* c, const ByteBuffer* q,
                         ByteBuffer* r) { return (self->*fn)(c, q, r); },
                    this)));
    }
    AddMethod(new RpcServiceMethod(
        kRawStream, RpcMethod::BIDI_STREAMING,
        new Bidi([](RawService* self, ServerContext* c,
                    grpc::ServerReaderWriter<ByteBuffer, ByteBuffer>* st) {
          return self->EchoStream(c, st);
        }, this)));
  }

  Status Echo(ServerContext* ctx, const ByteBuffer* req, ByteBuffer* resp) {
    frame::Header h;
    Status st = check(*req, &h);
    if (!st.ok()) return st;
    reflect(ctx);
    *resp = s_->drop_last ? drop_last(*req, h) : *req;  // ByteBuffer copy: refcounts, no bytes
    return Status::OK;
  }

  Status Send(ServerContext* ctx, const ByteBuffer* req, ByteBuffer* resp) {
    frame::Header h;
    Status st = check(*req, &h);
    if (!st.ok()) return st;
    reflect(ctx);
    *resp = frame::ack(h.payload(), h.count, h.seq);
    return Status::OK;
  }

  Status Pull(ServerContext* ctx, const ByteBuffer* req, ByteBuffer* resp) {
    frame::Header h;
    std::string err;
    if (!frame::parse(*req, &h, &err)) return Status(StatusCode::INVALID_ARGUMENT, err);
    s_->rpcs++;
    reflect(ctx);
    frame::Iov iov;
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      if (h.lengths[i] > bench::kPool) return Status(StatusCode::INVALID_ARGUMENT, "too large");
      iov.emplace_back(bench::buffer_at(i, h.lengths[i]), h.lengths[i]);
    }
    *resp = frame::make(0, h.seq, iov);  // slices of the static pool: zero copy
    return Status::OK;
  }

  Status EchoStream(ServerContext* ctx, grpc::ServerReaderWriter<ByteBuffer, ByteBuffer>* st) {
    reflect(ctx);
    ByteBuffer msg;
    while (st->Read(&msg)) {
      frame::Header h;
      Status bad = check(msg, &h);
      if (!bad.ok()) return bad;
      if (!st->Write(s_->drop_last ? drop_last(msg, h) : msg)) break;
    }
    return Status::OK;
  }

 private:
  Status check(const ByteBuffer& bb, frame::Header* h) {
    std::string err;
    if (!frame::parse(bb, h, &err)) return Status(StatusCode::INVALID_ARGUMENT, err);
    s_->rpcs++;
    s_->bytes += h->payload();
    return Status::OK;
  }

  static ByteBuffer drop_last(const ByteBuffer& bb, const frame::Header& h) {
    if (h.count == 0) return bb;
    std::string all = frame::flatten(bb);
    size_t head = frame::kFixed + 8 * h.count;
    frame::Header out = h;
    out.lengths.pop_back();
    std::string body = all.substr(head, h.payload() - h.lengths.back());
    grpc::Slice s(frame::encode_header(out) + body);
    return ByteBuffer(&s, 1);
  }

  Shared* s_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int serve(const bench::Args& a) {
  Shared shared;
  shared.drop_last = a.has("drop-last-buffer");
  TensorService tensor(&shared);
  RawService raw(&shared);
  int limit = std::atoi(a.get("max-message", "16777216").c_str());
  grpc::ServerBuilder b;
  int port = 0, tls_port = 0;
  b.AddListeningPort(a.get("bind", "127.0.0.1:0"), grpc::InsecureServerCredentials(), &port);
  if (a.has("tls-bind")) {
    grpc::SslServerCredentialsOptions opts;
    opts.pem_key_cert_pairs.push_back({slurp(a.get("tls-key")), slurp(a.get("tls-cert"))});
    b.AddListeningPort(a.get("tls-bind"), grpc::SslServerCredentials(opts), &tls_port);
  }
  b.SetMaxReceiveMessageSize(limit);
  b.SetMaxSendMessageSize(-1);
  b.RegisterService(&tensor);
  b.RegisterService(&raw);
  auto server = b.BuildAndStart();
  if (!server || port == 0) {
    std::fprintf(stderr, "hpcc_grpc_peer: cannot listen on %s\n", a.get("bind").c_str());
    return 2;
  }
  std::ostringstream ready;
  ready << "{\"port\":" << port << ",\"tls_port\":" << tls_port << ",\"peer\":\"native\""
        << ",\"grpc_version\":" << bench::quote(grpc::Version()) << ",\"max_message\":" << limit
        << ",\"pid\":" << getpid() << "}";
  bench::ready_line(ready.str());
  // A session peer ends by SIGTERM from its job; --lifetime bounds it if nobody does.
  double lifetime = std::atof(a.get("lifetime", "3600").c_str());
  std::this_thread::sleep_for(std::chrono::duration<double>(lifetime));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  return 0;
}

// -- client ---------------------------------------------------------------------------------

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

std::shared_ptr<grpc::Channel> channel_to(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

std::string status_text(const Status& s) {
  return "grpc status " + std::to_string(s.error_code()) + ": " + s.error_message();
}

// One connection per target; every call of a PS/mimic step goes out before any is awaited.
class Client {
 public:
  Client(const std::vector<std::string>& targets, bool raw) : raw_(raw) {
    for (const auto& t : targets) {
      auto ch = channel_to(t);
      if (!ch->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20)))
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
        p->raw = generic_[j]->PrepareUnaryCall(ctx, kRawSend, reqs[j]->bb, cq);
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
        if (a.size() != frame::kAckSize) return "raw ack of wrong size";
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
        p->raw = generic_[j]->PrepareUnaryCall(ctx, kRawPull, wants[j]->bb, cq);
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
  grpc::internal::RpcMethod raw_echo_{kRawEcho, grpc::internal::RpcMethod::NORMAL_RPC};
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

int client(const bench::Args& a) {
  std::string benchmark = a.get("benchmark", "latency");
  bool raw = a.get("mode", "serialized") == "raw";
  std::vector<std::string> targets = bench::split(a.get("targets", a.get("target")), ',');
  bench::Settings s = a.settings();
  std::vector<Layout> layouts;
  for (const auto& spec : a.all("layout")) {
    auto p = bench::parse_layout(spec);
    for (auto sz : p.second) {
      if (sz > bench::kPool) {
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
      {"mode", bench::quote(raw ? "raw" : "serialized")},
      {"grpc_version", bench::quote(grpc::Version())},
      {"targets", std::to_string(targets.size())},
      {"slowdown", std::to_string(s.slowdown)}};
  bench::print_doc(fields, results);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  bench::Args a(argc, argv, 2);
  if (cmd == "server") return serve(a);
  if (cmd == "client") return client(a);
  if (cmd == "version") {
    std::printf("%s\n", grpc::Version().c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: %s server|client|version [--options]\n", argv[0]);
  return 2;
}
