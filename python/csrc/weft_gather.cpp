// weft_gather.cpp — c10d's gathers and scatter on Weft's calls: calls
// that only move bytes take any element type (as uint8). A list of
// tensors that lies back to back in one buffer goes to Weft's collective
// on that buffer; any other list goes through a buffer of its own, copied
// once (out after the call, or in before it).
#include <c10/util/Exception.h>

#include "weft_core.hpp"
#include "weft_tensors.hpp"

namespace weft_torch {

using WorkPtr = Core::WorkPtr;

WorkPtr Core::allgather_base(
    at::Tensor& output,
    at::Tensor& input,
    const c10d::AllgatherOptions& opts) {
  check_tensor(input, "_allgather_base", "input");
  check_tensor(output, "_allgather_base", "output");
  same_type(input, output, "_allgather_base");
  TORCH_CHECK(output.numel() == input.numel() * size_, "weft: _allgather_base: output has ",
              output.numel(), " elements, expected ", input.numel() * size_);
  size_t n = nbytes(input);
  char* out = static_cast<char*>(output.data_ptr());
  const void* in = input.data_ptr() == out + rank_ * n ? WEFT_IN_PLACE : input.data_ptr();
  return launch({.type = c10d::OpType::_ALLGATHER_BASE,
                 .name = "_allgather_base",
                 .inputs = {input},
                 .outputs = {output},
                 .keep = {output, input},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_iallgather(in, out, n, WEFT_UINT8, c, r);
                 }},
                 .timeout = opts.timeout});
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
    return launch({.type = c10d::OpType::ALLGATHER,
                   .name = "allgather",
                   .inputs = inputs,
                   .outputs = outs,
                   .keep = keep,
                   .posts = {[=](weft_comm_t c, weft_request_t* r) {
                     return weft_iallgather(src, out, n, WEFT_UINT8, c, r);
                   }},
                   .timeout = opts.timeout});
  }
  // Every rank makes the same Weft call whatever its list looks like:
  // into a buffer of its own here, copied out before the Work completes.
  at::Tensor flat = at::empty({in.numel() * size_}, in.options());
  const void* src = in.data_ptr();
  void* dst = flat.data_ptr();
  size_t n = nbytes(in);
  return launch({.type = c10d::OpType::ALLGATHER,
                 .name = "allgather",
                 .inputs = inputs,
                 .outputs = outs,
                 .keep = {flat, in},
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_iallgather(src, dst, n, WEFT_UINT8, c, r);
                 }},
                 .finish = copy_out(flat, outs),
                 .timeout = opts.timeout});
}

// Every rank's inputs, one after another in one buffer, gathered in one
// Weft call and copied out (as Gloo flattens them): output list r gets
// rank r's inputs. The tensors may differ in type and size, and be empty;
// every rank passes the same shapes (as Gloo wants).
WorkPtr Core::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const char* call = "allgather_coalesced";
  TORCH_CHECK(!inputs.empty(), "weft: ", call, ": the input list is empty");
  TORCH_CHECK(static_cast<int>(outputs.size()) == size_, "weft: ", call, ": ", outputs.size(),
              " output lists, expected ", size_, " (one per rank)");
  std::vector<int64_t> offset; // in bytes, of each input in one rank's block
  int64_t block = 0;
  for (const auto& t : inputs) {
    check_tensor(t, call, "an input");
    offset.push_back(block);
    block += static_cast<int64_t>(nbytes(t));
  }
  for (auto& list : outputs) {
    TORCH_CHECK(list.size() == inputs.size(), "weft: ", call, ": an output list has ",
                list.size(), " tensors, the input list ", inputs.size());
    for (size_t k = 0; k < list.size(); k++) {
      check_tensor(list[k], call, "an output");
      TORCH_CHECK(list[k].scalar_type() == inputs[k].scalar_type() &&
                      list[k].numel() == inputs[k].numel(),
                  "weft: ", call, ": output ", k, " holds a ", list[k].scalar_type(),
                  " tensor of ", list[k].numel(), " elements, input ", k, " a ",
                  inputs[k].scalar_type(), " of ", inputs[k].numel());
    }
  }
  at::Tensor flat = at::empty({block * size_}, at::kByte);
  for (size_t k = 0; k < inputs.size(); k++) // this rank's block, in place
    flat.narrow(0, rank_ * block + offset[k], static_cast<int64_t>(nbytes(inputs[k])))
        .copy_(inputs[k].reshape({-1}).view(at::kByte));
  std::vector<at::Tensor> keep{flat};
  std::vector<at::Tensor> outs;
  for (auto& list : outputs)
    for (auto& t : list)
      keep.push_back(t), outs.push_back(t);
  void* buf = flat.data_ptr();
  size_t n = static_cast<size_t>(block);
  auto finish = [flat, outputs, offset, block] {
    for (size_t r = 0; r < outputs.size(); r++)
      for (size_t k = 0; k < outputs[r].size(); k++) {
        const at::Tensor& t = outputs[r][k];
        t.view({-1}).view(at::kByte).copy_(flat.narrow(
            0, static_cast<int64_t>(r) * block + offset[k], static_cast<int64_t>(nbytes(t))));
      }
  };
  return launch({.type = c10d::OpType::ALLGATHER_COALESCED,
                 .name = call,
                 .inputs = inputs,
                 .outputs = outs,
                 .keep = keep,
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_iallgather(WEFT_IN_PLACE, buf, n, WEFT_UINT8, c, r);
                 }},
                 .finish = finish,
                 .timeout = opts.timeout});
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
    return launch({.type = c10d::OpType::GATHER,
                   .name = "gather",
                   .inputs = inputs,
                   .keep = {in},
                   .posts = {[=](weft_comm_t c, weft_request_t* r) {
                     return weft_igather(p, nullptr, n, WEFT_UINT8, root, c, r);
                   }},
                   .timeout = opts.timeout});
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
  return launch({.type = c10d::OpType::GATHER,
                 .name = "gather",
                 .inputs = inputs,
                 .outputs = outs,
                 .keep = keep,
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_igather(p, out, n, WEFT_UINT8, root, c, r);
                 }},
                 .finish = finish,
                 .timeout = opts.timeout});
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
    return launch({.type = c10d::OpType::SCATTER,
                   .name = "scatter",
                   .outputs = outputs,
                   .keep = {out},
                   .posts = {[=](weft_comm_t c, weft_request_t* r) {
                     return weft_iscatter(nullptr, p, n, WEFT_UINT8, root, c, r);
                   }},
                   .timeout = opts.timeout});
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
  return launch({.type = c10d::OpType::SCATTER,
                 .name = "scatter",
                 .inputs = ins,
                 .outputs = outputs,
                 .keep = keep,
                 .posts = {[=](weft_comm_t c, weft_request_t* r) {
                   return weft_iscatter(in, p, n, WEFT_UINT8, root, c, r);
                 }},
                 .timeout = opts.timeout});
}

} // namespace weft_torch
