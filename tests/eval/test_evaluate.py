from opformer.eval.evaluate import format_table, scaled_batch_size


def test_evaluation_batches_shrink_with_the_grid():
    assert scaled_batch_size(32, 512, (512,)) == 32
    assert scaled_batch_size(32, 512, (256,)) == 32
    assert scaled_batch_size(32, 512, (2048,)) == 8
    assert scaled_batch_size(32, 512, (8192,)) == 2
    assert scaled_batch_size(4, 43, (211, 211)) == 1


def test_table_marks_zero_shot_rows():
    rows = [{"resolution": 512, "trained_at": 512, "samples": 100, "relative_l2": 1.2e-3, "relative_l2_std": 1e-4},
            {"resolution": 8192, "trained_at": 512, "samples": 100, "relative_l2": 1.0e-3, "relative_l2_std": 1e-4}]
    lines = format_table(rows).splitlines()
    assert lines[1].split() == ["512", "100", "1.200e-03", "1.00e-04", "trained", "here"]
    assert lines[2].endswith("zero-shot")
