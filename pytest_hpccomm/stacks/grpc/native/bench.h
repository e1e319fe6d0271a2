// Timing harness shared by the native peer and the hello-world reference, so both are timed by
// the same code (benchmarks/grpc_fidelity.py compares them). Mirrors pyclient.py: warm-up,
// calibrate operations per batch so a batch lasts --batch-seconds, one sample per batch.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace bench {

constexpr const char* kBegin = "@@HPCCOMM-RESULT-BEGIN@@";
constexpr const char* kEnd = "@@HPCCOMM-RESULT-END@@";
constexpr size_t kPool = 16u << 20;  // largest buffer a peer sends (large category: <= 10 MB)

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Canary (--hpc-inject-slowdown): spin until the timed region took `factor` times as long.
inline void stretch(Clock::time_point t0, double factor) {
  if (factor <= 1.0) return;
  double target = seconds_since(t0) * factor;
  while (seconds_since(t0) < target) {
  }
}

struct Settings {
  int batches = 12;
  double batch_seconds = 0.02;
  double warmup_seconds = 0.05;
  double slowdown = 1.0;
  std::string start_file;  // concurrent workers: segment k starts at the time in START_FILE.k
};

struct Result {
  std::string benchmark;
  std::string name;
  std::vector<uint64_t> layout;
  std::vector<double> samples;
  std::vector<long long> iterations;
  long long warmup = 0;
  std::vector<std::string> errors;
};

// The same bytes the Python peer uses: pool[k] = (k * 131 + 7) % 251; buffer i starts at a
// distinct offset so a swapped or shifted buffer cannot pass validation.
inline const std::string& pool() {
  static const std::string p = [] {
    std::string s(kPool, '\0');
    for (size_t k = 0; k < kPool; ++k) s[k] = static_cast<char>((k * 131 + 7) % 251);
    return s;
  }();
  return p;
}

inline const char* buffer_at(size_t i, size_t size) {
  size_t room = kPool - size + 1;
  return pool().data() + (i * 4099) % room;
}

// op(n) runs n operations and returns false on error. value(seconds, n) -> the sample.
inline bool run_batches(const std::function<bool(long long)>& op,
                        const std::function<double(double, long long)>& value,
                        const Settings& s, Result* r) {
  auto w0 = Clock::now();
  long long warm = 0;
  while (warm < 2 || seconds_since(w0) < s.warmup_seconds) {
    if (!op(1)) return false;
    ++warm;
  }
  r->warmup = warm;
  double per_op = seconds_since(w0) / static_cast<double>(warm);
  long long n = std::max(1LL, static_cast<long long>(s.batch_seconds / per_op + 0.5));
  for (int b = 0; b < s.batches; ++b) {
    auto t0 = Clock::now();
    if (!op(n)) return false;
    stretch(t0, s.slowdown);
    r->samples.push_back(value(seconds_since(t0), n));
    r->iterations.push_back(n);
  }
  return true;
}

inline void ready_line(const std::string& json) {
  std::printf("HPCCOMM-GRPC-READY %s\n", json.c_str());
  std::fflush(stdout);
}

