// The Lorehouse chat page: asks /v1/ask with the reader's key, streams the answer, opens
// citations in a side panel and sends feedback. No framework and no build step: the page is
// served by the API itself and works offline.
"use strict";

const KEY_STORAGE = "lorehouse-api-key";
const HISTORY_TURNS = 10;
const FILE_TYPES = ["pdf", "docx", "pptx", "xlsx", "html", "md", "txt"];
const $ = (id) => document.getElementById(id);

const state = {
  key: sessionStorage.getItem(KEY_STORAGE) || "",
  history: [],
  documents: new Map(), // label -> doc_id
  chosenDocs: new Map(), // doc_id -> label
  running: null, // AbortController of the answer being streamed
  signIns: 0, // sign-in attempts so far: only the latest may change the page
};

function headers(extra = {}) {
  return state.key ? { ...extra, "X-API-Key": state.key } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers || {}) });
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
    } catch (_) {
      // the body is not JSON: the status text says enough
    }
    const error = new Error(`${response.status}: ${detail}`);
    error.status = response.status;
    throw error;
  }
  return response;
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (name === "onclick") node.addEventListener("click", value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value);
  }
  node.append(...children);
  return node;
}

// -- signing in ---------------------------------------------------------------------------

async function signIn(key) {
  // The page signs in with its stored key (or none, for a server without keys) as it loads;
  // a reader who types a key before that answer arrives must not be signed out by it.
  const attempt = ++state.signIns;
  state.key = key;
  try {
    const health = await (await api("/v1/health")).json();
    if (attempt !== state.signIns) return;
    sessionStorage.setItem(KEY_STORAGE, key);
    $("who").textContent = `signed in: ${health.lancedb.counts.chunks} passages you may read`;
    $("who").className = "";
    $("sign-out").hidden = false;
    await loadDocuments();
    openLinkedSource();
  } catch (error) {
    if (attempt !== state.signIns) return;
    state.key = "";
    sessionStorage.removeItem(KEY_STORAGE);
    $("who").textContent = error.status === 401 ? "key not accepted" : error.message;
    $("who").className = "error";
  }
}

function signOut() {
  state.key = "";
  sessionStorage.removeItem(KEY_STORAGE);
  $("who").textContent = "signed out";
  $("sign-out").hidden = true;
  state.documents.clear();
  state.chosenDocs.clear();
  $("doc-list").replaceChildren();
  renderFilters();
  newConversation();
}

// -- filters ------------------------------------------------------------------------------

async function loadDocuments() {
  const options = [];
  state.documents.clear();
  for (let offset = 0; ; offset += 200) {
    const page = await (await api(`/v1/documents?limit=200&offset=${offset}`)).json();
    for (const doc of page.documents) {
      const label = `${doc.title} (${doc.rel_path})`;
      state.documents.set(label, doc.doc_id);
      options.push(element("option", { value: label }));
    }
    if (offset + 200 >= page.total) break;
  }
  $("doc-list").replaceChildren(...options);
}

function chooseDocument() {
  const label = $("doc-search").value;
  const docId = state.documents.get(label);
  if (!docId) return;
  state.chosenDocs.set(docId, label);
  $("doc-search").value = "";
  renderFilters();
}

function renderFilters() {
  const chips = [...state.chosenDocs].map(([docId, label]) =>
    element("span", { class: "chip", "data-doc-id": docId }, label,
      element("button", {
        type: "button", "aria-label": `remove ${label}`, text: "×",
        onclick: () => { state.chosenDocs.delete(docId); renderFilters(); },
      })));
  $("chosen-docs").replaceChildren(...chips);
  const filters = currentFilters();
  $("filter-summary").textContent = filters ? `(${Object.keys(filters).join(", ")})` : "";
}

function currentFilters() {
  const filters = {};
  if (state.chosenDocs.size) filters.doc_ids = [...state.chosenDocs.keys()];
  const types = [...document.querySelectorAll("#file-types input:checked")].map((i) => i.value);
  if (types.length) filters.file_types = types;
  const from = parseInt($("page-from").value, 10);
  const to = parseInt($("page-to").value, 10);
  if (from > 0) filters.page_from = from;
  if (to > 0) filters.page_to = to;
  return Object.keys(filters).length ? filters : null;
}

