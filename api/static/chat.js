// The Lorehouse chat page: asks /v1/ask with the reader's key, streams the answer, opens
// citations beside the conversation (a full-screen sheet on a phone) and sends feedback. No
// framework and no build step: the page is served by the API itself and works offline.
// Document text is never parsed as HTML: Markdown is rendered into elements built here, every
// piece of text set as text.
"use strict";

const KEY_STORAGE = "lorehouse-api-key";
// The conversation this tab is in, so a reload goes on with it.
const CONVERSATION_STORAGE = "lorehouse-conversation";
const CONVERSATIONS_LISTED = 100;
const MENTIONS_SHOWN = 8;
const WITHHELD_TEXT = "This answer drew on passages you can no longer read, so it is not "
  + "shown again. Ask again for an answer from what you may read now.";
const SUGGESTIONS = 6;
const LIBRARY_SHOWN = 12;
const DOC_OPTIONS_SHOWN = 50;
const PAGES_SHOWN = 4;
const FILE_TYPE_LABELS = {
  pdf: "PDF", docx: "Word", pptx: "PowerPoint", xlsx: "Excel", html: "HTML", md: "Markdown",
  txt: "Text",
};
/** The page's words around an answer, in the language the answer's own words are in (the
 * question's, `response.language`); the page's controls follow the browser's. */
const WORDS = {
  en: {
    passages: "The documents don't state this directly. Here are the closest passages; the "
      + "sentences nearest to an answer are highlighted.",
    filteredOut: "Nothing in the documents matching these filters answers this question.",
    filtered: "Filtered",
    withoutFilters: "Ask without filters",
    degraded: "Answered without the language model",
    related: "Nearest sources:",
    derived: "How the answer was derived",
    helpful: "▲ Helpful",
    unhelpful: "▼ Not helpful",
    askPlaceholder: "Ask a question",
    ask: "Ask",
  },
  de: {
    passages: "Die Dokumente sagen das nicht direkt. Hier sind die nächstliegenden Stellen; "
      + "die Sätze, die einer Antwort am nächsten kommen, sind markiert.",
    filteredOut: "Nichts in den Dokumenten dieser Filter beantwortet diese Frage.",
    filtered: "Gefiltert",
    withoutFilters: "Ohne Filter fragen",
    degraded: "Ohne das Sprachmodell beantwortet",
    related: "Nächstliegende Quellen:",
    derived: "Wie die Antwort entstand",
    helpful: "▲ Hilfreich",
    unhelpful: "▼ Nicht hilfreich",
    askPlaceholder: "Stellen Sie eine Frage",
    ask: "Fragen",
  },
};
const BROWSER_LANGUAGE = (navigator.language || "en").toLowerCase().startsWith("de") ? "de" : "en";
const words = (language = BROWSER_LANGUAGE) => WORDS[language] || WORDS.en;
const STEP_LABELS = {
  query_optimizer: "Reading the question…",
  source_identifier: "Choosing documents…",
  retrieval: "Searching the documents…",
  post_processor: "Selecting passages…",
  answerer: "Writing the answer…",
};
const $ = (id) => document.getElementById(id);

const state = {
  key: "",
  open: false, // the server needs no key
  signedIn: false,
  docs: [], // the documents the caller may read, from /v1/documents
  docById: new Map(),
  chosenDocs: new Set(), // doc ids
  conversationId: sessionStorage.getItem(CONVERSATION_STORAGE) || "",
  mention: null, // the "@words" being typed: {start, end, options, selected}
  running: null, // AbortController of the answer being streamed
  signIns: 0, // sign-in attempts so far: only the latest may change the page
  sourceOpens: 0, // source panels opened so far: only the latest may fill the panel
  opener: null, // the button that opened the source, focused again when it closes
  uploads: null, // GET /v1/uploads: limits, the caller's groups and uploads; null: none
  uploadPoll: null, // the timer that asks again while an upload is being indexed
};

// -- talking to the API -------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, detail) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
  }
}

function headers(extra = {}) {
  return state.key ? { ...extra, "X-API-Key": state.key } : extra;
}

async function api(path, options = {}) {
  const response = await fetch(path, { ...options, headers: headers(options.headers || {}) });
  if (!response.ok) {
    let detail = response.statusText;
    try {
      const body = await response.json();
      detail = typeof body.detail === "string" ? body.detail
        : Array.isArray(body.detail) ? body.detail.map((d) => d.msg).join("; ")
          : JSON.stringify(body.detail);
    } catch (_) {
      // the body is not JSON: the status text says enough
    }
    throw new ApiError(response.status, detail);
  }
  return response;
}

/** What a reader is told when a request fails. */
function describe(error) {
  if (error instanceof ApiError) {
    if (error.status === 401) return "Your key is no longer accepted. Sign in again to ask.";
    if (error.status === 503) return `The documents cannot be searched right now: ${error.detail}`;
    if (error.status === 422) return `The question could not be asked: ${error.detail}`;
    return `Something went wrong (${error.status}): ${error.detail}`;
  }
  // fetch() rejects with a TypeError when the server cannot be reached at all.
  return "Cannot reach the server. Check your connection, then retry.";
}

function element(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "onclick") node.addEventListener("click", value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  node.append(...children.filter((child) => child !== null && child !== undefined));
  return node;
}

// -- signing in ---------------------------------------------------------------------------

const ACCOUNT_TEXT = {
  connecting: "Connecting…",
  checking: "Checking your key…",
  "needs-key": "Enter your API key to start",
  rejected: "That key was not accepted",
  expired: "Your key is no longer accepted; enter it again",
  offline: "Cannot reach the server",
  "signed-in": "Signed in",
  open: "",
};

/** `detail` is why the server is not ready, or the name of the key signed in with. */
function showAccount(status, detail = "") {
  const who = $("who");
  who.textContent = status === "unavailable" ? `Not ready: ${detail}`
    : status === "signed-in" && detail ? `Signed in as ${detail}` : ACCOUNT_TEXT[status];
  who.className = ["rejected", "expired", "offline", "unavailable"].includes(status) ? "error" : "";
  who.hidden = status === "open";
  document.body.classList.toggle("signed-in", status === "signed-in");
  const needsKey = ["needs-key", "rejected", "expired", "checking"].includes(status);
  // While the page finds out whether the server needs a key, one may be typed already.
  $("sign-in").hidden = !needsKey && status !== "connecting";
  $("sign-out").hidden = status !== "signed-in";
  $("reconnect").hidden = !["offline", "unavailable"].includes(status);
  const ready = status === "signed-in" || status === "open";
  $("question").disabled = !ready;
  $("send").disabled = !ready || Boolean(state.running);
  $("filters-toggle").disabled = !ready;
  $("question").placeholder = ready ? words().askPlaceholder : needsKey ? "Sign in to ask"
    : "Waiting for the server…";
  if (!ready) {
    $("welcome-text").textContent = needsKey
      ? "Lorehouse answers questions from the documents you may read and shows where each "
        + "answer comes from. Enter the API key you were given to start."
      : "Lorehouse answers questions from the documents you may read and shows where each "
        + "answer comes from.";
  }
  if (["needs-key", "rejected", "expired"].includes(status)) {
    $("api-key").value = "";
    $("api-key").focus();
  }
}

/** Opens the page: without a key first, which tells whether the server needs one at all. */
async function start() {
  const stored = sessionStorage.getItem(KEY_STORAGE) || "";
  const attempt = ++state.signIns;
  showAccount("connecting");
  let health;
  try {
    health = await fetch("/v1/health");
  } catch (_) {
    if (attempt === state.signIns) showAccount("offline");
    return;
  }
  if (attempt !== state.signIns) return; // the reader signed in meanwhile
  if (health.status === 401) {
    if (stored) signIn(stored, false);
    else showAccount("needs-key");
    return;
  }
  await signedIn(attempt, "", health);
}

