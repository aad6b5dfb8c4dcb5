// attnc-bench-openblas: an unfused f32 attention baseline on OpenBLAS sgemm.
//
// Per (b, h), Q/K/V/O row-major [B,H,S,D] contiguous, Sq = Skv = S:
//   forward   S  = scale Q K^T                      (sgemm)
//             P  = softmax_rows(mask(S))            (row max subtracted)
//             O  = P V                              (sgemm)
//   backward  Di = rowsum(dO * O)
//             dV = P^T dO                           (sgemm)
//             dP = dO V^T                           (sgemm)
//             dS = P * (dP - Di)
//             dQ = scale dS K                       (sgemm)
//             dK = scale dS^T Q                     (sgemm)
// The causal variant computes the full S x S scores like a plain unfused
// implementation and masks j > i (those probabilities are 0). The forward of
// forward+backward keeps P of every head for the backward; the forward-only
// timing reuses one S x S buffer per thread (inference).
// Threads (--parallel): `heads` (the default when B*H >= threads) splits the
// heads over the threads, each calling single-threaded sgemm
// (openblas_set_num_threads(1)); `blas` runs one head at a time with
// openblas_set_num_threads(threads) and as many std::threads for the row-wise
// softmax / dS passes.
//
// Usage:
//   attnc-bench-openblas [--B N] [--H N] [--S N] [--D N] [--causal]
//                        [--threads N] [--reps N] [--parallel heads|blas]
//   attnc-bench-openblas B H S D [...]      (positional form)
//   attnc-bench-openblas --selfcheck [--threads N]  (small sizes vs float64)
// Prints one JSON object on stdout.

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

namespace {

int gThreads = 1;

// Runs fn(begin, end) over [0, n) split into gThreads contiguous chunks.
template <typename Fn> void parallelRows(int64_t n, const Fn &fn) {
  int t = (int)std::min<int64_t>(gThreads, n);
  if (t <= 1) {
    fn(int64_t(0), n);
    return;
  }
  std::vector<std::thread> workers;
  workers.reserve(t - 1);
  int64_t chunk = (n + t - 1) / t;
  for (int i = 1; i < t; ++i) {
    int64_t b = i * chunk, e = std::min(n, b + chunk);
    if (b < e)
      workers.emplace_back([&fn, b, e] { fn(b, e); });
  }
  fn(int64_t(0), std::min(n, chunk));
  for (auto &w : workers)
    w.join();
}

// exp(x) for x <= 0 (Cephes expf: range reduction by ln 2 and a degree-6
// polynomial, ~1 ulp), written so that clang vectorizes the loops using it.
inline float expNonPositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r + n * 2.12194440e-4f;
  float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

// One row of P = softmax(s[0:len]), p[len:n] = 0 (in place allowed).
void softmaxRow(float *__restrict row, int64_t len, int64_t n) {
  constexpr int L = 16;
  float mv[L];
  for (int l = 0; l < L; ++l)
    mv[l] = -INFINITY;
  int64_t j = 0;
  for (; j + L <= len; j += L)
    for (int l = 0; l < L; ++l)
      mv[l] = std::max(mv[l], row[j + l]);
  float m = -INFINITY;
  for (int l = 0; l < L; ++l)
    m = std::max(m, mv[l]);
  for (; j < len; ++j)
    m = std::max(m, row[j]);

  for (j = 0; j < len; ++j)
    row[j] = expNonPositive(row[j] - m);

  float sv[L] = {};
  j = 0;
  for (; j + L <= len; j += L)
    for (int l = 0; l < L; ++l)
      sv[l] += row[j + l];
  float sum = 0.0f;
  for (int l = 0; l < L; ++l)
    sum += sv[l];
  for (; j < len; ++j)
    sum += row[j];

  float inv = 1.0f / sum;
  for (j = 0; j < len; ++j)
    row[j] *= inv;
  for (j = len; j < n; ++j)
    row[j] = 0.0f;
}

struct Problem {
  int64_t B = 1, H = 8, S = 1024, D = 64;
  bool causal = false;
  float scale() const { return 1.0f / std::sqrt((float)D); }
  int64_t bh() const { return B * H; }
  size_t qkvElems() const { return (size_t)(B * H * S * D); }
};

// Forward of head bh: P is its S x S buffer (scores, then probabilities).
void forwardHead(const Problem &pr, int64_t bh, const float *q, const float *k,
                 const float *v, float *o, float *P, bool parallelSoftmax) {
  const int64_t S = pr.S, D = pr.D;
  const float *qh = q + bh * S * D, *kh = k + bh * S * D, *vh = v + bh * S * D;
  float *oh = o + bh * S * D;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, pr.scale(), qh,
              D, kh, D, 0.0f, P, S);
  auto rows = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      softmaxRow(P + i * S, pr.causal ? i + 1 : S, S);
  };
  if (parallelSoftmax)
    parallelRows(S, rows);
  else
    rows(0, S);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, 1.0f, P, S,
              vh, D, 0.0f, oh, D);
}

