"""DPOT's Table 4 at CPU scale: the noise ablation's two groups of runs (three members, and {DR, SWE} alone) each
get their commands and a section of their own, whose ratios come from that group's runs."""

from benchmarks.harness import ROOT
from benchmarks.papers.dpot.tables import NOISE_GROUPS, NOISES, _noise, commands


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