async function signIn(key, typed = true) {
  // A reader who types a key while the page's own check is under way must not be signed
  // out by that check's late answer: only the latest attempt changes the page.
  const attempt = ++state.signIns;
  showAccount("checking");
  state.key = key;
  let health;
  try {
    health = await fetch("/v1/health", { headers: headers() });
  } catch (_) {
    if (attempt === state.signIns) showAccount("offline");
    return;
  }
  if (attempt !== state.signIns) return;
  if (health.status === 401) {
    state.key = "";
    sessionStorage.removeItem(KEY_STORAGE);
    showAccount(typed ? "rejected" : "expired");
    return;
  }
  // Accepted, whether or not the documents are ready: a retry later needs it again.
  sessionStorage.setItem(KEY_STORAGE, key);
  await signedIn(attempt, key, health);
}

async function signedIn(attempt, key, health) {
  if (!health.ok) {
    let detail = health.statusText;
    try {
      const body = await health.json();
      const stores = [body.lancedb, body.duckdb].filter((s) => s && !s.ready);
      detail = stores.length ? stores.map((s) => s.detail).join("; ") : body.detail || detail;
    } catch (_) {
      // not JSON: the status text says enough
    }
    if (attempt === state.signIns) showAccount("unavailable", detail);
    return;
  }
  let caller = "";
  try {
    caller = (await health.json()).caller || "";
  } catch (_) {
    // not JSON: "Signed in" without a name
  }
  if (attempt !== state.signIns) return;
  state.key = key;
  state.open = !key;
  state.signedIn = true;
  $("api-key").value = "";
  showAccount(key ? "signed-in" : "open", caller);
  $("conversations-toggle").hidden = false;
  loadUploads(attempt);
  // The conversation this tab was in before a reload, opened again unless the reader has
  // asked something meanwhile (while the library loads).
  const restore = state.conversationId;
  await loadLibrary(attempt);
  if (attempt !== state.signIns) return;
  if (restore && restore === state.conversationId && !$("conversation").childElementCount) {
    await openConversation(restore);
  }
  if (attempt === state.signIns) openLinkedSource();
}

function signOut() {
  state.signIns += 1;
  state.key = "";
  state.signedIn = false;
  sessionStorage.removeItem(KEY_STORAGE);
  state.docs = [];
  state.docById.clear();
  state.chosenDocs.clear();
  newConversation();
  toggleConversations(false);
  $("conversations-toggle").hidden = true;
  forgetUploads();
  renderLibrary([]);
  renderSuggestions([]);
  renderFilterPanel();
  clearFilters();
  showAccount("needs-key");
}

// -- what the reader may read: documents and suggested questions --------------------------

async function loadLibrary(attempt) {
  const docs = [];
  try {
    for (let offset = 0; ; offset += 200) {
      const page = await (await api(`/v1/documents?limit=200&offset=${offset}`)).json();
      docs.push(...page.documents);
      if (offset + 200 >= page.total || !page.documents.length) break;
    }
  } catch (error) {
    if (attempt === state.signIns) $("welcome-text").textContent = describe(error);
    return;
  }
  if (attempt !== state.signIns) return;
  state.docs = docs;
  state.docById = new Map(docs.map((d) => [d.doc_id, d]));
  renderLibrary(docs);
  renderFilterPanel();
  renderFilterSummary();
  if (state.mention) updateMentions(); // an "@" typed while the list was still loading
  let questions = [];
  try {
    questions = (await (await api(`/v1/suggestions?limit=${SUGGESTIONS}`)).json()).questions;
  } catch (_) {
    // an older server without suggestions: the titles below still show what there is
  }
  if (attempt !== state.signIns) return;
  renderSuggestions(questions);
}

function renderLibrary(docs) {
  const count = docs.length;
  $("welcome-text").textContent = !state.signedIn ? $("welcome-text").textContent
    : count === 0 ? "There are no documents you may read yet."
      : `Ask a question about the ${count === 1 ? "document" : `${count} documents`} you may `
        + "read. Each answer cites its sources; tap a number to see the passage.";
  $("library").hidden = count === 0;
  $("library-title").textContent = `Your documents (${count})`;
  $("library-list").replaceChildren(...docs.slice(0, LIBRARY_SHOWN).map((doc) =>
    element("li", {}, element("button", {
      type: "button", text: doc.title || doc.rel_path, title: `Ask about ${doc.rel_path} only`,
      "data-rel-path": doc.rel_path,
      onclick: () => { chooseOnly(doc.doc_id); $("question").focus(); },
    }))));
  $("library-more").textContent = count > LIBRARY_SHOWN
    ? `and ${count - LIBRARY_SHOWN} more: search them under Filters.` : "";
}

function renderSuggestions(questions) {
  $("suggestions").hidden = !questions.length;
  $("suggestion-list").replaceChildren(...questions.map((q) =>
    element("li", {}, element("button", {
      type: "button", class: "suggestion", "data-testid": "suggestion",
      onclick: () => { if (!state.running) ask(q.question); },
    }, q.question, element("span", { class: "from", text: q.title || q.rel_path })))));
}

// -- filters ------------------------------------------------------------------------------

function renderFilterPanel() {
  const present = [...new Set(state.docs.map((d) => d.file_type))]
    .sort((a, b) => Object.keys(FILE_TYPE_LABELS).indexOf(a)
      - Object.keys(FILE_TYPE_LABELS).indexOf(b));
  const checked = new Set(chosenTypes());
  $("file-types").replaceChildren(element("legend", { text: "File type" }), ...present.map((type) =>
    element("label", {}, element("input", {
      type: "checkbox", value: type, checked: checked.has(type),
    }), ` ${FILE_TYPE_LABELS[type] || type}`)));
  $("file-types").hidden = present.length < 2;
  renderDocOptions();
}

function renderDocOptions() {
  const words = $("doc-search").value.toLowerCase().split(/\s+/).filter(Boolean);
  const matches = state.docs.filter((doc) => {
    const text = `${doc.title} ${doc.rel_path}`.toLowerCase();
    return words.every((word) => text.includes(word));
  });
  // The chosen documents stay on top, whatever the search.
  const chosen = state.docs.filter((d) => state.chosenDocs.has(d.doc_id));
  const rest = matches.filter((d) => !state.chosenDocs.has(d.doc_id));
  const shown = [...chosen, ...rest.slice(0, DOC_OPTIONS_SHOWN)];
  $("doc-options").replaceChildren(...shown.map((doc) =>
    element("li", {}, element("label", { "data-rel-path": doc.rel_path },
      element("input", {
        type: "checkbox", value: doc.doc_id, checked: state.chosenDocs.has(doc.doc_id),
      }),
      element("span", {}, doc.title || doc.rel_path, " ", element("small", { text: doc.rel_path }))))));
  $("doc-options-more").textContent = !matches.length && words.length
    ? "No document title or path has these words."
    : rest.length > DOC_OPTIONS_SHOWN
      ? `${rest.length - DOC_OPTIONS_SHOWN} more: type to narrow the list.` : "";
}

function chosenTypes() {
  return [...document.querySelectorAll("#file-types input:checked")].map((i) => i.value);
}

function currentFilters() {
  const filters = {};
  if (state.chosenDocs.size) filters.doc_ids = [...state.chosenDocs];
  const types = chosenTypes();
  if (types.length) filters.file_types = types;
  const from = parseInt($("page-from").value, 10);
  const to = parseInt($("page-to").value, 10);
  if (from > 0) filters.page_from = from;
  if (to > 0) filters.page_to = to;
  return Object.keys(filters).length ? filters : null;
}

/** "2 documents, PDF, pages 3-5": the filters in words. */
function describeFilters(filters) {
  const parts = [];
  if (filters.doc_ids) {
    const only = filters.doc_ids.length === 1 && state.docById.get(filters.doc_ids[0]);
    parts.push(only ? (only.title || only.rel_path) : `${filters.doc_ids.length} documents`);
  }
  if (filters.file_types) {
    parts.push(filters.file_types.map((t) => FILE_TYPE_LABELS[t] || t).join(" or "));
  }
  const { page_from: from, page_to: to } = filters;
  if (from && to) parts.push(from === to ? `page ${from}` : `pages ${from}-${to}`);
  else if (from) parts.push(`from page ${from}`);
  else if (to) parts.push(`up to page ${to}`);
  return parts.join(", ");
}

