#!/usr/bin/env python3
"""Generates the op table from the med dialect's ODS (include/med/OpTable.h).

Reads the records that `llvm-tblgen --dump-json` prints for include/med/IR/MedOps.td and
writes, for every op of the plan (the Med_Op fields `flops`, `wideOperands`, `inPlan`,
`planAttributes` and the op's own arguments, results and traits):

  OpTable.inc      plain C++: MED_OP(kind, name) entries and the schema table (runtime, tools)
  OpPlanWriter.inc MLIR C++: the artifact serializer's case for each op (lib/Target/Artifact.cpp)
  OpClasses.inc    MLIR C++: the ops' classes, a list for llvm::TypeSwitch
  OpTable.md       the op table of the docs (docs/op-table.md is this file)

Fails, naming the op, when a fact is missing: a FLOP rule it cannot read, no decision on
differentiability (GradientOpInterface or NotDifferentiable), an attribute type the plan
cannot carry without `planAttributes`, or a wide operand the op does not have.
"""
import argparse
import json
import re
import subprocess
import textwrap
import sys


class TableError(Exception):
    pass


def camel(name):
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def kind_name(cls):
    base = cls[len("Med_"):] if cls.startswith("Med_") else cls
    return base[:-2] if base.endswith("Op") else base


ATTR_TYPES = {
    "::llvm::APFloat": ("Float", "{v}.convertToDouble()"),
    "uint64_t": ("Int", "int64_t({v})"),
    "int64_t": ("Int", "int64_t({v})"),
    "uint32_t": ("Int", "int64_t({v})"),
    "int32_t": ("Int", "int64_t({v})"),
    "bool": ("Bool", "bool({v})"),
    "::llvm::StringRef": ("String", "{v}.str()"),
    "::llvm::ArrayRef<int64_t>": ("Ints", "json::Array({v})"),
    "::llvm::ArrayRef<double>": ("Floats", "json::Array({v})"),
}


PLAN_TYPES = {"int": "Int", "float": "Float", "bool": "Bool", "string": "String",
              "ints": "Ints", "floats": "Floats"}


def enum_values(rec, records):
    """The spellings of an enum attribute's cases, or None."""
    seen = set()
    while isinstance(rec, dict) and id(rec) not in seen:
        seen.add(id(rec))
        if rec.get("enumerants"):
            return [records[e["def"]]["str"] for e in rec["enumerants"]]
        nxt = rec.get("enum") or rec.get("baseAttr")
        rec = records.get(nxt["def"]) if isinstance(nxt, dict) else None
    return None


def attr_info(rec, records, op):
    """(AttrType, C++ expression writing value `{v}`, optional) of an ODS attribute."""
    rt = (rec.get("returnType") or "").strip()
    optional = bool(rec.get("isOptional"))
    m = re.fullmatch(r"::std::optional<\s*(.*?)\s*>", rt)
    if m:
        rt = m.group(1)
        optional = True
    if rt in ATTR_TYPES:
        t, expr = ATTR_TYPES[rt]
        return t, expr, optional
    if rt.startswith("::mlir::med::"):  # an enum of the dialect: its spelling
        return "String", "stringifyEnum({v}).str()", optional
    return "Other", None, optional


def operand_info(rec, records):
    """(arity, label) of an ODS operand constraint."""
    sc = rec.get("!superclasses", [])
    arity = "Variadic" if "Variadic" in sc else "Optional" if "Optional" in sc else "One"
    base = rec
    if arity != "One" and isinstance(rec.get("baseType"), dict):
        base = records[rec["baseType"]["def"]]
    # Labels (or keys): any operand that is not restricted to floating-point values.
    summary = (base.get("summary") or "").lower()
    label = not ("floating-point" in summary and "integer" not in summary)
    return arity, label


