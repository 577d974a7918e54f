"""`python -m graph_ir convert SOURCE OUT`: a SavedModel's signature, or a frozen GraphDef (.pb) with --out_nodes,
lowered to a GE graph file (.air binary, .pbtxt text), as ATC converts one; `missing` lists what the lowering cannot
take instead."""

from __future__ import annotations

import argparse
import os
import sys
import time

from graph_ir.cli.tf_quiet import import_tensorflow
from graph_ir.ir.input_shapes import parse_input_shapes

HELP = "lower a SavedModel's signature or a frozen .pb to a GE graph (.air or .pbtxt), as ATC converts one"


# ATC's flags that only choose the NPU's code generation: accepted by convert (an ATC command line runs as written)
# and said in one line to have no meaning here, where the graph is lowered, not compiled for a chip.
NPU_ONLY = ("soc_version", "precision_mode", "op_select_implmode", "optypelist_for_implmode", "core_type",
            "aicore_num", "fusion_switch_file", "buffer_optimize", "enable_small_channel", "virtual_type",
            "auto_tune_mode", "op_debug_level", "log")


def _source(parser: argparse.ArgumentParser, optional: bool = False) -> None:
    parser.add_argument("saved_model", nargs="?" if optional else None,
                        help="the SavedModel directory, or a frozen GraphDef file (.pb)" +
                             (" (ATC's --model)" if optional else ""))
    parser.add_argument("--signature", default="serving_default",
                        help="a signature name, or a tf.function saved as an attribute (default: serving_default)")
    parser.add_argument("--input_shape", "--input-shape", dest="input_shape",
                        help='shapes of arguments whose dims are unknown, ATC\'s way: "x:8,224,224,3;mask:8,224"')
    parser.add_argument("--out_nodes", "--out-nodes", dest="out_nodes",
                        help='for a .pb: the tensors to compute, ATC\'s way: "logits:0;loss:0"')


def check_source(args: argparse.Namespace) -> None:
    """What can be checked of the command line without TensorFlow: the source exists (a SavedModel directory with
    its saved_model.pb, or a .pb file with --out_nodes) and the shape string's form."""
    path = args.saved_model
    if os.path.isfile(path):
        if not args.out_nodes or not any(n.strip() for n in args.out_nodes.split(";")):
            raise ValueError(f"{path!r} is a file: a frozen GraphDef needs --out_nodes \"name:0;...\"")
    elif not os.path.isdir(path):
        raise ValueError(f"SavedModel {path!r}: no such directory" + (" or file" if path.endswith(".pb") else ""))
    elif not any(os.path.isfile(os.path.join(path, f)) for f in ("saved_model.pb", "saved_model.pbtxt")):
        raise ValueError(f"SavedModel {path!r}: the directory has no saved_model.pb (tf.saved_model.save or "
                         "model.export writes one)")
    if args.input_shape is not None:
        parse_input_shapes(args.input_shape)


def _frozen(args: argparse.Namespace) -> tuple[object, list[str]] | None:
    """(the GraphDef, its outputs) when the source is a frozen .pb file, else None (a SavedModel)."""
    if not os.path.isfile(args.saved_model):
        return None
    from graph_ir.lowering.saved_model import frozen_graph_def

    return frozen_graph_def(args.saved_model, args.input_shape), [n for n in args.out_nodes.split(";") if n]


def add(parser: argparse.ArgumentParser) -> None:
    _source(parser, optional=True)
    parser.add_argument("out", nargs="?", help="the file to write: .air (binary ge.proto ModelDef) or .pbtxt (text)")
    atc = parser.add_argument_group(
        "ATC's flags", "an `atc --model=m.pb --framework=3 --output=m --input_shape=... --soc_version=...` command "
        "line runs as written. --model is SAVED_MODEL, --output is OUT (.air added when it has no .air/.pbtxt "
        "ending), --framework must be 3 (TensorFlow). These choose only the NPU's code generation and have no "
        "meaning off the NPU (accepted, said so in one line): " + ", ".join(f"--{f}" for f in NPU_ONLY))
    atc.add_argument("--model", help="ATC's name for SAVED_MODEL")
    atc.add_argument("--output", help="ATC's name for OUT (ATC adds .om; here .air is added)")
    atc.add_argument("--framework", help="ATC's source framework: only 3 (TensorFlow) is converted")
    for flag in NPU_ONLY:
        atc.add_argument(f"--{flag}", help=argparse.SUPPRESS)


