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

// Whether s is UTF-8 (no overlong forms, surrogates or code points past U+10FFFF), as a
// status message must be: the Python peers refuse the same messages.
bool is_utf8(const std::string& s) {
  static const uint32_t kLeast[] = {0, 0, 0x80, 0x800, 0x10000};  // no overlong forms
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : c >> 5 == 0x6 ? 2 : c >> 4 == 0xe ? 3 : c >> 3 == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x3fu >> (len - 1));
    for (size_t k = 1; k < len; ++k) {
      auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xc0) != 0x80) return false;
      cp = cp << 6 | (d & 0x3f);
    }
    if (cp < kLeast[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

// The status wire::kStatus asks for (a decimal code 1..16), its message kStatusMessage's.
Status asked_status(const std::string& code, const std::string& message) {
  bool digits = !code.empty() && code.size() <= 2 &&
                code.find_first_not_of("0123456789") == std::string::npos;
  int c = digits ? std::atoi(code.c_str()) : 0;
  if (c < 1 || c > 16 || !is_utf8(message))
    return Status(StatusCode::INVALID_ARGUMENT, std::string(wire::kStatus) +
                                                    " must be a status code 1..16 and " +
                                                    wire::kStatusMessage + " UTF-8");
  return Status(static_cast<StatusCode>(c), message);
}

// What a data method's request metadata asks (wire.py), before the method answers: x-hpcc-*
// comes back as trailing metadata and x-hpcc-initial-* as initial metadata; x-hpcc-compress:
// gzip compresses the response(s); x-hpcc-status ends the call with the status returned.
Status reflect(ServerContext* ctx) {
  bool asked = false;
  std::string code, message;
  for (const auto& kv : ctx->client_metadata()) {
    std::string key(kv.first.data(), kv.first.size());
    if (key.rfind(wire::kMetaPrefix, 0) != 0) continue;
    std::string value(kv.second.data(), kv.second.size());
    if (key == wire::kCompress && value == "gzip")
      ctx->set_compression_algorithm(GRPC_COMPRESS_GZIP);
    if (key.rfind(wire::kEchoInitial, 0) == 0)
      ctx->AddInitialMetadata(key, value);
    else
      ctx->AddTrailingMetadata(key, value);
    if (key == wire::kStatus) asked = true, code = value;
    if (key == wire::kStatusMessage) message = value;
  }
  return asked ? asked_status(code, message) : Status::OK;
}

class TensorService final : public pb::TensorTransfer::Service {
 public:
  explicit TensorService(Shared* s) : s_(s) {}

  Status Echo(ServerContext* ctx, const pb::Tensors* req, pb::Tensors* resp) override {
    count(*req);
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    *resp = *req;
    if (s_->drop_last && resp->buffers_size() > 0) resp->mutable_buffers()->RemoveLast();
    return Status::OK;
  }

  Status Send(ServerContext* ctx, const pb::Tensors* req, pb::Ack* ack) override {
    count(*req);
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    ack->set_bytes(payload(*req));
    ack->set_buffers(req->buffers_size());
    ack->set_seq(req->seq());
    return Status::OK;
  }

  Status Pull(ServerContext* ctx, const pb::Tensors* req, pb::Tensors* resp) override {
    s_->rpcs++;
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
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
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    pb::Tensors msg;
    while (stream->Read(&msg)) {
      count(msg);
      if (s_->drop_last && msg.buffers_size() > 0) msg.mutable_buffers()->RemoveLast();
      if (!stream->Write(msg)) break;
    }
    return Status::OK;
  }

  // Client streaming: one answer for every message (bytes, buffers; seq: how many messages).
  Status SendStream(ServerContext* ctx, grpc::ServerReader<pb::Tensors>* reader,
                    pb::Ack* ack) override {
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    pb::Tensors msg;
    uint64_t bytes = 0, buffers = 0, messages = 0;
    while (reader->Read(&msg)) {
      bytes += payload(msg);
      buffers += msg.buffers_size();
      ++messages;
    }
    s_->rpcs++;  // one call, all its bytes
    s_->bytes += bytes;
    ack->set_bytes(bytes);
    ack->set_buffers(buffers);
    ack->set_seq(messages);
    return Status::OK;
  }

  // Server streaming: message i (seq i) is one buffer, tensor i of the pool at size want[i].
  Status PullStream(ServerContext* ctx, const pb::Tensors* req,
                    grpc::ServerWriter<pb::Tensors>* writer) override {
    s_->rpcs++;
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    for (uint64_t n : req->want())
      if (n > wire::kPool) return Status(StatusCode::INVALID_ARGUMENT, "buffer too large");
    for (int i = 0; i < req->want_size(); ++i) {
      pb::Tensors msg;
      msg.add_buffers(bench::buffer_at(i, req->want(i)), req->want(i));
      msg.set_seq(i);
      if (!writer->Write(msg)) break;
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
    using Reading = grpc::internal::ClientStreamingHandler<RawService, ByteBuffer, ByteBuffer>;
    using Writing = grpc::internal::ServerStreamingHandler<RawService, ByteBuffer, ByteBuffer>;
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
    AddMethod(new RpcServiceMethod(
        wire::kRawSendStream, RpcMethod::CLIENT_STREAMING,
        new Reading([](RawService* self, ServerContext* c, grpc::ServerReader<ByteBuffer>* r,
                       ByteBuffer* resp) { return self->SendStream(c, r, resp); },
                    this)));
    AddMethod(new RpcServiceMethod(
        wire::kRawPullStream, RpcMethod::SERVER_STREAMING,
        new Writing([](RawService* self, ServerContext* c, const ByteBuffer* q,
                       grpc::ServerWriter<ByteBuffer>* w) { return self->PullStream(c, q, w); },
                    this)));
  }

  Status Echo(ServerContext* ctx, const ByteBuffer* req, ByteBuffer* resp) {
    frame::Header h;
    Status st = check(*req, &h);
    if (!st.ok()) return st;
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    *resp = s_->drop_last ? drop_last(*req, h) : *req;  // ByteBuffer copy: refcounts, no bytes
    return Status::OK;
  }

  Status Send(ServerContext* ctx, const ByteBuffer* req, ByteBuffer* resp) {
    frame::Header h;
    Status st = check(*req, &h);
    if (!st.ok()) return st;
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    *resp = frame::ack(h.payload(), h.count, h.seq);
    return Status::OK;
  }

  Status Pull(ServerContext* ctx, const ByteBuffer* req, ByteBuffer* resp) {
    frame::Header h;
    std::string err;
    if (!frame::parse(*req, &h, &err)) return Status(StatusCode::INVALID_ARGUMENT, err);
    s_->rpcs++;
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    frame::Iov iov;
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      if (h.lengths[i] > wire::kPool) return Status(StatusCode::INVALID_ARGUMENT, "too large");
      iov.emplace_back(bench::buffer_at(i, h.lengths[i]), h.lengths[i]);
    }
    *resp = frame::make(0, h.seq, iov);  // slices of the static pool: zero copy
    return Status::OK;
  }

  Status EchoStream(ServerContext* ctx, grpc::ServerReaderWriter<ByteBuffer, ByteBuffer>* st) {
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    ByteBuffer msg;
    while (st->Read(&msg)) {
      frame::Header h;
      Status bad = check(msg, &h);
      if (!bad.ok()) return bad;
      if (!st->Write(s_->drop_last ? drop_last(msg, h) : msg)) break;
    }
    return Status::OK;
  }

  Status SendStream(ServerContext* ctx, grpc::ServerReader<ByteBuffer>* reader, ByteBuffer* resp) {
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    ByteBuffer msg;
    uint64_t bytes = 0, buffers = 0, messages = 0;
    while (reader->Read(&msg)) {
      frame::Header h;
      std::string err;
      if (!frame::parse(msg, &h, &err)) return Status(StatusCode::INVALID_ARGUMENT, err);
      if (!(h.flags & wire::kWant)) bytes += h.payload(), buffers += h.count;
      ++messages;
    }
    s_->rpcs++;  // one call, all its bytes
    s_->bytes += bytes;
    *resp = frame::ack(bytes, buffers, messages);
    return Status::OK;
  }

  Status PullStream(ServerContext* ctx, const ByteBuffer* req, grpc::ServerWriter<ByteBuffer>* w) {
    frame::Header h;
    std::string err;
    if (!frame::parse(*req, &h, &err)) return Status(StatusCode::INVALID_ARGUMENT, err);
    s_->rpcs++;
    if (Status asked = reflect(ctx); !asked.ok()) return asked;
    for (uint64_t n : h.lengths)
      if (n > wire::kPool) return Status(StatusCode::INVALID_ARGUMENT, "too large");
    for (size_t i = 0; i < h.lengths.size(); ++i) {
      frame::Iov one{{bench::buffer_at(i, h.lengths[i]), h.lengths[i]}};
      if (!w->Write(frame::make(0, i, one))) break;  // slices of the static pool: zero copy
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
