"""A picture of the index: a sample of chunk vectors laid out in two dimensions, coloured by
language and by folder, so a data engineer sees whether the model keeps a corpus's languages
and topics apart (a multilingual model should mix the languages and part the topics).

t-SNE from scikit-learn, which Lorehouse already installs: UMAP would add numba and llvmlite
for a picture, and t-SNE lays out the sample in seconds. The sample is bounded, so the
picture costs the same at a million chunks as at a thousand. The picture is an SVG drawn
here (circles and a legend), so no plotting library is needed either; it carries no text of
any chunk, only the first folder of its path.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

import numpy as np

from lorehouse.stores.lance_index import ChunkIndex

#: Chunks drawn at most: t-SNE's time grows with the square of the points.
MAP_SAMPLE = 2000
#: Folders coloured apart; the rest are drawn grey, as "other".
MAP_FOLDERS = 9
_PALETTE = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
    "#8c564b", "#e377c2", "#17becf", "#bcbd22",
)  # fmt: skip
_OTHER = "#b0b0b0"
#: Below this many chunks the map is their principal components: t-SNE needs neighbours.
_TSNE_MIN_POINTS = 10
_SIZE = 360


@dataclass(frozen=True)
class EmbeddingMap:
    """The two pictures and what they show."""

    by_language: str
    by_folder: str
    points: int
    languages: dict[str, int]
    folders: dict[str, int]
    seconds: float


def draw_embedding_map(
    index: ChunkIndex, sample: int = MAP_SAMPLE, seed: int = 0
) -> EmbeddingMap | None:
    """The map of up to `sample` chunks drawn at random (the same ones for the same table
    and seed), each coloured by the language its chunk recorded; None when the index has
    fewer than two chunks to lay out."""
    started = time.perf_counter()
    total = index.count()
    if total < 2:
        return None
    rows = np.random.default_rng(seed).choice(total, size=min(sample, total), replace=False)
    taken = index.table().to_lance().take(np.sort(rows), columns=["rel_path", "language", "vector"])
    vectors = np.stack(taken["vector"].to_numpy(zero_copy_only=False)).astype(np.float32)
    folders = [_folder(path) for path in taken["rel_path"].to_pylist()]
    languages = [language or "unknown" for language in taken["language"].to_pylist()]
    layout = _layout(vectors, seed)
    return EmbeddingMap(
        by_language=_svg(layout, languages, "language"),
        by_folder=_svg(layout, folders, "folder"),
        points=len(vectors),
        languages=dict(Counter(languages).most_common()),
        folders=dict(Counter(folders).most_common()),
        seconds=time.perf_counter() - started,
    )


def _layout(vectors: np.ndarray, seed: int) -> np.ndarray:
    """Two coordinates a vector: t-SNE, or for a handful of chunks (fewer than t-SNE's
    neighbourhood holds) their two principal components."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE

    if len(vectors) < _TSNE_MIN_POINTS:
        return PCA(2, random_state=seed).fit_transform(vectors)
    perplexity = float(min(30, (len(vectors) - 1) // 3))
    return TSNE(2, init="pca", perplexity=perplexity, random_state=seed).fit_transform(vectors)


def _folder(rel_path: str) -> str:
    head, _, rest = rel_path.partition("/")
    return head if rest else "(top level)"


def _svg(layout: np.ndarray, labels: Sequence[str], what: str) -> str:
    """Each point a circle coloured by its label; the most common labels in the legend."""
    colours = {
        label: _PALETTE[i] for i, (label, _) in enumerate(Counter(labels).most_common(MAP_FOLDERS))
    }
    low, high = layout.min(axis=0), layout.max(axis=0)
    scaled = (layout - low) / np.where(high > low, high - low, 1) * (_SIZE - 20) + 10
    circles = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{colours.get(label, _OTHER)}"/>'
        for (x, y), label in zip(scaled, labels, strict=True)
    )
    legend = "".join(
        f'<rect x="{_SIZE + 10}" y="{14 + 16 * i}" width="10" height="10" fill="{colour}"/>'
        f'<text x="{_SIZE + 26}" y="{23 + 16 * i}" font-size="11">{escape(label[:28])}</text>'
        for i, (label, colour) in enumerate(colours.items())
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_SIZE + 200}" height="{_SIZE}" '
        f'font-family="sans-serif"><title>chunks by {what}</title>'
        f'<rect width="100%" height="100%" fill="#fff"/>{circles}{legend}</svg>'
    )
