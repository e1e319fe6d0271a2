// Native gRPC peer: the tensor-transfer server (server.cc) and the benchmark client
// (client.cc), in C++ against the gRPC installation the project was built with. Runs alone:
//   hpcc_grpc_peer server --bind 127.0.0.1:0 [--tls-bind ADDR --tls-cert F --tls-key F]
//   hpcc_grpc_peer client --target HOST:PORT --benchmark latency --mode raw --layout a=10,10
// Python's per-RPC cost (~500 us here) hides the transport; this peer is what latency verdicts
// should use.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <string>

#include "bench.h"
#include "peer.h"

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  bench::Args a(argc, argv, 2);
  if (cmd == "server") return peer::serve(a);
  if (cmd == "client") return peer::client(a);
  if (cmd == "relay") return peer::relay(a);
  if (cmd == "version") {
    std::printf("%s\n", grpc::Version().c_str());
    return 0;
  }
  std::fprintf(stderr, "usage: %s server|client|relay|version [--options]\n", argv[0]);
  return 2;
}