// A barrier through the orchestrator: say READY for this segment, then wait for the common
// start time (epoch seconds) it writes, renamed into place, once every worker has said so.
inline bool await_start(const std::string& start_file, int segment, double* start_at,
                        double timeout = 60.0) {
  ready_line("{\"segment\":" + std::to_string(segment) + "}");
  std::string path = start_file + "." + std::to_string(segment);
  auto t0 = Clock::now();
  while (seconds_since(t0) < timeout) {
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      bool ok = std::fscanf(f, "%lf", start_at) == 1;
      std::fclose(f);
      if (ok) return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// Time-based batches for workers that run concurrently (PS, mimic): every worker starts the
// segment at the same moment, so batch b of every worker covers the same wall-clock window
// and their rates add up.
inline bool run_synced(const std::function<bool()>& step,
                       const std::function<double(double, long long)>& value,
                       const Settings& s, Result* r, int segment) {
  if (!s.start_file.empty()) {
    double start_at = 0;
    if (!await_start(s.start_file, segment, &start_at)) {
      std::fprintf(stderr, "no start time for segment %d in %s\n", segment,
                   s.start_file.c_str());
      std::exit(3);  // the orchestrator is gone or gave up: nothing left to measure
    }
    auto now = std::chrono::system_clock::now().time_since_epoch();
    double wait = start_at - std::chrono::duration<double>(now).count();
    if (wait > 0 && wait < 60) std::this_thread::sleep_for(std::chrono::duration<double>(wait));
  }
  auto w0 = Clock::now();
  long long warm = 0;
  while (seconds_since(w0) < s.warmup_seconds) {
    if (!step()) return false;
    ++warm;
  }
  r->warmup = warm;
  auto start = Clock::now();
  for (int b = 0; b < s.batches; ++b) {
    // batch windows are fixed in time: a slow step shortens the next window, not the schedule
    double end = s.batch_seconds * (b + 1);
    auto t0 = Clock::now();
    long long n = 0;
    do {
      if (!step()) return false;
      ++n;
    } while (seconds_since(start) < end);
    stretch(t0, s.slowdown);
    r->samples.push_back(value(seconds_since(t0), n));
    r->iterations.push_back(n);
  }
  return true;
}

inline std::string quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  return o + "\"";
}

template <class T>
std::string array(const std::vector<T>& v) {
  std::ostringstream o;
  o.precision(17);
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? "," : "") << v[i];
  o << "]";
  return o.str();
}

inline std::string strings(const std::vector<std::string>& v) {
  std::string o = "[";
  for (size_t i = 0; i < v.size(); ++i) o += (i ? "," : "") + quote(v[i]);
  return o + "]";
}

// One JSON document between marker lines (the MPI peer's convention): chatter cannot corrupt it.
inline void print_doc(const std::map<std::string, std::string>& fields,
                      const std::vector<Result>& results) {
  std::ostringstream o;
  o << "{";
  for (const auto& f : fields) o << quote(f.first) << ":" << f.second << ",";
  o << "\"results\":[";
  for (size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    o << (i ? "," : "") << "{\"benchmark\":" << quote(r.benchmark)
      << ",\"name\":" << quote(r.name) << ",\"layout\":" << array(r.layout)
      << ",\"samples\":" << array(r.samples) << ",\"iterations\":" << array(r.iterations)
      << ",\"warmup\":" << r.warmup << ",\"errors\":" << strings(r.errors) << "}";
  }
  o << "]}";
  std::printf("\n%s\n%s\n%s\n", kBegin, o.str().c_str(), kEnd);
  std::fflush(stdout);
}

// --key value arguments; repeated keys accumulate (e.g. --layout).
struct Args {
  std::multimap<std::string, std::string> kv;
  Args(int argc, char** argv, int first) {
    for (int i = first; i < argc; ++i) {
      std::string k = argv[i];
      if (k.rfind("--", 0) != 0) continue;
      bool has_value = i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0;
      kv.emplace(k.substr(2), has_value ? argv[++i] : "1");
    }
  }
  std::string get(const std::string& k, const std::string& dflt = "") const {
    auto it = kv.find(k);
    return it == kv.end() ? dflt : it->second;
  }
  std::vector<std::string> all(const std::string& k) const {
    std::vector<std::string> out;
    auto range = kv.equal_range(k);
    for (auto it = range.first; it != range.second; ++it) out.push_back(it->second);
    return out;
  }
  bool has(const std::string& k) const { return kv.count(k) > 0; }
  Settings settings() const {
    Settings s;
    s.batches = std::atoi(get("batches", "12").c_str());
    s.batch_seconds = std::atof(get("batch-seconds", "0.02").c_str());
    s.warmup_seconds = std::atof(get("warmup-seconds", "0.05").c_str());
    s.slowdown = std::atof(get("slowdown", "1").c_str());
    s.start_file = get("start-file");
    return s;
  }
};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

// "--layout NAME=S1,S2,..." -> (NAME, sizes); "NAME=" is an empty layout.
inline std::pair<std::string, std::vector<uint64_t>> parse_layout(const std::string& spec) {
  auto eq = spec.find('=');
  std::pair<std::string, std::vector<uint64_t>> out;
  out.first = spec.substr(0, eq);
  if (eq == std::string::npos) return out;
  for (const auto& part : split(spec.substr(eq + 1), ',')) {
    if (!part.empty()) out.second.push_back(std::strtoull(part.c_str(), nullptr, 10));
  }
  return out;
}


}  // namespace bench