def parse_flops(text, op_name, operand_names):
    text = text.strip()
    keywords = {"none": "None", "conv": "Conv", "conv_transpose": "ConvTranspose",
                "conv_grad_weight": "ConvGradWeight", "fusion": "Fusion"}
    if text in keywords:
        return keywords[text], 0.0, ""
    m = re.fullmatch(r"([0-9.]+)(?:\s+per\s+(\w+))?", text)
    if not m:
        raise TableError(f"op '{op_name}': flops = \"{text}\" is not a FLOP rule (none, conv, "
                         "conv_transpose, conv_grad_weight, fusion, N, or N per OPERAND)")
    operand = m.group(2) or ""
    if operand and operand not in operand_names:
        raise TableError(f"op '{op_name}': flops counts per element of '{operand}', which is "
                         f"not an operand (operands: {', '.join(operand_names) or 'none'})")
    return "PerElement", float(m.group(1)), operand


def collect(records):
    ops = []
    for cls, rec in records.items():
        if not isinstance(rec, dict) or "Op" not in rec.get("!superclasses", []):
            continue
        if (rec.get("opDialect") or {}).get("def") != "Med_Dialect":
            continue
        name = rec["opName"]
        if not rec.get("inPlan", 1):
            continue
        operands, attrs = [], []
        for arg, argname in rec["arguments"]["args"]:
            a = records.get(arg["def"], {})
            sc = a.get("!superclasses", [])
            if "Attr" in sc:
                t, expr, optional = attr_info(a, records, name)
                attrs.append(dict(name=argname, type=t, expr=expr, optional=optional,
                                  ods_optional=optional, getter="get" + camel(argname),
                                  values=enum_values(a, records) if t == "String" else None))
            elif "TypeConstraint" in sc:
                arity, label = operand_info(a, records)
                operands.append(dict(name=argname, arity=arity, label=label,
                                     getter="get" + camel(argname)))
            else:
                raise TableError(f"op '{name}': argument '{argname}' is neither an operand nor an attribute")
        results = rec["results"]["args"]
        variadic = any("Variadic" in records.get(r[0]["def"], {}).get("!superclasses", [])
                       for r in results)
        traits = [records.get(t["def"], {}) for t in rec.get("traits", [])]
        grad = any(t.get("cppInterfaceName") == "GradientOpInterface" for t in traits)
        nondiff = any(t.get("trait") == "NotDifferentiable" for t in traits)
        if grad == nondiff:
            raise TableError(f"op '{name}': declare GradientOpInterface (a gradient rule) or "
                             "Med_NotDifferentiable, exactly one")
        names = [o["name"] for o in operands]
        wide = rec.get("wideOperands") or []
        for w in wide:
            if w not in names:
                raise TableError(f"op '{name}': wideOperands names '{w}', which is not an operand")
        for o in operands:
            o["wide"] = o["name"] in wide
        custom = textwrap.dedent(rec.get("planAttributes") or "").strip("\n")
        # Attributes the custom code writes: ODS ones become always present (and keep their
        # type unless one is given), others are added with the type given ("name:ints").
        written = {}
        for entry in rec.get("planAttributeNames") or []:
            aname, _, atype = entry.partition(":")
            written[aname] = PLAN_TYPES.get(atype)
            if atype and written[aname] is None:
                raise TableError(f"op '{name}': planAttributeNames '{entry}': the type is one "
                                 f"of {', '.join(PLAN_TYPES)}")
        if name == "fusion":  # its plan attributes are the template and the body's entry
            attrs = []
        for a in attrs:
            if a["name"] in written:
                a["optional"] = False
                a["type"] = written.pop(a["name"]) or a["type"]
            if a["type"] == "Other":
                raise TableError(f"op '{name}': attribute '{a['name']}' has no plan form; write "
                                 "it in `planAttributes` and name it with its plan type in "
                                 "`planAttributeNames`")
            if a["type"] == "Bool":  # written always (absent unit attributes as false)
                a["optional"] = False
        for aname, atype in written.items():
            if atype is None:
                raise TableError(f"op '{name}': planAttributeNames '{aname}' is no ODS attribute: "
                                 "give its plan type ('name:ints')")
            attrs.append(dict(name=aname, type=atype, expr=None, optional=False, custom=True))
        rule, per, flop_operand = parse_flops(rec.get("flops") or "1", name, names)
        shape_rule = (rec.get("shapeRule") or "").strip()
        for ref in re.findall(r"\$(\w+)", shape_rule):
            if ref not in names and ref not in [a["name"] for a in attrs]:
                raise TableError(f"op '{name}': shapeRule names '${ref}', which is no operand or "
                                 "attribute")
        traits_names = [t.get("cppInterfaceName") for t in traits]
        ops.append(dict(cls=cls[len("Med_"):] if cls.startswith("Med_") else cls,
                        kind=kind_name(cls), name=name, summary=rec.get("summary") or "",
                        operands=operands, attrs=attrs, variadic=variadic,
                        num_results=len(results), differentiable=grad, rule=rule, per=per,
                        flop_operand=flop_operand, custom=custom, shape_rule=shape_rule,
                        family=rec.get("family") or "elementwise",
                        normalization="NormalizationOpInterface" in traits_names))
    if not ops:
        raise TableError("no med ops in the records")
    return sorted(ops, key=lambda o: o["name"])


