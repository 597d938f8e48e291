"""Search hits as the terminal shows them: the rows and lines a question names stay on
screen, and a hit's section path is never cut."""

from __future__ import annotations

from rich.console import Console

from cli.hits import Matcher, hit_heading, passage_view

LIMITS = "\n".join(
    [
        "| City | Region | Hotel per night | Meals per day |",
        "| --- | --- | --- | --- |",
        "| Lisbon | Europe | EUR 160 | EUR 50 |",
        "| Porto | Europe | EUR 130 | EUR 45 |",
        "| London | Europe | EUR 290 | EUR 80 |",
        "| Toronto | Americas | CAD 275 | CAD 90 |",
        "| Montreal | Americas | CAD 240 | CAD 80 |",
        "| New York | Americas | CAD 420 | CAD 120 |",
        "| Singapore | Asia-Pacific | SGD 320 | SGD 95 |",
        "| Kuala Lumpur | Asia-Pacific | SGD 210 | SGD 70 |",
        "| Sydney | Asia-Pacific | SGD 340 | SGD 110 |",
        "| All other cities | All other cities | Limits of the nearest listed city plus 10% "
        "| Limits of the nearest listed city plus 10% |",
    ]
)


def _shown(renderable: object, width: int = 100) -> str:
    console = Console(width=width, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def test_the_row_a_question_names_is_shown_before_rows_repeating_its_common_words() -> None:
    shown = _shown(passage_view(LIMITS, [], Matcher("hotel limit in Lisbon"), words=40))
    assert "Lisbon" in shown and "EUR 160" in shown
    assert "Sydney" not in shown.split("Lisbon")[0]  # not pushed below the cut
    new_york = _shown(passage_view(LIMITS, [], Matcher("Hotel limit in New York?"), words=20))
    assert "CAD 420" in new_york


def test_a_section_path_too_long_to_sit_beside_the_title_gets_a_line_of_its_own() -> None:
    path = ["Employee Handbook", "3 Leave", "3.1 Annual Leave", "3.1.1 Entitlement by Office"]
    line = hit_heading(1, "Employee Handbook", path, "p. 5", "9dc54adf37", width=60)
    first, second = _shown(line, width=60).splitlines()[:2]
    assert first.startswith(" 1. Employee Handbook") and "9dc54adf37" in first
    assert second.strip() == "3 Leave > 3.1 Annual Leave > 3.1.1 Entitlement by Office"
    wide = _shown(hit_heading(1, "Employee Handbook", path, "p. 5", "9dc54adf37", width=120))
    assert len(wide.strip().splitlines()) == 1 and "3.1.1 Entitlement by Office" in wide
