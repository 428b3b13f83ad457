/*
 * tlsite provenance page: three linked panes (pre-grad graph, post-grad graph, generated code).
 *
 * Markup (written by tlsite's provenance_panes.html, loaded only on provenance pages):
 *   <div class="tlsite-prov" data-code-lang="python|cpp">
 *     <section class="tlsite-prov-pane" id="preGradGraph|postGradGraph|generatedCode">
 *       <div class="tlsite-prov-body"><pre class="tlsite-prov-src">escaped text</pre></div>
 *     </section> <div class="tlsite-prov-divider"> ...
 *     <script id="lineMappings" type="application/json">{preToPost, postToPre, ...}</script>
 *   </div>
 * Behaviour (tlparse's, spec §6.4): each pane's text becomes one row per line with a line-number
 * gutter; lines that have a mapping are bold; hovering a line highlights it and its counterparts
 * in the other two panes, which smooth-scroll so the middle counterpart is centred. Clicking
 * does the same and keeps (pins) the highlight until the line is clicked again or Escape is
 * pressed. The bars between the panes resize them (drag, or arrow keys when focused).
 *
 * The line numbers in the maps are 1-based lines of the texts as the page holds them (the
 * renderer already cut the code where tlparse starts counting). Without JavaScript the panes
 * still show the plain text. Everything here is bound with addEventListener; the JSON is only
 * parsed, never evaluated. Material's `document$` (instant navigation) re-runs binding when it
 * exists; a bound viewer is marked and skipped.
 */
