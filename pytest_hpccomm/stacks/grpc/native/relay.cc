// The native peer's relay: gRPC calls made by this process, on behalf of the conformance suite
// in pytest. A runtime (an RDMA gRPC build, or a preload such as rsocket) lives in the native
// process; grpcio's bundled core in pytest cannot run inside it. So the suite encodes each
// request itself, the relay makes the call with its gRPC and answers with what came back.
// The relay knows no protobuf: method names and messages are bytes (a GenericStub).
//
// One call at a time, length-prefixed little-endian records on stdin/stdout (relay.py is the
// other side and holds the one definition of the layout):
//   call:   u32 kind (1 unary, 2 stream) | str method | u64 timeout_us | u64 cancel_us
//           | u32 gzip | u32 n_md, (str key, str value) * n_md | u32 n, str message * n
//   answer: i32 status code | str details | u64 elapsed_us | u32 n_initial, (str, str) * n
//           | u32 n_trailing, (str, str) * n | u32 n, str message * n
// where str is u64 length + bytes. timeout_us 0: no deadline. cancel_us (0: never): a unary
// call is cancelled that long after it started; a stream, that long after its first answer,
// its request side still open. A stream writes its n messages, closes its side and reads
// every answer: any streaming shape (client, server or bidi: the wire does not tell them
// apart; the caller checks the count). A ready record (kind 3, u64 timeout_us) answers status
// 0 when the channel connected in time, 14 (UNAVAILABLE) otherwise; EOF on stdin ends it.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bench.h"
#include "frame.h"
#include "peer.h"
#include "startup.h"

