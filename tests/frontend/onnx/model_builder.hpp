// SPDX-License-Identifier: Apache-2.0
// The ONNX importer's tests build their models with ONNX's protobuf classes: `model_builder`, and
// `run`, which compiles a module and runs its main function.
#pragma once

#include <kiln/compile.hpp>
#include <kiln/frontend/onnx/import.hpp>
#include <kiln/vm/kernels.hpp>
#include <kiln/vm/vm.hpp>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kiln_test {

/// A small graph builder over ONNX's protobuf classes.
struct model_builder {
  ::onnx::ModelProto m;
  explicit model_builder(int opset = 13) {
    m.set_ir_version(8);
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m.mutable_graph()->set_name("g");
  }
  ::onnx::GraphProto& g() { return *m.mutable_graph(); }
  void value_info(::onnx::ValueInfoProto* v, const std::string& name, int type, const std::vector<std::string>& dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(type);
    auto* shape = tt->mutable_shape();
    for (auto& d : dims) {
      auto* dim = shape->add_dim();
      if (!d.empty() && std::isdigit(static_cast<unsigned char>(d[0]))) dim->set_dim_value(std::stoll(d));
      else if (!d.empty()) dim->set_dim_param(d);
    }
  }
  void input(const std::string& name, const std::vector<std::string>& dims, int type = ::onnx::TensorProto::FLOAT) {
    value_info(g().add_input(), name, type, dims);
  }
  void output(const std::string& name, const std::vector<std::string>& dims, int type = ::onnx::TensorProto::FLOAT) {
    value_info(g().add_output(), name, type, dims);
  }
  ::onnx::TensorProto& initializer(const std::string& name, std::vector<std::int64_t> dims, std::vector<float> values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (auto v : values) t->add_float_data(v);
    return *t;
  }
  void ints_initializer(const std::string& name, std::vector<std::int64_t> values) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(std::int64_t(values.size()));
    for (auto v : values) t->add_int64_data(v);
  }
  /// A scalar (rank 0) int64 initializer, as a Gather's index.
  void int_scalar_initializer(const std::string& name, std::int64_t value) {
    auto* t = g().add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_int64_data(value);
  }
  ::onnx::NodeProto& node(const std::string& op, std::vector<std::string> ins, std::vector<std::string> outs, const std::string& name = "") {
    auto* n = g().add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(g().node_size()) : name);
    for (auto& i : ins) n->add_input(i);
    for (auto& o : outs) n->add_output(o);
    return *n;
  }
  static void attr(::onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attr(::onnx::NodeProto& n, const std::string& name, std::vector<std::int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }
  static void attr(::onnx::NodeProto& n, const std::string& name, const char* v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attr_float(::onnx::NodeProto& n, const std::string& name, double v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOAT);
    a->set_f(float(v));
  }
  static void attr_floats(::onnx::NodeProto& n, const std::string& name, std::vector<float> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::FLOATS);
    for (auto x : v) a->add_floats(x);
  }
  static void attr_strings(::onnx::NodeProto& n, const std::string& name, std::vector<std::string> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(::onnx::AttributeProto::STRINGS);
    for (auto& x : v) a->add_strings(x);
  }
  std::vector<std::byte> bytes() const {
    const std::string s = m.SerializeAsString();
    std::vector<std::byte> out(s.size());
    std::memcpy(out.data(), s.data(), s.size());
    return out;
  }
};

inline kiln::runtime::tensor floats(kiln::runtime::shape_vector shape, std::vector<float> v) {
  return kiln::runtime::tensor::from_values<float>(std::move(shape), v);
}

inline kiln::vm::value run(const kiln::ir::ir_module& m, std::vector<kiln::vm::value> args) {
  kiln::vm::virtual_machine machine(kiln::compile(m), {}, kiln::vm::kernel_registry());
  return machine.invoke_span("main", args);
}

}  // namespace kiln_test
