//===- Constants.cpp - shape arithmetic evaluated at import time -----------------===//
//
// torch.onnx.export writes pads, reshape targets and Resize scales as small graphs of integer
// ops on constants (Constant, Shape of a constant, Gather, Cast, ConstantOfShape, Concat,
// Reshape, Slice, Transpose, Unsqueeze, arithmetic) and, without constant folding, norm
// weights as Unsqueeze of their initializer. These are evaluated here, so that the network's
// ops see plain attributes; an Unsqueeze/Reshape/Squeeze/Identity of an initializer stays a
// view of it, so that it still becomes the parameter of the initializer's name.
//
//===----------------------------------------------------------------------------------===//
#include "Importer.h"

#include "llvm/ADT/StringExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::med::onnx_import;

namespace {

constexpr int64_t kMaxFoldElements = int64_t(1) << 24;
// The most entries a run-time shape followed through Slice and Concat may hold.
constexpr size_t kMaxShapeEntries = 64;

// Row-major strides of `dims`.
std::vector<int64_t> stridesOf(const std::vector<int64_t> &dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (int i = static_cast<int>(dims.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * dims[i + 1];
  return s;
}

// Copies element `from` of `src` to the end of `dst`.
void append(Constant &dst, const Constant &src, int64_t from) {
  if (src.isFloat)
    dst.floats.push_back(src.floats[from]);
  else
    dst.ints.push_back(src.ints[from]);
}

} // namespace

llvm::Error Importer::convertConstant(const onnx::NodeProto &node) {
  const onnx::AttributeProto *value = attribute(node, "value");
  Constant c;
  if (value && value->type() == onnx::AttributeProto::TENSOR) {
    llvm::Expected<Constant> decoded = decode(value->t(), "node '" + node.name() + "' value");
    if (!decoded)
      return decoded.takeError();
    c = std::move(*decoded);
    // A Constant node's tensor lives in the node; decoded now, as the proto is the node's.
    if (llvm::Error e = decodeValues(c, "node '" + node.name() + "' value"))
      return e;
  } else if (const onnx::AttributeProto *f = attribute(node, "value_float")) {
    c.floats = {f->f()};
  } else if (const onnx::AttributeProto *i = attribute(node, "value_int")) {
    c.isFloat = false, c.ints = {i->i()};
  } else if (const onnx::AttributeProto *fs = attribute(node, "value_floats")) {
    c.floats.assign(fs->floats().begin(), fs->floats().end());
    c.dims = {static_cast<int64_t>(c.floats.size())};
  } else if (const onnx::AttributeProto *is = attribute(node, "value_ints")) {
    c.isFloat = false, c.ints.assign(is->ints().begin(), is->ints().end());
    c.dims = {static_cast<int64_t>(c.ints.size())};
  } else {
    return nodeError(node, "a Constant needs a tensor, float or int value (sparse and string "
                           "constants are not supported)");
  }
  defineConstant(node, 0, std::move(c));
  return llvm::Error::success();
}

llvm::Error Importer::convertShape(const onnx::NodeProto &node) {
  if (!hasInput(node, 0))
    return nodeError(node, "input 0 is missing");
  const Entry *e = lookup(node.input(0));
  if (!e)
    return nodeError(node, "no node produces this tensor before it is read", node.input(0));
  std::vector<int64_t> dims;
  if (e->constant) {
    dims = e->constant->dims;
  } else if (e->value) {
    auto type = dyn_cast<RankedTensorType>(e->value.getType());
    if (type && !type.hasStaticShape()) {
      // Batch and spatial sizes are open: only a pattern (GroupNorm's) or a Resize's sizes
      // (with the open sizes where the input's are kept) may read this shape.
      if (node.output_size() > 0) {
        Entry shape{Value(), std::nullopt, true, {}};
        llvm::Expected<int64_t> start = intAttr(node, "start", 0);
        llvm::Expected<int64_t> end = intAttr(node, "end", type.getRank());
        if (!start || !end)
          return start ? end.takeError() : start.takeError();
        int64_t rank = type.getRank();
        int64_t s = std::clamp<int64_t>(*start < 0 ? *start + rank : *start, 0, rank);
        int64_t t = std::clamp<int64_t>(*end < 0 ? *end + rank : *end, 0, rank);
        for (int64_t i = s; i < t; ++i)
          shape.shapeDims.push_back(type.getShape()[i]);
        values[node.output(0)] = std::move(shape);
      }
      return llvm::Error::success();
    }
    if (!type) {
      if (node.output_size() > 0)
        values[node.output(0)] = Entry{Value(), std::nullopt, true};
      return llvm::Error::success();
    }
    dims.assign(type.getShape().begin(), type.getShape().end());
  } else {
    if (node.output_size() > 0)
      values[node.output(0)] = Entry{Value(), std::nullopt, true};
    return llvm::Error::success();
  }
  llvm::Expected<int64_t> start = intAttr(node, "start", 0);
  llvm::Expected<int64_t> end = intAttr(node, "end", static_cast<int64_t>(dims.size()));
  if (!start || !end)
    return start ? end.takeError() : start.takeError();
  int64_t rank = dims.size();
  int64_t s = std::clamp<int64_t>(*start < 0 ? *start + rank : *start, 0, rank);
  int64_t t = std::clamp<int64_t>(*end < 0 ? *end + rank : *end, 0, rank);
  Constant c;
  c.isFloat = false;
  for (int64_t i = s; i < t; ++i)
    c.ints.push_back(dims[i]);
  c.dims = {static_cast<int64_t>(c.ints.size())};
  defineConstant(node, 0, std::move(c));
  return llvm::Error::success();
}

llvm::Expected<bool> Importer::fold(const onnx::NodeProto &node) {
  static const llvm::StringRef foldable[] = {
      "Identity", "Cast",  "Gather",    "Unsqueeze", "Squeeze",         "Concat", "Reshape",
      "Slice",    "Transpose", "Add",   "Sub",       "Mul",             "Div",    "Neg",
      "ConstantOfShape", "Floor", "Sqrt", "Range"};
  const std::string &op = node.op_type();
  if (op == "Constant") {
    if (llvm::Error e = convertConstant(node))
      return std::move(e);
    return true;
  }
  if (op == "Shape")
    return false; // converted by convertShape (it reads a network tensor's type)
  if ((op == "Slice" || op == "Concat") && foldShapeOf(node))
    return true;
  if (!llvm::is_contained(foldable, op) || !hasInput(node, 0) || node.output_size() == 0 ||
      node.output(0).empty())
    return false;
  for (int i = 0; i < node.input_size(); ++i) {
    if (!hasInput(node, i))
      continue;
    const Entry *e = lookup(node.input(i));
    if (!e || !e->constant)
      return false;
    // Arithmetic on a parameter is the network's, not import-time arithmetic.
    if (!e->constant->parameter.empty() && op != "Identity" && op != "Unsqueeze" &&
        op != "Squeeze" && op != "Reshape")
      return false;
  }
  // A view of an initializer (or an Identity of one) stays that parameter; only its shape
  // changes. Identity's output is a parameter of its own (torch.onnx.export deduplicates
  // equal initial values through Identity nodes; each is its own state_dict entry).
  const Constant &first = *lookup(node.input(0))->constant;
  if (!first.parameter.empty() &&
      (op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape")) {
    Constant view = first;
    view.proto = nullptr;
    view.floats.clear();
    if (op == "Identity") {
      view.parameter = node.output(0);
      initializers[node.output(0)] = initializers.lookup(first.parameter);
    } else {
      std::vector<int64_t> dims = first.dims;
      if (op == "Reshape") {
        llvm::Expected<Constant> shape = constantInput(node, 1);
        if (!shape)
          return shape.takeError();
        dims = shape->ints;
        int64_t known = 1, unknown = -1;
        for (size_t i = 0; i < dims.size(); ++i) {
          if (dims[i] == 0 && i < first.dims.size())
            dims[i] = first.dims[i];
          if (dims[i] == -1)
            unknown = i;
          else if (dims[i] > 0)
            known *= dims[i];
        }
        if (unknown >= 0 && known > 0)
          dims[unknown] = first.numElements() / known;
      } else {
        std::vector<int64_t> axes;
        if (hasInput(node, 1)) {
          llvm::Expected<Constant> a = constantInput(node, 1);
          if (!a)
            return a.takeError();
          axes = a->ints;
        }
        if (op == "Unsqueeze") {
          int64_t rank = dims.size() + axes.size();
          std::vector<bool> inserted(rank, false);
          for (int64_t a : axes) {
            int64_t k = a < 0 ? a + rank : a;
            if (k < 0 || k >= rank || inserted[k])
              return nodeError(node, "axis " + llvm::Twine(a) + " is out of range or repeated");
            inserted[k] = true;
          }
          std::vector<int64_t> out;
          size_t j = 0;
          for (int64_t k = 0; k < rank; ++k)
            out.push_back(inserted[k] ? 1 : dims[j++]);
          dims = out;
        } else {
          std::vector<int64_t> out;
          for (size_t k = 0; k < dims.size(); ++k) {
            bool drop = axes.empty() ? dims[k] == 1
                                     : llvm::any_of(axes, [&](int64_t a) {
                                         return (a < 0 ? a + int64_t(dims.size()) : a) == int64_t(k);
                                       });
            if (!drop)
              out.push_back(dims[k]);
          }
          dims = out;
        }
      }
      int64_t n = 1;
      for (int64_t d : dims) {
        if (d < 0 || (d > 0 && n > kMaxFoldElements * 256 / d))
          return nodeError(node, "the target shape is invalid", node.input(0));
        n *= d;
      }
      if (n != first.numElements())
        return nodeError(node, "reshapes " + llvm::Twine(first.numElements()) + " elements to " +
                                   llvm::Twine(n),
                         node.input(0));
      view.dims = dims;
    }
    defineConstant(node, 0, std::move(view));
    return true;
  }

  // Everything else: evaluated on decoded values.
  std::vector<Constant> in;
  for (int i = 0; i < node.input_size(); ++i) {
    if (!hasInput(node, i)) {
      in.emplace_back();
      continue;
    }
    llvm::Expected<Constant> c = constantInput(node, i);
    if (!c)
      return c.takeError();
    if (c->numElements() > kMaxFoldElements)
      return nodeError(node, "a constant of " + llvm::Twine(c->numElements()) +
                                 " elements is too large to evaluate at import time",
                       node.input(i));
    c->parameter.clear();
    in.push_back(std::move(*c));
  }
  const Constant &a = in[0];
  Constant out;
  out.isFloat = a.isFloat;
  auto intList = [&](const Constant &c) { return c.isFloat ? std::vector<int64_t>() : c.ints; };

  if (op == "Identity") {
    out = a;
  } else if (op == "Cast") {
    llvm::Expected<int64_t> to = intAttr(node, "to", onnx::TensorProto::FLOAT);
    if (!to)
      return to.takeError();
    out.dims = a.dims;
    bool toFloat = *to == onnx::TensorProto::FLOAT || *to == onnx::TensorProto::DOUBLE ||
                   *to == onnx::TensorProto::FLOAT16;
    out.isFloat = toFloat;
    for (int64_t k = 0; k < a.numElements(); ++k) {
      if (toFloat)
        out.floats.push_back(a.isFloat ? a.floats[k] : double(a.ints[k]));
      else if (a.isFloat) {
        if (!std::isfinite(a.floats[k]) || std::fabs(a.floats[k]) > 9.2e18)
          return nodeError(node, "casts a value out of the integer range", node.input(0));
        out.ints.push_back(static_cast<int64_t>(a.floats[k]));
      } else
        out.ints.push_back(a.ints[k]);
    }
  } else if (op == "Neg" || op == "Floor" || op == "Sqrt") {
    out = a;
    for (double &v : out.floats)
      v = op == "Neg" ? -v : op == "Floor" ? std::floor(v) : std::sqrt(v);
    for (int64_t &v : out.ints) {
      if (op == "Sqrt")
        return nodeError(node, "Sqrt of an integer tensor", node.input(0));
      v = op == "Neg" ? (v == INT64_MIN ? v : -v) : v;
    }
  } else if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") {
    if (in.size() != 2 || in[1].dims.size() > a.dims.size() + 8)
      return nodeError(node, "needs two inputs");
    const Constant &b = in[1];
    if (a.isFloat != b.isFloat)
      return nodeError(node, "mixes integer and float operands", node.input(1));
    // NumPy broadcasting of the two shapes.
    size_t rank = std::max(a.dims.size(), b.dims.size());
    std::vector<int64_t> dims(rank);
    for (size_t k = 0; k < rank; ++k) {
      int64_t da = k + a.dims.size() >= rank ? a.dims[k + a.dims.size() - rank] : 1;
      int64_t db = k + b.dims.size() >= rank ? b.dims[k + b.dims.size() - rank] : 1;
      if (da != db && da != 1 && db != 1)
        return nodeError(node, "operand shapes do not broadcast", node.input(1));
      dims[k] = da == 1 ? db : da;
    }
    out.dims = dims;
    std::vector<int64_t> so = stridesOf(dims);
    int64_t n = 1;
    for (int64_t d : dims)
      n *= d;
    if (n > kMaxFoldElements)
      return nodeError(node, "the result is too large to evaluate at import time");
    auto index = [&](const Constant &c, int64_t flat) {
      std::vector<int64_t> sc = stridesOf(c.dims);
      int64_t at = 0;
      for (size_t k = 0; k < rank; ++k) {
        int64_t coord = (flat / so[k]) % std::max<int64_t>(dims[k], 1);
        if (k + c.dims.size() >= rank) {
          size_t ck = k + c.dims.size() - rank;
          at += (c.dims[ck] == 1 ? 0 : coord) * sc[ck];
        }
      }
      return at;
    };
    for (int64_t k = 0; k < n; ++k) {
      int64_t ia = index(a, k), ib = index(b, k);
      if (a.isFloat) {
        double x = a.floats[ia], y = b.floats[ib];
        out.floats.push_back(op == "Add" ? x + y : op == "Sub" ? x - y : op == "Mul" ? x * y : x / y);
      } else {
        int64_t x = a.ints[ia], y = b.ints[ib], r = 0;
        if (op == "Div") {
          if (y == 0 || (x == INT64_MIN && y == -1))
            return nodeError(node, "integer division by zero or overflow", node.input(1));
          r = x / y;
        } else if ((op == "Add" && __builtin_add_overflow(x, y, &r)) ||
                   (op == "Sub" && __builtin_sub_overflow(x, y, &r)) ||
                   (op == "Mul" && __builtin_mul_overflow(x, y, &r)))
          return nodeError(node, "integer overflow", node.input(0));
        out.ints.push_back(r);
      }
    }
  } else if (op == "ConstantOfShape") {
    std::vector<int64_t> dims = intList(a);
    int64_t n = 1;
    for (int64_t d : dims) {
      if (d < 0 || (d > 0 && n > kMaxFoldElements / d))
        return nodeError(node, "the shape is negative or too large", node.input(0));
      n *= d;
    }
    Constant fill;
    fill.isFloat = true, fill.floats = {0.0};
    if (const onnx::AttributeProto *v = attribute(node, "value")) {
      if (v->type() != onnx::AttributeProto::TENSOR)
        return nodeError(node, "attribute 'value' must be a tensor");
      llvm::Expected<Constant> f = decode(v->t(), "node '" + node.name() + "' value");
      if (!f)
        return f.takeError();
      fill = std::move(*f);
      if (llvm::Error e = decodeValues(fill, "node '" + node.name() + "' value"))
        return std::move(e);
      if (fill.numElements() != 1)
        return nodeError(node, "attribute 'value' must hold one element");
    }
    out.isFloat = fill.isFloat;
    out.dims = dims;
    for (int64_t k = 0; k < n; ++k)
      append(out, fill, 0);
  } else if (op == "Range") {
    if (in.size() != 3 || a.isFloat)
      return nodeError(node, "only integer Range is evaluated at import time");
    int64_t s = a.ints.at(0), l = in[1].ints.empty() ? 0 : in[1].ints[0],
            d = in[2].ints.empty() ? 0 : in[2].ints[0];
    if (d == 0)
      return nodeError(node, "delta is zero", node.input(2));
    for (int64_t v = s; (d > 0 ? v < l : v > l); v += d) {
      out.ints.push_back(v);
      if (out.ints.size() > size_t(kMaxFoldElements))
        return nodeError(node, "the range is too long");
    }
    out.dims = {static_cast<int64_t>(out.ints.size())};
  } else if (op == "Unsqueeze" || op == "Squeeze" || op == "Reshape") {
    out = a;
    std::vector<int64_t> target = hasInput(node, 1) ? intList(in[1]) : std::vector<int64_t>();
    if (op == "Reshape") {
      int64_t known = 1, unknown = -1;
      for (size_t i = 0; i < target.size(); ++i) {
        if (target[i] == 0 && i < a.dims.size())
          target[i] = a.dims[i];
        if (target[i] == -1) {
          if (unknown >= 0)
            return nodeError(node, "two -1 sizes in the target shape", node.input(1));
          unknown = i;
        } else if (target[i] < 0)
          return nodeError(node, "a negative size in the target shape", node.input(1));
        else if (target[i] > 0 && known > kMaxFoldElements)
          return nodeError(node, "the target shape is too large", node.input(1));
        else
          known *= target[i];
      }
      if (unknown >= 0)
        target[unknown] = known > 0 ? a.numElements() / known : 0;
      out.dims = target;
    } else if (op == "Unsqueeze") {
      int64_t rank = a.dims.size() + target.size();
      std::vector<bool> inserted(rank, false);
      for (int64_t ax : target) {
        int64_t k = ax < 0 ? ax + rank : ax;
        if (k < 0 || k >= rank || inserted[k])
          return nodeError(node, "axis " + llvm::Twine(ax) + " is out of range or repeated",
                           node.input(1));
        inserted[k] = true;
      }
      out.dims.clear();
      size_t j = 0;
      for (int64_t k = 0; k < rank; ++k)
        out.dims.push_back(inserted[k] ? 1 : a.dims[j++]);
    } else {
      out.dims.clear();
      for (size_t k = 0; k < a.dims.size(); ++k) {
        bool drop = target.empty() ? a.dims[k] == 1
                                   : llvm::any_of(target, [&](int64_t ax) {
                                       return (ax < 0 ? ax + int64_t(a.dims.size()) : ax) == int64_t(k);
                                     });
        if (!drop)
          out.dims.push_back(a.dims[k]);
      }
    }
    if (out.numElements() != a.numElements())
      return nodeError(node, "reshapes " + llvm::Twine(a.numElements()) + " elements to " +
                                 llvm::Twine(out.numElements()),
                       node.input(0));
  } else if (op == "Concat") {
    llvm::Expected<int64_t> axisAttr = intAttr(node, "axis", 0);
    if (!axisAttr)
      return axisAttr.takeError();
    int64_t rank = a.dims.size();
    int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
    if (axis < 0 || axis >= rank)
      return nodeError(node, "axis " + llvm::Twine(*axisAttr) + " is out of range");
    out.dims = a.dims;
    out.dims[axis] = 0;
    for (const Constant &c : in) {
      if (c.dims.size() != a.dims.size() || c.isFloat != a.isFloat)
        return nodeError(node, "inputs differ in rank or type");
      for (int64_t k = 0; k < rank; ++k)
        if (k != axis && c.dims[k] != a.dims[k])
          return nodeError(node, "inputs differ in size off the concatenation axis");
      out.dims[axis] += c.dims[axis];
    }
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k)
      outer *= a.dims[k];
    for (int64_t k = axis + 1; k < rank; ++k)
      inner *= a.dims[k];
    for (int64_t o = 0; o < outer; ++o)
      for (const Constant &c : in)
        for (int64_t k = 0; k < c.dims[axis] * inner; ++k)
          append(out, c, o * c.dims[axis] * inner + k);
  } else if (op == "Gather") {
    llvm::Expected<int64_t> axisAttr = intAttr(node, "axis", 0);
    if (!axisAttr)
      return axisAttr.takeError();
    if (in.size() < 2 || in[1].isFloat)
      return nodeError(node, "indices must be integers");
    int64_t rank = a.dims.size();
    int64_t axis = *axisAttr < 0 ? *axisAttr + rank : *axisAttr;
    if (axis < 0 || axis >= rank)
      return nodeError(node, "axis " + llvm::Twine(*axisAttr) + " is out of range");
    const Constant &idx = in[1];
    out.dims.assign(a.dims.begin(), a.dims.begin() + axis);
    out.dims.insert(out.dims.end(), idx.dims.begin(), idx.dims.end());
    out.dims.insert(out.dims.end(), a.dims.begin() + axis + 1, a.dims.end());
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < axis; ++k)
      outer *= a.dims[k];
    for (int64_t k = axis + 1; k < rank; ++k)
      inner *= a.dims[k];
    if (out.numElements() > kMaxFoldElements)
      return nodeError(node, "the result is too large to evaluate at import time");
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t j : idx.ints) {
        int64_t k = j < 0 ? j + a.dims[axis] : j;
        if (k < 0 || k >= a.dims[axis])
          return nodeError(node, "index " + llvm::Twine(j) + " is out of range", node.input(1));
        for (int64_t i = 0; i < inner; ++i)
          append(out, a, (o * a.dims[axis] + k) * inner + i);
      }
  } else if (op == "Slice") {
    if (in.size() < 3)
      return nodeError(node, "needs starts and ends");
    std::vector<int64_t> starts = intList(in[1]), ends = intList(in[2]);
    int64_t rank = a.dims.size();
    std::vector<int64_t> axes, steps;
    if (in.size() > 3 && !in[3].ints.empty())
      axes = in[3].ints;
    else
      for (size_t k = 0; k < starts.size(); ++k)
        axes.push_back(k);
    if (in.size() > 4 && !in[4].ints.empty())
      steps = in[4].ints;
    else
      steps.assign(starts.size(), 1);
    if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
      return nodeError(node, "starts, ends, axes and steps differ in length");
    std::vector<int64_t> lo(rank, 0), step(rank, 1), count(a.dims);
    for (size_t j = 0; j < axes.size(); ++j) {
      int64_t ax = axes[j] < 0 ? axes[j] + rank : axes[j];
      if (ax < 0 || ax >= rank || steps[j] == 0)
        return nodeError(node, "axis out of range or step zero");
      int64_t d = a.dims[ax], s = starts[j], e = ends[j], st = steps[j];
      s = s < 0 ? s + d : s, e = e < 0 ? std::max<int64_t>(e + d, -1) : e;
      if (st > 0) {
        s = std::clamp<int64_t>(s, 0, d), e = std::clamp<int64_t>(e, 0, d);
        count[ax] = e > s ? (e - s + st - 1) / st : 0;
      } else {
        s = std::clamp<int64_t>(s, 0, d - 1), e = std::clamp<int64_t>(e, -1, d - 1);
        count[ax] = s > e ? (s - e - st - 1) / -st : 0;
      }
      lo[ax] = s, step[ax] = st;
    }
    out.dims = count;
    std::vector<int64_t> si = stridesOf(a.dims), so = stridesOf(count);
    for (int64_t k = 0; k < out.numElements(); ++k) {
      int64_t at = 0;
      for (int64_t ax = 0; ax < rank; ++ax)
        at += (lo[ax] + (k / so[ax]) % count[ax] * step[ax]) * si[ax];
      append(out, a, at);
    }
  } else if (op == "Transpose") {
    int64_t rank = a.dims.size();
    llvm::Expected<std::vector<int64_t>> perm = transposePerm(node, rank);
    if (!perm)
      return perm.takeError();
    for (int64_t p : *perm)
      out.dims.push_back(a.dims[p]);
    std::vector<int64_t> si = stridesOf(a.dims), so = stridesOf(out.dims);
    for (int64_t k = 0; k < out.numElements(); ++k) {
      int64_t at = 0;
      for (int64_t j = 0; j < rank; ++j)
        at += (k / so[j]) % out.dims[j] * si[(*perm)[j]];
      append(out, a, at);
    }
  } else {
    return false;
  }
  defineConstant(node, 0, std::move(out));
  return true;
}

