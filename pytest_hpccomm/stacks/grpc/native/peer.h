// The native peer's two roles (server.cc, client.cc), dispatched by peer.cc's main.
#pragma once

#include <cstdint>

#include "bench.h"
#include "tensor.grpc.pb.h"

namespace peer {

namespace pb = hpccomm::grpcbench;

// hpcc_grpc_peer server --bind 127.0.0.1:0 [--tls-bind ADDR --tls-cert F --tls-key F]
//   [--max-message N] [--lifetime S] [--drop-last-buffer]
int serve(const bench::Args& a);

// hpcc_grpc_peer client --target HOST:PORT --benchmark latency --mode raw --layout a=10,10
int client(const bench::Args& a);

// hpcc_grpc_peer relay --target HOST:PORT [--ca FILE] [--gzip]: calls read from stdin, their
// answers written to stdout (relay.cc), for the conformance suite inside a runtime.
int relay(const bench::Args& a);

// Payload bytes of a serialized message: what Send acknowledges and Pull must deliver.
inline uint64_t payload(const pb::Tensors& t) {
  uint64_t n = 0;
  for (const auto& b : t.buffers()) n += b.size();
  return n;
}

}  // namespace peer
