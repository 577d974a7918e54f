"""TF's own spread on a chaotic step, measured in the test that needs it.

A step is chaotic when rounding is amplified: BatchNormalization over a handful of samples, deep stacks at random
initialization, a ReLU or a max-pool tie that flips. There GE's distance from TF depends on which kernels each side
took, and so on the CPU (oneDNN's blockings differ between an Intel Xeon and an AMD EPYC), and no fixed tolerance
tuned on one CPU holds on the other. What does not depend on the CPU is how far TF is from itself when everything
moves by rounding: the same K steps again from the same state, with every float of the state and of the batches
multiplied by 1 +- PERTURBATION (a random sign per element: about one float32 ulp). TF's spread is the largest
distance among RUNS such runs, by the same metric as GE's distance, in the same test; GE's distance is held to
SPREAD_FACTOR times it where that is above the test's fixed tolerance.

Measured on an AMD EPYC, GE's distance over TF's spread on the chaotic steps (tests/graph_ir/test_applications.py,
test_depthwise_steps.py): at most 2.5 (EfficientNetB0's gradients without dropout), 1.0 for Xception's gradients,
0.85 for MobileNetV2's first loss with PowerSign, 1.15 for its second loss with FusedEmaAdam. Batches alone
perturbed gave spreads up to 13x smaller than GE's distance there (GE and TF round differently at every op, not
only at the input); hence the state too. A wrong lowering moves a step by far more than rounding does; each node of
a chaotic step is also checked isolated by graph_ir.compare (test_compare_applications.py), which chaos cannot
blur."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

PERTURBATION = 1e-7  # relative, per float element of a batch
SPREAD_FACTOR = 10.0  # GE's distance from TF, at most this times TF's own spread
RUNS = 3  # perturbed runs: TF's spread is the largest distance among them (one run alone can land close by chance)


def perturbed(args: Sequence[np.ndarray], seed: int = 0, relative: float = PERTURBATION) -> list[np.ndarray]:
    """`args` with every float element multiplied by 1 + relative or 1 - relative (a random sign each), rounded to
    its dtype; integers (labels, tokens) unchanged."""
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        a = np.asarray(a)
        if a.dtype.kind == "f":
            signs = rng.choice(np.array([-1.0, 1.0]), a.shape)
            a = (a.astype(np.float64) * (1.0 + relative * signs)).astype(a.dtype)
        out.append(a)
    return out


class Snapshot:
    """The values of TF variables (a model's and its optimizer's, seed generators' states included), to run the
    same steps again from the same state."""

    def __init__(self, variables: Sequence) -> None:
        self.variables = list(variables)
        self.values = [np.array(v.numpy(), copy=True) for v in self.variables]

    def restore(self, perturb_seed: int | None = None) -> None:
        """Assigns the saved values back; with `perturb_seed`, each float one perturbed as `perturbed` does."""
        values = self.values if perturb_seed is None else perturbed(self.values, perturb_seed)
        for v, value in zip(self.variables, values):
            v.assign(value)


def largest(distances: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each name's largest distance among the runs."""
    return {k: max(d[k] for d in distances) for k in distances[0]}


def bound(fixed: float, spread: float) -> float:
    """What a chaotic step's distance from TF is held to: the fixed tolerance, or SPREAD_FACTOR times TF's own
    spread by the same metric where that is larger."""
    return max(fixed, SPREAD_FACTOR * spread)


def beyond(ge: dict[str, float], fixed: float | Callable[[str], float], spread: dict[str, float]
           ) -> dict[str, tuple[float, float]]:
    """The entries of `ge` above their bound, as {name: (GE's distance, TF's spread)}."""
    limit = fixed if callable(fixed) else (lambda _: fixed)
    return {k: (d, spread[k]) for k, d in ge.items() if d > bound(limit(k), spread[k])}
