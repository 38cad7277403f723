"""conveyor.Dataset.csv: typed columns, defaults and errors (no servers)."""

import pytest

import conveyor


def test_csv_columns_defaults_and_errors(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text('a,b,c\n1,"x, y",2.5\n2,,NA\n')
    ds = conveyor.Dataset.csv(str(f), ["int64", "string", "float32"], header=True, na_value="NA",
                              record_defaults=[None, "dflt", 0.0])
    rows = [tuple(x.item() if hasattr(x, "item") else x for x in r) for r in ds._collect()]
    assert rows == [(1, b"x, y", 2.5), (2, b"dflt", 0.0)]
    strict = conveyor.Dataset.csv([str(f)], ["int64", "string", "float32"], header=True)
    with pytest.raises(conveyor.ConveyorError, match=r"line 3 column 1 \(`b`\) has no value"):
        strict._collect()
    with pytest.raises(conveyor.ConveyorError, match="column_types"):
        conveyor.Dataset.csv(str(f), ["int8"])