function clearFilters() {
  state.chosenDocs.clear();
  document.querySelectorAll("#file-types input").forEach((i) => { i.checked = false; });
  $("page-from").value = "";
  $("page-to").value = "";
  renderFilters();
}

// -- asking -------------------------------------------------------------------------------

async function* serverSentEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    // Lines may end in CRLF, LF or CR; comment blocks (": ping") carry no event and are skipped.
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block);
      const data = /^data: (.*)$/m.exec(block);
      if (event && data) yield { kind: event[1], data: JSON.parse(data[1]) };
    }
  }
}

async function ask(question) {
  const turn = element("article", { class: "turn", "data-testid": "turn" });
  const steps = element("ul", { class: "thinking", "data-testid": "thinking" });
  const status = element("p", { class: "thinking", text: "Thinking…" });
  const answer = element("div", { class: "answer", "data-testid": "answer" });
  turn.append(element("p", { class: "question", text: question }), status, steps, answer);
  $("conversation").append(turn);

  const controller = new AbortController();
  state.running = controller;
  $("stop").hidden = false;
  $("send").disabled = true;
  const body = { question, history: state.history.slice(-2 * HISTORY_TURNS), stream: true };
  const filters = currentFilters();
  if (filters) body.filters = filters;
  try {
    const response = await api("/v1/ask", {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" },
      signal: controller.signal,
    });
    for await (const event of serverSentEvents(response)) {
      if (event.kind === "step") {
        steps.append(element("li", { text: `${event.data.step} (${Math.round(event.data.ms)} ms)` }));
      } else if (event.kind === "token") {
        status.textContent = "Answering…";
        answer.textContent += event.data.text;
      } else if (event.kind === "answer") {
        status.remove();
        renderAnswer(turn, answer, event.data);
        state.history.push({ role: "user", content: question });
        state.history.push({ role: "assistant", content: event.data.answer });
      }
    }
  } catch (error) {
    status.textContent = error.name === "AbortError" ? "Stopped." : `Failed: ${error.message}`;
    status.className = error.name === "AbortError" ? "thinking" : "error";
  } finally {
    state.running = null;
    $("stop").hidden = true;
    $("send").disabled = false;
  }
}

function renderAnswer(turn, answerNode, response) {
  const byNumber = new Map(response.citations.map((c) => [c.number, c]));
  const parts = response.answer.split(/(\[\d+\])/);
  answerNode.replaceChildren(...parts.map((part) => {
    const match = /^\[(\d+)\]$/.exec(part);
    const citation = match && byNumber.get(Number(match[1]));
    if (!citation) return document.createTextNode(part);
    return element("button", {
      type: "button", class: "cite", "data-testid": "citation", text: part,
      title: citation.title || citation.rel_path,
      onclick: () => openSource(citation),
    });
  }));
  // The lead above states the fact; what each source says follows apart, one excerpt per
  // source under its section, the sentences the answer rests on marked.
  const excerpts = response.excerpts || [];
  const sources = excerpts.length
    ? element("ol", { class: "sources excerpts", "data-testid": "excerpts" }, ...excerpts.map((x) =>
      element("li", { value: String(x.number), "data-testid": "excerpt" },
        element("button", {
          type: "button", class: "cite", text: `${x.title || x.rel_path}`,
          onclick: () => openSource(x),
        }),
        " ", element("code", { text: x.rel_path }),
        " ", element("span", { class: "where", text: `${section(x)}${pages(x)}` }),
        element("blockquote", {}, ...x.sentences.flatMap((sentence) => [
          sentence.supports ? element("mark", { text: sentence.text })
            : document.createTextNode(sentence.text), " "])))))
    : element("ol", { class: "sources" }, ...response.citations.map((c) =>
      element("li", { value: String(c.number) },
        element("button", {
          type: "button", class: "cite", text: `${c.title || c.rel_path}`,
          onclick: () => openSource(c),
        }),
        " ", element("code", { text: c.rel_path }), ` ${section(c)}${pages(c)}`)));
  const related = response.related || [];
  if (related.length) {
    turn.append(element("p", { class: "related-label", text: "Nearest sources:" }),
      element("ul", { class: "related", "data-testid": "related" }, ...related.map((c) =>
        element("li", {}, element("button", {
          type: "button", class: "cite", text: `${c.title || c.rel_path}`,
          onclick: () => openSource(c),
        }), " ", element("code", { text: c.rel_path })))));
  }
  const mode = response.degraded ? `${response.mode}, degraded: ${response.degraded_reason}`
    : response.mode;
  turn.append(sources, element("p", { class: "meta", text: `${mode} · ${response.trace.steps
    .map((s) => `${s.step} ${Math.round(s.ms)} ms`).join(" · ")}` }), feedbackForm(response));
}

