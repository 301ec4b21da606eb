#include "plait/kernels/onednn_context.h"

#include <omp.h>

#include <list>
#include <map>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <unordered_map>
#include <utility>

#include "plait/core/error.h"
#include "plait/core/monotonic_clock.h"

namespace plait::kernels {
namespace {

using dt = dnnl::memory::data_type;
using dims = dnnl::memory::dims;

std::string isa_name(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::all: return "all";
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx512_mic: return "avx512_mic";
    case dnnl::cpu_isa::avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
  }
  return "unknown (" + std::to_string(static_cast<int>(isa)) + ")";
}

// A dense row-major (rows, cols) matrix, or its transpose stored (cols, rows).
dnnl::memory::desc matrix(int rows, int cols, dt type, bool transposed) {
  return {dims{rows, cols}, type, transposed ? dims{1, rows} : dims{cols, 1}};
}

std::string describe_shape(const Bf16MatmulShape& s) {
  return std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
         (s.a_transposed ? " A^T" : "") + (s.b_transposed ? " B^T" : "") +
         (s.dst_fp32 ? " fp32 dst" : " bf16 dst") + (s.bias ? " +bias" : "") +
         (s.residual ? " +residual" : "") + (s.accumulate ? " +=dst" : "");
}

}  // namespace

std::string_view name_of(Bf16GemmPath path) {
  return path == Bf16GemmPath::kOneDnn ? "onednn" : "widened-sgemm";
}

struct OneDnnContext::Cache {
  struct Key {
    Bf16MatmulShape shape;
    int threads = 0;
    auto operator<=>(const Key&) const = default;
  };
  struct Entry {
    Key key;
    dnnl::matmul primitive;
    // Memory objects made once; each call only points them at its buffers (set_data_handle).
    dnnl::memory a, b, dst, bias, residual, scratchpad;
    std::size_t scratchpad_bytes = 0;
  };

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::list<Entry> lru;  // most recently used first
  std::map<Key, std::list<Entry>::iterator> index;
};

OneDnnContext::OneDnnContext(MemorySpace& memory, MemoryTracker& tracker, MemoryCategory category,
                             OneDnnContextOptions options)
    : memory_(memory),
      tracker_(tracker),
      category_(category),
      cache_capacity_(options.cache_capacity),
      cache_(std::make_unique<Cache>()) {
  if (cache_capacity_ == 0) throw Error("OneDnnContext: cache_capacity must be at least 1");
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  isa_ = isa_name(isa);
  native_bf16_ = isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  path_ = native_bf16_ && !options.force_fallback ? Bf16GemmPath::kOneDnn
                                                  : Bf16GemmPath::kWidenedSgemm;
}

OneDnnContext::~OneDnnContext() {
  if (workspace_ != nullptr) {
    memory_.deallocate(workspace_, workspace_bytes_);
    tracker_.release(category_, workspace_bytes_);
  }
}

std::string OneDnnContext::describe() const {
  const dnnl_version_t* v = dnnl_version();
  return "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
         std::to_string(v->patch) + ", ISA " + isa_ + (native_bf16_ ? " (native bf16)" : " (no native bf16)") +
         ", path " + std::string(name_of(path_));
}

std::size_t OneDnnContext::cached_primitives() const { return cache_->lru.size(); }

void* OneDnnContext::workspace(std::size_t bytes) {
  if (bytes <= workspace_bytes_) return workspace_;
  tracker_.allocate(category_, bytes);  // throws OutOfMemoryError with nothing changed
  void* block = nullptr;
  try {
    block = memory_.allocate(bytes);
  } catch (...) {
    tracker_.release(category_, bytes);
    throw;
  }
  if (workspace_ != nullptr) {
    memory_.deallocate(workspace_, workspace_bytes_);
    tracker_.release(category_, workspace_bytes_);
  }
  workspace_ = block;
  workspace_bytes_ = bytes;
  return workspace_;
}

