/*
 * tlsite: search finds the pages' code too (loaded through `extra.polyfills`, before Material).
 *
 * Why: a report's code blocks (graphs, generated code, guards, metrics tables) go into its pages
 * after Material's search has indexed them: indexed, their megabytes would make the index too
 * slow to load. So "aten.mm" or a kernel name found nothing. The build writes, beside the search
 * index, `search/code_index.js`: for each compile page, each artifact's distinct ops, kernel
 * names, graph node names and guard terms (tlsite/core/render/code_terms.py), every distinct
 * list once.
 *
 * How: this file wraps `window.Worker` (the browser's, or the file:// shim's) so that the worker
 * Material starts for its search is watched. When search is set up, the code index is loaded
 * with a <script> (works from file:// and over http). Each result list the worker sends back is
 * completed, before Material sees it, with the artifact sections whose terms or title match
 * every word of the query (titles too: Material's index leaves out the headings with no text
 * of their own that this index lists, a storm's thousands of artifacts; a word matches a term where it starts: at the start or after a character that is
 * not a letter or digit, so "addmm" finds "aten.addmm.default" and "layer_norm" finds
 * "aten.native_layer_norm.default"; "L['self'].training" finds
 * "L['self']._modules['attn'].training"). Sections go into the page's result when Material
 * found the page too, else into a new result after Material's (before, for a query that looks
 * like code); each links to the artifact's heading. Everything from the index is escaped
 * before it is shown. Without the file (a Markdown tree built by plain `mkdocs build`, whose
 * search indexes the code itself) nothing is added.
 */