function section(citation) {
  // The heading path starts with the document's title where the title is its first heading.
  const path = citation.heading_path[0] === citation.title
    ? citation.heading_path.slice(1) : citation.heading_path;
  return path.length ? `› ${path.join(" › ")}` : "";
}

function pages(citation) {
  // Only PDFs have pages, slide decks slides and workbooks sheets; other formats are one page.
  const paged = /\.(pdf|pptx|xlsx)$/i.test(citation.rel_path);
  if (!paged || !citation.page_start) return "";
  return citation.page_end && citation.page_end !== citation.page_start
    ? `, pp. ${citation.page_start}-${citation.page_end}` : `, p. ${citation.page_start}`;
}

// -- the source panel ---------------------------------------------------------------------

const SINCE_NOTES = {
  changed: "This passage has changed since the answer was given; shown as it was cited.",
  removed: "This document has since left the index; the passage is shown as it was cited.",
};

async function openSource(citation) {
  // Everything shown comes from the preview: a link from Slack carries only the chunk id.
  document.body.classList.add("with-source");
  $("source").hidden = false;
  $("source-title").textContent = "";
  $("source-where").textContent = "";
  $("source-text").replaceChildren(element("p", { text: "Loading…" }));
  $("source-page").hidden = true;
  $("source-file").hidden = true;
  const chunkPath = `/v1/chunks/${encodeURIComponent(citation.chunk_id)}`;
  // The index version the answer was read from: the passage as it was cited, even after a
  // reindex changed it.
  const pinned = citation.index_version ? `&version=${citation.index_version}` : "";
  let chunk;
  let since;
  try {
    const preview = await (await api(`${chunkPath}?window=1${pinned}`)).json();
    chunk = preview.chunk;
    since = preview.changed_since;
    $("source-text").replaceChildren(
      ...(SINCE_NOTES[since] ? [element("p", { class: "notice", "data-testid": "changed-since",
        text: SINCE_NOTES[since] })] : []),
      ...preview.before.map((c) => element("p", { class: "neighbour", text: c.text_chat })),
      element("mark", { "data-testid": "cited-chunk", text: chunk.text_chat }),
      ...preview.after.map((c) => element("p", { class: "neighbour", text: c.text_chat })));
  } catch (error) {
    $("source-text").replaceChildren(element("p", { class: "error", text: error.message }));
    return;
  }
  $("source-title").textContent = chunk.title || chunk.rel_path;
  $("source-where").textContent = `${chunk.rel_path}${pages(chunk)} ${section(chunk)}`;
  // The page and the file are today's, which no longer hold a changed or removed passage.
  if (since === "changed" || since === "removed") return;
  if (chunk.rel_path.toLowerCase().endsWith(".pdf") && chunk.page_start) {
    try {
      const image = await (await api(`${chunkPath}/page`)).blob();
      $("source-page").src = URL.createObjectURL(image);
      $("source-page").hidden = false;
    } catch (_) {
      // no page image (the file moved): the text above still shows the passage
    }
  }
  const link = $("source-file");
  link.hidden = false;
  link.onclick = async (event) => {
    event.preventDefault();
    try {
      await openOriginal(`${chunkPath}/file`, chunk.rel_path);
    } catch (error) {
      $("source-text").append(element("p", { class: "error", text: error.message }));
    }
  };
}