// Backward of head bh from its P; dP is S x S scratch, Di S scratch.
void backwardHead(const Problem &pr, int64_t bh, const float *q, const float *k,
                  const float *v, const float *o, const float *P,
                  const float *dO, float *dQ, float *dK, float *dV, float *dP,
                  float *Di, bool parallelRowsPass) {
  const int64_t S = pr.S, D = pr.D;
  const float scale = pr.scale();
  const float *qh = q + bh * S * D, *kh = k + bh * S * D, *vh = v + bh * S * D,
              *oh = o + bh * S * D, *dOh = dO + bh * S * D;
  float *dQh = dQ + bh * S * D, *dKh = dK + bh * S * D, *dVh = dV + bh * S * D;
  // dV = P^T dO
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, S, 1.0f, P, S,
              dOh, D, 0.0f, dVh, D);
  // dP = dO V^T
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, D, 1.0f, dOh, D,
              vh, D, 0.0f, dP, S);
  // dS = P * (dP - rowsum(dO * O)), in place in dP.
  auto rows = [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      float di = 0.0f;
      for (int64_t d = 0; d < D; ++d)
        di += dOh[i * D + d] * oh[i * D + d];
      Di[i] = di;
      const float *__restrict pi = P + i * S;
      float *__restrict ds = dP + i * S;
      for (int64_t j = 0; j < S; ++j)
        ds[j] = pi[j] * (ds[j] - di);
    }
  };
  if (parallelRowsPass)
    parallelRows(S, rows);
  else
    rows(0, S);
  // dQ = scale dS K; dK = scale dS^T Q
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, S, D, S, scale, dP, S,
              kh, D, 0.0f, dQh, D);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, S, D, S, scale, dP, S,
              qh, D, 0.0f, dKh, D);
}

// How the threads are used.
//  heads: min(threads, B*H) workers take contiguous blocks of heads, each
//         calling single-threaded sgemm (openblas_set_num_threads(1)) and
//         doing its heads' row passes; no synchronisation inside a head.
//  blas:  heads one after another; every sgemm uses `threads` OpenBLAS
//         threads (openblas_set_num_threads(threads)) and the row passes as
//         many std::threads.
enum class Parallel { Heads, Blas };

struct Runner {
  Problem pr;
  Parallel mode = Parallel::Blas;
  int workers = 1; // heads mode
  // Per-worker S x S scratch (forward-only P, backward dP) and S floats (Di).
  std::vector<float> scratch, dP, Di;

  Runner(const Problem &p, Parallel m, int threads) : pr(p), mode(m) {
    workers = mode == Parallel::Heads
                  ? (int)std::min<int64_t>(threads, pr.bh())
                  : 1;
    openblas_set_num_threads(mode == Parallel::Heads ? 1 : threads);
    scratch.resize((size_t)(workers * pr.S * pr.S));
    dP.resize((size_t)(workers * pr.S * pr.S));
    Di.resize((size_t)(workers * pr.S));
  }

  // fn(worker, bh) for every head.
  template <typename Fn> void forEachHead(const Fn &fn) {
    const int64_t n = pr.bh();
    if (workers <= 1) {
      for (int64_t bh = 0; bh < n; ++bh)
        fn(0, bh);
      return;
    }
    auto block = [&](int w) {
      int64_t b = n * w / workers, e = n * (w + 1) / workers;
      for (int64_t bh = b; bh < e; ++bh)
        fn(w, bh);
    };
    std::vector<std::thread> ts;
    for (int w = 1; w < workers; ++w)
      ts.emplace_back(block, w);
    block(0);
    for (auto &t : ts)
      t.join();
  }

  // keepP: P holds B*H*S*S floats, kept for the backward; otherwise each
  // worker reuses one S x S buffer (inference).
  void forward(const float *q, const float *k, const float *v, float *o,
               float *P, bool keepP) {
    const int64_t SS = pr.S * pr.S;
    const bool par = mode == Parallel::Blas;
    forEachHead([&](int w, int64_t bh) {
      float *ph = keepP ? P + bh * SS : scratch.data() + w * SS;
      forwardHead(pr, bh, q, k, v, o, ph, par);
    });
  }

