// omniORB under the benchmark protocol (shared/bench/PROTOCOL.md): `--impl omniorb` of
// examples/bench/run.sh, the C++ CORBA ORB the ORB is compared with.
//
//   omniorb-bench server --port PORT [--threads T]   # T is ignored: omniORB's default model,
//                                                    # a thread per connection
//   omniorb-bench client --port PORT lat|tput [N]|big [--quick]
//
// The server activates its servant under the object key "echo" in omniINSPOA, so the client
// reaches it with corbaloc::1.2@127.0.0.1:PORT/echo, as orb-bench's ORB client does. The
// client multiplexes its tput threads over one connection (oneCallPerConnection 0,
// maxGIOPConnectionPerServer 1), as the protocol asks. Lines and fields as orb-bench's; the
// payload is an octet sequence of 64 B (1 MiB for big), checked on every reply.

#include <omniORB4/CORBA.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench.hh"

using Clock = std::chrono::steady_clock;

static long ctx_switches() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_nvcsw + ru.ru_nivcsw;
}

static long peak_rss_kb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss;
}

static bench::Octets* payload(CORBA::ULong n) {
  bench::Octets* p = new bench::Octets(n);
  p->length(n);
  for (CORBA::ULong i = 0; i < n; i++) (*p)[i] = (CORBA::Octet)((i * 31u + n) & 0xffu);
  return p;
}

static bool same(const bench::Octets& a, const bench::Octets& b) {
  return a.length() == b.length() &&
         (a.length() == 0 || memcmp(a.get_buffer(), b.get_buffer(), a.length()) == 0);
}

// Nearest-rank percentile of sorted values.
static double pct(const std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  size_t k = (size_t)(p / 100.0 * v.size() + 0.999999);
  if (k < 1) k = 1;
  if (k > v.size()) k = v.size();
  return v[k - 1];
}

// ---- server ----

static std::atomic<unsigned long> g_calls{0};

class EchoImpl : public POA_bench::EchoService {
 public:
  bench::Octets* Echo(const bench::Octets& p) override {
    g_calls.fetch_add(1, std::memory_order_relaxed);
    return new bench::Octets(p);
  }
};

// A free port on 127.0.0.1 (omniORB is given it as its endpoint).
static int free_port() {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  if (s < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = -1;
  if (bind(s, (sockaddr*)&a, sizeof a) == 0 && getsockname(s, (sockaddr*)&a, &len) == 0)
    port = ntohs(a.sin_port);
  close(s);
  return port;
}

static CORBA::ORB_ptr g_orb;

static void* run_orb(void*) {
  g_orb->run();
  return nullptr;
}

static int server(int port) {
  // SIGTERM/SIGINT are taken by sigwait below: block them in every thread (inherited).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (port == 0) port = free_port();
  if (port <= 0) {
    fprintf(stderr, "no free port\n");
    return 1;
  }
  std::string endpoint = "giop:tcp:127.0.0.1:" + std::to_string(port);
  const char* options[][2] = {{"endPoint", endpoint.c_str()}, {0, 0}};
  int argc = 1;
  char arg0[] = "omniorb-bench";
  char* argv[] = {arg0, nullptr};
  long ctx0 = 0;
  try {
    g_orb = CORBA::ORB_init(argc, argv, "omniORB4", options);
    CORBA::Object_var obj = g_orb->resolve_initial_references("omniINSPOA");
    PortableServer::POA_var poa = PortableServer::POA::_narrow(obj);
    EchoImpl* servant = new EchoImpl;
    PortableServer::ObjectId_var oid = PortableServer::string_to_ObjectId("echo");
    poa->activate_object_with_id(oid, servant);
    servant->_remove_ref();
    PortableServer::POAManager_var mgr = poa->the_POAManager();
    mgr->activate();
  } catch (CORBA::Exception& e) {
    fprintf(stderr, "cannot start the server: %s\n", e._name());
    return 1;
  }
  pthread_t t;
  pthread_create(&t, nullptr, run_orb, nullptr);
  ctx0 = ctx_switches();
  fprintf(stderr, "listening on 127.0.0.1:%d\n", port);
  int sig = 0;
  sigwait(&set, &sig);
  unsigned long n = g_calls.load();
  long ctx = ctx_switches() - ctx0;
  printf("{\"impl\":\"omniorb\",\"role\":\"server\",\"model\":\"thread per connection\",\"calls\":%lu,"
         "\"ctx_switches_per_call\":%.3f,\"peak_rss_kb\":%ld}\n",
         n, n ? (double)ctx / n : 0.0, peak_rss_kb());
  fflush(stdout);
  _exit(0);  // no orderly ORB shutdown: clients may still be connected
}

// ---- client ----

struct Params {
  int lat_warmup = 2000, lat_calls = 20000;
  double tput_warmup = 1.0, tput_measure = 5.0;
  int big_warmup = 20, big_calls = 200;
};

static bench::EchoService_ptr connect(CORBA::ORB_ptr orb, int port) {
  std::string loc = "corbaloc::1.2@127.0.0.1:" + std::to_string(port) + "/echo";
  CORBA::Object_var obj = orb->string_to_object(loc.c_str());
  // No _is_a round trip: the key names an EchoService.
  return bench::EchoService::_unchecked_narrow(obj);
}

static double us_since(Clock::time_point t) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t).count();
}