(function () {
  "use strict";

  var BaseWorker = window.Worker;
  if (typeof BaseWorker === "undefined") return;

  var SETUP = 0, QUERY = 2, RESULT = 3; // Material's SearchMessageType
  var SHOWN_TERMS = 6; // matching terms shown per section
  var OPEN_SECTIONS = 3; // sections shown per new result; the rest under "N more on this page"
  var INDEX_PATH = "search/code_index.js";

  function materialConfig() {
    var element = document.getElementById("__config");
    try {
      return element ? JSON.parse(element.textContent) : null;
    } catch (error) {
      return null;
    }
  }

  function isSearchWorker(url) {
    var config = materialConfig();
    if (!config || !config.search) return false;
    var base = document.baseURI;
    return new URL(String(url), base).href === new URL(config.search, base).href;
  }

  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }

  /* ---- the code index ---------------------------------------------------------------- */

  var loading = null;

  /* Load search/code_index.js once; resolves with the index, or null without one. */
  function loadIndex() {
    if (loading) return loading;
    loading = new Promise(function (resolve) {
      var config = materialConfig() || { base: "." };
      var root = new URL(String(config.base || ".").replace(/\/?$/, "/"), location.href);
      var script = document.createElement("script");
      script.src = new URL(INDEX_PATH, root).href;
      script.addEventListener("load", function () {
        var data = window.__tlsite_code;
        if (!data || !Array.isArray(data.terms)) return resolve(null);
        data.lower = data.terms.map(function (t) { return t.toLowerCase(); });
        data.titleLower = (data.titles || []).map(function (t) { return t.toLowerCase(); });
        resolve(data);
      });
      script.addEventListener("error", function () { resolve(null); });
      document.head.appendChild(script);
    });
    return loading;
  }

  /* The words of a query as typed, without Material's query syntax. */
  function queryWords(query) {
    var words = [];
    String(query).split(/\s+/).forEach(function (word) {
      if (/^-/.test(word)) return; // excluded with "-word": nothing to find
      word = word
        .replace(/"/g, "")
        .replace(/^\+/, "")
        .replace(/[~^]\d*$/, "")
        .replace(/\*+$/, "")
        .replace(/^torch\.ops\./i, "")
        .toLowerCase();
      if (word.length >= 2) words.push(word);
    });
    return words;
  }

  /* A query looks like code where it has brackets, quotes, parentheses or a dot inside a word
   * (`L['idx']`, `aten.mm`): its code results come before Material's, which split it into
   * words ("L", "idx") found all over the report. The pages with code that matches then come
   * first, in Material's order, then the pages with new results. */
  function looksLikeCode(query) {
    return /[\[\]'"()]|\w\.\w/.test(String(query));
  }

  /* Where `word` is in `lower` at a word start from `from` on: {at, length}, or null. A word
   * whose attribute follows an item (`l['self'].training`) also matches a term with more
   * steps between them (`L['self']._modules['attn'].training`, as guards print it). */
  function locate(lower, word, from) {
    var pieces = word.split(/(?<=[\])])(?=\.)/);
    for (var at = lower.indexOf(pieces[0], from); at !== -1;
      at = lower.indexOf(pieces[0], at + 1)) {
      if (at > 0 && /[a-z0-9]/.test(lower.charAt(at - 1))) continue;
      var termEnd = lower.indexOf(" ", at);
      if (termEnd === -1) termEnd = lower.length;
      var end = at + pieces[0].length;
      for (var p = 1; p < pieces.length && end <= termEnd; p++) {
        var next = lower.indexOf(pieces[p], end);
        end = next === -1 ? Infinity : next + pieces[p].length;
      }
      if (end <= termEnd) return { at: at, length: end - at };
    }
    return null;
  }

  /* Every term of the list that has `word` at a word start (for the snippet). */
  function findTerms(text, lower, word, into) {
    var from = 0;
    for (var hit = locate(lower, word, 0); hit; hit = locate(lower, word, from)) {
      var start = lower.lastIndexOf(" ", hit.at) + 1;
      var end = lower.indexOf(" ", hit.at);
      if (end === -1) end = lower.length;
      from = end;
      into.push({ term: text.slice(start, end), offset: hit.at - start, length: hit.length });
    }
  }

  /* term lists (by index) matching every word: index -> snippet HTML */
  function matchingLists(index, words) {
    var found = {};
    for (var i = 0; i < index.terms.length; i++) {
      var text = index.terms[i], lower = index.lower[i];
      var all = words.every(function (word) { return locate(lower, word, 0) !== null; });
      if (!all) continue;
      var hits = [];
      words.forEach(function (word) { findTerms(text, lower, word, hits); });
      found[i] = snippet(hits);
    }
    return found;
  }

  /* titles (by index) holding every word: index -> true. The index lists every artifact
   * section, those with no code terms too, so "dynamo_output_graph" finds each artifact of
   * that name (Material's index has no entry for a heading with no text under it). */
  function matchingTitles(index, words) {
    var found = {};
    index.titleLower.forEach(function (lower, i) {
      if (words.every(function (word) { return locate(lower, word, 0) !== null; })) {
        found[i] = true;
      }
    });
    return found;
  }

  /* `text` escaped, with the first match of each word marked as Material marks its own. */
  function marked(text, words) {
    var lower = String(text).toLowerCase(), spans = [];
    words.forEach(function (word) {
      var hit = locate(lower, word, 0);
      if (hit) spans.push([hit.at, hit.at + hit.length]);
    });
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var html = "", at = 0;
    spans.forEach(function (span) {
      if (span[0] < at) return; // overlaps the previous mark
      html += escapeHtml(text.slice(at, span[0])) + "<mark>" +
        escapeHtml(text.slice(span[0], span[1])) + "</mark>";
      at = span[1];
    });
    return html + escapeHtml(text.slice(at));
  }

  function snippet(hits) {
    var seen = {}, shown = [];
    hits.forEach(function (hit) {
      if (seen[hit.term] || shown.length >= SHOWN_TERMS) return;
      seen[hit.term] = true;
      var t = hit.term, a = hit.offset, b = hit.offset + hit.length;
      shown.push("<code>" + escapeHtml(t.slice(0, a)) + "<mark>" + escapeHtml(t.slice(a, b)) +
        "</mark>" + escapeHtml(t.slice(b)) + "</code>");
    });
    var more = Object.keys(hits.reduce(function (all, hit) {
      all[hit.term] = true;
      return all;
    }, {})).length - shown.length;
    return "<p>In the code: " + shown.join(", ") + (more > 0 ? " and " + more + " more" : "") +
      "</p>";
  }

  /* Material's result with the pages that share its sections added. A recompile storm's
   * compile pages repeat the same sections with other numbers; the search index holds each
   * such section once (the first page's) and `index.shared` names the other pages: each
   * becomes a result of its own right after the page Material found (or joins that page's
   * result where Material found the page too), linking to its own copy of the section. */
  function withShared(result, index, query) {
    var shared = index && index.shared;
    if (!shared || !result || !Array.isArray(result.items)) return result;
    var words = queryWords(query);
    var groups = result.items.map(function (group) { return group.slice(); });
    var groupOf = {};
    groups.forEach(function (group, position) {
      group.forEach(function (item) {
        if (item.location.indexOf("#") === -1) groupOf[item.location] = position;
      });
    });
    var added = false, after = groups.map(function () { return []; });
    groups.forEach(function (group, position) {
      group.slice().forEach(function (item) {
        var members = shared[item.location];
        if (!members) return;
        var anchor = item.location.slice(item.location.indexOf("#") + 1);
        members.forEach(function (member) {
          var own = Array.isArray(member);
          var page = index.sharedPages[own ? member[0] : member];
          var section = {
            location: page[0] + "#" + (own ? member[1] : anchor),
            title: own ? marked(member[2], words) : item.title,
            text: "",
            score: item.score,
            terms: item.terms
          };
          var at = groupOf[page[0]];
          if (at === undefined) {
            var fresh = [{ location: page[0], title: escapeHtml(page[1]), text: "",
              score: item.score, terms: item.terms }];
            at = groupOf[page[0]] = groups.length;
            groups.push(fresh);
            after[position].push(fresh);
          }
          if (!groups[at].some(function (x) { return x.location === section.location; })) {
            groups[at].push(section);
          }
          added = true;
        });
      });
    });
    if (!added) return result;
    var ordered = [];
    for (var i = 0; i < after.length; i++) ordered.push(groups[i], ...after[i]);
    var copy = {};
    Object.keys(result).forEach(function (key) { copy[key] = result[key]; });
    copy.items = ordered;
    return copy;
  }

  /* Material's result with the matching code sections added. */
  function withCode(result, query, index) {
    result = withShared(result, index, query);
    var words = queryWords(query);
    if (!index || !words.length || !result || !Array.isArray(result.items)) return result;
    var lists = matchingLists(index, words), titles = matchingTitles(index, words);
    if (!Object.keys(lists).length && !Object.keys(titles).length) return result;
    var terms = {};
    words.forEach(function (word) { terms[word] = true; });

    var groups = result.items.slice();
    var groupOf = {}, withSections = [], codeLike = looksLikeCode(query);
    groups.forEach(function (group, position) {
      group.forEach(function (item) {
        if (item.location.indexOf("#") === -1) groupOf[item.location] = position;
      });
    });
    index.pages.forEach(function (page) {
      var location = page[0], entries = page[2], sections = [];
      for (var e = 0; e < entries.length; e += 3) {
        var html = lists[entries[e + 2]];
        if (html === undefined && !titles[entries[e + 1]]) continue;
        // an artifact is named by its number: its heading is "#artifact-N", "title (N)"
        var heading = entries[e], title = index.titles[entries[e + 1]];
        var artifact = typeof heading === "number";
        sections.push({
          location: location + "#" + (artifact ? "artifact-" + heading : heading),
          title: marked(title, words) + escapeHtml(artifact ? " (" + heading + ")" : ""),
          text: html || "",
          terms: terms
        });
      }
      if (!sections.length) return;
      var position = groupOf[location];
      if (position !== undefined) {
        groups[position] = merged(groups[position], sections, codeLike);
        withSections.push(groups[position]);
        return;
      }
      sections.forEach(function (section, i) { section.score = i < OPEN_SECTIONS ? 1 : 0.5; });
      groups.push([{ location: location, title: escapeHtml(page[1]), text: "", score: 1,
        terms: terms }].concat(sections));
      withSections.push(groups[groups.length - 1]);
    });
    if (codeLike) {
      groups = withSections.concat(groups.filter(function (group) {
        return withSections.indexOf(group) === -1;
      }));
    }
    var copy = {};
    Object.keys(result).forEach(function (key) { copy[key] = result[key]; });
    copy.items = groups;
    return copy;
  }

  /* Material's result for a page with the page's code sections added. Where Material found
   * every word of the query in one of the page's sections, the code sections come after its
   * own (under "N more on this page"); else the first ones are shown with its best. For a
   * query that looks like code (`codeFirst`) the first ones come before Material's own. */
  function merged(group, sections, codeFirst) {
    var have = {};
    group.forEach(function (item) { have[item.location] = true; });
    sections = sections.filter(function (section) { return !have[section.location]; });
    if (!sections.length) return group;
    var top = group[0].score;
    var low = Math.min.apply(null, group.map(function (item) { return item.score; })) / 2;
    var strong = group.some(function (item) {
      var found = Object.keys(item.terms || {}).map(function (key) { return item.terms[key]; });
      return found.length > 0 && found.every(Boolean);
    });
    var shown = strong && !codeFirst ? [] : sections.slice(0, OPEN_SECTIONS);
    var rest = sections.slice(shown.length);
    shown.forEach(function (section) { section.score = top; });
    rest.forEach(function (section) { section.score = low; });
    // the first section scored below the best ends the ones Material shows at once
    var cut = group.findIndex(function (item, i) { return i > 0 && item.score < top; });
    if (cut === -1) cut = group.length;
    if (codeFirst) cut = 0; // Material shows the page, then its items in this order
    return group.slice(0, cut).concat(shown, group.slice(cut), rest);
  }

  /* ---- the worker wrapper ------------------------------------------------------------ */

  function watch(worker) {
    var queries = []; // sent, not answered yet: the worker answers in order
    var chain = Promise.resolve(); // messages reach Material in the order they came
    var post = worker.postMessage;
    var add = worker.addEventListener;
    var remove = worker.removeEventListener;
    var wrapped = new Map();

    worker.postMessage = function (message) {
      if (message && message.type === SETUP) loadIndex();
      if (message && message.type === QUERY) queries.push(message.data);
      return post.apply(worker, arguments);
    };

    function receive(event, deliver) {
      var data = event.data;
      if (!data || data.type !== RESULT) {
        chain = chain.then(function () { deliver(event); });
        return;
      }
      var query = queries.shift();
      chain = chain
        .then(loadIndex)
        .then(function (index) {
          var completed = withCode(data.data, query, index);
          deliver(completed === data.data ? event
            : { type: "message", data: { type: RESULT, data: completed } });
        })
        .catch(function (error) {
          console.warn("tlsite code search:", error);
          deliver(event);
        });
    }

    worker.addEventListener = function (type, listener, options) {
      if (type !== "message" || typeof listener !== "function") {
        return add.apply(worker, arguments);
      }
      var inner = function (event) {
        receive(event, function (message) { listener.call(worker, message); });
      };
      wrapped.set(listener, inner);
      return add.call(worker, type, inner, options);
    };
    worker.removeEventListener = function (type, listener, options) {
      var inner = type === "message" && wrapped.get(listener);
      if (inner) wrapped.delete(listener);
      return remove.call(worker, type, inner || listener, options);
    };
  }

  /* ---- arriving from a code result ---------------------------------------------------- */

  /* A code result links to an artifact's heading with the query in `?h=` (Material marks its
   * words in the page): the artifact's code, collapsed under the heading, is opened and its
   * first mark scrolled into view. */
  function showCodeMatch() {
    if (!/^#(artifact|metrics)-\d+$/.test(location.hash)) return;
    if (!new URLSearchParams(location.search).has("h")) return;
    var heading = document.getElementById(location.hash.slice(1));
    for (var node = heading && heading.nextElementSibling; node; node = node.nextElementSibling) {
      if (/^H[1-6]$/.test(node.tagName)) return;
      if (node.tagName !== "DETAILS") continue;
      node.open = true;
      var mark = node.querySelector("mark");
      if (mark) mark.scrollIntoView({ block: "center" });
      return;
    }
  }
  window.addEventListener("load", function () { setTimeout(showCodeMatch, 0); });

  function Worker(url, options) {
    var worker = new BaseWorker(url, options);
    if (isSearchWorker(url)) watch(worker);
    return worker;
  }
  Worker.prototype = BaseWorker.prototype;
  window.Worker = Worker;
})();
