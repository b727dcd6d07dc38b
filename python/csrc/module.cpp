// module.cpp — weft._torch_ext: the process groups as Python classes.
// weft/torch/__init__.py registers the backend with torch.distributed.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "pg_weft.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_torch_ext, m) {
  m.doc() = "Weft's torch.distributed process groups (see weft.torch)";
  py::object pg = py::module::import("torch.distributed").attr("ProcessGroup");
  (void)pg; // the base class must be registered before ours

  py::class_<
      weft_torch::ProcessGroupWeft,
      c10d::ProcessGroup,
      c10::intrusive_ptr<weft_torch::ProcessGroupWeft>>(m, "ProcessGroupWeft")
      .def(
          py::init<
              const c10::intrusive_ptr<c10d::Store>&,
              int,
              int,
              std::chrono::milliseconds>(),
          py::arg("store"),
          py::arg("rank"),
          py::arg("size"),
          py::arg("timeout"),
          // Joining blocks until every rank has come: let the others run.
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_weft_describe",
          &weft_torch::ProcessGroupWeft::describe,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_weft_dump",
          &weft_torch::ProcessGroupWeft::dump,
          py::arg("path"),
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_weft_revoke",
          &weft_torch::ProcessGroupWeft::revoke,
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_weft_shrink",
          &weft_torch::ProcessGroupWeft::shrink,
          py::arg("exclude"),
          py::arg("abort"),
          // Collective and blocking: the other ranks must run.
          py::call_guard<py::gil_scoped_release>())
      .def(
          "_weft_failed_ranks",
          &weft_torch::ProcessGroupWeft::failed_ranks,
          py::call_guard<py::gil_scoped_release>());

  py::class_<
      weft_torch::ProcessGroupNull,
      c10d::ProcessGroup,
      c10::intrusive_ptr<weft_torch::ProcessGroupNull>>(m, "ProcessGroupNull")
      .def(py::init<int, int>(), py::arg("rank"), py::arg("size"));
}