// lat or big: one thread, sequential calls.
static int single(bench::EchoService_ptr e, const char* wl, const Params& p) {
  bool big = strcmp(wl, "big") == 0;
  CORBA::ULong size = big ? 1048576 : 64;
  int warm = big ? p.big_warmup : p.lat_warmup, calls = big ? p.big_calls : p.lat_calls;
  bench::Octets_var data = payload(size);
  for (int i = 0; i < warm; i++) {
    bench::Octets_var r = e->Echo(data.in());
    if (!same(r.in(), data.in())) return 3;
  }
  std::vector<double> lat;
  lat.reserve(calls);
  long ctx0 = ctx_switches();
  auto t0 = Clock::now();
  for (int i = 0; i < calls; i++) {
    auto t = Clock::now();
    bench::Octets_var r = e->Echo(data.in());
    lat.push_back(us_since(t));
    if (!same(r.in(), data.in())) return 3;
  }
  double secs = us_since(t0) / 1e6;
  long ctx = ctx_switches() - ctx0;
  double sum = 0;
  for (double x : lat) sum += x;
  std::sort(lat.begin(), lat.end());
  if (big) {
    printf("{\"impl\":\"omniorb\",\"workload\":\"big\",\"calls\":%d,\"mb_per_s\":%.3f,"
           "\"p50_us\":%.3f,\"ctx_switches_per_call\":%.3f,\"peak_rss_kb\":%ld}\n",
           calls, (double)size * calls / secs / 1e6, pct(lat, 50), (double)ctx / calls,
           peak_rss_kb());
  } else {
    printf("{\"impl\":\"omniorb\",\"workload\":\"lat\",\"calls\":%d,\"p50_us\":%.3f,"
           "\"p99_us\":%.3f,\"p999_us\":%.3f,\"mean_us\":%.3f,\"rps\":%.3f,"
           "\"ctx_switches_per_call\":%.3f,\"peak_rss_kb\":%ld}\n",
           calls, pct(lat, 50), pct(lat, 99), pct(lat, 99.9), sum / calls, calls / secs,
           (double)ctx / calls, peak_rss_kb());
  }
  return 0;
}