def cstr(s):
    return json.dumps(s)


def op_table(ops):
    out = ["// Generated by tools/med-tblgen/gen_op_table.py from the med dialect's ODS. Do not edit.",
           "#ifdef MED_OP"]
    out += [f"MED_OP({o['kind']}, {cstr(o['name'])})" for o in ops]
    out += ["#else"]
    for o in ops:
        operands = ", ".join(
            f"{{{cstr(x['name'])}, Arity::{x['arity']}, {str(x['label']).lower()}, "
            f"{str(x['wide']).lower()}}}" for x in o["operands"])
        def values(a):
            return "{" + ", ".join(cstr(v) for v in a.get("values") or []) + "}"
        attrs = [f"{{{cstr(a['name'])}, AttrType::{a['type']}, {str(a['optional']).lower()}, "
                 f"{values(a)}}}" for a in o["attrs"]]
        results = -1 if o["variadic"] else o["num_results"]
        out.append(f"{{OpKind::{o['kind']}, {cstr(o['name'])}, {cstr(o['summary'])},\n"
                   f" {{{operands}}},\n {{{', '.join(attrs)}}},\n"
                   f" {results}, {str(o['differentiable']).lower()}, FlopRule::{o['rule']}, "
                   f"{o['per']!r}, {cstr(o['flop_operand'])}, {cstr(o['family'])}}},")
    out.append("#endif")
    return "\n".join(out) + "\n"


def plan_writer(ops):
    out = ["// Generated by tools/med-tblgen/gen_op_table.py from the med dialect's ODS. Do not edit.",
           "// The plan's operand groups and attributes of each op, for PlanWriter::op.",
           "// clang-format off"]
    for o in ops:
        if o["name"] == "fusion":  # its body goes to the fusion table (Artifact.cpp)
            continue
        lines = [f".Case<{o['cls']}>([&]({o['cls']} o) {{"]
        for x in o["operands"]:
            if x["arity"] == "Optional":
                lines.append(f"  operands[{cstr(x['name'])}] = optional(o.{x['getter']}());")
            else:
                lines.append(f"  operands[{cstr(x['name'])}] = group(o.{x['getter']}());")
        for a in o["attrs"]:
            if a.get("custom") or a["expr"] is None:  # planAttributes writes it
                continue
            value = a["expr"].format(v="(*v)")
            if a["ods_optional"] and a["type"] != "Bool":
                lines.append(f"  if (auto v = o.{a['getter']}())")
                lines.append(f"    attrs[{cstr(a['name'])}] = {value};")
            else:
                value = a["expr"].format(v=f"o.{a['getter']}()")
                lines.append(f"  attrs[{cstr(a['name'])}] = {value};")
        if o["custom"]:
            body = [l for l in o["custom"].splitlines() if l.strip()]
            indent = min(len(l) - len(l.lstrip()) for l in body)
            lines += ["  " + l[indent:].rstrip() for l in body]
        lines.append("  return true; })")
        out += lines
    out.append("// clang-format on")
    return "\n".join(out) + "\n"


