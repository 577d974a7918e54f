"""Generates the C++ side of the operators from their declared signatures: the REGISTER_OP input/attr chains, an
attribute struct with a reader that checks every rule, the run-time checks of scalar inputs, and the docs.

Run at build time by setup.py and by Bazel (a genrule): ``python -m op_spec.codegen OUT.h``. The output is never
committed, so the C++ cannot drift from op_spec/operators.py.
"""

from __future__ import annotations

import sys

from op_spec.operators import ALL, ALL_MULTI
from op_spec.signature import TF_TYPE_NAMES, Attr, MultiOpSignature, OpSignature, Rule

_CPP_TYPES = {"float": "float", "int": "int64_t", "bool": "bool", "float32": "float", "int64": "int64_t",
              "list(int)": "std::vector<int64_t>"}


def _condition(rule: Rule, x: str, type_: str) -> str:
    """A C++ expression that is true when the rule accepts x (false for NaN, as every comparison with NaN is)."""
    if rule.choices:
        return "(" + " || ".join(f"{x} == {c}" for c in rule.choices) + ")"
    is_float = type_ in ("float", "float32")
    if is_float:
        x = f"FlushSubnormal({x})"  # as op_spec.signature.Rule.accepts: whatever the thread's MXCSR says
    terms = []
    if rule.finite:
        terms.append(f"std::isfinite({x})")
    if rule.low is not None:
        terms.append(f"{x} {'>' if rule.low_open else '>='} {_bound(rule.low, is_float)}")
    if rule.high is not None:
        terms.append(f"{x} {'<' if rule.high_open else '<='} {_bound(rule.high, is_float)}")
    return "(" + (" && ".join(terms) or "true") + ")"  # every comparison with NaN is false: NaN is refused


def _bound(value: float, is_float: bool) -> str:
    return f"{value!r}f" if is_float else str(int(value))


def _signature_macro(sig: OpSignature | MultiOpSignature, resource: bool) -> str:
    lines = []
    for i in sig.inputs:
        if i.state:
            kind = "resource" if resource else "Ref(T)"
        else:
            kind = "T" if i.dtype == "T" else TF_TYPE_NAMES[i.dtype]
        lines.append(f'.Input("{i.name}: {"N * " if i.many else ""}{kind}")')
    if not resource:
        lines.append('.Output("out: Ref(T)")')
    if any(i.many for i in sig.inputs):
        lines.append('.Attr("N: int >= 1")')
    lines.append(f'.Attr("T: {{{", ".join(TF_TYPE_NAMES[d] for d in sig.dtypes)}}}")')
    for a in sig.attrs:
        lines.append(f'.Attr("{a.name}: {a.type} = {_attr_default(a)}")')
    name = f"TF_PLUGIN_{_upper(sig.name)}_{'RESOURCE' if resource else 'REF'}_SIGNATURE"
    return f"#define {name} \\\n  " + " \\\n  ".join(lines) + "\n"


def _attr_default(a: Attr) -> str:
    if a.type == "list(int)":
        return "[" + ", ".join(str(int(x)) for x in a.default) + "]"
    if a.type == "bool":
        return "true" if a.default else "false"
    return str(int(a.default)) if a.type == "int" else repr(float(a.default))


def _upper(name: str) -> str:
    return "".join(f"_{c}" if c.isupper() and k else c for k, c in enumerate(name)).upper()


def _attrs_struct(sig: OpSignature | MultiOpSignature) -> str:
    # No defaults here: the registration holds them (from the spec) and the reader always fills every field.
    fields = "\n".join(f"  {_CPP_TYPES[a.type]} {a.name}{{}};" for a in sig.attrs)
    reads = []
    for a in sig.attrs:
        reads.append(f'  TF_RETURN_IF_ERROR(c->GetAttr("{a.name}", &a->{a.name}));')
        if a.rule is not None:
            reads.append(f"  if (!{_condition(a.rule, 'a->' + a.name, a.type)}) {{\n"
                         f'    return absl::InvalidArgumentError(absl::StrCat("{a.name} must be {a.rule.text}, got ", '
                         f"a->{a.name}));\n  }}")
    return (f"struct {sig.name}Attrs {{\n{fields}\n}};\n\n"
            f"// Reads and checks every attribute. Ctx is shape_inference::InferenceContext (errors when the graph is\n"
            f"// built) or OpKernelConstruction (eager mode, where shape functions do not run).\n"
            f"template <typename Ctx>\nabsl::Status Read{sig.name}Attrs(Ctx* c, {sig.name}Attrs* a) {{\n"
            + "\n".join(reads) + "\n  return absl::OkStatus();\n}\n")


def _input_checks(sig: OpSignature | MultiOpSignature) -> str:
    ruled = [i for i in sig.inputs if i.rule is not None]
    if not ruled:
        return ""
    params = ", ".join(f"{_CPP_TYPES[i.dtype]} {i.name}" for i in ruled)
    body = []
    for i in ruled:
        cond = f"!{_condition(i.rule, i.name, i.dtype)}"
        when = ""
        if i.rule_when:
            cond = f"a.{i.rule_when} && {cond}"
            when = f" when {i.rule_when} is true"
        body.append(f"  if ({cond}) {{\n    return absl::InvalidArgumentError(absl::StrCat(\"{i.name} must be "
                    f"{i.rule.text}{when}, got \", {i.name}));\n  }}")
    return (f"// The run-time rules of the scalar inputs' values.\ninline absl::Status Check{sig.name}InputValues("
            f"const {sig.name}Attrs& a, {params}) {{\n" + "\n".join(body)
            + "\n  return absl::OkStatus();\n}\n")


def _doc(sig: OpSignature | MultiOpSignature) -> str:
    return f'constexpr char k{sig.name}Doc[] = R"doc(\n{sig.formula}\n)doc";\n'


def generate() -> str:
    parts = ["// Generated by op_spec/codegen.py from op_spec/operators.py at build time. Do not edit.\n#pragma once\n",
             ("#include <cmath>\n#include <cstdint>\n#include <cstring>\n#include <vector>\n\n#include \"absl/status/status.h\"\n"
              "#include \"absl/strings/str_cat.h\"\n#include \"tensorflow/core/platform/errors.h\"\n"),
             "namespace tf_plugin {\n",
             ("// A float32 subnormal as the signed zero the kernels see (TF flushes subnormals), by its bits, so that\n"
              "// a check gives the same answer on a thread with or without denormals-are-zero.\n"
              "inline float FlushSubnormal(float x) {\n  uint32_t bits;\n  std::memcpy(&bits, &x, sizeof(bits));\n"
              "  return (bits & 0x7f800000u) == 0 ? std::copysign(0.0f, x) : x;\n}\n")]
    for sig in ALL:
        parts += [f"// ---- {sig.name}", _signature_macro(sig, False), _signature_macro(sig, True),
                  _attrs_struct(sig), _input_checks(sig), _doc(sig)]
    for sig in ALL_MULTI:  # resource variables only
        parts += [f"// ---- {sig.name}", _signature_macro(sig, True), _attrs_struct(sig), _input_checks(sig),
                  _doc(sig)]
    parts.append("}  // namespace tf_plugin\n")
    return "\n".join(parts)


def write(path: str) -> None:
    """Writes the header, leaving the file untouched when it is already current (no needless rebuilds)."""
    text = generate()
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    with open(path, "w") as f:
        f.write(text)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m op_spec.codegen OUT.h")
    write(sys.argv[1])