  void backward(const float *q, const float *k, const float *v,
                const float *o, const float *P, const float *dO, float *dQ,
                float *dK, float *dV) {
    const int64_t SS = pr.S * pr.S;
    const bool par = mode == Parallel::Blas;
    forEachHead([&](int w, int64_t bh) {
      backwardHead(pr, bh, q, k, v, o, P + bh * SS, dO, dQ, dK, dV,
                   dP.data() + w * SS, Di.data() + w * pr.S, par);
    });
  }
};

// Deterministic uniform [-1, 1).
void fillRandom(std::vector<float> &x, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float &f : x) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    f = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
  }
}

// Float64 reference of the forward and of the gradients.
void reference(const Problem &pr, const std::vector<float> &q,
               const std::vector<float> &k, const std::vector<float> &v,
               const std::vector<float> &dO, std::vector<double> &o,
               std::vector<double> &dQ, std::vector<double> &dK,
               std::vector<double> &dV) {
  const int64_t S = pr.S, D = pr.D;
  const double scale = 1.0 / std::sqrt((double)D);
  o.assign(pr.qkvElems(), 0.0);
  dQ.assign(pr.qkvElems(), 0.0);
  dK.assign(pr.qkvElems(), 0.0);
  dV.assign(pr.qkvElems(), 0.0);
  std::vector<double> p(S * S), dp(S * S);
  for (int64_t bh = 0; bh < pr.bh(); ++bh) {
    size_t off = (size_t)(bh * S * D);
    auto Q = [&](int64_t i, int64_t d) { return (double)q[off + i * D + d]; };
    auto K = [&](int64_t i, int64_t d) { return (double)k[off + i * D + d]; };
    auto V = [&](int64_t i, int64_t d) { return (double)v[off + i * D + d]; };
    auto G = [&](int64_t i, int64_t d) { return (double)dO[off + i * D + d]; };
    for (int64_t i = 0; i < S; ++i) {
      double m = -INFINITY;
      for (int64_t j = 0; j < S; ++j) {
        double s = -INFINITY;
        if (!pr.causal || j <= i) {
          s = 0.0;
          for (int64_t d = 0; d < D; ++d)
            s += Q(i, d) * K(j, d);
          s *= scale;
        }
        p[i * S + j] = s;
        m = std::max(m, s);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < S; ++j)
        sum += (p[i * S + j] = std::exp(p[i * S + j] - m));
      for (int64_t j = 0; j < S; ++j)
        p[i * S + j] /= sum;
      for (int64_t d = 0; d < D; ++d) {
        double acc = 0.0;
        for (int64_t j = 0; j < S; ++j)
          acc += p[i * S + j] * V(j, d);
        o[off + i * D + d] = acc;
      }
    }
    for (int64_t i = 0; i < S; ++i) {
      double di = 0.0;
      for (int64_t d = 0; d < D; ++d)
        di += G(i, d) * o[off + i * D + d];
      for (int64_t j = 0; j < S; ++j) {
        double g = 0.0;
        for (int64_t d = 0; d < D; ++d)
          g += G(i, d) * V(j, d);
        dp[i * S + j] = p[i * S + j] * (g - di); // dS
      }
    }
    for (int64_t j = 0; j < S; ++j)
      for (int64_t d = 0; d < D; ++d) {
        double av = 0.0, ak = 0.0;
        for (int64_t i = 0; i < S; ++i) {
          av += p[i * S + j] * G(i, d);
          ak += dp[i * S + j] * Q(i, d);
        }
        dV[off + j * D + d] = av;
        dK[off + j * D + d] = scale * ak;
      }
    for (int64_t i = 0; i < S; ++i)
      for (int64_t d = 0; d < D; ++d) {
        double a = 0.0;
        for (int64_t j = 0; j < S; ++j)
          a += dp[i * S + j] * K(j, d);
        dQ[off + i * D + d] = scale * a;
      }
  }
}

// max |got - ref| / max |ref|.
double relError(const std::vector<float> &got, const std::vector<double> &ref) {
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < ref.size(); ++i) {
    num = std::max(num, std::fabs((double)got[i] - ref[i]));
    den = std::max(den, std::fabs(ref[i]));
  }
  return den > 0.0 ? num / den : num;
}

