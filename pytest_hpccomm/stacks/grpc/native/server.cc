// The native peer's server: both modes on one port. TensorTransfer (protobuf, generated code)
// and RawTensorTransfer (raw frames, ByteBuffer in and out, no protobuf).
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include "bench.h"
#include "frame.h"
#include "peer.h"
#include "startup.h"
#include "tensor.grpc.pb.h"
#include "wire.h"

namespace peer {

using grpc::ByteBuffer;
using grpc::ServerContext;
using grpc::Status;
using grpc::StatusCode;

namespace {

struct Shared {
  std::atomic<uint64_t> rpcs{0}, bytes{0}, cancelled{0};
  std::mutex mu;  // guards cancelled_seqs
  std::deque<uint64_t> cancelled_seqs;  // the latest Delay calls that saw their cancellation
  bool drop_last = false;  // planted bug (tests only): the echo loses its last buffer
};

// Metadata round trip: x-hpcc-* comes back as trailing metadata; x-hpcc-compress: gzip asks
// for a compressed response (the compression property).
void reflect(ServerContext* ctx) {
  for (const auto& kv : ctx->client_metadata()) {
    std::string key(kv.first.data(), kv.first.size());
    if (key.rfind(wire::kMetaPrefix, 0) != 0) continue;
    std::string value(kv.second.data(), kv.second.size());
    if (key == wire::kCompress && value == "gzip")
      ctx->set_compression_algorithm(GRPC_COMPRESS_GZIP);
    ctx->AddTrailingMetadata(key, value);
  }
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
      if (n > wire::kPool) return Status(StatusCode::INVALID_ARGUMENT, "buffer too large");
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
        std::lock_guard<std::mutex> lock(s_->mu);
        s_->cancelled_seqs.push_back(req->seq());
        if (s_->cancelled_seqs.size() > wire::kCancelledSeqs) s_->cancelled_seqs.pop_front();
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
    {
      std::lock_guard<std::mutex> lock(s_->mu);
      for (uint64_t seq : s_->cancelled_seqs) st->add_cancelled_seqs(seq);
    }
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
    // static arrays of wire.h: RpcServiceMethod keeps the name's pointer
    for (auto [name, fn] : {std::pair<const char*, Fn>{wire::kRawEcho, &RawService::Echo},
                            {wire::kRawSend, &RawService::Send},
                            {wire::kRawPull, &RawService::Pull}}) {
      AddMethod(new RpcServiceMethod(
          name, RpcMethod::NORMAL_RPC,
          new Unary([fn](RawService* self, ServerContext* c, const ByteBuffer* q,
                         ByteBuffer* r) { return (self->*fn)(c, q, r); },
                    this)));
    }
    AddMethod(new RpcServiceMethod(
        wire::kRawEchoStream, RpcMethod::BIDI_STREAMING,
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
      if (h.lengths[i] > wire::kPool) return Status(StatusCode::INVALID_ARGUMENT, "too large");
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
    size_t head = wire::kHeaderSize + 8 * h.count;
    frame::Header out = h;
    out.lengths.pop_back();
    std::string body = all.substr(head, h.payload() - h.lengths.back());
    grpc::Slice s(frame::encode_header(out) + body);
    return ByteBuffer(&s, 1);
  }

  Shared* s_;
};

}  // namespace

int serve(const bench::Args& a) {
  Shared shared;
  shared.drop_last = a.has("drop-last-buffer");
  TensorService tensor(&shared);
  RawService raw(&shared);
  int limit = std::atoi(a.get("max-message", std::to_string(wire::kMaxMessage)).c_str());
  grpc::ServerBuilder b;
  int port = 0, tls_port = 0;
  startup::listen(&b, a.get("bind", startup::kDefaultBind), &port);
  if (a.has("tls-bind"))
    startup::listen_tls(&b, a.get("tls-bind"), a.get("tls-cert"), a.get("tls-key"), &tls_port);
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
  startup::serve_for(server.get(), std::atof(a.get("lifetime", "3600").c_str()));
  return 0;
}

}  // namespace peer