(function () {
  "use strict";

  var MAP_NAMES = [
    "preToPost",
    "postToPre",
    "pyCodeToPost",
    "postToPyCode",
    "cppCodeToPost",
    "postToCppCode",
  ];
  var PANES = { pre: "preGradGraph", post: "postGradGraph", code: "generatedCode" };
  var NAMES = { pre: "pre-grad", post: "post-grad", code: "generated code" };
  var KEY_STEP = 24; // pixels a divider moves per arrow key press

  function readMappings(root) {
    var node = root.querySelector("#lineMappings") || document.getElementById("lineMappings");
    var maps = {};
    if (node) {
      try {
        maps = JSON.parse(node.textContent || "{}") || {};
      } catch (error) {
        maps = {}; // tlparse shows no links when the mapping does not decode either
      }
    }
    if (typeof maps !== "object" || Array.isArray(maps)) maps = {};
    MAP_NAMES.forEach(function (name) {
      var value = maps[name];
      if (!value || typeof value !== "object" || Array.isArray(value)) maps[name] = {};
    });
    return maps;
  }

  function lookup(map, line) {
    var found = Object.prototype.hasOwnProperty.call(map, String(line)) ? map[String(line)] : null;
    return Array.isArray(found) ? found.filter(function (n) { return typeof n === "number"; }) : [];
  }

  function union(lists) {
    var seen = {};
    var result = [];
    lists.forEach(function (list) {
      list.forEach(function (n) {
        if (!seen[n]) {
          seen[n] = true;
          result.push(n);
        }
      });
    });
    return result;
  }

  /* Rebuild a pane's <pre> as rows: <div class="tlsite-prov-line" data-line="N">. */
  function buildPane(section) {
    var pane = { section: section, body: null, rows: [null] };
    if (!section) return pane;
    pane.body = section.querySelector(".tlsite-prov-body");
    var source = pane.body && pane.body.querySelector("pre.tlsite-prov-src");
    if (!source) return pane;
    var text = source.textContent || "";
    var lines = text.split("\n");
    if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
    var list = document.createElement("div");
    list.className = "tlsite-prov-lines";
    var fragment = document.createDocumentFragment();
    for (var i = 0; i < lines.length; i++) {
      var row = document.createElement("div");
      row.className = "tlsite-prov-line";
      row.setAttribute("data-line", String(i + 1));
      var gutter = document.createElement("span");
      gutter.className = "tlsite-prov-ln";
      gutter.textContent = String(i + 1);
      var content = document.createElement("span");
      content.className = "tlsite-prov-text";
      content.textContent = lines[i];
      row.appendChild(gutter);
      row.appendChild(content);
      fragment.appendChild(row);
      pane.rows.push(row);
    }
    list.appendChild(fragment);
    source.parentNode.replaceChild(list, source);
    return pane;
  }

  function markMapped(pane, maps) {
    var keys = {};
    maps.forEach(function (map) {
      Object.keys(map).forEach(function (key) {
        if (lookup(map, key).length) keys[key] = true;
      });
    });
    Object.keys(keys).forEach(function (key) {
      var row = pane.rows[Number(key)];
      if (row) row.classList.add("has-match");
    });
  }

  /* Where a row is inside its pane's scrolled content (whatever the offsetParent is). */
  function rowTop(pane, row) {
    return row.getBoundingClientRect().top - pane.body.getBoundingClientRect().top +
      pane.body.scrollTop - pane.body.clientTop;
  }

  /* Scroll a pane so `line` sits in the middle (smoothly unless `instant`). */
  function centre(pane, line, instant) {
    var row = pane.rows[line];
    if (!row || !pane.body) return;
    var top = rowTop(pane, row) - (pane.body.clientHeight - row.offsetHeight) / 2;
    var options = { top: Math.max(0, top), behavior: instant ? "auto" : "smooth" };
    if (typeof pane.body.scrollTo === "function") pane.body.scrollTo(options);
    else pane.body.scrollTop = options.top;
  }

  function middle(lines) {
    var sorted = lines.slice().sort(function (a, b) { return a - b; });
    return sorted[Math.floor((sorted.length - 1) / 2)];
  }

  function bindViewer(root) {
    if (root.hasAttribute("data-prov-bound")) return;
    root.setAttribute("data-prov-bound", "");
    var maps = readMappings(root);
    var panes = {};
    Object.keys(PANES).forEach(function (key) {
      panes[key] = buildPane(root.querySelector("#" + PANES[key]));
    });
    var codeText = panes.code.rows
      .slice(1)
      .map(function (row) { return row.textContent; })
      .join("\n");
    var lang = root.getAttribute("data-code-lang");
    var cpp = lang ? lang === "cpp" : codeText.indexOf("AOTInductorModel::run_impl") >= 0;
    var codeToPost = cpp ? maps.cppCodeToPost : maps.pyCodeToPost;
    var postToCode = cpp ? maps.postToCppCode : maps.postToPyCode;

    markMapped(panes.pre, [maps.preToPost]);
    markMapped(panes.post, [maps.postToPre, postToCode]);
    markMapped(panes.code, [codeToPost]);

    var status = root.parentNode && root.parentNode.querySelector(".tlsite-prov-status");
    var highlighted = [];
    var pinned = null; // {pane, line} kept after a click

    function related(key, line) {
      var found = { pre: [], post: [], code: [] };
      found[key] = [line];
      if (key === "pre") {
        found.post = lookup(maps.preToPost, line);
        found.code = union(found.post.map(function (q) { return lookup(postToCode, q); }));
      } else if (key === "post") {
        found.pre = lookup(maps.postToPre, line);
        found.code = lookup(postToCode, line);
      } else {
        found.post = lookup(codeToPost, line);
        found.pre = union(found.post.map(function (q) { return lookup(maps.postToPre, q); }));
      }
      return found;
    }

    function clear() {
      highlighted.forEach(function (row) {
        row.classList.remove("tlsite-prov-hl", "tlsite-prov-active");
      });
      highlighted = [];
    }

    function describe(key, line, found) {
      var parts = [];
      Object.keys(PANES).forEach(function (other) {
        if (other === key) return;
        var lines = found[other];
        parts.push(NAMES[other] + " " + (lines.length ? lines.join(", ") : "none"));
      });
      return NAMES[key].charAt(0).toUpperCase() + NAMES[key].slice(1) + " line " + line +
        " \u2194 " + parts.join(" \u00b7 ");
    }

    function show(key, line, scrollSelf) {
      clear();
      var found = related(key, line);
      Object.keys(PANES).forEach(function (other) {
        var pane = panes[other];
        found[other].forEach(function (n) {
          var row = pane.rows[n];
          if (!row) return;
          row.classList.add(other === key ? "tlsite-prov-active" : "tlsite-prov-hl");
          highlighted.push(row);
        });
        if (other !== key && found[other].length) centre(pane, middle(found[other]));
      });
      if (scrollSelf) centre(panes[key], line);
      if (status) status.textContent = describe(key, line, found);
    }

    function restore() {
      if (pinned) show(pinned.key, pinned.line, false);
      else clear();
    }

    function lineOf(target, pane) {
      var row = target && target.closest ? target.closest(".tlsite-prov-line") : null;
      if (!row || !pane.body || !pane.body.contains(row)) return 0;
      return Number(row.getAttribute("data-line")) || 0;
    }

    Object.keys(PANES).forEach(function (key) {
      var pane = panes[key];
      if (!pane.body) return;
      var current = 0;
      pane.body.addEventListener("mouseover", function (event) {
        var line = lineOf(event.target, pane);
        if (line === current) return;
        current = line;
        if (line) show(key, line, false);
        else restore();
      });
      pane.body.addEventListener("mouseleave", function () {
        current = 0;
        restore();
      });
      pane.body.addEventListener("click", function (event) {
        var line = lineOf(event.target, pane);
        if (!line) return;
        if (pinned && pinned.key === key && pinned.line === line) {
          pinned = null;
          show(key, line, false);
          return;
        }
        pinned = { key: key, line: line };
        show(key, line, true);
      });
    });

    document.addEventListener("keydown", function (event) {
      if (event.key === "Escape" && pinned) {
        pinned = null;
        clear();
      }
    });

    // C++: start at the wrapper's entry point, as tlparse does
    if (cpp) {
      for (var i = 1; i < panes.code.rows.length; i++) {
        if (panes.code.rows[i].textContent.indexOf("AOTInductorModel::run_impl(") >= 0) {
          panes.code.body.scrollTop = rowTop(panes.code, panes.code.rows[i]);
          break;
        }
      }
    }

    root.querySelectorAll(".tlsite-prov-divider").forEach(function (divider) {
      bindDivider(root, divider);
    });
  }

  /* A divider resizes the panes on either side; sizes are kept as flex-grow ratios. */
  function bindDivider(root, divider) {
    var left = divider.previousElementSibling;
    var right = divider.nextElementSibling;
    if (!left || !right) return;
    var start = null;

    function freeze() {
      // measure every pane before changing any: each change re-lays out the others
      var panes = Array.prototype.slice.call(root.querySelectorAll(".tlsite-prov-pane"));
      var widths = panes.map(function (pane) { return pane.getBoundingClientRect().width; });
      panes.forEach(function (pane, i) {
        pane.style.flexGrow = String(widths[i]);
        pane.style.flexBasis = "0px";
      });
    }

    function move(dx) {
      var total = start.left + start.right;
      var min = Math.min(48, total / 2);
      var width = Math.max(min, Math.min(total - min, start.left + dx));
      left.style.flexGrow = String(width);
      right.style.flexGrow = String(total - width);
    }

    function measure() {
      return {
        x: 0,
        left: left.getBoundingClientRect().width,
        right: right.getBoundingClientRect().width,
      };
    }

    divider.addEventListener("pointerdown", function (event) {
      if (event.button !== 0) return;
      event.preventDefault();
      freeze();
      start = measure();
      start.x = event.clientX;
      divider.setPointerCapture(event.pointerId);
      root.classList.add("tlsite-prov-resizing");
    });
    divider.addEventListener("pointermove", function (event) {
      if (start) move(event.clientX - start.x);
    });
    function stop(event) {
      if (!start) return;
      start = null;
      root.classList.remove("tlsite-prov-resizing");
      if (divider.hasPointerCapture(event.pointerId)) divider.releasePointerCapture(event.pointerId);
    }
    divider.addEventListener("pointerup", stop);
    divider.addEventListener("pointercancel", stop);
    divider.addEventListener("keydown", function (event) {
      var step = event.key === "ArrowLeft" ? -KEY_STEP : event.key === "ArrowRight" ? KEY_STEP : 0;
      if (!step) return;
      event.preventDefault();
      freeze();
      start = measure();
      move(step);
      start = null;
    });
  }

  function bindAll() {
    document.querySelectorAll(".tlsite-prov").forEach(bindViewer);
  }

  function init() {
    bindAll();
    var documents = window.document$;
    if (documents && typeof documents.subscribe === "function") documents.subscribe(bindAll);
  }

  // This script sits in the page body, before Material's bundle defines document$.
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