// Both thread modes on small shapes against the float64 reference.
int selfcheck(int threads) {
  const double tol = 1e-4;
  bool ok = true;
  std::printf("{\"impl\":\"openblas\",\"threads\":%d,\"selfcheck\":[",
              threads);
  const int64_t shapes[][4] = {{2, 3, 37, 16}, {1, 2, 70, 64}};
  bool first = true;
  for (Parallel mode : {Parallel::Heads, Parallel::Blas})
  for (const auto &sh : shapes)
    for (int causal = 0; causal < 2; ++causal) {
      Problem pr;
      pr.B = sh[0];
      pr.H = sh[1];
      pr.S = sh[2];
      pr.D = sh[3];
      pr.causal = causal;
      size_t n = pr.qkvElems();
      std::vector<float> q(n), k(n), v(n), dO(n), o(n), dQ(n), dK(n), dV(n);
      fillRandom(q, 1);
      fillRandom(k, 2);
      fillRandom(v, 3);
      fillRandom(dO, 4);
      // Larger scores than uniform [-1,1) gives, to exercise the max shift.
      for (float &x : q)
        x *= 4.0f;
      std::vector<float> P((size_t)(pr.bh() * pr.S * pr.S)), o2(n);
      Runner run(pr, mode, threads);
      run.forward(q.data(), k.data(), v.data(), o2.data(), nullptr, false);
      run.forward(q.data(), k.data(), v.data(), o.data(), P.data(), true);
      run.backward(q.data(), k.data(), v.data(), o.data(), P.data(), dO.data(),
                   dQ.data(), dK.data(), dV.data());
      std::vector<double> ro, rdQ, rdK, rdV;
      reference(pr, q, k, v, dO, ro, rdQ, rdK, rdV);
      double eo = std::max(relError(o, ro), relError(o2, ro)), eq = relError(dQ, rdQ),
             ek = relError(dK, rdK), ev = relError(dV, rdV);
      bool pass = eo <= tol && eq <= tol && ek <= tol && ev <= tol;
      ok = ok && pass;
      std::printf("%s{\"parallel\":\"%s\",\"B\":%lld,\"H\":%lld,\"S\":%lld,\"D\":%lld,"
                  "\"causal\":%s,\"rel_err\":{\"O\":%.3g,\"dQ\":%.3g,"
                  "\"dK\":%.3g,\"dV\":%.3g},\"pass\":%s}",
                  first ? "" : ",",
                  mode == Parallel::Heads ? "heads" : "blas", (long long)pr.B, (long long)pr.H,
                  (long long)pr.S, (long long)pr.D, causal ? "true" : "false",
                  eo, eq, ek, ev, pass ? "true" : "false");
      first = false;
    }
  std::printf("],\"tolerance\":%g,\"pass\":%s}\n", tol, ok ? "true" : "false");
  return ok ? 0 : 1;
}

double median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  size_t n = x.size();
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

[[noreturn]] void usage(const char *msg) {
  if (msg)
    std::fprintf(stderr, "attnc-bench-openblas: %s\n", msg);
  std::fprintf(stderr,
               "usage: attnc-bench-openblas [--B N] [--H N] [--S N] [--D N] "
               "[--causal] [--threads N] [--reps N]\n"
               "                            [--parallel heads|blas]\n"
               "       attnc-bench-openblas B H S D [options]\n"
               "       attnc-bench-openblas --selfcheck [--threads N]\n"
               "--parallel: heads (default when B*H >= threads): threads "
               "split the heads,\n  single-threaded sgemm; blas: one head at "
               "a time, multithreaded sgemm.\n");
  std::exit(2);
}

int64_t parsePositive(const char *s, const char *what) {
  char *end = nullptr;
  long long x = std::strtoll(s, &end, 10);
  if (!end || *end || x <= 0)
    usage((std::string("bad value for ") + what + ": " + s).c_str());
  return x;
}

std::string jsonEscape(const char *s) {
  std::string r;
  for (; s && *s; ++s) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\')
      r += '\\', r += (char)c;
    else if (c >= 0x20)
      r += (char)c;
  }
  // OpenBLAS pads its strings with spaces.
  while (!r.empty() && r.back() == ' ')
    r.pop_back();
  size_t b = r.find_first_not_of(' ');
  return b == std::string::npos ? std::string() : r.substr(b);
}

} // namespace