/** Why no document can match, or "" when some may: decided from the reader's own list. */
function filtersExcludeEverything(filters) {
  if (!filters || !state.docs.length) return "";
  if (filters.page_from && filters.page_to && filters.page_from > filters.page_to) {
    return "The first page comes after the last one.";
  }
  const candidates = state.docs.filter((doc) =>
    (!filters.doc_ids || filters.doc_ids.includes(doc.doc_id))
    && (!filters.file_types || filters.file_types.includes(doc.file_type))
    && (!filters.page_from || (doc.n_pages || 1) >= filters.page_from));
  return candidates.length ? "" : "No document matches these filters.";
}

function renderFilterSummary() {
  const filters = currentFilters();
  const summary = $("filter-summary");
  const excluded = filtersExcludeEverything(filters);
  summary.hidden = !filters;
  summary.className = excluded ? "error" : "";
  $("filter-text").textContent = !filters ? ""
    : excluded ? `${excluded.replace(/\.$/, "")} (${describeFilters(filters)})`
      : `Filtered: ${describeFilters(filters)}`;
  $("filters-toggle").classList.toggle("active", Boolean(filters));
  $("filters-toggle").textContent = filters
    ? `Filters (${Object.keys(filters).filter((k) => k !== "page_to" || !filters.page_from).length})`
    : "Filters";
}

function chooseOnly(docId) {
  state.chosenDocs = new Set([docId]);
  renderDocOptions();
  renderFilterSummary();
}

function clearFilters() {
  state.chosenDocs.clear();
  document.querySelectorAll("#file-types input").forEach((i) => { i.checked = false; });
  $("page-from").value = "";
  $("page-to").value = "";
  $("doc-search").value = "";
  renderDocOptions();
  renderFilterSummary();
}

function toggleFilters(open = $("filters").hidden) {
  $("filters").hidden = !open;
  $("filters-toggle").setAttribute("aria-expanded", String(open));
  if (open) $("doc-search").focus();
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

function setRunning(controller) {
  state.running = controller;
  $("stop").hidden = !controller;
  $("send").hidden = Boolean(controller);
  $("send").disabled = Boolean(controller);
}

function showTurn(turn) {
  $("welcome").hidden = true;
  $("new-conversation").hidden = false;
  // The newest question at the top of the screen, its answer filling in below it.
  turn.scrollIntoView({ block: "start" });
}

async function ask(question, filters = currentFilters()) {
  if (!state.signedIn) {
    showAccount("needs-key");
    return;
  }
  const turn = element("article", { class: "turn", "data-testid": "turn" });
  const status = element("p", { class: "status", "data-testid": "status", text: "Searching…" });
  const answer = element("div", { class: "answer", "data-testid": "answer" });
  turn.append(element("p", { class: "question", text: question }), status, answer);
  $("conversation").append(turn);
  showTurn(turn);

  const excluded = filtersExcludeEverything(filters);
  if (excluded) {
    status.textContent = `${excluded} Change or clear the filters, then ask again.`;
    status.className = "status error";
    status.setAttribute("data-testid", "no-match");
    turn.append(element("p", { class: "applied", text: `Filters: ${describeFilters(filters)}` }),
      element("div", { class: "recovery" },
        element("button", { type: "button", text: "Clear filters and ask", onclick: () => {
          turn.remove();
          clearFilters();
          ask(question, null);
        } }),
        element("button", { type: "button", text: "Change filters", onclick: () => toggleFilters(true) })));
    return;
  }

  const controller = new AbortController();
  setRunning(controller);
  const steps = [];
  // The server keeps the conversation, and reads its earlier turns as the history.
  const body = { question, stream: true };
  if (filters) body.filters = filters;
  let answered = false;
  let started = false;
  try {
    if (!state.conversationId) await startConversation();
    body.conversation_id = state.conversationId;
    const response = await api("/v1/ask", {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "Content-Type": "application/json" },
      signal: controller.signal,
    });
    started = true;
    for await (const event of serverSentEvents(response)) {
      if (event.kind === "step") {
        steps.push(event.data);
        status.textContent = STEP_LABELS[nextStep(event.data.step)] || "Working…";
      } else if (event.kind === "token") {
        status.textContent = STEP_LABELS.answerer;
        answer.textContent += event.data.text;
      } else if (event.kind === "answer") {
        answered = true;
        status.remove();
        renderAnswer(turn, answer, event.data, filters);
        turn.scrollIntoView({ block: "start" });
        if (!$("conversations").hidden) loadConversations();
      }
    }
    if (!answered) throw new TypeError("the answer stopped before it was complete");
  } catch (error) {
    if (error.name === "AbortError") {
      status.textContent = "Stopped.";
    } else {
      // The conversation was deleted meanwhile (elsewhere): a retry starts a new one.
      if (error instanceof ApiError && error.status === 404) forgetConversation();
      const message = started && !(error instanceof ApiError)
        ? "The connection to the server was lost before the answer was complete."
        : describe(error);
      failed(turn, status, answer, question, filters, error, message);
    }
  } finally {
    setRunning(null);
  }
}

function nextStep(done) {
  const order = Object.keys(STEP_LABELS);
  return order[Math.min(order.indexOf(done) + 1, order.length - 1)];
}

/** A failed ask: what went wrong in words, the question back in the composer, a Retry. */
function failed(turn, status, answer, question, filters, error, message) {
  answer.textContent = "";
  status.className = "status error";
  status.setAttribute("data-testid", "failure");
  status.textContent = message;
  if (!$("question").value.trim()) {
    $("question").value = question;
    fitComposer();
  }
  if (error instanceof ApiError && error.status === 401) {
    state.signedIn = false;
    state.key = "";
    sessionStorage.removeItem(KEY_STORAGE);
    showAccount("expired");
    return;
  }
  turn.append(element("div", { class: "recovery" }, element("button", {
    type: "button", class: "primary", "data-testid": "retry", text: "Retry",
    onclick: () => {
      if (state.running) return;
      turn.remove();
      if ($("question").value.trim() === question) {
        $("question").value = "";
        fitComposer();
      }
      ask(question, filters);
    },
  })));
  turn.scrollIntoView({ block: "nearest" });
}

function renderAnswer(turn, answerNode, response, filters) {
  const byNumber = new Map(response.citations.map((c) => [c.number, c]));
  const excerpts = response.excerpts || [];
  const supportsOf = (number) => {
    const excerpt = excerpts.find((x) => x.number === number);
    return excerpt ? excerpt.sentences.filter((s) => s.supports).map((s) => s.text) : [];
  };
  const filteredOut = filters && !response.citations.length;
  const kind = answerKind(response);
  turn.setAttribute("data-kind", kind);
  answerNode.classList.toggle("passages", kind === "passages");
  const said = words(response.language);
  if (filteredOut) {
    answerNode.textContent = said.filteredOut;
  } else if (kind === "passages") {
    // No lead is asserted: the page says so in its own words, instead of setting the
    // server's sentence in the answer's type, and the passages below are the answer.
    answerNode.replaceChildren(element("p", { class: "passages-notice",
      "data-testid": "passages-notice", text: said.passages }));
  } else {
    // The answer's Markdown (a model writes lists, tables and code), built as elements with
    // no HTML of its own, and each [n] a button opening its source.
    answerNode.classList.add("markdown");
    answerNode.replaceChildren(...renderBlocks(parseBlocks(response.answer), { links: true }));
    citeButtons(answerNode, (part, number) => {
      const citation = byNumber.get(number);
      if (!citation) return null;
      return element("button", {
        type: "button", class: "cite", "data-testid": "citation", text: part,
        title: citation.title || citation.rel_path, "aria-label": `Source ${part}`,
        onclick: (event) => openSource(citation, supportsOf(citation.number), event.currentTarget),
      });
    });
  }
  if (filters) {
    turn.append(element("p", { class: "applied", "data-testid": "applied-filters",
      text: `${said.filtered}: ${describeFilters(filters)}` }));
  }
  if (filteredOut) {
    turn.append(element("div", { class: "recovery" }, element("button", {
      type: "button", text: said.withoutFilters,
      onclick: () => { if (!state.running) { clearFilters(); ask(response.question, null); } },
    })));
  }
  if (response.degraded) {
    turn.append(element("p", { class: "notice",
      text: `${said.degraded}: ${response.degraded_reason}` }));
  }
  // The lead above states the fact; what each source says follows apart, one excerpt per
  // source under its section, the sentences the answer rests on marked. Without a lead the
  // excerpts are the answer, shown whole as they are for a lead.
  const sources = excerpts.length
    ? element("ol", { class: "sources excerpts", "data-testid": "excerpts" }, ...excerpts.map((x) =>
      element("li", { value: String(x.number), "data-testid": "excerpt" },
        element("button", {
          type: "button", class: "cite", text: `${x.title || x.rel_path}`,
          // The excerpt with its citation's index version: the passage as it was cited.
          onclick: (event) => openSource({ ...(byNumber.get(x.number) || {}), ...x },
            supportsOf(x.number), event.currentTarget),
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
          onclick: (event) => openSource(c, [], event.currentTarget),
        }),
        " ", element("code", { text: c.rel_path }), ` ${section(c)}${pages(c)}`)));
  const related = response.related || [];
  if (related.length) {
    turn.append(element("p", { class: "related-label", text: said.related }),
      element("ul", { class: "related", "data-testid": "related" }, ...related.map((c) =>
        element("li", {}, element("button", {
          type: "button", class: "cite", text: `${c.title || c.rel_path}`,
          onclick: (event) => openSource(c, [], event.currentTarget),
        }), " ", element("code", { text: c.rel_path })))));
  }
  turn.append(sources, details(response), feedbackForm(response));
}

