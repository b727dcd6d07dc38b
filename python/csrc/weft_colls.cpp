// weft_colls.cpp — c10d's collectives on Weft's calls, on the tensors' own
// memory. Calls that only move bytes take any element type (as uint8);
// reductions take Weft's types. Lists of tensors that lie back to back in
// one buffer go to Weft's collective on that buffer; other lists become
// sends and receives in one Weft group (still without copies), except
// reduce_scatter's inputs, which a reduction needs in one buffer.
#include <numeric>

#include <c10/util/Exception.h>

#include "weft_core.hpp"

namespace weft_torch {

using WorkPtr = Core::WorkPtr;

void check_tensor(const at::Tensor& t, const char* call, const char* what) {
  TORCH_CHECK(
      t.device().is_cpu(), "weft: ", call, ": ", what, " is on ", t.device(),
      "; the weft backend takes CPU tensors");
  TORCH_CHECK(
      t.layout() == c10::kStrided, "weft: ", call, ": ", what, " is a ", t.layout(),
      " tensor; the weft backend takes dense tensors");
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
          " is not supported (SUM, AVG, PRODUCT, MIN, MAX)");
  }
}

namespace {

size_t nbytes(const at::Tensor& t) {
  return t.numel() * t.element_size();
}

const at::Tensor& single(std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(
      tensors.size() == 1, "weft: ", call, " takes one tensor per call, got ", tensors.size(),
      " (all_reduce_coalesced reduces several)");
  check_tensor(tensors[0], call, "the tensor");
  return tensors[0];
}

// Every tensor of @list like @like (type and size), and checked.
void check_list(
    const std::vector<at::Tensor>& list,
    const at::Tensor& like,
    size_t n,
    const char* call,
    const char* what) {
  TORCH_CHECK(list.size() == n, "weft: ", call, ": ", what, " has ", list.size(),
              " tensors, expected ", n, " (one per rank)");
  for (const auto& t : list) {
    check_tensor(t, call, what);
    TORCH_CHECK(
        t.scalar_type() == like.scalar_type() && t.numel() == like.numel(), "weft: ", call,
        ": ", what, " holds a ", t.scalar_type(), " tensor of ", t.numel(), " elements, expected ",
        like.scalar_type(), " of ", like.numel());
  }
}

// The list lies back to back in one buffer, in order.
bool adjacent(const std::vector<at::Tensor>& list) {
  auto* base = static_cast<char*>(list[0].data_ptr());
  for (size_t r = 0; r < list.size(); r++)
    if (static_cast<char*>(list[r].data_ptr()) != base + r * nbytes(list[0]))
      return false;
  return true;
}

void same_type(const at::Tensor& a, const at::Tensor& b, const char* call) {
  TORCH_CHECK(
      a.scalar_type() == b.scalar_type(), "weft: ", call, ": input is ", a.scalar_type(),
      " but output is ", b.scalar_type());
}

// After a call into @flat: its blocks into the list's tensors (runs in the
// thread that completes the call, before the Work completes).
std::function<void()> copy_out(const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  return [flat, outs] {
    int64_t n = outs[0].numel();
    for (size_t r = 0; r < outs.size(); r++)
      outs[r].view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n));
  };
}

int check_root(int64_t root, int size, const char* call) {
  TORCH_CHECK(root >= 0 && root < size, "weft: ", call, ": root ", root, " is not a rank (0..",
              size - 1, ")");
  return static_cast<int>(root);
}

} // namespace

WorkPtr Core::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = single(tensors, "broadcast");
  int root = check_root(opts.rootRank, size_, "broadcast");
  TORCH_CHECK(opts.rootTensor == 0, "weft: broadcast: rootTensor must be 0");
  void* p = t.data_ptr();
  size_t n = nbytes(t);
  const void* send = rank_ == root ? WEFT_IN_PLACE : nullptr;
  return launch(c10d::OpType::BROADCAST, "broadcast", tensors, {t},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_ibroadcast(send, p, n, WEFT_UINT8, root, c, r);
                }});
}

WorkPtr Core::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = single(tensors, "allreduce");
  weft_datatype_t dt = reduce_dtype(t, "allreduce");
  weft_op_t op = reduce_op(opts.reduceOp, "allreduce");
  void* p = t.data_ptr();
  size_t n = t.numel();
  return launch(c10d::OpType::ALLREDUCE, "allreduce", tensors, {t},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_iallreduce(WEFT_IN_PLACE, p, n, dt, op, c, r);
                }});
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
  return launch(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors, tensors,
                posts);
}

WorkPtr Core::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const at::Tensor& t = single(tensors, "reduce");
  int root = check_root(opts.rootRank, size_, "reduce");
  TORCH_CHECK(opts.rootTensor == 0, "weft: reduce: rootTensor must be 0");
  weft_datatype_t dt = reduce_dtype(t, "reduce");
  weft_op_t op = reduce_op(opts.reduceOp, "reduce");
  void* p = t.data_ptr();
  size_t n = t.numel();
  bool is_root = rank_ == root;
  return launch(c10d::OpType::REDUCE, "reduce", tensors, {t},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_ireduce(is_root ? WEFT_IN_PLACE : p, is_root ? p : nullptr, n, dt,
                                      op, root, c, r);
                }});
}

