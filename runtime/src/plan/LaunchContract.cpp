//===- LaunchContract.cpp - op signatures and launch roles (medc and medrun) ----------===//
#include "medrun/LaunchContract.h"

#include "medrun/Error.h"

#include <cmath>
#include <cstdio>

namespace medrun {

namespace {

/// A number as text: integral values (of either JSON kind) as integers, others exactly,
/// so that an attribute reads the same however the JSON wrote it.
void number(std::string &out, double v) {
  char buf[40];
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 9e15)
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
  else
    std::snprintf(buf, sizeof buf, "%.17g", v);
  out += buf;
}

void attr(std::string &out, const AttrValue &v) {
  if (auto *i = std::get_if<int64_t>(&v))
    out += std::to_string(*i);
  else if (auto *d = std::get_if<double>(&v))
    number(out, *d);
  else if (auto *b = std::get_if<bool>(&v))
    out += *b ? "true" : "false";
  else if (auto *s = std::get_if<std::string>(&v))
    out += "\"" + *s + "\"";
  else if (auto *l = std::get_if<std::vector<int64_t>>(&v)) {
    out += "[";
    for (int64_t x : *l)
      out += std::to_string(x) + ",";
    out += "]";
  } else if (auto *f = std::get_if<std::vector<double>>(&v)) {
    out += "[";
    for (double x : *f)
      number(out, x), out += ",";
    out += "]";
  }
}

void type(std::string &out, const ValueInfo &v) {
  out += dtypeName(v.dtype);
  out += "/";
  out += dtypeName(v.storage);
  out += shapeStr(v.shape);
}

/// The op as text; `wiring`: with its operand and result ids (inside a fusion body, where
/// they say which op feeds which).
void opText(std::string &out, const Function &fn, const OpInfo &op, bool wiring);

void bodyText(std::string &out, const Function &body) {
  out += "{template " + body.fusionTemplate + " roles";
  for (const auto &[role, index] : body.roles)
    out += " " + role + "=" + std::to_string(index);
  out += " values";
  for (const ValueInfo &v : body.values)
    out += " ", type(out, v);
  out += " inputs";
  for (int id : body.inputs)
    out += " " + std::to_string(id);
  out += " outputs";
  for (int id : body.outputs)
    out += " " + std::to_string(id);
  for (const OpInfo &op : body.ops)
    out += "; ", opText(out, body, op, true);
  out += "}";
}

void opText(std::string &out, const Function &fn, const OpInfo &op, bool wiring) {
  out += op.kind;
  if (op.fp32)
    out += " fp32";
  for (const auto &[name, value] : op.attrs) // a std::map: in name order
    out += " " + name + "=", attr(out, value);
  for (const auto &[name, ids] : op.operands) {
    out += " (" + name;
    for (int id : ids) {
      out += " ";
      if (wiring)
        out += std::to_string(id) + ":";
      type(out, fn.values.at(id));
    }
    out += ")";
  }
  out += " ->";
  for (int id : op.results) {
    out += " ";
    if (wiring)
      out += std::to_string(id) + ":";
    type(out, fn.values.at(id));
  }
  if (op.body)
    out += " ", bodyText(out, *op.body);
}

} // namespace

std::string opSignature(const Function &fn, const OpInfo &op) {
  std::string text;
  opText(text, fn, op, false);
  uint64_t h = 1469598103934665603ull; // FNV-1a
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string launchRole(const Function &fn, const OpInfo &op, int id, size_t scratchBase,
                       const std::vector<int64_t> &scratchBytes) {
  const size_t values = fn.values.size();
  if (id < 0)
    return {};
  if (static_cast<size_t>(id) >= values) {
    size_t k = static_cast<size_t>(id) - values;
    if (k == 0)
      return "status";
    if (k < scratchBase || k >= scratchBytes.size())
      return {};
    return str("scratch ", k - scratchBase, " ", scratchBytes[k]);
  }
  for (const auto &[name, ids] : op.operands)
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] == id)
        return str("operand ", name, " ", i);
  for (size_t i = 0; i < op.results.size(); ++i)
    if (op.results[i] == id)
      return str("result ", i);
  return {};
}

std::string tripleStr(const std::array<uint32_t, 3> &t) {
  return str("[", t[0], ", ", t[1], ", ", t[2], "]");
}

} // namespace medrun
