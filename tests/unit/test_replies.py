"""What Lorehouse says itself follows the question's language."""

from __future__ import annotations

from lorehouse.agents.extractive.lead import asked_kind, asked_unit, range_fit, states_kind
from lorehouse.agents.llm_answer import draft_from_llm_text
from lorehouse.agents.replies import NOT_FOUND, not_found, not_mentioned, passages_only


def test_a_german_question_gets_a_german_not_found_and_passages_note() -> None:
    assert not_found("Wie viele Tage Urlaub bekomme ich im Jahr?") == NOT_FOUND["de"]
    assert not_found("How many days of leave do I get a year?") == NOT_FOUND["en"]
    assert passages_only("Wo finde ich die Konfigurationsdatei von apt?").startswith(
        "Die Dokumente sagen das nicht direkt"
    )
    assert not_found("VPN?") == NOT_FOUND["en"]  # too short to tell
    assert not_mentioned(["BGB"], "Wie viele Tage gibt es laut BGB?").startswith(
        "Keines der Dokumente, die Sie lesen dürfen, erwähnt \u201eBGB\u201c"
    )
    declined = draft_from_llm_text("NOT_IN_DOCUMENTS", "Wer genehmigt meine Dienstreise?")
    assert not declined.answerable and declined.text == NOT_FOUND["de"]


def test_german_questions_ask_for_the_kinds_of_fact_english_ones_do() -> None:
    cases = {
        "Wie lange dauert die Probezeit?": "duration",
        "Wie viel kostet ein Hotel in Berlin pro Nacht?": "amount",
        "Wer genehmigt meine Dienstreise?": "person",
        "Wann muss ich die Reisekostenabrechnung einreichen?": "date",
        "Wo liegt die Konfigurationsdatei?": "place",
        "Kann ich von zu Hause arbeiten?": "yes_no",
        "Wie installiere ich ein Paket?": "procedure",
    }
    assert {question: asked_kind(question).value for question in cases} == cases
    assert asked_unit("Wie viele Wochen Elternzeit bekomme ich?") == "week"


def test_german_amounts_durations_and_dates_are_read() -> None:
    weeks = asked_kind("Wie viele Wochen Elternzeit bekomme ich?")
    assert states_kind("Primäre Betreuungspersonen erhalten 20 Wochen Elternzeit.", weeks, "week")
    assert not states_kind("Sie erhalten 20 Tage Sonderurlaub.", weeks, "week")
    amount = asked_kind("Wie viel darf ein Hotel kosten?")
    assert states_kind("Die Obergrenze liegt bei 150 € pro Nacht.", amount)
    assert states_kind("Bitte bis zum 31.12. einreichen.", asked_kind("Wann reiche ich ein?"))
    row = "Von 2.000,01 € bis 5.000 € genehmigt die Abteilungsleitung."
    assert range_fit("Wer genehmigt eine Rechnung über 3.000 Euro?", row) == 1.0
    assert range_fit("Wer genehmigt eine Rechnung über 9.000 Euro?", row) == -1.0


def test_a_german_questions_nouns_are_not_names_but_its_acronyms_are() -> None:
    from lorehouse.agents.extractive.lead import named_terms

    assert named_terms("Bis zu welchem Betrag werden Hotelkosten pro Nacht erstattet?") == []
    assert named_terms("Wie richte ich das VPN für das Büro 2026 ein?") == ["VPN", "2026"]
    assert named_terms("What is the Wi-Fi password in the Toronto office?") == ["Wi-Fi"]
