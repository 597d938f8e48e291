"""Whether the extractive answer may assert its lead, or should show the passages instead.

The bundled models cannot read whether a sentence answers a question: the best-scoring
sentence of the context states the asked fact for about six questions in ten, and for a
question the documents do not answer (another office, another benefit) it is as confident
as for one they do. A wrong lead stated as fact costs a reader far more than "here is what
the documents say". So the lead is asserted only when measurable signs agree that it
answers; otherwise the answer shows the closest passages with their best sentences marked,
and says that the documents do not state it directly.

The signs are read off the lead and the context (`LeadSignals`); their weights are a
logistic regression fitted on the golden sets' answerable and unanswerable questions
(`evals/assertion_cv.py`), where a lead counts as right when it states a key fact of the
reference answer. The threshold is a setting (`LOREHOUSE_ANSWER_ASSERT_THRESHOLD`), chosen
for precision: docs/benchmarks.md shows the precision and coverage each threshold gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LeadSignals:
    """What can be measured of a lead without reading it as a person would."""

    #: The lead's similarity to the question (the embedder's cosine, as `read_context`).
    similarity: float
    #: How far the lead's score is ahead of the best unit of another passage.
    margin: float
    #: The share of the question's own words (rarer ones weighing more) in the lead.
    overlap: float
    #: Whether the question asks a kind of fact (an amount, a duration, a role...), and
    #: whether the lead states one.
    kind_asked: bool
    kind_stated: bool
    #: The share of the question's names (capitalised words, acronyms, numbers) found as
    #: words in the lead, its section's heading or its document's title (1.0 when the
    #: question names none): a lead stating another office's rule never names the office.
    names_found: float
    #: Whether the question names anything at all.
    names_asked: bool
    #: The rank of the lead's passage in the context (1: the best hit).
    passage_rank: int
    #: Whether the lead is a table row.
    is_row: bool
    #: Whether the best unit of another passage states a fact (a number, a name) the lead
    #: states: two sources saying the same thing, as a handbook and a benefits deck do.
    corroborated: bool = False
    #: The share of the question's words (rarer ones weighing more) in the heading of the
    #: lead's section; 1.0 when the question asks what a section says and this is it. A
    #: question a section's heading restates ("Who counts as the primary caregiver?") is
    #: answered under that heading; a near miss ("... in the US?") rarely finds its words
    #: there.
    heading_overlap: float = 0.0
    #: Whether the lead opens its section in the passage: a section's first sentence
    #: states what the section is about more often than one deep inside it.
    opens_section: bool = False
    #: Whether the lead sits under the section the question asks about: a heading phrased
    #: as a question whose every word the question asks (an FAQ's "How many weeks of
    #: parental leave do I get?"), or the section a "What does X say about Y?" question
    #: names; and the question names nothing (an office, a country) the lead, its heading
    #: and its document leave out. The document then answers in its own words the question
    #: it asks, and the lead is asserted whatever its chance: not a learned sign, since the
    #: golden sets hold few such questions, but one a reader can check at a glance.
    heading_asks: bool = False

    def features(self) -> list[float]:
        """The signals as the regression reads them, in `FEATURES` order."""
        return [
            self.similarity,
            self.margin,
            self.overlap,
            float(self.kind_asked and self.kind_stated),
            float(self.kind_asked and not self.kind_stated),
            self.names_found if self.names_asked else 1.0,
            1.0 / self.passage_rank,
            float(self.is_row),
            float(self.corroborated),
            self.heading_overlap,
            float(self.opens_section),
        ]


FEATURES = (
    "similarity",
    "margin",
    "overlap",
    "kind_stated",
    "kind_missing",
    "names_found",
    "passage_rank_inverse",
    "is_row",
    "corroborated",
    "heading_overlap",
    "opens_section",
)


@dataclass(frozen=True)
class AssertionModel:
    """A logistic regression over `FEATURES`: the chance that the lead states the fact."""

    intercept: float
    weights: tuple[float, ...]

    def probability(self, signals: LeadSignals) -> float:
        return self.chance(signals.features())

    def chance(self, features: Sequence[float]) -> float:
        """The chance for signals already read as `LeadSignals.features` gives them."""
        z = self.intercept + sum(w * x for w, x in zip(self.weights, features, strict=True))
        return 1.0 / (1.0 + math.exp(-z))


#: Fitted by `evals/assertion_cv.py` on handbook dev, docs dev and the sample corpus's set
#: (253 leads); weights per unit of each signal. The lead's margin over other passages weighs
#: most, then its overlap with the question's words. The question's words in the lead's
#: heading weigh against it: they offset the overlap of a lead that matches the question only
#: as its section's title does, which in the golden sets rarely stated the fact. A second
#: passage stating the same fact, the question's names found and the kind of fact asked
#: being stated weigh for it.
LEAD_MODEL = AssertionModel(
    -1.9143,
    (
        0.2730,  # similarity
        2.6012,  # margin
        1.3277,  # overlap
        0.3778,  # kind_stated
        -0.5132,  # kind_missing
        0.3147,  # names_found
        0.6127,  # passage_rank_inverse
        0.1287,  # is_row
        0.4899,  # corroborated
        -1.6051,  # heading_overlap
        0.4297,  # opens_section
    ),
)