namespace peer {

namespace {

using Clock = std::chrono::steady_clock;
using Wall = std::chrono::system_clock;  // what CompletionQueue::AsyncNext takes

constexpr uint32_t kUnary = 1, kStream = 2, kReady = 3;

bool read_exact(void* p, size_t n) { return n == 0 || std::fread(p, 1, n, stdin) == n; }

bool get_u32(uint32_t* v) {
  unsigned char b[4];
  if (!read_exact(b, 4)) return false;
  *v = static_cast<uint32_t>(frame::get_le(reinterpret_cast<char*>(b), 4));
  return true;
}

bool get_u64(uint64_t* v) {
  unsigned char b[8];
  if (!read_exact(b, 8)) return false;
  *v = frame::get_le(reinterpret_cast<char*>(b), 8);
  return true;
}

bool get_str(std::string* s) {
  uint64_t n;
  if (!get_u64(&n)) return false;
  s->resize(n);
  return read_exact(s->data(), n);
}

struct Call {
  uint32_t kind = 0;
  std::string method;
  uint64_t timeout_us = 0, cancel_us = 0;
  uint32_t gzip = 0;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<std::string> messages;
};

bool read_call(Call* c) {
  if (!get_u32(&c->kind)) return false;
  if (c->kind == kReady) return get_u64(&c->timeout_us);
  uint32_t n;
  if (!get_str(&c->method) || !get_u64(&c->timeout_us) || !get_u64(&c->cancel_us) ||
      !get_u32(&c->gzip) || !get_u32(&n))
    return false;
  c->metadata.resize(n);
  for (auto& kv : c->metadata)
    if (!get_str(&kv.first) || !get_str(&kv.second)) return false;
  if (!get_u32(&n)) return false;
  c->messages.resize(n);
  for (auto& m : c->messages)
    if (!get_str(&m)) return false;
  return true;
}

struct Answer {
  int32_t code = 0;
  std::string details;
  uint64_t elapsed_us = 0;
  std::vector<std::pair<std::string, std::string>> initial, trailing;
  std::vector<std::string> messages;
};

void write_answer(const Answer& a) {
  std::string out;
  frame::put_u32(&out, static_cast<uint32_t>(a.code));
  auto str = [&out](const std::string& s) {
    frame::put_u64(&out, s.size());
    out += s;
  };
  str(a.details);
  frame::put_u64(&out, a.elapsed_us);
  for (const auto* md : {&a.initial, &a.trailing}) {
    frame::put_u32(&out, static_cast<uint32_t>(md->size()));
    for (const auto& kv : *md) {
      str(kv.first);
      str(kv.second);
    }
  }
  frame::put_u32(&out, static_cast<uint32_t>(a.messages.size()));
  for (const auto& m : a.messages) str(m);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
}

grpc::ByteBuffer bytes_of(const std::string& s) {
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

void prepare(const Call& c, grpc::ClientContext* ctx) {
  if (c.timeout_us)
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::microseconds(c.timeout_us));
  if (c.gzip) ctx->set_compression_algorithm(GRPC_COMPRESS_GZIP);
  for (const auto& kv : c.metadata) ctx->AddMetadata(kv.first, kv.second);
}

using Received = std::multimap<grpc::string_ref, grpc::string_ref>;

void copy(const Received& from, std::vector<std::pair<std::string, std::string>>* to) {
  for (const auto& kv : from)
    to->emplace_back(std::string(kv.first.data(), kv.first.size()),
                     std::string(kv.second.data(), kv.second.size()));
}

// After the call's Finish completed: its initial metadata was asked for by then (an empty
// map when none came), so GetServerInitialMetadata's assertion holds.
void finish(const grpc::ClientContext& ctx, const grpc::Status& s, Clock::time_point t0,
            Answer* a) {
  a->elapsed_us = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
  a->code = s.error_code();
  a->details = s.error_message();
  copy(ctx.GetServerInitialMetadata(), &a->initial);
  copy(ctx.GetServerTrailingMetadata(), &a->trailing);
}

// The completion of `tag`, or the cancellation of the call when `cancel_at` passes first.
bool await(grpc::CompletionQueue* cq, void* tag, grpc::ClientContext* ctx,
           Wall::time_point cancel_at, bool cancel) {
  for (;;) {
    void* got;
    bool ok;
    auto status = cancel ? cq->AsyncNext(&got, &ok, cancel_at) : (cq->Next(&got, &ok)
                                                                  ? grpc::CompletionQueue::GOT_EVENT
                                                                  : grpc::CompletionQueue::SHUTDOWN);
    if (status == grpc::CompletionQueue::TIMEOUT) {
      ctx->TryCancel();
      cancel = false;
      continue;
    }
    if (status != grpc::CompletionQueue::GOT_EVENT) return false;
    if (got == tag) return ok;
  }
}

void drain(grpc::CompletionQueue* cq) {
  cq->Shutdown();
  void* tag;
  bool ok;
  while (cq->Next(&tag, &ok)) {
  }
}

Answer unary(grpc::GenericStub* stub, const Call& c) {
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  prepare(c, &ctx);
  Answer a;
  grpc::ByteBuffer resp;
  grpc::Status s;
  auto t0 = Clock::now();
  auto call = stub->PrepareUnaryCall(&ctx, c.method, bytes_of(c.messages.at(0)), &cq);
  call->StartCall();
  call->Finish(&resp, &s, reinterpret_cast<void*>(1));
  await(&cq, reinterpret_cast<void*>(1), &ctx, Wall::now() + std::chrono::microseconds(c.cancel_us),
        c.cancel_us != 0);
  finish(ctx, s, t0, &a);
  if (s.ok()) a.messages.push_back(frame::flatten(resp));
  drain(&cq);
  return a;
}

Answer stream(grpc::GenericStub* stub, const Call& c) {
  grpc::ClientContext ctx;
  grpc::CompletionQueue cq;
  prepare(c, &ctx);
  Answer a;
  auto t0 = Clock::now();
  auto call = stub->PrepareCall(&ctx, c.method, &cq);
  void* const tag = reinterpret_cast<void*>(1);
  auto never = Wall::time_point::max();
  call->StartCall(tag);
  bool up = await(&cq, tag, &ctx, never, false);
  for (const auto& m : c.messages) {
    if (!up) break;
    call->Write(bytes_of(m), tag);
    up = await(&cq, tag, &ctx, never, false);
  }
  if (up && !c.cancel_us) {
    call->WritesDone(tag);
    await(&cq, tag, &ctx, never, false);
  }
  Wall::time_point cancel_at = never;
  for (;;) {
    grpc::ByteBuffer resp;
    call->Read(&resp, tag);
    if (!await(&cq, tag, &ctx, cancel_at, cancel_at != never)) break;
    a.messages.push_back(frame::flatten(resp));
    if (c.cancel_us && cancel_at == never)
      cancel_at = Wall::now() + std::chrono::microseconds(c.cancel_us);
  }
  grpc::Status s;
  call->Finish(&s, tag);
  await(&cq, tag, &ctx, never, false);
  finish(ctx, s, t0, &a);
  drain(&cq);
  return a;
}

}  // namespace

int relay(const bench::Args& a) {
  std::string target = a.get("target");
  std::string ca = a.get("ca");
  grpc::ChannelArguments args;  // no message size caps, as grpcio's TensorClient
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  if (a.get("gzip") == "1") args.SetCompressionAlgorithm(GRPC_COMPRESS_GZIP);
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!ca.empty()) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = startup::slurp(ca);
    creds = grpc::SslCredentials(o);
  }
  auto channel = grpc::CreateCustomChannel(target, creds, args);
  grpc::GenericStub stub(channel);
  Call c;
  while (read_call(&c)) {
    Answer ans;
    if (c.kind == kReady) {
      bool up = channel->WaitForConnected(std::chrono::system_clock::now() +
                                          std::chrono::microseconds(c.timeout_us));
      ans.code = up ? 0 : grpc::StatusCode::UNAVAILABLE;
    } else if (c.kind == kUnary && c.messages.size() == 1) {
      ans = unary(&stub, c);
    } else if (c.kind == kStream) {
      ans = stream(&stub, c);
    } else {
      std::fprintf(stderr, "hpcc_grpc_peer relay: malformed call record (kind %u)\n", c.kind);
      return 2;
    }
    write_answer(ans);
    c = Call();
  }
  return 0;
}

}  // namespace peer