/** Replaces each "[n]" in the text under `root` by what `make(part, n)` builds (none: kept). */
function citeButtons(root, make) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) texts.push(node);
  for (const node of texts) {
    const parts = node.textContent.split(/(\[\d+\])/);
    if (parts.length === 1) continue;
    node.replaceWith(...parts.map((part) => {
      const match = /^\[(\d+)\]$/.exec(part);
      return (match && make(part, Number(match[1]))) || document.createTextNode(part);
    }));
  }
}

/** "asserted" (the lead states the answer), "passages" (only the closest passages, none
 * asserted) or "not-found" (the documents do not answer). */
function answerKind(response) {
  if (!response.answerable) return "not-found";
  return response.asserted === false ? "passages" : "asserted";
}

/** How the answer was derived, out of the way until asked for: the queries searched, the
 * documents searched in, the passages read and each step. */
function details(response) {
  const trace = response.trace;
  const steps = trace.steps;
  const total = steps.reduce((sum, s) => sum + s.ms, 0);
  const mode = response.mode === "llm" ? "written by the language model"
    : "extracted from the passages";
  const queries = response.optimized_queries && response.optimized_queries.length
    ? response.optimized_queries : [response.question];
  const sources = trace.sources === "all" ? "every document you may read"
    : trace.sources.map((id) => {
      const doc = state.docById.get(id);
      return doc ? doc.title || doc.rel_path : id;
    }).join(" · ") || "none";
  return element("details", { class: "details", "data-testid": "details" },
    element("summary", { text: words(response.language).derived }),
    element("p", { text: `Answer ${mode}${response.degraded ? ` (degraded: ${response.degraded_reason})` : ""}, `
      + `in ${Math.round(total)} ms.` }),
    element("p", { "data-testid": "derived-queries" }, "Searched for: ",
      ...queries.flatMap((q, i) => [i ? " · " : "", element("q", { text: q })])),
    element("p", { "data-testid": "derived-sources", text: `In: ${sources}.` }),
    element("p", { text: `Passages read: ${trace.context_chunk_ids.length}.` }),
    element("ol", { "data-testid": "thinking" }, ...steps.map((s) =>
      element("li", { text: `${s.step.replace(/_/g, " ")}: ${Math.round(s.ms)} ms`
        + `${s.status !== "ok" ? ` (${s.status})` : ""}${s.detail ? ` — ${s.detail}` : ""}` }))));
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

// -- Markdown, rendered safely --------------------------------------------------------------
// Chunks are Markdown. Blocks (headings, paragraphs, lists, quotes, code, tables) and a few
// inline forms are built as elements; everything else stays text. Links show their words.

const TABLE_SEPARATOR = /^\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$/;
const LIST_ITEM = /^(\s*)([-*+]|\d+[.)])\s+(.*)$/;

function tableCells(line) {
  let body = line.trim();
  if (body.startsWith("|")) body = body.slice(1);
  if (body.endsWith("|") && !body.endsWith("\\|")) body = body.slice(0, -1);
  return body.split(/(?<!\\)\|/).map((cell) => cell.trim().replace(/\\\|/g, "|"));
}

