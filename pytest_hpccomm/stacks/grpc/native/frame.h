// Raw frames of the non-serialized mode (no protobuf): see tensor.proto for the layout.
// A frame is sent as one ByteBuffer of slices: a header slice, then one slice per buffer that
// points at the caller's memory (STATIC_SLICE: no copy), as TF-gRPC-Bench's iovec sends.
#pragma once

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/slice.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace frame {

constexpr uint32_t kWant = 1;  // lengths are sizes wanted; no data follows
constexpr size_t kFixed = 16;  // count, flags, seq
constexpr size_t kAckSize = 24;

struct Header {
  uint32_t count = 0;
  uint32_t flags = 0;
  uint64_t seq = 0;
  std::vector<uint64_t> lengths;
  uint64_t payload() const {
    uint64_t n = 0;
    for (auto l : lengths) n += l;
    return n;
  }
};

using Iov = std::vector<std::pair<const char*, size_t>>;

inline void put_u64(std::string* s, uint64_t v) {
  for (int i = 0; i < 8; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline void put_u32(std::string* s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

inline uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

inline std::string encode_header(const Header& h) {
  std::string s;
  s.reserve(kFixed + 8 * h.lengths.size());
  put_u32(&s, static_cast<uint32_t>(h.lengths.size()));
  put_u32(&s, h.flags);
  put_u64(&s, h.seq);
  for (auto l : h.lengths) put_u64(&s, l);
  return s;
}

// The whole buffer as one string (validation and the planted bug only: it copies).
inline std::string flatten(const grpc::ByteBuffer& bb) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!bb.Dump(&slices).ok()) return out;
  out.reserve(bb.Length());
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// The first n bytes, which may span slices.
inline bool prefix(const grpc::ByteBuffer& bb, size_t n, std::string* out) {
  std::vector<grpc::Slice> slices;
  if (bb.Length() < n || !bb.Dump(&slices).ok()) return false;
  out->clear();
  for (const auto& s : slices) {
    if (out->size() >= n) break;
    size_t take = std::min(n - out->size(), s.size());
    out->append(reinterpret_cast<const char*>(s.begin()), take);
  }
  return out->size() == n;
}

inline bool parse(const grpc::ByteBuffer& bb, Header* h, std::string* err) {
  std::string fixed;
  if (!prefix(bb, kFixed, &fixed)) {
    *err = "frame shorter than its 16-byte header";
    return false;
  }
  h->count = static_cast<uint32_t>(get_le(fixed.data(), 4));
  h->flags = static_cast<uint32_t>(get_le(fixed.data() + 4, 4));
  h->seq = get_le(fixed.data() + 8, 8);
  size_t head = kFixed + 8 * static_cast<size_t>(h->count);
  std::string all;
  if (!prefix(bb, head, &all)) {
    *err = "frame shorter than its length table";
    return false;
  }
  h->lengths.resize(h->count);
  for (uint32_t i = 0; i < h->count; ++i) h->lengths[i] = get_le(all.data() + kFixed + 8 * i, 8);
  uint64_t body = (h->flags & kWant) ? 0 : h->payload();
  if (bb.Length() != head + body) {
    *err = "frame length does not match its length table";
    return false;
  }
  return true;
}

// A frame whose buffers are the caller's memory (must outlive the ByteBuffer's use).
inline grpc::ByteBuffer make(uint32_t flags, uint64_t seq, const Iov& iov) {
  Header h;
  h.flags = flags;
  h.seq = seq;
  for (const auto& b : iov) h.lengths.push_back(b.second);
  std::vector<grpc::Slice> slices;
  slices.emplace_back(encode_header(h));
  for (const auto& b : iov) {
    if (b.second) slices.emplace_back(b.first, b.second, grpc::Slice::STATIC_SLICE);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// A WANT frame: asks the server for buffers of these sizes.
inline grpc::ByteBuffer want(uint64_t seq, const std::vector<uint64_t>& sizes) {
  Header h;
  h.flags = kWant;
  h.seq = seq;
  h.lengths = sizes;
  grpc::Slice s(encode_header(h));
  return grpc::ByteBuffer(&s, 1);
}

inline grpc::ByteBuffer ack(uint64_t bytes, uint64_t buffers, uint64_t seq) {
  std::string s;
  put_u64(&s, bytes);
  put_u64(&s, buffers);
  put_u64(&s, seq);
  grpc::Slice slice(s);
  return grpc::ByteBuffer(&slice, 1);
}

}  // namespace frame