// tput N: N threads calling concurrently over the one connection.
static int tput(bench::EchoService_ptr e, int n, const Params& p) {
  std::atomic<bool> wrong{false};
  std::vector<std::vector<double>> lats(n);
  auto start = Clock::now();
  auto measure_from = start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(p.tput_warmup));
  auto measure_to = measure_from + std::chrono::duration_cast<Clock::duration>(
                                       std::chrono::duration<double>(p.tput_measure));
  std::vector<std::thread> threads;
  for (int k = 0; k < n; k++) {
    threads.emplace_back([&, k] {
      bench::Octets_var data = payload(64);
      try {
        for (;;) {
          auto t = Clock::now();
          if (t >= measure_to) break;
          bench::Octets_var r = e->Echo(data.in());
          auto done = Clock::now();
          if (!same(r.in(), data.in())) {
            wrong = true;
            return;
          }
          if (t >= measure_from && done <= measure_to)
            lats[k].push_back(std::chrono::duration<double, std::micro>(done - t).count());
        }
      } catch (CORBA::Exception& ex) {
        fprintf(stderr, "call failed: %s\n", ex._name());
        wrong = true;
      }
    });
  }
  std::this_thread::sleep_until(measure_from);
  long ctx0 = ctx_switches();
  for (auto& t : threads) t.join();
  long ctx = ctx_switches() - ctx0;
  if (wrong) return 3;
  std::vector<double> all;
  for (auto& v : lats) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  size_t calls = all.size();
  printf("{\"impl\":\"omniorb\",\"workload\":\"tput\",\"threads\":%d,\"calls\":%zu,"
         "\"rps\":%.1f,\"p50_us\":%.3f,\"p99_us\":%.3f,\"ctx_switches_per_call\":%.3f,"
         "\"peak_rss_kb\":%ld}\n",
         n, calls, calls / p.tput_measure, pct(all, 50), pct(all, 99),
         calls ? (double)ctx / calls : 0.0, peak_rss_kb());
  return 0;
}

static int client(int port, const char* wl, int n, bool quick) {
  Params p;
  if (quick) {
    p.lat_warmup = 200;
    p.lat_calls = 2000;
    p.tput_warmup = 0.2;
    p.tput_measure = 1.0;
    p.big_warmup = 2;
    p.big_calls = 20;
  }
  // One connection for every thread, calls interleaved on it (GIOP 1.2 multiplexing).
  const char* options[][2] = {
      {"oneCallPerConnection", "0"}, {"maxGIOPConnectionPerServer", "1"}, {0, 0}};
  int argc = 1;
  char arg0[] = "omniorb-bench";
  char* argv[] = {arg0, nullptr};
  try {
    CORBA::ORB_var orb = CORBA::ORB_init(argc, argv, "omniORB4", options);
    bench::EchoService_var e = connect(orb, port);
    int rc;
    if (strcmp(wl, "tput") == 0)
      rc = tput(e, n, p);
    else
      rc = single(e, wl, p);
    fflush(stdout);
    if (rc == 3) fprintf(stderr, "wrong reply\n");
    orb->destroy();
    return rc;
  } catch (CORBA::Exception& ex) {
    fprintf(stderr, "call failed: %s\n", ex._name());
    return 1;
  }
}

static int usage() {
  fprintf(stderr,
          "usage:\n  omniorb-bench server --port PORT [--threads T]\n"
          "  omniorb-bench client --port PORT lat|tput [N]|big [--quick]\n");
  return 2;
}

int main(int argc, char** argv) {
  if (argc < 2) return usage();
  std::string cmd = argv[1];
  int port = -1, n = 32;
  bool quick = false;
  std::vector<std::string> pos;
  for (int i = 2; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--port" && i + 1 < argc)
      port = atoi(argv[++i]);
    else if (a == "--threads" && i + 1 < argc)
      ++i;  // omniORB's thread per connection
    else if (a == "--impl" && i + 1 < argc)
      ++i;  // accepted for symmetry with orb-bench
    else if (a == "--quick")
      quick = true;
    else if (a.rfind("--", 0) == 0)
      return usage();
    else
      pos.push_back(a);
  }
  if (port < 0) return usage();
  if (cmd == "server") return server(port);
  if (cmd != "client" || pos.empty()) return usage();
  const std::string& wl = pos[0];
  if (wl == "tput" && pos.size() > 1) n = atoi(pos[1].c_str());
  if (wl != "lat" && wl != "big" && wl != "tput") return usage();
  if (n < 1) return usage();
  return client(port, wl.c_str(), n, quick);
}
