"""DPOT's Tables 3 and 4 at CPU scale: the noise ablation's two groups of runs (three members, and {DR, SWE} alone)
each get their commands and a section of their own, whose ratios come from that group's runs; the heads and patch
sizes beside DPOT nano's own (its noise 0.2 run) get theirs."""

from benchmarks.harness import ROOT
from benchmarks.papers.dpot.tables import NOISE_GROUPS, NOISES, _noise, _settings, commands


def mixture_run(l2re: dict[str, float]) -> dict:
    rows = [{"member": m, "l2re": v, "persistence_l2re": 1.0} for m, v in l2re.items()]
    return {"present": True, "kind": "mixture", "rows": rows, "summary": {}}


def test_each_group_has_a_command_per_level_with_its_own_config_in_the_tree():
    lines = commands("R")
    for prefix, (config, _) in NOISE_GROUPS.items():
        assert (ROOT / config).is_file()
        for level in NOISES:
            assert lines[f"{prefix}_{level}"] == (f"opformer train {config} --out R/{prefix}_{level} "
                                                  f"--set rollout.noise={level}")


def test_a_groups_section_reads_only_its_own_runs():
    runs = {f"noise_dr_swe_{n}": mixture_run({"dr": e, "swe": 3 * e})
            for n, e in zip(NOISES, (0.1, 0.09, 0.08, 0.12, 0.5))}
    runs |= {f"noise_{n}": mixture_run({"dr": 9.0}) for n in NOISES}  # another group's, ignored here
    text = "\n".join(_noise({"runs": runs, "runs_root": "R"}, "noise_dr_swe", "## 3b"))
    assert "## 3b: DPOT nano on {DR, SWE}" in text
    assert "| mean over members | 0.2 | 0.18 | 0.16 | 0.24 | 1 | 1 |" in text
    assert "no worse than 0: yes (0.16 vs 0.2)" in text and "(1.20x)" in text
    assert "20.0 (the paper's fifth level, 5e-2: 0.753, 42x its noise-free 0.0178): 5.00x of 0 (1)" in text


def test_heads_and_patch_sizes_are_set_on_the_two_member_config_and_tabled_beside_the_default_run():
    lines = commands("R")
    config = NOISE_GROUPS["noise_dr_swe"][0]
    assert lines["heads_dr_swe_16"] == f"opformer train {config} --out R/heads_dr_swe_16 --set model.n_heads=16"
    assert lines["patch_dr_swe_2"] == f"opformer train {config} --out R/patch_dr_swe_2 --set model.patch_size=2"
    runs = {name: {"present": False, "command": line, "config_in_tree": True} for name, line in lines.items()}
    runs |= {"noise_dr_swe_0.2": mixture_run({"dr": 0.2, "swe": 0.4}), "heads_dr_swe_1": mixture_run({"dr": 0.5}),
             "heads_dr_swe_8": mixture_run({"dr": 0.1, "swe": 0.3}), "patch_dr_swe_2": mixture_run({"dr": 0.9})}
    text = "\n".join(_settings({"runs": runs, "runs_root": "R"}))
    assert "| member | heads 1 | heads 4 | heads 8 | persistence |" in text
    assert "| mean over members | 0.5 | 0.3 | 0.2 | 1 |" in text
    assert "- lowest mean here: heads 8 (0.2); the paper's: heads 8" in text
    assert "| member | patch 2 | patch 4 | persistence |" in text and "lowest mean here: patch 4 (0.3)" in text
    assert "- `patch_dr_swe_16`: no run yet; made by `opformer train" in text