/** Markdown as a list of blocks: {type, ...}; tables as {header, rows}. */
function parseBlocks(markdown) {
  const lines = markdown.replace(/\r\n?/g, "\n").split("\n");
  const blocks = [];
  let paragraph = [];
  const flush = () => {
    if (paragraph.length) blocks.push({ type: "p", text: paragraph.join(" ") });
    paragraph = [];
  };
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i];
    const trimmed = line.trim();
    if (!trimmed) { flush(); continue; }
    if (/^(```|~~~)/.test(trimmed)) {
      flush();
      const fence = trimmed.slice(0, 3);
      const code = [];
      for (i += 1; i < lines.length && !lines[i].trim().startsWith(fence); i += 1) code.push(lines[i]);
      blocks.push({ type: "code", text: code.join("\n") });
      continue;
    }
    const heading = /^(#{1,6})\s+(.*?)\s*#*\s*$/.exec(trimmed);
    if (heading) { flush(); blocks.push({ type: "h", text: heading[2] }); continue; }
    if (trimmed.startsWith("|") && i + 1 < lines.length && TABLE_SEPARATOR.test(lines[i + 1].trim())) {
      flush();
      const header = tableCells(trimmed);
      const rows = [];
      for (i += 2; i < lines.length && lines[i].trim().startsWith("|"); i += 1) {
        rows.push(tableCells(lines[i]));
      }
      i -= 1;
      blocks.push({ type: "table", header, rows });
      continue;
    }
    const item = LIST_ITEM.exec(line);
    if (item) {
      flush();
      const items = [];
      for (; i < lines.length; i += 1) {
        const match = LIST_ITEM.exec(lines[i]);
        if (match) {
          items.push({ depth: match[1].replace(/\t/g, "    ").length, ordered: /\d/.test(match[2]),
            text: match[3] });
        } else if (lines[i].trim() && items.length && /^\s+/.test(lines[i])) {
          items[items.length - 1].text += ` ${lines[i].trim()}`; // a wrapped item continues
        } else {
          break;
        }
      }
      i -= 1;
      blocks.push({ type: "list", items });
      continue;
    }
    if (trimmed.startsWith(">")) {
      flush();
      const quoted = [];
      for (; i < lines.length && lines[i].trim().startsWith(">"); i += 1) {
        quoted.push(lines[i].trim().replace(/^>\s?/, ""));
      }
      i -= 1;
      blocks.push({ type: "quote", text: quoted.join(" ") });
      continue;
    }
    paragraph.push(trimmed);
  }
  flush();
  return blocks;
}

const INLINE = /(`+)([\s\S]*?)\1|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|\*(\S(?:[^*]*?\S)?)\*|(!?)\[([^\]]*)\]\(([^)]*)\)|\\([\\`*_{}[\]()#+\-.!|>~])|<br\s*\/?>/gi;

/** Inline Markdown as nodes: code, strong, emphasis; images as their words, links as their
 * words too, or (`options.links`, for answers) as links when they go to http(s) addresses. */
function inline(text, options = {}) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    last = match.index + match[0].length;
    if (match[1]) nodes.push(element("code", { text: match[2] }));
    else if (match[3] !== undefined) nodes.push(element("strong", {}, ...inline(match[3], options)));
    else if (match[4] !== undefined) nodes.push(element("strong", {}, ...inline(match[4], options)));
    else if (match[5] !== undefined) nodes.push(element("em", {}, ...inline(match[5], options)));
    else if (match[7] !== undefined) {
      const words = inline(match[7], options);
      nodes.push(match[6] ? document.createTextNode(match[7] ? `[image: ${match[7]}]` : "[image]")
        : options.links && /^https?:\/\/[^\s]+$/i.test(match[8].trim())
          ? element("a", { href: match[8].trim(), target: "_blank",
            rel: "noopener noreferrer nofollow", title: match[8].trim() }, ...words)
          : element("span", { class: "link", title: match[8] }, ...words));
    } else if (match[9] !== undefined) nodes.push(document.createTextNode(match[9]));
    else nodes.push(document.createTextNode("\n")); // <br> in a table cell: a line break
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

function renderList(items, options = {}) {
  // Nested lists from indentation: each deeper item opens a list inside the previous item.
  const root = element(items[0].ordered ? "ol" : "ul");
  const stack = [{ depth: items[0].depth, list: root }];
  for (const item of items) {
    while (stack.length > 1 && item.depth < stack[stack.length - 1].depth) stack.pop();
    let top = stack[stack.length - 1];
    if (item.depth > top.depth && top.list.lastElementChild) {
      const nested = element(item.ordered ? "ol" : "ul");
      top.list.lastElementChild.append(nested);
      top = { depth: item.depth, list: nested };
      stack.push(top);
    }
    top.list.append(element("li", {}, ...inline(item.text, options)));
  }
  return root;
}

function renderTable(block, options = {}) {
  const width = Math.max(block.header.length, ...block.rows.map((r) => r.length));
  const cells = (row, tag) => Array.from({ length: width }, (_, i) =>
    element(tag, tag === "th" ? { scope: "col" } : {}, ...inline(row[i] || "", options)));
  const table = element("table", {},
    element("thead", block.repeated ? { class: "repeated", "data-testid": "repeated-header",
      title: "Column names repeated from the start of the table" } : {},
    element("tr", {}, ...cells(block.header, "th"))),
    element("tbody", {}, ...block.rows.map((row) => element("tr", {}, ...cells(row, "td")))));
  return element("div", { class: "table-wrap" }, table, block.repeated
    ? element("p", { class: "hint", text: "Column names repeated from the start of the table" })
    : null);
}

function renderBlocks(blocks, options = {}) {
  return blocks.map((block) => {
    if (block.type === "h") return element("h4", {}, ...inline(block.text, options));
    if (block.type === "code") return element("pre", {}, element("code", { text: block.text }));
    if (block.type === "list") return renderList(block.items, options);
    if (block.type === "quote") return element("blockquote", {}, ...inline(block.text, options));
    if (block.type === "table") return renderTable(block, options);
    return element("p", {}, ...inline(block.text, options));
  });
}

/** A chunk's own Markdown: its text without the breadcrumb line that repeats its headings. */
function chunkBody(chunk) {
  const text = chunk.text_chat || "";
  const cut = text.indexOf("\n\n");
  if (cut < 0 || !chunk.heading_path.length) return text;
  const first = text.slice(0, cut).trim();
  const path = chunk.heading_path.map((h) => h.trim());
  for (let keep = 0; keep < path.length; keep += 1) {
    if (first === path.slice(keep).join(" > ")) return text.slice(cut + 2);
  }
  return text;
}

// -- tables cut from their header ------------------------------------------------------------
// A long table is cut into chunks that each repeat its header row; a table the document
// itself breaks (a spreadsheet's block continued after a blank row or column) starts with a
// data row. Such a table gets the column names of the last table before it, in the same
// section, with as many columns.

const AMOUNT = /^[-+−]?[$€£¥]?\(?\d[\d,.\s]*\)?%?$/;

function looksLikeData(cells) {
  return cells.some((cell) => AMOUNT.test(cell.trim()));
}

function tablesOf(parsed) {
  return parsed.blocks.filter((b) => b.type === "table");
}

/** Gives each table of `parsed` (chunks in reading order) that starts with a data row the
 * header of the last earlier table of its section with as many columns; true when a table
 * still lacks one. */
function repeatHeaders(parsed) {
  let missing = false;
  parsed.forEach((chunk, index) => {
    if (!chunk.shown) return;
    for (const table of tablesOf(chunk)) {
      if (table.repeated || !looksLikeData(table.header)) continue;
      const earlier = [];
      for (const before of parsed.slice(0, index + 1)) {
        if (before.section !== chunk.section) continue;
        for (const candidate of tablesOf(before)) {
          if (candidate === table) break;
          earlier.push(candidate);
        }
      }
      const named = earlier.reverse().find((t) => t.header.length === table.header.length
        && !looksLikeData(t.header));
      if (named) {
        table.rows.unshift(table.header);
        table.header = named.header;
        table.repeated = true;
      } else {
        missing = true;
      }
    }
  });
  return missing;
}

// -- the source panel ---------------------------------------------------------------------

const SINCE_NOTES = {
  changed: "This passage has changed since the answer was given; shown as it was cited.",
  removed: "This document has since left the index; the passage is shown as it was cited.",
};

function isWide() {
  return window.matchMedia("(min-width: 60rem)").matches;
}

async function openSource(citation, supports = [], opener = null) {
  // Everything shown comes from the preview: a link from Slack carries only the chunk id.
  const opened = ++state.sourceOpens;
  state.opener = opener;
  document.body.classList.add("with-source");
  const panel = $("source");
  panel.hidden = false;
  panel.scrollTop = 0;
  $("source-title").textContent = citation.title || citation.rel_path || "Source";
  $("source-where").textContent = citation.rel_path
    ? `${citation.rel_path}${pages(citation)} ${section(citation)}` : "";
  $("source-pages").replaceChildren();
  $("source-text").replaceChildren(element("p", { text: "Loading…" }));
  $("source-file").hidden = true;
  if (!isWide()) $("close-source").focus({ preventScroll: true });
  const chunkPath = `/v1/chunks/${encodeURIComponent(citation.chunk_id)}`;
  // The index version the answer was read from: the passage as it was cited, even after a
  // reindex changed it.
  const pinned = citation.index_version ? `&version=${citation.index_version}` : "";
  let preview;
  try {
    preview = await (await api(`${chunkPath}?window=1${pinned}`)).json();
  } catch (error) {
    if (opened !== state.sourceOpens) return;
    $("source-text").replaceChildren(element("p", { class: "error",
      text: error instanceof ApiError && error.status === 404
        ? "This passage is not available to you (any more)." : describe(error) }));
    return;
  }
  if (opened !== state.sourceOpens) return;
  const { chunk } = preview;
  const since = preview.changed_since;
  $("source-title").textContent = chunk.title || chunk.rel_path;
  $("source-where").textContent = `${chunk.rel_path}${pages(chunk)} ${section(chunk)}`;
  // The page and the file are today's, which no longer hold a changed or removed passage.
  const current = since !== "changed" && since !== "removed";
  if (current && /\.pdf$/i.test(chunk.rel_path) && chunk.page_start) {
    showPages(chunkPath, chunk, opened);
  }

  const shown = [...preview.before, chunk, ...preview.after];
  let parsed = parseChunks(shown, chunk, []);
  if (repeatHeaders(parsed) && preview.before.length) {
    // The table's start lies further back: read the chunks before it for its column names.
    try {
      const wider = await (await api(`${chunkPath}?window=5${pinned}`)).json();
      const context = wider.before.filter((c) => c.position < shown[0].position);
      parsed = parseChunks(shown, chunk, context);
      repeatHeaders(parsed);
    } catch (_) {
      // the table shows as it was cut
    }
    if (opened !== state.sourceOpens) return;
  }
  $("source-text").replaceChildren(
    ...(SINCE_NOTES[since] ? [element("p", { class: "notice", "data-testid": "changed-since",
      text: SINCE_NOTES[since] })] : []),
    ...parsed.filter((p) => p.shown).map((p) => renderChunk(p, chunk)));
  markSupports(supports);

  if (current) {
    const link = $("source-file");
    link.hidden = false;
    link.onclick = async (event) => {
      event.preventDefault();
      try {
        await openOriginal(`${chunkPath}/file`, chunk.rel_path);
      } catch (error) {
        $("source-text").append(element("p", { class: "error", text: describe(error) }));
      }
    };
  }
}

function parseChunks(shown, cited, context) {
  return [...context.map((c) => [c, false]), ...shown.map((c) => [c, true])].map(([c, isShown]) => ({
    chunk: c,
    shown: isShown,
    cited: c.chunk_id === cited.chunk_id,
    section: c.heading_path.join("\u241f"),
    blocks: parseBlocks(chunkBody(c)),
  }));
}

function renderChunk(parsed, cited) {
  const { chunk } = parsed;
  const attributes = parsed.cited
    ? { class: "chunk cited", "data-testid": "cited-chunk" } : { class: "chunk neighbour" };
  const node = element("div", attributes);
  // A neighbour from another section says which.
  if (!parsed.cited && chunk.heading_path.join() !== cited.heading_path.join()
    && chunk.heading_path.length) {
    node.append(element("p", { class: "chunk-heading",
      text: chunk.heading_path[chunk.heading_path.length - 1] }));
  }
  node.append(...renderBlocks(parsed.blocks));
  return node;
}

/** Every page the chunk spans, first in the panel, each drawn with the passage marked. */
function showPages(chunkPath, chunk, opened) {
  const first = chunk.page_start;
  const last = Math.max(first, chunk.page_end || first);
  const numbers = [];
  for (let page = first; page <= last && numbers.length < PAGES_SHOWN; page += 1) numbers.push(page);
  const figures = numbers.map((page) => {
    const image = element("img", { alt: `Page ${page} of ${chunk.rel_path}, the passage highlighted`,
      "data-testid": "source-page", "data-page": String(page) });
    const figure = element("figure", {}, image,
      element("figcaption", { text: numbers.length > 1 ? `Page ${page} of pages ${first}-${last}`
        : `Page ${page}` }));
    api(`${chunkPath}/page${page === first ? "" : `?page=${page}`}`)
      .then((response) => response.blob())
      .then((blob) => {
        if (opened === state.sourceOpens) image.src = URL.createObjectURL(blob);
      })
      .catch(() => figure.remove()); // no page image (the file moved): the text still shows
    return figure;
  });
  if (last - first + 1 > numbers.length) {
    figures.push(element("p", { class: "hint",
      text: `The passage continues to page ${last}; open the original file for the rest.` }));
  }
  $("source-pages").replaceChildren(...figures);
}

/** Marks the sentences and table rows an answer rests on; the whole passage when none is
 * found (a link from Slack names no sentence). */
function markSupports(supports) {
  const cited = document.querySelector("#source-text .cited");
  if (!cited) return;
  const blocks = [cited, ...document.querySelectorAll("#source-text .neighbour")];
  let found = 0;
  for (const sentence of supports) {
    for (const root of blocks) {
      const hit = markRows(root, sentence) || markText(root, sentence);
      if (hit) { found += 1; break; }
    }
  }
  cited.classList.toggle("whole", !found);
  // Without a page image above it, the marked sentence is scrolled into the panel's view.
  const first = document.querySelector("#source-text mark, #source-text tr.supports");
  if (first && !document.querySelector("#source-pages figure")) {
    const panel = $("source");
    panel.scrollTop += first.getBoundingClientRect().top - panel.getBoundingClientRect().top
      - panel.clientHeight / 3;
  }
}

const squash = (text) => text.replace(/\s+/g, " ").trim().toLowerCase();

/** Table rows read as "Column: value; Column: value." sentences; true when one matched. */
function markRows(root, sentence) {
  const wanted = squash(sentence).replace(/\.$/, "");
  let matched = false;
  for (const table of root.querySelectorAll("table")) {
    const names = [...table.querySelectorAll("thead th")].map((th) => squash(th.textContent));
    for (const row of table.querySelectorAll("tbody tr")) {
      const cells = [...row.cells].map((cell) => squash(cell.textContent));
      const filled = cells.filter(Boolean);
      if (!filled.length) continue;
      const read = cells.map((cell, i) => (cell && names[i] ? `${names[i].replace(/[:,]$/, "")}: ${cell}` : cell))
        .filter(Boolean).join("; ");
      if (read === wanted || (filled.length > 1 && filled.every((cell) => wanted.includes(cell)))) {
        row.classList.add("supports");
        row.setAttribute("data-testid", "supporting-row");
        matched = true;
      }
    }
  }
  return matched;
}

/** Wraps the first occurrence of `sentence` under `root` (across elements, whitespace and
 * case aside) in <mark>; true when found. */
function markText(root, sentence) {
  const wanted = squash(sentence);
  if (wanted.length < 3) return false;
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const pieces = [];
  let flat = "";
  let spaced = true;
  let block = null;
  let previous = null;
  // The text as one string with its whitespace squashed, each character traced to its node;
  // blocks and cells are apart in reading, if not in the text.
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const holder = node.parentElement && node.parentElement.closest("li, td, th, p, h4, pre, blockquote");
    if (previous && holder !== block && !spaced) {
      flat += " ";
      pieces.push([previous, previous.nodeValue.length]);
      spaced = true;
    }
    block = holder;
    previous = node;
    const text = node.nodeValue;
    for (let i = 0; i < text.length; i += 1) {
      const space = /\s/.test(text[i]);
      if (space && spaced) continue;
      flat += space ? " " : text[i].toLowerCase();
      pieces.push([node, i]);
      spaced = space;
    }
  }
  const at = flat.indexOf(wanted);
  if (at < 0) return false;
  const end = at + wanted.length; // exclusive
  // One <mark> per text node the sentence runs through, last first so offsets hold.
  const spans = new Map();
  for (let k = at; k < end; k += 1) {
    const [node, offset] = pieces[k];
    if (offset >= node.nodeValue.length) continue;
    const span = spans.get(node) || [offset, offset];
    span[1] = offset + 1;
    spans.set(node, span);
  }
  for (const [node, [from, to]] of [...spans].reverse()) {
    const range = document.createRange();
    range.setStart(node, from);
    range.setEnd(node, to);
    range.surroundContents(element("mark", { "data-testid": "supporting" }));
  }
  return true;
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
  if (linked && state.signedIn) {
    openSource({ chunk_id: linked[1], index_version: Number(linked[2]) || null });
  }
}

function closeSource() {
  state.sourceOpens += 1;
  $("source").hidden = true;
  document.body.classList.remove("with-source");
  if (state.opener && state.opener.isConnected) state.opener.focus({ preventScroll: true });
  state.opener = null;
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
      note.className = "";
      form.querySelectorAll("button, input").forEach((n) => { n.disabled = true; });
    } catch (error) {
      note.textContent = `Not sent: ${describe(error)}`;
      note.className = "error";
    }
  };
  const form = element("div", { class: "feedback", "data-testid": "feedback" },
    element("button", { type: "button", "aria-label": "helpful",
      text: words(response.language).helpful, onclick: send("up") }),
    element("button", { type: "button", "aria-label": "not helpful",
      text: words(response.language).unhelpful, onclick: send("down") }),
    comment, note);
  return form;
}

function newConversation() {
  if (state.running) state.running.abort();
  forgetConversation();
  $("conversation").replaceChildren();
  $("welcome").hidden = false;
  $("new-conversation").hidden = true;
  closeSource();
}

// -- @ mentions: "@" in the question offers the reader's documents to ask about -------------

/** The "@words" just before the caret: where it starts and ends, and its words. */
function mentionAtCaret() {
  const box = $("question");
  const before = box.value.slice(0, box.selectionStart);
  const match = /(^|\s)@([^\s@]*)$/.exec(before);
  if (!match) return null;
  return { start: before.length - match[2].length - 1, end: box.selectionStart, words: match[2] };
}

function updateMentions() {
  const found = state.signedIn ? mentionAtCaret() : null;
  if (!found) {
    closeMentions();
    return;
  }
  const wanted = found.words.toLowerCase();
  const options = state.docs.filter((doc) => !state.chosenDocs.has(doc.doc_id)
    && `${doc.title} ${doc.rel_path}`.toLowerCase().includes(wanted)).slice(0, MENTIONS_SHOWN);
  state.mention = { ...found, options, selected: 0 };
  renderMentions();
}

function renderMentions() {
  const { options, selected } = state.mention;
  $("mentions").replaceChildren(...(options.length ? options.map((doc, i) => {
    const option = element("li", { role: "option", id: `mention-${i}`, "data-testid": "mention",
      "data-doc-id": doc.doc_id, "aria-selected": String(i === selected) },
    doc.title || doc.rel_path, element("small", { text: doc.rel_path }));
    // Chosen on mousedown, before the question box loses the focus and the list closes.
    option.addEventListener("mousedown", (event) => {
      event.preventDefault();
      chooseMention(i);
    });
    return option;
  }) : [element("li", { class: "empty", text: "No document of yours has that in its title or path." })]));
  $("mentions").hidden = false;
  $("question").setAttribute("aria-expanded", "true");
  if (options.length) $("question").setAttribute("aria-activedescendant", `mention-${selected}`);
}

function closeMentions() {
  state.mention = null;
  $("mentions").hidden = true;
  $("question").setAttribute("aria-expanded", "false");
  $("question").removeAttribute("aria-activedescendant");
}

/** Scopes the question to the chosen document (the `doc_ids` filter) and takes the "@words"
 * out of the question. */
function chooseMention(index) {
  const { start, end, options } = state.mention;
  const doc = options[index];
  if (!doc) return;
  const box = $("question");
  box.value = box.value.slice(0, start) + box.value.slice(end).replace(/^ +/, "");
  box.setSelectionRange(start, start);
  state.chosenDocs.add(doc.doc_id);
  renderDocOptions();
  renderFilterSummary();
  closeMentions();
  fitComposer();
  box.focus();
}

/** Arrow keys, Enter, Tab and Escape while the list is open; whether the key was used. */
function mentionKey(event) {
  if (!state.mention) return false;
  const count = state.mention.options.length;
  if (event.key === "Escape") {
    closeMentions();
  } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
    if (!count) return false;
    const step = event.key === "ArrowDown" ? 1 : count - 1;
    state.mention.selected = (state.mention.selected + step) % count;
    renderMentions();
  } else if ((event.key === "Enter" || event.key === "Tab") && count && !event.isComposing) {
    chooseMention(state.mention.selected);
  } else {
    return false;
  }
  event.preventDefault();
  event.stopPropagation();
  return true;
}

// -- saved conversations ------------------------------------------------------------------

function rememberConversation(id) {
  state.conversationId = id;
  sessionStorage.setItem(CONVERSATION_STORAGE, id);
}

function forgetConversation() {
  state.conversationId = "";
  sessionStorage.removeItem(CONVERSATION_STORAGE);
}

/** A new conversation on the server, named by its first question when that is answered. */
async function startConversation() {
  const response = await api("/v1/conversations", {
    method: "POST",
    body: "{}",
    headers: { "Content-Type": "application/json" },
  });
  rememberConversation((await response.json()).conversation_id);
}

/** Shows a saved conversation, each answer as it was given (or withheld, when it drew on
 * passages the reader can no longer read); false when it cannot be opened. */
async function openConversation(id) {
  let saved;
  try {
    saved = await (await api(`/v1/conversations/${encodeURIComponent(id)}`)).json();
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) forgetConversation();
    $("conversations-status").textContent = describe(error);
    return false;
  }
  if (state.running) state.running.abort();
  closeSource();
  rememberConversation(saved.conversation_id);
  $("conversation").replaceChildren(...saved.turns.map((past) => {
    const turn = element("article", { class: "turn", "data-testid": "turn" });
    const answer = element("div", { class: "answer", "data-testid": "answer" });
    turn.append(element("p", { class: "question", text: past.question }), answer);
    if (past.withheld || !past.answer) {
      answer.replaceWith(element("p", { class: "withheld", "data-testid": "withheld",
        text: WITHHELD_TEXT }));
    } else {
      renderAnswer(turn, answer, past.answer, null);
    }
    return turn;
  }));
  $("welcome").hidden = saved.turns.length > 0;
  $("new-conversation").hidden = saved.turns.length === 0;
  const last = $("conversation").lastElementChild;
  if (last) last.scrollIntoView({ block: "start" });
  return true;
}

function toggleConversations(open = $("conversations").hidden) {
  $("conversations").hidden = !open;
  $("conversations-toggle").setAttribute("aria-expanded", String(open));
  if (open) {
    loadConversations({ keepEdits: true });
    $("close-conversations").focus();
  }
}

// Opening the panel shows the last list at once and asks for the current one; a rename or a
// delete the reader began on the shown list meanwhile is kept, not wiped by the answer.
async function loadConversations({ keepEdits = false } = {}) {
  const status = $("conversations-status");
  let page;
  try {
    page = await (await api(`/v1/conversations?limit=${CONVERSATIONS_LISTED}`)).json();
  } catch (error) {
    status.textContent = describe(error);
    return;
  }
  status.textContent = !page.total ? "No saved conversations yet."
    : page.total > page.conversations.length
      ? `The latest ${page.conversations.length} of ${page.total}.` : "";
  const list = $("conversation-list");
  if (keepEdits && list.querySelector("form, [data-testid=confirm-delete]")) return;
  list.replaceChildren(...page.conversations.map(conversationItem));
}

function conversationItem(saved) {
  const id = saved.conversation_id;
  const item = element("li", { "data-testid": "saved-conversation", "data-id": id,
    class: id === state.conversationId ? "current" : null });
  const questions = `${saved.turn_count} question${saved.turn_count === 1 ? "" : "s"}`;
  item.append(
    element("button", { type: "button", class: "open", text: saved.title, onclick: async () => {
      if (await openConversation(id)) toggleConversations(false);
    } }),
    element("span", { class: "when",
      text: `${questions} · ${new Date(saved.updated_at).toLocaleString()}` }),
    element("div", { class: "actions" },
      element("button", { type: "button", text: "Rename", onclick: () => renameForm(item, saved) }),
      element("button", { type: "button", text: "Delete", onclick: () => confirmDelete(item, saved) })));
  return item;
}

function renameForm(item, saved) {
  const input = element("input", { type: "text", maxlength: "200", "aria-label": "New title" });
  input.value = saved.title;
  const form = element("form", {}, input, element("button", { type: "submit", text: "Save" }),
    element("button", { type: "button", text: "Cancel", onclick: loadConversations }));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const title = input.value.trim();
    if (!title) return;
    try {
      await api(`/v1/conversations/${encodeURIComponent(saved.conversation_id)}`, {
        method: "PATCH",
        body: JSON.stringify({ title }),
        headers: { "Content-Type": "application/json" },
      });
    } catch (error) {
      $("conversations-status").textContent = describe(error);
      return;
    }
    loadConversations();
  });
  item.replaceChildren(form);
  input.focus();
  input.select();
}

function confirmDelete(item, saved) {
  item.querySelector(".actions").replaceChildren(
    element("span", { text: "Delete it for good?" }),
    element("button", { type: "button", "data-testid": "confirm-delete", text: "Delete",
      onclick: async () => {
        try {
          await api(`/v1/conversations/${encodeURIComponent(saved.conversation_id)}`,
            { method: "DELETE" });
        } catch (error) {
          $("conversations-status").textContent = describe(error);
          return;
        }
        if (saved.conversation_id === state.conversationId) newConversation();
        loadConversations();
      } }),
    element("button", { type: "button", text: "Keep", onclick: loadConversations }));
}

// -- uploads: files the reader adds, for groups of their own ------------------------------

const UPLOAD_POLL_MS = 2000;
const UPLOAD_STATES = {
  queued: "Queued",
  parsing: "Parsing",
  indexing: "Indexing",
  indexed: "Indexed",
  failed: "Failed",
};

/** Whether this server takes uploads from this reader: the Files button shows only then. */
async function loadUploads(attempt = state.signIns) {
  let overview;
  try {
    overview = await (await api("/v1/uploads")).json();
  } catch (error) {
    if (attempt !== state.signIns) return;
    // 404: uploads are off on this deployment; anything else is said in the panel.
    if (error instanceof ApiError && error.status === 404) forgetUploads();
    else if (state.uploads) $("uploads-status").textContent = describe(error);
    return;
  }
  if (attempt !== state.signIns) return;
  const first = !state.uploads;
  state.uploads = overview;
  $("uploads-toggle").hidden = false;
  if (first) renderUploadGroups();
  $("upload-limits").textContent = `Up to ${formatBytes(overview.max_bytes)}: `
    + overview.readable_extensions.join(" ");
  renderUploads();
}

function forgetUploads() {
  clearTimeout(state.uploadPoll);
  state.uploads = null;
  $("uploads-toggle").hidden = true;
  toggleUploads(false);
  $("upload-list").replaceChildren();
  $("uploads-status").textContent = "";
}

function formatBytes(bytes) {
  return bytes >= 1 << 20 ? `${Math.round(bytes / (1 << 20))} MB`
    : bytes >= 1024 ? `${Math.round(bytes / 1024)} KB` : `${bytes} bytes`;
}

function renderUploadGroups() {
  const groups = state.uploads.groups;
  const legend = $("upload-groups").querySelector("legend");
  const boxes = groups.map((group) => element("label", {},
    element("input", { type: "checkbox", name: "upload-group", value: group, checked: true }),
    ` ${group}`));
  $("upload-groups").replaceChildren(legend, ...(boxes.length ? boxes
    : [element("p", { class: "hint", text: "Your key has no group, and what you add is never "
      + "public, so you cannot add files. Ask for a key with a group." })]));
}

function chosenGroups() {
  return [...document.querySelectorAll("input[name=upload-group]:checked")].map((b) => b.value);
}

function renderUploads() {
  const uploads = state.uploads ? state.uploads.uploads : [];
  $("upload-list").replaceChildren(...uploads.map(uploadItem));
  clearTimeout(state.uploadPoll);
  if (uploads.some((u) => u.state !== "indexed" && u.state !== "failed")) {
    state.uploadPoll = setTimeout(followUploads, UPLOAD_POLL_MS);
  }
}

/** Asks again while something is being indexed; once one is, the library offers it too. */
async function followUploads() {
  const before = new Set((state.uploads?.uploads || [])
    .filter((u) => u.state === "indexed").map((u) => u.upload_id));
  const attempt = state.signIns;
  await loadUploads(attempt);
  if (attempt !== state.signIns || !state.uploads) return;
  if (state.uploads.uploads.some((u) => u.state === "indexed" && !before.has(u.upload_id))) {
    loadLibrary(attempt);
  }
}

function uploadItem(upload) {
  const item = element("li", { "data-testid": "upload", "data-state": upload.state,
    "data-id": upload.upload_id });
  item.append(
    element("span", { class: "name", text: upload.filename }),
    element("span", { class: `state ${upload.state}`, "data-testid": "upload-state",
      text: UPLOAD_STATES[upload.state] || upload.state }),
    element("span", { class: "detail", "data-testid": "upload-detail", text: upload.detail }),
    element("span", { class: "for", text: `For ${upload.groups.join(", ")} · `
      + `${formatBytes(upload.size_bytes)} · ${new Date(upload.uploaded_at).toLocaleString()}` }),
    element("button", { type: "button", text: "Remove", onclick: () => removeUpload(upload) }));
  return item;
}

async function removeUpload(upload) {
  try {
    await api(`/v1/uploads/${encodeURIComponent(upload.upload_id)}`, { method: "DELETE" });
  } catch (error) {
    $("uploads-status").textContent = describe(error);
    return;
  }
  $("uploads-status").textContent = `${upload.filename} removed; it leaves the index at the `
    + "next run.";
  loadUploads();
}

/** Sends each file; one refused (too large, a type Lorehouse does not read) stops no other. */
async function addFiles(files) {
  if (!state.uploads || !files.length) return;
  toggleUploads(true);
  const groups = chosenGroups();
  const status = $("uploads-status");
  if (!groups.length) {
    status.textContent = "Choose at least one group to share the files with.";
    return;
  }
  const said = [];
  for (const file of files) {
    const dot = file.name.lastIndexOf(".");
    const type = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
    if (!state.uploads.readable_extensions.includes(type)) {
      said.push(`${file.name}: not a type Lorehouse reads`);
      continue;
    }
    if (file.size > state.uploads.max_bytes) {
      said.push(`${file.name}: larger than the ${formatBytes(state.uploads.max_bytes)} `
        + "uploads take");
      continue;
    }
    const query = new URLSearchParams({ filename: file.name });
    for (const group of groups) query.append("groups", group);
    status.textContent = `Sending ${file.name}…`;
    try {
      await api(`/v1/uploads?${query}`, { method: "POST", body: file,
        headers: { "Content-Type": "application/octet-stream" } });
      said.push(`${file.name}: added`);
    } catch (error) {
      said.push(`${file.name}: ${error instanceof ApiError ? error.detail : describe(error)}`);
    }
  }
  status.textContent = said.join(" · ");
  await loadUploads();
}

function toggleUploads(open = $("uploads").hidden) {
  $("uploads").hidden = !open;
  $("uploads-toggle").setAttribute("aria-expanded", String(open));
  if (open) {
    loadUploads();
    $("close-uploads").focus();
  }
}

// -- wiring the page ----------------------------------------------------------------------

function fitComposer() {
  const box = $("question");
  box.style.height = "auto";
  box.style.height = `${Math.min(box.scrollHeight + 2, 160)}px`;
}

function submitQuestion() {
  const question = $("question").value.trim();
  if (!question || state.running) return;
  closeMentions();
  $("question").value = "";
  fitComposer();
  toggleFilters(false);
  ask(question);
}

$("file-types").addEventListener("change", renderFilterSummary);
$("page-from").addEventListener("input", renderFilterSummary);
$("page-to").addEventListener("input", renderFilterSummary);
$("doc-search").addEventListener("input", renderDocOptions);
$("doc-options").addEventListener("change", (event) => {
  const box = event.target;
  if (box.checked) state.chosenDocs.add(box.value);
  else state.chosenDocs.delete(box.value);
  renderFilterSummary();
});
$("clear-filters").addEventListener("click", clearFilters);
$("clear-filters-inline").addEventListener("click", clearFilters);
$("close-filters").addEventListener("click", () => toggleFilters(false));
$("filters-toggle").addEventListener("click", () => toggleFilters());
$("sign-in").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("api-key").value.trim();
  if (!key) {
    $("api-key").focus();
    return;
  }
  signIn(key);
});
$("sign-out").addEventListener("click", signOut);
$("reconnect").addEventListener("click", start);
$("ask").addEventListener("submit", (event) => {
  event.preventDefault();
  submitQuestion();
});
$("question").addEventListener("keydown", (event) => {
  if (mentionKey(event)) return;
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submitQuestion();
  }
});
$("question").addEventListener("input", () => {
  fitComposer();
  updateMentions();
});
$("question").addEventListener("blur", closeMentions);
$("stop").addEventListener("click", () => state.running && state.running.abort());
$("new-conversation").addEventListener("click", newConversation);
$("conversations-toggle").addEventListener("click", () => toggleConversations());
$("close-conversations").addEventListener("click", () => toggleConversations(false));
$("start-conversation").addEventListener("click", () => {
  newConversation();
  toggleConversations(false);
  $("question").focus();
});
$("close-source").addEventListener("click", closeSource);
$("uploads-toggle").addEventListener("click", () => toggleUploads());
$("close-uploads").addEventListener("click", () => toggleUploads(false));
$("upload-input").addEventListener("change", (event) => {
  addFiles([...event.target.files]);
  event.target.value = "";
});
// A file dropped anywhere on the page is added; one dropped where uploads are off is only
// kept from replacing the page.
document.addEventListener("dragover", (event) => {
  if (!event.dataTransfer || ![...event.dataTransfer.types].includes("Files")) return;
  event.preventDefault();
  document.body.classList.toggle("dragging", Boolean(state.uploads));
});
document.addEventListener("dragleave", (event) => {
  if (!event.relatedTarget) document.body.classList.remove("dragging");
});
document.addEventListener("drop", (event) => {
  if (!event.dataTransfer || !event.dataTransfer.files.length) return;
  event.preventDefault();
  document.body.classList.remove("dragging");
  addFiles([...event.dataTransfer.files]);
});
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape") return;
  if (!$("conversations").hidden) toggleConversations(false);
  else if (!$("uploads").hidden) toggleUploads(false);
  else if (!$("source").hidden) closeSource();
  else if (!$("filters").hidden) toggleFilters(false);
});
window.addEventListener("hashchange", openLinkedSource);
$("send").textContent = words().ask;
document.documentElement.lang = BROWSER_LANGUAGE;
start();
