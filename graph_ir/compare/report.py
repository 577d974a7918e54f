"""A comparison's rows, its first departure and first defect, and how it is printed or written as CSV."""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field

from graph_ir.compare.metrics import COLUMNS, Metrics

_ROW_COLUMNS = ("GENode", "GEType", "TFNode", "TFType", "Output", "Shape", "DType")
_OUR_COLUMNS = ("ScaleError", "Tolerance", "CarriedIn", "Within", "IsolatedScaleError", "IsolatedWithin",
                "GEExactError", "TFExactError", "Verdict")


@dataclass
class Row:
    """One compared output: a GE node's output `output` against the TF tensor it stands for (or a variable the
    step writes, after the step: `ge_type` "Variable").

    `metrics` are accumulated (the node run on the Session's own inputs), `isolated` the node run on TF's values
    of its inputs where TF has them (None where it was not run isolated). `carried_in` is the largest scale error among the node's
    inputs: accumulated, the node is within when its scale error is at most its tolerance plus what it carried
    in. `upstream_within` says whether every node it depends on was within."""

    ge_node: str
    ge_type: str
    tf_node: str
    tf_type: str
    output: int
    shape: tuple[int, ...]
    dtype: str
    metrics: Metrics
    tolerance: float
    carried_in: float = 0.0
    isolated: Metrics | None = None
    upstream_within: bool = True
    note: str = ""
    isolated_carried_in: float = 0.0  # what inputs the Session gave (no TF value) carried into the isolated run
    magnitude: float = 0.0  # a sum of products': max of the op on |inputs|, the scale of its rounding (tolerances.py)
    # Out of tolerance isolated: GE's and TF's isolated outputs against the node computed in float64 on the same
    # inputs (on the isolated error's scale); NaN where not computed, exact_note says why where there is none.
    ge_exact_error: float = float("nan")
    tf_exact_error: float = float("nan")
    exact_note: str = ""
    rounding_bound: float = float("nan")  # how far TF's rounding may take it from exact (observe._rounding_bound)
    noise: bool = False  # a sum within rounding of zero against its terms, in TF and GE (observe.NOISE_ROUNDINGS)

    @property
    def within(self) -> bool:
        """Accumulated within tolerance (its own, plus the error carried in from its inputs)."""
        return self.metrics.scale_error <= self.tolerance + self.carried_in and not self.note

    @property
    def within_isolated(self) -> bool | None:
        """Within its own tolerance on TF's inputs; None when not run isolated."""
        if self.isolated is None:
            return None
        allowed = self.tolerance + self.isolated_carried_in
        if self.isolated_error <= allowed:
            return True
        # Far from TF: a defect only where GE is also far from exact (TF's own rounding may be the farther), or
        # where TF is farther from exact than rounding explains (the reference is GE's executor in float64: it is
        # not trusted against a TF that departs by more than rounding).
        return not math.isnan(self.ge_exact_error) and self.ge_exact_error <= allowed \
            and self.tf_exact_error <= self.rounding_bound

    @property
    def isolated_error(self) -> float:
        """The isolated scale error; for a sum of products, relative to its magnitude (at least its output's
        scale)."""
        if self.isolated is None:
            return float("nan")
        return self.isolated.max_abs / self.magnitude if self.magnitude > 0 else self.isolated.scale_error

    @property
    def tf_farther(self) -> bool:
        """Out of tolerance of TF isolated, but GE within it of the exact (float64) value: TF rounds, not GE."""
        return self.isolated is not None and self.isolated_error > self.tolerance + self.isolated_carried_in \
            and bool(self.within_isolated)

    @property
    def verdict(self) -> str:
        """"defect" (out of tolerance isolated, and of the exact value where there is one), "tf-farther" (out of
        tolerance of TF isolated, GE within it of the exact value), "amplifies" (within isolated, out accumulated:
        it grows earlier rounding), "departs" (out accumulated, not run isolated), "noise" (instead of these two or
        tf-farther: a sum within rounding of zero against its terms, in TF and GE, as the gradient of a bias before
        a BatchNormalization, zero in exact arithmetic), or "ok"."""
        if self.within_isolated is False:
            return "defect"
        if self.noise and (self.tf_farther or not self.within):
            return "noise"
        if self.tf_farther:
            return "tf-farther"
        if not self.within:
            return "amplifies" if self.within_isolated else "departs"
        return "ok"


