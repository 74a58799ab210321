"""The canonical vocabulary: one error lists every unmapped label of a source with where it was first seen."""

import pytest

from public_converters.spec import registry
from public_converters.vocabulary import LabelMapper, UnmappedLabels, check_label_table


def test_all_unmapped_labels_are_reported_at_once_with_file_and_row():
    mapper = LabelMapper("toy", {"phase": {"CalotTriangleDissection": "calot triangle dissection"}, "tool": {}})
    assert mapper.map("phase", "CalotTriangleDissection", "a.txt", 2) == "calot triangle dissection"
    mapper.map("phase", "Clipping", "a.txt", 7)
    mapper.map("phase", "Clipping", "b.txt", 9)
    mapper.map("tool", "hook", "tools.txt", 3)
    with pytest.raises(UnmappedLabels) as error:
        mapper.raise_if_unmapped()
    message = str(error.value)
    assert "2 label(s)" in message
    assert "phase 'Clipping': 2 time(s), first in a.txt row 7" in message
    assert "tool 'hook': 1 time(s), first in tools.txt row 3" in message


def test_label_tables_must_use_canonical_names():
    with pytest.raises(ValueError, match="not a canonical name"):
        check_label_table("toy", {"tool": {"Hook": "Electrocautery_Hook"}})
    with pytest.raises(ValueError, match="unknown kind"):
        check_label_table("toy", {"instrument": {"hook": "electrocautery hook"}})


def test_shared_names_are_spelled_alike_across_sources():
    """One canonical name per concept: no two names differ only by a plural 's' or by separators."""
    names = {name for spec in registry().values() for table in spec.labels.values() for name in table.values()}
    keys = {}
    for name in sorted(names):
        key = name.replace("-", " ").removesuffix("s")
        assert key not in keys, f"{name!r} and {keys[key]!r} name the same thing"
        keys[key] = name
    phases = {spec.name: set(spec.labels.get("phase", {}).values()) for spec in registry().values()}
    assert "calot triangle dissection" in phases["cholec80"] & phases["cholect50"] & phases["heichole"]
