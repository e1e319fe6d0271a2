#include "startup.h"

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace startup {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void listen(grpc::ServerBuilder* b, const std::string& bind, int* port) {
  b->AddListeningPort(bind, grpc::InsecureServerCredentials(), port);
}

void listen_tls(grpc::ServerBuilder* b, const std::string& bind, const std::string& cert_file,
                const std::string& key_file, int* port) {
  grpc::SslServerCredentialsOptions opts;
  opts.pem_key_cert_pairs.push_back({slurp(key_file), slurp(cert_file)});
  b->AddListeningPort(bind, grpc::SslServerCredentials(opts), port);
}

void serve_for(grpc::Server* server, double lifetime) {
  std::this_thread::sleep_for(std::chrono::duration<double>(lifetime));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

std::shared_ptr<grpc::Channel> channel_to(const std::string& target, bool unlimited) {
  grpc::ChannelArguments args;
  if (unlimited) {
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
  }
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

bool connected(const std::shared_ptr<grpc::Channel>& channel) {
  return channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(20));
}

}  // namespace startup
