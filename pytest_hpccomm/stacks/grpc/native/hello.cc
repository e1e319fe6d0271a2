// gRPC's hello-world Greeter (sync server, blocking stub), timed by the same harness as the
// native peer. It is the floor benchmarks/grpc_fidelity.py holds the peer's latency against:
//   hpcc_grpc_hello server --bind 127.0.0.1:0
//   hpcc_grpc_hello client --target 127.0.0.1:PORT --layout 1B=1 --layout 64KiB=65536
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "bench.h"
#include "hello.grpc.pb.h"
#include "startup.h"

namespace {

class Greeter final : public helloworld::Greeter::Service {
  grpc::Status SayHello(grpc::ServerContext*, const helloworld::HelloRequest* req,
                        helloworld::HelloReply* reply) override {
    reply->set_message("Hello " + req->name());
    return grpc::Status::OK;
  }
};

int serve(const bench::Args& a) {
  Greeter service;
  grpc::ServerBuilder b;
  int port = 0;
  startup::listen(&b, a.get("bind", startup::kDefaultBind), &port);
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  if (!server || port == 0) return 2;
  std::ostringstream ready;
  ready << "{\"port\":" << port << ",\"peer\":\"hello\",\"grpc_version\":"
        << bench::quote(grpc::Version()) << ",\"pid\":" << getpid() << "}";
  bench::ready_line(ready.str());
  startup::serve_for(server.get(), std::atof(a.get("lifetime", "600").c_str()));
  return 0;
}

int client(const bench::Args& a) {
  auto channel = startup::channel_to(a.get("target"), false);  // gRPC's defaults, as the example
  if (!startup::connected(channel)) {
    std::fprintf(stderr, "hpcc_grpc_hello: cannot connect to %s\n", a.get("target").c_str());
    return 3;
  }
  auto stub = helloworld::Greeter::NewStub(channel);
  bench::Settings s = a.settings();
  std::vector<bench::Result> results;
  for (const auto& spec : a.all("layout")) {
    auto layout = bench::parse_layout(spec);
    bench::Result r;
    r.name = layout.first;
    r.layout = layout.second;
    helloworld::HelloRequest req;
    req.set_name(std::string(layout.second.empty() ? 0 : layout.second[0], 'x'));
    std::string err;
    bool ok = bench::run_batches(
        [&](long long n) {
          for (long long i = 0; i < n; ++i) {
            grpc::ClientContext ctx;
            helloworld::HelloReply reply;
            grpc::Status st = stub->SayHello(&ctx, req, &reply);
            if (!st.ok()) {
              err = st.error_message();
              return false;
            }
          }
          return true;
        },
        [](double sec, long long n) { return sec / n * 1e6; }, s, &r);
    if (!ok) r.errors.push_back(r.name + ": " + err);
    results.push_back(r);
  }
  bench::print_doc({{"peer", "\"hello\""},
                    {"benchmark", "\"latency\""},
                    {"grpc_version", bench::quote(grpc::Version())}},
                   results);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  bench::Args a(argc, argv, 2);
  if (cmd == "server") return serve(a);
  if (cmd == "client") return client(a);
  std::fprintf(stderr, "usage: %s server|client [--options]\n", argv[0]);
  return 2;
}
