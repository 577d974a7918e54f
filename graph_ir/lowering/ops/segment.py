"""The segment family's TF -> GE mappings (prototypes: graph_ir/opset/segment.py): tf.math.segment_sum / segment_max
and unsorted_segment_max / min / prod onto the GE ops of the same names, inputs by position."""

from __future__ import annotations

from graph_ir.lowering.ops.common import same

LOWERINGS = {t: same(t) for t in ("SegmentSum", "SegmentMax", "UnsortedSegmentMax", "UnsortedSegmentMin",
                                  "UnsortedSegmentProd")}
