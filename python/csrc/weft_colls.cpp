// weft_colls.cpp — the reductions and broadcast of c10d on Weft's calls,
// on the tensors' own memory (the gathers are in weft_gather.cpp).
// Reductions take Weft's types; broadcast, which only moves bytes, any
// element type (as uint8). reduce_scatter's input list is copied into one
// buffer unless it already is one: a reduction reads one buffer.
#include <c10/util/Exception.h>

#include "weft_core.hpp"
#include "weft_tensors.hpp"

namespace weft_torch {

using WorkPtr = Core::WorkPtr;

void check_tensor(const at::Tensor& t, const char* call, const char* what) {
  TORCH_CHECK(
      t.device().is_cpu(), "weft: ", call, ": ", what, " is on ", t.device(),
      "; the weft backend takes CPU tensors");
  TORCH_CHECK(
      t.layout() == c10::kStrided, "weft: ", call, ": ", what, " is a ", t.layout(),
      " tensor; the weft backend takes dense tensors (and sparse COO ones in all_reduce with "
      "SUM)");
  TORCH_CHECK(
      t.is_contiguous(), "weft: ", call, ": ", what,
      " is not contiguous; pass tensor.contiguous()");
}

weft_datatype_t reduce_dtype(const at::Tensor& t, const char* call) {
  switch (t.scalar_type()) {
    case at::kChar:
      return WEFT_INT8;
    case at::kByte:
      return WEFT_UINT8;
    case at::kInt:
      return WEFT_INT32;
    case at::kLong:
      return WEFT_INT64;
    case at::kHalf:
      return WEFT_FLOAT16;
    case at::kBFloat16:
      return WEFT_BFLOAT16;
    case at::kFloat:
      return WEFT_FLOAT32;
    case at::kDouble:
      return WEFT_FLOAT64;
    default:
      TORCH_CHECK(
          false, "weft: ", call, ": cannot reduce ", t.scalar_type(),
          " tensors (float32, float64, float16, bfloat16, int8, uint8, int32, int64)");
  }
}

weft_op_t reduce_op(const c10d::ReduceOp& op, const char* call) {
  switch (op.op_) {
    case c10d::ReduceOp::SUM:
      return WEFT_SUM;
    case c10d::ReduceOp::AVG:
      return WEFT_AVG;
    case c10d::ReduceOp::PRODUCT:
      return WEFT_PROD;
    case c10d::ReduceOp::MIN:
      return WEFT_MIN;
    case c10d::ReduceOp::MAX:
      return WEFT_MAX;
    default:
      TORCH_CHECK(
          false, "weft: ", call, ": ReduceOp ", static_cast<int>(op.op_),
          " is not supported here (SUM, AVG, PRODUCT, MIN, MAX; all_reduce and reduce also "
          "take BAND, BOR, BXOR on integer tensors)");
  }
}


namespace {

bool bitwise(const c10d::ReduceOp& op) {
  return op.op_ == c10d::ReduceOp::BAND || op.op_ == c10d::ReduceOp::BOR ||
      op.op_ == c10d::ReduceOp::BXOR;
}

} // namespace

WorkPtr Core::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  int root = check_root(opts.rootRank, size_, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "weft: broadcast: rootTensor must be 0");
  void* p = t.data_ptr();
  size_t n = nbytes(t);
  const void* send = rank_ == root ? WEFT_IN_PLACE : nullptr;
  return launch({.type = c10d::OpType::BROADCAST,
                 .name = "broadcast",
                 .inputs = tensors,
                 .outputs = tensors,
                 .keep = {t},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_ibroadcast(send, p, n, WEFT_UINT8, root, c, r);
                 }},
                 .timeout = opts.timeout});
}

WorkPtr Core::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  if (tensors.size() == 1 && tensors[0].is_sparse())
    return sparse_allreduce(tensors[0], opts);
  const at::Tensor& t = single(tensors, "allreduce");
  if (bitwise(opts.reduceOp))
    return bitwise_reduce(tensors[0], opts.reduceOp, -1, opts.timeout, "allreduce");
  weft_datatype_t dt = reduce_dtype(t, "allreduce");
  weft_op_t op = reduce_op(opts.reduceOp, "allreduce");
  void* p = t.data_ptr();
  size_t n = t.numel();
  return launch({.type = c10d::OpType::ALLREDUCE,
                 .name = "allreduce",
                 .inputs = tensors,
                 .outputs = tensors,
                 .keep = {t},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_iallreduce(WEFT_IN_PLACE, p, n, dt, op, c, r);
                 }},
                 .timeout = opts.timeout});
}

// Each tensor reduced on its own, in place: one Weft call per tensor, one
// Work over all of them (the calls run one after another on the
// communicator, and none waits for a copy).
WorkPtr Core::allreduce_coalesced(
    std::vector<at::Tensor>& tensors,
    const c10d::AllreduceCoalescedOptions& opts) {
  weft_op_t op = reduce_op(opts.reduceOp, "allreduce_coalesced");
  std::vector<Post> posts;
  for (const auto& t : tensors) {
    check_tensor(t, "allreduce_coalesced", "a tensor");
    weft_datatype_t dt = reduce_dtype(t, "allreduce_coalesced");
    void* p = t.data_ptr();
    size_t n = t.numel();
    posts.push_back([=](weft_comm_t c, weft_request_t* r) {
      return weft_iallreduce(WEFT_IN_PLACE, p, n, dt, op, c, r);
    });
  }
  return launch({.type = c10d::OpType::ALLREDUCE_COALESCED,
                 .name = "allreduce_coalesced",
                 .inputs = tensors,
                 .outputs = tensors,
                 .keep = tensors,
                 .posts = posts,
                 .timeout = opts.timeout});
}

