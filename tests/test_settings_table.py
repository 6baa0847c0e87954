"""The settings table in ``conf.SETTINGS`` is the one source of defaults: the parsed
defaults, the check ids and the documentation's settings page all come from it."""

from __future__ import annotations

import re
from pathlib import Path

from eventferry_django.checks import CHECK_IDS
from eventferry_django.conf import DEFAULTS, SETTINGS, EventferrySettings, parse

ROOT = Path(__file__).resolve().parent.parent
CHECK_ID = re.compile(r"eventferry\.E\d{3}")


def test_an_empty_setting_parses_to_the_dataclass_defaults() -> None:
    parsed, problems = parse({})
    assert problems == []
    assert parsed == EventferrySettings()


def test_every_key_has_one_row_a_meaning_and_a_check_id() -> None:
    keys = [setting.key for setting in SETTINGS]
    assert len(keys) == len(set(keys))
    assert set(keys) == set(DEFAULTS)
    for setting in SETTINGS:
        assert setting.meaning and setting.type
        assert all(CHECK_ID.fullmatch(check_id) for check_id in setting.check_ids)
        assert CHECK_IDS[setting.key] == setting.check_id


def test_every_check_id_in_the_code_belongs_to_a_setting_or_to_the_whole_setting() -> None:
    """...but the database check of a development build's schema (E090), which no
    setting can cause."""
    in_code = {m for path in (ROOT / "eventferry_django").rglob("*.py")
               for m in CHECK_ID.findall(path.read_text())}
    listed = {check_id for setting in SETTINGS for check_id in setting.check_ids}
    assert in_code - listed == {"eventferry.E001", "eventferry.E002", "eventferry.E090"}