void OneDnnContext::execute(const Bf16MatmulShape& s, const Bf16MatmulArgs& args) {
  if (path_ != Bf16GemmPath::kOneDnn) {
    throw Error("OneDnnContext::execute: this context runs the " + std::string(name_of(path_)) +
                " path (oneDNN ISA " + isa_ + ")");
  }
  if (s.m <= 0 || s.n <= 0 || s.k <= 0) {
    throw Error("OneDnnContext::execute: empty matmul " + describe_shape(s));
  }
  Cache& c = *cache_;
  const Cache::Key key{s, omp_get_max_threads()};
  auto found = c.index.find(key);
  if (found != c.index.end()) {
    c.lru.splice(c.lru.begin(), c.lru, found->second);
  } else {
    const double t0 = monotonic_seconds();
    const dt dst_type = s.dst_fp32 ? dt::f32 : dt::bf16;
    const auto a_md = matrix(s.m, s.k, dt::bf16, s.a_transposed);
    const auto b_md = matrix(s.k, s.n, dt::bf16, s.b_transposed);
    const auto dst_md = matrix(s.m, s.n, dst_type, false);
    const auto bias_md = matrix(1, s.n, dt::bf16, false);
    const auto residual_md = matrix(s.m, s.n, dt::bf16, false);
    dnnl::post_ops post_ops;
    // oneDNN applies, in fp32 on the accumulator: bias, then the post-ops in order, then one
    // conversion to dst's type (oneDNN developer guide, "Primitive Attributes: Post-ops").
    if (s.accumulate) post_ops.append_sum(1.0f);
    if (s.residual) post_ops.append_binary(dnnl::algorithm::binary_add, residual_md);
    dnnl::primitive_attr attr;
    attr.set_post_ops(post_ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    Cache::Entry entry;
    entry.key = key;
    try {
      const auto desc = s.bias ? dnnl::matmul::desc(a_md, b_md, bias_md, dst_md)
                               : dnnl::matmul::desc(a_md, b_md, dst_md);
      const dnnl::matmul::primitive_desc pd(desc, attr, c.engine);
      entry.primitive = dnnl::matmul(pd);
      entry.scratchpad_bytes = pd.scratchpad_desc().get_size();
      entry.a = dnnl::memory(a_md, c.engine, DNNL_MEMORY_NONE);
      entry.b = dnnl::memory(b_md, c.engine, DNNL_MEMORY_NONE);
      entry.dst = dnnl::memory(dst_md, c.engine, DNNL_MEMORY_NONE);
      if (s.bias) entry.bias = dnnl::memory(bias_md, c.engine, DNNL_MEMORY_NONE);
      if (s.residual) entry.residual = dnnl::memory(residual_md, c.engine, DNNL_MEMORY_NONE);
      entry.scratchpad = dnnl::memory(pd.scratchpad_desc(), c.engine, DNNL_MEMORY_NONE);
    } catch (const dnnl::error& e) {
      throw Error("oneDNN refused the bf16 matmul " + describe_shape(s) + " on ISA " + isa_ + ": " +
                  e.what());
    }
    if (c.lru.size() >= cache_capacity_) {
      c.index.erase(c.lru.back().key);
      c.lru.pop_back();
    }
    c.lru.push_front(std::move(entry));
    c.index.emplace(key, c.lru.begin());
    ++creations_;
    creation_seconds_ += monotonic_seconds() - t0;
  }

  Cache::Entry& e = c.lru.front();
  // oneDNN reads the inputs only; its API takes non-const handles.
  e.a.set_data_handle(const_cast<bf16*>(args.a));
  e.b.set_data_handle(const_cast<bf16*>(args.b));
  e.dst.set_data_handle(args.dst);
  std::unordered_map<int, dnnl::memory> exec_args{
      {DNNL_ARG_SRC, e.a}, {DNNL_ARG_WEIGHTS, e.b}, {DNNL_ARG_DST, e.dst}};
  if (s.bias) {
    e.bias.set_data_handle(const_cast<bf16*>(args.bias));
    exec_args.emplace(DNNL_ARG_BIAS, e.bias);
  }
  if (s.residual) {
    e.residual.set_data_handle(const_cast<bf16*>(args.residual));
    const int index = s.accumulate ? 1 : 0;  // the binary post-op's position in the chain
    exec_args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1, e.residual);
  }
  if (e.scratchpad_bytes > 0) {
    e.scratchpad.set_data_handle(workspace(e.scratchpad_bytes));
    exec_args.emplace(DNNL_ARG_SCRATCHPAD, e.scratchpad);
  }
  try {
    e.primitive.execute(c.stream, exec_args);
    c.stream.wait();
  } catch (const dnnl::error& err) {
    throw Error("oneDNN bf16 matmul " + describe_shape(s) + " failed: " + err.what());
  }
}

}  // namespace plait::kernels