// BAND, BOR, BXOR (Gloo's, on integer tensors), which Weft's library does
// not reduce: every rank's bytes gathered into one buffer, folded here
// after the call, into the tensor (on @root only, or everywhere when -1).
// Flags and masks are what these reduce: each rank receives n times the
// tensor, where an all_reduce would move about twice it.
WorkPtr Core::bitwise_reduce(at::Tensor& t, const c10d::ReduceOp& op, int root,
                             std::chrono::milliseconds timeout, const char* call) {
  TORCH_CHECK(!at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()),
              "weft: ", call, ": ReduceOp BAND, BOR and BXOR take integer or bool tensors, not ",
              t.scalar_type());
  int64_t n = static_cast<int64_t>(nbytes(t));
  at::Tensor flat = at::empty({n * size_}, at::kByte);
  flat.narrow(0, rank_ * n, n).copy_(t.reshape({-1}).view(at::kByte));
  void* buf = flat.data_ptr();
  int size = size_;
  bool mine = root < 0 || root == rank_;
  auto fold = [flat, t, op, n, size, mine] {
    if (!mine)
      return;
    at::Tensor acc = flat.narrow(0, 0, n).clone();
    for (int r = 1; r < size; r++) {
      at::Tensor b = flat.narrow(0, r * n, n);
      if (op.op_ == c10d::ReduceOp::BAND)
        acc.bitwise_and_(b);
      else if (op.op_ == c10d::ReduceOp::BOR)
        acc.bitwise_or_(b);
      else
        acc.bitwise_xor_(b);
    }
    t.view({-1}).view(at::kByte).copy_(acc);
  };
  return launch({.type = root < 0 ? c10d::OpType::ALLREDUCE : c10d::OpType::REDUCE,
                 .name = call,
                 .inputs = {t},
                 .outputs = {t},
                 .keep = {t, flat},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_iallgather(WEFT_IN_PLACE, buf, static_cast<size_t>(n),
                                          WEFT_UINT8, c, r);
                 }},
                 .finish = fold,
                 .timeout = timeout});
}

WorkPtr Core::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  int root = check_root(opts.rootRank, size_, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "weft: reduce: rootTensor must be 0");
  if (bitwise(opts.reduceOp))
    return bitwise_reduce(tensors[0], opts.reduceOp, root, opts.timeout, "reduce");
  weft_datatype_t dt = reduce_dtype(t, "reduce");
  weft_op_t op = reduce_op(opts.reduceOp, "reduce");
  void* p = t.data_ptr();
  size_t n = t.numel();
  bool is_root = rank_ == root;
  return launch({.type = c10d::OpType::REDUCE,
                 .name = "reduce",
                 .inputs = tensors,
                 .outputs = tensors,
                 .keep = {t},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_ireduce(is_root ? WEFT_IN_PLACE : p, is_root ? p : nullptr, n,
                                       dt, op, root, c, r);
                 }},
                 .timeout = opts.timeout});
}

WorkPtr Core::reduce_scatter_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::ReduceScatterOptions& opts) {
  check_tensor(input, "_reduce_scatter_base", "input");
  check_tensor(output, "_reduce_scatter_base", "output");
  same_type(input, output, "_reduce_scatter_base");
  TORCH_CHECK(input.numel() == output.numel() * size_, "weft: _reduce_scatter_base: input has ",
              input.numel(), " elements, expected ", output.numel() * size_);
  weft_datatype_t dt = reduce_dtype(input, "_reduce_scatter_base");
  weft_op_t op = reduce_op(opts.reduceOp, "_reduce_scatter_base");
  const void* in = input.data_ptr();
  void* out = output.data_ptr();
  size_t n = output.numel();
  return launch({.type = c10d::OpType::_REDUCE_SCATTER_BASE,
                 .name = "_reduce_scatter_base",
                 .inputs = {input},
                 .outputs = {output},
                 .keep = {output, input},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_ireduce_scatter(in, out, n, dt, op, c, r);
                 }},
                 .timeout = opts.timeout});
}

WorkPtr Core::reduce_scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "reduce_scatter");
  TORCH_CHECK(inputs.size() == 1, "weft: reduce_scatter takes one input list, got ",
              inputs.size());
  check_list(inputs[0], out, size_, "reduce_scatter", "the input list");
  // A reduction reads its input from one buffer: a list that is not
  // already one is copied into one (here, before the call starts).
  std::vector<at::Tensor>& ins = inputs[0];
  std::vector<at::Tensor> keep(ins);
  keep.push_back(out);
  const void* src = ins[0].data_ptr();
  if (!adjacent(ins)) {
    at::Tensor flat = at::stack(ins).view({-1});
    keep.push_back(flat);
    src = flat.data_ptr();
  }
  weft_datatype_t dt = reduce_dtype(out, "reduce_scatter");
  weft_op_t op = reduce_op(opts.reduceOp, "reduce_scatter");
  void* dst = out.data_ptr();
  size_t n = out.numel();
  return launch({.type = c10d::OpType::REDUCE_SCATTER,
                 .name = "reduce_scatter",
                 .inputs = ins,
                 .outputs = outputs,
                 .keep = keep,
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_ireduce_scatter(src, dst, n, dt, op, c, r);
                 }},
                 .timeout = opts.timeout});
}

} // namespace weft_torch