int main(int argc, char **argv) {
  Problem pr;
  int threads = 1, reps = 10;
  bool doSelfcheck = false;
  std::string parallel;
  std::vector<int64_t> positional;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *what) -> int64_t {
      if (i + 1 >= argc)
        usage((std::string("missing value for ") + what).c_str());
      return parsePositive(argv[++i], what);
    };
    if (a == "--B" || a == "-B" || a == "--batch")
      pr.B = value("B");
    else if (a == "--H" || a == "-H" || a == "--heads")
      pr.H = value("H");
    else if (a == "--S" || a == "-S" || a == "--seq")
      pr.S = value("S");
    else if (a == "--D" || a == "-D" || a == "--dim")
      pr.D = value("D");
    else if (a == "--causal")
      pr.causal = true;
    else if (a == "--threads")
      threads = (int)value("threads");
    else if (a == "--reps")
      reps = (int)value("reps");
    else if (a == "--parallel") {
      if (i + 1 >= argc)
        usage("missing value for --parallel");
      parallel = argv[++i];
      if (parallel != "heads" && parallel != "blas")
        usage("--parallel takes heads or blas");
    } else if (a == "--selfcheck")
      doSelfcheck = true;
    else if (a == "-h" || a == "--help")
      usage(nullptr);
    else if (!a.empty() && a[0] != '-')
      positional.push_back(parsePositive(argv[i], "positional size"));
    else
      usage(("unknown option " + a).c_str());
  }
  if (!positional.empty()) {
    if (positional.size() != 4)
      usage("give all four of B H S D positionally");
    pr.B = positional[0];
    pr.H = positional[1];
    pr.S = positional[2];
    pr.D = positional[3];
  }
  gThreads = threads;
  if (doSelfcheck)
    return selfcheck(threads);
  if (parallel.empty())
    parallel = pr.bh() >= threads ? "heads" : "blas";
  Runner run(pr, parallel == "heads" ? Parallel::Heads : Parallel::Blas,
             threads);

  const size_t n = pr.qkvElems();
  const size_t pAll = (size_t)(pr.bh() * pr.S * pr.S);
  std::vector<float> q(n), k(n), v(n), o(n), dO(n), dQ(n), dK(n), dV(n);
  std::vector<float> P(pAll);
  fillRandom(q, 1);
  fillRandom(k, 2);
  fillRandom(v, 3);
  fillRandom(dO, 4);

  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  auto runFwd = [&] {
    run.forward(q.data(), k.data(), v.data(), o.data(), nullptr, false);
  };
  auto runFwdBwd = [&] {
    run.forward(q.data(), k.data(), v.data(), o.data(), P.data(), true);
    run.backward(q.data(), k.data(), v.data(), o.data(), P.data(), dO.data(),
                 dQ.data(), dK.data(), dV.data());
  };

  std::vector<double> tf, tfb;
  for (int w = 0; w < 2; ++w)
    runFwd();
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    runFwd();
    tf.push_back(ms(t0, Clock::now()));
  }
  for (int w = 0; w < 2; ++w)
    runFwdBwd();
  for (int r = 0; r < reps; ++r) {
    auto t0 = Clock::now();
    runFwdBwd();
    tfb.push_back(ms(t0, Clock::now()));
  }

  // Sanity: the output must be finite.
  for (size_t i = 0; i < n; i += 97)
    if (!std::isfinite(o[i]) || !std::isfinite(dQ[i])) {
      std::fprintf(stderr, "attnc-bench-openblas: non-finite result\n");
      return 1;
    }

  // FLOPs: 4*B*H*S*S*D forward (two matmuls); causal counts the unmasked
  // pairs S*(S+1)/2; backward = 2.5 x forward.
  const double pairs = pr.causal ? (double)pr.S * (double)(pr.S + 1) / 2.0
                                 : (double)pr.S * (double)pr.S;
  const double fwdFlops = 4.0 * (double)pr.B * (double)pr.H * (double)pr.D *
                          pairs;
  const double fbFlops = 3.5 * fwdFlops;
  double mf = median(tf), mfb = median(tfb);

  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double rssMb = (double)ru.ru_maxrss / 1024.0; // ru_maxrss is in KiB on Linux

  std::printf(
      "{\"impl\":\"openblas\",\"B\":%lld,\"H\":%lld,\"S\":%lld,\"D\":%lld,"
      "\"causal\":%s,\"threads\":%d,\"parallel\":\"%s\",\"reps\":%d,"
      "\"forward\":{\"median_ms\":%.4f,\"gflops\":%.3f},"
      "\"forward_backward\":{\"median_ms\":%.4f,\"gflops\":%.3f},"
      "\"peak_rss_mb\":%.1f,\"openblas_core\":\"%s\","
      "\"openblas_config\":\"%s\"}\n",
      (long long)pr.B, (long long)pr.H, (long long)pr.S, (long long)pr.D,
      pr.causal ? "true" : "false", threads, parallel.c_str(), reps, mf, fwdFlops / (mf * 1e6),
      mfb, fbFlops / (mfb * 1e6), rssMb,
      jsonEscape(openblas_get_corename()).c_str(),
      jsonEscape(openblas_get_config()).c_str());
  return 0;
}