WorkPtr Core::allgather_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::AllgatherOptions&) {
  check_tensor(input, "_allgather_base", "input");
  check_tensor(output, "_allgather_base", "output");
  same_type(input, output, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * size_, "weft: _allgather_base: output has ",
              output.numel(), " elements, expected ", input.numel() * size_);
  size_t n = nbytes(input);
  char* out = static_cast<char*>(output.data_ptr());
  const void* in = input.data_ptr() == out + rank_ * n ? WEFT_IN_PLACE : input.data_ptr();
  return launch(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output}, {output, input},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_iallgather(in, out, n, WEFT_UINT8, c, r);
                }});
}

WorkPtr Core::allgather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = single(inputs, "allgather");
  TORCH_CHECK(outputs.size() == 1, "weft: allgather takes one output list, got ",
              outputs.size());
  std::vector<at::Tensor>& outs = outputs[0];
  check_list(outs, in, size_, "allgather", "the output list");
  if (adjacent(outs)) { // Weft's allgather straight into the list's buffer
    size_t n = nbytes(in);
    char* out = static_cast<char*>(outs[0].data_ptr());
    const void* src = in.data_ptr() == out + rank_ * n ? WEFT_IN_PLACE : in.data_ptr();
    std::vector<at::Tensor> keep(outs);
    keep.push_back(in);
    return launch(c10d::OpType::ALLGATHER, "allgather", outs, keep,
                  {[=](weft_comm_t c, weft_request_t* r) {
                    return weft_iallgather(src, out, n, WEFT_UINT8, c, r);
                  }});
  }
  // Every rank makes the same Weft call whatever its list looks like:
  // into a buffer of its own here, copied out before the Work completes.
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  const void* src = in.data_ptr();
  void* dst = flat.data_ptr();
  size_t n = nbytes(in);
  return launch(c10d::OpType::ALLGATHER, "allgather", outs, {flat, in},
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_iallgather(src, dst, n, WEFT_UINT8, c, r);
                }},
                false, copy_out(flat, outs));
}

WorkPtr Core::gather(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const at::Tensor& in = single(inputs, "gather");
  int root = check_root(opts.rootRank, size_, "gather");
  bool is_root = rank_ == root;
  TORCH_CHECK(outputs.size() == (is_root ? 1u : 0u), "weft: gather: ",
              is_root ? "the root takes one output list" : "only the root takes outputs");
  void* p = in.data_ptr();
  size_t n = nbytes(in);
  if (!is_root)
    return launch(c10d::OpType::GATHER, "gather", {}, {in},
                  {[=](weft_comm_t c, weft_request_t* r) {
                    return weft_igather(p, nullptr, n, WEFT_UINT8, root, c, r);
                  }});
  std::vector<at::Tensor>& outs = outputs[0];
  check_list(outs, in, size_, "gather", "the output list");
  std::vector<at::Tensor> keep(outs);
  keep.push_back(in);
  std::function<void()> finish;
  void* out = outs[0].data_ptr();
  if (!adjacent(outs)) { // the same Weft call as everywhere, into a buffer here
    at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    keep.push_back(flat);
    out = flat.data_ptr();
    finish = copy_out(flat, outs);
  }
  return launch(c10d::OpType::GATHER, "gather", outs, keep,
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_igather(p, out, n, WEFT_UINT8, root, c, r);
                }},
                false, finish);
}

WorkPtr Core::scatter(
    std::vector<at::Tensor>& outputs,
    std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const at::Tensor& out = single(outputs, "scatter");
  int root = check_root(opts.rootRank, size_, "scatter");
  bool is_root = rank_ == root;
  TORCH_CHECK(inputs.size() == (is_root ? 1u : 0u), "weft: scatter: ",
              is_root ? "the root takes one input list" : "only the root takes inputs");
  void* p = out.data_ptr();
  size_t n = nbytes(out);
  if (!is_root)
    return launch(c10d::OpType::SCATTER, "scatter", outputs, {out},
                  {[=](weft_comm_t c, weft_request_t* r) {
                    return weft_iscatter(nullptr, p, n, WEFT_UINT8, root, c, r);
                  }});
  std::vector<at::Tensor>& ins = inputs[0];
  check_list(ins, out, size_, "scatter", "the input list");
  const void* in = ins[0].data_ptr();
  std::vector<at::Tensor> keep(ins);
  keep.push_back(out);
  if (!adjacent(ins)) { // copied into one buffer, here, before the call starts
    at::Tensor flat = at::stack(ins).view({-1});
    keep.push_back(flat);
    in = flat.data_ptr();
  }
  return launch(c10d::OpType::SCATTER, "scatter", outputs, keep,
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_iscatter(in, p, n, WEFT_UINT8, root, c, r);
                }});
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
  return launch(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output},
                {output, input}, {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_ireduce_scatter(in, out, n, dt, op, c, r);
                }});
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
  return launch(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", outputs, keep,
                {[=](weft_comm_t c, weft_request_t* r) {
                  return weft_ireduce_scatter(src, dst, n, dt, op, c, r);
                }});
}

} // namespace weft_torch
