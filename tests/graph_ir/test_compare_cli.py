"""`python -m graph_ir compare`: writes a Session's dumps of a lowered step, compares a dump folder with the
Session (the table, or CSV with msaccucmp's columns), ends on the summary; and whether msprobe's msaccucmp can read
our dump files where it is installed."""

from __future__ import annotations

import csv
import os
import re

import numpy as np
import pytest

from graph_ir.__main__ import main
from graph_ir.compare import COLUMNS, read_dump_folder, write_dump
from tests.graph_ir.test_compare_dumps import _lowered_cnn, unknown_rows_case


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli")
    graph, batch = _lowered_cnn()
    graph.save(str(folder / "step.air"))
    np.savez(str(folder / "inputs.npz"), *batch)
    assert main(["compare", str(folder / "step.air"), str(folder / "dump"), "--inputs", str(folder / "inputs.npz"),
                 "--write-dumps"]) == 0
    return folder, graph


def test_the_table_of_a_clean_dump_ends_on_the_summary(dumped, capsys):
    folder, _ = dumped
    capsys.readouterr()
    args = ["compare", str(folder / "step.air"), str(folder / "dump"), "--inputs", str(folder / "inputs.npz"),
            "--tolerance", "0"]
    status = main([*args, "--all-rows"])
    out = capsys.readouterr().out
    assert status == 0
    assert out.splitlines()[0].split()[:3] == ["GENode", "GEType", "TF"]
    assert "first departure: none" in out and "first defect: none" in out
    rows = sum(len(d.outputs) for d in read_dump_folder(str(folder / "dump")).values())
    assert f"compared {rows} outputs: {rows} within tolerance accumulated" in out.split("\n\n")[-1]
    assert all(len(line) <= 120 for line in out.split("\n\n")[0].splitlines())
    # By default only the rows that are not ok: none here, so their count and the summary.
    assert main(args) == 0
    assert capsys.readouterr().out.startswith(f"{rows} more rows, ok, not shown\n\ncompared {rows} outputs")


def test_csv_of_a_perturbed_dump_names_the_node(dumped, tmp_path, capsys):
    folder, graph = dumped
    perturbed = tmp_path / "dump"
    perturbed.mkdir()
    dumps = read_dump_folder(str(folder / "dump"))
    target = next(n.name for n in graph.topological_order() if n.type == "Conv2D")
    for name, dump in dumps.items():
        outputs = [o * np.float32(1.01) for o in dump.outputs] if name == target else dump.outputs
        write_dump(str(perturbed / os.path.basename(dump.path)), name, dump.inputs, outputs, dump.dump_time)
    out_csv = tmp_path / "table.csv"
    status = main(["compare", str(folder / "step.air"), str(perturbed), "--inputs", str(folder / "inputs.npz"),
                   "--tolerance", "1e-5", "--csv", str(out_csv)])
    assert status == 1
    summary = capsys.readouterr().out
    assert f"first departure: {target}:0" in summary and f"first defect: {target}:0" in summary
    with open(out_csv) as f:
        table = list(csv.reader(f))
    assert table[0][-len(COLUMNS):] == list(COLUMNS)
    row = next(r for r in table if r[0] == target)
    assert row[table[0].index("Verdict")] == "defect"
    assert float(row[table[0].index("MaxRelativeError")]) == pytest.approx(1 - 1 / 1.01, rel=1e-3)  # of the dump
    # The table: the rows that are not ok first, in execution order, then how many others; --wide keeps every column.
    for wide in ([], ["--wide"]):
        assert main(["compare", str(folder / "step.air"), str(perturbed), "--inputs", str(folder / "inputs.npz"),
                     "--tolerance", "1e-5", *wide]) == 1
        lines = capsys.readouterr().out.splitlines()
        assert lines[1].startswith(target) and "defect" in lines[1].split()
        shown = lines[1:lines.index("")]
        assert wide or all(line.split()[-1] != "ok" for line in shown)  # the narrow table ends on the verdict
        assert re.fullmatch(r"\d+ more rows, ok, not shown", lines[len(shown) + 2])
        assert ("MaxRelativeError" in lines[0]) == bool(wide)


def test_msaccucmp_reads_our_dump_files_where_installed(dumped):
    """msprobe's msaccucmp parses a dump header only through CANN's libascend_dump_parser.so (its
    big_dump_data.py, ParseDumpProtoToJson), which the mindstudio-probe wheel does not ship."""
    big_dump_data = pytest.importorskip("msprobe.msaccucmp.dump_parse.big_dump_data")
    compare_error = pytest.importorskip("msprobe.msaccucmp.cmp_utils.constant.compare_error").CompareError
    folder, _ = dumped
    dump = next(iter(read_dump_folder(str(folder / "dump")).values()))
    try:
        parsed = big_dump_data.BigDumpDataParser(dump.path).parse()
    except compare_error as e:  # raised when the CANN library is missing
        pytest.skip(f"msaccucmp cannot parse dump files without CANN here: {e!r}")
    assert parsed.op_name == dump.op_name


def test_a_graph_with_unknown_dims_writes_and_compares_as_its_static_graph(tmp_path, capsys):
    _, template, static, batch = unknown_rows_case()
    np.savez(str(tmp_path / "inputs.npz"), *batch)
    tables = []
    for name, graph in (("template", template), ("static", static)):
        graph.save(str(tmp_path / f"{name}.air"))
        args = [str(tmp_path / f"{name}.air"), str(tmp_path / name), "--inputs", str(tmp_path / "inputs.npz")]
        assert main(["compare", *args, "--write-dumps"]) == 0
        capsys.readouterr()
        assert main(["compare", *args, "--tolerance", "0"]) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1] and "first departure: none" in tables[0]
    names = [sorted(read_dump_folder(str(tmp_path / name))) for name in ("template", "static")]
    assert names[0] == names[1] and names[0]


def test_inputs_of_a_wrong_dtype_or_kind_are_one_line_naming_the_file(tmp_path, capsys):
    _, template, _, batch = unknown_rows_case()
    template.save(str(tmp_path / "g.air"))
    np.savez(str(tmp_path / "wide.npz"), *[x.astype(np.float64) for x in batch])
    np.save(str(tmp_path / "x.npy"), batch[0])
    for inputs, pattern in (("wide.npz", (r"input 0 \(.*\) from '.*wide\.npz' array 0: dtype float64, the graph wants "
                                         r"float32")),
                            ("x.npy", r"inputs '.*x\.npy': an \.npy array where an \.npz archive is expected")):
        capsys.readouterr()
        assert main(["compare", str(tmp_path / "g.air"), str(tmp_path / "d"), "--inputs", str(tmp_path / inputs),
                     "--write-dumps"]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert re.search(r"^python -m graph_ir compare: error: " + pattern, line), line
