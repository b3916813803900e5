"""Peers: which published implementation stands beside which preset, and a missing package's clear error."""

from __future__ import annotations

import sys

import pytest

from opformer.bench.peers import GALERKIN_TRANSFORMER, NEURALOPERATOR, PEER_OF_PRESET, PeerUnavailable, build_peer
from opformer.bench.sweep import BenchSettings, plan_rows
from opformer.models.registry import PRESETS


def test_each_peer_runs_its_presets_model():
    assert sorted(PEER_OF_PRESET) == ["fno1d_burgers", "ft_burgers", "gt_burgers", "lt_burgers", "st_burgers"]
    for name, (implementation, attention_type) in PEER_OF_PRESET.items():
        if implementation == GALERKIN_TRANSFORMER:  # the authors' model with the preset's attention
            assert attention_type == PRESETS[name]["attention_type"]
        else:
            assert (implementation, attention_type) == (NEURALOPERATOR, None)


def test_a_peer_row_follows_its_model_only_with_peers():
    other = next(name for name in sorted(PRESETS) if name not in PEER_OF_PRESET)
    settings = BenchSettings(models=["gt_burgers", other, "fno1d_burgers"], resolutions=[8])
    assert plan_rows(settings) == [(name, "opformer") for name in settings.models]
    settings.peers = True
    assert plan_rows(settings) == [("gt_burgers", "opformer"), ("gt_burgers", GALERKIN_TRANSFORMER),
                                   (other, "opformer"),
                                   ("fno1d_burgers", "opformer"), ("fno1d_burgers", NEURALOPERATOR)]


@pytest.mark.parametrize("implementation, module, package", [
    (GALERKIN_TRANSFORMER, "galerkin_transformer.model", "galerkin_transformer"),
    (NEURALOPERATOR, "neuralop.models", "neuralop"),
])
def test_missing_peer_package_is_unavailable_with_the_reason(monkeypatch, implementation, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # as if the peers extra were not installed
    with pytest.raises(PeerUnavailable, match=rf"^cannot import {package} \(ModuleNotFoundError: .+\)$"):
        build_peer(implementation, "galerkin")


def test_unknown_implementation_is_unavailable():
    with pytest.raises(PeerUnavailable, match="unknown implementation 'nope'"):
        build_peer("nope", None)
