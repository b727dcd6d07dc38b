// weft_tensors.hpp — checks and moves on the tensors of c10d's calls that
// the collectives share (weft_colls.cpp, weft_gather.cpp, weft_p2p.cpp,
// weft_match.cpp). TORCH_CHECK errors name the call and the tensor.
#pragma once

#include <functional>
#include <vector>

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "weft_core.hpp"

namespace weft_torch {

inline size_t nbytes(const at::Tensor& t) {
  return t.numel() * t.element_size();
}

inline const at::Tensor& single(std::vector<at::Tensor>& tensors, const char* call) {
  TORCH_CHECK(
      tensors.size() == 1, "weft: ", call, " takes one tensor per call, got ", tensors.size(),
      " (all_reduce_coalesced reduces several)");
  check_tensor(tensors[0], call, "the tensor");
  return tensors[0];
}

// Every tensor of @list like @like (type and size), and checked.
inline void check_list(
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
inline bool adjacent(const std::vector<at::Tensor>& list) {
  auto* base = static_cast<char*>(list[0].data_ptr());
  for (size_t r = 0; r < list.size(); r++)
    if (static_cast<char*>(list[r].data_ptr()) != base + r * nbytes(list[0]))
      return false;
  return true;
}

inline void same_type(const at::Tensor& a, const at::Tensor& b, const char* call) {
  TORCH_CHECK(
      a.scalar_type() == b.scalar_type(), "weft: ", call, ": input is ", a.scalar_type(),
      " but output is ", b.scalar_type());
}

// After a call into @flat: its blocks into the list's tensors (runs in the
// thread that completes the call, before the Work completes).
inline std::function<void()> copy_out(const at::Tensor& flat, const std::vector<at::Tensor>& outs) {
  return [flat, outs] {
    int64_t n = outs[0].numel();
    for (size_t r = 0; r < outs.size(); r++)
      outs[r].view({-1}).copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n));
  };
}

inline int check_root(int64_t root, int size, const char* call) {
  TORCH_CHECK(root >= 0 && root < size, "weft: ", call, ": root ", root, " is not a rank (0..",
              size - 1, ")");
  return static_cast<int>(root);
}


} // namespace weft_torch