@dataclass
class Comparison:
    """The rows of a compared step, in execution order (the variables it writes last)."""

    rows: list[Row] = field(default_factory=list)

    @property
    def first_departure(self) -> Row | None:
        """The first row out of tolerance whose inputs were all within."""
        return next((r for r in self.rows if not r.within and r.upstream_within), None)

    @property
    def first_defect(self) -> Row | None:
        """The first row out of its tolerance isolated (of TF, and of the exact value where there is one): a node
        wrong on its own."""
        return next((r for r in self.rows if r.verdict == "defect"), None)

    def row(self, ge_node: str, output: int = 0) -> Row:
        """The row of GE node `ge_node`'s output `output`."""
        for r in self.rows:
            if r.ge_node == ge_node and r.output == output:
                return r
        raise KeyError(f"no row for GE node {ge_node!r} output {output}")

    def summary(self) -> str:
        """Nodes compared, within tolerance (accumulated and isolated), the first departure and first defect."""
        within = sum(r.within for r in self.rows)
        isolated = [r for r in self.rows if r.isolated is not None]
        lines = [(f"compared {len(self.rows)} outputs: {within} within tolerance accumulated, "
                 f"{sum(bool(r.within_isolated) for r in isolated)} of {len(isolated)} run isolated within; "
                 f"{sum(r.verdict == 'noise' for r in self.rows)} noise")]
        for label, r in (("first departure", self.first_departure), ("first defect", self.first_defect)):
            lines.append(f"{label}: " + ("none" if r is None else
                                         f"{r.ge_node}:{r.output} ({r.ge_type}, TF {r.tf_type}): scale error "
                                         f"{_number(r.metrics.scale_error)} against tolerance "
                                         f"{_number(r.tolerance)}, isolated "
                                         f"{_number(r.isolated_error) if r.isolated else '-'}"
                                         + _exact_text(r)))
        return "\n".join(lines)

    def table_rows(self) -> list[list[str]]:
        """The header and one list of cells per row: our columns, then msaccucmp's."""
        out = [[*_ROW_COLUMNS, *_OUR_COLUMNS, *COLUMNS]]
        for r in self.rows:
            iso = r.isolated
            out.append([r.ge_node, r.ge_type, r.tf_node, r.tf_type, str(r.output), str(list(r.shape)), r.dtype,
                        _number(r.metrics.scale_error), _number(r.tolerance), _number(r.carried_in),
                        "yes" if r.within else "no", _number(r.isolated_error) if iso else "-",
                        {None: "-", True: "yes", False: "no"}[r.within_isolated],
                        "none" if r.exact_note else _number(r.ge_exact_error, "-"),
                        "none" if r.exact_note else _number(r.tf_exact_error, "-"), r.note or r.verdict,
                        *(_number(v) for v in r.metrics.columns())])
        return out

    def to_csv(self) -> str:
        """The table as CSV text."""
        text = io.StringIO()
        csv.writer(text, lineterminator="\n").writerows(self.table_rows())
        return text.getvalue()

    def format_table(self, columns: int | None = None, wide: bool = False, width: int = 120,
                     ok_rows: bool = True) -> str:
        """A plain-text table, then the summary. By default it fits `width` characters: the GE node (":j" for an
        output j > 0; cut from the left with '…'), its type, the TF node ('=' where it is the GE node and type, its
        type where only the name is the same), dtype, scale error, tolerance, isolated error, GE's and TF's errors
        from the exact value where any row has them, the verdict, and the first `columns` of msaccucmp's columns
        (none by default: the table may then be wider). `wide`: every column of
        table_rows() (`columns` of msaccucmp's, all by default), nothing cut. `ok_rows=False`: only the rows whose
        verdict is not ok, then a line counting the others; the summary is of every row."""
        shown = self.rows if ok_rows else [r for r in self.rows if r.verdict != "ok"]
        summary = self.summary()
        if len(shown) < len(self.rows):
            summary = f"{len(self.rows) - len(shown)} more rows, ok, not shown\n\n{summary}"
            if not shown:
                return summary
        if wide:
            keep = len(_ROW_COLUMNS) + len(_OUR_COLUMNS) + (len(COLUMNS) if columns is None else columns)
            selected = set(map(id, shown))
            cells = [self.table_rows()[0]] + [c for r, c in zip(self.rows, self.table_rows()[1:], strict=True)
                                               if id(r) in selected]
            cells = [row[:keep] for row in cells]
            return _aligned(cells, summary)
        extra = 0 if columns is None else columns
        exact = any(r.exact_note or not math.isnan(r.ge_exact_error) for r in shown)
        head = ["GENode", "GEType", "TF", "DType", "Error", "Tol", "Isolated", *(["Exact GE|TF"] if exact else []),
                "Verdict", *COLUMNS[:extra]]
        body = []
        for r in shown:
            same = r.tf_node == r.ge_node
            tf = ("=" if r.tf_type == r.ge_type else _cut_right(r.tf_type)) if same else _cut_left(r.tf_node, 16)
            exact_cell = ["none" if r.exact_note else "-" if math.isnan(r.ge_exact_error) else
                          f"{_number(r.ge_exact_error)}|{_number(r.tf_exact_error)}"] if exact else []
            body.append([f"{r.ge_node}:{r.output}" if r.output else r.ge_node, _cut_right(r.ge_type), tf,
                         _SHORT_DTYPES.get(r.dtype, r.dtype), _number(r.metrics.scale_error), _number(r.tolerance),
                         _number(r.isolated_error) if r.isolated else "-", *exact_cell, r.note or r.verdict,
                         *(_number(v) for v in r.metrics.columns()[:extra])])
        cells = [head, *body]
        others = sum(max(len(row[k]) for row in cells) for k in range(1, len(head))) + 2 * (len(head) - 1)
        for row in body:
            row[0] = _cut_left(row[0], max(12, width - others))
        return _aligned(cells, summary)


_SHORT_DTYPES = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int32": "i32",
                 "int64": "i64", "int8": "i8", "uint8": "u8"}


def _aligned(cells: list[list[str]], summary: str) -> str:
    widths = [max(len(row[k]) for row in cells) for k in range(len(cells[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join([*lines, "", summary])


def _cut_left(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[len(text) - width + 1:]


def _cut_right(text: str, width: int = 16) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def _exact_text(row: Row) -> str:
    if row.exact_note:
        return f", {row.exact_note}"
    if math.isnan(row.ge_exact_error):
        return ""
    return f"; from exact: GE {_number(row.ge_exact_error)}, TF {_number(row.tf_exact_error)}"


def _number(value: float, nan: str = "nan") -> str:
    if math.isnan(value):
        return nan
    if math.isinf(value):
        return str(value)
    return "0" if value == 0 else f"{value:.4g}"