def render_rule(o, side):
    """The op's shapeRule with each `$name` as the MLIR adaptor (side 'mlir') or the plan's
    OpView (side 'plan') gives it."""
    operands = {x["name"]: x for x in o["operands"]}
    attrs = {a["name"]: a for a in o["attrs"]}

    def arg(m):
        name, mod = m.group(1), m.group(2)
        if name in operands:
            x = operands[name]
            get = f"adaptor.{x['getter']}()"
            if x["arity"] == "Variadic":
                return f"r.types({get})" if side == "mlir" else f'v.all("{name}")'
            if x["arity"] == "Optional" or mod == "*":
                return f"Rule::ptr(r.optional({get}))" if side == "mlir" else f'ptr(v.optional("{name}"))'
            return f"r.type({get})" if side == "mlir" else f'v.in("{name}")'
        a = attrs[name]
        get = f"adaptor.{a['getter']}()"
        t = a["type"]
        if side == "plan":
            plain = {"Int": f'v.op.intAttr("{name}")', "Float": f'v.op.floatAttr("{name}")',
                     "Bool": f'v.op.boolAttr("{name}")', "Ints": f'v.op.intsAttr("{name}")',
                     "Floats": f'v.op.floatsAttr("{name}")'}
            if t == "String":
                allowed = ", ".join(cstr(x) for x in a.get("values") or [])
                value = f'v.oneOf("{name}", {{{allowed}}})' if allowed else f'v.op.strAttr("{name}")'
            else:
                value = plain[t]
            if a["ods_optional"] and t != "Bool" and mod != "[]":
                if t != "Ints":
                    raise TableError(f"op '{o['name']}': shapeRule takes optional attribute "
                                     f"'{name}' of a type it cannot pass")
                return f'ptr(v.optionalInts("{name}"))'
            return value
        plain = {"Int": f"static_cast<int64_t>({get})", "Float": f"{get}.convertToDouble()",
                 "Bool": f"static_cast<bool>({get})", "Ints": f"Rule::dims({get})",
                 "Floats": f"std::vector<double>({get}.begin(), {get}.end())",
                 "String": f"stringifyEnum({get}).str()"}
        if a["ods_optional"] and t != "Bool":
            if t != "Ints":
                raise TableError(f"op '{o['name']}': shapeRule takes optional attribute '{name}' "
                                 "of a type it cannot pass")
            return f"Rule::dims({get}.value_or(ArrayRef<int64_t>()))" if mod == "[]" else \
                f"Rule::ptr(Rule::optionalDims({get}))"
        return plain[t]

    return re.sub(r"\$(\w+)(\*|\[\])?", arg, o["shape_rule"])


def mlir_definitions(ops):
    out = ["// Generated by tools/med-tblgen/gen_op_table.py from the med dialect's ODS. Do not edit.",
           "// Each op's shape rule (ODS `shapeRule`) and the operands it reads in f32 (ODS",
           "// `wideOperands`), for lib/IR/MedOps.cpp."]
    for o in ops:
        if o["shape_rule"]:
            out += [f"LogicalResult {o['cls']}::inferShapes(MLIRContext *ctx, std::optional<Location> loc,",
                    f"    Adaptor adaptor, SmallVectorImpl<Type> &out) {{",
                    "  Rule r{ctx, loc, getOperationName()};",
                    "  shape::Types types;",
                    f"  return r.verdict(shape::{render_rule(o, 'mlir')[:-1]}, types), types, out);",
                    "}", ""]
        if o["normalization"]:
            wide = [x for x in o["operands"] if x["wide"]]
            test = " ||\n         ".join(f"index == {x['getter']}Mutable().getOperandNumber()"
                                         for x in wide) or "false"
            out += [f"bool {o['cls']}::readsF32Operand(unsigned {'index' if wide else ''}) {{",
                    f"  return {test};", "}", ""]
    return "\n".join(out) + "\n"


def plan_rules(ops):
    out = ["// Generated by tools/med-tblgen/gen_op_table.py from the med dialect's ODS. Do not edit.",
           "// Each op's shape rule (ODS `shapeRule`) on the plan, for runtime/src/artifact/PlanVerifier.cpp."]
    for o in ops:
        if o["shape_rule"]:
            out += [f'm["{o["name"]}"] = [](const OpView &v, shape::Types &out) {{',
                    f"  return shape::{render_rule(o, 'plan')[:-1]}, out);", "};"]
    return "\n".join(out) + "\n"