// interpolate(size=...) exports its Resize sizes as Concat(Slice(Shape(x), 0, 2), sizes):
// the run-time shape's known sizes are followed through the Slice and the Concat, the open
// ones kept open. Anything else that reads a run-time shape is refused where it is read.
bool Importer::foldShapeOf(const onnx::NodeProto &node) {
  if (node.output_size() == 0 || node.output(0).empty())
    return false;
  auto known = [&](int i) -> const Entry * {
    const Entry *e = hasInput(node, i) ? lookup(node.input(i)) : nullptr;
    return e && e->shapeOf && !e->shapeDims.empty() ? e : nullptr;
  };
  auto ints = [&](int i) -> std::optional<std::vector<int64_t>> {
    const Entry *e = hasInput(node, i) ? lookup(node.input(i)) : nullptr;
    if (!e || !e->constant || !e->constant->parameter.empty() || e->constant->isFloat)
      return std::nullopt;
    Constant c = *e->constant;
    if (c.dims.size() > 1)
      return std::nullopt;
    if (llvm::Error err = decodeValues(c, node.input(i))) {
      llvm::consumeError(std::move(err));
      return std::nullopt;
    }
    return c.ints;
  };
  Entry result{Value(), std::nullopt, true, {}};
  if (node.op_type() == "Slice") {
    const Entry *data = known(0);
    std::optional<std::vector<int64_t>> starts = ints(1), ends = ints(2);
    if (!data || !starts || !ends || starts->size() != 1 || ends->size() != 1)
      return false;
    if (hasInput(node, 3)) {
      std::optional<std::vector<int64_t>> axes = ints(3);
      if (!axes || axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1))
        return false;
    }
    if (hasInput(node, 4)) {
      std::optional<std::vector<int64_t>> steps = ints(4);
      if (!steps || steps->size() != 1 || (*steps)[0] != 1)
        return false;
    }
    const int64_t n = data->shapeDims.size();
    int64_t s = (*starts)[0], t = (*ends)[0];
    s = std::clamp<int64_t>(s < 0 ? s + n : s, 0, n);
    t = std::clamp<int64_t>(t < 0 ? t + n : t, 0, n);
    for (int64_t i = s; i < t; ++i)
      result.shapeDims.push_back(data->shapeDims[i]);
  } else { // Concat along axis 0 of run-time shapes and 1-D integer constants
    if (attribute(node, "axis")) {
      llvm::Expected<int64_t> axis = intAttr(node, "axis", 0);
      if (!axis) {
        llvm::consumeError(axis.takeError());
        return false;
      }
      if (*axis != 0 && *axis != -1)
        return false;
    }
    bool anyShape = false;
    for (int i = 0; i < node.input_size(); ++i) {
      if (const Entry *e = known(i)) {
        anyShape = true;
        llvm::append_range(result.shapeDims, e->shapeDims);
      } else if (std::optional<std::vector<int64_t>> c = ints(i)) {
        llvm::append_range(result.shapeDims, *c);
      } else {
        return false;
      }
      // A shape has a few entries; repeated Concats of one would otherwise grow without bound.
      if (result.shapeDims.size() > kMaxShapeEntries)
        return false;
    }
    if (!anyShape)
      return false;
  }
  if (result.shapeDims.empty())
    return false;
  values[node.output(0)] = std::move(result);
  return true;
}
