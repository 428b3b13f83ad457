/*
 * tlsite page behaviour: expand/collapse for stack tries, line links, the multi-rank search.
 *
 * Markup (written by tlsite's renderer):
 *   <li class="trie-node"><span class="trie-toggle"></span> frame text <ul>...children...</ul></li>
 * (a node of many children has several lists of them, core/render/trie_html.py: the toggle
 * hides and shows them all)
 * Without JavaScript every level stays visible. With it, nodes deeper than OPEN_DEPTH start
 * collapsed only when no compile id hangs below them (a compile id is what a user looks for,
 * and library frames are where torch compiles), so every compile id shows on first load. A
 * collapsed node's `.trie-count` (written by the renderer, shown by tlsite.css) says what it
 * holds. The toggle is a keyboard-focusable button; the +/- marker itself is drawn by
 * tlsite.css from the `trie-collapsed` class, and the nested list is hidden with its `hidden`
 * attribute.
 *
 * Material's instant navigation swaps page content without reloading scripts and announces
 * each new page on its `document$` observable, so binding re-runs there when it exists; nodes
 * already bound are marked and skipped. No inline handlers (they would need 'unsafe-inline').
 */
(function () {
  "use strict";

  var OPEN_DEPTH = 2; // levels 1..OPEN_DEPTH are shown initially; deeper ones without compile ids are collapsed

  function depthOf(node) {
    var depth = 0;
    for (var n = node; n; n = n.parentElement && n.parentElement.closest("li.trie-node")) depth++;
    return depth;
  }

  function setOpen(node, toggle, lists, open) {
    node.classList.toggle("trie-collapsed", !open);
    // `hidden` rather than CSS alone: Material forces `display` on `ul:not([hidden])`
    lists.forEach(function (list) { list.hidden = !open; });
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
  }

  function bindNode(node) {
    if (node.hasAttribute("data-trie-bound")) return;
    node.setAttribute("data-trie-bound", "");
    var toggle = node.querySelector(":scope > .trie-toggle");
    var lists = node.querySelectorAll(":scope > ul");
    if (!toggle || !lists.length) {
      node.classList.add("trie-leaf"); // nothing to expand
      return;
    }
    toggle.setAttribute("role", "button");
    toggle.setAttribute("tabindex", "0");
    var open = depthOf(node) < OPEN_DEPTH || node.querySelector(":scope > ul a.cid") !== null;
    setOpen(node, toggle, lists, open);
    toggle.addEventListener("click", function () {
      setOpen(node, toggle, lists, lists[0].hidden);
    });
    toggle.addEventListener("keydown", function (event) {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault(); // Space would otherwise scroll the page
        setOpen(node, toggle, lists, lists[0].hidden);
      }
    });
  }

  // The landing page of a multi-rank site searches itself only (each rank's report has its own
  // index): its box says so, and each rank's "Search" link (rank_N/index.html?q=, which opens
  // Material's search there) carries what was typed here.
  function bindRankSearch() {
    var links = document.querySelectorAll("a.tlsite-rank-search");
    var box = document.querySelector('input[data-md-component="search-query"]');
    if (!links.length || !box || box.hasAttribute("data-rank-search")) return;
    box.setAttribute("data-rank-search", "");
    box.setAttribute("placeholder", "Search this page only");
    box.addEventListener("input", function () {
      links.forEach(function (link) {
        var base = link.getAttribute("href").split("?")[0];
        link.setAttribute("href", base + "?q=" + encodeURIComponent(box.value));
      });
    });
  }

  // A long table comes in pieces (core/render/long_tables.py): the first table with the head,
  // then tables the browser lays out only near the screen. Each later piece gets the first
  // one's width and column widths, so the columns line up; measuring lays out the first
  // piece only, and the widths follow it whenever it changes size (window, fonts, phone).
  // Aligning changes the rows' heights, and the browser keeps nothing in place across it (its
  // scroll anchoring stops when a table around the anchor changes width): the row the address
  // names (#-_3_0_0) keeps its place on the screen if it shows (on a slow machine the pieces
  // are aligned after the page has loaded, and the browser no longer follows the link), else
  // the first row that shows.
  function alignPieces(group) {
    var anchor = anchorOf(group);
    var before = anchor && anchor.getBoundingClientRect().top;
    var first = group.querySelector("table");
    var head = first && first.tHead && first.tHead.rows[0];
    // a table shown as a list of blocks (all compile ids on a phone) has no columns to follow
    var columns = head && getComputedStyle(first).display !== "block";
    var widths = columns ? Array.prototype.map.call(head.cells, function (cell) {
      return cell.getBoundingClientRect().width;
    }) : [];
    var total = columns ? first.getBoundingClientRect().width + "px" : "";
    group.querySelectorAll(".tlsite-rows-more table").forEach(function (table) {
      var cols = table.querySelector("colgroup");
      if (cols) cols.remove();
      if (columns) {
        cols = table.insertBefore(document.createElement("colgroup"), table.firstChild);
        widths.forEach(function (width) {
          cols.appendChild(document.createElement("col")).style.width = width + "px";
        });
      }
      table.style.tableLayout = columns ? "fixed" : "";
      table.style.width = total;
    });
    if (anchor) window.scrollBy(0, anchor.getBoundingClientRect().top - before);
  }

  function anchorOf(group) {
    var id = null;
    try {
      id = decodeURIComponent(location.hash.slice(1));
    } catch (error) {
      // a malformed address names nothing
    }
    var linked = id && document.getElementById(id);
    if (linked && group.contains(linked) && shows(linked)) return linked;
    var tables = group.querySelectorAll("table");
    for (var t = 0; t < tables.length; t++) {
      var box = (tables[t].closest(".tlsite-rows-more") || tables[t]).getBoundingClientRect();
      if (box.top >= window.innerHeight) break; // this piece and the rest are below the screen
      if (box.bottom <= 0) continue; // above it (a skipped piece's box: no layout)
      var rows = tables[t].rows;
      for (var r = 0; r < rows.length; r++) {
        if (rows[r].getBoundingClientRect().bottom > 0) return rows[r];
      }
    }
    return null;
  }

  function shows(element) {
    var box = element.getBoundingClientRect();
    return box.bottom > 0 && box.top < window.innerHeight;
  }

  var firstPieces = window.ResizeObserver && new ResizeObserver(function (entries) {
    entries.forEach(function (entry) { alignPieces(entry.target.closest(".tlsite-rows")); });
  });

  function alignAllPieces() {
    document.querySelectorAll(".tlsite-rows").forEach(function (group) {
      var first = group.querySelector("table");
      if (firstPieces && first) {
        firstPieces.observe(first); // it calls alignPieces now and at every change of size
      } else {
        alignPieces(group);
      }
    });
  }

  function bindAll() {
    document.querySelectorAll("li.trie-node").forEach(bindNode);
    bindRankSearch();
    alignAllPieces();
    showLine();
  }

  // Code blocks (<div data-block="artifact-12">) have one <span> per line, numbered by a CSS
  // counter. A link "#artifact-12-L40" names line 40 of that block: the line gets that id,
  // its collapsed sections open, and it is scrolled into view and marked.
  function lineOf(hash) {
    var match = /^#([A-Za-z0-9_-]+)-L([0-9]+)$/.exec(hash);
    if (!match) return null;
    var code = document.querySelector('[data-block="' + match[1] + '"] code');
    var line = code && code.children[parseInt(match[2], 10) - 1];
    if (line) line.id = match[1] + "-L" + match[2];
    return line || null;
  }

  function showLine() {
    var line = lineOf(location.hash);
    if (!line) return;
    document.querySelectorAll(".tlsite-target").forEach(function (old) {
      old.classList.remove("tlsite-target");
    });
    line.classList.add("tlsite-target");
    for (var node = line.parentElement; node; node = node.parentElement) {
      if (node.tagName === "DETAILS") node.open = true;
    }
    line.scrollIntoView({ block: "center" });
  }

  // a click on a line number puts that line's link in the address bar, ready to share
  document.addEventListener("click", function (event) {
    var line = event.target.closest && event.target.closest(".tlsite-lines code > span");
    if (!line) return;
    var gutter = parseFloat(getComputedStyle(line, "::before").width) || 0;
    if (event.clientX - line.getBoundingClientRect().left > gutter) return;
    var block = line.closest("[data-block]");
    var number = Array.prototype.indexOf.call(line.parentElement.children, line) + 1;
    history.replaceState(null, "", "#" + block.getAttribute("data-block") + "-L" + number);
    showLine();
  });
  window.addEventListener("hashchange", showLine);

  // Code from a trace may carry an invisible WORD JOINER that keeps Markdown preprocessors
  // (snippets, CriticMarkup) from reading it as syntax (core/render/escape.py); copied text,
  // by a selection or Material's copy button, is the code as it was logged.
  document.addEventListener("copy", function (event) {
    var field = document.activeElement;
    var text = field && /^(TEXTAREA|INPUT)$/.test(field.tagName)
      ? field.value.slice(field.selectionStart, field.selectionEnd)
      : String(document.getSelection());
    if (text.indexOf("\u2060") < 0 || !event.clipboardData) return;
    event.clipboardData.setData("text/plain", text.split("\u2060").join(""));
    event.preventDefault();
  });

  var documents = window.document$;
  if (documents && typeof documents.subscribe === "function") {
    documents.subscribe(bindAll); // emits for the first page too
  } else if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", bindAll);
  } else {
    bindAll();
  }
})();