def op_classes(ops):
    return ("// Generated by tools/med-tblgen/gen_op_table.py. Do not edit.\n"
            "// The C++ classes of the plan's ops, as a list of TypeSwitch cases.\n"
            + ",\n".join(o["cls"] for o in ops) + "\n")


def markdown(ops):
    out = ["<!-- Generated by tools/med-tblgen/gen_op_table.py from the med dialect's ODS. "
           "Do not edit; scripts/update-docs.sh refreshes it. -->",
           "# The op table", "",
           "What the runtime and the tools know of each op, as written in its ODS definition "
           "(`include/med/IR/*.td`) and generated into `include/med/OpTable.inc`. Operands: `?` "
           "optional, `...` variadic, `(labels)` may hold integers, `(f32)` read in f32 under "
           "mixed precision. FLOPs: per element of result 0 unless an operand is named.", "",
           "| op | operands | attributes | results | FLOPs | gradient |", "|---|---|---|---|---|---|"]
    for o in ops:
        def operand(x):
            s = x["name"] + ("?" if x["arity"] == "Optional" else "..." if x["arity"] == "Variadic" else "")
            return s + (" (labels)" if x["label"] else "") + (" (f32)" if x["wide"] else "")
        attrs = [f"{a['name']}: {a['type'].lower()}" + ("?" if a["optional"] else "")
                 for a in o["attrs"]]
        rule = {"None": "none", "Conv": "2·MACs (+ bias)", "ConvTranspose": "2·MACs over the input (+ bias)",
                "ConvGradWeight": "2·MACs", "Fusion": "its body's"}.get(o["rule"])
        if rule is None:
            rule = f"{o['per']:g}" + (f" per {o['flop_operand']}" if o["flop_operand"] else "")
        results = "variadic" if o["variadic"] else str(o["num_results"])
        out.append(f"| `{o['name']}` | {', '.join(map(operand, o['operands'])) or '—'} | "
                   f"{', '.join(attrs) or '—'} | {results} | {rule} | "
                   f"{'yes' if o['differentiable'] else 'no'} |")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("td", help="the dialect's ODS (include/med/IR/MedOps.td)")
    p.add_argument("--tblgen", default="llvm-tblgen")
    p.add_argument("-I", dest="includes", action="append", default=[])
    p.add_argument("-D", dest="defines", action="append", default=[])
    p.add_argument("--json", help="records already dumped by llvm-tblgen --dump-json")
    p.add_argument("--table", help="write OpTable.inc here")
    p.add_argument("--plan-writer", help="write OpPlanWriter.inc here")
    p.add_argument("--markdown", help="write OpTable.md here")
    p.add_argument("--classes", help="write OpClasses.inc here")
    p.add_argument("--mlir-definitions", help="write OpDefinitions.inc here")
    p.add_argument("--plan-rules", help="write PlanShapeRules.inc here")
    args = p.parse_args()
    if args.json:
        text = open(args.json).read()
    else:
        cmd = [args.tblgen, "--dump-json", args.td] + [f"-I{i}" for i in args.includes] + \
              [f"-D{d}" for d in args.defines]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode:
            sys.stderr.write(run.stderr)
            sys.exit(f"gen_op_table: {' '.join(cmd)} failed")
        text = run.stdout
    try:
        ops = collect(json.loads(text))
        outputs = []
        for path, make in ((args.table, op_table), (args.plan_writer, plan_writer), (args.markdown, markdown),
                       (args.classes, op_classes), (args.mlir_definitions, mlir_definitions),
                       (args.plan_rules, plan_rules)):
            if path:
                outputs.append((path, make(ops)))
    except TableError as e:
        sys.exit(f"gen_op_table: {args.td}: {e}")
    for path, content in outputs:
        try:
            if open(path).read() == content:
                continue  # unchanged: no rebuild of what includes it
        except OSError:
            pass
        with open(path, "w") as f:
            f.write(content)


if __name__ == "__main__":
    main()
