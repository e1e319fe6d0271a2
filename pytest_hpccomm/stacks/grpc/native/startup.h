// Start-up shared by the native peer and the hello-world reference: how a server listens and
// stops, how a client connects. One copy, so benchmarks/grpc_fidelity.py compares two binaries
// that differ only in what they serve.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace startup {

// Port 0: the kernel picks a free port, reported in the READY line; never all interfaces.
constexpr const char* kDefaultBind = "127.0.0.1:0";

// A plaintext listening port; *port is set once the server has started (0: it could not bind).
void listen(grpc::ServerBuilder* b, const std::string& bind, int* port);

// A TLS listening port with the PEM certificate and key in these files.
void listen_tls(grpc::ServerBuilder* b, const std::string& bind, const std::string& cert_file,
                const std::string& key_file, int* port);

// Serves until the job's SIGTERM ends the process, or `lifetime` seconds if nobody does, then
// shuts down with a 2 s grace.
void serve_for(grpc::Server* server, double lifetime);

// A channel to target. unlimited: no message size caps (the peer moves up to the pool);
// otherwise gRPC's defaults, exactly grpc::CreateChannel (the hello-world reference).
std::shared_ptr<grpc::Channel> channel_to(const std::string& target, bool unlimited);

// A whole file (PEM certificates and keys).
std::string slurp(const std::string& path);

// Whether the channel connected within 20 s.
bool connected(const std::shared_ptr<grpc::Channel>& channel);

}  // namespace startup