def _atc_flags(args: argparse.Namespace) -> None:
    """ATC's spellings folded into convert's own arguments; the NPU-only flags reported in one line."""
    if args.framework is not None and args.framework.strip() != "3":
        raise ValueError(f"--framework={args.framework}: only 3 (TensorFlow) is converted here (ATC's 0 Caffe, "
                         "1 MindSpore, 5 ONNX are not)")
    for own, atc in (("saved_model", "model"), ("out", "output")):
        given = getattr(args, atc)
        if given is not None:
            if getattr(args, own) is not None and getattr(args, own) != given:
                raise ValueError(f"--{atc}={given} and {own.upper()} {getattr(args, own)!r} name two things; give one")
            if atc == "output" and os.path.splitext(given)[1] not in (".air", ".pbtxt"):
                given += ".air"
            setattr(args, own, given)
    for own in ("saved_model", "out"):
        if getattr(args, own) is None:
            raise ValueError(f"give {own.upper()}" + (" (or --model=...)" if own == "saved_model" else
                                                      " (or --output=...)"))
    ignored = [f"--{f}" for f in NPU_ONLY if getattr(args, f) is not None]
    if ignored:
        print(f"note: {', '.join(ignored)} only choose the NPU's code generation: no meaning "
              "off the NPU, ignored", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    _atc_flags(args)
    if os.path.splitext(args.out)[1] not in (".air", ".pbtxt"):
        raise ValueError(f"output {args.out!r}: the file name must end in .air or .pbtxt")
    folder = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(folder):
        raise ValueError(f"output {args.out!r}: no such directory {folder!r}")
    check_source(args)
    start = time.monotonic()
    print(f"lowering {args.saved_model} [{args.signature}] ...", file=sys.stderr, flush=True)
    import_tensorflow()
    import graph_ir  # lowering imports TensorFlow

    frozen = _frozen(args)
    graph = graph_ir.from_tensorflow(frozen[0], fetches=frozen[1]) if frozen else \
        graph_ir.from_saved_model(args.saved_model, args.signature, input_shapes=args.input_shape)
    graph.save(args.out)
    print(f"wrote {args.out}: {len(graph.nodes)} nodes, {len(graph.nodes_of_type('Variable'))} variables, "
          f"{len(graph.subgraphs)} subgraphs ({time.monotonic() - start:.1f} s)")
    return 0


class Missing:
    """`python -m graph_ir missing SAVED_MODEL`: every TF op type of the signature the lowering cannot take."""

    HELP = "list every op of a SavedModel's signature that the lowering cannot take (exit 1 if any)"

    @staticmethod
    def add(parser: argparse.ArgumentParser) -> None:
        _source(parser)

    @staticmethod
    def run(args: argparse.Namespace) -> int:
        check_source(args)
        import_tensorflow()
        import graph_ir
        from graph_ir.lowering.saved_model import saved_model_function, with_input_shapes

        frozen = _frozen(args)
        if frozen:
            missing = graph_ir.missing_ops(frozen[0], fetches=frozen[1])
        else:
            loaded, concrete = saved_model_function(args.saved_model, args.signature)
            fn, specs = with_input_shapes(concrete, args.input_shape)
            missing = graph_ir.missing_ops(fn, *specs)
            del loaded
        if not missing:
            print(f"{args.saved_model} [{args.signature}]: every op has a lowering; `convert` lowers it")
            return 0
        for op_type, nodes in sorted(missing.items()):
            print(f"{op_type} ({len(nodes)}): {', '.join(nodes[:5])}{' ...' if len(nodes) > 5 else ''}")
        return 1