// A blob: URL belongs to this page's origin, so only types that run nothing of the document's
// own open in a tab; the rest (HTML, SVG, Office files) are saved as downloads.
const OPENABLE_TYPES = new Set(["application/pdf", "image/png", "image/jpeg", "image/gif",
  "image/webp", "text/plain"]);

async function openOriginal(path, relPath) {
  const response = await api(path);
  const data = await response.blob();
  const type = (response.headers.get("Content-Type") || "").split(";")[0].trim();
  const inline = (response.headers.get("Content-Disposition") || "").startsWith("inline")
    && OPENABLE_TYPES.has(type);
  const url = URL.createObjectURL(
    new Blob([data], { type: inline ? type : "application/octet-stream" }));
  if (inline) {
    window.open(url, "_blank", "noopener");
  } else {
    element("a", { href: url, download: relPath.split("/").pop() }).click();
  }
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

function openLinkedSource() {
  // A link to a citation (from a Slack answer): /chat#chunk=<id>, or #chunk=<id>&version=<n>.
  const linked = /^#chunk=([\w:.-]+)(?:&version=(\d+))?$/.exec(window.location.hash);
  if (linked) openSource({ chunk_id: linked[1], index_version: Number(linked[2]) || null });
}

function closeSource() {
  $("source").hidden = true;
  document.body.classList.remove("with-source");
}

// -- feedback -----------------------------------------------------------------------------

function feedbackForm(response) {
  const comment = element("input", { placeholder: "What was wrong or missing? (optional)",
    "aria-label": "comment" });
  const note = element("span", { role: "status" });
  const send = (rating) => async () => {
    try {
      await api("/v1/feedback", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          answer_id: response.answer_id,
          rating,
          comment: comment.value.trim() || null,
          question: response.question,
          answer: response.answer,
          citations: response.citations.map((c) => c.chunk_id),
        }),
      });
      note.textContent = "Thanks, noted.";
      form.querySelectorAll("button, input").forEach((n) => { n.disabled = true; });
    } catch (error) {
      note.textContent = `Not sent: ${error.message}`;
      note.className = "error";
    }
  };
  const form = element("div", { class: "feedback", "data-testid": "feedback" },
    element("button", { type: "button", "aria-label": "helpful", text: "▲ Helpful",
      onclick: send("up") }),
    element("button", { type: "button", "aria-label": "not helpful", text: "▼ Not helpful",
      onclick: send("down") }),
    comment, note);
  return form;
}

function newConversation() {
  state.history = [];
  $("conversation").replaceChildren();
  closeSource();
}

// -- wiring the page ----------------------------------------------------------------------

$("file-types").append(...FILE_TYPES.map((type) =>
  element("label", {}, element("input", { type: "checkbox", value: type }), ` ${type}`)));
$("file-types").addEventListener("change", renderFilters);
$("page-from").addEventListener("input", renderFilters);
$("page-to").addEventListener("input", renderFilters);
$("doc-search").addEventListener("change", chooseDocument);
$("clear-filters").addEventListener("click", clearFilters);
$("sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  signIn($("api-key").value.trim());
  $("api-key").value = "";
});
$("sign-out").addEventListener("click", signOut);
$("ask").addEventListener("submit", (event) => {
  event.preventDefault();
  const question = $("question").value.trim();
  if (!question || state.running) return;
  $("question").value = "";
  ask(question);
});
$("question").addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("ask").requestSubmit();
  }
});
$("stop").addEventListener("click", () => state.running && state.running.abort());
$("new-conversation").addEventListener("click", newConversation);
$("close-source").addEventListener("click", closeSource);
window.addEventListener("hashchange", openLinkedSource);
signIn(state.key);
