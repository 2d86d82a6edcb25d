import math

import numpy as np

from rust_kernels import reference


def test_fsum_rows_are_correctly_rounded_and_served_again_only_for_the_same_rows(monkeypatch):
    rows = np.array([[1e16, 1.0, -1e16, 1.0], [0.1, 0.2, 0.3, 0.4]])
    want = [2.0, math.fsum([0.1, 0.2, 0.3, 0.4])]
    assert rows.sum(axis=1)[0] != 2.0  # numpy's pairwise sum loses the ones: the reference must not
    assert reference.fsum_rows(rows).tolist() == want
    calls, fsum = [], math.fsum
    monkeypatch.setattr(reference.math, "fsum", lambda row: calls.append(1) or fsum(row))
    first = reference.fsum_rows(rows.copy())  # the same values in another array: served, no sum
    assert first.tolist() == want and calls == []
    first[:] = 0  # a caller's array of its own: the kept sums are unchanged
    assert reference.fsum_rows(rows).tolist() == want
    pairs = [fsum([1e16, 1.0]), fsum([-1e16, 1.0]), fsum([0.1, 0.2]), fsum([0.3, 0.4])]
    assert reference.fsum_rows(rows.reshape(4, 2)).tolist() == pairs
    assert len(calls) == 4  # the same bytes in other rows are summed afresh
    changed = rows.copy()
    changed[1, 3] = 0.5
    assert reference.fsum_rows(changed)[1] == fsum([0.1, 0.2, 0.3, 0.5]) and len(calls) == 6
    assert reference.fsum_rows(np.zeros((3, 0))).tolist() == [0.0, 0.0, 0.0]
    assert reference.fsum_rows(np.zeros((0, 5))).shape == (0,)


def test_fsum_rows_keeps_a_bounded_number_of_sums():
    for i in range(reference._KEPT + 5):
        reference.fsum_rows(np.full((1, 3), float(i)))
    assert len(reference._SUMS) == reference._KEPT
