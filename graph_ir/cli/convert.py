"""`python -m graph_ir convert SOURCE OUT`: a SavedModel's signature, or a frozen GraphDef (.pb) with --out_nodes,
lowered to a GE graph file (.air binary, .pbtxt text), as ATC converts one; `missing` lists what the lowering cannot
take instead."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time

from graph_ir.cli.tf_quiet import import_tensorflow
from graph_ir.ir.errors import LoweringError

HELP = "lower a SavedModel's signature or a frozen .pb to a GE graph (.air or .pbtxt), as ATC converts one"


def _source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("saved_model", help="the SavedModel directory, or a frozen GraphDef file (.pb)")
    parser.add_argument("--signature", default="serving_default",
                        help="a signature name, or a tf.function saved as an attribute (default: serving_default)")
    parser.add_argument("--input_shape", "--input-shape", dest="input_shape",
                        help='shapes of arguments whose dims are unknown, ATC\'s way: "x:8,224,224,3;mask:8,224"')
    parser.add_argument("--out_nodes", "--out-nodes", dest="out_nodes",
                        help='for a .pb: the tensors to compute, ATC\'s way: "logits:0;loss:0"')


_DIMS = re.compile(r"^-?\d+(,-?\d+)*$|^$")


def check_input_shape(given: str) -> None:
    """graph_ir.lowering.saved_model.parse_input_shapes' checks of an --input_shape string, with its messages, made
    before TensorFlow is imported (a typo costs no import; tests/graph_ir/test_cli.py holds the two to the same
    answers)."""
    names = set()
    for piece in filter(None, (p.strip() for p in given.split(";"))):
        name, colon, dims = piece.rpartition(":")
        dims = dims.replace(" ", "")
        if not colon or not name or not _DIMS.match(dims):
            raise LoweringError(f"input shape {piece!r} is not name:d0,d1,... (dims >= 0, or -1 for a dim "
                                "known only at run time, as ATC's --input_shape writes them, e.g. "
                                "\"x:-1,224,224,3;y:-1\")")
        if not all(int(d) >= -1 for d in filter(None, dims.split(","))):
            raise LoweringError(f"input shape of {name!r} is {dims!r:.80}; expected dims >= 0, or -1 for a dim known "
                                "only at run time, as a sequence of ints or a string \"d0,d1,...\"")
        if name in names:
            raise LoweringError(f"input shape of {name!r} is given twice")
        names.add(name)


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
        check_input_shape(args.input_shape)


def _frozen(args: argparse.Namespace) -> tuple[object, list[str]] | None:
    """(the GraphDef, its outputs) when the source is a frozen .pb file, else None (a SavedModel)."""
    if not os.path.isfile(args.saved_model):
        return None
    from graph_ir.lowering.saved_model import frozen_graph_def

    return frozen_graph_def(args.saved_model, args.input_shape), [n for n in args.out_nodes.split(";") if n]


def add(parser: argparse.ArgumentParser) -> None:
    _source(parser)
    parser.add_argument("out", help="the file to write: .air (binary ge.proto ModelDef) or .pbtxt (text)")


def run(args: argparse.Namespace) -> int:
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
